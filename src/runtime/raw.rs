//! The async task itself: one allocation (`Cell<F, Sch>`) holding the [`Header`] (the pool's
//! intrusive [`Task`] first, the state word, the vtable, the scheduler pointer, the join slot)
//! followed by the future, which is replaced by its output when it completes. Every
//! transition of the state word ([`State`], `state.rs`) is here, each one atomic
//! read-modify-write.
//!
//! # Who may touch what
//! * The **stage** (future / output): the thread that set `RUNNING` while it is set; after
//!   `COMPLETE`, the `JoinHandle` while `JOIN_INTEREST` is set, else the completing thread;
//!   the last reference's owner in `dealloc`.
//! * The **join slot**: the `JoinHandle` while `JOIN_WAKER` is clear (and the task is not
//!   complete); the completing thread when `JOIN_WAKER` was set at completion (it takes the
//!   waiter out); `dealloc`.
//! * The header's other fields are immutable after `allocate`.
//!
//! # Orderings
//! The state word is only ever changed by read-modify-writes (never a plain store), so every
//! Release on it heads a release sequence that any later Acquire RMW or load synchronises with.
//! * A wake is a Release CAS even when it changes nothing (task already queued or already
//!   notified): a CAS that writes the same value is still in the word's modification order, so
//!   the next poll's Acquire `fetch_xor` synchronises with it and sees what the waker wrote
//!   before waking (a channel push, say). A wake that only *read* the word would leave that
//!   store-buffering window open: waker stores data then reads SCHEDULED, poller flips to
//!   RUNNING then reads stale data, and the wake is lost.
//! * The exception (`std`): a task that wakes itself by reference on the thread that is polling
//!   it sets a bit in a thread-local instead (`current.rs`). The only reader is that same thread,
//!   after the poll, in program order: nothing needs publishing. `after_pending` then re-queues
//!   the task without touching the word (it stays `RUNNING`; `run` sees that with a load and
//!   skips its `fetch_xor`), unless the word shows a wake or an abort from another thread,
//!   which take the CAS path. The queue's Release push and Acquire pop/steal carry the
//!   future's state to the next poller.
//! * Starting a poll is Acquire (sees the waker's data and the previous poll's writes to the
//!   future); ending a poll is AcqRel (Release publishes the future's new state to whoever polls,
//!   cancels or frees it next).
//! * Completion is AcqRel: Release publishes the output to the `JoinHandle`, Acquire sees the
//!   waiter the `JoinHandle` put in the join slot (it sets `JOIN_WAKER` with Release).
//! * Dropping a reference is Release, and the one that drops the last adds an Acquire fence
//!   before freeing (as `Arc`): every other owner's accesses happen before the free.

use core::any::Any;
use core::future::Future;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use alloc::boxed::Box;

use super::join::JoinError;
use super::state::State;
use crate::latch::Signal;
use crate::sync::{fence, AtomicUsize, Ordering, UnsafeCell};
use crate::task::Task;
use crate::time::TimerHandle;

/// What a task needs from whatever runs it: the pool (`super::pool::PoolScheduler`) or, in
/// the loom models, a queue the model drives by hand.
///
/// # Safety
/// `sched` is the pointer given to [`allocate`], valid until [`release`](Self::release) has
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
    /// `sched` is live; `signal` is registered as the join waiter of a task of this scheduler.
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

/// Who to tell when the task completes.
pub(crate) enum JoinWaiter {
    /// An async `JoinHandle` poll: woken (by value).
    Waker(Waker),
    /// A blocking `JoinHandle::join`: the signal lives on the joiner's stack and is set once;
    /// the joiner returns only after it is set (see `latch.rs`).
    Signal(NonNull<Signal>),
}

/// The type-specific operations, one static table per (future type, scheduler type).
pub(crate) struct Vtable {
    /// Queue the task (see [`Schedule::schedule`]).
    schedule: unsafe fn(NonNull<Header>, bool) -> Result<(), ()>,
    /// The scheduler refused the task: cancel it on this thread (we hold `SCHEDULED` and the
    /// queue's reference).
    cancel_scheduled: unsafe fn(NonNull<Header>),
    /// `abort` claimed `RUNNING` on an idle task: drop the future here and complete.
    cancel_claimed: unsafe fn(NonNull<Header>),
    /// Moves the output into `*(dst as *mut Poll<Result<T, JoinError>>)`.
    read_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops the output (the `JoinHandle` goes away after completion without reading it).
    drop_output: unsafe fn(NonNull<Header>),
    /// Blocks until the signal is set (see [`Schedule::wait`]).
    wait: unsafe fn(NonNull<Header>, &Signal),
    /// Frees the allocation (the last reference is gone).
    dealloc: unsafe fn(NonNull<Header>),
    /// The scheduler's timers (see [`Schedule::timers`]).
    timers: unsafe fn(NonNull<()>) -> Option<TimerHandle>,
}

/// The type-independent part of every task; first in the allocation, with the pool's `Task`
/// first in it, so `*mut Task`, `*mut Header` and `*mut Cell<F, Sch>` are the same address.
#[repr(C)]
pub(crate) struct Header {
    /// What the pool queues; its callback is `run::<F, Sch>`.
    task: Task,
    /// The packed state word (`state.rs`).
    state: AtomicUsize,
    /// Immutable after `allocate`.
    vtable: &'static Vtable,
    /// The scheduler (the pool's `Inner`), type-erased. Immutable after `allocate`.
    sched: NonNull<()>,
    /// The completion waiter (see the module docs for who may touch it).
    join: UnsafeCell<Option<JoinWaiter>>,
}

// Issue 7's footprint target: an async task's header costs at most 64 B beyond its future
// (Task 16 + state 8 + vtable 8 + scheduler 8 + join slot 24 on 64-bit targets; half on 32-bit).
// Loom's atomics are bigger, so the check is off under loom.
#[cfg(all(not(loom), target_pointer_width = "64"))]
static_assertions::const_assert!(core::mem::size_of::<Header>() <= 64);
#[cfg(all(not(loom), target_pointer_width = "32"))]
static_assertions::const_assert!(core::mem::size_of::<Header>() <= 32);

/// Where the future is in its life.
enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// The whole allocation.
#[repr(C)]
struct Cell<F: Future, Sch> {
    header: Header,
    stage: UnsafeCell<Stage<F>>,
    _sched: PhantomData<fn() -> Sch>,
}

impl<F, Sch> Cell<F, Sch>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    const VTABLE: Vtable = Vtable {
        schedule: schedule::<Sch>,
        cancel_scheduled: cancel_scheduled::<F, Sch>,
        cancel_claimed: cancel_claimed::<F, Sch>,
        read_output: read_output::<F, Sch>,
        drop_output: drop_output::<F, Sch>,
        wait: wait::<Sch>,
        dealloc: dealloc::<F, Sch>,
        timers: Sch::timers,
    };
}

/// Allocates a task (the one allocation per spawn) in state [`State::INITIAL`]: scheduled,
/// with a join handle, two references (the queue's and the handle's). The caller queues it.
pub(crate) fn allocate<F, Sch>(future: F, sched: NonNull<()>) -> NonNull<Header>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    let cell = Box::new(Cell::<F, Sch> {
        header: Header {
            task: Task::new(run::<F, Sch>),
            state: AtomicUsize::new(State::INITIAL.0),
            vtable: &Cell::<F, Sch>::VTABLE,
            sched,
            join: UnsafeCell::new(None),
        },
        stage: UnsafeCell::new(Stage::Running(future)),
        _sched: PhantomData,
    });
    NonNull::from(Box::leak(cell)).cast::<Header>()
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/// Runs `f`, catching a panic where `std` can (without `std` a panic aborts: we are below an
/// `extern "C"` callback).
#[inline]
fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send + 'static>> {
    #[cfg(feature = "std")]
    {
        std::panic::catch_unwind(core::panic::AssertUnwindSafe(f))
    }
    #[cfg(not(feature = "std"))]
    {
        Ok(f())
    }
}

impl Header {
    #[inline]
    fn load(&self, order: Ordering) -> State {
        State(self.state.load(order))
    }

    /// The pool's view of this task.
    #[inline]
    pub(crate) fn task(header: NonNull<Header>) -> NonNull<Task> {
        header.cast::<Task>()
    }

    /// Whether the task is complete (Acquire: its output is visible).
    #[inline]
    pub(crate) fn is_complete(header: NonNull<Header>) -> bool {
        // SAFETY: the caller holds a reference (a JoinHandle).
        unsafe { header.as_ref() }.load(Ordering::Acquire).is_complete()
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
    pub(crate) fn state(header: NonNull<Header>) -> State {
        // SAFETY: the caller holds a reference.
        unsafe { header.as_ref() }.load(Ordering::Relaxed)
    }
}

/// The cell of a header.
///
/// # Safety
/// `header` belongs to a `Cell<F, Sch>` and the caller holds a reference to it.
#[inline]
unsafe fn cell<'a, F: Future, Sch>(header: NonNull<Header>) -> &'a Cell<F, Sch> {
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
unsafe fn set_stage<F: Future, Sch>(header: NonNull<Header>, stage: Stage<F>) {
    // SAFETY: the caller's contract.
    unsafe { cell::<F, Sch>(header) }.stage.with_mut(|s| {
        // SAFETY: exclusive access (the caller's contract); the stage is initialised. A panic
        // in the drop still drops the remaining fields while unwinding, so the slot holds no
        // live value afterwards either way, and the write below does not leak or double-drop.
        let _ = catch(|| unsafe { core::ptr::drop_in_place(s) });
        // SAFETY: as above; the slot's old value was dropped just now.
        unsafe { core::ptr::write(s, stage) };
    });
}

/// Drops one reference; frees the task if it was the last.
///
/// # Safety
/// The caller owns one reference and does not touch the task afterwards.
#[inline]
pub(crate) unsafe fn ref_dec(header: NonNull<Header>) {
    // SAFETY: our reference keeps the header alive until this RMW.
    let h = unsafe { header.as_ref() };
    // Release: our accesses to the task happen before the free (paired with the fence).
    let prev = State(h.state.fetch_sub(State::REF_ONE, Ordering::Release));
    debug_assert!(prev.refs() > 0, "ref_dec on {prev:?}");
    if prev.refs() == 1 {
        // Acquire: every other owner's Release decrement happened before the free.
        fence(Ordering::Acquire);
        let dealloc = h.vtable.dealloc;
        // SAFETY: that was the last reference.
        unsafe { dealloc(header) };
    }
}

/// One more reference (a waker clone).
///
/// # Safety
/// The caller holds a reference.
#[inline]
unsafe fn ref_inc(header: NonNull<Header>) {
    // SAFETY: as above.
    let h = unsafe { header.as_ref() };
    // Relaxed, as `Arc::clone`: a new reference from an existing one needs no ordering.
    let prev = State(h.state.fetch_add(State::REF_ONE, Ordering::Relaxed));
    // As `Arc`: far more clones than memory could hold means leaked clones; refuse to count on
    // (wrapping would free a live task).
    assert!(prev.refs() < State::REF_MAX, "task reference count overflow");
}

/// Queues a task we just moved to `SCHEDULED`; a refusing scheduler gets it cancelled here.
///
/// # Safety
/// We hold `SCHEDULED` and the queue's reference.
#[inline]
unsafe fn submit(header: NonNull<Header>, lifo: bool) {
    // SAFETY: the header is live (we hold the queue's reference).
    let vtable = unsafe { header.as_ref() }.vtable;
    // SAFETY: forwarded contract.
    if unsafe { (vtable.schedule)(header, lifo) }.is_err() {
        // SAFETY: refused, so SCHEDULED and the reference are still ours.
        unsafe { (vtable.cancel_scheduled)(header) };
    }
}

/// `submit` for a task re-queued by its own poll (`after_pending`), where the types are known:
/// the scheduler is called directly instead of through the vtable (the yield path).
/// `running`: the task goes back still holding `RUNNING` (the self-wake path), not `SCHEDULED`.
///
/// Always inlined into `run` (with `Sch::schedule`'s fast path): a call here cost ~20
/// instructions of register saves and restores per yield; the refusal is out of line.
///
/// # Safety
/// As `submit`, with `RUNNING` instead of `SCHEDULED` when `running`; `header` is a
/// `Cell<F, Sch>`.
#[inline(always)]
unsafe fn submit_requeue<F, Sch>(header: NonNull<Header>, running: bool)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
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
unsafe fn requeue_refused<F, Sch>(header: NonNull<Header>, running: bool)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
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
/// `task` is the header of a `Cell<F, Sch>` with `SCHEDULED` set; the queue's reference
/// passes to us.
unsafe extern "C" fn run<F, Sch>(task: *mut Task)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: the pool hands back the pointer we queued, which is non-null.
    let header = unsafe { NonNull::new_unchecked(task.cast::<Header>()) };
    // SAFETY: the queue's reference (now ours) keeps it alive.
    let h = unsafe { header.as_ref() };
    // A queued task is SCHEDULED, or RUNNING if its own poll re-queued it without leaving
    // RUNNING (`after_pending`'s self-wake path). Nobody else can set or clear either bit while
    // the task is queued (only the queue's holder owns them; `abort` claims RUNNING only on an
    // idle task), so one Relaxed load tells them apart. It costs no extra cache traffic: the
    // worker just read this line for the callback.
    let seen = h.load(Ordering::Relaxed);
    let prev = if seen.is_running() {
        // Still ours from the poll that re-queued us: no RMW. The previous poll's writes to
        // the future reached us through the queue (program order, or the steal's Acquire). A
        // wake from another thread since then left NOTIFIED, which `after_pending` acts on.
        seen
    } else {
        // SCHEDULED -> RUNNING in one RMW (a queued task is never running, so xor flips both).
        // Acquire: the wake that queued us (Release) and the previous poll's end (Release)
        // happen before this poll.
        State(h.state.fetch_xor(State::SCHEDULED | State::RUNNING, Ordering::Acquire))
    };
    prev.debug_check();
    debug_assert!(prev.is_scheduled() != prev.is_running() && !prev.is_complete(), "run on {prev:?}");
    // SAFETY: the scheduler outlives its tasks. (The poll is counted by the worker that runs
    // the task: `Stats::polled`.)
    if prev.is_cancelled() || unsafe { Sch::is_closed(h.sched) } {
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
    let saved = super::current::enter(header);
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
unsafe fn finish<F, Sch>(header: NonNull<Header>, result: Result<F::Output, JoinError>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: the caller's contract; dropping the finished future happens here.
    unsafe {
        set_stage::<F, Sch>(header, Stage::Finished(result));
        complete::<F, Sch>(header, true);
    }
}

/// The poll returned `Pending`: go idle (dropping the queue's reference), or re-queue if woken
/// meanwhile (`NOTIFIED`, or `self_woken`: it woke itself by reference on this thread, see
/// `current.rs`), or cancel if aborted meanwhile. One CAS, none on the yield path.
///
/// # Safety
/// We hold RUNNING and the queue's reference.
#[inline(always)]
unsafe fn after_pending<F, Sch>(header: NonNull<Header>, self_woken: bool)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: our reference keeps it alive.
    let h = unsafe { header.as_ref() };
    let s = h.load(Ordering::Relaxed);
    if self_woken && s.0 & (State::NOTIFIED | State::CANCELLED) == 0 {
        // The yield path: the task woke itself and nobody else has touched the word. Re-queue
        // it still RUNNING, with no RMW here and none when it is next dequeued (`run`). The
        // queue's push (Release) and pop or steal (Acquire) carry the future's state to the
        // next poller. A wake or `abort` from another thread racing this load sets NOTIFIED /
        // CANCELLED on a RUNNING task; the next poll's `run` or `after_pending` acts on it, as
        // it would have if it had come during this poll.
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
unsafe fn after_pending_slow<F, Sch>(header: NonNull<Header>, self_woken: bool, mut s: State)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: our reference keeps it alive.
    let h = unsafe { header.as_ref() };
    loop {
        s.debug_check();
        debug_assert!(s.is_running());
        if s.is_cancelled() {
            // SAFETY: we still hold RUNNING and the reference.
            unsafe { cancel_running::<F, Sch>(header, true) };
            return;
        }
        let requeue = s.is_notified() || self_woken;
        let new = if requeue {
            // Woken during the poll: queued again, the reference passes to the queue.
            s.without(State::RUNNING | State::NOTIFIED).with(State::SCHEDULED)
        } else {
            s.without(State::RUNNING).ref_dec()
        };
        // AcqRel: Release publishes the future's new state to the next poller / canceller /
        // freer; Acquire sees a waker's data (if it set NOTIFIED) and, if we free, every
        // other owner's accesses.
        match h.state.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => {
                if requeue {
                    // SAFETY: SCHEDULED and the reference are ours to hand over.
                    unsafe { submit_requeue::<F, Sch>(header, false) };
                } else if new.refs() == 0 {
                    // Nobody can wake it and nobody waits for it: free it (drops the future).
                    // SAFETY: that was the last reference.
                    unsafe { dealloc::<F, Sch>(header) };
                }
                return;
            }
            Err(actual) => s = State(actual),
        }
    }
}

/// Drops the future (we hold RUNNING), stores `Cancelled`, completes.
///
/// # Safety
/// We hold RUNNING; `sched_ref`: we also hold the queue's reference (dropped at the end).
unsafe fn cancel_running<F, Sch>(header: NonNull<Header>, sched_ref: bool)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: RUNNING gives us the stage.
    unsafe {
        set_stage::<F, Sch>(header, Stage::Finished(Err(JoinError::cancelled())));
        complete::<F, Sch>(header, sched_ref);
    }
}

/// RUNNING -> COMPLETE: the stage holds the result. Hands the result to the `JoinHandle` (wakes
/// its waiter) or drops it if there is none; then drops the queue's reference if we hold it.
///
/// # Safety
/// We hold RUNNING and the stage is `Finished`.
unsafe fn complete<F, Sch>(header: NonNull<Header>, sched_ref: bool)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: we hold a reference (the queue's, or the aborting JoinHandle's).
    let h = unsafe { header.as_ref() };
    // RUNNING -> COMPLETE (running, never complete before: xor flips both). AcqRel: see the
    // module docs (publishes the output; sees the join waiter).
    let prev = State(h.state.fetch_xor(State::RUNNING | State::COMPLETE, Ordering::AcqRel));
    prev.debug_check();
    debug_assert!(prev.is_running() && !prev.is_complete(), "complete on {prev:?}");
    if !prev.has_join_interest() {
        // The JoinHandle is gone: nobody will read the output; it is ours to drop.
        // SAFETY: no JoinHandle, so the stage stays ours after COMPLETE.
        unsafe { set_stage::<F, Sch>(header, Stage::Consumed) };
    }
    if prev.has_join_waker() {
        // JOIN_WAKER was set when we completed: the slot is ours (the JoinHandle only touches
        // it while JOIN_WAKER is clear and the task not complete).
        // SAFETY: exclusive access as argued.
        let waiter = h.join.with_mut(|slot| unsafe { (*slot).take() });
        match waiter {
            Some(JoinWaiter::Waker(waker)) if prev.has_join_interest() => {
                let _ = catch(move || waker.wake());
            }
            Some(JoinWaiter::Signal(signal)) => {
                // SAFETY: the joiner keeps the signal alive until it is set (latch.rs), and a
                // blocking joiner holds the JoinHandle, so JOIN_INTEREST was set; set once.
                unsafe { signal.as_ref().set() };
            }
            other => {
                let _ = catch(move || drop(other));
            }
        }
    }
    if sched_ref {
        // SAFETY: ours; nothing touches the task after.
        unsafe { ref_dec(header) };
    }
}

// ---------------------------------------------------------------------------------------------
// Vtable entries

unsafe fn schedule<Sch: Schedule>(header: NonNull<Header>, lifo: bool) -> Result<(), ()> {
    // SAFETY: the caller holds SCHEDULED and the queue's reference (so the header is live),
    // and the scheduler outlives its tasks.
    unsafe { Sch::schedule(header.as_ref().sched, Header::task(header), lifo) }
}

unsafe fn cancel_scheduled<F, Sch>(header: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: we hold the queue's reference.
    let h = unsafe { header.as_ref() };
    // SCHEDULED -> RUNNING, as `run` does (Acquire: as there).
    let prev = State(h.state.fetch_xor(State::SCHEDULED | State::RUNNING, Ordering::Acquire));
    debug_assert!(prev.is_scheduled() && !prev.is_running(), "cancel_scheduled on {prev:?}");
    // SAFETY: we hold RUNNING and the reference.
    unsafe { cancel_running::<F, Sch>(header, true) };
}

unsafe fn cancel_claimed<F, Sch>(header: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    Sch: Schedule,
{
    // SAFETY: `abort` claimed RUNNING; its JoinHandle's reference keeps the task alive.
    unsafe { cancel_running::<F, Sch>(header, false) };
}

unsafe fn read_output<F, Sch>(header: NonNull<Header>, dst: *mut ())
where
    F: Future + Send + 'static,
{
    // SAFETY: the JoinHandle (JOIN_INTEREST) saw COMPLETE with Acquire: the stage is its.
    let stage = unsafe { cell::<F, Sch>(header) }.stage.with_mut(|s| unsafe { core::ptr::replace(s, Stage::Consumed) });
    let result = match stage {
        Stage::Finished(result) => result,
        _ => panic!("JoinHandle polled after it returned the output"),
    };
    // SAFETY: `dst` is the JoinHandle's `*mut Poll<Result<F::Output, JoinError>>`.
    unsafe { *dst.cast::<Poll<Result<F::Output, JoinError>>>() = Poll::Ready(result) };
}

unsafe fn drop_output<F, Sch>(header: NonNull<Header>)
where
    F: Future + Send + 'static,
{
    // SAFETY: as `read_output`.
    unsafe { set_stage::<F, Sch>(header, Stage::Consumed) };
}

unsafe fn wait<Sch: Schedule>(header: NonNull<Header>, signal: &Signal) {
    // SAFETY: the caller (a JoinHandle) holds a reference; the scheduler outlives the task.
    unsafe { Sch::wait(header.as_ref().sched, signal) }
}

unsafe fn dealloc<F, Sch>(header: NonNull<Header>)
where
    F: Future + Send + 'static,
    Sch: Schedule,
{
    // SAFETY: the last reference is gone: nothing else can reach the cell.
    let sched = unsafe { header.as_ref() }.sched;
    // SAFETY: allocated by `allocate` as a Box<Cell<F, Sch>>.
    let cell = unsafe { Box::from_raw(header.cast::<Cell<F, Sch>>().as_ptr()) };
    // Drops a future that never completed (nobody could wake it any more), an output nobody
    // read, a waiter left in the slot.
    let _ = catch(move || drop(cell));
    // SAFETY: once per task, last.
    unsafe { Sch::release(sched) };
}

/// Frees a task that was never queued (the scheduler refused the spawn).
///
/// # Safety
/// `header` came from `allocate` and was never handed to anyone.
pub(crate) unsafe fn dealloc_unqueued(header: NonNull<Header>) {
    // SAFETY: forwarded; the vtable matches the allocation.
    unsafe { (header.as_ref().vtable.dealloc)(header) }
}

// ---------------------------------------------------------------------------------------------
// Waking

pub(super) static WAKER_VTABLE: RawWakerVTable = RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

fn raw_waker(header: NonNull<Header>) -> RawWaker {
    RawWaker::new(header.as_ptr().cast_const().cast::<()>(), &WAKER_VTABLE)
}

/// A waker holding a reference of its own.
///
/// # Safety
/// The caller holds a reference.
#[cfg_attr(not(loom), allow(dead_code))]
pub(crate) unsafe fn waker(header: NonNull<Header>) -> Waker {
    // SAFETY: forwarded.
    unsafe { ref_inc(header) };
    // SAFETY: the waker owns the reference just taken.
    unsafe { Waker::from_raw(raw_waker(header)) }
}

unsafe fn waker_clone(ptr: *const ()) -> RawWaker {
    // SAFETY: a waker's data is a live header (the cloned waker holds or borrows a reference).
    let header = unsafe { NonNull::new_unchecked(ptr.cast_mut().cast::<Header>()) };
    // SAFETY: as above.
    unsafe { ref_inc(header) };
    raw_waker(header)
}

unsafe fn waker_drop(ptr: *const ()) {
    // SAFETY: an owned waker holds a reference, which we drop.
    unsafe { ref_dec(NonNull::new_unchecked(ptr.cast_mut().cast::<Header>())) }
}

unsafe fn waker_wake(ptr: *const ()) {
    // SAFETY: an owned waker holds a reference, which `wake_by_val` consumes.
    unsafe { wake_by_val(NonNull::new_unchecked(ptr.cast_mut().cast::<Header>())) }
}

unsafe fn waker_wake_by_ref(ptr: *const ()) {
    // SAFETY: a waker's data is a live header.
    let header = unsafe { NonNull::new_unchecked(ptr.cast_mut().cast::<Header>()) };
    // The task wakes itself during its own poll on this thread: `after_pending` re-queues it,
    // no RMW on the state word (`current.rs`).
    #[cfg(feature = "std")]
    if super::current::wake_self(header) {
        return;
    }
    // SAFETY: the waker holds or borrows a reference for the call.
    unsafe { wake_by_ref(header) }
}

/// Wakes the task, consuming the caller's reference: an idle task is queued (the reference
/// becomes the queue's), a running one is marked NOTIFIED, a queued or complete one is left
/// as it is. One CAS.
///
/// # Safety
/// The caller owns a reference.
pub(crate) unsafe fn wake_by_val(header: NonNull<Header>) {
    // SAFETY: our reference keeps it alive until the CAS.
    let h = unsafe { header.as_ref() };
    let mut s = h.load(Ordering::Relaxed);
    loop {
        s.debug_check();
        let new = if s.is_idle() {
            s.with(State::SCHEDULED)
        } else if s.is_running() {
            s.with(State::NOTIFIED).ref_dec()
        } else {
            // Queued or complete: nothing to do but drop our reference (still a write: see the
            // module docs on why a wake always writes).
            s.ref_dec()
        };
        // AcqRel: Release publishes what the waker did before waking (module docs); Acquire
        // in case this drops the last reference.
        match h.state.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => {
                if s.is_idle() {
                    // SAFETY: SCHEDULED and the reference (ours) go to the queue.
                    unsafe { submit(header, true) };
                } else if new.refs() == 0 {
                    // A complete task whose last owner was this waker.
                    // SAFETY: last reference, and the CAS was Acquire.
                    unsafe { (h.vtable.dealloc)(header) };
                }
                return;
            }
            Err(actual) => s = State(actual),
        }
    }
}

/// Wakes the task without consuming a reference (takes one for the queue if it queues it).
///
/// # Safety
/// The caller holds or borrows a reference for the call.
pub(crate) unsafe fn wake_by_ref(header: NonNull<Header>) {
    // SAFETY: as above.
    let h = unsafe { header.as_ref() };
    let mut s = h.load(Ordering::Relaxed);
    loop {
        s.debug_check();
        if s.is_complete() {
            // Never polled again: nothing to publish to.
            return;
        }
        let new = if s.is_idle() {
            s.with(State::SCHEDULED).ref_inc()
        } else if s.is_running() {
            s.with(State::NOTIFIED)
        } else {
            // Already queued: write the same value (module docs: a wake always writes).
            s
        };
        // Release: publishes what the waker did before waking (module docs).
        match h.state.compare_exchange_weak(s.0, new.0, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => {
                if s.is_idle() {
                    // SAFETY: SCHEDULED and the new reference go to the queue.
                    unsafe { submit(header, true) };
                }
                return;
            }
            Err(actual) => s = State(actual),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The JoinHandle's side

/// Puts `waiter` in the join slot. Returns false (waiter dropped) if the task is complete: the
/// output can be read now.
///
/// # Safety
/// Called by the task's `JoinHandle` (which holds JOIN_INTEREST and a reference).
pub(crate) unsafe fn register_join_waiter(header: NonNull<Header>, waiter: JoinWaiter) -> bool {
    // SAFETY: the JoinHandle's reference keeps it alive.
    let h = unsafe { header.as_ref() };
    let mut s = h.load(Ordering::Acquire);
    if s.has_join_waker() {
        // Take the slot back (to replace our earlier waiter), unless the task completed: then
        // the slot is the completer's.
        loop {
            if s.is_complete() {
                return false;
            }
            // Acquire on failure: a COMPLETE we read makes the output visible.
            match h.state.compare_exchange_weak(s.0, s.without(State::JOIN_WAKER).0, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => break,
                Err(actual) => s = State(actual),
            }
        }
        s = s.without(State::JOIN_WAKER);
    }
    if s.is_complete() {
        return false;
    }
    // SAFETY: JOIN_WAKER is clear and we are the JoinHandle: the slot is ours. The old waiter
    // (if any) is dropped here.
    let old = h.join.with_mut(|slot| unsafe { core::ptr::replace(slot, Some(waiter)) });
    drop(old);
    loop {
        if s.is_complete() {
            // Completed meanwhile without seeing JOIN_WAKER: the slot is still ours. Empty it
            // now (a waker would otherwise hold its target until this task is freed).
            // SAFETY: as above.
            let ours = h.join.with_mut(|slot| unsafe { (*slot).take() });
            drop(ours);
            return false;
        }
        // Release: the completer, which reads JOIN_WAKER with Acquire, sees the slot's
        // contents. Acquire on failure: a COMPLETE we read makes the output visible.
        match h.state.compare_exchange_weak(s.0, s.with(State::JOIN_WAKER).0, Ordering::Release, Ordering::Acquire) {
            Ok(_) => return true,
            Err(actual) => s = State(actual),
        }
    }
}

/// Moves the output out (the task is complete).
///
/// # Safety
/// Called by the JoinHandle after it saw COMPLETE (Acquire); `T` is the future's output type.
pub(crate) unsafe fn read_output_into<T>(header: NonNull<Header>) -> Result<T, JoinError> {
    let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
    // SAFETY: the JoinHandle's reference; the vtable matches the allocation; `T` matches.
    unsafe { (header.as_ref().vtable.read_output)(header, core::ptr::addr_of_mut!(out).cast::<()>()) };
    match out {
        Poll::Ready(result) => result,
        Poll::Pending => unreachable!("read_output wrote nothing"),
    }
}

/// Blocks until the task completes (the blocking `join`).
///
/// # Safety
/// Called by the task's JoinHandle.
pub(crate) unsafe fn join_blocking(header: NonNull<Header>) {
    if Header::is_complete(header) {
        return;
    }
    let signal = Signal::new();
    // SAFETY: we are the JoinHandle; the signal outlives the wait below, which returns only
    // after the completer set it (its last access).
    if unsafe { register_join_waiter(header, JoinWaiter::Signal(NonNull::from(&signal))) } {
        // SAFETY: the JoinHandle's reference keeps the header alive.
        unsafe { (header.as_ref().vtable.wait)(header, &signal) };
    }
    debug_assert!(Header::is_complete(header));
}

/// Requests cancellation. An idle task is cancelled right here (its future dropped on this
/// thread); a queued or running one by the thread that runs it next / is running it.
///
/// # Safety
/// Called by the task's JoinHandle (holds a reference).
pub(crate) unsafe fn abort(header: NonNull<Header>) {
    // SAFETY: the JoinHandle's reference.
    let h = unsafe { header.as_ref() };
    let mut s = h.load(Ordering::Relaxed);
    loop {
        s.debug_check();
        if s.is_complete() || s.is_cancelled() {
            return;
        }
        let idle = s.is_idle();
        let new = if idle { s.with(State::CANCELLED | State::RUNNING) } else { s.with(State::CANCELLED) };
        // Acquire: claiming an idle task's future, we see the last poll's writes to it
        // (after_pending's Release).
        match h.state.compare_exchange_weak(s.0, new.0, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {
                if idle {
                    // SAFETY: we claimed RUNNING.
                    unsafe { (h.vtable.cancel_claimed)(header) };
                }
                return;
            }
            Err(actual) => s = State(actual),
        }
    }
}

/// The JoinHandle goes away: give up JOIN_INTEREST (and drop the output if the task already
/// completed), then our reference. One CAS when the task is not complete.
///
/// # Safety
/// Called once, by the task's JoinHandle.
pub(crate) unsafe fn drop_join_handle(header: NonNull<Header>) {
    // SAFETY: the JoinHandle's reference.
    let h = unsafe { header.as_ref() };
    let mut s = h.load(Ordering::Acquire);
    loop {
        if s.is_complete() {
            // The output (if not read) is ours to drop: JOIN_INTEREST is still set.
            // SAFETY: see above; the Acquire load/CAS saw COMPLETE.
            unsafe {
                (h.vtable.drop_output)(header);
                ref_dec(header);
            }
            return;
        }
        let new = s.without(State::JOIN_INTEREST).ref_dec();
        // AcqRel: Release, as any reference drop; Acquire on success if we free, and on
        // failure to see the output when the task just completed.
        match h.state.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                if new.refs() == 0 {
                    // Idle, no waker anywhere: it can never run again. Free it.
                    // SAFETY: last reference.
                    unsafe { (h.vtable.dealloc)(header) };
                }
                return;
            }
            Err(actual) => s = State(actual),
        }
    }
}

