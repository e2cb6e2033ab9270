//! The wheel's API for the loom models in `tests/loom_timer.rs` (only under `--cfg loom`; not
//! API): the real [`Timers`](super::Timers) and entries, driven by hand.

use core::pin::Pin;
use core::ptr::NonNull;
use core::task::Waker;

use alloc::boxed::Box;

use super::wheel::{Action, Entry, Registered, Timers};

/// A wheel, as a pool holds one.
#[derive(Debug)]
pub struct LoomTimers(Timers);

/// A timer's entry, pinned in a box (as a `Sleep` pins it in its task).
pub struct LoomEntry(Pin<Box<Entry>>);

impl core::fmt::Debug for LoomEntry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LoomEntry").field("fired", &self.0.is_fired()).finish()
    }
}

impl Default for LoomEntry {
    fn default() -> Self {
        Self(Box::pin(Entry::new()))
    }
}

impl LoomEntry {
    /// Whether the wheel fired it.
    pub fn is_fired(&self) -> bool {
        self.0.is_fired()
    }

    fn ptr(&self) -> NonNull<Entry> {
        NonNull::from(&*self.0)
    }
}

/// What `register` said.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// In the wheel.
    Queued,
    /// Due already.
    Elapsed,
    /// The wheel is shut down.
    Closed,
}

impl Default for LoomTimers {
    fn default() -> Self {
        Self(Timers::new())
    }
}

impl LoomTimers {
    /// Registers `entry` for `tick` with `waker` (the owner's call: one thread per entry).
    pub fn register(&self, entry: &LoomEntry, tick: u64, waker: Waker) -> Outcome {
        // SAFETY: the entry is pinned in its box; the models cancel or see it fired before
        // dropping it.
        match unsafe { self.0.register(entry.ptr(), tick, Action::Wake(waker)) } {
            Registered::Queued { .. } => Outcome::Queued,
            Registered::Elapsed => Outcome::Elapsed,
            Registered::Closed => Outcome::Closed,
        }
    }

    /// Cancels `entry` (the owner's call), as dropping a `Sleep` does.
    pub fn cancel(&self, entry: &LoomEntry) {
        // SAFETY: as above.
        unsafe { self.0.cancel(entry.ptr()) }
    }

    /// Fires what is due at `now_tick` (waiting for the lock).
    pub fn fire(&self, now_tick: u64) {
        self.0.fire(now_tick, true);
    }

    /// Fires what is due if the lock is free (the tick-end path).
    pub fn try_fire(&self, now_tick: u64) -> bool {
        self.0.fire(now_tick, false)
    }

    /// Closes the wheel, firing everything.
    pub fn shutdown(&self) {
        self.0.shutdown();
    }

    /// Entries in the wheel.
    pub fn pending(&self) -> usize {
        self.0.pending()
    }

    /// The published next tick (`u64::MAX`: none).
    pub fn next_tick(&self) -> u64 {
        self.0.next_tick(crate::sync::Ordering::SeqCst)
    }
}
