//! `pool_submit_after`: a delayed submit (libdispatch's `dispatch_after_f`) on the pool's
//! timers (`crate::time`).

use core::ffi::c_int;
use core::ptr::NonNull;
use core::time::Duration;

use super::pool::{borrow, Pool};
use super::status::{boundary, pool_status, status};
use super::task::{checked_task, CTask};
use crate::scheduler::timers::AfterError;
use pool_status::*;

/// Submits `task` to `pool` to run no earlier than `delay_ns` nanoseconds from now, exactly
/// once. The pool allocates one small entry per call (a `struct task` has no room for a
/// deadline) and frees it when the delay expires; a delay of 0 submits at once without one.
/// At `pool_shutdown`, a delayed task still pending is queued then and runs early, as every
/// queued task does: shutdown never waits for a deadline.
///
/// On POOL_OK the pool owns the task until its callback starts (as `pool_submit_to`). On any
/// error it was not queued and is still the caller's: POOL_ERR_INVALID (NULL pool or task,
/// NULL callback), POOL_ERR_NOMEM (the entry could not be allocated), POOL_ERR_SHUTDOWN
/// (shutdown has begun; a pool task's own delayed submits are then queued at once instead),
/// POOL_ERR_SPAWN (the pool has no thread and could not start one).
#[no_mangle]
pub extern "C" fn pool_submit_after(pool: *mut Pool, task: *mut CTask, delay_ns: u64) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract); the task was checked and the caller's
        // contract covers the rest (as `pool_submit_to`).
        match unsafe { borrow(pool).try_submit_after(task, Duration::from_nanos(delay_ns)) } {
            Ok(()) => POOL_OK,
            Err(AfterError::Pool(e)) => status(Err(e)),
            Err(AfterError::NoMemory) => POOL_ERR_NOMEM,
        }
    })
}
