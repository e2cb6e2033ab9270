//! Closures on the blocking pool: one allocation per call (a `Job`) holding the task header,
//! the closure, and a one-shot result slot that a thread can join or a future can await.
//!
//! # The one-shot protocol (`Shared::state`)
//! * `COMPLETE`: the output is written; set once by the completing side (run or cancel), after
//!   which that side never touches `out` again.
//! * `WAKER_SET`: the `waker` cell holds the awaiting task's waker and belongs to the
//!   completing side, which takes it when it sets `COMPLETE`. The handle writes the cell only
//!   while the bit is clear: to replace its waker it first clears the bit with a
//!   compare-and-swap, which fails once `COMPLETE` is set (then it reads the output instead).
//!
//! So exactly one side reads the waker cell at a time, a completion that races with a
//! registration is seen by one of them (`fetch_or` on both sides), and no wake-up is lost.
//! `refs` (2: the task side and the handle) frees the job when both are done with it.

use core::ffi::c_uint;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::ptr::{self, NonNull};
use core::task::{Context, Poll, Waker};

use alloc::boxed::Box;

use super::BlockingTask;
use crate::sync::{fence, AtomicUsize, Ordering, UnsafeCell};
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

/// The output is written.
const COMPLETE: usize = 0b01;
/// The waker cell holds a waker that the completing side will take.
const WAKER_SET: usize = 0b10;

/// The part of a job the handle uses (independent of the closure type).
struct Shared<T> {
    state: AtomicUsize,
    refs: AtomicUsize,
    out: UnsafeCell<Option<Result<T, BlockingJoinError>>>,
    waker: UnsafeCell<Option<Waker>>,
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
    /// The output was returned already.
    taken: bool,
}

// SAFETY: the handle only moves a `T` out (to whoever owns it), so `T: Send` suffices; the
// shared state is synchronised by `state` and `refs`.
unsafe impl<T: Send> Send for BlockingHandle<T> {}
// SAFETY: `&self` methods only load `state`.
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
    let shared = Shared {
        state: AtomicUsize::new(0),
        refs: AtomicUsize::new(2),
        out: UnsafeCell::new(None),
        waker: UnsafeCell::new(None),
    };
    let job = Box::into_raw(Box::new(Job { header, shared, f: UnsafeCell::new(Some(f)) }));
    // SAFETY: `job` is a fresh, non-null allocation; `addr_of_mut!` creates no reference.
    let (job, shared) = unsafe { (NonNull::new_unchecked(job), NonNull::new_unchecked(ptr::addr_of_mut!((*job).shared))) };
    (job.cast(), BlockingHandle { job: job.cast(), shared, free: free::<F, T>, taken: false })
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
        self.shared().state.load(Ordering::Acquire) & COMPLETE != 0
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

    /// Takes the output after COMPLETE was seen (Acquire).
    fn take_output(&mut self) -> Result<T, BlockingJoinError> {
        assert!(!self.taken, "BlockingHandle polled again after it returned its result");
        self.taken = true;
        // SAFETY: COMPLETE was seen with Acquire, so the output is written and the completing
        // side never touches `out` again; the handle is the only reader.
        let out = self.shared().out.with_mut(|p| unsafe { (*p).take() });
        out.unwrap_or(Err(BlockingJoinError::Cancelled))
    }

    /// Blocks the calling thread until the closure has finished, and returns its value.
    ///
    /// # Errors
    /// [`BlockingJoinError::Cancelled`] if the pool shut down before the closure started,
    /// [`BlockingJoinError::Panicked`] if it panicked.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::BlockingPool::new(Default::default()).unwrap();
    /// let handles: Vec<_> = (1..=3u64)
    ///     .map(|ms| pool.spawn_blocking(move || { std::thread::sleep(std::time::Duration::from_millis(ms)); ms }).unwrap())
    ///     .collect();
    /// let slept: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(slept, 6);
    /// # }
    /// ```
    #[cfg(feature = "std")]
    pub fn join(mut self) -> Result<T, BlockingJoinError> {
        if self.is_finished() {
            return self.take_output();
        }
        struct Unparker(std::thread::Thread);
        impl std::task::Wake for Unparker {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.unpark();
            }
            fn wake_by_ref(self: &std::sync::Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(std::sync::Arc::new(Unparker(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(out) = Pin::new(&mut self).poll(&mut cx) {
                return out;
            }
            std::thread::park();
        }
    }
}

impl<T> Future for BlockingHandle<T> {
    type Output = Result<T, BlockingJoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let shared = this.shared();
        let state = shared.state.load(Ordering::Acquire);
        if state & COMPLETE != 0 {
            return Poll::Ready(this.take_output());
        }
        if state & WAKER_SET != 0 {
            // Take the cell back to replace the waker. Only COMPLETE can change meanwhile, and
            // then the completing side owns the cell: read the output instead.
            if shared.state.compare_exchange(state, state & !WAKER_SET, Ordering::AcqRel, Ordering::Acquire).is_err() {
                return Poll::Ready(this.take_output());
            }
        }
        let waker = cx.waker().clone();
        // SAFETY: WAKER_SET is clear, so the completing side does not touch the cell.
        shared.waker.with_mut(|p| unsafe { *p = Some(waker) });
        // AcqRel: Release publishes the waker to the completing side; Acquire (if COMPLETE was
        // already set) makes the output visible.
        if shared.state.fetch_or(WAKER_SET, Ordering::AcqRel) & COMPLETE != 0 {
            return Poll::Ready(this.take_output());
        }
        Poll::Pending
    }
}

impl<T> Drop for BlockingHandle<T> {
    fn drop(&mut self) {
        // Release / Acquire: the usual reference-count pairing, so the last owner sees every
        // access of the other before freeing.
        if self.shared().refs.fetch_sub(1, Ordering::Release) == 1 {
            fence(Ordering::Acquire);
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

/// Writes the output, sets COMPLETE, wakes the awaiting task if one registered, and releases
/// the task side's reference.
///
/// # Safety
/// `job` is live and this is its one completion.
unsafe fn complete<F, T>(job: *mut Job<F, T>, out: Result<T, BlockingJoinError>) {
    // SAFETY: the caller's contract.
    let shared = unsafe { &(*job).shared };
    // SAFETY: COMPLETE is not set yet, so the handle does not read `out`.
    shared.out.with_mut(|p| unsafe { *p = Some(out) });
    // AcqRel: Release publishes the output; Acquire sees the waker the handle stored.
    let prev = shared.state.fetch_or(COMPLETE, Ordering::AcqRel);
    if prev & WAKER_SET != 0 {
        // SAFETY: WAKER_SET was set when COMPLETE went in, so the cell is ours (module docs).
        let waker = shared.waker.with_mut(|p| unsafe { (*p).take() });
        if let Some(waker) = waker {
            waker.wake();
        }
    }
    if shared.refs.fetch_sub(1, Ordering::Release) == 1 {
        fence(Ordering::Acquire);
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
