//! `join` and `scope` (issue 4): exact results for deep recursion, calls from outside and from
//! inside the pool, borrowed data, panics that wait for both halves, the free functions on the
//! global pool, and zero allocations per `join` on a worker. Every test runs under a watchdog.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::watchdog;
use pool::{Config, ThreadPool, ThreadSpawner};

// ---------------------------------------------------------------------------------------------
// A counting allocator (process-wide while switched on; the tests that read it run alone).

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Serialises the tests that count allocations against every other test of this binary.
static SERIAL: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------

type Pool = ThreadPool<ThreadSpawner>;

fn new_pool(threads: usize) -> Arc<Pool> {
    Arc::new(ThreadPool::new(Config::default().with_max_threads(threads)).unwrap())
}

fn fib(pool: &Pool, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
    a + b
}

fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

const FIB_N: u32 = if cfg!(miri) { 8 } else { 25 };

#[test]
fn fib_deep_recursion_exact() {
    let _g = shared();
    for threads in [1, 2, 4] {
        let pool = new_pool(threads);
        let p = pool.clone();
        // Called from outside: the whole recursion is injected and runs on the pool.
        let got = watchdog("fib", 20, move |_| fib(&p, FIB_N));
        assert_eq!(got, fib_seq(FIB_N), "threads={threads}");
        pool.shutdown().unwrap();
    }
}

#[test]
fn join_from_outside_many_threads() {
    let _g = shared();
    let pool = new_pool(2);
    let p = pool.clone();
    watchdog("outside joins", 20, move |_| {
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..if cfg!(miri) { 5 } else { 500 } {
                        let (a, b) = p.join(|| t * 1000 + i, || fib(p, 10));
                        assert_eq!((a, b), (t * 1000 + i, 55));
                    }
                });
            }
        });
    });
    pool.shutdown().unwrap();
}

#[test]
fn join_inside_pool_tasks() {
    let _g = shared();
    let pool = new_pool(2);
    let done = Arc::new(pool::CountLatch::new());
    let n = if cfg!(miri) { 4 } else { 64 };
    done.add(n);
    let sum = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        let (p, d, s) = (pool.clone(), done.clone(), sum.clone());
        pool.spawn(move || {
            // From inside a task: the worker path (push, take back or help).
            s.fetch_add(fib(&p, 15) as usize, Ordering::Relaxed);
            // SAFETY: one done per added unit.
            unsafe { d.done() };
        })
        .unwrap();
    }
    let (p, d) = (pool.clone(), done.clone());
    watchdog("joins in tasks", 20, move |_| p.wait_for_latch(&d));
    assert_eq!(sum.load(Ordering::Relaxed), n * 610);
    pool.shutdown().unwrap();
}

#[test]
fn join_after_shutdown_runs_on_caller() {
    let _g = shared();
    let pool = new_pool(2);
    pool.shutdown().unwrap();
    assert_eq!(pool.join(|| 1, || 2), (1, 2));
    let mut v = [0; 4];
    pool.scope(|s| {
        for (i, x) in v.iter_mut().enumerate() {
            s.spawn(move |_| *x = i + 1);
        }
    });
    assert_eq!(v, [1, 2, 3, 4]);
}

fn quicksort(pool: &Pool, v: &mut [u32]) {
    if v.len() <= 64 {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    pool.join(|| quicksort(pool, lo), || quicksort(pool, &mut hi[1..]));
}

/// Lomuto partition around the middle element; returns the pivot's final index.
fn partition(v: &mut [u32]) -> usize {
    let last = v.len() - 1;
    v.swap(v.len() / 2, last);
    let mut store = 0;
    for i in 0..last {
        if v[i] < v[last] {
            v.swap(i, store);
            store += 1;
        }
    }
    v.swap(store, last);
    store
}

#[test]
fn quicksort_borrowed_slices_exact() {
    let _g = shared();
    let pool = new_pool(2);
    let p = pool.clone();
    watchdog("qsort", 20, move |_| {
        let n = if cfg!(miri) { 500 } else { 200_000 };
        let mut x = 0xdead_beefu32;
        let mut v: Vec<u32> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x
            })
            .collect();
        let mut want = v.clone();
        want.sort_unstable();
        quicksort(&p, &mut v);
        assert!(v == want, "sorted exactly");
    });
    pool.shutdown().unwrap();
}

#[test]
fn scope_with_borrowed_data() {
    let _g = shared();
    let pool = new_pool(2);
    let p = pool.clone();
    watchdog("scope", 20, move |_| {
        let n = if cfg!(miri) { 64 } else { 100_000 };
        let mut data: Vec<u64> = (0..n).collect();
        let total = AtomicUsize::new(0);
        let label = String::from("borrowed");
        // From outside: the scope body runs on a worker; spawns nest.
        let r = p.scope(|s| {
            for chunk in data.chunks_mut(1000) {
                let (total, label) = (&total, &label);
                s.spawn(move |s| {
                    assert_eq!(label, "borrowed");
                    let (a, b) = chunk.split_at_mut(chunk.len() / 2);
                    s.spawn(move |_| a.iter_mut().for_each(|x| *x *= 2));
                    b.iter_mut().for_each(|x| *x *= 2);
                    total.fetch_add(1, Ordering::Relaxed);
                });
            }
            7
        });
        assert_eq!(r, 7);
        assert_eq!(total.load(Ordering::Relaxed), (n as usize).div_ceil(1000));
        assert!(data.iter().enumerate().all(|(i, &x)| x == 2 * i as u64));
        // From inside a worker, nested in a join.
        let mut pair = [0u64; 2];
        let (l, r) = pair.split_at_mut(1);
        p.join(
            || p.scope(|s| s.spawn(|_| l[0] = fib_seq(15))),
            || p.scope(|s| s.spawn(|_| r[0] = fib_seq(16))),
        );
        assert_eq!(pair, [610, 987]);
    });
    pool.shutdown().unwrap();
}

#[test]
fn free_functions_on_global_pool() {
    let _g = shared();
    fn gfib(n: u32) -> u64 {
        if n < 2 {
            return n as u64;
        }
        let (a, b) = pool::join(|| gfib(n - 1), || gfib(n - 2));
        a + b
    }
    watchdog("global", 20, |_| {
        assert_eq!(gfib(if cfg!(miri) { 6 } else { 20 }), fib_seq(if cfg!(miri) { 6 } else { 20 }));
        let mut v = [0u32; 16];
        pool::scope(|s| {
            for (i, x) in v.iter_mut().enumerate() {
                s.spawn(move |_| *x = i as u32);
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    });
}

/// `b` sleeps so that it is stolen while `a` panics: the panic must surface only after `b`
/// has finished (it borrows the caller's frame).
#[test]
fn panic_in_a_waits_for_stolen_b() {
    let _g = shared();
    let pool = new_pool(2);
    let p = pool.clone();
    watchdog("panic a", 20, move |_| {
        for _ in 0..if cfg!(miri) { 2 } else { 20 } {
            let b_done = AtomicBool::new(false);
            let r = catch_unwind(AssertUnwindSafe(|| {
                p.join(
                    || {
                        std::thread::sleep(Duration::from_millis(2));
                        panic!("a panics")
                    },
                    || {
                        std::thread::sleep(Duration::from_millis(5));
                        b_done.store(true, Ordering::SeqCst);
                    },
                )
            }));
            let err = r.expect_err("the panic propagates");
            assert_eq!(err.downcast_ref::<&str>(), Some(&"a panics"));
            // Either b ran to completion (stolen, or run by the helping owner) or it was never
            // started (taken back): never half-way.
            let _ = b_done.load(Ordering::SeqCst);
        }
        // The pool still works.
        assert_eq!(fib(&p, 12), 144);
    });
    pool.shutdown().unwrap();
}

#[test]
fn panic_in_b_and_in_scope_propagates() {
    let _g = shared();
    let pool = new_pool(2);
    let p = pool.clone();
    watchdog("panic b", 20, move |_| {
        let a_done = AtomicBool::new(false);
        let r = catch_unwind(AssertUnwindSafe(|| {
            p.join(
                || {
                    std::thread::sleep(Duration::from_millis(5));
                    a_done.store(true, Ordering::SeqCst);
                },
                || panic!("b panics"),
            )
        }));
        assert_eq!(r.expect_err("propagates").downcast_ref::<&str>(), Some(&"b panics"));
        assert!(a_done.load(Ordering::SeqCst), "a finished before the panic surfaced");

        let ran = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            p.scope(|s| {
                for i in 0..8 {
                    let ran = &ran;
                    s.spawn(move |_| {
                        std::thread::sleep(Duration::from_millis(1));
                        ran.fetch_add(1, Ordering::SeqCst);
                        if i == 3 {
                            panic!("spawned panics");
                        }
                    });
                }
            })
        }));
        assert_eq!(r.expect_err("propagates").downcast_ref::<&str>(), Some(&"spawned panics"));
        assert_eq!(ran.load(Ordering::SeqCst), 8, "every spawned job finished first");
        assert_eq!(fib(&p, 12), 144);
    });
    pool.shutdown().unwrap();
}

/// `join` on a worker allocates nothing (the stack job), whether `b` is taken back or stolen.
#[test]
#[cfg_attr(miri, ignore)]
fn join_on_worker_allocates_nothing() {
    let _g = SERIAL.write().unwrap_or_else(|e| e.into_inner());
    let pool = new_pool(2);
    let p = pool.clone();
    watchdog("allocs", 20, move |_| {
        // Warm up: both threads started, every lazy allocation done.
        for _ in 0..10 {
            assert_eq!(fib(&p, 18), 2584);
        }
        let (got, allocs) = p.scope(|_| {
            // On a worker now.
            COUNTING.store(true, Ordering::SeqCst);
            let before = ALLOCS.load(Ordering::SeqCst);
            let got = fib(&p, 20);
            let allocs = ALLOCS.load(Ordering::SeqCst) - before;
            COUNTING.store(false, Ordering::SeqCst);
            (got, allocs)
        });
        assert_eq!(got, 6765);
        assert_eq!(allocs, 0, "allocations during 10945 joins on a worker");
    });
    pool.shutdown().unwrap();
}
