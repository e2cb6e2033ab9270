//! [`WorkerContext::join`] on a worker: the latent second half, its promotion, and how a
//! `join` settles its second half when its first unwinds (module docs of `join`).

use core::marker::PhantomData;

use super::stack_job::StackJob;
use crate::platform::Spawner;
use crate::scheduler::frame::FRAMES;
use crate::scheduler::WorkerContext;

/// Settles `join`'s second half while its first unwinds: the frame is popped, and `b` is taken
/// back (and dropped unrun) or, if a thief has it, waited for, so the frame outlives every use.
/// Dropped only by unwinding: the normal path forgets it. It holds the context and the depth
/// of the unwinding `join`'s frame, whose slot points to the job (every inner `join` popped
/// its own; task frames forked above it are truncated first).
#[allow(clippy::type_complexity)] // `job`'s marker: the job's type, not a value of it
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
    if !cx.head.frames.pop(depth) || cx.joins.pop_if(job.task()) {
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
        if self.joins.pop_if(job_b.task()) {
            // SAFETY: taken back: not queued any more, not run.
            return unsafe { job_b.run_inline(Some(self)) };
        }
        // SAFETY: promoted, so offered; after the wait, the signal is set; taken once.
        unsafe {
            self.wait_until(job_b.until());
            job_b.take_result()
        }
    }

}
