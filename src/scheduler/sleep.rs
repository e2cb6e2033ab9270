//! The sleep/wake protocol on the `Sync` word: `notify`, `wait`, `park`, and shutdown's
//! hand-shake. Design text 002 "Counter/Sync Algorithm", made concrete; the full argument for
//! why no wake-up is lost and no herd forms is in `scheduler/README.md`.
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
use super::worker::Worker;
use super::Inner;
use crate::platform::{Parker, Spawner};
use crate::sync::{fence, spin_hint, Ordering};
use super::sync_word::{State, Sync};

/// How `wait_or` ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// A notification was consumed; search again (as the waking thread if true).
    Notified(bool),
    /// The waiter's condition became true.
    Done,
    /// The pool is shutting down.
    Shutdown,
}

const WORD_BITS: usize = usize::BITS as usize;

impl<S: Spawner> Inner<S> {
    #[inline]
    pub(crate) fn load_sync(&self, order: Ordering) -> Sync {
        Sync(self.sync.load(order))
    }

    /// After `join` pushed a job on its worker's join deque: wakes (or starts) a thread only if
    /// one is idle (or may be started) and no wake is in flight; otherwise one load and nothing
    /// written. Skips the `notified` flag on purpose: a worker going to sleep at this instant may
    /// miss the job, which costs parallelism but never progress, since the pushing worker takes
    /// its job back itself (README, "Join jobs").
    ///
    /// Always inlined: it is on the yield path (`harness::run`'s re-queue). It calls `notify_slow`
    /// directly: `notify`'s fast path (notified, nobody to wake) cannot apply when
    /// `wants_join_work` saw somebody to wake.
    #[inline(always)]
    pub(crate) fn notify_join(&self) {
        if self.wants_join_work() {
            self.notify_slow(false);
        }
    }

    /// Whether a join job offered now could be picked up: a worker is idle or one more can be
    /// started, and no wake-up is in flight already. `join` promotes a latent frame only then
    /// (`scheduler::frame`); a stale answer costs parallelism, never progress (the Relaxed load).
    #[inline(always)]
    pub(crate) fn wants_join_work(&self) -> bool {
        let s = self.load_sync(Ordering::Relaxed);
        s.state() == State::Pending && (s.idle() > 0 || s.spawned() < self.max_threads)
    }

    /// Tells the pool there is new work. `is_waking`: the caller is the waking thread and hands
    /// its right to wake on (or gives it up if nobody can be woken).
    #[inline]
    pub(crate) fn notify(&self, is_waking: bool) {
        // The busy pool's fast path, hoisted out of the loop below (same decision, fewer
        // instructions per submit): already notified and nobody to wake. The fence and re-read
        // are the ones explained in `notify_slow`'s fast-path branch.
        if !is_waking {
            let s = self.load_sync(Ordering::Relaxed);
            if s.notified() && !self.can_wake_someone(s) {
                fence(Ordering::SeqCst);
                if self.load_sync(Ordering::Relaxed) == s {
                    return;
                }
            }
        }
        self.notify_slow(is_waking);
    }

    /// Whether a non-waking notify seeing `s` would wake or spawn a thread (or stop: shutdown).
    #[inline]
    fn can_wake_someone(&self, s: Sync) -> bool {
        s.state() == State::Shutdown
            || (s.state() == State::Pending && (s.idle() > 0 || s.spawned() < self.max_threads))
    }

    /// The general case of `notify`: one CAS loop over the `Sync` word.
    #[inline(never)]
    fn notify_slow(&self, is_waking: bool) {
        let mut s = self.load_sync(Ordering::Relaxed);
        let mut fenced = false;
        loop {
            if s.state() == State::Shutdown {
                return;
            }
            let can_wake = is_waking || s.state() == State::Pending;
            let mut new = s.with_notified(true);
            let action = if can_wake && s.idle() > 0 {
                new = new.with_state(State::Signaled);
                Wake::Unpark
            } else if can_wake && s.spawned() < self.max_threads {
                new = new.with_state(State::Signaled).inc_spawned();
                Wake::Spawn
            } else if is_waking {
                // Nobody to wake: give the waking right back.
                new = new.with_state(State::Pending);
                Wake::Nothing
            } else if s.notified() {
                // The fast path of a busy pool: already notified, nothing to wake. It writes
                // nothing, so no Release orders our push before the consumer's search: a
                // SeqCst fence pairs with the one after the consuming CAS in `wait_or`.
                // Either our re-read sees that consumption (`notified` clear: we set it again
                // below, with Release), or the consumer's search sees our push. Without it the
                // worker consumes the flag, misses the task and sleeps: a lost wake-up (loom:
                // `sync_notify_racing_wait`).
                if !fenced {
                    fenced = true;
                    fence(Ordering::SeqCst);
                    s = self.load_sync(Ordering::Relaxed);
                    continue;
                }
                return;
            } else {
                Wake::Nothing
            };
            // Release: the work pushed before this notify is visible to the thread that
            // consumes the notification (its CAS in `wait` is Acquire).
            match self.sync.compare_exchange_weak(s.0, new.0, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    match action {
                        Wake::Unpark => self.wake_one(),
                        Wake::Spawn => self.spawn_worker(),
                        Wake::Nothing => {}
                    }
                    return;
                }
                Err(actual) => s = Sync(actual),
            }
        }
    }

    /// Unparks one worker whose bit is set in the idle map (see the module's Dekker note).
    #[cold]
    fn wake_one(&self) {
        // Pairs with the fence in `park`: our `Sync` update above vs. its idle-map bit (and
        // vs. its `spinning` decrement).
        fence(Ordering::SeqCst);
        if self.spinning.load(Ordering::Relaxed) > 0 {
            // A worker is in its spin phase, watching `Sync`: it will consume our `notified`
            // within a few rounds, with no system call on either side. If it has just left
            // the spin (its decrement is not visible to us), the fence pair makes its `park`
            // see `notified` and not sleep.
            return;
        }
        for (word_index, word) in self.idle_map.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                let mask = 1usize << bit;
                let prev = word.fetch_and(!mask, Ordering::Acquire);
                if prev & mask != 0 {
                    let worker = self.worker_at(word_index * WORD_BITS + bit);
                    if let Some(worker) = worker {
                        // SAFETY: workers live until the pool is dropped (after every thread
                        // is joined), so the pointer from the table is valid.
                        self.unpark_worker(unsafe { worker.as_ref() });
                    }
                    return;
                }
                bits = prev & !mask;
            }
        }
        // No bit set: the worker counted in `idle` has not reached `park` yet and will see
        // `notified` there.
    }

    /// Unparks one idle worker other than `me` (whose bit is set in the idle map), leaving its
    /// bit for it to clear: the timer parker hands its role on (`scheduler::park`).
    #[cold]
    pub(crate) fn unpark_idle_except(&self, me: usize) {
        // Pairs with the fence in `park`, a Dekker pair over the role word and the idle map:
        // the caller gave the role back (a SeqCst store) before this scan, and a worker on its
        // way to sleep set its bit before its fence and its role claim. Either that claim sees
        // the role free and takes it, or this scan sees the bit and unparks the worker.
        fence(Ordering::SeqCst);
        for (word_index, word) in self.idle_map.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let index = word_index * WORD_BITS + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if index != me {
                    if let Some(worker) = self.worker_at(index) {
                        // SAFETY: workers live until the pool is dropped.
                        self.unpark_worker(unsafe { worker.as_ref() });
                    }
                    return;
                }
            }
        }
    }

    #[inline]
    pub(crate) fn worker_at(&self, index: usize) -> Option<NonNull<Worker<S>>> {
        NonNull::new(self.worker_table.get(index)?.load(Ordering::Acquire))
    }

    /// Starts one more thread; on failure (no memory for its state, or no thread), undoes
    /// the `spawned` increment and the signal.
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
        let mut s = self.load_sync(Ordering::Relaxed);
        loop {
            let mut new = s.dec_spawned();
            // Our signal is still unconsumed (no thread exists to consume it): withdraw it
            // so the next notify can try again.
            if s.state() == State::Signaled {
                new = new.with_state(State::Pending);
            }
            match self.sync.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => s = Sync(actual),
            }
        }
        if s.state() == State::Shutdown && s.spawned() == 1 {
            self.join_parker.unpark();
        }
    }

    /// Called by a worker that found no work: goes idle (raising the other workers' hungry
    /// flags) and sleeps until a notification, which it consumes: `Notified(true)` if it is
    /// now the waking thread (also when `done` is true by then: the caller owes the search, or
    /// hands the notification on). Returns `Shutdown` when the pool is shutting down, and, with
    /// a `done` condition (a worker that waits inside a task), `Done` as soon as it is true;
    /// the condition's setter must unpark the worker's parker after making it true.
    pub(crate) fn wait_or(&self, cx: &WorkerContext<S>, mut is_waking: bool, done: Option<&dyn Fn() -> bool>) -> Waited {
        // Going idle: the injector interval's window in progress measures no poll time now.
        cx.interrupt_interval();
        let is_done = || done.is_some_and(|d| d());
        let mut is_idle = false;
        let mut local_work = false;
        let mut s = self.load_sync(Ordering::Relaxed);
        loop {
            if s.state() == State::Shutdown {
                // `s` may come from a Relaxed load: Acquire pairs with `begin_shutdown`'s
                // AcqRel CAS, so the drain that follows sees every push made before shutdown
                // (found by Miri: tests/stress.rs tree_with_immediate_shutdown).
                fence(Ordering::Acquire);
                return Waited::Shutdown;
            }
            let leaving = is_done();
            if s.notified() || !is_idle || leaving || local_work {
                let mut new = s.with_notified(false);
                if s.notified() {
                    // Consume the notification: search again instead of sleeping.
                    if s.state() == State::Signaled {
                        new = new.with_state(State::Waking);
                    }
                    if is_idle {
                        new = new.dec_idle();
                    }
                } else if local_work {
                    // Our park filled our own queues (an I/O or timer dispatch): back to
                    // work, not idle, without a notification (`schedule_woken`).
                    new = new.dec_idle();
                } else if leaving {
                    // Done while nothing was notified: just leave (idle or not).
                    if is_idle {
                        new = new.dec_idle();
                    }
                    if is_waking {
                        new = new.with_state(State::Pending);
                    }
                } else {
                    // Go idle; a waking thread that found nothing gives its right back.
                    new = new.inc_idle();
                    if is_waking {
                        new = new.with_state(State::Pending);
                    }
                }
                // Acquire pairs with notify's Release: the notified work is visible. Release:
                // the tasks this worker ran are visible to whoever sees it idle
                // (`ThreadPool::wait_idle`; Miri's weak memory returned a count one short).
                match self.sync.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
                    Ok(_) => {
                        if s.notified() {
                            // Pairs with the fence on `notify`'s fast path (see there): our
                            // search below sees every push whose notify found `notified` set.
                            fence(Ordering::SeqCst);
                            // Even if the wait is over (`leaving`): the consumer owes a search,
                            // and `run_until` hands the notification on if it leaves first.
                            return Waited::Notified(is_waking || s.state() == State::Signaled);
                        }
                        if leaving {
                            return Waited::Done;
                        }
                        if local_work {
                            return Waited::Notified(false);
                        }
                        if !is_idle {
                            // Out of work: ask the busy workers to offer their latent joins.
                            self.raise_hunger(cx.worker());
                        }
                        is_waking = false;
                        is_idle = true;
                        s = new;
                        continue;
                    }
                    Err(actual) => {
                        s = Sync(actual);
                        continue;
                    }
                }
            }
            local_work = self.park(cx, &is_done, done.is_none());
            s = self.load_sync(Ordering::Relaxed);
        }
    }

    /// The progressive phase: an idle worker (already counted in `idle`) watches `Sync` for
    /// `idle_spins` rounds before it sleeps. Returns true if a notification, shutdown or `done`
    /// showed up meanwhile (the caller re-reads `Sync` instead of parking).
    #[inline]
    fn spin(&self, is_done: &dyn Fn() -> bool) -> bool {
        if self.idle_spins == 0 {
            return false;
        }
        self.spinning.fetch_add(1, Ordering::Relaxed);
        let mut seen = false;
        for _ in 0..self.idle_spins {
            let s = self.load_sync(Ordering::Relaxed);
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
        // Before `park`'s idle-map bit and fence (see `wake_one`).
        self.spinning.fetch_sub(1, Ordering::Relaxed);
        if seen {
            // Leaving early (for `done`, say) skips `park`'s fence, but a notifier may have
            // counted on us (it saw `spinning > 0` and unparked nobody): this fence pairs with
            // the one in `wake_one`, so the caller's re-read of `Sync` sees that notification,
            // and `wait_or` consumes it (`run_until` hands it on if the wait leaves). Without
            // it a worker leaving for `done` could strand a `Signaled` word with every other
            // worker parked.
            fence(Ordering::SeqCst);
        }
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
    fn park(&self, cx: &WorkerContext<S>, is_done: &dyn Fn() -> bool, may_drive: bool) -> bool {
        // The worker that would block in the I/O driver does not spin: while it spins nobody
        // watches the I/O (`crate::io`, "Parking").
        if !self.would_drive(may_drive) && self.spin(is_done) {
            return false;
        }
        let me = cx.worker();
        let word = &self.idle_map[me.index / WORD_BITS];
        let mask = 1usize << (me.index % WORD_BITS);
        word.fetch_or(mask, Ordering::Relaxed);
        // Pairs with the fence in `wake_one`: either we see its `notified`, or it sees our bit.
        fence(Ordering::SeqCst);
        let s = self.load_sync(Ordering::Relaxed);
        if !s.notified() && s.state() != State::Shutdown && !is_done() {
            me.stats.parks.bump_owned();
            // The parker; with the next timer deadline as timeout, or in the I/O driver, if this
            // worker takes the timer-parker role (`scheduler::park`). The tasks its dispatch
            // wakes go to our own queues with no notification until it is over.
            cx.in_park.set(true);
            self.park_worker(me, may_drive, is_done);
            cx.in_park.set(false);
        }
        // Woken by `wake_one` (bit already clear), by shutdown, by `done`'s setter, or
        // spuriously: leave the map either way; `wait_or` re-reads `Sync` and comes back here
        // if it has to.
        word.fetch_and(!mask, Ordering::Relaxed);
        // Our own queues (we are their owner) were empty when we went idle: what is there now
        // was queued by a dispatch inside the park.
        let ring_empty = me.ring.is_empty();
        if !ring_empty {
            // More than we run next (the LIFO slot): one notification for the whole dispatch.
            self.notify(false);
        }
        !ring_empty || !me.lifo.load(Ordering::Relaxed).is_null()
    }

    /// A worker leaves for good. The last one out during shutdown wakes the joiner.
    pub(crate) fn unregister_thread(&self) {
        // AcqRel: Release makes this thread's work visible to the joiner; Acquire orders us
        // after the shutdown transition we are reacting to.
        let s = Sync(self.sync.fetch_sub(Sync::ONE_SPAWNED, Ordering::AcqRel));
        debug_assert!(s.spawned() > 0);
        if s.state() == State::Shutdown && s.spawned() == 1 {
            self.join_parker.unpark();
        }
    }

    /// Moves `Sync` to `Shutdown` and wakes every worker so it drains and exits.
    pub(crate) fn begin_shutdown(&self) {
        let mut s = self.load_sync(Ordering::Relaxed);
        loop {
            let new = s.with_state(State::Shutdown);
            match self.sync.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => s = Sync(actual),
            }
        }
        // Pairs with the fence in `park` (a Dekker pair, as `wake_one`'s): either the parking
        // worker reads `Shutdown` after its fence, or our list read below sees its insertion
        // (made before it parks) and unparks it. The CAS alone is not enough: a worker's `Sync`
        // updates are only Acquire, so they do not order its list insertion before our read,
        // and a worker that registered just before shutdown could park for good (loom:
        // `sync_shutdown_racing_notify_and_spawn`).
        fence(Ordering::SeqCst);
        // Every registered worker gets a token; one still registering will read `Shutdown`
        // in `wait` (its registration happened before its first `Sync` update).
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
            // Acquire pairs with `unregister_thread`'s Release.
            if self.load_sync(Ordering::Acquire).spawned() == 0 {
                return;
            }
            self.join_parker.park();
        }
    }
}

enum Wake {
    Unpark,
    Spawn,
    Nothing,
}
