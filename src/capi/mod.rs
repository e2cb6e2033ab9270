//! The C ABI behind `include/pool.h` (feature `capi`): `extern "C"` functions exported from
//! `libpool.a`.
//!
//! Every entry point:
//! * checks every pointer and range first and returns a [`pool_status`] code;
//! * runs inside a panic boundary: no panic or unwind ever crosses into C (a caught panic
//!   returns `POOL_ERR_PANIC`; `void` functions swallow it);
//! * states in its doc comment who owns what.
//!
//! The C `struct task` is [`CTask`]; it has the layout of [`Task`] (asserted below), so a
//! `struct task *` is handed to the core as a `*mut Task` without conversion.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int};
use core::ptr::{self, NonNull};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::{global, Batch, Config, Error, Task, ThreadPool, MAX_THREADS};

/// Status codes returned by every `int` function of the C API.
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
    /// Out of memory.
    POOL_ERR_NOMEM = -4,
    /// An internal panic was caught at the boundary (a bug in pool; please report it).
    POOL_ERR_PANIC = -5,
    /// An index out of range (a worker index at or beyond the pool's worker count).
    POOL_ERR_RANGE = -6,
    /// Too late: a configuration that must come before first use came after it
    /// (`pool_blocking_global_configure` once the global blocking pool was built); nothing
    /// was changed.
    POOL_ERR_STARTED = -7,
}

use pool_status::*;

mod blocking;
mod latch;
pub use latch::*;
pub use blocking::*;
mod platform;
pub use platform::*;
mod stats;
pub use stats::*;
mod timer;
pub use timer::*;
mod driver;
pub use driver::*;

/// A unit of work: embed it in your own struct, set `callback`, submit a pointer to it.
///
/// The pool owns `next` while the task is queued. `callback` must not be NULL; it is called
/// exactly once with the submitted pointer, on a pool thread; recover your struct with
/// `POOL_CONTAINER_OF(task, struct your_struct, member)`.
#[repr(C)]
#[derive(Debug)]
pub struct CTask {
    /// Link used by the pool while the task is queued; need not be initialised.
    pub next: *mut CTask,
    /// Called once when the task runs. Must not be NULL.
    pub callback: Option<unsafe extern "C" fn(task: *mut CTask)>,
}

// The C struct and the core's Task are the same memory: same size, alignment and offsets.
#[cfg(not(loom))]
mod layout {
    use super::CTask;
    use crate::Task;
    use core::mem::{align_of, offset_of, size_of};
    static_assertions::const_assert_eq!(size_of::<CTask>(), size_of::<Task>());
    static_assertions::const_assert_eq!(align_of::<CTask>(), align_of::<Task>());
    static_assertions::const_assert_eq!(offset_of!(CTask, next), offset_of!(Task, next));
    static_assertions::const_assert_eq!(offset_of!(CTask, callback), offset_of!(Task, callback));
    static_assertions::const_assert_eq!(size_of::<CTask>(), 2 * size_of::<usize>());
}

/// Configuration for `pool_create`. Initialise with `pool_config_init`, then change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    /// Most worker threads; 0 = the number of CPUs available. At most 16383.
    pub max_threads: usize,
    /// Stack size of each worker thread in bytes; 0 = the system default, otherwise at least
    /// 16384 and at most 1 GiB.
    pub stack_size: usize,
    /// Rounds an idle worker watches for new work from outside the pool before it sleeps
    /// (a short spin that saves both sides a system call when work comes soon after).
    /// `pool_config_init` sets POOL_DEFAULT_IDLE_SPINS; 0 = sleep at once; at most
    /// POOL_MAX_IDLE_SPINS.
    pub idle_spins: u32,
}

/// `pool_config.idle_spins` as `pool_config_init` sets it.
pub const POOL_DEFAULT_IDLE_SPINS: u32 = 256;
/// The largest `pool_config.idle_spins` that `pool_create` accepts.
pub const POOL_MAX_IDLE_SPINS: u32 = 1048576;
static_assertions::const_assert_eq!(POOL_DEFAULT_IDLE_SPINS, crate::DEFAULT_IDLE_SPINS);
static_assertions::const_assert_eq!(POOL_MAX_IDLE_SPINS, crate::MAX_IDLE_SPINS);

/// An opaque pool created by `pool_create` and freed by `pool_destroy`.
#[derive(Debug)]
pub struct Pool {
    _private: [u8; 0],
}

/// Every `struct pool *`: OS threads (`pool_create`) or a host's callbacks
/// (`pool_create_with_platform`), one type so every entry point stays non-generic.
type CPool = ThreadPool<platform::CSpawner>;

const MIN_STACK: usize = 16 * 1024;
const MAX_STACK: usize = 1 << 30;

/// Runs `f` inside the panic boundary.
fn boundary(f: impl FnOnce() -> pool_status) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(status) => status as c_int,
        Err(_) => POOL_ERR_PANIC as c_int,
    }
}

fn status(result: Result<(), Error>) -> pool_status {
    match result {
        Ok(()) => POOL_OK,
        Err(Error::InvalidArgument) => POOL_ERR_INVALID,
        Err(Error::Shutdown) => POOL_ERR_SHUTDOWN,
        Err(Error::Spawn) => POOL_ERR_SPAWN,
        Err(Error::AlreadyStarted) => POOL_ERR_STARTED,
    }
}

/// Checks one task and turns it into a core task pointer.
fn checked_task(task: *mut CTask) -> Option<NonNull<Task>> {
    let task = NonNull::new(task)?;
    // SAFETY: non-null; the caller promises it points to a `struct task` it owns.
    if unsafe { task.as_ref() }.callback.is_none() {
        return None;
    }
    Some(task.cast())
}

/// Validates a NULL-terminated list and links it into a batch, all or nothing: a NULL
/// callback anywhere, or a cycle, rejects the whole list before anything is queued.
fn checked_batch(first: *mut CTask) -> Option<Batch> {
    if first.is_null() {
        return None;
    }
    // Pass 1: validate, detecting a cycle with Floyd's tortoise (one step per two nodes).
    let mut node = first;
    let mut slow = first;
    let mut steps = 0usize;
    while !node.is_null() {
        // SAFETY: the caller promises every node of the list is a valid `struct task`.
        let n = unsafe { &*node };
        n.callback?;
        node = n.next;
        steps += 1;
        if steps % 2 == 0 {
            // SAFETY: `slow` trails `node` inside the same list.
            slow = unsafe { (*slow).next };
            if slow == node && !node.is_null() {
                return None;
            }
        }
    }
    // Pass 2: link (Batch::push rewrites `next`, so read it first).
    let mut batch = Batch::new();
    let mut node = first;
    while let Some(task) = NonNull::new(node) {
        // SAFETY: validated above.
        node = unsafe { task.as_ref() }.next;
        // SAFETY: the task is the caller's to hand over and in no other queue.
        unsafe { batch.push(task.cast()) };
    }
    Some(batch)
}

/// Fills `config` with the defaults (CPUs available, default stack, POOL_DEFAULT_IDLE_SPINS).
/// NULL: no-op.
#[no_mangle]
pub extern "C" fn pool_config_init(config: *mut PoolConfig) {
    if let Some(config) = NonNull::new(config) {
        // SAFETY: non-null; the caller passes a writable `struct pool_config`.
        unsafe { config.as_ptr().write(PoolConfig::DEFAULT) };
    }
}

impl PoolConfig {
    const DEFAULT: Self = Self { max_threads: 0, stack_size: 0, idle_spins: POOL_DEFAULT_IDLE_SPINS };
}

/// Creates a pool. `config` may be NULL (defaults). On success `*out` receives the pool, which
/// the caller owns and frees with `pool_destroy`. No thread starts until work is submitted.
/// Returns POOL_ERR_INVALID for a NULL `out` or an out-of-range field (`*out` untouched).
#[no_mangle]
pub extern "C" fn pool_create(config: *const PoolConfig, out: *mut *mut Pool) -> c_int {
    boundary(|| create_with(config, out, platform::CSpawner::std()))
}

/// `pool_create` on any platform: checks `out` and `config`, builds the pool, writes `*out`.
fn create_with(config: *const PoolConfig, out: *mut *mut Pool, spawner: platform::CSpawner) -> pool_status {
    let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
    let config = match NonNull::new(config.cast_mut()) {
        // SAFETY: non-null; the caller passes a readable `struct pool_config`.
        Some(c) => unsafe { c.as_ptr().read() },
        None => PoolConfig::DEFAULT,
    };
    if config.max_threads > MAX_THREADS
        || (config.stack_size != 0 && !(MIN_STACK..=MAX_STACK).contains(&config.stack_size))
        || config.idle_spins > POOL_MAX_IDLE_SPINS
    {
        return POOL_ERR_INVALID;
    }
    let config = Config { max_threads: config.max_threads, stack_size: config.stack_size, idle_spins: config.idle_spins };
    match CPool::with_spawner(config, spawner) {
        Ok(pool) => {
            // SAFETY: non-null; the caller passes a writable `struct pool *`.
            unsafe { out.as_ptr().write(pool.into_raw().cast()) };
            POOL_OK
        }
        Err(e) => status(Err(e)),
    }
}

/// Submits one task to the global pool (started on first use, no init call needed).
/// On POOL_OK the pool owns the task until its callback starts; on any error it was not
/// queued and is still the caller's.
#[no_mangle]
pub extern "C" fn pool_submit(task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: checked non-null with a callback; the caller's contract (pool.h) covers the rest.
        status(unsafe { global().submit(task) })
    })
}

/// Submits a NULL-terminated list of tasks (linked through `next`) to the global pool, as one
/// batch. All or nothing: if any task is invalid, none is queued (POOL_ERR_INVALID).
#[no_mangle]
pub extern "C" fn pool_submit_batch(first: *mut CTask) -> c_int {
    boundary(|| {
        let Some(batch) = checked_batch(first) else { return POOL_ERR_INVALID };
        // SAFETY: validated; the caller's contract covers the rest.
        status(unsafe { global().submit_batch(batch) })
    })
}

/// Borrows the pool behind a `struct pool *`.
///
/// # Safety
/// `pool` came from `pool_create` and was not destroyed.
unsafe fn borrow<'a>(pool: NonNull<Pool>) -> core::mem::ManuallyDrop<CPool> {
    // SAFETY: the caller's contract; ManuallyDrop keeps the borrowed handle from freeing.
    unsafe { CPool::borrow_raw(pool.as_ptr().cast()) }
}

/// Submits one task to `pool`. Ownership as for `pool_submit`. After `pool_shutdown`, returns
/// POOL_ERR_SHUTDOWN (except from the pool's own tasks, whose submits are part of the queued
/// work and still run).
#[no_mangle]
pub extern "C" fn pool_submit_to(pool: *mut Pool, task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract); the task was checked.
        status(unsafe { borrow(pool).submit(task) })
    })
}

/// Submits a NULL-terminated list to `pool` as one batch; all or nothing, as
/// `pool_submit_batch`.
#[no_mangle]
pub extern "C" fn pool_submit_batch_to(pool: *mut Pool, first: *mut CTask) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(batch) = checked_batch(first) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract); the batch was validated.
        status(unsafe { borrow(pool).submit_batch(batch) })
    })
}

/// Stops accepting external work, runs every task already queued, and joins all threads.
/// Returns POOL_ERR_SHUTDOWN if the pool was already shut down, POOL_ERR_INVALID for NULL or
/// when called from one of the pool's own tasks. The pool stays allocated: free it with
/// `pool_destroy`.
#[no_mangle]
pub extern "C" fn pool_shutdown(pool: *mut Pool) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        status(unsafe { borrow(pool) }.shutdown())
    })
}

/// Shuts `pool` down if that was not done yet (running what is queued, joining every thread)
/// and frees it. NULL is a no-op. Calling it from one of the pool's own tasks is an error that
/// is detected and ignored (the pool is left alone). Destroying a pool twice is undefined.
#[no_mangle]
pub extern "C" fn pool_destroy(pool: *mut Pool) {
    let _ = boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_OK };
        // SAFETY: `pool` is a live pool (pool.h contract).
        if unsafe { borrow(pool) }.is_worker_thread() {
            return POOL_ERR_INVALID;
        }
        // SAFETY: the caller gives up its only handle; Drop shuts down, joins and frees.
        drop(unsafe { CPool::from_raw(pool.as_ptr().cast()) });
        POOL_OK
    });
}

/// A static, human-readable description of a status code (never NULL).
#[no_mangle]
pub extern "C" fn pool_status_str(status: c_int) -> *const c_char {
    let s: &'static [u8] = match status {
        0 => b"ok\0",
        -1 => b"invalid argument\0",
        -2 => b"pool is shut down\0",
        -3 => b"no thread could be started\0",
        -4 => b"out of memory\0",
        -5 => b"internal panic caught\0",
        -6 => b"index out of range\0",
        -7 => b"already started: configure before first use\0",
        _ => b"unknown status\0",
    };
    ptr::from_ref(s).cast()
}
