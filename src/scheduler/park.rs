//! Parking an idle worker: on its parker, on the timer wheel's next deadline (the timer
//! parker role), or in the I/O driver; and unparking one.
//!
//! # The timer parker
//! The timer role (`Protocol`'s `role`) names at most one idle worker: the one that parks with a timeout on the
//! wheel's next deadline. A worker about to park claims the role if it is free and the wheel
//! is not empty (`Timers::pending`; SeqCst CAS), then reads `next_tick` under the wheel's
//! lock; a timer that becomes the earliest is linked under that lock, and its registrar then
//! reads the role (SeqCst fence and load). Either the parker's lock comes after the
//! registrar's unlock (it sees the new deadline), or its whole hold comes before the
//! registrar's: then its claim happened before the registrar's read of the role (the unlock's
//! Release, the lock's Acquire), which sees the parker and unparks it (a token it keeps if
//! it has not parked yet). When the
//! registering thread sees no parker it notifies the pool (one idle worker wakes, finds no
//! work and parks again, claiming the role), unless it is one of the pool's own workers: that
//! one claims the role itself when it runs dry, and meanwhile fires due timers at its tick ends.
//!
//! The parker gives the role back when it wakes, fires what is due and, if it leaves idle
//! while timers remain (woken for work, handed tasks by its own fire, or its wait is over),
//! unparks one other idle worker so the role is taken again (that worker finds no
//! notification and parks at once, claiming it): a task that the fire woke and that runs long
//! must not leave the later deadlines unwatched.

use core::time::Duration;

use super::inner::Inner;
use super::sync_word::State;
use super::worker::Worker;
use crate::platform::{Parker, Spawner};
use crate::sync::Ordering;
use crate::timer::wheel::{tick_of, NONE, TICK_SHIFT};

impl<S: Spawner> Inner<S> {
    /// Unparks worker `w`: its parker, and the I/O driver if `w` may be blocked in it
    /// (`crate::io`, "Waking"). Used by every path that wakes a particular worker.
    ///
    /// Nothing when `w` is the calling thread's own worker: it is awake, and re-reads `Sync`
    /// before it parks again (`wait_or`). That happens when the timer parker, dispatching
    /// I/O from inside its park, wakes tasks: their notification may pick its own idle-map
    /// bit, and the driver's unpark would cost a system call (an eventfd write) and an
    /// `epoll_wait` that returns at once on its next park.
    ///
    /// Out of line: its callers (a notify's wake, shutdown's, the timer role's hand-over) are
    /// cold, and an unpark costs far more than the call.
    #[inline(never)]
    pub(crate) fn unpark_worker(&self, w: &Worker<S>) {
        if self.current_context().is_some_and(|cx| core::ptr::eq(cx.worker(), w)) {
            return;
        }
        w.parker.unpark();
        // After the caller's take of its bit, or its notification or shutdown store: a
        // worker that claims the role later sees those in its re-reads (`park_worker`).
        if self.protocol.wakes_driver_of(w.index) {
            if let Some(driver) = self.driver.get() {
                driver.unpark();
            }
        }
    }

    /// Whether an idle worker that may drive would block in the I/O driver if it parked now
    /// (a driver is installed and nobody holds the timer-parker role): a hint, read Relaxed.
    #[inline]
    pub(crate) fn would_drive(&self, may_drive: bool) -> bool {
        may_drive && self.driver.is_installed() && self.protocol.role_holder(Ordering::Relaxed).is_none()
    }

    /// Hook: an idle worker parks (`scheduler::sleep`, `park`), in place of `me.parker.park()`.
    /// With timers pending or an I/O driver installed, and nobody in the timer-parker role, it
    /// takes the role: it blocks in the driver (if there is one and `may_drive`) or on its
    /// parker, until the next deadline (module docs). Otherwise it parks without a timeout.
    /// `is_done`: the condition of the wait the worker parks in, if any (`wait_or`), and
    /// `deadline`, when it gives up: the park returns by then.
    pub(crate) fn park_worker(&self, me: &Worker<S>, may_drive: bool, is_done: &dyn Fn() -> bool, deadline: Option<u64>) {
        let timers = self.timers();
        let installed = self.driver.is_installed();
        let drive = may_drive && installed;
        // With a driver installed, the role goes only to a worker that can block in it (one
        // waiting for a latch cannot): else the I/O would go unwatched while others idle.
        if (timers.pending() == 0 && !drive)
            || (installed && !may_drive)
            || !self.protocol.claim_role(me.index)
        {
            self.park_until(&me.parker, deadline);
            return;
        }
        // After the claim (and its fence, `Protocol::claim_role`): the wheel's next deadline
        // (under its lock: module docs), and any wake aimed at us before our claim was visible
        // (`unpark_worker`: it then unparked only our parker, which the driver does not
        // watch): a notification or shutdown in the word, or our bit taken from the idle set
        // (by a notify that may have written its word before our last idle spell).
        let next = timers.next_tick();
        let s = self.protocol.load(Ordering::SeqCst);
        if s.notified() || s.state() == State::Shutdown || !self.protocol.still_announced(me.index) {
            self.protocol.release_role();
            return;
        }
        // The earlier of the next timer and the wait's deadline.
        let at = [(next != NONE).then(|| next.saturating_mul(1 << TICK_SHIFT)), deadline].into_iter().flatten().min();
        let now = if at.is_none() { None } else { self.spawner.now_ns() };
        let timeout = at.zip(now).map(|(at, now)| Duration::from_nanos(at.saturating_sub(now)));
        if timeout != Some(Duration::ZERO) {
            match (drive, timeout) {
                (true, _) => {
                    if let Some(guard) = self.driver.lock(&me.parker) {
                        guard.driver.park(timeout);
                    }
                }
                (false, Some(timeout)) => me.parker.park_timeout(timeout),
                (false, None) => me.parker.park(),
            }
        }
        self.protocol.release_role();
        if timers.pending() != 0 {
            if let Some(now) = self.spawner.now_ns() {
                timers.fire(tick_of(now));
            }
        }
        if timers.pending() != 0 && self.leaves_idle(me, is_done) {
            // Leaving with timers pending (for notified work, for tasks our own fire woke into
            // our own queues, or because our wait is over): hand the role to another idle
            // worker, so a deadline passing while we run a long task still wakes someone.
            // (Not for the I/O driver alone: as tokio's, it is polled at tick ends meanwhile
            // and blocked in again by the next worker to go idle; a hand-over would cost a
            // wake-up per event batch.)
            self.unpark_idle_except(me.index);
        }
    }

    /// Parks `parker` (this thread's) until unparked, or at most until `deadline` (ns on the
    /// pool's clock).
    pub(crate) fn park_until(&self, parker: &S::Parker, deadline: Option<u64>) {
        match deadline.zip(self.spawner.now_ns()) {
            Some((at, now)) => parker.park_timeout(Duration::from_nanos(at.saturating_sub(now))),
            None => parker.park(),
        }
    }

    /// Whether the worker back from its park will run something rather than park again: work
    /// was notified, its own queues hold tasks (woken by its fire: `schedule_woken` queues
    /// them there without a notification), or the wait it parks in is over. A hint (Relaxed).
    fn leaves_idle(&self, me: &Worker<S>, is_done: &dyn Fn() -> bool) -> bool {
        self.protocol.load(Ordering::Relaxed).notified() || me.holds_tasks() || is_done()
    }
}

#[cfg(all(test, loom))]
mod loom;
