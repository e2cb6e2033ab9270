//! The whole `pool` under `#![no_std]`: a platform for a host that has threads but no `std`
//! (an RTOS, a kernel, a game console SDK).
//!
//! The host gives the pool two things, as plain function pointers in [`HostThreads`]:
//! * a way to start a thread that runs a function once ([`HostThreads::spawn`]), and to wait
//!   for its threads at shutdown ([`HostThreads::join`]);
//! * a way to give the CPU away for a moment ([`HostThreads::yield_now`]), which is all the
//!   [`SpinParker`] needs to block a thread: it spins briefly, then yields until unparked.
//!
//! Optionally a thread-local slot ([`HostThreads::tls`]), which lets a task submitted from a
//! pool thread go to that worker's own queue instead of the shared injector.
//!
//! ```
//! use core::ffi::c_void;
//! use core::ptr::NonNull;
//! use core::sync::atomic::{AtomicUsize, Ordering};
//! use pool::{container_of, Config, Task, ThreadPool, ThreadStart};
//! use pool_nostd::{HostSpawner, HostThreads};
//!
//! // The host's side: here std threads, on an RTOS its task-create call.
//! fn spawn(_ctx: *mut c_void, start: ThreadStart, _stack: usize) -> bool {
//!     // SAFETY: `run` is called once, on the new thread.
//!     std::thread::spawn(move || unsafe { start.run() });
//!     true
//! }
//! fn join(_ctx: *mut c_void) {} // detached threads: the spawner waits until they left
//!
//! let host = HostThreads { yield_now: std::thread::yield_now, ..HostThreads::new(spawn, join) };
//! let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2), HostSpawner::new(host)).unwrap();
//!
//! #[repr(C)]
//! struct Job { task: Task, done: AtomicUsize }
//! unsafe extern "C" fn run(task: *mut Task) {
//!     // SAFETY: every task with this callback is the `task` field of a `Job`.
//!     let job = unsafe { &*container_of!(task, Job, task) };
//!     job.done.fetch_add(1, Ordering::Release);
//! }
//! let mut job = Job { task: Task::new(run), done: AtomicUsize::new(0) };
//! // SAFETY: `job` outlives the pool's use of it: shutdown runs every queued task first.
//! unsafe { pool.submit(NonNull::from(&mut job.task)).unwrap() };
//! pool.shutdown().unwrap();
//! assert_eq!(job.done.load(Ordering::Acquire), 1);
//! ```
//!
//! # Idle cost
//! A [`SpinParker`] never sleeps: an idle worker keeps yielding. That is the price of needing
//! nothing but `yield`. A host with a blocking primitive (a semaphore, an event flag, a futex)
//! should implement [`Parker`] on it instead (PORTING.md shows how); everything else here
//! stays the same.
//!
//! # Atomics
//! This crate uses `core::sync::atomic` with compare-and-swap (`swap`, `fetch_add`), so it
//! builds for targets that have it (thumbv7em, riscv32imac, every host). The `pool` crate
//! itself also builds for targets without CAS (thumbv6m, riscv32imc) through portable-atomic's
//! `single-core` / `critical-section` features; a port to such a target writes its parker
//! with `portable_atomic` types.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

extern crate alloc;

use alloc::boxed::Box;
use core::ffi::c_void;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;

pub use pool::{Parker, SpawnError, Spawner, ThreadStart};

/// Spin iterations before a parker starts yielding.
const SPINS: u32 = 64;
/// Yields a `park_timeout` makes before it gives up (it has no clock; returning early is
/// allowed by the [`Parker`] contract).
const TIMEOUT_YIELDS: u32 = 64;

/// A [`Parker`] that needs only "yield": spins briefly, then yields until a token arrives.
///
/// ```
/// use pool_nostd::{Parker, SpinParker};
/// let p = SpinParker::new(|| {});
/// p.unpark();
/// p.park(); // returns at once: the token was there
/// ```
pub struct SpinParker {
    /// The binary semaphore's token.
    token: AtomicBool,
    yield_now: fn(),
}

impl fmt::Debug for SpinParker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinParker").field("token", &self.token.load(Ordering::Relaxed)).finish()
    }
}

impl SpinParker {
    /// A parker with no token that gives the CPU away with `yield_now` while it waits.
    pub const fn new(yield_now: fn()) -> Self {
        Self { token: AtomicBool::new(false), yield_now }
    }

    /// Takes the token if it is there. Acquire: pairs with `unpark`'s Release, so what the
    /// unparker did before is visible after `park` returns.
    #[inline]
    fn try_take(&self) -> bool {
        // Test first, so waiting threads only read the line (no write traffic while spinning).
        self.token.load(Ordering::Relaxed) && self.token.swap(false, Ordering::Acquire)
    }
}

impl Parker for SpinParker {
    fn park(&self) {
        let mut spins = 0;
        while !self.try_take() {
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
            } else {
                (self.yield_now)();
            }
        }
    }

    fn park_timeout(&self, _timeout: Duration) {
        for _ in 0..TIMEOUT_YIELDS {
            if self.try_take() {
                return;
            }
            (self.yield_now)();
        }
    }

    fn unpark(&self) {
        self.token.store(true, Ordering::Release);
    }
}

/// Reads this thread's slot (see [`HostThreads::tls`]).
pub type TlsGet = fn() -> *const ();
/// Writes this thread's slot (see [`HostThreads::tls`]).
pub type TlsSet = fn(*const ());

/// What the host provides: function pointers and the context they get back.
///
/// ```
/// use core::ffi::c_void;
/// use pool_nostd::{HostThreads, ThreadStart};
/// fn spawn(_ctx: *mut c_void, _start: ThreadStart, _stack: usize) -> bool { false } // no threads
/// fn join(_ctx: *mut c_void) {}
/// let host = HostThreads::new(spawn, join);
/// assert!(host.tls.is_none());
/// ```
#[derive(Clone, Copy)]
pub struct HostThreads {
    /// Passed back to `spawn` and `join`.
    pub context: *mut c_void,
    /// Starts a thread that calls `start.run()` exactly once, and returns true; or returns
    /// false, and `start` is never run. `stack_size` 0 means the host's default.
    pub spawn: fn(context: *mut c_void, start: ThreadStart, stack_size: usize) -> bool,
    /// Called once at shutdown, after every started thread has returned from `start.run()`:
    /// join, delete or recycle the threads here (or nothing, for detached threads).
    pub join: fn(context: *mut c_void),
    /// Gives the CPU to another thread for a moment (`taskYIELD()`, `sched_yield()`).
    pub yield_now: fn(),
    /// A per-thread pointer slot (get, set), if the host has thread-local storage. With it,
    /// tasks submitted from a pool thread use that worker's own queue (faster); without it,
    /// the shared injector (correct, slower).
    pub tls: Option<(TlsGet, TlsSet)>,
    /// What `max_threads: 0` means: the number of cores the host runs threads on.
    pub parallelism: usize,
}

impl fmt::Debug for HostThreads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostThreads")
            .field("context", &self.context)
            .field("tls", &self.tls.is_some())
            .field("parallelism", &self.parallelism)
            .finish_non_exhaustive()
    }
}

impl HostThreads {
    /// A host with these two thread functions, a `yield_now` that only spins, no thread-local
    /// slot, one core, and a null context. Set the other fields with struct update syntax.
    pub const fn new(
        spawn: fn(context: *mut c_void, start: ThreadStart, stack_size: usize) -> bool,
        join: fn(context: *mut c_void),
    ) -> Self {
        Self { context: core::ptr::null_mut(), spawn, join, yield_now: core::hint::spin_loop, tls: None, parallelism: 1 }
    }
}

/// A [`Spawner`] over [`HostThreads`], with [`SpinParker`]s.
///
/// It does not trust the host's `join` alone for the pool's memory safety: every thread runs
/// through a small trampoline that counts it out after the pool's code returns, and
/// `join_all` waits for that count to reach zero before calling the host's `join`.
///
/// ```
/// use core::ffi::c_void;
/// use pool::{Config, ThreadPool};
/// use pool_nostd::{HostSpawner, HostThreads, ThreadStart};
/// fn spawn(_ctx: *mut c_void, _start: ThreadStart, _stack: usize) -> bool { false }
/// fn join(_ctx: *mut c_void) {}
/// let pool = ThreadPool::with_spawner(Config::default(), HostSpawner::new(HostThreads::new(spawn, join))).unwrap();
/// assert_eq!(pool.spawn(|| {}), Err(pool::Error::Spawn)); // a host with no threads says so
/// ```
pub struct HostSpawner {
    host: HostThreads,
    /// Threads started and not yet out of the pool's code (see the type's docs).
    running: AtomicUsize,
}

impl fmt::Debug for HostSpawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostSpawner")
            .field("host", &self.host)
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish()
    }
}

// SAFETY: `HostThreads` holds function pointers and the host's context; the host promises
// (as the C platform's contract, PORTING.md) that its functions may be called from any
// thread with that context. The counter is atomic.
unsafe impl Send for HostSpawner {}
// SAFETY: as above.
unsafe impl Sync for HostSpawner {}

impl HostSpawner {
    /// A spawner on the host's threads.
    pub const fn new(host: HostThreads) -> Self {
        Self { host, running: AtomicUsize::new(0) }
    }

    /// The host this spawner runs on.
    pub fn host(&self) -> &HostThreads {
        &self.host
    }
}

/// What a host thread gets: the pool's thread body and where to count itself out.
struct Trampoline {
    start: ThreadStart,
    running: *const AtomicUsize,
}

/// The body of every host thread: run the pool's code, then count out.
///
/// # Safety
/// `arg` is a leaked `Box<Trampoline>` from [`HostSpawner::spawn`], run once; its `running`
/// points into a spawner that stays alive until `join_all` sees the count reach zero.
unsafe extern "C" fn trampoline(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let Trampoline { start, running } = *unsafe { Box::from_raw(arg.cast::<Trampoline>()) };
    // SAFETY: one run per successful spawn.
    unsafe { start.run() };
    // Release: all this thread did happens before `join_all`'s Acquire load sees it gone.
    // The last touch of the pool's memory: after this the spawner may be freed.
    // SAFETY: the spawner outlives this decrement (function contract).
    unsafe { (*running).fetch_sub(1, Ordering::Release) };
}

// SAFETY: `spawn` returns Ok only if the host's `spawn` returned true ("runs `start` once on a
// new thread"), and the trampoline runs `start` exactly once; on false the box is reclaimed and
// `start` never runs. `join_all` returns only once `running` is zero, i.e. every started thread
// has returned from `start.run()`. `current_worker` is the host's thread-local slot or null.
unsafe impl Spawner for HostSpawner {
    type Parker = SpinParker;

    fn new_parker(&self) -> SpinParker {
        SpinParker::new(self.host.yield_now)
    }

    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        // Counted before the thread exists, so the count never goes below zero.
        self.running.fetch_add(1, Ordering::Relaxed);
        let arg = Box::into_raw(Box::new(Trampoline { start, running: &self.running }));
        let start = ThreadStart { entry: trampoline, arg: arg.cast() };
        if (self.host.spawn)(self.host.context, start, stack_size) {
            return Ok(());
        }
        // SAFETY: the host refused, so the trampoline never runs: the box is still ours.
        drop(unsafe { Box::from_raw(arg) });
        self.running.fetch_sub(1, Ordering::Relaxed);
        Err(SpawnError)
    }

    fn join_all(&self) {
        // The pool calls this once its last thread said it is leaving: what is left to wait
        // for is the few instructions up to the trampoline's decrement.
        while self.running.load(Ordering::Acquire) != 0 {
            (self.host.yield_now)();
        }
        (self.host.join)(self.host.context);
    }

    fn available_parallelism(&self) -> usize {
        self.host.parallelism.max(1)
    }

    #[inline]
    fn current_worker(&self) -> *const () {
        match self.host.tls {
            Some((get, _)) => get(),
            None => core::ptr::null(),
        }
    }

    fn set_current_worker(&self, worker: *const ()) {
        if let Some((_, set)) = self.host.tls {
            set(worker);
        }
    }
}
