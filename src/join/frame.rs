//! Latent join frames: `join`'s second half stays private to its worker until another worker
//! asks for work (demand-driven promotion: the idea of heartbeat scheduling and lazy binary
//! splitting, with the "heartbeat" raised by idle workers instead of a timer).
//!
//! Offering every `b` on the join deque costs a push and a pop with a full fence per join: for
//! fine-grained recursion (fib) that is several times the work itself, and nearly every offer
//! is taken back by its owner anyway. So `join` records `b` as a **latent frame**: its task
//! pointer in the next slot of the worker's [`FrameStack`], owner-only memory in the worker's
//! context (no atomics, no fence). Only when the worker's *hungry* flag is up (raised by a
//! worker that found no work, see `scheduler::worker`) does a `join` **promote** the *oldest*
//! latent frame: push its `b` on the join deque, where idle workers steal it, and wake one.
//! The oldest frame is the biggest piece of work left on this worker (the outermost unfinished
//! `b`), so one promotion feeds a thief for a long time, and two busy workers go on running
//! their joins at nearly sequential cost.
//!
//! # Invariants (owner thread only: the stack lives in the `WorkerContext`, which is `!Sync`)
//! * The frames form a stack in call order: `join` pushes at entry and pops before it returns
//!   (its unwinding guard pops too), and joins nest, so the pops come in reverse push order.
//! * Slots `[0, latent_from)` are promoted (their tasks went to the join deque), slots
//!   `[latent_from, depth)` are latent (in no queue: only their owner knows them). Promotion
//!   goes oldest first, so this split is all the bookkeeping there is.
//! * At most [`FRAMES`] frames: a `join` nested deeper takes no frame and runs both halves
//!   inline (promotion goes oldest first, so it would reach such frames only after [`FRAMES`]
//!   outer frames were offered, which a pool with fewer workers never needs).

use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::task::Task;

/// Slots in a worker's frame stack (the deepest join nesting whose frames can be promoted).
pub(crate) const FRAMES: usize = 64;

/// A worker's stack of latent join frames (see the module docs). Owner-only: `Cell`s.
pub(crate) struct FrameStack {
    /// Frames pushed and not yet popped (at most `FRAMES`).
    depth: Cell<usize>,
    /// The first latent frame; slots below it are promoted. `<= depth`.
    latent_from: Cell<usize>,
    /// The frames' tasks (`b`'s `StackJob` headers), by depth.
    slots: [Cell<*const Task>; FRAMES],
}

impl FrameStack {
    pub(crate) fn new() -> Self {
        Self { depth: Cell::new(0), latent_from: Cell::new(0), slots: [const { Cell::new(ptr::null()) }; FRAMES] }
    }

    /// Frames pushed and not yet popped: the depth the next [`push`](Self::push) takes.
    #[inline(always)]
    pub(crate) fn depth(&self) -> usize {
        self.depth.get()
    }

    /// Pushes `task` as the newest, latent frame at `depth`, which is [`depth`](Self::depth)
    /// and below [`FRAMES`] (a deeper `join` takes no frame).
    #[inline(always)]
    pub(crate) fn push(&self, depth: usize, task: NonNull<Task>) {
        debug_assert_eq!(depth, self.depth.get());
        self.slots[depth].set(task.as_ptr());
        self.depth.set(depth + 1);
    }

    /// The task of the frame at `depth` (below [`FRAMES`], pushed and not popped).
    #[inline]
    pub(crate) fn task_at(&self, depth: usize) -> NonNull<Task> {
        debug_assert!(depth < self.depth.get());
        NonNull::new(self.slots[depth].get().cast_mut()).expect("a pushed frame has a task")
    }

    /// Pops the newest frame, pushed at `depth`; returns whether it was promoted (its task went
    /// to the join deque) rather than still private to this thread.
    #[inline(always)]
    pub(crate) fn pop(&self, depth: usize) -> bool {
        debug_assert_eq!(self.depth.get(), depth + 1, "join frames pop in reverse push order");
        self.depth.set(depth);
        let latent_from = self.latent_from.get();
        if depth < latent_from {
            // It was promoted, and every newer frame is gone: none is latent.
            self.latent_from.set(depth);
            return true;
        }
        false
    }

    /// Frames pushed, not popped and not offered: what promotion can still offer.
    #[inline(always)]
    pub(crate) fn latent(&self) -> usize {
        self.depth.get() - self.latent_from.get()
    }

    /// The task of the oldest latent frame that has a slot, if any, for the caller to offer.
    #[inline]
    pub(crate) fn oldest_latent(&self) -> Option<NonNull<Task>> {
        let from = self.latent_from.get();
        if from >= self.depth.get() {
            return None;
        }
        NonNull::new(self.slots[from].get().cast_mut())
    }

    /// Marks the oldest latent frame promoted (its task, from
    /// [`oldest_latent`](Self::oldest_latent), is now on the join deque).
    #[inline]
    pub(crate) fn mark_oldest_promoted(&self) {
        debug_assert!(self.latent_from.get() < self.depth.get());
        self.latent_from.set(self.latent_from.get() + 1);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn task() -> Task {
        unsafe extern "C" fn nop(_: *mut Task) {}
        Task::new(nop)
    }

    #[test]
    fn promotion_goes_oldest_first_and_pop_reports_it() {
        let (mut t1, mut t2, mut t3) = (task(), task(), task());
        let (p1, p2, p3) = (NonNull::from(&mut t1), NonNull::from(&mut t2), NonNull::from(&mut t3));
        let stack = FrameStack::new();
        assert_eq!(stack.oldest_latent(), None);
        let push = |p| {
            let d = stack.depth();
            stack.push(d, p);
            d
        };
        let d1 = push(p1);
        let d2 = push(p2);
        assert_eq!(stack.oldest_latent(), Some(p1));
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), Some(p2));
        let d3 = push(p3);
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), Some(p3));
        assert_eq!(stack.task_at(d3), p3);
        assert!(!stack.pop(d3), "f3 stayed latent");
        assert_eq!(stack.oldest_latent(), None, "f1 and f2 are promoted");
        assert!(stack.pop(d2));
        // A new inner frame after a promoted one is latent and the oldest latent.
        let d3 = push(p3);
        assert_eq!(stack.oldest_latent(), Some(p3));
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), None);
        assert!(stack.pop(d3));
        assert!(stack.pop(d1));
        assert_eq!(stack.oldest_latent(), None);
    }
}
