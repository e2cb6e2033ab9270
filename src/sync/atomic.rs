//! The atomics themselves: loom's model-checked types under `cfg(loom)`, shuttle's under
//! `cfg(shuttle)`, [`portable_atomic`]'s otherwise (`core`'s where the target has the
//! instructions; see the module docs of `sync`).
//!
//! Shuttle runs every access as SeqCst and its `fence` is a no-op: in a sequentially consistent
//! execution every fence pair of the protocol holds already, so what shuttle explores is the
//! interleavings, and a bug that needs a weaker order stays loom's to find.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize};
#[cfg(all(shuttle, not(loom)))]
pub(crate) use shuttle::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize};
#[cfg(not(any(loom, shuttle)))]
pub(crate) use portable_atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize};

pub(crate) use core::sync::atomic::Ordering;
