//! The packed `Sync` word: all thread coordination state of a pool in one atomic `u32`.
//!
//! Design text 002, "Counter/Sync Algorithm". The protocol itself (who moves the word from which
//! state to which, and why no wake-up is lost) is written up in `scheduler/README.md`; this
//! module is only the value type, with named fields and checked arithmetic.
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
    doc = "\n# Example\n\n```\nuse pool::{Config, MAX_THREADS};\nlet config = Config { max_threads: MAX_THREADS, ..Config::default() };\nassert_eq!(config.max_threads, (1 << 14) - 1);\n```"
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
#[derive(Clone, Copy, PartialEq, Eq, Default)]
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
