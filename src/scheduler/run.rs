//! The worker's loop and every wait on a worker: [`Inner::run_until`], and what running one
//! task involves (its count, its forks, the end of a tick).
//!
//! # One waiting loop
//! [`Inner::run_until`] is the worker's loop and every wait on a worker (a stolen join half, a
//! latch, an async join handle, `block_on`): the same search, notification and sleep, with an
//! "until" condition. A wait searches related work first (its own join deque, then the deque
//! of the worker that stole the half it waits for) and the rest of the order above only
//! within the nesting bound of `context.rs` ("Bounded helping"); past it, it sleeps on its
//! parker until its condition holds.
//!
//! # The cooperative budget (text 003)
//! A worker runs at most [`BUDGET_PER_TICK`] (128) tasks (async polls included) per *tick*.
//! When a tick's budget is spent, the worker ends the tick (`end_tick`): its next search starts
//! at the injector, and the task in its LIFO slot moves to the back of its ring with the LIFO
//! streak reset, so work from outside and the tasks queued behind a chain of cache-hot LIFO
//! tasks get their turn however the tasks wake each other. The tick end also runs the text's
//! timer and I/O maintenance (`maintenance_at_tick_end`, `crate::time` and `crate::io`: two
//! Relaxed loads when no timer is pending and no driver installed). The injector interval is
//! retuned at the end of each of its own windows instead, `interval.rs`. Within a tick, the
//! injector interval and [`MAX_LIFO_STREAK`](super::worker::MAX_LIFO_STREAK) already bound the wait of injected and ring tasks;
//! the budget is the outer bound that holds whatever those two do. The tick is counted on the worker's own `polled` counter (see `stats.rs`), so
//! the budget costs one test and branch per task.
//!

use core::ptr::{self, NonNull};

use super::context::WorkerContext;
use super::inner::Inner;
use super::job::Until;
use super::search::Found;
use super::sleep::Waited;
use crate::latch::Signal;
use crate::platform::{Parker, Spawner};
use crate::sync::{fence, Ordering};
use crate::task::Task;

/// Most tasks a worker runs per tick (text 003's cooperative budget; module docs). A power of
/// two: the end of a tick is a mask test on the worker's run counter.
pub(crate) const BUDGET_PER_TICK: usize = 128;
const _: () = assert!(BUDGET_PER_TICK.is_power_of_two());

impl<S: Spawner> Inner<S> {
    /// The one waiting loop. `until: None` is the worker's own loop: wait for a notification,
    /// run everything there is, repeat; after shutdown, run what is left and return. With a
    /// condition it is a wait inside a task (a stolen join half, a latch, a join handle): run
    /// work until the signal is set, related work first and unrelated work only within the
    /// nesting bound (`context.rs`, "Bounded helping"), sleeping in the pool's sleep protocol
    /// (or, past the bound, on the worker's parker) when there is none.
    pub(crate) fn run_until(&self, cx: &WorkerContext<S>, until: Option<Until<'_>>) {
        let me = cx.worker();
        let done = || until.is_some_and(|u| u.signal.is_setting());
        // A wait registers this worker as the signal's waiter only before its first sleep: a
        // fork-join wait usually finds its forks in its own deque and runs them, and then
        // its signal was set with no waiter to wake (no unpark, no atomic read-modify-write).
        let mut registered = until.is_none();
        let mut register = || {
            if registered {
                return true;
            }
            registered = true;
            let until = until.expect("a wait has a signal");
            // SAFETY: we are the signal's only waiter; a worker's parker lives until the pool
            // is dropped.
            unsafe { until.signal.register(&crate::latch::parker_waker(&me.parker)) }
        };
        let mut is_waking = false;
        // A consumed notification obliges its consumer to search until the queues come up
        // empty: the pushes it stands for may be several (`notify`'s fast path shares one).
        // A wait that leaves before that, even one that was over when it consumed the
        // notification, hands a notification on (`leave_wait`, `block_until`).
        let mut owes_search = false;
        let mut draining = false;
        // Draining: shutdown had released its waits when the last search began.
        let mut released = false;
        // The worker's own loop starts by consuming the notification that started its thread.
        let mut search = until.is_some();
        loop {
            if search {
                if draining {
                    // Before the search: it then finds what the released waits queued.
                    released = self.protocol.waits_released();
                }
                while !done() {
                    let found = match until {
                        None => self.find_work(cx),
                        Some(until) => match self.find_for_wait(cx, until) {
                            Found::Task(task, pushed) => Some((task, pushed)),
                            Found::Nothing => None,
                            Found::Bounded => {
                                if register() {
                                    self.block_until(cx, until.signal, is_waking, owes_search);
                                } else {
                                    self.leave_wait(cx, is_waking, owes_search);
                                }
                                return;
                            }
                        },
                    };
                    let Some((task, pushed)) = found else {
                        owes_search = false;
                        break;
                    };
                    if is_waking || pushed {
                        self.notify(is_waking);
                    }
                    is_waking = false;
                    self.run_task(cx, task);
                    if until.is_none() {
                        // The busy path: this worker's own tasks back to back, no notification
                        // owed (the yield loop: ~10 instructions fewer per task than going
                        // round `find_work`'s result and the waking test).
                        while let Some(task) = self.find_local(cx) {
                            self.run_task(cx, task);
                        }
                    }
                }
            }
            search = true;
            if done() || !register() {
                break;
            }
            if draining {
                match until {
                    // Drained: a submit accepted just before the injector closed may still be
                    // linking its batch; `shutdown` waits for it after joining us and runs it.
                    None if released => return,
                    // Drained before shutdown fired its timers: what the fire queues must
                    // run here, so search again once `Inner::release_waits` has set the flag
                    // (it unparks us after). The flag is read again right before parking: the
                    // unpark may have come while we ran a task and been taken by a wait inside
                    // it, so only a read after our last park can rely on it.
                    None => {
                        if !self.protocol.waits_released() {
                            me.parker.park();
                        }
                        continue;
                    }
                    // A wait during shutdown: its setter unparks us.
                    Some(_) => {
                        me.parker.park();
                        continue;
                    }
                }
            }
            if until.is_some() {
                me.waiting_in_task.store(true, Ordering::Relaxed);
                // Before `wait_or`'s idle count: a `wait_idle` that reads that count reads this
                // flag too (its Acquire fence after the count pairs with this one).
                fence(Ordering::Release);
            }
            let waited = self.wait_or(cx, is_waking, until.map(|_| &done as &dyn Fn() -> bool));
            if until.is_some() {
                me.waiting_in_task.store(false, Ordering::Relaxed);
            }
            match waited {
                Waited::Notified(waking) => {
                    is_waking = waking;
                    owes_search = true;
                }
                Waited::Done => return,
                // Drain: queued work still runs after shutdown began.
                Waited::Shutdown => draining = true,
            }
        }
        self.leave_wait(cx, is_waking, owes_search);
    }

    /// A wait is over and the worker goes back to the waiting task's code, maybe for long.
    fn leave_wait(&self, cx: &WorkerContext<S>, is_waking: bool, owes_search: bool) {
        if is_waking {
            self.notify(true);
        } else if owes_search || !cx.worker().ring.is_empty() {
            // `owes_search`: we consumed a notification and no search of ours came up empty
            // since, so work we were told about may still be queued while every other worker
            // sleeps (`tests/latch.rs`, `helper_leaving_its_wait_hands_on_a_pending_wake`).
            // Tasks left in our ring that were re-queued with the cheap notification (README,
            // "Self-requeued tasks") get a full one, so a sleeping worker takes them meanwhile.
            self.notify(false);
        }
    }

    /// A wait past its nesting bound (`context.rs`, "Bounded helping"): no related work is
    /// left, and unrelated work may not nest here. Tell the pool about the queued work this
    /// worker will not run (a notification wakes an idle worker or starts a thread, if the pool
    /// has room; the waking right, if we hold it, is handed on), then sleep on our parker,
    /// outside the sleep protocol (not idle: a notification must not pick us), until the
    /// signal's setter unparks us.
    #[cold]
    #[inline(never)]
    fn block_until(&self, cx: &WorkerContext<S>, signal: &Signal, is_waking: bool, owes_search: bool) {
        let me = cx.worker();
        if is_waking || owes_search || me.holds_tasks() || !self.injector.is_empty() {
            self.notify(is_waking);
        }
        cx.interrupt_interval();
        while !signal.is_setting() {
            me.parker.park();
        }
    }

    /// Runs a task on worker `cx` (this thread's), one that `find_work` dequeued or a wait
    /// popped from its latent frames: counts it, runs it, hands on the forks it left
    /// (`scheduler::frame`), and ends the tick when its budget is spent.
    #[inline]
    pub(crate) fn run_task(&self, cx: &WorkerContext<S>, task: NonNull<Task>) {
        let runs = cx.worker().stats.polled.bump_owned();
        let frames = cx.head.frames.depth();
        // SAFETY: dequeued, or popped from a latent frame (in no queue), by the caller: this
        // is its one run.
        unsafe { Task::run(task) };
        if cx.head.frames.depth() != frames {
            // It forked tasks it did not wait for (`scheduler::frame`).
            cx.truncate_frames(frames);
        }
        if runs % BUDGET_PER_TICK == 0 {
            self.end_tick(cx);
        }
    }

    /// The tick's budget is spent (module docs): the next search starts at the injector, and
    /// the LIFO slot's task goes to the back of the ring. If the ring holds tasks, a full
    /// `notify` advertises them: tasks re-queued by their own poll were queued with the cheap
    /// notification only (`scheduler/README.md`, "Self-requeued tasks"), so a worker that went
    /// to sleep at that instant learns of them within one tick.
    #[cold]
    #[inline(never)]
    fn end_tick(&self, cx: &WorkerContext<S>) {
        let me = cx.worker();
        cx.tick.set(0);
        cx.lifo_streak.set(0);
        if !me.lifo.load(Ordering::Relaxed).is_null() {
            // Acquire pairs with the Release swap in `push_lifo`, as in `pop_lifo`.
            if let Some(task) = NonNull::new(me.lifo.swap(ptr::null_mut(), Ordering::Acquire)) {
                self.push_ring(cx, task);
            }
        }
        if !me.ring.is_empty() {
            self.notify(false);
        }
        self.maintenance_at_tick_end(me);
    }
}
