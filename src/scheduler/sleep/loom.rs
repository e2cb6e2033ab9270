//! Loom models of the sleep/wake protocol (`sleep.rs`, argued in `src/scheduler/README.md`)
//! on a whole `ThreadPool`: real workers, the real `Sync` word, injector and rings, on loom
//! threads ([`LoomSpawner`]: `loom::thread::spawn`, a parker on a loom mutex and condvar, a
//! loom thread-local for the current worker).
//!
//! A lost wake-up shows up as a loom deadlock (every thread parked) or, where the main thread
//! spins for a task's flag, as a spin that never ends (`spin_until_ran`); a double run as a run
//! count of 2; an unjoined thread as a spawner count mismatch.
//!
//! Explored executions at `LOOM_MAX_PREEMPTIONS=2` (2-core VM, release build):
//! notify_racing_wait 3,965 (~1 s); waking_handoff 447,307 (~40 s alone); shutdown_racing_
//! notify_and_spawn 348; shutdown_racing_handoff_spawn 107,094 (~22 s alone);
//! submit_after_shutdown 348; external_submit_racing_shutdown 20,702 (~2 s).
//! The bugs these models found are in VERIFY.md's table ("Bugs the verification found").
//!
//! Run: `make test-loom`.

use core::ptr::NonNull;

use std::vec::Vec;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::loom::{model, LoomSpawner};
use crate::{container_of, Config, Error, Task, ThreadPool};

/// A task that counts its runs (also the surplus models' task: `surplus/loom.rs`).
#[repr(C)]
pub(in crate::scheduler) struct Job {
    task: Task,
    runs: AtomicUsize,
}

unsafe extern "C" fn run_job(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a `Job` kept alive by the
    // model until the pool is shut down.
    let job = unsafe { &*container_of!(task, Job, task) };
    // Release: the model's Acquire load of `runs` sees the run.
    job.runs.fetch_add(1, Ordering::Release);
}

/// `n` tasks, none run.
pub(in crate::scheduler) fn job_vec(n: usize) -> Vec<Job> {
    (0..n).map(|_| Job { task: Task::new(run_job), runs: AtomicUsize::new(0) }).collect()
}

fn jobs(n: usize) -> Arc<Vec<Job>> {
    Arc::new(job_vec(n))
}

pub(in crate::scheduler) fn runs(job: &Job) -> usize {
    job.runs.load(Ordering::Acquire)
}

pub(in crate::scheduler) fn submit(pool: &ThreadPool<LoomSpawner>, job: &Job) -> Result<(), Error> {
    // SAFETY: the job outlives the pool's use of it (the model keeps `jobs` alive until after
    // shutdown), and it is submitted once.
    unsafe { pool.submit(NonNull::from(&job.task)) }
}

/// Waits (yielding to loom) until `job` has run. A task that never runs (a lost wake-up) fails
/// here after 300 yields, with the pool's `Sync` word in the message; correct executions need a
/// handful (loom's own branch limit would stop an endless spin too, less readably).
pub(in crate::scheduler) fn spin_until_ran(pool: &ThreadPool<LoomSpawner>, job: &Job) {
    let mut spins = 0;
    while runs(job) == 0 {
        spins += 1;
        if spins == 300 {
            panic!("a submitted task never ran (lost wake-up?): {pool:?}, {:?}", pool.stats());
        }
        thread::yield_now();
    }
}

fn pool(max_threads: usize) -> ThreadPool<LoomSpawner> {
    ThreadPool::with_spawner(Config { max_threads, ..Config::default() }, LoomSpawner::new()).unwrap()
}

/// After a complete shutdown: no thread left, each started thread joined once.
fn assert_all_joined(pool: &ThreadPool<LoomSpawner>) {
    let sp = pool.spawner();
    assert_eq!(sp.unjoined(), 0, "a thread handle was left unjoined");
    assert_eq!(sp.spawned(), sp.joined(), "threads started vs joined");
    assert_eq!(pool.stats().threads, 0, "`spawned` in the Sync word is not back to 0");
}

/// One worker runs task 0, then task 1 is submitted as it goes to sleep (the two models
/// below differ only in how the worker sleeps).
fn submit_racing_sleep(pool: ThreadPool<LoomSpawner>) {
    let jobs = jobs(2);
    submit(&pool, &jobs[0]).unwrap();
    spin_until_ran(&pool, &jobs[0]);
    submit(&pool, &jobs[1]).unwrap();
    spin_until_ran(&pool, &jobs[1]);
    pool.shutdown().unwrap();
    assert_eq!((runs(&jobs[0]), runs(&jobs[1])), (1, 1));
    assert_all_joined(&pool);
    assert_eq!(pool.spawner().spawned(), 1, "max_threads 1");
}

#[test]
fn sync_notify_racing_wait() {
    // Interleaving: the only worker finished task 0 and is on its way to sleep (in `wait`:
    // `idle += 1`, idle-map bit, SeqCst fence, re-read `Sync`, park) while the main thread
    // pushes task 1 and notifies (`notified`, `Signaled`, SeqCst fence, scan the idle map,
    // unpark). Whatever the order, task 1 must run: the Dekker pair means the worker sees
    // `notified`, or the notifier sees its bit (README "Why no wake-up is lost", step 3).
    model("sync_notify_racing_wait", || submit_racing_sleep(pool(1)));
}

#[test]
fn sync_spinning_worker_takes_the_wake() {
    // Interleaving: as `sync_notify_racing_wait`, but the worker spins (two rounds) before it
    // parks (`Config::idle_spins`). It is counted idle without an idle-map bit, so the notify
    // for task 1 sees `spinning > 0` and unparks nobody, trusting the spinner: either it sees
    // `notified` with the injector non-empty during its spin, or its spin ends first and its
    // `park` sees `notified` (the spinner's decrement and the notifier's `Sync` update are the
    // Dekker pair's writes, the SeqCst fences in `announce_park` and `take_sleeper` its fences).
    model("sync_spinning_worker_takes_the_wake", || {
        let config = Config { max_threads: 1, idle_spins: 2, ..Config::default() };
        submit_racing_sleep(ThreadPool::with_spawner(config, LoomSpawner::new()).unwrap());
    });
}

#[test]
fn sync_waking_handoff() {
    // Interleaving: two submits in a row on a pool of 2. The first spawns worker 1
    // (`Signaled`); the second finds `Signaled` and only sets `notified` (throttled: no
    // second spawn). Worker 1 consumes the signal as the waking thread, takes task 0 from the
    // injector (moving task 1 into its ring), and hands the wake right on, spawning worker 2,
    // which may steal task 1 or find nothing and sleep. Both tasks run, each once, with at
    // most 2 threads, whatever the order.
    model("sync_waking_handoff", || {
        let jobs = jobs(2);
        let pool = pool(2);
        submit(&pool, &jobs[0]).unwrap();
        submit(&pool, &jobs[1]).unwrap();
        spin_until_ran(&pool, &jobs[0]);
        spin_until_ran(&pool, &jobs[1]);
        pool.shutdown().unwrap();
        assert_eq!((runs(&jobs[0]), runs(&jobs[1])), (1, 1));
        assert_all_joined(&pool);
        assert!(pool.spawner().spawned() <= 2);
    });
}

#[test]
fn sync_shutdown_racing_notify_and_spawn() {
    // Interleaving: the submit spawns the first worker and shutdown starts at once, so the new
    // thread registers (links itself into the worker list) while shutdown moves `Sync` to
    // `Shutdown` and unparks the workers it can see. The worker is either unparked or reads
    // `Shutdown` in its first `wait`; it drains task 0 and leaves; the last one out wakes the
    // joiner. When shutdown returns the task ran exactly once and every thread was joined.
    model("sync_shutdown_racing_notify_and_spawn", || {
        let jobs = jobs(1);
        let pool = pool(1);
        submit(&pool, &jobs[0]).unwrap();
        pool.shutdown().unwrap();
        assert_eq!(runs(&jobs[0]), 1, "the accepted task ran exactly once before shutdown returned");
        assert_all_joined(&pool);
    });
}

#[test]
fn sync_shutdown_racing_handoff_spawn() {
    // Interleaving: as above on a pool of 2 with two tasks, so worker 1, as the waking thread,
    // may hand the wake on by spawning worker 2 (its `spawned + 1` lands before the shutdown
    // CAS, its actual spawn after it) while shutdown walks the worker list and waits. Worker 2
    // must see `Shutdown` and leave, and `join_all` must still join it (its handle is recorded
    // before it can unregister). Both tasks ran once when shutdown returns.
    model("sync_shutdown_racing_handoff_spawn", || {
        let jobs = jobs(2);
        let pool = pool(2);
        submit(&pool, &jobs[0]).unwrap();
        submit(&pool, &jobs[1]).unwrap();
        pool.shutdown().unwrap();
        assert_eq!((runs(&jobs[0]), runs(&jobs[1])), (1, 1));
        assert_all_joined(&pool);
    });
}

#[test]
fn sync_submit_after_shutdown_is_refused() {
    // Interleaving: none to speak of (sequential), but on the real protocol: after shutdown,
    // an external submit is refused with `Error::Shutdown` (the injector's CLOSED bit, or
    // `Sync`'s terminal state for a pool that never started a thread), the task is still the
    // caller's and never runs, and a second shutdown reports `Error::Shutdown`.
    model("sync_submit_after_shutdown_is_refused", || {
        let jobs = jobs(3);
        // A pool that ran something.
        let p = pool(1);
        submit(&p, &jobs[0]).unwrap();
        p.shutdown().unwrap();
        assert_eq!(submit(&p, &jobs[1]), Err(Error::Shutdown));
        assert_eq!(p.shutdown(), Err(Error::Shutdown));
        assert_all_joined(&p);
        // A pool that never started a thread.
        let q = pool(1);
        q.shutdown().unwrap();
        assert_eq!(submit(&q, &jobs[2]), Err(Error::Shutdown));
        assert_eq!(q.spawner().spawned(), 0);
        drop((p, q));
        assert_eq!((runs(&jobs[0]), runs(&jobs[1]), runs(&jobs[2])), (1, 0, 0));
    });
}

#[test]
fn sync_external_submit_racing_shutdown() {
    // Interleaving: another thread submits while the main thread shuts down. The submit is
    // either refused (`Error::Shutdown`; the task never runs) or accepted, and then it must run
    // exactly once before shutdown returns — including when the submitting thread is preempted
    // between the injector's CAS on `tail` (accepted) and its link store, while the workers
    // drain and exit and shutdown does its final drain of the injector.
    model("sync_external_submit_racing_shutdown", || {
        let jobs = jobs(2);
        let pool = Arc::new(pool(1));
        submit(&pool, &jobs[0]).unwrap();
        let submitter = {
            let (pool, jobs) = (pool.clone(), jobs.clone());
            thread::spawn(move || submit(&pool, &jobs[1]))
        };
        pool.shutdown().unwrap();
        let ran_at_shutdown = runs(&jobs[1]);
        let accepted = submitter.join().unwrap();
        assert_eq!(runs(&jobs[0]), 1);
        match accepted {
            Ok(()) => assert_eq!(ran_at_shutdown, 1, "an accepted task had not run when shutdown returned"),
            Err(e) => {
                assert_eq!(e, Error::Shutdown);
                assert_eq!(runs(&jobs[1]), 0, "a refused task ran");
            }
        }
        assert_all_joined(&pool);
    });
}
