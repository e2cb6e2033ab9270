//! Waiting for work to finish: a one-shot [`Signal`] with one waiter, and a counting latch
//! ([`CountLatch`], a wait group) built on it. Design texts 001 (CoreLatch) and 003
//! (help-until-complete on a worker, block-on elsewhere).
//!
//! [`ThreadPool::wait_for`](crate::ThreadPool::wait_for) waits on a signal: on one of the
//! pool's workers it keeps running other tasks and sleeps inside the pool's sleep protocol when
//! there are none (so a waiting worker never blocks work that is queued); on any other thread it
//! parks on a parker from the pool's platform.
//!
//! # The Signal's states
//! ```text
//!   EMPTY --register--> WAITING --set--> SETTING --(waiter woken)--> SET
//!     \------------------set------------------------------------->/
//! ```
//! * `register` stores the waiter (who to unpark) and then moves EMPTY -> WAITING (Release), so
//!   a setter that sees WAITING also sees the waiter.
//! * `set` swaps in SETTING; if it displaced WAITING it unparks the waiter; then it stores SET.
//!   That store is its **last access** to the signal or the waiter.
//! * The waiter returns only after it has seen SET. It never sleeps once it sees SETTING (the
//!   wake-up may already have been consumed); it spins for those few instructions instead. So the
//!   signal and the waiter's parker can live in the waiter's stack frame: no allocation, and no
//!   use after the waiter returned.

use core::fmt;
use core::ptr;

use crate::sync::{spin_hint, AtomicUsize, Ordering, UnsafeCell};

const EMPTY: usize = 0;
const WAITING: usize = 1;
const SETTING: usize = 2;
const SET: usize = 3;

/// Who to wake when a signal is set: a type-erased parker.
#[derive(Clone, Copy)]
pub(crate) struct Waiter {
    parker: *const (),
    unpark: unsafe fn(*const ()),
}

impl Waiter {
    /// A waiter that unparks `parker`.
    pub(crate) fn new<P: crate::Parker>(parker: &P) -> Self {
        unsafe fn unpark<P: crate::Parker>(parker: *const ()) {
            // SAFETY: built from a `&P` below; the signal protocol keeps it alive until `set`
            // has stored SET (see module docs).
            unsafe { (*parker.cast::<P>()).unpark() }
        }
        Self { parker: ptr::from_ref(parker).cast(), unpark: unpark::<P> }
    }

    /// # Safety
    /// The parker is alive (the signal protocol guarantees it during `set`).
    unsafe fn wake(self) {
        // SAFETY: the caller's contract.
        unsafe { (self.unpark)(self.parker) }
    }
}

/// A one-shot completion with at most one waiter: one thread [`set`](Self::set)s it, once; one
/// thread waits for it with [`ThreadPool::wait_for`](crate::ThreadPool::wait_for) (helping
/// with other work on a worker, parking elsewhere). No allocation: it may live in the waiter's
/// stack frame, since the setter's last access comes before the waiter can return.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, Signal, ThreadPool};
/// use std::sync::Arc;
///
/// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
/// let done = Arc::new(Signal::new());
/// let setter = done.clone();
/// pool.spawn(move || {
///     // ... the work ...
///     // SAFETY: the only `set` of this signal.
///     unsafe { setter.set() };
/// })
/// .unwrap();
/// pool.wait_for(&done); // parks here (not a worker) until `set`
/// assert!(done.is_set());
/// # }
/// ```
pub struct Signal {
    /// A `usize`, not a `u32`, so that no byte of a `Signal` is padding: `set(&self)` is still
    /// running after its last access (the store of SET) while the waiter may already free the
    /// signal. A shared reference keeps only the bytes outside an `UnsafeCell` protected for
    /// the whole call (Stacked Borrows), and padding is such a byte: Miri reported that free as
    /// undefined behaviour (`JoinHandle::join`'s doc example) when the state was a `u32`.
    state: AtomicUsize,
    waiter: UnsafeCell<Option<Waiter>>,
}

// No padding in a `Signal` (see `state`).
#[cfg(not(loom))]
static_assertions::const_assert_eq!(
    core::mem::size_of::<Signal>(),
    core::mem::size_of::<AtomicUsize>() + core::mem::size_of::<UnsafeCell<Option<Waiter>>>()
);

// SAFETY: `waiter` is written only by the single waiter before it publishes WAITING (Release)
// and read only by the single setter after it observes WAITING (Acquire).
unsafe impl Send for Signal {}
// SAFETY: as above.
unsafe impl Sync for Signal {}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal").field("state", &self.state.load(Ordering::Relaxed)).finish()
    }
}

impl Default for Signal {
    fn default() -> Self {
        Self::new()
    }
}

impl Signal {
    /// An unset signal.
    ///
    /// ```
    /// assert!(!pool::Signal::new().is_set());
    /// ```
    pub fn new() -> Self {
        Self { state: AtomicUsize::new(EMPTY), waiter: UnsafeCell::new(None) }
    }

    /// Whether `set` has completed (the waiter may return and free the signal).
    ///
    /// ```
    /// let signal = pool::Signal::new();
    /// assert!(!signal.is_set());
    /// // SAFETY: set once.
    /// unsafe { signal.set() };
    /// assert!(signal.is_set());
    /// ```
    #[inline]
    pub fn is_set(&self) -> bool {
        // Acquire pairs with `set`'s Release: everything before the set is visible.
        self.state.load(Ordering::Acquire) == SET
    }

    /// Whether `set` has begun: the waiter must not sleep any more.
    #[inline]
    pub(crate) fn is_setting(&self) -> bool {
        self.state.load(Ordering::Acquire) >= SETTING
    }

    /// Registers the (only) waiter. Returns false if the signal is already being set.
    ///
    /// # Safety
    /// Called at most once per signal, by the thread that will wait; `waiter`'s parker stays
    /// alive until this signal `is_set`.
    pub(crate) unsafe fn register(&self, waiter: Waiter) -> bool {
        // SAFETY: only the waiter writes `waiter`, and only before publishing WAITING.
        self.waiter.with_mut(|w| unsafe { *w = Some(waiter) });
        // Release: the setter that reads WAITING (Acquire) sees the waiter.
        self.state.compare_exchange(EMPTY, WAITING, Ordering::Release, Ordering::Relaxed).is_ok()
    }

    /// Sets the signal and wakes the waiter, if one registered.
    ///
    /// # Safety
    /// Called at most once per signal. After it returns, the signal may already be freed.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let signal = pool::Signal::new();
    /// std::thread::scope(|s| {
    ///     // SAFETY: the only `set`; `signal` outlives the scoped thread.
    ///     s.spawn(|| unsafe { signal.set() });
    ///     pool.wait_for(&signal); // returns once the other thread has set it
    /// });
    /// assert!(signal.is_set());
    /// # }
    /// ```
    pub unsafe fn set(&self) {
        // AcqRel: Acquire sees the registered waiter; Release publishes the work done before.
        if self.state.swap(SETTING, Ordering::AcqRel) == WAITING {
            // SAFETY: WAITING was published after the waiter was written; the waiter keeps its
            // parker alive until it sees SET, which we store below.
            if let Some(waiter) = self.waiter.with(|w| unsafe { *w }) {
                // SAFETY: see above.
                unsafe { waiter.wake() };
            }
        }
        // Release pairs with `is_set`. Our last access to `self`.
        self.state.store(SET, Ordering::Release);
    }

    /// Spins through the short SETTING window until SET.
    #[inline]
    pub(crate) fn spin_until_set(&self) {
        while !self.is_set() {
            spin_hint();
        }
    }
}

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
/// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
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
    signal: Signal,
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

    /// Drops the "open" unit: from here the count can reach zero. Called once by the waiter.
    pub(crate) fn close(&self) -> &Signal {
        // SAFETY: the open unit is released exactly once, by the (single) waiter.
        unsafe { self.done() };
        &self.signal
    }
}

#[cold]
#[inline(never)]
fn overflow(n: usize) -> ! {
    panic!("CountLatch::add({n}) would overflow the latch's count")
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn signal_without_waiter() {
        let s = Signal::new();
        assert!(!s.is_set());
        // SAFETY: set once.
        unsafe { s.set() };
        assert!(s.is_set());
        // Registering after the set fails: the waiter does not wait.
        let p = NoopParker;
        // SAFETY: no parker needed since it is never woken; a dangling-free dummy.
        assert!(!unsafe { s.register(Waiter::new(&p)) });
    }

    #[test]
    fn count_latch_counts() {
        let l = CountLatch::new();
        l.add(3);
        assert_eq!(l.pending(), 3);
        // SAFETY: one done per unit.
        unsafe {
            l.done();
            l.done();
        }
        let signal = l.close();
        assert!(!signal.is_set());
        // SAFETY: the last unit.
        unsafe { l.done() };
        assert!(signal.is_set());
    }

    struct NoopParker;
    impl crate::Parker for NoopParker {
        fn park(&self) {}
        fn park_timeout(&self, _: core::time::Duration) {}
        fn unpark(&self) {}
    }
}
