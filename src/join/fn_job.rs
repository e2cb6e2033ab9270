//! Fork-join with plain functions: a [`FnJob`] is forked and joined through a worker context
//! passed down by hand ([`fork_fn_fast`] then [`WorkerContext::fork_fn_slow`], and
//! the same for the join). This is the
//! C API's `struct pool_job` with `pool_worker_fork` / `pool_worker_join`: the same latent
//! path as [`WorkerContext::join`], for callers that cannot hand the pool a closure.
//!
//! A `FnJob` is a [`JobHeader`] and a completion (so promotion, stealing and the thief's
//! completion work exactly as for `join`'s second halves) with a function pointer in place of
//! the closure, and a word, its *mode*, saying how it was forked:
//! * `LATENT`: its task is the newest latent frame of the worker's frame stack (`frame`); the
//!   join pops the frame and calls the function inline, unless a hungry worker had it promoted.
//! * `INLINE`: not recorded, by `join`'s rule (enough latent frames in supply and nobody
//!   hungry: the record flag is clear, `frame`): the join calls the function inline.
//! * `QUEUED`: offered on the join deque at once (the frame stack was full): the join takes
//!   it back or waits for its thief.
//! * `IDLE`: not forked (never, or joined since).
//!
//! # Invariants
//! * Forks and joins nest like calls: every fork is joined on the worker that forked it, in
//!   reverse fork order, before the job's memory is reused (the caller's contract). A join of
//!   a `LATENT` job checks that its frame is the newest (task frames above it aside, which it
//!   hands to the join deque) and refuses otherwise, leaving everything as it was; a join of
//!   an `INLINE` or `QUEUED` job out of order breaks nothing (it runs or waits for that job);
//!   a join of a job that is not forked is refused.
//! * The mode is owner-only: written by the fork and the join on the owning thread; a thief
//!   touches only the header (its task and thief slot) and the completion, as for any stack
//!   job.
//! * The function runs exactly once per fork: inline by its owner (a latent or inline job, or
//!   a queued one taken back), or by the thief that took its task from a queue, which sets
//!   the job's completion after the function returned (its last access).

use core::ptr::{self, NonNull};

use crate::scheduler::frame::FRAMES;
use crate::scheduler::job::JobHeader;
use crate::platform::Spawner;
use crate::scheduler::context::ContextHead;
use crate::error::Error;
use crate::scheduler::WorkerContext;
use crate::latch::Completion;
use crate::task::Task;

/// What a [`FnJob`] runs: the job, and the context of the worker running it (type-erased:
/// a `*const WorkerContext<S>` of the job's pool; null only where the pool has no context to
/// give, which a thief of a join deque always has).
pub(crate) type JobFn = unsafe extern "C" fn(job: *mut FnJob, worker: *const ());

/// Not forked.
pub(crate) const IDLE: u64 = 0;
/// The newest latent frame of the forking worker.
const LATENT: u64 = 1;
/// Not recorded: runs at its join.
pub(crate) const INLINE: u64 = 2;
/// Offered on the join deque when forked.
const QUEUED: u64 = 3;

/// A fork-join job running a plain function (the module docs). Caller-owned memory: only
/// `run` needs a value before the fork; the rest is written by the fork.
#[repr(C)]
pub(crate) struct FnJob {
    /// The function; `None` is refused by the fork.
    pub(crate) run: Option<JobFn>,
    /// How it was forked (the module docs); owner-only. Right after `run`, at the same offset
    /// on every target (a `u64`): the C header's inline fork and join read and write it too
    /// (`capi::job`, `pool_job_fork`).
    pub(crate) mode: u64,
    /// The task header a promotion offers and a thief runs ([`JobHeader`]).
    header: JobHeader,
    /// Set by a thief after the function returned; written by the fork when it records or
    /// queues the job.
    done: Completion<()>,
}

/// The job whose header task is `task`.
///
/// # Safety
/// `task` is the task of a live `FnJob`'s header, derived from a pointer to the whole job.
#[inline(always)]
unsafe fn job_of(task: NonNull<Task>) -> NonNull<FnJob> {
    let offset = core::mem::offset_of!(FnJob, header);
    // SAFETY: the header is at `offset` in the job, and its task is its first field (both
    // repr(C)); the caller's contract gives the provenance of the whole job.
    unsafe { task.byte_sub(offset).cast() }
}

/// The task of `job`'s header, projected from the pointer to the whole job (so that a
/// thief may turn it back into the job).
#[inline(always)]
fn task_of(job: NonNull<FnJob>) -> NonNull<Task> {
    // SAFETY: a field projection of a non-null pointer stays non-null.
    unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*job.as_ptr()).header.task)) }
}

/// Calls the job's function with `worker`.
///
/// # Safety
/// `job` is live, was forked (so `run` is set), and this is the fork's one run.
#[inline(always)]
unsafe fn call(job: NonNull<FnJob>, worker: *const ()) {
    let j = job.as_ptr();
    // SAFETY: the caller's contract; the fork refused a job without a function.
    unsafe { ((*j).run.unwrap_unchecked())(j, worker) };
}

/// The task callback of a job forked on a pool with spawner `S`: runs the function on the
/// thread that took the job from a queue, then sets its completion.
unsafe extern "C" fn execute<S: Spawner>(task: *mut Task) {
    // SAFETY: only the fork (`fork_fn_slow`) sets this callback, on the task of a live `FnJob`'s
    // header, which its owner keeps alive until the completion is set (below); the pointer
    // comes from `task_of`, derived from the whole job.
    let job = unsafe { job_of(NonNull::new_unchecked(task)) };
    // SAFETY: as above; the header is only read here (the owner writes only `mode`).
    let header = unsafe { &(*job.as_ptr()).header };
    // SAFETY: queued jobs were offered (`promote` or `fork_fn_deep`), with the live pool
    // whose worker forked it (that worker waits for the job before its pool can go away).
    let cx = unsafe { header.begin_run::<S>() };
    let worker = cx.map_or(ptr::null(), |cx| ptr::from_ref(cx).cast::<()>());
    // SAFETY: forked; the job runs once (its task was dequeued once).
    unsafe { call(job, worker) };
    // SAFETY: set once per fork (its one run); our last access: the owner may return right
    // after.
    unsafe { Completion::set(ptr::addr_of!((*job.as_ptr()).done), ()) };
}

// The fast paths of a fork and a join, which need no platform type (the C API takes them
// before it finds out which kind of pool the worker belongs to): functions of the context's
// platform-independent head.

/// A fork that records nothing (the record flag is clear: the latent supply is full and
/// no worker is hungry): `Some` with the fork's result if that is all there was to do.
///
/// # Safety
/// As [`WorkerContext::fork_fn_slow`], on this context's thread.
#[inline(always)]
pub(crate) unsafe fn fork_fn_fast(head: &ContextHead, job: NonNull<FnJob>) -> Option<Result<(), Error>> {
    let j = job.as_ptr();
    // SAFETY: live and ours (the caller's contract); fields read and written in place.
    unsafe {
        if (*j).run.is_none() {
            return Some(Err(Error::InvalidArgument));
        }
        if !head.frames.must_record() {
            (*j).mode = INLINE;
            return Some(Ok(()));
        }
    }
    None
}

/// The join of a job that was not recorded: runs it here (with `worker`, this context)
/// and returns true; false for any other job.
///
/// # Safety
/// As [`WorkerContext::join_fn_slow`]; `worker` points to the calling worker's context.
#[inline(always)]
pub(crate) unsafe fn join_fn_fast(job: NonNull<FnJob>, worker: *const ()) -> bool {
    let j = job.as_ptr();
    // SAFETY: live, its mode is ours (the caller's contract); an `INLINE` job was forked
    // with a function and never left this thread: this is its one run.
    unsafe {
        if (*j).mode != INLINE {
            return false;
        }
        (*j).mode = IDLE;
        call(job, worker);
    }
    true
}

impl<S: Spawner> WorkerContext<S> {
    /// Forks `job`, once [`fork_fn_fast`] returned `None` (the job has a
    /// function, and the record flag is set): records it as a latent frame (promoting the
    /// oldest if a worker is hungry); its function will run exactly
    /// once, before the join for it returns: inline at that join, or on a worker that asked
    /// for work meanwhile. Writes nothing shared unless a worker is hungry (`frame`).
    ///
    /// # Safety
    /// `job` points to a live `FnJob` (only `run` need be initialised) that stays in place,
    /// is touched by nobody else and is not forked again until its join returned `Ok` on this
    /// worker; joins come in reverse fork order.
    #[inline]
    pub(crate) unsafe fn fork_fn_slow(&self, job: NonNull<FnJob>) -> Result<(), Error> {
        let j = job.as_ptr();
        // SAFETY: live and ours (the caller's contract); fields read and written in place.
        unsafe {
            let depth = self.head.frames.depth();
            if depth >= FRAMES {
                return self.fork_fn_deep(job);
            }
            ptr::addr_of_mut!((*j).header.task).write(Task::new(execute::<S>));
            ptr::addr_of_mut!((*j).done).write(Completion::new());
            (*j).mode = LATENT;
            self.head.frames.push(depth, task_of(job));
        }
        if self.is_hungry() {
            self.promote();
        }
        Ok(())
    }

    /// A fork with a full frame stack: the job goes on the join deque at once (or, if that
    /// is full too, runs at its join).
    #[cold]
    #[inline(never)]
    unsafe fn fork_fn_deep(&self, job: NonNull<FnJob>) -> Result<(), Error> {
        let j = job.as_ptr();
        let task = task_of(job);
        // SAFETY: live and ours, not queued (the caller's contract); offered before it is
        // queued; its join takes it back or waits for it.
        let queued = unsafe {
            task.as_ptr().write(Task::new(execute::<S>));
            ptr::addr_of_mut!((*j).done).write(Completion::new());
            JobHeader::offer(task, self.head.pool);
            let queued = self.joins.push(task);
            (*j).mode = if queued { QUEUED } else { INLINE };
            queued
        };
        if queued && self.is_hungry() {
            self.offered_work();
        }
        Ok(())
    }

    /// Joins `job`, once [`join_fn_fast`] returned false (the job was not an
    /// unrecorded fork): returns once its function has run (here, if no other worker took it;
    /// meanwhile this worker runs related work, as any wait does).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the job is not forked, or is a latent frame under newer
    /// job frames (a join out of order); nothing was done.
    ///
    /// # Safety
    /// `job` is live and was forked on this worker (its fork's contract), or is not forked
    /// and its mode is initialised (a job made by [`FnJob::new`], or joined before).
    pub(crate) unsafe fn join_fn_slow(&self, job: NonNull<FnJob>) -> Result<(), Error> {
        let j = job.as_ptr();
        // SAFETY: live, and its mode is ours (owner-only; the caller's contract).
        let mode = unsafe { (*j).mode };
        match mode {
            LATENT => {
                let mut depth = self.head.frames.depth();
                if depth == 0 || self.head.frames.job_at(depth - 1) != Some(task_of(job)) {
                    // Not the newest frame: the job's own frame under task frames forked
                    // since (and not waited for) is fine; anything else is a join out of order.
                    let Some(at) = self.head.frames.job_under_tasks(task_of(job)) else {
                        return Err(Error::InvalidArgument);
                    };
                    self.truncate_frames(at + 1);
                    depth = at + 1;
                }
                if self.head.frames.pop(depth - 1) {
                    // SAFETY: forked as the caller's contract says.
                    return unsafe { self.join_fn_offered(job) };
                }
                // Never left this thread: run it here.
                // SAFETY: live and ours; forked; not queued, not run.
                unsafe {
                    (*j).mode = IDLE;
                    call(job, ptr::from_ref(self).cast());
                }
                Ok(())
            }
            // SAFETY: forked as the caller's contract says.
            QUEUED => unsafe { self.join_fn_offered(job) },
            // Not forked (or joined already); an unrecorded fork was joined by the fast path.
            _ => Err(Error::InvalidArgument),
        }
    }

    /// The job was offered on the join deque: take it back if it is still ours, else wait for
    /// its thief.
    #[cold]
    #[inline(never)]
    unsafe fn join_fn_offered(&self, job: NonNull<FnJob>) -> Result<(), Error> {
        let j = job.as_ptr();
        // SAFETY: live; the mode is owner-only.
        unsafe { (*j).mode = IDLE };
        if self.joins.pop_if(task_of(job)) {
            // SAFETY: taken back: not queued any more, not run; forked.
            unsafe { call(job, ptr::from_ref(self).cast()) };
            return Ok(());
        }
        // SAFETY: offered (promoted or queued by the fork); only read from here on.
        self.wait_until(unsafe { (*j).header.until((*j).done.signal()) });
        Ok(())
    }
}

#[cfg(test)]
impl FnJob {
    /// A job that will run `run`, not forked.
    pub(crate) fn new(run: JobFn) -> Self {
        /// The task callback until a fork sets the real one (a job is queued only after).
        unsafe extern "C" fn not_forked(_: *mut Task) {
            unreachable!("a job is queued only by its fork, which sets its callback")
        }
        Self {
            run: Some(run),
            mode: IDLE,
            header: JobHeader::latent(not_forked),
            done: Completion::new(),
        }
    }
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    use super::*;
    use crate::{Config, ThreadPool, ThreadSpawner};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::vec::Vec;

    type Cx = WorkerContext<ThreadSpawner>;

    /// A whole fork: the fast path, then the rest (as the C API does).
    unsafe fn fork(cx: &Cx, job: NonNull<FnJob>) -> Result<(), Error> {
        // SAFETY: the caller's contract.
        unsafe { fork_fn_fast(&cx.head, job).unwrap_or_else(|| cx.fork_fn_slow(job)) }
    }

    /// A whole join: the fast path, then the rest.
    unsafe fn join(cx: &Cx, job: NonNull<FnJob>) -> Result<(), Error> {
        // SAFETY: the caller's contract; the worker is `cx`.
        unsafe {
            if join_fn_fast(job, ptr::from_ref(cx).cast()) {
                return Ok(());
            }
            cx.join_fn_slow(job)
        }
    }

    /// fib with a job per level; the job's function counts its runs.
    #[repr(C)]
    struct Fib {
        job: FnJob,
        n: u64,
        out: u64,
        runs: *const AtomicUsize,
    }

    unsafe extern "C" fn fib_run(job: *mut FnJob, worker: *const ()) {
        // The job's own fields are the pool's (its owner reads its mode meanwhile): only `n`,
        // `out` and `runs` are touched, through the raw pointer, never a reference to the
        // whole `Fib`.
        let f = job.cast::<Fib>();
        // SAFETY: every job with this function is the first field of a live `Fib`, and the
        // worker is a context of the pool the test made (the type the test uses); the counter
        // outlives the computation.
        unsafe {
            let cx = &*worker.cast::<Cx>();
            (*(*f).runs).fetch_add(1, Relaxed);
            (*f).out = fib(cx, (*f).n, (*f).runs);
        }
    }

    fn fib(cx: &Cx, n: u64, runs: *const AtomicUsize) -> u64 {
        if n < 2 {
            return n;
        }
        let mut right = Fib { job: FnJob::new(fib_run), n: n - 2, out: 0, runs };
        let job = NonNull::from(&mut right).cast::<FnJob>();
        // (From here on `right` is reached only through `job`.)
        // SAFETY: `right` stays in this frame until its join, the reverse of its fork.
        unsafe {
            fork(cx, job).unwrap();
            let left = fib(cx, n - 1, runs);
            join(cx, job).unwrap();
            left + (*job.cast::<Fib>().as_ptr()).out
        }
    }

    fn fib_seq(n: u64) -> u64 {
        if n < 2 { n } else { fib_seq(n - 1) + fib_seq(n - 2) }
    }

    #[test]
    fn every_forked_job_runs_once() {
        let n = if cfg!(miri) { 8 } else { 18 };
        for threads in [1, 2] {
            let pool = ThreadPool::new(Config::default().with_max_threads(threads)).unwrap();
            let runs = AtomicUsize::new(0);
            let out = pool.install(|cx| fib(cx, n, &runs)).unwrap();
            assert_eq!(out, fib_seq(n));
            // One job per call with n >= 2.
            assert_eq!(runs.load(Relaxed) as u64, fib_seq(n + 1) - 1);
        }
    }

    unsafe extern "C" fn count(job: *mut FnJob, _: *const ()) {
        // SAFETY: the jobs of these tests are the first field of a live `Fib`.
        unsafe { (*(*job.cast::<Fib>()).runs).fetch_add(1, Relaxed) };
    }

    #[test]
    fn forks_deeper_than_the_frame_stack_are_queued_and_joined() {
        let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
        let runs = AtomicUsize::new(0);
        let wide = FRAMES + 20;
        pool.install(|cx| {
            let mut jobs: Vec<Fib> = (0..wide).map(|_| Fib { job: FnJob::new(count), n: 0, out: 0, runs: &runs }).collect();
            let base = jobs.as_mut_ptr();
            // SAFETY: the vector is not touched (nor moved) between the forks and the joins,
            // which come in reverse order.
            unsafe {
                for i in 0..wide {
                    fork(cx, NonNull::new_unchecked(base.add(i)).cast()).unwrap();
                }
                for i in (0..wide).rev() {
                    join(cx, NonNull::new_unchecked(base.add(i)).cast()).unwrap();
                }
            }
        })
        .unwrap();
        assert_eq!(runs.load(Relaxed), wide);
    }

    #[test]
    fn joins_out_of_order_and_twice_are_refused() {
        let pool = ThreadPool::new(Config::default().with_max_threads(1)).unwrap();
        let runs = AtomicUsize::new(0);
        pool.install(|cx| {
            let mut a = Fib { job: FnJob::new(count), n: 0, out: 0, runs: &runs };
            let mut b = Fib { job: FnJob::new(count), n: 0, out: 0, runs: &runs };
            let (a, b) = (NonNull::from(&mut a).cast::<FnJob>(), NonNull::from(&mut b).cast::<FnJob>());
            // SAFETY: both stay in this frame until joined, in reverse order.
            unsafe {
                assert_eq!(join(cx, a), Err(Error::InvalidArgument), "not forked");
                fork(cx, a).unwrap();
                fork(cx, b).unwrap();
                assert_eq!(join(cx, a), Err(Error::InvalidArgument), "b is newer");
                assert_eq!(runs.load(Relaxed), 0);
                join(cx, b).unwrap();
                join(cx, a).unwrap();
                assert_eq!(join(cx, a), Err(Error::InvalidArgument), "joined already");
            }
        })
        .unwrap();
        assert_eq!(runs.load(Relaxed), 2);
    }
}
