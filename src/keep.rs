//! [`keep`]: memory a process may neither use nor free, kept reachable for the rest of its
//! life. In a child after `fork()`, the state of a pool inherited from the parent (the old
//! state of a reset global pool, the spawner and parkers of a destroyed inherited pool) may
//! hold locks and handles of threads that do not exist in the child: dropping it could block
//! or free what the parent's threads were using. Linked from a static, so a leak checker
//! reports it as kept, not lost.

#[cfg(not(loom))]
use core::ptr;

#[cfg(not(loom))]
use alloc::boxed::Box;

#[cfg(not(loom))]
use crate::sync::{AtomicPtr, Ordering};

/// One kept value, in a push-only list.
#[cfg(not(loom))]
struct Grave {
    next: *mut Grave,
    _kept: Box<dyn core::any::Any>,
}

#[cfg(not(loom))]
static GRAVES: AtomicPtr<Grave> = AtomicPtr::new(ptr::null_mut());

/// Under loom (no fork in any model; loom atomics cannot be statics): never dropped, unlinked.
#[cfg(loom)]
pub(crate) fn keep<T: 'static>(value: T) {
    core::mem::forget(value);
}

/// Keeps `value` for the rest of the process, never dropped (module docs). Without memory
/// for the record it is leaked all the same, only unreachable.
#[cfg(not(loom))]
pub(crate) fn keep<T: 'static>(value: T) {
    // `ManuallyDrop`: never dropped, also when a `try_box` below fails and drops its argument.
    let Ok(kept) = crate::fallible::try_box(core::mem::ManuallyDrop::new(value)) else { return };
    let Ok(grave) = crate::fallible::try_box(Grave { next: ptr::null_mut(), _kept: kept }) else { return };
    let grave = Box::into_raw(grave);
    let mut head = GRAVES.load(Ordering::Relaxed);
    loop {
        // SAFETY: not yet published: ours.
        unsafe { (*grave).next = head };
        match GRAVES.compare_exchange_weak(head, grave, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => head = actual,
        }
    }
}
