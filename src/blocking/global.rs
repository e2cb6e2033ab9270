//! The process-wide blocking pool behind `pool_blocking_submit` and [`spawn_blocking`]: built on
//! first use with the default configuration (cap 512, keep-alive 10 s), never shut down. With
//! no blocking work it holds no thread (idle threads leave after the keep-alive).

use std::sync::OnceLock;

use super::{BlockingConfig, BlockingHandle, BlockingPool};
use crate::{Error, ThreadSpawner};

static GLOBAL: OnceLock<BlockingPool<ThreadSpawner>> = OnceLock::new();

/// The process-wide blocking pool, built on first call. No thread starts until work arrives.
///
/// ```
/// let before = pool::global_blocking().metrics().threads_spawned;
/// pool::spawn_blocking(|| ()).unwrap().join().unwrap();
/// assert!(pool::global_blocking().metrics().threads_spawned >= before);
/// ```
pub fn global_blocking() -> &'static BlockingPool<ThreadSpawner> {
    GLOBAL.get_or_init(|| BlockingPool::new(BlockingConfig::default()).expect("the default configuration is valid"))
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
