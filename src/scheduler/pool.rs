//! What a caller does with a [`ThreadPool`]: submit tasks (one, a batch, LIFO), wait (for a
//! signal, a latch, the pool to go idle), shut it down, and install the I/O driver.

use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use alloc::boxed::Box;

use super::context::WorkerContext;
use super::handle::ThreadPool;
use super::inner::Inner;
use super::sync_word::State;
use super::job::Until;
use crate::error::Error;
use crate::io::Driver;
use crate::platform::Spawner;
use crate::sync::{Backoff, Ordering};
use crate::task::{Batch, Task};




impl<S: Spawner> ThreadPool<S> {


    /// The most threads that serve this pool now: the `max_threads` it was created with,
    /// until [`set_max_threads`](Self::set_max_threads) changes it.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::Spawner;
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap(); // 0: one per CPU it may use
    /// let cpus = pool.spawner().available_parallelism().min(pool::MAX_THREADS);
    /// assert_eq!(pool.max_threads(), cpus);
    /// # }
    /// ```
    pub fn max_threads(&self) -> usize {
        self.inner().protocol.max_threads() as usize
    }

    /// The most threads this pool may ever have: the `max_threads` it was created with (its
    /// worker slots; the bound of [`set_max_threads`](Self::set_max_threads) and of a
    /// queue's width).
    pub fn thread_limit(&self) -> usize {
        self.inner().protocol.thread_limit() as usize
    }

    /// The platform this pool runs on.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, Spawner, ThreadPool};
    /// let pool = ThreadPool::new(Config::default()).unwrap();
    /// assert!(pool.spawner().available_parallelism() >= 1);
    /// # }
    /// ```
    pub fn spawner(&self) -> &S {
        &self.inner().spawner
    }

    /// Whether the calling thread is one of this pool's worker threads.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::Arc;
    /// let pool = Arc::new(pool::ThreadPool::new(pool::Config::default()).unwrap());
    /// assert!(!pool.is_worker_thread());
    /// let (p, (tx, rx)) = (pool.clone(), std::sync::mpsc::channel());
    /// pool.spawn(move || {
    ///     let on_worker = p.is_worker_thread();
    ///     drop(p); // before `send`: the last handle must not drop on a worker (it could not join)
    ///     tx.send(on_worker).unwrap();
    /// })
    /// .unwrap();
    /// assert!(rx.recv().unwrap());
    /// # }
    /// ```
    pub fn is_worker_thread(&self) -> bool {
        self.current_worker().is_some()
    }

    /// This thread's worker context, if this thread is one of this pool's workers: the one
    /// thread-local lookup of an entry point (`scheduler/context.rs`).
    #[inline]
    pub(crate) fn current_worker(&self) -> Option<&WorkerContext<S>> {
        self.inner().current_context()
    }

    /// Submits one task.
    ///
    /// From one of this pool's threads, the task goes to that thread's own queue (no shared
    /// write on the fast path); from any other thread, to the pool's injector.
    ///
    /// Order: a pool with one thread (`max_threads == 1`) starts the tasks submitted from
    /// outside it in submission order (each submitting thread's order when several submit).
    /// A task's own submits are not ordered against them (a LIFO submit may run first), and a
    /// task that waits through the pool may run later tasks inside its wait. With several
    /// threads, tasks run in parallel and no order is promised.
    ///
    /// # Errors
    /// [`Error::Shutdown`] after `shutdown` began (from outside the pool's threads),
    /// [`Error::Spawn`] if the pool has no thread and cannot start one, [`Error::Forked`] in a
    /// child process that inherited the pool through `fork()`. On error the task was not
    /// queued and is still the caller's.
    ///
    /// # Safety
    /// `task` points to a valid [`Task`] with a callback, not currently queued anywhere, that
    /// stays valid and unmoved until its callback has started (see [`Task`]).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use pool::{container_of, Config, Signal, Task, ThreadPool};
    ///
    /// #[repr(C)]
    /// struct Add { a: u64, b: u64, sum: u64, task: Task, done: Signal }
    ///
    /// unsafe extern "C" fn add(task: *mut Task) {
    ///     let job = container_of!(task, Add, task);
    ///     // SAFETY: every task with this callback is the `task` field of an `Add`, and its
    ///     // pointer was derived from the whole `Add`; the submitter reads `sum` only after
    ///     // `done` is set, and `set` is the last access (the job may be freed after it).
    ///     unsafe {
    ///         (*job).sum = (*job).a + (*job).b;
    ///         (*job).done.set();
    ///     }
    /// }
    ///
    /// let pool = ThreadPool::new(Config::default()).unwrap();
    /// let mut job = Add { a: 40, b: 2, sum: 0, task: Task::new(add), done: Signal::new() };
    /// let job_ptr: *mut Add = &mut job;
    /// // SAFETY: `job` stays put until its callback set `done`, which we wait for; we touch it
    /// // only through `job_ptr` meanwhile.
    /// unsafe {
    ///     pool.submit(NonNull::new_unchecked(&raw mut (*job_ptr).task)).unwrap();
    ///     pool.wait_for(&(*job_ptr).done);
    /// }
    /// assert_eq!(job.sum, 42);
    /// # }
    /// ```
    #[inline]
    pub unsafe fn submit(&self, task: NonNull<Task>) -> Result<(), Error> {
        // SAFETY: forwarded contract.
        unsafe { self.submit_batch(Batch::from(task)) }
    }

    /// Submits a batch of tasks with one queue operation (from outside) or one notification
    /// (from a worker).
    ///
    /// # Errors
    /// As [`submit`](Self::submit); on error no task of the batch was queued.
    ///
    /// # Safety
    /// Every task of the batch meets [`submit`](Self::submit)'s contract.
    ///
    /// Example: [`Batch::push`].
    #[inline]
    pub unsafe fn submit_batch(&self, mut batch: Batch) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        let inner = self.inner();
        if let Some(worker) = self.current_worker() {
            while let Some(task) = batch.pop() {
                inner.push_ring(worker, task);
            }
        } else {
            if inner.protocol.load(Ordering::Relaxed).spawned() == 0 {
                self.start_first_thread()?;
            }
            inner.injector.push(batch, true).map_err(|_| inner.refusal())?;
        }
        // One notification for the batch, wherever it went (one inlined copy).
        inner.notify(false);
        Ok(())
    }

    /// Submits a task to run next on this worker (its LIFO slot: cache-hot, design text 003),
    /// when called from one of the pool's threads; from elsewhere, as [`submit`](Self::submit).
    ///
    /// The slot's previous task moves to the back of the worker's ring. At most
    /// three LIFO tasks run in a row before the ring gets a turn, and an idle worker steals a
    /// slot's task when its owner's ring is empty, so nothing is stranded behind a long task.
    ///
    /// # Errors
    /// As [`submit`](Self::submit).
    ///
    /// # Safety
    /// As [`submit`](Self::submit).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::ptr::NonNull;
    /// use pool::{Config, Task, ThreadPool};
    /// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
    ///
    /// static ORDER: AtomicUsize = AtomicUsize::new(0);
    /// static mut CONTINUATION: Task = Task::new(continuation);
    /// unsafe extern "C" fn continuation(_: *mut Task) {
    ///     ORDER.fetch_add(1, Ordering::Relaxed);
    /// }
    ///
    /// let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(1)).unwrap());
    /// let p = pool.clone();
    /// pool.spawn(move || {
    ///     // From a worker: runs right after this task, on this thread, before older queued work.
    ///     // SAFETY: a static task, submitted once.
    ///     unsafe { p.submit_lifo(NonNull::new_unchecked(&raw mut CONTINUATION)).unwrap() };
    /// })
    /// .unwrap();
    /// pool.shutdown().unwrap();
    /// assert_eq!(ORDER.load(Ordering::Relaxed), 1);
    /// # }
    /// ```
    #[inline]
    pub unsafe fn submit_lifo(&self, task: NonNull<Task>) -> Result<(), Error> {
        let inner = self.inner();
        match self.current_worker() {
            Some(worker) => {
                inner.push_lifo(worker, task);
                inner.notify(false);
                Ok(())
            }
            // SAFETY: forwarded contract.
            None => unsafe { self.submit(task) },
        }
    }

    /// Waits until `signal` is set. On one of this pool's workers, runs other queued tasks
    /// meanwhile (help-until-complete) and sleeps inside the pool's sleep protocol when there
    /// are none, so new work still wakes it. On any other thread, parks (block-on).
    ///
    /// The signal may be set from any thread, once. See [`Signal`](crate::Signal).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, Signal, ThreadPool};
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(1)).unwrap());
    /// let (p, (tx, rx)) = (pool.clone(), std::sync::mpsc::channel());
    /// pool.spawn(move || {
    ///     // On the pool's only worker: waiting runs the queued task that sets the signal.
    ///     let inner = Arc::new(Signal::new());
    ///     let setter = inner.clone();
    ///     // SAFETY: the only `set`.
    ///     p.spawn(move || unsafe { setter.set() }).unwrap();
    ///     p.wait_for(&inner);
    ///     drop(p); // before `send`: the last handle must not drop on a worker (it could not join)
    ///     tx.send(inner.is_set()).unwrap();
    /// })
    /// .unwrap();
    /// assert!(rx.recv().unwrap());
    /// # }
    /// ```
    pub fn wait_for(&self, signal: &crate::Signal) {
        self.wait_until(Until { signal, thief: None, deadline: None });
    }

    /// `wait_for`, told which worker runs the awaited job when known (a stolen join half), and
    /// when to give up: true once the signal is set, false if the deadline passed first.
    pub(crate) fn wait_until(&self, until: Until<'_>) -> bool {
        let signal = until.signal;
        if signal.is_set() {
            return true;
        }
        match self.current_worker() {
            Some(cx) => cx.wait_until(until),
            // The one parked wait (`latch`, "Waiting"); it waits for SET in `parker`'s scope:
            // after SETTING the setter may still be inside its `unpark`
            // (tests/waiter_parker.rs; found by the capi_ops fuzz target under ASan).
            None => {
                let spawner = &self.inner().spawner;
                let now = || spawner.now_ns();
                signal.wait(&spawner.new_parker(), until.deadline.map(|at| (at, &now as &dyn Fn() -> Option<u64>)))
            }
        }
    }

    /// Waits until every task submitted to this pool before the call has finished: the pool
    /// is idle (every started thread asleep or about to sleep with no task of its own waiting,
    /// every queue empty). Work submitted meanwhile may or may not be waited for. It checks
    /// with a backoff that sleeps up to 1 ms between looks (no busy spinning), so it returns
    /// within about a millisecond of the pool going idle. A task blocked in a wait (a latch an
    /// outside thread will release, say) keeps the pool busy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when called on one of this pool's own threads (it would wait
    /// for itself); [`Error::Forked`] in a child that inherited the pool through `fork()`.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..100 {
    ///     let done = done.clone();
    ///     pool.spawn(move || { done.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// pool.wait_idle().unwrap();
    /// assert_eq!(done.load(Ordering::Relaxed), 100);
    /// # }
    /// ```
    pub fn wait_idle(&self) -> Result<(), Error> {
        if self.current_worker().is_some() {
            return Err(Error::InvalidArgument);
        }
        let inner = self.inner();
        if inner.link.is_inherited() {
            return Err(Error::Forked);
        }
        let parker = inner.spawner.new_parker();
        let mut backoff = Backoff::new(8, 1_000);
        while !inner.is_idle() {
            backoff.snooze(&parker);
        }
        Ok(())
    }

    /// Waits until every unit added to `latch` is done (as [`wait_for`](Self::wait_for)).
    /// Call once per latch, from the one thread that waits.
    ///
    /// Example: [`CountLatch`](crate::CountLatch).
    pub fn wait_for_latch(&self, latch: &crate::CountLatch) {
        // On a worker, its own newest forks first, while units are outstanding: `pool_fork` +
        // `pool_latch_wait` whose forks nobody stole then finishes with no read-modify-write
        // on the latch (`CountLatch::close`).
        if let Some(cx) = self.current_worker() {
            cx.run_latent_forks(|| !latch.only_open());
        }
        if let Some(signal) = latch.close() {
            self.wait_for(signal);
        }
    }

    /// The pool has no thread: start one before accepting work, so a pool that can never run
    /// anything says so instead of queueing silently.
    #[cold]
    pub(crate) fn start_first_thread(&self) -> Result<(), Error> {
        let inner = self.inner();
        if inner.injector.is_closed() {
            return Err(inner.refusal());
        }
        inner.notify_cold(false);
        let s = inner.protocol.load(Ordering::Acquire);
        if s.state() == State::Shutdown {
            return Err(Error::Shutdown);
        }
        if s.spawned() == 0 {
            return Err(Error::Spawn);
        }
        Ok(())
    }

    /// Stops accepting external work, runs everything already queued, and joins every thread.
    /// In this order: submits from outside the pool's threads fail from here on (every one that
    /// returned `Ok` before is queued); every worker is woken and runs what is queued (tasks
    /// may still submit to their own worker's queue), then exits; the threads are joined;
    /// anything still queued (possible only if no thread could ever start) runs on the calling
    /// thread. No accepted task is dropped. `Drop` does the same.
    ///
    /// Must not be called from one of the pool's own threads (it would wait for itself):
    /// that returns [`Error::InvalidArgument`].
    ///
    /// # Errors
    /// [`Error::Shutdown`] if the pool was already shut down (or is being shut down by
    /// another thread); [`Error::InvalidArgument`] from inside the pool; [`Error::Forked`] in
    /// a child that inherited the pool through `fork()` (nothing to wait for: its threads are
    /// in the parent).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..1000 {
    ///     let ran = ran.clone();
    ///     pool.spawn(move || { ran.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// pool.shutdown().unwrap(); // everything queued ran
    /// assert_eq!(ran.load(Ordering::Relaxed), 1000);
    /// assert_eq!(pool.shutdown(), Err(pool::Error::Shutdown));
    /// # }
    /// ```
    pub fn shutdown(&self) -> Result<(), Error> {
        if self.current_worker().is_some() {
            return Err(Error::InvalidArgument);
        }
        let inner = self.inner();
        if inner.link.is_inherited() {
            return Err(Error::Forked);
        }
        let Some(finishing) = inner.gate.claim() else { return Err(Error::Shutdown) };
        // Outside submits are refused, the workers drain; tasks are no longer polled:
        // pending timers fire now (sleepers are cancelled, delayed tasks queued) and tasks
        // waiting for I/O are woken (cancelled): shutdown never waits for a deadline or for I/O.
        inner.stop();
        inner.wait_for_threads();
        inner.spawner.join_all();
        // Left-overs: tasks no thread could ever run, and external submits that were accepted
        // (their CAS on the injector's tail came before `close`) but were still linking while
        // the workers drained and left (the consumer reports such a queue empty). Wait those
        // out, then run what is left here (loom: `sync_external_submit_racing_shutdown`).
        // Such a task runs on this thread, so its own submits are refused (Error::Shutdown):
        // it was accepted concurrently with shutdown. (Waiting for the link on the workers
        // instead would need a spin on plain loads, which loom shows may never end under the
        // memory model; here `join_all` has synchronised with every worker first.)
        let mut backoff = Backoff::new(50, 50);
        loop {
            if let Some(mut consumer) = inner.injector.try_lock() {
                let task = consumer.pop();
                drop(consumer);
                if let Some(task) = task {
                    inner.outside.polled.bump_shared();
                    // SAFETY: dequeued, so this is its one run.
                    unsafe { Task::run(task) };
                    continue;
                }
            }
            if inner.injector.is_settled_empty() {
                break;
            }
            backoff.snooze(&inner.join_parker);
        }
        // The last access to `inner`: a dropper waiting in `Drop` may free it from here.
        finishing.finish();
        Ok(())
    }



}

impl<S: Spawner> Drop for ThreadPool<S> {
    /// Shuts the pool down (if not done yet), joins its threads and frees it.
    ///
    /// Dropping the last handle from inside one of the pool's own tasks cannot join (the
    /// thread would wait for itself): the pool then stops accepting work, lets its threads drain
    /// and exit, and leaks its own state (a few KiB) instead of freeing memory they still use.
    ///
    /// If a shutdown is in progress on another thread (the C layer's `pool_shutdown` racing
    /// `pool_destroy`), this waits for it to finish before freeing. If a shutdown unwound (a
    /// panicking [`Spawner::join_all`]), its threads may still run: the state is leaked.
    ///
    /// In a child that inherited the pool through `fork()` ([`Error::Forked`]) it returns at
    /// once: it frees the pool's tables and memory, and keeps the spawner and the parkers
    /// (they may hold locks and handles of the parent's threads).
    fn drop(&mut self) {
        if self.inner().link.is_inherited() {
            // SAFETY: inherited through fork, in this child; our handle is given up here.
            unsafe { Self::free_inherited(self.inner) };
            return;
        }
        if self.is_worker_thread() {
            let inner = self.inner();
            if inner.gate.detach() {
                inner.stop();
                inner.spawner.detach_all();
            }
            return;
        }
        let _ = self.shutdown();
        if !self.inner().gate.wait_finished(|| self.inner().spawner.new_parker()) {
            return;
        }
        // Live async tasks hold references on `Inner` too (`scheduler::inner`, `release_pool`): the last one out
        // frees it, so a late waker finds a closed pool instead of freed memory.
        if self.inner().release() {
            // SAFETY: every thread is joined (shutdown is complete, or it was done by an earlier
            // call that returned), and no task references `inner` any more; it came from
            // Box::leak.
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
        }
    }
}

impl<S: Spawner> Inner<S> {
    /// The table's `schedule` (`any_pool.rs`, and the runtime's `Schedule::schedule`): an
    /// async task woken on one of the pool's workers goes to its LIFO slot (`lifo`: woken by
    /// another task) or, re-queued by its own poll, to the back of its ring with the cheap
    /// notification (`notify_join`: a missed wake-up costs parallelism, never progress, since
    /// this worker goes straight back to its queues: `scheduler/README.md`, "Self-requeued
    /// tasks"); from anywhere else, to the injector. Always inlined: the re-queue is the yield
    /// path, inside the harness's poll (a call cost ~20 instructions per yield, callgrind,
    /// `examples/yield_probe`); the submit from outside is out of line.
    ///
    /// # Safety
    /// `pool` is a live `Inner<S>`; the task meets `Schedule::schedule`'s contract.
    #[inline(always)]
    pub(crate) unsafe fn schedule_of(pool: NonNull<()>, task: NonNull<Task>, lifo: bool) -> Result<(), ()> {
        // SAFETY: the caller's contract.
        let inner = unsafe { pool.cast::<Self>().as_ref() };
        let Some(me) = inner.current_context() else {
            // SAFETY: as above.
            return unsafe { Self::submit_of(pool, task) };
        };
        if lifo {
            inner.schedule_woken(me, task);
        } else {
            inner.push_ring(me, task);
            inner.notify_join();
        }
        Ok(())
    }

    /// `schedule_of` from a thread that is not one of the pool's workers. It holds a reference
    /// on the pool of its own across the submit: the caller's reference may be the task's only
    /// (a waker woken by value hands its reference to the queue), and once pushed the task may
    /// run, end and be freed by a worker, giving up the pool's last reference (a task holds
    /// one: `scheduler::inner`) while the push's notify still reads the pool. (Found by `make
    /// verify-tsan-loop`: `tests/runtime.rs` `wake_during_poll`, the pool freed under a
    /// waker's notify.)
    ///
    /// # Safety
    /// As `schedule_of`.
    #[inline(never)]
    unsafe fn submit_of(pool: NonNull<()>, task: NonNull<Task>) -> Result<(), ()> {
        let inner = pool.cast::<Self>();
        // SAFETY: the caller's contract: live until the push (the task holds a reference).
        unsafe { inner.as_ref() }.acquire();
        // SAFETY: the caller's contract; a non-owning handle (never dropped). The task meets the
        // submit contract (`Schedule::schedule`'s).
        let submitted = unsafe { ManuallyDrop::new(ThreadPool::<S> { inner }).submit(task) }.map_err(drop);
        // SAFETY: the reference taken above, given up (the last one frees the pool).
        unsafe { super::inner::release_pool(inner) };
        submitted
    }

    /// The table's `wait`: [`ThreadPool::wait_for`].
    ///
    /// # Safety
    /// `pool` is a live `Inner<S>`; the caller is the signal's one waiter.
    pub(super) unsafe fn wait_of(pool: NonNull<()>, signal: &crate::Signal) {
        // A non-owning handle (never dropped) on the live pool (the caller's contract).
        ManuallyDrop::new(ThreadPool::<S> { inner: pool.cast() }).wait_for(signal);
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Installs the pool's I/O driver (once). From then on the workers poll it at their tick
    /// ends and one idle worker blocks in it (see [`crate::io`]).
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] if a driver is already installed (the new one is dropped);
    /// [`Error::Shutdown`] if the pool was shut down (the driver has been told:
    /// [`Driver::shutdown`]); [`Error::Forked`] in a child that inherited the pool through
    /// `fork()` (the driver is dropped).
    ///
    /// Example: [`Driver`].
    pub fn set_driver(&self, driver: Box<dyn Driver>) -> Result<(), Error> {
        let inner = self.inner();
        if inner.link.is_inherited() {
            return Err(Error::Forked);
        }
        inner.driver.set(driver)?;
        // Idle workers parked before it existed: one takes the role and blocks in it.
        inner.notify_cold(false);
        Ok(())
    }
}
