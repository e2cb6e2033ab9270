//! A pool after `fork()`, in the child (README, "Process and threading rules"). The child has
//! one thread, the one that called `fork`; the pool's threads did not survive, and anything
//! they were doing (a push, a steal, holding a lock) was cut off where it stood. So a pool
//! inherited from the parent can only be
//! * closed (`close_on_fork`, called by its platform's registry in the child's fork handler
//!   through the pool's [`PoolLink`](crate::PoolLink)): every submit refused with
//!   [`Error::Forked`], nothing of the parent's queue run, shutdown refused at once, and the
//!   drop freeing as far as that is safe (`free_inherited`): the tables and the state's
//!   memory, but not the spawner or the parkers, which may hold locks and handles of threads
//!   that do not exist here (kept: `crate::keep`);
//! * reset in place (`reset_after_fork`): a fresh state written over the old one, at the same
//!   address (the global pools, whose `&'static` handles must keep working), the old state
//!   kept unused.
//!
//! Both run in the child's fork handler or later on the child's threads, never concurrently
//! with another use of the same pool in the child (the caller's contract).

use core::mem::{self, ManuallyDrop};
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

#[cfg(feature = "std")]
use super::Config;
use super::{Inner, ThreadPool};
#[cfg(feature = "std")]
use crate::error::Error;
use crate::platform::PoolLink;
use crate::platform::Spawner;
use crate::sync::Ordering;

impl<S: Spawner> ThreadPool<S> {
    /// Writes a fresh state (same configuration, threads on `spawner`) over this pool's, in
    /// the child after a fork. Tasks queued in the parent are never run; the old state (the
    /// parent's threads' workers, its spawner) is kept unused.
    ///
    /// # Safety
    /// In a child after `fork`, with no other use of this pool in progress in the child (no
    /// reference into its state is live). The pool's spawner tracks no pool (the old link is
    /// kept, still listed if it was, and the fresh one is not listed): the caller keeps the
    /// pool in its platform's registry itself (the global pools, `os::global`).
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn reset_after_fork(&self, spawner: S) -> Result<(), Error> {
        let old = self.inner();
        let config = Config::new()
            .with_max_threads(old.protocol.thread_limit() as usize)
            .with_stack_size(old.stack_size)
            .with_idle_spins(old.idle_spins);
        let fresh = Inner::build(config, spawner)?;
        // SAFETY: the caller's contract: nothing reads the old state now. It is moved out
        // (never dropped: kept, see the module docs) and the fresh one written in its place.
        let old = unsafe { ptr::replace(self.inner.as_ptr(), fresh) };
        crate::keep::keep(old);
        Ok(())
    }

    /// Refuses every submit from here on (`Error::Shutdown`): a global pool for which even a
    /// reset cannot be allocated (`os::global`).
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn close_inherited(&self) {
        self.inner().injector.close();
    }

    /// Frees what can be freed of a pool inherited through `fork` (module docs), without
    /// shutting down (its threads do not exist here) and without touching its spawner: the
    /// handle's drop in the child.
    ///
    /// # Safety
    /// In a child after `fork`; `raw` is the state of the handle being dropped, the only one,
    /// and no other use is in progress.
    pub(super) unsafe fn free_inherited(raw: NonNull<Inner<S>>) {
        let raw = raw.as_ptr();
        // SAFETY: our only handle; async tasks of the parent may still hold references
        // (`scheduler::inner`, `release_pool`): then nothing is freed, as in `Drop`.
        if !unsafe { (*raw).release() } {
            return;
        }
        // SAFETY: came from `Box::leak` of an `Inner<S>`; `ManuallyDrop` has its layout, so
        // dropping this box frees the memory without running the fields' destructors.
        let mut inner = unsafe { Box::from_raw(raw.cast::<ManuallyDrop<Inner<S>>>()) };
        // SAFETY: tracked when boxed; `Inner`'s drop, which would untrack it, does not run.
        unsafe { inner.spawner.untrack_pool(NonNull::from(&inner.link)) };
        let mut worker = inner.workers.load(Ordering::Acquire);
        while !worker.is_null() {
            // SAFETY: workers were leaked from boxes (`alloc_worker`) and nothing runs them
            // here; freed as `ManuallyDrop` for the same reason as `inner`, their parkers kept.
            let boxed = unsafe { Box::from_raw(worker.cast::<ManuallyDrop<super::worker::Worker<S>>>()) };
            // SAFETY: moved out once; the box's memory is freed without dropping it again.
            crate::keep::keep(unsafe { ptr::read(&boxed.parker) });
            worker = boxed.next;
        }
        drop(mem::take(&mut inner.worker_table));
        // SAFETY: moved out once; the protocol holds no lock or handle of a thread (atomics,
        // and the idle set's words, freed here).
        drop(unsafe { ptr::read(&inner.protocol) }.into_idle_words());
        // SAFETY: as above: moved out once, never dropped (kept).
        crate::keep::keep(unsafe { ptr::read(&inner.join_parker) });
        // SAFETY: as above.
        crate::keep::keep(unsafe { ptr::read(&inner.spawner) });
    }
}

impl<S: Spawner> Inner<S> {
    /// The pool's `on_fork_child` (its [`PoolLink`]): closes it, so every submit in the child
    /// is refused (with `Error::Forked`, `Inner::refusal`); returns true: inherited.
    ///
    /// # Safety
    /// `link` is the `link` field of a live `Inner<S>`; in the child's fork handler.
    pub(super) unsafe fn close_on_fork(link: NonNull<PoolLink>) -> bool {
        let offset = core::mem::offset_of!(Inner<S>, link);
        // SAFETY: the caller's contract: the link sits `offset` bytes into its `Inner<S>`.
        let inner = unsafe { link.byte_sub(offset).cast::<Inner<S>>().as_ref() };
        inner.injector.close();
        true
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Whether this pool was inherited through `fork()` ([`Error::Forked`]).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn is_inherited(&self) -> bool {
        self.inner().link.is_inherited()
    }
}
