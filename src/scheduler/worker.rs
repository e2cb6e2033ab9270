//! A worker thread: its shared state ([`Worker`]; the owner-only part is its
//! [`WorkerContext`], `context.rs`), its entry point, its run loop and the order in which it
//! looks for work (design text 002, "dequeue", with text 003's LIFO slot and
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
//! # One waiting loop
//! [`Inner::run_until`] is the worker's loop and every wait on a worker (a stolen join half, a
//! latch, an async join handle, `block_on`): the same search, notification and sleep, with an
//! "until" condition. A wait searches related work first (its own join deque, then the deque
//! of the worker that stole the half it waits for) and the rest of the order above only
//! within the nesting bound of `context.rs` ("Bounded helping"); past it, it sleeps on its
//! parker until its condition holds.
//!
//! [`ThreadPool::submit_lifo`]: super::ThreadPool::submit_lifo
//!
//! A worker that finds work after taking more than one task (`pushed`), or while it is the
//! waking thread, notifies before running it, so sleeping threads join in as work appears
//! (the wake-up cascade) but never more than one at a time.
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
//! injector interval and [`MAX_LIFO_STREAK`] already bound the wait of injected and ring tasks;
//! the budget is the outer bound that holds whatever those two do. The tick is counted on the worker's own `polled` counter (see `stats.rs`), so
//! the budget costs one test and branch per task.
//!
//! # Lifetime
//! A `Worker` is heap-allocated by its own thread when it starts and linked into the pool's
//! intrusive, push-only list. It is freed only when the pool is dropped, after every thread
//! was joined: so thieves, notifiers and shutdown may touch any worker in the list at any time
//! without further synchronisation. Its `WorkerContext` lives in the thread's entry frame
//! (`worker_main`) while the thread runs the loop.

use core::ffi::c_void;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use super::context::WorkerContext;
use super::sleep::Waited;
use super::stats::Counters;
use super::Inner;
use super::frame::Demand;
use crate::latch::Signal;
use crate::platform::{Parker, Spawner, ThreadStart};
use crate::queue::ring::{Ring, CAPACITY};
use crate::sync::{fence, AtomicBool, AtomicPtr, CachePadded, Ordering};
use crate::task::Task;

/// Most LIFO-slot tasks run in a row before the ring gets a turn (text 003).
pub(crate) const MAX_LIFO_STREAK: u32 = 3;
/// Most tasks a worker runs per tick (text 003's cooperative budget; module docs). A power of
/// two: the end of a tick is a mask test on the worker's run counter.
pub(crate) const BUDGET_PER_TICK: usize = 128;
const _: () = assert!(BUDGET_PER_TICK.is_power_of_two());

/// The part of a worker that other threads touch (thieves, notifiers, stats readers, shutdown).
/// What only the worker's own thread touches is its [`WorkerContext`] (`context.rs`).
pub(crate) struct Worker<S: Spawner> {
    /// The pool (type-erased `*const Inner<S>`): how a new thread finds its pool (`worker_main`).
    pub(crate) pool: *const (),
    /// The next worker in the pool's list (older). Immutable once the worker is published.
    pub(crate) next: *mut Worker<S>,
    /// Position in the idle map and the worker table.
    pub(crate) index: usize,
    /// Set while this worker sleeps in a wait *inside a task* (counted idle in `Sync`, yet a
    /// task is running): `ThreadPool::wait_idle` must not take it for idle.
    pub(crate) waiting_in_task: AtomicBool,
    /// The hungry and record flags: idle workers raise the hunger, this worker's `join`s read
    /// the record flag (`scheduler::frame`, "The record flag"; `context.rs`, "The hungry flag").
    pub(crate) demand: Demand,
    /// The newest task scheduled LIFO on this worker; stealable when the ring is empty.
    pub(crate) lifo: AtomicPtr<Task>,
    /// The worker's own tasks.
    pub(crate) ring: Ring,
    /// Fork-join jobs offered by `join` on this worker (owner LIFO, thieves take the oldest).
    pub(crate) joins: crate::queue::deque::JoinDeque,
    /// The worker sleeps on this.
    pub(crate) parker: S::Parker,
    /// What this worker did (`stats.rs`). Written only by this worker (Relaxed load + store);
    /// padded so that a stats reader pulling the line never disturbs the fields above, which
    /// thieves and notifiers read.
    pub(crate) stats: CachePadded<Counters>,
}

impl<S: Spawner> Worker<S> {
    /// Any thread: the counters of a worker from the worker table, without a reference to the
    /// whole `Worker` (its thread may still be writing `next` while it links itself into the
    /// pool's list, after `register` published it in the table: a `&Worker` would race with
    /// that write; found by Miri in `tests/stats.rs`).
    pub(crate) fn stats_of<'a>(worker: NonNull<Worker<S>>) -> &'a Counters {
        // SAFETY: workers from the table are initialised (the table's Release store / the
        // reader's Acquire load) and live until the pool is dropped; only the `stats` field is
        // borrowed, and it is only ever accessed through atomics.
        let padded = unsafe { &*ptr::addr_of!((*worker.as_ptr()).stats) };
        &padded.0
    }

    /// Any thread: the join deque of a worker from the worker table, without a reference to
    /// the whole `Worker` (as [`stats_of`](Self::stats_of)).
    ///
    /// # Safety
    /// `worker` came from the worker table (initialised, and live until the pool is dropped).
    pub(crate) unsafe fn joins_of<'a>(worker: NonNull<Worker<S>>) -> &'a crate::queue::deque::JoinDeque {
        // SAFETY: the caller's contract; only the `joins` field is borrowed, and it is only
        // ever accessed through atomics.
        unsafe { &*ptr::addr_of!((*worker.as_ptr()).joins) }
    }

    /// Owner: whether its own queues (the ring, the LIFO slot) hold a task. A hint for the
    /// owner's decisions to notify or to hand a role on (Relaxed).
    #[inline]
    pub(crate) fn holds_tasks(&self) -> bool {
        !self.ring.is_empty() || !self.lifo.load(Ordering::Relaxed).is_null()
    }

    /// Owner: counts one successful steal that took `tasks` tasks.
    #[inline]
    fn count_steal(&self, tasks: usize) {
        self.stats.steals.bump_owned();
        self.stats.stolen.add_owned(tasks);
    }
}

impl<S: Spawner> core::fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).field("ring", &self.ring).finish_non_exhaustive()
    }
}

/// What a wait waits for: a signal, and, when it is a stolen join half's, the worker that stole
/// it (whose join deque holds the forks of that half: related work, "leapfrogging").
#[derive(Clone, Copy)]
pub(crate) struct Until<'a> {
    pub(crate) signal: &'a Signal,
    /// Index of the worker running the awaited job, if known.
    pub(crate) thief: Option<usize>,
}

impl<S: Spawner> Inner<S> {
    /// What a new thread runs: `worker_main` on the worker allocated for it.
    pub(crate) fn thread_start(&self, worker: NonNull<Worker<S>>) -> ThreadStart {
        ThreadStart { entry: worker_main::<S>, arg: worker.as_ptr().cast::<c_void>() }
    }

    /// Allocates the state of a thread about to be started, before asking for the thread, so
    /// that running out of memory is a failed spawn (`fallible`). Not published yet: the new
    /// thread does that (`register`); a spawn that fails frees it (`free_unstarted`).
    pub(crate) fn alloc_worker(&self) -> Result<NonNull<Worker<S>>, crate::Error> {
        let worker = crate::fallible::try_box(Worker {
            pool: ptr::from_ref(self).cast::<()>(),
            next: ptr::null_mut(),
            index: usize::MAX,
            // Hungry: the first join on this worker offers work, so a pool that may still
            // start threads starts one (context.rs, "The hungry flag").
            demand: Demand::new(),
            waiting_in_task: AtomicBool::new(false),
            lifo: AtomicPtr::new(ptr::null_mut()),
            ring: Ring::new(),
            joins: crate::queue::deque::JoinDeque::new(),
            parker: self.spawner.new_parker(),
            stats: CachePadded(Counters::default()),
        })?;
        Ok(NonNull::from(Box::leak(worker)))
    }

    /// Frees a worker from `alloc_worker` whose thread could not be started.
    ///
    /// # Safety
    /// `worker` came from `alloc_worker` and was never handed to a thread.
    pub(crate) unsafe fn free_unstarted(worker: NonNull<Worker<S>>) {
        // SAFETY: the caller's contract: unpublished, so still exclusively ours.
        drop(unsafe { Box::from_raw(worker.as_ptr()) });
    }

    /// Gives this thread's worker (from `alloc_worker`) its slot and links it into the pool.
    fn register(&self, worker: NonNull<Worker<S>>) {
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        // `spawned` never exceeds `max_threads` and threads only exit at shutdown, so every
        // started thread gets a slot.
        assert!(index < self.worker_table.len(), "more threads started than max_threads");
        // SAFETY: not yet published, so still exclusively ours.
        unsafe { (*worker.as_ptr()).index = index };
        // Release: the worker's fields are initialised before anyone can reach it.
        self.worker_table[index].store(worker.as_ptr(), Ordering::Release);
        let mut head = self.workers.load(Ordering::Relaxed);
        loop {
            // SAFETY: not yet published, so still exclusively ours.
            unsafe { (*worker.as_ptr()).next = head };
            match self.workers.compare_exchange_weak(head, worker.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

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
                    released = self.waits_released();
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
                        if !self.waits_released() {
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
    fn find_for_wait(&self, cx: &WorkerContext<S>, until: Until<'_>) -> Found {
        // Our own forks, newest first: the innermost computation we wait for.
        if let Some(task) = cx.joins_pop() {
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
    fn find_local(&self, cx: &WorkerContext<S>) -> Option<NonNull<Task>> {
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
        cx.ring_pop()
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
        cx.lifo_streak.set(0);
        self.push_ring(cx, task);
        None
    }

    /// Owner: pushes to the back of our ring, spilling half of it to the injector when full.
    #[inline]
    pub(crate) fn push_ring(&self, cx: &WorkerContext<S>, task: NonNull<Task>) {
        if let Err(overflow) = cx.ring_push(task) {
            self.spill(cx, overflow);
        }
    }

    /// The overflow of our full ring goes to the injector: the tasks it had taken from the
    /// injector back to the front, the rest to the back (module docs, "Order"). Internal
    /// pushes: accepted even while shutting down (part of queued work). Out of line, so the
    /// inlined `push_ring` (the yield path) stays a few instructions.
    #[cold]
    #[inline(never)]
    fn spill(&self, cx: &WorkerContext<S>, mut overflow: crate::task::Batch) {
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
    /// (returns true then). Notifies nobody: the caller does.
    #[inline]
    pub(crate) fn push_lifo(&self, cx: &WorkerContext<S>, task: NonNull<Task>) -> bool {
        // Release: a thief that swaps the task out sees its contents.
        let prev = cx.worker().lifo.swap(task.as_ptr(), Ordering::AcqRel);
        if let Some(prev) = NonNull::new(prev) {
            self.push_ring(cx, prev);
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
        if let Some(task) = cx.joins_pop() {
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
                if let Some(stolen) = cx.steal_ring(v) {
                    me.count_steal(1 + stolen.queued as usize);
                    return Some((stolen.task, stolen.queued > 0));
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
                fair_share(consumer.len() + 1, self.load_sync(Ordering::Relaxed).spawned()) - 1
            } else {
                0
            };
            let mut moved = 0;
            while moved < room {
                let Some(task) = consumer.pop() else { break };
                // `room` slots are free and only we push to our ring, so this cannot overflow.
                let pushed = cx.ring_push(task);
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
    /// spin on each other's notifications until the pusher ran (loom). (Found by
    /// `c_tests/stress.c`'s burst test; `scheduler/README.md` has the argument.)
    fn after_injector_unlock(&self) {
        fence(Ordering::SeqCst);
        if self.injector.has_ready() {
            self.notify(false);
        }
    }
}

/// What a waiting worker's search found.
enum Found {
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

/// Waiting for another thread's few instructions (a half-linked push): spin a little, then
/// sleep briefly, so a host without preemption still lets the other thread finish.
pub(crate) fn backoff<P: Parker>(parker: &P, spins: &mut u32) {
    // Under loom a spin is a yield to the other threads already: one per round keeps the
    // models' branch counts bounded.
    const SPINS: u32 = if cfg!(loom) { 0 } else { 64 };
    if *spins < SPINS {
        *spins += 1;
        crate::sync::spin_hint();
    } else {
        parker.park_timeout(core::time::Duration::from_micros(50));
    }
}

/// The entry point of every worker thread.
///
/// # Safety
/// `arg` is a worker from `alloc_worker` of a live pool, which outlives this thread (the pool
/// joins it), handed to this thread alone.
unsafe extern "C" fn worker_main<S: Spawner>(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let worker = unsafe { NonNull::new_unchecked(arg.cast::<Worker<S>>()) };
    // SAFETY: `pool` was set by `alloc_worker` to the live pool's `Inner<S>`.
    let pool = unsafe { &*(*worker.as_ptr()).pool.cast::<Inner<S>>() };
    pool.register(worker);
    let stack_top = 0u8;
    // The owner-only half of the worker: it lives in this frame, on this thread, while the
    // thread runs the pool's loop, and the thread-local slot points to it meanwhile.
    let cx = WorkerContext::new(pool, worker, ptr::from_ref(&stack_top).addr());
    pool.spawner.set_current_worker(ptr::from_ref(&cx).cast());
    pool.run_until(&cx, None);
    pool.spawner.set_current_worker(ptr::null());
    pool.unregister_thread();
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
