//! `ThreadPool::parallel_for`: every index exactly once, chunks within the grain, from outside
//! and from inside the pool, and a panic in the body reaching the caller.
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use pool::{Config, ThreadPool, ThreadSpawner};

type Pool = ThreadPool<ThreadSpawner>;

fn pool(threads: usize) -> Pool {
    ThreadPool::new(Config::default().with_max_threads(threads)).unwrap()
}

fn check(pool: &Pool, n: usize, grain: usize) {
    let hits: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    let chunks = AtomicUsize::new(0);
    pool.parallel_for(0..n, grain, |r| {
        assert!(!r.is_empty());
        assert!(grain == 0 || r.len() <= grain, "chunk {r:?} over grain {grain}");
        for i in r {
            hits[i].fetch_add(1, Ordering::Relaxed);
        }
        chunks.fetch_add(1, Ordering::Relaxed);
    });
    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "n={n} grain={grain}: an index not run exactly once");
    if grain != 0 {
        assert!(chunks.load(Ordering::Relaxed) >= n.div_ceil(grain));
    }
}

#[test]
fn covers_the_range_exactly_once() {
    let pool = pool(3);
    for (n, grain) in [(0, 1), (1, 0), (7, 1), (1000, 0), (100_003, 1000), (5000, 1)] {
        check(&pool, n, grain);
    }
}

#[test]
fn nested_inside_the_pool() {
    let pool = pool(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let p = &pool;
    pool.scope(|s| {
        s.spawn(move |_| {
            check(p, 10_000, 3);
            tx.send(()).unwrap();
        });
    });
    rx.recv().unwrap();
}

#[test]
fn a_panic_reaches_the_caller() {
    let pool = pool(2);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.parallel_for(0..100, 1, |r| assert!(r.start != 57, "boom"));
    }));
    assert!(r.is_err());
    check(&pool, 1000, 10); // the pool still works
}
