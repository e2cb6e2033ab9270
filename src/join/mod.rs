//! Fork-join: [`WorkerContext::join`], [`ThreadPool::install`], [`ThreadPool::join`],
//! [`ThreadPool::scope`] and the stack jobs behind them. Design texts 001 (the fork-join pool: a
//! Chase-Lev deque per worker, owner LIFO, thieves take the oldest) and 003 (help-until-complete
//! on a worker, block-on elsewhere).
//!
//! # `cx.join(a, b)` on a worker (the context: `scheduler/context.rs`)
//! 0. If the worker's record flag is clear (it has enough latent frames to offer and nobody
//!    asked it for work: [`frame`], "The record flag"), `a` and `b` run inline, in order, and
//!    nothing is recorded: one load is the whole cost. Otherwise:
//! 1. `b` becomes a latent [`StackJob`] in the caller's frame: its task header and its
//!    closure, nothing else written; its address goes in the next slot of the worker's private
//!    frame stack ([`frame`]). No allocation, no shared write, no fence.
//! 2. If the worker is hungry (an idle worker asked for work), the join **promotes**
//!    the oldest latent `b` of its worker: [`JobHeader::offer`] writes the rest of that job (its
//!    signal, thief slot, pool), it goes on the worker's **join deque** ([`deque`]), where idle
//!    workers can steal it, and a thread is woken.
//! 3. `a` runs inline, with this context.
//! 4. If `b` stayed latent (the common case while every worker is busy), the worker runs it
//!    inline. If it was promoted and is still the newest job of the deque, the worker takes it
//!    back (`pop_if`) and runs it inline. Otherwise a thief has it: the worker waits in the one
//!    waiting loop (`scheduler::worker::run_until`), running related work first (its own deque,
//!    then the thief's: leapfrogging) until `b`'s signal is set.
//!
//! # Why a join deque next to the ring
//! Submitted tasks want FIFO (a stream of submits is served fairly) and cheap bulk stealing
//! (the ring's steal-half); fork-join wants LIFO for the owner (the most recent job is the
//! cache-hot one, and taking it back keeps the stack discipline) and the *oldest* job for
//! thieves (the biggest piece left). One structure cannot give both safely: an owner pop at the
//! ring's tail races steal-half's single CAS (the counterexample is in [`deque`]'s docs). So each
//! worker has both: the ring for tasks, a Chase-Lev deque for join jobs. Thieves look at a
//! victim's ring first, then its join deque, then its LIFO slot (`scheduler::worker`).
//!
//! Why not the LIFO slot alone (the other option in the brief): a nested join displaces the
//! outer `b` from the slot into the ring, where it is found FIFO (oldest first): after `a`
//! returns, the outer `b` is no longer in the slot, and the waiting worker would run the
//! *oldest* queued job — an outer frame's, the biggest — nested deep in its stack. The deque
//! keeps every `b` where its frame can take it back.
//!
//! # Missed wake-ups for join jobs
//! A promotion wakes a thread only when one is idle (or can be started) and no wake is in
//! flight ([`notify_join`](crate::scheduler)); it does not take part in the `notified` flag.
//! So a worker going to sleep at the same instant may miss a join job. That costs parallelism,
//! never progress: the pushing worker is awake and takes its own job back (rayon makes the
//! same trade for jobs pushed to a local deque; see `scheduler/README.md`, "Join jobs").
//!
//! # Called from outside the pool
//! `install`/`join`/`scope` package the whole call as one stack job, submit it (the injector),
//! and park the caller until it is done ([`ThreadPool::wait_for`]). If the pool cannot take
//! work (shut down, no thread), `join` and `scope` run on the caller, sequentially, and
//! `install` returns the error.
//!
//! # Panics
//! A panic is re-raised in the caller only after both halves are finished (or, if `a`
//! panicked and `b` was never started, after `b` was taken back and dropped unrun); if both
//! panic, `a`'s panic wins, as in rayon. `a` runs without `catch_unwind`: a guard whose drop
//! runs only while unwinding settles `b` (takes it back, or waits for its thief), so the fast
//! path has no unwinding frame. A stolen `b` runs under `catch_unwind` on its thief (with
//! `std`; the task callback is `extern "C"` and must not unwind) and its panic travels back in
//! the job's result.

// The C API's fork-join (`capi::job`); built without it too, for its tests.
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) mod fn_job;

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use crate::latch::{CountLatch, Signal};
use crate::scheduler::frame::FRAMES;
use crate::scheduler::job::JobHeader;

use crate::platform::Spawner;
use crate::scheduler::worker::Until;
use crate::error::Error;
use crate::scheduler::{Inner, ThreadPool, WorkerContext};
use crate::sync::{Ordering, UnsafeCell};
use crate::task::Task;

#[cfg(feature = "std")]
type Panic = Box<dyn core::any::Any + Send + 'static>;

/// What a job left in its result slot.
enum JobResult<R> {
    Ok(R),
    #[cfg(feature = "std")]
    Panic(Panic),
}

/// Runs `f`, catching a panic where `std` allows it.
#[inline(always)]
fn call<R>(f: impl FnOnce() -> R) -> JobResult<R> {
    #[cfg(feature = "std")]
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => JobResult::Ok(r),
        Err(p) => JobResult::Panic(p),
    }
    #[cfg(not(feature = "std"))]
    JobResult::Ok(f())
}

/// Re-raises a caught panic.
#[cfg(feature = "std")]
#[cold]
fn resume(p: Panic) -> ! {
    std::panic::resume_unwind(p)
}

/// Aborts if a panic unwinds through it (no `std`: nothing can catch, and queued work borrows
/// the frame). Dropped only by unwinding: the normal path forgets it.
#[cfg(not(feature = "std"))]
struct AbortOnUnwind;

#[cfg(not(feature = "std"))]
impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        // A panic while panicking aborts.
        panic!("pool: a panic unwound out of join/scope while work borrowing its frame was queued");
    }
}

/// A job that lives in its waiter's stack frame: its [`JobHeader`] first (so the task pointer
/// is the job pointer), the closure and its result.
///
/// A `join` creates its second half latent (`scheduler::frame`): only the task header and the
/// closure are written. The rest of the header (the signal the owner waits on, the thief's
/// index, the pool) is written by [`JobHeader::offer`], just before the job is queued. So a
/// join whose `b` never leaves its worker writes no more than the task and the closure.
///
/// Runs exactly once: by the thread that takes its task from a queue (the callback, which
/// hands the closure that thread's worker context, if it is a worker of the pool), or inline
/// by its owner after taking it back (or never queueing it); never both (the queues hand a
/// task out once). After a queued run the owner consumes the result exactly once
/// ([`into_result`](Self::into_result) or [`drop_result`](Self::drop_result)); a job that never
/// runs is consumed by [`drop_unrun`](Self::drop_unrun). The frame stays alive until the
/// signal is set (the callback's last access) or the owner took the job back.
#[repr(C)]
pub(crate) struct StackJob<F, R, S: Spawner> {
    header: JobHeader,
    /// The closure: moved out exactly once (by its runner, or by `drop_unrun`).
    func: UnsafeCell<MaybeUninit<F>>,
    /// Written by `execute` before it sets the signal; moved out once by the owner after.
    result: UnsafeCell<MaybeUninit<JobResult<R>>>,
    _pool: PhantomData<*const Inner<S>>,
}

impl<F, R, S: Spawner> fmt::Debug for StackJob<F, R, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackJob").finish_non_exhaustive()
    }
}

impl<F, R, S> StackJob<F, R, S>
where
    F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
    R: Send,
    S: Spawner,
{
    /// A latent job running `func`: not ready to queue until offered ([`JobHeader::offer`]).
    #[inline(always)]
    pub(crate) fn latent(func: F) -> Self {
        Self {
            header: JobHeader::latent(Self::execute),
            func: UnsafeCell::new(MaybeUninit::new(func)),
            result: UnsafeCell::new(MaybeUninit::uninit()),
            _pool: PhantomData,
        }
    }

    /// A job ready to queue, running `func` with the worker context of `pool`'s worker that
    /// runs it (`None` where there is none, or with a null `pool`).
    #[inline]
    pub(crate) fn new(func: F, pool: *const Inner<S>) -> Self {
        let job = Self::latent(func);
        // SAFETY: a fresh job, not queued, ours. (`Offered` holds no pointer into the job, so
        // the job may move after.)
        unsafe { JobHeader::offer(job.task(), pool.cast()) };
        job
    }

    /// The job's task pointer, projected from a pointer to the whole job so that the callback
    /// may turn it back into the job.
    #[inline(always)]
    pub(crate) fn task(&self) -> NonNull<Task> {
        let job: *const Self = self;
        // SAFETY: `job` points to `self`, live; `header.task` is a field of it.
        unsafe { NonNull::new_unchecked(ptr::addr_of!((*job).header.task).cast_mut()) }
    }

    /// The signal the owner waits on.
    ///
    /// # Safety
    /// The job was offered.
    pub(crate) unsafe fn signal(&self) -> &Signal {
        // SAFETY: the caller's contract.
        unsafe { self.header.signal() }
    }

    /// What the owner waits for: the signal, and the worker running the job (if known yet).
    ///
    /// # Safety
    /// The job was offered.
    unsafe fn until(&self) -> Until<'_> {
        // SAFETY: the caller's contract.
        unsafe { self.header.until() }
    }

    /// Moves the closure out.
    ///
    /// # Safety
    /// Once per job: the caller is its one runner (or drops it unrun).
    #[inline(always)]
    unsafe fn take_func(&self) -> F {
        // SAFETY: initialised in `latent`, and moved out only this once (the caller's contract).
        self.func.with(|f| unsafe { (*f).assume_init_read() })
    }

    /// The task callback: runs the closure on the thread that dequeued the job.
    unsafe extern "C" fn execute(task: *mut Task) {
        // SAFETY: `task` is the first field of a live, offered `StackJob<F, R, S>` (repr(C));
        // the owner keeps the frame alive until the signal is set, below.
        let job = unsafe { &*task.cast_const().cast::<Self>() };
        // SAFETY: queued jobs were offered, with a null pool or the live pool whose worker
        // queued the job (it waits for the job before its pool can go away).
        let cx = unsafe { job.header.begin_run::<S>() };
        // SAFETY: the job runs once (its task was dequeued once): we are its runner.
        let func = unsafe { job.take_func() };
        let result = call(|| func(cx));
        // SAFETY: nobody reads `result` until the signal is set (Release, below).
        job.result.with_mut(|r| unsafe { (*r).write(result) });
        // SAFETY: offered; set once per job. It is our last access: the owner may return
        // right after.
        unsafe { job.header.signal().set() };
    }

    /// Runs the closure on the owner's thread (the job was taken back or never queued).
    ///
    /// # Safety
    /// The job is not queued and did not run: the owner is its runner.
    #[inline(always)]
    pub(crate) unsafe fn run_inline(&self, cx: Option<&WorkerContext<S>>) -> R {
        // SAFETY: the caller's contract.
        let func = unsafe { self.take_func() };
        func(cx)
    }

    /// Drops the closure of a job that will never run (taken back, or never queued).
    ///
    /// # Safety
    /// As [`run_inline`](Self::run_inline).
    pub(crate) unsafe fn drop_unrun(&self) {
        // SAFETY: the caller's contract.
        drop(unsafe { self.take_func() });
    }

    /// The result after the signal is set.
    ///
    /// # Safety
    /// The job ran from a queue and its signal is set; the result is taken once.
    #[inline]
    unsafe fn take_result(&self) -> JobResult<R> {
        // SAFETY: the signal is set (Acquire in `is_set`/`wait_for`): the runner wrote the
        // result and is done with the job; taken once (the caller's contract).
        self.result.with(|r| unsafe { (*r).assume_init_read() })
    }

    /// The closure's value after the signal is set, re-raising its panic.
    ///
    /// # Safety
    /// As [`take_result`](Self::take_result).
    pub(crate) unsafe fn into_result(&self) -> R {
        // SAFETY: the caller's contract.
        match unsafe { self.take_result() } {
            JobResult::Ok(r) => r,
            #[cfg(feature = "std")]
            JobResult::Panic(p) => resume(p),
        }
    }

    /// Drops the result (a panic payload too) after the signal is set.
    ///
    /// # Safety
    /// As [`take_result`](Self::take_result).
    unsafe fn drop_result(&self) {
        // SAFETY: the caller's contract.
        drop(unsafe { self.take_result() });
    }
}

/// Settles `join`'s second half while its first unwinds: the frame is popped, and `b` is taken
/// back (and dropped unrun) or, if a thief has it, waited for, so the frame outlives every use.
/// Dropped only by unwinding: the normal path forgets it. It holds the context and the depth
/// of the unwinding `join`'s frame, whose slot points to the job (every inner `join` popped
/// its own; task frames forked above it are truncated first).
struct SettleOnUnwind<'a, F, R, S: Spawner>
where
    F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
    R: Send,
{
    cx: &'a WorkerContext<S>,
    depth: usize,
    job: PhantomData<fn(&StackJob<F, R, S>)>,
}

impl<'a, F, R, S: Spawner> SettleOnUnwind<'a, F, R, S>
where
    F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
    R: Send,
{
    /// The guard for `job`, the frame of `cx` at `depth` (the type comes from `job`).
    #[inline(always)]
    fn new(cx: &'a WorkerContext<S>, depth: usize, _job: &StackJob<F, R, S>) -> Self {
        Self { cx, depth, job: PhantomData }
    }
}

impl<F, R, S: Spawner> Drop for SettleOnUnwind<'_, F, R, S>
where
    F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
    R: Send,
{
    fn drop(&mut self) {
        settle_on_unwind::<F, R, S>(self.cx, self.depth);
    }
}

#[cold]
#[inline(never)]
fn settle_on_unwind<F, R, S: Spawner>(cx: &WorkerContext<S>, depth: usize)
where
    F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
    R: Send,
{
    if cx.head.frames.depth() != depth + 1 {
        cx.truncate_frames(depth + 1);
    }
    let job = cx.head.frames.job_at(depth).expect("a join's frame is a job frame");
    // SAFETY: the frame at `depth` is the unwinding `join`'s (module docs of `frame`), whose
    // job is a `StackJob<F, R, S>` (the guard's type was taken from it), alive in its frame.
    let job = unsafe { job.cast::<StackJob<F, R, S>>().as_ref() };
    if !cx.head.frames.pop(depth) || cx.joins_pop_if(job.task()) {
        // Never queued, or taken back: `b` will not run.
        // SAFETY: not queued, not run: ours to drop.
        unsafe { job.drop_unrun() };
        return;
    }
    // A thief runs `b`: wait for it; its result (a panic too) is dropped.
    // SAFETY: promoted, so offered; after the wait, the signal is set; taken once.
    unsafe {
        cx.wait_until(job.until());
        job.drop_result();
    }
}

impl<S: Spawner> WorkerContext<S> {
    /// Runs `a` and `b`, potentially in parallel, and returns both results. Each closure gets
    /// the context of the worker it runs on.
    ///
    /// `a` runs inline; `b` stays private to this worker (a latent frame: no shared write, no
    /// fence, no allocation) and runs inline after `a`, unless another worker asked for work
    /// meanwhile: then this worker offers its oldest latent `b` for stealing (`scheduler::frame`).
    /// If `b` was stolen, this worker runs related work (the forks of the computation it
    /// waits for), and unrelated work only within the nesting bound, until `b` is done
    /// (`scheduler/context.rs`, "Bounded helping").
    ///
    /// A panic in `a` or `b` propagates after both are finished (or, if `a` panicked before
    /// `b` started, after `b` was taken back and dropped unrun); if both panic, `a`'s wins.
    ///
    /// Example: [`WorkerContext`].
    ///
    /// Out of line (`inline(never)`) on purpose: the two closures inline into it instead, so in
    /// a recursion (`fib`, a tree walk) each call of `join` is one level of it, and the
    /// closures' own tests (`n < 2`) run before the next call rather than after it.
    #[inline(never)]
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce(&WorkerContext<S>) -> RA + Send,
        B: FnOnce(&WorkerContext<S>) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        // Enough latent frames to offer already (the outer ones, the biggest) and nobody
        // hungry: this join runs both halves in order and records nothing. One load.
        if !self.head.frames.must_record() {
            let ra = a(self);
            return (ra, b(self));
        }
        self.join_recorded(a, b)
    }

    /// A `join` that records its second half as a latent frame, and promotes if a worker is
    /// hungry (out of line: the caller's frame stays small on the path that records nothing).
    #[inline(never)]
    fn join_recorded<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce(&WorkerContext<S>) -> RA + Send,
        B: FnOnce(&WorkerContext<S>) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        let depth = self.head.frames.depth();
        if depth >= FRAMES {
            if self.is_hungry() {
                self.promote();
            }
            return self.join_deep(a, b);
        }
        let job_b = StackJob::latent(move |cx: Option<&WorkerContext<S>>| match cx {
            Some(cx) => b(cx),
            None => unreachable!("a join half runs on a worker of its pool"),
        });
        // `b` starts latent: private to this thread (`frame`'s module docs).
        self.head.frames.push(depth, job_b.task());
        if self.is_hungry() {
            self.promote();
        }
        let settle = SettleOnUnwind::new(self, depth, &job_b);
        let ra = a(self);
        core::mem::forget(settle);
        if self.head.frames.depth() != depth + 1 {
            // `a` forked tasks it did not wait for (`frame`'s invariants).
            self.truncate_frames(depth + 1);
        }
        if self.head.frames.pop(depth) {
            return (ra, self.join_promoted(&job_b));
        }
        // SAFETY: `b` never left this thread: not queued, not run.
        (ra, unsafe { job_b.run_inline(Some(self)) })
    }

    /// A `join` nested deeper than the frame stack holds: both halves run here, in order.
    #[cold]
    #[inline(never)]
    fn join_deep<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce(&WorkerContext<S>) -> RA + Send,
        B: FnOnce(&WorkerContext<S>) -> RB + Send,
    {
        (a(self), b(self))
    }

    /// `b` was offered: take it back if it is still ours, else wait for its thief.
    #[cold]
    #[inline(never)]
    fn join_promoted<F, R>(&self, job_b: &StackJob<F, R, S>) -> R
    where
        F: FnOnce(Option<&WorkerContext<S>>) -> R + Send,
        R: Send,
    {
        if self.joins_pop_if(job_b.task()) {
            // SAFETY: taken back: not queued any more, not run.
            return unsafe { job_b.run_inline(Some(self)) };
        }
        // SAFETY: promoted, so offered; after the wait, the signal is set; taken once.
        unsafe {
            self.wait_until(job_b.until());
            job_b.into_result()
        }
    }

    /// Creates a scope for spawning work that borrows from the caller's frame
    /// ([`ThreadPool::scope`] on this worker's pool, without looking the worker up).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// let hits = AtomicUsize::new(0);
    /// pool.install(|cx| {
    ///     cx.scope(|s| {
    ///         for _ in 0..10 {
    ///             s.spawn(|_| { hits.fetch_add(1, Ordering::Relaxed); });
    ///         }
    ///     })
    /// })
    /// .unwrap();
    /// assert_eq!(hits.into_inner(), 10);
    /// # }
    /// ```
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope, S>) -> R + Send,
        R: Send,
    {
        self.pool().scope_here(op)
    }
}

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
                Error::Shutdown
            } else if inner.load_sync(Ordering::Relaxed).spawned() == 0 {
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
    /// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
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
    /// For recursive fork-join with latches ([`CountLatch`] + [`wait_for_latch`](Self::wait_for_latch),
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
    /// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
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
    fn run_on_pool<F, R>(&self, f: F) -> R
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
                job.into_result()
            },
            // SAFETY: refused: not queued, not run.
            Err(_) => unsafe { job.run_inline(None) },
        }
    }

    /// Creates a scope for spawning work that borrows from the caller's frame; returns when
    /// `op` and everything spawned in the scope (transitively) has finished.
    ///
    /// Spawned closures go to the pool's queues as tasks (one allocation each). The calling
    /// worker runs other work while it waits; from outside the pool, the scope runs on the pool
    /// and the caller parks. With `std`, the first panic (of `op`, else of a spawned closure)
    /// is re-raised after everything finished.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// let pool = ThreadPool::new(Config { max_threads: 2, ..Config::default() }).unwrap();
    /// let data: Vec<u64> = (1..=1000).collect();
    /// let sum = AtomicU64::new(0);
    /// pool.scope(|s| {
    ///     for chunk in data.chunks(100) {
    ///         let sum = &sum;
    ///         s.spawn(move |_| { sum.fetch_add(chunk.iter().sum(), Ordering::Relaxed); });
    ///     }
    /// });
    /// assert_eq!(sum.into_inner(), 500_500);
    /// # }
    /// ```
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope, S>) -> R + Send,
        R: Send,
    {
        if self.is_worker_thread() {
            self.scope_here(op)
        } else {
            self.run_on_pool(move |_| self.scope_here(op))
        }
    }

    /// The scope on the calling thread (a worker helps while it waits; another thread parks).
    pub(crate) fn scope_here<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope, S>) -> R + Send,
        R: Send,
    {
        let scope = Scope::new(self);
        #[cfg(not(feature = "std"))]
        let guard = AbortOnUnwind;
        let result = call(|| op(&scope));
        self.wait_for_latch(&scope.latch);
        #[cfg(not(feature = "std"))]
        core::mem::forget(guard);
        match result {
            JobResult::Ok(r) => {
                #[cfg(feature = "std")]
                if let Some(p) = scope.take_panic() {
                    resume(p);
                }
                r
            }
            #[cfg(feature = "std")]
            JobResult::Panic(p) => resume(p),
        }
    }
}

/// A scope for spawning work that may borrow anything that outlives `'scope`. Created by
/// [`ThreadPool::scope`] (or [`crate::scope`]); see there.
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
/// let mut words = vec!["a".to_string(), "b".to_string()];
/// pool.scope(|s| {
///     for w in words.iter_mut() {
///         s.spawn(move |_| w.push('!')); // borrows `words` mutably: the scope outlives it
///     }
/// });
/// assert_eq!(words, ["a!", "b!"]);
/// # }
/// ```
pub struct Scope<'scope, S: Spawner> {
    pool: *const ThreadPool<S>,
    /// One unit per spawned job not finished yet (plus the latch's own "open" unit).
    latch: CountLatch,
    /// The first panic of a spawned job (a leaked `Box<Panic>`), null if none.
    #[cfg(feature = "std")]
    panic: crate::sync::AtomicPtr<Panic>,
    /// Invariant in `'scope`, like rayon's: spawned closures may borrow for exactly `'scope`.
    marker: PhantomData<ScopeMarker<'scope, S>>,
}

type ScopeMarker<'scope, S> = Box<dyn FnOnce(&Scope<'scope, S>) + Send + Sync + 'scope>;

// SAFETY: the pool pointer is to a `Sync` pool that outlives the scope; the latch and the panic
// slot are atomics; the marker is Send + Sync.
unsafe impl<S: Spawner> Send for Scope<'_, S> {}
// SAFETY: as above; `spawn` takes `&self` and is thread-safe.
unsafe impl<S: Spawner> Sync for Scope<'_, S> {}

impl<S: Spawner> fmt::Debug for Scope<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("pending", &self.latch.pending()).finish_non_exhaustive()
    }
}

impl<'scope, S: Spawner> Scope<'scope, S> {
    fn new(pool: &ThreadPool<S>) -> Self {
        Self {
            pool,
            latch: CountLatch::new(),
            #[cfg(feature = "std")]
            panic: crate::sync::AtomicPtr::new(ptr::null_mut()),
            marker: PhantomData,
        }
    }

    /// Spawns `f` into the scope: it runs on the pool (or here, if the pool cannot take work)
    /// and the scope does not return before it finished. `f` gets the scope, to spawn more.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// // A tree walk: each node spawns its children into the same scope.
    /// fn visit<'s>(s: &pool::Scope<'s, pool::ThreadSpawner>, depth: u32, count: &'s AtomicUsize) {
    ///     count.fetch_add(1, Ordering::Relaxed);
    ///     if depth > 0 {
    ///         for _ in 0..2 {
    ///             s.spawn(move |s| visit(s, depth - 1, count));
    ///         }
    ///     }
    /// }
    /// let pool = pool::ThreadPool::new(pool::Config { max_threads: 2, ..Default::default() }).unwrap();
    /// let count = AtomicUsize::new(0);
    /// pool.scope(|s| visit(s, 4, &count));
    /// assert_eq!(count.into_inner(), 31); // 1 + 2 + 4 + 8 + 16 nodes
    /// # }
    /// ```
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce(&Scope<'scope, S>) + Send + 'scope,
    {
        self.latch.add(1);
        let job = Box::into_raw(Box::new(HeapJob { task: Task::new(HeapJob::<F, S>::execute), scope: self, func: f }));
        // SAFETY: `job` is a live allocation; the task pointer is projected from the box's
        // pointer so the callback may rebuild the box from it.
        let task = unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*job).task)) };
        // SAFETY: `self.pool` outlives the scope (the scope lives inside the pool's `scope`).
        let pool = unsafe { &*self.pool };
        // Forked, not submitted: the scope's waiter runs its own spawns first, as related work
        // (`scheduler/context.rs`, "Bounded helping"), so nested scopes nest like the recursion.
        // SAFETY: the box lives until its callback runs (and frees it); the scope waits for
        // the latch unit added above, so everything `f` borrows outlives the run.
        if unsafe { pool.submit_fork(task) }.is_err() {
            // Not queued (the pool is shut down): still ours, run it here.
            // SAFETY: the task was not queued; this is its one run.
            unsafe { Task::run(task) };
        }
    }

    #[cfg(feature = "std")]
    fn record_panic(&self, p: Panic) {
        let boxed = Box::into_raw(Box::new(p));
        // AcqRel: the scope's owner takes the box after the latch (which orders this anyway).
        if self
            .panic
            .compare_exchange(ptr::null_mut(), boxed, crate::sync::Ordering::AcqRel, crate::sync::Ordering::Relaxed)
            .is_err()
        {
            // Not the first: dropped (only the first panic is re-raised).
            // SAFETY: from Box::into_raw above, never shared.
            drop(unsafe { Box::from_raw(boxed) });
        }
    }

    #[cfg(feature = "std")]
    fn take_panic(&self) -> Option<Panic> {
        let p = self.panic.swap(ptr::null_mut(), crate::sync::Ordering::Acquire);
        // SAFETY: a non-null pointer came from `record_panic`'s Box::into_raw, taken once.
        NonNull::new(p).map(|p| *unsafe { Box::from_raw(p.as_ptr()) })
    }
}

#[cfg(feature = "std")]
impl<S: Spawner> Drop for Scope<'_, S> {
    fn drop(&mut self) {
        // A panic recorded but not re-raised (the scope body panicked too): free it.
        drop(self.take_panic());
    }
}

/// A spawned closure of a scope, boxed, with its task first.
#[repr(C)]
struct HeapJob<'scope, F, S: Spawner> {
    task: Task,
    scope: *const Scope<'scope, S>,
    func: F,
}

impl<'scope, F, S> HeapJob<'scope, F, S>
where
    F: FnOnce(&Scope<'scope, S>) + Send + 'scope,
    S: Spawner,
{
    unsafe extern "C" fn execute(task: *mut Task) {
        // SAFETY: `task` is the first field of a leaked `Box<HeapJob<F, S>>` (repr(C)), run once.
        let job = unsafe { Box::from_raw(task.cast::<Self>()) };
        let HeapJob { scope, func, .. } = *job;
        // SAFETY: the scope waits for this job's latch unit, released below, so it is alive.
        let scope = unsafe { &*scope };
        #[cfg(feature = "std")]
        if let JobResult::Panic(p) = call(|| func(scope)) {
            scope.record_panic(p);
        }
        #[cfg(not(feature = "std"))]
        func(scope);
        // SAFETY: one `done` per `add(1)` in `spawn`. Our last access to the scope.
        unsafe { scope.latch.done() };
    }
}

/// Internals for `tests/loom_join.rs` (only under `--cfg loom`; not API).
#[cfg(loom)]
#[doc(hidden)]
#[allow(missing_docs, missing_debug_implementations, unreachable_pub, clippy::missing_safety_doc)]
pub mod loom_api {
    use core::ptr::NonNull;

    use crate::task::Task;

    /// Slots in a join deque under loom (4).
    pub const DEQUE_CAPACITY: u32 = crate::queue::deque::CAPACITY;

    /// A worker's join deque (`queue::deque::JoinDeque`).
    #[derive(Debug, Default)]
    pub struct JoinDeque(crate::queue::deque::JoinDeque);

    impl JoinDeque {
        pub fn new() -> Self {
            Self(crate::queue::deque::JoinDeque::new())
        }
        /// # Safety
        /// As `JoinDeque::push`.
        pub unsafe fn push(&self, task: NonNull<Task>) -> bool {
            // SAFETY: forwarded contract.
            unsafe { self.0.push(task) }
        }
        /// # Safety
        /// As `JoinDeque::pop_if`.
        pub unsafe fn pop_if(&self, task: NonNull<Task>) -> bool {
            // SAFETY: forwarded contract.
            unsafe { self.0.pop_if(task) }
        }
        /// # Safety
        /// As `JoinDeque::pop`.
        pub unsafe fn pop(&self) -> Option<NonNull<Task>> {
            // SAFETY: forwarded contract.
            unsafe { self.0.pop() }
        }
        pub fn steal(&self) -> Option<NonNull<Task>> {
            self.0.steal()
        }
    }

    /// Latent frames a worker keeps before its joins stop recording (`frame::LATENT_SUPPLY`).
    pub const LATENT_SUPPLY: usize = crate::scheduler::frame::LATENT_SUPPLY;

    /// A worker's demand word (`scheduler::frame::Demand`): the hungry and record flags.
    #[derive(Debug)]
    pub struct Demand(crate::scheduler::frame::Demand);

    impl Demand {
        pub fn new() -> Self {
            Self(crate::scheduler::frame::Demand::new())
        }
        /// An idle worker's request.
        pub fn ask(&self) {
            self.0.ask();
        }
        pub fn is_hungry(&self) -> bool {
            self.0.is_hungry()
        }
        /// The owner's join test.
        pub fn must_record(&self) -> bool {
            self.0.must_record()
        }
        /// The owner offered work.
        pub fn lower_hunger(&self) {
            self.0.lower_hunger();
        }
    }

    /// A worker's frame stack (`scheduler::frame::FrameStack`) over `demand`, for the owner thread.
    pub struct Frames<'a> {
        stack: crate::scheduler::frame::FrameStack,
        _demand: core::marker::PhantomData<&'a Demand>,
    }

    impl<'a> Frames<'a> {
        pub fn new(demand: &'a Demand) -> Self {
            // SAFETY: `demand` outlives `'a`, and so this stack.
            Self { stack: unsafe { crate::scheduler::frame::FrameStack::new(NonNull::from(&demand.0)) }, _demand: core::marker::PhantomData }
        }
        /// A join records `task` as its newest latent frame.
        pub fn push(&self, task: NonNull<Task>) {
            self.stack.push(self.stack.depth(), task);
        }
        /// The owner promotes its oldest latent frame (as `WorkerContext::promote`, without the
        /// join deque).
        pub fn promote_oldest(&self) {
            self.stack.mark_oldest_promoted();
        }
        pub fn latent(&self) -> usize {
            self.stack.latent()
        }
    }

    /// The stack job `join` builds for its second closure (`join::StackJob`), run without a
    /// worker context (the models run it on plain loom threads).
    pub struct StackJob<R>(super::StackJob<Body<R>, R, crate::loom_support::LoomSpawner>);

    type Body<R> = alloc::boxed::Box<dyn FnOnce(Option<&crate::WorkerContext<crate::loom_support::LoomSpawner>>) -> R + Send>;

    impl<R: Send + 'static> StackJob<R> {
        pub fn new(f: impl FnOnce() -> R + Send + 'static) -> Self {
            let body: Body<R> = alloc::boxed::Box::new(move |_| f());
            Self(super::StackJob::new(body, core::ptr::null()))
        }
        pub fn task(&self) -> NonNull<Task> {
            self.0.task()
        }
        pub fn signal(&self) -> &crate::Signal {
            // SAFETY: `new` offered it.
            unsafe { self.0.signal() }
        }
        /// # Safety
        /// As `StackJob::run_inline`.
        pub unsafe fn run_inline(self) -> R {
            // SAFETY: forwarded contract.
            unsafe { self.0.run_inline(None) }
        }
        /// # Safety
        /// As `StackJob::into_result`.
        pub unsafe fn into_result(self) -> R {
            // SAFETY: forwarded contract.
            unsafe { self.0.into_result() }
        }
    }
}
