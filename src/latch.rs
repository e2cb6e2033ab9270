//! Waiting for work to finish: a one-shot [`Signal`] with one waiter, and a counting latch
//! ([`CountLatch`], a wait group) built on it. Design texts 001 (CoreLatch) and 003
//! (help-until-complete on a worker, block-on elsewhere).
//!
//! [`ThreadPool::wait_for`](crate::ThreadPool::wait_for) waits on a signal: on one of the
//! pool's workers it keeps running other tasks and sleeps inside the pool's sleep protocol when
//! there are none (so a waiting worker never blocks work that is queued); on any other thread it
//! parks on a parker from the pool's platform.
//!
//! The signal is the crate's one completion primitive: fork-join halves, [`CountLatch`], the
//! pool's shutdown, an async task's join slot (`runtime`) and a blocking-pool handle
//! (`blocking::handle`) all complete through it, so its loom models (`tests/loom_signal.rs`)
//! cover all of them.
//!
//! # The Signal's states
//! ```text
//!            register (slot written, then published)
//!   EMPTY ------------------------------------------> WAITING --set--> SETTING --(waiter woken)--> SET
//!     ^  \                                               |
//!     |   \------------------------set-------------------|---------------------------------->/
//!     +---------- take the slot back (the waiter) -------+
//! ```
//! The waiter is a [`Waker`]: an async waiter's own, or a parker's (`parker_waker`: its wake is
//! the parker's `unpark`, and it holds no reference).
//! * `register` writes the waker into the slot while the state is EMPTY and then moves EMPTY ->
//!   WAITING (Release), so a setter that sees WAITING also sees the waker. An async waiter that
//!   polls again first takes the slot back (WAITING -> EMPTY), replaces the waker unless the old
//!   one wakes the same task, and publishes WAITING again. If either compare-and-swap fails the
//!   signal is being set or set: the waiter is complete and does not wait (a waker it had just
//!   written is taken back out: the setter, which saw EMPTY, never reads the slot).
//! * So the slot belongs to the waiter while the state is EMPTY, to the setter from its swap
//!   that displaced WAITING, and to nobody else: exactly one side touches it at a time.
//! * `set` swaps in SETTING; if it displaced WAITING it takes the waker and wakes it; then it
//!   stores SET. That store is its **last access** to the signal or the waiter (also when the
//!   wake panics: a drop guard stores it).
//! * A waiter whose signal or parker lives in its own stack frame (a fork-join frame, a parker's
//!   waker) returns only after it has seen SET. It never sleeps once it sees SETTING (the
//!   wake-up may already have been consumed); it spins through that short window instead
//!   (`spin_until_set`, which yields the thread after a few spins with `std`). So the signal and
//!   the waiter's parker can live in the waiter's stack frame: no allocation, and no use after
//!   the waiter returned. An async waiter (its own waker, owned by the slot) whose signal lives
//!   in a reference-counted allocation (a task's join signal, a blocking job) may treat SETTING
//!   as complete: the setter's reference keeps the signal alive until its last access.

use core::fmt;
use core::marker::PhantomData;
use core::task::{RawWaker, RawWakerVTable, Waker};

use crate::sync::{spin_hint, AtomicUsize, Ordering, UnsafeCell};

const EMPTY: usize = 0;
const WAITING: usize = 1;
const SETTING: usize = 2;
const SET: usize = 3;

/// Spins in `spin_until_set` before it yields the thread (`std`): the setter's wake (an
/// `unpark`, a system call at worst) usually returns within this many.
const SETTING_SPINS: u32 = 64;

/// A waker whose wake unparks `parker` and which holds no reference (clone copies the
/// pointer, drop does nothing): a thread's parker as a signal's waiter.
///
/// # Safety
/// The waker and every clone of it are woken only while `parker` is alive. A signal's
/// protocol guarantees that for a waiter that returns only after the signal is set (see the
/// module docs): the setter's wake comes before its store of SET.
pub(crate) unsafe fn parker_waker<P: crate::Parker>(parker: &P) -> Waker {
    // SAFETY: the vtable's functions expect a `*const P`, which this is; the caller keeps the
    // parker alive as long as the waker may be woken.
    unsafe { Waker::from_raw(ParkerWaker::<P>::raw(core::ptr::from_ref(parker).cast())) }
}

/// The vtable of [`parker_waker`], one per parker type.
struct ParkerWaker<P>(PhantomData<P>);

impl<P: crate::Parker> ParkerWaker<P> {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(Self::clone, Self::wake, Self::wake, Self::drop);

    fn raw(parker: *const ()) -> RawWaker {
        RawWaker::new(parker, &Self::VTABLE)
    }

    unsafe fn clone(parker: *const ()) -> RawWaker {
        Self::raw(parker)
    }

    unsafe fn wake(parker: *const ()) {
        // SAFETY: built from a `&P` by `parker_waker`, whose caller keeps it alive while the
        // waker may be woken.
        unsafe { (*parker.cast::<P>()).unpark() }
    }

    unsafe fn drop(_parker: *const ()) {}
}

/// A one-shot completion with at most one waiter: one thread [`set`](Self::set)s it, once; one
/// thread waits for it with [`ThreadPool::wait_for`](crate::ThreadPool::wait_for) (helping
/// with other work on a worker, parking elsewhere), or one future awaits it through the crate's
/// own handles (an async `JoinHandle`, a `BlockingHandle`). No allocation: it may live in the
/// waiter's stack frame, since the setter's last access comes before the waiter can return.
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
    /// The waiter's waker: the waiter's while the state is EMPTY, the setter's once its swap
    /// displaced WAITING (module docs). Whatever is left in it is dropped with the signal.
    waker: UnsafeCell<Option<Waker>>,
}

// No padding in a `Signal` (see `state`).
#[cfg(not(loom))]
static_assertions::const_assert_eq!(
    core::mem::size_of::<Signal>(),
    core::mem::size_of::<AtomicUsize>() + core::mem::size_of::<UnsafeCell<Option<Waker>>>()
);

// SAFETY: `waker` (a `Waker`, which is Send + Sync) is touched by one side at a time: the
// waiter while EMPTY (it publishes WAITING with Release), the setter after its swap displaced
// WAITING (Acquire); see the module docs.
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
        Self { state: AtomicUsize::new(EMPTY), waker: UnsafeCell::new(None) }
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

    /// Whether `set` has begun: the waiter must not sleep any more, and everything before the
    /// set is visible (Acquire, paired with the swap to SETTING).
    #[inline]
    pub(crate) fn is_setting(&self) -> bool {
        self.state.load(Ordering::Acquire) >= SETTING
    }

    /// Registers the (only) waiter's waker, or replaces the one it registered before. Returns
    /// false if the signal is being set or is set: the waiter is complete and must not wait
    /// (everything before the set is visible: Acquire). A waker that wakes the same task as
    /// the registered one ([`Waker::will_wake`]) leaves the slot as it is.
    ///
    /// # Safety
    /// Called only by the signal's one waiter (one thread at a time). A waker from
    /// [`parker_waker`] keeps its parker alive until this signal `is_set`, or until the waker is
    /// replaced.
    pub(crate) unsafe fn register(&self, waker: &Waker) -> bool {
        let state = self.state.load(Ordering::Acquire);
        if state == WAITING {
            // Take the slot back. Relaxed on success: only we wrote the slot, and the setter
            // reads it only after displacing WAITING, which would make this fail. Acquire on
            // failure: we read SETTING or SET, after the setter's Release.
            if self.state.compare_exchange(WAITING, EMPTY, Ordering::Relaxed, Ordering::Acquire).is_err() {
                return false;
            }
        } else if state != EMPTY {
            return false;
        }
        // SAFETY: the state is EMPTY and we are the waiter: the slot is ours (module docs).
        // An old waker we replace is dropped here.
        self.waker.with_mut(|slot| unsafe {
            match &*slot {
                Some(old) if old.will_wake(waker) => {}
                _ => *slot = Some(waker.clone()),
            }
        });
        // Release: the setter that reads WAITING (Acquire) sees the waker. Acquire on failure:
        // as above.
        if self.state.compare_exchange(EMPTY, WAITING, Ordering::Release, Ordering::Acquire).is_ok() {
            return true;
        }
        // The setter displaced EMPTY, so it never reads the slot: still ours. Empty it (a
        // task's waker would otherwise hold its task until the signal is dropped).
        // SAFETY: as above.
        drop(self.waker.with_mut(|slot| unsafe { (*slot).take() }));
        false
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
        // AcqRel: Acquire sees the registered waker; Release publishes the work done before.
        if self.state.swap(SETTING, Ordering::AcqRel) == WAITING {
            // SAFETY: we displaced WAITING, so the slot is ours; once, as `set`.
            unsafe { self.wake_and_set() };
            return;
        }
        // Release pairs with `is_set`. Our last access to `self`.
        self.state.store(SET, Ordering::Release);
    }

    /// `set` after its swap displaced WAITING: take the waker, wake it, store SET (also if the
    /// wake panics, so the waiter never spins forever on SETTING).
    ///
    /// # Safety
    /// The caller's swap displaced WAITING (the slot is ours).
    #[cold]
    #[inline(never)]
    unsafe fn wake_and_set(&self) {
        struct StoreSet<'a>(&'a AtomicUsize);
        impl Drop for StoreSet<'_> {
            fn drop(&mut self) {
                // Release pairs with `is_set`. The setter's last access to the signal.
                self.0.store(SET, Ordering::Release);
            }
        }
        let _set = StoreSet(&self.state);
        // SAFETY: the caller's contract: WAITING was published after the waker was written.
        let waker = self.waker.with_mut(|slot| unsafe { (*slot).take() });
        if let Some(waker) = waker {
            // A parker's waker: its parker is alive until the waiter sees SET, stored after
            // this (`parker_waker`'s contract).
            waker.wake();
        }
    }

    /// Waits through the short SETTING window until SET: spins, and with `std` yields the
    /// thread after [`SETTING_SPINS`] rounds (the setter may have been preempted between its
    /// wake and its store of SET, on a machine with more runnable threads than cores).
    #[inline]
    pub(crate) fn spin_until_set(&self) {
        let mut spins = 0u32;
        while !self.is_set() {
            if spins < SETTING_SPINS {
                spins += 1;
                spin_hint();
            } else {
                #[cfg(all(feature = "std", not(loom)))]
                std::thread::yield_now();
                #[cfg(not(all(feature = "std", not(loom))))]
                spin_hint();
            }
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

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

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
        // SAFETY: we are the only waiter; `p` outlives the signal.
        assert!(!unsafe { s.register(&parker_waker(&p)) });
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
        let signal = l.close().expect("a unit is outstanding: the waiter must wait");
        assert!(!signal.is_set());
        // SAFETY: the last unit.
        unsafe { l.done() };
        assert!(signal.is_set());
        assert!(l.is_released());
    }

    #[test]
    fn count_latch_closes_without_its_signal_when_nothing_is_outstanding() {
        // Every unit done before the wait: the close finishes the latch by itself.
        let l = CountLatch::new();
        l.add(2);
        // SAFETY: one done per unit.
        unsafe {
            l.done();
            l.done();
        }
        assert!(l.only_open());
        assert!(l.close().is_none());
        assert!(l.is_released());
        assert!(!l.signal.is_set(), "nobody waits on it: not set");
        // Nothing added at all: the same.
        let l = CountLatch::new();
        assert!(l.close().is_none());
        assert!(l.is_released());
    }

    /// A waker that counts its wakes; `Arc::strong_count` counts its clones.
    struct CountWakes(core::sync::atomic::AtomicUsize);
    impl std::task::Wake for CountWakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
    }
    fn counting_waker() -> (std::sync::Arc<CountWakes>, Waker) {
        let count = std::sync::Arc::new(CountWakes(Default::default()));
        (count.clone(), Waker::from(count))
    }
    fn wakes(c: &CountWakes) -> usize {
        c.0.load(core::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn waker_replaced_then_woken_once() {
        let s = Signal::new();
        let (first, w1) = counting_waker();
        let (second, w2) = counting_waker();
        // SAFETY: this thread is the only waiter.
        unsafe {
            assert!(s.register(&w1));
            // The same waker again keeps the slot's clone (no second clone).
            assert!(s.register(&w1));
            assert_eq!(std::sync::Arc::strong_count(&first), 3);
            // A new waker replaces it: the old clone is dropped, not woken.
            assert!(s.register(&w2));
        }
        assert_eq!(std::sync::Arc::strong_count(&first), 2);
        // SAFETY: set once.
        unsafe { s.set() };
        assert!(s.is_set());
        assert_eq!((wakes(&first), wakes(&second)), (0, 1));
        // The setter took the slot's clone and consumed it waking.
        assert_eq!(std::sync::Arc::strong_count(&second), 2);
        // SAFETY: as above.
        assert!(!unsafe { s.register(&w2) }, "set: complete, nothing registered");
        assert_eq!(std::sync::Arc::strong_count(&second), 2);
    }

    #[test]
    fn waker_left_in_an_unset_signal_is_dropped_with_it() {
        let (count, w) = counting_waker();
        let s = Signal::new();
        // SAFETY: the only waiter.
        assert!(unsafe { s.register(&w) });
        assert_eq!(std::sync::Arc::strong_count(&count), 3);
        drop(s);
        assert_eq!(std::sync::Arc::strong_count(&count), 2);
        assert_eq!(wakes(&count), 0);
    }

    #[test]
    fn panicking_wake_still_sets() {
        struct Boom;
        impl std::task::Wake for Boom {
            fn wake(self: std::sync::Arc<Self>) {
                panic!("waker panicked");
            }
        }
        let s = Signal::new();
        // SAFETY: the only waiter.
        assert!(unsafe { s.register(&Waker::from(std::sync::Arc::new(Boom))) });
        // SAFETY: set once.
        let caught = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| unsafe { s.set() }));
        assert!(caught.is_err());
        assert!(s.is_set(), "SET is stored even when the wake panics");
    }

    struct NoopParker;
    impl crate::Parker for NoopParker {
        fn park(&self) {}
        fn park_timeout(&self, _: core::time::Duration) {}
        fn unpark(&self) {}
    }
}
