//! Queues for C hosts: `struct pool_queue`, caller-allocated and of fixed size, with
//! `pool_queue_init` / `_submit` / `_submit_timeout` / `_cancel` / `_set_width` / `_wait` /
//! `_destroy`: the core [`Queue`] (one pointer to its allocation) stored in place.
//!
//! Contract: a queue is initialised once on a live `struct pool` and destroyed before that
//! pool is (a pool destroyed first leaves the queue's runners pointing at freed memory:
//! undefined, as using any destroyed pool); no call may race `pool_queue_destroy`; after it
//! returns the struct may be freed or initialised again.

use core::ffi::c_int;
use core::mem::{align_of, size_of, ManuallyDrop};
use core::ptr::NonNull;
use core::time::Duration;

use super::pool::{borrow, CPool, Pool};
use super::status::{boundary, pool_status::*, publish, status};
use super::task::{checked_task, CTask};
use super::config::POOL_RESERVED_WORDS;
use crate::queues::{Queue, QueueConfig, QueueStats};
use crate::raw_handle::RawHandle;
use crate::task::Callback;

/// Words in a `struct pool_queue`: room for the core queue (one pointer) and for growth
/// without changing the C ABI.
pub const POOL_QUEUE_WORDS: usize = 4;

/// The `bound` of a handoff queue (`pool_queue_init`): it accepts a task only while fewer than
/// `width` of its tasks are running or accepted and not yet started, so none waits for a
/// width slot (zstd's pool with `queueSize` 0, a synchronous hand-off). `pool_queue_submit`
/// returns POOL_ERR_FULL while every slot holds a task; `pool_queue_submit_timeout` waits
/// until a running task ends (or the queue widens).
// Written as a cast of `u64::MAX` (`SIZE_MAX` on every target) because cbindgen emits no
// constant for `usize::MAX`; the assertion below ties it to the core's value.
pub const POOL_QUEUE_HANDOFF: usize = u64::MAX as usize;

static_assertions::const_assert_eq!(POOL_QUEUE_HANDOFF, QueueConfig::HANDOFF);

/// A queue of tasks on a pool's threads: FIFO start, at most `width` at once, an optional
/// bound on waiting tasks, cancel before start. Treat as opaque; initialise with
/// `pool_queue_init`. Caller-owned; it must not move between `pool_queue_init` and the return
/// of `pool_queue_destroy`.
#[repr(C)]
#[derive(Debug)]
pub struct PoolQueue {
    /// Private storage.
    pub opaque: [u64; POOL_QUEUE_WORDS],
}

type CQueue = Queue<'static, super::platform::CSpawner>;

static_assertions::const_assert!(size_of::<CQueue>() <= size_of::<PoolQueue>());
static_assertions::const_assert!(align_of::<CQueue>() <= align_of::<PoolQueue>());

/// The core queue in a C one, not owned.
///
/// # Safety
/// `queue` was initialised by `pool_queue_init` and not destroyed.
unsafe fn core_queue(queue: NonNull<PoolQueue>) -> ManuallyDrop<CQueue> {
    // SAFETY: `pool_queue_init` wrote `into_raw`'s pointer into the first word.
    unsafe { CQueue::borrow_raw(queue.as_ptr().cast::<*mut ()>().read()) }
}

/// Initialises `queue` on `pool`: at most `width` tasks run at once (1 to the pool's
/// `max_threads`; 0 = suspended until `pool_queue_set_width`), at most `bound` wait (0 =
/// unbounded; POOL_QUEUE_HANDOFF: none waits for a width slot), and tasks still waiting at
/// `pool_queue_destroy` are handed to `cancel` (NULL: they run on the destroying thread
/// instead). Returns POOL_ERR_INVALID for a NULL queue or
/// pool or a width above the pool's thread limit (`max_threads` at creation), POOL_ERR_NOMEM (nothing allocated).
#[no_mangle]
pub extern "C" fn pool_queue_init(
    queue: *mut PoolQueue,
    pool: *mut Pool,
    width: usize,
    bound: usize,
    cancel: Option<unsafe extern "C" fn(task: *mut CTask)>,
) -> c_int {
    boundary(|| {
        let (Some(queue), Some(pool)) = (NonNull::new(queue), NonNull::new(pool)) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is live and outlives the queue (pool.h contract).
        let pool: ManuallyDrop<CPool> = unsafe { borrow(pool) };
        // SAFETY: as above.
        init(queue, unsafe { CQueue::new_detached(&pool, config(width, bound, cancel)) })
    })
}

/// Initialises `queue` as `pool_queue_init` does, on `target`'s pool, with its tasks run as
/// tasks of `target` (libdispatch's target queues): at most `width` of them at once, each
/// also taking one of `target`'s width slots, started in `target`'s FIFO order among its own
/// tasks and other queues on it. Two queues of one pool (slow I/O capped at half the threads
/// beside everything else) then start tasks in submission order across each other: a task
/// behind `target`'s busy slots stays waiting, and cancellable, until a slot frees.
/// `target`'s stats and wait count these queues' runners as its tasks. Destroy `queue`
/// before `target` (`pool_queue_destroy(target)` returns POOL_ERR_BUSY meanwhile).
/// POOL_ERR_INVALID for a NULL queue or target, a width above the pool's thread limit, or a
/// `target` with a bound; POOL_ERR_SHUTDOWN while `target` is being destroyed;
/// POOL_ERR_FORKED in a child that inherited the pool; POOL_ERR_NOMEM (nothing allocated).
#[no_mangle]
pub extern "C" fn pool_queue_init_target(
    queue: *mut PoolQueue,
    target: *mut PoolQueue,
    width: usize,
    bound: usize,
    cancel: Option<unsafe extern "C" fn(task: *mut CTask)>,
) -> c_int {
    boundary(|| {
        let (Some(queue), Some(target)) = (NonNull::new(queue), NonNull::new(target)) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract), destroyed after `queue` (refused
        // before: `has_children`).
        init(queue, unsafe { CQueue::with_target_detached(&core_queue(target), config(width, bound, cancel)) })
    })
}

fn config(width: usize, bound: usize, cancel: Option<unsafe extern "C" fn(task: *mut CTask)>) -> QueueConfig {
    let config = QueueConfig::new(width).with_bound(bound);
    match cancel {
        // SAFETY: `struct task` is `Task` (layout asserted in `task.rs`), so the two function
        // pointer types have the same ABI.
        Some(cancel) => config.with_cancel(unsafe { core::mem::transmute::<unsafe extern "C" fn(*mut CTask), Callback>(cancel) }),
        None => config,
    }
}

/// Stores a made queue in the caller's `struct pool_queue`.
fn init(queue: NonNull<PoolQueue>, made: Result<CQueue, crate::Error>) -> super::status::pool_status {
    // SAFETY: non-null and writable (pool.h contract), large and aligned enough (asserted above).
    unsafe { publish(made, queue.cast::<*mut ()>()) }
}

/// Submits `task` without blocking. Ownership as `pool_submit`, until it has started or was
/// cancelled. POOL_ERR_FULL when `bound` tasks wait (a handoff queue: when every width slot
/// holds a task; the task untouched, still the caller's);
/// POOL_ERR_SHUTDOWN / POOL_ERR_SPAWN / POOL_ERR_FORKED when the pool refused it;
/// POOL_ERR_INVALID for a NULL queue, task or callback.
#[no_mangle]
pub extern "C" fn pool_queue_submit(queue: *mut PoolQueue, task: *mut CTask) -> c_int {
    boundary(|| {
        let Some(queue) = NonNull::new(queue) else { return POOL_ERR_INVALID };
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract); the task was checked.
        status(unsafe { core_queue(queue).try_submit(task) })
    })
}

/// As `pool_queue_submit`, waiting while the queue is full until a place frees or
/// `timeout_ns` nanoseconds pass (negative: no limit; 0: do not wait): POOL_ERR_FULL then.
/// On one of the pool's threads it runs other work while it waits. From a task of this queue
/// (or of a queue on it) it waits only while another of the queue's tasks can free a place
/// (the width is at least 2 and another of its runners is out): lz4's reader, a task that
/// queues the next chunk in its own pool, works as on lz4's pool. POOL_ERR_INVALID instead
/// when the caller's own slot is the only one that could free a place (width 1, a queue on a
/// target, or a narrowing below 2 while it waits): it would wait for itself.
#[no_mangle]
pub extern "C" fn pool_queue_submit_timeout(queue: *mut PoolQueue, task: *mut CTask, timeout_ns: i64) -> c_int {
    boundary(|| {
        let Some(queue) = NonNull::new(queue) else { return POOL_ERR_INVALID };
        let Some(task) = checked_task(task) else { return POOL_ERR_INVALID };
        let timeout = u64::try_from(timeout_ns).ok().map(Duration::from_nanos);
        // SAFETY: an initialised queue (pool.h contract); the task was checked.
        status(unsafe { core_queue(queue).submit_timeout(task, timeout) })
    })
}

/// Cancels `task` if it is waiting in `queue`: it will never run, the queue keeps no
/// reference to it (free it at once) and its place in the bound frees. POOL_ERR_BUSY when it
/// is not waiting there: it has started (it runs or ran exactly once), was cancelled already,
/// or was never submitted to this queue (the queue reads only the tasks in its own list,
/// never `task`, so it cannot tell these apart). POOL_ERR_INVALID for NULL.
#[no_mangle]
pub extern "C" fn pool_queue_cancel(queue: *mut PoolQueue, task: *mut CTask) -> c_int {
    boundary(|| {
        let (Some(queue), Some(task)) = (NonNull::new(queue), NonNull::new(task)) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract); `task` is compared, never read.
        status(unsafe { core_queue(queue).cancel(task.cast()) })
    })
}

/// Sets the width (0 suspends; widening starts waiting tasks at once; narrowing lets running
/// tasks finish). POOL_ERR_INVALID for NULL or a width above the pool's thread limit.
#[no_mangle]
pub extern "C" fn pool_queue_set_width(queue: *mut PoolQueue, width: usize) -> c_int {
    boundary(|| {
        let Some(queue) = NonNull::new(queue) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract).
        status(unsafe { core_queue(queue) }.set_width(width))
    })
}

/// Waits until every task submitted to `queue` so far has finished or been cancelled (it
/// returns when the queue is idle). POOL_ERR_INVALID for NULL, or from a task of this queue.
#[no_mangle]
pub extern "C" fn pool_queue_wait(queue: *mut PoolQueue) -> c_int {
    boundary(|| {
        let Some(queue) = NonNull::new(queue) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract).
        status(unsafe { core_queue(queue) }.wait())
    })
}

/// A queue's figures (`pool_queue_stats`), read together under the queue's lock: each exact
/// at the moment of the call and consistent with the others (a pool's `pool_stats` are read
/// without a lock and are approximate while it runs). All 0 in a child process that inherited
/// the pool through `fork()`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct pool_queue_stats {
    /// At most this many tasks run at once (0: suspended).
    pub width: usize,
    /// At most this many tasks wait (0: unbounded; POOL_QUEUE_HANDOFF: a handoff queue).
    pub bound: usize,
    /// Tasks submitted and neither started nor cancelled.
    pub waiting: usize,
    /// Tasks started and not yet returned.
    pub running: usize,
    /// Tasks started since `pool_queue_init`.
    pub started: usize,
    /// Tasks removed by `pool_queue_cancel` (not those handed back by `pool_queue_destroy`).
    pub cancelled: usize,
    /// Submits that returned an error with the task not queued: POOL_ERR_FULL (a timed submit
    /// counted once, when it gives up) or the pool refusing the task (POOL_ERR_SHUTDOWN, ...).
    pub refused: usize,
    /// Reserved for figures of later minor versions; written as 0.
    pub reserved: [usize; POOL_RESERVED_WORDS],
}

impl From<QueueStats> for pool_queue_stats {
    fn from(s: QueueStats) -> Self {
        let QueueStats { width, bound, waiting, running, started, cancelled, refused } = s;
        Self { width, bound, waiting, running, started, cancelled, refused, reserved: [0; POOL_RESERVED_WORDS] }
    }
}

/// Reads `queue`'s figures into `*out`. POOL_ERR_INVALID for a NULL argument (`*out`
/// untouched). Callable from any thread, the queue's own tasks included.
#[no_mangle]
pub extern "C" fn pool_queue_stats(queue: *const PoolQueue, out: *mut pool_queue_stats) -> c_int {
    boundary(|| {
        let (Some(queue), Some(out)) = (NonNull::new(queue.cast_mut()), NonNull::new(out)) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract).
        let stats = unsafe { core_queue(queue) }.stats();
        // SAFETY: non-null; the caller passes a writable `struct pool_queue_stats`.
        unsafe { out.as_ptr().write(stats.into()) };
        POOL_OK
    })
}

/// Destroys `queue`: tasks still waiting are handed to its cancel callback (or run here, in
/// order, without one) once the running ones have finished. Meanwhile the queue is closed: a
/// task handed back or run here that calls it gets POOL_ERR_SHUTDOWN from a submit, BUSY from
/// a cancel, OK at once from a wait, and POOL_ERR_INVALID from a destroy. POOL_ERR_INVALID
/// for NULL, or from a task of this queue or of its target; POOL_ERR_BUSY while queues made
/// by `pool_queue_init_target` on this one exist (nothing changed).
#[no_mangle]
pub extern "C" fn pool_queue_destroy(queue: *mut PoolQueue) -> c_int {
    boundary(|| {
        let Some(queue) = NonNull::new(queue) else { return POOL_ERR_INVALID };
        // SAFETY: an initialised queue (pool.h contract).
        let q = unsafe { core_queue(queue) };
        if q.in_own_task() || q.closing() {
            return POOL_ERR_INVALID;
        }
        if q.has_children() {
            return POOL_ERR_BUSY;
        }
        drop(ManuallyDrop::into_inner(q));
        POOL_OK
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::capi::{pool_config_init, pool_create, pool_destroy, PoolConfig};
    use core::sync::atomic::{AtomicUsize, Ordering};

    static RAN: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn count(_: *mut CTask) {
        RAN.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn c_queue_runs_cancels_and_destroys() {
        let mut config = core::mem::MaybeUninit::<PoolConfig>::uninit();
        pool_config_init(config.as_mut_ptr());
        // SAFETY: initialised above.
        let mut config = unsafe { config.assume_init() };
        config.max_threads = 2;
        let mut pool: *mut Pool = core::ptr::null_mut();
        assert_eq!(pool_create(&config, &mut pool), 0);
        let mut q = PoolQueue { opaque: [0; POOL_QUEUE_WORDS] };
        assert_eq!(pool_queue_init(&mut q, pool, 3, 0, None), POOL_ERR_INVALID as c_int);
        assert_eq!(pool_queue_init(&mut q, pool, 0, 2, None), 0);
        let mut tasks: std::vec::Vec<CTask> = (0..3).map(|_| CTask { next: core::ptr::null_mut(), callback: Some(count) }).collect();
        let p: std::vec::Vec<*mut CTask> = tasks.iter_mut().map(|t| t as *mut CTask).collect();
        assert_eq!(pool_queue_submit(&mut q, p[0]), 0);
        assert_eq!(pool_queue_submit(&mut q, p[1]), 0);
        assert_eq!(pool_queue_submit(&mut q, p[2]), POOL_ERR_FULL as c_int);
        assert_eq!(pool_queue_submit_timeout(&mut q, p[2], 1_000_000), POOL_ERR_FULL as c_int);
        assert_eq!(pool_queue_cancel(&mut q, p[1]), 0);
        assert_eq!(pool_queue_cancel(&mut q, p[1]), POOL_ERR_BUSY as c_int);
        let mut st = pool_queue_stats::default();
        assert_eq!(pool_queue_stats(&q, core::ptr::null_mut()), POOL_ERR_INVALID as c_int);
        assert_eq!(pool_queue_stats(&q, &mut st), 0);
        let want = pool_queue_stats { width: 0, bound: 2, waiting: 1, running: 0, started: 0, cancelled: 1, refused: 2, ..Default::default() };
        assert_eq!(st, want, "a suspended queue: one waits, one cancelled, two refused (FULL, timed FULL)");
        // SAFETY: a static NUL-terminated string.
        let text = unsafe { core::ffi::CStr::from_ptr(crate::capi::pool_status_str(POOL_ERR_BUSY as c_int)) };
        assert_eq!(text.to_str(), Ok("task is not waiting in the queue"));
        assert_eq!(pool_queue_set_width(&mut q, 1), 0);
        assert_eq!(pool_queue_wait(&mut q), 0);
        assert_eq!(RAN.load(Ordering::SeqCst), 1);
        assert_eq!(pool_queue_stats(&q, &mut st), 0);
        assert_eq!((st.width, st.waiting, st.running, st.started), (1, 0, 0, 1));
        assert_eq!(pool_queue_destroy(&mut q), 0);
        pool_destroy(pool); // after its queue

    }
}
