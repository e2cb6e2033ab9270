//! A pool after `fork()`, in the child (README, "Process and threading rules"). The child has
//! one thread, the one that called `fork`; the pool's threads did not survive, and anything
//! they were doing (a push, a steal, holding a lock) was cut off where it stood. So a pool
//! inherited from the parent can only be
//! * reset in place: a fresh state written over the old one, at the same address (the global
//!   pools, whose `&'static` handles must keep working), the old state kept unused
//!   (`crate::keep`: reachable, never dropped);
//! * closed: every submit refused, nothing of the parent's queue run, and at destroy freed as
//!   far as that is safe: the tables and the state's memory, but not the spawner or the
//!   parkers, which may hold locks and handles of threads that do not exist here (kept).
//!
//! Both run in the child's `pthread_atfork` handler or later on the child's threads, never
//! concurrently with another use of the same pool in the child (the caller's contract).

use core::mem::{self, ManuallyDrop};
use core::ptr;

use alloc::boxed::Box;

use super::{Config, Inner, ThreadPool};
use crate::error::Error;
use crate::platform::Spawner;
use crate::sync::Ordering;

impl<S: Spawner> ThreadPool<S> {
    /// Writes a fresh state (same configuration, threads on `spawner`) over this pool's, in
    /// the child after a fork. Tasks queued in the parent are never run; the old state (the
    /// parent's threads' workers, its spawner) is kept unused.
    ///
    /// # Safety
    /// In a child after `fork`, with no other use of this pool in progress in the child (no
    /// reference into its state is live).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn reset_after_fork(&self, spawner: S) -> Result<(), Error> {
        let old = self.inner();
        let config = Config::new()
            .with_max_threads(old.protocol.max_threads() as usize)
            .with_stack_size(old.stack_size)
            .with_idle_spins(old.idle_spins);
        let fresh = Inner::build(config, spawner)?;
        // SAFETY: the caller's contract: nothing reads the old state now. It is moved out
        // (never dropped: kept, see the module docs) and the fresh one written in its place.
        let old = unsafe { ptr::replace(self.inner.as_ptr(), fresh) };
        crate::keep::keep(old);
        Ok(())
    }

    /// Refuses every submit from here on (`Error::Shutdown`), in the child after a fork: the
    /// parent's queued tasks are never run.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn close_inherited(&self) {
        self.inner().injector.close();
    }

    /// Frees what can be freed of a pool inherited through `fork` (module docs), without
    /// shutting down (its threads do not exist here) and without touching its spawner.
    ///
    /// # Safety
    /// In a child after `fork`; `self` is the only handle, and no other use is in progress.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn free_inherited(self) {
        let raw = self.inner.as_ptr();
        mem::forget(self);
        // SAFETY: our only handle; async tasks of the parent may still hold references
        // (`scheduler::inner`, `release_pool`): then nothing is freed, as in `Drop`.
        if !unsafe { (*raw).release() } {
            return;
        }
        // SAFETY: came from `Box::leak` of an `Inner<S>`; `ManuallyDrop` has its layout, so
        // dropping this box frees the memory without running the fields' destructors.
        let mut inner = unsafe { Box::from_raw(raw.cast::<ManuallyDrop<Inner<S>>>()) };
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
