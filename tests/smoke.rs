//! Smoke test: spawn 100,000 closures on a 2-thread pool, shut it down, and count that every one ran.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use pool::{Config, ThreadPool};

/// Tasks submitted; far fewer under Miri (an interpreter, ~1000x slower).
const N: usize = if cfg!(miri) { 200 } else { 100_000 };

#[test]
fn smoke() {
    let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..N {
        let n = n.clone();
        pool.spawn(move || { n.fetch_add(1, Ordering::Relaxed); }).unwrap();
    }
    pool.shutdown().unwrap();
    assert_eq!(n.load(Ordering::Relaxed), N);
}
