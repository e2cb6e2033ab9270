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
        let pool = ptr::from_ref(self).cast::<()>();
        // SAFETY: `init_worker` writes every field.
        let worker = unsafe { crate::fallible::try_box_in_place(|dst| self.init_worker(dst, pool)) }?;
        Ok(NonNull::from(Box::leak(worker)))
    }

    /// Writes a new worker's state at `dst`, field by field: 2 KiB with its ring and join
    /// deque, which made as a value would be built on the stack and copied into the block.
    ///
    /// # Safety
    /// `dst` is aligned and valid for writes.
    unsafe fn init_worker(&self, dst: *mut Worker<S>, pool: *const ()) {
        // SAFETY: the caller's contract; every field is written.
        unsafe {
            ptr::addr_of_mut!((*dst).pool).write(pool);
            ptr::addr_of_mut!((*dst).next).write(ptr::null_mut());
            ptr::addr_of_mut!((*dst).index).write(usize::MAX);
            // Hungry: the first join on this worker offers work, so a pool that may still
            // start threads starts one (context.rs, "The hungry flag").
            ptr::addr_of_mut!((*dst).demand).write(Demand::new());
            ptr::addr_of_mut!((*dst).waiting_in_task).write(AtomicBool::new(false));
            ptr::addr_of_mut!((*dst).surplus).write(AtomicBool::new(false));
            ptr::addr_of_mut!((*dst).lifo).write(AtomicPtr::new(ptr::null_mut()));
            Ring::init(ptr::addr_of_mut!((*dst).ring));
            JoinDeque::init(ptr::addr_of_mut!((*dst).joins));
            ptr::addr_of_mut!((*dst).parker).write(self.spawner.new_parker());
            ptr::addr_of_mut!((*dst).stats).write(CachePadded(Counters::default()));
        }
        // Names every field: one added and not written above fails to compile here.
        let _ = |w: &Worker<S>| {
            let Worker { pool: _, next: _, index: _, demand: _, waiting_in_task: _, surplus: _, lifo: _, ring: _, joins: _, parker: _, stats: _ } = w;
        };
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
        // Release: what this thread did before (its spawner's start hook) is visible to a
        // constructor that waits for the count (`prestart`).
        let index = self.next_index.fetch_add(1, Ordering::Release);
        // `spawned` never exceeds `max_threads` and threads only exit at shutdown, so every
        // started thread gets a slot.
        let slot = self.worker_table.get(index).expect("more threads started than max_threads");
        // SAFETY: not yet published, so still exclusively ours.
        unsafe { (*worker.as_ptr()).index = index };
        // Release: the worker's fields are initialised before anyone can reach it.
        slot.store(worker.as_ptr(), Ordering::Release);
        let mut head = self.workers.load(Ordering::Relaxed);
        loop {
            // SAFETY: not yet published, so still exclusively ours.
            unsafe { (*worker.as_ptr()).next = head };
            match self.workers.compare_exchange_weak(head, worker.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
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
