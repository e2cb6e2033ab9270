//! How a worker looks for work, and where its own submits go. The order of its search (design text 002, "dequeue", with text 003's LIFO slot and
//! injector interval):
//!
//! 0. every *interval*th search starts at the injector, so work injected from outside is not
//!    starved by a worker whose own queue never runs dry, unless the front of its ring still
//!    holds tasks of its last batch from the injector (older than anything left there: see
//!    "Order"). The interval adapts to how long the worker's polls take (`interval.rs`: about
//!    1 ms of work between checks, 8 to 127 searches; 61 on a platform without a clock);
//! 1. its LIFO slot (the newest task scheduled with [`ThreadPool::submit_lifo`], cache-hot),
//!    at most [`MAX_LIFO_STREAK`] times in a row, after which the slot's task moves to the back
//!    of the ring so the ring's older tasks run;
//! 2. its own ring (FIFO);
//! 3. the pool's injector (try-lock; takes its fair share, up to half a ring, in one go into
//!    the empty ring; step 0 takes a single task when the ring is not empty);
//! 4. every other worker's ring, starting with the next one in the list, stealing half; and
//!    when a victim's ring is empty, the oldest job of its join deque (`queue::deque`), else its
//!    LIFO slot (so a task parked in the slot of a worker busy with a long task is never
//!    stranded).
//!
//! Before 3, a worker pops its own join deque (newest first): non-empty only while one of its
//! tasks waits inside a `join` or for a latch over forks, or after a task forked and returned.
//!
//! # Order
//! A pool with one worker starts the tasks submitted from outside in submission order (per
//! submitting thread). They reach the worker only through the injector, which is FIFO: one at
//! a time (steps 0 and 3, run at once) or as a batch into its empty ring (step 3, at most
//! `MAX_BATCH - 1` tasks behind the one it runs). After a batch, the worker's context records
//! the ring index where it ends (`WorkerContext::injected_left`), so the ring's tasks from the
//! injector are known to be a prefix of the ring, older than every task left in the injector.
//! Two places would otherwise let newer outside work pass them:
//! * step 0 skips the injector while that prefix is not used up: the ring's front is then the
//!   oldest outside work, and the next pops run it (the LIFO slot runs at most
//!   [`MAX_LIFO_STREAK`] tasks before the ring gets a turn, so the skip lasts at most about
//!   half a ring of pops); it then takes from the injector as before, so work from outside
//!   keeps its share beside a worker's own tasks;
//! * an overflow claims the ring's oldest half, which holds the whole prefix (fewer than half
//!   a ring): `spill` sends the prefix back to the injector's *front*
//!   (`Consumer::push_front`) and the rest (the worker's own tasks and the new one) to its
//!   back. The front needs the injector's consumer lock, which no other thread takes while a
//!   pool has one worker (the worker alone searches it; shutdown's last drain runs after the
//!   workers were joined). With several workers, where no order is promised, a spill that
//!   finds the lock held sends everything to the back.
//!
//! The bookkeeping adds nothing per task: a store per batch, a subtraction per step-0 search
//! and per overflow. Local submits go to the ring's back or the LIFO slot, so a task's own
//! submits may run before outside tasks only through the LIFO slot. A task that waits through
//! the pool may run later tasks inside its wait: the promise is about starts.
//!
//!
//! A worker that finds work after taking more than one task (`pushed`), or while it is the
//! waking thread, notifies before running it, so sleeping threads join in as work appears
//! (the wake-up cascade) but never more than one at a time.
//!
//! [`ThreadPool::submit_lifo`]: super::ThreadPool::submit_lifo

use core::ptr::{self, NonNull};

use super::context::WorkerContext;
use super::inner::Inner;
use super::job::Until;
use super::worker::{Worker, MAX_LIFO_STREAK};
use crate::platform::Spawner;
use crate::queue::ring::CAPACITY;
use crate::sync::{fence, Ordering};
use crate::task::{Batch, Task};

impl<S: Spawner> Inner<S> {
    /// Finds a task (see the module docs for the order). The bool says whether more tasks
    /// were moved into our ring (so another thread may be woken to share them).
    #[inline]
    pub(crate) fn find_work(&self, cx: &WorkerContext<S>) -> Option<(NonNull<Task>, bool)> {
        // `tick` counts down to the next injector-first search (cheaper than a modulo).
        let tick = cx.tick.get();
        if tick == 0 {
            // The end of an interval window: one clock read, the interval retuned.
            cx.tick.set(cx.end_interval_window() - 1);
            // Not ahead of older outside work in our ring (module docs, "Order").
            if !cx.injected_left() {
                if let Some(found) = self.take_from_injector(cx) {
                    return Some(found);
                }
            }
        } else {
            cx.tick.set(tick - 1);
        }
        if let Some(task) = self.pop_local(cx) {
            return Some((task, false));
        }
        self.find_work_slow(cx)
    }

    /// The search of a worker waiting inside a task: related work first, then, within the
    /// nesting bound, everything `find_work` looks at (context.rs, "Bounded helping").
    #[inline]
    pub(super) fn find_for_wait(&self, cx: &WorkerContext<S>, until: Until<'_>) -> Found {
        // Our own forks, newest first: the innermost computation we wait for.
        if let Some(task) = cx.joins.pop() {
            return Found::Task(task, false);
        }
        // Leapfrogging: the forks of the half we wait for, on the deque of its thief.
        if let Some(victim) = until.thief.and_then(|index| self.worker_at(index)) {
            // SAFETY: workers live until the pool is dropped.
            let victim = unsafe { victim.as_ref() };
            if let Some(task) = victim.joins.steal() {
                cx.worker().count_steal(1);
                return Found::Task(task, false);
            }
        }
        if !cx.may_run_unrelated() {
            return Found::Bounded;
        }
        match self.find_work(cx) {
            Some((task, pushed)) => Found::Task(task, pushed),
            None => Found::Nothing,
        }
    }

    /// `find_work` while it would only look at this worker's own queues: `None` when the
    /// search is an injector-first one (leaving it to `find_work`) or there is no local task.
    #[inline(always)]
    pub(super) fn find_local(&self, cx: &WorkerContext<S>) -> Option<NonNull<Task>> {
        let tick = cx.tick.get();
        if tick == 0 {
            return None;
        }
        cx.tick.set(tick - 1);
        self.pop_local(cx)
    }

    /// Steps 1 and 2 of the search: the LIFO slot, then the ring.
    #[inline(always)]
    fn pop_local(&self, cx: &WorkerContext<S>) -> Option<NonNull<Task>> {
        if let Some(task) = self.pop_lifo(cx) {
            return Some(task);
        }
        cx.ring.pop()
    }

    /// Owner: takes the LIFO slot's task, unless it ran `MAX_LIFO_STREAK` in a row; then the
    /// slot's task goes to the back of the ring instead.
    #[inline]
    fn pop_lifo(&self, cx: &WorkerContext<S>) -> Option<NonNull<Task>> {
        let me = cx.worker();
        if me.lifo.load(Ordering::Relaxed).is_null() {
            cx.lifo_streak.set(0);
            return None;
        }
        // Acquire pairs with the Release swap in `push_lifo` (our own, or none: only the owner
        // fills the slot; thieves only empty it).
        let task = NonNull::new(me.lifo.swap(ptr::null_mut(), Ordering::Acquire))?;
        let streak = cx.lifo_streak.get();
        if streak < MAX_LIFO_STREAK {
            cx.lifo_streak.set(streak + 1);
            me.stats.lifo_hits.bump_owned();
            return Some(task);
        }
        // The streak's end (one LIFO task in four at most): out of line, so the two inlined
        // copies of this function (`find_work`, `find_local`) do not each carry a ring push.
        cx.lifo_streak.set(0);
        self.push_ring_cold(cx, task);
        None
    }

    /// Owner: pushes to the back of our ring, spilling half of it to the injector when full.
    #[inline]
    pub(crate) fn push_ring(&self, cx: &WorkerContext<S>, task: NonNull<Task>) {
        if let Err(overflow) = cx.ring.push(task) {
            self.spill(cx, overflow);
        }
    }

    /// `push_ring` for the cold paths (a tick end, the end of a LIFO streak, a task displaced
    /// from the LIFO slot, forks left unjoined): one out-of-line copy.
    #[cold]
    #[inline(never)]
    pub(crate) fn push_ring_cold(&self, cx: &WorkerContext<S>, task: NonNull<Task>) {
        self.push_ring(cx, task);
    }

    /// The overflow of our full ring goes to the injector: the tasks it had taken from the
    /// injector back to the front, the rest to the back (module docs, "Order"). Internal
    /// pushes: accepted even while shutting down (part of queued work). Out of line, so the
    /// inlined `push_ring` (the yield path) stays a few instructions.
    #[cold]
    #[inline(never)]
    fn spill(&self, cx: &WorkerContext<S>, mut overflow: Batch) {
        let injected = cx.injected_in_overflow();
        if injected > 0 {
            if let Some(mut consumer) = self.injector.try_lock_even_empty() {
                consumer.push_front(overflow.split_front(injected));
                drop(consumer);
                self.after_injector_unlock();
            }
        }
        let _ = self.injector.push(overflow, false);
    }

    /// Owner: puts `task` in the LIFO slot; a task it displaces goes to the back of the ring
    /// (returns true then: out of line, the caller's notification costs more than the call).
    /// Notifies nobody: the caller does.
    #[inline]
    pub(crate) fn push_lifo(&self, cx: &WorkerContext<S>, task: NonNull<Task>) -> bool {
        // Release: a thief that swaps the task out sees its contents.
        let prev = cx.worker().lifo.swap(task.as_ptr(), Ordering::AcqRel);
        if let Some(prev) = NonNull::new(prev) {
            self.push_ring_cold(cx, prev);
            return true;
        }
        false
    }

    /// Owner: queues an async task that was spawned or woken on this worker in the LIFO slot,
    /// and tells the pool only if that left work for others:
    /// a task displaced into the ring (README, "Tasks woken on a worker"). A task alone in the
    /// slot is run by this worker when its current poll returns, or when its park returns
    /// (`sleep.rs`, `park`: an I/O or timer dispatch inside the park fills the slot), so
    /// waking another worker for it would only have that one find nothing and sleep again.
    /// During a park the displaced tasks wait too: one notification covers the dispatch.
    #[inline]
    pub(crate) fn schedule_woken(&self, cx: &WorkerContext<S>, task: NonNull<Task>) {
        if self.push_lifo(cx, task) && !cx.in_park.get() {
            self.notify(false);
        }
    }

    #[inline(never)]
    fn find_work_slow(&self, cx: &WorkerContext<S>) -> Option<(NonNull<Task>, bool)> {
        let me = cx.worker();
        // Our own join jobs, newest first: non-empty only while a `join` of ours waits inside
        // its first closure (it helps), or a task forked and returned without waiting.
        if let Some(task) = cx.joins.pop() {
            return Some((task, false));
        }
        if let Some(found) = self.take_from_injector(cx) {
            return Some(found);
        }
        let head = self.workers.load(Ordering::Acquire);
        let me_ptr = ptr::from_ref(me).cast_mut();
        let mut victim = if me.next.is_null() { head } else { me.next };
        while victim != me_ptr && !victim.is_null() {
            // SAFETY: workers live until the pool is dropped; `next` is immutable.
            let v = unsafe { &*victim };
            if !v.ring.is_empty() {
                if let Some(stolen) = v.ring.steal_into(&cx.ring) {
                    me.count_steal(1 + stolen.queued as usize);
                    // `pushed` also when the victim kept some (a steal takes half): one
                    // notification may stand for all of a ring's tasks, and a thief that
                    // consumed it without the waking right would otherwise hand nobody the
                    // rest, left with a victim that may be blocked in a long task (the
                    // protocol's model reports `pushed` whenever tasks are left).
                    return Some((stolen.task, stolen.queued > 0 || stolen.left > 0));
                }
            } else if let Some(task) = v.joins.steal() {
                // A fork-join job: the victim's oldest, the biggest piece it has left.
                me.count_steal(1);
                return Some((task, false));
            } else if !v.lifo.load(Ordering::Relaxed).is_null() {
                // Acquire pairs with the owner's Release swap in `push_lifo`.
                if let Some(task) = NonNull::new(v.lifo.swap(ptr::null_mut(), Ordering::Acquire)) {
                    me.count_steal(1);
                    return Some((task, false));
                }
            }
            victim = if v.next.is_null() { head } else { v.next };
        }
        None
    }

    /// Makes every other worker hungry (this one found no work): the next `join` on each
    /// offers its oldest latent frame (`context.rs`, "The hungry flag"). A hunger already up is
    /// not written again, so idle workers do not pull busy workers' lines back and forth.
    pub(crate) fn raise_hunger(&self, me: &Worker<S>) {
        let mut worker = self.workers.load(Ordering::Acquire);
        while let Some(w) = NonNull::new(worker) {
            // SAFETY: workers live until the pool is dropped; `next` is immutable once published.
            let w = unsafe { w.as_ref() };
            if !ptr::eq(w, me) {
                w.demand.ask();
            }
            worker = w.next;
        }
    }

    /// Takes one task from the injector to run; with an empty ring, its fair share of the
    /// queue in all (a batch: design text 003, `fair_share`).
    ///
    /// A worker whose ring holds tasks (the periodic check, step 0) takes just the one, as
    /// tokio does: filling its ring from the injector would only push the ring's oldest half
    /// back out at its next overflow, and with more tasks in flight than a ring holds (a
    /// yield loop over 10,000 tasks) they bounced between the two queues without running:
    /// 2.9 injector pops per poll (callgrind, `examples/yield_probe.rs`).
    fn take_from_injector(&self, cx: &WorkerContext<S>) -> Option<(NonNull<Task>, bool)> {
        if self.injector.is_empty() {
            return None;
        }
        let me = cx.worker();
        let mut consumer = self.injector.try_lock()?;
        let found = consumer.pop().map(|first| {
            // A batch only into an empty ring (see above); `len` is exact for the owner.
            let room = if me.ring.is_empty() {
                fair_share(consumer.len() + 1, self.protocol.load(Ordering::Relaxed).spawned()) - 1
            } else {
                0
            };
            let mut moved = 0;
            while moved < room {
                let Some(task) = consumer.pop() else { break };
                // `room` slots are free and only we push to our ring, so this cannot overflow.
                let pushed = cx.ring.push(task);
                debug_assert!(pushed.is_ok());
                moved += 1;
            }
            if moved > 0 {
                // The ring was empty: all of it is from the injector (module docs, "Order").
                cx.mark_injected();
            }
            (first, moved > 0)
        });
        drop(consumer);
        if found.is_some() {
            me.stats.injector_fetches.bump_owned();
        }
        self.after_injector_unlock();
        found
    }

    /// The try-lock hand-off, after every unlock of the injector's consumer end by a worker:
    /// while we held it, a worker that had consumed a notification (and so must see the
    /// notified push) may have failed `try_lock` and gone to sleep, trusting us to see the
    /// work; but we are not synchronised with that push and may have read a stale, empty
    /// queue. So after unlocking: SeqCst fence, re-check, and notify if a task is ready.
    /// Either that worker's `try_lock` (after its own fence, in `wait_or`) saw our unlock and
    /// took the lock itself, or our re-check (after this fence) sees every push it was obliged
    /// to see. `has_ready` ignores a half-linked push (its pusher notifies after linking) and a
    /// lock taken since (that holder re-checks in turn): notifying for those made two workers
    /// spin on each other's notifications until the pusher ran (loom). Its own look holds the
    /// lock too, and looks again when a worker failed against that hold (`has_ready`). (Found
    /// by `c_tests/stress.c`'s burst test; `scheduler/README.md` step 4 has the argument.)
    fn after_injector_unlock(&self) {
        fence(Ordering::SeqCst);
        if self.injector.has_ready() {
            self.notify_cold(false);
        }
    }
}

/// What a waiting worker's search found.
pub(super) enum Found {
    /// A task; whether more were moved into our ring.
    Task(NonNull<Task>, bool),
    /// Nothing anywhere.
    Nothing,
    /// No related work, and unrelated work may not nest here (`context.rs`).
    Bounded,
}

/// Most tasks a batch from the injector takes: half a ring. One of them runs at once, so at
/// most `MAX_BATCH - 1` go into the ring: fewer than the half that an overflow claims, which
/// therefore holds all of them that are left ("Order"). (Design text 003 says 64: with 64,
/// `spawn_batch` took 12–13 ns per task on 2 workers against 7–12 ns with 128, the same
/// harness alternating the two builds; `spawn_remote` and `multi_producer` did not move.)
pub(crate) const MAX_BATCH: u32 = CAPACITY / 2;
/// Fewest tasks a batch takes when there are that many (design text 003: 4).
pub(crate) const MIN_BATCH: u32 = if MAX_BATCH >= 4 { 4 } else { MAX_BATCH };
const _: () = assert!(MIN_BATCH >= 1 && MAX_BATCH <= CAPACITY / 2);

/// How many tasks a worker with an empty ring takes from an injector holding about `queued`
/// (design text 003, "fair share"): `queued / workers`, so that one worker does not drain a
/// burst that `workers` threads could share (the others are being woken one after another
/// meanwhile), within [`MIN_BATCH`]..=[`MAX_BATCH`] so that a lock acquisition is always worth
/// a few tasks and a batch never fills more than half the ring.
#[inline]
pub(crate) fn fair_share(queued: usize, workers: u32) -> u32 {
    let share = queued / workers.max(1) as usize;
    share.clamp(MIN_BATCH as usize, MAX_BATCH as usize) as u32
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fair_share_splits_the_queue_between_the_workers() {
        assert_eq!(fair_share(1_000, 4), MAX_BATCH, "a large queue: at most half a ring");
        assert_eq!(fair_share(100, 4), 25);
        assert_eq!(fair_share(100, 1), 100);
        assert_eq!(fair_share(1_000, 1), MAX_BATCH);
        assert_eq!(fair_share(6, 2), MIN_BATCH, "a few tasks: at least a few");
        assert_eq!(fair_share(1, 8), MIN_BATCH);
        assert_eq!(fair_share(0, 0), MIN_BATCH, "no thread counted yet: no division by zero");
    }
}
