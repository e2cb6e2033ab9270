//! A blocking pool after `fork()`, in the child: closed by its platform's registry (any pool
//! on a spawner that tracks its pools: refuses work with `Error::Forked`, and its drop frees
//! what it safely can) or reset in place (the global pool). The rules are the scheduler's
//! (`scheduler/fork.rs`).

use core::ptr::{self, NonNull};

use alloc::boxed::Box;

#[cfg(feature = "std")]
use crate::error::Error;
use crate::platform::{PoolLink, Spawner};
use crate::sync::Ordering;

#[cfg(feature = "std")]
use super::config::BlockingConfig;
use super::counts::Counts;
use super::inner::Inner;
use super::pool::BlockingPool;

impl<S: Spawner> Inner<S> {
    // ----------------------------------------------------------------------------------------
    // After fork (see `scheduler/fork.rs` for the rules)

    /// Writes a fresh state (same configuration, threads on `spawner`) over the one at `raw`,
    /// in the child after a fork; the old one (the parent's queue and spawner) is kept unused.
    ///
    /// # Safety
    /// In a child after `fork`, with no other use of this pool in progress in the child; the
    /// pool's spawner tracks no pool (as `ThreadPool::reset_after_fork`).
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn reset_after_fork(raw: *mut Inner<S>, spawner: S) -> Result<(), Error> {
        // SAFETY: the caller's contract: a valid state that nothing else reads now.
        let old = unsafe { &*raw };
        let config = BlockingConfig::new()
            .with_max_threads(old.cap)
            .with_keep_alive(old.keep_alive)
            .with_stack_size(old.stack_size);
        let fresh = Self::build(config, spawner)?;
        // SAFETY: as above; the old value is moved out and kept, never dropped.
        let old = unsafe { ptr::replace(raw, fresh) };
        crate::keep::keep(old);
        // SAFETY: as above.
        unsafe { Self::point_slots_at(raw) };
        Ok(())
    }

    /// Refuses every submit from here on, in the child after a fork: the parent's queued
    /// tasks are never run.
    pub(super) fn close_inherited(&self) {
        self.queue.close();
        self.counts.fetch_or(Counts::SHUTDOWN, Ordering::AcqRel);
    }

    /// The pool's `on_fork_child` (its [`PoolLink`]): closes it; returns true: inherited, so
    /// its refusals are `Error::Forked` (`Inner::refusal`).
    ///
    /// # Safety
    /// `link` is the `link` field of a live `Inner<S>`; in the child's fork handler.
    pub(super) unsafe fn close_on_fork(link: NonNull<PoolLink>) -> bool {
        let offset = core::mem::offset_of!(Inner<S>, link);
        // SAFETY: the caller's contract: the link sits `offset` bytes into its `Inner<S>`.
        unsafe { link.byte_sub(offset).cast::<Inner<S>>().as_ref() }.close_inherited();
        true
    }

    /// Frees the tables and the memory of a pool inherited through `fork`, without shutting
    /// down; its spawner and parkers (they may hold the parent's locks) are kept unused.
    ///
    /// # Safety
    /// In a child after `fork`; `raw` came from `new` and nothing else uses it.
    pub(super) unsafe fn free_inherited(raw: *mut Inner<S>) {
        // SAFETY: from `new` (a leaked box); `ManuallyDrop` has the same layout, so dropping
        // this box frees the memory without running the fields' destructors.
        let mut inner = unsafe { Box::from_raw(raw.cast::<core::mem::ManuallyDrop<Inner<S>>>()) };
        // SAFETY: tracked when boxed; the drop, which would untrack it, does not run.
        unsafe { inner.spawner.untrack_pool(NonNull::from(&inner.link)) };
        // The slots hold parkers: kept with the spawner and the join parker, never dropped.
        crate::keep::keep(core::mem::take(&mut inner.slots));
        // SAFETY: moved out once, and the box's memory is freed without dropping it again; the
        // set holds no lock or handle of a thread.
        drop(unsafe { core::ptr::read(&inner.idle_set) }.into_words());
        // SAFETY: moved out once from memory that is freed without dropping its fields.
        crate::keep::keep(unsafe { ptr::read(&inner.join_parker) });
        // SAFETY: as above.
        crate::keep::keep(unsafe { ptr::read(&inner.spawner) });
    }
}

impl<S: Spawner> BlockingPool<S> {
    /// In the child after a fork: a fresh state over this pool's (`Inner::reset_after_fork`).
    ///
    /// # Safety
    /// As `Inner::reset_after_fork`.
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn reset_after_fork(&self, spawner: S) -> Result<(), Error> {
        // SAFETY: forwarded contract; `inner` is this pool's live state.
        unsafe { Inner::reset_after_fork(self.inner.as_ptr(), spawner) }
    }

    /// In the child after a fork: every submit is refused from here on (a global pool that
    /// could not be reset).
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn close_inherited(&self) {
        self.inner().close_inherited();
    }
}
