//! The async runtime core (design text 003): spawn futures on the pool, wake them, await or
//! block on their [`JoinHandle`]; [`ThreadPool::block_on`] for the main thread and
//! [`yield_now`]; timers in [`crate::time`]. No I/O; `no_std` + `alloc`, generic over the pool's
//! platform.
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use pool::{Config, ThreadPool};
//! use std::sync::Arc;
//!
//! let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(2)).unwrap());
//! let p = pool.clone();
//! let total = pool.block_on(async move {
//!     let handles: Vec<_> = (0..100u64)
//!         .map(|i| {
//!             let p2 = p.clone();
//!             p.spawn_future(async move {
//!                 pool::runtime::yield_now().await;
//!                 // Tasks spawn and await tasks.
//!                 p2.spawn_future(async move { i * 2 }).unwrap().await.unwrap()
//!             })
//!             .unwrap()
//!         })
//!         .collect();
//!     let mut total = 0;
//!     for h in handles {
//!         total += h.await.unwrap();
//!     }
//!     total
//! });
//! assert_eq!(total, 9900);
//! # }
//! ```
//!
//! # A task
//! One allocation per spawn (`header.rs`): a header — the pool's intrusive [`Task`](crate::Task)
//! first, then a packed atomic state word, a vtable, the pool pointer and the join signal —
//! followed by the future, replaced in place by its output when it completes. The pool runs the
//! task by calling the header's callback (`harness.rs`), which polls the future once. The
//! state word (`state.rs`) packs SCHEDULED, RUNNING, NOTIFIED, COMPLETE, CANCELLED,
//! JOIN_INTEREST and a reference count; every transition is one read-modify-write, a method on
//! the state type that returns what its caller must do next:
//!
//! ```text
//!             wake (idle): +SCHEDULED, +1 ref (the queue's)
//!   idle  ------------------------------------------------->  SCHEDULED (in a queue)
//!    ^                                                              | worker dequeues:
//!    | poll Pending, not NOTIFIED: -RUNNING, -1 ref                 | SCHEDULED -> RUNNING (xor)
//!    |                                                              v
//!    +-------------------------------------------------------  RUNNING --wake--> RUNNING+NOTIFIED
//!                                                                   |                 |
//!       poll Pending + NOTIFIED: -RUNNING -NOTIFIED +SCHEDULED, re-queued at the back <-+
//!       poll Ready / cancelled:  RUNNING -> COMPLETE (xor), set the join signal, -1 ref
//! ```
//! * A task is queued at most once however many times it is woken: only the wake that finds
//!   it idle sets SCHEDULED; a wake during a poll sets NOTIFIED and the poller re-queues it.
//! * Wakers are the task pointer with a reference count (clone: +1, drop: -1), so a wake
//!   allocates nothing; the waker in a poll's `Context` is borrowed (no count at all). A task
//!   waking itself by reference during its own poll (`yield_now`) touches no atomic at all
//!   with `std`: a thread-local bit that the end of the poll reads (`current.rs`).
//! * The `JoinHandle` holds a reference and JOIN_INTEREST. It owns the output once COMPLETE;
//!   dropped first, it detaches and the completing thread drops the output instead.
//! * The join signal is the crate's one completion primitive ([`Signal`](crate::Signal), with
//!   its waker slot), the same as fork-join halves, latches and blocking-pool handles use: the
//!   completing thread sets it; the `JoinHandle` is its one waiter.
//! * [`JoinHandle::abort`]: an idle task is cancelled on the calling thread (it claims RUNNING
//!   and drops the future), a queued or running one by the thread that runs it.
//!
//! # Scheduling (design text 003, on the pool's existing find-work order)
//! * A task spawned or woken on one of the pool's workers goes to that worker's LIFO slot: it
//!   runs next, cache-hot; the scheduler runs at most three LIFO tasks in a row, then moves
//!   the slot's task to the back of the ring so older tasks run. Another worker is woken only
//!   for a task the slot displaced into the ring, as in tokio (`scheduler/README.md`, "Tasks
//!   woken on a worker"). Elsewhere, tasks go to the injector.
//! * A task woken **during its own poll** (a task that keeps waking itself, e.g. [`yield_now`])
//!   is re-queued at the back of the ring, not the LIFO slot, so it cannot starve the tasks
//!   queued behind it (tested in `tests/runtime.rs`, `self_waking_task_does_not_starve_others`).
//!   Its worker, which is awake and goes straight back to its queues, notifies only the cheap
//!   way (a real wake-up only when a thread is idle or may be started): no fence on the yield
//!   path (`scheduler/README.md`, "Self-requeued tasks").
//! * The injector is checked at an interval that adapts to the worker's poll times (an EWMA,
//!   one clock reading per interval: about 1 ms of work between checks, every 8th to 127th
//!   search; `scheduler/interval.rs`), and a worker with an empty ring fetches its fair share
//!   of it in one batch (`len / workers`, 4 to 128 tasks: `scheduler::search::fair_share`).
//!   On a platform whose spawner has no clock (`Spawner::now_ns`) the interval is tokio's
//!   fixed 61.
//! * The cooperative budget: a worker runs at most 128 tasks (polls) per tick; at the end of a
//!   tick its next search starts at the injector and its LIFO slot's task goes to the back of
//!   its ring (`scheduler::run`, `end_tick`, tested in `tests/stats.rs`). The tick end also
//!   fires due timers (worker 0, or any worker once they are overdue: `crate::time`) and polls
//!   the I/O driver if one is installed (`crate::io`).
//! * Parking: the text's `transitioning_to_park` flag guards a LIFO slot being filled for a
//!   worker that is about to sleep. It cannot happen here: only the worker itself fills its
//!   slot (so it is not asleep), the slot is stealable, and every submit goes through the
//!   pool's `Sync`-word protocol, which has no lost wake-up (`scheduler/README.md`). No flag.
//!
//! # Waiting
//! * `.await` on a [`JoinHandle`]: registers the awaiting task's waker in the join signal (a
//!   later poll with another waker replaces it).
//! * [`JoinHandle::join`]: as every wait (`latch`, "Waiting"): on a worker of the task's pool,
//!   help-until-complete ([`ThreadPool::wait_for`] on the task's join signal, through the
//!   pool's table: the worker runs other tasks, typically the joined task itself from its LIFO
//!   slot, and registers its parker in the signal only before it sleeps); elsewhere, parks.
//! * [`ThreadPool::block_on`]: polls on the calling thread and, between polls, spins briefly
//!   then waits as `join` does.
//!
//! # Modules, top-down (each uses only those below it)
//! `pool` (spawn, the pool's `Schedule`), `block_on`, `join` (`JoinHandle`) → `harness` (run,
//! complete, the vtable's entries, `allocate`) → `waker` → `header` (the allocation, `Vtable`,
//! `Schedule`) → `state` (the word and its transitions), `error` (`JoinError`), `current` (the
//! polled task's thread-local).
//!
//! # Shutdown and the pool's lifetime
//! * Once shutdown begins, a task that comes up to be polled is cancelled instead (its future
//!   dropped, its `JoinHandle` reports cancelled), so shutdown finishes even with tasks that
//!   wake each other forever. Tasks that are idle stay so, except those that wait on the
//!   pool's own timers or I/O driver: both wake their waiters at shutdown, so those tasks are
//!   cancelled too (`scheduler`, `release_waits`).
//! * The pool's memory lives until its last task is freed (see `pool.rs`), so a waker called
//!   after the pool was shut down or dropped is safe: the pool refuses the task, and it is
//!   cancelled on the waking thread. No leak, no use after free.
//! * Unlike tokio, the runtime keeps no list of all tasks (that costs a lock or an atomic list
//!   operation per spawn), so shutdown cannot cancel idle tasks. An idle task is freed when its
//!   last waker and its `JoinHandle` are dropped; a task whose future keeps its own waker and
//!   is never woken again is a reference cycle, as with `Arc`.
//!
//! # Panics
//! With `std`, a panic in a future is caught; the task completes and its `JoinHandle` reports
//! [`JoinError::is_panic`]. Without `std`, a panic in a task aborts (the pool's callbacks are
//! `extern "C"`).

// Top-down: each module uses only those below it.
mod block_on;
mod pool;
mod join;
mod harness;
mod waker;
mod header;
mod state;
mod error;
#[cfg(feature = "std")]
mod current;

#[cfg(all(test, loom))]
mod loom;

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

pub use error::JoinError;
pub use join::JoinHandle;

#[cfg(doc)]
use crate::ThreadPool;

/// The pool of a pool task (`crate::time` binds a timer to its timers): with `std`, of the
/// task this thread is polling; else of the task `waker` belongs to, if it is one of ours.
pub(crate) fn task_timers(waker: Option<&core::task::Waker>) -> Option<crate::scheduler::AnyPool> {
    #[cfg(feature = "std")]
    if let Some(task) = current::polling() {
        // SAFETY: the task being polled on this thread (a task header) is live for the whole
        // poll.
        return Some(unsafe { header::Header::sched(task.cast()) });
    }
    let header = waker::header_of(waker?)?;
    // SAFETY: a waker of ours holds (or, borrowed in a poll, is backed by) a task reference.
    Some(unsafe { header::Header::sched(header) })
}

/// Yields once: the task wakes itself and returns `Pending`, so it goes to the back of its
/// worker's queue and other tasks run first.
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
/// let h = pool.spawn_future(async {
///     for _ in 0..3 {
///         pool::runtime::yield_now().await;
///     }
///     "done"
/// }).unwrap();
/// assert_eq!(h.join().unwrap(), "done");
/// # }
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`]: `Pending` once (after waking its task), then `Ready`.
///
/// ```
/// use std::future::Future;
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake, Waker};
///
/// struct CountWakes(std::sync::atomic::AtomicUsize);
/// impl Wake for CountWakes {
///     fn wake(self: Arc<Self>) {
///         self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///     }
/// }
/// let wakes = Arc::new(CountWakes(Default::default()));
/// let waker = Waker::from(wakes.clone());
/// let mut cx = Context::from_waker(&waker);
/// let mut yielding = std::pin::pin!(pool::runtime::yield_now());
/// assert_eq!(yielding.as_mut().poll(&mut cx), Poll::Pending);
/// assert_eq!(wakes.0.load(std::sync::atomic::Ordering::Relaxed), 1); // it woke itself
/// assert_eq!(yielding.as_mut().poll(&mut cx), Poll::Ready(()));
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // Our own task waking itself: set the thread-local bit directly, without the waker's
        // vtable call (the same as `wake_by_ref` would do, `current.rs`).
        #[cfg(feature = "std")]
        if waker::wake_self_by_waker(cx.waker()) {
            return Poll::Pending;
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
