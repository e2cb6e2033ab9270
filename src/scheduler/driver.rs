//! The pool's I/O driver slot: the installed [`Driver`] (at most one, set once), the lock
//! around its `poll` and `park` (one worker at a time, design text 003), and the shutdown
//! hand-shake that tells it exactly once. The driver trait and when the pool calls what are
//! in `crate::io`; who blocks in it is the parking's (`park.rs`).

use alloc::boxed::Box;
use core::fmt;

use crate::error::Error;
use crate::io::Driver;
use crate::sync::{fence, AtomicBool, AtomicPtr, Backoff, Locked, Ordering, TryLock};

/// The pool's installed driver (at most one, set once), the lock around `poll` / `park`, and
/// whether the pool shut down (its driver is told once, however installing and shutting down
/// interleave).
pub(crate) struct DriverSlot {
    /// A leaked `Box<Box<dyn Driver>>` (a thin pointer), or null. Set once, freed on drop.
    driver: AtomicPtr<Box<dyn Driver>>,
    busy: TryLock<()>,
    /// The pool shut down (`shutdown`).
    closed: AtomicBool,
    /// `Driver::shutdown` was called (by `shutdown` or by a `set` that came after it).
    told: AtomicBool,
}

impl fmt::Debug for DriverSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverSlot").field("installed", &self.get().is_some()).finish_non_exhaustive()
    }
}

impl Drop for DriverSlot {
    fn drop(&mut self) {
        let ptr = self.driver.load(Ordering::Acquire);
        if !ptr.is_null() {
            // SAFETY: leaked from a Box in `set`; the pool is being freed, nobody calls it now.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}

/// The driver's lock, released on drop.
pub(crate) struct DriverGuard<'a> {
    _locked: Locked<'a, ()>,
    pub(crate) driver: &'a dyn Driver,
}

impl DriverSlot {
    pub(crate) fn new() -> Self {
        Self {
            driver: AtomicPtr::new(core::ptr::null_mut()),
            busy: TryLock::new(()),
            closed: AtomicBool::new(false),
            told: AtomicBool::new(false),
        }
    }

    /// The pool shut down: tells the installed driver ([`Driver::shutdown`]), now or when one
    /// is installed later (`set`). Store, fence, load on both sides (a Dekker pair; loom
    /// checks it through the fences): either this load sees the driver, or `set`'s load of
    /// `closed` sees the store; `told` makes it once.
    pub(crate) fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.tell();
    }

    fn tell(&self) {
        let ptr = self.driver.load(Ordering::Acquire);
        if !ptr.is_null() && !self.told.swap(true, Ordering::AcqRel) {
            // SAFETY: set once, freed only when the pool is.
            unsafe { &**ptr }.shutdown();
        }
    }

    /// The driver, if one is installed (Acquire: pairs with `set`'s Release).
    #[inline]
    pub(crate) fn get(&self) -> Option<&dyn Driver> {
        let ptr = self.driver.load(Ordering::Acquire);
        // SAFETY: set once, freed only when the pool is.
        (!ptr.is_null()).then(|| unsafe { &**ptr })
    }

    /// Whether a driver is installed (one Relaxed load: the tick end's check).
    #[inline]
    pub(crate) fn is_installed(&self) -> bool {
        !self.driver.load(Ordering::Relaxed).is_null()
    }

    /// The lock, if free.
    pub(crate) fn try_lock(&self) -> Option<DriverGuard<'_>> {
        let driver = self.get()?;
        Some(DriverGuard { _locked: self.busy.try_lock()?, driver })
    }

    /// The lock, waiting for a tick end's `poll` to finish (the timer parker's `park`). The
    /// holder may be preempted mid-poll (more threads than cores), so the wait spins a little,
    /// then sleeps in short steps on `parker` (`sync::Backoff`) instead of spinning through
    /// the holder's lost time slice. A wake aimed at the caller meanwhile is not lost: it holds
    /// the timer-parker role, so its waker unparks the driver too, and the `park` it enters
    /// next returns at once.
    pub(crate) fn lock<P: crate::Parker>(&self, parker: &P) -> Option<DriverGuard<'_>> {
        let driver = self.get()?;
        let mut backoff = Backoff::new(50, 50);
        Some(DriverGuard { _locked: self.busy.lock(|| backoff.snooze(parker)), driver })
    }

    /// Installs `driver`. `Err(Error::AlreadyStarted)` if one is installed (the new one is
    /// dropped); `Err(Error::Shutdown)` if the pool shut down first (it stays installed, and
    /// has been told).
    pub(super) fn set(&self, driver: Box<dyn Driver>) -> Result<(), Error> {
        let boxed = Box::into_raw(Box::new(driver));
        if self.driver.compare_exchange(core::ptr::null_mut(), boxed, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            // SAFETY: not published: still ours.
            drop(unsafe { Box::from_raw(boxed) });
            return Err(Error::AlreadyStarted);
        }
        // The other half of `shutdown`'s pair.
        fence(Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.tell();
            return Err(Error::Shutdown);
        }
        Ok(())
    }
}

#[cfg(all(test, loom))]
mod loom;
