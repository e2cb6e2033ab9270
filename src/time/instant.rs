//! [`Instant`]: a point in time on a pool's clock.

use core::ops::{Add, Sub};
use core::time::Duration;

#[cfg(doc)]
use crate::{Spawner, ThreadPool};

/// A point in time on a pool's clock ([`Spawner::now_ns`]): nanoseconds since the clock's
/// origin. Instants of different pools are not comparable (each platform clock has its own
/// origin). Get one from [`ThreadPool::now`].
///
/// ```
/// use core::time::Duration;
/// use pool::time::Instant;
///
/// let a = Instant::from_nanos(1_000);
/// let b = a + Duration::from_micros(2);
/// assert_eq!(b.as_nanos(), 3_000);
/// assert_eq!(b - a, Duration::from_micros(2));
/// assert_eq!(a - b, Duration::ZERO, "saturates");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The instant `ns` nanoseconds after the clock's origin.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(ns)
    }

    /// Nanoseconds since the clock's origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the end of time (about 584 years after the origin).
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl Sub for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}
