//! [`UnsafeCell`] with loom's closure-based access interface, on every build.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `core::cell::UnsafeCell` with loom's closure-based access interface.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    /// Shared access through a raw pointer; the caller's closure upholds aliasing.
    /// The value's address from the cell's, which need not be initialised yet (to write the
    /// value in place: `TryLock::init`).
    #[inline]
    pub(crate) const fn raw_get(this: *const Self) -> *mut T {
        // `repr(transparent)`: the cell is core's cell, at the same address.
        core::cell::UnsafeCell::raw_get(this.cast::<core::cell::UnsafeCell<T>>())
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Exclusive access through a raw pointer; the caller's closure upholds aliasing.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
