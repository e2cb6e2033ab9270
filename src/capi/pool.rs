//! The task pool's entry points: create (on OS threads or a host's platform), submit to a
//! pool or to the global pool, shut down and destroy; and how every other entry point
//! borrows a `struct pool *`.

use core::ffi::{c_char, c_int};
use core::ptr::{self, NonNull};

use super::config::{reserved_clear, PoolConfig, MAX_STACK, MIN_STACK, POOL_MAX_IDLE_SPINS};
use super::platform::{self, pool_platform, CSpawner, HostFns};
use super::process;
use super::status::{boundary, pool_status, pool_status::*, publish, status};
use super::task::{checked_batch, checked_task, CTask};
use crate::fallible::TryArc;
use crate::os::global::try_global;
use crate::raw_handle::RawHandle;
use crate::scheduler::{Config, ThreadPool, MAX_THREADS};

/// An opaque pool created by `pool_create` and freed by `pool_destroy`.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[derive(Debug)]
pub struct Pool {
    _private: [u8; 0],
}

/// Every `struct pool *`: OS threads (`pool_create`) or a host's callbacks
/// (`pool_create_with_platform`), one type so every entry point stays non-generic.
pub(super) type CPool = ThreadPool<platform::CSpawner>;

/// The global pool, built on first use; its status if it could not be (out of memory).
pub(super) fn global_pool() -> Result<&'static ThreadPool<crate::ThreadSpawner>, pool_status> {
    try_global().map_err(|e| status(Err(e)))
}

/// Whether `pool` was inherited through `fork()` (`Error::Forked`): for the calls whose Rust
/// counterpart cannot fail (a latch wait, the current worker).
///
/// # Safety
/// `pool` is a live pool.
#[inline]
pub(super) unsafe fn inherited(pool: NonNull<Pool>) -> bool {
    // SAFETY: the caller's contract.
    unsafe { borrow(pool) }.is_inherited()
}

/// Creates a pool. `config` may be NULL (defaults). On success `*out` receives the pool, which
/// the caller owns and frees with `pool_destroy`. It starts `config->min_threads` threads
/// and waits until each has run `on_thread_start`; the others start as work is submitted.
/// Returns POOL_ERR_INVALID for a NULL `out`, an out-of-range field (`min_threads` above
/// the thread limit) or a non-zero reserved word, POOL_ERR_NOMEM when memory runs out,
/// POOL_ERR_SPAWN when one of the `min_threads` could not start (`*out` untouched, nothing
/// allocated, no thread left running).
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[no_mangle]
pub extern "C" fn pool_create(config: *const PoolConfig, out: *mut *mut Pool) -> c_int {
    boundary(|| create_with(config, out, None))
}

/// Creates a pool whose threads, parking and waking come from the host's `platform`
/// (copied; the callbacks and `context` must stay valid until `pool_destroy` returns).
/// `config` may be NULL (defaults; `max_threads` 0 = the CPUs the OS reports). On success
/// `*out` receives the pool; free it with `pool_destroy`. It starts `config->min_threads`
/// threads through the platform and waits until each has entered the pool; the others start
/// as work is submitted. Returns POOL_ERR_SPAWN when one of those could not start (the
/// others are joined), POOL_ERR_INVALID for a NULL `platform` or `out`, any NULL callback, a
/// non-zero reserved word, or an out-of-range config field; POOL_ERR_NOMEM when memory runs
/// out (`*out` untouched).
#[cfg_attr(doc, doc = include_str!("examples/platform.md"))]
#[no_mangle]
pub extern "C" fn pool_create_with_platform(
    config: *const PoolConfig,
    platform: *const pool_platform,
    out: *mut *mut Pool,
) -> c_int {
    boundary(|| {
        let Some(platform) = NonNull::new(platform.cast_mut()) else { return pool_status::POOL_ERR_INVALID };
        // SAFETY: non-null; the caller passes a readable `struct pool_platform`.
        let platform = unsafe { platform.as_ptr().read() };
        let Some(fns) = HostFns::new(&platform) else { return pool_status::POOL_ERR_INVALID };
        let Ok(fns) = TryArc::try_new(fns) else { return pool_status::POOL_ERR_NOMEM };
        create_with(config, out, Some(CSpawner::Host(fns)))
    })
}

/// `pool_create` on any platform (`host`: the host's; `None`: OS threads named and hooked as
/// `config` says): checks `out` and `config`, builds the pool, writes `*out`.
pub(super) fn create_with(config: *const PoolConfig, out: *mut *mut Pool, host: Option<platform::CSpawner>) -> pool_status {
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
    let config =
        Config::new().with_max_threads(config.max_threads).with_stack_size(stack_size).with_idle_spins(config.idle_spins).with_min_threads(config.min_threads);
    // SAFETY: non-null; the caller passes a writable `struct pool *`.
    unsafe { publish(CPool::with_spawner(config, spawner), out) }
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
pub(super) unsafe fn borrow(pool: NonNull<Pool>) -> core::mem::ManuallyDrop<CPool> {
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
        status(unsafe { borrow(pool).submit(task) })
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
        status(unsafe { borrow(pool).submit_batch(batch) })
    })
}

/// Sets how many threads serve `pool`: 1 to the `max_threads` it was created with. Lowering
/// it makes the threads above it finish their current task, hand their queued tasks to the
/// others and park (`pool_stats.surplus_threads`): once the running tasks have ended, at most
/// `n` tasks run at once. Raising it wakes them again. POOL_ERR_INVALID for NULL, 0 or above
/// the creation's limit; POOL_ERR_SHUTDOWN after `pool_shutdown`; POOL_ERR_FORKED in a child
/// that inherited the pool (nothing changed).
#[no_mangle]
pub extern "C" fn pool_set_max_threads(pool: *mut Pool, n: usize) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        status(unsafe { borrow(pool) }.set_max_threads(n))
    })
}

/// Re-reads the CPUs available (the affinity mask and the cgroup's CPU quota, as the default
/// thread count at creation) and sets the thread count to it, capped by the creation's
/// `max_threads`: a pool follows a container whose quota changed. Writes the new count to
/// `*n_out` if it is not NULL. Errors as `pool_set_max_threads` (`*n_out` untouched).
#[no_mangle]
pub extern "C" fn pool_refresh_max_threads(pool: *mut Pool, n_out: *mut usize) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        match unsafe { borrow(pool) }.refresh_max_threads() {
            Ok(n) => {
                if let Some(out) = NonNull::new(n_out) {
                    // SAFETY: non-null; the caller passes a writable `size_t`.
                    unsafe { out.as_ptr().write(n) };
                }
                POOL_OK
            }
            Err(e) => status(Err(e)),
        }
    })
}

/// Stops accepting external work, runs every task already queued, and joins all threads.
/// Returns POOL_ERR_SHUTDOWN if the pool was already shut down, POOL_ERR_INVALID for NULL or
/// when called from one of the pool's own tasks, POOL_ERR_FORKED in a child that inherited
/// the pool through `fork()` (its threads do not exist there). The pool stays allocated: free
/// it with `pool_destroy`.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
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
        // SAFETY: the caller gives up its only handle. The drop shuts down, joins and frees
        // (or, inherited through fork, frees what it safely can and returns).
        drop(unsafe { CPool::from_raw(pool.as_ptr().cast()) });
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
        -9 => b"queue is full\0",
        -10 => b"task is not waiting in the queue\0",
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
