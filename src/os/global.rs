//! The global pool behind `pool_submit` and [`global()`]: started on first use, with
//! `max_threads` = available parallelism, never shut down (its threads park when idle and end
//! with the process).

use std::sync::OnceLock;

use crate::{Config, ThreadPool, ThreadSpawner};

static GLOBAL: OnceLock<ThreadPool<ThreadSpawner>> = OnceLock::new();

/// The process-wide pool, built on first call. No thread starts until work is submitted.
///
/// ```
/// let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
/// let h = hits.clone();
/// pool::global().spawn(move || { h.fetch_add(1, std::sync::atomic::Ordering::SeqCst); }).unwrap();
/// # while hits.load(std::sync::atomic::Ordering::SeqCst) == 0 { std::thread::yield_now(); }
/// ```
pub fn global() -> &'static ThreadPool<ThreadSpawner> {
    GLOBAL.get_or_init(|| {
        ThreadPool::with_spawner(Config::default(), ThreadSpawner::named("pool-global"))
            .expect("the default configuration is valid")
    })
}
