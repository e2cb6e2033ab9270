//! Whole queues (one on a pool, one on a target queue) on a small pool, small enough for Miri (`cargo +nightly miri test --lib
//! queues::tests`): its raw pointers (runner slots reached from their task, tasks linked
//! through the list, waiters on other threads' stacks) under the aliasing model.

use core::ptr::NonNull;
use std::vec::Vec;

use crate::sync::{AtomicUsize, Ordering};
use crate::{container_of, Config, Error, Queue, QueueConfig, Task, ThreadPool};

/// `repr(C)`, task first: a task pointer is the job's.
#[repr(C)]
struct Job {
    task: Task,
    runs: AtomicUsize,
}

unsafe extern "C" fn run(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` of a live `Job`, derived from it.
    let job = unsafe { &*container_of!(task, Job, task) };
    job.runs.fetch_add(1, Ordering::SeqCst);
}

/// The task of job `i` as a pointer to the whole job (its first field), from a shared borrow:
/// the job's mutable parts are atomics, and no later borrow of `jobs` invalidates it.
fn task(jobs: &[Job], i: usize) -> NonNull<Task> {
    NonNull::from(&jobs[i]).cast()
}

#[test]
fn a_small_queue_runs_cancels_waits_and_drops() {
    let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    let jobs: Vec<Job> = (0..6).map(|_| Job { task: Task::new(run), runs: AtomicUsize::new(0) }).collect();
    let queue = Queue::new(&pool, QueueConfig::new(0).with_bound(5)).unwrap();
    for i in 0..5 {
        // SAFETY: the jobs outlive the queue.
        unsafe { queue.try_submit(task(&jobs, i)).unwrap() };
    }
    // SAFETY: as above.
    assert_eq!(unsafe { queue.try_submit(task(&jobs, 5)) }, Err(Error::Full));
    assert_eq!(queue.cancel(task(&jobs, 2)), Ok(()));
    assert_eq!(queue.cancel(task(&jobs, 2)), Err(Error::Busy));
    queue.set_width(2).unwrap();
    queue.wait().unwrap();
    // SAFETY: as above.
    unsafe { queue.try_submit(task(&jobs, 5)).unwrap() };
    drop(queue);
    let runs: Vec<usize> = jobs.iter().map(|j| j.runs.load(Ordering::SeqCst)).collect();
    assert_eq!(runs, [1, 1, 0, 1, 1, 1]);
    pool.shutdown().unwrap();
}

/// A queue on a target queue, for the pointers target queues add: a runner linked in the
/// target's list and run by the target's runner, one taken back by the drop from a suspended
/// target (`recall_runners`), and a yield through the target (more than a batch of tasks).
#[test]
fn a_queue_on_a_target_runs_yields_and_is_recalled() {
    let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    let n = super::inner::BATCH + 3;
    let jobs: Vec<Job> = (0..n + 2).map(|_| Job { task: Task::new(run), runs: AtomicUsize::new(0) }).collect();
    let target = Queue::new(&pool, QueueConfig::new(1)).unwrap();
    let child = Queue::with_target(&target, QueueConfig::new(1)).unwrap();
    for i in 0..n {
        // SAFETY: the jobs outlive the queues.
        unsafe { child.try_submit(task(&jobs, i)).unwrap() };
    }
    child.wait().unwrap();
    target.wait().unwrap();
    assert!(target.has_children());
    target.set_width(0).unwrap();
    for i in n..n + 2 {
        // SAFETY: as above.
        unsafe { child.try_submit(task(&jobs, i)).unwrap() };
    }
    assert_eq!(target.stats().waiting, 1, "the child's runner waits on the suspended target");
    drop(child);
    assert_eq!(target.stats().waiting, 0, "taken back by the drop");
    assert!(!target.has_children());
    drop(target);
    assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1), "each once (the last two by the drop)");
    pool.shutdown().unwrap();
}
