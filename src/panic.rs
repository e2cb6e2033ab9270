//! What happens when a Rust closure task panics.
//!
//! * `std`: the panic is caught at the task boundary, counted ([`panic_count`]), and the worker
//!   goes on with the next task. The panic message is printed by the panic hook as usual.
//! * no `std` (or `panic = "abort"`): there is nothing to catch with; task callbacks are
//!   `extern "C"`, so an unwinding panic aborts the process rather than crossing into foreign
//!   frames. Host C callbacks never unwind.

#[cfg(feature = "std")]
static PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Number of panics caught in closure tasks (process-wide; always 0 without `std`).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
/// let before = pool::panic_count();
/// pool.spawn(|| panic!("caught at the task boundary")).unwrap(); // the hook prints it
/// pool.spawn(|| println!("the worker goes on")).unwrap();
/// pool.shutdown().unwrap();
/// assert!(pool::panic_count() > before);
/// # }
/// ```
pub fn panic_count() -> usize {
    #[cfg(feature = "std")]
    return PANICS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "std"))]
    0
}

/// Runs `f`, catching and counting a panic where `std` allows it.
#[inline]
pub(crate) fn run_catching<F: FnOnce()>(f: F) {
    #[cfg(feature = "std")]
    {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    #[cfg(not(feature = "std"))]
    f()
}
