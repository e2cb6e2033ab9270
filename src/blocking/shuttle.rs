//! Shuttle scenarios of the blocking pool (`make test-shuttle`; the platform is
//! `crate::shuttle`; README "Why nothing is lost"): submits from outside racing a thread that
//! goes idle, whose keep-alive expires (at once: the earliest, most racy case) or never does,
//! and shutdown. Each scenario waits for its tasks by blocking before it shuts the pool down,
//! so a task stranded with no thread to run it is a shuttle deadlock; then every task ran (or
//! was cancelled) exactly once and every thread left.

use core::ptr::NonNull;
use core::time::Duration;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::vec::Vec;

use shuttle::sync::{Condvar, Mutex};

use crate::shuttle::{check_pct, check_random, ShuttleSpawner, Timeouts};
use crate::task::Task;
use crate::{BlockingConfig, BlockingPool, BlockingTask, Error};

/// Blocking tasks that count their runs and cancels; a thread can wait for the total.
struct Jobs {
    jobs: Vec<Job>,
    done: Mutex<usize>,
    cond: Condvar,
}

#[repr(C)]
struct Job {
    header: BlockingTask,
    ran: AtomicUsize,
    cancelled: AtomicUsize,
    jobs: *const Jobs,
}

// SAFETY: a job's `jobs` points to the boxed `Jobs` that holds it (never moved once built).
unsafe impl Send for Jobs {}
// SAFETY: as above.
unsafe impl Sync for Jobs {}

fn job_of<'a>(task: *mut Task) -> &'a Job {
    // SAFETY: every task with these callbacks is the header of a `Job` (`repr(C)`, the task
    // first in the header) of a live `Jobs`, which the scenario keeps until after shutdown.
    unsafe { &*task.cast::<Job>() }
}

fn count(job: &Job) {
    // SAFETY: as `job_of`.
    let jobs = unsafe { &*job.jobs };
    *jobs.done.lock().unwrap() += 1;
    jobs.cond.notify_all();
}

unsafe extern "C" fn job_run(task: *mut Task) {
    let job = job_of(task);
    job.ran.fetch_add(1, Ordering::SeqCst);
    count(job);
}

unsafe extern "C" fn job_cancel(task: *mut Task) {
    let job = job_of(task);
    job.cancelled.fetch_add(1, Ordering::SeqCst);
    count(job);
}

impl Jobs {
    /// `n` cancellable jobs, the first `mandatory` of them mandatory.
    fn new(n: usize, mandatory: usize) -> Arc<Self> {
        let mut jobs = Arc::new(Self { jobs: Vec::with_capacity(n), done: Mutex::new(0), cond: Condvar::new() });
        let ptr: *const Jobs = Arc::as_ptr(&jobs);
        let list = &mut Arc::get_mut(&mut jobs).expect("not shared yet").jobs;
        for i in 0..n {
            let mut header = BlockingTask::new(job_run).with_cancel(job_cancel);
            if i < mandatory {
                header = header.mandatory();
            }
            list.push(Job { header, ran: AtomicUsize::new(0), cancelled: AtomicUsize::new(0), jobs: ptr });
        }
        jobs
    }

    fn submit(&self, pool: &BlockingPool<ShuttleSpawner>, i: usize) -> Result<(), Error> {
        // SAFETY: the jobs outlive the pool's use of them (kept until after shutdown); once.
        unsafe { pool.submit(NonNull::from(&self.jobs[i].header)) }
    }

    fn outcome(&self, i: usize) -> (usize, usize) {
        (self.jobs[i].ran.load(Ordering::SeqCst), self.jobs[i].cancelled.load(Ordering::SeqCst))
    }

    fn wait_for(&self, n: usize) {
        let mut done = self.done.lock().unwrap();
        while *done < n {
            done = self.cond.wait(done).unwrap();
        }
    }
}

fn pool(max_threads: usize, timeouts: Timeouts) -> Arc<BlockingPool<ShuttleSpawner>> {
    let config = BlockingConfig::new().with_max_threads(max_threads).with_keep_alive(Duration::from_secs(1));
    Arc::new(BlockingPool::with_spawner(config, ShuttleSpawner::new().with_timeouts(timeouts)).unwrap())
}

/// Two threads outside the pool submit two jobs each into a pool of `max_threads` whose idle
/// threads time out at once (`AtOnce`: a thread exits whenever it is not notified first) or
/// never (`Never`: an idle thread parks until notified). Every job runs exactly once before
/// shutdown: a submit that counted a thread which is leaving has that thread come back
/// (`leave`), or starts one; a thread going idle sees the queued job or is notified.
fn submits_racing_keep_alive(max_threads: usize, timeouts: Timeouts) {
    let pool = pool(max_threads, timeouts);
    let jobs = Jobs::new(4, 0);
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (pool, jobs) = (pool.clone(), jobs.clone());
            shuttle::thread::spawn(move || {
                for i in 2 * p..2 * p + 2 {
                    jobs.submit(&pool, i).unwrap();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    jobs.wait_for(4);
    pool.shutdown().unwrap();
    for i in 0..4 {
        assert_eq!(jobs.outcome(i), (1, 0), "job {i}");
    }
    let m = pool.metrics();
    assert_eq!((m.threads, m.idle_threads, m.queue_depth, m.tasks_run), (0, 0, 0, 4));
    assert_eq!(m.threads_spawned, m.threads_exited);
}

/// Three rounds on a pool of one thread whose keep-alive expires at once: a job submitted from
/// this thread and one from another thread, then a wait for both, so the thread goes idle and
/// exits at each round's end while the next round's submits race its exit (`leave`: a submit
/// that still counted the leaving thread started none, and the thread must come back).
fn rounds_racing_the_exit() {
    let pool = pool(1, Timeouts::AtOnce);
    let jobs = Jobs::new(6, 0);
    for round in 0..3 {
        let (p, j) = (pool.clone(), jobs.clone());
        let other = shuttle::thread::spawn(move || j.submit(&p, 2 * round + 1).unwrap());
        jobs.submit(&pool, 2 * round).unwrap();
        other.join().unwrap();
        jobs.wait_for(2 * round + 2);
    }
    pool.shutdown().unwrap();
    for i in 0..6 {
        assert_eq!(jobs.outcome(i), (1, 0), "job {i}");
    }
    assert_eq!(pool.metrics().threads, 0);
}

#[test]
fn shuttle_blocking_keep_alive() {
    check_pct("blocking_rounds_racing_the_exit", 60_000, 4, rounds_racing_the_exit);
    check_random("blocking_rounds_racing_the_exit", 40_000, rounds_racing_the_exit);
    check_pct("blocking_keep_alive_at_once_1", 60_000, 4, || submits_racing_keep_alive(1, Timeouts::AtOnce));
    check_pct("blocking_keep_alive_at_once_2", 60_000, 4, || submits_racing_keep_alive(2, Timeouts::AtOnce));
    check_pct("blocking_keep_alive_never_1", 60_000, 4, || submits_racing_keep_alive(1, Timeouts::Never));
    check_random("blocking_keep_alive_at_once_2", 20_000, || submits_racing_keep_alive(2, Timeouts::AtOnce));
}

/// Shutdown racing a submit from outside and the only thread's keep-alive exit: the mandatory
/// job runs, the other runs or is cancelled exactly once if accepted and is untouched if
/// refused, and every thread left.
fn shutdown_racing_submit_and_exit() {
    let pool = pool(1, Timeouts::AtOnce);
    let jobs = Jobs::new(2, 1);
    jobs.submit(&pool, 0).unwrap();
    let (p, j) = (pool.clone(), jobs.clone());
    let producer = shuttle::thread::spawn(move || j.submit(&p, 1));
    pool.shutdown().unwrap();
    let accepted = producer.join().unwrap();
    assert_eq!(jobs.outcome(0), (1, 0), "the mandatory job runs");
    match accepted {
        Ok(()) => {
            let (ran, cancelled) = jobs.outcome(1);
            assert_eq!(ran + cancelled, 1, "accepted job: ran {ran}, cancelled {cancelled}");
        }
        Err(Error::Shutdown) => assert_eq!(jobs.outcome(1), (0, 0)),
        Err(e) => panic!("{e:?}"),
    }
    let m = pool.metrics();
    assert_eq!((m.threads, m.idle_threads, m.queue_depth), (0, 0, 0));
    assert_eq!(m.threads_spawned, m.threads_exited);
}

#[test]
fn shuttle_blocking_shutdown_racing_submit_and_exit() {
    check_pct("blocking_shutdown_racing", 60_000, 4, shutdown_racing_submit_and_exit);
}
