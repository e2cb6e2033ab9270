//! [`JoinError`]: why a task produced no output. A leaf of the runtime (the harness stores it,
//! the `JoinHandle` returns it).

use core::any::Any;
use core::fmt;

use alloc::boxed::Box;

/// Why a task produced no output: it was cancelled ([`JoinHandle::abort`](super::JoinHandle::abort), or the pool shut
/// down or refused it before it finished), or its future panicked (`std` only; without `std` a
/// panic in a task aborts).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
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
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
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
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
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
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
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
