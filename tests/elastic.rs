//! The elastic pool (issue 27, item 3): `set_max_threads` lowering and raising the threads that
//! serve a live pool, racing submits, queues and width changes; `refresh_max_threads`
//! following the platform's parallelism.
//!
//! * Shrinking from 8 to 2 while 8 tasks block: once they end, at most 2 tasks run at once,
//!   the 6 surplus threads park outside the idle set (`Stats::surplus_threads`), and growing
//!   back to 8 lets 8 blocking tasks run at once again.
//! * `set_max_threads` flipping between 1 and 4 while two producers submit closures and a
//!   width-changing queue runs intrusive tasks: every task runs exactly once, each queue's
//!   tasks start in order, nothing is stranded (each phase under a watchdog), and `wait_idle`
//!   returns with surplus threads parked.
//! * `refresh_max_threads` reads a spawner whose parallelism changes.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{scaled_min, watchdog, watchdog_secs, ExactOnce, XorShift};
use pool::{Config, Error, FutexParker, Queue, QueueConfig, SpawnError, Spawner, ThreadPool, ThreadSpawner, ThreadStart};

/// Polls `cond` every millisecond for up to 10 s.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < until, "never: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Tasks that count themselves while they run and block until a gate opens.
#[derive(Default)]
struct Probe {
    active: AtomicUsize,
    most: AtomicUsize,
    done: AtomicUsize,
    open: AtomicBool,
}

impl Probe {
    fn run(&self, block: bool, hold: Duration) {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        while block && !self.open.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_micros(200));
        }
        thread::sleep(hold);
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

fn blockers(pool: &ThreadPool<ThreadSpawner>, probe: &Arc<Probe>, n: usize) {
    for _ in 0..n {
        let p = Arc::clone(probe);
        pool.spawn(move || p.run(true, Duration::ZERO)).unwrap();
    }
}

#[test]
fn shrinking_parks_the_surplus_and_growing_serves_again() {
    let _g = common::shared();
    watchdog("shrink and grow", watchdog_secs(60), |p| {
        let pool = ThreadPool::new(Config::default().with_max_threads(8).with_min_threads(8)).unwrap();
        assert_eq!((pool.max_threads(), pool.thread_limit()), (8, 8));
        p.stage("8 blockers");
        let first = Arc::new(Probe::default());
        blockers(&pool, &first, 8);
        eventually("8 blockers run at once on 8 threads", || first.active.load(Ordering::SeqCst) == 8);
        p.stage("shrink to 2");
        pool.set_max_threads(2).unwrap();
        assert_eq!((pool.max_threads(), pool.thread_limit()), (2, 8));
        let quick = Arc::new(Probe::default());
        let n = 60;
        for _ in 0..n {
            let q = Arc::clone(&quick);
            pool.spawn(move || q.run(false, Duration::from_micros(300))).unwrap();
        }
        first.open.store(true, Ordering::SeqCst);
        eventually("the quick tasks ran", || quick.done.load(Ordering::SeqCst) == n);
        assert!(quick.most.load(Ordering::SeqCst) <= 2, "{} quick tasks ran at once on 2 threads", quick.most.load(Ordering::SeqCst));
        assert_eq!(first.done.load(Ordering::SeqCst), 8);
        eventually("6 threads parked as surplus", || pool.stats().surplus_threads == 6);
        let stats = pool.stats();
        assert!(stats.threads == 8 && stats.idle_threads <= 2, "{stats:?}");
        pool.wait_idle().unwrap();
        p.stage("a shrunk pool still serves blocking work on its 2 threads");
        let two = Arc::new(Probe::default());
        blockers(&pool, &two, 4);
        eventually("2 blockers run", || two.active.load(Ordering::SeqCst) == 2);
        thread::sleep(Duration::from_millis(20));
        assert_eq!(two.active.load(Ordering::SeqCst), 2, "more than 2 tasks run on a pool of 2");
        p.stage("grow to 8");
        pool.set_max_threads(8).unwrap();
        eventually("4 blockers run once grown", || two.active.load(Ordering::SeqCst) == 4);
        let again = Arc::new(Probe::default());
        blockers(&pool, &again, 4);
        eventually("8 blockers run at once again", || two.active.load(Ordering::SeqCst) + again.active.load(Ordering::SeqCst) == 8);
        assert_eq!(pool.stats().surplus_threads, 0);
        two.open.store(true, Ordering::SeqCst);
        again.open.store(true, Ordering::SeqCst);
        pool.wait_idle().unwrap();
        assert_eq!((two.done.load(Ordering::SeqCst), again.done.load(Ordering::SeqCst)), (4, 4));
        assert_eq!(pool.set_max_threads(0), Err(Error::InvalidArgument));
        assert_eq!(pool.set_max_threads(9), Err(Error::InvalidArgument));
        pool.shutdown().unwrap();
        assert_eq!(pool.set_max_threads(1), Err(Error::Shutdown));
    });
}

/// A job of the racing test's queue: starts in order, counted once.
#[repr(C)]
struct Job {
    task: pool::Task,
    n: usize,
    next: Arc<AtomicUsize>,
    out_of_order: Arc<AtomicUsize>,
    counter: Arc<ExactOnce>,
}

unsafe extern "C" fn job_run(task: *mut pool::Task) {
    // SAFETY: every task with this callback is the first field of a `Job` (`repr(C)`).
    let job = unsafe { &*task.cast::<Job>() };
    if job.next.fetch_add(1, Ordering::SeqCst) != job.n {
        job.out_of_order.fetch_add(1, Ordering::SeqCst);
    }
    job.counter.hit(job.n);
}

#[test]
fn set_max_threads_racing_submits_queues_and_width_changes() {
    let _g = common::shared();
    let (n, jobs_n) = (scaled_min(20_000, 200), scaled_min(5_000, 100));
    watchdog("resize race", watchdog_secs(120), move |p| {
        let pool = ThreadPool::new(Config::default().with_max_threads(4)).unwrap();
        let counter = ExactOnce::new("closures", 2 * n);
        let queued = ExactOnce::new("queue", jobs_n);
        p.track(&counter);
        p.track(&queued);
        let next = Arc::new(AtomicUsize::new(0));
        let out_of_order = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<Job> = (0..jobs_n)
            .map(|i| Job {
                task: pool::Task::new(job_run),
                n: i,
                next: Arc::clone(&next),
                out_of_order: Arc::clone(&out_of_order),
                counter: Arc::clone(&queued),
            })
            .collect();
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let stop = AtomicBool::new(false);
        thread::scope(|s| {
            s.spawn(|| {
                let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15);
                while !stop.load(Ordering::SeqCst) {
                    pool.set_max_threads(1 + rng.below(4) as usize).unwrap();
                    // 0 or 1: a serial queue, so the start order is observable in the callbacks.
                    queue.set_width(rng.below(2) as usize).unwrap();
                    thread::sleep(Duration::from_micros(rng.below(300)));
                }
            });
            for half in 0..2 {
                let (pool, counter) = (&pool, &counter);
                s.spawn(move || {
                    for i in 0..n {
                        let c = Arc::clone(counter);
                        pool.spawn(move || c.hit(half * n + i)).unwrap();
                    }
                });
            }
            s.spawn(|| {
                for job in &jobs {
                    // SAFETY: the jobs outlive the queue's wait below; each is submitted once.
                    unsafe { queue.try_submit(std::ptr::NonNull::from(&job.task)) }.unwrap();
                }
            });
            p.stage("closures");
            counter.wait_total(2 * n);
            p.stage("queue");
            // A last width of 0 would hold the queue: the resizer stops, then widens it.
            stop.store(true, Ordering::SeqCst);
        });
        p.stage("queue after the race");
        queue.set_width(1).unwrap();
        queue.wait().unwrap();
        counter.assert_exactly(|_| true);
        queued.assert_exactly(|_| true);
        assert_eq!(out_of_order.load(Ordering::SeqCst), 0, "queue tasks started out of order");
        p.stage("idle with surplus threads parked");
        pool.set_max_threads(1).unwrap();
        pool.wait_idle().unwrap();
        drop(queue);
        pool.shutdown().unwrap();
        assert_eq!(pool.stats().threads, 0);
    });
}

/// A spawner whose parallelism the test sets.
struct Cpus {
    inner: ThreadSpawner<FutexParker>,
    cpus: Arc<AtomicUsize>,
}

// SAFETY: every call is forwarded to ThreadSpawner, which keeps the contract.
unsafe impl Spawner for Cpus {
    type Parker = FutexParker;
    fn new_parker(&self) -> FutexParker {
        self.inner.new_parker()
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.inner.join_all()
    }
    fn available_parallelism(&self) -> usize {
        self.cpus.load(Ordering::SeqCst)
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

#[test]
fn refresh_follows_the_platforms_parallelism() {
    let _g = common::shared();
    watchdog("refresh", watchdog_secs(30), |_| {
        let cpus = Arc::new(AtomicUsize::new(3));
        let pool = ThreadPool::with_spawner(Config::default(), Cpus { inner: ThreadSpawner::new(), cpus: Arc::clone(&cpus) }).unwrap();
        assert_eq!((pool.max_threads(), pool.thread_limit()), (3, 3), "the default: the platform's parallelism");
        cpus.store(1, Ordering::SeqCst);
        assert_eq!(pool.refresh_max_threads(), Ok(1));
        assert_eq!(pool.max_threads(), 1);
        cpus.store(64, Ordering::SeqCst);
        assert_eq!(pool.refresh_max_threads(), Ok(3), "capped by the thread limit");
        cpus.store(0, Ordering::SeqCst);
        assert_eq!(pool.refresh_max_threads(), Ok(1), "at least one");
        let ran = Arc::new(Mutex::new(0));
        let r = Arc::clone(&ran);
        pool.spawn(move || *r.lock().unwrap() += 1).unwrap();
        pool.wait_idle().unwrap();
        assert_eq!(*ran.lock().unwrap(), 1);
    });
}
