//! Shutdown: submits racing it, and its drain (a worker leaves only after a search that began
//! once shutdown released its waits).

use core::ptr::NonNull;
use core::time::Duration;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{pool, shutdown, Shared};
use crate::shuttle::{check_pct, check_random, Gate, ShuttleSpawner, Tally};
use crate::{Error, Signal, Task, ThreadPool};

/// A thread outside the pool submits two tasks while the main thread shuts the pool down: each
/// accepted task runs exactly once before `shutdown` returns, each refused one never runs. A
/// submit accepted just before the injector closed may still be linking its task (between its
/// CAS on the tail and its link) when the workers drain and leave: `shutdown` waits until the
/// injector is settled and runs it (`Injector::is_settled_empty`; VERIFY.md's table).
fn submits_racing_shutdown(workers: usize) {
    let pool = Arc::new(pool(workers, 0, ShuttleSpawner::new()));
    let tally = Tally::new(2);
    let (p, t) = (pool.clone(), tally.clone());
    let producer = shuttle::thread::spawn(move || {
        // SAFETY: the tally outlives the pool's use of its tasks; each is submitted once.
        [0, 1].map(|i| unsafe { p.submit(t.task(i)) })
    });
    pool.shutdown().unwrap();
    let accepted = producer.join().unwrap();
    for (i, result) in accepted.iter().enumerate() {
        match result {
            Ok(()) => assert_eq!(tally.runs(i), 1, "accepted task {i} ({accepted:?})"),
            Err(Error::Shutdown) => assert_eq!(tally.runs(i), 0, "refused task {i}"),
            Err(e) => panic!("{e:?}"),
        }
    }
    super::assert_joined(&pool);
}

#[test]
fn shuttle_submits_racing_shutdown() {
    check_pct("submits_racing_shutdown_1", 60_000, 4, || submits_racing_shutdown(1));
    check_pct("submits_racing_shutdown_2", 60_000, 4, || submits_racing_shutdown(2));
    check_random("submits_racing_shutdown_2", 20_000, || submits_racing_shutdown(2));
}

/// A delayed task that submits a child to its own pool, then waits (inside itself) for a
/// signal that a thread outside the pool sets once the task has started.
#[repr(C)]
struct Parent {
    task: Task,
    pool: Shared<ThreadPool<ShuttleSpawner>>,
    started: Arc<Gate>,
    signal: Arc<Signal>,
    child: Arc<Tally>,
    refused: AtomicUsize,
    finished: AtomicUsize,
}

unsafe extern "C" fn run_parent(task: *mut Task) {
    // SAFETY: every task with this callback is the first field of a `Parent` (`repr(C)`) that
    // the scenario keeps, with its pool, until after shutdown.
    let parent = unsafe { &*task.cast::<Parent>() };
    // SAFETY: as above.
    let pool = unsafe { parent.pool.get() };
    // SAFETY: the child's tally outlives the pool's use of it; submitted once.
    if unsafe { pool.submit(parent.child.task(0)) }.is_err() {
        parent.refused.fetch_add(1, Ordering::SeqCst);
    }
    parent.started.open();
    pool.wait_for(&parent.signal);
    parent.finished.fetch_add(1, Ordering::SeqCst);
}

/// Shutdown's drain: a delayed task, far in the future, is fired by `shutdown` (the wheel fires
/// at shutdown), which then sets `waits_released` and unparks every worker. The only worker
/// must run it as a pool task (its own submit accepted: the bug of VERIFY.md's table, the
/// worker leaving before the fire). The task then waits inside itself for a signal that a
/// thread outside sets once it started, so the wait may take the unpark meant for the drain;
/// a drained worker whose last search began before the flag was set must then read the flag
/// again rather than park for it (the hang of that fix's first version).
fn drain_with_a_wait_inside_a_task() {
    let pool = Arc::new(pool(1, 0, ShuttleSpawner::new().with_clock()));
    let parent = std::boxed::Box::new(Parent {
        task: Task::new(run_parent),
        pool: Shared::new(&*pool),
        started: Arc::new(Gate::default()),
        signal: Arc::new(Signal::new()),
        child: Tally::new(1),
        refused: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
    });
    // SAFETY: the parent outlives the pool's use of it (kept until after shutdown); once.
    unsafe { pool.submit_after(NonNull::from(&parent.task), Duration::from_secs(3600)) }.unwrap();
    let (started, signal) = (parent.started.clone(), parent.signal.clone());
    let setter = shuttle::thread::spawn(move || {
        started.wait();
        // SAFETY: the only `set`; the parent holds a clone of the signal.
        unsafe { signal.set() };
    });
    shutdown(&pool);
    setter.join().unwrap();
    assert_eq!(parent.finished.load(Ordering::SeqCst), 1, "the delayed task finished");
    assert_eq!(parent.refused.load(Ordering::SeqCst), 0, "the delayed task's own submit was refused");
    parent.child.assert_all_once();
}

#[test]
fn shuttle_drain_with_a_wait_inside_a_task() {
    check_pct("drain_with_a_wait_inside", 60_000, 4, drain_with_a_wait_inside_a_task);
    check_random("drain_with_a_wait_inside", 20_000, drain_with_a_wait_inside_a_task);
}
