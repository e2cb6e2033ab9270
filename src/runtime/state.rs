//! The packed task state word: one `AtomicUsize` per task holding six flags and a reference
//! count, so every transition is one atomic read-modify-write (design text 003, "Task state:
//! 64-bit packed atomic"; here `usize`, so 32-bit targets keep 24 bits of count).
//!
//! ```text
//!  bit   8..               7..6      5             4          3         2          1        0
//!       +-----------------+--------+--------------+----------+---------+----------+--------+-----------+
//!       | refcount        | (free) | JOIN_INTEREST| CANCELLED| COMPLETE| NOTIFIED | RUNNING| SCHEDULED |
//!       +-----------------+--------+--------------+----------+---------+----------+--------+-----------+
//! ```
//!
//! * `SCHEDULED`: the task is in one of the pool's queues (or about to be pushed). The queue
//!   holds one reference. Set by the one wake that finds the task idle (so a task is queued at
//!   most once however many times it is woken); cleared when a worker starts running it.
//! * `RUNNING`: a thread owns the future: it is polling it, or cancelling it. Exclusive.
//!   A task that woke itself during its poll (a `yield_now`) goes back to the queue still
//!   `RUNNING`, not `SCHEDULED` (the queue then holds `RUNNING` and the reference), so a yield
//!   costs no RMW on this word; wakes from other threads meanwhile set `NOTIFIED`.
//! * `NOTIFIED`: woken while `RUNNING`; the poller re-queues the task when the poll returns
//!   `Pending` (at the back of the queue: a task that wakes itself does not run again first).
//! * `COMPLETE`: the future is gone; the output (or the `JoinError`) is in the task. Final.
//! * `CANCELLED`: `abort` was requested, or the pool refused to queue the task. The owner of
//!   `RUNNING` drops the future instead of polling it.
//! * `JOIN_INTEREST`: the `JoinHandle` exists; it, not the task, drops the output, and the
//!   completing thread sets the join slot's [`Signal`](crate::Signal) (which holds the
//!   handle's waker, if it registered one: the slot's own protocol, `latch.rs`, decides who
//!   touches the waker, so no bit here does).
//! * refcount: the `JoinHandle` (1), every `Waker` clone (1 each), and the queue while
//!   `SCHEDULED` / the poller while `RUNNING` (1). The task is freed when it reaches 0.
//!
//! ```text
//!             wake (idle): +SCHEDULED, +1 ref (the queue's)      transition_to_notified_by_*
//!   idle  ------------------------------------------------->  SCHEDULED (in a queue)
//!    ^                                                              | transition_to_running
//!    | transition_to_idle: -RUNNING, -1 ref                         | SCHEDULED -> RUNNING (xor)
//!    |                                                              v
//!    +-------------------------------------------------------  RUNNING --wake--> RUNNING+NOTIFIED
//!                                                                   |                 |
//!       transition_to_idle, NOTIFIED: -RUNNING -NOTIFIED +SCHEDULED, re-queued <------+
//!       transition_to_complete:       RUNNING -> COMPLETE (xor)
//!       transition_to_cancelled:      +CANCELLED (an idle task: +RUNNING too, claimed here)
//!       transition_to_join_handle_dropped: -JOIN_INTEREST -1 ref (before COMPLETE)
//! ```
//!
//! Every transition is a method on [`State`] that does its read-modify-write and returns what
//! the caller must do next (an enum); the harness (`harness.rs`) acts on it and never writes a
//! compare-and-swap loop itself. [`Snapshot`] is one value of the word.
//!
//! # Orderings
//! The word is only ever changed by read-modify-writes (never a plain store), so every Release
//! on it heads a release sequence that any later Acquire RMW or load synchronises with.
//! * A wake is a Release CAS even when it changes nothing (task already queued or already
//!   notified): a CAS that writes the same value is still in the word's modification order, so
//!   the next poll's Acquire `fetch_xor` synchronises with it and sees what the waker wrote
//!   before waking (a channel push, say). A wake that only *read* the word would leave that
//!   store-buffering window open: waker stores data then reads SCHEDULED, poller flips to
//!   RUNNING then reads stale data, and the wake is lost.
//! * The exception (`std`): a task that wakes itself by reference on the thread that is polling
//!   it sets a bit in a thread-local instead (`current.rs`). The only reader is that same thread,
//!   after the poll, in program order: nothing needs publishing. The harness then re-queues
//!   the task without touching the word (it stays `RUNNING`; `transition_to_running` sees that
//!   with a load and skips its `fetch_xor`), unless the word shows a wake or an abort from
//!   another thread ([`Snapshot::may_requeue_running`]). The queue's Release push and Acquire
//!   pop/steal carry the future's state to the next poller.
//! * Starting a poll is Acquire (sees the waker's data and the previous poll's writes to the
//!   future); ending a poll is AcqRel (Release publishes the future's new state to whoever polls,
//!   cancels or frees it next).
//! * Completion is AcqRel: Release publishes the output to the `JoinHandle` (which reads it
//!   after an Acquire of COMPLETE or of the join signal), Acquire sees a `JoinHandle` drop.
//! * Dropping a reference is Release, and the one that drops the last reads the word again
//!   with Acquire before freeing (as `Arc`'s fence): every other owner's accesses happen
//!   before the free.

use core::fmt;

use crate::sync::{AtomicUsize, Ordering};

/// A task's state word, and every transition of it.
pub(crate) struct State(AtomicUsize);

/// One value of the state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(pub(crate) usize);

/// What [`State::transition_to_running`] leaves the caller to do (it holds `RUNNING` either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToRunning {
    /// Poll the future.
    Success,
    /// `abort` came first: drop the future and complete instead.
    Cancelled,
}

/// What [`State::transition_to_idle`] leaves the caller to do after a poll returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToIdle {
    /// Woken during the poll: now `SCHEDULED`; queue it (at the back), with the poller's
    /// reference.
    Requeue,
    /// Idle; the poller's reference is dropped and others remain.
    Idle,
    /// Idle, and the poller's reference was the last: free the task.
    Dealloc,
    /// Aborted during the poll: still `RUNNING`; drop the future and complete.
    Cancelled,
}

/// What [`State::transition_to_complete`] leaves the completing thread to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToComplete {
    /// A `JoinHandle` exists: it owns the output; set the join signal.
    NotifyJoin,
    /// No `JoinHandle`: the output is the completer's to drop.
    DropOutput,
}

/// What a wake by value leaves the waker to do (its reference is consumed either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToNotifiedByVal {
    /// Running (now NOTIFIED), queued, or complete with other references: nothing.
    DoNothing,
    /// Was idle, now `SCHEDULED`: queue it; the waker's reference becomes the queue's.
    Submit,
    /// Complete, and the waker held the last reference: free the task.
    Dealloc,
}

/// What a wake by reference leaves the waker to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToNotifiedByRef {
    /// Running (now NOTIFIED), queued, or complete: nothing.
    DoNothing,
    /// Was idle, now `SCHEDULED` with a new reference for the queue: queue it.
    Submit,
}

/// What `abort` ([`State::transition_to_cancelled`]) leaves the caller to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToCancelled {
    /// Complete, already cancelled, or queued / running (its runner drops the future).
    DoNothing,
    /// Was idle: the caller now holds `RUNNING`; drop the future and complete here.
    CancelIdle,
}

/// What dropping the `JoinHandle` leaves it to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToJoinHandleDropped {
    /// The task is complete and the output is the handle's: drop it, then drop the handle's
    /// reference (`ref_dec`). The word is unchanged.
    DropOutput,
    /// Detached (JOIN_INTEREST cleared, reference dropped); others hold references.
    Detached,
    /// Detached, and the handle held the last reference: free the task.
    Dealloc,
}

impl Snapshot {
    /// Queued (the queue holds a reference).
    pub(crate) const SCHEDULED: usize = 1 << 0;
    /// A thread owns the future.
    pub(crate) const RUNNING: usize = 1 << 1;
    /// Woken while running: re-queue after the poll.
    pub(crate) const NOTIFIED: usize = 1 << 2;
    /// Finished: output stored, future dropped.
    pub(crate) const COMPLETE: usize = 1 << 3;
    /// Abort requested (or queueing refused).
    pub(crate) const CANCELLED: usize = 1 << 4;
    /// The `JoinHandle` is alive.
    pub(crate) const JOIN_INTEREST: usize = 1 << 5;
    /// All flag bits (bits 6 and 7 are free, so the count starts on a hex digit).
    pub(crate) const FLAGS: usize = (1 << 6) - 1;
    /// The free bits between the flags and the count.
    pub(crate) const FREE: usize = (1 << 6) | (1 << 7);
    /// Where the reference count starts.
    pub(crate) const REF_SHIFT: u32 = 8;
    /// One reference.
    pub(crate) const REF_ONE: usize = 1 << Self::REF_SHIFT;
    /// The reference count's bits.
    pub(crate) const REF_MASK: usize = !((1 << Self::REF_SHIFT) - 1);
    /// Most references before we refuse to count (as `Arc`, half the range: a leak of clones
    /// long before an overflow could wrap the count to 0).
    pub(crate) const REF_MAX: usize = (Self::REF_MASK >> Self::REF_SHIFT) / 2;

    /// A freshly spawned task: queued, with a `JoinHandle`; two references (queue + handle).
    pub(crate) const INITIAL: Snapshot = Snapshot(Self::SCHEDULED | Self::JOIN_INTEREST | (2 * Self::REF_ONE));

    #[inline]
    pub(crate) fn is_scheduled(self) -> bool {
        self.0 & Self::SCHEDULED != 0
    }
    #[inline]
    pub(crate) fn is_running(self) -> bool {
        self.0 & Self::RUNNING != 0
    }
    #[inline]
    pub(crate) fn is_notified(self) -> bool {
        self.0 & Self::NOTIFIED != 0
    }
    #[inline]
    pub(crate) fn is_complete(self) -> bool {
        self.0 & Self::COMPLETE != 0
    }
    #[inline]
    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & Self::CANCELLED != 0
    }
    #[inline]
    pub(crate) fn has_join_interest(self) -> bool {
        self.0 & Self::JOIN_INTEREST != 0
    }
    /// Neither queued, running nor complete: a wake must queue it.
    #[inline]
    pub(crate) fn is_idle(self) -> bool {
        self.0 & (Self::SCHEDULED | Self::RUNNING | Self::COMPLETE) == 0
    }
    /// A running task that woke itself may go back to its queue still `RUNNING`, with no
    /// read-modify-write (`current.rs`): nobody else woke or aborted it (NOTIFIED, CANCELLED),
    /// so nothing in the word asks for more. A wake or `abort` racing the load that took this
    /// snapshot sets NOTIFIED / CANCELLED on a `RUNNING` task, which the next poll's
    /// `transition_to_running` or `transition_to_idle` acts on, as if it had come during it.
    #[inline]
    pub(crate) fn may_requeue_running(self) -> bool {
        self.0 & (Self::NOTIFIED | Self::CANCELLED) == 0
    }
    #[inline]
    pub(crate) fn refs(self) -> usize {
        self.0 >> Self::REF_SHIFT
    }

    /// The snapshot with `flag` set.
    #[inline]
    pub(crate) fn with(self, flag: usize) -> Snapshot {
        debug_assert!(flag & !Self::FLAGS == 0, "not a flag: {flag:#x}");
        Snapshot(self.0 | flag)
    }
    /// The snapshot with `flag` clear.
    #[inline]
    pub(crate) fn without(self, flag: usize) -> Snapshot {
        debug_assert!(flag & !Self::FLAGS == 0, "not a flag: {flag:#x}");
        Snapshot(self.0 & !flag)
    }
    /// One reference more.
    #[inline]
    pub(crate) fn ref_inc(self) -> Snapshot {
        debug_assert!(self.refs() > 0 && self.refs() < Self::REF_MAX, "ref_inc on {self:?}");
        Snapshot(self.0 + Self::REF_ONE)
    }
    /// One reference less.
    #[inline]
    pub(crate) fn ref_dec(self) -> Snapshot {
        debug_assert!(self.refs() > 0, "ref_dec on {self:?}");
        Snapshot(self.0 - Self::REF_ONE)
    }

    /// Debug check of the invariants every reachable state keeps.
    #[inline]
    pub(crate) fn debug_check(self) {
        debug_assert!(
            !(self.is_scheduled() && self.is_running()),
            "scheduled and running at once: {self:?}"
        );
        debug_assert!(!(self.is_complete() && (self.is_scheduled() || self.is_running())), "complete but live: {self:?}");
        debug_assert!(self.0 & Self::FREE == 0, "a free bit is set: {self:?}");
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut flags = f.debug_struct("State");
        flags.field("raw", &format_args!("{:#x}", self.0));
        for (bit, name) in [
            (Self::SCHEDULED, "SCHEDULED"),
            (Self::RUNNING, "RUNNING"),
            (Self::NOTIFIED, "NOTIFIED"),
            (Self::COMPLETE, "COMPLETE"),
            (Self::CANCELLED, "CANCELLED"),
            (Self::JOIN_INTEREST, "JOIN_INTEREST"),
        ] {
            if self.0 & bit != 0 {
                flags.field(name, &true);
            }
        }
        flags.field("refs", &self.refs()).finish()
    }
}

impl State {
    /// A freshly spawned task's word ([`Snapshot::INITIAL`]).
    pub(crate) fn new() -> Self {
        Self(AtomicUsize::new(Snapshot::INITIAL.0))
    }

    /// The current value.
    #[inline]
    pub(crate) fn load(&self, order: Ordering) -> Snapshot {
        Snapshot(self.0.load(order))
    }

    /// Whether the task is complete (Acquire: its output is visible).
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.load(Ordering::Acquire).is_complete()
    }

    /// A dequeued task starts its run: `SCHEDULED -> RUNNING`, or nothing if it was re-queued
    /// still `RUNNING` by its own poll (the self-wake path).
    ///
    /// A queued task is SCHEDULED, or RUNNING if its own poll re-queued it. Nobody else can set
    /// or clear either bit while the task is queued (only the queue's holder owns them; `abort`
    /// claims RUNNING only on an idle task), so one Relaxed load tells them apart. It costs no
    /// extra cache traffic: the worker just read this line for the callback.
    #[inline(always)]
    pub(crate) fn transition_to_running(&self) -> TransitionToRunning {
        let seen = self.load(Ordering::Relaxed);
        let prev = if seen.is_running() {
            // Still ours from the poll that re-queued us: no RMW. The previous poll's writes to
            // the future reached us through the queue (program order, or the steal's Acquire).
            // A wake from another thread since then left NOTIFIED, which `transition_to_idle`
            // acts on.
            seen
        } else {
            // SCHEDULED -> RUNNING in one RMW (a queued task is never running, so xor flips
            // both). Acquire: the wake that queued us (Release) and the previous poll's end
            // (Release) happen before this poll.
            Snapshot(self.0.fetch_xor(Snapshot::SCHEDULED | Snapshot::RUNNING, Ordering::Acquire))
        };
        prev.debug_check();
        debug_assert!(prev.is_scheduled() != prev.is_running() && !prev.is_complete(), "run on {prev:?}");
        if prev.is_cancelled() {
            TransitionToRunning::Cancelled
        } else {
            TransitionToRunning::Success
        }
    }

    /// The poll returned `Pending` (the caller holds `RUNNING` and the poller's reference, and
    /// `s` is a recent load): leave `RUNNING`, re-queue if woken meanwhile (NOTIFIED, or
    /// `self_woken`), or report an abort that came meanwhile. One CAS.
    #[inline]
    pub(crate) fn transition_to_idle(&self, mut s: Snapshot, self_woken: bool) -> TransitionToIdle {
        loop {
            s.debug_check();
            debug_assert!(s.is_running(), "transition_to_idle on {s:?}");
            if s.is_cancelled() {
                return TransitionToIdle::Cancelled;
            }
            let requeue = s.is_notified() || self_woken;
            let new = if requeue {
                // Woken during the poll: queued again, the reference passes to the queue.
                s.without(Snapshot::RUNNING | Snapshot::NOTIFIED).with(Snapshot::SCHEDULED)
            } else {
                s.without(Snapshot::RUNNING).ref_dec()
            };
            // AcqRel: Release publishes the future's new state to the next poller / canceller /
            // freer; Acquire sees a waker's data (if it set NOTIFIED) and, if we free, every
            // other owner's accesses.
            match self.0.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if requeue => return TransitionToIdle::Requeue,
                Ok(_) if new.refs() == 0 => return TransitionToIdle::Dealloc,
                Ok(_) => return TransitionToIdle::Idle,
                Err(actual) => s = Snapshot(actual),
            }
        }
    }

    /// `RUNNING -> COMPLETE` (the caller holds `RUNNING` and stored the result): who owns the
    /// output now.
    #[inline]
    pub(crate) fn transition_to_complete(&self) -> TransitionToComplete {
        // Running, never complete before: xor flips both. AcqRel: see the module docs
        // (publishes the output; sees the JoinHandle's drop).
        let prev = Snapshot(self.0.fetch_xor(Snapshot::RUNNING | Snapshot::COMPLETE, Ordering::AcqRel));
        prev.debug_check();
        debug_assert!(prev.is_running() && !prev.is_complete(), "complete on {prev:?}");
        if prev.has_join_interest() {
            TransitionToComplete::NotifyJoin
        } else {
            TransitionToComplete::DropOutput
        }
    }

    /// A wake that consumes the waker's reference: an idle task is queued (the reference
    /// becomes the queue's), a running one is marked NOTIFIED, a queued or complete one is left
    /// as it is. One CAS.
    #[inline]
    pub(crate) fn transition_to_notified_by_val(&self) -> TransitionToNotifiedByVal {
        let mut s = self.load(Ordering::Relaxed);
        loop {
            s.debug_check();
            let new = if s.is_idle() {
                s.with(Snapshot::SCHEDULED)
            } else if s.is_running() {
                s.with(Snapshot::NOTIFIED).ref_dec()
            } else {
                // Queued or complete: nothing to do but drop our reference (still a write: see
                // the module docs on why a wake always writes).
                s.ref_dec()
            };
            // AcqRel: Release publishes what the waker did before waking (module docs);
            // Acquire in case this drops the last reference.
            match self.0.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if s.is_idle() => return TransitionToNotifiedByVal::Submit,
                // A complete task whose last owner was this waker.
                Ok(_) if new.refs() == 0 => return TransitionToNotifiedByVal::Dealloc,
                Ok(_) => return TransitionToNotifiedByVal::DoNothing,
                Err(actual) => s = Snapshot(actual),
            }
        }
    }

    /// A wake that keeps the waker's reference (takes one for the queue if it queues it).
    #[inline]
    pub(crate) fn transition_to_notified_by_ref(&self) -> TransitionToNotifiedByRef {
        let mut s = self.load(Ordering::Relaxed);
        loop {
            s.debug_check();
            if s.is_complete() {
                // Never polled again: nothing to publish to.
                return TransitionToNotifiedByRef::DoNothing;
            }
            let new = if s.is_idle() {
                s.with(Snapshot::SCHEDULED).ref_inc()
            } else if s.is_running() {
                s.with(Snapshot::NOTIFIED)
            } else {
                // Already queued: write the same value (module docs: a wake always writes).
                s
            };
            // Release: publishes what the waker did before waking (module docs).
            match self.0.compare_exchange_weak(s.0, new.0, Ordering::Release, Ordering::Relaxed) {
                Ok(_) if s.is_idle() => return TransitionToNotifiedByRef::Submit,
                Ok(_) => return TransitionToNotifiedByRef::DoNothing,
                Err(actual) => s = Snapshot(actual),
            }
        }
    }

    /// `abort`: mark the task cancelled; an idle one is also claimed (`RUNNING`) so the caller
    /// drops its future right away.
    #[inline]
    pub(crate) fn transition_to_cancelled(&self) -> TransitionToCancelled {
        let mut s = self.load(Ordering::Relaxed);
        loop {
            s.debug_check();
            if s.is_complete() || s.is_cancelled() {
                return TransitionToCancelled::DoNothing;
            }
            let idle = s.is_idle();
            let new = if idle { s.with(Snapshot::CANCELLED | Snapshot::RUNNING) } else { s.with(Snapshot::CANCELLED) };
            // Acquire: claiming an idle task's future, we see the last poll's writes to it
            // (`transition_to_idle`'s Release).
            match self.0.compare_exchange_weak(s.0, new.0, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) if idle => return TransitionToCancelled::CancelIdle,
                Ok(_) => return TransitionToCancelled::DoNothing,
                Err(actual) => s = Snapshot(actual),
            }
        }
    }

    /// The `JoinHandle` goes away: before completion it gives up JOIN_INTEREST and its
    /// reference in one CAS; after, the output is its to drop (JOIN_INTEREST stays: the
    /// completer saw it) and the word is left for the caller's `ref_dec`.
    #[inline]
    pub(crate) fn transition_to_join_handle_dropped(&self) -> TransitionToJoinHandleDropped {
        let mut s = self.load(Ordering::Acquire);
        loop {
            if s.is_complete() {
                // Acquire (the load, or the failed CAS): the output is visible.
                return TransitionToJoinHandleDropped::DropOutput;
            }
            let new = s.without(Snapshot::JOIN_INTEREST).ref_dec();
            // AcqRel: Release, as any reference drop; Acquire on success if we free, and on
            // failure to see the output when the task just completed.
            match self.0.compare_exchange_weak(s.0, new.0, Ordering::AcqRel, Ordering::Acquire) {
                // Idle, no waker anywhere: it can never run again.
                Ok(_) if new.refs() == 0 => return TransitionToJoinHandleDropped::Dealloc,
                Ok(_) => return TransitionToJoinHandleDropped::Detached,
                Err(actual) => s = Snapshot(actual),
            }
        }
    }

    /// One more reference (a waker clone). The caller holds one.
    #[inline]
    pub(crate) fn ref_inc(&self) {
        // Relaxed, as `Arc::clone`: a new reference from an existing one needs no ordering.
        let prev = Snapshot(self.0.fetch_add(Snapshot::REF_ONE, Ordering::Relaxed));
        // As `Arc`: far more clones than memory could hold means leaked clones; refuse to count
        // on (wrapping would free a live task).
        assert!(prev.refs() < Snapshot::REF_MAX, "task reference count overflow");
    }

    /// One reference less; true if it was the last (the caller frees the task).
    #[inline]
    #[must_use = "the last reference frees the task"]
    pub(crate) fn ref_dec(&self) -> bool {
        // Release: our accesses to the task happen before the free (paired with the Acquire
        // load below).
        let prev = Snapshot(self.0.fetch_sub(Snapshot::REF_ONE, Ordering::Release));
        debug_assert!(prev.refs() > 0, "ref_dec on {prev:?}");
        if prev.refs() != 1 {
            return false;
        }
        // Acquire: every other owner's Release decrement happened before the free. A load
        // rather than an Acquire fence (as `Arc` does under ThreadSanitizer, which does not
        // model fences): it reads our own decrement, which is in the release sequence of every
        // earlier one (the word changes only by read-modify-writes), so it synchronises with
        // all of them. One load, on the freeing path only.
        let _ = self.0.load(Ordering::Acquire);
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
