//! Conveniences for C hosts that do not want to embed `struct task`: `pool_submit_fn` (a
//! function and an argument, one allocation per call), `pool_parallel_for` (a range split
//! into chunks over fork-join, [`ThreadPool::parallel_for`](crate::ThreadPool::parallel_for))
//! and `pool_wait_idle` ([`ThreadPool::wait_idle`](crate::ThreadPool::wait_idle)).

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;

use super::status::pool_status::*;
use super::pool::{borrow, Pool};
use super::status::{boundary, status};
use crate::heap_task::HeapTask;

/// The call one `pool_submit_fn` makes, as its task's closure captures it (`func` and `arg` are
/// the host's to share with a pool thread: pool.h's contract).
struct FnCall {
    func: unsafe extern "C" fn(arg: *mut c_void),
    arg: *mut c_void,
}

// SAFETY: pool.h makes `func(arg)` callable once on a pool thread.
unsafe impl Send for FnCall {}

impl FnCall {
    /// # Safety
    /// Once, as `pool_submit_fn` promises.
    unsafe fn call(self) {
        // SAFETY: the caller's contract.
        unsafe { (self.func)(self.arg) }
    }
}

/// Submits `func(arg)` to `pool`: called exactly once, on one of its threads. Allocates one
/// small block per call (freed before `func` runs); when that fails nothing is queued and it
/// returns POOL_ERR_NOMEM. POOL_ERR_INVALID for a NULL pool or `func`; after `pool_shutdown`,
/// POOL_ERR_SHUTDOWN (except from the pool's own tasks), as `pool_submit_to`. On any error
/// `func` is never called. `arg` is passed through untouched (NULL is fine).
#[cfg_attr(doc, doc = include_str!("examples/convenience.md"))]
#[no_mangle]
pub extern "C" fn pool_submit_fn(
    pool: *mut Pool,
    func: Option<unsafe extern "C" fn(arg: *mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(func) = func else { return POOL_ERR_INVALID };
        let call = FnCall { func, arg };
        // SAFETY: the task runs once (pool.h's promise for `func(arg)`).
        let Ok(job) = HeapTask::try_boxed(move || unsafe { call.call() }) else { return POOL_ERR_NOMEM };
        // SAFETY: `pool` is a live pool (pool.h contract); the box lives until its callback runs.
        let result = unsafe { borrow(pool).submit(job.task()) };
        if result.is_err() {
            // SAFETY: refused, so never queued: still ours.
            unsafe { job.drop_unrun() };
        }
        status(result)
    })
}

/// The C callback and its context, shared by every chunk (pool.h makes `func` callable from
/// several threads at once).
struct ForBody {
    func: unsafe extern "C" fn(ctx: *mut c_void, begin: usize, end: usize),
    ctx: *mut c_void,
}

// SAFETY: pool.h requires `func(ctx, ...)` to be callable concurrently from any thread.
unsafe impl Sync for ForBody {}

impl ForBody {
    fn call(&self, chunk: core::ops::Range<usize>) {
        // SAFETY: the caller's contract (`pool_parallel_for`): `func(ctx, ...)` on any thread,
        // concurrently, over disjoint chunks.
        unsafe { (self.func)(self.ctx, chunk.start, chunk.end) }
    }
}

/// Calls `func(ctx, begin, end)` on disjoint chunks `[begin, end)` that together cover
/// `[0, n)`, in parallel on `pool`'s threads, and returns when every call has returned
/// (dispatch_apply; rayon's `par_iter` over a range). Each chunk holds at most `grain`
/// indices; `grain` 0 picks one (about four chunks per worker). Built on fork-join: on one of
/// `pool`'s threads the caller runs chunks itself while it waits; elsewhere it blocks. `func`
/// is called from several threads at once and must not unwind. `n` 0 calls nothing.
/// POOL_ERR_INVALID for a NULL pool or `func`.
#[cfg_attr(doc, doc = include_str!("examples/convenience.md"))]
#[no_mangle]
pub extern "C" fn pool_parallel_for(
    pool: *mut Pool,
    n: usize,
    grain: usize,
    func: Option<unsafe extern "C" fn(ctx: *mut c_void, begin: usize, end: usize)>,
    ctx: *mut c_void,
) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(func) = func else { return POOL_ERR_INVALID };
        let body = ForBody { func, ctx };
        // SAFETY: `pool` is a live pool (pool.h contract).
        unsafe { borrow(pool) }.parallel_for(0..n, grain, |chunk| body.call(chunk));
        POOL_OK
    })
}

/// Waits until every task submitted to `pool` before the call has finished (the pool is idle:
/// no task queued or running, none blocked in a wait). Polls with a backoff of at most 1 ms
/// between looks, so it returns within about a millisecond of the pool going idle and burns no
/// CPU meanwhile. POOL_ERR_INVALID for a NULL pool or when called on one of `pool`'s own threads
/// (it would wait for itself); POOL_ERR_FORKED for a pool inherited through `fork()`.
#[cfg_attr(doc, doc = include_str!("examples/convenience.md"))]
#[no_mangle]
pub extern "C" fn pool_wait_idle(pool: *mut Pool) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        status(unsafe { borrow(pool) }.wait_idle())
    })
}
