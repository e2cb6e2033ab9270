//! How a timer reaches the pool whose wheel it is in: [`TimerHandle`], the pool's address and
//! a table of its operations ([`TimerOps`], one static table per platform type), built by the
//! scheduler and used by the timers themselves (`crate::time`) and the async tasks
//! (`crate::runtime`), which know nothing of the pool's type.

use core::fmt;
use core::ptr::NonNull;

use super::wheel::Timers;

/// What a timer needs from its pool, type-erased (one static table per spawner type).
pub(crate) struct TimerOps {
    /// The pool's wheel.
    pub(crate) timers: unsafe fn(NonNull<()>) -> NonNull<Timers>,
    /// The pool's clock.
    pub(crate) now_ns: unsafe fn(NonNull<()>) -> Option<u64>,
    /// A timer became the earliest: make sure a worker looks at the new deadline.
    pub(crate) kick: unsafe fn(NonNull<()>),
    /// Takes a reference on the pool's memory.
    pub(crate) acquire: unsafe fn(NonNull<()>),
    /// Drops one (the last frees the pool's memory).
    pub(crate) release: unsafe fn(NonNull<()>),
}

/// A pool's timers, as a timer sees them: the pool (type-erased `Inner<S>`) and its table.
#[derive(Clone, Copy)]
pub(crate) struct TimerHandle {
    pub(crate) pool: NonNull<()>,
    pub(crate) ops: &'static TimerOps,
}

impl fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandle").field("pool", &self.pool).finish_non_exhaustive()
    }
}

// SAFETY: the handle names a pool's shared state, which is Sync; the functions are thread-safe.
unsafe impl Send for TimerHandle {}
// SAFETY: as above.
unsafe impl Sync for TimerHandle {}

impl TimerHandle {
    /// The wheel.
    ///
    /// # Safety
    /// The pool is live (a reference is held on it).
    pub(crate) unsafe fn timers<'a>(&self) -> &'a Timers {
        // SAFETY: the caller's contract; the wheel lives as long as the pool.
        unsafe { (self.ops.timers)(self.pool).as_ref() }
    }

    /// The clock, in ns.
    ///
    /// # Safety
    /// As [`timers`](Self::timers).
    pub(crate) unsafe fn now_ns(&self) -> Option<u64> {
        // SAFETY: the caller's contract.
        unsafe { (self.ops.now_ns)(self.pool) }
    }
}
