//! [`JoinHandle`]: the owner's end of a spawned future. It waits on the task's join signal,
//! the crate's one completion primitive ([`Signal`](crate::Signal), `latch.rs`): an `.await`
//! registers (or replaces) the awaiting task's waker in it, a blocking [`JoinHandle::join`]
//! waits on it as a fork-join half or a latch is waited on (help-until-complete on a worker,
//! park elsewhere). Every change of the task's state word is a transition in `state.rs`.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll};

use super::error::JoinError;
use super::header::Header;
use super::state::{TransitionToCancelled, TransitionToJoinHandleDropped};

/// The owner's end of a spawned future: await it (it is a `Future`), or [`join`](Self::join)
/// it from synchronous code, or [`abort`](Self::abort) it. Dropping it detaches the task: it
/// still runs to completion, and its output is dropped.
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
/// let handle = pool.spawn_future(async { 6 * 7 }).unwrap();
/// assert_eq!(handle.join().unwrap(), 42);
/// let handle = pool.spawn_future(async { "awaited" }).unwrap();
/// assert_eq!(pool.block_on(handle).unwrap(), "awaited");
/// # }
/// ```
pub struct JoinHandle<T> {
    header: NonNull<Header>,
    _output: PhantomData<T>,
}

// SAFETY: the handle only moves the output (T: Send) between threads; the task is Send.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: the `&self` methods (`abort`, `is_finished`) are atomic operations on the task.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    /// `header` is a task whose output type is `T`; the handle takes over the reference and the
    /// JOIN_INTEREST the task was created with.
    pub(crate) unsafe fn from_raw(header: NonNull<Header>) -> Self {
        Self { header, _output: PhantomData }
    }

    /// The task (for the loom models' `waker_of`).
    #[cfg(all(test, loom))]
    pub(crate) fn header(&self) -> NonNull<Header> {
        self.header
    }

    /// Waits for the task and returns its output. On one of the pool's worker threads it runs
    /// other tasks meanwhile (help-until-complete, so waiting inside the pool cannot deadlock
    /// on the task it waits for); on any other thread it spins briefly, then parks.
    ///
    /// # Errors
    /// The task was cancelled, or panicked.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let handles: Vec<_> = (0..4u64).map(|i| pool.spawn_future(async move { i * i }).unwrap()).collect();
    /// let squares: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    /// assert_eq!(squares, [0, 1, 4, 9]);
    /// # }
    /// ```
    pub fn join(self) -> Result<T, JoinError> {
        let header = self.header;
        if !Header::is_complete(header) {
            // SAFETY: the JoinHandle's reference keeps the header and its scheduler alive; we
            // are the join signal's one waiter. The wait returns once the signal is set.
            unsafe {
                let sched = Header::sched(header);
                (sched.ops.wait)(sched.pool, &header.as_ref().join);
            }
        }
        debug_assert!(Header::is_complete(header));
        // SAFETY: complete (seen with Acquire, or the signal set), and T is the output type.
        unsafe { read_output_into::<T>(header) }
    }

    /// Cancels the task unless it has completed. An idle task's future is dropped right here;
    /// a queued one is dropped by the worker that dequeues it; a running one when its current
    /// poll returns `Pending` (if that poll completes it, the output is kept). The handle then
    /// reports [`JoinError::is_cancelled`].
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
    /// let (_keep, rx) = std::sync::mpsc::channel::<()>();
    /// // A task that waits forever for a message (a real one would await I/O).
    /// let handle = pool.spawn_future(async move { let _rx = rx; std::future::pending::<()>().await }).unwrap();
    /// handle.abort(); // its future (and `rx` in it) is dropped
    /// assert!(handle.join().unwrap_err().is_cancelled());
    /// # }
    /// ```
    pub fn abort(&self) {
        let header = self.header;
        // SAFETY: the JoinHandle's reference keeps the header alive.
        let h = unsafe { header.as_ref() };
        match h.state.transition_to_cancelled() {
            // SAFETY: we claimed RUNNING on the idle task.
            TransitionToCancelled::CancelIdle => unsafe { (h.vtable.cancel_claimed)(header) },
            TransitionToCancelled::DoNothing => {}
        }
    }

    /// Whether the task has completed (its output, or error, is ready).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
    /// let handle = pool.spawn_future(async { 1 + 1 }).unwrap();
    /// while !handle.is_finished() {
    ///     std::thread::yield_now(); // do something else meanwhile
    /// }
    /// assert_eq!(handle.join().unwrap(), 2); // does not wait
    /// # }
    /// ```
    pub fn is_finished(&self) -> bool {
        Header::is_complete(self.header)
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let header = self.header;
        if !Header::is_complete(header) {
            // SAFETY: the JoinHandle's reference keeps the header alive; we are the join
            // signal's one waiter (a `&mut` poll, or `join`, which takes the handle).
            if unsafe { header.as_ref().join.register(cx.waker()) } {
                return Poll::Pending;
            }
        }
        // SAFETY: complete (seen with Acquire), or the signal is being set (Acquire: the
        // output was stored before), and T is the output type.
        Poll::Ready(unsafe { read_output_into::<T>(header) })
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        let header = self.header;
        // SAFETY: the JoinHandle's reference keeps the header alive.
        let h = unsafe { header.as_ref() };
        match h.state.transition_to_join_handle_dropped() {
            // SAFETY: complete and JOIN_INTEREST still ours: the output is ours to drop; then
            // our reference, once.
            TransitionToJoinHandleDropped::DropOutput => unsafe {
                (h.vtable.drop_output)(header);
                Header::ref_dec(header);
            },
            TransitionToJoinHandleDropped::Detached => {}
            // Idle, no waker anywhere: it can never run again.
            // SAFETY: the last reference, seen with Acquire.
            TransitionToJoinHandleDropped::Dealloc => unsafe { (h.vtable.dealloc)(header) },
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("state", &Header::state(self.header)).finish()
    }
}

/// Moves the output out (the task is complete).
///
/// # Safety
/// Called by the JoinHandle after it saw COMPLETE or the join signal set (Acquire); `T` is
/// the future's output type.
unsafe fn read_output_into<T>(header: NonNull<Header>) -> Result<T, JoinError> {
    let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
    // SAFETY: the JoinHandle's reference; the vtable matches the allocation; `T` matches.
    unsafe { (header.as_ref().vtable.read_output)(header, core::ptr::addr_of_mut!(out).cast::<()>()) };
    match out {
        Poll::Ready(result) => result,
        Poll::Pending => unreachable!("read_output wrote nothing"),
    }
}
