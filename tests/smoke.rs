use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use pool::{Config, ThreadPool};

#[test]
fn smoke() {
    let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..100_000 {
        let n = n.clone();
        pool.spawn(move || { n.fetch_add(1, Ordering::Relaxed); }).unwrap();
    }
    pool.shutdown().unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 100_000);
}
