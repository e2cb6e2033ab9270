//! Loom models of the surplus workers (`surplus.rs`) on a whole `ThreadPool` of loom threads
//! (`crate::loom`), as `sleep/loom.rs`: a lost wake-up is a loom deadlock or a spin that never
//! ends (`spin_until_ran`), a double run a run count of 2.
//!
//! Bounded (`model_with_bound`): three threads (two prestarted workers and the main thread,
//! which polls by yielding) at the suite's two preemptions were still running after 25
//! minutes. `surplus_turning_racing_a_submit_strands_nothing` at one: 631,330 to 889,294
//! executions (93–155 s on the 2-core VM); `surplus_serving_again_racing_submits_strands_
//! nothing` at none (every interleaving without preemption, ~16,000 executions, 2 s): at one
//! it ran past 15 minutes.
//!
//! Run: `make test-loom`.

use core::ptr::NonNull;

use std::vec::Vec;

use loom::sync::atomic::{AtomicUsize, Ordering};

use crate::loom::{model_with_bound, LoomSpawner};
use crate::{container_of, Config, Task, ThreadPool};

#[repr(C)]
struct Job {
    task: Task,
    runs: AtomicUsize,
}

unsafe extern "C" fn run_job(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a `Job` the model keeps
    // alive until the pool is shut down.
    let job = unsafe { &*container_of!(task, Job, task) };
    job.runs.fetch_add(1, Ordering::Release);
}

fn jobs(n: usize) -> Vec<Job> {
    (0..n).map(|_| Job { task: Task::new(run_job), runs: AtomicUsize::new(0) }).collect()
}

fn submit(pool: &ThreadPool<LoomSpawner>, job: &Job) {
    // SAFETY: the job outlives the pool's use of it (kept until after shutdown); submitted once.
    unsafe { pool.submit(NonNull::from(&job.task)) }.unwrap();
}

/// Waits (yielding to loom) until `job` ran; a task that never runs fails after 300 yields.
fn spin_until_ran(pool: &ThreadPool<LoomSpawner>, job: &Job) {
    let mut spins = 0;
    while job.runs.load(Ordering::Acquire) == 0 {
        spins += 1;
        assert!(spins < 300, "a submitted task never ran (stranded?): {pool:?}, {:?}", pool.stats());
        loom::thread::yield_now();
    }
}

/// Two workers, both started (`min_threads`); the pool is lowered to one, then a task is
/// submitted. Worker 1 turns surplus while the submit notifies: whether the notification
/// picks it (idle, not yet aware) or worker 0, and whether worker 1 is still searching, idle
/// or parked as surplus, the task runs exactly once and worker 1 ends parked as surplus.
#[test]
fn surplus_turning_racing_a_submit_strands_nothing() {
    model_with_bound("surplus_turning_racing_a_submit_strands_nothing", 1, || {
        let config = Config { max_threads: 2, min_threads: 2, ..Config::default() };
        let pool = ThreadPool::with_spawner(config, LoomSpawner::new()).unwrap();
        let jobs = jobs(1);
        pool.set_max_threads(1).unwrap();
        submit(&pool, &jobs[0]);
        spin_until_ran(&pool, &jobs[0]);
        pool.shutdown().unwrap();
        assert_eq!(jobs[0].runs.load(Ordering::Acquire), 1);
        assert_eq!(pool.stats().threads, 0);
    });
}

/// Lowered to one, then raised to two with a task submitted between and one after: a worker
/// that was surplus serves again, nothing runs twice, nothing is stranded.
#[test]
fn surplus_serving_again_racing_submits_strands_nothing() {
    model_with_bound("surplus_serving_again_racing_submits_strands_nothing", 0, || {
        let config = Config { max_threads: 2, min_threads: 2, ..Config::default() };
        let pool = ThreadPool::with_spawner(config, LoomSpawner::new()).unwrap();
        let jobs = jobs(2);
        pool.set_max_threads(1).unwrap();
        submit(&pool, &jobs[0]);
        pool.set_max_threads(2).unwrap();
        submit(&pool, &jobs[1]);
        spin_until_ran(&pool, &jobs[0]);
        spin_until_ran(&pool, &jobs[1]);
        pool.shutdown().unwrap();
        assert_eq!((jobs[0].runs.load(Ordering::Acquire), jobs[1].runs.load(Ordering::Acquire)), (1, 1));
    });
}
