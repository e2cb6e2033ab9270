//! The monotonic clock behind [`ThreadSpawner`](super::ThreadSpawner)'s `now_ns`.

/// A monotonic clock for [`Spawner::now_ns`](crate::Spawner::now_ns): nanoseconds since the
/// clock was made (`Instant`: `clock_gettime(CLOCK_MONOTONIC)` through the vDSO on Linux).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MonotonicClock(std::time::Instant);

impl MonotonicClock {
    pub(crate) fn new() -> Self {
        Self(std::time::Instant::now())
    }

    /// Nanoseconds since `new` (saturating after 584 years).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
