//! The loom models' platform (test-only: `cfg(all(test, loom))`). The models themselves live
//! in a `loom` module beside the code each one checks (`queue/ring/loom.rs`,
//! `scheduler/sleep/loom.rs`, ...) and use the crate's own types; what they share is here:
//!
//! * [`LoomSpawner`] and [`LoomParker`]: a [`Spawner`] on loom threads, so a whole
//!   [`ThreadPool`](crate::ThreadPool) runs inside `loom::model`; with a model clock
//!   ([`LoomSpawner::with_clock`]) for the timer models.
//! * [`Tasks`]: no-op tasks for the queue models, mapped back to their index; [`Job`]: a
//!   task that counts its runs, for the whole-pool models.
//! * [`model`] and [`model_with_bound`]: `loom::model` that reports how many executions it
//!   explored.
//!
//! Run them with `make test-loom` (`RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
//! --release --target-dir target/loom --lib loom`).

use core::cell::Cell;
use core::ptr::NonNull;

use std::boxed::Box;
use std::vec::Vec;
use std::vec;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread::JoinHandle;

use crate::platform::{Parker, SpawnError, Spawner, ThreadStart};
use crate::container_of;
use crate::task::{Batch, Task};

/// A parker from loom's `Mutex<bool>` (the token) and `Condvar`, like the std
/// `CondvarParker`.
///
/// (Not loom's `thread::park`/`Thread::unpark`: in loom an unpark that reaches a thread blocked
/// on something else, a mutex or a join, makes it runnable and is then lost, which no real
/// parker does.)
///
/// Without a clock (`LoomSpawner::new`) a `park_timeout` returns at once. With one
/// (`LoomSpawner::with_clock`) it blocks until unparked or until the model moves the clock past
/// its deadline ([`LoomSpawner::advance_to`]), as a real timed park does; a timeout shorter
/// than one wheel tick (a back-off pause, not a timer) still returns at once.
#[derive(Debug)]
pub(crate) struct LoomParker {
    state: std::sync::Arc<ParkerState>,
    clock: Option<std::sync::Arc<LoomClock>>,
}

#[derive(Debug)]
struct ParkerState {
    token: Mutex<bool>,
    cond: loom::sync::Condvar,
}

impl Default for LoomParker {
    fn default() -> Self {
        Self::new(None)
    }
}

impl LoomParker {
    fn new(clock: Option<std::sync::Arc<LoomClock>>) -> Self {
        let state = std::sync::Arc::new(ParkerState { token: Mutex::new(false), cond: loom::sync::Condvar::new() });
        if let Some(clock) = &clock {
            clock.parkers.lock().unwrap().push(state.clone());
        }
        Self { state, clock }
    }
}

impl Parker for LoomParker {
    fn park(&self) {
        let mut token = self.state.token.lock().unwrap();
        while !*token {
            token = self.state.cond.wait(token).unwrap();
        }
        *token = false;
    }

    fn park_timeout(&self, timeout: core::time::Duration) {
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        match &self.clock {
            Some(clock) if timeout_ns >= crate::timer::wheel::TICK_NS => {
                // From this thread's last clock reading, the one the caller computed `timeout`
                // from: the model's time moves in jumps, so measuring from `now` here would
                // push the deadline past a jump made in between and the park would miss it.
                let deadline = LAST_READING.with(Cell::get).saturating_add(timeout_ns);
                let mut token = self.state.token.lock().unwrap();
                // `advance_to` stores the time, then takes this lock to notify: a deadline it
                // passed is seen here, or its notify finds us waiting.
                while !*token && clock.now() < deadline {
                    token = self.state.cond.wait(token).unwrap();
                }
                *token = false;
            }
            _ => {
                // A timeout may expire at any moment: model it as at once (allowed: returning
                // early is in the contract), consuming a token if there is one.
                *self.state.token.lock().unwrap() = false;
                loom::thread::yield_now();
            }
        }
    }

    fn unpark(&self) {
        *self.state.token.lock().unwrap() = true;
        self.state.cond.notify_one();
    }
}

/// The model's clock (`LoomSpawner::with_clock`): nanoseconds, moved only by the model. Kept
/// outside loom's view (a std atomic): it is the world's time, not part of the protocol under
/// test; what the protocol does with a reading goes through the pool's own atomics.
#[derive(Debug, Default)]
struct LoomClock {
    now: std::sync::atomic::AtomicU64,
    /// Every parker made by the spawner, to wake those whose deadline passes.
    parkers: std::sync::Mutex<Vec<std::sync::Arc<ParkerState>>>,
}

impl LoomClock {
    fn now(&self) -> u64 {
        self.now.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `now`, remembered as this thread's last reading (`park_timeout`).
    fn read(&self) -> u64 {
        let now = self.now();
        LAST_READING.with(|c| c.set(now));
        now
    }
}

loom::thread_local! {
    static CURRENT_WORKER: Cell<*const ()> = Cell::new(core::ptr::null());
    /// This thread's last reading of the model clock.
    static LAST_READING: Cell<u64> = Cell::new(0);
}

/// A [`Spawner`] on loom threads, with the same join discipline as the OS `ThreadSpawner`:
/// `spawn` holds the handle list locked while it starts the thread and records the handle, and
/// the new thread takes that lock once before running, so by the time a thread can tell the
/// pool it is leaving, its handle is recorded and `join_all` joins it.
#[derive(Debug)]
pub(crate) struct LoomSpawner {
    handles: loom::sync::Arc<Mutex<Vec<JoinHandle<()>>>>,
    spawned: AtomicUsize,
    joined: AtomicUsize,
    /// The model's clock, if it has one (`now_ns` is `None` otherwise).
    clock: Option<std::sync::Arc<LoomClock>>,
}

impl LoomSpawner {
    pub(crate) fn new() -> Self {
        Self {
            handles: loom::sync::Arc::new(Mutex::new(Vec::new())),
            spawned: AtomicUsize::new(0),
            joined: AtomicUsize::new(0),
            clock: None,
        }
    }

    /// A spawner with a model clock at 0 ns: `now_ns` reads it, and a timed park blocks until
    /// [`advance_to`](Self::advance_to) passes its deadline (timer models).
    pub(crate) fn with_clock() -> Self {
        Self { clock: Some(std::sync::Arc::default()), ..Self::new() }
    }

    /// Moves the model clock forward to `ns` and wakes every timed park whose deadline passed
    /// (each re-checks its own deadline). Panics without a clock.
    pub(crate) fn advance_to(&self, ns: u64) {
        let clock = self.clock.as_ref().expect("a LoomSpawner::with_clock");
        clock.now.fetch_max(ns, std::sync::atomic::Ordering::SeqCst);
        let parkers = clock.parkers.lock().unwrap().clone();
        for p in parkers {
            let _token = p.token.lock().unwrap();
            p.cond.notify_all();
        }
    }

    /// Threads started so far.
    pub(crate) fn spawned(&self) -> usize {
        self.spawned.load(Ordering::Acquire)
    }

    /// Threads joined by `join_all` so far.
    pub(crate) fn joined(&self) -> usize {
        self.joined.load(Ordering::Acquire)
    }

    /// Handles recorded and not yet joined.
    pub(crate) fn unjoined(&self) -> usize {
        self.handles.lock().unwrap().len()
    }
}

// SAFETY: `spawn` runs `start` once on a new loom thread iff it returns Ok; `join_all` joins
// every recorded handle, and the gate (see the type's docs) makes sure a thread's handle is
// recorded before the thread runs the pool's code; the current-worker slot is a loom
// thread-local.
unsafe impl Spawner for LoomSpawner {
    type Parker = LoomParker;

    fn new_parker(&self) -> LoomParker {
        LoomParker::new(self.clock.clone())
    }

    fn spawn(&self, start: ThreadStart, _stack_size: usize) -> Result<(), SpawnError> {
        let mut handles = self.handles.lock().unwrap();
        let gate = self.handles.clone();
        let handle = loom::thread::spawn(move || {
            drop(gate.lock().unwrap());
            // SAFETY: handed to exactly one thread, run once.
            unsafe { start.run() }
        });
        handles.push(handle);
        self.spawned.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn join_all(&self) {
        let handles = core::mem::take(&mut *self.handles.lock().unwrap());
        for handle in handles {
            handle.join().expect("a pool thread panicked");
            self.joined.fetch_add(1, Ordering::Release);
        }
    }

    fn current_worker(&self) -> *const () {
        CURRENT_WORKER.with(Cell::get)
    }

    fn set_current_worker(&self, worker: *const ()) {
        CURRENT_WORKER.with(|c| c.set(worker));
    }

    fn now_ns(&self) -> Option<u64> {
        self.clock.as_ref().map(|c| c.read())
    }
}

/// A fixed set of no-op tasks for queue models: hands out pointers and maps them back to their
/// index, so a model can count that every task came out exactly once.
#[derive(Debug)]
pub(crate) struct Tasks {
    tasks: Box<[Task]>,
}

unsafe extern "C" fn never_run(_: *mut Task) {
    unreachable!("queue-model tasks are only moved around, never run");
}

impl Tasks {
    pub(crate) fn new(n: usize) -> Self {
        Self { tasks: (0..n).map(|_| Task::new(never_run)).collect() }
    }

    /// Task `i` as the pointer the queues take. The queues write only its atomic `next`.
    pub(crate) fn ptr(&self, i: usize) -> NonNull<Task> {
        NonNull::from(&self.tasks[i])
    }

    /// The index of a task pointer that came out of a queue; panics on anything else (a
    /// garbage pointer, the injector's stub).
    pub(crate) fn index_of(&self, task: NonNull<Task>) -> usize {
        let base = self.tasks.as_ptr() as usize;
        let addr = task.as_ptr() as usize;
        let size = core::mem::size_of::<Task>();
        assert!(
            addr >= base && addr < base + self.tasks.len() * size && (addr - base) % size == 0,
            "a queue returned a pointer that is not one of the model's tasks: {task:?}"
        );
        (addr - base) / size
    }

    /// A batch of the tasks `range`, in order.
    pub(crate) fn batch(&self, range: core::ops::Range<usize>) -> Batch {
        let mut b = Batch::new();
        for i in range {
            // SAFETY: the model hands each task to one queue at a time; `self` outlives it.
            unsafe { b.push(self.ptr(i)) };
        }
        b
    }
}

/// A task that counts its runs (under a lock, with a condvar to wait on): the whole-pool
/// models' task (`scheduler/park/loom.rs`, `scheduler/driver/loom.rs`).
#[repr(C)]
pub(crate) struct Job {
    pub(crate) task: Task,
    runs: Mutex<usize>,
    ran: Condvar,
}

pub(crate) unsafe extern "C" fn run_job(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a `Job` the model keeps
    // alive until the pool is shut down.
    let job = unsafe { &*container_of!(task, Job, task) };
    *job.runs.lock().unwrap() += 1;
    job.ran.notify_all();
}

pub(crate) fn job() -> Arc<Job> {
    Arc::new(Job { task: Task::new(run_job), runs: Mutex::new(0), ran: Condvar::new() })
}

pub(crate) fn runs(job: &Job) -> usize {
    *job.runs.lock().unwrap()
}

/// Blocks until `job` ran. A job that never runs (a timer nobody fires) leaves this thread
/// blocked for good: with every other thread blocked too, loom reports a deadlock.
pub(crate) fn wait_until_ran(job: &Job) {
    let mut runs = job.runs.lock().unwrap();
    while *runs == 0 {
        runs = job.ran.wait(runs).unwrap();
    }
}

/// Asserts that `seen` holds every index below `n` exactly once (the queue models' count of
/// tasks or jobs).
pub(crate) fn assert_exactly_once(n: usize, seen: &[usize]) {
    let mut flags = vec![0u32; n];
    for &i in seen {
        flags[i] += 1;
    }
    for (i, &f) in flags.iter().enumerate() {
        assert_eq!(f, 1, "task {i} came out {f} times (seen: {seen:?})");
    }
}

/// `loom::model(f)`, printing how many executions loom explored and how long it took (shown
/// with `--nocapture`; the numbers the models' docs quote come from here).
pub(crate) fn model<F>(name: &str, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    model_with(name, loom::model::Builder::new(), f);
}

/// [`model`] with at most `bound` preemptions whatever `LOOM_MAX_PREEMPTIONS` says: for a model
/// too large to finish at the suite's bound (its docs say what the lower bound still covers).
pub(crate) fn model_with_bound<F>(name: &str, bound: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound.min(builder.preemption_bound.unwrap_or(bound)));
    // Such models run long executions (a whole pool handing roles around): more than loom's
    // default 1,000 branches in one execution is not an endless spin there.
    builder.max_branches = builder.max_branches.max(5_000);
    model_with(name, builder, f);
}

fn model_with<F>(name: &str, builder: loom::model::Builder, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
    let runs = std::sync::Arc::new(StdAtomicUsize::new(0));
    let counter = runs.clone();
    let start = std::time::Instant::now();
    builder.check(move || {
        counter.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    std::eprintln!(
        "loom model {name}: {} executions in {:.2?}",
        runs.load(StdOrdering::Relaxed),
        start.elapsed()
    );
}
