//! Surplus workers: the live thread count of a pool ([`ThreadPool::set_max_threads`],
//! [`ThreadPool::refresh_max_threads`]), and what a worker does when it finds itself above it.
//!
//! The pool's `max_threads` (`Protocol::max_threads`) may be lowered and raised again between 1
//! and the limit it was created with (its worker slots). Workers are numbered in the order they
//! started; those with an index at or above `max_threads` are *surplus*. A notify starts a thread
//! only below `max_threads`, so the surplus workers are the only threads above it.
//!
//! A surplus worker finishes the task it runs, then, between two tasks of its own loop:
//! * hands on its queued work: the tasks in its ring and LIFO slot stay there, for the others
//!   to steal (every search looks at every worker's queues), and a notification makes one of
//!   them search (as for its waking right and a search it owed: `Seeking::parks_outside`);
//! * parks on its parker outside the waking protocol (not idle: no notification picks it),
//!   counted in `Stats::surplus_threads`, until it is below `max_threads` again or shutdown
//!   begins (both unpark it: `set_max_threads` and `begin_shutdown` unpark every worker).
//!
//! It looks at three places: after each task of its busy loop (its `Worker::surplus` flag, one
//! Relaxed load of its own line, set by `set_max_threads`), before each search of its loop,
//! and in its idle wait, whose condition it is (so an idle surplus worker, unparked by
//! `set_max_threads`, leaves the idle set through `Sync::wait`'s `Done`). A task of a surplus
//! worker that waits inside itself (a join, a latch) still runs work inside that wait: the
//! task is not over, and "after their current task" counts its waits as part of it.
//!
//! Nothing is stranded: a surplus worker leaves no notification owed behind it, and one for
//! the tasks left in its queues (`Seeking::parks_outside`, tested with the other `Seeking`
//! transitions); a worker goes idle only after a search that came up empty, and a search
//! steals from every worker's ring and LIFO slot, surplus ones included.

use core::ptr::NonNull;

use super::context::WorkerContext;
use super::handle::ThreadPool;
use super::inner::Inner;
use super::seeking::Seeking;
use super::sync_word::State;
use super::worker::Worker;
use crate::error::Error;
use crate::platform::Spawner;
use crate::sync::Ordering;

impl<S: Spawner> ThreadPool<S> {
    /// Sets how many threads serve the pool: from 1 to the `max_threads` it was created with
    /// ([`thread_limit`](Self::thread_limit)). Lowering it makes the workers above it (in the
    /// order they started) finish their current task, hand their queued tasks to the other
    /// workers and park, counted in [`Stats::surplus_threads`](crate::Stats::surplus_threads)
    /// (so once the running tasks have ended, at most `n` tasks run at once); raising it wakes
    /// them, and threads not yet started may start again as work waits. Tasks queued on a
    /// surplus worker are stolen by the others.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(4)).unwrap();
    /// pool.set_max_threads(1).unwrap();
    /// assert_eq!((pool.max_threads(), pool.thread_limit()), (1, 4));
    /// assert!(pool.set_max_threads(5).is_err());
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 or above the thread limit; [`Error::Shutdown`] after
    /// shutdown began; [`Error::Forked`] in a child that inherited the pool (nothing changed).
    pub fn set_max_threads(&self, n: usize) -> Result<(), Error> {
        self.inner().set_max_threads(n)
    }

    /// Re-reads the platform's parallelism (with `std`: the calling thread's affinity mask and
    /// its cgroup's CPU quota, `os::cpus`) and sets `max_threads` to it, capped by the thread
    /// limit: a pool created with the default thread count follows a container whose quota
    /// changed. Returns the new `max_threads`.
    ///
    /// # Errors
    /// As [`set_max_threads`](Self::set_max_threads).
    pub fn refresh_max_threads(&self) -> Result<usize, Error> {
        let limit = self.thread_limit();
        let n = self.spawner().available_parallelism().clamp(1, limit);
        self.set_max_threads(n)?;
        Ok(n)
    }
}

impl<S: Spawner> Inner<S> {
    #[cold]
    fn set_max_threads(&self, n: usize) -> Result<(), Error> {
        if n == 0 || n > self.worker_table.len() {
            return Err(Error::InvalidArgument);
        }
        if self.injector.is_closed() {
            return Err(self.refusal());
        }
        // `n` fits: the worker table has at most `MAX_THREADS` slots.
        self.protocol.set_max_threads(n as u32);
        for (index, slot) in self.worker_table.iter().enumerate() {
            if let Some(worker) = NonNull::new(slot.load(Ordering::Acquire)) {
                // SAFETY: from the worker table.
                unsafe { Worker::surplus_of(worker) }.store(index >= n, Ordering::Relaxed);
            }
        }
        // Every worker looks again: idle ones now surplus leave the idle set, parked surplus
        // ones now below the limit serve again (a worker that registers meanwhile looks before
        // its first search).
        self.unpark_all();
        // Work queued while fewer served may have a thread to wake or start now.
        self.notify_cold(false);
        Ok(())
    }

    /// Whether worker `me` is above the pool's `max_threads` (module docs).
    #[inline]
    pub(super) fn is_surplus(&self, me: &Worker<S>) -> bool {
        me.index >= self.protocol.max_threads() as usize
    }

    /// Worker `cx`, in its own loop: if it is surplus (module docs) and not draining after
    /// shutdown, hands on what it holds and owes in the protocol (`st`), then parks until it
    /// serves again or shutdown began (`park_outside`: tasks left in its ring and LIFO slot
    /// stay there for the others to steal, a search looking at every worker's, and the
    /// notification makes one of them search).
    #[cold]
    #[inline(never)]
    pub(super) fn retire_if_surplus(&self, cx: &WorkerContext<S>, st: &mut Seeking) {
        let me = cx.worker();
        if !self.is_surplus(me) || st.draining().is_some() {
            return;
        }
        self.surplus_threads.fetch_add(1, Ordering::Relaxed);
        // Acquire: after shutdown, the drain that follows sees what was pushed before it.
        let serves = || !self.is_surplus(me) || self.protocol.load(Ordering::Acquire).state() == State::Shutdown;
        self.park_outside(cx, me.holds_tasks(), serves, None, st);
        self.surplus_threads.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, loom))]
mod loom;
