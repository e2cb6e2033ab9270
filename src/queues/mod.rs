//! [`Queue`]: an ordered, width-limited queue of tasks on a [`ThreadPool`]'s threads
//! (libdispatch's serial and concurrent queues, TBB's arena concurrency, the small C pools'
//! FIFO), many per pool, with no lock shared between queues (design: ARCHITECTURE.md,
//! "Queues (on the scheduler, not in it)").
//!
//! A queue keeps its waiting tasks in an intrusive FIFO list of its own ([`list`]) and runs
//! them through at most `width` runners (`inner::Runner`): a runner is a pool task embedded in the
//! queue's allocation that, when the pool starts it, takes the queue's oldest task, runs it,
//! and goes on with the next, up to `inner::BATCH` tasks, then submits itself again (fairness with
//! other queues and plain submits), or ends when nothing waits. A task is bound to a pool
//! thread only when it starts, so the pool's batching and stealing cannot reorder it.
//!
//! # Invariants
//! * The list, the counts ([`admission::Admission`]), the idle runners and the waiters change
//!   together, under the queue's own lock (`sync::TryLock`, waited for with `sync::Backoff`);
//!   every count change goes through an `Admission` transition. No lock is held while a task,
//!   a cancel callback or a pool submit runs.
//! * FIFO start: tasks are popped from the list's head only, by one runner at a time under
//!   the lock, so a task starts after every task submitted to the queue before it.
//! * Width: a task starts only while `runners <= width` (`Admission::take`).
//! * A runner's `Task` is owned by the pool from its submit until its callback starts, then by
//!   that callback until it submits it again or puts it back among the idle runners (under
//!   the lock; the last access to the queue's memory before the unlock, then only waiters'
//!   signals on their own stacks are touched).
//! * The queue's memory is freed only by `Drop`, after the admission reads idle (nothing
//!   waiting, no runner out): no runner can reach it afterwards.
//! * Zero allocation per task; two per queue (the queue and its runner slots, one per thread
//!   the pool may start, 32 bytes each on 64-bit targets, so `set_width` never allocates).
//! * `cancel` compares addresses with the tasks in the list and never reads the task it is
//!   given (it may be freed): "started or finished" and "never submitted here" are one answer,
//!   [`Error::Busy`], because telling them apart would need a reference to a task the queue no
//!   longer holds.
//! * A task of the queue is recognised (for `wait`, `submit_timeout`, drop) by its runner slot
//!   naming the calling worker; a task run on a non-worker thread (a pool's shutdown with no
//!   thread) is not.
//! * Target queues ([`Queue::with_target`]): a queue's runners go to its target's admission as
//!   tasks of the target (`Inner::submit_runner`), so they start in the target's FIFO order
//!   and each takes one of its width slots; a target has no bound (a runner is never refused
//!   for room) and counts the queues on it (`State::children`), and is not dropped while any
//!   exists, so a queue's `target` pointer stays valid. Locks nest only child before target
//!   (a runner yielding links itself into the target's list under its queue's lock; no
//!   target lock is held while a child's is taken), so no order can deadlock. A drop takes
//!   back, after closing, the runners still waiting in the target's list
//!   (`Inner::recall_runners`). A task of the target is treated as a task of the queue (its
//!   runner is one).

mod admission;
mod inner;
mod list;
mod submit;
#[cfg(all(test, feature = "std", not(loom)))]
mod tests;
#[cfg(all(test, loom))]
mod loom;

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use self::inner::{wake, Inner, Runner, State};
use crate::error::Error;
use crate::fallible::{try_box, try_boxed_slice};
use crate::platform::Spawner;
use crate::raw_handle::RawHandle;
use crate::scheduler::ThreadPool;
use crate::sync::TryLock;
use crate::task::{Callback, Task};

/// A queue's settings: [`width`](Self::new), [`bound`](Self::with_bound) and
/// [`cancel`](Self::with_cancel) callback.
#[derive(Clone, Copy, Debug)]
pub struct QueueConfig {
    width: usize,
    bound: usize,
    cancel: Option<Callback>,
}

impl QueueConfig {
    /// At most `width` tasks run at once (1: a serial queue; 0: suspended until widened);
    /// unbounded, no cancel callback.
    pub const fn new(width: usize) -> Self {
        Self { width, bound: 0, cancel: None }
    }

    /// The `bound` of a handoff queue, which holds no task waiting for a slot (zstd's pool
    /// with `queueSize` 0, a synchronous hand-off): a task is accepted only while fewer than
    /// `width` of the queue's tasks are running or accepted and not yet started, so it starts
    /// as soon as a pool thread takes its runner (at once while the pool has a thread free
    /// for it). A full one's places free as running tasks end, and as it widens.
    pub const HANDOFF: usize = admission::HANDOFF;

    /// At most `bound` tasks wait (not counting running ones); 0 = unbounded;
    /// [`HANDOFF`](Self::HANDOFF): none waits for a width slot.
    pub const fn with_bound(mut self, bound: usize) -> Self {
        self.bound = bound;
        self
    }

    /// Tasks still waiting when the queue is dropped are handed to `cancel` (called with the
    /// task, on the dropping thread) instead of being run.
    pub const fn with_cancel(mut self, cancel: Callback) -> Self {
        self.cancel = Some(cancel);
        self
    }
}

/// A queue's figures ([`Queue::stats`]), read together under the queue's lock: exact at the
/// moment of the call and consistent with each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// At most this many tasks run at once (0: suspended).
    pub width: usize,
    /// At most this many tasks wait (0: unbounded; [`QueueConfig::HANDOFF`]: a handoff queue).
    pub bound: usize,
    /// Tasks submitted and neither started nor cancelled.
    pub waiting: usize,
    /// Tasks started and not yet returned.
    pub running: usize,
    /// Tasks started since the queue was made.
    pub started: usize,
    /// Tasks removed by [`Queue::cancel`] (not those handed back when the queue is dropped).
    pub cancelled: usize,
    /// Submits that returned an error with the task not queued: the queue full
    /// ([`Error::Full`], a timed submit counted once, when it gives up) or the pool refusing
    /// the task's runner.
    pub refused: usize,
}

/// A FIFO queue of intrusive [`Task`]s that runs at most `width` of them at once on a pool's
/// threads (design: ARCHITECTURE.md, "Queues"). Many queues may share one pool.
///
/// * **FIFO start**: a task never starts before every task submitted to the queue before it
///   has started (width 1: strictly in order, one at a time).
/// * **Width** ([`set_width`](Self::set_width)): narrowing lets running tasks finish and starts
///   none until fewer run than the new width; widening starts waiting tasks at once; 0
///   suspends the queue.
/// * **Bound** ([`QueueConfig::with_bound`]): [`try_submit`](Self::try_submit) refuses with
///   [`Error::Full`] while `bound` tasks wait; a handoff queue ([`QueueConfig::HANDOFF`])
///   while every width slot holds a task.
/// * **Cancel** before start ([`cancel`](Self::cancel)), **wait** for every task submitted so
///   far ([`wait`](Self::wait)).
/// * **Drop**: tasks still waiting are handed to the cancel callback, or run on the dropping
///   thread (in order) if there is none, after the running ones have finished (in a child
///   that inherited the pool through `fork()`: only the allocation is freed). Meanwhile the
///   queue is closed: a task the drop runs or hands back that calls it has its submits
///   refused ([`Error::Shutdown`]) and finds nothing to cancel or wait for. Dropping a
///   queue from one of its own tasks panics (it would wait for itself): from a task callback
///   that ends the process.
///
/// A task's callback must return normally (see [`Task`]): a panic unwinding out of an
/// intrusive task's `extern "C"` callback ends the process before it reaches the queue. A
/// closure task ([`spawn`](Self::spawn)) catches its panic, and its width slot frees as if it
/// had returned.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use core::ptr::NonNull;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use pool::{container_of, Config, Queue, QueueConfig, Task, ThreadPool};
///
/// #[repr(C)]
/// struct Job { n: usize, task: Task }
/// static NEXT: AtomicUsize = AtomicUsize::new(0);
/// unsafe extern "C" fn run(task: *mut Task) {
///     // SAFETY: every task with this callback is the `task` of a `Job`, derived from the whole job.
///     let job = unsafe { &*container_of!(task, Job, task) };
///     // A serial queue: strictly in submission order, one at a time.
///     assert_eq!(NEXT.fetch_add(1, Ordering::Relaxed), job.n);
/// }
///
/// let pool = ThreadPool::new(Config::default().with_max_threads(4)).unwrap();
/// let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
/// let mut jobs: Vec<Job> = (0..100).map(|n| Job { n, task: Task::new(run) }).collect();
/// for job in jobs.iter_mut() {
///     let job: *mut Job = job;
///     // SAFETY: each job stays put until the queue's `wait` below returns.
///     unsafe { queue.try_submit(NonNull::new_unchecked(&raw mut (*job).task)).unwrap() };
/// }
/// queue.wait().unwrap();
/// assert_eq!(NEXT.load(Ordering::Relaxed), 100);
/// # }
/// ```
pub struct Queue<'a, S: Spawner> {
    inner: NonNull<Inner<S>>,
    _pool: PhantomData<&'a ThreadPool<S>>,
}

// SAFETY: the queue is a pointer to its allocation, whose shared state is behind its lock and
// whose pool is `Sync`; every method takes `&self`.
unsafe impl<S: Spawner> Send for Queue<'_, S> {}
// SAFETY: as above.
unsafe impl<S: Spawner> Sync for Queue<'_, S> {}

/// For the C layer (the first word of a `struct pool_queue`); only a queue kept alive by
/// contract (`new_detached`, `with_target_detached`) has no lifetime to lose.
impl<S: Spawner> RawHandle for Queue<'static, S> {
    fn as_raw(&self) -> *mut () {
        self.inner.as_ptr().cast()
    }

    unsafe fn from_raw(ptr: *mut ()) -> Self {
        // SAFETY: the caller's contract: the pointer of a live queue's handle.
        Queue { inner: unsafe { NonNull::new_unchecked(ptr.cast()) }, _pool: PhantomData }
    }
}

impl<S: Spawner> core::fmt::Debug for Queue<'_, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Queue").field("stats", &self.stats()).finish()
    }
}

impl<'a, S: Spawner> Queue<'a, S> {
    /// A queue on `pool`'s threads.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a width above `pool.thread_limit()`;
    /// [`Error::OutOfMemory`] if an allocation failed (nothing was kept).
    pub fn new(pool: &'a ThreadPool<S>, config: QueueConfig) -> Result<Self, Error> {
        Self::build(pool, None, config)
    }

    /// A queue whose runners are tasks of `target` (libdispatch's target queues): at most
    /// `width` of its tasks run at once, each also taking one of `target`'s width slots, and
    /// its runners start in `target`'s FIFO order among `target`'s own tasks and the runners
    /// of other queues that target it. So two queues of one pool (say, slow I/O capped at
    /// half the threads beside everything else) start their tasks in submission order across
    /// each other: a task that waits behind `target`'s busy slots stays waiting, and can
    /// still be cancelled, until a slot frees, which two queues on the pool itself do not
    /// promise (the pool may start a later queue's runner first).
    ///
    /// `target` counts these runners as its tasks (its `stats`, and its `wait`, which also
    /// waits for those runners); a drop of this queue takes back its runners still waiting on
    /// `target` (which a suspended `target` would not start) and waits only for the ones
    /// running, then hands back or runs its waiting tasks as usual. `target` cannot be dropped
    /// before this queue (the borrow; a C destroy is refused with `POOL_ERR_BUSY`). A wait or
    /// drop of this queue from a task of `target` is refused like one from this queue's own
    /// tasks, and so is a blocking submit from there that finds this queue full (it could wait
    /// for the slot it holds); with room it is accepted.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, Queue, QueueConfig, ThreadPool};
    /// let pool = ThreadPool::new(Config::default().with_max_threads(4)).unwrap();
    /// let all = Queue::new(&pool, QueueConfig::new(4)).unwrap();
    /// let slow = Queue::with_target(&all, QueueConfig::new(2)).unwrap();
    /// slow.spawn(|| { /* at most 2 of these at once, in `all`'s order */ }).unwrap();
    /// all.spawn(|| {}).unwrap();
    /// slow.wait().unwrap();
    /// all.wait().unwrap();
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a width above the pool's thread limit, or a `target`
    /// with a bound (it would refuse runners); [`Error::Shutdown`] while `target` is being
    /// dropped; [`Error::Forked`] in a child that inherited the pool through `fork()`;
    /// [`Error::OutOfMemory`] (nothing was kept).
    pub fn with_target(target: &'a Queue<'_, S>, config: QueueConfig) -> Result<Self, Error> {
        let t = target.inner();
        if t.inherited() {
            return Err(Error::Forked);
        }
        {
            let mut st = t.lock();
            if st.adm.bound != 0 {
                return Err(Error::InvalidArgument);
            }
            if st.closed {
                return Err(Error::Shutdown);
            }
            st.children += 1;
        }
        Self::build(t.pool(), Some(target.inner), config).inspect_err(|_| t.lock().children -= 1)
    }

    fn build(pool: &ThreadPool<S>, target: Option<NonNull<Inner<S>>>, config: QueueConfig) -> Result<Self, Error> {
        let slots = pool.thread_limit();
        if config.width > slots {
            return Err(Error::InvalidArgument);
        }
        let state = TryLock::new(State::new(config.width, config.bound));
        let pool = core::mem::ManuallyDrop::new(ThreadPool { inner: pool.inner });
        let inner = try_box(Inner { pool, state, cancel: config.cancel, runners: Box::new([]), target })?;
        let inner = NonNull::from(Box::leak(inner));
        // SAFETY: `inner` was just leaked and is ours alone; the runners point back to it.
        unsafe {
            let runners = match try_boxed_slice(slots, |_| Runner::new(inner.as_ptr())) {
                Ok(r) => r,
                Err(e) => {
                    drop(Box::from_raw(inner.as_ptr()));
                    return Err(e);
                }
            };
            (*inner.as_ptr()).runners = runners;
            let inner_ref = inner.as_ref();
            let mut st = inner_ref.lock();
            for r in inner_ref.runners.iter() {
                st.idle.push(r.task());
            }
        }
        Ok(Self { inner, _pool: PhantomData })
    }

    /// A queue whose pool the caller keeps alive by contract, not by a borrow (the C API).
    ///
    /// # Safety
    /// `pool`'s state outlives the queue (the queue is dropped first).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn new_detached(pool: &ThreadPool<S>, config: QueueConfig) -> Result<Queue<'static, S>, Error> {
        Queue::new(pool, config).map(Queue::detach)
    }

    /// A queue on `target` kept alive by contract (the C API).
    ///
    /// # Safety
    /// `target` outlives the queue (its drop is refused while the queue exists, see
    /// [`has_children`](Self::has_children)).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn with_target_detached(target: &Queue<'_, S>, config: QueueConfig) -> Result<Queue<'static, S>, Error> {
        Queue::with_target(target, config).map(Queue::detach)
    }

    fn detach(self) -> Queue<'static, S> {
        let inner = self.inner;
        core::mem::forget(self);
        Queue { inner, _pool: PhantomData }
    }

    /// Whether queues made with [`with_target`](Self::with_target) on this one still exist (a
    /// C destroy of this one is refused then). False in a child that inherited the pool
    /// through `fork()` (the lock may have been held by a thread of the parent).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn has_children(&self) -> bool {
        !self.inner().inherited() && self.inner().lock().children != 0
    }

    /// Whether the queue is being dropped: a task its drop hands back or runs calls it (the
    /// C API refuses a destroy from there).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn closing(&self) -> bool {
        !self.inner().inherited() && self.inner().lock().closed
    }

    /// Whether the calling thread is inside one of this queue's tasks (on a pool worker): a
    /// destroy from there is refused (the C API) or panics (`Drop`).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn in_own_task(&self) -> bool {
        self.inner().on_own_task()
    }

    fn inner(&self) -> &Inner<S> {
        // SAFETY: freed only by `Drop` (module invariants).
        unsafe { self.inner.as_ref() }
    }

    /// Submits a closure (one allocation, as [`ThreadPool::spawn`]). A panic in `f` is caught
    /// and counted ([`panic_count`](crate::panic_count)); its width slot frees as if it had
    /// returned. Not for a queue with a cancel callback (which would be handed the closure's
    /// internal task): that returns [`Error::InvalidArgument`].
    ///
    /// # Errors
    /// As [`try_submit`](Self::try_submit) (the closure is dropped unrun).
    pub fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), Error> {
        if self.inner().cancel.is_some() {
            return Err(Error::InvalidArgument);
        }
        let job = crate::heap_task::HeapTask::boxed(move || crate::panic::run_catching(f));
        // SAFETY: the box stays alive until its callback runs (and frees it), or until the
        // queue's drop runs it (no cancel callback).
        let submitted = unsafe { self.try_submit(job.task()) };
        if submitted.is_err() {
            // SAFETY: refused, so never queued: still ours.
            unsafe { job.drop_unrun() };
        }
        submitted
    }

    /// Cancels `task` if it is waiting in this queue: it is unlinked, will never run, frees
    /// its place in the bound, and the queue keeps no reference to it (the caller may free it
    /// at once).
    ///
    /// # Errors
    /// [`Error::Busy`] when `task` is not waiting in this queue: it has started (it runs or ran
    /// exactly once), or it was cancelled already, or it was never submitted here. The queue
    /// reads only the tasks in its own list, never `task` itself (which may have been freed),
    /// so it cannot tell these apart: one error for all of them. [`Error::Forked`] in a child
    /// that inherited the pool through `fork()` (the queue's lock may have been held by a
    /// thread of the parent).
    pub fn cancel(&self, task: NonNull<Task>) -> Result<(), Error> {
        if self.inner().inherited() {
            return Err(Error::Forked);
        }
        if self.inner().unlink(task, true) { Ok(()) } else { Err(Error::Busy) }
    }

    /// Sets the width: at most `width` tasks run at once from now on (0 suspends the queue).
    /// Widening starts waiting tasks at once; narrowing stops none: running tasks finish, and
    /// none starts until fewer run than `width`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] above the pool's thread limit (nothing changed); as
    /// [`try_submit`](Self::try_submit) when the pool refuses the new runners (the width is
    /// set, the tasks stay waiting); [`Error::Forked`] in a child that inherited the pool.
    pub fn set_width(&self, width: usize) -> Result<(), Error> {
        let inner = self.inner();
        if width > inner.runners.len() {
            return Err(Error::InvalidArgument);
        }
        if inner.inherited() {
            return Err(Error::Forked);
        }
        let (mut batch, places) = {
            let mut st = inner.lock();
            let n = st.adm.set_width(width);
            // Below 2, a task of this queue waiting for a place in it would wait for itself;
            // a widening of a handoff queue frees places.
            let places = if width < 2 || !st.adm.is_full() { st.take_places() } else { ptr::null() };
            (st.idle.split_front(n), places)
        };
        // SAFETY: taken from the chain under the lock, each set once.
        unsafe { wake(places) };
        // Each runner on its own: a target queue takes them one at a time.
        let (mut back, mut result) = (crate::task::Batch::new(), Ok(()));
        while let Some(runner) = batch.pop() {
            // SAFETY: idle runners' tasks are ours to submit; each stays valid while counted.
            if let Err(e) = unsafe { inner.submit_runner(runner) } {
                // SAFETY: refused, so still ours.
                unsafe { back.push(runner) };
                result = Err(e);
            }
        }
        if back.is_empty() {
            return result;
        }
        let waiters = {
            let mut st = inner.lock();
            let mut idle = false;
            while let Some(runner) = back.pop() {
                // SAFETY: the runner came back unsubmitted.
                idle = unsafe { st.take_back(runner) };
            }
            if idle { st.take_waiters() } else { ptr::null() }
        };
        // SAFETY: taken from the chain under the lock, each set once.
        unsafe { wake(waiters) };
        result
    }

    /// The queue's figures, read together under its lock: each exact at the moment of the
    /// call and consistent with the others. All 0 in a child that inherited the pool through
    /// `fork()` (the lock may have been held by a thread of the parent).
    pub fn stats(&self) -> QueueStats {
        if self.inner().inherited() {
            return QueueStats::default();
        }
        let st = self.inner().lock();
        let a = st.adm;
        QueueStats { width: a.width, bound: a.bound, waiting: a.waiting, running: a.running, started: st.started, cancelled: st.cancelled, refused: st.refused }
    }

    /// The current width (0 in a child that inherited the pool through `fork()`).
    pub fn width(&self) -> usize {
        self.stats().width
    }

    /// Waits until every task submitted so far has finished or been cancelled (and tasks
    /// submitted meanwhile too: it returns when the queue is idle). On one of the pool's
    /// workers it waits through the pool's waiting loop (runs other work); elsewhere it parks.
    /// A suspended queue (width 0) with waiting tasks waits until widened.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] from a task of this queue (it would wait for itself),
    /// detected on the pool's workers: a task of this queue run by the pool's shutdown on the
    /// calling thread (a pool that could never start a thread) is not detected.
    /// [`Error::Forked`] in a child that inherited the pool through `fork()`.
    pub fn wait(&self) -> Result<(), Error> {
        if self.inner().on_own_task() {
            return Err(Error::InvalidArgument);
        }
        if self.inner().inherited() {
            return Err(Error::Forked);
        }
        self.inner().wait_idle();
        Ok(())
    }
}

impl<S: Spawner> Drop for Queue<'_, S> {
    fn drop(&mut self) {
        let inner = self.inner();
        if inner.inherited() {
            // Inherited through fork(): its runners and running tasks are in the parent, the
            // waiting ones never run here (the pool's rule); free the allocation only.
            // SAFETY: no thread of this process can reach it (the pool runs nothing here).
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
            return;
        }
        assert!(!inner.on_own_task(), "pool: a queue dropped from one of its own tasks (it would wait for itself)");
        let (mut list, waiters) = {
            let mut st = inner.lock();
            st.closed = true;
            let list = st.waiting.take();
            let n = st.adm.waiting;
            (list, if st.adm.remove(n) { st.take_waiters() } else { ptr::null() })
        };
        // SAFETY: taken from the chain under the lock, each set once.
        unsafe { wake(waiters) };
        inner.recall_runners();
        inner.wait_idle();
        // The allocation stays until the tasks are handed back: one that calls this queue
        // finds it closed (submits refused, nothing to cancel or wait for).
        while let Some(task) = list.pop() {
            match inner.cancel {
                // SAFETY: the task was waiting and is handed back, once (QueueConfig::with_cancel).
                Some(cancel) => unsafe { crate::task::call(cancel, task.as_ptr()) },
                // SAFETY: the task was waiting; it runs once, here.
                None => unsafe { Task::run(task) },
            }
        }
        if let Some(target) = inner.target() {
            target.lock().children -= 1;
        }
        // SAFETY: idle and closed: no runner is out, none can start, and nothing reaches the
        // allocation (module invariants).
        drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
    }
}
