//! Closures on the blocking pool: one allocation per call (a `Job`) holding the task header,
//! the closure, and the completion (`latch::Completion`) that a thread can join or a future
//! can await.
//!
//! # Completion
//! The completing side (run or cancel) sets the completion with the output, after which it
//! never touches the output again. The handle is the signal's one waiter: an `.await`
//! registers (or replaces) its waker in it, a blocking `join` (`os::defaults`, std) waits on
//! it as every wait does (`latch`, "Waiting"). The signal's protocol decides who touches the
//! waker, so a completion that races with a registration is seen by one of them and no
//! wake-up is lost (`latch/loom.rs`). `refs` (2: the task side and the handle) frees the job
//! when both are done with it, so the signal outlives the setter's last access even when the
//! handle returns at SETTING, and an output nobody took is dropped with it.

use core::ffi::c_uint;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::ptr::{self, NonNull};
use core::task::{Context, Poll};

use alloc::boxed::Box;

use super::BlockingTask;
use crate::latch::{Completion, Signal};
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};
use crate::task::Task;

/// Why a [`BlockingHandle`] has no value.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{BlockingConfig, BlockingJoinError, BlockingPool};
///
/// let pool = BlockingPool::new(BlockingConfig::default()).unwrap();
/// let handle = pool.spawn_blocking(|| -> u32 { panic!("disk on fire") }).unwrap();
/// match handle.join() {
///     Ok(_) => unreachable!(),
///     Err(BlockingJoinError::Panicked) => {} // caught and counted in `pool::panic_count()`
///     Err(BlockingJoinError::Cancelled) => unreachable!("only if shutdown came first"),
///     Err(_) => unreachable!(), // non_exhaustive
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockingJoinError {
    /// The pool shut down before the closure started; the closure was dropped.
    Cancelled,
    /// The closure panicked (caught with `std`; counted in [`panic_count`](crate::panic_count)).
    Panicked,
}

impl fmt::Display for BlockingJoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cancelled => "the blocking task was cancelled by shutdown",
            Self::Panicked => "the blocking task panicked",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BlockingJoinError {}

/// The part of a job the handle uses (independent of the closure type).
struct Shared<T> {
    /// The output (module docs).
    done: Completion<Result<T, BlockingJoinError>>,
    refs: AtomicUsize,
}

/// One `spawn_blocking` call. `header` first (repr(C)): the task pointer is the job pointer.
#[repr(C)]
struct Job<F, T> {
    header: BlockingTask,
    shared: Shared<T>,
    f: UnsafeCell<Option<F>>,
}

/// The result of a closure running on a blocking pool: [`join`](Self::join) it (`std`) or
/// `.await` it. Dropping the handle detaches the closure (it still runs; its output is
/// dropped).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::BlockingPool::new(Default::default()).unwrap();
/// let h = pool.spawn_blocking(|| 6 * 7).unwrap();
/// assert_eq!(h.join(), Ok(42));
/// # }
/// ```
pub struct BlockingHandle<T> {
    /// The `Job<F, T>` allocation, for `free`.
    job: NonNull<()>,
    shared: NonNull<Shared<T>>,
    /// Frees the job (knows `F`).
    free: unsafe fn(NonNull<()>),
}

// SAFETY: the handle only moves a `T` out (to whoever owns it), so `T: Send` suffices; the
// shared state is synchronised by `done` and `refs`.
unsafe impl<T: Send> Send for BlockingHandle<T> {}
// SAFETY: `&self` methods only load the signal's state.
unsafe impl<T: Send> Sync for BlockingHandle<T> {}

impl<T> fmt::Debug for BlockingHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingHandle").field("finished", &self.is_finished()).finish_non_exhaustive()
    }
}

/// Allocates a job for `f` and returns its task and handle (refs = 2).
pub(super) fn new_job<F, T>(f: F, flags: c_uint) -> (NonNull<BlockingTask>, BlockingHandle<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let mut header = BlockingTask::new(run::<F, T>).with_cancel(cancel::<F, T>);
    header.flags = flags;
    let shared = Shared { done: Completion::new(), refs: AtomicUsize::new(2) };
    let job = Box::into_raw(Box::new(Job { header, shared, f: UnsafeCell::new(Some(f)) }));
    // SAFETY: `job` is a fresh, non-null allocation; `addr_of_mut!` creates no reference.
    let (job, shared) = unsafe { (NonNull::new_unchecked(job), NonNull::new_unchecked(ptr::addr_of_mut!((*job).shared))) };
    (job.cast(), BlockingHandle { job: job.cast(), shared, free: free::<F, T> })
}

impl<T> BlockingHandle<T> {
    #[inline]
    fn shared(&self) -> &Shared<T> {
        // SAFETY: the handle holds a reference, so the job is live.
        unsafe { self.shared.as_ref() }
    }

    /// Whether the closure has finished (or was cancelled): `join` would not block.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(Default::default()).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let handle = pool.spawn_blocking(move || rx.recv().is_ok()).unwrap();
    /// assert!(!handle.is_finished()); // it waits for our message
    /// tx.send(()).unwrap();
    /// assert_eq!(handle.join(), Ok(true));
    /// # }
    /// ```
    pub fn is_finished(&self) -> bool {
        // Acquire (in `is_setting`): the output is visible once it returns true.
        self.done().is_setting()
    }

    /// Releases the task side's reference for a job that was never queued.
    ///
    /// # Safety
    /// The job's task was not queued (its submit failed), and this is called once.
    pub(super) unsafe fn abandon(&self) {
        // The handle still holds its own reference, so this never frees.
        let prev = self.shared().refs.fetch_sub(1, Ordering::Relaxed);
        debug_assert_eq!(prev, 2);
    }

    /// The signal the completing side sets (the handle is its one waiter).
    pub(crate) fn done(&self) -> &Signal {
        self.shared().done.signal()
    }

    /// Takes the output after the signal was seen set or being set (Acquire).
    pub(crate) fn take_output(&mut self) -> Result<T, BlockingJoinError> {
        // SAFETY: the handle is the completion's one waiter, and saw it being set.
        unsafe { self.shared().done.take() }.expect("BlockingHandle polled again after it returned its result")
    }
}

impl<T> Future for BlockingHandle<T> {
    type Output = Result<T, BlockingJoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let done = this.done();
        // SAFETY: the handle is the signal's one waiter (`poll` takes it by `&mut`, `join` by
        // value). A false return means the signal is being set or set: the output is written
        // (Acquire), and the job's references keep the signal alive for the setter.
        if !done.is_setting() && unsafe { done.register(cx.waker()) } {
            return Poll::Pending;
        }
        Poll::Ready(this.take_output())
    }
}

impl<T> Drop for BlockingHandle<T> {
    fn drop(&mut self) {
        // AcqRel: the usual reference-count pairing, so the last owner sees every access of
        // the other before freeing. One AcqRel RMW rather than Release plus an Acquire fence on
        // the last: one job per call, so the difference costs nothing, and ThreadSanitizer
        // (which does not model fences) sees the pairing.
        if self.shared().refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the last reference: nobody else touches the job.
            unsafe { (self.free)(self.job) };
        }
    }
}

/// The task callback: runs the closure and completes the job.
///
/// # Safety
/// `task` is the header of a live `Job<F, T>`, dequeued: called once.
unsafe extern "C" fn run<F, T>(task: *mut Task)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let job = task.cast::<Job<F, T>>();
    // SAFETY: the caller's contract; only this callback (or `cancel`, never both) takes `f`.
    let f = unsafe { (*job).f.with_mut(|p| (*p).take()) };
    let mut out = None;
    if let Some(f) = f {
        crate::panic::run_catching(|| out = Some(f()));
    }
    // SAFETY: the caller's contract.
    unsafe { complete(job, out.ok_or(BlockingJoinError::Panicked)) };
}

/// The cancel callback: drops the closure on this thread and completes the job as cancelled.
///
/// # Safety
/// As `run`.
unsafe extern "C" fn cancel<F, T>(task: *mut Task)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let job = task.cast::<Job<F, T>>();
    // SAFETY: the caller's contract.
    let f = unsafe { (*job).f.with_mut(|p| (*p).take()) };
    crate::panic::run_catching(move || drop(f));
    // SAFETY: the caller's contract.
    unsafe { complete(job, Err(BlockingJoinError::Cancelled)) };
}

/// Writes the output, sets the signal (which wakes the waiter if one registered), and releases
/// the task side's reference.
///
/// # Safety
/// `job` is live and this is its one completion.
unsafe fn complete<F, T>(job: *mut Job<F, T>, out: Result<T, BlockingJoinError>) {
    // SAFETY: the caller's contract.
    let shared = unsafe { &(*job).shared };
    // SAFETY: the job's one completion. Our reference keeps the job alive through the
    // signal's last access.
    unsafe { Completion::set(&shared.done, out) };
    // AcqRel: as in the handle's `drop`.
    if shared.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
        // SAFETY: the last reference (the handle is gone); the job came from Box::into_raw.
        drop(unsafe { Box::from_raw(job) });
    }
}

/// Frees a job whose references are all released.
///
/// # Safety
/// `job` came from `new_job::<F, T>` and nobody references it any more.
unsafe fn free<F, T>(job: NonNull<()>) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(job.as_ptr().cast::<Job<F, T>>()) });
}
