//! The runtime on a [`ThreadPool`]: spawning ([`ThreadPool::spawn_future`]), the
//! [`Schedule`] implementation that queues tasks on the pool, the pool's lifetime as seen by
//! its tasks (`scheduler::inner`, `release_pool`, reached through the pool's table).
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
use core::ptr::NonNull;

use super::harness;
use super::header::{Header, Schedule};
use super::JoinHandle;
use crate::platform::Spawner;
use crate::error::Error;
use crate::scheduler::any_pool::PoolOps;
use crate::scheduler::{Inner, ThreadPool};
use crate::sync::Ordering;
use crate::task::Task;

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
        // may free `Inner` through it (`release_pool`, the table's `release`), which a shared reference's
        // provenance does not allow (Miri, Stacked Borrows: tests/runtime.rs
        // wake_after_pool_dropped).
        let header = harness::allocate::<F, PoolScheduler<S>>(future, self.inner.cast::<()>());
        inner.acquire();
        let task = Header::task(header);
        // On a worker: its LIFO slot, as a wake (`schedule_woken`), with the spawn counted on the
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

/// Queues tasks on a `ThreadPool<S>`: the harness's direct calls (`Schedule`); the rest is the
/// pool's table (`scheduler::any_pool`).
pub(crate) struct PoolScheduler<S>(PhantomData<fn() -> S>);

// SAFETY: `schedule` is the table's (the pool's submit: Ok = runs exactly once); `Inner` lives
// until the table's `release` dropped the last task reference (and the handle's).
unsafe impl<S: Spawner> Schedule for PoolScheduler<S> {
    const OPS: &'static PoolOps = &Inner::<S>::OPS;

    /// Inlined into the harness's poll: its re-queue of a task woken during its own poll is the
    /// yield path (`Inner::schedule_of`).
    #[inline(always)]
    unsafe fn schedule(sched: NonNull<()>, task: NonNull<Task>, lifo: bool) -> Result<(), ()> {
        // SAFETY: forwarded contract.
        unsafe { Inner::<S>::schedule_of(sched, task, lifo) }
    }

    /// Read from the pool's `Sync` word, not the injector: every poll asks, and the word's line
    /// is one the yield path reads anyway (`notify_join`) and busy workers rarely write, while
    /// the injector's tail line is written by every submit from outside. `Shutdown` is set just
    /// after the injector closes (`ThreadPool::shutdown`); a worker draining after shutdown
    /// read it in `wait` (so this Relaxed load sees it too), and the thread running the
    /// left-overs set it itself.
    #[inline]
    unsafe fn is_closed(sched: NonNull<()>) -> bool {
        // SAFETY: the task holds a reference on the pool, an `Inner<S>`.
        let inner = unsafe { sched.cast::<Inner<S>>().as_ref() };
        inner.protocol.load(Ordering::Relaxed).state() == crate::scheduler::sync_word::State::Shutdown
    }
}
