//! What the C layer does about the process around it (README, "Process and threading
//! rules"): the thread stack a C host expects, and the pools a child inherits through `fork`.
//!
//! # Stack size
//! `stack_size = 0` in `struct pool_config` and `struct pool_blocking_config` means the
//! system's default thread stack, as `pthread_attr_init` gives it (on glibc it follows
//! `ulimit -s`, read when the process started), not Rust std's 2 MiB: C code sized for
//! pthread's default must not overflow on a pool thread. It is resolved when the pool is
//! built, for pools on OS threads; a pool on a host's platform passes 0 on to the host.

/// `requested`, or the stack size of a fresh `pthread_attr_t` for 0.
pub(crate) fn c_stack_size(requested: usize) -> usize {
    if requested != 0 {
        return requested;
    }
    pthread_default_stack().unwrap_or(0)
}

/// The stack size `pthread_attr_init` gives a new attribute, or `None` if it fails (0 then
/// falls back to the spawner's own default).
fn pthread_default_stack() -> Option<usize> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `attr` is writable storage for one attribute object.
    if unsafe { libc::pthread_attr_init(attr.as_mut_ptr()) } != 0 {
        return None;
    }
    let mut size: libc::size_t = 0;
    // SAFETY: `attr` was initialised above; `size` is writable.
    let rc = unsafe { libc::pthread_attr_getstacksize(attr.as_ptr(), &mut size) };
    // SAFETY: initialised above and destroyed once.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    (rc == 0 && size != 0).then_some(size)
}

// ---------------------------------------------------------------------------------------------
// Pools inherited through fork

use alloc::vec::Vec;

use crate::sync::{spin_hint, AtomicBool, Ordering, UnsafeCell};
use crate::Error;

/// Which C type a registered pool is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `struct pool *` (`ThreadPool<CSpawner>`).
    Task,
    /// `struct pool_blocking *` (`BlockingPool<ThreadSpawner>`).
    Blocking,
}

struct Entry {
    pool: *const (),
    kind: Kind,
    /// Created in a parent process before a fork (this process is the child).
    inherited: bool,
}

/// Every live C pool, so that the child's fork handler can find and close them (`os::fork`).
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

/// Takes the registry lock (`os::fork`'s `prepare`, and `with_registry`).
pub(crate) fn lock_registry() {
    while REGISTRY.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spin_hint();
    }
}

/// Releases the registry lock.
pub(crate) fn unlock_registry() {
    REGISTRY.locked.store(false, Ordering::Release);
}

fn with_registry<R>(f: impl FnOnce(&mut Vec<Entry>) -> R) -> R {
    lock_registry();
    // SAFETY: the lock is held: exclusive access.
    let r = REGISTRY.entries.with_mut(|entries| f(unsafe { &mut *entries }));
    unlock_registry();
    r
}

/// Records a new C pool (and installs the fork handlers, once). `Err(OutOfMemory)` if the
/// registry cannot grow: the caller frees the pool and reports it.
pub(crate) fn register(pool: *const (), kind: Kind) -> Result<(), Error> {
    crate::os::fork::install();
    with_registry(|entries| {
        entries.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        entries.push(Entry { pool, kind, inherited: false });
        Ok(())
    })
}

/// Forgets a pool being destroyed; true if it was inherited through a fork (then the caller
/// frees it with `free_inherited` instead of shutting it down).
pub(crate) fn unregister(pool: *const ()) -> bool {
    with_registry(|entries| match entries.iter().position(|e| e.pool == pool) {
        Some(i) => entries.swap_remove(i).inherited,
        None => false,
    })
}

/// Whether `pool` was inherited through a fork (its calls return POOL_ERR_FORKED).
pub(crate) fn is_inherited(pool: *const ()) -> bool {
    with_registry(|entries| entries.iter().any(|e| e.pool == pool && e.inherited))
}

/// In the child after a fork, with the registry lock held since `prepare`: every pool is
/// marked inherited and closed, so that its submits are refused and nothing of the parent's
/// queue runs.
pub(crate) fn mark_inherited() {
    REGISTRY.entries.with_mut(|entries| {
        // SAFETY: the lock taken in `prepare` is held, and this is the child's only thread.
        let entries = unsafe { &mut *entries };
        for e in entries.iter_mut() {
            e.inherited = true;
            match e.kind {
                // SAFETY: registered pools are live until `unregister`, which cannot be in
                // progress (the lock is held).
                Kind::Task => unsafe { super::CPool::borrow_raw(e.pool.cast_mut()) }.close_inherited(),
                // SAFETY: as above.
                Kind::Blocking => unsafe { super::blocking::CBlocking::borrow_raw(e.pool.cast_mut()) }.close_inherited(),
            }
        }
    });
}
