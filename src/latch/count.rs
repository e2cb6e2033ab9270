//! [`CountLatch`]: a counting latch (wait group) built on a [`Signal`].

use core::fmt;

use super::signal::Signal;
use crate::sync::{AtomicUsize, Ordering};

/// A counting latch (wait group): `add(n)` before starting work, `done()` when each piece
/// finishes, and one thread waits (with [`ThreadPool::wait_for_latch`](crate::ThreadPool::wait_for_latch))
/// until the count is back to zero.
///
/// The latch may live on the waiter's stack: once the count reaches zero and the waiter is
/// woken, nothing touches it again.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, CountLatch, ThreadPool};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
/// static LATCH: std::sync::OnceLock<CountLatch> = std::sync::OnceLock::new();
/// static SUM: AtomicUsize = AtomicUsize::new(0);
/// let latch = LATCH.get_or_init(CountLatch::new);
/// latch.add(10);
/// for i in 0..10 {
///     pool.spawn(move || {
///         SUM.fetch_add(i, Ordering::Relaxed);
///         // SAFETY: one `done` per `add`ed unit.
///         unsafe { LATCH.get().unwrap().done() };
///     }).unwrap();
/// }
/// pool.wait_for_latch(latch);
/// assert_eq!(SUM.load(Ordering::Relaxed), 45);
/// # }
/// ```
pub struct CountLatch {
    /// Outstanding units plus one "open" unit held until `wait` starts, so the count cannot
    /// reach zero (and set the signal) while `add` and `done` race before the wait.
    count: AtomicUsize,
    pub(super) signal: Signal,
}

impl fmt::Debug for CountLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountLatch").field("count", &self.count.load(Ordering::Relaxed)).finish()
    }
}

impl Default for CountLatch {
    fn default() -> Self {
        Self::new()
    }
}

impl CountLatch {
    /// A latch with nothing outstanding.
    ///
    /// ```
    /// assert_eq!(pool::CountLatch::new().pending(), 0);
    /// ```
    pub fn new() -> Self {
        Self { count: AtomicUsize::new(1), signal: Signal::new() }
    }

    /// Adds `n` outstanding units (before the work that will call `done` is started).
    ///
    /// # Panics
    /// If the count would overflow (more than `usize::MAX - 1` units outstanding), as `Arc`'s
    /// count does; the latch is left unchanged. [`try_add`](Self::try_add) returns an error
    /// instead.
    ///
    /// ```
    /// let latch = pool::CountLatch::new();
    /// latch.add(3);
    /// latch.add(1);
    /// assert_eq!(latch.pending(), 4);
    /// ```
    #[inline]
    pub fn add(&self, n: usize) {
        if self.try_add(n).is_err() {
            overflow(n);
        }
    }

    /// Adds `n` outstanding units, as [`add`](Self::add), or returns
    /// [`Error::Overflow`](crate::Error::Overflow) and changes nothing if the count would
    /// overflow.
    ///
    /// ```
    /// let latch = pool::CountLatch::new();
    /// latch.try_add(2).unwrap();
    /// assert_eq!(latch.try_add(usize::MAX), Err(pool::Error::Overflow));
    /// assert_eq!(latch.pending(), 2); // unchanged
    /// ```
    #[inline]
    pub fn try_add(&self, n: usize) -> Result<(), crate::Error> {
        // A CAS loop, not a fetch_add: an overflowing add must never be visible, even for a
        // moment (a wrapped count could reach zero under a racing `done` and set the signal).
        let mut prev = self.count.load(Ordering::Relaxed);
        loop {
            debug_assert!(prev > 0, "CountLatch::add after the latch was released");
            let Some(next) = prev.checked_add(n) else { return Err(crate::Error::Overflow) };
            match self.count.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(actual) => prev = actual,
            }
        }
    }

    /// Marks one unit done.
    ///
    /// # Safety
    /// At most one `done` per unit added. The last `done` may free nothing the waiter still
    /// needs: after it, the waiter may return and free the latch.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let latch = pool::CountLatch::new();
    /// let mut parts = [0u64; 4];
    /// latch.add(parts.len());
    /// std::thread::scope(|s| {
    ///     for (i, part) in parts.iter_mut().enumerate() {
    ///         let latch = &latch;
    ///         s.spawn(move || {
    ///             *part = i as u64 * 10;
    ///             // SAFETY: one `done` per unit added; the last one may let the waiter return.
    ///             unsafe { latch.done() };
    ///         });
    ///     }
    ///     pool.wait_for_latch(&latch); // every `done` happened before this returns
    /// });
    /// assert_eq!(parts.iter().sum::<u64>(), 60);
    /// # }
    /// ```
    #[inline]
    pub unsafe fn done(&self) {
        // AcqRel: Release publishes this unit's work; the Acquire in the last decrement makes
        // every unit's work visible before the signal is set.
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the count reaches zero once, so `set` runs once.
            unsafe { self.signal.set() };
        }
    }

    /// Whether the count reached zero (the wait began and every unit is done): `add` is no
    /// longer allowed (the C layer checks this).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn is_released(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Outstanding units (approximate while work runs).
    ///
    /// ```
    /// let latch = pool::CountLatch::new();
    /// latch.add(2);
    /// // SAFETY: one `done` per unit added.
    /// unsafe { latch.done() };
    /// assert_eq!(latch.pending(), 1);
    /// ```
    pub fn pending(&self) -> usize {
        self.count.load(Ordering::Relaxed).saturating_sub(1)
    }

    /// Whether every unit but the open one is done (Acquire: their work is visible). Then no
    /// other thread holds a unit, so none touches the latch again (`done`'s decrement that
    /// left 1 was its last access) and only the waiter may still add.
    #[inline]
    pub(crate) fn only_open(&self) -> bool {
        self.count.load(Ordering::Acquire) == 1
    }

    /// Drops the "open" unit, once, by the waiter: `None` if that finished the latch, else the
    /// signal that the last `done` sets. When every other unit is already done (the common
    /// case of fork-join whose forks the waiter ran itself) that is one load and one store,
    /// with no read-modify-write and no signal: nobody else touches the latch any more.
    #[inline]
    pub(crate) fn close(&self) -> Option<&Signal> {
        if self.only_open() {
            // Relaxed: no other thread reads the count from here on (above); the store only
            // makes `is_released` true for the C layer's checks on this thread.
            self.count.store(0, Ordering::Relaxed);
            return None;
        }
        // AcqRel as in `done`; reaching zero here means every other unit is done, so nobody
        // waits on the signal and it need not be set.
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            return None;
        }
        Some(&self.signal)
    }
}

#[cold]
#[inline(never)]
fn overflow(n: usize) -> ! {
    panic!("CountLatch::add({n}) would overflow the latch's count")
}
