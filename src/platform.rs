//! What the pool needs from its host: a way to block a thread ([`Parker`]) and a way to start
//! threads ([`Spawner`]). The `std` feature provides both (`crate::os`); a bare-metal or RTOS
//! host implements them itself (README: "Porting to a new platform").

use core::ffi::c_void;
use core::fmt;
use core::time::Duration;

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
    pub unsafe fn run(self) {
        // SAFETY: the pool built `entry`/`arg` together; the caller runs it once.
        unsafe { (self.entry)(self.arg) }
    }
}

/// The error a [`Spawner`] reports when it cannot start a thread (out of memory, thread limit,
/// a host that has no more threads). The pool survives it: it works with the threads it has.
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

    /// How many threads "as many as the hardware runs at once" means (`max_threads == 0`).
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
}
