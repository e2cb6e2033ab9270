//! [`Completion`]: a write-once value beside a [`Signal`], the completion of every wait that
//! returns a result (a stack job's closure, a blocking-pool closure) and of those that return
//! none (`Completion<()>`, a C `FnJob`).
//!
//! # Invariants
//! * The value is written once, by the one setter, before it sets the signal ([`set`]); the
//!   signal's Release publishes it, so whoever sees the signal being set or set (Acquire: the
//!   waiter after its wait) may read it.
//! * The value belongs to the setter until it sets the signal, and to the waiter after: it is
//!   taken once ([`take`](Completion::take)); one never taken is dropped with the completion.
//! * The setter's last access is the signal's (`Signal::set`): [`set`] goes through a raw
//!   pointer, never holding a reference to the whole completion while the signal is set, so
//!   the waiter may free it as soon as it returns (a reference held across the call would
//!   keep the padding between the fields protected, under Stacked Borrows, after that).
//!
//! [`set`]: Completion::set

use core::fmt;
use core::ptr;

use super::signal::Signal;
use crate::sync::UnsafeCell;

/// A write-once value and the signal that says it is written (module docs).
pub(crate) struct Completion<T> {
    signal: Signal,
    /// Written by the setter before the signal is set; taken by the waiter after.
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value moves from the setter's thread to the waiter's (so `T: Send`), and one
// side at a time touches it, ordered by the signal (module docs).
unsafe impl<T: Send> Send for Completion<T> {}
// SAFETY: as above; `&self` methods read the signal, or touch the value as their contracts say.
unsafe impl<T: Send> Sync for Completion<T> {}

impl<T> fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion").field("signal", &self.signal).finish_non_exhaustive()
    }
}

impl<T> Completion<T> {
    /// Not set, no value.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Self { signal: Signal::new(), value: UnsafeCell::new(None) }
    }

    /// The signal: what a waiter waits on, registers with, and checks.
    #[inline(always)]
    pub(crate) fn signal(&self) -> &Signal {
        &self.signal
    }

    /// Writes `value` and sets the signal, waking the waiter. The signal's `set` is the last
    /// access to the completion: the waiter may free it right after.
    ///
    /// # Safety
    /// `this` points to a live completion; called once per completion, by its one setter.
    #[inline]
    pub(crate) unsafe fn set(this: *const Self, value: T) {
        // SAFETY: live (the caller's contract); the waiter reads the value only after the
        // signal is set, below, and we are the only setter.
        unsafe { (*ptr::addr_of!((*this).value)).with_mut(|v| *v = Some(value)) };
        // SAFETY: once (the caller's contract); a reference to the signal alone, which has
        // no padding (`Signal::state`).
        unsafe { (*ptr::addr_of!((*this).signal)).set() };
    }

    /// The value, once the signal was seen being set or set (Acquire); `None` if it was taken
    /// already.
    ///
    /// # Safety
    /// Called by the waiter, after it saw the signal being set or set.
    #[inline]
    pub(crate) unsafe fn take(&self) -> Option<T> {
        // SAFETY: the setter wrote the value before setting the signal and never touches it
        // again; the waiter is the only reader (the caller's contract).
        self.value.with_mut(|v| unsafe { (*v).take() })
    }
}
