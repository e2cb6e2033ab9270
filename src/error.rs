//! [`Error`]: why an operation of a pool (either kind), a latch or the C layer failed. One
//! error type for the whole crate, at the bottom of the layers so that every module may
//! return it; the C layer maps each variant to a status code (`capi`).

use core::fmt;

/// Why a pool operation failed.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, Error, ThreadPool};
///
/// let too_many = Config::default().with_max_threads(pool::MAX_THREADS + 1);
/// assert_eq!(ThreadPool::new(too_many).unwrap_err(), Error::InvalidArgument);
///
/// let pool = ThreadPool::new(Config::default()).unwrap();
/// pool.shutdown().unwrap();
/// let refused = pool.spawn(|| ()).unwrap_err();
/// assert_eq!(refused, Error::Shutdown);
/// assert_eq!(refused.to_string(), "the pool is shut down");
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range (or, at the C boundary, a pointer is NULL).
    InvalidArgument,
    /// The pool is shutting down or shut down; the work was not accepted.
    Shutdown,
    /// The pool has no thread and could not start one; the work was not accepted.
    Spawn,
    /// A configuration that must come before first use came after it: the process-wide
    /// blocking pool was already built ([`configure_global_blocking`](crate::configure_global_blocking)).
    AlreadyStarted,
    /// A count would leave its range ([`CountLatch::try_add`](crate::CountLatch::try_add));
    /// nothing was changed.
    Overflow,
    /// The allocator failed: nothing was built (a constructor), or the thread was not started.
    OutOfMemory,
    /// The pool was inherited from the parent process through `fork()`: its threads are in
    /// the parent, so in this process it takes no work (the tasks the parent queued never run
    /// here) and its shutdown has nothing to wait for. Dropping it frees what it can and
    /// returns. The global pools are not inherited: the child's are reset, and work.
    Forked,
    /// The pool's queue holds as many waiting tasks as its bound allows
    /// ([`BlockingConfig::max_queued`](crate::BlockingConfig::max_queued)); the work was not
    /// accepted and is still the caller's. A place frees when a waiting task starts.
    Full,
    /// The task is not waiting in the queue ([`Queue::cancel`](crate::Queue::cancel)): it has
    /// started (it runs or ran exactly once), was cancelled already, or was never submitted
    /// there; nothing was changed.
    Busy,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::InvalidArgument => "invalid argument",
            Error::Shutdown => "the pool is shut down",
            Error::Spawn => "no thread could be started",
            Error::AlreadyStarted => "already started: configure it before its first use",
            Error::Overflow => "a count would overflow",
            Error::OutOfMemory => "out of memory",
            Error::Forked => "the pool was inherited through fork: unusable in this process",
            Error::Full => "the queue is full",
            Error::Busy => "the task is not waiting in the queue",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
