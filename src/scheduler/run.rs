//! The worker's loop and every wait on a worker: [`Inner::run_until`], and what running one
//! task involves (its count, its forks, the end of a tick).
//!
//! # One waiting loop
//! [`Inner::run_until`] is the worker's loop and every wait on a worker (a stolen join half, a
//! latch, an async join handle, `block_on`, a blocking handle): the same search, notification
//! and sleep, with an "until" condition (a signal, and a deadline on the pool's clock if the
//! wait has one: its parks then time out by it). A wait searches related work first (its own join deque, then the deque
//! of the worker that stole the half it waits for) and the rest of the search order (`search.rs`) only
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
use super::seeking::{Handoff, Seeking};
use super::sleep::Waited;
use super::worker::Worker;
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
    /// condition it is a wait inside a task (a stolen join half, a latch, a join handle,
    /// `block_on`, a blocking handle): run work until the signal is set or the wait's deadline
    /// passed, related work first and unrelated work only within the nesting bound
    /// (`context.rs`, "Bounded helping"), sleeping in the pool's sleep protocol (or, past the
    /// bound, on the worker's parker) when there is none.
    pub(crate) fn run_until(&self, cx: &WorkerContext<S>, until: Option<Until<'_>>) {
        let me = cx.worker();
        let deadline = until.and_then(|u| u.deadline);
        let expired = || deadline.is_some_and(|at| self.spawner.now_ns().is_none_or(|now| now >= at));
        let done = || until.is_some_and(|u| u.signal.is_setting()) || expired();
        let mut st = Seeking::new(until.is_some());
        // The worker's own loop starts by consuming the notification that started its thread.
        let mut search = until.is_some();
        // The own loop's idle wait ends when the worker turns surplus (`surplus.rs`).
        let surplus = || self.is_surplus(me);
        loop {
            if until.is_none() {
                self.retire_if_surplus(cx, &mut st);
            }
            if search {
                // Before the search: it then finds what the released waits queued.
                st.search_begins(|| self.protocol.waits_released());
                while !done() {
                    let found = match until {
                        None => self.find_work(cx),
                        Some(until) => match self.find_for_wait(cx, until) {
                            Found::Task(task, pushed) => Some((task, pushed)),
                            Found::Nothing => None,
                            Found::Bounded => {
                                if self.register_waiter(me, until, &mut st) {
                                    self.block_until(cx, &done, deadline, st);
                                } else {
                                    self.leave_wait(cx, st);
                                }
                                return;
                            }
                        },
                    };
                    let Some((task, pushed)) = found else {
                        st.came_up_empty();
                        break;
                    };
                    if let Some(is_waking) = st.found(pushed) {
                        // Once per wake-up or per batch moved into our ring, not per task:
                        // out of line.
                        self.notify_cold(is_waking);
                    }
                    self.run_task(cx, task);
                    if until.is_none() {
                        // The busy path: this worker's own tasks back to back, no notification
                        // owed (the yield loop: ~10 instructions fewer per task than going
                        // round `find_work`'s result and the waking test), until it is told
                        // it is surplus.
                        while !me.surplus.load(Ordering::Relaxed) {
                            let Some(task) = self.find_local(cx) else { break };
                            self.run_task(cx, task);
                        }
                        if me.surplus.load(Ordering::Relaxed) {
                            self.retire_if_surplus(cx, &mut st);
                        }
                    }
                }
            }
            search = true;
            if done() || !until.is_none_or(|until| self.register_waiter(me, until, &mut st)) {
                break;
            }
            if let Some(released) = st.draining() {
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
                        self.park_until(&me.parker, deadline);
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
            let over: &dyn Fn() -> bool = if until.is_some() { &done } else { &surplus };
            let waited = self.wait_or(cx, st.wait_begins(), over, until.is_none(), deadline);
            if until.is_some() {
                me.waiting_in_task.store(false, Ordering::Relaxed);
            }
            match waited {
                Waited::Notified(waking) => st.notified(waking),
                // Its own queues, filled by its park's dispatch: the own loop's search finds
                // them first, owing nobody a search (no notification was consumed). A wait
                // inside a task may leave before it runs them: it hands on a notification
                // then, as for a consumed one, so that another worker takes them.
                Waited::LocalWork if until.is_none() => {}
                Waited::LocalWork => st.notified(false),
                // The own loop's wait is over: it turned surplus (the loop's first look).
                Waited::Done if until.is_none() => {}
                Waited::Done => return,
                // Drain: queued work still runs after shutdown began.
                Waited::Shutdown => st.drain(),
            }
        }
        self.leave_wait(cx, st);
    }

    /// A wait registers as its signal's waiter, before its first sleep (`Seeking`). False if
    /// the signal is being set already (the wait is over).
    fn register_waiter(&self, me: &Worker<S>, until: Until<'_>, st: &mut Seeking) -> bool {
        if !st.must_register() {
            return true;
        }
        st.registered();
        // SAFETY: we are the signal's only waiter; a worker's parker lives until the pool is
        // dropped.
        unsafe { until.signal.register(&crate::latch::parker_waker(&me.parker)) }
    }

    /// A wait is over and the worker goes back to the waiting task's code, maybe for long
    /// (`Seeking::leaving`: `tests/latch.rs`, `helper_leaving_its_wait_hands_on_a_pending_wake`).
    fn leave_wait(&self, cx: &WorkerContext<S>, mut st: Seeking) {
        match st.leaving(!cx.worker().ring.is_empty()) {
            Handoff::Waking => self.notify(true),
            Handoff::Notify => self.notify(false),
            Handoff::Nothing => {}
        }
    }

    /// A wait past its nesting bound parks outside the protocol (`park_outside`) until its
    /// signal is set or its deadline passes (`done`), telling the pool of the tasks in its own
    /// queues and the injector first.
    #[cold]
    #[inline(never)]
    fn block_until(&self, cx: &WorkerContext<S>, done: &dyn Fn() -> bool, deadline: Option<u64>, mut st: Seeking) {
        let queued = cx.worker().holds_tasks() || !self.injector.is_empty();
        self.park_outside(cx, queued, done, deadline, &mut st);
    }

    /// Worker `cx` sleeps on its parker outside the sleep protocol (not idle: a notification
    /// must not pick it) until `done` (its setter unparks it) or the deadline passes: a wait past
    /// its nesting bound (`context.rs`, "Bounded helping": no related work is left, and
    /// unrelated work may not nest here), or a surplus worker (`surplus.rs`). First it tells
    /// the pool about the work it will not run (`Seeking::parks_outside`, with `work_queued`
    /// what the caller knows queued: a notification wakes an idle worker or starts a thread, if
    /// the pool has room; the waking right, if it holds it, is handed on). Inlined into its
    /// two callers, both out of line: `block_until` and `retire_if_surplus`.
    #[inline]
    pub(super) fn park_outside(&self, cx: &WorkerContext<S>, work_queued: bool, done: impl Fn() -> bool, deadline: Option<u64>, st: &mut Seeking) {
        let me = cx.worker();
        if let Some(is_waking) = st.parks_outside(work_queued) {
            self.notify_cold(is_waking);
        }
        cx.interrupt_interval();
        while !done() {
            self.park_until(&me.parker, deadline);
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
                self.push_ring_cold(cx, task);
            }
        }
        if !me.ring.is_empty() {
            self.notify_cold(false);
        }
        self.maintenance_at_tick_end(me);
    }
}
