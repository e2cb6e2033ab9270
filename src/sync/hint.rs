//! [`spin_hint`]: one round of a spin loop.

/// A spin-loop hint (loom, shuttle: a yield point, so spinning models terminate and the
/// spinner lets the thread it waits for run).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(all(shuttle, not(loom)))]
    shuttle::thread::yield_now();
    #[cfg(not(any(loom, shuttle)))]
    core::hint::spin_loop();
}
