//! Waiting for work to finish: a one-shot [`Signal`] with one waiter, a write-once value
//! beside one (`Completion`, for a wait that returns a result), and a counting latch
//! ([`CountLatch`], a wait group) built on a signal. Design texts 001 (CoreLatch) and 003
//! (help-until-complete on a worker, block-on elsewhere).
//!
//! [`ThreadPool::wait_for`](crate::ThreadPool::wait_for) waits on a signal: on one of the
//! pool's workers it keeps running other tasks and sleeps inside the pool's sleep protocol when
//! there are none (so a waiting worker never blocks work that is queued); on any other thread it
//! parks on a parker from the pool's platform.
//!
//! The signal is the crate's one completion primitive: fork-join halves (stack jobs and C's
//! `FnJob`, each with a `Completion`), [`CountLatch`], the pool's shutdown, an async task's
//! join signal (`runtime`) and a blocking-pool handle (a `Completion`, `blocking::handle`) all
//! complete through it, so its loom models (`latch/loom.rs`) cover all of them.
//!
//! # Waiting
//! Every wait is one of two. On a worker of a pool it is the pool's one waiting loop
//! (`scheduler::run`, `run_until`), which runs other work meanwhile and sleeps in the pool's
//! sleep protocol. Anywhere else it is [`Signal::wait`]: the calling thread's parker
//! registered as the waiter, parked until the signal is set, or until an optional deadline
//! passes (then the waiter withdraws its parker's waker, or waits for SET if the setter took
//! it already).
//!
//! # The Signal's states
//! ```text
//!            register (slot written, then published)
//!   EMPTY ------------------------------------------> WAITING --set--> SETTING --(waiter woken)--> SET
//!     ^  \                                               |
//!     |   \------------------------set-------------------|---------------------------------->/
//!     +---------- take the slot back (the waiter) -------+
//! ```
//! The waiter is a [`Waker`]: an async waiter's own, or a parker's (`parker_waker`: its wake is
//! the parker's `unpark`, and it holds no reference).
//! * `register` writes the waker into the slot while the state is EMPTY and then moves EMPTY ->
//!   WAITING (Release), so a setter that sees WAITING also sees the waker. An async waiter that
//!   polls again first takes the slot back (WAITING -> EMPTY), replaces the waker unless the old
//!   one wakes the same task, and publishes WAITING again. If either compare-and-swap fails the
//!   signal is being set or set: the waiter is complete and does not wait (a waker it had just
//!   written is taken back out: the setter, which saw EMPTY, never reads the slot). A timed
//!   waiter whose deadline passed takes its waker back the same way (`withdraw`); if that
//!   fails, the setter has it, and the waiter waits for SET.
//! * So the slot belongs to the waiter while the state is EMPTY, to the setter from its swap
//!   that displaced WAITING, and to nobody else: exactly one side touches it at a time.
//! * `set` swaps in SETTING; if it displaced WAITING it takes the waker and wakes it; then it
//!   stores SET. That store is its **last access** to the signal or the waiter (also when the
//!   wake panics: a drop guard stores it).
//! * A waiter whose signal or parker lives in its own stack frame (a fork-join frame, a parker's
//!   waker) returns only after it has seen SET. It never sleeps once it sees SETTING (the
//!   wake-up may already have been consumed); it spins through that short window instead
//!   (`spin_until_set`, which yields the thread after a few spins with `std`). So the signal and
//!   the waiter's parker can live in the waiter's stack frame: no allocation, and no use after
//!   the waiter returned. An async waiter (its own waker, owned by the slot) whose signal lives
//!   in a reference-counted allocation (a task's join signal, a blocking job) may treat SETTING
//!   as complete: the setter's reference keeps the signal alive until its last access.

mod completion;
mod count;
mod signal;
#[cfg(all(test, loom))]
mod loom;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use completion::Completion;
pub use count::CountLatch;
pub(crate) use signal::parker_waker;
pub use signal::Signal;
