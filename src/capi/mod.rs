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

use core::ffi::{c_char, c_int, c_void};
use core::ptr::{self, NonNull};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::os::global::try_global;
use crate::{Batch, Config, Error, Task, ThreadPool, MAX_THREADS};

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
    /// `pool_blocking_create`, `pool_blocking_global_configure`, and the first use of a global
    /// pool). A thread start that finds no memory is a failed start instead (POOL_ERR_SPAWN
    /// when the pool has no thread at all).
    POOL_ERR_NOMEM = -4,
    /// An internal panic was caught at the boundary (a bug in pool; please report it).
    POOL_ERR_PANIC = -5,
    /// A count or an index out of range: a worker index at or beyond the pool's worker
    /// count; a `pool_latch_add` that would take the latch's count past its range (the latch
    /// is unchanged).
    POOL_ERR_RANGE = -6,
    /// Too late: a configuration that must come before first use came after it
    /// (`pool_blocking_global_configure` once the global blocking pool was built); nothing
    /// was changed.
    POOL_ERR_STARTED = -7,
    /// The pool was inherited from the parent process through `fork()`: its threads do not
    /// exist in this process, so it takes no work (the tasks the parent had queued are never
    /// run here) and `pool_shutdown` has nothing to wait for. Only `pool_destroy` (which frees
    /// what it can and returns) and the counters remain. The global pools are not affected:
    /// the child's are reset and work.
    POOL_ERR_FORKED = -8,
}

use pool_status::*;

mod blocking;
mod convenience;
pub use convenience::*;
mod job;
pub use job::*;
mod latch;
pub use latch::*;
pub use blocking::*;
mod platform;
pub use platform::*;
pub(crate) mod process;
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
///
/// Every callback (a task's, a blocking task's `cancel`) must return normally:
/// * `longjmp` (or `siglongjmp`) out of a callback is undefined behaviour: it cannot be
///   detected, and it leaves the pool's thread in the middle of its own code;
/// * a C++ exception escaping a callback, or `pthread_exit` called inside one, ends the
///   process (abort) with the message "pool: a task callback was left by unwinding ...
///   callbacks must return normally": catch exceptions inside the callback if you need to
///   survive them; end a pool thread only by returning.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[repr(C)]
#[derive(Debug)]
pub struct CTask {
    /// Link used by the pool while the task is queued; need not be initialised.
    pub next: *mut CTask,
    /// Called once when the task runs. Must not be NULL. Must return normally (no `longjmp`,
    /// C++ exception or `pthread_exit` out of it: see above).
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
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    /// Most worker threads; 0 = the number of CPUs available. At most 16383.
    pub max_threads: usize,
    /// Stack size of each worker thread in bytes; 0 = the system default: what
    /// `pthread_attr_init` gives a new thread (it follows `ulimit -s`), or, for a pool on a
    /// host's platform, 0 passed on to the host. Otherwise at least 16384 and at most 1 GiB.
    pub stack_size: usize,
    /// Rounds an idle worker watches for new work from outside the pool before it sleeps
    /// (a short spin that saves both sides a system call when work comes soon after).
    /// `pool_config_init` sets POOL_DEFAULT_IDLE_SPINS; 0 = sleep at once; at most
    /// POOL_MAX_IDLE_SPINS.
    pub idle_spins: u32,
    /// Names the worker threads `<prefix>0`, `<prefix>1`, ... in the order they start (Linux
    /// keeps the first 15 bytes: `pthread_setname_np`). NULL: "pool-worker". The string is
    /// copied by `pool_create`. `pool_create_with_platform` requires NULL (the host names its
    /// own threads).
    pub thread_name_prefix: *const c_char,
    /// Called as `on_thread_start(hook_context)` on each worker thread when it starts, before
    /// it runs any task: set up thread-locals, CPU affinity, a profiler. NULL: none.
    /// `pool_create_with_platform` requires NULL.
    pub on_thread_start: Option<unsafe extern "C" fn(context: *mut c_void)>,
    /// Called as `on_thread_stop(hook_context)` on each worker thread after its last task,
    /// just before it exits (by `pool_shutdown` / `pool_destroy` at the latest). NULL: none.
    /// `pool_create_with_platform` requires NULL.
    pub on_thread_stop: Option<unsafe extern "C" fn(context: *mut c_void)>,
    /// Passed to `on_thread_start` and `on_thread_stop`; the hooks may be called from several
    /// threads at once. The hooks and `hook_context` must stay valid until `pool_shutdown` or
    /// `pool_destroy` returns (both wait for every worker thread to exit).
    pub hook_context: *mut c_void,
    /// Reserved for fields of later minor versions: 0 (as `pool_config_init` leaves it).
    pub reserved: [usize; POOL_RESERVED_WORDS],
}

/// Words of reserved space at the end of every struct the caller allocates and the library
/// reads or fills (`pool_config`, `pool_blocking_config`, `pool_stats`,
/// `pool_blocking_metrics`, `pool_platform`). Later minor versions add fields there, so these
/// structs keep their size and layout and a program built against an older pool.h keeps
/// working with a newer library (README, "ABI policy"). In structs the library reads, they
/// must be 0 (the `*_init` functions zero them): a non-zero word is a field of a newer pool.h
/// that this library does not know, and the call returns POOL_ERR_INVALID. In structs the
/// library fills, it writes 0 there.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
pub const POOL_RESERVED_WORDS: usize = 8;

/// True when every reserved word is 0; see [`POOL_RESERVED_WORDS`].
fn reserved_clear(words: &[usize]) -> bool {
    words.iter().all(|&w| w == 0)
}

/// `pool_config.idle_spins` as `pool_config_init` sets it.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
pub const POOL_DEFAULT_IDLE_SPINS: u32 = 256;
/// The largest `pool_config.idle_spins` that `pool_create` accepts.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
pub const POOL_MAX_IDLE_SPINS: u32 = 1048576;
static_assertions::const_assert_eq!(POOL_DEFAULT_IDLE_SPINS, crate::DEFAULT_IDLE_SPINS);
static_assertions::const_assert_eq!(POOL_MAX_IDLE_SPINS, crate::MAX_IDLE_SPINS);

/// An opaque pool created by `pool_create` and freed by `pool_destroy`.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
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
        Err(Error::Overflow) => POOL_ERR_RANGE,
        Err(Error::OutOfMemory) => POOL_ERR_NOMEM,
    }
}

/// The global pool, built on first use; its status if it could not be (out of memory).
fn global_pool() -> Result<&'static ThreadPool<crate::ThreadSpawner>, pool_status> {
    try_global().map_err(|e| status(Err(e)))
}

/// The status of a call on `pool` (a `struct pool *` or `struct pool_blocking *`) that returned
/// `result`: a refusal of an inherited pool (the child after a fork) is POOL_ERR_FORKED. The
/// registry is consulted only on a refusal.
#[inline]
fn status_on<P>(pool: NonNull<P>, result: Result<(), Error>) -> pool_status {
    match result {
        Ok(()) => POOL_OK,
        Err(e) => refused(pool.as_ptr().cast_const().cast(), e),
    }
}

/// `status_on`'s error path, out of line: the accepted submit stays as short as without it.
#[cold]
#[inline(never)]
fn refused(pool: *const (), e: Error) -> pool_status {
    if e == Error::Shutdown && process::is_inherited(pool) {
        return POOL_ERR_FORKED;
    }
    status(Err(e))
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

/// Whether `pool` was inherited through `fork()` (see `process`). An inherited pool is closed,
/// so the registry (behind a lock) is consulted only for a closed one.
///
/// # Safety
/// `pool` is a live pool.
#[inline]
unsafe fn inherited(pool: NonNull<Pool>) -> bool {
    // SAFETY: the caller's contract.
    unsafe { borrow(pool) }.inner().injector.is_closed() && process::is_inherited(pool.as_ptr().cast_const().cast())
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

/// Fills `config` with the defaults (CPUs available, default stack, POOL_DEFAULT_IDLE_SPINS,
/// reserved words 0). NULL: no-op.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_config_init(config: *mut PoolConfig) {
    if let Some(config) = NonNull::new(config) {
        // SAFETY: non-null; the caller passes a writable `struct pool_config`.
        unsafe { config.as_ptr().write(PoolConfig::DEFAULT) };
    }
}

impl PoolConfig {
    const DEFAULT: Self = Self {
        max_threads: 0,
        stack_size: 0,
        idle_spins: POOL_DEFAULT_IDLE_SPINS,
        thread_name_prefix: ptr::null(),
        on_thread_start: None,
        on_thread_stop: None,
        hook_context: ptr::null_mut(),
        reserved: [0; POOL_RESERVED_WORDS],
    };
}

/// Creates a pool. `config` may be NULL (defaults). On success `*out` receives the pool, which
/// the caller owns and frees with `pool_destroy`. No thread starts until work is submitted.
/// Returns POOL_ERR_INVALID for a NULL `out`, an out-of-range field or a non-zero reserved
/// word, POOL_ERR_NOMEM when memory runs out (`*out` untouched, nothing allocated).
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_create(config: *const PoolConfig, out: *mut *mut Pool) -> c_int {
    boundary(|| create_with(config, out, None))
}

/// `pool_create` on any platform (`host`: the host's; `None`: OS threads named and hooked as
/// `config` says): checks `out` and `config`, builds the pool, writes `*out`.
fn create_with(config: *const PoolConfig, out: *mut *mut Pool, host: Option<platform::CSpawner>) -> pool_status {
    let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
    let config = match NonNull::new(config.cast_mut()) {
        // SAFETY: non-null; the caller passes a readable `struct pool_config`.
        Some(c) => unsafe { c.as_ptr().read() },
        None => PoolConfig::DEFAULT,
    };
    if config.max_threads > MAX_THREADS
        || (config.stack_size != 0 && !(MIN_STACK..=MAX_STACK).contains(&config.stack_size))
        || config.idle_spins > POOL_MAX_IDLE_SPINS
        || !reserved_clear(&config.reserved)
    {
        return POOL_ERR_INVALID;
    }
    let spawner = match host {
        Some(host) => {
            if !config.thread_name_prefix.is_null() || config.on_thread_start.is_some() || config.on_thread_stop.is_some()
            {
                return POOL_ERR_INVALID;
            }
            host
        }
        // SAFETY: the caller passes NULL or a NUL-terminated string as the prefix (pool.h).
        None => match unsafe { platform::CSpawner::std(&config) } {
            Ok(spawner) => spawner,
            Err(e) => return status(Err(e)),
        },
    };
    // OS threads get the pthread default for 0; a host's platform gets 0 as it is.
    let stack_size = match spawner {
        platform::CSpawner::Std(_) => process::c_stack_size(config.stack_size),
        platform::CSpawner::Host(_) => config.stack_size,
    };
    let config = Config { max_threads: config.max_threads, stack_size, idle_spins: config.idle_spins };
    match CPool::with_spawner(config, spawner) {
        Ok(pool) => {
            let raw = pool.into_raw();
            if let Err(e) = process::register(raw.cast_const(), process::Kind::Task) {
                // SAFETY: from `into_raw` just above; never handed out.
                drop(unsafe { CPool::from_raw(raw) });
                return status(Err(e));
            }
            // SAFETY: non-null; the caller passes a writable `struct pool *`.
            unsafe { out.as_ptr().write(raw.cast()) };
            POOL_OK
        }
        Err(e) => status(Err(e)),
    }
}

/// Submits one task to the global pool (started on first use, no init call needed; its
/// first use returns POOL_ERR_NOMEM if it cannot be built, and a later call tries again).
/// On POOL_OK the pool owns the task until its callback starts; on any error it was not
/// queued and is still the caller's.
#[cfg_attr(doc, doc = include_str!("examples/global.md"))]
#[no_mangle]
pub extern "C" fn pool_submit(task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        let pool = match global_pool() {
            Ok(pool) => pool,
            Err(s) => return s,
        };
        // SAFETY: checked non-null with a callback; the caller's contract (pool.h) covers the rest.
        status(unsafe { pool.submit(task) })
    })
}

/// Submits a NULL-terminated list of tasks (linked through `next`) to the global pool, as one
/// batch. All or nothing: if any task is invalid, none is queued (POOL_ERR_INVALID).
#[cfg_attr(doc, doc = include_str!("examples/global.md"))]
#[no_mangle]
pub extern "C" fn pool_submit_batch(first: *mut CTask) -> c_int {
    boundary(|| {
        let Some(batch) = checked_batch(first) else { return POOL_ERR_INVALID };
        let pool = match global_pool() {
            Ok(pool) => pool,
            Err(s) => return s,
        };
        // SAFETY: validated; the caller's contract covers the rest.
        status(unsafe { pool.submit_batch(batch) })
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
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_submit_to(pool: *mut Pool, task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract); the task was checked.
        status_on(pool, unsafe { borrow(pool).submit(task) })
    })
}

/// Submits a NULL-terminated list to `pool` as one batch; all or nothing, as
/// `pool_submit_batch`.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_submit_batch_to(pool: *mut Pool, first: *mut CTask) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(batch) = checked_batch(first) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract); the batch was validated.
        status_on(pool, unsafe { borrow(pool).submit_batch(batch) })
    })
}

/// Stops accepting external work, runs every task already queued, and joins all threads.
/// Returns POOL_ERR_SHUTDOWN if the pool was already shut down, POOL_ERR_INVALID for NULL or
/// when called from one of the pool's own tasks. The pool stays allocated: free it with
/// `pool_destroy`.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_shutdown(pool: *mut Pool) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        if unsafe { inherited(pool) } {
            return POOL_ERR_FORKED;
        }
        // SAFETY: `pool` is a live pool (pool.h contract).
        status(unsafe { borrow(pool) }.shutdown())
    })
}

/// Shuts `pool` down if that was not done yet (running what is queued, joining every thread)
/// and frees it. NULL is a no-op. Calling it from one of the pool's own tasks is an error that
/// is detected and ignored (the pool is left alone). If another thread is inside
/// `pool_shutdown(pool)`, this waits for that shutdown to finish, then frees. Any call on
/// `pool` that begins after `pool_destroy` began (a second destroy included) is undefined: the
/// caller orders its own calls before the destroy.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_destroy(pool: *mut Pool) {
    let _ = boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_OK };
        // SAFETY: `pool` is a live pool (pool.h contract).
        if unsafe { borrow(pool) }.is_worker_thread() {
            return POOL_ERR_INVALID;
        }
        // SAFETY: the caller gives up its only handle.
        let owned = unsafe { CPool::from_raw(pool.as_ptr().cast()) };
        if process::unregister(pool.as_ptr().cast_const().cast()) {
            // SAFETY: inherited through fork, in this child; the only handle.
            unsafe { owned.free_inherited() };
        } else {
            // Drop shuts down, joins and frees.
            drop(owned);
        }
        POOL_OK
    });
}

/// A static, human-readable description of a status code (never NULL).
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
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
        -8 => b"pool inherited through fork: unusable in the child\0",
        _ => b"unknown status\0",
    };
    ptr::from_ref(s).cast()
}

/// The library's version, "MAJOR.MINOR.PATCH" (the package version it was built from; never
/// NULL, static). Compare with `POOL_VERSION_STRING`, the version of the `pool.h` a program
/// was compiled against: within one major version (one minor version while the major is 0) a
/// newer library runs programs built against an older header (README, "ABI policy").
#[cfg_attr(doc, doc = include_str!("examples/global.md"))]
#[no_mangle]
pub extern "C" fn pool_version() -> *const c_char {
    ptr::from_ref(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()).cast()
}
