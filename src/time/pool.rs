//! The timer methods of [`ThreadPool`]: its clock, its pending timers, and [`Sleep`] futures
//! bound to it.

use core::time::Duration;

use super::instant::Instant;
use super::sleep::Sleep;
use crate::platform::Spawner;
use crate::scheduler::ThreadPool;

impl<S: Spawner> ThreadPool<S> {
    /// The pool's clock ([`Spawner::now_ns`]), or `None` on a platform without one.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let a = pool.now().unwrap();
    /// let b = pool.now().unwrap();
    /// assert!(b >= a);
    /// # }
    /// ```
    pub fn now(&self) -> Option<Instant> {
        self.inner().spawner.now_ns().map(Instant::from_nanos)
    }

    /// Timers pending in this pool's wheel (sleeps, timeouts, intervals and delayed tasks not
    /// yet fired or cancelled).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// assert_eq!(pool.pending_timers(), 0);
    /// # }
    /// ```
    pub fn pending_timers(&self) -> usize {
        self.inner().timers().pending()
    }

    /// A timer on this pool that completes once `duration` has passed (counted from now).
    /// Usable anywhere: in the pool's tasks, in [`block_on`](Self::block_on), or from any other
    /// executor (it wakes through its waker). See [`time`](crate::time).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::time::{Duration, Instant};
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let start = Instant::now();
    /// pool.block_on(pool.sleep(Duration::from_millis(5)));
    /// assert!(start.elapsed() >= Duration::from_millis(5));
    /// # }
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let now = self.inner().spawner.now_ns();
        let deadline = now.map(|now| now.saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)));
        Sleep::bound(self.inner().any(), deadline, duration)
    }

    /// A timer on this pool that completes once its clock reaches `deadline`.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let at = pool.now().unwrap() + std::time::Duration::from_millis(2);
    /// pool.block_on(pool.sleep_until(at));
    /// assert!(pool.now().unwrap() >= at);
    /// # }
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::bound(self.inner().any(), Some(deadline.as_nanos()), Duration::ZERO)
    }
}
