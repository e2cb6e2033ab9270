//! Fork-join for C at the speed of Rust's `join`: `struct pool_job` (a function and private
//! words, caller-owned), forked and joined through `struct pool_worker *`, the worker context
//! of the thread running the code, passed down by hand ([`WorkerContext`]).
//!
//! * `pool_install` (or `pool_install_global`) runs a job on one of the pool's workers and
//!   hands its function the worker; `pool_current_worker` finds it from a task callback.
//! * `pool_worker_fork(w, job)` makes `job` latent: private to the worker, nothing shared
//!   written, unless an idle worker asked for work (then the oldest latent job is offered).
//! * `pool_worker_join(w, job)` runs the job's function right there if nobody took it (no
//!   atomic operation at all), else runs related work until its thief is done.
//!
//! Forks and joins nest like calls (`join::fn_job`'s invariants): each fork is joined by the
//! function that forked it, on the same worker, in reverse fork order. A join out of order
//! returns POOL_ERR_INVALID and changes nothing where the job is still a private frame under
//! newer ones; elsewhere it just joins that job.
//!
//! The fork and the join are the fast path of fine-grained fork-join: they take no panic
//! boundary (they contain no code that panics; a bug there would abort the process, as any
//! panic in an `extern "C"` function does, rather than unwind into C) and no thread-local
//! lookup (the worker is the argument). The core's job is [`FnJob`]; [`PoolJob`] has its
//! layout (asserted below).

use core::ffi::c_int;
use core::mem::{align_of, offset_of, size_of};
use core::ptr::{self, NonNull};

use super::platform::CSpawner;
use super::status::pool_status::*;
use super::pool::{borrow, CPool, Pool};
use super::status::{boundary, status};
use crate::join::fn_job::{self, fork_fn_fast, join_fn_fast, FnJob};
use crate::scheduler::frame::FrameStack;
use crate::scheduler::context::ContextHead;
use crate::{ThreadPool, ThreadSpawner, WorkerContext};

/// The worker running the calling code, for `pool_worker_fork` / `pool_worker_join`. Opaque.
/// Valid on the thread that was handed it (a job's function argument, `pool_current_worker`)
/// until the function or task it was handed to returns; never use it on another thread.
#[derive(Debug)]
pub struct PoolWorker {
    _private: [u8; 0],
}

/// Words of private storage in a `struct pool_job`: room for the pool's part of a job (8 on
/// 64-bit targets) and for growth without changing the C ABI.
pub const POOL_JOB_WORDS: usize = 12;

/// A fork-join job: embed it in your own struct, set `run`, and fork it with
/// `pool_worker_fork` (or start a computation with `pool_install`). `run` is called exactly
/// once per fork, with the job and the worker it runs on (pass the worker down to fork more);
/// recover your struct with `POOL_CONTAINER_OF(job, struct your_struct, member)`.
///
/// `opaque` needs no initial value: the fork writes it, and the pool uses it (from the forking
/// thread and a thief at once) until the join returns: `run` reads and writes only the other
/// fields of your struct. The job must stay in place, and must not be forked again, until
/// `pool_worker_join` for it returned POOL_OK.
#[cfg_attr(doc, doc = include_str!("examples/job.md"))]
#[repr(C)]
#[derive(Debug)]
pub struct PoolJob {
    /// Called once per fork, on a pool worker; must not be NULL. Must return normally (the
    /// rules of `struct task`'s callback).
    pub run: Option<unsafe extern "C" fn(job: *mut PoolJob, worker: *mut PoolWorker)>,
    /// Private storage.
    pub opaque: [u64; POOL_JOB_WORDS],
}

/// For pool.h's inline `pool_job_fork` / `pool_job_join` only: the word of `pool_job.opaque`
/// that holds how the job was forked.
pub const POOL_JOB_MODE_WORD: usize = 0;
/// For pool.h's inline functions only: the mode of a job not forked (or joined since).
pub const POOL_JOB_MODE_IDLE: u64 = 0;
/// For pool.h's inline functions only: the mode of a job forked without being recorded, which
/// its join runs on the spot.
pub const POOL_JOB_MODE_INLINE: u64 = 2;
/// For pool.h's inline `pool_job_fork` only: the pointer-sized word of a `struct pool_worker`
/// that points to the worker's record flag (a byte: nonzero while a fork must be recorded).
pub const POOL_WORKER_RECORD_WORD: usize = 1;

// The core job fits in the C struct, no more aligned, with `run` and the mode in the same
// places.
#[cfg(not(loom))]
static_assertions::const_assert!(size_of::<FnJob>() <= size_of::<PoolJob>());
#[cfg(not(loom))]
static_assertions::const_assert!(align_of::<FnJob>() <= align_of::<PoolJob>());
#[cfg(not(loom))]
static_assertions::const_assert_eq!(offset_of!(FnJob, run), offset_of!(PoolJob, run));
#[cfg(not(loom))]
static_assertions::const_assert_eq!(offset_of!(FnJob, mode), offset_of!(PoolJob, opaque) + POOL_JOB_MODE_WORD * size_of::<u64>());
static_assertions::const_assert_eq!(POOL_JOB_MODE_IDLE, fn_job::IDLE);
static_assertions::const_assert_eq!(POOL_JOB_MODE_INLINE, fn_job::INLINE);
// The inline fork's path to the record flag: the worker context's head is a repr(C)
// `ContextHead` (pool pointer, then the frame stack, whose first field points to the worker's
// repr(C) `Demand`, whose first field is the flag).
#[cfg(not(loom))]
static_assertions::const_assert_eq!(
    offset_of!(ContextHead, frames) + offset_of!(FrameStack, demand),
    POOL_WORKER_RECORD_WORD * size_of::<*const ()>()
);

/// The `struct pool_worker *` a job's function gets.
fn handle<S: crate::Spawner>(cx: &WorkerContext<S>) -> *mut PoolWorker {
    ptr::from_ref(cx).cast_mut().cast()
}

/// What `pool_worker_fork` and `pool_worker_join` do to a job.
#[derive(Clone, Copy)]
enum JobOp {
    Fork,
    Join,
}

/// `op` on `job` with the worker behind `worker` (a worker of a `struct pool` or of the global
/// pool: their spawner types differ, found out once).
#[inline(always)]
fn job_op(worker: *mut PoolWorker, job: *mut PoolJob, op: JobOp) -> c_int {
    /// The rest of the fork or join once its fast path (below) did not finish it.
    ///
    /// # Safety
    /// As `fork_fn_slow` / `join_fn_slow`.
    #[inline(always)]
    unsafe fn apply<S: crate::Spawner>(cx: &WorkerContext<S>, job: NonNull<FnJob>, op: JobOp) -> Result<(), crate::Error> {
        // SAFETY: the caller's contract.
        unsafe {
            match op {
                JobOp::Fork => cx.fork_fn_slow(job),
                JobOp::Join => cx.join_fn_slow(job),
            }
        }
    }
    let (Some(worker), Some(job)) = (NonNull::new(worker), NonNull::new(job)) else {
        return POOL_ERR_INVALID as c_int;
    };
    let job = job.cast::<FnJob>();
    // `worker` is this thread's context (of either type: repr(C), its head first); its pool's
    // address tells its type: only the global pool has `ThreadSpawner` here.
    // SAFETY: `pool_worker_fork`'s contract (pool.h): `worker` is live until the code it was
    // handed to returns; `PoolJob` has `FnJob`'s layout (asserted above).
    let done = unsafe {
        let head = ContextHead::of(worker.cast());
        // The paths that need no platform type first: an unrecorded fork and its join.
        match op {
            JobOp::Fork => {
                if let Some(forked) = fork_fn_fast(head, job) {
                    return status(forked) as c_int;
                }
            }
            JobOp::Join => {
                if join_fn_fast(job, worker.as_ptr().cast_const().cast()) {
                    return POOL_OK as c_int;
                }
            }
        }
        if crate::os::global::built().is_some_and(|g| NonNull::from(g.inner()).cast() == head.pool) {
            apply(worker.cast::<WorkerContext<ThreadSpawner>>().as_ref(), job, op)
        } else {
            apply(worker.cast::<WorkerContext<CSpawner>>().as_ref(), job, op)
        }
    };
    status(done) as c_int
}

/// Forks `job` on `worker` (see `struct pool_job`): its `run` will be called exactly once
/// before `pool_worker_join(worker, job)` returns, on this worker at the join (no atomic
/// operation, nothing shared written) unless an idle worker took it meanwhile. No
/// allocation, no lock, no system call unless a worker is woken for it. Returns
/// POOL_ERR_INVALID for a NULL worker or job or a NULL `run` (nothing forked).
///
/// Contract: `worker` is the calling thread's (see `struct pool_worker`); the job stays in
/// place until its join returns; the function that forks a job joins it, in reverse fork
/// order.
#[cfg_attr(doc, doc = include_str!("examples/job.md"))]
#[no_mangle]
pub extern "C" fn pool_worker_fork(worker: *mut PoolWorker, job: *mut PoolJob) -> c_int {
    job_op(worker, job, JobOp::Fork)
}

/// Joins `job`, forked on `worker` by the calling function: returns once its `run` has
/// returned. If no other worker took the job, `run` is called here and now; otherwise this
/// worker runs related work (its own forks, then the thief's) until the thief is done, and
/// sleeps if there is none. Returns POOL_ERR_INVALID for a NULL worker or job, for a job not
/// forked (or joined already), and for a join out of order where it would break the worker's
/// bookkeeping (the job is still private to the worker under newer forks still to be joined);
/// nothing is changed then. Joins come in reverse fork order; one out of order that is not
/// refused joins that job.
#[cfg_attr(doc, doc = include_str!("examples/job.md"))]
#[no_mangle]
pub extern "C" fn pool_worker_join(worker: *mut PoolWorker, job: *mut PoolJob) -> c_int {
    job_op(worker, job, JobOp::Join)
}

/// `pool_worker_fork`, under the name of pool.h's inline `pool_job_fork`: for callers that
/// link to the library but cannot use the inline function (a binding generator that cannot
/// translate it, such as Zig's translate-c, declares it as an external function). Not in
/// pool.h, which has the inline one.
#[no_mangle]
pub extern "C" fn pool_job_fork(worker: *mut PoolWorker, job: *mut PoolJob) -> c_int {
    job_op(worker, job, JobOp::Fork)
}

/// `pool_worker_join`, under the name of pool.h's inline `pool_job_join` (see
/// [`pool_job_fork`]).
#[no_mangle]
pub extern "C" fn pool_job_join(worker: *mut PoolWorker, job: *mut PoolJob) -> c_int {
    job_op(worker, job, JobOp::Join)
}

/// A job pointer that may cross to the worker that runs it (the caller waits meanwhile).
struct JobPtr(NonNull<PoolJob>);
// SAFETY: the job is handed to exactly one worker, and the caller waits until it returned.
unsafe impl Send for JobPtr {}

/// Runs `job` on `pool`, the calling thread waiting: `install`, handing `run` the worker.
fn install_on<S: crate::Spawner>(pool: &ThreadPool<S>, job: NonNull<PoolJob>) -> Result<(), crate::Error> {
    let job = JobPtr(job);
    pool.install(move |cx| {
        let job = job;
        // SAFETY: `run` was checked by the caller; the job is the caller's, alive until
        // `install` returns (it waits for this closure).
        unsafe { (job.0.as_ref().run.unwrap_unchecked())(job.0.as_ptr(), handle(cx)) }
    })
}

/// The job pointer if it and its `run` are set.
fn checked_job(job: *mut PoolJob) -> Option<NonNull<PoolJob>> {
    let job = NonNull::new(job)?;
    // SAFETY: non-null; the caller promises a `struct pool_job` it owns.
    unsafe { job.as_ref() }.run?;
    Some(job)
}

/// Calls `job->run(job, worker)` on one of `pool`'s workers and returns when it returned: the
/// entry into fork-join with `pool_worker_fork` / `pool_worker_join`. On one of `pool`'s own
/// workers it runs right here; from any other thread the caller sleeps meanwhile. The job is
/// only called, not forked (it may be forked later). Returns POOL_ERR_INVALID for a NULL pool,
/// job or `run`; POOL_ERR_SHUTDOWN after `pool_shutdown`; POOL_ERR_SPAWN when the pool has no
/// thread and cannot start one; POOL_ERR_FORKED for a pool inherited through `fork()`. On any
/// error `run` was not called.
#[cfg_attr(doc, doc = include_str!("examples/job.md"))]
#[no_mangle]
pub extern "C" fn pool_install(pool: *mut Pool, job: *mut PoolJob) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(job) = checked_job(job) else { return POOL_ERR_INVALID };
        // SAFETY: a live pool (pool.h contract).
        let handle = unsafe { borrow(pool) };
        let pool_ref: &CPool = &handle;
        status(install_on(pool_ref, job))
    })
}

/// `pool_install` on the global pool (the one behind `pool_submit`), built on first use.
#[no_mangle]
pub extern "C" fn pool_install_global(job: *mut PoolJob) -> c_int {
    boundary(|| {
        let Some(job) = checked_job(job) else { return POOL_ERR_INVALID };
        match super::global_pool() {
            Ok(pool) => status(install_on(pool, job)),
            Err(s) => s,
        }
    })
}

/// The worker of `pool` that is running the caller (a task callback of `pool`, say), for
/// `pool_worker_fork`; NULL when the calling thread is not one of `pool`'s workers (or
/// `pool` is NULL, or was inherited through `fork()`). Valid as `struct pool_worker` says:
/// until the callback that asked returns, on this thread only.
#[no_mangle]
pub extern "C" fn pool_current_worker(pool: *mut Pool) -> *mut PoolWorker {
    let worker = catch_null(|| {
        let pool = NonNull::new(pool)?;
        // SAFETY: a live pool (pool.h contract).
        if unsafe { super::inherited(pool) } {
            return None;
        }
        // SAFETY: a live pool (pool.h contract).
        unsafe { borrow(pool) }.current_worker().map(handle)
    });
    worker.unwrap_or(ptr::null_mut())
}

/// `pool_current_worker` for the global pool: NULL when the calling thread is not one of its
/// workers (it does not build the global pool).
#[no_mangle]
pub extern "C" fn pool_current_worker_global() -> *mut PoolWorker {
    let worker = catch_null(|| crate::os::global::built()?.current_worker().map(handle));
    worker.unwrap_or(ptr::null_mut())
}

/// Runs `f` inside a panic boundary, a caught panic reading as `None`.
fn catch_null<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok().flatten()
}
