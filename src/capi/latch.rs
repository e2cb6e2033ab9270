//! The counting latch (wait group) for C hosts: `struct pool_latch`, caller-owned and of fixed
//! size, so it can live on the stack or inside the host's own structs, with
//! `pool_latch_init` / `_add` / `_done` / `_wait` / `_wait_global`, and `pool_fork` to submit
//! the children of a recursive fork-join. It is the core
//! [`CountLatch`] stored in place: C code writes fork-join without atomics of its own.
//!
//! Waiting on one of the pool's threads runs related work meanwhile: the thread's own forks
//! (`pool_fork`), newest first, so recursive fork-join nests no deeper than the recursion; other
//! queued tasks run inside a wait only within a fixed nesting bound (`WorkerContext`'s docs,
//! "Bounded helping"). So fork what you wait for: a task that waits for work it *submitted*,
//! on a pool whose every thread already waits that deep, waits until a thread is free to run
//! it. Waiting on any other thread parks it.
//!
//! Contract (as the Rust type's): `add` before the work that will call `done` is submitted; one
//! `done` per unit added; `wait` once, by one thread; after `wait` returns, nothing touches the
//! latch any more and it may be freed, or initialised again for reuse.

use core::ffi::c_int;
use core::mem::{align_of, size_of};
use core::ptr::NonNull;

use super::pool::{borrow, global_pool, Pool};
use super::status::{boundary, pool_status::*, status};
use super::task::{checked_task, CTask};
use crate::CountLatch;

/// Words in a `struct pool_latch`: room for the core latch (32 bytes on 64-bit targets) and
/// for growth without changing the C ABI.
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
pub const POOL_LATCH_WORDS: usize = 8;

/// A counting latch (wait group). Treat as opaque; initialise with `pool_latch_init`.
/// Caller-owned: on the stack, in your own struct, or on the heap; it must not move between
/// `pool_latch_init` and the return of `pool_latch_wait`.
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
#[repr(C)]
#[derive(Debug)]
pub struct PoolLatch {
    /// Private storage.
    pub opaque: [u64; POOL_LATCH_WORDS],
}

// The core latch fits in, and is no more aligned than, the C struct.
static_assertions::const_assert!(size_of::<CountLatch>() <= size_of::<PoolLatch>());
static_assertions::const_assert!(align_of::<CountLatch>() <= align_of::<PoolLatch>());

/// The core latch inside a C latch.
///
/// # Safety
/// `latch` was initialised by `pool_latch_init` and is live.
unsafe fn core_latch<'a>(latch: NonNull<PoolLatch>) -> &'a CountLatch {
    // SAFETY: size and alignment asserted above; `pool_latch_init` wrote a CountLatch there.
    unsafe { &*latch.as_ptr().cast::<CountLatch>() }
}

/// Initialises (or re-initialises, after a completed `pool_latch_wait`) a latch with nothing
/// outstanding. Returns POOL_ERR_INVALID for NULL.
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
#[no_mangle]
pub extern "C" fn pool_latch_init(latch: *mut PoolLatch) -> c_int {
    boundary(|| {
        let Some(latch) = NonNull::new(latch) else { return POOL_ERR_INVALID };
        // SAFETY: non-null, writable, large and aligned enough (asserted above); not in use
        // (the caller's contract), so overwriting without dropping is fine (a CountLatch owns
        // nothing).
        unsafe { latch.as_ptr().cast::<CountLatch>().write(CountLatch::new()) };
        POOL_OK
    })
}

/// Adds `n` outstanding units, before submitting the work that will call `pool_latch_done`.
/// Returns POOL_ERR_INVALID for NULL, or when the latch was already released (its wait
/// completed or is completing): re-initialise it first; POOL_ERR_RANGE when the count would
/// exceed its range (more than SIZE_MAX - 1 units outstanding), leaving the latch unchanged.
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
#[no_mangle]
pub extern "C" fn pool_latch_add(latch: *mut PoolLatch, n: usize) -> c_int {
    boundary(|| {
        let Some(latch) = NonNull::new(latch) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised latch (pool.h contract).
        let latch = unsafe { core_latch(latch) };
        if latch.is_released() {
            return POOL_ERR_INVALID;
        }
        status(latch.try_add(n))
    })
}

/// Marks one unit done (from any thread, typically at the end of a task). The last one wakes
/// the waiter; after it, the latch may already be freed by the waiter, so touch it no more.
/// Returns POOL_ERR_INVALID for NULL.
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
#[no_mangle]
pub extern "C" fn pool_latch_done(latch: *mut PoolLatch) -> c_int {
    boundary(|| {
        let Some(latch) = NonNull::new(latch) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised latch; one `done` per added unit (pool.h contract).
        unsafe { core_latch(latch).done() };
        POOL_OK
    })
}

/// Waits until every unit added has been marked done. On one of `pool`'s threads it runs
/// related work meanwhile (the thread's own `pool_fork`s, newest first), and other queued tasks
/// only while at most half of the thread's stack is in use; past that it sleeps until the
/// latch is released. So fork what you wait for: a task that waits for tasks it submitted with
/// `pool_submit_to` can wait for a free thread, forever if every thread waits that way. On any
/// other thread it parks. Call once per initialisation, from one thread. Returns
/// POOL_ERR_INVALID for a NULL pool or latch, POOL_ERR_FORKED for a pool inherited through
/// `fork()`.
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
#[no_mangle]
pub extern "C" fn pool_latch_wait(pool: *mut Pool, latch: *mut PoolLatch) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(latch) = NonNull::new(latch) else { return POOL_ERR_INVALID };
        // SAFETY: a live pool (pool.h contract).
        if unsafe { super::inherited(pool) } {
            return POOL_ERR_FORKED;
        }
        // SAFETY: a live pool and an initialised latch (pool.h contract).
        unsafe { borrow(pool).wait_for_latch(core_latch(latch)) };
        POOL_OK
    })
}

/// `pool_latch_wait` for work submitted with `pool_submit` (the global pool): helps on a
/// global-pool thread, parks elsewhere.
#[cfg_attr(doc, doc = include_str!("examples/global.md"))]
#[no_mangle]
pub extern "C" fn pool_latch_wait_global(latch: *mut PoolLatch) -> c_int {
    boundary(|| {
        let Some(latch) = NonNull::new(latch) else { return POOL_ERR_INVALID };
        let pool = match global_pool() {
            Ok(pool) => pool,
            Err(s) => return s,
        };
        // SAFETY: an initialised latch (pool.h contract).
        pool.wait_for_latch(unsafe { core_latch(latch) });
        POOL_OK
    })
}

/// Submits a task for fork-join: from one of `pool`'s threads it stays private to that thread
/// (nothing shared is written) until the thread's `pool_latch_wait` runs it, newest first
/// (depth-first, so recursive fork-join nests no deeper than the recursion), or an idle thread
/// asks for work (the oldest forks are offered first), or the callback that forked it returns
/// without waiting (then it is queued for this thread or a thief); from any other thread it is
/// `pool_submit_to`. Ownership as for `pool_submit`. For the fastest fine-grained fork-join,
/// see `pool_worker_fork` (no latch, no atomic operation per fork).
#[cfg_attr(doc, doc = include_str!("examples/latch.md"))]
#[no_mangle]
pub extern "C" fn pool_fork(pool: *mut Pool, task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: a live pool; the task was checked; the caller's contract covers the rest.
        status(unsafe { borrow(pool).submit_fork(task) })
    })
}

/// `pool_fork` on the global pool (the one behind `pool_submit`): from one of its threads the
/// task stays private to that thread as `pool_fork` says, elsewhere it is `pool_submit`. Wait for it with
/// `pool_latch_wait_global`. Ownership as for `pool_submit`.
#[no_mangle]
pub extern "C" fn pool_fork_global(task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        let pool = match global_pool() {
            Ok(pool) => pool,
            Err(s) => return s,
        };
        // SAFETY: the task was checked; the caller's contract covers the rest.
        status(unsafe { pool.submit_fork(task) })
    })
}
