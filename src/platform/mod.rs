//! What the pool needs from its host: a way to block a thread ([`Parker`]) and a way to start
//! threads ([`Spawner`]). The `std` feature provides both (`crate::os`); a bare-metal or RTOS
//! host implements them itself (PORTING.md).
//!
//! A pool's threads exist only in the process that started them. A platform that can copy a
//! process (`fork()`, a snapshot) keeps a registry of its pools ([`Spawner::track_pool`]) and
//! closes each in the copy: there it refuses work with [`Error::Forked`](crate::Error::Forked)
//! and its shutdown and drop return at once instead of waiting for threads that are not there
//! (PORTING.md, "After a fork"). The `std` spawners do, for every pool on them; the `std`
//! layer's global pools are reset in the copy instead, and work.

use core::ffi::c_void;
use core::fmt;
use core::ptr::NonNull;
use core::time::Duration;

mod pool_link;

pub use pool_link::PoolLink;
#[cfg(all(feature = "std", unix, not(loom)))]
pub(crate) use pool_link::PoolList;

/// Blocks and wakes one thread. One parker belongs to one thread (its owner parks; anyone
/// unparks).
///
/// Semantics are those of a binary semaphore, like `std::thread::park`:
/// * `unpark` makes a token available (at most one; extra unparks are merged).
/// * `park` consumes the token, blocking until there is one. It **may return spuriously**
///   (the pool re-checks its state in a loop), but it must not sleep through a token: an
///   `unpark` that happens before `park` makes that `park` return.
/// * `unpark` may be called from any thread, including concurrently with `park`.
///
/// Idle worker threads spend their time in `park`, so it should not spin for long: a pool with
/// no work must burn no CPU.
///
/// A port implements it on the platform's binary semaphore (an RTOS event flag, a futex). The
/// simplest correct one, shown here, is a token and a yielding wait (it burns CPU while idle:
/// fine for a test, not for a product):
///
/// ```
/// use core::sync::atomic::{AtomicBool, Ordering};
/// use core::time::Duration;
/// use pool::Parker;
///
/// #[derive(Default)]
/// struct YieldParker(AtomicBool); // the token
///
/// impl Parker for YieldParker {
///     fn park(&self) {
///         while !self.0.swap(false, Ordering::Acquire) {
///             std::thread::yield_now(); // an RTOS: task_yield()
///         }
///     }
///     fn park_timeout(&self, _timeout: Duration) {
///         // Returning early is allowed (the pool re-checks); sleeping through a token is not.
///         if !self.0.swap(false, Ordering::Acquire) {
///             std::thread::yield_now();
///         }
///     }
///     fn unpark(&self) {
///         self.0.store(true, Ordering::Release);
///     }
/// }
///
/// let parker = YieldParker::default();
/// parker.unpark();
/// parker.unpark(); // merged with the first: still one token
/// parker.park(); // consumes it and returns at once
/// parker.park_timeout(Duration::from_millis(1)); // no token: returns after about 1 ms, or sooner
/// ```
pub trait Parker: Send + Sync {
    /// Blocks until a token is available and consumes it (or returns spuriously).
    fn park(&self);
    /// As [`park`](Self::park), but returns after at most about `timeout` (early is allowed).
    fn park_timeout(&self, timeout: Duration);
    /// Makes a token available and wakes the owner if it is parked.
    fn unpark(&self);
}

/// The function a new thread runs: `entry(arg)`, exactly once. `#[repr(C)]` so C hosts can
/// start it from their own thread functions.
///
/// The pool builds it and hands it to [`Spawner::spawn`], whose thread calls
/// [`run`](Self::run) (example there and on [`Spawner`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ThreadStart {
    /// The thread's body. Returns when the thread should exit.
    pub entry: unsafe extern "C" fn(arg: *mut c_void),
    /// The argument for `entry`.
    pub arg: *mut c_void,
}

impl fmt::Debug for ThreadStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadStart").field("entry", &(self.entry as *const ())).field("arg", &self.arg).finish()
    }
}

// SAFETY: a ThreadStart is meant to be handed to another thread; the pool guarantees `arg`
// (its own state) outlives the thread (it joins every thread before freeing it).
unsafe impl Send for ThreadStart {}

impl ThreadStart {
    /// Runs the thread body. Call exactly once, on the new thread.
    ///
    /// # Safety
    /// Called once per `ThreadStart` handed to [`Spawner::spawn`].
    ///
    /// ```
    /// use core::ffi::c_void;
    /// use pool::ThreadStart;
    ///
    /// unsafe extern "C" fn entry(arg: *mut c_void) {
    ///     // SAFETY: `arg` is the `u32` below, alive until this thread is joined.
    ///     unsafe { *arg.cast::<u32>() += 1 };
    /// }
    ///
    /// let mut runs = 0u32;
    /// let start = ThreadStart { entry, arg: (&raw mut runs).cast() };
    /// std::thread::scope(|s| {
    ///     // What a `Spawner` does on its new thread.
    ///     // SAFETY: run once; `runs` outlives the scoped thread.
    ///     s.spawn(move || unsafe { start.run() });
    /// });
    /// assert_eq!(runs, 1);
    /// ```
    pub unsafe fn run(self) {
        // SAFETY: the pool built `entry`/`arg` together; the caller runs it once.
        unsafe { (self.entry)(self.arg) }
    }
}

/// The error a [`Spawner`] reports when it cannot start a thread (out of memory, thread limit,
/// a host that has no more threads). The pool survives it: it works with the threads it has.
///
/// ```
/// let refused: Result<(), pool::SpawnError> = Err(pool::SpawnError);
/// assert_eq!(refused.unwrap_err().to_string(), "could not start a thread");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpawnError;

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("could not start a thread")
    }
}

/// Starts and joins the pool's threads, and creates their parkers.
///
/// One spawner belongs to one pool (the pool owns it), so `join_all` means "all threads this
/// pool started".
///
/// # Safety
/// The pool's memory safety rests on these promises:
/// * `spawn` returning `Ok` means `start.run()` will be called exactly once on a new thread;
///   returning `Err` means it will never be called.
/// * `join_all` returns only after every thread started by a successful `spawn` has returned
///   from `start.run()` (and, for OS threads, has exited, so nothing of it is left).
/// * `current_worker` returns, on any thread, the last value `set_current_worker` stored on
///   that same thread, or null (the default implementations: no thread-local storage).
///
/// # Example
/// A spawner on the platform's threads (here `std::thread` stands in for an RTOS's task
/// create and join), and a pool built on it with [`ThreadPool::with_spawner`](crate::ThreadPool::with_spawner):
///
/// ```
/// use std::sync::Mutex;
/// use std::thread::JoinHandle;
/// use pool::{CondvarParker, Config, SpawnError, Spawner, ThreadPool, ThreadStart};
///
/// #[derive(Default)]
/// struct MySpawner {
///     threads: Mutex<Vec<JoinHandle<()>>>,
/// }
///
/// // SAFETY: `spawn` returns Ok only once the thread that runs `start` exists, and records it
/// // under the lock, which `join_all` takes before joining every recorded thread.
/// unsafe impl Spawner for MySpawner {
///     type Parker = CondvarParker; // any `Parker`: see that trait's example
///
///     fn new_parker(&self) -> CondvarParker {
///         CondvarParker::new()
///     }
///     fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
///         let mut builder = std::thread::Builder::new();
///         if stack_size != 0 {
///             builder = builder.stack_size(stack_size);
///         }
///         let mut threads = self.threads.lock().unwrap(); // held until the handle is recorded
///         // SAFETY: `run` is called once, on the new thread.
///         let thread = builder.spawn(move || unsafe { start.run() }).map_err(|_| SpawnError)?;
///         threads.push(thread);
///         Ok(())
///     }
///     fn join_all(&self) {
///         for thread in self.threads.lock().unwrap().drain(..) {
///             thread.join().unwrap();
///         }
///     }
/// }
///
/// let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2), MySpawner::default()).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// pool.spawn(move || tx.send(6 * 7).unwrap()).unwrap();
/// assert_eq!(rx.recv().unwrap(), 42);
/// pool.shutdown().unwrap(); // joins through `join_all`
/// assert!(pool.spawner().threads.lock().unwrap().is_empty());
/// ```
pub unsafe trait Spawner: Send + Sync + 'static {
    /// The parker this platform's threads block on.
    type Parker: Parker;

    /// Creates a parker (one per worker thread, and one for the thread that shuts down).
    fn new_parker(&self) -> Self::Parker;

    /// Starts a thread that runs `start.run()` once. `stack_size` 0 means the platform default.
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError>;

    /// Waits until every thread started by `spawn` has finished (see the trait's safety section).
    fn join_all(&self);

    /// The pool will never call [`join_all`](Self::join_all) (its last handle was dropped on
    /// one of its own threads, which cannot wait for itself): release what joining would have
    /// released, for the threads started so far and any started later, as each one exits.
    /// The default does nothing (a platform whose threads need no join).
    fn detach_all(&self) {}

    /// The stack size in bytes of a thread that [`spawn`](Self::spawn) starts with
    /// `requested` (0: the platform default), or 0 where the platform does not know it. A
    /// worker that waits inside a task runs unrelated queued work nested on its stack only
    /// while at most half of this is in use (with 0 it cannot measure that, and the nesting is
    /// not bounded). The default returns `requested`.
    fn stack_size(&self, requested: usize) -> usize {
        requested
    }

    /// How many threads "as many as the hardware runs at once" means (`max_threads == 0`). On
    /// the `std` platform: the CPUs in the calling thread's affinity mask, capped by the CPU
    /// quota of its cgroup and the cgroup's ancestors (v1 and v2), at least 1, read afresh at
    /// each call.
    fn available_parallelism(&self) -> usize {
        1
    }

    /// This thread's worker pointer, as stored by [`set_current_worker`](Self::set_current_worker);
    /// null where the platform has no thread-local storage. With a real value, a task that
    /// submits from inside a worker uses the worker's own queue (fast, cache-hot); with null it
    /// goes through the shared injector (correct, slower).
    fn current_worker(&self) -> *const () {
        core::ptr::null()
    }

    /// Stores this thread's worker pointer (null when the worker exits).
    fn set_current_worker(&self, _worker: *const ()) {}

    /// A monotonic clock in nanoseconds (any fixed origin), or `None` (the default) where the
    /// platform has none. With a clock, each busy worker times its polls (one reading every 8
    /// to 127 tasks) and looks at the injector about once per millisecond of work; without,
    /// every 61st search (`scheduler/interval.rs`). Timers (`crate::time`) read it too, from any
    /// thread, so it must be one clock with one origin for all threads (per spawner); without
    /// one, timers fail with a clear error.
    fn now_ns(&self) -> Option<u64> {
        None
    }

    /// Records a pool built on this spawner in the platform's registry of pools, if it keeps
    /// one: a platform that can copy a process closes each recorded pool in the copy
    /// (module docs). The default keeps none (a platform without `fork`).
    ///
    /// # Safety
    /// Called by the pool once, with its own link, which stays valid and unmoved until
    /// [`untrack_pool`](Self::untrack_pool) returns.
    unsafe fn track_pool(&self, link: NonNull<PoolLink>) {
        let _ = link;
    }

    /// Forgets a pool recorded by [`track_pool`](Self::track_pool), before its memory is
    /// freed. The default does nothing.
    ///
    /// # Safety
    /// `link` was passed to this spawner's `track_pool` and not untracked since.
    unsafe fn untrack_pool(&self, link: NonNull<PoolLink>) {
        let _ = link;
    }
}
