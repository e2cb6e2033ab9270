//! A worker thread's start and entry point: its [`Worker`] allocated before the thread is
//! asked for (so running out of memory is a failed spawn), registered by the thread itself,
//! and the loop it runs (`run.rs`) with its [`WorkerContext`] in the entry frame.

use core::ffi::c_void;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use super::context::WorkerContext;
use super::frame::Demand;
use super::inner::Inner;
use super::counters::Counters;
use super::worker::Worker;
use crate::platform::{Spawner, ThreadStart};
use crate::queue::deque::JoinDeque;
use crate::queue::ring::Ring;
use crate::sync::{AtomicBool, AtomicPtr, CachePadded, Ordering};

impl<S: Spawner> Inner<S> {
    /// What a new thread runs: `worker_main` on the worker allocated for it.
    pub(crate) fn thread_start(&self, worker: NonNull<Worker<S>>) -> ThreadStart {
        ThreadStart { entry: worker_main::<S>, arg: worker.as_ptr().cast::<c_void>() }
    }

    /// Allocates the state of a thread about to be started, before asking for the thread, so
    /// that running out of memory is a failed spawn (`fallible`). Not published yet: the new
    /// thread does that (`register`); a spawn that fails frees it (`free_unstarted`).
    pub(crate) fn alloc_worker(&self) -> Result<NonNull<Worker<S>>, crate::Error> {
        let worker = crate::fallible::try_box(Worker {
            pool: ptr::from_ref(self).cast::<()>(),
            next: ptr::null_mut(),
            index: usize::MAX,
            // Hungry: the first join on this worker offers work, so a pool that may still
            // start threads starts one (context.rs, "The hungry flag").
            demand: Demand::new(),
            waiting_in_task: AtomicBool::new(false),
            lifo: AtomicPtr::new(ptr::null_mut()),
            ring: Ring::new(),
            joins: JoinDeque::new(),
            parker: self.spawner.new_parker(),
            stats: CachePadded(Counters::default()),
        })?;
        Ok(NonNull::from(Box::leak(worker)))
    }

    /// Frees a worker from `alloc_worker` whose thread could not be started.
    ///
    /// # Safety
    /// `worker` came from `alloc_worker` and was never handed to a thread.
    pub(crate) unsafe fn free_unstarted(worker: NonNull<Worker<S>>) {
        // SAFETY: the caller's contract: unpublished, so still exclusively ours.
        drop(unsafe { Box::from_raw(worker.as_ptr()) });
    }

    /// Gives this thread's worker (from `alloc_worker`) its slot and links it into the pool.
    fn register(&self, worker: NonNull<Worker<S>>) {
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        // `spawned` never exceeds `max_threads` and threads only exit at shutdown, so every
        // started thread gets a slot.
        assert!(index < self.worker_table.len(), "more threads started than max_threads");
        // SAFETY: not yet published, so still exclusively ours.
        unsafe { (*worker.as_ptr()).index = index };
        // Release: the worker's fields are initialised before anyone can reach it.
        self.worker_table[index].store(worker.as_ptr(), Ordering::Release);
        let mut head = self.workers.load(Ordering::Relaxed);
        loop {
            // SAFETY: not yet published, so still exclusively ours.
            unsafe { (*worker.as_ptr()).next = head };
            match self.workers.compare_exchange_weak(head, worker.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }
}

/// The entry point of every worker thread.
///
/// # Safety
/// `arg` is a worker from `alloc_worker` of a live pool, which outlives this thread (the pool
/// joins it), handed to this thread alone.
unsafe extern "C" fn worker_main<S: Spawner>(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let worker = unsafe { NonNull::new_unchecked(arg.cast::<Worker<S>>()) };
    // SAFETY: `pool` was set by `alloc_worker` to the live pool's `Inner<S>`.
    let pool = unsafe { &*(*worker.as_ptr()).pool.cast::<Inner<S>>() };
    pool.register(worker);
    let stack_top = 0u8;
    // The owner-only half of the worker: it lives in this frame, on this thread, while the
    // thread runs the pool's loop, and the thread-local slot points to it meanwhile.
    let cx = WorkerContext::new(pool, worker, ptr::from_ref(&stack_top).addr());
    pool.spawner.set_current_worker(ptr::from_ref(&cx).cast());
    pool.run_until(&cx, None);
    pool.spawner.set_current_worker(ptr::null());
    pool.unregister_thread();
}
