//! `fork()` in a process that uses the pool (README, "Process and threading rules"; the rules
//! for one pool are in `scheduler/fork.rs`).
//!
//! One `pthread_atfork` registration, made when the first pool registers itself below (the
//! global pools when first built, each C pool when created):
//! * in the child, the global pools (the task pool behind [`global()`](crate::global) and
//!   `pool_submit`, the blocking pool behind [`global_blocking`](crate::global_blocking)) are
//!   reset in place, keeping their configuration: references to them taken before the fork
//!   keep working, their first use in the child starts threads again, and tasks the parent had
//!   queued are not run in the child;
//! * every pool in the registry below (the C layer registers each `struct pool *` and
//!   `struct pool_blocking *` it creates, `capi::process`) is marked inherited and closed: its
//!   calls return `POOL_ERR_FORKED` in the child and never wait.
//!
//! Nothing of this is on a submit path: the work happens in the handlers, at fork time (a
//! fresh state per global pool built, a flag and a closed queue per C pool). `posix_spawn`
//! and `vfork` run no handlers, and need none.
//!
//! A fork from inside one of a pool's own tasks leaves the child's only thread in the middle of
//! that pool's work: such a child may only exec or `_exit` (the usual reason to fork there).

use std::sync::Once;
use std::vec::Vec;

use crate::error::Error;
use crate::sync::{spin_hint, AtomicBool, Ordering, UnsafeCell};

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
        lock_registry();
}

/// After the fork, in the parent.
extern "C" fn parent() {
        unlock_registry();
}

/// After the fork, in the child (its only thread).
extern "C" fn child() {
        {
        mark_inherited();
        unlock_registry();
    }
}

// ---------------------------------------------------------------------------------------------
// The registry of pools to close or reset in a child

struct Entry {
    pool: *const (),
    /// What the pool becomes in a child: closed (its submits refused from then on; returns
    /// true: inherited) or reset in place (a global pool; returns false).
    on_child: unsafe fn(*const ()) -> bool,
    /// Created in a parent process before a fork and closed there (this process is the child).
    inherited: bool,
}

/// Every registered pool (each C pool, and one entry for the global pools), so that the
/// child's fork handler can find them and close or reset each.
/// Touched at create, destroy, shutdown and on a refused submit only: never on a submit that
/// succeeds. A spin lock, not a mutex: the fork handlers hold it across `fork`, acquiring it
/// in `prepare` and releasing it in `parent` and `child` (a std mutex cannot be released
/// without its guard).
struct Registry {
    locked: AtomicBool,
    entries: UnsafeCell<Vec<Entry>>,
}

// SAFETY: `entries` is only accessed while `locked` is held (acquired with Acquire, released
// with Release), by one thread at a time.
unsafe impl Sync for Registry {}

static REGISTRY: Registry = Registry { locked: AtomicBool::new(false), entries: UnsafeCell::new(Vec::new()) };

/// Takes the registry lock (`prepare`, and `with_registry`).
fn lock_registry() {
    while REGISTRY.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spin_hint();
    }
}

/// Releases the registry lock.
fn unlock_registry() {
    REGISTRY.locked.store(false, Ordering::Release);
}

fn with_registry<R>(f: impl FnOnce(&mut Vec<Entry>) -> R) -> R {
    lock_registry();
    // SAFETY: the lock is held: exclusive access.
    let r = REGISTRY.entries.with_mut(|entries| f(unsafe { &mut *entries }));
    unlock_registry();
    r
}

/// Records a new pool and what it becomes in a child (`on_child`, called by the child's
/// handler with `pool`), and installs the fork handlers (once). `Err(OutOfMemory)` if the
/// registry cannot grow: the caller frees the pool and reports it.
pub(crate) fn register(pool: *const (), on_child: unsafe fn(*const ()) -> bool) -> Result<(), Error> {
    install();
    with_registry(|entries| {
        entries.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        entries.push(Entry { pool, on_child, inherited: false });
        Ok(())
    })
}

/// Forgets a pool being destroyed; true if it was inherited through a fork (then the caller
/// frees it with `free_inherited` instead of shutting it down).
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn unregister(pool: *const ()) -> bool {
    with_registry(|entries| match entries.iter().position(|e| e.pool == pool) {
        Some(i) => entries.swap_remove(i).inherited,
        None => false,
    })
}

/// Whether `pool` was inherited through a fork (its calls return POOL_ERR_FORKED).
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn is_inherited(pool: *const ()) -> bool {
    with_registry(|entries| entries.iter().any(|e| e.pool == pool && e.inherited))
}

/// In the child after a fork, with the registry lock held since `prepare`: every pool is
/// closed and marked inherited (its submits are refused and nothing of the parent's queue
/// runs), or reset in place (the global pools).
fn mark_inherited() {
    REGISTRY.entries.with_mut(|entries| {
        // SAFETY: the lock taken in `prepare` is held, and this is the child's only thread.
        let entries = unsafe { &mut *entries };
        for e in entries.iter_mut() {
            // SAFETY: registered pools are live until `unregister`, which cannot be in
            // progress (the lock is held); `on_child` is the one registered with it.
            e.inherited = unsafe { (e.on_child)(e.pool) };
        }
    });
}
