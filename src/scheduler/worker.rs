//! [`Worker`]: the part of a worker thread that other threads touch (thieves, notifiers, stats
//! readers, shutdown). What only the worker's own thread touches is its
//! [`WorkerContext`](super::WorkerContext) (`context.rs`); how it looks for work is
//! `search.rs`, its loop `run.rs`, its start `thread.rs`.
//!
//! # Lifetime
//! A `Worker` is heap-allocated by its own thread when it starts and linked into the pool's
//! intrusive, push-only list. It is freed only when the pool is dropped, after every thread
//! was joined: so thieves, notifiers and shutdown may touch any worker in the list at any time
//! without further synchronisation. Its `WorkerContext` lives in the thread's entry frame
//! (`worker_main`) while the thread runs the loop.

use core::ptr::{self, NonNull};

use super::frame::Demand;
use super::counters::Counters;
use crate::platform::Spawner;
use crate::queue::deque::JoinDeque;
use crate::queue::ring::Ring;
use crate::sync::{AtomicBool, AtomicPtr, CachePadded, Ordering};
use crate::task::Task;

/// Most LIFO-slot tasks run in a row before the ring gets a turn (text 003).
pub(crate) const MAX_LIFO_STREAK: u32 = 3;

/// The part of a worker that other threads touch (thieves, notifiers, stats readers, shutdown).
/// What only the worker's own thread touches is its [`WorkerContext`] (`context.rs`).
pub(crate) struct Worker<S: Spawner> {
    /// The pool (type-erased `*const Inner<S>`): how a new thread finds its pool (`worker_main`).
    pub(crate) pool: *const (),
    /// The next worker in the pool's list (older). Immutable once the worker is published.
    pub(crate) next: *mut Worker<S>,
    /// Position in the idle map and the worker table.
    pub(crate) index: usize,
    /// Set while this worker sleeps in a wait *inside a task* (counted idle in `Sync`, yet a
    /// task is running): `ThreadPool::wait_idle` must not take it for idle.
    pub(crate) waiting_in_task: AtomicBool,
    /// Set by `set_max_threads` while this worker's index is at or above the pool's
    /// `max_threads`: the owner's busy loop reads it after each task and turns surplus
    /// (`surplus.rs`). A hint, Relaxed: `Inner::is_surplus` is the rule.
    pub(crate) surplus: AtomicBool,
    /// The hungry and record flags: idle workers raise the hunger, this worker's `join`s read
    /// the record flag (`scheduler::frame`, "The record flag"; `context.rs`, "The hungry flag").
    pub(crate) demand: Demand,
    /// The newest task scheduled LIFO on this worker; stealable when the ring is empty.
    pub(crate) lifo: AtomicPtr<Task>,
    /// The worker's own tasks.
    pub(crate) ring: Ring,
    /// Fork-join jobs offered by `join` on this worker (owner LIFO, thieves take the oldest).
    pub(crate) joins: JoinDeque,
    /// The worker sleeps on this.
    pub(crate) parker: S::Parker,
    /// What this worker did (`stats.rs`). Written only by this worker (Relaxed load + store);
    /// padded so that a stats reader pulling the line never disturbs the fields above, which
    /// thieves and notifiers read.
    pub(crate) stats: CachePadded<Counters>,
}

impl<S: Spawner> Worker<S> {
    /// Any thread: the counters of a worker from the worker table, without a reference to the
    /// whole `Worker` (its thread may still be writing `next` while it links itself into the
    /// pool's list, after `register` published it in the table: a `&Worker` would race with
    /// that write; found by Miri in `tests/stats.rs`).
    pub(crate) fn stats_of<'a>(worker: NonNull<Worker<S>>) -> &'a Counters {
        // SAFETY: workers from the table are initialised (the table's Release store / the
        // reader's Acquire load) and live until the pool is dropped; only the `stats` field is
        // borrowed, and it is only ever accessed through atomics.
        let padded = unsafe { &*ptr::addr_of!((*worker.as_ptr()).stats) };
        &padded.0
    }

    /// Any thread: the surplus flag of a worker from the worker table, without a reference to
    /// the whole `Worker` (as [`stats_of`](Self::stats_of)).
    ///
    /// # Safety
    /// `worker` came from the worker table (initialised, and live until the pool is dropped).
    pub(crate) unsafe fn surplus_of<'a>(worker: NonNull<Worker<S>>) -> &'a AtomicBool {
        // SAFETY: the caller's contract; only the `surplus` field is borrowed, and it is only
        // ever accessed through atomics.
        unsafe { &*ptr::addr_of!((*worker.as_ptr()).surplus) }
    }

    /// Any thread: the join deque of a worker from the worker table, without a reference to
    /// the whole `Worker` (as [`stats_of`](Self::stats_of)).
    ///
    /// # Safety
    /// `worker` came from the worker table (initialised, and live until the pool is dropped).
    pub(crate) unsafe fn joins_of<'a>(worker: NonNull<Worker<S>>) -> &'a JoinDeque {
        // SAFETY: the caller's contract; only the `joins` field is borrowed, and it is only
        // ever accessed through atomics.
        unsafe { &*ptr::addr_of!((*worker.as_ptr()).joins) }
    }

    /// Any thread: about how many tasks wait in a worker's own queues (its ring, LIFO slot and
    /// join deque; latent join frames are private and not counted), without a reference to
    /// the whole `Worker` (as [`stats_of`](Self::stats_of)). For statistics: Relaxed and
    /// Acquire loads, stale while the worker runs.
    ///
    /// # Safety
    /// As [`joins_of`](Self::joins_of).
    pub(crate) unsafe fn queued_of(worker: NonNull<Worker<S>>) -> usize {
        // SAFETY: the caller's contract; only the `ring` and `lifo` fields are borrowed, and
        // they are only ever accessed through atomics.
        let (ring, lifo) = unsafe { (&*ptr::addr_of!((*worker.as_ptr()).ring), &*ptr::addr_of!((*worker.as_ptr()).lifo)) };
        // SAFETY: the caller's contract.
        let joins = unsafe { Self::joins_of(worker) }.len_hint();
        ring.len() as usize + usize::from(!lifo.load(Ordering::Relaxed).is_null()) + joins
    }

    /// Owner: whether its own queues (the ring, the LIFO slot) hold a task. A hint for the
    /// owner's decisions to notify or to hand a role on (Relaxed).
    #[inline]
    pub(crate) fn holds_tasks(&self) -> bool {
        !self.ring.is_empty() || !self.lifo.load(Ordering::Relaxed).is_null()
    }

    /// Owner: counts one successful steal that took `tasks` tasks.
    #[inline]
    pub(super) fn count_steal(&self, tasks: usize) {
        self.stats.steals.bump_owned();
        self.stats.stolen.add_owned(tasks);
    }
}

impl<S: Spawner> core::fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).field("ring", &self.ring).finish_non_exhaustive()
    }
}
