//! The packed task state word: one `AtomicUsize` per task holding seven flags and a reference
//! count, so every transition is one atomic read-modify-write (design text 003, "Task state:
//! 64-bit packed atomic"; here `usize`, so 32-bit targets keep 24 bits of count).
//!
//! ```text
//!  bit   8..               7        6           5             4          3         2          1        0
//!       +-----------------+--------+-----------+-------------+----------+---------+----------+--------+-----------+
//!       | refcount        | (free) | JOIN_WAKER| JOIN_INTEREST| CANCELLED| COMPLETE| NOTIFIED | RUNNING| SCHEDULED |
//!       +-----------------+--------+-----------+-------------+----------+---------+----------+--------+-----------+
//! ```
//!
//! * `SCHEDULED`: the task is in one of the pool's queues (or about to be pushed). The queue
//!   holds one reference. Set by the one wake that finds the task idle (so a task is queued at
//!   most once however many times it is woken); cleared when a worker starts running it.
//! * `RUNNING`: a thread owns the future: it is polling it, or cancelling it. Exclusive.
//!   A task that woke itself during its poll (a `yield_now`) goes back to the queue still
//!   `RUNNING`, not `SCHEDULED` (the queue then holds `RUNNING` and the reference), so a yield
//!   costs no RMW on this word; wakes from other threads meanwhile set `NOTIFIED` (`raw.rs`).
//! * `NOTIFIED`: woken while `RUNNING`; the poller re-queues the task when the poll returns
//!   `Pending` (at the back of the queue: a task that wakes itself does not run again first).
//! * `COMPLETE`: the future is gone; the output (or the `JoinError`) is in the task. Final.
//! * `CANCELLED`: `abort` was requested, or the pool refused to queue the task. The owner of
//!   `RUNNING` drops the future instead of polling it.
//! * `JOIN_INTEREST`: the `JoinHandle` exists; it, not the task, drops the output.
//! * `JOIN_WAKER`: the join slot holds a waiter (a `Waker` or a `Signal`); while set and the
//!   task is not complete, only the completing thread may touch the slot.
//! * refcount: the `JoinHandle` (1), every `Waker` clone (1 each), and the queue while
//!   `SCHEDULED` / the poller while `RUNNING` (1). The task is freed when it reaches 0.
//!
//! Every transition is in `raw.rs`; this file only names the bits.

use core::fmt;

/// A snapshot of a task's state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(pub(crate) usize);

impl State {
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
    /// The join slot holds a waiter.
    pub(crate) const JOIN_WAKER: usize = 1 << 6;
    /// All flag bits (bit 7 is free, so the count starts on a hex digit).
    pub(crate) const FLAGS: usize = (1 << 7) - 1;
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
    pub(crate) const INITIAL: State = State(Self::SCHEDULED | Self::JOIN_INTEREST | (2 * Self::REF_ONE));

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
    #[inline]
    pub(crate) fn has_join_waker(self) -> bool {
        self.0 & Self::JOIN_WAKER != 0
    }
    /// Neither queued, running nor complete: a wake must queue it.
    #[inline]
    pub(crate) fn is_idle(self) -> bool {
        self.0 & (Self::SCHEDULED | Self::RUNNING | Self::COMPLETE) == 0
    }
    #[inline]
    pub(crate) fn refs(self) -> usize {
        self.0 >> Self::REF_SHIFT
    }

    /// The state with `flag` set.
    #[inline]
    pub(crate) fn with(self, flag: usize) -> State {
        debug_assert!(flag & !Self::FLAGS == 0, "not a flag: {flag:#x}");
        State(self.0 | flag)
    }
    /// The state with `flag` clear.
    #[inline]
    pub(crate) fn without(self, flag: usize) -> State {
        debug_assert!(flag & !Self::FLAGS == 0, "not a flag: {flag:#x}");
        State(self.0 & !flag)
    }
    /// One reference more.
    #[inline]
    pub(crate) fn ref_inc(self) -> State {
        debug_assert!(self.refs() > 0 && self.refs() < Self::REF_MAX, "ref_inc on {self:?}");
        State(self.0 + Self::REF_ONE)
    }
    /// One reference less.
    #[inline]
    pub(crate) fn ref_dec(self) -> State {
        debug_assert!(self.refs() > 0, "ref_dec on {self:?}");
        State(self.0 - Self::REF_ONE)
    }

    /// Debug check of the invariants every reachable state keeps.
    #[inline]
    pub(crate) fn debug_check(self) {
        debug_assert!(
            !(self.is_scheduled() && self.is_running()),
            "scheduled and running at once: {self:?}"
        );
        debug_assert!(!(self.is_complete() && (self.is_scheduled() || self.is_running())), "complete but live: {self:?}");
        debug_assert!(self.0 & (1 << 7) == 0, "the free bit is set: {self:?}");
    }
}

impl fmt::Debug for State {
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
            (Self::JOIN_WAKER, "JOIN_WAKER"),
        ] {
            if self.0 & bit != 0 {
                flags.field(name, &true);
            }
        }
        flags.field("refs", &self.refs()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::State;

    #[test]
    fn fields_do_not_overlap() {
        let flags = [
            State::SCHEDULED,
            State::RUNNING,
            State::NOTIFIED,
            State::COMPLETE,
            State::CANCELLED,
            State::JOIN_INTEREST,
            State::JOIN_WAKER,
        ];
        let mut seen = 0usize;
        for f in flags {
            assert_eq!(f.count_ones(), 1, "{f:#x} is one bit");
            assert_eq!(seen & f, 0, "{f:#x} overlaps another flag");
            seen |= f;
        }
        assert_eq!(seen & !State::FLAGS, 0, "flags inside FLAGS");
        assert_eq!(State::FLAGS & State::REF_MASK, 0, "flags and count overlap");
        assert_eq!(State::REF_ONE & State::REF_MASK, State::REF_ONE);
        assert_eq!((State::FLAGS | (1 << 7)) | State::REF_MASK, usize::MAX, "every bit has one meaning");
    }

    #[test]
    fn refcount_round_trip() {
        let s = State::INITIAL;
        assert_eq!(s.refs(), 2);
        assert!(s.is_scheduled() && s.has_join_interest() && !s.is_running());
        let s = s.ref_inc().ref_dec().ref_dec();
        assert_eq!(s.refs(), 1);
        assert_eq!(s.0 & State::FLAGS, State::SCHEDULED | State::JOIN_INTEREST);
        assert!(State(0).is_idle());
        assert!(!State::INITIAL.is_idle());
    }

    #[test]
    fn debug_is_hex_and_named() {
        let text = std::format!("{:?}", State::INITIAL);
        assert!(text.contains("0x221"), "{text}");
        assert!(text.contains("SCHEDULED") && text.contains("JOIN_INTEREST") && text.contains("refs: 2"), "{text}");
    }
}
