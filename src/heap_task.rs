//! [`HeapTask`]: a closure in a box with a [`Task`] header first, the one task type behind every
//! boxed closure a pool runs once (`ThreadPool::spawn`, `Scope::spawn`, the C layer's
//! `pool_submit_fn`). One allocation per closure; the task's callback frees the box and then
//! calls the closure, so the closure may do anything (resubmit, wait, free what it captured)
//! and the pool never touches the box again.
//!
//! The blocking pool's spawns keep a job of their own (`blocking::handle`): its allocation
//! outlives the run, since the handle reads the closure's output from it.
//!
//! Invariant: a task made here is run exactly once (its callback, through the pool's queues or
//! by its maker when the submit was refused) or dropped unrun exactly once
//! ([`Unqueued::drop_unrun`]); either frees the box.

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use crate::error::Error;
use crate::fallible::try_box;
use crate::task::Task;

/// A boxed closure with its task header first (`repr(C)`: the task pointer is the box's).
#[repr(C)]
pub(crate) struct HeapTask<F> {
    task: Task,
    /// Moved out once, by `run` or `drop_unrun`.
    f: ManuallyDrop<F>,
}

/// A boxed closure's task, not queued yet: [`task`](Self::task) to submit it, and, if the
/// submit is refused, [`drop_unrun`](Self::drop_unrun) (which knows the closure's type).
#[derive(Debug)]
pub(crate) struct Unqueued<F> {
    task: NonNull<Task>,
    _f: PhantomData<F>,
}

impl<F: FnOnce() + Send> Unqueued<F> {
    /// The task to submit (once).
    #[inline]
    pub(crate) fn task(&self) -> NonNull<Task> {
        self.task
    }

    /// Drops the closure unrun and frees the box: for a task whose submit was refused.
    ///
    /// # Safety
    /// The task was never queued (or was refused), and was not run.
    pub(crate) unsafe fn drop_unrun(self) {
        // SAFETY: the caller's contract.
        drop(unsafe { HeapTask::<F>::take(self.task) });
    }
}

impl<F: FnOnce() + Send> HeapTask<F> {
    /// Boxes `f` as a task (aborts on an allocation failure, as `Box::new`). `Send`: it runs on
    /// whichever thread takes it from a queue.
    #[inline]
    pub(crate) fn boxed(f: F) -> Unqueued<F> {
        Self::into_task(Box::new(Self { task: Task::new(Self::run), f: ManuallyDrop::new(f) }))
    }

    /// Boxes `f` as a task, or `Err(OutOfMemory)` (dropping `f`) if the allocator fails.
    #[inline]
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn try_boxed(f: F) -> Result<Unqueued<F>, Error> {
        Ok(Self::into_task(try_box(Self { task: Task::new(Self::run), f: ManuallyDrop::new(f) })?))
    }

    /// The task pointer, projected from the pointer to the whole box (not from a reference
    /// to the field): the callback turns it back into the box and frees it, so it must carry
    /// the whole allocation's provenance (Miri, Stacked Borrows).
    fn into_task(boxed: Box<Self>) -> Unqueued<F> {
        let job = Box::into_raw(boxed);
        // SAFETY: `job` is a live, non-null allocation; `addr_of_mut!` makes no reference.
        let task = unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*job).task)) };
        Unqueued { task, _f: PhantomData }
    }

    /// Takes the closure out and frees the box.
    ///
    /// # Safety
    /// `task` came from `boxed` or `try_boxed` of a `HeapTask<F>`, and this is its one use (its
    /// run, or its drop unrun).
    unsafe fn take(task: NonNull<Task>) -> F {
        // SAFETY: the first field of a leaked `Box<HeapTask<F>>` (repr(C)), taken once.
        let mut job = unsafe { Box::from_raw(task.as_ptr().cast::<Self>()) };
        // SAFETY: moved out once (the caller's contract); the box is freed without dropping it.
        unsafe { ManuallyDrop::take(&mut job.f) }
    }

    /// The task's callback: frees the box, then calls the closure.
    unsafe extern "C" fn run(task: *mut Task) {
        // SAFETY: the pool calls a task's callback once, with the task it was made with.
        let f = unsafe { Self::take(NonNull::new_unchecked(task)) };
        f();
    }

}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn runs_once_or_drops_unrun() {
        // An `Rc` is not `Send`: the test's closures capture its count through a wrapper.
        struct Unsync(Rc<core::cell::Cell<u32>>);
        // SAFETY: the test runs every closure on its own thread.
        unsafe impl Send for Unsync {}
        impl Unsync {
            fn inc(&self, n: u32) {
                self.0.set(self.0.get() + n);
            }
        }
        let hits = Rc::new(core::cell::Cell::new(0));
        let h = Unsync(hits.clone());
        let task = HeapTask::boxed(move || h.inc(1)).task();
        // SAFETY: a fresh task, run once.
        unsafe { Task::run(task) };
        assert_eq!((hits.get(), Rc::strong_count(&hits)), (1, 1), "ran, and its capture dropped");
        let h = Unsync(hits.clone());
        let unqueued = HeapTask::try_boxed(move || h.inc(10)).unwrap();
        // SAFETY: never queued, dropped once.
        unsafe { unqueued.drop_unrun() };
        assert_eq!((hits.get(), Rc::strong_count(&hits)), (1, 1), "not run, and its capture dropped");
    }
}
