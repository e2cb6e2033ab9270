//! The atomics shim: every atomic, `UnsafeCell` and spin hint in the crate comes from here.
//!
//! * `cfg(loom)`: loom's model-checked types, so the loom models (a `mod loom` beside the code
//!   each one checks) can explore every interleaving.
//! * `cfg(shuttle)`: shuttle's atomics, each access a scheduling point, so the whole-pool
//!   scenarios (`mod shuttle` beside the code, `make test-shuttle`) run under shuttle's
//!   randomised schedulers. Shuttle is sequentially consistent: its `fence` does nothing, and
//!   orderings stay loom's to check. `UnsafeCell` and the event counters stay plain there.
//! * otherwise: [`portable_atomic`], which is `core::sync::atomic` on targets that have the
//!   instructions and an emulation (interrupt masking or `critical-section`) on targets without
//!   compare-and-swap such as `thumbv6m-none-eabi` (see the crate features `single-core` and
//!   `critical-section`).
//!
//! Loom's `UnsafeCell` hands out access through closures (`with`/`with_mut`) so it can track
//! every access; the non-loom [`UnsafeCell`] here offers the same interface at zero cost, so the
//! code using it reads the same under both.


mod atomic;
mod backoff;
mod cell;
mod counter;
mod hint;
mod idle_set;
mod padded;
mod try_lock;

pub(crate) use atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
pub(crate) use backoff::Backoff;
pub(crate) use cell::UnsafeCell;
pub(crate) use counter::Counter;
pub(crate) use hint::spin_hint;
pub(crate) use idle_set::IdleSet;
pub(crate) use padded::CachePadded;
pub(crate) use try_lock::{Locked, TryLock};
