//! A platform provided by a C host: `struct pool_platform` (function pointers + a context)
//! and `pool_create_with_platform`.
//!
//! A host without POSIX threads in reach of Rust (an RTOS port, a game engine with its own job
//! threads, a Zig program) hands the pool its own way to start threads and to block and wake
//! them. The Rust side implements [`Spawner`] and [`Parker`] over those pointers.
//!
//! # Design: one pool type for every C pool
//! `struct pool *` is always a `ThreadPool<CSpawner>`. [`CSpawner`] is an enum: `Std` (OS
//! threads and the futex/condvar parker, what `pool_create` uses) or `Host` (the callbacks).
//! So every `pool_*` entry point stays one non-generic function, and:
//! * submit has no indirection: the "current worker" lookup on the submit path is one Rust
//!   thread-local read for both kinds (the C layer always has `std`, and a Rust thread-local
//!   works on any thread of the process, however the host started it);
//! * park / unpark cost one `match` (Std) or one indirect call into the host (Host).
//!
//! # Joining host threads
//! The host's `entry` is not the pool's worker function itself but [`host_thread_main`], which
//! runs the worker and then decrements a counter of running threads as the very last thing it
//! does to the pool. `join_all` waits for that counter to reach zero (so no thread still runs
//! pool code when the pool is freed, which is the [`Spawner`] contract), then calls the host's
//! `join` so it can join or recycle its threads.

use core::ffi::{c_int, c_ulonglong, c_void};
use core::ptr::NonNull;
use core::time::Duration;
use std::boxed::Box;
use crate::fallible::{try_box, TryArc};

use super::config::{reserved_clear, PoolConfig, POOL_RESERVED_WORDS};
use crate::platform::{Parker, PoolLink, SpawnError, Spawner, ThreadStart};
use crate::sync::{AtomicUsize, Ordering};
use crate::{DefaultParker, ThreadSpawner};

/// The function a host thread must run: `entry(arg)`, once, on the new thread.
#[cfg_attr(doc, doc = include_str!("examples/platform.md"))]
pub type pool_thread_entry = unsafe extern "C" fn(arg: *mut c_void);

/// A platform provided by the host: how to start threads and how to block and wake them.
/// Start from `pool_platform_init` (everything NULL, reserved words 0), then set every
/// function pointer: all must be non-NULL (`pool_create_with_platform` returns
/// POOL_ERR_INVALID otherwise); `context` may be anything, it is passed back unchanged.
///
/// All callbacks may be called from any thread, concurrently, and must not call back into
/// the pool. They must stay callable, and `context` valid, until `pool_destroy` returns.
#[cfg_attr(doc, doc = include_str!("examples/platform.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pool_platform {
    /// Passed as the first argument of every callback.
    pub context: *mut c_void,
    /// Starts a new thread that calls `entry(arg)` exactly once, and returns 0; or returns
    /// non-zero (nothing started, `entry` never called). Must not wait for `entry` to finish.
    /// `stack_size` is `pool_config.stack_size` (0: the host's default).
    pub spawn: Option<
        unsafe extern "C" fn(context: *mut c_void, entry: pool_thread_entry, arg: *mut c_void, stack_size: usize) -> c_int,
    >,
    /// Called once per shutdown, after every thread started by `spawn` has returned from
    /// `entry`: join or recycle those threads here (a host with detached threads does nothing).
    pub join: Option<unsafe extern "C" fn(context: *mut c_void)>,
    /// Creates a parker (a binary semaphore, initially empty) and returns its handle, passed
    /// back to `park` / `park_timeout` / `unpark` / `parker_free`. One per worker thread plus
    /// a few for threads that wait. Returning NULL is allowed but degrades that parker to
    /// busy-yielding (its `park` returns at once).
    pub parker_new: Option<unsafe extern "C" fn(context: *mut c_void) -> *mut c_void>,
    /// Frees a parker from `parker_new` (no thread is parked on it).
    pub parker_free: Option<unsafe extern "C" fn(context: *mut c_void, parker: *mut c_void)>,
    /// Blocks until the parker has a token, then consumes it. May return early (spuriously),
    /// but must return if `unpark` happened before (the token is kept until consumed).
    pub park: Option<unsafe extern "C" fn(context: *mut c_void, parker: *mut c_void)>,
    /// As `park`, but returns after at most about `timeout_ns` nanoseconds without a token.
    pub park_timeout: Option<unsafe extern "C" fn(context: *mut c_void, parker: *mut c_void, timeout_ns: c_ulonglong)>,
    /// Makes a token available (at most one; extra unparks merge) and wakes the parked thread.
    /// Called from any thread.
    pub unpark: Option<unsafe extern "C" fn(context: *mut c_void, parker: *mut c_void)>,
    /// Reserved for callbacks of later minor versions: 0 (as `pool_platform_init` leaves it).
    pub reserved: [usize; POOL_RESERVED_WORDS],
}

/// Sets every field of `platform` to NULL and its reserved words to 0; then set the callbacks.
/// NULL: no-op.
#[cfg_attr(doc, doc = include_str!("examples/platform.md"))]
#[no_mangle]
pub extern "C" fn pool_platform_init(platform: *mut pool_platform) {
    if let Some(platform) = NonNull::new(platform) {
        let value = pool_platform {
            context: core::ptr::null_mut(),
            spawn: None,
            join: None,
            parker_new: None,
            parker_free: None,
            park: None,
            park_timeout: None,
            unpark: None,
            reserved: [0; POOL_RESERVED_WORDS],
        };
        // SAFETY: non-null; the caller passes a writable `struct pool_platform`.
        unsafe { platform.as_ptr().write(value) };
    }
}

type SpawnFn = unsafe extern "C" fn(*mut c_void, pool_thread_entry, *mut c_void, usize) -> c_int;
type ContextFn = unsafe extern "C" fn(*mut c_void);
type ParkerNewFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type ParkerFn = unsafe extern "C" fn(*mut c_void, *mut c_void);
type ParkTimeoutFn = unsafe extern "C" fn(*mut c_void, *mut c_void, c_ulonglong);

/// The checked platform: every pointer non-null. Shared (Arc) by the spawner, every parker
/// and every running host thread, so none of them can outlive it.
pub(crate) struct HostFns {
    context: *mut c_void,
    spawn: SpawnFn,
    join: ContextFn,
    parker_new: ParkerNewFn,
    parker_free: ParkerFn,
    park: ParkerFn,
    park_timeout: ParkTimeoutFn,
    unpark: ParkerFn,
    /// Threads for which `spawn` succeeded and that have not yet left the pool's code.
    running: AtomicUsize,
    /// The pool's clock (`Spawner::now_ns`): the C layer has `std`, whatever the host's threads.
    clock: crate::os::clock::MonotonicClock,
}

// SAFETY: `context` and the callbacks are the host's; pool.h requires them to be callable
// from any thread, concurrently. The counter is atomic.
unsafe impl Send for HostFns {}
// SAFETY: as above.
unsafe impl Sync for HostFns {}

impl HostFns {
    /// Checks every pointer and the reserved words; `None` if any callback is NULL or a
    /// reserved word is not 0.
    pub(super) fn new(p: &pool_platform) -> Option<Self> {
        if !reserved_clear(&p.reserved) {
            return None;
        }
        Some(Self {
            context: p.context,
            spawn: p.spawn?,
            join: p.join?,
            parker_new: p.parker_new?,
            parker_free: p.parker_free?,
            park: p.park?,
            park_timeout: p.park_timeout?,
            unpark: p.unpark?,
            running: AtomicUsize::new(0),
            clock: crate::os::clock::MonotonicClock::new(),
        })
    }
}

/// The platform behind every `struct pool *`.
pub(crate) enum CSpawner {
    /// OS threads (`pool_create`).
    Std(ThreadSpawner<DefaultParker>),
    /// The host's callbacks (`pool_create_with_platform`).
    Host(TryArc<HostFns>),
}

impl core::fmt::Debug for CSpawner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Std(s) => s.fmt(f),
            Self::Host(h) => f.debug_struct("HostPlatform").field("context", &h.context).finish_non_exhaustive(),
        }
    }
}

impl CSpawner {
    /// The OS-thread platform of `pool_create`, its threads named and hooked as `config` says,
    /// or `Err(OutOfMemory)`.
    ///
    /// # Safety
    /// `config.thread_name_prefix` is NULL or a NUL-terminated string; the hooks may be called
    /// with `hook_context` on any thread, concurrently (pool.h).
    pub(crate) unsafe fn std(config: &PoolConfig) -> Result<Self, crate::Error> {
        let spawner = if config.thread_name_prefix.is_null() {
            ThreadSpawner::try_named("pool-worker")?
        } else {
            // SAFETY: the caller's contract.
            let prefix = unsafe { core::ffi::CStr::from_ptr(config.thread_name_prefix) };
            ThreadSpawner::try_name_prefix(prefix.to_string_lossy())?
        };
        let context = HookContext(config.hook_context);
        let spawner = match config.on_thread_start {
            // SAFETY: the caller's contract.
            Some(f) => spawner.on_thread_start(move || unsafe { f(context.get()) }),
            None => spawner,
        };
        let spawner = match config.on_thread_stop {
            // SAFETY: the caller's contract.
            Some(f) => spawner.on_thread_stop(move || unsafe { f(context.get()) }),
            None => spawner,
        };
        Ok(Self::Std(spawner))
    }
}

/// `pool_config.hook_context`, handed to the hooks on every worker thread.
#[derive(Clone, Copy)]
struct HookContext(*mut c_void);

// SAFETY: pool.h makes the hooks callable with `hook_context` from any thread, concurrently.
unsafe impl Send for HookContext {}
// SAFETY: as above.
unsafe impl Sync for HookContext {}

impl HookContext {
    /// The pointer (a method, so closures capture the whole Send + Sync wrapper).
    fn get(self) -> *mut c_void {
        self.0
    }
}

/// A parker of a C pool: the std one, or a handle from the host's `parker_new`.
pub(crate) enum CParker {
    Std(DefaultParker),
    Host { handle: *mut c_void, fns: TryArc<HostFns> },
}

// SAFETY: a host parker handle may be parked on by its owner and unparked from any thread
// (pool.h's contract for `park` / `unpark`); the std parker is Send + Sync itself.
unsafe impl Send for CParker {}
// SAFETY: as above.
unsafe impl Sync for CParker {}

impl core::fmt::Debug for CParker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Std(p) => p.fmt(f),
            Self::Host { handle, .. } => f.debug_struct("HostParker").field("handle", handle).finish(),
        }
    }
}

impl Parker for CParker {
    #[inline]
    fn park(&self) {
        match self {
            Self::Std(p) => p.park(),
            // A NULL handle (the host could not make a parker): return spuriously, which the
            // Parker contract allows; the pool re-checks and parks again.
            Self::Host { handle, .. } if handle.is_null() => std::thread::yield_now(),
            // SAFETY: a live handle from this platform's `parker_new`, parked by its owner.
            Self::Host { handle, fns } => unsafe { (fns.park)(fns.context, *handle) },
        }
    }

    #[inline]
    fn park_timeout(&self, timeout: Duration) {
        match self {
            Self::Std(p) => p.park_timeout(timeout),
            Self::Host { handle, .. } if handle.is_null() => std::thread::yield_now(),
            Self::Host { handle, fns } => {
                let ns = c_ulonglong::try_from(timeout.as_nanos()).unwrap_or(c_ulonglong::MAX);
                // SAFETY: as in `park`.
                unsafe { (fns.park_timeout)(fns.context, *handle, ns) }
            }
        }
    }

    #[inline]
    fn unpark(&self) {
        match self {
            Self::Std(p) => p.unpark(),
            Self::Host { handle, .. } if handle.is_null() => {}
            // SAFETY: a live handle from this platform's `parker_new`; any thread may unpark.
            Self::Host { handle, fns } => unsafe { (fns.unpark)(fns.context, *handle) },
        }
    }
}

impl Drop for CParker {
    fn drop(&mut self) {
        if let Self::Host { handle, fns } = self {
            if !handle.is_null() {
                // SAFETY: the handle came from `parker_new` and is freed once, here; a parker
                // is dropped only when nobody parks on it any more (the pool frees workers'
                // parkers after joining every thread).
                unsafe { (fns.parker_free)(fns.context, *handle) };
            }
        }
    }
}

/// What a host thread needs: the worker to run, and the counter to decrement after.
struct HostThread {
    start: ThreadStart,
    fns: TryArc<HostFns>,
}

/// The `entry` handed to the host's `spawn`: runs the pool's thread body, then says it left.
///
/// # Safety
/// `arg` is a `Box<HostThread>` leaked by [`CSpawner::spawn`], passed here exactly once.
unsafe extern "C" fn host_thread_main(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let thread = unsafe { Box::from_raw(arg.cast::<HostThread>()) };
    // SAFETY: the host runs `entry` once per successful spawn (pool.h), so this is its one run.
    unsafe { thread.start.run() };
    // Release: everything this thread did in the pool happens before `join_all` (Acquire)
    // sees the count drop. After this the thread touches only its own Arc and Box, which
    // keep `HostFns` alive on their own.
    thread.fns.running.fetch_sub(1, Ordering::Release);
}

// SAFETY: Std delegates to `ThreadSpawner` (a Spawner). Host: `spawn` returns Ok only when the
// host's `spawn` returned 0, which pool.h defines as "entry(arg) will run once on a new
// thread", and `host_thread_main` then runs `start` once; on failure the box is reclaimed and
// `start` never runs. `join_all` returns only after `running` is zero, i.e. after every
// started thread has returned from `start.run()`. The current-worker slot is a thread-local.
unsafe impl Spawner for CSpawner {
    type Parker = CParker;

    fn new_parker(&self) -> CParker {
        match self {
            Self::Std(s) => CParker::Std(s.new_parker()),
            Self::Host(fns) => {
                // SAFETY: a checked callback of the host, called with its own context.
                let handle = unsafe { (fns.parker_new)(fns.context) };
                CParker::Host { handle, fns: fns.clone() }
            }
        }
    }

    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        let fns = match self {
            Self::Std(s) => return s.spawn(start, stack_size),
            Self::Host(fns) => fns,
        };
        let arg = Box::into_raw(try_box(HostThread { start, fns: fns.clone() }).map_err(|_| SpawnError)?);
        // Counted before the thread can exist, so it can never be seen below zero.
        fns.running.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a checked callback; `host_thread_main` with `arg` is a valid entry.
        let rc = unsafe { (fns.spawn)(fns.context, host_thread_main, arg.cast(), stack_size) };
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: the host reported failure, so `entry` never runs and the box is still ours.
        drop(unsafe { Box::from_raw(arg) });
        fns.running.fetch_sub(1, Ordering::Relaxed);
        Err(SpawnError)
    }

    fn join_all(&self) {
        match self {
            Self::Std(s) => s.join_all(),
            Self::Host(fns) => {
                // The pool calls this after its last thread announced it is leaving, so this
                // waits only for the few instructions between that and `host_thread_main`'s
                // decrement.
                while fns.running.load(Ordering::Acquire) != 0 {
                    std::thread::yield_now();
                }
                // SAFETY: a checked callback, called with its own context.
                unsafe { (fns.join)(fns.context) };
            }
        }
    }

    fn detach_all(&self) {
        // A host platform's threads are the host's (it has no detach callback); the OS
        // spawner's are detached.
        if let Self::Std(s) = self {
            s.detach_all();
        }
    }

    fn available_parallelism(&self) -> usize {
        crate::os::cpus::available_parallelism()
    }

    /// The `std` spawner's slot, for both kinds: a C pool's worker is found as a Rust pool's
    /// (`os::thread::current_pool`).
    #[inline]
    fn current_worker(&self) -> *const () {
        crate::os::thread::current_worker()
    }

    fn set_current_worker(&self, worker: *const ()) {
        crate::os::thread::set_current_worker(worker);
    }

    #[inline]
    fn now_ns(&self) -> Option<u64> {
        match self {
            Self::Std(s) => s.now_ns(),
            Self::Host(fns) => Some(fns.clock.now_ns()),
        }
    }

    /// Every C pool enters the fork registry (`os::fork`), a host platform's too: the host's
    /// threads, whatever they are, do not survive into a child either.
    unsafe fn track_pool(&self, link: NonNull<PoolLink>) {
        match self {
            // SAFETY: forwarded contract.
            Self::Std(s) => unsafe { s.track_pool(link) },
            // SAFETY: forwarded contract.
            Self::Host(_) => unsafe { crate::os::fork::track(link) },
        }
    }

    unsafe fn untrack_pool(&self, link: NonNull<PoolLink>) {
        match self {
            // SAFETY: forwarded contract.
            Self::Std(s) => unsafe { s.untrack_pool(link) },
            // SAFETY: forwarded contract.
            Self::Host(_) => unsafe { crate::os::fork::untrack(link) },
        }
    }
}

