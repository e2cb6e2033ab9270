//! The process-wide pools and everything that falls back to them: the task pool behind
//! [`global()`], `pool_submit` and the free [`join`] and [`scope`], and the blocking pool
//! behind [`global_blocking`], [`spawn_blocking`] and `pool_blocking_submit`. Each is built on
//! first use and never shut down: idle, the task pool's threads park and the blocking pool's
//! leave after their keep-alive. In a child after `fork()` each is reset in place (`fork.rs`).
//!
//! (One file, named `global.rs`: examples on these pools leave their threads running at exit,
//! which `make test-miri-doc` runs under Miri with `-Zmiri-ignore-leaks`, selected by this
//! file's name.)

#[cfg(all(unix, not(loom)))]
use core::ptr::NonNull;
use std::sync::OnceLock;

use crate::blocking::{BlockingConfig, BlockingHandle, BlockingPool};
use crate::error::Error;
use crate::join::Scope;
#[cfg(all(unix, not(loom)))]
use crate::platform::PoolLink;
use crate::scheduler::{Config, ThreadPool};
use super::thread::ThreadSpawner;

static GLOBAL: OnceLock<ThreadPool<ThreadSpawner>> = OnceLock::new();
static GLOBAL_BLOCKING: OnceLock<BlockingPool<ThreadSpawner>> = OnceLock::new();

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
    #[cfg(all(unix, not(loom)))]
    register_for_fork();
    let pool = ThreadPool::with_spawner(Config::default(), ThreadSpawner::try_named("pool-global")?.untracked())?;
    // Racing another first use: one pool is kept, the other dropped (it never started a thread).
    let _ = GLOBAL.set(pool);
    Ok(GLOBAL.get().expect("set above, by us or by the racing call"))
}

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
    if let Some(pool) = GLOBAL_BLOCKING.get() {
        return Ok(pool);
    }
    #[cfg(all(unix, not(loom)))]
    register_for_fork();
    let pool = blocking_pool(BlockingConfig::default())?;
    // Racing another first use or `configure_global_blocking`: one pool is kept, the other
    // dropped (it never started a thread).
    let _ = GLOBAL_BLOCKING.set(pool);
    Ok(GLOBAL_BLOCKING.get().expect("set above, by us or by the racing call"))
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
/// let config = BlockingConfig::default().with_max_threads(16).with_keep_alive(Duration::from_secs(1));
/// pool::configure_global_blocking(config).unwrap();
/// assert_eq!(pool::global_blocking().max_threads(), 16);
/// assert_eq!(pool::configure_global_blocking(BlockingConfig::default()), Err(Error::AlreadyStarted));
/// ```
pub fn configure_global_blocking(config: BlockingConfig) -> Result<(), Error> {
    if GLOBAL_BLOCKING.get().is_some() {
        return Err(Error::AlreadyStarted);
    }
    #[cfg(all(unix, not(loom)))]
    register_for_fork();
    let pool = blocking_pool(config)?;
    // Racing a first use (or another call): one of them builds the pool, the other's is
    // dropped (it never started a thread).
    GLOBAL_BLOCKING.set(pool).map_err(|_unused| Error::AlreadyStarted)
}

/// The global blocking pool's state: on threads named `pool-blocking`, untracked by the fork
/// registry (it has an entry of its own, which resets it: `register_for_fork`).
fn blocking_pool(config: BlockingConfig) -> Result<BlockingPool<ThreadSpawner>, Error> {
    BlockingPool::with_spawner(config, ThreadSpawner::try_named("pool-blocking")?.untracked())
}

/// The process-wide blocking pool if it was built already; `None` builds nothing.
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn global_blocking_if_built() -> Option<&'static BlockingPool<ThreadSpawner>> {
    GLOBAL_BLOCKING.get()
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

/// [`ThreadPool::join`](crate::ThreadPool::join) on the [`global`](crate::global) pool.
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = pool::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// assert_eq!(fib(12), 144);
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    crate::global().join(a, b)
}

/// [`ThreadPool::scope`](crate::ThreadPool::scope) on the [`global`](crate::global) pool.
///
/// ```
/// let mut halves = [0u64; 2];
/// let (lo, hi) = halves.split_at_mut(1);
/// pool::scope(|s| {
///     s.spawn(|_| lo[0] = (1..=50).sum());
///     s.spawn(|_| hi[0] = (51..=100).sum());
/// });
/// assert_eq!(halves[0] + halves[1], 5050);
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope, ThreadSpawner>) -> R + Send,
    R: Send,
{
    crate::global().scope(op)
}

/// Links the global pools' entry into the fork registry (`fork.rs`), once: its child handler
/// resets them. (They are built on untracked spawners, so this entry is their only one.)
#[cfg(all(unix, not(loom)))]
fn register_for_fork() {
    static LINK: OnceLock<PoolLink> = OnceLock::new();
    let mut first = false;
    let link = LINK.get_or_init(|| {
        first = true;
        PoolLink::new(reset_after_fork)
    });
    if first {
        // SAFETY: a static link, tracked once (only the call that initialised it gets here).
        unsafe { super::fork::track(NonNull::from(link)) };
    }
}

/// In the child after a fork (`fork.rs`): each global pool that was built gets a fresh state
/// in place, with the configuration it had (`configure_global_blocking`'s included) and a new
/// spawner (the parent's threads are gone), so `&'static` handles taken before the fork keep
/// working. A pool for which even that cannot be allocated is closed instead: its submits fail
/// rather than wait.
///
/// # Safety
/// In the child's fork handler (its only thread, outside any pool call). Returns false: the
/// pools are not inherited, they start afresh.
#[cfg(all(unix, not(loom)))]
unsafe fn reset_after_fork(_: NonNull<PoolLink>) -> bool {
    if let Some(pool) = GLOBAL.get() {
        let reset = ThreadSpawner::try_named("pool-global")
            // SAFETY: the fork handler runs on the child's only thread, outside any pool call;
            // the spawner is untracked (this entry keeps the pool in the registry).
            .and_then(|spawner| unsafe { pool.reset_after_fork(spawner.untracked()) });
        if reset.is_err() {
            pool.close_inherited();
        }
    }
    if let Some(pool) = GLOBAL_BLOCKING.get() {
        let reset = ThreadSpawner::try_named("pool-blocking")
            // SAFETY: as above.
            .and_then(|spawner| unsafe { pool.reset_after_fork(spawner.untracked()) });
        if reset.is_err() {
            pool.close_inherited();
        }
    }
    false
}
