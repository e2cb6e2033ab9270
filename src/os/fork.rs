//! `fork()` in a process that uses the pool (README, "Process and threading rules"; the rules
//! for one pool are in `scheduler/fork.rs`).
//!
//! One `pthread_atfork` registration, made when the first global pool or C pool is built:
//! * in the child, the global pools (the task pool behind [`global()`](crate::global) and
//!   `pool_submit`, the blocking pool behind [`global_blocking`](crate::global_blocking)) are
//!   reset in place, keeping their configuration: references to them taken before the fork
//!   keep working, their first use in the child starts threads again, and tasks the parent had
//!   queued are not run in the child;
//! * with the `capi` feature, every C pool the parent had (`struct pool *`,
//!   `struct pool_blocking *`) is marked inherited and closed: its calls return
//!   `POOL_ERR_FORKED` in the child and never wait (`capi::process`).
//!
//! Nothing of this is on a submit path: the work happens in the handlers, at fork time (a
//! fresh state per global pool built, a flag and a closed queue per C pool). `posix_spawn`
//! and `vfork` run no handlers, and need none.
//!
//! A fork from inside one of a pool's own tasks leaves the child's only thread in the middle of
//! that pool's work: such a child may only exec or `_exit` (the usual reason to fork there).

#[cfg(not(loom))]
use core::ptr;
#[cfg(not(loom))]
use std::boxed::Box;
use std::sync::Once;

#[cfg(not(loom))]
use crate::sync::{AtomicPtr, Ordering};

static INSTALL: Once = Once::new();

/// Registers the fork handlers, once per process.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        // SAFETY: three `extern "C"` functions with the signature pthread_atfork expects,
        // each safe to call at any fork.
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        // ENOMEM only: the process goes on without the fork rules (nothing breaks until a fork).
        debug_assert!(rc == 0, "pthread_atfork failed: {rc}");
    });
}

/// Before the fork, in the forking thread: holds what the child handler must find consistent.
extern "C" fn prepare() {
    #[cfg(feature = "capi")]
    crate::capi::process::lock_registry();
}

/// After the fork, in the parent.
extern "C" fn parent() {
    #[cfg(feature = "capi")]
    crate::capi::process::unlock_registry();
}

/// After the fork, in the child (its only thread).
extern "C" fn child() {
    super::global::reset_after_fork();
    crate::blocking::reset_global_after_fork();
    #[cfg(feature = "capi")]
    {
        crate::capi::process::mark_inherited();
        crate::capi::process::unlock_registry();
    }
}

/// What a child keeps of its parent's pools without using or freeing it (the old state of a
/// reset global pool, the spawner and parkers of a destroyed inherited pool: they may hold
/// locks and handles of the parent's threads). Linked from a static, so it stays reachable
/// (a leak checker reports it as kept, not lost).
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

/// Keeps `value` for the rest of the process, never dropped (see [`Grave`]). Without memory
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
