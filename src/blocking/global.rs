//! The process-wide blocking pool behind `pool_blocking_submit` and [`spawn_blocking`]: built on
//! first use with the default configuration (cap 512, keep-alive 10 s), or with the one given to
//! [`configure_global_blocking`] before that; never shut down. With no blocking work it holds no
//! thread (idle threads leave after the keep-alive).

use std::sync::OnceLock;

use super::{BlockingConfig, BlockingHandle, BlockingPool};
use crate::{Error, ThreadSpawner};

static GLOBAL: OnceLock<BlockingPool<ThreadSpawner>> = OnceLock::new();

/// The process-wide blocking pool, built on first call (with the configuration given to
/// [`configure_global_blocking`], if any, else the default). No thread starts until work arrives.
///
/// ```
/// let before = pool::global_blocking().metrics().threads_spawned;
/// pool::spawn_blocking(|| ()).unwrap().join().unwrap();
/// assert!(pool::global_blocking().metrics().threads_spawned >= before);
/// ```
pub fn global_blocking() -> &'static BlockingPool<ThreadSpawner> {
    try_global_blocking().unwrap_or_else(|e| panic!("the global blocking pool could not be built: {e}"))
}

/// [`global_blocking`], or the error that kept it from being built (out of memory) on first
/// use; a later call tries again.
pub(crate) fn try_global_blocking() -> Result<&'static BlockingPool<ThreadSpawner>, Error> {
    if let Some(pool) = GLOBAL.get() {
        return Ok(pool);
    }
    #[cfg(unix)]
    crate::os::fork::install();
    let pool = BlockingPool::new(BlockingConfig::default())?;
    // Racing another first use or `configure_global_blocking`: one pool is kept, the other
    // dropped (it never started a thread).
    let _ = GLOBAL.set(pool);
    Ok(GLOBAL.get().expect("set above, by us or by the racing call"))
}

/// Sets the configuration of the process-wide blocking pool ([`global_blocking`]). Only before
/// its first use: the pool is built here, with `config`, and every later use gets it.
///
/// # Errors
/// * [`Error::AlreadyStarted`] if the pool was already built, by its first use
///   ([`global_blocking`], [`spawn_blocking`], `pool_blocking_submit`) or by an earlier call;
///   it keeps its configuration. (Reading its metrics from C does not build it.)
/// * [`Error::InvalidArgument`] for `max_threads` above [`BlockingConfig::MAX_THREADS`].
///
/// ```
/// use pool::{BlockingConfig, Error};
/// use std::time::Duration;
///
/// // First thing in main: a smaller cap and a shorter keep-alive for this process.
/// let config = BlockingConfig { max_threads: 16, keep_alive: Duration::from_secs(1), ..Default::default() };
/// pool::configure_global_blocking(config).unwrap();
/// assert_eq!(pool::global_blocking().max_threads(), 16);
/// assert_eq!(pool::configure_global_blocking(BlockingConfig::default()), Err(Error::AlreadyStarted));
/// ```
pub fn configure_global_blocking(config: BlockingConfig) -> Result<(), Error> {
    if GLOBAL.get().is_some() {
        return Err(Error::AlreadyStarted);
    }
    #[cfg(unix)]
    crate::os::fork::install();
    let pool = BlockingPool::new(config)?;
    // Racing a first use (or another call): one of them builds the pool, the other's is
    // dropped (it never started a thread).
    GLOBAL.set(pool).map_err(|_unused| Error::AlreadyStarted)
}

/// The process-wide blocking pool if it was built already; `None` builds nothing.
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn global_blocking_if_built() -> Option<&'static BlockingPool<ThreadSpawner>> {
    GLOBAL.get()
}

/// Runs `f` on the process-wide blocking pool ([`global_blocking`]); see
/// [`BlockingPool::spawn_blocking`].
///
/// # Errors
/// [`Error::Spawn`] if the pool has no thread and none could be started (`f` is dropped).
///
/// ```
/// let len = pool::spawn_blocking(|| std::fs::read_dir("/").map(|d| d.count()).unwrap_or(0)).unwrap();
/// assert!(len.join().unwrap() > 0);
/// ```
pub fn spawn_blocking<F, T>(f: F) -> Result<BlockingHandle<T>, Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    global_blocking().spawn_blocking(f)
}

/// In the child after a fork (`os::fork`): the global blocking pool, if built, gets a fresh
/// state in place with the configuration it had (`configure_global_blocking`'s included). If
/// that cannot be allocated, it is closed instead: its submits fail rather than wait.
#[cfg(unix)]
pub(crate) fn reset_global_after_fork() {
    let Some(pool) = GLOBAL.get() else { return };
    let reset = ThreadSpawner::try_named("pool-blocking")
        // SAFETY: the fork handler runs on the child's only thread, outside any pool call.
        .and_then(|spawner| unsafe { pool.reset_after_fork(spawner) });
    if reset.is_err() {
        pool.close_inherited();
    }
}
