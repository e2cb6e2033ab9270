//! Status codes and the panic boundary: [`pool_status`], the guard every entry point runs
//! inside, and the mapping from [`Error`] to a code (`Error::Forked`, a pool inherited
//! through `fork()`, is `POOL_ERR_FORKED`).

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::Error;
use crate::raw_handle::RawHandle;

/// Status codes returned by every `int` function of the C API.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pool_status {
    /// Success.
    POOL_OK = 0,
    /// A NULL pool, task, callback or out pointer; a configuration value out of range; a task
    /// list with a cycle; or a call not allowed from a pool thread (shutting a pool down from
    /// one of its own tasks).
    POOL_ERR_INVALID = -1,
    /// The pool is shut down (or shutting down): the work was not accepted; shutdown twice.
    POOL_ERR_SHUTDOWN = -2,
    /// The pool has no thread and could not start one: the work was not accepted.
    POOL_ERR_SPAWN = -3,
    /// Out of memory: nothing was created or queued, nothing is left half-built (every
    /// function that allocates: `pool_create`, `pool_create_with_platform`,
    /// `pool_blocking_create`, `pool_blocking_global_configure`, `pool_submit_fn`,
    /// `pool_submit_after`, `pool_queue_init`, `pool_queue_init_target`, and the first use of a
    /// global pool). A thread start that finds no memory is a failed start instead (POOL_ERR_SPAWN
    /// when the pool has no thread at all).
    POOL_ERR_NOMEM = -4,
    /// An internal panic was caught at the boundary (a bug in pool; please report it).
    POOL_ERR_PANIC = -5,
    /// A count or an index out of range: a worker index at or beyond the pool's worker
    /// count; a `pool_latch_add` that would take the latch's count past its range (the latch
    /// is unchanged).
    POOL_ERR_RANGE = -6,
    /// Too late: a configuration that must come before first use came after it
    /// (`pool_blocking_global_configure` once the global blocking pool was built), or a second
    /// one of what a pool has only one of (`pool_set_driver` on a pool that has a driver);
    /// nothing was changed.
    POOL_ERR_STARTED = -7,
    /// The pool was inherited from the parent process through `fork()`: its threads do not
    /// exist in this process, so it takes no work (the tasks the parent had queued are never
    /// run here) and `pool_shutdown` has nothing to wait for. Only `pool_destroy` (which frees
    /// what it can and returns) and the counters remain. The global pools are not affected:
    /// the child's are reset and work.
    POOL_ERR_FORKED = -8,
    /// The queue holds as many waiting tasks as its bound allows (a blocking pool's
    /// `pool_blocking_set_max_queued`, a queue's `bound`): the task was not queued, is untouched
    /// and is still the caller's. A place frees when a waiting task starts (a handoff queue,
    /// `POOL_QUEUE_HANDOFF`: when a running task ends).
    POOL_ERR_FULL = -9,
    /// The task is not waiting in the queue (a queue's cancel): it has started (it runs or ran
    /// exactly once), was cancelled already, or was never submitted there; or a queue that
    /// other queues still target (`pool_queue_init_target`) was asked to be destroyed. Nothing
    /// changed.
    POOL_ERR_BUSY = -10,
}

use pool_status::*;

/// Runs `f` inside the panic boundary.
pub(super) fn boundary(f: impl FnOnce() -> pool_status) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(status) => status as c_int,
        Err(_) => POOL_ERR_PANIC as c_int,
    }
}

pub(super) fn status(result: Result<(), Error>) -> pool_status {
    match result {
        Ok(()) => POOL_OK,
        Err(Error::InvalidArgument) => POOL_ERR_INVALID,
        Err(Error::Shutdown) => POOL_ERR_SHUTDOWN,
        Err(Error::Spawn) => POOL_ERR_SPAWN,
        Err(Error::AlreadyStarted) => POOL_ERR_STARTED,
        Err(Error::Overflow) => POOL_ERR_RANGE,
        Err(Error::OutOfMemory) => POOL_ERR_NOMEM,
        Err(Error::Forked) => POOL_ERR_FORKED,
        Err(Error::Full) => POOL_ERR_FULL,
        Err(Error::Busy) => POOL_ERR_BUSY,
    }
}

/// Stores a made handle at `out` (the caller's `struct pool *`, `struct pool_blocking *` or
/// the first word of its `struct pool_queue`), which then owns it; on an error `out` is left
/// untouched.
///
/// # Safety
/// `out` is valid for writes and aligned for a pointer.
pub(super) unsafe fn publish<H: RawHandle, T>(made: Result<H, Error>, out: core::ptr::NonNull<*mut T>) -> pool_status {
    // SAFETY: the caller's contract.
    status(made.map(|handle| unsafe { out.as_ptr().write(handle.into_raw().cast()) }))
}
