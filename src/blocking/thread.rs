//! A blocking thread's life: its loop (run what is queued, go idle, wake or time out), and its
//! exit.

use core::ffi::c_void;
use core::ptr::{self, NonNull};
use core::time::Duration;


use crate::platform::{Parker, Spawner, ThreadStart};
use crate::sync::{fence, spin_hint, Backoff, Ordering};
use crate::task::Task;

use super::counts::Counts;
use super::inner::{Inner, Slot, Spawn, Woken};
use super::slot::{EMPTY, EXITING, IDLE, NOTIFIED, RUNNING};
use super::task::BlockingTask;

impl<S: Spawner> Inner<S> {
    /// Starts one thread if no start is in flight and the cap allows.
    pub(super) fn spawn_one(&self) -> Spawn {
        if self.try_reserve(true).is_err() {
            return Spawn::NotNeeded;
        }
        let slot = self.claim_slot();
        let start = ThreadStart { entry: thread_main::<S>, arg: ptr::from_ref(slot).cast_mut().cast() };
        match self.spawner.spawn(start, self.stack_size) {
            Ok(()) => {
                self.totals.spawned.fetch_add(1, Ordering::Relaxed);
                Spawn::Started
            }
            Err(_) => {
                self.totals.spawn_failures.fetch_add(1, Ordering::Relaxed);
                // Release: nothing of ours is left in the slot for its next owner.
                slot.state.store(EMPTY, Ordering::Release);
                self.release(Counts::ONE_THREAD | Counts::SPAWNING);
                Spawn::Failed
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // The thread loop

    /// The body of every pool thread: pass on the SPAWNING token, then drain / idle until the
    /// keep-alive expires or shutdown, and leave (or come back, see `leave`).
    pub(super) fn thread_loop(&self, first: &Slot<S>) {
        let mut slot = first;
        self.spawner.set_current_worker(ptr::from_ref(&self.thread_mark).cast());
        self.on_start();
        loop {
            self.drain(&slot.parker);
            // Shutdown: leave once the queue is drained. Otherwise idle; notified (or work
            // seen), drain again; keep-alive expired, leave.
            if !self.counts().shutdown() && self.idle_wait(slot) == Woken::Work {
                continue;
            }
            match self.leave(slot) {
                Some(next) => slot = next,
                None => break,
            }
        }
        self.spawner.set_current_worker(ptr::null());
    }

    /// A new thread hands back the SPAWNING token it was started with, and starts the next
    /// thread if work is still waiting beyond the task it will take and no thread is idle
    /// (the spawn cascade: one start in flight at a time, each new thread starting the next).
    pub(super) fn on_start(&self) {
        self.counts.fetch_and(!Counts::SPAWNING, Ordering::AcqRel);
        // Pairs with the fence in `notify`: a submit that saw SPAWNING (and so did not start a
        // thread) has its task counted in the `queued` we read here.
        fence(Ordering::SeqCst);
        if self.queued.load(Ordering::Relaxed) > 1 && self.idle.load(Ordering::Relaxed) == 0 {
            let _ = self.spawn_one();
        }
    }

    /// Runs (or, during shutdown, cancels) tasks until `queued` is zero.
    ///
    /// `queued > 0` with nothing to pop is transient: a push between its announcement and its
    /// link, another thread holding the consumer end for one pop, or a pop not yet counted. We
    /// back off on `parker` (spin briefly, then 50 µs naps: no clock needed).
    pub(super) fn drain(&self, parker: &S::Parker) {
        let mut backoff = Backoff::new(50, 50);
        loop {
            if let Some(task) = self.pop() {
                self.execute(task);
                backoff = Backoff::new(50, 50);
                continue;
            }
            if self.queued.load(Ordering::Acquire) == 0 {
                return;
            }
            backoff.snooze(parker);
        }
    }

    /// Pops one task (holding the consumer end only for the pop).
    pub(super) fn pop(&self) -> Option<NonNull<Task>> {
        let mut consumer = self.queue.try_lock()?;
        let task = consumer.pop();
        drop(consumer);
        if task.is_some() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        task
    }

    /// Runs a dequeued task, or hands it back through its cancel callback if shutdown has
    /// begun and it is neither mandatory nor without a cancel callback.
    pub(super) fn execute(&self, task: NonNull<Task>) {
        // SAFETY: `submit` only queues the `task` field of a `BlockingTask`, which is its first
        // field (repr(C)); it stays valid and unmodified until one of its callbacks starts.
        let (cancel, flags) = unsafe {
            let header = task.cast::<BlockingTask>();
            ((*header.as_ptr()).cancel, (*header.as_ptr()).flags)
        };
        if flags & BlockingTask::MANDATORY == 0 && self.counts().shutdown() {
            if let Some(cancel) = cancel {
                // SAFETY: dequeued, so this is its one callback; the pool does not touch the
                // task afterwards.
                unsafe { crate::task::call(cancel, task.as_ptr()) };
                self.totals.cancelled.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        // SAFETY: dequeued, so this is its one run.
        unsafe { Task::run(task) };
        self.totals.run.fetch_add(1, Ordering::Relaxed);
    }

    /// Joins the idle set and parks until notified or the keep-alive expires.
    pub(super) fn idle_wait(&self, slot: &Slot<S>) -> Woken {
        // Order: state, count, bit. A notifier that finds the bit (Acquire) sees the count it
        // will decrement; one that sees only the count and not the bit is covered by the fence.
        slot.state.store(IDLE, Ordering::Release);
        self.idle.fetch_add(1, Ordering::Relaxed);
        self.set_idle_bit(slot.index);
        // Pairs with the fences in `notify` and `begin_shutdown`: either the submitter sees us
        // (count, bit, IDLE) or we see its `queued`; either shutdown sees our IDLE or we see
        // SHUTDOWN.
        fence(Ordering::SeqCst);
        if self.queued.load(Ordering::Relaxed) > 0 || self.counts().shutdown() {
            return self.stop_idling(slot);
        }
        let start = self.spawner.now_ns();
        loop {
            let timeout = match start {
                Some(t0) => match self.remaining(t0) {
                    Some(d) => d,
                    None => break,
                },
                None => self.keep_alive,
            };
            if timeout.is_zero() {
                break;
            }
            slot.parker.park_timeout(timeout);
            // Acquire: pairs with the notifier's AcqRel CAS.
            if slot.state.load(Ordering::Acquire) == NOTIFIED {
                self.woken(slot);
                return Woken::Work;
            }
            // Still IDLE: a timeout, or a spurious return. Without a clock we cannot tell: treat
            // it as the timeout (module docs). With one, `remaining` decides.
            if start.is_none() {
                break;
            }
        }
        // Keep-alive expired: leave the idle set for good, unless a notifier got there first.
        match slot.state.compare_exchange(IDLE, EXITING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                self.clear_idle_bit(slot.index);
                self.idle.fetch_sub(1, Ordering::Relaxed);
                Woken::TimedOut
            }
            Err(_) => {
                self.woken(slot);
                Woken::Work
            }
        }
    }

    /// Leaves the idle set before parking (work or shutdown was seen).
    pub(super) fn stop_idling(&self, slot: &Slot<S>) -> Woken {
        match slot.state.compare_exchange(IDLE, RUNNING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                self.clear_idle_bit(slot.index);
                self.idle.fetch_sub(1, Ordering::Relaxed);
            }
            // NOTIFIED: the notifier already took us out of `idle`.
            Err(_) => self.woken(slot),
        }
        Woken::Work
    }

    /// The owner of a NOTIFIED slot takes the notification.
    pub(super) fn woken(&self, slot: &Slot<S>) {
        debug_assert_eq!(slot.state.load(Ordering::Relaxed), NOTIFIED);
        self.clear_idle_bit(slot.index);
        slot.state.store(RUNNING, Ordering::Relaxed);
    }

    /// Time left of the keep-alive that started at `t0`; `None` once it has passed.
    pub(super) fn remaining(&self, t0: u64) -> Option<Duration> {
        let keep = u64::try_from(self.keep_alive.as_nanos()).unwrap_or(u64::MAX);
        let elapsed = self.spawner.now_ns()?.saturating_sub(t0);
        (elapsed < keep).then(|| Duration::from_nanos(keep - elapsed))
    }

    pub(super) fn set_idle_bit(&self, index: usize) {
        // Release: pairs with the Acquire scan in `wake_one` (publishes `idle += 1`).
        self.idle_set.insert(index, Ordering::Release);
    }

    pub(super) fn clear_idle_bit(&self, index: usize) {
        self.idle_set.remove(index, Ordering::Relaxed);
    }

    /// The thread leaves: it empties its slot, releases its place, and exits, unless a task
    /// was submitted meanwhile and it can take a place again (it then returns the slot it runs
    /// in from now on).
    pub(super) fn leave(&self, slot: &Slot<S>) -> Option<&Slot<S>> {
        // Slot first, place second: keeps "a slot is non-EMPTY only while its place is
        // counted" (see `claim_slot`). Release: our last use of the slot happens before the
        // next owner's claim.
        slot.state.store(EMPTY, Ordering::Release);
        let prev = Counts(self.counts.fetch_sub(Counts::ONE_THREAD, Ordering::AcqRel));
        debug_assert!(prev.threads() >= 1, "a thread left without a place: {prev:?}");
        // Pairs with the fence in `submit`: a submit that still counted us (and so started no
        // thread) has announced its task in the `queued` we read here.
        fence(Ordering::SeqCst);
        if !prev.shutdown() && self.queued.load(Ordering::Relaxed) > 0 {
            loop {
                match self.try_reserve(false) {
                    Ok(()) => return Some(self.claim_slot()),
                    // Full, and one of the places is a start in flight, which may still fail
                    // and give its place back: wait for it to resolve, then try again (else the
                    // task could be left with no thread at all). Deciding on the counts that
                    // refused us, not on a later load, closes the window where the start fails
                    // between our attempt and our look.
                    Err(c) if !c.shutdown() && c.spawning() => spin_hint(),
                    // Full with running threads (they drain the queue before idling), or
                    // shutting down (shutdown drains it).
                    Err(_) => break,
                }
            }
        }
        self.totals.exited.fetch_add(1, Ordering::Relaxed);
        if prev.shutdown() && prev.threads() == 1 {
            self.join_parker.unpark();
        }
        None
    }
}

/// The entry point of every pool thread.
///
/// # Safety
/// `arg` points to a slot of a live pool, claimed for this thread. The pool is freed only after
/// `join_all`, which waits for this function to return.
unsafe extern "C" fn thread_main<S: Spawner>(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let slot = unsafe { &*arg.cast_const().cast::<Slot<S>>() };
    // SAFETY: `pool` was set at construction, before any thread started; the pool outlives us.
    let inner = unsafe { &*slot.pool };
    inner.thread_loop(slot);
}
