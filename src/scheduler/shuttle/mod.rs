//! Shuttle scenarios of whole pools (`make test-shuttle`; the platform is `crate::shuttle`):
//! the places where wake-ups were lost before (VERIFY.md, "Bugs the verification found"), each
//! run under PCT (depth 4 or more: three or more preemptions at random steps) and some under
//! the uniformly random scheduler. Every scenario waits for its tasks by blocking, before
//! shutdown (which would wake every worker and hide a lost wake-up), so a task that nobody
//! will run is a shuttle deadlock; it then checks that each task ran exactly once and that
//! every thread was joined.
//!
//! * `sleep`: a submit racing the last worker going idle (spin on and off); producers outside
//!   the pool with one and two workers (the `futex_parker_pool` shape); bursts into two idle
//!   workers (the try-lock hand-off, and the lost wake-up its own look caused).
//! * `waits`: a wait inside a task that consumes a notification; a join whose promotion races
//!   an idle worker.
//! * `timers`: the timer role handed on when its holder leaves idle; an earlier deadline
//!   registered on a worker reaching the role's holder, parked on a later one; a worker parked
//!   in the I/O driver while work arrives and its own dispatch wakes a task; shutdown ending a
//!   task's I/O wait.
//! * `blockers`: blocking tasks submitted into idle workers, every one of which must start
//!   (the search a worker owed for the others, handed on before it runs the task it found).
//! * `surplus`: the live thread count lowered and raised while a producer submits.
//! * `shutdown`: submits racing shutdown (a push half-linked when the workers leave); a
//!   delayed task fired by shutdown's drain while a wait inside a task takes the drain's unpark.
//!
//! `scripts/plants/shuttle/` re-creates each bug in today's code; `make verify-plants` checks
//! that a scenario here catches it.

mod blockers;
mod shutdown;
mod sleep;
mod surplus;
mod timers;
mod waits;

use core::ptr::NonNull;

use std::sync::Arc;

use crate::shuttle::{ShuttleSpawner, Tally};
use crate::{Config, ThreadPool};

/// A pool of `max_threads` with `idle_spins` rounds of spinning on `spawner`.
fn pool(max_threads: usize, idle_spins: u32, spawner: ShuttleSpawner) -> ThreadPool<ShuttleSpawner> {
    ThreadPool::with_spawner(Config { max_threads, idle_spins, ..Config::default() }, spawner).unwrap()
}

/// Submits task `i` of `tally` from outside the pool (or from a task on it).
fn submit(pool: &ThreadPool<ShuttleSpawner>, tally: &Tally, i: usize) {
    // SAFETY: the tally outlives the pool's use of its tasks (each scenario keeps it until
    // after shutdown), and each task is submitted once.
    unsafe { pool.submit(tally.task(i)) }.unwrap();
}

/// Two workers started and idle: two tasks in a row, so the first worker, woken for them,
/// starts the second as it hands the waking right on.
fn start_two_workers(pool: &crate::ThreadPool<ShuttleSpawner>) -> Arc<Tally> {
    let tally = Tally::new(2);
    submit(pool, &tally, 0);
    submit(pool, &tally, 1);
    tally.wait_for(2);
    tally
}

/// Shuts `pool` down and checks that every thread it started was joined.
fn shutdown(pool: &ThreadPool<ShuttleSpawner>) {
    pool.shutdown().unwrap();
    assert_joined(pool);
}

/// After a complete shutdown: every started thread joined, none counted in the word.
fn assert_joined(pool: &ThreadPool<ShuttleSpawner>) {
    let sp = pool.spawner();
    assert_eq!(sp.spawned(), sp.joined(), "threads started vs joined");
    assert_eq!(pool.stats().threads, 0, "`spawned` in the Sync word is not back to 0");
}

/// A raw pointer that a task may carry to another thread (the scenario keeps its target alive
/// until the task has run).
#[derive(Clone, Copy)]
struct Shared<T>(NonNull<T>);

// SAFETY: only built over `Sync` values the scenario outlives (see the type's docs).
unsafe impl<T: Sync> Send for Shared<T> {}

impl<T> Shared<T> {
    fn new(value: &T) -> Self {
        Self(NonNull::from(value))
    }

    /// # Safety
    /// The value is still alive (the scenario's promise).
    unsafe fn get(&self) -> &T {
        // SAFETY: the caller's promise.
        unsafe { self.0.as_ref() }
    }
}
