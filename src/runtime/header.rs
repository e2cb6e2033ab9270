//! The async task's memory: one allocation (`Cell<F, Sch>`) holding the [`Header`] (the pool's
//! intrusive [`Task`] first, the state word, the vtable, the scheduler pointer, the join
//! signal) followed by the future, which is replaced by its output when it completes; the
//! [`Schedule`] trait a task's scheduler implements; and the type-independent operations on a
//! task that go through its [`Vtable`].
//!
//! # Who may touch what
//! * The **stage** (future / output): the thread that set `RUNNING` while it is set; after
//!   `COMPLETE`, the `JoinHandle` while `JOIN_INTEREST` is set, else the completing thread;
//!   the last reference's owner in `dealloc`.
//! * The **join signal**: the crate's one completion primitive ([`Signal`], `latch.rs`). The
//!   completing thread sets it (once, when a `JoinHandle` exists); the `JoinHandle` is its one
//!   waiter, registering its waker (an `.await`) or its thread's parker (a blocking `join`),
//!   and the signal's own protocol says who touches the waker. A waker left in it (a handle
//!   that registered, then was dropped) is dropped with the task.
//! * The header's other fields are immutable after `allocate`.
//!
//! Nothing here knows the harness (`harness.rs`), the waker (`waker.rs`) or the `JoinHandle`:
//! they all depend on this file.

use core::future::Future;
use core::marker::PhantomData;
use core::ptr::NonNull;


use super::error::JoinError;
use super::state::State;
use crate::latch::Signal;
use crate::sync::{Ordering, UnsafeCell};
use crate::task::Task;
use crate::timer::TimerHandle;

/// What a task needs from whatever runs it: the pool (`super::pool::PoolScheduler`) or, in
/// the loom models, a queue the model drives by hand.
///
/// # Safety
/// `sched` is the pointer given to `allocate`, valid until [`release`](Self::release) has
/// been called for every task allocated with it. `schedule` returning `Ok` means the task's
/// callback will be called exactly once (the pool's task contract); `Err` means never, and
/// the task is still the caller's.
pub(crate) unsafe trait Schedule: 'static {
    /// Queues the task. `lifo`: spawned, or woken by someone else (runs next on this worker);
    /// false: re-queued by its own poll (goes to the back, so others run first).
    ///
    /// # Safety
    /// `task` is a task header with `SCHEDULED` (or, re-queued by its own poll, `RUNNING`) set
    /// and a reference held for the queue.
    unsafe fn schedule(sched: NonNull<()>, task: NonNull<Task>, lifo: bool) -> Result<(), ()>;
    /// Whether the scheduler is shutting down: a task about to be polled is cancelled instead.
    ///
    /// # Safety
    /// `sched` is live (see the trait).
    unsafe fn is_closed(sched: NonNull<()>) -> bool;
    /// Blocks until `signal` is set (a `JoinHandle::join`): helps on a worker, parks elsewhere.
    ///
    /// # Safety
    /// `sched` is live; `signal` is the join signal of a task of this scheduler, and the
    /// caller is its `JoinHandle` (the signal's one waiter).
    unsafe fn wait(sched: NonNull<()>, signal: &Signal);
    /// A task allocated with `sched` was freed; `sched` may be freed once the last one is.
    ///
    /// # Safety
    /// Called once per task, as its very last action.
    unsafe fn release(sched: NonNull<()>);
    /// The scheduler's timers, for a timer created or polled in one of its tasks
    /// (`crate::time`); `None` (the default) for a scheduler without.
    ///
    /// # Safety
    /// `sched` is live.
    unsafe fn timers(_sched: NonNull<()>) -> Option<TimerHandle> {
        None
    }
}

/// The type-specific operations, one static table per (future type, scheduler type); the
/// entries are in `harness.rs`.
pub(crate) struct Vtable {
    /// Queue the task (see [`Schedule::schedule`]).
    pub(super) schedule: unsafe fn(NonNull<Header>, bool) -> Result<(), ()>,
    /// The scheduler refused the task: cancel it on this thread (we hold `SCHEDULED` and the
    /// queue's reference).
    pub(super) cancel_scheduled: unsafe fn(NonNull<Header>),
    /// `abort` claimed `RUNNING` on an idle task: drop the future here and complete.
    pub(super) cancel_claimed: unsafe fn(NonNull<Header>),
    /// Moves the output into `*(dst as *mut Poll<Result<T, JoinError>>)`.
    pub(super) read_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops the output (the `JoinHandle` goes away after completion without reading it).
    pub(super) drop_output: unsafe fn(NonNull<Header>),
    /// Blocks until the join signal is set (see [`Schedule::wait`]).
    pub(super) wait: unsafe fn(NonNull<Header>),
    /// Frees the allocation (the last reference is gone).
    pub(super) dealloc: unsafe fn(NonNull<Header>),
    /// The scheduler's timers (see [`Schedule::timers`]).
    pub(super) timers: unsafe fn(NonNull<()>) -> Option<TimerHandle>,
}

/// The type-independent part of every task; first in the allocation, with the pool's `Task`
/// first in it, so `*mut Task`, `*mut Header` and `*mut Cell<F, Sch>` are the same address.
#[repr(C)]
pub(crate) struct Header {
    /// What the pool queues; its callback is the harness's `run::<F, Sch>`.
    pub(super) task: Task,
    /// The packed state word and its transitions (`state.rs`).
    pub(super) state: State,
    /// Immutable after `allocate`.
    pub(super) vtable: &'static Vtable,
    /// The scheduler (the pool's `Inner`), type-erased. Immutable after `allocate`.
    pub(super) sched: NonNull<()>,
    /// Set once the task is complete, when a `JoinHandle` exists (module docs).
    pub(super) join: Signal,
}

// Issue 7's footprint target: an async task's header costs at most 64 B beyond its future
// (Task 16 + state 8 + vtable 8 + scheduler 8 + join signal 24 on 64-bit targets; half on
// 32-bit). Loom's and shuttle's atomics are bigger, so the check is off under both.
#[cfg(all(not(any(loom, shuttle)), target_pointer_width = "64"))]
static_assertions::const_assert!(core::mem::size_of::<Header>() <= 64);
#[cfg(all(not(any(loom, shuttle)), target_pointer_width = "32"))]
static_assertions::const_assert!(core::mem::size_of::<Header>() <= 32);

/// Where the future is in its life.
pub(super) enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// The whole allocation.
#[repr(C)]
pub(super) struct Cell<F: Future, Sch> {
    pub(super) header: Header,
    pub(super) stage: UnsafeCell<Stage<F>>,
    pub(super) _sched: PhantomData<fn() -> Sch>,
}

/// The cell of a header.
///
/// # Safety
/// `header` belongs to a `Cell<F, Sch>` and the caller holds a reference to it.
#[inline]
pub(super) unsafe fn cell<'a, F: Future, Sch>(header: NonNull<Header>) -> &'a Cell<F, Sch> {
    // SAFETY: `Header` is the first field of the repr(C) `Cell<F, Sch>`.
    unsafe { header.cast::<Cell<F, Sch>>().as_ref() }
}

/// Replaces the stage; a panic in the old value's drop (the future's, or an unread output's)
/// is caught and dropped.
///
/// The old stage is dropped **in place**, never moved first: the future was pinned there, and
/// a pinned future may hold intrusive state whose address others keep (a `time::Sleep`'s
/// wheel entry stays linked at that address until its drop unlinks it). Moving it out and
/// dropping the copy would unlink the wrong address (found by Miri in `tests/timers.rs`).
///
/// # Safety
/// The caller has exclusive access to the stage (see the module docs).
pub(super) unsafe fn set_stage<F: Future, Sch>(header: NonNull<Header>, stage: Stage<F>) {
    // SAFETY: the caller's contract.
    unsafe { cell::<F, Sch>(header) }.stage.with_mut(|s| {
        // SAFETY: exclusive access (the caller's contract); the stage is initialised. A panic
        // in the drop still drops the remaining fields while unwinding, so the slot holds no
        // live value afterwards either way, and the write below does not leak or double-drop.
        let _ = crate::panic::catch(|| unsafe { core::ptr::drop_in_place(s) });
        // SAFETY: as above; the slot's old value was dropped just now.
        unsafe { core::ptr::write(s, stage) };
    });
}

impl Header {
    /// The pool's view of this task.
    #[inline]
    pub(crate) fn task(header: NonNull<Header>) -> NonNull<Task> {
        header.cast::<Task>()
    }

    /// Whether the task is complete (Acquire: its output is visible).
    #[inline]
    pub(crate) fn is_complete(header: NonNull<Header>) -> bool {
        // SAFETY: the caller holds a reference (a JoinHandle).
        unsafe { header.as_ref() }.state.is_complete()
    }

    /// The timers of the scheduler this task runs on (`crate::time`).
    ///
    /// # Safety
    /// The caller holds a reference on the task (or polls it).
    pub(crate) unsafe fn timers(header: NonNull<Header>) -> Option<TimerHandle> {
        // SAFETY: the caller's contract; the scheduler outlives its tasks.
        let h = unsafe { header.as_ref() };
        // SAFETY: `sched` is live while the task is.
        unsafe { (h.vtable.timers)(h.sched) }
    }

    /// The state (for Debug).
    pub(crate) fn state(header: NonNull<Header>) -> super::state::Snapshot {
        // SAFETY: the caller holds a reference.
        unsafe { header.as_ref() }.state.load(Ordering::Relaxed)
    }

    /// Drops one reference; frees the task if it was the last.
    ///
    /// # Safety
    /// The caller owns one reference and does not touch the task afterwards.
    #[inline]
    pub(crate) unsafe fn ref_dec(header: NonNull<Header>) {
        // SAFETY: our reference keeps the header alive until this RMW.
        let h = unsafe { header.as_ref() };
        if h.state.ref_dec() {
            let dealloc = h.vtable.dealloc;
            // SAFETY: that was the last reference (and `ref_dec` acquired every other owner's
            // accesses).
            unsafe { dealloc(header) };
        }
    }

    /// Queues a task the caller just moved to `SCHEDULED`; a refusing scheduler gets it
    /// cancelled here.
    ///
    /// # Safety
    /// The caller holds `SCHEDULED` and the queue's reference.
    #[inline]
    pub(super) unsafe fn submit(header: NonNull<Header>, lifo: bool) {
        // SAFETY: the header is live (we hold the queue's reference).
        let vtable = unsafe { header.as_ref() }.vtable;
        // SAFETY: forwarded contract.
        if unsafe { (vtable.schedule)(header, lifo) }.is_err() {
            // SAFETY: refused, so SCHEDULED and the reference are still ours.
            unsafe { (vtable.cancel_scheduled)(header) };
        }
    }

    /// Frees a task that was never queued (the scheduler refused the spawn).
    ///
    /// # Safety
    /// `header` came from `allocate` and was never handed to anyone.
    pub(crate) unsafe fn dealloc_unqueued(header: NonNull<Header>) {
        // SAFETY: forwarded; the vtable matches the allocation.
        unsafe { (header.as_ref().vtable.dealloc)(header) }
    }
}
