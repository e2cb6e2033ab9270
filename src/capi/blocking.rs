//! The C ABI of the blocking pool (`pool_blocking_*`): blocking or long-running work on a
//! separate, dynamically sized set of threads (see `crate::blocking`).
//!
//! A C host embeds a `struct pool_blocking_task` (which starts with the usual `struct task`)
//! in its own struct. The mandatory flag and the hand-back live in that struct, so submit
//! needs no extra arguments and shutdown can give each task back to its owner: a task still
//! queued at shutdown either runs (flag `POOL_BLOCKING_MANDATORY`, or no `cancel` callback) or
//! has its `cancel` callback called, exactly once, so the host can free what it embedded.
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint};
use core::ptr::NonNull;
use core::time::Duration;

use super::status::{boundary, publish, status};
use super::config::{reserved_clear, MAX_STACK, MIN_STACK, POOL_RESERVED_WORDS};
use super::task::CTask;
use crate::blocking::{BlockingConfig, BlockingMetrics, BlockingPool, BlockingTask};
use crate::os::global::{configure_global_blocking, global_blocking_if_built, try_global_blocking};
use crate::raw_handle::RawHandle;
use crate::ThreadSpawner;

use super::status::pool_status::*;

/// Flag for `pool_blocking_task.flags`: run the task even if the pool shuts down before it
/// started (instead of calling its `cancel` callback).
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
pub const POOL_BLOCKING_MANDATORY: c_uint = 1;
static_assertions::const_assert_eq!(POOL_BLOCKING_MANDATORY, BlockingTask::MANDATORY);

/// The default `max_threads` of a blocking pool (what 0 means).
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
pub const POOL_BLOCKING_DEFAULT_MAX_THREADS: usize = 512;
/// The largest `max_threads` of a blocking pool.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
pub const POOL_BLOCKING_MAX_THREADS: usize = 65536;

static_assertions::const_assert_eq!(POOL_BLOCKING_DEFAULT_MAX_THREADS, BlockingConfig::DEFAULT_MAX_THREADS);
static_assertions::const_assert_eq!(POOL_BLOCKING_MAX_THREADS, BlockingConfig::MAX_THREADS);

/// A blocking task: embed it in your own struct (anywhere; recover your struct with
/// `POOL_CONTAINER_OF(task, struct your_struct, member.task)`), fill it with
/// `pool_blocking_task_init` or by hand, and submit a pointer to it.
///
/// Exactly one of the two callbacks is called, exactly once, with a pointer to `task`:
/// `task.callback` when it runs, or `cancel` when the pool shuts down before it started and it
/// is neither mandatory nor without a `cancel` callback. The struct must stay valid and
/// unmodified from submit until that call starts; from then on the pool does not touch it
/// (the callback may free it).
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[repr(C)]
#[derive(Debug)]
pub struct pool_blocking_task {
    /// The task: `callback` runs the work (must not be NULL); `next` belongs to the pool.
    pub task: CTask,
    /// Called instead of `task.callback` when shutdown hands the task back; NULL: the task
    /// cannot be cancelled and runs even at shutdown.
    pub cancel: Option<unsafe extern "C" fn(task: *mut CTask)>,
    /// 0 or `POOL_BLOCKING_MANDATORY`. Other bits are reserved and must be 0.
    pub flags: c_uint,
}

// The C struct and the core's BlockingTask are the same memory.
#[cfg(not(loom))]
mod layout {
    use super::pool_blocking_task;
    use crate::blocking::BlockingTask;
    use core::mem::{align_of, offset_of, size_of};
    static_assertions::const_assert_eq!(size_of::<pool_blocking_task>(), size_of::<BlockingTask>());
    static_assertions::const_assert_eq!(align_of::<pool_blocking_task>(), align_of::<BlockingTask>());
    static_assertions::const_assert_eq!(offset_of!(pool_blocking_task, task), offset_of!(BlockingTask, task));
    static_assertions::const_assert_eq!(offset_of!(pool_blocking_task, cancel), offset_of!(BlockingTask, cancel));
    static_assertions::const_assert_eq!(offset_of!(pool_blocking_task, flags), offset_of!(BlockingTask, flags));
}

/// Configuration for `pool_blocking_create`. Initialise with `pool_blocking_config_init`.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pool_blocking_config {
    /// Most threads at once: 1 to POOL_BLOCKING_MAX_THREADS; 0 = the default (512).
    pub max_threads: usize,
    /// Milliseconds an idle thread waits for work before it exits (default 10000); 0: it exits
    /// as soon as it finds no work.
    pub keep_alive_ms: usize,
    /// Stack size of each thread in bytes; 0 = the system default (what `pthread_attr_init`
    /// gives a new thread: it follows `ulimit -s`), otherwise at least 16384 and at most 1 GiB.
    pub stack_size: usize,
    /// Reserved for fields of later minor versions: 0 (as `pool_blocking_config_init` leaves it).
    pub reserved: [usize; POOL_RESERVED_WORDS],
}

/// The reserved words left in `struct pool_blocking_metrics`: `tasks_refused` took the first.
pub const POOL_BLOCKING_METRICS_RESERVED_WORDS: usize = POOL_RESERVED_WORDS - 1;

/// Counters of a blocking pool, read without any lock (each field individually up to date).
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pool_blocking_metrics {
    /// Threads started (or being started) and not yet exited.
    pub threads: usize,
    /// Threads waiting for work.
    pub idle_threads: usize,
    /// Tasks accepted and not yet taken by a thread.
    pub queue_depth: usize,
    /// Tasks whose callback ran (mandatory tasks run at shutdown included).
    pub tasks_run: usize,
    /// Tasks handed back through their cancel callback at shutdown.
    pub tasks_cancelled: usize,
    /// Threads started.
    pub threads_spawned: usize,
    /// Threads that exited (keep-alive or shutdown).
    pub threads_exited: usize,
    /// Thread starts the system refused.
    pub spawn_failures: usize,
    /// The most threads at once since the pool was created.
    pub peak_threads: usize,
    /// Submits refused with POOL_ERR_FULL (`pool_blocking_set_max_queued`). In the first of the
    /// reserved words that 0.1 had.
    pub tasks_refused: usize,
    /// Reserved for counters of later minor versions; written as 0.
    pub reserved: [usize; POOL_BLOCKING_METRICS_RESERVED_WORDS],
}

impl From<BlockingMetrics> for pool_blocking_metrics {
    fn from(m: BlockingMetrics) -> Self {
        Self {
            threads: m.threads,
            idle_threads: m.idle_threads,
            queue_depth: m.queue_depth,
            tasks_run: m.tasks_run,
            tasks_cancelled: m.tasks_cancelled,
            threads_spawned: m.threads_spawned,
            threads_exited: m.threads_exited,
            spawn_failures: m.spawn_failures,
            peak_threads: m.peak_threads,
            tasks_refused: m.tasks_refused,
            reserved: [0; POOL_BLOCKING_METRICS_RESERVED_WORDS],
        }
    }
}

/// An opaque blocking pool created by `pool_blocking_create` and freed by
/// `pool_blocking_destroy`.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[derive(Debug)]
pub struct pool_blocking {
    _private: [u8; 0],
}

pub(super) type CBlocking = BlockingPool<ThreadSpawner>;

/// Borrows the pool behind a `struct pool_blocking *`.
///
/// # Safety
/// `pool` came from `pool_blocking_create` and was not destroyed.
unsafe fn borrow_blocking(pool: NonNull<pool_blocking>) -> core::mem::ManuallyDrop<CBlocking> {
    // SAFETY: the caller's contract; ManuallyDrop keeps the borrowed handle from freeing.
    unsafe { CBlocking::borrow_raw(pool.as_ptr().cast()) }
}

/// Checks a blocking task (non-NULL, a callback, no unknown flag) and turns it into the core's.
fn checked_blocking_task(task: *mut pool_blocking_task) -> Option<NonNull<BlockingTask>> {
    let task = NonNull::new(task)?;
    // SAFETY: non-null; the caller promises it points to a `struct pool_blocking_task` it owns.
    let t = unsafe { task.as_ref() };
    if t.task.callback.is_none() || t.flags & !POOL_BLOCKING_MANDATORY != 0 {
        return None;
    }
    Some(task.cast())
}

/// Fills `config` with the defaults (512 threads, 10000 ms keep-alive, default stack,
/// reserved words 0).
/// NULL: no-op.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_config_init(config: *mut pool_blocking_config) {
    if let Some(config) = NonNull::new(config) {
        let d = BlockingConfig::default();
        let value = pool_blocking_config {
            max_threads: d.max_threads,
            keep_alive_ms: usize::try_from(d.keep_alive.as_millis()).unwrap_or(usize::MAX),
            stack_size: 0,
            reserved: [0; POOL_RESERVED_WORDS],
        };
        // SAFETY: non-null; the caller passes a writable `struct pool_blocking_config`.
        unsafe { config.as_ptr().write(value) };
    }
}

/// Fills a blocking task: `callback` (must not be NULL), `cancel` (NULL: the task cannot be
/// cancelled and runs even at shutdown) and `flags` (0 or POOL_BLOCKING_MANDATORY).
/// Returns POOL_ERR_INVALID (and leaves `*task` untouched) for a NULL task or callback or an
/// unknown flag.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_task_init(
    task: *mut pool_blocking_task,
    callback: Option<unsafe extern "C" fn(task: *mut CTask)>,
    cancel: Option<unsafe extern "C" fn(task: *mut CTask)>,
    flags: c_uint,
) -> c_int {
    boundary(|| {
        let Some(task) = NonNull::new(task) else { return POOL_ERR_INVALID };
        if callback.is_none() || flags & !POOL_BLOCKING_MANDATORY != 0 {
            return POOL_ERR_INVALID;
        }
        let value = pool_blocking_task {
            task: CTask { next: core::ptr::null_mut(), callback },
            cancel,
            flags,
        };
        // SAFETY: non-null; the caller passes a writable `struct pool_blocking_task` that is
        // not queued.
        unsafe { task.as_ptr().write(value) };
        POOL_OK
    })
}

/// The core configuration for a C one; `None` for an out-of-range field or a non-zero
/// reserved word.
fn core_config(config: pool_blocking_config) -> Option<BlockingConfig> {
    if config.max_threads > BlockingConfig::MAX_THREADS
        || !reserved_clear(&config.reserved)
        || (config.stack_size != 0 && !(MIN_STACK..=MAX_STACK).contains(&config.stack_size))
    {
        return None;
    }
    Some(
        BlockingConfig::new()
            .with_max_threads(config.max_threads)
            .with_keep_alive(Duration::from_millis(config.keep_alive_ms as u64))
            .with_stack_size(super::process::c_stack_size(config.stack_size)),
    )
}

/// Creates a blocking pool. `config` may be NULL (defaults). On success `*out` receives the
/// pool, which the caller owns and frees with `pool_blocking_destroy`. No thread starts until
/// work is submitted. Returns POOL_ERR_INVALID for a NULL `out` or an out-of-range field,
/// POOL_ERR_NOMEM when memory runs out (`*out` untouched, nothing allocated).
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_create(config: *const pool_blocking_config, out: *mut *mut pool_blocking) -> c_int {
    boundary(|| {
        let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
        let c = match NonNull::new(config.cast_mut()) {
            // SAFETY: non-null; the caller passes a readable `struct pool_blocking_config`.
            Some(config) => match core_config(unsafe { config.as_ptr().read() }) {
                Some(c) => c,
                None => return POOL_ERR_INVALID,
            },
            None => BlockingConfig::default(),
        };
        // SAFETY: non-null; the caller passes a writable `struct pool_blocking *`.
        unsafe { publish(CBlocking::new(c), out) }
    })
}

/// Submits a blocking task to `pool`. It runs on an idle thread, else on a new thread if the
/// cap allows, else it waits in FIFO order for the next free thread.
/// On POOL_OK the pool owns the task until one of its callbacks starts. On any error it was
/// not queued and is still the caller's: POOL_ERR_INVALID (NULL pool or task, NULL callback,
/// unknown flag), POOL_ERR_SHUTDOWN (shutdown has begun), POOL_ERR_SPAWN (the pool has no
/// thread and none could be started), POOL_ERR_FULL (the queue holds as many waiting tasks
/// as `pool_blocking_set_max_queued` allows).
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_submit_to(pool: *mut pool_blocking, task: *mut pool_blocking_task) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(task) = checked_blocking_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is live (pool.h contract); the task was checked and the caller's
        // contract covers the rest.
        status(unsafe { borrow_blocking(pool).submit(task) })
    })
}

/// Bounds the tasks that may wait in `pool`'s queue (accepted, not yet started) from now on;
/// 0 (the default) removes the bound. A submit that finds that many waiting returns
/// POOL_ERR_FULL and leaves the task untouched, still the caller's; a place frees when a
/// waiting task starts. Lowering the bound below what waits already drops nothing: submits
/// fail until enough tasks have started. Returns POOL_ERR_INVALID for a NULL pool.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_set_max_queued(pool: *mut pool_blocking, max_queued: usize) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is live (pool.h contract).
        unsafe { borrow_blocking(pool) }.set_max_queued(max_queued);
        POOL_OK
    })
}

/// Submits a blocking task to the process-wide blocking pool (cap 512, keep-alive 10 s, unless
/// `pool_blocking_global_configure` said otherwise first; built on first use, never shut down,
/// so `cancel` is never called). Ownership and errors as `pool_blocking_submit_to`.
#[cfg_attr(doc, doc = include_str!("examples/blocking_global.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_submit(task: *mut pool_blocking_task) -> c_int {
    boundary(|| {
        let Some(task) = checked_blocking_task(task) else { return POOL_ERR_INVALID };
        let pool = match try_global_blocking() {
            Ok(pool) => pool,
            Err(e) => return status(Err(e)),
        };
        // SAFETY: checked; the caller's contract covers the rest.
        status(unsafe { pool.submit(task) })
    })
}

/// Stops accepting work, wakes every idle thread, waits for the threads to finish and joins
/// them. Tasks already running finish. Tasks still queued run if mandatory (or without a
/// `cancel` callback) and are handed back through `cancel` otherwise; every one of them has
/// had its callback called when this returns. Returns POOL_ERR_SHUTDOWN if already shut down,
/// POOL_ERR_INVALID for NULL or when called from one of the pool's own threads. The pool stays
/// allocated: free it with `pool_blocking_destroy`.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_shutdown(pool: *mut pool_blocking) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is live (pool.h contract).
        status(unsafe { borrow_blocking(pool) }.shutdown())
    })
}

/// Shuts `pool` down if that was not done yet (as `pool_blocking_shutdown`) and frees it.
/// NULL is a no-op. Calling it from one of the pool's own threads is detected and ignored (the
/// pool is left alone). If another thread is inside `pool_blocking_shutdown(pool)`, this waits
/// for that shutdown to finish, then frees. Any call on `pool` that begins after
/// `pool_blocking_destroy` began (a second destroy included) is undefined.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_destroy(pool: *mut pool_blocking) {
    let _ = boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_OK };
        // SAFETY: `pool` is live (pool.h contract).
        if unsafe { borrow_blocking(pool) }.is_pool_thread() {
            return POOL_ERR_INVALID;
        }
        // SAFETY: the caller gives up its only handle. The drop shuts down, joins and frees
        // (or, inherited through fork, frees what it safely can and returns).
        drop(unsafe { CBlocking::from_raw(pool.as_ptr().cast()) });
        POOL_OK
    });
}

/// Reads `pool`'s counters into `*out` without taking any lock. POOL_ERR_INVALID for a NULL
/// argument.
#[cfg_attr(doc, doc = include_str!("examples/blocking.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_metrics(pool: *const pool_blocking, out: *mut pool_blocking_metrics) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool.cast_mut()) else { return POOL_ERR_INVALID };
        let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is live (pool.h contract).
        let metrics = unsafe { borrow_blocking(pool) }.metrics();
        // SAFETY: non-null; the caller passes a writable `struct pool_blocking_metrics`.
        unsafe { out.as_ptr().write(metrics.into()) };
        POOL_OK
    })
}

/// Configures the process-wide blocking pool (the one behind `pool_blocking_submit`): its
/// thread cap, keep-alive and stack size, as for `pool_blocking_create`. Only before its first
/// use: call it first thing, before any `pool_blocking_submit` (and before Rust code in the
/// process uses `pool::spawn_blocking`). `pool_blocking_global_metrics` is not a use.
///
/// Returns POOL_OK (the pool is built with `*config`, no thread started yet);
/// POOL_ERR_STARTED if the pool was already built, by its first use or an earlier successful
/// call (it keeps its configuration); POOL_ERR_INVALID for a NULL `config` or an out-of-range
/// field, POOL_ERR_NOMEM when memory runs out (nothing changed).
#[cfg_attr(doc, doc = include_str!("examples/blocking_global.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_global_configure(config: *const pool_blocking_config) -> c_int {
    boundary(|| {
        let Some(config) = NonNull::new(config.cast_mut()) else { return POOL_ERR_INVALID };
        // SAFETY: non-null; the caller passes a readable `struct pool_blocking_config`.
        let Some(c) = core_config(unsafe { config.as_ptr().read() }) else { return POOL_ERR_INVALID };
        status(configure_global_blocking(c))
    })
}

/// Reads the process-wide blocking pool's counters into `*out` (all zero before its first
/// use; reading them does not build the pool). POOL_ERR_INVALID for NULL.
#[cfg_attr(doc, doc = include_str!("examples/blocking_global.md"))]
#[no_mangle]
pub extern "C" fn pool_blocking_global_metrics(out: *mut pool_blocking_metrics) -> c_int {
    boundary(|| {
        let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
        let metrics = global_blocking_if_built().map(|pool| pool.metrics()).unwrap_or_default();
        // SAFETY: non-null; the caller passes a writable `struct pool_blocking_metrics`.
        unsafe { out.as_ptr().write(metrics.into()) };
        POOL_OK
    })
}
