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
use crate::sync::{spin_hint, Locked, TryLock};

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
    // Held across the fork, without a guard: `parent` and `child` release it.
    lock_registry().forget();
}

/// After the fork, in the parent.
extern "C" fn parent() {
    // SAFETY: `prepare` took the lock on this thread and forgot its guard.
    drop(unsafe { REGISTRY.resume() });
}

/// After the fork, in the child (its only thread).
extern "C" fn child() {
    // SAFETY: `prepare` took the lock on the forking thread, which is this one (the child's
    // only thread), and forgot its guard.
    let mut entries = unsafe { REGISTRY.resume() };
    mark_inherited(&mut entries);
}

// ---------------------------------------------------------------------------------------------
// The registry of pools to close or reset in a child

struct Entry {
    /// The pool's address: its identity for `unregister` and `is_inherited`, and what
    /// `on_child` is called with.
    pool: *const (),
    /// What the pool becomes in a child: closed (its submits refused from then on; returns
    /// true: inherited) or reset in place (a global pool; returns false).
    on_child: unsafe fn(*const ()) -> bool,
    /// Created in a parent process before a fork and closed there (this process is the child).
    inherited: bool,
}

/// Every registered pool (each C pool, and one entry for the global pools), so that the
/// child's fork handler can find them and close or reset each. Touched at create, destroy,
/// shutdown and on a refused submit only: never on a submit that succeeds. A `TryLock`, not a
/// mutex: the fork handlers hold it across `fork`, taking it in `prepare` and releasing it in
/// `parent` and `child` (a std mutex cannot be released without its guard).
static REGISTRY: TryLock<Vec<Entry>> = TryLock::new(Vec::new());

// SAFETY: an entry names a pool by address and is only read under the registry's lock; the
// pools it names are shared between threads anyway (`Sync`).
unsafe impl Send for Entry {}

fn lock_registry() -> Locked<'static, Vec<Entry>> {
    REGISTRY.lock(spin_hint)
}

/// Records a new pool and what it becomes in a child (`on_child`, called by the child's
/// handler with `pool`), and installs the fork handlers (once). `Err(OutOfMemory)` if the
/// registry cannot grow: the caller frees the pool and reports it.
pub(crate) fn register(pool: *const (), on_child: unsafe fn(*const ()) -> bool) -> Result<(), Error> {
    install();
    let mut entries = lock_registry();
    entries.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
    entries.push(Entry { pool, on_child, inherited: false });
    Ok(())
}

/// Forgets a pool being destroyed; true if it was inherited through a fork (then the caller
/// frees it with `free_inherited` instead of shutting it down).
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn unregister(pool: *const ()) -> bool {
    let mut entries = lock_registry();
    match entries.iter().position(|e| e.pool == pool) {
        Some(i) => entries.swap_remove(i).inherited,
        None => false,
    }
}

/// Whether `pool` was inherited through a fork (its calls return POOL_ERR_FORKED).
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) fn is_inherited(pool: *const ()) -> bool {
    lock_registry().iter().any(|e| e.pool == pool && e.inherited)
}

/// In the child after a fork, with the registry's lock (taken in `prepare`): every pool is
/// closed and marked inherited (its submits are refused and nothing of the parent's queue
/// runs), or reset in place (the global pools).
fn mark_inherited(entries: &mut [Entry]) {
    for e in entries {
        // SAFETY: registered pools are live until `unregister`, which cannot be in progress
        // (the lock is held); `on_child` is the one registered with it.
        e.inherited = unsafe { (e.on_child)(e.pool) };
    }
}
