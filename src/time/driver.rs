//! The pool's side of its timers: the scheduler's hooks (tick end, parking, shutdown), the
//! type-erased table a timer reaches its pool through, and the `ThreadPool` methods
//! ([`ThreadPool::now`], [`ThreadPool::sleep`], [`ThreadPool::sleep_until`],
//! [`ThreadPool::submit_after`]).
//!
//! # The timer parker
//! `Timers::parker` names at most one idle worker: the one that parks with a timeout on the
//! wheel's next deadline. A worker about to park claims the role if it is free and the wheel
//! is not empty (SeqCst CAS, then a SeqCst read of `next_tick`); a timer that becomes the
//! earliest stores `next_tick` (SeqCst) and then reads `parker` (SeqCst). Store-load on both
//! sides (a Dekker pair): either the registering thread sees the parker and unparks it (a
//! token it keeps if it has not parked yet), or the parker sees the new deadline. When the
//! registering thread sees no parker it notifies the pool (one idle worker wakes, finds no
//! work and parks again, claiming the role), unless it is one of the pool's own workers: that
//! one claims the role itself when it runs dry, and meanwhile fires due timers at its tick ends.
//!
//! The parker gives the role back when it wakes, fires what is due and, if it leaves idle
//! while timers remain (woken for work, handed tasks by its own fire, or its wait is over),
//! unparks one other idle worker so the role is taken again (that worker finds no
//! notification and parks at once, claiming it): a task that the fire woke and that runs long
//! must not leave the later deadlines unwatched.

use core::ptr::NonNull;
use core::time::Duration;

use alloc::boxed::Box;

use super::wheel::{tick_for_deadline, tick_of, Action, Entry, Registered, TICK_SHIFT};
use super::{Instant, Sleep, TimerHandle, TimerOps, Timers, STALE_TICKS};
use crate::platform::{Parker, Spawner};
use crate::scheduler::worker::Worker;
use crate::error::Error;
use crate::scheduler::{Inner, ThreadPool};
use crate::sync::{fence, Ordering};
use crate::task::{Batch, Task};

impl<S: Spawner> Inner<S> {
    /// The table timers reach this pool through.
    pub(crate) const TIMER_OPS: TimerOps = TimerOps {
        timers: Self::timers_of,
        now_ns: Self::now_of,
        kick: Self::kick_of,
        acquire: Self::acquire_of,
        release: Self::release_of,
    };

    /// A handle on this pool's timers. The caller takes a reference (`acquire`) if the handle
    /// may outlive its own hold on the pool.
    pub(crate) fn timer_handle(&self) -> TimerHandle {
        TimerHandle { pool: NonNull::from(self).cast(), ops: &Self::TIMER_OPS }
    }

    #[inline]
    pub(crate) fn timers(&self) -> &Timers {
        &self.runtime.timers
    }

    /// # Safety (all `*_of`)
    /// `pool` is a live `Inner<S>`.
    unsafe fn timers_of(pool: NonNull<()>) -> NonNull<Timers> {
        // SAFETY: the caller's contract.
        NonNull::from(unsafe { pool.cast::<Self>().as_ref() }.timers())
    }

    unsafe fn now_of(pool: NonNull<()>) -> Option<u64> {
        // SAFETY: the caller's contract.
        unsafe { pool.cast::<Self>().as_ref() }.spawner.now_ns()
    }

    unsafe fn acquire_of(pool: NonNull<()>) {
        // SAFETY: the caller's contract.
        unsafe { pool.cast::<Self>().as_ref() }.runtime.acquire();
    }

    unsafe fn release_of(pool: NonNull<()>) {
        // SAFETY: the caller's contract; the pool's runtime frees it with the last reference.
        unsafe { crate::runtime::release_pool::<S>(pool) };
    }

    /// A timer became the earliest (module docs).
    unsafe fn kick_of(pool: NonNull<()>) {
        // SAFETY: the caller's contract.
        let inner = unsafe { pool.cast::<Self>().as_ref() };
        // Pairs with the fence after the parker's claim (module docs); `register` stored
        // `next_tick` with SeqCst before.
        fence(Ordering::SeqCst);
        let parker = inner.timers().parker.load(Ordering::SeqCst);
        if parker != 0 {
            if let Some(worker) = inner.worker_at(parker - 1) {
                // SAFETY: workers live until the pool is dropped.
                inner.unpark_worker(unsafe { worker.as_ref() });
            }
            return;
        }
        // SAFETY: a non-owning handle on a live pool (never dropped).
        let pool = core::mem::ManuallyDrop::new(ThreadPool::<S> { inner: pool.cast() });
        if pool.current_worker().is_none() {
            inner.notify(false);
        }
    }

    /// Hook: the end of a worker's tick (`scheduler::worker`, `end_tick`): fires due timers
    /// and polls the I/O driver (`crate::io`). Two Relaxed loads when no timer is pending and
    /// no driver is installed.
    #[inline]
    pub(crate) fn maintenance_at_tick_end(&self, me: &Worker<S>) {
        let next = self.timers().next_tick(Ordering::Relaxed);
        if next != super::wheel::NONE {
            self.timers_due(me, next);
        }
        if self.runtime.driver.is_installed() {
            self.poll_driver();
        }
    }

    #[cold]
    #[inline(never)]
    fn timers_due(&self, me: &Worker<S>, next: u64) {
        let Some(now) = self.spawner.now_ns() else { return };
        let now_tick = tick_of(now);
        // Worker 0 fires what is due; the others only what is overdue (worker 0 is busy).
        if now_tick >= next && (me.index == 0 || now_tick >= next.saturating_add(STALE_TICKS)) {
            self.timers().fire(now_tick, false);
        }
    }

    /// One worker at a time polls the driver (try-lock; design text 003).
    #[cold]
    #[inline(never)]
    fn poll_driver(&self) {
        if let Some(guard) = self.runtime.driver.try_lock() {
            guard.driver.poll();
        }
    }

    /// Unparks worker `w`: its parker, and the I/O driver if `w` may be blocked in it
    /// (`crate::io`, "Waking"). Used by every path that wakes a particular worker.
    ///
    /// Nothing when `w` is the calling thread's own worker: it is awake, and re-reads `Sync`
    /// before it parks again (`wait_or`). That happens when the timer parker, dispatching
    /// I/O from inside its park, wakes tasks: their notification may pick its own idle-map
    /// bit, and the driver's unpark would cost a system call (an eventfd write) and an
    /// `epoll_wait` that returns at once on its next park.
    #[inline]
    pub(crate) fn unpark_worker(&self, w: &Worker<S>) {
        if self.current_context().is_some_and(|cx| core::ptr::eq(cx.worker(), w)) {
            return;
        }
        w.parker.unpark();
        // SeqCst: after the caller's notification or shutdown store (and its fence), so a
        // worker that claims the role later sees those in its own re-read (`park_worker`).
        if self.timers().parker.load(Ordering::SeqCst) == w.index + 1 {
            if let Some(driver) = self.runtime.driver.get() {
                driver.unpark();
            }
        }
    }

    /// Whether an idle worker that may drive would block in the I/O driver if it parked now
    /// (a driver is installed and nobody holds the timer-parker role): a hint, read Relaxed.
    #[inline]
    pub(crate) fn would_drive(&self, may_drive: bool) -> bool {
        may_drive && self.runtime.driver.is_installed() && self.timers().parker.load(Ordering::Relaxed) == 0
    }

    /// Hook: an idle worker parks (`scheduler::sleep`, `park`), in place of `me.parker.park()`.
    /// With timers pending or an I/O driver installed, and nobody in the timer-parker role, it
    /// takes the role: it blocks in the driver (if there is one and `may_drive`) or on its
    /// parker, until the next deadline (module docs). Otherwise it parks without a timeout.
    /// `is_done`: the condition of the wait the worker parks in, if any (`wait_or`).
    pub(crate) fn park_worker(&self, me: &Worker<S>, may_drive: bool, is_done: &dyn Fn() -> bool) {
        let timers = self.timers();
        let installed = self.runtime.driver.is_installed();
        let drive = may_drive && installed;
        // With a driver installed, the role goes only to a worker that can block in it (one
        // waiting for a latch cannot): else the I/O would go unwatched while others idle.
        if (timers.next_tick(Ordering::Relaxed) == super::wheel::NONE && !drive)
            || (installed && !may_drive)
            || timers.parker.compare_exchange(0, me.index + 1, Ordering::SeqCst, Ordering::Relaxed).is_err()
        {
            me.parker.park();
            return;
        }
        // After the claim: the wheel's next deadline (module docs), and any wake aimed at us
        // before our claim was visible (`unpark_worker`: it then unparked only our parker,
        // which the driver does not watch). The fence is the claim's half of the Dekker pair
        // with `kick_of` (SeqCst accesses alone would do in the C++ model; loom checks the
        // pair only through fences).
        fence(Ordering::SeqCst);
        let next = timers.next_tick(Ordering::SeqCst);
        let s = self.load_sync(Ordering::SeqCst);
        if s.notified() || s.state() == crate::sync_word::State::Shutdown {
            timers.parker.store(0, Ordering::SeqCst);
            return;
        }
        let now = if next == super::wheel::NONE { None } else { self.spawner.now_ns() };
        let timeout = now.map(|now| Duration::from_nanos(next.saturating_mul(1 << TICK_SHIFT).saturating_sub(now)));
        if timeout != Some(Duration::ZERO) {
            match (drive, timeout) {
                (true, _) => {
                    if let Some(guard) = self.runtime.driver.lock(&me.parker) {
                        guard.driver.park(timeout);
                    }
                }
                (false, Some(timeout)) => me.parker.park_timeout(timeout),
                (false, None) => me.parker.park(),
            }
        }
        timers.parker.store(0, Ordering::SeqCst);
        if timers.next_tick(Ordering::Relaxed) != super::wheel::NONE {
            if let Some(now) = self.spawner.now_ns() {
                timers.fire(tick_of(now), true);
            }
        }
        if timers.next_tick(Ordering::Relaxed) != super::wheel::NONE && self.leaves_idle(me, is_done) {
            // Leaving with timers pending (for notified work, for tasks our own fire woke into
            // our own queues, or because our wait is over): hand the role to another idle
            // worker, so a deadline passing while we run a long task still wakes someone.
            // (Not for the I/O driver alone: as tokio's, it is polled at tick ends meanwhile
            // and blocked in again by the next worker to go idle; a hand-over would cost a
            // wake-up per event batch.)
            self.unpark_idle_except(me.index);
        }
    }

    /// Whether the worker back from its park will run something rather than park again: work
    /// was notified, its own queues hold tasks (woken by its fire: `schedule_woken` queues
    /// them there without a notification), or the wait it parks in is over. A hint (Relaxed).
    fn leaves_idle(&self, me: &Worker<S>, is_done: &dyn Fn() -> bool) -> bool {
        self.load_sync(Ordering::Relaxed).notified() || me.holds_tasks() || is_done()
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
        // SAFETY: the box's reference keeps the pool alive until `release_of` below.
        let inner = unsafe { pool.as_ref() };
        // SAFETY: a non-owning handle (never dropped).
        let handle = core::mem::ManuallyDrop::new(ThreadPool::<S> { inner: pool });
        match handle.current_worker() {
            Some(me) => {
                inner.push_ring(me, task);
                inner.notify(false);
            }
            None => {
                // Internal push: accepted after the injector closed (shutdown runs what is
                // left in it once the workers are gone).
                let _ = inner.injector.push(Batch::from(task), false);
                inner.notify(false);
            }
        }
        // SAFETY: the box's reference, taken in `submit_after`.
        unsafe { Inner::<S>::release_of(pool.cast()) };
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// The pool's clock ([`Spawner::now_ns`]), or `None` on a platform without one.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let a = pool.now().unwrap();
    /// let b = pool.now().unwrap();
    /// assert!(b >= a);
    /// # }
    /// ```
    pub fn now(&self) -> Option<Instant> {
        self.inner().spawner.now_ns().map(Instant::from_nanos)
    }

    /// Timers pending in this pool's wheel (sleeps, timeouts, intervals and delayed tasks not
    /// yet fired or cancelled).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// assert_eq!(pool.pending_timers(), 0);
    /// # }
    /// ```
    pub fn pending_timers(&self) -> usize {
        self.inner().timers().pending()
    }

    /// A timer on this pool that completes once `duration` has passed (counted from now).
    /// Usable anywhere: in the pool's tasks, in [`block_on`](Self::block_on), or from any other
    /// executor (it wakes through its waker). See [`time`](crate::time).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::time::{Duration, Instant};
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let start = Instant::now();
    /// pool.block_on(pool.sleep(Duration::from_millis(5)));
    /// assert!(start.elapsed() >= Duration::from_millis(5));
    /// # }
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let now = self.inner().spawner.now_ns();
        let deadline = now.map(|now| now.saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)));
        Sleep::bound(self.inner().timer_handle(), deadline, duration)
    }

    /// A timer on this pool that completes once its clock reaches `deadline`.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let at = pool.now().unwrap() + std::time::Duration::from_millis(2);
    /// pool.block_on(pool.sleep_until(at));
    /// assert!(pool.now().unwrap() >= at);
    /// # }
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::bound(self.inner().timer_handle(), Some(deadline.as_nanos()), Duration::ZERO)
    }

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
            return Err(AfterError::Pool(Error::Shutdown));
        }
        if inner.load_sync(Ordering::Relaxed).spawned() == 0 {
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
        inner.runtime.acquire();
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
                // SAFETY: the reference taken above.
                unsafe { Inner::<S>::release_of(NonNull::from(inner).cast()) };
                // Shutdown began after the check above: as `submit` would then.
                // SAFETY: forwarded contract.
                unsafe { self.submit(task) }.map_err(AfterError::Pool)
            }
        }
    }
}
