//! Timers for tasks on the pool (design text 003's tick-end timer maintenance): [`sleep`],
//! [`sleep_until`], [`timeout`] and [`interval`], and [`ThreadPool::submit_after`] for
//! intrusive tasks. `no_std` + `alloc`; time comes from the platform's clock
//! ([`Spawner::now_ns`]), one origin per pool.
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use std::time::Duration;
//! use pool::time::{sleep, timeout};
//!
//! let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
//! let start = std::time::Instant::now();
//! let handle = pool
//!     .spawn_future(async {
//!         sleep(Duration::from_millis(20)).await;
//!         // A future that never completes, cut short.
//!         timeout(Duration::from_millis(5), std::future::pending::<()>()).await
//!     })
//!     .unwrap();
//! assert!(handle.join().unwrap().is_err(), "timed out");
//! assert!(start.elapsed() >= Duration::from_millis(25), "never early");
//! # }
//! ```
//!
//! # Design
//! * **The wheel** (`wheel.rs`): one hierarchical timing wheel per pool (tokio's: six levels
//!   of 64 slots, ticks of 2^20 ns, about 1.05 ms), guarded by a spin lock held only for list
//!   operations. Its entries are intrusive: a [`Sleep`] embeds its entry, so a timer costs no
//!   allocation; it is pinned once polled, and dropping it takes it out of the wheel
//!   (cancellation). A deadline is rounded **up** to a tick and a tick fires only once the
//!   clock has passed its start, so a timer never fires early; it fires up to about a tick
//!   late, plus scheduling.
//! * **Who fires** (`scheduler::timers`, `scheduler::park`): the scheduler's two hooks. At the end of each tick (every 128
//!   tasks run, `scheduler::worker`), worker 0 fires the timers that are due, and any other
//!   worker does if they are overdue by `STALE_TICKS` (2 ticks: worker 0 is busy in a long task); with
//!   no timer pending that costs one Relaxed load per tick. An idle worker about to sleep
//!   claims the *timer parker* role if nobody holds it and parks with a timeout equal to the
//!   next deadline; every other idle worker parks without a timeout, so a timer wakes exactly
//!   one thread, and a far timer costs no CPU meanwhile. A timer that becomes the earliest
//!   wakes the timer parker (or, if there is none and the caller is not one of the pool's
//!   workers, notifies the pool so that one idle worker takes the role).
//! * **Binding**: a timer belongs to one pool's wheel. [`ThreadPool::sleep`] and friends bind
//!   at once; the free functions ([`sleep`], …) bind to the pool of the task that creates them
//!   (`std`: the task this thread is polling) or, failing that, of the task that first polls
//!   them (its waker). A bound timer holds a reference on the pool's memory, so it may outlive
//!   the pool handle safely.
//! * **Shutdown**: [`ThreadPool::shutdown`] closes the wheel after the pool stops polling tasks
//!   and fires every pending timer: a sleeping task is woken into a closed pool and cancelled
//!   (its `JoinHandle` reports [`JoinError::is_cancelled`](crate::JoinError::is_cancelled));
//!   a delayed task ([`ThreadPool::submit_after`]) is queued and runs then, early. Shutdown
//!   never waits for a deadline. A timer polled after that outside any task (in `block_on`)
//!   panics: it could never complete.
//! * **No clock**: on a platform whose spawner has none (`now_ns` returns `None`), polling a
//!   timer panics with a message that says so, and [`ThreadPool::submit_after`] returns
//!   [`Error::InvalidArgument`](crate::Error::InvalidArgument): a clear failure, never a hang.

mod pool;
mod sleep;

/// The wheel's API for the loom models in `tests/loom_timer.rs` (only under `--cfg loom`).
#[cfg(loom)]
#[doc(hidden)]
pub use crate::timer::loom;

use core::ops::{Add, Sub};
use core::time::Duration;

pub use sleep::{interval, sleep, sleep_until, timeout, Elapsed, Interval, Sleep, Timeout};

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
