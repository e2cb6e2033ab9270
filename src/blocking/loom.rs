//! Loom models of the blocking pool: submit vs idle-timeout exit vs shutdown, and spawn failure.
//!
//! The whole `BlockingPool` runs inside `loom::model` on a model platform defined here:
//! * `ModelParker`: a loom `Mutex<bool>` + `Condvar` token. `park` blocks until a token;
//!   `park_timeout` never blocks: loom has no time, so the keep-alive may expire at any
//!   moment, and the model makes it expire at once (the earliest, most racy case). With no
//!   clock on the model's platform, every return without a notification is a timeout, so the thread
//!   exits whenever it is not notified first: exactly the submit vs exit race.
//! * `ModelSpawner`: loom threads, the same join discipline as `ThreadSpawner` (handles
//!   recorded under a lock the new thread takes once before running), and a spawn budget to
//!   inject failures (and to keep the models within loom's thread limit).
//!
//! A lost wake-up or a stranded task shows up as a deadlock (the model waits for every
//! accepted task before shutting down), which loom reports; exactly-once is checked per task.
//!
//! Run: `make test-loom`.

use core::ptr::NonNull;
use core::time::Duration;

use std::vec::Vec;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread::JoinHandle;

use super::{BlockingConfig, BlockingPool, BlockingTask};
use crate::platform::{Parker, SpawnError, Spawner, ThreadStart};
use crate::{container_of, Error, Task};

/// A token parker on loom's mutex and condition variable; not tied to a thread, since the
/// pool's slots outlive the threads that use them.
#[derive(Debug, Default)]
struct ModelParker {
    token: Mutex<bool>,
    cond: Condvar,
    /// A keep-alive wait (`park_timeout` of [`KEEP_ALIVE`] or more) blocks like `park` (a
    /// keep-alive that never expires in the model), so a thread that parks while work waits and
    /// nobody notifies it is a loom deadlock. A shorter wait is a back-off nap (the drain's,
    /// waiting out a push between its announcement and its link): it still returns at once, as
    /// a nap does; blocking there would wait for an unpark that nobody owes.
    endless_timeout: bool,
}

impl Parker for ModelParker {
    fn park(&self) {
        let mut token = self.token.lock().unwrap();
        while !*token {
            token = self.cond.wait(token).unwrap();
        }
        *token = false;
    }

    fn park_timeout(&self, timeout: Duration) {
        if self.endless_timeout && timeout >= KEEP_ALIVE {
            return self.park();
        }
        // No time in loom: the timeout expires at once (early return is allowed).
        *self.token.lock().unwrap() = false;
        loom::thread::yield_now();
    }

    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cond.notify_one();
    }
}

loom::thread_local! {
    static CURRENT: std::cell::Cell<*const ()> = std::cell::Cell::new(std::ptr::null());
}

struct ModelSpawner {
    handles: Arc<Mutex<Vec<JoinHandle<()>>>>,
    budget: AtomicUsize,
    endless_timeout: bool,
}

impl ModelSpawner {
    /// Keep-alive expiring at once; at most `budget` thread starts.
    fn new(budget: usize) -> Self {
        Self { handles: Arc::new(Mutex::new(Vec::new())), budget: AtomicUsize::new(budget), endless_timeout: false }
    }

    /// Keep-alive never expiring: idle threads park until notified.
    fn endless(budget: usize) -> Self {
        Self { endless_timeout: true, ..Self::new(budget) }
    }
}

// SAFETY: `spawn` runs `start` once on a new loom thread iff it returns Ok; `join_all` joins
// every recorded handle, and a thread's handle is recorded before it runs the pool's code.
unsafe impl Spawner for ModelSpawner {
    type Parker = ModelParker;

    fn new_parker(&self) -> ModelParker {
        ModelParker { endless_timeout: self.endless_timeout, ..ModelParker::default() }
    }

    fn spawn(&self, start: ThreadStart, _stack_size: usize) -> Result<(), SpawnError> {
        let mut handles = self.handles.lock().unwrap();
        if self.budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1)).is_err() {
            return Err(SpawnError);
        }
        let gate = self.handles.clone();
        handles.push(loom::thread::spawn(move || {
            drop(gate.lock().unwrap());
            // SAFETY: handed to exactly one thread, run once.
            unsafe { start.run() }
        }));
        Ok(())
    }

    fn join_all(&self) {
        let handles = std::mem::take(&mut *self.handles.lock().unwrap());
        for h in handles {
            h.join().expect("a pool thread panicked");
        }
    }

    fn current_worker(&self) -> *const () {
        CURRENT.with(|c| c.get())
    }

    fn set_current_worker(&self, worker: *const ()) {
        CURRENT.with(|c| c.set(worker));
    }
}

/// Completion counter the model thread can block on (a stranded task = a loom deadlock).
#[derive(Default)]
struct Done {
    n: Mutex<usize>,
    cond: Condvar,
}

impl Done {
    fn add(&self) {
        *self.n.lock().unwrap() += 1;
        self.cond.notify_all();
    }
    fn wait_for(&self, n: usize) {
        let mut g = self.n.lock().unwrap();
        while *g < n {
            g = self.cond.wait(g).unwrap();
        }
    }
}

#[repr(C)]
struct Job {
    header: BlockingTask,
    ran: AtomicUsize,
    cancelled: AtomicUsize,
    done: Arc<Done>,
}

unsafe extern "C" fn job_run(task: *mut Task) {
    // SAFETY: every task with this callback is the header of a live `Job`.
    let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), Job, header) };
    job.ran.fetch_add(1, Ordering::Relaxed);
    job.done.add();
}

unsafe extern "C" fn job_cancel(task: *mut Task) {
    // SAFETY: as `job_run`.
    let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), Job, header) };
    job.cancelled.fetch_add(1, Ordering::Relaxed);
    job.done.add();
}

fn job(done: &Arc<Done>, mandatory: bool) -> Arc<Job> {
    let mut header = BlockingTask::new(job_run).with_cancel(job_cancel);
    if mandatory {
        header = header.mandatory();
    }
    Arc::new(Job { header, ran: AtomicUsize::new(0), cancelled: AtomicUsize::new(0), done: done.clone() })
}

fn submit(pool: &BlockingPool<ModelSpawner>, job: &Arc<Job>) -> Result<(), Error> {
    // SAFETY: the job is kept alive (Arc) until the model ends, after shutdown.
    unsafe { pool.submit(NonNull::from(&job.header)) }
}

fn outcome(job: &Job) -> (usize, usize) {
    (job.ran.load(Ordering::Relaxed), job.cancelled.load(Ordering::Relaxed))
}

/// The models' keep-alive.
const KEEP_ALIVE: Duration = Duration::from_secs(1);

fn config() -> BlockingConfig {
    BlockingConfig::new().with_max_threads(1).with_keep_alive(KEEP_ALIVE)
}

/// A task submitted from another thread while the only thread runs, idles and exits on
/// timeout: it is always run (the exiting thread comes back, or a new one starts).
#[test]
fn submit_vs_idle_timeout_exit() {
    loom::model(|| {
        let pool = Arc::new(BlockingPool::with_spawner(config(), ModelSpawner::new(2)).unwrap());
        let done = Arc::new(Done::default());
        let (a, b) = (job(&done, false), job(&done, false));
        submit(&pool, &a).unwrap();
        let s = {
            let (pool, b) = (pool.clone(), b.clone());
            loom::thread::spawn(move || submit(&pool, &b))
        };
        let accepted = s.join().unwrap();
        // With a budget of two starts, B is always accepted: a thread exists or can start.
        assert_eq!(accepted, Ok(()));
        done.wait_for(2);
        pool.shutdown().unwrap();
        assert_eq!((outcome(&a), outcome(&b)), ((1, 0), (1, 0)));
        let m = pool.metrics();
        assert_eq!((m.threads, m.idle_threads, m.queue_depth, m.tasks_run), (0, 0, 0, 2));
        assert_eq!(m.threads_spawned, m.threads_exited);
    });
}

/// A task submitted while the only thread (cap 1) goes idle with a keep-alive that never
/// expires: the thread must see the task before it parks, or be notified; parking past it
/// would never end (a loom deadlock). Then shutdown must wake the idle thread.
#[test]
fn submit_vs_going_idle() {
    loom::model(|| {
        let pool = Arc::new(BlockingPool::with_spawner(config(), ModelSpawner::endless(1)).unwrap());
        let done = Arc::new(Done::default());
        let (a, b) = (job(&done, false), job(&done, false));
        submit(&pool, &a).unwrap();
        let s = {
            let (pool, b) = (pool.clone(), b.clone());
            loom::thread::spawn(move || submit(&pool, &b))
        };
        assert_eq!(s.join().unwrap(), Ok(()));
        done.wait_for(2);
        pool.shutdown().unwrap();
        assert_eq!((outcome(&a), outcome(&b)), ((1, 0), (1, 0)));
        let m = pool.metrics();
        assert_eq!((m.threads, m.idle_threads, m.queue_depth, m.threads_spawned), (0, 0, 0, 1));
    });
}

/// Shutdown racing a submit and the thread's timeout exit: every accepted task runs or is
/// handed back exactly once (mandatory ones run), refused ones are untouched, and every
/// thread is joined.
#[test]
fn shutdown_vs_submit_vs_exit() {
    loom::model(|| {
        let pool = Arc::new(BlockingPool::with_spawner(config(), ModelSpawner::new(2)).unwrap());
        let done = Arc::new(Done::default());
        let (a, b) = (job(&done, true), job(&done, false));
        submit(&pool, &a).unwrap();
        let s = {
            let (pool, b) = (pool.clone(), b.clone());
            loom::thread::spawn(move || submit(&pool, &b))
        };
        pool.shutdown().unwrap();
        let accepted = s.join().unwrap();
        assert_eq!(outcome(&a), (1, 0), "the mandatory task runs");
        match accepted {
            Ok(()) => {
                let (ran, cancelled) = outcome(&b);
                assert_eq!(ran + cancelled, 1, "accepted task: ran {ran}, cancelled {cancelled}");
            }
            Err(Error::Shutdown) => assert_eq!(outcome(&b), (0, 0)),
            Err(e) => panic!("{e:?}"),
        }
        let m = pool.metrics();
        assert_eq!((m.threads, m.idle_threads, m.queue_depth), (0, 0, 0));
        assert_eq!(m.threads_spawned, m.threads_exited);
    });
}

/// A second submit from another thread, after a first one from this thread, on a pool built
/// with `config` and `spawner`: accepted, or refused with `refusal` (then untouched); an
/// accepted task is never stranded, and the pool ends with no thread and an empty queue.
fn second_submit_accepted_or(config: BlockingConfig, spawner: ModelSpawner, refusal: Error) {
    let pool = Arc::new(BlockingPool::with_spawner(config, spawner).unwrap());
    let done = Arc::new(Done::default());
    let (a, b) = (job(&done, false), job(&done, false));
    submit(&pool, &a).unwrap();
    let s = {
        let (pool, b) = (pool.clone(), b.clone());
        loom::thread::spawn(move || submit(&pool, &b))
    };
    let accepted = s.join().unwrap();
    match accepted {
        Ok(()) => done.wait_for(2),
        Err(e) if e == refusal => done.wait_for(1),
        Err(e) => panic!("{e:?}"),
    }
    pool.shutdown().unwrap();
    assert_eq!(outcome(&a), (1, 0));
    assert_eq!(outcome(&b), if accepted.is_ok() { (1, 0) } else { (0, 0) });
    let m = pool.metrics();
    assert_eq!((m.threads, m.queue_depth), (0, 0));
}

/// Only one thread can ever start: a second submit either finds that thread (it comes back
/// from its exit if needed) or, with no thread left, is refused with `Spawn`.
#[test]
fn spawn_failure_vs_exit() {
    loom::model(|| second_submit_accepted_or(config(), ModelSpawner::new(1), Error::Spawn));
}

/// A bounded queue (one place): a submit racing the thread that takes the first task is
/// accepted (the place was freed) or refused with `Full`, never anything else.
#[test]
fn bounded_submit_vs_take() {
    loom::model(|| second_submit_accepted_or(config().with_max_queued(1), ModelSpawner::endless(1), Error::Full));
}

/// A task that holds the pool's thread: says it has started, then waits to be let go.
#[repr(C)]
struct GateJob {
    header: BlockingTask,
    entered: Arc<Done>,
    open: Arc<Done>,
}

unsafe extern "C" fn gate_run(task: *mut Task) {
    // SAFETY: every task with this callback is the header of a live `GateJob`.
    let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), GateJob, header) };
    job.entered.add();
    job.open.wait_for(1);
}

/// A bounded queue (one place) while the only thread is held: two submits racing for the
/// place, exactly one is accepted and the other refused with `Full`, untouched; the
/// accepted one runs once the thread is free.
#[test]
fn bounded_submits_race_for_one_place() {
    loom::model(|| {
        let pool = Arc::new(BlockingPool::with_spawner(config().with_max_queued(1), ModelSpawner::endless(1)).unwrap());
        let (entered, open) = (Arc::new(Done::default()), Arc::new(Done::default()));
        let gate = Arc::new(GateJob { header: BlockingTask::new(gate_run).mandatory(), entered: entered.clone(), open: open.clone() });
        // SAFETY: kept alive (Arc) until the model ends, after shutdown.
        unsafe { pool.submit(NonNull::from(&gate.header)) }.unwrap();
        entered.wait_for(1);
        let done = Arc::new(Done::default());
        let (b, c) = (job(&done, false), job(&done, false));
        let s = {
            let (pool, b) = (pool.clone(), b.clone());
            loom::thread::spawn(move || submit(&pool, &b))
        };
        let rc = submit(&pool, &c);
        let rb = s.join().unwrap();
        assert!(matches!((rb, rc), (Ok(()), Err(Error::Full)) | (Err(Error::Full), Ok(()))), "{rb:?} {rc:?}");
        open.add();
        done.wait_for(1);
        pool.shutdown().unwrap();
        assert_eq!(outcome(&b), if rb.is_ok() { (1, 0) } else { (0, 0) });
        assert_eq!(outcome(&c), if rc.is_ok() { (1, 0) } else { (0, 0) });
    });
}
