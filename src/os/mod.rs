//! The `std` platform: parkers, the OS-thread spawner, and the lazily started global pool.
//!
//! * [`FutexParker`] (Linux): one `u32` futex word per thread, no lock, one syscall per wake.
//! * [`CondvarParker`] (everywhere `std` runs): a `Mutex<bool>` + `Condvar`.
//! * [`ThreadSpawner`]: `std::thread` with a configurable stack size, joins what it started.
//! * [`DefaultParker`]: the futex parker on Linux, the condvar parker elsewhere; chosen here,
//!   in one place.

mod condvar;
#[cfg(target_os = "linux")]
mod futex;
#[cfg(unix)]
pub(crate) mod fork;
pub(crate) mod global;
mod thread;

pub use condvar::CondvarParker;
#[cfg(target_os = "linux")]
pub use futex::FutexParker;
pub use global::global;
pub use thread::ThreadSpawner;

/// The parker `ThreadSpawner` uses unless told otherwise.
///
/// ```
/// use pool::{DefaultParker, Parker};
/// let parker = DefaultParker::default();
/// parker.unpark();
/// parker.park(); // the token was there: returns at once
/// ```
#[cfg(target_os = "linux")]
pub type DefaultParker = FutexParker;
/// The parker `ThreadSpawner` uses unless told otherwise.
#[cfg(not(target_os = "linux"))]
pub type DefaultParker = CondvarParker;

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

impl crate::ThreadPool<ThreadSpawner> {
    /// A pool on OS threads with the [`DefaultParker`]. No thread starts until work arrives.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for `max_threads` above
    /// [`MAX_THREADS`](crate::MAX_THREADS); [`Error::OutOfMemory`](crate::Error::OutOfMemory)
    /// if the allocator fails.
    ///
    /// ```
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// assert_eq!(pool.max_threads(), 2);
    /// ```
    pub fn new(config: crate::Config) -> Result<Self, crate::Error> {
        Self::with_spawner(config, ThreadSpawner::try_named("pool-worker")?)
    }
}
