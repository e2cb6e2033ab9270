//! The blocking pool: separate, dynamically sized threads for blocking calls and long CPU work,
//! so that such work never starves the work-stealing workers (design text 000).
//!
//! * Threads start on demand when a task arrives and no thread is idle, up to a cap
//!   ([`BlockingConfig::max_threads`], default 512). At most one thread is *being started* at a
//!   time (the `SPAWNING` token, design text 002's "one waking thread" applied to spawning);
//!   each new thread, once running, starts the next one if work is still waiting and no thread
//!   is idle. A burst of N submits therefore grows the pool one thread per thread-start
//!   latency, instead of paying N thread starts on the submitting thread.
//! * An idle thread exits after [`BlockingConfig::keep_alive`] (default 10 s) without work,
//!   so the pool shrinks back to zero threads. Idle threads are woken lowest slot first, so a
//!   shrinking pool keeps a stable low set busy and lets the high slots time out.
//! * Tasks wait in the intrusive FIFO [`Injector`](crate::queue::injector) (zero allocation per
//!   task): the host embeds a [`BlockingTask`] in its own struct, as with [`Task`].
//! * Shutdown ([`BlockingPool::shutdown`]) follows the text's order: set the flag, wake every
//!   idle thread, wait for the threads to leave, join them all (through the spawner, outside
//!   any lock). Tasks still queued are not dropped: those marked
//!   [`BlockingTask::MANDATORY`] run, every other one is handed back to its owner through its
//!   **cancel callback** (we chose the callback over a returned list: each task goes back to
//!   the code that made it, which knows how to free it).
//! * [`BlockingMetrics`] are plain atomic counters, readable without a lock.
//! * Closures: [`BlockingPool::spawn_blocking`] returns a [`BlockingHandle`], which can be
//!   joined from a thread or awaited from async code ([`BlockingPool::concurrent`], the text's
//!   `concurrent()`): completion wakes the awaiting future.
//!
//! The protocol (slot states, the counts word, why no wake-up is lost and why no thread is
//! leaked) is argued in `src/blocking/README.md`.
//!
//! # Notification, spurious wake-up and timeout (no clock in `no_std`)
//! Each thread owns a *slot* with a state word and a parker. A notifier wakes a thread by
//! moving its slot `IDLE -> NOTIFIED` with a compare-and-swap and only then unparking it: the
//! text's `num_notify` counter, made exact and per thread. So when `park_timeout` returns, the
//! state word alone says whether this was a notification (`NOTIFIED`). If it was not, it was a
//! timeout or a spurious return; the optional [`BlockingConfig::clock`] (monotonic
//! nanoseconds; `std` supplies one) tells those apart, and a spurious return parks again for
//! the rest of the keep-alive. **Without a clock** every return without a notification counts
//! as the keep-alive expiring: a parker that returns early only makes a thread leave early
//! (it is started again when needed), it never loses or delays a task.
//!
//! # Invariants
//! * A task accepted by `submit` (it returned `Ok`) runs exactly once, or, if it was still
//!   queued when shutdown began and is not mandatory, its cancel callback is called exactly
//!   once instead (a task without a cancel callback cannot be cancelled: it runs).
//! * `threads` (the count in the counts word) never exceeds the cap: every thread start and
//!   every return from the exit path reserves its place with a compare-and-swap first.
//! * A slot is `EMPTY` exactly when no thread owns it; only the owner moves its slot out of
//!   `RUNNING`/`NOTIFIED`/`EXITING`, and notifiers only ever move `IDLE -> NOTIFIED`. Slots,
//!   with their parkers, live as long as the pool, so an unpark can never reach freed memory.
//! * After the `SHUTDOWN` bit is set no thread is started, so once the count reaches zero
//!   [`Spawner::join_all`] joins every thread this pool ever started.

mod handle;
mod inner;

use core::ffi::c_uint;
use core::fmt;
use core::ptr::{self, NonNull};
use core::time::Duration;

use alloc::boxed::Box;

use crate::platform::Spawner;
use crate::error::Error;
use crate::task::{Callback, Task};
use inner::Inner;

pub use handle::{BlockingHandle, BlockingJoinError};

/// A monotonic clock: nanoseconds since any fixed point (see the module docs).
pub(crate) type Clock = fn() -> u64;

/// How to build a [`BlockingPool`].
///
/// ```
/// use pool::BlockingConfig;
/// use std::time::Duration;
/// let config = BlockingConfig { max_threads: 64, keep_alive: Duration::from_millis(500), ..Default::default() };
/// assert_eq!(BlockingConfig::default().max_threads, 512);
/// # let _ = config;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BlockingConfig {
    /// Most threads the pool runs at once: 1 to [`BlockingConfig::MAX_THREADS`]; 0 means the
    /// default (512). One slot (a state word and a parker) per thread is allocated up front.
    pub max_threads: usize,
    /// How long an idle thread waits for work before it exits. Zero: it exits as soon as it
    /// finds no work.
    pub keep_alive: Duration,
    /// Stack size of each thread in bytes; 0 means the platform default: for `ThreadSpawner`,
    /// Rust std's (2 MiB, or `RUST_MIN_STACK`), not pthread's (the C API's `stack_size = 0`
    /// means pthread's default instead).
    pub stack_size: usize,
    /// A monotonic clock in nanoseconds since any fixed point: it tells a keep-alive timeout
    /// from a spurious return of `park_timeout` (module docs). `Default` supplies one with
    /// `std` (`Instant`), none without.
    pub clock: Option<fn() -> u64>,
}

impl BlockingConfig {
    /// The default cap (the design text's 512).
    pub const DEFAULT_MAX_THREADS: usize = 512;
    /// The largest cap accepted.
    pub const MAX_THREADS: usize = 1 << 16;
    /// The default keep-alive (the design text's 10 s).
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);
}

impl Default for BlockingConfig {
    fn default() -> Self {
        Self {
            max_threads: Self::DEFAULT_MAX_THREADS,
            keep_alive: Self::DEFAULT_KEEP_ALIVE,
            stack_size: 0,
            clock: default_clock(),
        }
    }
}

#[cfg(feature = "std")]
fn default_clock() -> Option<Clock> {
    fn std_clock() -> u64 {
        static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let base = *BASE.get_or_init(std::time::Instant::now);
        u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    Some(std_clock)
}

#[cfg(not(feature = "std"))]
fn default_clock() -> Option<Clock> {
    None
}

/// The header of a blocking task: a [`Task`] plus what shutdown needs to know about it.
///
/// Embed it (first, or anywhere with [`container_of!`](crate::container_of)) in your own
/// `#[repr(C)]` struct and submit a pointer to it. Layout-identical to the C
/// `struct pool_blocking_task { struct task task; void (*cancel)(struct task *); unsigned flags; }`.
///
/// Both callbacks receive a pointer to the embedded `task` field, which is the first field, so
/// the pointer is also a pointer to this header. The contract is [`Task`]'s, extended:
/// * once submitted, **exactly one** of the two callbacks is called, exactly once: `callback`
///   when it runs, or `cancel` when the pool shuts down before it ran and it is not
///   [`MANDATORY`](Self::MANDATORY) (a task without `cancel` runs even then);
/// * the memory stays valid, unmoved and unmodified until that call starts; from then on the
///   pool does not touch it (the callback may free it).
///
/// ```
/// use pool::{container_of, BlockingTask, Task};
///
/// #[repr(C)]
/// struct ReadFile { header: BlockingTask, path: &'static str }
///
/// unsafe extern "C" fn read(task: *mut Task) {
///     // SAFETY: every task with this callback is the header of a `ReadFile`.
///     let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), ReadFile, header) };
///     let _ = job.path; // ... blocking I/O ...
/// }
/// unsafe extern "C" fn give_back(_task: *mut Task) { /* free what the job owns */ }
///
/// let job = ReadFile { header: BlockingTask::new(read).with_cancel(give_back), path: "/etc/hosts" };
/// assert!(!job.header.is_mandatory());
/// ```
#[repr(C)]
pub struct BlockingTask {
    /// The intrusive task: its `next` links the queue, its callback runs the work.
    pub(crate) task: Task,
    /// Called instead of `callback` when shutdown hands the task back; `None`: never cancelled.
    pub(crate) cancel: Option<Callback>,
    /// [`BlockingTask::MANDATORY`] or 0.
    pub(crate) flags: c_uint,
}

// SAFETY: as `Task`: the pool moves it between threads by pointer under the submission contract.
unsafe impl Send for BlockingTask {}
// SAFETY: shared access reads plain fields and touches `next` atomically.
unsafe impl Sync for BlockingTask {}

impl fmt::Debug for BlockingTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingTask")
            .field("task", &self.task)
            .field("cancel", &self.cancel.map(|c| c as *const ()))
            .field("flags", &self.flags)
            .finish()
    }
}

impl BlockingTask {
    /// Flag: run this task even when the pool shuts down before it started.
    pub const MANDATORY: c_uint = 1;

    /// A task that runs `callback`. Until [`with_cancel`](Self::with_cancel) gives it a cancel
    /// callback it cannot be handed back, so it runs even at shutdown.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn fsync(_task: *mut Task) { /* the blocking call */ }
    /// let task = BlockingTask::new(fsync);
    /// assert!(task.is_mandatory()); // no cancel callback: it always runs
    /// ```
    pub fn new(callback: Callback) -> Self {
        Self { task: Task::new(callback), cancel: None, flags: 0 }
    }

    /// Sets the callback shutdown calls instead of `callback` to hand the task back.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn download(_task: *mut Task) {}
    /// unsafe extern "C" fn give_back(_task: *mut Task) { /* free the buffers, report "cancelled" */ }
    /// let task = BlockingTask::new(download).with_cancel(give_back);
    /// assert!(!task.is_mandatory()); // shutdown may hand it back unrun
    /// ```
    pub fn with_cancel(mut self, cancel: Callback) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Marks the task mandatory: it runs even if the pool shuts down before it started.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn flush(_task: *mut Task) {}
    /// unsafe extern "C" fn unused(_task: *mut Task) {}
    /// let task = BlockingTask::new(flush).with_cancel(unused).mandatory();
    /// assert!(task.is_mandatory()); // runs even if shutdown comes first
    /// ```
    pub fn mandatory(mut self) -> Self {
        self.flags |= Self::MANDATORY;
        self
    }

    /// Whether the task runs even when shutdown begins before it started.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn run(_task: *mut Task) {}
    /// assert!(!BlockingTask::new(run).with_cancel(run).is_mandatory());
    /// assert!(BlockingTask::new(run).with_cancel(run).mandatory().is_mandatory());
    /// ```
    pub fn is_mandatory(&self) -> bool {
        self.flags & Self::MANDATORY != 0 || self.cancel.is_none()
    }

    /// The embedded task (what the callbacks receive a pointer to).
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn run(_task: *mut Task) {}
    /// let header = BlockingTask::new(run);
    /// assert!(header.task().callback().is_some());
    /// // The task is the header's first field: the callbacks may cast one pointer to the other.
    /// assert!(core::ptr::eq(header.task(), (&raw const header).cast::<Task>()));
    /// ```
    pub fn task(&self) -> &Task {
        &self.task
    }
}

/// A snapshot of a blocking pool's counters. Every field is one atomic load (Relaxed): no lock
/// is taken, and while the pool runs the fields are individually, not jointly, up to date.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{BlockingConfig, BlockingPool};
/// use std::time::Duration;
///
/// let pool = BlockingPool::new(BlockingConfig { keep_alive: Duration::from_millis(1), ..Default::default() }).unwrap();
/// pool.spawn_blocking(|| ()).unwrap().join().unwrap();
/// // Idle threads leave after the keep-alive. Each field is read on its own and counted after
/// // the fact: `tasks_run` just after the callback returns (`join` may return first), a
/// // leaving thread in `threads_exited` just after it left `threads`.
/// let m = loop {
///     let m = pool.metrics();
///     if m.threads == 0 && m.threads_exited == m.threads_spawned && m.tasks_run == 1 {
///         break m;
///     }
///     std::thread::sleep(Duration::from_millis(1));
/// };
/// assert_eq!(m.queue_depth, 0);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockingMetrics {
    /// Threads started (or being started) and not yet exited.
    pub threads: usize,
    /// Threads waiting for work.
    pub idle_threads: usize,
    /// Tasks accepted and not yet taken by a thread.
    pub queue_depth: usize,
    /// Tasks whose callback ran (including mandatory tasks run during shutdown); counted just
    /// after the callback returns, so a `join` on the task may return before the count moves.
    pub tasks_run: usize,
    /// Tasks handed back through their cancel callback at shutdown.
    pub tasks_cancelled: usize,
    /// Threads started successfully.
    pub threads_spawned: usize,
    /// Threads that exited (keep-alive expired, or shutdown).
    pub threads_exited: usize,
    /// Thread starts the platform refused.
    pub spawn_failures: usize,
    /// The most threads counted at once since the pool was built.
    pub peak_threads: usize,
}

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
    inner: NonNull<Inner<S>>,
}

// SAFETY: the handle is a pointer to state built for sharing (atomics, slots whose parkers are
// Sync, and a Spawner that is Send + Sync).
unsafe impl<S: Spawner> Send for BlockingPool<S> {}
// SAFETY: as above; every method takes &self and is thread-safe.
unsafe impl<S: Spawner> Sync for BlockingPool<S> {}

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
    /// // A `no_std` host passes its own `Spawner` (and `clock: None` if it has no clock).
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
    fn inner(&self) -> &Inner<S> {
        // SAFETY: `inner` is valid for the handle's whole life (freed in Drop).
        unsafe { self.inner.as_ref() }
    }

    /// The most threads this pool runs at once.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig { max_threads: 0, ..Default::default() }).unwrap();
    /// assert_eq!(pool.max_threads(), pool::BlockingConfig::DEFAULT_MAX_THREADS); // 0: the default
    /// # }
    /// ```
    pub fn max_threads(&self) -> usize {
        self.inner().cap
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
    /// * [`Error::InvalidArgument`] for a task without a callback.
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
    /// let pool = BlockingPool::new(BlockingConfig { max_threads: 2, ..Default::default() }).unwrap();
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
    /// [`BlockingJoinError::Cancelled`]; use [`spawn_mandatory`](Self::spawn_mandatory) for
    /// work that must run. With `std` a panic in `f` resolves the handle to
    /// [`BlockingJoinError::Panicked`]; without `std` it aborts.
    ///
    /// # Errors
    /// As [`submit`](Self::submit); `f` is dropped.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig { max_threads: 4, ..Default::default() }).unwrap();
    /// let handles: Vec<_> = (0..8)
    ///     .map(|i| pool.spawn_blocking(move || { std::thread::sleep(std::time::Duration::from_millis(1)); i }).unwrap())
    ///     .collect();
    /// assert_eq!(handles.into_iter().map(|h| h.join().unwrap()).sum::<i32>(), 28);
    /// assert!(pool.metrics().peak_threads <= 4); // the cap
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
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig { max_threads: 1, ..Default::default() }).unwrap();
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

    /// The async offload (the design text's `concurrent()`): runs `f` on a blocking thread and
    /// returns a future for its result. Awaiting it parks nothing: the blocking thread wakes the
    /// awaiting task's waker when `f` is done.
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
    ///     pool.concurrent(move || data.iter().map(|&b| b as u64).sum::<u64>()).unwrap().await
    /// });
    /// assert_eq!(digest, Ok(1 << 10));
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`spawn_blocking`](Self::spawn_blocking).
    pub fn concurrent<F, T>(&self, f: F) -> Result<BlockingHandle<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_blocking(f)
    }

    fn spawn_with_flags<F, T>(&self, f: F, flags: c_uint) -> Result<BlockingHandle<T>, Error>
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
    /// for itself).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{BlockingConfig, BlockingJoinError, BlockingPool, Error};
    /// use std::sync::{mpsc, Arc};
    ///
    /// let pool = Arc::new(BlockingPool::new(BlockingConfig { max_threads: 1, ..Default::default() }).unwrap());
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

    /// In the child after a fork: a fresh state over this pool's (`Inner::reset_after_fork`).
    ///
    /// # Safety
    /// As `Inner::reset_after_fork`.
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn reset_after_fork(&self, spawner: S) -> Result<(), Error> {
        // SAFETY: forwarded contract; `inner` is this pool's live state.
        unsafe { Inner::reset_after_fork(self.inner.as_ptr(), spawner) }
    }

    /// In the child after a fork: every submit is refused from here on.
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn close_inherited(&self) {
        self.inner().close_inherited();
    }

    /// In the child after a fork: frees what can be freed, without shutting down.
    ///
    /// # Safety
    /// As `Inner::free_inherited`; `self` is the only handle.
    #[cfg(feature = "std")]
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn free_inherited(self) {
        let raw = self.inner.as_ptr();
        core::mem::forget(self);
        // SAFETY: forwarded contract.
        unsafe { Inner::free_inherited(raw) };
    }

    /// Gives up the handle without shutting down, for the C layer (`struct pool_blocking *`).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn into_raw(self) -> *mut () {
        let ptr = self.inner.as_ptr().cast::<()>();
        core::mem::forget(self);
        ptr
    }

    /// Rebuilds a handle from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// `ptr` came from `into_raw` of a pool with this `S`, and no other owning handle exists.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn from_raw(ptr: *mut ()) -> Self {
        // SAFETY: the caller's contract (non-null: it came from a live pool).
        Self { inner: unsafe { NonNull::new_unchecked(ptr.cast()) } }
    }

    /// Borrows a handle from [`into_raw`](Self::into_raw) without taking ownership.
    ///
    /// # Safety
    /// As [`from_raw`](Self::from_raw), and the pool outlives the returned value.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn borrow_raw(ptr: *mut ()) -> core::mem::ManuallyDrop<Self> {
        // SAFETY: the caller's contract.
        core::mem::ManuallyDrop::new(unsafe { Self::from_raw(ptr) })
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
    fn drop(&mut self) {
        let inner = self.inner();
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

/// The pointer a slot stores as the "current worker" (first field: the pool's identity).
#[inline]
pub(crate) fn same_pool(current: *const (), pool: *const ()) -> bool {
    if current.is_null() {
        return false;
    }
    // SAFETY: every pointer a pool of this crate stores as the current worker points to a
    // `#[repr(C)]` struct whose first field is a pointer to its pool (scheduler `Worker`,
    // blocking `Slot`), live while the thread runs in that pool.
    unsafe { ptr::read(current.cast::<*const ()>()) == pool }
}
