//! The queue tests' shared parts (`tests/queues.rs`, `tests/target_queues.rs`): blocking jobs
//! that record their starts and their concurrency, and the permits that release them.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use pool::{container_of, Config, Task, ThreadPool, ThreadSpawner};

/// `super::watchdog` (the test fails if `f` does not finish in `secs` seconds; a panic in it
/// is the test's), for bodies that need no progress counter.
pub fn watchdog<T: Send + 'static>(what: &'static str, secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    super::watchdog(what, super::watchdog_secs(secs), move |_| f())
}

/// Permits for blocking tasks: `pass` takes one (waiting for it), `open` adds some.
#[derive(Default)]
pub struct Gate {
    pub permits: Mutex<usize>,
    pub cv: Condvar,
}

impl Gate {
    pub fn pass(&self) {
        let mut p = self.permits.lock().unwrap();
        while *p == 0 {
            p = self.cv.wait(p).unwrap();
        }
        *p -= 1;
    }
    pub fn open(&self, n: usize) {
        *self.permits.lock().unwrap() += n;
        self.cv.notify_all();
    }
}

/// What the tasks of one test share.
#[derive(Default)]
pub struct Probe {
    pub active: AtomicUsize,
    pub max: AtomicUsize,
    pub started: Mutex<Vec<usize>>,
    pub gate: Gate,
}

#[repr(C)]
pub struct Job {
    pub task: Task,
    pub n: usize,
    /// Whether this job blocks on the gate.
    pub blocks: bool,
    pub runs: AtomicUsize,
    pub probe: Arc<Probe>,
}

/// A job's callback: counts it active, records its start, blocks on the gate if it must.
pub unsafe extern "C" fn run_job(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` of a live `Job` (derived from the job).
    let job = unsafe { &*container_of!(task, Job, task) };
    let p = &job.probe;
    let now = p.active.fetch_add(1, Ordering::SeqCst) + 1;
    p.max.fetch_max(now, Ordering::SeqCst);
    p.started.lock().unwrap().push(job.n);
    if job.blocks {
        p.gate.pass();
    }
    job.runs.fetch_add(1, Ordering::SeqCst);
    p.active.fetch_sub(1, Ordering::SeqCst);
}

/// `n` jobs numbered from 0 on `probe`; job `i` blocks if `blocks(i)`.
pub fn jobs(n: usize, probe: &Arc<Probe>, blocks: impl Fn(usize) -> bool) -> Vec<Job> {
    (0..n).map(|i| Job { task: Task::new(run_job), n: i, blocks: blocks(i), runs: AtomicUsize::new(0), probe: probe.clone() }).collect()
}

/// The task of job `i`, as a pointer to the whole job (the task is its first field), made from
/// a shared borrow: the callback reads the job through it, and the job's mutable parts are
/// atomics, so the test may go on borrowing `jobs` while tasks run (no unique reborrow
/// invalidates a queued task's pointer, under Miri's aliasing model).
pub fn task_of(jobs: &[Job], i: usize) -> NonNull<Task> {
    NonNull::from(&jobs[i]).cast()
}

/// Polls `cond` every millisecond for up to 5 s.
pub fn eventually(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < until, "never: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// A pool of `threads` OS threads.
pub fn pool(threads: usize) -> ThreadPool<ThreadSpawner> {
    ThreadPool::new(Config::default().with_max_threads(threads)).unwrap()
}
