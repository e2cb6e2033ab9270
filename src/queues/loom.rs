//! Loom models of a queue's admission on a whole one-thread pool (`crate::loom::LoomSpawner`):
//! a finishing task releasing its width slot racing a submit never strands a task and never
//! runs two at once (also with two threads); a cancel racing the task's start gives exactly one outcome,
//! also on a queue whose runners are tasks of a target queue; and a drop of such a queue racing
//! its runner's yield to a suspended target returns (under loom a runner's batch is one task);
//! a task's blocking submit to its own full serial queue is refused, not a wait for itself,
//! while an outside submit waits for a place the runner frees; a blocking submit to a full
//! handoff queue is woken by the running task's end.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --target-dir
//! target/loom --lib queues::loom`.

use core::ptr::NonNull;

use std::boxed::Box;

use loom::sync::atomic::{AtomicUsize, Ordering};

use super::{Queue, QueueConfig};
use crate::loom::{model, LoomSpawner};
use crate::{container_of, Config, Error, Task, ThreadPool};

#[repr(C)]
struct Job {
    task: Task,
    runs: AtomicUsize,
    active: &'static AtomicUsize,
}

unsafe extern "C" fn run(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` of a live `Job`.
    let job = unsafe { &*container_of!(task, Job, task) };
    assert_eq!(job.active.fetch_add(1, Ordering::SeqCst), 0, "two tasks of a serial queue at once");
    job.runs.fetch_add(1, Ordering::SeqCst);
    job.active.fetch_sub(1, Ordering::SeqCst);
}

fn job(active: &'static AtomicUsize) -> Box<Job> {
    Box::new(Job { task: Task::new(run), runs: AtomicUsize::new(0), active })
}

/// The job's task as a pointer to the whole job (its first field), from a shared borrow.
fn task(job: &Job) -> NonNull<Task> {
    NonNull::from(job).cast()
}

fn pool() -> ThreadPool<LoomSpawner> {
    pool_of(1)
}

fn pool_of(threads: usize) -> ThreadPool<LoomSpawner> {
    ThreadPool::with_spawner(Config { max_threads: threads, ..Config::default() }, LoomSpawner::new()).unwrap()
}

#[test]
fn finish_racing_submit_strands_nothing() {
    model("queues_finish_racing_submit", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool();
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let (a, b) = (job(active), job(active));
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe {
            queue.try_submit(task(&a)).unwrap();
            queue.try_submit(task(&b)).unwrap();
        }
        queue.wait().unwrap();
        assert_eq!((a.runs.load(Ordering::SeqCst), b.runs.load(Ordering::SeqCst)), (1, 1));
        drop(queue);
        pool.shutdown().unwrap();
    });
}

/// A serial handoff queue: a blocking submit while its one task may still run is accepted at
/// once if the task has ended, else woken by the runner's end (no task starts then, so only
/// the end frees the place): in every interleaving it returns and each task runs once.
#[test]
fn handoff_submit_racing_the_running_task_end() {
    model("queues_handoff_submit_racing_the_running_task_end", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool();
        let queue = Queue::new(&pool, QueueConfig::new(1).with_bound(QueueConfig::HANDOFF)).unwrap();
        let (a, b) = (job(active), job(active));
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe {
            queue.try_submit(task(&a)).unwrap();
            queue.submit_timeout(task(&b), None).unwrap();
        }
        queue.wait().unwrap();
        assert_eq!((a.runs.load(Ordering::SeqCst), b.runs.load(Ordering::SeqCst)), (1, 1));
        drop(queue);
        pool.shutdown().unwrap();
    });
}

#[test]
fn cancel_racing_start_has_one_outcome() {
    model("queues_cancel_racing_start", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool();
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let a = job(active);
        // SAFETY: the job outlives the queue's wait below.
        unsafe { queue.try_submit(task(&a)).unwrap() };
        let cancelled = queue.cancel(task(&a));
        queue.wait().unwrap();
        let runs = a.runs.load(Ordering::SeqCst);
        match cancelled {
            Ok(()) => assert_eq!(runs, 0, "cancelled, yet it ran"),
            Err(Error::Busy) => assert_eq!(runs, 1, "not cancelled, yet it never ran"),
            Err(e) => panic!("{e:?}"),
        }
        drop(queue);
        pool.shutdown().unwrap();
    });
}

#[test]
fn serial_queue_on_two_threads_runs_one_at_a_time() {
    model("queues_serial_on_two_threads", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool_of(2);
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let (a, b) = (job(active), job(active));
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe {
            queue.try_submit(task(&a)).unwrap();
            queue.try_submit(task(&b)).unwrap();
        }
        queue.wait().unwrap();
        assert_eq!((a.runs.load(Ordering::SeqCst), b.runs.load(Ordering::SeqCst)), (1, 1));
        drop(queue);
        pool.shutdown().unwrap();
    });
}

/// A serial queue on a serial target, each with one task, the first cancelled while the pool
/// may be starting it (through the target's runner): exactly one outcome, the target's own
/// task runs once, and the waits and drops return (the child's runner, queued on the target,
/// ends, and the target's count of queues on it goes back to 0).
#[test]
fn queue_on_a_target_cancel_racing_start() {
    model("queues_on_a_target_cancel_racing_start", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let other: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool();
        let target = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let child = Queue::with_target(&target, QueueConfig::new(1)).unwrap();
        let (a, b) = (job(active), job(other));
        // SAFETY: the jobs outlive the waits below.
        unsafe {
            child.try_submit(task(&a)).unwrap();
            target.try_submit(task(&b)).unwrap();
        }
        let cancelled = child.cancel(task(&a));
        child.wait().unwrap();
        target.wait().unwrap();
        let runs = a.runs.load(Ordering::SeqCst);
        match cancelled {
            Ok(()) => assert_eq!(runs, 0, "cancelled, yet it ran"),
            Err(Error::Busy) => assert_eq!(runs, 1, "not cancelled, yet it never ran"),
            Err(e) => panic!("{e:?}"),
        }
        assert_eq!(b.runs.load(Ordering::SeqCst), 1);
        drop(child);
        assert!(!target.has_children());
        drop(target);
        pool.shutdown().unwrap();
    });
}

/// A queue on a target, dropped while its runner may be yielding to the target: the runner
/// runs the first of two tasks, yields (a batch of one under loom) and links itself into the
/// target's list, which a narrowing to 0 has suspended, while the drop closes the queue and
/// takes back the runners it finds there. In every interleaving the drop returns (a runner
/// linked after the drop looked would never start: a hang, which loom reports), each task
/// runs once (the second by the runner or by the drop), and nothing of the queue stays on
/// the target.
#[test]
fn drop_racing_a_yield_to_a_suspended_target() {
    model("queues_drop_racing_a_yield_to_a_suspended_target", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool();
        let target = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let child = Queue::with_target(&target, QueueConfig::new(1)).unwrap();
        let (a, b) = (job(active), job(active));
        // SAFETY: the jobs outlive the child's drop, which runs what is left.
        unsafe {
            child.try_submit(task(&a)).unwrap();
            child.try_submit(task(&b)).unwrap();
        }
        target.set_width(0).unwrap();
        drop(child);
        assert_eq!((a.runs.load(Ordering::SeqCst), b.runs.load(Ordering::SeqCst)), (1, 1));
        assert_eq!(target.stats().waiting, 0, "a runner of the dropped queue left on the target");
        target.set_width(1).unwrap();
        target.wait().unwrap();
        drop(target);
        pool.shutdown().unwrap();
    });
}

/// A job that submits `child` to its own queue with a blocking submit when it runs, and
/// keeps the answer (1: queued, 2: refused as a wait for itself).
#[repr(C)]
struct Own {
    task: Task,
    queue: *const (),
    child: NonNull<Task>,
    answer: AtomicUsize,
    runs: AtomicUsize,
    active: &'static AtomicUsize,
}

unsafe extern "C" fn run_own(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` of a live `Own`.
    let own = unsafe { &*container_of!(task, Own, task) };
    assert_eq!(own.active.fetch_add(1, Ordering::SeqCst), 0, "two tasks of a serial queue at once");
    // SAFETY: the model's queue, alive while its tasks run (its type with the lifetime erased).
    let queue = unsafe { &*own.queue.cast::<Queue<'static, LoomSpawner>>() };
    // SAFETY: the child is a live job's task, queued nowhere.
    let answer = match unsafe { queue.submit_timeout(own.child, None) } {
        Ok(()) => 1,
        Err(Error::InvalidArgument) => 2,
        Err(e) => panic!("{e:?}"),
    };
    own.answer.store(answer, Ordering::SeqCst);
    own.runs.fetch_add(1, Ordering::SeqCst);
    own.active.fetch_sub(1, Ordering::SeqCst);
}

/// A serial queue bounded at one waiting task: its task submits a child with a blocking
/// submit while the main thread's blocking submit may be waiting for a place (woken by the
/// runner taking a task). With room the child is queued; finding the queue full, the task is
/// refused at once (only its own slot could free a place), with its place node unlinked. In
/// every interleaving each queued task runs once, one at a time, and every wait returns.
#[test]
fn own_task_submit_racing_a_waiting_submit() {
    model("queues_own_task_submit_racing_a_waiting_submit", || {
        let active: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let pool = pool();
        let queue = Queue::new(&pool, QueueConfig::new(1).with_bound(1)).unwrap();
        let (child, outside) = (job(active), job(active));
        let own = Box::new(Own {
            task: Task::new(run_own),
            queue: (&raw const queue).cast(),
            child: task(&child),
            answer: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
            active,
        });
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe {
            queue.try_submit(NonNull::from(&*own).cast()).unwrap();
            queue.submit_timeout(task(&outside), None).unwrap();
        }
        queue.wait().unwrap();
        let expected_child_runs = match own.answer.load(Ordering::SeqCst) {
            1 => 1,
            2 => 0,
            a => panic!("the task's submit answered {a}"),
        };
        assert_eq!(child.runs.load(Ordering::SeqCst), expected_child_runs);
        assert_eq!((own.runs.load(Ordering::SeqCst), outside.runs.load(Ordering::SeqCst)), (1, 1));
        drop(queue);
        pool.shutdown().unwrap();
    });
}
