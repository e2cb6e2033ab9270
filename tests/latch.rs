//! `wait_for` / `CountLatch`: waiting outside the pool parks; waiting on a worker helps.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool::{Config, CountLatch, ThreadPool};

mod common;
use common::{watchdog, watchdog_secs};

/// Sums 1 for every node of a binary tree of `depth`, each node forking its children and
/// waiting for them with a latch on its own stack: deep nesting of waits on worker threads.
/// (Forked: a worker that waits runs related work first, and work submitted with `submit`
/// only within the nesting bound, `WorkerContext`'s docs.)
fn tree(pool: &'static ThreadPool<pool::ThreadSpawner>, depth: u32, count: &'static AtomicUsize) {
    count.fetch_add(1, Ordering::Relaxed);
    if depth == 0 {
        return;
    }
    #[repr(C)]
    struct Child {
        task: pool::Task,
        pool: &'static ThreadPool<pool::ThreadSpawner>,
        depth: u32,
        count: &'static AtomicUsize,
        latch: *const CountLatch,
    }
    unsafe extern "C" fn run(task: *mut pool::Task) {
        let child = task.cast::<Child>();
        // SAFETY: the `task` of a `Child` (repr(C), first field) that its parent keeps alive
        // until its latch is released; `done` is our last access.
        unsafe {
            tree((*child).pool, (*child).depth, (*child).count);
            (*(*child).latch).done();
        }
    }
    let latch = CountLatch::new();
    latch.add(2);
    let mut children: [Child; 2] =
        core::array::from_fn(|_| Child { task: pool::Task::new(run), pool, depth: depth - 1, count, latch: &latch });
    for child in children.iter_mut() {
        let child: *mut Child = child;
        // SAFETY: `children` outlives the wait below; each task is forked once.
        unsafe { pool.submit_fork(std::ptr::NonNull::new_unchecked(child.cast())).unwrap() };
    }
    pool.wait_for_latch(&latch);
}

#[test]
fn nested_waits_on_workers_help() {
    for threads in [1, 2, 4] {
        let pool: &'static ThreadPool<_> = Box::leak(Box::new(ThreadPool::new(Config::default().with_max_threads(threads)).unwrap()));
        let count: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let depth = if cfg!(miri) { 4 } else { 12 };
        watchdog("nested tree", watchdog_secs(30), move |_| tree(pool, depth, count));
        assert_eq!(count.load(Ordering::Relaxed), (1 << (depth + 1)) - 1, "threads={threads}");
        pool.shutdown().unwrap();
    }
}

#[test]
fn wait_from_outside_parks_until_done() {
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(2)).unwrap());
    let p = pool.clone();
    watchdog("outside wait", watchdog_secs(30), move |_| {
        for round in 0..200 {
            let latch = Arc::new(CountLatch::new());
            let n = 1 + round % 7;
            latch.add(n);
            let start = Instant::now();
            for i in 0..n {
                let l = latch.clone();
                p.spawn(move || {
                    if i == 0 && round % 50 == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    // SAFETY: one done per added unit.
                    unsafe { l.done() };
                })
                .unwrap();
            }
            p.wait_for_latch(&latch);
            assert_eq!(latch.pending(), 0);
            let _ = start;
        }
    });
}

#[test]
fn drop_last_handle_inside_own_task_does_not_free_in_use_state() {
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(2)).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let p = pool.clone();
    drop(pool);
    let inner_clone = p.clone();
    p.spawn(move || {
        // The last handle is dropped here, on a worker of that pool.
        drop(inner_clone);
        tx.send(()).unwrap();
    })
    .unwrap();
    drop(p);
    rx.recv_timeout(Duration::from_secs(10)).expect("task ran");
}

/// A worker waiting for a signal whose wait ends just as a task arrives from outside must hand
/// on the task's notification if it took it: the task below can only run on the other worker,
/// because the waiting task, once its signal is set, blocks until that task has run. A
/// notification left behind would leave the other worker asleep and the two tasks stuck.
/// Two ways to take it: the wait is already done when the worker consumes the notification,
/// or it is seen done after the consumption and before the search it owes. The second needs
/// the other worker to hold the waking right at that moment, which is likeliest while a fresh
/// pool starts its second thread, so the rounds start a fresh pool every few rounds.
#[test]
fn helper_leaving_its_wait_hands_on_a_pending_wake() {
    const ROUNDS_PER_POOL: usize = 4;
    // POOL_STRESS_SCALE shrinks it under the sanitizers (as the stress tests).
    let scale: f64 = std::env::var("POOL_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let rounds = if cfg!(miri) { 5 } else { ((2_000.0 * scale) as usize).max(5) };
    watchdog("helper_leaving_its_wait", watchdog_secs(60), move |p| {
        let round = Arc::new(AtomicUsize::new(0));
        p.track_value("round", &round);
        for idle_spins in [pool::DEFAULT_IDLE_SPINS, 1, 0] {
            p.stage(format!("idle_spins {idle_spins}"));
            let config = Config::default().with_max_threads(2).with_idle_spins(idle_spins);
            let mut pool = Arc::new(ThreadPool::new(config).unwrap());
            for i in 0..rounds {
                round.store(i, Ordering::Relaxed);
                if i > 0 && i % ROUNDS_PER_POOL == 0 {
                    pool.shutdown().unwrap();
                    pool = Arc::new(ThreadPool::new(config).unwrap());
                }
                let signal = Arc::new(pool::Signal::new());
                let ran = Arc::new(AtomicUsize::new(0));
                let waiting = Arc::new(AtomicUsize::new(0));
                let done = Arc::new(AtomicUsize::new(0));
                let (p, s, r, w, d) = (pool.clone(), signal.clone(), ran.clone(), waiting.clone(), done.clone());
                pool.spawn(move || {
                    w.store(1, Ordering::Release);
                    p.wait_for(&s);
                    // Blocks this worker (not a pool wait) until the other task ran elsewhere.
                    // Yielding, not spinning: on a loaded machine a spinning thread takes the
                    // time slices the other worker needs.
                    while r.load(Ordering::Acquire) == 0 {
                        std::thread::yield_now();
                    }
                    d.store(1, Ordering::Release);
                })
                .unwrap();
                while waiting.load(Ordering::Acquire) == 0 {
                    std::thread::yield_now();
                }
                let r = ran.clone();
                pool.spawn(move || r.store(1, Ordering::Release)).unwrap();
                // SAFETY: the only `set`; `signal` outlives the wait (the task holds a clone).
                unsafe { signal.set() };
                while done.load(Ordering::Acquire) == 0 {
                    std::thread::yield_now();
                }
            }
            pool.shutdown().unwrap();
        }
    });
}

/// An add past the count's range: `add` panics, `try_add` returns `Error::Overflow`; either way
/// the latch is unchanged and its wait still returns once the units really added are done.
#[test]
fn add_past_the_range_is_refused_and_changes_nothing() {
    watchdog("latch overflow", watchdog_secs(30), |_| {
        let pool = ThreadPool::new(Config::default().with_max_threads(1)).unwrap();
        let latch = CountLatch::new();
        assert_eq!(latch.try_add(usize::MAX), Err(pool::Error::Overflow));
        latch.add(3);
        assert_eq!(latch.try_add(usize::MAX - 3), Err(pool::Error::Overflow));
        assert_eq!(latch.pending(), 3);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| latch.add(usize::MAX)));
        let msg = panicked.expect_err("CountLatch::add past the range must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("overflow"), "panic message: {msg}");
        assert_eq!(latch.pending(), 3, "a refused add changed the latch");
        for _ in 0..3 {
            // SAFETY: one `done` per unit added.
            unsafe { latch.done() };
        }
        pool.wait_for_latch(&latch);
        // The last unit that fits: 1 (the open unit) + (usize::MAX - 1) = usize::MAX.
        let full = CountLatch::new();
        full.try_add(usize::MAX - 1).unwrap();
        assert_eq!(full.try_add(1), Err(pool::Error::Overflow));
    });
}
