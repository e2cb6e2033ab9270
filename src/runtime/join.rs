//! [`JoinHandle`]: the owner's end of a spawned future, and [`JoinError`].

use core::any::Any;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll};

use alloc::boxed::Box;

use super::raw::{self, Header, JoinWaiter};

/// Why a task produced no output: it was cancelled ([`JoinHandle::abort`], or the pool shut
/// down or refused it before it finished), or its future panicked (`std` only; without `std` a
/// panic in a task aborts).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
/// let err = pool.spawn_future(async { panic!("boom") }).unwrap().join().unwrap_err();
/// assert!(err.is_panic() && !err.is_cancelled());
/// assert_eq!(err.to_string(), "task panicked");
/// # }
/// ```
pub struct JoinError {
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    pub(crate) fn cancelled() -> Self {
        Self { repr: Repr::Cancelled }
    }

    pub(crate) fn panic(payload: Box<dyn Any + Send + 'static>) -> Self {
        Self { repr: Repr::Panic(payload) }
    }

    /// The task was cancelled before it completed.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
    /// let handle = pool.spawn_future(std::future::pending::<()>()).unwrap(); // never completes
    /// handle.abort();
    /// assert!(handle.join().unwrap_err().is_cancelled());
    /// # }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task's future panicked.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
    /// let result = pool.block_on(pool.spawn_future(async { panic!("boom") }).unwrap());
    /// assert!(result.unwrap_err().is_panic());
    /// # }
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload (for `std::panic::resume_unwind`), or the error back if it was a
    /// cancellation.
    ///
    /// # Errors
    /// `self` when the task was cancelled rather than panicked.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
    /// let err = pool.spawn_future(async { std::panic::panic_any(7u32) }).unwrap().join().unwrap_err();
    /// let payload = err.try_into_panic().unwrap(); // or std::panic::resume_unwind(payload)
    /// assert_eq!(payload.downcast_ref::<u32>(), Some(&7));
    /// # }
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(payload) => Ok(payload),
            Repr::Cancelled => Err(self),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.repr {
            Repr::Cancelled => f.write_str("JoinError::Cancelled"),
            Repr::Panic(_) => f.write_str("JoinError::Panic(..)"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.repr {
            Repr::Cancelled => f.write_str("task was cancelled"),
            Repr::Panic(_) => f.write_str("task panicked"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for JoinError {}

/// The owner's end of a spawned future: await it (it is a `Future`), or [`join`](Self::join)
/// it from synchronous code, or [`abort`](Self::abort) it. Dropping it detaches the task: it
/// still runs to completion, and its output is dropped.
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
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
    #[cfg(loom)]
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
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// let handles: Vec<_> = (0..4u64).map(|i| pool.spawn_future(async move { i * i }).unwrap()).collect();
    /// let squares: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    /// assert_eq!(squares, [0, 1, 4, 9]);
    /// # }
    /// ```
    pub fn join(self) -> Result<T, JoinError> {
        // SAFETY: we are the JoinHandle.
        unsafe { raw::join_blocking(self.header) };
        // SAFETY: complete (join_blocking returns only then), and T is the output type.
        unsafe { raw::read_output_into::<T>(self.header) }
    }

    /// Cancels the task unless it has completed. An idle task's future is dropped right here;
    /// a queued one is dropped by the worker that dequeues it; a running one when its current
    /// poll returns `Pending` (if that poll completes it, the output is kept). The handle then
    /// reports [`JoinError::is_cancelled`].
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
    /// let (_keep, rx) = std::sync::mpsc::channel::<()>();
    /// // A task that waits forever for a message (a real one would await I/O).
    /// let handle = pool.spawn_future(async move { let _rx = rx; std::future::pending::<()>().await }).unwrap();
    /// handle.abort(); // its future (and `rx` in it) is dropped
    /// assert!(handle.join().unwrap_err().is_cancelled());
    /// # }
    /// ```
    pub fn abort(&self) {
        // SAFETY: we are the JoinHandle.
        unsafe { raw::abort(self.header) }
    }

    /// Whether the task has completed (its output, or error, is ready).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
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
            // SAFETY: we are the JoinHandle.
            if unsafe { raw::register_join_waiter(header, JoinWaiter::Waker(cx.waker().clone())) } {
                return Poll::Pending;
            }
        }
        // SAFETY: complete (seen with Acquire), and T is the output type.
        Poll::Ready(unsafe { raw::read_output_into::<T>(header) })
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: once, by the JoinHandle.
        unsafe { raw::drop_join_handle(self.header) }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("state", &Header::state(self.header)).finish()
    }
}
