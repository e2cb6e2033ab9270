//! The sleep/wake protocol as the workers run it: `notify` (and whom it wakes), `wait_or` (a
//! worker's wait: consume, go idle, spin, park), and shutdown's hand-shake. Design text 002
//! "Counter/Sync Algorithm", made concrete. The decisions are the `Sync` word's transitions
//! (`sync_word.rs`), their atomics and fences `protocol.rs`'s; the full argument for why no
//! wake-up is lost and no herd forms is in `scheduler/README.md`.
//!
//! Summary of the rules:
//! * **Throttle**: a notify wakes (or spawns) a thread only when the state is `Pending`, or when
//!   the caller is the waking thread handing its right on. So at most one thread is being woken
//!   at a time and one submit wakes at most one thread.
//! * **Never lose a notify**: every notify sets `notified`. A thread about to sleep first
//!   consumes `notified` if set and searches again instead.
//! * **Dekker between parking and notifying**: a parking worker sets its bit in the idle map,
//!   then (SeqCst fence) re-reads `Sync`; a notifier updates `Sync`, then (SeqCst fence) reads
//!   the idle map. At least one of them sees the other: either the worker sees `notified` and
//!   does not sleep, or the notifier sees the bit and unparks it.
//! * **Spin before sleeping**: an idle worker first watches `Sync` for `idle_spins` rounds,
//!   counted in `spinning` instead of the idle map; a notifier that sees a spinner unparks
//!   nobody (the same Dekker pair covers the hand-over). Only work in the injector ends a spin
//!   early (README, "Idle means idle").

use core::ptr::NonNull;

use super::context::WorkerContext;
use super::inner::Inner;
use super::protocol::WaitOutcome;
use super::sync_word::{State, WaitEnd, Waiter, Wake};
use super::worker::Worker;
use crate::error::Error;
use crate::platform::{Parker, Spawner};
use crate::sync::{spin_hint, Backoff, Ordering};

/// How `wait_or` ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// A notification was consumed; search again (as the waking thread if true).
    Notified(bool),
    /// The park filled the worker's own queues (an I/O or timer dispatch inside it): run them,
    /// owing nobody a search (no notification was consumed; README, "Tasks woken on a worker").
    LocalWork,
    /// The waiter's condition became true.
    Done,
    /// The pool is shutting down.
    Shutdown,
}

impl<S: Spawner> Inner<S> {
    /// After `join` pushed a job on its worker's join deque: wakes (or starts) a thread only if
    /// one is idle (or may be started) and no wake is in flight; otherwise one load and nothing
    /// written. Skips the `notified` flag on purpose: a worker going to sleep at this instant may
    /// miss the job, which costs parallelism but never progress, since the pushing worker takes
    /// its job back itself (README, "Join jobs").
    ///
    /// Always inlined: it is on the yield path (`harness::run`'s re-queue).
    #[inline(always)]
    pub(crate) fn notify_join(&self) {
        let wake = self.protocol.notify_join();
        if wake != Wake::Nothing {
            self.wake(wake);
        }
    }

    /// Whether a join job offered now could be picked up: a worker is idle or one more can be
    /// started, and no wake-up is in flight already. `join` promotes a latent frame only then
    /// (`frame.rs`); a stale answer costs parallelism, never progress (the Relaxed load).
    #[inline(always)]
    pub(crate) fn wants_join_work(&self) -> bool {
        self.protocol.load(Ordering::Relaxed).wants_work(self.protocol.max_threads())
    }

    /// Tells the pool there is new work. `is_waking`: the caller is the waking thread and hands
    /// its right on (or gives it up if nobody can be woken).
    #[inline]
    pub(crate) fn notify(&self, is_waking: bool) {
        let wake = self.protocol.notify(is_waking);
        if wake != Wake::Nothing {
            self.wake(wake);
        }
    }

    /// `notify` for the paths that run rarely (a tick end, a park's dispatch, a fork left
    /// unjoined, the first thread) or once per burst rather than per task (the worker's loop
    /// after a wake-up or a batch moved into its ring): one out-of-line copy of the inlined
    /// fast path they all share.
    #[cold]
    #[inline(never)]
    pub(crate) fn notify_cold(&self, is_waking: bool) {
        self.notify(is_waking);
    }

    /// Does what a notify decided: unpark a sleeper, or start a thread.
    #[cold]
    #[inline(never)]
    fn wake(&self, wake: Wake) {
        match wake {
            Wake::Unpark => {
                if let Some(worker) = self.protocol.take_sleeper().and_then(|index| self.worker_at(index)) {
                    // SAFETY: workers live until the pool is dropped (after every thread is
                    // joined), so the pointer from the table is valid.
                    self.unpark_worker(unsafe { worker.as_ref() });
                }
            }
            Wake::Spawn => self.spawn_worker(),
            Wake::Nothing => {}
        }
    }

    /// Unparks one idle worker other than `me`, leaving its bit for it to clear: the timer
    /// parker hands its role on (`park.rs`).
    #[cold]
    pub(crate) fn unpark_idle_except(&self, me: usize) {
        if let Some(worker) = self.protocol.idle_except(me).and_then(|index| self.worker_at(index)) {
            // SAFETY: workers live until the pool is dropped.
            self.unpark_worker(unsafe { worker.as_ref() });
        }
    }

    #[inline]
    pub(crate) fn worker_at(&self, index: usize) -> Option<NonNull<Worker<S>>> {
        NonNull::new(self.worker_table.get(index)?.load(Ordering::Acquire))
    }

    /// Starts one more thread; on failure (no memory for its state, or no thread), gives its
    /// place back and withdraws the signal (`Sync::spawn_failed`).
    #[cold]
    fn spawn_worker(&self) {
        if let Ok(worker) = self.alloc_worker() {
            if self.spawner.spawn(self.thread_start(worker), self.stack_size).is_ok() {
                return;
            }
            // SAFETY: from `alloc_worker`, and the refused spawn never ran it.
            unsafe { Self::free_unstarted(worker) };
        }
        self.stats_spawn_failed.fetch_add(1, Ordering::Relaxed);
        if self.protocol.spawn_failed() {
            self.join_parker.unpark();
        }
    }

    /// Starts `n` threads (`Config::min_threads`) before the pool is handed out, and returns
    /// once each has registered (after its spawner's start hook), to go idle and park as any
    /// worker without work. The wait sleeps between looks (a backoff from 10 to 200 µs, about
    /// what a thread start takes) rather than being woken, so that the workers' start, shared
    /// with every lazily started thread, carries no wake for it. No other thread can reach the
    /// pool yet, so nothing races the places it counts, and a failed start is the only one
    /// counted: `Error::Spawn` (the caller's drop of the pool joins the threads that did
    /// start). `Error::InvalidArgument` (nothing started) above the pool's thread limit.
    #[cold]
    pub(crate) fn prestart(&self, n: usize) -> Result<(), Error> {
        if n > self.worker_table.len() {
            return Err(Error::InvalidArgument);
        }
        for _ in 0..n {
            self.protocol.count_spawn();
            self.spawn_worker();
            if self.stats_spawn_failed.load(Ordering::Relaxed) != 0 {
                return Err(Error::Spawn);
            }
        }
        let mut backoff = Backoff::new(10, 200);
        // Acquire: pairs with the Release increment in `register`.
        while self.next_index.load(Ordering::Acquire) < n {
            backoff.snooze(&self.join_parker);
        }
        Ok(())
    }

    /// Called by a worker that found no work: goes idle (raising the other workers' hungry
    /// flags) and sleeps until a notification, which it consumes: `Notified(true)` if it is
    /// now the waking thread (also when `is_done` is true by then: the caller owes the search,
    /// or hands the notification on). Returns `Shutdown` when the pool is shutting down, and
    /// `Done` as soon as `is_done` is true (a wait inside a task is over; the own loop's worker
    /// turned surplus); the condition's setter must unpark the worker's parker after making it
    /// true, or the condition comes true at `deadline` (ns on the pool's clock), when the
    /// worker's park times out. `may_drive`: it may block in the I/O driver (the own loop).
    /// Each step is `Sync::wait`.
    pub(crate) fn wait_or(&self, cx: &WorkerContext<S>, is_waking: bool, is_done: &dyn Fn() -> bool, may_drive: bool, deadline: Option<u64>) -> Waited {
        // Going idle: the injector interval's window in progress measures no poll time now.
        cx.interrupt_interval();
        let mut w = Waiter { is_waking, ..Waiter::default() };
        let mut s = self.protocol.load(Ordering::Relaxed);
        loop {
            w.leaving = is_done();
            match self.protocol.wait(&mut s, w) {
                WaitOutcome::Shutdown => return Waited::Shutdown,
                // Even if the wait is over (`leaving`): the consumer owes a search, and
                // `run_until` hands the notification on if it leaves first.
                WaitOutcome::End(WaitEnd::Notified { waking }) => return Waited::Notified(waking),
                WaitOutcome::End(WaitEnd::Done) => return Waited::Done,
                // Our park filled our own queues (an I/O or timer dispatch): back to work, not
                // idle, without a notification (`schedule_woken`).
                WaitOutcome::End(WaitEnd::LocalWork) => return Waited::LocalWork,
                WaitOutcome::End(WaitEnd::Idle) => {
                    // Out of work: ask the busy workers to offer their latent joins.
                    self.raise_hunger(cx.worker());
                    w.is_waking = false;
                    w.is_idle = true;
                    continue;
                }
                WaitOutcome::Park => {}
            }
            w.local_work = self.park(cx, is_done, may_drive, deadline);
            s = self.protocol.load(Ordering::Relaxed);
        }
    }

    /// The progressive phase: an idle worker (already counted in `idle`) watches the word for
    /// `idle_spins` rounds before it sleeps. Returns true if a notification, shutdown or `done`
    /// showed up meanwhile (the caller re-reads the word instead of parking).
    #[inline]
    fn spin(&self, is_done: &dyn Fn() -> bool) -> bool {
        if self.idle_spins == 0 {
            return false;
        }
        self.protocol.spin_begin();
        let mut seen = false;
        for _ in 0..self.idle_spins {
            let s = self.protocol.load(Ordering::Relaxed);
            // Only work from outside (the injector) and work offered for stealing (a join
            // deque: a promoted join half, a fork) end the spin early. A notification for a
            // busy worker's own ring waits until the spin is over (`park` then sees it and
            // does not sleep): a thief that jumped on it at once would take a lone task its
            // owner is about to run, and a serial chain of tasks would bounce between cores
            // on every hop.
            if (s.notified() && (!self.injector.is_empty() || self.has_join_work()))
                || s.state() == State::Shutdown
                || is_done()
            {
                seen = true;
                break;
            }
            spin_hint();
        }
        self.protocol.spin_end(seen);
        seen
    }

    /// Whether some worker's join deque holds a job (a hint: Relaxed loads, no fence). It reads
    /// the worker table and each deque's indices, never the rest of a `Worker`: the spin asks
    /// this on every round while a notification is pending, and a busy worker writes its
    /// `Worker`'s first cache line (the LIFO slot) on every task it schedules, so reading that
    /// line here (the list's `next`) would move it between the cores on every hop of a chain.
    fn has_join_work(&self) -> bool {
        self.worker_table.iter().any(|slot| {
            let worker = slot.load(Ordering::Acquire);
            // SAFETY: a worker in the table is initialised (its Release store) and lives until
            // the pool is dropped.
            NonNull::new(worker).is_some_and(|w| !unsafe { Worker::joins_of(w) }.is_empty_hint())
        })
    }

    /// Sleeps until unparked, unless a notification, shutdown or `done` arrived meanwhile.
    /// `may_drive`: the worker may block in the I/O driver (not while it waits for a latch,
    /// whose setter unparks only its parker). Returns whether our own queues hold work now:
    /// tasks woken by the I/O driver or the timers while we were parked in them go to our
    /// LIFO slot without a notification (`schedule_woken`), and are ours to run.
    fn park(&self, cx: &WorkerContext<S>, is_done: &dyn Fn() -> bool, may_drive: bool, deadline: Option<u64>) -> bool {
        // The worker that would block in the I/O driver does not spin: while it spins nobody
        // watches the I/O (`crate::io`, "Parking").
        if !self.would_drive(may_drive) && self.spin(is_done) {
            return false;
        }
        let me = cx.worker();
        // Either we see a notifier's `notified` here, or it sees our bit (`protocol.rs`).
        let s = self.protocol.announce_park(me.index);
        if !s.notified() && s.state() != State::Shutdown && !is_done() {
            me.stats.parks.bump_owned();
            // The parker; with the next timer deadline as timeout, or in the I/O driver, if this
            // worker takes the timer role (`park.rs`). The tasks its dispatch wakes go to our
            // own queues with no notification until it is over.
            cx.in_park.set(true);
            self.park_worker(me, may_drive, is_done, deadline);
            cx.in_park.set(false);
        }
        // Woken by a notify (bit already clear), by shutdown, by `done`'s setter, or
        // spuriously: leave the set either way; `wait_or` reads the word again and comes back
        // here if it has to.
        self.protocol.withdraw_park(me.index);
        // Our own queues (we are their owner) were empty when we went idle: what is there now
        // was queued by a dispatch inside the park.
        let ring_empty = me.ring.is_empty();
        if !ring_empty {
            // More than we run next (the LIFO slot): one notification for the whole dispatch.
            self.notify_cold(false);
        }
        !ring_empty || !me.lifo.load(Ordering::Relaxed).is_null()
    }

    /// A worker leaves for good. The last one out during shutdown wakes the joiner.
    pub(crate) fn unregister_thread(&self) {
        if self.protocol.leave() {
            self.join_parker.unpark();
        }
    }

    /// Moves the word to `Shutdown` and wakes every worker so it drains and exits: every
    /// registered worker gets a token; one still registering reads `Shutdown` in `wait` (its
    /// registration happened before its first write of the word), or is found by this walk
    /// (`Protocol::begin_shutdown`).
    pub(crate) fn begin_shutdown(&self) {
        self.protocol.begin_shutdown();
        self.unpark_all();
    }

    /// Unparks every registered worker (its parker, and the driver if it holds the role).
    pub(crate) fn unpark_all(&self) {
        let mut worker = self.workers.load(Ordering::Acquire);
        while let Some(w) = NonNull::new(worker) {
            // SAFETY: workers live until the pool is dropped; `next` is immutable once published.
            let w = unsafe { w.as_ref() };
            self.unpark_worker(w);
            worker = w.next;
        }
    }

    /// Blocks until every started thread has unregistered.
    pub(crate) fn wait_for_threads(&self) {
        loop {
            // Acquire pairs with `Protocol::leave`'s Release.
            if self.protocol.load(Ordering::Acquire).spawned() == 0 {
                return;
            }
            self.join_parker.park();
        }
    }
}

#[cfg(all(test, loom))]
pub(super) mod loom;
