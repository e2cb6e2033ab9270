//! [`AnyPool`]: the crate's one way of erasing a pool's platform type: the pool's address
//! (`Inner<S>`, type-erased) and a static table of `unsafe fn`s for its spawner type
//! ([`PoolOps`], `Inner::OPS` in `inner.rs`, its entries beside what they do: `pool.rs`,
//! `timers.rs`), which code that does not know `S` calls with that address.
//!
//! It serves everything that holds a pool without its type:
//! * a timer bound to a pool (`crate::time`): the wheel, the clock, the kick, the reference
//!   that keeps the pool's memory alive;
//! * an async task's scheduler (`crate::runtime`): the queue a wake submits to, the wait of a
//!   `JoinHandle::join`, the reference released when the task is freed (the task's header
//!   holds the address and its vtable the table, so the header keeps its size; the loom
//!   models' hand-driven queue brings a table of its own);
//! * with `std`, the pool a thread works for, read from its worker context's head
//!   (`ContextHead::any_of`) by a blocking handle's `join`, which waits through it.
//!
//! Where the type is known again at the end of the path, the address alone is kept: a worker
//! context's head (`ContextHead::pool`, whose pool a thread-local lookup compares), a queued
//! join job's pool (`JobHeader`, which its runner's typed callback turns back into the pool),
//! and the C layer's slow fork and join of a `struct pool_job` (`capi::job`, `job_op`), which
//! knows its two platform types and tells them apart by the head's address: those are join-
//! layer methods, which a table built here cannot name.
//!
//! The table is referenced only where an `AnyPool` is made (`Inner::any`: a bound timer, a
//! spawned task, a worker context with `std`), so a program that uses none of those links
//! none of its entries (the `no_std` footprint, FOOTPRINT.md).
//!
//! # Invariants
//! * `pool` is the address of a live `Inner<S>` whose `S` is the one `ops` was made for,
//!   with the provenance of the whole pool, and the pool outlives every use of the `AnyPool`:
//!   its holder holds a reference on the pool's memory (a task, a bound timer) or runs on one
//!   of its threads (a worker).

use core::ptr::NonNull;

use crate::latch::Signal;
use crate::task::Task;
use crate::timer::Timers;

/// What code that does not know a pool's platform type may ask of it (module docs). Every
/// function takes the address of the pool it was reached through.
pub(crate) struct PoolOps {
    /// Queues an async task (`Schedule::schedule`): `lifo`, woken by another task (runs next
    /// on this worker); else to the back. `Err`: refused, the task is still the caller's.
    pub(crate) schedule: unsafe fn(NonNull<()>, NonNull<Task>, bool) -> Result<(), ()>,
    /// Waits until the signal is set, as `ThreadPool::wait_for`: through the waiting loop on
    /// one of the pool's workers, parked elsewhere.
    pub(crate) wait: unsafe fn(NonNull<()>, &Signal),
    /// The pool's timing wheel.
    pub(crate) timers: unsafe fn(NonNull<()>) -> NonNull<Timers>,
    /// The pool's clock (`Spawner::now_ns`).
    pub(crate) now_ns: unsafe fn(NonNull<()>) -> Option<u64>,
    /// A timer became the earliest: make sure a worker looks at the new deadline.
    pub(crate) kick: unsafe fn(NonNull<()>),
    /// Takes a reference on the pool's memory.
    pub(crate) acquire: unsafe fn(NonNull<()>),
    /// Drops one (the last frees the pool's memory).
    pub(crate) release: unsafe fn(NonNull<()>),
}

/// A pool of any platform type (module docs): its address and its type's table. Every call
/// `(pool.ops.f)(pool.pool, ..)` is `unsafe` for the module invariants: the pool is live.
#[derive(Clone, Copy)]
pub(crate) struct AnyPool {
    pub(crate) pool: NonNull<()>,
    pub(crate) ops: &'static PoolOps,
}

// SAFETY: the pool behind it is shared state made for sharing (atomics, a `Send + Sync`
// spawner); the table's functions are thread-safe.
unsafe impl Send for AnyPool {}
// SAFETY: as above.
unsafe impl Sync for AnyPool {}
