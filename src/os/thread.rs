//! The OS-thread [`Spawner`]: `std::thread`, a thread-local "current worker", and a join list.
//!
//! Joining without a race: `spawn` holds `handles` locked while it creates the thread and
//! records its handle, and the new thread takes the same lock once before it runs the pool's
//! code. So by the time a thread can tell the pool it is leaving, its handle is recorded, and
//! `join_all` (called after every thread left) finds and joins all of them.
//!
//! A pool whose last handle drops on one of its own threads cannot join; it calls
//! `detach_all`, which detaches every thread started so far and marks the list so that any
//! thread started later is detached at once (no thread is left neither joined nor detached).

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::borrow::Cow;
use std::format;
use std::string::String;
use std::sync::{Arc, Mutex, PoisonError};
use std::vec::Vec;
use std::thread::JoinHandle;

use super::clock::MonotonicClock;
use super::parker::DefaultParker;
use crate::fallible::TryArc;
use crate::platform::{Parker, PoolLink, SpawnError, Spawner, ThreadStart};
use crate::scheduler::context::ContextHead;
use crate::scheduler::AnyPool;
use crate::Error;

std::thread_local! {
    /// The current worker of this thread for every pool on the `std` and C spawners
    /// ([`Spawner::current_worker`]). A `Cell` of a raw pointer: no destructor, so a host
    /// thread that never told Rust about itself is fine.
    static CURRENT_WORKER: Cell<*const ()> = const { Cell::new(core::ptr::null()) };
}

/// [`Spawner::current_worker`] of the `std` and C spawners: one slot for all their pools.
#[inline]
pub(crate) fn current_worker() -> *const () {
    CURRENT_WORKER.with(Cell::get)
}

/// [`Spawner::set_current_worker`] of the `std` and C spawners.
pub(crate) fn set_current_worker(worker: *const ()) {
    CURRENT_WORKER.with(|c| c.set(worker));
}

/// The pool whose worker the calling thread is, of those on the `std` and C spawners (a
/// blocking handle's `join` waits through its waiting loop); `None` on any other thread.
pub(crate) fn current_pool() -> Option<AnyPool> {
    // SAFETY: only those pools store in this slot, on their own threads.
    unsafe { ContextHead::any_of(current_worker()) }
}

/// Starts pool threads as `std::thread`s, parking them on `P` ([`DefaultParker`] unless chosen).
///
/// ```
/// use pool::{Config, CondvarParker, ThreadPool, ThreadSpawner};
/// let pool = ThreadPool::with_spawner(Config::default(), ThreadSpawner::<CondvarParker>::new()).unwrap();
/// pool.spawn(|| println!("hello from a pool thread")).unwrap();
/// ```
pub struct ThreadSpawner<P = DefaultParker> {
    /// Shared with each thread until it has started (the gate above); allocated fallibly so
    /// that the C layer's `pool_create` can report out of memory.
    handles: TryArc<Mutex<Handles>>,
    name: Cow<'static, str>,
    /// `name` is a prefix: each thread is named `name` followed by its start number.
    numbered: bool,
    on_start: Option<Hook>,
    on_stop: Option<Hook>,
    clock: MonotonicClock,
    /// Whether the pools built on it enter the fork registry (`fork.rs`): all but the global
    /// pools, which have an entry of their own.
    tracks_pools: bool,
    _parker: PhantomData<fn() -> P>,
}

/// A thread start or stop hook.
type Hook = Arc<dyn Fn() + Send + Sync>;

/// The join list. `detached`: the pool gave up joining (see the module docs). `started`:
/// threads started so far (the number in a numbered thread's name).
#[derive(Default)]
struct Handles {
    list: Vec<JoinHandle<()>>,
    detached: bool,
    started: usize,
}

impl<P> core::fmt::Debug for ThreadSpawner<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ThreadSpawner")
            .field("name", &self.name)
            .field("numbered", &self.numbered)
            .field("on_start", &self.on_start.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .finish_non_exhaustive()
    }
}

/// Runs a hook; a panic in it is caught (the panic hook has printed it) so that the thread
/// still runs the pool's code, which the pool relies on once `spawn` returned Ok.
fn run_hook(hook: Option<&Hook>) {
    if let Some(hook) = hook {
        let _ = crate::panic::catch(|| hook());
    }
}

impl<P> Drop for ThreadSpawner<P> {
    /// Joins anything still running, so no thread outlives its spawner.
    fn drop(&mut self) {
        self.join_all_handles();
    }
}

impl<P> Default for ThreadSpawner<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> ThreadSpawner<P> {
    /// A spawner whose threads are named "pool-worker".
    ///
    /// ```
    /// use pool::{Config, ThreadPool, ThreadSpawner};
    /// // What `ThreadPool::new` does: the default parker, threads named "pool-worker".
    /// let spawner: ThreadSpawner = ThreadSpawner::new();
    /// let pool = ThreadPool::with_spawner(Config::default(), spawner).unwrap();
    /// # drop(pool);
    /// ```
    pub fn new() -> Self {
        Self::named("pool-worker")
    }

    /// A spawner whose threads carry `name`.
    ///
    /// ```
    /// use pool::{Config, ThreadPool, ThreadSpawner};
    /// let spawner: ThreadSpawner = ThreadSpawner::named("physics");
    /// let pool = ThreadPool::with_spawner(Config::default(), spawner).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn(move || tx.send(std::thread::current().name() == Some("physics")).unwrap()).unwrap();
    /// assert!(rx.recv().unwrap());
    /// ```
    pub fn named(name: impl Into<Cow<'static, str>>) -> Self {
        Self::try_named(name)
            .unwrap_or_else(|_| std::alloc::handle_alloc_error(core::alloc::Layout::new::<Mutex<Handles>>()))
    }

    /// As [`named`](Self::named), or [`Error::OutOfMemory`] if the allocator fails.
    pub(crate) fn try_named(name: impl Into<Cow<'static, str>>) -> Result<Self, Error> {
        Ok(Self {
            handles: TryArc::try_new(Mutex::new(Handles::default()))?,
            name: name.into(),
            numbered: false,
            on_start: None,
            on_stop: None,
            clock: MonotonicClock::new(),
            tracks_pools: true,
            _parker: PhantomData,
        })
    }

    /// The same spawner, whose pools stay out of the fork registry (the global pools: their
    /// own entry resets them in a child instead of closing them).
    pub(crate) fn untracked(mut self) -> Self {
        self.tracks_pools = false;
        self
    }

    /// A spawner whose threads are named `prefix` followed by their start number: `prefix0`,
    /// `prefix1`, ... (the OS keeps the first 15 bytes on Linux: `pthread_setname_np`).
    ///
    /// ```
    /// use pool::{Config, ThreadPool, ThreadSpawner};
    /// let spawner: ThreadSpawner = ThreadSpawner::name_prefix("render-");
    /// let pool = ThreadPool::with_spawner(Config::default().with_max_threads(1), spawner).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn(move || tx.send(std::thread::current().name().map(String::from)).unwrap()).unwrap();
    /// assert_eq!(rx.recv().unwrap().as_deref(), Some("render-0"));
    /// ```
    pub fn name_prefix(prefix: impl Into<Cow<'static, str>>) -> Self {
        let mut spawner = Self::named(prefix);
        spawner.numbered = true;
        spawner
    }

    /// As [`name_prefix`](Self::name_prefix), or [`Error::OutOfMemory`] if the allocator fails.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn try_name_prefix(prefix: impl Into<Cow<'static, str>>) -> Result<Self, Error> {
        let mut spawner = Self::try_named(prefix)?;
        spawner.numbered = true;
        Ok(spawner)
    }

    /// Calls `hook` on every thread this spawner starts, before the thread runs any of the
    /// pool's work: set up thread-locals, CPU affinity, a profiler's thread registration.
    /// A panic in `hook` is caught and printed; the thread goes on.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use pool::{Config, ThreadPool, ThreadSpawner};
    ///
    /// let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    /// let (s, t) = (Arc::clone(&started), Arc::clone(&stopped));
    /// let spawner: ThreadSpawner = ThreadSpawner::new()
    ///     .on_thread_start(move || { s.fetch_add(1, Ordering::Relaxed); })
    ///     .on_thread_stop(move || { t.fetch_add(1, Ordering::Relaxed); });
    /// let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2), spawner).unwrap();
    /// pool.spawn(|| {}).unwrap();
    /// pool.shutdown().unwrap(); // joins every thread: each one's stop hook has run
    /// assert!(started.load(Ordering::Relaxed) >= 1);
    /// assert_eq!(started.load(Ordering::Relaxed), stopped.load(Ordering::Relaxed));
    /// ```
    #[must_use]
    pub fn on_thread_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_start = Some(Arc::new(hook));
        self
    }

    /// Calls `hook` on every thread this spawner starts, after the thread has run the pool's
    /// code for the last time, just before it exits (example on
    /// [`on_thread_start`](Self::on_thread_start)). A panic in `hook` is caught and printed.
    #[must_use]
    pub fn on_thread_stop(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_stop = Some(Arc::new(hook));
        self
    }

    /// The name of the next thread (`handles` is locked by the caller, who counts it started).
    fn thread_name(&self, number: usize) -> String {
        if self.numbered {
            format!("{}{number}", self.name)
        } else {
            String::from(&*self.name)
        }
    }

    fn join_all_handles(&self) {
        let list = core::mem::take(&mut self.handles.lock().unwrap_or_else(PoisonError::into_inner).list);
        for handle in list {
            // A worker never unwinds (task callbacks are extern "C"), so this cannot be Err
            // except for a thread killed by the process ending; nothing to report then.
            let _ = handle.join();
        }
    }
}

/// The stack size `std::thread` gives a thread when neither the builder nor `RUST_MIN_STACK`
/// says otherwise.
const STD_DEFAULT_STACK: usize = 2 << 20;

// SAFETY: `spawn` runs `start` once on a new thread iff it returns Ok; `join_all` joins every
// thread spawned (see the module docs for why none can be missed); the thread-local slot is
// per thread.
unsafe impl<P: Parker + Default + 'static> Spawner for ThreadSpawner<P> {
    type Parker = P;

    fn new_parker(&self) -> P {
        P::default()
    }

    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        // Reap threads that already returned from `start.run()` (pools whose threads exit
        // early, like the blocking pool's keep-alive): dropping a finished handle frees the
        // thread's resources, so a pool that churns threads holds at most one handle per thread
        // started since the last spawn, not one per thread ever started.
        handles.list.retain(|h| !h.is_finished());
        // Room for the handle before the thread exists: once it runs, recording it must not fail.
        handles.list.try_reserve(1).map_err(|_| SpawnError)?;
        let mut builder = std::thread::Builder::new().name(self.thread_name(handles.started));
        if stack_size != 0 {
            builder = builder.stack_size(stack_size);
        }
        let gate = self.handles.clone();
        let (on_start, on_stop) = (self.on_start.clone(), self.on_stop.clone());
        let handle = builder
            .spawn(move || {
                // Wait until `spawn` has recorded our handle (see module docs).
                drop(gate.lock().unwrap_or_else(PoisonError::into_inner));
                run_hook(on_start.as_ref());
                // SAFETY: handed to exactly one thread, run once.
                unsafe { start.run() };
                run_hook(on_stop.as_ref());
            })
            .map_err(|_| SpawnError)?;
        handles.started += 1;
        if handles.detached {
            // Dropping a JoinHandle detaches the thread.
            drop(handle);
        } else {
            handles.list.push(handle);
        }
        Ok(())
    }

    fn join_all(&self) {
        self.join_all_handles();
    }

    fn detach_all(&self) {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        handles.detached = true;
        // Dropping the handles detaches the threads: the OS frees each one as it exits.
        handles.list.clear();
    }

    fn available_parallelism(&self) -> usize {
        super::cpus::available_parallelism()
    }

    /// `requested`, or for 0 what `std::thread` gives: `RUST_MIN_STACK` if set, else 2 MiB.
    fn stack_size(&self, requested: usize) -> usize {
        if requested != 0 {
            return requested;
        }
        std::env::var("RUST_MIN_STACK").ok().and_then(|v| v.parse().ok()).unwrap_or(STD_DEFAULT_STACK)
    }

    #[inline]
    fn current_worker(&self) -> *const () {
        current_worker()
    }

    fn set_current_worker(&self, worker: *const ()) {
        set_current_worker(worker);
    }

    #[inline]
    fn now_ns(&self) -> Option<u64> {
        Some(self.clock.now_ns())
    }

    /// Links the pool into the fork registry (`fork.rs`: closed in a child), unless this
    /// spawner is a global pool's.
    unsafe fn track_pool(&self, link: NonNull<PoolLink>) {
        #[cfg(all(unix, not(loom)))]
        if self.tracks_pools {
            // SAFETY: forwarded contract.
            unsafe { super::fork::track(link) };
        }
        let _ = link;
    }

    unsafe fn untrack_pool(&self, link: NonNull<PoolLink>) {
        #[cfg(all(unix, not(loom)))]
        if self.tracks_pools {
            // SAFETY: forwarded contract (tracked by `track_pool`, as `tracks_pools` was then).
            unsafe { super::fork::untrack(link) };
        }
        let _ = link;
    }
}
