//! Fallible allocation: the pool's own allocations report [`Error::OutOfMemory`] instead of
//! aborting the process (`alloc::alloc` with a checked layout).
//!
//! Used by every constructor (a pool's state, its tables, the OS spawner's shared join list,
//! a C host's platform) and before each lazy thread start (the worker's state is allocated
//! before the thread is asked for, so a failure is a failed spawn). What stays outside the
//! pool's control: allocations made by the platform itself (the OS thread's stack and the
//! standard library's bookkeeping for a new thread), which abort the process on failure as
//! the standard library does.

use core::alloc::Layout;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use crate::error::Error;
#[cfg(feature = "std")]
use crate::sync::{AtomicUsize, Ordering};

/// `Box::new(value)`, or `Err(OutOfMemory)` (dropping `value`) if the allocator fails.
/// Inline, with its own allocator call: a boxed closure's task is allocated per spawn.
pub(crate) fn try_box<T>(value: T) -> Result<Box<T>, Error> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Ok(Box::new(value));
    }
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { alloc::alloc::alloc(layout) }.cast::<T>();
    let Some(ptr) = NonNull::new(ptr) else { return Err(Error::OutOfMemory) };
    // SAFETY: freshly allocated for a `T` (size and alignment from `Layout::new::<T>`), so
    // writing and then owning it as a Box (which frees it with the same layout) is sound.
    unsafe {
        ptr.as_ptr().write(value);
        Ok(Box::from_raw(ptr.as_ptr()))
    }
}

/// A block for `layout` (non-zero size), or `Err(OutOfMemory)`. Out of line: the states made
/// once per pool or per thread share one call of the allocator (which LTO may inline) instead
/// of a copy each.
#[inline(never)]
fn alloc_block(layout: Layout) -> Result<NonNull<u8>, Error> {
    debug_assert!(layout.size() != 0);
    // SAFETY: the callers pass a layout with a non-zero size.
    NonNull::new(unsafe { alloc::alloc::alloc(layout) }).ok_or(Error::OutOfMemory)
}

/// The value `init` writes in place, as a value: for tests and models of a type the pool
/// itself only ever builds in place ([`try_box_in_place`]).
///
/// # Safety
/// As `try_box_in_place`: `init` initialises the whole `T` at the pointer it is given.
#[cfg(test)]
pub(crate) unsafe fn value_in_place<T>(init: unsafe fn(*mut T)) -> T {
    let mut value = core::mem::MaybeUninit::<T>::uninit();
    // SAFETY: a local, aligned and writable; the caller's contract: `init` initialises it.
    unsafe {
        init(value.as_mut_ptr());
        value.assume_init()
    }
}

/// A `Box<T>` whose value `init` writes in place, or `Err(OutOfMemory)` (without calling
/// `init`) if the allocator fails. For the large states (a pool's, a worker's: 2 KiB and more
/// with their rings and timer wheel), which made as a value would be built on the caller's
/// stack and then copied into the block.
///
/// # Safety
/// `init` initialises the whole `T` at the pointer it is given (aligned, valid for writes,
/// uninitialised), unless it unwinds.
pub(crate) unsafe fn try_box_in_place<T>(init: impl FnOnce(*mut T)) -> Result<Box<T>, Error> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        let mut value = core::mem::MaybeUninit::<T>::uninit();
        init(value.as_mut_ptr());
        // SAFETY: the caller's contract: `init` initialised it.
        return Ok(Box::new(unsafe { value.assume_init() }));
    }
    let ptr = alloc_block(layout)?.cast::<T>();
    let guard = FreeOnUnwind { ptr: ptr.cast(), layout };
    init(ptr.as_ptr());
    core::mem::forget(guard);
    // SAFETY: allocated for a `T` (size and alignment from `Layout::new::<T>`) and
    // initialised by `init` (the caller's contract), so owning it as a Box (which frees it
    // with the same layout) is sound.
    Ok(unsafe { Box::from_raw(ptr.as_ptr()) })
}

/// A boxed slice of `n` elements made by `f(index)`, or `Err(OutOfMemory)`. One allocation of
/// exactly `n` elements, filled in place (no growable buffer, so no reallocation path).
pub(crate) fn try_boxed_slice<T>(n: usize, mut f: impl FnMut(usize) -> T) -> Result<Box<[T]>, Error> {
    let layout = Layout::array::<T>(n).map_err(|_| Error::OutOfMemory)?;
    let ptr = if layout.size() == 0 { NonNull::dangling() } else { alloc_block(layout)?.cast::<T>() };
    let guard = FreeOnUnwind { ptr: ptr.cast(), layout };
    for i in 0..n {
        // SAFETY: `i < n`: inside the block, which has room for `n` elements of `T`.
        unsafe { ptr.as_ptr().add(i).write(f(i)) };
    }
    core::mem::forget(guard);
    // SAFETY: `n` initialised elements in a block allocated with `Layout::array::<T>(n)`,
    // the layout a `Box<[T]>` of length `n` frees with (or dangling when that is zero-sized).
    Ok(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ptr.as_ptr(), n)) })
}

/// Frees a block still being filled if the code filling it unwinds (what was written is
/// leaked, not dropped). Forgotten once the block is handed over.
struct FreeOnUnwind {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for FreeOnUnwind {
    fn drop(&mut self) {
        if self.layout.size() != 0 {
            // SAFETY: allocated with this layout by the function holding the guard, and not
            // handed over (the guard is forgotten then).
            unsafe { alloc::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
        }
    }
}

/// A shared, reference-counted value whose allocation is fallible (`Arc::try_new` is not
/// stable): [`try_new`](Self::try_new), `Clone` (one more reference), `Deref`, and the last
/// drop frees it. The counting is `Arc`'s.
#[cfg(feature = "std")]
pub(crate) struct TryArc<T> {
    ptr: NonNull<ArcBox<T>>,
}

#[cfg(feature = "std")]
struct ArcBox<T> {
    refs: AtomicUsize,
    value: T,
}

// SAFETY: as `Arc<T>`: the value is shared between threads (needs Sync) and dropped on
// whichever thread drops the last reference (needs Send).
#[cfg(feature = "std")]
unsafe impl<T: Send + Sync> Send for TryArc<T> {}
// SAFETY: as above.
#[cfg(feature = "std")]
unsafe impl<T: Send + Sync> Sync for TryArc<T> {}

#[cfg(feature = "std")]
impl<T> TryArc<T> {
    pub(crate) fn try_new(value: T) -> Result<Self, Error> {
        let boxed = try_box(ArcBox { refs: AtomicUsize::new(1), value })?;
        Ok(Self { ptr: NonNull::from(Box::leak(boxed)) })
    }

    fn inner(&self) -> &ArcBox<T> {
        // SAFETY: alive while any reference, such as ours, exists.
        unsafe { self.ptr.as_ref() }
    }
}

#[cfg(feature = "std")]
impl<T> Clone for TryArc<T> {
    fn clone(&self) -> Self {
        // Relaxed: a new reference from an existing one (as `Arc::clone`).
        let old = self.inner().refs.fetch_add(1, Ordering::Relaxed);
        assert!(old < usize::MAX / 2, "TryArc reference count overflow");
        Self { ptr: self.ptr }
    }
}

#[cfg(feature = "std")]
impl<T> core::ops::Deref for TryArc<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

#[cfg(feature = "std")]
impl<T> Drop for TryArc<T> {
    fn drop(&mut self) {
        // Release: our uses happen before the free; the last one's Acquire sees them all.
        if self.inner().refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the last reference; the box came from `try_box` in `try_new`.
            drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
        }
    }
}

#[cfg(feature = "std")]
impl<T: core::fmt::Debug> core::fmt::Debug for TryArc<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn try_box_and_slice_hold_their_values() {
        assert_eq!(*try_box(7u64).unwrap(), 7);
        assert_eq!(*try_box(()).unwrap(), ());
        assert_eq!(&*try_boxed_slice(4, |i| i * 2).unwrap(), &[0, 2, 4, 6]);
        assert!(try_boxed_slice(0, |i| i).unwrap().is_empty());
        assert_eq!(try_boxed_slice(3, |_| ()).unwrap().len(), 3);
        // SAFETY: the closure writes the whole value.
        let placed = unsafe { try_box_in_place(|p: *mut [u32; 3]| p.write([1, 2, 3])) }.unwrap();
        assert_eq!(*placed, [1, 2, 3]);
        assert_eq!(try_boxed_slice(usize::MAX / 8, |_| 0u64).unwrap_err(), Error::OutOfMemory);
    }

    #[cfg(feature = "std")]
    #[test]
    fn try_arc_frees_on_the_last_drop() {
        use crate::sync::{AtomicUsize, Ordering};
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let drops = AtomicUsize::new(0);
        let a = TryArc::try_new(Counted(&drops)).unwrap();
        let b = a.clone();
        drop(a);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(b);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    }
}
