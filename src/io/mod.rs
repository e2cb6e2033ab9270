//! The I/O driver hook (design text 003: "every worker try-locks the I/O poller"): a
//! [`Driver`] that a pool calls at its workers' tick ends (non-blocking, one worker at a time)
//! and that one idle worker blocks in instead of its parker, as tokio's driver does. The core
//! knows only the trait (`no_std` + `alloc`); the `net` feature provides one on the OS poller
//! with async sockets (`crate::net`).
//!
//! # Who calls what
//! * **Tick end** (`scheduler::worker`, `end_tick`, every 128 tasks): a worker that gets the
//!   driver's try-lock calls [`Driver::poll`]. One Relaxed load when no driver is installed.
//! * **Parking**: the idle worker that holds the timer-parker role (`time::driver`) takes the
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
//! * **Waking**: every path that wakes a particular worker (a notification's `wake_one`,
//!   shutdown, a new earliest timer, the role's hand-over) unparks its parker and, if that
//!   worker holds the role, calls [`Driver::unpark`] too. A worker that claims the role after
//!   such a wake re-reads the pool's `Sync` word before it blocks (a SeqCst claim, then a
//!   SeqCst load; the waker's notification came before its SeqCst read of the role), so it
//!   never blocks through a wake it was meant to get.

use alloc::boxed::Box;
use core::fmt;
use core::time::Duration;

use crate::platform::Spawner;
use crate::error::Error;
use crate::scheduler::ThreadPool;
use crate::sync::{fence, AtomicBool, AtomicPtr, Ordering};

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
/// let pool = pool::ThreadPool::new(pool::Config { max_threads: 1, ..Default::default() }).unwrap();
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
    /// workers may still call the other methods, or from [`ThreadPool::set_driver`]'s when the
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

/// The pool's installed driver (at most one, set once), the lock around `poll` / `park`, and
/// whether the pool shut down (its driver is told once, however installing and shutting down
/// interleave).
pub(crate) struct DriverSlot {
    /// A leaked `Box<Box<dyn Driver>>` (a thin pointer), or null. Set once, freed on drop.
    driver: AtomicPtr<Box<dyn Driver>>,
    busy: AtomicBool,
    /// The pool shut down (`shutdown`).
    closed: AtomicBool,
    /// `Driver::shutdown` was called (by `shutdown` or by a `set` that came after it).
    told: AtomicBool,
}

impl fmt::Debug for DriverSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverSlot").field("installed", &self.get().is_some()).finish_non_exhaustive()
    }
}

impl Drop for DriverSlot {
    fn drop(&mut self) {
        let ptr = self.driver.load(Ordering::Acquire);
        if !ptr.is_null() {
            // SAFETY: leaked from a Box in `set`; the pool is being freed, nobody calls it now.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}

/// The driver's lock, released on drop.
pub(crate) struct DriverGuard<'a> {
    slot: &'a DriverSlot,
    pub(crate) driver: &'a dyn Driver,
}

impl Drop for DriverGuard<'_> {
    fn drop(&mut self) {
        self.slot.busy.store(false, Ordering::Release);
    }
}

impl DriverSlot {
    pub(crate) fn new() -> Self {
        Self {
            driver: AtomicPtr::new(core::ptr::null_mut()),
            busy: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            told: AtomicBool::new(false),
        }
    }

    /// The pool shut down: tells the installed driver ([`Driver::shutdown`]), now or when one
    /// is installed later (`set`). Store, fence, load on both sides (a Dekker pair; loom
    /// checks it through the fences): either this load sees the driver, or `set`'s load of
    /// `closed` sees the store; `told` makes it once.
    pub(crate) fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.tell();
    }

    fn tell(&self) {
        let ptr = self.driver.load(Ordering::Acquire);
        if !ptr.is_null() && !self.told.swap(true, Ordering::AcqRel) {
            // SAFETY: set once, freed only when the pool is.
            unsafe { &**ptr }.shutdown();
        }
    }

    /// The driver, if one is installed (Acquire: pairs with `set`'s Release).
    #[inline]
    pub(crate) fn get(&self) -> Option<&dyn Driver> {
        let ptr = self.driver.load(Ordering::Acquire);
        // SAFETY: set once, freed only when the pool is.
        (!ptr.is_null()).then(|| unsafe { &**ptr })
    }

    /// Whether a driver is installed (one Relaxed load: the tick end's check).
    #[inline]
    pub(crate) fn is_installed(&self) -> bool {
        !self.driver.load(Ordering::Relaxed).is_null()
    }

    /// The lock, if free.
    pub(crate) fn try_lock(&self) -> Option<DriverGuard<'_>> {
        let driver = self.get()?;
        self.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).ok()?;
        Some(DriverGuard { slot: self, driver })
    }

    /// The lock, waiting for a tick end's `poll` to finish (the timer parker's `park`). The
    /// holder may be preempted mid-poll (more threads than cores), so the wait spins a little,
    /// then sleeps in short steps on `parker` (`worker::backoff`) instead of spinning through
    /// the holder's lost time slice. A wake aimed at the caller meanwhile is not lost: it holds
    /// the timer-parker role, so its waker unparks the driver too, and the `park` it enters
    /// next returns at once.
    pub(crate) fn lock<P: crate::Parker>(&self, parker: &P) -> Option<DriverGuard<'_>> {
        let driver = self.get()?;
        let mut spins = 0;
        while self.busy.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            crate::scheduler::worker::backoff(parker, &mut spins);
        }
        Some(DriverGuard { slot: self, driver })
    }

    /// Installs `driver`. `Err(Error::AlreadyStarted)` if one is installed (the new one is
    /// dropped); `Err(Error::Shutdown)` if the pool shut down first (it stays installed, and
    /// has been told).
    fn set(&self, driver: Box<dyn Driver>) -> Result<(), Error> {
        let boxed = Box::into_raw(Box::new(driver));
        if self.driver.compare_exchange(core::ptr::null_mut(), boxed, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            // SAFETY: not published: still ours.
            drop(unsafe { Box::from_raw(boxed) });
            return Err(Error::AlreadyStarted);
        }
        // The other half of `shutdown`'s pair.
        fence(Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.tell();
            return Err(Error::Shutdown);
        }
        Ok(())
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Installs the pool's I/O driver (once). From then on the workers poll it at their tick
    /// ends and one idle worker blocks in it (see [`crate::io`]).
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] if a driver is already installed (the new one is dropped);
    /// [`Error::Shutdown`] if the pool was shut down (the driver has been told:
    /// [`Driver::shutdown`]).
    ///
    /// Example: [`Driver`].
    pub fn set_driver(&self, driver: Box<dyn Driver>) -> Result<(), Error> {
        let inner = self.inner();
        inner.runtime.driver.set(driver)?;
        // Idle workers parked before it existed: one takes the role and blocks in it.
        inner.notify(false);
        Ok(())
    }
}
