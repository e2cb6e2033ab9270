//! Stress tests on the intrusive API: every task is counted exactly once (`common::ExactOnce`),
//! every test runs under a watchdog, sizes scale with `POOL_STRESS_SCALE` (tiny under Miri).
//!
//! * 1M tasks from one external thread; 8 producers x 125k;
//! * a binary tree whose tasks submit their children from inside the workers (one by one, as a
//!   batch, and through the LIFO slot), also with shutdown racing the tree;
//! * batches of 1, 7, 256 and 1000 tasks from several producers;
//! * producers racing `shutdown`: every `Ok` ran exactly once, every `Err(Shutdown)` never ran,
//!   on the futex and on the condvar parker;
//! * pools of 1, 2, 4 and 16 threads (more than the cores);
//! * create / submit / shutdown 200 times with no OS thread left behind.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    config, external_producers, scaled, scaled_min, shutdown_race, submit_range, tree, tree_depth, watchdog, watchdog_secs,
    ExactOnce, Jobs, Progress, TreeMode,
};
use pool::{Batch, CondvarParker, Config, FutexParker, Spawner, ThreadPool, ThreadSpawner};


#[test]
fn one_external_thread_1m() {
    let _g = common::shared();
    let n = scaled(1_000_000);
    watchdog("one_external_thread_1m", watchdog_secs(30), move |p| {
        let pool = ThreadPool::new(Config::default()).unwrap();
        external_producers(p, pool, 1, n, "1 producer");
    });
}

#[test]
fn eight_producers_125k() {
    let _g = common::shared();
    let n = scaled(125_000);
    watchdog("eight_producers_125k", watchdog_secs(30), move |p| {
        let pool = ThreadPool::new(Config::default()).unwrap();
        external_producers(p, pool, 8, n, "8 producers");
    });
}

// ---------------------------------------------------------------------------------------------
// Tasks that submit tasks: a binary tree, node i has children 2i+1 and 2i+2.

#[test]
fn tree_submits_children_from_workers() {
    let _g = common::shared();
    let depth = tree_depth(17);
    watchdog("tree_submits_children_from_workers", watchdog_secs(30), move |p| {
        for mode in [TreeMode::Single, TreeMode::Batch, TreeMode::Lifo] {
            tree(p, ThreadPool::new(Config::default()).unwrap(), depth, mode, false);
        }
    });
}

#[test]
fn tree_with_immediate_shutdown_runs_every_node() {
    let _g = common::shared();
    let depth = tree_depth(15);
    watchdog("tree_with_immediate_shutdown_runs_every_node", watchdog_secs(30), move |p| {
        for round in 0..scaled_min(20, 2) {
            let mode = [TreeMode::Single, TreeMode::Batch, TreeMode::Lifo][round % 3];
            tree(p, ThreadPool::new(config(1 + round % 4)).unwrap(), depth, mode, true);
            tree(p, ThreadPool::with_spawner(config(1 + round % 4), ThreadSpawner::<CondvarParker>::new()).unwrap(), depth, mode, true);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Batches

#[test]
fn batches_of_1_7_256_1000_from_several_producers() {
    let _g = common::shared();
    const PRODUCERS: usize = 4;
    let per_producer = scaled_min(64_000, if cfg!(miri) { 8 } else { 1000 });
    let sizes: &[usize] = if cfg!(miri) { &[1, 7, 32] } else { &[1, 7, 256, 1000] };
    watchdog("batches", watchdog_secs(30), move |p| {
        for &size in sizes {
            // Round up to whole batches.
            let per = per_producer.div_ceil(size) * size;
            let total = PRODUCERS * per;
            let counter = ExactOnce::new("batches", total);
            p.track(&counter);
            p.stage(format!("batches of {size}"));
            let jobs = Arc::new(Jobs::all(&counter));
            let pool = Arc::new(ThreadPool::new(Config::default()).unwrap());
            let handles: Vec<_> = (0..PRODUCERS)
                .map(|t| {
                    let (pool, jobs) = (Arc::clone(&pool), Arc::clone(&jobs));
                    std::thread::spawn(move || {
                        let mut i = t * per;
                        while i < (t + 1) * per {
                            let mut batch = Batch::new();
                            for j in i..i + size {
                                // SAFETY: each job is in one batch once; `jobs` outlives the pool.
                                unsafe { batch.push(jobs.task(j)) };
                            }
                            assert_eq!(batch.len(), size);
                            // SAFETY: as above.
                            unsafe { pool.submit_batch(batch) }.unwrap();
                            i += size;
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("producer panicked");
            }
            counter.wait_total(total);
            pool.shutdown().unwrap();
            counter.assert_all_once();
        }
    });
}

/// An empty batch is accepted and does nothing.
#[test]
fn empty_batch_is_ok() {
    let _g = common::shared();
    watchdog("empty_batch_is_ok", watchdog_secs(30), |_| {
        let pool = ThreadPool::new(config(2)).unwrap();
        // SAFETY: no task in it.
        unsafe { pool.submit_batch(Batch::new()) }.unwrap();
        pool.shutdown().unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { pool.submit_batch(Batch::new()) }, Ok(()), "an empty batch after shutdown");
    });
}

// ---------------------------------------------------------------------------------------------
// Submits racing shutdown

#[test]
fn submit_racing_shutdown_futex_parker() {
    let _g = common::shared();
    let rounds = scaled_min(300, 4);
    watchdog("submit_racing_shutdown_futex_parker", watchdog_secs(30), move |p| {
        shutdown_race(p, &ThreadSpawner::<FutexParker>::new, rounds, 3, scaled_min(2000, 50), "futex");
    });
}

#[test]
fn submit_racing_shutdown_condvar_parker() {
    let _g = common::shared();
    let rounds = scaled_min(300, 4);
    watchdog("submit_racing_shutdown_condvar_parker", watchdog_secs(30), move |p| {
        shutdown_race(p, &ThreadSpawner::<CondvarParker>::new, rounds, 3, scaled_min(2000, 50), "condvar");
    });
}

// ---------------------------------------------------------------------------------------------
// Both parkers under the external and internal load

fn mixed_load<S: Spawner>(p: &Progress, make: &dyn Fn() -> S, max_threads: usize, per_producer: usize, depth: u32) {
    external_producers(p, ThreadPool::with_spawner(config(max_threads), make()).unwrap(), 2, per_producer, "2 producers");
    let pool = ThreadPool::with_spawner(config(max_threads), make()).unwrap();
    tree(p, pool, depth, TreeMode::Single, false);
}

#[test]
fn condvar_parker_pool() {
    let _g = common::shared();
    let (per, depth) = (scaled(100_000), tree_depth(15));
    watchdog("condvar_parker_pool", watchdog_secs(30), move |p| {
        for threads in [1, 2, 4] {
            mixed_load(p, &ThreadSpawner::<CondvarParker>::new, threads, per, depth);
        }
    });
}

#[test]
fn futex_parker_pool() {
    let _g = common::shared();
    let (per, depth) = (scaled(100_000), tree_depth(15));
    watchdog("futex_parker_pool", watchdog_secs(30), move |p| {
        for threads in [1, 2, 4] {
            mixed_load(p, &ThreadSpawner::<FutexParker>::new, threads, per, depth);
        }
    });
}

#[test]
fn max_threads_1_2_4_16() {
    let _g = common::shared();
    let (per, depth) = (scaled(50_000), tree_depth(14));
    watchdog("max_threads_1_2_4_16", watchdog_secs(30), move |p| {
        for threads in [1, 2, 4, 16] {
            p.stage(format!("max_threads {threads}"));
            let pool = ThreadPool::new(config(threads)).unwrap();
            assert_eq!(pool.max_threads(), threads);
            // Several waves with pauses, so threads park and are woken again.
            for wave in 0..3 {
                let counter = ExactOnce::new("wave", per);
                p.track(&counter);
                let jobs = Jobs::all(&counter);
                submit_range(&pool, &jobs, 0..per);
                counter.wait_total(per);
                counter.assert_all_once();
                let stats = pool.stats();
                assert!(stats.threads <= threads, "{} threads started with max_threads {threads}", stats.threads);
                if wave < 2 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            pool.shutdown().unwrap();
            assert_eq!(pool.stats().threads, 0, "threads left after shutdown");
            tree(p, ThreadPool::new(config(threads)).unwrap(), depth, TreeMode::Single, false);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Create / submit / shutdown in a loop: no OS thread left behind

#[test]
fn create_submit_shutdown_200_times_leaks_no_thread() {
    // Exclusive, so that the process-wide count is meaningful too (the harness may still start
    // a thread for the next test meanwhile: that count is only reported, the named one asserted).
    let _g = common::exclusive();
    const NAME: &str = "pool-leakcheck";
    let rounds = scaled_min(200, 3);
    watchdog("create_submit_shutdown_200_times", watchdog_secs(30), move |p| {
        let named = || common::os_threads_named(NAME);
        let total_before = common::os_thread_count();
        assert_eq!(named().unwrap_or(0), 0);
        let mut max_seen = 0;
        for round in 0..rounds {
            p.stage(format!("round {round}"));
            let threads = 1 + round % 4;
            let counter = ExactOnce::new("round", 64);
            let jobs = Jobs::all(&counter);
            let explicit_shutdown = round % 3 != 0;
            if round % 2 == 0 {
                let pool = ThreadPool::with_spawner(config(threads), ThreadSpawner::<FutexParker>::named(NAME)).unwrap();
                submit_range(&pool, &jobs, 0..64);
                // A thread that ran a task has set its name.
                counter.wait_total(64);
                max_seen = max_seen.max(named().unwrap_or(0));
                if explicit_shutdown {
                    pool.shutdown().unwrap();
                }
                drop(pool);
            } else {
                let pool = ThreadPool::with_spawner(config(threads), ThreadSpawner::<CondvarParker>::named(NAME)).unwrap();
                submit_range(&pool, &jobs, 0..64);
                // A thread that ran a task has set its name.
                counter.wait_total(64);
                max_seen = max_seen.max(named().unwrap_or(0));
                if explicit_shutdown {
                    pool.shutdown().unwrap();
                }
                drop(pool);
            }
            // Drop (with or without an explicit shutdown) ran every accepted task.
            counter.assert_all_once();
            let left = common::wait_count_down(0, Duration::from_secs(2), named);
            assert_eq!(left, 0, "round {round}: {left} pool threads still alive after the pool was dropped");
        }
        if common::os_threads_named(NAME).is_some() {
            assert!(max_seen > 0, "the thread name check saw no pool thread at all: it would prove nothing");
        }
        // A pool that never received work starts no thread.
        let pool = ThreadPool::with_spawner(config(4), ThreadSpawner::<FutexParker>::named(NAME)).unwrap();
        assert_eq!(pool.stats().threads, 0);
        assert_eq!(named().unwrap_or(0), 0);
        drop(pool);
        if let Some(before) = total_before {
            let now = common::wait_count_down(before, Duration::from_secs(2), common::os_thread_count);
            if now != before {
                eprintln!("note: process thread count {before} -> {now} (harness threads for other tests may have started)");
            }
        }
    });
}

/// Many more producers than cores, all submitting in a tight loop when `shutdown` comes: a
/// producer is often preempted in the middle of a submit, and that submit must still either be
/// refused or run.
#[test]
fn many_producers_racing_shutdown() {
    let _g = common::shared();
    let rounds = scaled_min(600, 3);
    watchdog("many_producers_racing_shutdown", watchdog_secs(30), move |p| {
        shutdown_race(p, &ThreadSpawner::<FutexParker>::new, rounds, if cfg!(miri) { 4 } else { 16 }, scaled_min(1000, 20), "many producers");
    });
}
