//! Loom models of the surplus workers (`surplus.rs`) on a whole `ThreadPool` of loom threads
//! (`crate::loom`), with `sleep/loom.rs`'s task and waits: a lost wake-up is a loom deadlock
//! or a spin that never ends (`spin_until_ran`), a double run a run count of 2.
//!
//! Bounded (`model_with_bound`): three threads (two prestarted workers and the main thread,
//! which polls by yielding) at the suite's two preemptions were still running after 25
//! minutes. `surplus_turning_racing_a_submit_strands_nothing` at one: 350,186
//! executions (68 s on the 2-core VM); `surplus_serving_again_racing_submits_strands_
//! nothing` at none (every interleaving without preemption, ~16,000 executions, 2 s): at one
//! it ran past 15 minutes.
//!
//! Run: `make test-loom`.

use crate::loom::{model_with_bound, LoomSpawner};
use crate::scheduler::sleep::loom::{job_vec, runs, spin_until_ran, submit};
use crate::{Config, ThreadPool};

/// Two workers, both started (`min_threads`); the pool is lowered to one, then a task is
/// submitted. Worker 1 turns surplus while the submit notifies: whether the notification
/// picks it (idle, not yet aware) or worker 0, and whether worker 1 is still searching, idle
/// or parked as surplus, the task runs exactly once and worker 1 ends parked as surplus.
#[test]
fn surplus_turning_racing_a_submit_strands_nothing() {
    model_with_bound("surplus_turning_racing_a_submit_strands_nothing", 1, || {
        let config = Config { max_threads: 2, min_threads: 2, ..Config::default() };
        let pool = ThreadPool::with_spawner(config, LoomSpawner::new()).unwrap();
        let jobs = job_vec(1);
        pool.set_max_threads(1).unwrap();
        submit(&pool, &jobs[0]).unwrap();
        spin_until_ran(&pool, &jobs[0]);
        pool.shutdown().unwrap();
        assert_eq!(runs(&jobs[0]), 1);
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
        let jobs = job_vec(2);
        pool.set_max_threads(1).unwrap();
        submit(&pool, &jobs[0]).unwrap();
        pool.set_max_threads(2).unwrap();
        submit(&pool, &jobs[1]).unwrap();
        spin_until_ran(&pool, &jobs[0]);
        spin_until_ran(&pool, &jobs[1]);
        pool.shutdown().unwrap();
        assert_eq!((runs(&jobs[0]), runs(&jobs[1])), (1, 1));
    });
}
