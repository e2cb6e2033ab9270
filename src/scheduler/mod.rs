//! The thread pool: [`ThreadPool`], its [`Config`] and [`Error`].
//!
//! Design text 002 end to end. The pool owns the injector, the `Sync` word, the list of
//! workers and the platform ([`Spawner`]). Threads start lazily: the first submit starts the
//! first thread, and each notify may start one more while none is idle, up to `max_threads`.
//! The sleep/wake protocol is in [`sleep`] and argued in `scheduler/README.md`; the worker loop
//! in [`worker`], the adaptive injector interval it uses in [`interval`], its counters in
//! [`stats`].
//!
//! # Shutdown
//! [`ThreadPool::shutdown`] (also run by `Drop`):
//! 1. closes the injector: from here on, submits from outside the pool's threads fail with
//!    [`Error::Shutdown`]; every submit that returned `Ok` before is in the queue;
//! 2. moves `Sync` to `Shutdown` and unparks every worker;
//! 3. workers run everything still queued (tasks running on them may still submit to their own
//!    queues: that work is part of what was queued), then exit; the last one out wakes us;
//! 4. joins every thread through the spawner;
//! 5. runs, on the calling thread, anything left in the injector — possible only if no thread
//!    could ever be started, or if an external submit accepted just before step 1 was still
//!    linking its task while the workers left (it waits that out) — so no accepted task is
//!    dropped.

pub(crate) mod context;
#[cfg(feature = "std")]
mod fork;
pub(crate) mod interval;
pub(crate) mod sleep;
pub(crate) mod stats;
pub(crate) mod worker;

use core::fmt;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use crate::fallible::{try_box, try_boxed_slice};
use crate::platform::{Parker, Spawner};
use crate::queue::injector::Injector;
use crate::sync::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, CachePadded, Ordering};
use crate::shutdown::ShutdownGate;
use crate::sync_word::{State, Sync, MAX_THREADS};
use crate::task::{Batch, Task};
use stats::Counters;
pub use stats::WorkerStats;
pub use context::WorkerContext;
use worker::{Until, Worker};

/// How to build a pool.
///
/// ```
/// use pool::Config;
/// // Two threads with 256 KiB stacks; `..Config::default()` keeps the rest at their defaults.
/// let config = Config { max_threads: 2, stack_size: 256 << 10, ..Config::default() };
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(config).unwrap();
/// assert_eq!(pool.max_threads(), 2);
/// # }
/// // The default: one thread per CPU, the platform's stack size, a short spin before sleeping.
/// assert_eq!(Config::default(), Config { max_threads: 0, stack_size: 0, idle_spins: pool::DEFAULT_IDLE_SPINS });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most threads the pool starts; 0 means the platform's available parallelism. At most
    /// [`MAX_THREADS`](crate::MAX_THREADS).
    pub max_threads: usize,
    /// Stack size of each thread in bytes; 0 means the platform default: for
    /// `ThreadSpawner`, Rust std's (2 MiB, or `RUST_MIN_STACK`), not
    /// pthread's (the C API's `stack_size = 0` means pthread's default instead).
    pub stack_size: usize,
    /// Rounds (one load and one spin-loop hint each) an idle worker watches for new work from
    /// outside the pool before it sleeps, so that a submit soon after costs neither side a
    /// system call (`scheduler/README.md`, "Idle means idle"); 0 sleeps at once. At most
    /// [`MAX_IDLE_SPINS`](crate::MAX_IDLE_SPINS); default
    /// [`DEFAULT_IDLE_SPINS`](crate::DEFAULT_IDLE_SPINS).
    pub idle_spins: u32,
}

/// [`Config::idle_spins`]'s default: 256 rounds, about 7 µs on the machine it was measured on
/// (a spin-loop hint takes ~30 ns there; `scheduler/README.md` has the figures). 0 under loom,
/// where spinning would multiply every model's interleavings; the spin phase has a model of
/// its own that asks for it (`tests/loom_sync.rs`).
pub const DEFAULT_IDLE_SPINS: u32 = if cfg!(loom) { 0 } else { 256 };

/// The most [`Config::idle_spins`] a pool accepts (more is refused as an invalid argument).
pub const MAX_IDLE_SPINS: u32 = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Self { max_threads: 0, stack_size: 0, idle_spins: DEFAULT_IDLE_SPINS }
    }
}

/// Why a pool operation failed.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, Error, ThreadPool};
///
/// let too_many = Config { max_threads: pool::MAX_THREADS + 1, ..Config::default() };
/// assert_eq!(ThreadPool::new(too_many).unwrap_err(), Error::InvalidArgument);
///
/// let pool = ThreadPool::new(Config::default()).unwrap();
/// pool.shutdown().unwrap();
/// let refused = pool.spawn(|| ()).unwrap_err();
/// assert_eq!(refused, Error::Shutdown);
/// assert_eq!(refused.to_string(), "the pool is shut down");
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range (or, at the C boundary, a pointer is NULL).
    InvalidArgument,
    /// The pool is shutting down or shut down; the work was not accepted.
    Shutdown,
    /// The pool has no thread and could not start one; the work was not accepted.
    Spawn,
    /// A configuration that must come before first use came after it: the process-wide
    /// blocking pool was already built ([`configure_global_blocking`](crate::configure_global_blocking)).
    AlreadyStarted,
    /// A count would leave its range ([`CountLatch::try_add`](crate::CountLatch::try_add));
    /// nothing was changed.
    Overflow,
    /// The allocator failed: nothing was built (a constructor), or the thread was not started.
    OutOfMemory,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::InvalidArgument => "invalid argument",
            Error::Shutdown => "the pool is shut down",
            Error::Spawn => "no thread could be started",
            Error::AlreadyStarted => "already started: configure it before its first use",
            Error::Overflow => "a count would overflow",
            Error::OutOfMemory => "out of memory",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Counters kept by the pool (Relaxed; approximate while the pool runs).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
/// assert_eq!(pool.stats().threads, 0); // threads start lazily
/// pool.spawn(|| ()).unwrap();
/// let stats = pool.stats();
/// assert!(stats.threads >= 1 && stats.idle_threads <= stats.threads);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Threads started and not yet exited.
    pub threads: usize,
    /// Threads counted idle (asleep or about to sleep).
    pub idle_threads: usize,
    /// Worker slots (`max_threads`): the indices [`ThreadPool::worker_stats`] accepts.
    pub workers: usize,
    // The per-worker counters below are summed over every worker (see
    // `ThreadPool::worker_stats` for one) plus the work done on threads that are not workers.
    /// Async tasks spawned (`spawn_future`, accepted).
    pub spawned: usize,
    /// Tasks run: intrusive tasks, closures, fork-join jobs taken from a queue, async task
    /// polls (one run of an async task is one poll; a cancellation counts as one).
    pub polled: usize,
    /// Tasks obtained by stealing from another worker (every task a steal moved).
    pub stolen: usize,
    /// Successful steal operations (a steal-half moves several tasks at once).
    pub steals: usize,
    /// Times a worker went to sleep.
    pub parks: usize,
    /// Tasks taken from a worker's LIFO slot.
    pub lifo_hits: usize,
    /// Batches fetched from the injector by workers.
    pub injector_fetches: usize,
    /// Thread starts that failed.
    pub spawn_failures: usize,
}

/// The state shared by the pool's handle and its threads. Heap-allocated and pinned.
pub(crate) struct Inner<S: Spawner> {
    /// The packed `Sync` word (see `sync_word`). Padded: every notify reads it.
    sync: CachePadded<AtomicU32>,
    /// External submissions and ring overflow.
    pub(crate) injector: Injector,
    /// Push-only intrusive list of workers (newest first).
    workers: AtomicPtr<Worker<S>>,
    /// Worker by index, for `wake_one`.
    worker_table: Box<[AtomicPtr<Worker<S>>]>,
    /// One bit per worker index: set while the worker is parking.
    idle_map: Box<[AtomicUsize]>,
    /// Idle workers in their spin phase (counted in `idle`, not yet in `idle_map`): a notify
    /// that sees one leaves the wake to it instead of unparking a sleeper (`sleep.rs`).
    spinning: AtomicUsize,
    /// Rounds an idle worker watches `Sync` before it parks (`Config::idle_spins`).
    idle_spins: u32,
    /// Next worker index to hand out.
    next_index: AtomicUsize,
    max_threads: u32,
    stack_size: usize,
    /// The thread in `shutdown` sleeps on this until the last worker leaves.
    join_parker: S::Parker,
    /// Claimed by the first `shutdown` call; the dropper waits on it (`crate::shutdown`).
    gate: ShutdownGate,
    /// Shutdown has fired the timers and woken the I/O waiters (`release_waits`): a draining
    /// worker leaves only once it searched after this was set, so the delayed tasks that fire
    /// queues run on the workers, as pool tasks, and not on the shutdown thread after them.
    waits_released: AtomicBool,
    stats_spawn_failed: AtomicUsize,
    /// Counters of events on threads that are not workers (shared: `bump_shared`).
    pub(crate) outside: CachePadded<Counters>,
    pub(crate) spawner: S,
    /// Async runtime state: references held by live tasks (they keep this memory alive past
    /// the handle's drop), runtime counters. See `runtime::pool`.
    pub(crate) runtime: crate::runtime::PoolRuntime,
}

impl<S: Spawner> Inner<S> {
    /// Shutdown (`ThreadPool::shutdown`, and the detaching drop), after `begin_shutdown`: fires
    /// the timers and lets the I/O driver wake its waiters ([`crate::io::Driver::shutdown`]),
    /// so the waiting tasks are woken into a closing pool and cancelled, and shutdown waits for
    /// neither a deadline nor I/O; then lets the draining workers leave (`waits_released`) and
    /// unparks them to see it. Until then a worker that drained everything parks instead of
    /// leaving: a delayed task the fire queues is a pool task, whose own submits must be
    /// accepted, and only a worker can give it that (on the shutdown thread, after the workers
    /// left, they would be refused).
    fn release_waits(&self) {
        self.shutdown_timers();
        self.runtime.driver.shutdown();
        // Release: the fire's pushes come before the flag; a worker that reads it (Acquire)
        // before a search finds them. The fence pairs with the one in `waits_released`, a
        // Dekker pair over the flag and the workers' list: either a worker registered too late
        // for our walk below reads the flag set, or the walk finds it and unparks it (loom:
        // `driver_install_racing_shutdown`, whose worker starts while the pool shuts down).
        self.waits_released.store(true, Ordering::Release);
        crate::sync::fence(Ordering::SeqCst);
        self.unpark_all();
    }

    /// Whether shutdown released its waits (`release_waits`). Draining workers only: the fence
    /// is the worker's half of `release_waits`' pair (its registration in the workers' list
    /// came before).
    pub(crate) fn waits_released(&self) -> bool {
        crate::sync::fence(Ordering::SeqCst);
        self.waits_released.load(Ordering::Acquire)
    }

    /// Whether no task is queued or running (`ThreadPool::wait_idle`): every started thread is
    /// counted idle, none of them sleeps inside a task's wait, and every queue is empty. Once
    /// true it stays true until the next submit, which is not ordered with this check anyway.
    fn is_idle(&self) -> bool {
        let s = self.load_sync(Ordering::Relaxed);
        // Pairs with the Release fence a worker makes before it counts itself idle inside a
        // task's wait (`worker.rs`): seeing that count, we see its `waiting_in_task`.
        crate::sync::fence(Ordering::Acquire);
        if s.state() == State::Shutdown {
            return s.spawned() == 0 && self.injector.is_empty();
        }
        if s.idle() != s.spawned() || !self.injector.is_empty() {
            return false;
        }
        let mut worker = self.workers.load(Ordering::Acquire);
        while let Some(w) = NonNull::new(worker) {
            // SAFETY: workers live until the pool is dropped; `next` is immutable once published.
            let w = unsafe { w.as_ref() };
            if w.waiting_in_task.load(Ordering::Relaxed)
                || !w.ring.is_empty()
                || !w.joins.is_empty_hint()
                || !w.lifo.load(Ordering::Relaxed).is_null()
            {
                return false;
            }
            worker = w.next;
        }
        // Nobody woke meanwhile (a wake would have changed the word).
        self.load_sync(Ordering::Acquire) == s
    }
}

impl<S: Spawner> Inner<S> {
    /// This thread's worker context, if this thread is one of this pool's workers.
    #[inline]
    pub(crate) fn current_context(&self) -> Option<&WorkerContext<S>> {
        let cx = self.spawner.current_worker();
        if cx.is_null() {
            return None;
        }
        // A non-null current worker was stored on this thread by some pool's `worker_main` (a
        // `WorkerContext<_>` in its frame, live while the thread runs the pool's loop, which
        // encloses everything this thread runs meanwhile) or by a blocking pool (a struct with
        // the same first field).
        // SAFETY: both are repr(C) with the pool pointer first, so reading that field is valid
        // whatever the type.
        let pool = unsafe { *cx.cast::<*const ()>() };
        if pool != ptr::from_ref(self).cast::<()>() {
            return None;
        }
        // SAFETY: stored by this pool's `worker_main`, so the type is `WorkerContext<S>`; it is
        // this thread's (the slot is thread-local) and outlives this call (see above).
        Some(unsafe { &*cx.cast::<WorkerContext<S>>() })
    }
}

impl<S: Spawner> Drop for Inner<S> {
    fn drop(&mut self) {
        let mut worker = self.workers.load(Ordering::Acquire);
        while !worker.is_null() {
            // SAFETY: every thread is joined (drop runs after shutdown), so nothing else
            // references the workers; each was leaked from a Box in `register`.
            let boxed = unsafe { Box::from_raw(worker) };
            worker = boxed.next;
        }
    }
}

impl<S: Spawner> Inner<S> {
    /// A pool's state for `config`, not yet in its place (`ThreadPool::with_spawner` boxes it;
    /// a reset after fork writes it over the old one).
    fn build(config: Config, spawner: S) -> Result<Self, Error> {
        let max_threads = match config.max_threads {
            0 => spawner.available_parallelism().clamp(1, MAX_THREADS),
            n if n <= MAX_THREADS => n,
            _ => return Err(Error::InvalidArgument),
        };
        if config.idle_spins > MAX_IDLE_SPINS {
            return Err(Error::InvalidArgument);
        }
        let words = max_threads.div_ceil(usize::BITS as usize);
        let worker_table = try_boxed_slice(max_threads, |_| AtomicPtr::new(ptr::null_mut()))?;
        let idle_map = try_boxed_slice(words, |_| AtomicUsize::new(0))?;
        Ok(Inner {
            sync: CachePadded(AtomicU32::new(Sync::default().0)),
            injector: Injector::new(),
            workers: AtomicPtr::new(ptr::null_mut()),
            worker_table,
            idle_map,
            spinning: AtomicUsize::new(0),
            idle_spins: config.idle_spins,
            next_index: AtomicUsize::new(0),
            max_threads: max_threads as u32,
            stack_size: config.stack_size,
            join_parker: spawner.new_parker(),
            gate: ShutdownGate::new(),
            waits_released: AtomicBool::new(false),
            stats_spawn_failed: AtomicUsize::new(0),
            outside: CachePadded(Counters::default()),
            runtime: crate::runtime::PoolRuntime::new(),
            spawner,
        })
    }
}

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
/// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
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
    /// Also built, never dropped, by the async runtime's tasks (`runtime::pool`).
    pub(crate) inner: NonNull<Inner<S>>,
}

// SAFETY: the handle is a pointer to state designed for sharing (atomics, and a Spawner that is
// Send + Sync).
unsafe impl<S: Spawner> Send for ThreadPool<S> {}
// SAFETY: as above; every method takes &self and is thread-safe.
unsafe impl<S: Spawner> core::marker::Sync for ThreadPool<S> {}

impl<S: Spawner> fmt::Debug for ThreadPool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner();
        f.debug_struct("ThreadPool")
            .field("sync", &inner.load_sync(Ordering::Relaxed))
            .field("max_threads", &inner.max_threads)
            .finish_non_exhaustive()
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Builds a pool on the given platform. No thread starts until the first submit.
    ///
    /// Fails with [`Error::InvalidArgument`] if `max_threads` exceeds
    /// [`MAX_THREADS`](crate::MAX_THREADS), and with [`Error::OutOfMemory`] if the allocator
    /// fails (nothing is left allocated).
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
        let inner = try_box(Inner::build(config, spawner)?)?;
        Ok(Self { inner: NonNull::from(Box::leak(inner)) })
    }

    #[inline]
    pub(crate) fn inner(&self) -> &Inner<S> {
        // SAFETY: `inner` is valid for the handle's whole life (freed in Drop).
        unsafe { self.inner.as_ref() }
    }

    /// The most threads this pool will start.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap(); // 0: one per CPU
    /// let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    /// assert_eq!(pool.max_threads(), cpus);
    /// # }
    /// ```
    pub fn max_threads(&self) -> usize {
        self.inner().max_threads as usize
    }

    /// The platform this pool runs on.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, Spawner, ThreadPool};
    /// let pool = ThreadPool::new(Config::default()).unwrap();
    /// assert!(pool.spawner().available_parallelism() >= 1);
    /// # }
    /// ```
    pub fn spawner(&self) -> &S {
        &self.inner().spawner
    }

    /// A snapshot of the pool's counters.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// for _ in 0..100 {
    ///     pool.spawn(|| ()).unwrap();
    /// }
    /// pool.shutdown().unwrap();
    /// let stats = pool.stats();
    /// assert_eq!((stats.threads, stats.spawn_failures), (0, 0)); // all joined
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let inner = self.inner();
        let s = inner.load_sync(Ordering::Relaxed);
        let mut total = inner.outside.snapshot();
        for index in 0..inner.worker_table.len() {
            if let Some(worker) = inner.worker_at(index) {
                total = total.sum(Worker::stats_of(worker).snapshot());
            }
        }
        Stats {
            threads: s.spawned() as usize,
            // Workers idle when shutdown came leave without giving their idle count back
            // (nothing reads it after Shutdown): none is idle then (tests/stats.rs).
            idle_threads: if s.state() == State::Shutdown { 0 } else { s.idle() as usize },
            workers: inner.worker_table.len(),
            spawned: total.spawned,
            polled: total.polled,
            stolen: total.stolen,
            steals: total.steals,
            parks: total.parks,
            lifo_hits: total.lifo_hits,
            injector_fetches: total.injector_fetches,
            spawn_failures: inner.stats_spawn_failed.load(Ordering::Relaxed),
        }
    }

    /// The counters of worker `index` (`0..max_threads`; all zero for a worker whose thread
    /// has not started yet), or `None` for an index out of range. Lock-free, as
    /// [`stats`](Self::stats); work done on threads that are not workers is only in `stats`.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool};
    /// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
    /// assert_eq!(pool.worker_stats(0).unwrap().polled, 0);
    /// assert!(pool.worker_stats(2).is_none());
    /// # }
    /// ```
    pub fn worker_stats(&self, index: usize) -> Option<WorkerStats> {
        let inner = self.inner();
        if index >= inner.worker_table.len() {
            return None;
        }
        Some(match inner.worker_at(index) {
            Some(worker) => Worker::stats_of(worker).snapshot(),
            None => WorkerStats::default(),
        })
    }

    /// Whether the calling thread is one of this pool's worker threads.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::Arc;
    /// let pool = Arc::new(pool::ThreadPool::new(pool::Config::default()).unwrap());
    /// assert!(!pool.is_worker_thread());
    /// let (p, (tx, rx)) = (pool.clone(), std::sync::mpsc::channel());
    /// pool.spawn(move || {
    ///     let on_worker = p.is_worker_thread();
    ///     drop(p); // before `send`: the last handle must not drop on a worker (it could not join)
    ///     tx.send(on_worker).unwrap();
    /// })
    /// .unwrap();
    /// assert!(rx.recv().unwrap());
    /// # }
    /// ```
    pub fn is_worker_thread(&self) -> bool {
        self.current_worker().is_some()
    }

    /// This thread's worker context, if this thread is one of this pool's workers: the one
    /// thread-local lookup of an entry point (`scheduler/context.rs`).
    #[inline]
    pub(crate) fn current_worker(&self) -> Option<&WorkerContext<S>> {
        self.inner().current_context()
    }

    /// Submits one task.
    ///
    /// From one of this pool's threads, the task goes to that thread's own queue (no shared
    /// write on the fast path); from any other thread, to the pool's injector.
    ///
    /// Order: a pool with one thread (`max_threads == 1`) starts the tasks submitted from
    /// outside it in submission order (each submitting thread's order when several submit).
    /// A task's own submits are not ordered against them (a LIFO submit may run first), and a
    /// task that waits through the pool may run later tasks inside its wait. With several
    /// threads, tasks run in parallel and no order is promised.
    ///
    /// # Errors
    /// [`Error::Shutdown`] after `shutdown` began (from outside the pool's threads),
    /// [`Error::Spawn`] if the pool has no thread and cannot start one. On error the task was
    /// not queued and is still the caller's.
    ///
    /// # Safety
    /// `task` points to a valid [`Task`] with a callback, not currently queued anywhere, that
    /// stays valid and unmoved until its callback has started (see [`Task`]).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use pool::{container_of, Config, Signal, Task, ThreadPool};
    ///
    /// #[repr(C)]
    /// struct Add { a: u64, b: u64, sum: u64, task: Task, done: Signal }
    ///
    /// unsafe extern "C" fn add(task: *mut Task) {
    ///     let job = container_of!(task, Add, task);
    ///     // SAFETY: every task with this callback is the `task` field of an `Add`, and its
    ///     // pointer was derived from the whole `Add`; the submitter reads `sum` only after
    ///     // `done` is set, and `set` is the last access (the job may be freed after it).
    ///     unsafe {
    ///         (*job).sum = (*job).a + (*job).b;
    ///         (*job).done.set();
    ///     }
    /// }
    ///
    /// let pool = ThreadPool::new(Config::default()).unwrap();
    /// let mut job = Add { a: 40, b: 2, sum: 0, task: Task::new(add), done: Signal::new() };
    /// let job_ptr: *mut Add = &mut job;
    /// // SAFETY: `job` stays put until its callback set `done`, which we wait for; we touch it
    /// // only through `job_ptr` meanwhile.
    /// unsafe {
    ///     pool.submit(NonNull::new_unchecked(&raw mut (*job_ptr).task)).unwrap();
    ///     pool.wait_for(&(*job_ptr).done);
    /// }
    /// assert_eq!(job.sum, 42);
    /// # }
    /// ```
    #[inline]
    pub unsafe fn submit(&self, task: NonNull<Task>) -> Result<(), Error> {
        // SAFETY: forwarded contract.
        unsafe { self.submit_batch(Batch::from(task)) }
    }

    /// Submits a batch of tasks with one queue operation (from outside) or one notification
    /// (from a worker).
    ///
    /// # Errors
    /// As [`submit`](Self::submit); on error no task of the batch was queued.
    ///
    /// # Safety
    /// Every task of the batch meets [`submit`](Self::submit)'s contract.
    ///
    /// Example: [`Batch::push`].
    #[inline]
    pub unsafe fn submit_batch(&self, mut batch: Batch) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        let inner = self.inner();
        if let Some(worker) = self.current_worker() {
            while let Some(task) = batch.pop() {
                inner.push_ring(worker, task);
            }
            inner.notify(false);
            return Ok(());
        }
        if inner.load_sync(Ordering::Relaxed).spawned() == 0 {
            self.start_first_thread()?;
        }
        inner.injector.push(batch, true).map_err(|_| Error::Shutdown)?;
        inner.notify(false);
        Ok(())
    }

    /// Submits a task to run next on this worker (its LIFO slot: cache-hot, design text 003),
    /// when called from one of the pool's threads; from elsewhere, as [`submit`](Self::submit).
    ///
    /// The slot's previous task moves to the back of the worker's ring. At most
    /// three LIFO tasks run in a row before the ring gets a turn, and an idle worker steals a
    /// slot's task when its owner's ring is empty, so nothing is stranded behind a long task.
    ///
    /// # Errors
    /// As [`submit`](Self::submit).
    ///
    /// # Safety
    /// As [`submit`](Self::submit).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use pool::{Config, Task, ThreadPool};
    /// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
    ///
    /// static ORDER: AtomicUsize = AtomicUsize::new(0);
    /// static mut CONTINUATION: Task = Task::new(continuation);
    /// unsafe extern "C" fn continuation(_: *mut Task) {
    ///     ORDER.fetch_add(1, Ordering::Relaxed);
    /// }
    ///
    /// let pool = Arc::new(ThreadPool::new(Config { max_threads: 1, ..Config::default() }).unwrap());
    /// let p = pool.clone();
    /// pool.spawn(move || {
    ///     // From a worker: runs right after this task, on this thread, before older queued work.
    ///     // SAFETY: a static task, submitted once.
    ///     unsafe { p.submit_lifo(NonNull::new_unchecked(&raw mut CONTINUATION)).unwrap() };
    /// })
    /// .unwrap();
    /// pool.shutdown().unwrap();
    /// assert_eq!(ORDER.load(Ordering::Relaxed), 1);
    /// # }
    /// ```
    #[inline]
    pub unsafe fn submit_lifo(&self, task: NonNull<Task>) -> Result<(), Error> {
        let inner = self.inner();
        match self.current_worker() {
            Some(worker) => {
                inner.push_lifo(worker, task);
                inner.notify(false);
                Ok(())
            }
            // SAFETY: forwarded contract.
            None => unsafe { self.submit(task) },
        }
    }

    /// Waits until `signal` is set. On one of this pool's workers, runs other queued tasks
    /// meanwhile (help-until-complete) and sleeps inside the pool's sleep protocol when there
    /// are none, so new work still wakes it. On any other thread, parks (block-on).
    ///
    /// The signal may be set from any thread, once. See [`Signal`](crate::Signal).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, Signal, ThreadPool};
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(ThreadPool::new(Config { max_threads: 1, ..Config::default() }).unwrap());
    /// let (p, (tx, rx)) = (pool.clone(), std::sync::mpsc::channel());
    /// pool.spawn(move || {
    ///     // On the pool's only worker: waiting runs the queued task that sets the signal.
    ///     let inner = Arc::new(Signal::new());
    ///     let setter = inner.clone();
    ///     // SAFETY: the only `set`.
    ///     p.spawn(move || unsafe { setter.set() }).unwrap();
    ///     p.wait_for(&inner);
    ///     drop(p); // before `send`: the last handle must not drop on a worker (it could not join)
    ///     tx.send(inner.is_set()).unwrap();
    /// })
    /// .unwrap();
    /// assert!(rx.recv().unwrap());
    /// # }
    /// ```
    pub fn wait_for(&self, signal: &crate::Signal) {
        self.wait_until(Until { signal, thief: None });
    }

    /// `wait_for`, told which worker runs the awaited job when known (a stolen join half).
    pub(crate) fn wait_until(&self, until: Until<'_>) {
        let signal = until.signal;
        if signal.is_set() {
            return;
        }
        match self.current_worker() {
            Some(cx) => cx.wait_until(until),
            // Waits for SET in `parker`'s scope: after SETTING the setter may still be inside
            // its `unpark` (tests/waiter_parker.rs; found by the capi_ops fuzz target under
            // ASan).
            None => signal.park_until_set(&self.inner().spawner.new_parker()),
        }
    }

    /// Waits until every task submitted to this pool before the call has finished: the pool
    /// is idle (every started thread asleep or about to sleep with no task of its own waiting,
    /// every queue empty). Work submitted meanwhile may or may not be waited for. It checks
    /// with a backoff that sleeps up to 1 ms between looks (no busy spinning), so it returns
    /// within about a millisecond of the pool going idle. A task blocked in a wait (a latch an
    /// outside thread will release, say) keeps the pool busy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when called on one of this pool's own threads (it would wait
    /// for itself).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..100 {
    ///     let done = done.clone();
    ///     pool.spawn(move || { done.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// pool.wait_idle().unwrap();
    /// assert_eq!(done.load(Ordering::Relaxed), 100);
    /// # }
    /// ```
    pub fn wait_idle(&self) -> Result<(), Error> {
        if self.current_worker().is_some() {
            return Err(Error::InvalidArgument);
        }
        let inner = self.inner();
        let parker = inner.spawner.new_parker();
        let mut pause_us = 1;
        while !inner.is_idle() {
            if pause_us < 8 {
                for _ in 0..64 {
                    crate::sync::spin_hint();
                }
            } else {
                parker.park_timeout(core::time::Duration::from_micros(pause_us));
            }
            pause_us = (pause_us * 2).min(1_000);
        }
        Ok(())
    }

    /// Waits until every unit added to `latch` is done (as [`wait_for`](Self::wait_for)).
    /// Call once per latch, from the one thread that waits.
    ///
    /// Example: [`CountLatch`](crate::CountLatch).
    pub fn wait_for_latch(&self, latch: &crate::CountLatch) {
        match self.current_worker() {
            Some(cx) => cx.wait_for_latch(latch),
            None => {
                if let Some(signal) = latch.close() {
                    self.wait_for(signal);
                }
            }
        }
    }

    /// The pool has no thread: start one before accepting work, so a pool that can never run
    /// anything says so instead of queueing silently.
    #[cold]
    pub(crate) fn start_first_thread(&self) -> Result<(), Error> {
        let inner = self.inner();
        if inner.injector.is_closed() {
            return Err(Error::Shutdown);
        }
        inner.notify(false);
        let s = inner.load_sync(Ordering::Acquire);
        if s.state() == State::Shutdown {
            return Err(Error::Shutdown);
        }
        if s.spawned() == 0 {
            return Err(Error::Spawn);
        }
        Ok(())
    }

    /// Stops accepting external work, runs everything already queued, and joins every thread.
    /// In this order: submits from outside the pool's threads fail from here on (every one that
    /// returned `Ok` before is queued); every worker is woken and runs what is queued (tasks
    /// may still submit to their own worker's queue), then exits; the threads are joined;
    /// anything still queued (possible only if no thread could ever start) runs on the calling
    /// thread. No accepted task is dropped. `Drop` does the same.
    ///
    /// Must not be called from one of the pool's own threads (it would wait for itself):
    /// that returns [`Error::InvalidArgument`].
    ///
    /// # Errors
    /// [`Error::Shutdown`] if the pool was already shut down (or is being shut down by
    /// another thread); [`Error::InvalidArgument`] from inside the pool.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..1000 {
    ///     let ran = ran.clone();
    ///     pool.spawn(move || { ran.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// pool.shutdown().unwrap(); // everything queued ran
    /// assert_eq!(ran.load(Ordering::Relaxed), 1000);
    /// assert_eq!(pool.shutdown(), Err(pool::Error::Shutdown));
    /// # }
    /// ```
    pub fn shutdown(&self) -> Result<(), Error> {
        if self.current_worker().is_some() {
            return Err(Error::InvalidArgument);
        }
        let inner = self.inner();
        let Some(finishing) = inner.gate.claim() else { return Err(Error::Shutdown) };
        inner.injector.close();
        inner.begin_shutdown();
        // Tasks are no longer polled: pending timers fire now (sleepers are cancelled, delayed
        // tasks queued) and tasks waiting for I/O are woken (cancelled): shutdown never waits
        // for a deadline or for I/O.
        inner.release_waits();
        inner.wait_for_threads();
        inner.spawner.join_all();
        // Left-overs: tasks no thread could ever run, and external submits that were accepted
        // (their CAS on the injector's tail came before `close`) but were still linking while
        // the workers drained and left (the consumer reports such a queue empty). Wait those
        // out, then run what is left here (loom: `sync_external_submit_racing_shutdown`).
        // Such a task runs on this thread, so its own submits are refused (Error::Shutdown):
        // it was accepted concurrently with shutdown. (Waiting for the link on the workers
        // instead would need a spin on plain loads, which loom shows may never end under the
        // memory model; here `join_all` has synchronised with every worker first.)
        let mut spins = 0;
        loop {
            if let Some(mut consumer) = inner.injector.try_lock() {
                if let Some(task) = consumer.pop() {
                    drop(consumer);
                    inner.outside.polled.bump_shared();
                    // SAFETY: dequeued, so this is its one run.
                    unsafe { Task::run(task) };
                    continue;
                }
            }
            if inner.injector.is_settled_empty() {
                break;
            }
            worker::backoff(&inner.join_parker, &mut spins);
        }
        // The last access to `inner`: a dropper waiting in `Drop` may free it from here.
        finishing.finish();
        Ok(())
    }

    /// Gives up the handle without shutting down, for the C layer (`struct pool *`).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn into_raw(self) -> *mut () {
        let ptr = self.inner.as_ptr().cast::<()>();
        core::mem::forget(self);
        ptr
    }

    /// Rebuilds a handle from [`into_raw`](Self::into_raw).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    ///
    /// # Safety
    /// `ptr` came from `into_raw` of a pool with this `S`, and no other handle to it exists.
    pub(crate) unsafe fn from_raw(ptr: *mut ()) -> Self {
        // SAFETY: the caller's contract.
        Self { inner: unsafe { NonNull::new_unchecked(ptr.cast()) } }
    }

    /// Borrows a handle from [`into_raw`](Self::into_raw) without taking ownership.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    ///
    /// # Safety
    /// As [`from_raw`](Self::from_raw), and the pool outlives the returned reference.
    pub(crate) unsafe fn borrow_raw(ptr: *mut ()) -> core::mem::ManuallyDrop<Self> {
        // SAFETY: the caller's contract.
        core::mem::ManuallyDrop::new(unsafe { Self::from_raw(ptr) })
    }
}

impl<S: Spawner> Drop for ThreadPool<S> {
    /// Shuts the pool down (if not done yet), joins its threads and frees it.
    ///
    /// Dropping the last handle from inside one of the pool's own tasks cannot join (the
    /// thread would wait for itself): the pool then stops accepting work, lets its threads drain
    /// and exit, and leaks its own state (a few KiB) instead of freeing memory they still use.
    ///
    /// If a shutdown is in progress on another thread (the C layer's `pool_shutdown` racing
    /// `pool_destroy`), this waits for it to finish before freeing. If a shutdown unwound (a
    /// panicking [`Spawner::join_all`]), its threads may still run: the state is leaked.
    fn drop(&mut self) {
        if self.is_worker_thread() {
            let inner = self.inner();
            if inner.gate.detach() {
                inner.injector.close();
                inner.begin_shutdown();
                inner.release_waits();
                inner.spawner.detach_all();
            }
            return;
        }
        let _ = self.shutdown();
        if !self.inner().gate.wait_finished(|| self.inner().spawner.new_parker()) {
            return;
        }
        // Live async tasks hold references on `Inner` too (`runtime::pool`): the last one out
        // frees it, so a late waker finds a closed pool instead of freed memory.
        if self.inner().runtime.release() {
            // SAFETY: every thread is joined (shutdown is complete, or it was done by an earlier
            // call that returned), and no task references `inner` any more; it came from
            // Box::leak.
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
        }
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Runs a closure on the pool. Convenience for Rust callers: allocates one box per call
    /// (the intrusive [`submit`](Self::submit) allocates nothing).
    ///
    /// With `std`, a panic in the closure is caught and counted, and the pool keeps running
    /// (see [`Stats`]); without `std` a panic aborts (the callback is `extern "C"`).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..10u64 {
    ///     let tx = tx.clone();
    ///     pool.spawn(move || tx.send(i * i).unwrap()).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<u64>(), 285);
    /// # }
    /// ```
    pub fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), Error> {
        let job = Box::into_raw(Box::new(ClosureTask { task: Task::new(ClosureTask::<F>::run), f: Some(f) }));
        // Projected from the raw pointer to the whole box (not `&leaked.task`): the callback
        // turns it back into the box and frees it, so it must carry the whole allocation's
        // provenance (Miri/Stacked Borrows rejects a pointer made from a field reference).
        // SAFETY: `job` is a live, non-null allocation.
        let task = unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*job).task)) };
        // SAFETY: the box stays alive until its callback runs and frees it.
        match unsafe { self.submit(task) } {
            Ok(()) => Ok(()),
            Err(e) => {
                // SAFETY: not queued, so still ours: free it.
                drop(unsafe { Box::from_raw(task.as_ptr().cast::<ClosureTask<F>>()) });
                Err(e)
            }
        }
    }
}

/// A boxed closure with its task header first.
#[repr(C)]
struct ClosureTask<F> {
    task: Task,
    f: Option<F>,
}

impl<F: FnOnce() + Send + 'static> ClosureTask<F> {
    unsafe extern "C" fn run(task: *mut Task) {
        // SAFETY: `task` is the first field of a leaked `Box<ClosureTask<F>>` (repr(C)).
        let mut job = unsafe { Box::from_raw(task.cast::<ClosureTask<F>>()) };
        let f = job.f.take();
        drop(job);
        if let Some(f) = f {
            crate::panic::run_catching(f);
        }
    }
}
