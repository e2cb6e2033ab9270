//! Shared helpers for the integration tests: a watchdog, exact-once counters, intrusive jobs,
//! the stress scale, and the OS thread count.
//!
//! * [`watchdog`] runs a test body on its own thread and fails the test (with the progress that
//!   was reached) if it does not finish in time: a lost wake-up fails fast instead of hanging CI.
//! * [`ExactOnce`] gives every task an `AtomicU8` flag that must go 0 -> 1 exactly once, plus a
//!   total. Task callbacks are `extern "C"` (a panic there aborts), so `hit` never panics: it
//!   records doubles and out-of-range ids, and [`ExactOnce::assert_all_once`] reports them.
//! * [`Job`] is the intrusive task every stress test submits: `Task` first in a `#[repr(C)]`
//!   struct, recovered with `pool::container_of!`.
//! * [`scaled`] multiplies a test size by `POOL_STRESS_SCALE` (default 1; tiny under Miri).
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::fmt::Write as _;
use std::ptr::{addr_of_mut, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use std::sync::Barrier;

use pool::{container_of, Batch, Config, Error, Spawner, Task, ThreadPool};

pub mod queue_probe;

// ---------------------------------------------------------------------------------------------
// Scale

/// The size multiplier from `POOL_STRESS_SCALE` (a float; default 1.0, or 0.0005 under Miri).
pub fn scale() -> f64 {
    let default = if cfg!(miri) { 0.0005 } else { 1.0 };
    std::env::var("POOL_STRESS_SCALE").ok().and_then(|s| s.parse::<f64>().ok()).filter(|s| *s > 0.0).unwrap_or(default)
}

/// `n` scaled by [`scale`], at least `min`.
pub fn scaled_min(n: usize, min: usize) -> usize {
    ((n as f64 * scale()) as usize).max(min).max(1)
}

/// `n` scaled by [`scale`], at least 1.
pub fn scaled(n: usize) -> usize {
    scaled_min(n, 1)
}

/// Watchdog limit in seconds: `POOL_WATCHDOG_SECS`, default `default` (x20 under Miri).
pub fn watchdog_secs(default: u64) -> u64 {
    let default = if cfg!(miri) { default * 20 } else { default };
    std::env::var("POOL_WATCHDOG_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// Exact-once counting

/// One flag per task (must go 0 -> 1 exactly once) and a total.
pub struct ExactOnce {
    pub name: &'static str,
    flags: Box<[AtomicU8]>,
    total: AtomicUsize,
    /// Hits on a flag that was already 1 (a task that ran twice).
    doubles: AtomicUsize,
    /// The first id that ran twice (usize::MAX if none).
    first_double: AtomicUsize,
    /// Hits with an id out of range (a corrupted task).
    out_of_range: AtomicUsize,
}

impl ExactOnce {
    pub fn new(name: &'static str, n: usize) -> Arc<Self> {
        Arc::new(Self {
            name,
            flags: (0..n).map(|_| AtomicU8::new(0)).collect(),
            total: AtomicUsize::new(0),
            doubles: AtomicUsize::new(0),
            first_double: AtomicUsize::new(usize::MAX),
            out_of_range: AtomicUsize::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.flags.len()
    }

    /// Task `id` ran. Never panics (called from `extern "C"` callbacks).
    #[inline]
    pub fn hit(&self, id: usize) {
        match self.flags.get(id) {
            Some(flag) => {
                // AcqRel: the task's own effects are published with its flag.
                if flag.swap(1, Ordering::AcqRel) != 0 {
                    self.doubles.fetch_add(1, Ordering::Relaxed);
                    let _ = self.first_double.compare_exchange(usize::MAX, id, Ordering::Relaxed, Ordering::Relaxed);
                }
            }
            None => {
                self.out_of_range.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Release: pairs with `total()`'s Acquire; the last access to `self` in a callback.
        self.total.fetch_add(1, Ordering::Release);
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    pub fn ran(&self, id: usize) -> bool {
        self.flags[id].load(Ordering::Acquire) != 0
    }

    pub fn doubles(&self) -> usize {
        self.doubles.load(Ordering::Relaxed)
    }

    /// Waits (sleeping in small steps) until `total() >= n`. Run under a [`watchdog`].
    pub fn wait_total(&self, n: usize) {
        let mut spins = 0u32;
        while self.total() < n {
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Panics unless no task ran twice or out of range, and `want(id)` says exactly which ran.
    pub fn assert_exactly(&self, want: impl Fn(usize) -> bool) {
        assert_eq!(self.out_of_range.load(Ordering::Relaxed), 0, "{}: a task ran with an id out of range", self.name);
        assert_eq!(
            self.doubles(),
            0,
            "{}: {} task runs were duplicates (first id that ran twice: {})",
            self.name,
            self.doubles(),
            self.first_double.load(Ordering::Relaxed)
        );
        let mut missing = Vec::new();
        let mut unexpected = Vec::new();
        for id in 0..self.len() {
            match (want(id), self.ran(id)) {
                (true, false) => missing.push(id),
                (false, true) => unexpected.push(id),
                _ => {}
            }
        }
        assert!(
            missing.is_empty() && unexpected.is_empty(),
            "{}: {} tasks that should have run did not (first ids {:?}); {} tasks ran that should not have (first ids {:?})",
            self.name,
            missing.len(),
            &missing[..missing.len().min(8)],
            unexpected.len(),
            &unexpected[..unexpected.len().min(8)],
        );
        let want_total = (0..self.len()).filter(|&id| want(id)).count();
        assert_eq!(self.total(), want_total, "{}: total does not match the flags", self.name);
    }

    /// Every task ran exactly once.
    pub fn assert_all_once(&self) {
        self.assert_exactly(|_| true);
    }

    pub fn report(&self) -> String {
        format!(
            "{}: {}/{} ran, {} duplicates, {} out of range",
            self.name,
            self.total(),
            self.len(),
            self.doubles(),
            self.out_of_range.load(Ordering::Relaxed)
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Intrusive jobs

/// The intrusive task the stress tests submit.
#[repr(C)]
pub struct Job {
    pub task: Task,
    pub id: usize,
    pub counter: *const ExactOnce,
}

/// The callback of every [`Job`]: counts its id.
///
/// # Safety
/// `task` is the `task` field of a live `Job` whose counter is alive.
pub unsafe extern "C" fn job_run(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a `Job` (caller's contract).
    let job = container_of!(task, Job, task);
    // Copy the fields out first: after `hit` the test may free the job.
    // SAFETY: the job is live until its callback has run.
    let (id, counter) = unsafe { ((*job).id, (*job).counter) };
    // SAFETY: the counter outlives the pool (tests shut the pool down before dropping it).
    unsafe { (*counter).hit(id) };
}

/// A block of jobs `first..first + n` counted by `counter`, at a stable address.
pub struct Jobs {
    ptr: *mut Job,
    len: usize,
    // Keeps the counter alive as long as the jobs point to it.
    _counter: Arc<ExactOnce>,
}

// SAFETY: the jobs are handed to other threads only through the pool, by pointer; the block is
// freed by its owner after the pool is done with it.
unsafe impl Send for Jobs {}
// SAFETY: as above; `task(i)` only computes a pointer.
unsafe impl Sync for Jobs {}

impl Jobs {
    pub fn new(counter: &Arc<ExactOnce>, first: usize, n: usize) -> Self {
        let jobs: Box<[Job]> = (0..n)
            .map(|i| Job { task: Task::new(job_run), id: first + i, counter: Arc::as_ptr(counter) })
            .collect();
        let ptr = Box::into_raw(jobs).cast::<Job>();
        Self { ptr, len: n, _counter: Arc::clone(counter) }
    }

    /// All ids of `counter`.
    pub fn all(counter: &Arc<ExactOnce>) -> Self {
        Self::new(counter, 0, counter.len())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The task of job `i` (0-based within this block).
    pub fn task(&self, i: usize) -> NonNull<Task> {
        assert!(i < self.len);
        // SAFETY: in bounds of the allocation; `addr_of_mut!` creates no reference.
        unsafe { NonNull::new_unchecked(addr_of_mut!((*self.ptr.add(i)).task)) }
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a `Box<[Job]>`; the owner drops the
        // block only after the pool is done with its tasks.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// Wrapper to move a raw pointer into a thread or a `'static` closure.
#[derive(Clone, Copy, Debug)]
pub struct SendPtr<T>(pub *const T);
// SAFETY: the tests only share pointers to Sync data that outlives the users.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

// ---------------------------------------------------------------------------------------------
// Watchdog

/// What the watched body reports about its progress.
#[derive(Default)]
pub struct Progress {
    stage: Mutex<String>,
    counters: Mutex<Vec<Arc<ExactOnce>>>,
    values: Mutex<Vec<(&'static str, Arc<AtomicUsize>)>>,
}

impl Progress {
    /// Names the current stage (shown if the watchdog fires).
    pub fn stage(&self, stage: impl Into<String>) {
        *self.stage.lock().unwrap_or_else(PoisonError::into_inner) = stage.into();
    }

    /// Shows `counter`'s totals if the watchdog fires.
    pub fn track(&self, counter: &Arc<ExactOnce>) {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(counter));
    }

    /// Shows a plain counter if the watchdog fires.
    pub fn track_value(&self, name: &'static str, value: &Arc<AtomicUsize>) {
        self.values.lock().unwrap_or_else(PoisonError::into_inner).push((name, Arc::clone(value)));
    }

    fn report(&self) -> String {
        let mut s = format!("stage '{}'", self.stage.lock().unwrap_or_else(PoisonError::into_inner));
        let counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        // The last few counters tracked (tests that loop track one per iteration).
        for c in counters.iter().skip(counters.len().saturating_sub(3)) {
            let _ = write!(s, "; {}", c.report());
        }
        for (name, v) in self.values.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = write!(s, "; {name} = {}", v.load(Ordering::Relaxed));
        }
        s
    }
}

/// Runs `f` on its own thread; fails the test if it takes longer than `secs` seconds, with the
/// progress it reached. A panic inside `f` is re-raised here with its message.
///
/// On timeout the stuck thread is left behind (it may be blocked forever); the test fails at
/// once and the rest of the binary goes on. Set `POOL_WATCHDOG_ABORT=1` to abort the process
/// instead (so a CI job never waits on a stuck thread).
pub fn watchdog<T, F>(name: &str, secs: u64, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce(&Progress) -> T + Send + 'static,
{
    let progress = Arc::new(Progress::default());
    let p = Arc::clone(&progress);
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("watched:{name}"))
        .spawn(move || {
            let r = f(&p);
            let _ = tx.send(r);
        })
        .expect("spawn the watched thread");
    let start = Instant::now();
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(r) => {
            let _ = handle.join();
            r
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: re-raise its panic on the test thread.
            match handle.join() {
                Err(payload) => std::panic::resume_unwind(payload),
                Ok(()) => unreachable!("the body returned without sending"),
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            // Tell "stuck" (a lost wake-up, a deadlock) from "slow" (a loaded machine, a
            // sanitizer): look again a second later.
            let first = progress.report();
            std::thread::sleep(Duration::from_secs(1));
            let second = progress.report();
            let verdict = if first == second {
                "NO progress in the last second: looks stuck (lost wake-up or deadlock?)"
            } else {
                "still progressing: too slow for the limit (lower POOL_STRESS_SCALE or raise POOL_WATCHDOG_SECS)"
            };
            let msg = format!(
                "WATCHDOG: '{name}' did not finish in {secs} s ({:.1} s elapsed); {verdict}; progress reached: {second}",
                start.elapsed().as_secs_f64(),
            );
            if std::env::var_os("POOL_WATCHDOG_ABORT").is_some() {
                eprintln!("{msg}");
                std::process::abort();
            }
            panic!("{msg}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Serialising tests of one binary

static SERIAL: RwLock<()> = RwLock::new(());

/// Held (shared) by ordinary tests: they may run side by side.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(PoisonError::into_inner)
}

/// Held (exclusive) by tests that count OS threads or allocations process-wide: no other test
/// of the binary runs meanwhile.
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// OS threads

/// Number of threads of this process (Linux: entries of /proc/self/task); None elsewhere.
pub fn os_thread_count() -> Option<usize> {
    if cfg!(miri) {
        return None;
    }
    Some(std::fs::read_dir("/proc/self/task").ok()?.count())
}

/// Number of threads of this process whose name (`comm`, at most 15 bytes) is `name`;
/// None where /proc is not available. Other tests' threads (the harness starts one per test)
/// do not disturb it, unlike [`os_thread_count`].
pub fn os_threads_named(name: &str) -> Option<usize> {
    if cfg!(miri) {
        return None;
    }
    let mut n = 0;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(entry) = entry else { continue };
        // A thread that exits meanwhile has no comm any more: not counted.
        if let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) {
            if comm.trim_end_matches('\n') == name {
                n += 1;
            }
        }
    }
    Some(n)
}

/// Waits up to `timeout` for `count()` to drop to `want` (a joined thread's /proc entry can
/// outlive `pthread_join` by a moment: the kernel clears the joiner's tid word before it reaps
/// the task). Returns the last count seen.
pub fn wait_count_down(want: usize, timeout: Duration, count: impl Fn() -> Option<usize>) -> usize {
    let start = Instant::now();
    loop {
        let n = count().unwrap_or(want);
        if n <= want || start.elapsed() > timeout {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------------------------
// Randomness and quiet panics

/// A tiny xorshift64* generator (no dependencies; seeds must be non-zero).
#[derive(Clone, Debug)]
pub struct XorShift(pub u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The payload of panics the tests cause on purpose; the hook installed by
/// [`quiet_intentional_panics`] does not print them.
pub const INTENTIONAL: &str = "pool-test: intentional panic";

static HOOK: std::sync::Once = std::sync::Once::new();
static QUIET: AtomicBool = AtomicBool::new(false);

/// Installs (once) a panic hook that hides panics whose message contains [`INTENTIONAL`] and
/// forwards every other panic to the default hook.
pub fn quiet_intentional_panics() {
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            if msg.contains(INTENTIONAL) {
                return;
            }
            default(info);
        }));
        QUIET.store(true, Ordering::Relaxed);
    });
}

// ---------------------------------------------------------------------------------------------
// Workloads shared by stress.rs and faults.rs

pub fn config(max_threads: usize) -> Config {
    Config::default().with_max_threads(max_threads)
}

/// Submits jobs `range` of `jobs` one by one from this thread; panics on any error.
pub fn submit_range<S: Spawner>(pool: &ThreadPool<S>, jobs: &Jobs, range: std::ops::Range<usize>) {
    for i in range {
        // SAFETY: each job is submitted once and outlives the pool's use (the test shuts the
        // pool down, or waits for every task, before dropping `jobs`).
        unsafe { pool.submit(jobs.task(i)) }.unwrap_or_else(|e| panic!("submit of job {i} failed: {e:?}"));
    }
}

/// Submits every job of `jobs` from `producers` threads (contiguous shares), waits for all,
/// shuts down, and checks exact-once.
pub fn external_producers<S: Spawner>(p: &Progress, pool: ThreadPool<S>, producers: usize, per_producer: usize, name: &'static str) {
    let total = producers * per_producer;
    let counter = ExactOnce::new(name, total);
    p.track(&counter);
    let jobs = Arc::new(Jobs::all(&counter));
    let pool = Arc::new(pool);
    p.stage(format!("{name}: {producers} producers submitting"));
    let handles: Vec<_> = (0..producers)
        .map(|t| {
            let (pool, jobs) = (Arc::clone(&pool), Arc::clone(&jobs));
            std::thread::spawn(move || submit_range(&pool, &jobs, t * per_producer..(t + 1) * per_producer))
        })
        .collect();
    for h in handles {
        h.join().expect("producer panicked");
    }
    p.stage(format!("{name}: waiting for the tasks"));
    counter.wait_total(total);
    p.stage(format!("{name}: shutdown"));
    pool.shutdown().unwrap();
    counter.assert_all_once();
}


#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeMode {
    /// Each child with `submit`.
    Single,
    /// Both children in one `submit_batch`.
    Batch,
    /// First child with `submit_lifo`, second with `submit`.
    Lifo,
}

#[repr(C)]
pub struct Node<S: Spawner> {
    task: Task,
    id: usize,
    tree: *const Tree<S>,
}

pub struct Tree<S: Spawner> {
    pool: *const ThreadPool<S>,
    nodes: *mut Node<S>,
    n: usize,
    mode: TreeMode,
    counter: Arc<ExactOnce>,
    /// Submits from inside the tree that failed (must stay 0).
    errors: AtomicUsize,
    /// Children submitted from a thread that was not one of the pool's workers (must stay 0).
    not_on_worker: AtomicUsize,
}

pub unsafe extern "C" fn node_run<S: Spawner>(task: *mut Task) {
    let node = container_of!(task, Node<S>, task);
    // SAFETY: every task with this callback is the `task` field of a live `Node<S>` whose tree
    // (and pool) outlive the pool's work.
    let (id, tree) = unsafe { ((*node).id, &*(*node).tree) };
    // SAFETY: the tree's pool outlives its tasks.
    let pool = unsafe { &*tree.pool };
    if !pool.is_worker_thread() {
        tree.not_on_worker.fetch_add(1, Ordering::Relaxed);
    }
    let child = |c: usize| {
        // SAFETY: `c < n`, in bounds; `addr_of_mut!` makes no reference.
        unsafe { NonNull::new_unchecked(addr_of_mut!((*tree.nodes.add(c)).task)) }
    };
    let (left, right) = (2 * id + 1, 2 * id + 2);
    let mut result = Ok(());
    if right < tree.n {
        // SAFETY: each node is submitted exactly once (by its parent), and the nodes outlive
        // the pool's use of them.
        unsafe {
            match tree.mode {
                TreeMode::Single => {
                    result = pool.submit(child(left)).and(pool.submit(child(right)));
                }
                TreeMode::Batch => {
                    let mut batch = Batch::new();
                    batch.push(child(left));
                    batch.push(child(right));
                    result = pool.submit_batch(batch);
                }
                TreeMode::Lifo => {
                    result = pool.submit_lifo(child(left)).and(pool.submit(child(right)));
                }
            }
        }
    }
    if result.is_err() {
        tree.errors.fetch_add(1, Ordering::Relaxed);
    }
    // Last: after this the test may free everything.
    tree.counter.hit(id);
}

/// Builds a tree of `depth` (2^(depth+1) - 1 nodes) on `pool`, submits the root from outside,
/// and (unless `shutdown_at_once`) waits for every node before shutting down. With
/// `shutdown_at_once`, shutdown is called right after the root: every node must still run
/// (submits from inside a worker are part of the queued work) by the time it returns.
pub fn tree<S: Spawner>(p: &Progress, pool: ThreadPool<S>, depth: u32, mode: TreeMode, shutdown_at_once: bool) {
    let n = (1usize << (depth + 1)) - 1;
    let counter = ExactOnce::new("tree", n);
    p.track(&counter);
    p.stage(format!("tree depth {depth} mode {mode:?} shutdown_at_once {shutdown_at_once}"));
    // Raw pointers all the way (nodes first, then the tree they point to), so no write
    // through a Box invalidates the pointers the tasks use (Miri's aliasing model).
    let nodes: Box<[Node<S>]> =
        (0..n).map(|id| Node { task: Task::new(node_run::<S>), id, tree: std::ptr::null() }).collect();
    let nodes: *mut Node<S> = Box::into_raw(nodes).cast::<Node<S>>();
    let tree_ptr: *mut Tree<S> = Box::into_raw(Box::new(Tree {
        pool: &pool,
        nodes,
        n,
        mode,
        counter: Arc::clone(&counter),
        errors: AtomicUsize::new(0),
        not_on_worker: AtomicUsize::new(0),
    }));
    for i in 0..n {
        // SAFETY: in bounds; nothing runs yet.
        unsafe { (*nodes.add(i)).tree = tree_ptr };
    }
    // SAFETY: the root is submitted once; nodes and tree live until after shutdown.
    unsafe { pool.submit(NonNull::new_unchecked(addr_of_mut!((*nodes).task))) }.unwrap();
    if !shutdown_at_once {
        counter.wait_total(n);
    }
    pool.shutdown().unwrap();
    drop(pool);
    // SAFETY: the pool is gone; nothing references the nodes or the tree any more.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(nodes, n)) });
    // SAFETY: as above.
    let tree = unsafe { Box::from_raw(tree_ptr) };
    let (errors, not_on_worker) = (tree.errors.load(Ordering::Relaxed), tree.not_on_worker.load(Ordering::Relaxed));
    assert!(
        errors == 0 && not_on_worker == 0,
        "tree depth {depth} mode {mode:?} shutdown_at_once {shutdown_at_once}: {not_on_worker} tree tasks ran outside the \
         pool's workers and {errors} of them failed to submit their children ({}); a task accepted by a pool that has a \
         thread must run on a worker, where its own submits are accepted even during shutdown",
        counter.report()
    );
    counter.assert_all_once();
}

/// Depth ~17 at scale 1, smaller when scaled down.
pub fn tree_depth(full: u32) -> u32 {
    let nodes = scaled_min(1usize << (full + 1), 16);
    (usize::BITS - 1 - nodes.leading_zeros()).saturating_sub(1).max(3)
}


pub const NOT_TRIED: u8 = 0;
pub const ACCEPTED: u8 = 1;
pub const REFUSED: u8 = 2;
pub const OTHER_ERROR: u8 = 3;
pub const REFUSED_SPAWN: u8 = 4;

/// `rounds` times: `producers` threads submit (one by one, or in batches of 3) while another
/// thread calls `shutdown` at a random point. Every submit that returned `Ok` ran exactly once,
/// by the time shutdown returned and the producers were joined; every `Err(Shutdown)` did not
/// run; no `Ok` follows an `Err` on the same producer.
pub fn shutdown_race<S: Spawner>(p: &Progress, make: &dyn Fn() -> S, rounds: usize, producers: usize, per_producer: usize, label: &str) {
    shutdown_race_with(p, make, rounds, producers, per_producer, label, false)
}

/// As [`shutdown_race`]; with `spawn_may_fail`, `Err(Spawn)` (no thread could be started) also
/// counts as refused.
pub fn shutdown_race_with<S: Spawner>(
    p: &Progress,
    make: &dyn Fn() -> S,
    rounds: usize,
    producers: usize,
    per_producer: usize,
    label: &str,
    spawn_may_fail: bool,
) {
    let total = producers * per_producer;
    let mut rng = XorShift::new(0x9E37_79B9_7F4A_7C15);
    let lost_rounds = Arc::new(AtomicUsize::new(0));
    p.track_value("rounds done", &lost_rounds);
    for round in 0..rounds {
        let max_threads = 1 + round % 4;
        let batched = round % 2 == 1;
        p.stage(format!("{label}: round {round} (max_threads {max_threads}, batched {batched})"));
        let counter = ExactOnce::new("shutdown race", total);
        let jobs = Arc::new(Jobs::all(&counter));
        let results: Arc<[AtomicU8]> = (0..total).map(|_| AtomicU8::new(NOT_TRIED)).collect();
        let submitted = Arc::new(AtomicUsize::new(0));
        // A logical clock: when each submit returned, and when shutdown began and returned.
        let clock = Arc::new(AtomicUsize::new(1));
        let returned_at: Arc<[AtomicUsize]> = (0..total).map(|_| AtomicUsize::new(0)).collect();
        let pool = Arc::new(ThreadPool::with_spawner(config(max_threads), make()).unwrap());
        let start = Arc::new(Barrier::new(producers + 1));
        let handles: Vec<_> = (0..producers)
            .map(|t| {
                let (pool, jobs, results, submitted, start) =
                    (Arc::clone(&pool), Arc::clone(&jobs), Arc::clone(&results), Arc::clone(&submitted), Arc::clone(&start));
                let (clock, returned_at) = (Arc::clone(&clock), Arc::clone(&returned_at));
                std::thread::spawn(move || {
                    start.wait();
                    let range = t * per_producer..(t + 1) * per_producer;
                    let step = if batched { 3 } else { 1 };
                    let mut refused_seen = false;
                    let mut ok_after_refused = 0usize;
                    let mut i = range.start;
                    while i < range.end {
                        let end = (i + step).min(range.end);
                        let mut batch = Batch::new();
                        for j in i..end {
                            // SAFETY: each job is submitted at most once and outlives the pool.
                            unsafe { batch.push(jobs.task(j)) };
                        }
                        // SAFETY: as above.
                        let r = unsafe { pool.submit_batch(batch) };
                        let code = match r {
                            Ok(()) => ACCEPTED,
                            Err(Error::Shutdown) => REFUSED,
                            Err(Error::Spawn) if spawn_may_fail => REFUSED_SPAWN,
                            Err(_) => OTHER_ERROR,
                        };
                        if code == ACCEPTED && refused_seen {
                            ok_after_refused += 1;
                        }
                        refused_seen |= code == REFUSED;
                        let when = clock.fetch_add(1, Ordering::SeqCst);
                        for j in i..end {
                            results[j].store(code, Ordering::Relaxed);
                            returned_at[j].store(when, Ordering::Relaxed);
                        }
                        submitted.fetch_add(end - i, Ordering::Relaxed);
                        i = end;
                    }
                    ok_after_refused
                })
            })
            .collect();
        // Shut down somewhere in the stream (sometimes before any submit, sometimes after all).
        let at = rng.below(total as u64 + total as u64 / 8) as usize;
        start.wait();
        while submitted.load(Ordering::Relaxed) < at.min(total) {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
        let shutdown_began = clock.fetch_add(1, Ordering::SeqCst);
        pool.shutdown().unwrap();
        let shutdown_returned = clock.fetch_add(1, Ordering::SeqCst);
        assert_eq!(pool.shutdown(), Err(Error::Shutdown), "a second shutdown must say so");
        let mut ok_after_refused = 0;
        for h in handles {
            ok_after_refused += h.join().expect("producer panicked");
        }
        drop(pool);
        // Everything has returned: the pool is gone, so no accepted task can still be pending.
        let code = |id: usize| results[id].load(Ordering::Relaxed);
        assert!((0..total).all(|id| code(id) != OTHER_ERROR), "{label} round {round}: a submit failed with an error other than Shutdown");
        let accepted = (0..total).filter(|&id| code(id) == ACCEPTED).count();
        let lost: Vec<usize> = (0..total).filter(|&id| code(id) == ACCEPTED && !counter.ran(id)).collect();
        if !lost.is_empty() {
            let at = |id: usize| returned_at[id].load(Ordering::Relaxed);
            let after = lost.iter().filter(|&&id| at(id) > shutdown_returned).count();
            let during = lost.iter().filter(|&&id| at(id) > shutdown_began && at(id) < shutdown_returned).count();
            let per_producer: Vec<String> = (0..producers)
                .map(|t| {
                    let r = t * per_producer..(t + 1) * per_producer;
                    let ok = r.clone().filter(|&id| code(id) == ACCEPTED).count();
                    let lost_here = lost.iter().filter(|id| r.contains(id)).count();
                    format!("p{t}: {ok} accepted, {lost_here} lost")
                })
                .collect();
            panic!(
                "{label} round {round} (max_threads {max_threads}, batched {batched}): {} of {accepted} accepted tasks never ran \
                 (first ids {:?}); shutdown returned and every producer was joined. Of the lost, the submit of {after} returned \
                 Ok after shutdown had returned, {during} while it ran. Per producer: {}",
                lost.len(),
                &lost[..lost.len().min(8)],
                per_producer.join(", ")
            );
        }
        counter.assert_exactly(|id| code(id) == ACCEPTED);
        assert_eq!(ok_after_refused, 0, "{label} round {round}: a submit was accepted after the same thread saw Err(Shutdown)");
        drop(jobs);
        lost_rounds.fetch_add(1, Ordering::Relaxed);
    }
}

