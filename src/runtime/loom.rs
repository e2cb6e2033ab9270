//! Internals for the loom models in `tests/loom_runtime.rs` (only under `--cfg loom`; not API).
//!
//! The models check the task state machine (`state.rs`, driven by `harness.rs`) itself, not the pool: a [`ManualQueue`]
//! is a [`Schedule`] whose queue the model's threads drain by hand (`run_one`), so each model
//! chooses which thread polls, wakes, aborts or drops the handle, and loom explores the
//! interleavings of exactly those operations on the real state word, join slot and stage
//! (loom's `UnsafeCell` reports any access the ownership rules in `header.rs` do not order).
#![allow(missing_docs, missing_debug_implementations, unreachable_pub, clippy::missing_safety_doc)]

extern crate std;

use core::future::Future;
use core::ptr::NonNull;
use core::task::Waker;

use std::collections::VecDeque;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};

use super::header::{Header, Schedule};
use super::{harness, waker};
use super::JoinHandle;
use crate::latch::Signal;
use crate::task::Task;

struct Queued(NonNull<Task>);
// SAFETY: a queued task is handed between loom threads by the queue.
unsafe impl Send for Queued {}

/// A queue of tasks that the model runs by hand.
pub struct ManualQueue {
    queue: Mutex<VecDeque<Queued>>,
    closed: AtomicBool,
    /// Tasks allocated and not yet freed.
    live: AtomicUsize,
    /// Times a task was queued.
    scheduled: AtomicUsize,
}

impl ManualQueue {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            scheduled: AtomicUsize::new(0),
        })
    }

    /// Runs the oldest queued task, if any.
    pub fn run_one(&self) -> bool {
        let task = self.queue.lock().unwrap().pop_front();
        match task {
            Some(Queued(task)) => {
                // SAFETY: dequeued, so this is its one run.
                unsafe { Task::run(task) };
                true
            }
            None => false,
        }
    }

    /// Runs queued tasks until the queue is empty.
    pub fn run_all(&self) {
        while self.run_one() {}
    }

    /// Refuse further tasks, and cancel those that come up to run (as a pool's shutdown).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub fn len(&self) -> usize {
        self.queue.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    pub fn scheduled(&self) -> usize {
        self.scheduled.load(Ordering::Acquire)
    }
}

// SAFETY: `schedule` queues the task for exactly one `run_one`, or refuses it (closed); the
// queue lives until every task released its `Arc` reference.
unsafe impl Schedule for ManualQueue {
    unsafe fn schedule(sched: NonNull<()>, task: NonNull<Task>, _lifo: bool) -> Result<(), ()> {
        // SAFETY: a task holds an Arc reference on the queue.
        let q = unsafe { sched.cast::<ManualQueue>().as_ref() };
        if q.closed.load(Ordering::Acquire) {
            return Err(());
        }
        q.scheduled.fetch_add(1, Ordering::Relaxed);
        q.queue.lock().unwrap().push_back(Queued(task));
        Ok(())
    }

    unsafe fn is_closed(sched: NonNull<()>) -> bool {
        // SAFETY: as above.
        unsafe { sched.cast::<ManualQueue>().as_ref() }.closed.load(Ordering::Acquire)
    }

    /// Helps while there is queued work, then parks until the signal is set (so a model's
    /// blocking `join` registers a parker in the join signal, as a pool's wait does; another
    /// thread of the model must then run the task).
    unsafe fn wait(sched: NonNull<()>, signal: &Signal) {
        // SAFETY: as above.
        let q = unsafe { sched.cast::<ManualQueue>().as_ref() };
        while !signal.is_set() {
            if !q.run_one() {
                signal.park_until_set(&crate::loom_support::LoomParker::default());
                return;
            }
        }
    }

    unsafe fn release(sched: NonNull<()>) {
        let q = sched.cast::<ManualQueue>();
        // SAFETY: as above.
        unsafe { q.as_ref() }.live.fetch_sub(1, Ordering::Release);
        // SAFETY: the task's reference, from `Arc::into_raw` in `spawn`.
        drop(unsafe { Arc::from_raw(q.as_ptr().cast_const()) });
    }
}

/// Spawns `future` onto this queue (queued, not yet polled).
pub fn spawn<F>(q: &Arc<ManualQueue>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    q.live.fetch_add(1, Ordering::Relaxed);
    let sched = NonNull::new(Arc::into_raw(q.clone()).cast_mut()).unwrap().cast::<()>();
    let header = harness::allocate::<F, ManualQueue>(future, sched);
    // SAFETY: a fresh task: SCHEDULED with the queue's reference.
    unsafe { ManualQueue::schedule(sched, Header::task(header), true) }.unwrap();
    // SAFETY: output type F::Output; the handle takes the handle's reference.
    unsafe { JoinHandle::from_raw(header) }
}

/// A waker for a task from its JoinHandle side (for models that wake a task from outside
/// without a poll having handed out a waker).
pub fn waker_of<T>(handle: &JoinHandle<T>) -> Waker {
    // SAFETY: the handle holds a reference for the call; the waker takes its own.
    unsafe { waker::waker(handle.header()) }
}
