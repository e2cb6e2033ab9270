//! Latent join frames: `join`'s second half stays private to its worker until another worker
//! can use it (lazy promotion, the idea of heartbeat scheduling and lazy binary splitting).
//!
//! Offering every `b` on the join deque costs a push and a pop with a full fence per join: for
//! fine-grained recursion (fib) that is several times the work itself, and nearly every offer
//! is taken back by its owner anyway. So `join` first records `b` as a **latent frame**: a node
//! in its own stack frame, linked into the worker's private [`FrameStack`] (no atomics shared
//! with anyone). Only when the pool could use more work — a worker is idle, or one more thread
//! may still be started, and no wake-up is already in flight (`Inner::wants_join_work`) — does
//! a `join` **promote** the *oldest* latent frame of its worker: push its `b` on the join deque
//! and wake a thread, exactly what every join did before. The oldest frame is the biggest piece
//! of work left on this worker (the outermost unfinished `b`), so one promotion feeds a thief
//! for a long time, and two busy workers go on running their joins at nearly sequential cost.
//!
//! # Invariants (owner thread only)
//! * The frames form a stack in call order (each lives in a `join` call's frame, and calls nest):
//!   `newest` is the innermost unfinished `join`'s frame; `older` links lead outward.
//! * Promotion goes oldest first, so the frames are a promoted prefix (outer) and a latent
//!   suffix (inner); `oldest_latent` is the first latent frame, or null when none is.
//! * A latent frame's task is in no queue: nobody but its owner knows it, so the owner runs
//!   `b` inline without any synchronisation. A promoted frame's task went through the join
//!   deque, and its `join` takes it back or waits for its signal, as before.
//!
//! A wrong guess of "wants work" (the `Sync` word read Relaxed, racing) costs parallelism,
//! never progress: unpromoted work is run by its owner.

use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, Ordering};
use crate::task::Task;

/// One `join`'s `b`, as its worker sees it. Lives in the `join` call's stack frame; accessed
/// only by its worker (through shared references and the raw pointers of the stack, hence
/// `Cell`s).
pub(crate) struct Frame {
    /// `b`'s task (a `StackJob` in the same `join` frame).
    task: NonNull<Task>,
    /// The next frame outward (null for the outermost).
    older: Cell<*const Frame>,
    /// The next frame inward (null while this is the newest).
    newer: Cell<*const Frame>,
    /// Offered on the join deque.
    promoted: Cell<bool>,
}

impl Frame {
    #[inline]
    pub(crate) fn new(task: NonNull<Task>) -> Self {
        Self { task, older: Cell::new(ptr::null()), newer: Cell::new(ptr::null()), promoted: Cell::new(false) }
    }
}

/// A worker's stack of join frames (see the module docs). The fields are atomics only so that
/// the worker stays `Sync`: they are touched by the owner alone, with Relaxed loads and stores.
pub(crate) struct FrameStack {
    newest: AtomicPtr<Frame>,
    oldest_latent: AtomicPtr<Frame>,
}

impl FrameStack {
    pub(crate) fn new() -> Self {
        Self { newest: AtomicPtr::new(ptr::null_mut()), oldest_latent: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Links `frame` as the newest, latent frame.
    ///
    /// # Safety
    /// Called by the owning worker; `frame` stays where it is until the matching
    /// [`pop`](Self::pop), which comes before any frame older than it is popped.
    #[inline]
    pub(crate) unsafe fn push(&self, frame: &Frame) {
        let older = self.newest.load(Ordering::Relaxed);
        frame.older.set(older);
        // From a shared reference: every later write through it is to a `Cell`.
        let this = ptr::from_ref(frame).cast_mut();
        if let Some(older) = NonNull::new(older) {
            // SAFETY: `older` is an unfinished outer frame of this thread (the stack invariant),
            // so it is alive; `newer` is a Cell, written by this thread only.
            unsafe { older.as_ref() }.newer.set(this);
        }
        self.newest.store(this, Ordering::Relaxed);
        if self.oldest_latent.load(Ordering::Relaxed).is_null() {
            self.oldest_latent.store(this, Ordering::Relaxed);
        }
    }

    /// Unlinks `frame`, the newest frame; returns whether it was promoted (its task went to the
    /// join deque) rather than still private to this thread.
    ///
    /// # Safety
    /// Called by the owning worker with the frame of its innermost unfinished `join`.
    #[inline]
    pub(crate) unsafe fn pop(&self, frame: &Frame) -> bool {
        debug_assert!(ptr::eq(self.newest.load(Ordering::Relaxed), frame));
        let older = frame.older.get().cast_mut();
        self.newest.store(older, Ordering::Relaxed);
        if let Some(older) = NonNull::new(older) {
            // SAFETY: as in `push`.
            unsafe { older.as_ref() }.newer.set(ptr::null());
        }
        let promoted = frame.promoted.get();
        if ptr::eq(self.oldest_latent.load(Ordering::Relaxed), frame) {
            // Every newer frame is gone, so no latent frame is left.
            self.oldest_latent.store(ptr::null_mut(), Ordering::Relaxed);
        }
        promoted
    }

    /// The task of the oldest latent frame, if any, for the caller to offer.
    ///
    /// # Safety
    /// Called by the owning worker.
    #[inline]
    pub(crate) unsafe fn oldest_latent(&self) -> Option<NonNull<Task>> {
        let frame = NonNull::new(self.oldest_latent.load(Ordering::Relaxed))?;
        // SAFETY: linked frames are alive (see `push`).
        Some(unsafe { frame.as_ref() }.task)
    }

    /// Marks the oldest latent frame promoted (its task is now on the join deque).
    ///
    /// # Safety
    /// Called by the owning worker, after [`oldest_latent`](Self::oldest_latent) returned a
    /// task that was then pushed.
    #[inline]
    pub(crate) unsafe fn mark_oldest_promoted(&self) {
        let frame = self.oldest_latent.load(Ordering::Relaxed);
        debug_assert!(!frame.is_null());
        // SAFETY: as in `oldest_latent`.
        let frame = unsafe { &*frame };
        frame.promoted.set(true);
        // The next latent frame is the next one inward (null if this was the newest).
        self.oldest_latent.store(frame.newer.get().cast_mut(), Ordering::Relaxed);
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
        let (f1, f2, f3) = (Frame::new(p1), Frame::new(p2), Frame::new(p3));
        // SAFETY: (all calls) one thread; frames popped innermost first, before they drop.
        unsafe {
            assert_eq!(stack.oldest_latent(), None);
            stack.push(&f1);
            stack.push(&f2);
            assert_eq!(stack.oldest_latent(), Some(p1));
            stack.mark_oldest_promoted();
            assert_eq!(stack.oldest_latent(), Some(p2));
            stack.push(&f3);
            stack.mark_oldest_promoted();
            assert_eq!(stack.oldest_latent(), Some(p3));
            assert!(!stack.pop(&f3), "f3 stayed latent");
            assert_eq!(stack.oldest_latent(), None, "f1 and f2 are promoted");
            assert!(stack.pop(&f2));
            // A new inner frame after a promoted one is latent and the oldest latent.
            stack.push(&f3);
            assert_eq!(stack.oldest_latent(), Some(p3));
            stack.mark_oldest_promoted();
            assert_eq!(stack.oldest_latent(), None);
            assert!(stack.pop(&f3));
            assert!(stack.pop(&f1));
            assert_eq!(stack.oldest_latent(), None);
        }
    }
}
