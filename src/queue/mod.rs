//! The three queues of the core, one file each (design text 002; text 001 for the deque):
//!
//! * [`ring`]: a worker's bounded single-producer multi-consumer ring. The owner pushes and
//!   pops without contention; thieves steal half of it in one compare-and-swap.
//! * [`deque`]: a worker's join deque (Chase-Lev) of fork-join jobs: the owner pushes and
//!   takes back its newest, thieves take the oldest, one at a time.
//! * [`injector`]: the pool's unbounded intrusive multi-producer queue, with a consumer end
//!   guarded by a try-lock that never blocks. External submissions and ring overflow land here.

pub(crate) mod deque;
pub(crate) mod injector;
pub(crate) mod ring;
