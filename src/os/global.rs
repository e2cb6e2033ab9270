//! The global pool behind `pool_submit` and [`global()`]: started on first use, with
//! `max_threads` = available parallelism, never shut down (its threads park when idle and end
//! with the process).

use std::sync::OnceLock;

use crate::{Config, Error, ThreadPool, ThreadSpawner};

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
    try_global().unwrap_or_else(|e| panic!("the global pool could not be built: {e}"))
}

/// The global pool if it was built (it is never built here).
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn built() -> Option<&'static ThreadPool<ThreadSpawner>> {
    GLOBAL.get()
}

/// [`global()`], or the error that kept it from being built (out of memory) on first use;
/// a later call tries again.
pub(crate) fn try_global() -> Result<&'static ThreadPool<ThreadSpawner>, Error> {
    if let Some(pool) = GLOBAL.get() {
        return Ok(pool);
    }
    #[cfg(unix)]
    super::fork::install();
    let pool = ThreadPool::with_spawner(Config::default(), ThreadSpawner::try_named("pool-global")?)?;
    // Racing another first use: one pool is kept, the other dropped (it never started a thread).
    let _ = GLOBAL.set(pool);
    Ok(GLOBAL.get().expect("set above, by us or by the racing call"))
}

/// In the child after a fork (`os::fork`): the global pool, if built, gets a fresh state in
/// place (same configuration; a new spawner, the parent's threads being gone). If even that
/// cannot be allocated, the pool is closed instead: its submits fail rather than wait.
#[cfg(unix)]
pub(crate) fn reset_after_fork() {
    let Some(pool) = GLOBAL.get() else { return };
    let reset = ThreadSpawner::try_named("pool-global")
        // SAFETY: the fork handler runs on the child's only thread, outside any pool call.
        .and_then(|spawner| unsafe { pool.reset_after_fork(spawner) });
    if reset.is_err() {
        pool.close_inherited();
    }
}
