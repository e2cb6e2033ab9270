//! The packed `Sync` word: all thread coordination state of a pool in one atomic `u32`.
//!
//! Design text 002, "Counter/Sync Algorithm". This module is the value type, with named fields
//! and checked arithmetic, and the word's **transitions**: each event of the protocol (a
//! notify, a worker's wait, a failed spawn, a thread leaving, shutdown) is a method that takes
//! one snapshot and returns the next word and what the caller must do. They touch no atomic:
//! `protocol.rs` applies them with compare-and-swap loops, and the exhaustive test of the
//! protocol (`protocol/model.rs`) composes them without threads. Why no wake-up is lost is
//! argued in `scheduler/README.md` against these transitions.
//!
//! ```text
//!  bit  31            18 17             4   3        2       1 0
//!       [ spawned: 14  ][   idle: 14     ][unused][notified][state]
//! ```
//! * `state`: `Pending` (nobody is being woken), `Waking` (one thread holds the right to wake
//!   the next), `Signaled` (a wake was issued and not yet consumed), `Shutdown` (terminal).
//! * `notified`: a notification happened that no thread has consumed yet. A thread about to
//!   sleep consumes it instead and searches again, so a notify is never lost even when nobody
//!   could be woken for it.
//! * `idle`: threads counted as asleep (or about to be). The thread that consumes a wake-up
//!   decrements it, not the waker.
//! * `spawned`: threads started (or being started) and not yet exited. Shutdown completes when
//!   it reaches zero.

use core::fmt;

/// The most threads a pool can have: `spawned` and `idle` are 14-bit fields.
// The example is a cfg_attr(doc) attribute, which cbindgen does not copy into pool.h.
#[cfg_attr(
    doc,
    doc = "\n# Example\n\n```\nuse pool::{Config, MAX_THREADS};\nlet config = Config::default().with_max_threads(MAX_THREADS);\nassert_eq!(config.max_threads, (1 << 14) - 1);\n```"
)]
pub const MAX_THREADS: usize = (1 << 14) - 1;

/// The wake-up state machine's state (2 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum State {
    /// No thread is being woken: the next notify may wake or spawn one.
    Pending = 0b00,
    /// One thread (the waking thread) is searching; it will hand the wake right on when it
    /// finds work, or give it back when it finds none.
    Waking = 0b01,
    /// A wake was issued (unpark or spawn); the woken thread has not consumed it yet.
    Signaled = 0b10,
    /// The pool is shutting down. Terminal.
    Shutdown = 0b11,
}

/// A snapshot of the pool's `Sync` word. A `Copy` value; the atomic lives in the pool.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Sync(pub(crate) u32);

impl Sync {
    const STATE_MASK: u32 = 0b11;
    const NOTIFIED: u32 = 1 << 2;
    const IDLE_SHIFT: u32 = 4;
    const SPAWNED_SHIFT: u32 = 18;
    const COUNT_MASK: u32 = (1 << 14) - 1;
    /// One idle thread, as a word-sized increment.
    pub(crate) const ONE_IDLE: u32 = 1 << Self::IDLE_SHIFT;
    /// One spawned thread, as a word-sized increment.
    pub(crate) const ONE_SPAWNED: u32 = 1 << Self::SPAWNED_SHIFT;

    #[inline]
    pub(crate) fn state(self) -> State {
        match self.0 & Self::STATE_MASK {
            0b00 => State::Pending,
            0b01 => State::Waking,
            0b10 => State::Signaled,
            _ => State::Shutdown,
        }
    }

    #[inline]
    #[must_use]
    pub(crate) fn with_state(self, state: State) -> Self {
        Self((self.0 & !Self::STATE_MASK) | state as u32)
    }

    #[inline]
    pub(crate) fn notified(self) -> bool {
        self.0 & Self::NOTIFIED != 0
    }

    #[inline]
    #[must_use]
    pub(crate) fn with_notified(self, notified: bool) -> Self {
        if notified {
            Self(self.0 | Self::NOTIFIED)
        } else {
            Self(self.0 & !Self::NOTIFIED)
        }
    }

    #[inline]
    pub(crate) fn idle(self) -> u32 {
        (self.0 >> Self::IDLE_SHIFT) & Self::COUNT_MASK
    }

    #[inline]
    pub(crate) fn spawned(self) -> u32 {
        (self.0 >> Self::SPAWNED_SHIFT) & Self::COUNT_MASK
    }

    #[inline]
    #[must_use]
    pub(crate) fn inc_idle(self) -> Self {
        debug_assert!(self.idle() < Self::COUNT_MASK, "idle overflow: {self:?}");
        Self(self.0 + Self::ONE_IDLE)
    }

    #[inline]
    #[must_use]
    pub(crate) fn dec_idle(self) -> Self {
        debug_assert!(self.idle() > 0, "idle underflow: {self:?}");
        Self(self.0 - Self::ONE_IDLE)
    }

    #[inline]
    #[must_use]
    pub(crate) fn inc_spawned(self) -> Self {
        debug_assert!(self.spawned() < Self::COUNT_MASK, "spawned overflow: {self:?}");
        Self(self.0 + Self::ONE_SPAWNED)
    }

    #[inline]
    #[must_use]
    pub(crate) fn dec_spawned(self) -> Self {
        debug_assert!(self.spawned() > 0, "spawned underflow: {self:?}");
        Self(self.0 - Self::ONE_SPAWNED)
    }
}

/// What a notify does, decided from one snapshot of the word ([`Sync::notify`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// The pool is shutting down: nothing to tell.
    Stop,
    /// `notified` is already set and nobody can be woken: write nothing. Without a write no
    /// Release carries the caller's push, so the caller fences and reads the word again
    /// (README, "Why no wake-up is lost", 2) before it may leave.
    Shared,
    /// Write the word, then do the wake.
    Write(Sync, Wake),
}

/// Whom a notify wakes, once its write succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Unpark one idle worker (or leave the wake to a spinning one).
    Unpark,
    /// Start one more thread (its place is counted in `spawned` already).
    Spawn,
    /// Nobody: the notification waits in `notified` for a thread that will look.
    Nothing,
}

/// Where a waiting worker stands when it reads the word ([`Sync::wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Waiter {
    /// It holds the waking right (it consumed a `Signaled`, or was handed the right).
    pub(crate) is_waking: bool,
    /// It is counted in `idle`.
    pub(crate) is_idle: bool,
    /// The condition of its wait holds (a wait inside a task is over).
    pub(crate) leaving: bool,
    /// Its park filled its own queues (an I/O or timer dispatch inside it): it has work of its
    /// own without a notification.
    pub(crate) local_work: bool,
}

/// What a waiting worker does after reading the word ([`Sync::wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitStep {
    /// The pool is shutting down: drain.
    Shutdown,
    /// Nothing to consume and nothing to leave for: sleep (spin, then park), then read again.
    Park,
    /// Write the word; once written, the wait ends as said (or goes on idle: `Idle`).
    Write(Sync, WaitEnd),
}

/// How a successful [`WaitStep::Write`] ends the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitEnd {
    /// A notification was consumed: search again, as the waking thread if `waking`. A wait that
    /// leaves before its search came up empty owes the notification to another worker.
    Notified { waking: bool },
    /// The wait's condition holds: return to the waiting task.
    Done,
    /// Back to the worker's own queues (filled during its park), not idle any more.
    LocalWork,
    /// Counted idle now (a waking right given back): sleep, then read again.
    Idle,
}

impl Sync {
    /// Whether a thread could be woken or started for new work now, with no wake in flight
    /// (`Pending`). A join job is offered only then (`notify_join`).
    #[inline(always)]
    pub(crate) fn wants_work(self, max_threads: u32) -> bool {
        self.state() == State::Pending && (self.idle() > 0 || self.spawned() < max_threads)
    }

    /// The notify transition. `is_waking`: the caller is the waking thread and hands its right
    /// on (or gives it back when nobody can be woken). Every write sets `notified`; at most
    /// one thread is woken or started, and only from `Pending` or by the waking thread, which
    /// moves the state to `Signaled` until the woken thread consumes it (the throttle).
    #[inline(always)]
    pub(crate) fn notify(self, is_waking: bool, max_threads: u32) -> Notify {
        if self.state() == State::Shutdown {
            return Notify::Stop;
        }
        let can_wake = is_waking || self.state() == State::Pending;
        let next = self.with_notified(true);
        if can_wake && self.idle() > 0 {
            Notify::Write(next.with_state(State::Signaled), Wake::Unpark)
        } else if can_wake && self.spawned() < max_threads {
            Notify::Write(next.with_state(State::Signaled).inc_spawned(), Wake::Spawn)
        } else if is_waking {
            // Nobody to wake: give the waking right back.
            Notify::Write(next.with_state(State::Pending), Wake::Nothing)
        } else if self.notified() {
            Notify::Shared
        } else {
            Notify::Write(next, Wake::Nothing)
        }
    }

    /// A waiting worker's step: consume a notification (searching again), leave (its wait is
    /// over, or its park filled its own queues), go idle (giving a waking right back), or, idle
    /// already with nothing to consume, sleep.
    #[inline]
    pub(crate) fn wait(self, w: Waiter) -> WaitStep {
        if self.state() == State::Shutdown {
            return WaitStep::Shutdown;
        }
        if !self.notified() && w.is_idle && !w.leaving && !w.local_work {
            return WaitStep::Park;
        }
        let next = self.with_notified(false);
        if self.notified() {
            // Consume it; a consumed `Signaled` makes this the waking thread.
            let next = if self.state() == State::Signaled { next.with_state(State::Waking) } else { next };
            let next = if w.is_idle { next.dec_idle() } else { next };
            return WaitStep::Write(next, WaitEnd::Notified { waking: w.is_waking || self.state() == State::Signaled });
        }
        if w.local_work {
            debug_assert!(w.is_idle, "local work is found only after a park: {w:?}");
            return WaitStep::Write(next.dec_idle(), WaitEnd::LocalWork);
        }
        let next = if w.is_waking { next.with_state(State::Pending) } else { next };
        if w.leaving {
            return WaitStep::Write(if w.is_idle { next.dec_idle() } else { next }, WaitEnd::Done);
        }
        WaitStep::Write(next.inc_idle(), WaitEnd::Idle)
    }

    /// A thread start failed: its place in `spawned` is given back, and its `Signaled`, which
    /// no thread exists to consume, is withdrawn so the next notify may try again.
    #[inline]
    #[must_use]
    pub(crate) fn spawn_failed(self) -> Self {
        let next = self.dec_spawned();
        if self.state() == State::Signaled { next.with_state(State::Pending) } else { next }
    }

    /// Whether this word, read just before a thread gave its place back (`spawned - 1`), makes
    /// that thread the last one out of a pool shutting down: it wakes the thread that joins.
    #[inline]
    pub(crate) fn last_out(self) -> bool {
        self.state() == State::Shutdown && self.spawned() == 1
    }

    /// Shutdown: terminal; everything else stays.
    #[inline]
    #[must_use]
    pub(crate) fn shutdown(self) -> Self {
        self.with_state(State::Shutdown)
    }
}

impl fmt::Debug for Sync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Sync({:#010x} {:?} notified={} idle={} spawned={})",
            self.0,
            self.state(),
            self.notified(),
            self.idle(),
            self.spawned()
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{State, Sync, MAX_THREADS};
    use std::format;

    #[test]
    fn fields_do_not_overlap() {
        let fields = [Sync::STATE_MASK, Sync::NOTIFIED, Sync::COUNT_MASK << Sync::IDLE_SHIFT, Sync::COUNT_MASK << Sync::SPAWNED_SHIFT];
        for (i, a) in fields.iter().enumerate() {
            for b in &fields[i + 1..] {
                assert_eq!(a & b, 0, "{a:#x} overlaps {b:#x}");
            }
        }
        assert_eq!(fields.iter().fold(0u32, |acc, f| acc | f), !0b1000, "only bit 3 unused");
    }

    #[test]
    fn transitions_keep_other_fields() {
        let mut s = Sync::default();
        for _ in 0..MAX_THREADS {
            s = s.inc_spawned().inc_idle();
        }
        assert_eq!(s.spawned() as usize, MAX_THREADS);
        assert_eq!(s.idle() as usize, MAX_THREADS);
        let s2 = s.with_state(State::Shutdown).with_notified(true);
        assert_eq!((s2.idle(), s2.spawned()), (s.idle(), s.spawned()));
        assert_eq!(s2.state(), State::Shutdown);
        assert!(s2.notified());
        let s3 = s2.dec_idle().dec_spawned().with_notified(false).with_state(State::Waking);
        assert_eq!(s3.idle() as usize, MAX_THREADS - 1);
        assert_eq!(s3.spawned() as usize, MAX_THREADS - 1);
        assert_eq!(s3.state(), State::Waking);
        assert!(!s3.notified());
        assert!(format!("{s3:?}").contains("Waking"));
    }
}
