//! The async task's memory: one allocation (`Cell<F, Sch>`) holding the [`Header`] (the pool's
//! intrusive [`Task`] first, the state word, the vtable, the scheduler, the join signal)
//! followed by the future, which is replaced by its output when it completes; the
//! [`Schedule`] trait through which the harness calls its scheduler directly; and the
//! type-independent operations on a task, through its [`Vtable`] and its scheduler's table.
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
use crate::scheduler::any_pool::{AnyPool, PoolOps};
use crate::sync::{Ordering, UnsafeCell};
use crate::task::Task;

/// A task's scheduler: the pool (`super::pool::PoolScheduler`) or, in the loom models, a queue
/// the model drives by hand. What the harness, which knows the type, asks of it directly;
/// everything else a task asks of its scheduler without knowing the type (a wake's submit, a
/// `JoinHandle::join`'s wait, its timers, the release of its reference) goes through its
/// table ([`AnyPool`], `scheduler::any_pool`).
///
/// # Safety
/// `sched` is the scheduler given to `allocate`, live until its table's `release` has been
/// called for every task allocated with it. `schedule` is the table's `schedule` (returning
/// `Ok` means the task's callback will be called exactly once, the pool's task contract;
/// `Err` means never, and the task is still the caller's), here for the harness to inline.
pub(crate) unsafe trait Schedule: 'static {
    /// The scheduler's table.
    const OPS: &'static PoolOps;
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
}

/// The type-specific operations, one static table per (future type, scheduler type); the
/// entries are in `harness.rs`.
pub(crate) struct Vtable {
    /// The scheduler refused the task: cancel it on this thread (we hold `SCHEDULED` and the
    /// queue's reference).
    pub(super) cancel_scheduled: unsafe fn(NonNull<Header>),
    /// `abort` claimed `RUNNING` on an idle task: drop the future here and complete.
    pub(super) cancel_claimed: unsafe fn(NonNull<Header>),
    /// Moves the output into `*(dst as *mut Poll<Result<T, JoinError>>)`.
    pub(super) read_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops the output (the `JoinHandle` goes away after completion without reading it).
    pub(super) drop_output: unsafe fn(NonNull<Header>),
    /// Frees the allocation (the last reference is gone).
    pub(super) dealloc: unsafe fn(NonNull<Header>),
    /// The scheduler's table ([`Schedule::OPS`]): with `sched`, the task's [`AnyPool`].
    pub(super) sched_ops: &'static PoolOps,
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
    /// The scheduler's address (the pool), type-erased. Immutable after `allocate`.
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

    /// The scheduler this task runs on (`crate::time` binds its timers to it).
    ///
    /// # Safety
    /// The caller holds a reference on the task (or polls it).
    pub(crate) unsafe fn sched(header: NonNull<Header>) -> AnyPool {
        // SAFETY: the caller's contract.
        let h = unsafe { header.as_ref() };
        AnyPool { pool: h.sched, ops: h.vtable.sched_ops }
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
        // SAFETY: the header is live (we hold the queue's reference); the scheduler outlives it.
        let h = unsafe { header.as_ref() };
        // SAFETY: forwarded contract.
        if unsafe { (h.vtable.sched_ops.schedule)(h.sched, Header::task(header), lifo) }.is_err() {
            // SAFETY: refused, so SCHEDULED and the reference are still ours.
            unsafe { (h.vtable.cancel_scheduled)(header) };
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
