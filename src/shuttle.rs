//! The model platform of the shuttle scenarios (`mod shuttle` beside the code they exercise,
//! `make test-shuttle`): a whole pool runs on shuttle threads, which shuttle schedules one at
//! a time under a randomised scheduler (PCT, or uniformly random), so a run explores one
//! interleaving of every atomic access, lock and park, and a failure replays from its seed.
//! Compiled only under `cfg(all(test, shuttle))`.
//!
//! * [`ShuttleParker`]: a token on shuttle's `Mutex<bool>` and `Condvar`, so a parked worker is
//!   a blocked shuttle thread: when every thread is blocked shuttle reports a deadlock, which is
//!   how a lost wake-up shows. `park_timeout` follows [`Timeouts`]: a back-off pause (under one
//!   wheel tick) returns at once; a longer timeout with a model clock waits until the clock
//!   passes its deadline, and without one expires at once or never, as the scenario says.
//! * [`ShuttleSpawner`]: shuttle threads, joined by `join_all` (the handle is recorded under a
//!   lock the new thread takes before it runs the pool's code, as `ThreadSpawner` does), and
//!   the current-worker slot in a shuttle thread-local.
//! * [`ShuttleClock`]: nanoseconds that only the scenario moves ([`ShuttleSpawner::advance_to`]).
//! * [`Tally`]: tasks that count their runs, and a wait for all of them that blocks (so a task
//!   that never runs is a deadlock, not a spin).
//! * [`check_pct`], [`check_random`]: shuttle's schedulers with this crate's settings; the
//!   iterations scale with `POOL_SHUTTLE_SCALE`, the seed is fixed (`SHUTTLE_RANDOM_SEED`
//!   overrides it), and each run prints its iterations and time.
//!
//! Shuttle is sequentially consistent (every access SeqCst, fences no-ops): these scenarios look
//! for interleavings, with as many preemptions as PCT's depth allows; orderings are loom's.

use core::cell::Cell;
use core::ptr::NonNull;
use core::time::Duration;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::Arc;
use std::vec::Vec;

use shuttle::sync::{Condvar, Mutex};
use shuttle::thread::JoinHandle;

use crate::platform::{Parker, SpawnError, Spawner, ThreadStart};
use crate::task::Task;

/// Timeouts shorter than this are back-off pauses (`sync::Backoff`), not timers: they return at
/// once, consuming a token if there is one (returning early is in `Parker`'s contract).
const PAUSE_NS: u64 = crate::timer::wheel::TICK_NS;

/// What a long `park_timeout` does on a platform without a model clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeouts {
    /// It expires at once: the earliest, most racy case (the blocking pool's keep-alive ends
    /// whenever its thread is not notified first).
    AtOnce,
    /// It never expires: it blocks like `park`, so a thread that waits for a timeout nobody
    /// needs while work waits is a deadlock.
    Never,
}

/// The token and the condition variable of one parker.
#[derive(Debug)]
struct ParkerState {
    token: Mutex<bool>,
    cond: Condvar,
}

/// A parker on shuttle's mutex and condition variable (module docs).
#[derive(Debug)]
pub(crate) struct ShuttleParker {
    state: Arc<ParkerState>,
    clock: Option<Arc<ShuttleClock>>,
    timeouts: Timeouts,
}

impl ShuttleParker {
    fn new(clock: Option<Arc<ShuttleClock>>, timeouts: Timeouts) -> Self {
        let state = Arc::new(ParkerState { token: Mutex::new(false), cond: Condvar::new() });
        if let Some(clock) = &clock {
            clock.parkers.lock().unwrap().push(state.clone());
        }
        Self { state, clock, timeouts }
    }

    /// Consumes a token if there is one, and lets another thread run: a timeout that expires
    /// at once.
    fn expire(&self) {
        *self.state.token.lock().unwrap() = false;
        shuttle::thread::yield_now();
    }
}

impl Parker for ShuttleParker {
    fn park(&self) {
        let mut token = self.state.token.lock().unwrap();
        while !*token {
            token = self.state.cond.wait(token).unwrap();
        }
        *token = false;
    }

    fn park_timeout(&self, timeout: Duration) {
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        if timeout_ns < PAUSE_NS {
            return self.expire();
        }
        match (&self.clock, self.timeouts) {
            (Some(clock), _) => {
                // From this thread's last reading, the one the caller computed `timeout` from:
                // the model's time moves in jumps, and one made in between must not push the
                // deadline past it.
                let deadline = LAST_READING.with(Cell::get).saturating_add(timeout_ns);
                let mut token = self.state.token.lock().unwrap();
                // `advance_to` stores the time, then takes this lock to notify: a deadline it
                // passed is seen here, or its notify finds us waiting.
                while !*token && clock.now() < deadline {
                    token = self.state.cond.wait(token).unwrap();
                }
                *token = false;
            }
            (None, Timeouts::AtOnce) => self.expire(),
            (None, Timeouts::Never) => self.park(),
        }
    }

    fn unpark(&self) {
        *self.state.token.lock().unwrap() = true;
        self.state.cond.notify_one();
    }
}

/// The model's clock: nanoseconds, moved only by the scenario. Outside shuttle's view (a std
/// atomic: shuttle runs every thread on one OS thread): it is the world's time, not part of
/// the protocol under test.
#[derive(Debug, Default)]
pub(crate) struct ShuttleClock {
    now: StdAtomicU64,
    /// Every parker made by the spawner, to wake those whose deadline passes.
    parkers: std::sync::Mutex<Vec<Arc<ParkerState>>>,
}

impl ShuttleClock {
    fn now(&self) -> u64 {
        self.now.load(StdOrdering::SeqCst)
    }
}

shuttle::thread_local! {
    static CURRENT_WORKER: Cell<*const ()> = Cell::new(core::ptr::null());
    /// This thread's last reading of the model clock.
    static LAST_READING: Cell<u64> = Cell::new(0);
}

/// A [`Spawner`] on shuttle threads (module docs).
#[derive(Debug)]
pub(crate) struct ShuttleSpawner {
    handles: Arc<Mutex<Vec<JoinHandle<()>>>>,
    spawned: StdAtomicUsize,
    joined: StdAtomicUsize,
    clock: Option<Arc<ShuttleClock>>,
    timeouts: Timeouts,
}

impl ShuttleSpawner {
    /// No clock, long timeouts expiring at once.
    pub(crate) fn new() -> Self {
        Self {
            handles: Arc::new(Mutex::new(Vec::new())),
            spawned: StdAtomicUsize::new(0),
            joined: StdAtomicUsize::new(0),
            clock: None,
            timeouts: Timeouts::AtOnce,
        }
    }

    /// Long timeouts (no clock) as `timeouts` says.
    pub(crate) fn with_timeouts(self, timeouts: Timeouts) -> Self {
        Self { timeouts, ..self }
    }

    /// A model clock at 0 ns: `now_ns` reads it, and a timed park waits until
    /// [`advance_to`](Self::advance_to) passes its deadline.
    pub(crate) fn with_clock(self) -> Self {
        Self { clock: Some(Arc::default()), ..self }
    }

    /// Moves the clock forward to `ns` and wakes every timed park (each re-checks its own
    /// deadline). Panics without a clock.
    pub(crate) fn advance_to(&self, ns: u64) {
        let clock = self.clock.as_ref().expect("a ShuttleSpawner::with_clock");
        clock.now.fetch_max(ns, StdOrdering::SeqCst);
        let parkers = clock.parkers.lock().unwrap().clone();
        for p in parkers {
            let _token = p.token.lock().unwrap();
            p.cond.notify_all();
        }
    }

    /// Threads started so far.
    pub(crate) fn spawned(&self) -> usize {
        self.spawned.load(StdOrdering::SeqCst)
    }

    /// Threads joined by `join_all` so far.
    pub(crate) fn joined(&self) -> usize {
        self.joined.load(StdOrdering::SeqCst)
    }
}

// SAFETY: `spawn` runs `start` once on a new shuttle thread iff it returns Ok; `join_all` joins
// every recorded handle, and a thread takes the handles' lock before it runs the pool's code,
// so its handle is recorded by then; the current-worker slot is a shuttle thread-local.
unsafe impl Spawner for ShuttleSpawner {
    type Parker = ShuttleParker;

    fn new_parker(&self) -> ShuttleParker {
        ShuttleParker::new(self.clock.clone(), self.timeouts)
    }

    fn spawn(&self, start: ThreadStart, _stack_size: usize) -> Result<(), SpawnError> {
        let mut handles = self.handles.lock().unwrap();
        let gate = self.handles.clone();
        let handle = shuttle::thread::spawn(move || {
            drop(gate.lock().unwrap());
            // SAFETY: handed to exactly one thread, run once.
            unsafe { start.run() }
        });
        handles.push(handle);
        self.spawned.fetch_add(1, StdOrdering::SeqCst);
        Ok(())
    }

    fn join_all(&self) {
        let handles = core::mem::take(&mut *self.handles.lock().unwrap());
        for handle in handles {
            handle.join().expect("a pool thread panicked");
            self.joined.fetch_add(1, StdOrdering::SeqCst);
        }
    }

    fn current_worker(&self) -> *const () {
        CURRENT_WORKER.with(Cell::get)
    }

    fn set_current_worker(&self, worker: *const ()) {
        CURRENT_WORKER.with(|c| c.set(worker));
    }

    fn now_ns(&self) -> Option<u64> {
        self.clock.as_ref().map(|c| {
            let now = c.now();
            LAST_READING.with(|r| r.set(now));
            now
        })
    }
}

/// One counted task of a [`Tally`].
#[repr(C)]
pub(crate) struct Job {
    task: Task,
    runs: StdAtomicUsize,
    tally: *const Tally,
}

/// `n` tasks that count their runs, and the count of runs, which a thread can wait for.
pub(crate) struct Tally {
    jobs: Vec<Job>,
    done: Mutex<usize>,
    cond: Condvar,
}

// SAFETY: a job's `tally` points to the tally that holds it (it never moves: the tally is
// boxed before a job's pointer is taken); everything else is atomics and shuttle locks.
unsafe impl Send for Tally {}
// SAFETY: as above.
unsafe impl Sync for Tally {}

unsafe extern "C" fn run_job(task: *mut Task) {
    // SAFETY: every task with this callback is the first field of a `Job` of a live `Tally`
    // (`repr(C)`), which the scenario keeps until the pool no longer runs anything.
    let job = unsafe { &*task.cast::<Job>() };
    job.runs.fetch_add(1, StdOrdering::SeqCst);
    // SAFETY: as above.
    let tally = unsafe { &*job.tally };
    *tally.done.lock().unwrap() += 1;
    tally.cond.notify_all();
}

impl Tally {
    /// `n` tasks, none run.
    pub(crate) fn new(n: usize) -> Arc<Self> {
        let mut tally = Arc::new(Self { jobs: Vec::with_capacity(n), done: Mutex::new(0), cond: Condvar::new() });
        let ptr: *const Tally = Arc::as_ptr(&tally);
        let jobs = &mut Arc::get_mut(&mut tally).expect("not shared yet").jobs;
        for _ in 0..n {
            jobs.push(Job { task: Task::new(run_job), runs: StdAtomicUsize::new(0), tally: ptr });
        }
        tally
    }

    /// Task `i`, to submit once.
    pub(crate) fn task(&self, i: usize) -> NonNull<Task> {
        NonNull::from(&self.jobs[i].task)
    }

    /// Runs of task `i` so far.
    pub(crate) fn runs(&self, i: usize) -> usize {
        self.jobs[i].runs.load(StdOrdering::SeqCst)
    }

    /// Blocks until `n` runs in all were counted (a run that never comes: a shuttle deadlock).
    pub(crate) fn wait_for(&self, n: usize) {
        let mut done = self.done.lock().unwrap();
        while *done < n {
            done = self.cond.wait(done).unwrap();
        }
    }

    /// Every task ran exactly once.
    pub(crate) fn assert_all_once(&self) {
        let runs: Vec<usize> = (0..self.jobs.len()).map(|i| self.runs(i)).collect();
        assert!(runs.iter().all(|&r| r == 1), "runs per task: {runs:?}");
    }
}

/// A flag that one thread sets and others wait for, blocking (a shuttle deadlock if nobody
/// ever sets it).
#[derive(Default)]
pub(crate) struct Gate {
    open: Mutex<bool>,
    cond: Condvar,
}

impl Gate {
    pub(crate) fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cond.notify_all();
    }

    pub(crate) fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cond.wait(open).unwrap();
        }
    }
}

/// A waker that opens the gate (a timer's or an I/O event's, for a thread outside the pool).
impl std::task::Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.open();
    }
}

/// `POOL_SHUTTLE_SCALE` (default 1): the factor on every scenario's iterations.
fn scale() -> f64 {
    std::env::var("POOL_SHUTTLE_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

/// Shuttle's configuration for these scenarios: no warning about orderings (every scenario
/// uses weaker ones on purpose), stacks for a pool's loop plus a task, and a step bound that
/// turns a spin nothing ends into a failure within a second or so.
fn config() -> shuttle::Config {
    let mut config = shuttle::Config::new();
    config.silence_warnings = true;
    config.stack_size = 0x40000;
    config.max_steps = shuttle::MaxSteps::FailAfter(200_000);
    config
}

/// The scenario's seed: fixed, so a run is repeatable (and a plant's "iterations to the first
/// failure" too); `SHUTTLE_RANDOM_SEED` overrides it (shuttle reads it).
fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Runs `f` under `scheduler` for `iterations` (already scaled), printing the iterations and
/// the time, or, on a failure, the iteration that failed.
fn run<S, F>(name: &str, what: &str, iterations: usize, scheduler: S, f: F)
where
    S: shuttle::scheduler::Scheduler + 'static,
    F: Fn() + Send + Sync + 'static,
{
    let count = Arc::new(StdAtomicUsize::new(0));
    let counter = count.clone();
    let start = std::time::Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shuttle::Runner::new(scheduler, config()).run(move || {
            counter.fetch_add(1, StdOrdering::Relaxed);
            f();
        });
    }));
    let ran = count.load(StdOrdering::Relaxed);
    match result {
        Ok(()) => std::eprintln!("shuttle {name}: {what}, {ran} iterations in {:.2?}", start.elapsed()),
        Err(panic) => {
            std::eprintln!("shuttle {name}: {what}: FAILED at iteration {ran} of {iterations} ({:.2?})", start.elapsed());
            std::panic::resume_unwind(panic);
        }
    }
}

/// `iterations` (times `POOL_SHUTTLE_SCALE`) of `f` under PCT with `depth` (at least 1):
/// a bug that needs `depth - 1` preemptions at the right steps is found in each iteration
/// with probability at least 1 / (threads * steps^(depth - 1)).
pub(crate) fn check_pct<F>(name: &str, iterations: usize, depth: usize, f: F)
where
    F: Fn() + Send + Sync + 'static,
{
    let n = ((iterations as f64 * scale()) as usize).max(1);
    let scheduler = shuttle::scheduler::PctScheduler::new_from_seed(seed(name), depth, n);
    run(name, &std::format!("pct depth {depth}"), n, scheduler, f);
}

/// `iterations` (times `POOL_SHUTTLE_SCALE`) of `f` under the uniformly random scheduler.
pub(crate) fn check_random<F>(name: &str, iterations: usize, f: F)
where
    F: Fn() + Send + Sync + 'static,
{
    let n = ((iterations as f64 * scale()) as usize).max(1);
    let scheduler = shuttle::scheduler::RandomScheduler::new_from_seed(seed(name), n);
    run(name, "random", n, scheduler, f);
}
