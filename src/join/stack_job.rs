//! [`StackJob`]: a fork-join job that lives in its waiter's stack frame, for `join`'s second
//! half and for the whole of an `install`, `join` or `scope` called from outside the pool.

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use crate::latch::{Completion, Signal};
use crate::panic::{catch, resume, Panic};
use crate::platform::Spawner;
use crate::scheduler::job::JobHeader;
use crate::scheduler::job::Until;
use crate::scheduler::{Inner, WorkerContext};
use crate::sync::UnsafeCell;
use crate::task::Task;

/// A job that lives in its waiter's stack frame: its [`JobHeader`] first (so the task pointer
/// is the job pointer), the closure and its result.
///
/// A `join` creates its second half latent (`scheduler::frame`): the task header, the closure
/// and the empty completion are written. The rest of the header (the thief's index, the pool)
/// is written by [`JobHeader::offer`], just before the job is queued.
///
/// Runs exactly once: by the thread that takes its task from a queue (the callback, which
/// hands the closure that thread's worker context, if it is a worker of the pool), or inline
/// by its owner after taking it back (or never queueing it); never both (the queues hand a
/// task out once). After a queued run the owner consumes the result exactly once
/// ([`take_result`](Self::take_result) or [`drop_result`](Self::drop_result)); a job that never
/// runs is consumed by [`drop_unrun`](Self::drop_unrun). The frame stays alive until the
/// completion is set (the callback's last access) or the owner took the job back.
#[repr(C)]
pub(crate) struct StackJob<F, R, S: Spawner> {
    header: JobHeader,
    /// The closure: moved out exactly once (by its runner, or by `drop_unrun`).
    func: UnsafeCell<MaybeUninit<F>>,
    /// Set by a queued run (`execute`), with the closure's value or panic; taken once by the
    /// owner after.
    done: Completion<Result<R, Panic>>,
    _pool: PhantomData<*const Inner<S>>,
}

impl<F, R, S: Spawner> fmt::Debug for StackJob<F, R, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackJob").finish_non_exhaustive()
    }
}

impl<F, R, S> StackJob<F, R, S>
where
    F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
    R: Send,
    S: Spawner,
{
    /// A latent job running `func`: not ready to queue until offered ([`JobHeader::offer`]).
    #[inline(always)]
    pub(crate) fn latent(func: F) -> Self {
        Self {
            header: JobHeader::latent(Self::execute),
            func: UnsafeCell::new(MaybeUninit::new(func)),
            done: Completion::new(),
            _pool: PhantomData,
        }
    }

    /// A job ready to queue, running `func` with the worker context of `pool`'s worker that
    /// runs it (`None` where there is none).
    #[inline]
    pub(crate) fn new(func: F, pool: &Inner<S>) -> Self {
        let job = Self::latent(func);
        // SAFETY: a fresh job, not queued, ours. (`Offered` holds no pointer into the job, so
        // the job may move after.)
        unsafe { JobHeader::offer(job.task(), NonNull::from(pool).cast()) };
        job
    }

    /// The job's task pointer, projected from a pointer to the whole job so that the callback
    /// may turn it back into the job.
    #[inline(always)]
    pub(crate) fn task(&self) -> NonNull<Task> {
        let job: *const Self = self;
        // SAFETY: `job` points to `self`, live; `header.task` is a field of it.
        unsafe { NonNull::new_unchecked(ptr::addr_of!((*job).header.task).cast_mut()) }
    }

    /// The signal the owner waits on.
    pub(crate) fn signal(&self) -> &Signal {
        self.done.signal()
    }

    /// What the owner waits for: the signal, and the worker running the job (if known yet).
    ///
    /// # Safety
    /// The job was offered.
    pub(crate) unsafe fn until(&self) -> Until<'_> {
        // SAFETY: the caller's contract.
        unsafe { self.header.until(self.signal()) }
    }

    /// Moves the closure out.
    ///
    /// # Safety
    /// Once per job: the caller is its one runner (or drops it unrun).
    #[inline(always)]
    unsafe fn take_func(&self) -> F {
        // SAFETY: initialised in `latent`, and moved out only this once (the caller's contract).
        self.func.with(|f| unsafe { (*f).assume_init_read() })
    }

    /// The task callback: runs the closure on the thread that dequeued the job.
    unsafe extern "C" fn execute(task: *mut Task) {
        // SAFETY: `task` is the first field of a live, offered `StackJob<F, R, S>` (repr(C));
        // the owner keeps the frame alive until the signal is set, below.
        let job = unsafe { &*task.cast_const().cast::<Self>() };
        // SAFETY: queued jobs were offered, with the live pool whose worker or caller queued
        // the job (it waits for the job before its pool can go away).
        let cx = unsafe { job.header.begin_run::<S>() };
        // SAFETY: the job runs once (its task was dequeued once): we are its runner.
        let func = unsafe { job.take_func() };
        // SAFETY: set once per job (it ran once). It is our last access: the owner may
        // return right after.
        unsafe { Completion::set(&job.done, catch(|| func(cx))) };
    }

    /// Runs the closure on the owner's thread (the job was taken back or never queued).
    ///
    /// # Safety
    /// The job is not queued and did not run: the owner is its runner.
    #[inline(always)]
    pub(crate) unsafe fn run_inline(&self, cx: Option<&WorkerContext<S>>) -> R {
        // SAFETY: the caller's contract.
        let func = unsafe { self.take_func() };
        func(cx)
    }

    /// Drops the closure of a job that will never run (taken back, or never queued).
    ///
    /// # Safety
    /// As [`run_inline`](Self::run_inline).
    pub(crate) unsafe fn drop_unrun(&self) {
        // SAFETY: the caller's contract.
        drop(unsafe { self.take_func() });
    }

    /// The closure's value after the signal is set, re-raising its panic.
    ///
    /// # Safety
    /// The job ran from a queue and its signal is set; the result is taken once.
    pub(crate) unsafe fn take_result(&self) -> R {
        // SAFETY: the caller's contract.
        match unsafe { self.done.take() } {
            Some(Ok(r)) => r,
            Some(Err(p)) => resume(p),
            None => unreachable!("a stack job's result is taken once, after its run"),
        }
    }

    /// Drops the result (a panic payload too) after the signal is set.
    ///
    /// # Safety
    /// As [`take_result`](Self::take_result).
    pub(crate) unsafe fn drop_result(&self) {
        // SAFETY: the caller's contract.
        drop(unsafe { self.done.take() });
    }
}
