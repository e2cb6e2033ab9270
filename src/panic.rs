//! Panics in the crate's own closures and futures: the one place that catches, counts and
//! re-raises them (the C boundary's guard, which turns a panic into a status code, is
//! `capi`'s).
//!
//! * `std`: a panic is caught where a task's code ends ([`catch`]): a closure task's panic is
//!   counted ([`panic_count`]) and the worker goes on with the next task; a fork-join half's or
//!   a future's travels to whoever waits for it, which re-raises it ([`resume`]) or reports it
//!   (an async `JoinHandle`'s error). The panic message is printed by the panic hook as usual.
//! * no `std` (or `panic = "abort"`): there is nothing to catch with; task callbacks are
//!   `extern "C"`, so an unwinding panic aborts the process rather than crossing into foreign
//!   frames ([`AbortOnUnwind`] where queued work borrows the unwinding frame). Host C callbacks
//!   never unwind.

use alloc::boxed::Box;

/// A caught panic's payload.
pub(crate) type Panic = Box<dyn core::any::Any + Send + 'static>;

#[cfg(feature = "std")]
static PANICS: crate::sync::Counter = crate::sync::Counter::new();

/// Number of panics caught in closure tasks (process-wide; always 0 without `std`).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
/// let before = pool::panic_count();
/// pool.spawn(|| panic!("caught at the task boundary")).unwrap(); // the hook prints it
/// pool.spawn(|| println!("the worker goes on")).unwrap();
/// pool.shutdown().unwrap();
/// assert!(pool::panic_count() > before);
/// # }
/// ```
pub fn panic_count() -> usize {
    #[cfg(feature = "std")]
    return PANICS.get();
    #[cfg(not(feature = "std"))]
    0
}

/// Runs `f`, catching a panic where `std` can (without `std` it is never `Err`: a panic
/// aborts at the task's `extern "C"` callback).
#[inline(always)]
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Panic> {
    #[cfg(feature = "std")]
    return std::panic::catch_unwind(core::panic::AssertUnwindSafe(f));
    #[cfg(not(feature = "std"))]
    Ok(f())
}

/// Runs a closure task's `f`, catching and counting a panic where `std` allows it.
#[inline]
pub(crate) fn run_catching<F: FnOnce()>(f: F) {
    if catch(f).is_err() {
        #[cfg(feature = "std")]
        PANICS.bump_shared();
    }
}

/// Re-raises a caught panic in the thread that waited for its task.
#[cold]
pub(crate) fn resume(p: Panic) -> ! {
    #[cfg(feature = "std")]
    std::panic::resume_unwind(p);
    #[cfg(not(feature = "std"))]
    {
        drop(p);
        unreachable!("without std no panic is caught")
    }
}

/// Aborts if a panic unwinds through it (no `std`: nothing can catch, and queued work borrows
/// the frame). Dropped only by unwinding: the normal path forgets it.
#[cfg(not(feature = "std"))]
pub(crate) struct AbortOnUnwind;

#[cfg(not(feature = "std"))]
impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        // A panic while panicking aborts.
        panic!("pool: a panic unwound out of join/scope while work borrowing its frame was queued");
    }
}
