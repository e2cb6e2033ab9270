//! A task's [`Waker`]: the task pointer with a reference count (clone: +1, drop: -1), so a
//! wake allocates nothing. Waking is one transition of the state word (`state.rs`); a task
//! waking itself by reference during its own poll on this thread touches no atomic at all
//! with `std` (`current.rs`).

use core::ptr::NonNull;
use core::task::{RawWaker, RawWakerVTable, Waker};

use super::header::Header;
use super::state::{TransitionToNotifiedByRef, TransitionToNotifiedByVal};

pub(super) static WAKER_VTABLE: RawWakerVTable = RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

/// The waker's raw form; the caller decides whether it holds a reference.
pub(super) fn raw_waker(header: NonNull<Header>) -> RawWaker {
    RawWaker::new(header.as_ptr().cast_const().cast::<()>(), &WAKER_VTABLE)
}

/// The task `waker` wakes, if it is one of ours.
#[inline]
pub(super) fn header_of(waker: &Waker) -> Option<NonNull<Header>> {
    if !core::ptr::eq(waker.vtable(), &WAKER_VTABLE) {
        return None;
    }
    NonNull::new(waker.data().cast_mut().cast::<Header>())
}

/// `current::wake_self` for a waker that may be one of ours (`yield_now`): true if it is this
/// thread's polled task's own waker, whose self-wake is now recorded.
#[cfg(feature = "std")]
#[inline]
pub(super) fn wake_self_by_waker(waker: &Waker) -> bool {
    header_of(waker).is_some_and(|header| super::current::wake_self(header.cast()))
}

/// A waker holding a reference of its own (for the loom models' `waker_of`).
///
/// # Safety
/// The caller holds a reference.
#[cfg(all(test, loom))]
pub(crate) unsafe fn waker(header: NonNull<Header>) -> Waker {
    // SAFETY: the caller holds a reference, so the header is live.
    unsafe { header.as_ref() }.state.ref_inc();
    // SAFETY: the waker owns the reference just taken.
    unsafe { Waker::from_raw(raw_waker(header)) }
}

unsafe fn waker_clone(ptr: *const ()) -> RawWaker {
    // SAFETY: a waker's data is a live header (the cloned waker holds or borrows a reference).
    let header = unsafe { NonNull::new_unchecked(ptr.cast_mut().cast::<Header>()) };
    // SAFETY: as above.
    unsafe { header.as_ref() }.state.ref_inc();
    raw_waker(header)
}

unsafe fn waker_drop(ptr: *const ()) {
    // SAFETY: an owned waker holds a reference, which we drop.
    unsafe { Header::ref_dec(NonNull::new_unchecked(ptr.cast_mut().cast::<Header>())) }
}

unsafe fn waker_wake(ptr: *const ()) {
    // SAFETY: an owned waker holds a reference, which `wake_by_val` consumes.
    unsafe { wake_by_val(NonNull::new_unchecked(ptr.cast_mut().cast::<Header>())) }
}

unsafe fn waker_wake_by_ref(ptr: *const ()) {
    // SAFETY: a waker's data is a live header.
    let header = unsafe { NonNull::new_unchecked(ptr.cast_mut().cast::<Header>()) };
    // The task wakes itself during its own poll on this thread: `after_pending` re-queues it,
    // no RMW on the state word (`current.rs`).
    #[cfg(feature = "std")]
    if super::current::wake_self(header.cast()) {
        return;
    }
    // SAFETY: the waker holds or borrows a reference for the call.
    unsafe { wake_by_ref(header) }
}

/// Wakes the task, consuming the caller's reference.
///
/// # Safety
/// The caller owns a reference.
pub(crate) unsafe fn wake_by_val(header: NonNull<Header>) {
    // SAFETY: our reference keeps it alive until the transition.
    let h = unsafe { header.as_ref() };
    match h.state.transition_to_notified_by_val() {
        // SAFETY: SCHEDULED and the reference (ours) go to the queue.
        TransitionToNotifiedByVal::Submit => unsafe { Header::submit(header, true) },
        // SAFETY: the last reference, seen with Acquire.
        TransitionToNotifiedByVal::Dealloc => unsafe { (h.vtable.dealloc)(header) },
        TransitionToNotifiedByVal::DoNothing => {}
    }
}

/// Wakes the task without consuming a reference (takes one for the queue if it queues it).
///
/// # Safety
/// The caller holds or borrows a reference for the call.
pub(crate) unsafe fn wake_by_ref(header: NonNull<Header>) {
    // SAFETY: as above.
    let h = unsafe { header.as_ref() };
    match h.state.transition_to_notified_by_ref() {
        // SAFETY: SCHEDULED and the new reference go to the queue.
        TransitionToNotifiedByRef::Submit => unsafe { Header::submit(header, true) },
        TransitionToNotifiedByRef::DoNothing => {}
    }
}
