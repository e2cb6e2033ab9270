//! [`AnyPool`]: the crate's one way of erasing a pool's platform type. A pool's shared state
//! (`Inner<S>`) holds, in its `ops` field, a static table of `unsafe fn`s for its spawner type
//! ([`PoolOps`], `Inner::OPS` in `inner.rs`, its entries beside what they do: `pool.rs`,
//! `timers.rs`); an `AnyPool` is a pointer to that field, which code that does not know `S`
//! passes around and calls through. The table's functions, which do know it, find the rest of
//! the pool from the field's offset (`Inner::unerase`).
//!
//! It serves everything that holds a pool without its type:
//! * a worker context's head (`ContextHead::pool`): which pool a thread works for, read by
//!   the thread-local lookup (`Inner::current_context`) and the C API (`capi::job`);
//! * a queued join job's pool (`JobHeader`), whose worker context its closure gets;
//! * a timer bound to a pool (`crate::time`): the wheel, the clock, the kick, the reference
//!   that keeps the pool's memory alive;
//! * an async task's scheduler (`crate::runtime`): the queue a wake submits to, the wait of a
//!   `JoinHandle::join`, the reference released when the task is freed (the loom models'
//!   hand-driven queue brings a table of its own).
//!
//! Not the C layer's slow fork and join of a `struct pool_job` (`capi::job`, `job_op`):
//! they are the join layer's (`WorkerContext::fork_fn_slow`), which a table built here cannot
//! name, so the C layer, which knows its two platform types, tells them apart by the
//! context's `AnyPool` (one compare on that path, no indirect call).
//!
//! # Invariants
//! * An `AnyPool` is made from a pointer to the whole pool (so the table's functions may step
//!   back from the field to the pool), and the pool outlives every use of it: its owner holds
//!   a reference on the pool's memory (a task, a bound timer), or runs on one of its threads
//!   (a worker context, a job).
//! * `ops` is written once, when the pool is built, and never changes.

use core::ptr::NonNull;

use crate::latch::Signal;
use crate::task::Task;
use crate::timer::Timers;

/// What code that does not know a pool's platform type may ask of it (module docs). Every
/// function takes the pool it was reached from.
pub(crate) struct PoolOps {
    /// Queues an async task (`Schedule::schedule`): `lifo`, woken by another task (runs next
    /// on this worker); else to the back. `Err`: refused, the task is still the caller's.
    pub(crate) schedule: unsafe fn(AnyPool, NonNull<Task>, bool) -> Result<(), ()>,
    /// Waits until the signal is set, as `ThreadPool::wait_for`: through the waiting loop on
    /// one of the pool's workers, parked elsewhere.
    pub(crate) wait: unsafe fn(AnyPool, &Signal),
    /// The pool's timing wheel.
    pub(crate) timers: unsafe fn(AnyPool) -> NonNull<Timers>,
    /// The pool's clock (`Spawner::now_ns`).
    pub(crate) now_ns: unsafe fn(AnyPool) -> Option<u64>,
    /// A timer became the earliest: make sure a worker looks at the new deadline.
    pub(crate) kick: unsafe fn(AnyPool),
    /// Takes a reference on the pool's memory.
    pub(crate) acquire: unsafe fn(AnyPool),
    /// Drops one (the last frees the pool's memory).
    pub(crate) release: unsafe fn(AnyPool),
}

/// A pool of any platform type (module docs): a pointer to its `ops` field.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnyPool(pub(super) NonNull<&'static PoolOps>);

// SAFETY: the pool behind it is shared state made for sharing (atomics, a `Send + Sync`
// spawner); the table's functions are thread-safe.
unsafe impl Send for AnyPool {}
// SAFETY: as above.
unsafe impl Sync for AnyPool {}

impl AnyPool {
    /// A pool from a pointer to its `ops` field (for a model's own scheduler).
    ///
    /// # Safety
    /// `ops` is derived from a pointer to the whole pool (its provenance covers it), and the
    /// field holds a table whose functions expect that pool's type.
    #[cfg(all(test, loom))]
    pub(crate) unsafe fn from_ops(ops: NonNull<&'static PoolOps>) -> Self {
        Self(ops)
    }

    /// The pointer to the pool's `ops` field (for a model's own scheduler).
    #[cfg(all(test, loom))]
    pub(crate) fn ops_field(self) -> NonNull<&'static PoolOps> {
        self.0
    }

    /// The pool's table. Its functions take the pool they were reached from, and every one is
    /// `unsafe` for the module invariants: the pool is live.
    #[inline(always)]
    pub(crate) fn ops(self) -> &'static PoolOps {
        // SAFETY: written once when the pool was built (module invariants).
        unsafe { *self.0.as_ptr() }
    }
}
