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
//! * create / submit / shutdown 200 times with no OS thread left behind;
//! * a soak: 8 producers whose tasks each submit a child from inside the pool, jobs reused
//!   round after round and counted exactly once per round (10^6 x scale here; 10^8 in the
//!   `#[ignore]`d test that `make verify` runs).

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

/// Once with the default spin before parking, once with none (`idle_spins = 0`: every idle
/// worker goes straight to its parker) and once with a long one.
fn mixed_load<S: Spawner>(p: &Progress, make: &dyn Fn() -> S, max_threads: usize, per_producer: usize, depth: u32) {
    for idle_spins in [pool::DEFAULT_IDLE_SPINS, 0, 4096] {
        let config = config(max_threads).with_idle_spins(idle_spins);
        external_producers(p, ThreadPool::with_spawner(config, make()).unwrap(), 2, per_producer, "2 producers");
        let pool = ThreadPool::with_spawner(config, make()).unwrap();
        tree(p, pool, depth, TreeMode::Single, false);
    }
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

// ---------------------------------------------------------------------------------------------
// Soak: 10^8 tasks from 8 producers, half of them submitted from inside the pool
// (`make verify`: POOL_SOAK_TASKS=100000000, the #[ignore]d test; `make test`: 10^6 x scale).

/// A soak job: a root, submitted by a producer, submits its child from inside the worker (with
/// `submit`, `submit_lifo` or a one-task batch); the child only counts. Jobs are reused round
/// after round, so after round `r` every job must have run exactly `r + 1` times.
#[repr(C)]
struct SoakJob {
    task: pool::Task,
    runs: std::sync::atomic::AtomicU32,
    /// The root's child (null in a child).
    child: *mut SoakJob,
    mode: u8,
    pool: *const ThreadPool<ThreadSpawner>,
    /// The producer's count of finished runs (the callback's last access).
    done: *const std::sync::atomic::AtomicUsize,
    /// Children whose submit failed (must stay 0).
    errors: *const std::sync::atomic::AtomicUsize,
}

unsafe extern "C" fn soak_run(task: *mut pool::Task) {
    use std::sync::atomic::Ordering;
    let job = pool::container_of!(task, SoakJob, task);
    // SAFETY: every task with this callback is the `task` field of a live `SoakJob` whose pool
    // and counters outlive the pool's work; fields are read through the raw pointer (no
    // reference to the whole job, whose `task` the pool may reuse in the next round).
    let (child, mode, pool, done, errors) = unsafe { ((*job).child, (*job).mode, (*job).pool, (*job).done, (*job).errors) };
    // SAFETY: as above.
    unsafe { (*job).runs.fetch_add(1, Ordering::Relaxed) };
    if !child.is_null() {
        // SAFETY: the child is submitted once per round, by its root only, after it finished
        // its previous run (the producer waits for every run of a round before the next).
        let (pool, child) = unsafe { (&*pool, std::ptr::NonNull::new_unchecked(std::ptr::addr_of_mut!((*child).task))) };
        // SAFETY: as above.
        let r = unsafe {
            match mode {
                0 => pool.submit(child),
                1 => pool.submit_lifo(child),
                _ => {
                    let mut batch = Batch::new();
                    batch.push(child);
                    pool.submit_batch(batch)
                }
            }
        };
        if r.is_err() {
            // SAFETY: the counters outlive the pool's work.
            unsafe { (*errors).fetch_add(1, Ordering::Relaxed) };
        }
    }
    // Release: the producer's Acquire load sees this run's count. Last access to the job.
    // SAFETY: as above.
    unsafe { (*done).fetch_add(1, Ordering::Release) };
}

#[repr(align(128))]
struct Padded(std::sync::atomic::AtomicUsize);

/// `total` tasks (rounded to whole rounds) from 8 producers; returns (tasks run, seconds).
fn soak(p: &common::Progress, total: usize) -> (usize, f64) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const PRODUCERS: usize = 8;
    // Per producer and round: `per` roots + `per` children.
    let per = (total / (2 * PRODUCERS)).clamp(1, 62_500);
    let rounds = (total / (2 * PRODUCERS * per)).max(1);
    let pool = Arc::new(ThreadPool::new(Config::default()).unwrap());
    let done: Arc<[Padded]> = (0..PRODUCERS).map(|_| Padded(AtomicUsize::new(0))).collect();
    let errors = Arc::new(AtomicUsize::new(0));
    let rounds_done = Arc::new(AtomicUsize::new(0));
    p.track_value("producer rounds done", &rounds_done);
    // Every job of producer t: roots at [t * 2 * per, t * 2 * per + per), their children after.
    let jobs: Box<[SoakJob]> = (0..PRODUCERS * 2 * per)
        .map(|i| SoakJob {
            task: pool::Task::new(soak_run),
            runs: std::sync::atomic::AtomicU32::new(0),
            child: std::ptr::null_mut(),
            mode: (i % 3) as u8,
            pool: Arc::as_ptr(&pool),
            done: &done[i / (2 * per)].0,
            errors: Arc::as_ptr(&errors),
        })
        .collect();
    let len = jobs.len();
    let jobs: *mut SoakJob = Box::into_raw(jobs).cast();
    for t in 0..PRODUCERS {
        for i in 0..per {
            let root = t * 2 * per + i;
            // SAFETY: in bounds; nothing runs yet.
            unsafe { (*jobs.add(root)).child = jobs.add(root + per) };
        }
    }
    let jobs_ptr = common::SendPtr(jobs.cast_const());
    p.stage(format!("soak: {PRODUCERS} producers x {rounds} rounds x {per} roots (+ as many nested)"));
    let start = std::time::Instant::now();
    let handles: Vec<_> = (0..PRODUCERS)
        .map(|t| {
            let (pool, done, rounds_done) = (Arc::clone(&pool), Arc::clone(&done), Arc::clone(&rounds_done));
            let jobs_ptr = common::SendPtr(jobs_ptr.0);
            std::thread::spawn(move || {
                let jobs_ptr = jobs_ptr; // the whole wrapper (a closure would capture only `.0`)
                let jobs = jobs_ptr.0.cast_mut();
                let base = t * 2 * per;
                let task = |i: usize| {
                    // SAFETY: in bounds; `addr_of_mut!` makes no reference.
                    unsafe { std::ptr::NonNull::new_unchecked(std::ptr::addr_of_mut!((*jobs.add(base + i)).task)) }
                };
                for round in 0..rounds {
                    if round % 4 == 3 {
                        // Every fourth round the roots go in batches of 64.
                        for first in (0..per).step_by(64) {
                            let mut batch = Batch::new();
                            for i in first..(first + 64).min(per) {
                                // SAFETY: each root once per round, after its previous run.
                                unsafe { batch.push(task(i)) };
                            }
                            // SAFETY: as above.
                            unsafe { pool.submit_batch(batch) }.unwrap();
                        }
                    } else {
                        for i in 0..per {
                            // SAFETY: as above.
                            unsafe { pool.submit(task(i)) }.unwrap();
                        }
                    }
                    let want = 2 * per * (round + 1);
                    let mut spins = 0u32;
                    while done[t].0.load(Ordering::Acquire) < want {
                        spins += 1;
                        if spins < 64 {
                            std::thread::yield_now();
                        } else {
                            std::thread::sleep(Duration::from_micros(50));
                        }
                    }
                    // Every run of the round is counted (Acquire above): each job ran once more.
                    for i in 0..2 * per {
                        // SAFETY: in bounds; an atomic read.
                        let runs = unsafe { (*jobs.add(base + i)).runs.load(Ordering::Relaxed) } as usize;
                        assert_eq!(runs, round + 1, "producer {t}, round {round}: job {i} ({}) ran {runs} times", if i < per { "root" } else { "nested child" });
                    }
                    assert_eq!(done[t].0.load(Ordering::Acquire), want, "producer {t}, round {round}: more runs than submits");
                    rounds_done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("soak producer panicked");
    }
    let secs = start.elapsed().as_secs_f64();
    pool.shutdown().unwrap();
    assert_eq!(errors.load(Ordering::Relaxed), 0, "nested submits failed");
    let ran: usize = done.iter().map(|d| d.0.load(Ordering::Relaxed)).sum();
    assert_eq!(ran, PRODUCERS * 2 * per * rounds);
    drop(pool);
    // SAFETY: the pool is gone; nothing references the jobs any more.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(jobs, len)) });
    (ran, secs)
}

#[test]
fn soak_small_8_producers_nested_submits() {
    let _g = common::shared();
    let total = scaled_min(1_000_000, 32);
    watchdog("soak_small", watchdog_secs(60), move |p| {
        soak(p, total);
    });
}

/// `make verify`: POOL_SOAK_TASKS (default 10^8) tasks, every one counted exactly once.
#[test]
#[ignore = "10^8 tasks: run by make verify"]
fn soak_1e8_tasks_8_producers_nested_submits() {
    let _g = common::exclusive();
    let total = std::env::var("POOL_SOAK_TASKS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000_000);
    watchdog("soak_1e8", watchdog_secs(3600), move |p| {
        let (ran, secs) = soak(p, total);
        println!("soak: {ran} tasks (half submitted from inside the pool) from 8 producers in {secs:.1} s ({:.1} M tasks/s), each exactly once", ran as f64 / secs / 1e6);
    });
}
