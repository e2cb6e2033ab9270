//! [`TryLock`]: a lock around a value that never blocks in the kernel, for short critical
//! sections whose holders never wait for anything while they hold it (the timer wheel's list
//! operations, the I/O driver's poll or park, the fork registry). [`try_lock`](TryLock::try_lock)
//! fails at once when it is held; [`lock`](TryLock::lock) retries, calling the caller's wait
//! between tries (a spin, a yield, a short park: the caller knows what its holders do).
//!
//! One flag: `true` while held. Taking it is an Acquire compare-and-swap, so the new holder sees
//! everything the last one did; releasing is a Release store (the guard's drop).

use core::ops::{Deref, DerefMut};

use super::atomic::{AtomicBool, Ordering};
use super::cell::UnsafeCell;

/// A value behind a flag lock (module docs).
#[derive(Debug)]
pub(crate) struct TryLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists at a time (the
// flag), so sharing the lock shares the value with one thread at a time, as a mutex does.
unsafe impl<T: Send> Sync for TryLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for TryLock<T> {}

/// The lock, held until dropped: the value's one way in.
#[derive(Debug)]
pub(crate) struct Locked<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> TryLock<T> {
    /// An unlocked lock around `data`.
    #[cfg(not(loom))]
    pub(crate) const fn new(data: T) -> Self {
        Self { locked: AtomicBool::new(false), data: UnsafeCell::new(data) }
    }

    /// An unlocked lock around `data`.
    #[cfg(loom)]
    pub(crate) fn new(data: T) -> Self {
        Self { locked: AtomicBool::new(false), data: UnsafeCell::new(data) }
    }

    /// Writes an unlocked lock at `dst`, whose value `init` writes in place (a large value,
    /// the timer wheel's, is then not built on the stack and copied).
    ///
    /// # Safety
    /// `dst` is aligned and valid for writes; `init` initialises the whole `T` at the pointer
    /// it is given (aligned, valid for writes).
    pub(crate) unsafe fn init(dst: *mut Self, init: impl FnOnce(*mut T)) {
        #[cfg(not(loom))]
        // SAFETY: the caller's contract; both fields written, `data` through `init`.
        unsafe {
            core::ptr::addr_of_mut!((*dst).locked).write(AtomicBool::new(false));
            init(UnsafeCell::raw_get(core::ptr::addr_of!((*dst).data)));
        }
        // Loom's cell has no raw access: the value is made aside and moved in.
        #[cfg(loom)]
        // SAFETY: the caller's contracts: `init` initialises the value, `dst` takes the lock.
        unsafe {
            let mut data = core::mem::MaybeUninit::<T>::uninit();
            init(data.as_mut_ptr());
            dst.write(Self::new(data.assume_init()));
        }
    }

    /// The lock, if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Locked<'_, T>> {
        // Acquire: everything the last holder did under the lock is visible.
        self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).ok()?;
        Some(Locked { lock: self })
    }

    /// The lock, waiting for it: `wait` runs between tries while it is held (reading the flag
    /// only, so waiters do not pull the holder's line away with failed writes).
    #[inline]
    pub(crate) fn lock(&self, mut wait: impl FnMut()) -> Locked<'_, T> {
        loop {
            if let Some(locked) = self.try_lock() {
                return locked;
            }
            while self.locked.load(Ordering::Relaxed) {
                wait();
            }
        }
    }

    /// The guard of a lock taken by this thread whose guard was forgotten
    /// ([`Locked::forget`]): a lock held across calls that cannot carry a guard (the fork
    /// handlers take it before `fork` and release it after, in the parent and in the child).
    ///
    /// # Safety
    /// The lock is held, by this thread, through a forgotten guard, and no other guard of it
    /// exists.
    #[cfg(all(feature = "std", unix, not(loom)))]
    pub(crate) unsafe fn resume(&self) -> Locked<'_, T> {
        debug_assert!(self.locked.load(Ordering::Relaxed));
        Locked { lock: self }
    }
}

impl<T> Locked<'_, T> {
    /// Keeps the lock held without a guard (see [`TryLock::resume`]).
    #[cfg(all(feature = "std", unix, not(loom)))]
    pub(crate) fn forget(self) {
        core::mem::forget(self);
    }
}

impl<T> Deref for Locked<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, the value's only way in.
        self.lock.data.with(|p| unsafe { &*p })
    }
}

impl<T> DerefMut for Locked<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, the value's only way in, and `&mut self` makes
        // the borrow unique.
        self.lock.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T> Drop for Locked<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: what we did under the lock is visible to the next holder.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time() {
        let lock = TryLock::new(1);
        let mut held = lock.try_lock().unwrap();
        assert!(lock.try_lock().is_none());
        *held += 1;
        drop(held);
        let mut waits = 0;
        assert_eq!(*lock.lock(|| waits += 1), 2);
        assert_eq!(waits, 0, "free: no wait");
    }
}
