//! [`RawHandle`]: an owning handle that the C layer holds as a pointer (`struct pool *`,
//! `struct pool_blocking *`, the first word of a `struct pool_queue`) and turns back into the
//! handle to use or drop it.
//!
//! Invariant: such a handle is nothing but the pointer to its allocation, so forgetting the
//! handle leaves the pointer as the one owner, and rebuilding the handle from it is the same
//! handle again.

use core::mem::ManuallyDrop;

/// A handle that is one pointer to its allocation (see the module docs).
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) trait RawHandle: Sized {
    /// The pointer the handle holds.
    fn as_raw(&self) -> *mut ();

    /// The handle around `ptr`.
    ///
    /// # Safety
    /// `ptr` came from [`into_raw`](Self::into_raw) of this type, and no other owning handle to
    /// it exists (a borrowed one is kept from dropping: [`borrow_raw`](Self::borrow_raw)).
    unsafe fn from_raw(ptr: *mut ()) -> Self;

    /// Gives up the handle without dropping it: the pointer now owns the allocation.
    fn into_raw(self) -> *mut () {
        let ptr = self.as_raw();
        core::mem::forget(self);
        ptr
    }

    /// The handle around `ptr`, borrowed: it is never dropped.
    ///
    /// # Safety
    /// As [`from_raw`](Self::from_raw), and the allocation outlives the returned value.
    unsafe fn borrow_raw(ptr: *mut ()) -> ManuallyDrop<Self> {
        // SAFETY: the caller's contract; ManuallyDrop keeps the borrowed handle from freeing.
        ManuallyDrop::new(unsafe { Self::from_raw(ptr) })
    }
}
