//! Fork-join from anywhere: [`ThreadPool::install`] (the way in to a worker's context),
//! [`ThreadPool::join`], and [`ThreadPool::submit_fork`] for intrusive tasks. From outside the
//! pool the whole call is one stack job on a worker while the caller parks.

use core::ptr::NonNull;

use super::stack_job::StackJob;
use crate::error::Error;
use crate::platform::Spawner;
use crate::scheduler::{ThreadPool, WorkerContext};
use crate::sync::Ordering;
use crate::task::Task;

impl<S: Spawner> ThreadPool<S> {
    /// Runs `op` on one of the pool's workers with that worker's context, and returns its
    /// value: directly when called on one of this pool's workers, else the caller parks until
    /// a worker has run it. The context is how code on a worker forks and joins
    /// ([`WorkerContext::join`]) without looking itself up again.
    ///
    /// # Errors
    /// [`Error::Shutdown`] if the pool is shut down, [`Error::Spawn`] if it has no thread and
    /// cannot start one, [`Error::InvalidArgument`] if the platform has no thread-local slot
    /// ([`Spawner::current_worker`]) through which a worker finds its context. `op` did not run.
    ///
    /// Example: [`WorkerContext`].
    pub fn install<OP, R>(&self, op: OP) -> Result<R, Error>
    where
        OP: FnOnce(&WorkerContext<S>) -> R + Send,
        R: Send,
    {
        if let Some(cx) = self.current_worker() {
            return Ok(op(cx));
        }
        self.run_on_pool(move |cx| cx.map(op)).ok_or_else(|| {
            let inner = self.inner();
            if inner.injector.is_closed() {
                inner.refusal()
            } else if inner.protocol.load(Ordering::Relaxed).spawned() == 0 {
                Error::Spawn
            } else {
                Error::InvalidArgument
            }
        })
    }

    /// Runs `a` and `b`, potentially in parallel, and returns both results: a convenience
    /// that finds this thread's worker context and calls [`WorkerContext::join`] (from outside
    /// the pool, the whole call runs on a worker while the caller parks; if the pool cannot
    /// take work, it runs here, sequentially). Recursive code should take the context instead
    /// ([`install`](Self::install)): this lookup costs a thread-local read per call.
    ///
    /// With `std`, a panic in either closure is re-raised after both are finished.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool};
    ///
    /// fn fib(pool: &ThreadPool<pool::ThreadSpawner>, n: u64) -> u64 {
    ///     if n < 2 { return n; }
    ///     let (a, b) = pool.join(|| fib(pool, n - 1), || fib(pool, n - 2));
    ///     a + b
    /// }
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// assert_eq!(fib(&pool, 12), 144);
    /// # }
    /// ```
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        match self.current_worker() {
            Some(cx) => cx.join(|_| a(), |_| b()),
            None => self.join_cold(a, b),
        }
    }

    #[cold]
    #[inline(never)]
    fn join_cold<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        self.run_on_pool(move |cx| match cx {
            Some(cx) => cx.join(|_| a(), |_| b()),
            // The pool could not take the job: we are still on the caller's thread.
            None => (a(), b()),
        })
    }

    /// Submits a task for fork-join: on one of this pool's workers it stays private to that
    /// worker, like `join`'s second half (a latent frame: no shared write, no fence), until
    /// a wait of the forking code runs it inline (newest first), an idle worker asks for work
    /// (it is then offered, oldest first, on the worker's join deque), or the code that forked
    /// it is done without waiting (the task it runs in returns, or the `join` half it runs in
    /// returns): then it goes to the join deque, where this worker or a thief runs it.
    /// Elsewhere, or when the worker's queues are full, as [`submit`](Self::submit).
    ///
    /// For recursive fork-join with latches ([`CountLatch`](crate::CountLatch) + [`wait_for_latch`](Self::wait_for_latch),
    /// or `pool_fork` + `pool_latch_wait` in C): a worker that waits runs its own newest forks
    /// first, depth-first, so helping nests no deeper than the recursion. With plain `submit`
    /// the children sit in the FIFO ring, a waiting worker runs the *oldest* queued task, which
    /// waits in turn, and the nesting can grow with the number of queued tasks instead.
    ///
    /// # Errors
    /// As [`submit`](Self::submit) (never from a worker).
    ///
    /// # Safety
    /// As [`submit`](Self::submit).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use pool::{container_of, Config, CountLatch, Task, ThreadPool, ThreadSpawner};
    ///
    /// /// One forked half of a sum: the task, its answer, and the latch its parent waits on.
    /// #[repr(C)]
    /// struct Half<'a> { lo: u64, hi: u64, total: u64, task: Task, pool: &'a ThreadPool<ThreadSpawner>, parent: &'a CountLatch }
    ///
    /// unsafe extern "C" fn run_half(task: *mut Task) {
    ///     let half = container_of!(task, Half, task);
    ///     // SAFETY: every task with this callback is the `task` of a live `Half` (pointer derived
    ///     // from the whole `Half`); its parent reads `total` only after `done`, our last access.
    ///     unsafe {
    ///         (*half).total = sum((*half).pool, (*half).lo, (*half).hi);
    ///         (*half).parent.done();
    ///     }
    /// }
    ///
    /// fn sum(pool: &ThreadPool<ThreadSpawner>, lo: u64, hi: u64) -> u64 {
    ///     if hi - lo <= 64 {
    ///         return (lo..hi).sum();
    ///     }
    ///     let mid = lo + (hi - lo) / 2;
    ///     let latch = CountLatch::new();
    ///     latch.add(1);
    ///     let mut right = Half { lo: mid, hi, total: 0, task: Task::new(run_half), pool, parent: &latch };
    ///     let right: *mut Half = &mut right;
    ///     // SAFETY: `right` stays in this frame until its `done`, which we wait for below.
    ///     unsafe { pool.submit_fork(NonNull::new_unchecked(&raw mut (*right).task)).unwrap() };
    ///     let left = sum(pool, lo, mid);
    ///     pool.wait_for_latch(&latch); // runs the right half here unless another worker took it
    ///     // SAFETY: the right half is done (the latch), and nothing else refers to it.
    ///     left + unsafe { (*right).total }
    /// }
    ///
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// assert_eq!(pool.scope(|_| sum(&pool, 0, 1000)), 499_500); // the scope runs on a worker
    /// # }
    /// ```
    pub unsafe fn submit_fork(&self, task: NonNull<Task>) -> Result<(), crate::Error> {
        if let Some(cx) = self.current_worker() {
            // SAFETY: the task meets `submit`'s contract (the caller's), and the forking code
            // waits for it (its latch).
            if unsafe { cx.fork_task(task) } {
                return Ok(());
            }
        }
        // SAFETY: forwarded contract.
        unsafe { self.submit(task) }
    }

    /// Runs `f` on one of the pool's workers (with its context) and parks the caller until it
    /// is done; runs it here (with `None`) if the pool cannot take work, or where the worker
    /// that runs it has no context to give (a platform without thread-local storage).
    pub(crate) fn run_on_pool<F, R>(&self, f: F) -> R
    where
        F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
        R: Send,
    {
        let job = StackJob::new(f, self.inner());
        // SAFETY: the job lives in this frame until its signal is set (we wait for it below);
        // on error it was not queued and is still ours.
        match unsafe { self.submit(job.task()) } {
            // SAFETY: offered by `new`; after the wait the signal is set; taken once.
            Ok(()) => unsafe {
                self.wait_for(job.signal());
                job.take_result()
            },
            // SAFETY: refused: not queued, not run.
            Err(_) => unsafe { job.run_inline(None) },
        }
    }

}
