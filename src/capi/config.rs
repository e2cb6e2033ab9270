//! [`PoolConfig`], the C `struct pool_config`: its defaults, limits and reserved words.

use core::ffi::{c_char, c_void};
use core::ptr::{self, NonNull};

/// Configuration for `pool_create`. Initialise with `pool_config_init`, then change fields.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    /// Most worker threads; 0 = the number of CPUs available (Linux: the affinity mask, capped
    /// by the cgroup's CPU quota). At most 16383.
    pub max_threads: usize,
    /// Stack size of each worker thread in bytes; 0 = the system default: what
    /// `pthread_attr_init` gives a new thread (it follows `ulimit -s`), or, for a pool on a
    /// host's platform, 0 passed on to the host. Otherwise at least 16384 and at most 1 GiB.
    pub stack_size: usize,
    /// Rounds an idle worker watches for new work from outside the pool before it sleeps
    /// (a short spin that saves both sides a system call when work comes soon after).
    /// `pool_config_init` sets POOL_DEFAULT_IDLE_SPINS; 0 = sleep at once; at most
    /// POOL_MAX_IDLE_SPINS. On a VM a spin can make the next wake-up of that worker slower:
    /// tasks that come far apart may start sooner with 0 (the repository's BENCHMARKS.md).
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
    /// Threads `pool_create` starts before it returns: each has been started, named and
    /// hooked (`on_thread_start` has returned on it) and waits for work, parked. 0 (the
    /// default): threads start as work waits for them. At most the thread limit
    /// (`max_threads`, or the CPUs it defaults to). A thread that cannot start makes
    /// `pool_create` fail with POOL_ERR_SPAWN, after joining those that did. In the first of
    /// the reserved words that 0.1 had.
    pub min_threads: usize,
    /// Reserved for fields of later minor versions: 0 (as `pool_config_init` leaves it).
    pub reserved: [usize; POOL_CONFIG_RESERVED_WORDS],
}

/// The reserved words left in `struct pool_config`: `min_threads` took the first.
pub const POOL_CONFIG_RESERVED_WORDS: usize = POOL_RESERVED_WORDS - 1;

/// Words of reserved space at the end of every struct the caller allocates and the library
/// reads or fills (`pool_config`, `pool_blocking_config`, `pool_stats`,
/// `pool_blocking_metrics`, `pool_platform`, `pool_queue_stats`). Later minor versions add fields there, so these
/// structs keep their size and layout and a program built against an older pool.h keeps
/// working with a newer library (README, "ABI policy"). In structs the library reads, they
/// must be 0 (the `*_init` functions zero them): a non-zero word is a field of a newer pool.h
/// that this library does not know, and the call returns POOL_ERR_INVALID. In structs the
/// library fills, it writes 0 there.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
pub const POOL_RESERVED_WORDS: usize = 8;

/// True when every reserved word is 0; see [`POOL_RESERVED_WORDS`].
pub(super) fn reserved_clear(words: &[usize]) -> bool {
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
pub(super) const MIN_STACK: usize = 16 * 1024;

pub(super) const MAX_STACK: usize = 1 << 30;

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
    pub(super) const DEFAULT: Self = Self {
        max_threads: 0,
        stack_size: 0,
        idle_spins: POOL_DEFAULT_IDLE_SPINS,
        thread_name_prefix: ptr::null(),
        on_thread_start: None,
        on_thread_stop: None,
        hook_context: ptr::null_mut(),
        min_threads: 0,
        reserved: [0; POOL_CONFIG_RESERVED_WORDS],
    };
}
