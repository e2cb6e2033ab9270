//! The atomics themselves: loom's model-checked types under `cfg(loom)`, [`portable_atomic`]'s
//! otherwise (`core`'s where the target has the instructions; see the module docs of `sync`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use portable_atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

pub(crate) use core::sync::atomic::Ordering;
