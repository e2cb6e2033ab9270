//! The worker context: the part of a worker that only its own thread touches.
//!
//! A worker's state is split in two. The **remote** part ([`Worker`]) is what other threads
//! touch: the steal ends of its ring and join deque, its LIFO slot, its parker, its counters and
//! its *demand* word (the hungry and record flags). It lives on the heap, in the pool's list,
//! until the pool is dropped. The **core** ([`WorkerContext`]) is what only the worker's own
//! thread touches: the owner ends of those queues, the injector countdown, the LIFO streak,
//! the adaptive interval, where the tasks it took from the injector end in its ring, the stack
//! of latent join frames, and the nesting bookkeeping of waits. It lives in the worker thread's
//! entry frame (`worker_main`), for exactly as long as the thread runs the pool's loop.
//!
//! The type is the proof of ownership: `WorkerContext` is neither `Send` nor `Sync`, and the
//! only way to get one is to be running on that worker: the worker loop holds it and passes it
//! down, [`ThreadPool::install`](crate::ThreadPool::install) and the conveniences built on it
//! look it up once (in the platform's thread-local slot, [`Spawner::current_worker`]) and pass
//! it down from there, and a [`join`](WorkerContext::join) hands it to both halves (the thief's
//! own context when a half was stolen). So code holding a `&WorkerContext` is on the owning
//! thread, and the owner-only operations of the queues are sound by construction: they are
//! methods of this type, each relying on this one invariant.
//!
//! # The hungry flag (demand-driven promotion)
//! A `join` (`scheduler::frame`) reads one owner-read word per call: its worker's *record* flag,
//! set while the worker has too few latent frames to offer or is *hungry*. A worker that runs
//! out of work makes every other worker hungry (`sleep.rs`, when it goes idle), which sets
//! their record flags too; a new worker starts hungry, so the first join on a pool that may
//! still start threads offers work. The next `join` on a hungry worker lowers the hunger and
//! promotes its oldest latent frame (the join deque, and a wake-up). No timer thread, no
//! shared write per join: the flag's cache line is written by others only when a worker goes
//! idle, and by its owner only when its supply of latent frames runs short or fills up.
//!
//! # Bounded helping
//! A worker that waits (a stolen join half, a latch, a join handle) runs **related** work
//! first, always: its own latent forks while the newest frame is one (`scheduler::frame`), then
//! its own join deque, newest first (the forks of the computation it waits for), and, when
//! it waits for a join half, the join deque of the worker that stole it
//! (leapfrogging). **Unrelated** work (its LIFO slot and ring, the injector, other workers'
//! queues) runs inside a wait only while at most half of the worker's stack is in use
//! ([`Spawner::stack_size`]; the other half is the margin left to the innermost task). On a
//! platform that does not report its stack size the margin cannot be measured, and unrelated
//! work nests inside waits without this bound (a host platform implements `stack_size` to get
//! it).
//!
//! Otherwise the waiter makes sure another worker is told of the queued work (a notification
//! wakes an idle one or starts a new thread, if the pool has room), then sleeps on its parker
//! until its wait completes. So a waiting worker's stack grows with the recursion it waits
//! for, and unrelated tasks never take it past half its size. The price: a task that waits for
//! work it *submitted* (rather than forked), on a pool whose every worker already waits with
//! half its stack in use, waits until a worker is free to run it: with `max_threads` workers
//! all blocked this way it never is. Fork what you wait for (`join`, `submit_fork`,
//! `pool_fork`).

use core::cell::Cell;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

use super::interval::InjectorInterval;
use super::worker::Worker;
use crate::queue::{deque, ring};
use super::handle::ThreadPool;
use super::inner::Inner;
use super::frame::FrameStack;
#[cfg(feature = "std")]
use super::any_pool::{AnyPool, PoolOps};
use super::job::JobHeader;
use crate::platform::Spawner;
use crate::sync::Ordering;
use crate::task::Task;

/// A worker's own thread-only state, and the handle that code running on the worker uses to
/// fork and join (see the module docs). Obtained from [`ThreadPool::install`]; passed to both
/// closures of [`join`](Self::join).
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, ThreadPool, ThreadSpawner, WorkerContext};
///
/// fn fib(cx: &WorkerContext<ThreadSpawner>, n: u64) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     let (a, b) = cx.join(|cx| fib(cx, n - 1), |cx| fib(cx, n - 2));
///     a + b
/// }
/// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
/// assert_eq!(pool.install(|cx| fib(cx, 20)).unwrap(), 6765);
/// # }
/// ```
///
/// A context never leaves its thread: closures handed to the pool cannot capture it.
///
/// ```compile_fail
/// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
/// pool.install(|cx| {
///     // error: `WorkerContext` is not `Sync`, so a `Send` closure cannot borrow it.
///     cx.join(|_| cx.index(), |_| 0)
/// });
/// ```
#[repr(C)]
pub struct WorkerContext<S: Spawner> {
    /// The part that does not depend on the platform type. First: see [`ContextHead`].
    pub(crate) head: ContextHead,
    /// A handle on the pool (never dropped: the context does not own the pool).
    handle: ManuallyDrop<ThreadPool<S>>,
    /// The remote part of this worker.
    worker: NonNull<Worker<S>>,
    /// The owner's half of this worker's ring (the remote part holds the thieves' half).
    pub(crate) ring: ring::Local,
    /// The owner's half of this worker's join deque.
    pub(crate) joins: deque::Owner,
    /// Searches left until the next injector-first search (`search.rs`, step 0).
    pub(crate) tick: Cell<u32>,
    /// LIFO-slot tasks run in a row.
    pub(crate) lifo_streak: Cell<u32>,
    /// Ring index one past the last task of the latest batch from the injector (`search.rs`,
    /// "Order"): the ring's tasks at indices `head..injected_end` came from the injector.
    /// Read only through [`injected_left`](Self::injected_left) and
    /// [`injected_in_overflow`](Self::injected_in_overflow), which reset it once it is behind
    /// `head`.
    injected_end: Cell<u32>,
    /// Set while this worker is parked (in the I/O driver or on a timer deadline): the tasks
    /// a dispatch there wakes are queued without a notification, and one is sent for all of
    /// them when the park is over (`sleep.rs`, `park`).
    pub(crate) in_park: Cell<bool>,
    /// How many searches from one injector-first search to the next (`interval.rs`).
    pub(crate) interval: InjectorInterval,
    /// An address near the top of this thread's stack (the entry frame's).
    stack_top: usize,
    /// Bytes of stack in use below which unrelated work may still start inside a wait: half the
    /// stack. 0 when the platform does not know its stack size.
    stack_half: usize,
    /// Neither `Send` nor `Sync`: only the owning thread may hold a reference.
    _owner: PhantomData<*mut ()>,
}

/// The first part of every [`WorkerContext`], whatever its platform type: the pool pointer, and
/// what the fast path of a fork and a join touches (the frame stack and its record flag). So
/// code that holds a context without knowing its type (a thread-local lookup, the C API's
/// `struct pool_worker *`) reads these through a pointer to the context (repr(C), first field
/// of a repr(C) struct).
#[repr(C)]
pub(crate) struct ContextHead {
    /// The pool's address (an `Inner<S>`, `any_pool.rs`). First: the platform's thread-local
    /// slot holds a pointer to the context, and a lookup reads this field to learn whose it is
    /// before knowing the spawner type (`Inner::current_context`). A blocking pool's thread
    /// stores a pointer to a null word instead (`blocking::Inner::thread_mark`).
    pub(crate) pool: NonNull<()>,
    /// The `join`s and forks running on this thread, with their latent frames and the
    /// worker's demand word (`scheduler::frame`).
    pub(crate) frames: FrameStack,
    /// The pool's table: with `std`, a blocking handle's `join` (`std` only) waits through it
    /// on a worker ([`any_of`](Self::any_of)). Without `std` nothing reads it, and a program
    /// that needs none of the table links none of it (`any_pool.rs`).
    #[cfg(feature = "std")]
    ops: &'static PoolOps,
}

impl ContextHead {
    /// Whether this worker was asked for work by an idle one (module docs).
    #[inline(always)]
    pub(crate) fn is_hungry(&self) -> bool {
        self.frames.demand().is_hungry()
    }

    /// The pool whose worker this thread is, from its current-worker pointer `cx`
    /// ([`Spawner::current_worker`]): `None` for null, and for a blocking pool's thread
    /// (whose pointer points to a null word).
    ///
    /// # Safety
    /// `cx` was read on this thread from the current-worker slot of a platform whose pools
    /// are all this crate's.
    #[cfg(feature = "std")]
    pub(crate) unsafe fn any_of(cx: *const ()) -> Option<AnyPool> {
        // A non-null `cx` was stored by a pool's `worker_main` (a `WorkerContext<_>` in its
        // frame, `ContextHead` first) or by a blocking pool's thread (its mark, a null word).
        // SAFETY: either lives while this thread runs its pool's loop, which encloses this call.
        unsafe {
            let head = NonNull::new(cx.cast_mut())?.cast::<ContextHead>();
            let pool = *head.cast::<Option<NonNull<()>>>().as_ptr();
            Some(AnyPool { pool: pool?, ops: head.as_ref().ops })
        }
    }

    /// The head of the context behind `cx`, a pointer to a `WorkerContext` of any platform
    /// type.
    ///
    /// # Safety
    /// `cx` points to a live `WorkerContext`, on its own thread.
    #[inline(always)]
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn of<'a>(cx: NonNull<()>) -> &'a ContextHead {
        // SAFETY: the head is the first field of the repr(C) context (the caller's contract).
        unsafe { cx.cast::<ContextHead>().as_ref() }
    }
}

impl<S: Spawner> core::fmt::Debug for WorkerContext<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WorkerContext").field("index", &self.index()).finish_non_exhaustive()
    }
}

impl<S: Spawner> WorkerContext<S> {
    /// The context of `worker`, for its own thread, whose stack begins near `stack_top`.
    pub(crate) fn new(inner: &Inner<S>, worker: NonNull<Worker<S>>, stack_top: usize) -> Self {
        let stack_size = inner.spawner.stack_size(inner.stack_size);
        Self {
            head: ContextHead {
                pool: NonNull::from(inner).cast(),
                #[cfg(feature = "std")]
                ops: &Inner::<S>::OPS,
                // SAFETY: the worker is live and outlives its context (see `worker()`), and so
                // does its demand word, a field of it.
                frames: unsafe { FrameStack::new(NonNull::from(&worker.as_ref().demand)) },
            },
            handle: ManuallyDrop::new(ThreadPool { inner: NonNull::from(inner) }),
            // A context is made once per worker, on its own thread, and never leaves it (neither
            // Send nor Sync); the worker and its queues outlive it (see `worker()`).
            // SAFETY: so these are the worker's only owner halves, all on one thread.
            ring: unsafe { worker.as_ref().ring.local() },
            // SAFETY: as above.
            joins: unsafe { worker.as_ref().joins.owner() },
            worker,
            tick: Cell::new(0),
            lifo_streak: Cell::new(0),
            injected_end: Cell::new(0),
            in_park: Cell::new(false),
            interval: InjectorInterval::new(),
            stack_top,
            stack_half: stack_size / 2,
            _owner: PhantomData,
        }
    }

    /// The pool this worker belongs to.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let threads = pool.install(|cx| cx.pool().max_threads()).unwrap();
    /// assert_eq!(threads, 2);
    /// # }
    /// ```
    #[inline]
    pub fn pool(&self) -> &ThreadPool<S> {
        &self.handle
    }

    /// This worker's index, `0..max_threads` (the index [`ThreadPool::worker_stats`] takes).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// assert!(pool.install(|cx| cx.index()).unwrap() < 2);
    /// # }
    /// ```
    #[inline]
    pub fn index(&self) -> usize {
        self.worker().index
    }

    #[inline(always)]
    pub(crate) fn inner(&self) -> &Inner<S> {
        self.handle.inner()
    }

    /// The remote part of this worker.
    #[inline(always)]
    pub(crate) fn worker(&self) -> &Worker<S> {
        // SAFETY: a worker lives until its pool is dropped, which cannot happen while its
        // thread runs the pool's loop (where every context lives).
        unsafe { self.worker.as_ref() }
    }

    /// A batch from the injector was just pushed into our empty ring: it ends at the ring's
    /// tail (`search.rs`, "Order").
    #[inline]
    pub(crate) fn mark_injected(&self) {
        self.injected_end.set(self.ring.indices().1);
    }

    /// Whether tasks of the latest batch from the injector are still at the front of our
    /// ring. Thieves claiming from `head` shrink that run as the owner's pops do.
    #[inline]
    pub(crate) fn injected_left(&self) -> bool {
        let (head, tail) = self.ring.indices();
        let left = self.injected_end.get().wrapping_sub(head);
        if left != 0 && left <= tail.wrapping_sub(head) {
            return true;
        }
        // Used up (or stolen): keep the mark at `head`, so that it never wraps around into
        // the ring again however many tasks pass before the next look.
        self.injected_end.set(head);
        false
    }

    /// How many of the first tasks of the batch that our full ring just returned
    /// (`ring.push`'s `Err`) came from the injector. That batch holds the ring's tasks from
    /// index `tail - CAPACITY` (`Ring::push`), so the count is where the mark falls in it;
    /// the mark is then reset to the end of the claimed run, which is gone from the ring.
    #[inline]
    pub(crate) fn injected_in_overflow(&self) -> usize {
        use crate::queue::ring::CAPACITY;
        let claimed = self.ring.indices().1.wrapping_sub(CAPACITY);
        let injected = self.injected_end.get().wrapping_sub(claimed);
        self.injected_end.set(claimed.wrapping_add(CAPACITY / 2));
        if injected <= CAPACITY / 2 { injected as usize } else { 0 }
    }

    /// Ends the injector interval's window (`interval.rs`); returns the next interval.
    #[inline]
    pub(crate) fn end_interval_window(&self) -> u32 {
        self.interval.end_window(self.inner().spawner.now_ns(), self.worker().stats.polled.get())
    }

    /// Going idle: the injector interval's window in progress measures no poll time now.
    #[inline]
    pub(crate) fn interrupt_interval(&self) {
        self.interval.interrupt();
    }

    /// Whether this worker was asked for work by an idle one ([`ContextHead::is_hungry`]).
    #[inline(always)]
    pub(crate) fn is_hungry(&self) -> bool {
        self.head.is_hungry()
    }

    /// Offers the oldest latent frame on the join deque (the biggest piece of work this
    /// worker holds) and wakes a thread for it; keeps the flag up while the pool still wants
    /// work, so the next join offers the next frame.
    #[cold]
    #[inline(never)]
    pub(crate) fn promote(&self) {
        self.offer_oldest(false);
        self.offered_work();
    }

    /// Moves the oldest latent frame to the join deque; false if there is none, or the deque
    /// is full (the frame stays latent), unless `or_ring`: then a full deque sends it to this
    /// worker's ring instead.
    fn offer_oldest(&self, or_ring: bool) -> bool {
        let Some((task, is_task)) = self.head.frames.oldest_latent() else { return false };
        if !is_task {
            // SAFETY: a latent job frame's task is the header of a live stack job or `FnJob`,
            // not offered yet (frames are offered once, oldest first), owned by this thread.
            unsafe { JobHeader::offer(task, self.head.pool) };
        }
        // Queued once: a job frame's join takes it back or waits for it; a task frame's task
        // leaves the latent frames here.
        let pushed = self.joins.push(task);
        if pushed || or_ring {
            if !pushed {
                self.inner().push_ring_cold(self, task);
            }
            self.head.frames.mark_oldest_promoted();
            return true;
        }
        false
    }

    /// Forks `task` (`ThreadPool::submit_fork` on this worker): a latent task frame, which a
    /// wait of this worker runs inline while it is the newest (`scheduler::frame`); on the join
    /// deque if the frame stack is full. False if both are full (the caller submits it).
    ///
    /// # Safety
    /// `task` meets `ThreadPool::submit`'s contract.
    #[inline]
    pub(crate) unsafe fn fork_task(&self, task: NonNull<Task>) -> bool {
        let depth = self.head.frames.depth();
        if depth < super::frame::FRAMES {
            self.head.frames.push_task(depth, task);
            if self.is_hungry() {
                self.promote();
            }
            return true;
        }
        // Whoever forked it waits for it.
        if self.joins.push(task) {
            if self.is_hungry() {
                self.offered_work();
            }
            return true;
        }
        false
    }

    /// The code that pushed the frames at `base` and above is done with them (a task
    /// returned, or a join pops a frame below them): they are task frames that no wait of
    /// theirs ran; their tasks go to the join deque, or to this worker's ring if that is
    /// full, and a thread is told of them.
    #[cold]
    #[inline(never)]
    pub(crate) fn truncate_frames(&self, base: usize) {
        let mut queued = false;
        self.head.frames.truncate(base, |task| {
            // A task frame's task leaves the frames here: queued once.
            if !self.joins.push(task) {
                self.inner().push_ring_cold(self, task);
            }
            queued = true;
        });
        if queued {
            self.inner().notify_cold(false);
        }
    }

    /// Work was pushed on our join deque (a fork) while we were hungry: lower the hunger and
    /// wake a thread for the work, keeping the hunger up while the pool still wants work.
    #[cold]
    #[inline(never)]
    pub(crate) fn offered_work(&self) {
        let inner = self.inner();
        let demand = self.head.frames.demand();
        demand.lower_hunger();
        inner.notify_join();
        if inner.wants_join_work() {
            demand.keep_hungry();
        }
    }

    /// Waits on this worker until `until`'s signal is set (true), or its deadline passed
    /// (false): the one waiting loop (`Inner::run_until`), then the few instructions a setter
    /// may still spend before it stores SET (`latch.rs`: the waiter returns only after SET).
    ///
    /// First it runs its own newest forks inline while they are latent task frames (the forks
    /// of the code that waits: `pool_fork` + `pool_latch_wait` never touches the join deque
    /// unless a thief wanted a fork). If the signal is still not set and a latent task frame
    /// is left (under a job frame, which only its join may pop), every latent frame goes to
    /// the join deque before the loop, where this wait and other workers find them.
    pub(crate) fn wait_until(&self, until: super::job::Until<'_>) -> bool {
        self.run_latent_forks(|| !until.signal.is_set());
        if !until.signal.is_set() {
            if self.head.frames.latent() > 0 && self.head.frames.has_latent_task() {
                self.offer_all_latent();
            }
            self.inner().run_until(self, Some(until));
            // Not being set: the deadline passed. The worker's waker goes, unless the setter
            // has it already.
            // SAFETY: this wait is the signal's one waiter.
            if !until.signal.is_setting() && unsafe { until.signal.withdraw() } {
                return false;
            }
            until.signal.spin_until_set();
        }
        true
    }

    /// Runs this worker's newest forks inline, newest first, while `pending` holds and the
    /// newest frame is a latent task frame (the forks of the code that waits).
    #[inline]
    pub(crate) fn run_latent_forks(&self, pending: impl Fn() -> bool) {
        while pending() {
            let Some(task) = self.head.frames.pop_latent_task() else { break };
            // A latent task frame was queued nowhere: popping it makes this its one run.
            self.inner().run_task(self, task);
        }
    }

    /// Offers every latent frame (a wait is about to search and maybe sleep); a frame that
    /// finds the join deque full goes to the ring.
    #[cold]
    #[inline(never)]
    fn offer_all_latent(&self) {
        while self.offer_oldest(true) {}
        self.inner().notify_cold(false);
    }

    /// Whether a wait on this worker may run unrelated work now (module docs).
    #[inline]
    pub(crate) fn may_run_unrelated(&self) -> bool {
        if self.stack_half == 0 {
            return true;
        }
        let here = 0u8;
        let used = self.stack_top.saturating_sub(core::ptr::from_ref(&here).addr());
        used <= self.stack_half
    }
}

impl<S: Spawner> Inner<S> {
    /// This thread's worker context, if this thread is one of this pool's workers.
    #[inline]
    pub(crate) fn current_context(&self) -> Option<&WorkerContext<S>> {
        let cx = self.spawner.current_worker();
        // A non-null current worker was stored on this thread by some pool's `worker_main` (a
        // `WorkerContext<_>` in its frame, live while the thread runs the pool's loop, which
        // encloses everything this thread runs meanwhile) or by a blocking pool's thread (a
        // pointer to a null word, its pool's mark).
        // SAFETY: both point to a pointer-sized first word (`ContextHead::pool`, or the mark).
        if cx.is_null() || unsafe { *cx.cast::<*const ()>() } != ptr::from_ref(self).cast() {
            return None;
        }
        // SAFETY: stored by this pool's `worker_main`, so the type is `WorkerContext<S>`; it is
        // this thread's (the slot is thread-local) and outlives this call (see above).
        Some(unsafe { &*cx.cast::<WorkerContext<S>>() })
    }
}

impl JobHeader {
    /// The runner of a queued job starts: the worker context of its pool on this thread, if
    /// this thread is one of that pool's workers, which is recorded as the job's thief.
    ///
    /// # Safety
    /// The job was offered, with the live pool (`Inner<S>`) whose worker queued it (that
    /// worker waits for the job before its pool can go away).
    #[inline]
    pub(crate) unsafe fn begin_run<'a, S: Spawner>(&self) -> Option<&'a WorkerContext<S>> {
        // SAFETY: the caller's contract.
        let offered = unsafe { self.offered() };
        // SAFETY: as above.
        let cx = unsafe { offered.pool.cast::<Inner<S>>().as_ref() }.current_context();
        if let Some(cx) = cx {
            offered.thief.store(cx.index() + 1, Ordering::Relaxed);
        }
        cx
    }
}
