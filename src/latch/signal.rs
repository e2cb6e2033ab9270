//! [`Signal`]: the one-shot completion with one waiter (the module docs of `latch` have its
//! states and rules), and the parker waker through which a thread waits on one.

use core::fmt;
use core::marker::PhantomData;
use core::task::{RawWaker, RawWakerVTable, Waker};
use core::time::Duration;

use crate::platform::Parker;
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
/// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
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
                #[cfg(all(feature = "std", not(any(loom, shuttle))))]
                std::thread::yield_now();
                #[cfg(not(all(feature = "std", not(any(loom, shuttle)))))]
                spin_hint();
            }
        }
    }
}

impl Signal {
    /// The waiter gives up its wait (its deadline passed): takes its waker back out of the
    /// slot, if it registered one. False if the setter displaced it first (the signal is being
    /// set: the waiter then waits for SET, as any waiter that saw SETTING).
    ///
    /// # Safety
    /// Called by the signal's one waiter.
    pub(crate) unsafe fn withdraw(&self) -> bool {
        // Relaxed on success: only we wrote the slot, and the setter reads it only after
        // displacing WAITING, which would make this fail (as `register`'s take-back). Acquire
        // on failure: we read SETTING or SET, after the setter's Release.
        match self.state.compare_exchange(WAITING, EMPTY, Ordering::Relaxed, Ordering::Acquire) {
            Ok(_) => {}
            // Nothing registered (the slot is empty), and no setter began.
            Err(EMPTY) => return true,
            Err(_) => return false,
        }
        // SAFETY: EMPTY again, and we are the waiter: the slot is ours (module docs).
        drop(self.waker.with_mut(|slot| unsafe { (*slot).take() }));
        true
    }

    /// Makes a set signal unset again, for a waiter that waits on it round after round
    /// (`block_on`). The slot is empty: a set signal's waker was taken by its setter, or back
    /// by its waiter.
    ///
    /// # Safety
    /// The signal is SET, and no setter touches it until the caller publishes (with Release,
    /// seen by that setter with Acquire) what makes the next one set it.
    pub(crate) unsafe fn reset(&self) {
        debug_assert!(self.is_set());
        // Relaxed: the caller's publication orders it before the next set.
        self.state.store(EMPTY, Ordering::Relaxed);
    }

    /// The one parked wait (module docs, "Waiting"): parks on `parker` (the calling thread's
    /// own) until the signal is set, or until `deadline` has passed (ns, on the clock the
    /// function reads; a clock that reads `None` counts as past). True if the signal is set;
    /// false if the deadline came first, and then nothing refers to `parker` any more. The
    /// signal's one waiter.
    pub(crate) fn wait<P: Parker>(&self, parker: &P, deadline: Option<(u64, &dyn Fn() -> Option<u64>)>) -> bool {
        // SAFETY: we are the only waiter; `parker` lives until the signal is set (the spin
        // below comes before it can be dropped) or the waker is withdrawn.
        if unsafe { self.register(&parker_waker(parker)) } {
            while !self.is_setting() {
                match deadline.map(|(at, now)| (at, now())) {
                    None => parker.park(),
                    Some((at, Some(now))) if now < at => parker.park_timeout(Duration::from_nanos(at - now)),
                    // SAFETY: registered above.
                    _ if unsafe { self.withdraw() } => return false,
                    _ => break,
                }
            }
        }
        // After SETTING the setter may still be inside its `unpark`, and SET is its last
        // access (tests/waiter_parker.rs).
        self.spin_until_set();
        true
    }
}
