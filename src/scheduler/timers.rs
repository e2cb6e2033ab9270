//! The pool's side of its timers: the entries of the pool's table a timer reaches it through
//! (`any_pool.rs`), the tick-end maintenance (firing due timers, polling the I/O driver),
//! shutdown's fire, and [`ThreadPool::submit_after`]. Who parks on the next deadline is
//! `park.rs`'s.

use core::ptr::NonNull;
use core::time::Duration;

use alloc::boxed::Box;

use super::inner::{release_pool, Inner};
use super::handle::ThreadPool;
use super::worker::Worker;
use crate::error::Error;
use crate::platform::Spawner;
use crate::sync::{fence, Ordering};
use crate::task::{Batch, Task};
use crate::timer::wheel::{tick_for_deadline, tick_of, Action, Entry, Registered};
use crate::timer::Timers;

/// Ticks past a deadline after which any worker (not only worker 0) fires timers at its tick
/// end.
pub(crate) const STALE_TICKS: u64 = 2;

impl<S: Spawner> Inner<S> {
    #[inline]
    pub(crate) fn timers(&self) -> &Timers {
        &self.timers
    }

    /// # Safety (all `*_of`: the timers' entries of the pool's table, `any_pool.rs`)
    /// `pool` is a live `Inner<S>`.
    pub(super) unsafe fn timers_of(pool: NonNull<()>) -> NonNull<Timers> {
        // SAFETY: the caller's contract.
        NonNull::from(unsafe { pool.cast::<Self>().as_ref() }.timers())
    }

    pub(super) unsafe fn now_of(pool: NonNull<()>) -> Option<u64> {
        // SAFETY: the caller's contract.
        unsafe { pool.cast::<Self>().as_ref() }.spawner.now_ns()
    }

    pub(super) unsafe fn acquire_of(pool: NonNull<()>) {
        // SAFETY: the caller's contract.
        unsafe { pool.cast::<Self>().as_ref() }.acquire();
    }

    /// A timer became the earliest (module docs).
    pub(super) unsafe fn kick_of(pool: NonNull<()>) {
        // SAFETY: the caller's contract.
        let inner = unsafe { pool.cast::<Self>().as_ref() };
        // After `register` released the wheel's lock with the new deadline in it: the claimer
        // reads the deadline under that lock after its claim (`scheduler::park`, "The timer
        // parker").
        fence(Ordering::SeqCst);
        if let Some(holder) = inner.protocol.role_holder(Ordering::SeqCst) {
            if let Some(worker) = inner.worker_at(holder) {
                // SAFETY: workers live until the pool is dropped.
                inner.unpark_worker(unsafe { worker.as_ref() });
            }
            return;
        }
        if inner.current_context().is_none() {
            inner.notify_cold(false);
        }
    }

    /// Hook: the end of a worker's tick (`scheduler::run`, `end_tick`): fires due timers
    /// and polls the I/O driver (`crate::io`). Two Relaxed loads when no timer is pending and
    /// no driver is installed.
    #[inline]
    pub(crate) fn maintenance_at_tick_end(&self, me: &Worker<S>) {
        if self.timers().pending() != 0 {
            self.timers_due(me);
        }
        if self.driver.is_installed() {
            self.poll_driver();
        }
    }

    #[cold]
    #[inline(never)]
    fn timers_due(&self, me: &Worker<S>) {
        let Some(now) = self.spawner.now_ns() else { return };
        // Worker 0 fires what is due; the others only what is overdue (worker 0 is busy).
        let late = if me.index == 0 { 0 } else { STALE_TICKS };
        self.timers().fire_if_late(tick_of(now), late);
    }

    /// One worker at a time polls the driver (try-lock; design text 003).
    #[cold]
    #[inline(never)]
    fn poll_driver(&self) {
        if let Some(guard) = self.driver.try_lock() {
            guard.driver.poll();
        }
    }

    /// Hook: shutdown (`Inner::release_waits`), once tasks are no longer polled: closes the
    /// wheel and fires every pending timer (module docs of `crate::time`).
    pub(crate) fn shutdown_timers(&self) {
        self.timers().shutdown();
    }
}

/// Why [`ThreadPool::try_submit_after`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterError {
    /// As `submit`, or no clock (`InvalidArgument`).
    Pool(Error),
    /// The entry could not be allocated.
    NoMemory,
}

/// A delayed intrusive task ([`ThreadPool::submit_after`]): the one allocation per call.
#[repr(C)]
struct Delayed<S: Spawner> {
    /// First: the wheel's pointer to the entry is a pointer to the box.
    entry: Entry,
    task: NonNull<Task>,
    pool: NonNull<Inner<S>>,
}

impl<S: Spawner> Delayed<S> {
    /// The entry fired: free the box, queue the task (accepted even during shutdown: it is part
    /// of the queued work), and drop the box's reference on the pool.
    ///
    /// # Safety
    /// `entry` is the entry of a leaked `Box<Delayed<S>>`, handed over by the wheel.
    unsafe fn fire(entry: NonNull<Entry>, _shutdown: bool) {
        // SAFETY: the caller's contract; `entry` is the first field (repr(C)).
        let this = unsafe { Box::from_raw(entry.as_ptr().cast::<Self>()) };
        let (task, pool) = (this.task, this.pool);
        drop(this);
        // SAFETY: the box's reference keeps the pool alive until `release_pool` below.
        let inner = unsafe { pool.as_ref() };
        match inner.current_context() {
            Some(me) => inner.push_ring_cold(me, task),
            // Internal push: accepted after the injector closed (shutdown runs what is left in
            // it once the workers are gone).
            None => {
                let _ = inner.injector.push(Batch::from(task), false);
            }
        }
        inner.notify_cold(false);
        // SAFETY: the box's reference, taken in `submit_after`.
        unsafe { release_pool::<S>(pool) };
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Submits `task` to run no earlier than `delay` from now, exactly once (libdispatch's
    /// `dispatch_after_f`). Allocates one small entry per call (a [`Task`] has no room for a
    /// deadline), freed when the delay expires. At shutdown a delayed task still pending is
    /// queued then and runs early, as every queued task does: shutdown never waits for a
    /// deadline. A zero delay submits at once.
    ///
    /// # Errors
    /// As [`submit`](Self::submit) ([`Error::Shutdown`] once shutdown began, from outside the
    /// pool's threads); [`Error::InvalidArgument`] on a platform without a clock. On error the
    /// task was not queued and is still the caller's.
    ///
    /// # Safety
    /// As [`submit`](Self::submit).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use pool::{Config, Task, ThreadPool};
    ///
    /// static RAN_AT: AtomicU64 = AtomicU64::new(0);
    /// static mut LATER: Task = Task::new(later);
    /// static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    /// unsafe extern "C" fn later(_: *mut Task) {
    ///     RAN_AT.store(START.get().unwrap().elapsed().as_nanos() as u64, Ordering::Release);
    /// }
    ///
    /// let pool = ThreadPool::new(Config::default()).unwrap();
    /// START.set(std::time::Instant::now()).unwrap();
    /// // SAFETY: a static task, submitted once.
    /// unsafe { pool.submit_after(NonNull::new_unchecked(&raw mut LATER), std::time::Duration::from_millis(3)).unwrap() };
    /// while RAN_AT.load(Ordering::Acquire) == 0 {
    ///     std::thread::yield_now();
    /// }
    /// assert!(RAN_AT.load(Ordering::Acquire) >= 3_000_000);
    /// # }
    /// ```
    pub unsafe fn submit_after(&self, task: NonNull<Task>, delay: Duration) -> Result<(), Error> {
        // SAFETY: forwarded contract.
        match unsafe { self.try_submit_after(task, delay) } {
            Ok(()) => Ok(()),
            Err(AfterError::Pool(e)) => Err(e),
            Err(AfterError::NoMemory) => alloc::alloc::handle_alloc_error(core::alloc::Layout::new::<Delayed<S>>()),
        }
    }

    /// [`submit_after`](Self::submit_after), reporting a failed allocation instead of aborting
    /// (the C layer's `POOL_ERR_NOMEM`).
    ///
    /// # Safety
    /// As [`submit`](Self::submit).
    pub(crate) unsafe fn try_submit_after(&self, task: NonNull<Task>, delay: Duration) -> Result<(), AfterError> {
        let inner = self.inner();
        let Some(now) = inner.spawner.now_ns() else { return Err(AfterError::Pool(Error::InvalidArgument)) };
        if delay.is_zero() {
            // SAFETY: forwarded contract.
            return unsafe { self.submit(task) }.map_err(AfterError::Pool);
        }
        if self.current_worker().is_none() && inner.injector.is_closed() {
            return Err(AfterError::Pool(inner.refusal()));
        }
        if inner.protocol.load(Ordering::Relaxed).spawned() == 0 {
            // A pool with no thread could never fire it: start one first (as `submit` does).
            self.start_first_thread().map_err(AfterError::Pool)?;
        }
        let deadline = now.saturating_add(u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX));
        let layout = core::alloc::Layout::new::<Delayed<S>>();
        // SAFETY: `Delayed` is not zero-sized.
        let boxed = unsafe { alloc::alloc::alloc(layout) }.cast::<Delayed<S>>();
        if boxed.is_null() {
            return Err(AfterError::NoMemory);
        }
        // SAFETY: a fresh allocation with `Delayed`'s layout: `Box::from_raw` frees it later.
        unsafe { boxed.write(Delayed::<S> { entry: Entry::new(), task, pool: NonNull::from(inner) }) };
        inner.acquire();
        // SAFETY: `boxed` is live; the entry is its first field.
        let entry = unsafe { NonNull::new_unchecked(core::ptr::addr_of_mut!((*boxed).entry)) };
        // SAFETY: the box stays put until the wheel fires it (it is never cancelled).
        match unsafe { inner.timers().register(entry, tick_for_deadline(deadline), Action::Call(Delayed::<S>::fire)) } {
            Registered::Queued { earliest } => {
                if earliest {
                    // SAFETY: the pool is live.
                    unsafe { Inner::<S>::kick_of(NonNull::from(inner).cast()) };
                }
                Ok(())
            }
            Registered::Elapsed => {
                // Due already: the entry is FIRED and ours again.
                // SAFETY: the wheel gave it back (`Elapsed` marks it fired without a call).
                unsafe { Delayed::<S>::fire(entry, false) };
                Ok(())
            }
            Registered::Closed => {
                // SAFETY: not registered: still ours.
                drop(unsafe { Box::from_raw(boxed) });
                // SAFETY: the reference taken above; the handle's pointer.
                unsafe { release_pool::<S>(self.inner) };
                // Shutdown began after the check above: as `submit` would then.
                // SAFETY: forwarded contract.
                unsafe { self.submit(task) }.map_err(AfterError::Pool)
            }
        }
    }
}
