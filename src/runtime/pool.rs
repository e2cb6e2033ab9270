//! The runtime on a [`ThreadPool`]: spawning ([`ThreadPool::spawn_future`]), the
//! [`Schedule`] implementation that queues tasks on the pool, the pool's lifetime as seen by
//! its tasks (`scheduler::inner`, `release_pool`).
//!
//! # The pool outlives its tasks
//! Every task holds a reference on the pool's shared state (`Inner`), taken at spawn and
//! given back when the task is freed; the `ThreadPool` handle holds one more. Dropping the
//! handle still shuts down and joins every thread as before, but the memory of `Inner` is freed
//! by whichever goes last: the handle, or the last task. So a waker kept past the pool's end
//! (by another thread, or by the main thread) stays safe to call: the pool refuses the task
//! (the injector is closed), and the task is cancelled on the waking thread: its future is
//! dropped there and its `JoinHandle` reports [`JoinError::is_cancelled`](super::JoinError).

use core::future::Future;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use super::harness;
use super::header::{Header, Schedule};
use super::JoinHandle;
use crate::latch::Signal;
use crate::platform::Spawner;
use crate::error::Error;
use crate::scheduler::inner::release_pool;
use crate::scheduler::{Inner, ThreadPool};
use crate::sync::Ordering;
use crate::task::Task;

/// Spins before a thread outside the pool parks in `JoinHandle::join`. 0, as `block_on`'s:
/// on 2 cores a spinning joiner slows the worker it waits for (see `block_on.rs`).
pub(crate) const JOIN_SPINS: u32 = 0;

impl<S: Spawner> ThreadPool<S> {
    /// Spawns a future on the pool and returns its [`JoinHandle`]. One allocation (the task:
    /// header, future and output in one block); none per wake or poll.
    ///
    /// From one of the pool's workers the task goes to that worker's LIFO slot (it runs next,
    /// cache-hot); from elsewhere, to the injector.
    ///
    /// # Errors
    /// As [`submit`](Self::submit): [`Error::Shutdown`] from outside after shutdown began,
    /// [`Error::Spawn`] if no thread could be started. The future is dropped.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool};
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// let sum = pool.block_on(async {
    ///     let a = pool.spawn_future(async { 1 }).unwrap();
    ///     let b = pool.spawn_future(async { 2 }).unwrap();
    ///     a.await.unwrap() + b.await.unwrap()
    /// });
    /// assert_eq!(sum, 3);
    /// # }
    /// ```
    pub fn spawn_future<F>(&self, future: F) -> Result<JoinHandle<F::Output>, Error>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let inner = self.inner();
        // The handle's own pointer (from `Box::leak`), not one made from `&Inner`: the last task
        // may free `Inner` through it (`PoolScheduler::release`), which a shared reference's
        // provenance does not allow (Miri, Stacked Borrows: tests/runtime.rs
        // wake_after_pool_dropped).
        let header = harness::allocate::<F, PoolScheduler<S>>(future, self.inner.cast::<()>());
        inner.acquire();
        let task = Header::task(header);
        // On a worker: its LIFO slot, as a wake (`schedule_slow`), with the spawn counted on the
        // same worker lookup.
        let submitted = match self.current_worker() {
            Some(me) => {
                inner.schedule_woken(me, task);
                me.worker().stats.spawned.bump_owned();
                Ok(())
            }
            // SAFETY: a fresh task: SCHEDULED, with the queue's reference; valid until its
            // callback runs (the queue's reference keeps it alive).
            None => unsafe { self.submit(task) }.map(|()| inner.outside.spawned.bump_shared()),
        };
        match submitted {
            Ok(()) => {
                // SAFETY: output type F::Output; the handle takes the handle's reference.
                Ok(unsafe { JoinHandle::from_raw(header) })
            }
            Err(e) => {
                // SAFETY: refused, so never queued: still only ours. Frees the task and its
                // pool reference.
                unsafe { Header::dealloc_unqueued(header) };
                Err(e)
            }
        }
    }
}

/// Queues tasks on a `ThreadPool<S>`; the scheduler pointer is its `Inner<S>`.
pub(crate) struct PoolScheduler<S>(PhantomData<fn() -> S>);

impl<S: Spawner> PoolScheduler<S> {
    /// [`Schedule::schedule`] off the yield path: a wake on one of the pool's workers (`lifo`:
    /// its LIFO slot, `Inner::schedule_woken`), or a wake or re-queue from outside the pool's
    /// threads (`submit`).
    ///
    /// # Safety
    /// As [`Schedule::schedule`].
    #[inline(never)]
    unsafe fn schedule_slow(sched: NonNull<()>, task: NonNull<Task>, lifo: bool) -> Result<(), ()> {
        // SAFETY: the task holds a reference on `Inner`.
        let pool = unsafe { Self::pool(sched) };
        if lifo {
            if let Some(me) = pool.current_worker() {
                pool.inner().schedule_woken(me, task);
                return Ok(());
            }
        }
        // SAFETY: the task meets the submit contract: not queued (SCHEDULED was just set by
        // us, or our poll holds RUNNING and re-queues it), and alive until its callback runs
        // (the queue's reference).
        unsafe { pool.submit(task) }.map_err(drop)
    }

    /// A non-owning handle on the pool (never dropped, so it never shuts anything down).
    ///
    /// # Safety
    /// `sched` is a live `Inner<S>` (a task holds a reference on it).
    #[inline]
    unsafe fn pool(sched: NonNull<()>) -> ManuallyDrop<ThreadPool<S>> {
        ManuallyDrop::new(ThreadPool { inner: sched.cast::<Inner<S>>() })
    }
}

// SAFETY: `schedule` is the pool's submit (its contract: Ok = runs exactly once); `Inner` lives
// until `release` dropped the last task reference (and the handle's).
unsafe impl<S: Spawner> Schedule for PoolScheduler<S> {
    // A task woken during its own poll (`lifo == false`) is re-queued on the worker that
    // polled it, at the back of its ring, with the cheap notification (`notify_join`: a real
    // notify only when a thread is idle or may be started and no wake is in flight; one
    // Relaxed load otherwise). This worker is awake and goes straight back to its queues, so it
    // runs the task itself if nobody steals it: a missed wake-up costs parallelism, never
    // progress (`scheduler/README.md`, "Self-requeued tasks"), and the busy path of every
    // yield has no `notify` fence.
    //
    // Always inlined: that re-queue runs inside `harness::run`, and a call here cost ~20
    // instructions of prologue and epilogue per yield (callgrind, `examples/yield_probe`).
    // Everything else is `schedule_slow`.
    #[inline(always)]
    unsafe fn schedule(sched: NonNull<()>, task: NonNull<Task>, lifo: bool) -> Result<(), ()> {
        if !lifo {
            // SAFETY: the task holds a reference on `Inner`.
            let pool = unsafe { Self::pool(sched) };
            if let Some(me) = pool.current_worker() {
                let inner = pool.inner();
                inner.push_ring(me, task);
                inner.notify_join();
                return Ok(());
            }
        }
        // SAFETY: forwarded contract.
        unsafe { Self::schedule_slow(sched, task, lifo) }
    }

    /// Read from the pool's `Sync` word, not the injector: every poll asks, and the word's line
    /// is one the yield path reads anyway (`notify_join`) and busy workers rarely write, while
    /// the injector's tail line is written by every submit from outside. `Shutdown` is set just
    /// after the injector closes (`ThreadPool::shutdown`); a worker draining after shutdown
    /// read it in `wait` (so this Relaxed load sees it too), and the thread running the
    /// left-overs set it itself.
    #[inline]
    unsafe fn is_closed(sched: NonNull<()>) -> bool {
        // SAFETY: as above.
        let inner = unsafe { sched.cast::<Inner<S>>().as_ref() };
        inner.protocol.load(Ordering::Relaxed).state() == crate::scheduler::sync_word::State::Shutdown
    }

    unsafe fn wait(sched: NonNull<()>, signal: &Signal) {
        // SAFETY: as above.
        let pool = unsafe { Self::pool(sched) };
        if !pool.is_worker_thread() {
            // Outside the pool: a short spin first (the task is usually short).
            let mut spins = JOIN_SPINS;
            while spins > 0 {
                if signal.is_set() {
                    return;
                }
                crate::sync::spin_hint();
                spins -= 1;
            }
        }
        pool.wait_for(signal);
    }

    unsafe fn timers(sched: NonNull<()>) -> Option<crate::timer::TimerHandle> {
        // SAFETY: the task's reference keeps `Inner` alive.
        Some(unsafe { sched.cast::<Inner<S>>().as_ref() }.timer_handle())
    }

    unsafe fn release(sched: NonNull<()>) {
        // SAFETY: the task's reference, which it gives up; `sched` is the handle's pointer
        // (`spawn_future`), so the last reference may free the pool through it.
        unsafe { release_pool::<S>(sched) };
    }
}
