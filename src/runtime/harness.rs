//! The harness: what runs a task. `allocate` builds the one allocation per spawn with its
//! vtable; the pool's callback `run` polls the future once (or cancels it) and acts on what
//! the state word's transitions (`state.rs`) return; completion sets the join signal. The
//! vtable's entries, which know the future's and the scheduler's types, are here too.
//!
//! The harness never writes a compare-and-swap loop: every change of the state word is a
//! `State::transition_*` method returning what to do next. Its orderings are argued there.

use core::future::Future;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll, Waker};

use alloc::boxed::Box;

use super::error::JoinError;
use super::header::{cell, set_stage, Cell, Header, Schedule, Stage, Vtable};
use super::state::{Snapshot, State, TransitionToComplete, TransitionToIdle, TransitionToRunning};
use super::waker::raw_waker;
use crate::panic::catch;
use crate::latch::Signal;
use crate::sync::{Ordering, UnsafeCell};
use crate::task::Task;

/// What a task runs: a future, and its output, that may move between threads.
pub(crate) trait TaskFuture: Future<Output: Send + 'static> + Send + 'static {}

impl<F: Future<Output: Send + 'static> + Send + 'static> TaskFuture for F {}

impl<F: TaskFuture, Sch: Schedule> Cell<F, Sch> {
    const VTABLE: Vtable = Vtable {
        cancel_scheduled: cancel_scheduled::<F, Sch>,
        cancel_claimed: cancel_claimed::<F, Sch>,
        read_output: read_output::<F, Sch>,
        drop_output: drop_output::<F, Sch>,
        dealloc: dealloc::<F, Sch>,
        sched_ops: Sch::OPS,
    };
}

/// Allocates a task (the one allocation per spawn) in state [`Snapshot::INITIAL`]: scheduled,
/// with a join handle, two references (the queue's and the handle's). The caller queues it.
pub(crate) fn allocate<F: TaskFuture, Sch: Schedule>(future: F, sched: NonNull<()>) -> NonNull<Header> {
    let cell = Box::new(Cell::<F, Sch> {
        header: Header {
            task: Task::new(run::<F, Sch>),
            state: State::new(),
            vtable: &Cell::<F, Sch>::VTABLE,
            sched,
            join: Signal::new(),
        },
        stage: UnsafeCell::new(Stage::Running(future)),
        _sched: PhantomData,
    });
    NonNull::from(Box::leak(cell)).cast::<Header>()
}

/// `Header::submit` for a task re-queued by its own poll (`after_pending`), where the types
/// are known: the scheduler is called directly instead of through the vtable (the yield
/// path). `running`: the task goes back still holding `RUNNING` (the self-wake path), not
/// `SCHEDULED`.
///
/// Always inlined into `run` (with `Sch::schedule`'s fast path): a call here cost ~20
/// instructions of register saves and restores per yield; the refusal is out of line.
///
/// # Safety
/// As `Header::submit`, with `RUNNING` instead of `SCHEDULED` when `running`; `header` is a
/// `Cell<F, Sch>`.
#[inline(always)]
unsafe fn submit_requeue<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, running: bool) {
    // SAFETY: the header is live (we hold the queue's reference); the scheduler outlives it.
    if unsafe { Sch::schedule(header.as_ref().sched, Header::task(header), false) }.is_err() {
        // SAFETY: forwarded.
        unsafe { requeue_refused::<F, Sch>(header, running) };
    }
}

/// The scheduler refused a re-queue (it is shutting down): cancel the task on this thread.
///
/// # Safety
/// As `submit_requeue`, after the refusal: `RUNNING` (or `SCHEDULED`) and the queue's reference
/// are still ours.
#[cold]
#[inline(never)]
unsafe fn requeue_refused<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, running: bool) {
    if running {
        // SAFETY: refused, so RUNNING and the reference are still ours.
        unsafe { cancel_running::<F, Sch>(header, true) };
    } else {
        // SAFETY: refused, so SCHEDULED and the reference are still ours.
        unsafe { cancel_scheduled::<F, Sch>(header) };
    }
}

// ---------------------------------------------------------------------------------------------
// Running: the pool's callback

/// The pool calls this when it dequeues the task: poll the future once (or cancel it).
///
/// # Safety
/// `task` is the header of a `Cell<F, Sch>` with `SCHEDULED` set (or `RUNNING`, re-queued by
/// its own poll); the queue's reference passes to us.
unsafe extern "C" fn run<F: TaskFuture, Sch: Schedule>(task: *mut Task) {
    // SAFETY: the pool hands back the pointer we queued, which is non-null.
    let header = unsafe { NonNull::new_unchecked(task.cast::<Header>()) };
    // SAFETY: the queue's reference (now ours) keeps it alive.
    let h = unsafe { header.as_ref() };
    let start = h.state.transition_to_running();
    // SAFETY: the scheduler outlives its tasks. (The poll is counted by the worker that runs
    // the task: `Stats::polled`.)
    if start == TransitionToRunning::Cancelled || unsafe { Sch::is_closed(h.sched) } {
        // SAFETY: we hold RUNNING (the stage is ours) and the queue's reference.
        unsafe { cancel_running::<F, Sch>(header, true) };
        return;
    }

    // The context's waker is borrowed: it refers to the task without a reference of its own
    // (our reference keeps the task alive during the poll); `clone` takes a real one.
    // SAFETY: WAKER_VTABLE's functions expect a live header pointer.
    let waker = ManuallyDrop::new(unsafe { Waker::from_raw(raw_waker(header)) });
    let mut cx = Context::from_waker(&waker);
    // A self-wake by reference during the poll is recorded in a thread-local (`current.rs`).
    #[cfg(feature = "std")]
    let saved = super::current::enter(header.cast());
    let poll = catch(|| {
        // SAFETY: our reference keeps the cell alive.
        let cell = unsafe { cell::<F, Sch>(header) };
        // SAFETY: RUNNING gives us exclusive access to the stage.
        cell.stage.with_mut(|stage| match unsafe { &mut *stage } {
            // SAFETY: the future lives in the heap cell and is never moved: it is dropped in
            // place (`set_stage`), so pinning it is sound.
            Stage::Running(future) => unsafe { Pin::new_unchecked(future) }.poll(&mut cx),
            _ => unreachable!("polled a task that is not running"),
        })
    });
    #[cfg(feature = "std")]
    let self_woken = super::current::exit(saved);
    #[cfg(not(feature = "std"))]
    let self_woken = false;
    match poll {
        Ok(Poll::Pending) => {
            // SAFETY: we hold RUNNING and the queue's reference.
            unsafe { after_pending::<F, Sch>(header, self_woken) }
        }
        // SAFETY: as above; dropping the finished future happens there.
        Ok(Poll::Ready(output)) => unsafe { finish::<F, Sch>(header, Ok(output)) },
        // SAFETY: as above.
        Err(panic) => unsafe { finish::<F, Sch>(header, Err(JoinError::panic(panic))) },
    }
}

/// The poll returned (or panicked): store the result and complete. Out of line, as the rest
/// of `run` off the yield path: `run` then needs fewer registers, and a yield saves and
/// restores fewer of them.
///
/// # Safety
/// We hold RUNNING and the queue's reference.
#[inline(never)]
unsafe fn finish<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, result: Result<F::Output, JoinError>) {
    // SAFETY: the caller's contract; dropping the finished future happens here.
    unsafe {
        set_stage::<F, Sch>(header, Stage::Finished(result));
        complete::<F, Sch>(header, true);
    }
}

/// The poll returned `Pending`: go idle (dropping the queue's reference), or re-queue if woken
/// meanwhile (`NOTIFIED`, or `self_woken`: it woke itself by reference on this thread, see
/// `current.rs`), or cancel if aborted meanwhile. No RMW on the yield path, one otherwise.
///
/// # Safety
/// We hold RUNNING and the queue's reference.
#[inline(always)]
unsafe fn after_pending<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, self_woken: bool) {
    // SAFETY: our reference keeps it alive.
    let h = unsafe { header.as_ref() };
    let s = h.state.load(Ordering::Relaxed);
    if self_woken && s.may_requeue_running() {
        // The yield path: re-queue it still RUNNING, with no RMW here and none when it is next
        // dequeued (`State::transition_to_running`). The queue's push (Release) and pop or
        // steal (Acquire) carry the future's state to the next poller.
        // SAFETY: RUNNING and the queue's reference pass to the queue.
        unsafe { submit_requeue::<F, Sch>(header, true) };
        return;
    }
    // SAFETY: forwarded.
    unsafe { after_pending_slow::<F, Sch>(header, self_woken, s) }
}

/// `after_pending` off the yield path: leave RUNNING with one RMW on the state word.
///
/// # Safety
/// As `after_pending`; `s` is a recent load of the state word.
#[inline(never)]
unsafe fn after_pending_slow<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, self_woken: bool, s: Snapshot) {
    // SAFETY: our reference keeps it alive.
    let h = unsafe { header.as_ref() };
    match h.state.transition_to_idle(s, self_woken) {
        // SAFETY: SCHEDULED and the reference are ours to hand over.
        TransitionToIdle::Requeue => unsafe { submit_requeue::<F, Sch>(header, false) },
        TransitionToIdle::Idle => {}
        // Nobody can wake it and nobody waits for it: free it (drops the future).
        // SAFETY: that was the last reference.
        TransitionToIdle::Dealloc => unsafe { dealloc::<F, Sch>(header) },
        // SAFETY: we still hold RUNNING and the reference.
        TransitionToIdle::Cancelled => unsafe { cancel_running::<F, Sch>(header, true) },
    }
}

/// Drops the future (we hold RUNNING), stores `Cancelled`, completes.
///
/// # Safety
/// We hold RUNNING; `sched_ref`: we also hold the queue's reference (dropped at the end).
unsafe fn cancel_running<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, sched_ref: bool) {
    // SAFETY: RUNNING gives us the stage.
    unsafe {
        set_stage::<F, Sch>(header, Stage::Finished(Err(JoinError::cancelled())));
        complete::<F, Sch>(header, sched_ref);
    }
}

/// RUNNING -> COMPLETE: the stage holds the result. Hands the result to the `JoinHandle` (sets
/// its join signal, which wakes the waiter it holds) or drops it if there is no handle; then
/// drops the queue's reference if we hold it.
///
/// # Safety
/// We hold RUNNING and the stage is `Finished`.
unsafe fn complete<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>, sched_ref: bool) {
    // SAFETY: we hold a reference (the queue's, or the aborting JoinHandle's).
    let h = unsafe { header.as_ref() };
    match h.state.transition_to_complete() {
        TransitionToComplete::NotifyJoin => {
            // SAFETY: the one completion sets the signal once. Our reference keeps it alive
            // through `set`'s last access. A panicking waker is caught (the signal is SET
            // either way: `Signal::set`).
            let _ = catch(|| unsafe { h.join.set() });
        }
        // The JoinHandle is gone: nobody will read the output; it is ours to drop. A waker it
        // left in the join signal is dropped with the task.
        // SAFETY: no JoinHandle, so the stage stays ours after COMPLETE.
        TransitionToComplete::DropOutput => unsafe { set_stage::<F, Sch>(header, Stage::Consumed) },
    }
    if sched_ref {
        // SAFETY: ours; nothing touches the task after.
        unsafe { Header::ref_dec(header) };
    }
}

// ---------------------------------------------------------------------------------------------
// Vtable entries

unsafe fn cancel_scheduled<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>) {
    // SAFETY: we hold the queue's reference.
    let h = unsafe { header.as_ref() };
    // SCHEDULED -> RUNNING, as `run` does; cancelled or not, the future is dropped.
    let _ = h.state.transition_to_running();
    // SAFETY: we hold RUNNING and the reference.
    unsafe { cancel_running::<F, Sch>(header, true) };
}

unsafe fn cancel_claimed<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>) {
    // SAFETY: `abort` claimed RUNNING; its JoinHandle's reference keeps the task alive.
    unsafe { cancel_running::<F, Sch>(header, false) };
}

unsafe fn read_output<F: TaskFuture, Sch>(header: NonNull<Header>, dst: *mut ()) {
    // SAFETY: the JoinHandle (JOIN_INTEREST) saw COMPLETE, or its join signal set, with
    // Acquire: the stage is its.
    let stage = unsafe { cell::<F, Sch>(header) }.stage.with_mut(|s| unsafe { core::ptr::replace(s, Stage::Consumed) });
    let result = match stage {
        Stage::Finished(result) => result,
        _ => panic!("JoinHandle polled after it returned the output"),
    };
    // SAFETY: `dst` is the JoinHandle's `*mut Poll<Result<F::Output, JoinError>>`.
    unsafe { *dst.cast::<Poll<Result<F::Output, JoinError>>>() = Poll::Ready(result) };
}

unsafe fn drop_output<F: TaskFuture, Sch>(header: NonNull<Header>) {
    // SAFETY: as `read_output`.
    unsafe { set_stage::<F, Sch>(header, Stage::Consumed) };
}

unsafe fn dealloc<F: TaskFuture, Sch: Schedule>(header: NonNull<Header>) {
    // SAFETY: the last reference is gone: nothing else can reach the cell.
    let sched = unsafe { header.as_ref() }.sched;
    // SAFETY: allocated by `allocate` as a Box<Cell<F, Sch>>.
    let cell = unsafe { Box::from_raw(header.cast::<Cell<F, Sch>>().as_ptr()) };
    // Drops a future that never completed (nobody could wake it any more), an output nobody
    // read, a waker left in the join signal.
    let _ = catch(move || drop(cell));
    // SAFETY: once per task, last.
    unsafe { (Sch::OPS.release)(sched) };
}
