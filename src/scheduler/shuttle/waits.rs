//! Waits on a worker: a wait inside a task that consumes a notification, and a join whose
//! second half is promoted while another worker goes idle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{pool, shutdown};
use crate::shuttle::{check_pct, check_random, Gate, ShuttleSpawner};
use crate::Signal;

/// A task on a pool of 2 waits for a signal (`wait_for`: the worker runs the pool's loop inside
/// it); as the main thread sets the signal it submits a second task, which then can only run
/// on the other worker, because the first task, once its wait is over, blocks its worker until
/// the second task ran. If the waiting worker consumed the second task's notification (its spin
/// or park saw it) and leaves its wait without the search it owes, it must hand the
/// notification on (`Seeking::leaving`, README step 3a); otherwise the other worker sleeps and
/// both tasks are stuck. The bug `tests/latch.rs` `helper_leaving_its_wait_hands_on_a_pending_wake`
/// found under ThreadSanitizer (about 4 preemptions: beyond loom's bound).
fn wait_inside_a_task(idle_spins: u32) {
    let pool = Arc::new(pool(2, idle_spins, ShuttleSpawner::new()));
    let signal = Arc::new(Signal::new());
    let (waiting, ran, done) = (Arc::new(Gate::default()), Arc::new(Gate::default()), Arc::new(Gate::default()));
    let (p, s, w, r, d) = (pool.clone(), signal.clone(), waiting.clone(), ran.clone(), done.clone());
    pool.spawn(move || {
        w.open();
        p.wait_for(&s);
        // Blocks this worker (not a pool wait) until the other task ran elsewhere.
        r.wait();
        d.open();
    })
    .unwrap();
    waiting.wait();
    let r = ran.clone();
    pool.spawn(move || r.open()).unwrap();
    // SAFETY: the only `set`; the waiting task holds a clone of the signal.
    unsafe { signal.set() };
    done.wait();
    shutdown(&pool);
}

#[test]
fn shuttle_wait_inside_a_task_hands_on_a_consumed_notification() {
    check_pct("wait_inside_a_task_spin_0", 60_000, 4, || wait_inside_a_task(0));
    check_pct("wait_inside_a_task_spin_1", 40_000, 5, || wait_inside_a_task(1));
    check_random("wait_inside_a_task_spin_0", 40_000, || wait_inside_a_task(0));
}

/// A join from outside a pool of 2 (`install`): the worker that runs it records its second
/// half as a latent frame and promotes it to its join deque when the other worker, going idle,
/// has made it hungry (`frame.rs`, "The record flag"), with `notify_join`'s cheap wake (README
/// row X1: a worker going idle at that instant may miss the job, which costs parallelism,
/// never progress). Nested twice, so a promotion can happen at either level, racing the idle
/// worker's ask and its sleep. Every half runs exactly once and the join returns.
fn join_promotion_racing_an_idle_worker() {
    let pool = pool(2, 0, ShuttleSpawner::new());
    let runs = Arc::new(AtomicUsize::new(0));
    // Starts the second worker: a task that waits until the first one runs the join below.
    let started = Arc::new(Gate::default());
    let s = started.clone();
    pool.spawn(move || s.open()).unwrap();
    started.wait();
    let r = runs.clone();
    let total = pool
        .install(move |cx| {
            let leaf = |_: &crate::WorkerContext<ShuttleSpawner>| r.fetch_add(1, Ordering::SeqCst);
            let ((a, b), (c, d)) = cx.join(|cx| cx.join(leaf, leaf), |cx| cx.join(leaf, leaf));
            a + b + c + d
        })
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 4, "every half ran once");
    assert_eq!(total, 6, "each half saw a distinct count");
    shutdown(&pool);
}

#[test]
fn shuttle_join_promotion_racing_an_idle_worker() {
    check_pct("join_promotion", 60_000, 4, join_promotion_racing_an_idle_worker);
    check_random("join_promotion", 20_000, join_promotion_racing_an_idle_worker);
}
