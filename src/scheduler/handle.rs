//! [`ThreadPool`]: the handle on a pool (a pointer to its [`Inner`]), how one is built, and
//! how the C layer and the runtime hold one without owning it. What a caller does with it is
//! `pool.rs`.

use core::fmt;
use core::ptr::NonNull;

use alloc::boxed::Box;

use super::config::Config;
use super::inner::Inner;
use crate::error::Error;
use crate::platform::Spawner;
use crate::raw_handle::RawHandle;
use crate::sync::Ordering;

/// A work-stealing thread pool, generic over its platform.
///
/// With the `std` feature, `ThreadPool::new(config)` builds one on OS threads; on any platform,
/// [`ThreadPool::with_spawner`] builds one on the host's [`Spawner`].
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, ThreadPool};
/// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
///
/// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
/// let hits = Arc::new(AtomicUsize::new(0));
/// for _ in 0..100 {
///     let hits = hits.clone();
///     pool.spawn(move || { hits.fetch_add(1, Ordering::Relaxed); }).unwrap();
/// }
/// pool.shutdown().unwrap(); // runs what was queued, joins the threads
/// assert_eq!(hits.load(Ordering::Relaxed), 100);
/// # }
/// ```
pub struct ThreadPool<S: Spawner> {
    /// Also built, never dropped, by the async runtime's tasks (`scheduler::inner`, `release_pool`).
    pub(crate) inner: NonNull<Inner<S>>,
}

// SAFETY: the handle is a pointer to state designed for sharing (atomics, and a Spawner that is
// Send + Sync).
unsafe impl<S: Spawner> Send for ThreadPool<S> {}
// SAFETY: as above; every method takes &self and is thread-safe.
unsafe impl<S: Spawner> core::marker::Sync for ThreadPool<S> {}

/// For the C layer (`struct pool *`).
impl<S: Spawner> RawHandle for ThreadPool<S> {
    fn as_raw(&self) -> *mut () {
        self.inner.as_ptr().cast()
    }

    unsafe fn from_raw(ptr: *mut ()) -> Self {
        // SAFETY: the caller's contract: the pointer of a live pool's handle.
        Self { inner: unsafe { NonNull::new_unchecked(ptr.cast()) } }
    }
}

impl<S: Spawner> fmt::Debug for ThreadPool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner();
        f.debug_struct("ThreadPool")
            .field("sync", &inner.protocol.load(Ordering::Relaxed))
            .field("max_threads", &inner.protocol.max_threads())
            .field("thread_limit", &inner.protocol.thread_limit())
            .finish_non_exhaustive()
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Builds a pool on the given platform. It starts [`Config::min_threads`] threads and
    /// waits for them; the others start as work waits for them.
    ///
    /// Fails with [`Error::InvalidArgument`] if `max_threads` exceeds
    /// [`MAX_THREADS`](crate::MAX_THREADS) or `min_threads` exceeds the thread limit, with
    /// [`Error::OutOfMemory`] if the allocator fails, and with [`Error::Spawn`] if one of
    /// the `min_threads` could not start (nothing is left allocated and no thread left
    /// running).
    ///
    /// On `std`, with the OS-thread spawner and named threads (a `no_std` host passes its own
    /// [`Spawner`]: see that trait's example):
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool, ThreadSpawner};
    /// let spawner: ThreadSpawner = ThreadSpawner::named("render"); // the default parker
    /// let pool = ThreadPool::with_spawner(Config::default(), spawner).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn(move || tx.send(std::thread::current().name().map(String::from)).unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap().as_deref(), Some("render"));
    /// # }
    /// ```
    pub fn with_spawner(config: Config, spawner: S) -> Result<Self, Error> {
        // Read before `config` is lent out, so that a constant 0 folds the prestart away.
        let min_threads = config.min_threads;
        let inner = Box::leak(Inner::build_boxed(config, spawner)?);
        // SAFETY: boxed, so the link stays put until `Inner`'s drop untracks it.
        unsafe { inner.spawner.track_pool(NonNull::from(&inner.link)) };
        let pool = Self { inner: NonNull::from(inner) };
        if min_threads != 0 {
            return pool.prestarted(min_threads);
        }
        Ok(pool)
    }

    /// `with_spawner`'s prestart (`Config::min_threads`), out of line: a failed start drops
    /// the pool, whose shutdown joins the threads that started.
    #[cold]
    #[inline(never)]
    fn prestarted(self, min_threads: usize) -> Result<Self, Error> {
        self.inner().prestart(min_threads)?;
        Ok(self)
    }

    #[inline]
    pub(crate) fn inner(&self) -> &Inner<S> {
        // SAFETY: `inner` is valid for the handle's whole life (freed in Drop).
        unsafe { self.inner.as_ref() }
    }
}
