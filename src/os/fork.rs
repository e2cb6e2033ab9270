//! `fork()` in a process that uses the pool (README, "Process and threading rules"; the rules
//! for one pool are in `scheduler/fork.rs`).
//!
//! One `pthread_atfork` registration, made when the first pool is tracked below:
//! * every pool on a spawner of this layer (`ThreadSpawner`, and the C layer's, so every
//!   `struct pool *` and `struct pool_blocking *`) links itself into the registry when built
//!   and unlinks itself when freed (`Spawner::track_pool` / `untrack_pool`: an intrusive
//!   list of the pools' own [`PoolLink`]s, so nothing is allocated and no limit applies). In
//!   the child each is closed and marked inherited: it refuses work with
//!   [`Error::Forked`](crate::Error::Forked) (C: `POOL_ERR_FORKED`), and its shutdown and drop
//!   return at once;
//! * the global pools (the task pool behind [`global()`](crate::global) and `pool_submit`,
//!   the blocking pool behind [`global_blocking`](crate::global_blocking)) are not tracked
//!   as pools: one entry of their own resets them in place in the child, keeping their
//!   configuration, so references taken before the fork keep working, their first use in
//!   the child starts threads again, and tasks the parent had queued are not run.
//!
//! Nothing of this is on a submit path: the work happens at create, free and in the
//! handlers (a fresh state per global pool built, a flag and a closed queue per other pool).
//! `posix_spawn` and `vfork` run no handlers, and need none.
//!
//! A fork from inside one of a pool's own tasks leaves the child's only thread in the middle of
//! that pool's work: such a child may only exec or `_exit` (the usual reason to fork there).

use core::ptr::NonNull;
use std::sync::Once;

use crate::platform::{PoolLink, PoolList};
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
    let mut pools = unsafe { REGISTRY.resume() };
    // SAFETY: the child's only thread, in its fork handler; no pool call is in progress here
    // (a fork from inside a pool task leaves the child nothing but exec or _exit).
    unsafe { pools.on_fork_child() };
}

// ---------------------------------------------------------------------------------------------
// The registry of pools to close or reset in a child

/// Every tracked pool, and the global pools' entry, so that the child's fork handler finds
/// them. Touched at create and free only: never on a submit. A `TryLock`, not a mutex: the
/// fork handlers hold it across `fork`, taking it in `prepare` and releasing it in `parent`
/// and `child` (a std mutex cannot be released without its guard).
static REGISTRY: TryLock<PoolList> = TryLock::new(PoolList::new());

fn lock_registry() -> Locked<'static, PoolList> {
    REGISTRY.lock(spin_hint)
}

/// Links a pool into the registry (its `on_fork_child` runs in a child after `fork`), and
/// installs the fork handlers (once).
///
/// # Safety
/// As [`Spawner::track_pool`](crate::Spawner::track_pool): `link` stays valid and unmoved
/// until [`untrack`] returns, and is tracked once.
pub(crate) unsafe fn track(link: NonNull<PoolLink>) {
    install();
    // SAFETY: the caller's contract.
    unsafe { lock_registry().push(link) };
}

/// Unlinks a pool before its memory is freed.
///
/// # Safety
/// `link` was tracked and not untracked since.
pub(crate) unsafe fn untrack(link: NonNull<PoolLink>) {
    // SAFETY: the caller's contract.
    unsafe { lock_registry().remove(link) };
}
