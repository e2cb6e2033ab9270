//! The states of a blocking thread's slot word (`inner.rs`, `Slot`).

// Slot states. Only the owning thread moves a slot out of RUNNING, NOTIFIED and EXITING;
// notifiers only move IDLE -> NOTIFIED; a thread start moves EMPTY -> RUNNING.
/// No thread owns the slot.
pub(super) const EMPTY: u32 = 0;
/// The owner is running tasks or looking for them.
pub(super) const RUNNING: u32 = 1;
/// The owner is parked (or about to park) and may be notified.
pub(super) const IDLE: u32 = 2;
/// A notifier took the owner out of the idle set and unparked it: it must look for work.
pub(super) const NOTIFIED: u32 = 3;
/// The owner's keep-alive expired; it is leaving and can no longer be notified.
pub(super) const EXITING: u32 = 4;
