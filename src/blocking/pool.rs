//! [`BlockingPool`]: the handle on a blocking pool, and what a caller does with it.

use core::ffi::c_uint;
use core::fmt;
use core::ptr::NonNull;

use alloc::boxed::Box;

use crate::error::Error;
use crate::platform::Spawner;
use crate::raw_handle::RawHandle;

use super::config::BlockingConfig;
use super::handle::{self, BlockingHandle};
use super::inner::Inner;
use super::metrics::BlockingMetrics;
use super::task::BlockingTask;

/// A pool of threads for blocking work, generic over its platform.
///
/// Threads start on demand (one at a time, each started thread starting the next while work
/// waits), up to [`BlockingConfig::max_threads`]; an idle thread exits after
/// [`BlockingConfig::keep_alive`], so an unused pool holds no thread. Tasks wait in an intrusive
/// FIFO (no allocation per task with [`submit`](Self::submit)). At shutdown, tasks still queued
/// are handed back through their cancel callback, unless they are mandatory. The protocol is
/// argued in `src/blocking/README.md`.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{BlockingConfig, BlockingPool};
///
/// let pool = BlockingPool::new(BlockingConfig::default()).unwrap();
/// let handle = pool.spawn_blocking(|| std::fs::metadata("/").is_ok()).unwrap(); // blocking I/O
/// assert_eq!(handle.join(), Ok(true));
/// pool.shutdown().unwrap();
/// assert_eq!(pool.metrics().threads, 0);
/// # }
/// ```
pub struct BlockingPool<S: Spawner> {
    pub(super) inner: NonNull<Inner<S>>,
}

// SAFETY: the handle is a pointer to state built for sharing (atomics, slots whose parkers are
// Sync, and a Spawner that is Send + Sync).
unsafe impl<S: Spawner> Send for BlockingPool<S> {}
// SAFETY: as above; every method takes &self and is thread-safe.
unsafe impl<S: Spawner> Sync for BlockingPool<S> {}

/// For the C layer (`struct pool_blocking *`).
impl<S: Spawner> RawHandle for BlockingPool<S> {
    fn as_raw(&self) -> *mut () {
        self.inner.as_ptr().cast()
    }

    unsafe fn from_raw(ptr: *mut ()) -> Self {
        // SAFETY: the caller's contract: the pointer of a live pool's handle.
        Self { inner: unsafe { NonNull::new_unchecked(ptr.cast()) } }
    }
}

impl<S: Spawner> fmt::Debug for BlockingPool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingPool").field("metrics", &self.metrics()).finish_non_exhaustive()
    }
}

impl<S: Spawner> BlockingPool<S> {
    /// Builds a blocking pool on the given platform. No thread starts until the first submit.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `max_threads` above [`BlockingConfig::MAX_THREADS`];
    /// [`Error::OutOfMemory`] if the allocator fails (nothing is left allocated).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{BlockingConfig, BlockingPool, CondvarParker, ThreadSpawner};
    /// // A `no_std` host passes its own `Spawner` (whose `now_ns` may be `None`: no clock).
    /// let spawner = ThreadSpawner::<CondvarParker>::named("io");
    /// let pool = BlockingPool::with_spawner(BlockingConfig::default(), spawner).unwrap();
    /// let name = pool.spawn_blocking(|| std::thread::current().name().map(String::from)).unwrap();
    /// assert_eq!(name.join().unwrap().as_deref(), Some("io"));
    /// # }
    /// ```
    pub fn with_spawner(config: BlockingConfig, spawner: S) -> Result<Self, Error> {
        let inner = Inner::new(config, spawner)?;
        Ok(Self { inner })
    }

    #[inline]
    pub(super) fn inner(&self) -> &Inner<S> {
        // SAFETY: `inner` is valid for the handle's whole life (freed in Drop).
        unsafe { self.inner.as_ref() }
    }

    /// The most threads this pool runs at once.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig::default().with_max_threads(0)).unwrap();
    /// assert_eq!(pool.max_threads(), pool::BlockingConfig::DEFAULT_MAX_THREADS); // 0: the default
    /// # }
    /// ```
    pub fn max_threads(&self) -> usize {
        self.inner().cap
    }

    /// Bounds the tasks that may wait in the queue (accepted, not yet started) from now on;
    /// 0 removes the bound ([`BlockingConfig::max_queued`]). A submit that finds that many
    /// waiting fails with [`Error::Full`], the task still the caller's. Lowering the bound
    /// below what waits already drops nothing: submits fail until enough tasks have started.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{BlockingConfig, BlockingPool, Error};
    /// use std::sync::mpsc;
    ///
    /// let pool = BlockingPool::new(BlockingConfig::default().with_max_threads(1).with_max_queued(2)).unwrap();
    /// let (started, wait_started) = mpsc::channel();
    /// let (release, released) = mpsc::channel::<()>();
    /// let busy = pool.spawn_blocking(move || { started.send(()).unwrap(); released.recv().unwrap() }).unwrap();
    /// wait_started.recv().unwrap(); // the one thread is busy, the queue empty
    /// let waiting: Vec<_> = (0..2).map(|i| pool.spawn_blocking(move || i).unwrap()).collect();
    /// assert_eq!(pool.spawn_blocking(|| 2).unwrap_err(), Error::Full);
    /// pool.set_max_queued(0); // no bound
    /// let third = pool.spawn_blocking(|| 2).unwrap();
    /// release.send(()).unwrap();
    /// busy.join().unwrap();
    /// assert_eq!(waiting.into_iter().chain([third]).map(|h| h.join().unwrap()).sum::<i32>(), 3);
    /// # }
    /// ```
    pub fn set_max_queued(&self, max_queued: usize) {
        self.inner().set_max_queued(max_queued);
    }

    /// The platform this pool runs on.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::Spawner;
    /// let pool = pool::BlockingPool::new(Default::default()).unwrap();
    /// assert!(pool.spawner().available_parallelism() >= 1);
    /// # }
    /// ```
    pub fn spawner(&self) -> &S {
        &self.inner().spawner
    }

    /// A snapshot of the counters, without taking any lock.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(Default::default()).unwrap();
    /// pool.spawn_blocking(|| ()).unwrap().join().unwrap();
    /// assert!(pool.metrics().threads_spawned >= 1);
    /// pool.shutdown().unwrap(); // the counters are exact once the pool is idle
    /// let m = pool.metrics();
    /// assert_eq!((m.tasks_run, m.queue_depth, m.threads), (1, 0, 0));
    /// # }
    /// ```
    pub fn metrics(&self) -> BlockingMetrics {
        self.inner().metrics()
    }

    /// Whether the calling thread is one of this pool's threads.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::Arc;
    /// let pool = Arc::new(pool::BlockingPool::new(Default::default()).unwrap());
    /// assert!(!pool.is_pool_thread());
    /// let p = pool.clone();
    /// let inside = pool.spawn_blocking(move || p.is_pool_thread()).unwrap();
    /// assert_eq!(inside.join(), Ok(true));
    /// # }
    /// ```
    pub fn is_pool_thread(&self) -> bool {
        self.inner().is_pool_thread()
    }

    /// Submits one blocking task.
    ///
    /// The task runs on an idle thread if there is one, else on a newly started thread if the
    /// cap allows, else it waits in the FIFO for the next thread that finishes.
    ///
    /// # Errors
    /// * [`Error::Shutdown`] once [`shutdown`](Self::shutdown) has begun;
    /// * [`Error::Spawn`] if the pool has no thread and the platform could not start one;
    /// * [`Error::InvalidArgument`] for a task without a callback;
    /// * [`Error::Forked`] in a child that inherited the pool through `fork()`;
    /// * [`Error::Full`] if the queue holds [`max_queued`](BlockingConfig::max_queued) waiting
    ///   tasks.
    ///
    /// On error the task was not queued and is still the caller's.
    ///
    /// # Safety
    /// `task` points to a valid [`BlockingTask`], not currently queued anywhere, that stays
    /// valid, unmoved and unmodified until one of its callbacks has started (see
    /// [`BlockingTask`]).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use pool::{container_of, BlockingConfig, BlockingPool, BlockingTask, Task};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    ///
    /// /// A request the host owns, with the pool's header embedded.
    /// #[repr(C)]
    /// struct Request { header: BlockingTask, outcome: AtomicU32 }
    /// const DONE: u32 = 1;
    /// const CANCELLED: u32 = 2;
    ///
    /// unsafe extern "C" fn serve(task: *mut Task) {
    ///     // SAFETY: every task with these callbacks is the header of a `Request` (the pointer
    ///     // was derived from the whole `Request`), alive until the pool's shutdown returned.
    ///     let req = unsafe { &*container_of!(task.cast::<BlockingTask>(), Request, header) };
    ///     std::thread::sleep(std::time::Duration::from_millis(1)); // the blocking call
    ///     req.outcome.store(DONE, Ordering::Release);
    /// }
    /// unsafe extern "C" fn cancel(task: *mut Task) {
    ///     // SAFETY: as in `serve`.
    ///     let req = unsafe { &*container_of!(task.cast::<BlockingTask>(), Request, header) };
    ///     req.outcome.store(CANCELLED, Ordering::Release);
    /// }
    ///
    /// let pool = BlockingPool::new(BlockingConfig::default().with_max_threads(2)).unwrap();
    /// let mut requests: Vec<Request> = (0..8)
    ///     .map(|_| Request { header: BlockingTask::new(serve).with_cancel(cancel), outcome: AtomicU32::new(0) })
    ///     .collect();
    /// for req in requests.iter_mut() {
    ///     let req: *mut Request = req;
    ///     // SAFETY: `requests` is neither moved nor touched until shutdown has returned.
    ///     unsafe { pool.submit(NonNull::new_unchecked(&raw mut (*req).header)).unwrap() };
    /// }
    /// pool.shutdown().unwrap(); // what had not started yet is handed back through `cancel`
    /// assert!(requests.iter().all(|r| r.outcome.load(Ordering::Acquire) != 0)); // one or the other
    /// # }
    /// ```
    pub unsafe fn submit(&self, task: NonNull<BlockingTask>) -> Result<(), Error> {
        // SAFETY: the caller's contract.
        unsafe { self.inner().submit(task) }
    }

    /// Runs `f` on a blocking thread and returns a handle to its result: join it from a thread
    /// ([`BlockingHandle::join`], `std`) or `.await` it from async code. One allocation per
    /// call (the intrusive [`submit`](Self::submit) allocates nothing).
    ///
    /// If the pool shuts down before `f` started, `f` is dropped and the handle resolves to
    /// [`BlockingJoinError::Cancelled`](super::BlockingJoinError::Cancelled); use [`spawn_mandatory`](Self::spawn_mandatory) for
    /// work that must run. With `std` a panic in `f` resolves the handle to
    /// [`BlockingJoinError::Panicked`](super::BlockingJoinError::Panicked); without `std` it aborts.
    ///
    /// # Errors
    /// As [`submit`](Self::submit); `f` is dropped.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig::default().with_max_threads(4)).unwrap();
    /// let handles: Vec<_> = (0..8)
    ///     .map(|i| pool.spawn_blocking(move || { std::thread::sleep(std::time::Duration::from_millis(1)); i }).unwrap())
    ///     .collect();
    /// assert_eq!(handles.into_iter().map(|h| h.join().unwrap()).sum::<i32>(), 28);
    /// assert!(pool.metrics().peak_threads <= 4); // the cap
    /// # }
    /// ```
    ///
    /// The handle is also a future (the design text's `concurrent()`, the async offload):
    /// awaiting it parks nothing; the blocking thread wakes the awaiting task's waker when `f`
    /// is done.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// # use pool::{BlockingConfig, BlockingPool};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     struct W(std::thread::Thread);
    /// #     impl std::task::Wake for W { fn wake(self: std::sync::Arc<Self>) { self.0.unpark() } }
    /// #     let waker = std::task::Waker::from(std::sync::Arc::new(W(std::thread::current())));
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v } std::thread::park() }
    /// # }
    /// let pool = BlockingPool::new(BlockingConfig::default()).unwrap();
    /// let digest = block_on(async {
    ///     let data = vec![1u8; 1 << 10];
    ///     pool.spawn_blocking(move || data.iter().map(|&b| b as u64).sum::<u64>()).unwrap().await
    /// });
    /// assert_eq!(digest, Ok(1 << 10));
    /// # }
    /// ```
    pub fn spawn_blocking<F, T>(&self, f: F) -> Result<BlockingHandle<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with_flags(f, 0)
    }

    /// As [`spawn_blocking`](Self::spawn_blocking), but `f` runs even if the pool shuts down
    /// before it started.
    ///
    /// # Errors
    /// As [`submit`](Self::submit); `f` is dropped.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig::default().with_max_threads(1)).unwrap();
    /// let flushes: Vec<_> = (0..4).map(|i| pool.spawn_mandatory(move || i).unwrap()).collect();
    /// pool.shutdown().unwrap(); // even those still queued run
    /// assert!(flushes.into_iter().all(|h| h.join().is_ok()));
    /// # }
    /// ```
    pub fn spawn_mandatory<F, T>(&self, f: F) -> Result<BlockingHandle<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with_flags(f, BlockingTask::MANDATORY)
    }

    pub(super) fn spawn_with_flags<F, T>(&self, f: F, flags: c_uint) -> Result<BlockingHandle<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (task, handle) = handle::new_job(f, flags);
        // SAFETY: the job stays alive until one of its callbacks has run (it holds its own
        // reference, released by that callback).
        match unsafe { self.submit(task) } {
            Ok(()) => Ok(handle),
            Err(e) => {
                // SAFETY: not queued, so the task side's reference is still ours to release;
                // dropping the handle then frees the job and the closure.
                unsafe { handle.abandon() };
                drop(handle);
                Err(e)
            }
        }
    }

    /// Stops accepting work, wakes every idle thread, waits for the threads to leave and joins
    /// them. Tasks still queued when it begins are not dropped: mandatory ones (and those
    /// without a cancel callback) run, on the pool's remaining threads or, if there are none,
    /// on the calling thread; every other one has its cancel callback called. Tasks already
    /// running finish. Afterwards the pool has no thread and `submit` fails with
    /// [`Error::Shutdown`].
    ///
    /// # Errors
    /// [`Error::Shutdown`] if shutdown was already done or begun by another call;
    /// [`Error::InvalidArgument`] when called from one of the pool's own threads (it would wait
    /// for itself); [`Error::Forked`] in a child that inherited the pool through `fork()`.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{BlockingConfig, BlockingJoinError, BlockingPool, Error};
    /// use std::sync::{mpsc, Arc};
    ///
    /// let pool = Arc::new(BlockingPool::new(BlockingConfig::default().with_max_threads(1)).unwrap());
    /// let (started_tx, started) = mpsc::channel();
    /// let (release, release_rx) = mpsc::channel::<()>();
    /// let busy = pool.spawn_blocking(move || { started_tx.send(()).unwrap(); release_rx.recv().unwrap() }).unwrap();
    /// started.recv().unwrap(); // the only thread is busy, so the next task waits in the queue
    /// let queued = pool.spawn_blocking(|| "never runs").unwrap();
    /// let p = pool.clone();
    /// let stopper = std::thread::spawn(move || p.shutdown());
    /// while pool.spawn_blocking(|| ()).is_ok() {} // until shutdown has begun (refused: dropped)
    /// release.send(()).unwrap();
    /// assert_eq!(stopper.join().unwrap(), Ok(()));
    /// assert_eq!(busy.join(), Ok(())); // running tasks finish
    /// assert_eq!(queued.join(), Err(BlockingJoinError::Cancelled));
    /// assert_eq!(pool.spawn_blocking(|| ()).unwrap_err(), Error::Shutdown);
    /// # }
    /// ```
    pub fn shutdown(&self) -> Result<(), Error> {
        self.inner().shutdown()
    }
}

impl<S: Spawner> Drop for BlockingPool<S> {
    /// Shuts the pool down (if not done yet), joins its threads and frees it.
    ///
    /// Dropping it from one of its own threads cannot join (the thread would wait for itself):
    /// the pool then begins shutdown, detaches its threads (`Spawner::detach_all`), lets them
    /// drain and exit, and leaks its state instead of freeing memory they still use.
    ///
    /// If a shutdown is in progress on another thread (the C layer's `pool_blocking_shutdown`
    /// racing `pool_blocking_destroy`), this waits for it to finish before freeing. If a
    /// shutdown unwound (a panicking [`Spawner::join_all`]), its threads may still run: the
    /// state is leaked.
    ///
    /// In a child that inherited the pool through `fork()` ([`Error::Forked`]) it returns at
    /// once, freeing what it safely can (`blocking/fork.rs`).
    fn drop(&mut self) {
        let inner = self.inner();
        if inner.link.is_inherited() {
            // SAFETY: inherited through fork, in this child; our handle is given up here.
            unsafe { Inner::free_inherited(self.inner.as_ptr()) };
            return;
        }
        if inner.is_pool_thread() {
            if inner.gate.detach() {
                inner.begin_shutdown();
                // Nobody will join the threads: each is released as it exits instead of
                // staying unjoined (a finished, unjoined thread keeps its stack).
                inner.spawner.detach_all();
            }
            return;
        }
        let _ = inner.shutdown();
        if !inner.gate.wait_finished(|| inner.spawner.new_parker()) {
            return;
        }
        // SAFETY: every thread is joined (shutdown is complete, here or in an earlier call that
        // returned), so this is the only reference; `inner` came from Box::leak.
        drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
    }
}
