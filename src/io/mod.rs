//! The I/O driver hook (design text 003: "every worker try-locks the I/O poller"): a
//! [`Driver`] that a pool calls at its workers' tick ends (non-blocking, one worker at a time)
//! and that one idle worker blocks in instead of its parker, as tokio's driver does. The core
//! knows only the trait (`no_std` + `alloc`); the `net` feature provides one on the OS poller
//! with async sockets (`crate::net`).
//!
//! # Who calls what
//! * **Tick end** (`scheduler::run`, `end_tick`, every 128 tasks): a worker that gets the
//!   driver's try-lock calls [`Driver::poll`]. One Relaxed load when no driver is installed.
//! * **Parking**: the idle worker that holds the timer-parker role (`scheduler::park`) takes the
//!   lock and blocks in [`Driver::park`] with the next timer deadline as its timeout, instead of
//!   its parker. It skips the idle spin before that (`scheduler::sleep`, `park`): while it
//!   spins nobody watches the I/O, so requests that arrive wait for the spin to end (and
//!   with more threads than cores the spin takes CPU from the threads that work). Every
//!   other idle worker spins, then parks on its parker, without a timeout. A worker
//!   waiting for a latch (`wait_for`, help-until-complete) never blocks in the driver (the
//!   latch's setter unparks only its parker) and, with a driver installed, does not take the
//!   role either: so while *every* worker waits for a latch, neither I/O nor timers are
//!   watched until one of them runs again (a pool whose tasks all block in joins on work
//!   that waits for I/O or a timer needs another worker).
//! * **Shutdown**: once tasks are no longer polled, the pool calls [`Driver::shutdown`] (after
//!   firing its timers): the tasks waiting for I/O are woken and cancelled, as sleeping ones
//!   are, since the runtime keeps no list of idle tasks to cancel (`crate::runtime`).
//! * **Waking**: every path that wakes a particular worker (a notification's
//!   `take_sleeper`, shutdown, a new earliest timer, the role's hand-over) unparks its parker
//!   and, if that worker holds the role, calls [`Driver::unpark`] too. A worker that claims the
//!   role after such a wake re-reads the pool's `Sync` word and its own idle bit
//!   (`Protocol::still_announced`) before it blocks (a SeqCst claim, then the reads; the
//!   waker's notification or bit take came before its SeqCst read of the role), so it never
//!   blocks through a wake it was meant to get.

use core::time::Duration;


/// An I/O driver (see the module docs for when the pool calls each method). All three may be
/// called from any of the pool's threads; `poll` and `park` never concurrently (the pool holds
/// a lock around them), `unpark` at any time.
///
/// ```
/// use core::sync::atomic::{AtomicUsize, Ordering};
/// use core::time::Duration;
///
/// /// A driver with no I/O: parks by sleeping (a real one blocks in epoll, kqueue, an RTOS
/// /// event group...), and counts its calls.
/// #[derive(Default)]
/// struct Counting(AtomicUsize);
/// impl pool::io::Driver for Counting {
///     fn poll(&self) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
///     fn park(&self, timeout: Option<Duration>) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         std::thread::sleep(timeout.unwrap_or(Duration::from_millis(1)).min(Duration::from_millis(1)));
///     }
///     fn unpark(&self) {}
/// }
///
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap();
/// pool.set_driver(Box::new(Counting::default())).unwrap();
/// pool.block_on(pool.sleep(Duration::from_millis(5))); // the idle worker waits in `park`
/// # }
/// ```
pub trait Driver: Send + Sync + 'static {
    /// Dispatches whatever I/O is ready (wakes the tasks waiting for it) without blocking.
    fn poll(&self);
    /// Blocks until some I/O is ready, [`unpark`](Self::unpark) is called, or `timeout`
    /// passes (`None`: no limit), then dispatches what is ready. May return early. An
    /// `unpark` that comes before `park` makes it return at once (the token is kept).
    fn park(&self, timeout: Option<Duration>);
    /// Makes a thread blocked in [`park`](Self::park) return; from any thread.
    fn unpark(&self);
    /// The pool is shutting down and polls no task any more: wake every task that waits for
    /// I/O (the pool cancels them: their futures are dropped, their `JoinHandle`s report
    /// cancelled), and make later waits fail at once instead of waiting for a poll that will
    /// not come. Called once: from the thread that shuts the pool down (or drops it), while
    /// workers may still call the other methods, or from [`ThreadPool::set_driver`](crate::ThreadPool::set_driver)'s when the
    /// driver is installed after the shutdown began. The default does nothing: a driver whose
    /// waiters are not the pool's tasks (a C host's) handles shutdown itself.
    fn shutdown(&self) {}
}

/// A shared driver (the pool holds one reference; its sockets others).
#[cfg(target_has_atomic = "ptr")]
impl<D: Driver + ?Sized> Driver for alloc::sync::Arc<D> {
    fn poll(&self) {
        (**self).poll();
    }
    fn park(&self, timeout: Option<Duration>) {
        (**self).park(timeout);
    }
    fn unpark(&self) {
        (**self).unpark();
    }
    fn shutdown(&self) {
        (**self).shutdown();
    }
}
