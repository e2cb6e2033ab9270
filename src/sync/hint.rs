//! [`spin_hint`]: one round of a spin loop.

/// A spin-loop hint (loom: a yield point, so spinning models terminate).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
