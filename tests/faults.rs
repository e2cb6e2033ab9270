//! Fault injection through the platform traits, and panics in closure tasks.
//!
//! * [`Faulty`]: a `Spawner` wrapping `ThreadSpawner` that refuses some spawns (from the k-th
//!   on, only the k-th, every other one, at random). The pool must finish all work with the
//!   threads it got; with no thread at all, `submit` says `Err(Error::Spawn)` and the task stays
//!   the caller's (not run, resubmittable elsewhere).
//! * [`Spurious`]: a `Parker` whose `park` returns spuriously at random (tiny xorshift), and
//!   whose `park_timeout` returns early; and [`Dozy`], whose `park` is only ever a short
//!   `park_timeout`. No task lost, no hang, exact-once counts hold.
//! * A panic inside `pool.spawn(|| panic!())` is caught and counted; the pool keeps serving.
//!
//! `current_worker` / `set_current_worker` are delegated to the inner `ThreadSpawner`, so
//! submits from inside a worker still take the worker-local path.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{
    config, external_producers, scaled_min, shutdown_race_with, tree, tree_depth, watchdog, watchdog_secs, ExactOnce, Jobs,
    Progress, TreeMode, XorShift,
};
use pool::{CondvarParker, Error, FutexParker, Parker, SpawnError, Spawner, ThreadPool, ThreadSpawner, ThreadStart};

// ---------------------------------------------------------------------------------------------
// A spawner that fails

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// Spawn calls 0..k succeed, every later one fails (the pool gets at most k threads).
    FailFrom(usize),
    /// Only spawn call k fails.
    FailOnly(usize),
    /// Odd-numbered spawn calls fail (0 succeeds, 1 fails, 2 succeeds, ...).
    FailOdd,
    /// Even-numbered spawn calls fail (the very first one included).
    FailEven,
    /// Each call fails with probability per_mille / 1000.
    Random { per_mille: u64 },
}

/// Counters shared by a spawner and the test.
#[derive(Debug, Default)]
struct SpawnCounts {
    calls: AtomicUsize,
    failures: AtomicUsize,
}

struct Faulty<P: Parker + Default + 'static> {
    inner: ThreadSpawner<P>,
    policy: Policy,
    rng: AtomicU64,
    counts: Arc<SpawnCounts>,
}

impl<P: Parker + Default + 'static> Faulty<P> {
    fn new(policy: Policy) -> Self {
        Self::around(ThreadSpawner::new(), policy)
    }

    fn around(inner: ThreadSpawner<P>, policy: Policy) -> Self {
        Self { inner, policy, rng: AtomicU64::new(0x2545_F491_4F6C_DD1D), counts: Arc::default() }
    }

    fn fails(&self, call: usize) -> bool {
        match self.policy {
            Policy::FailFrom(k) => call >= k,
            Policy::FailOnly(k) => call == k,
            Policy::FailOdd => call % 2 == 1,
            Policy::FailEven => call % 2 == 0,
            Policy::Random { per_mille } => {
                // Racy read-modify-write is fine: any value is a valid xorshift state.
                let mut r = XorShift::new(self.rng.load(Ordering::Relaxed));
                let v = r.below(1000);
                self.rng.store(r.0, Ordering::Relaxed);
                v < per_mille
            }
        }
    }

    fn successes(&self) -> usize {
        self.counts.calls.load(Ordering::SeqCst) - self.counts.failures.load(Ordering::SeqCst)
    }
}

// SAFETY: a refused spawn never runs `start`; every other call is forwarded to ThreadSpawner,
// which keeps the contract (runs `start` once iff Ok, joins all, per-thread current worker).
unsafe impl<P: Parker + Default + 'static> Spawner for Faulty<P> {
    type Parker = P;
    fn new_parker(&self) -> P {
        self.inner.new_parker()
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        let call = self.counts.calls.fetch_add(1, Ordering::SeqCst);
        if self.fails(call) {
            self.counts.failures.fetch_add(1, Ordering::SeqCst);
            return Err(SpawnError);
        }
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.inner.join_all()
    }
    fn available_parallelism(&self) -> usize {
        self.inner.available_parallelism()
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

/// Submits `n` jobs from outside, retrying a submit that failed with `Err(Spawn)` (allowed only
/// while the pool has no thread); waits for all, then a tree, then shuts down.
fn workload_with_retries<S: Spawner>(p: &Progress, pool: &ThreadPool<S>, n: usize) -> usize {
    let counter = ExactOnce::new("faulty-spawner jobs", n);
    p.track(&counter);
    let jobs = Jobs::all(&counter);
    let mut spawn_errors = 0;
    for i in 0..n {
        loop {
            // SAFETY: each job is accepted once (a refused one is still ours and is retried);
            // `jobs` outlives the pool's work.
            match unsafe { pool.submit(jobs.task(i)) } {
                Ok(()) => break,
                Err(Error::Spawn) => {
                    spawn_errors += 1;
                    assert!(!counter.ran(i), "job {i} ran although its submit failed");
                    assert!(spawn_errors < 1000, "the pool keeps failing to start a thread");
                }
                Err(e) => panic!("submit of job {i}: {e:?}"),
            }
        }
    }
    counter.wait_total(n);
    counter.assert_all_once();
    spawn_errors
}

/// `k` in 0..=4, `max_threads` 4: spawns from the k-th on fail. The pool gets k threads and
/// finishes everything with them; with k = 0 it refuses work with `Err(Spawn)`.
#[test]
fn spawn_fails_from_the_kth_on() {
    let _g = common::shared();
    let (n, depth) = (scaled_min(20_000, 100), tree_depth(12));
    watchdog("spawn_fails_from_the_kth_on", watchdog_secs(30), move |p| {
        for k in 0..=4usize {
            p.stage(format!("k = {k}"));
            let spawner = Faulty::<FutexParker>::new(Policy::FailFrom(k));
            let counts = Arc::clone(&spawner.counts);
            let pool = ThreadPool::with_spawner(config(4), spawner).unwrap();
            if k == 0 {
                no_thread_at_all(&pool);
                continue;
            }
            let errors = workload_with_retries(p, &pool, n);
            assert_eq!(errors, 0, "k = {k}: a submit failed with Err(Spawn) although the first spawn succeeded");
            let threads = pool.stats().threads;
            assert!(threads <= k && threads >= 1, "k = {k}: {threads} threads running");
            assert!(pool.spawner().successes() <= k);
            // Tasks submitting tasks, on the threads it got.
            tree(p, pool, depth, TreeMode::Single, false);
            // A fresh one for the shutdown race, and batches / LIFO on few threads.
            let _ = counts;
            shutdown_race_with(p, &|| Faulty::<FutexParker>::new(Policy::FailFrom(k)), scaled_min(100, 2), 3, scaled_min(500, 30), "fail-from-k", false);
            tree(p, ThreadPool::with_spawner(config(4), Faulty::<CondvarParker>::new(Policy::FailFrom(k))).unwrap(), depth, TreeMode::Lifo, false);
        }
    });
}

/// `min_threads`: when the constructor returns, every one of them has started, has its name and
/// has run the start hook, and they go idle by parking; above the thread limit it is refused.
#[test]
fn prestart_starts_names_and_hooks_every_thread() {
    let _g = common::shared();
    watchdog("prestart", watchdog_secs(30), |_| {
        let names = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hooked = Arc::clone(&names);
        let spawner: ThreadSpawner = ThreadSpawner::name_prefix("pre")
            .on_thread_start(move || hooked.lock().unwrap().push(std::thread::current().name().map(String::from)));
        let pool = ThreadPool::with_spawner(config(4).with_min_threads(3), spawner).unwrap();
        let mut seen = names.lock().unwrap().clone();
        seen.sort();
        assert_eq!(seen, ["pre0", "pre1", "pre2"].map(|n| Some(n.to_string())), "started, named and hooked before the constructor returned");
        assert_eq!(pool.stats().threads, 3);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while pool.stats().idle_threads < 3 || pool.stats().parks < 3 {
            assert!(std::time::Instant::now() < until, "the prestarted threads never parked: {:?}", pool.stats());
            std::thread::sleep(Duration::from_millis(1));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || tx.send(()).unwrap()).unwrap();
        rx.recv().unwrap();
        assert!(pool.stats().threads <= 4);
        let refused = ThreadPool::with_spawner(config(4).with_min_threads(5), ThreadSpawner::<FutexParker>::new());
        assert_eq!(refused.err(), Some(Error::InvalidArgument), "min_threads above max_threads");
    });
}

/// A prestart thread that cannot start makes the constructor fail with `Error::Spawn` after
/// joining the threads that did start (each one's stop hook has run when it returns).
#[test]
fn prestart_failure_fails_create_and_joins_the_started() {
    let _g = common::shared();
    watchdog("prestart failure", watchdog_secs(30), |_| {
        for k in 0..3 {
            let started = Arc::new(AtomicUsize::new(0));
            let stopped = Arc::new(AtomicUsize::new(0));
            let (s, t) = (Arc::clone(&started), Arc::clone(&stopped));
            let inner = ThreadSpawner::<FutexParker>::new()
                .on_thread_start(move || {
                    s.fetch_add(1, Ordering::SeqCst);
                })
                .on_thread_stop(move || {
                    t.fetch_add(1, Ordering::SeqCst);
                });
            let made = ThreadPool::with_spawner(config(4).with_min_threads(3), Faulty::around(inner, Policy::FailFrom(k)));
            assert_eq!(made.err(), Some(Error::Spawn), "k = {k}");
            assert_eq!((started.load(Ordering::SeqCst), stopped.load(Ordering::SeqCst)), (k, k), "k = {k}: every started thread joined");
        }
    });
}

/// Every spawn fails: `submit`, `submit_batch` and `spawn` say `Err(Spawn)`, nothing runs, the
/// task is still the caller's (it runs exactly once on another pool), shutdown works.
fn no_thread_at_all<P: Parker + Default + 'static>(pool: &ThreadPool<Faulty<P>>) {
    let counter = ExactOnce::new("refused", 4);
    let jobs = Jobs::all(&counter);
    for attempt in 0..3 {
        // SAFETY: a refused task is still ours; `jobs` outlives every pool it is given to.
        assert_eq!(unsafe { pool.submit(jobs.task(0)) }, Err(Error::Spawn), "attempt {attempt}: submit with no thread");
    }
    let mut batch = pool::Batch::new();
    for i in 1..4 {
        // SAFETY: as above.
        unsafe { batch.push(jobs.task(i)) };
    }
    // SAFETY: as above.
    assert_eq!(unsafe { pool.submit_batch(batch) }, Err(Error::Spawn), "submit_batch with no thread");
    // SAFETY: as above.
    assert_eq!(unsafe { pool.submit_lifo(jobs.task(0)) }, Err(Error::Spawn), "submit_lifo with no thread");
    // A refused closure is dropped, not run, not leaked.
    struct DropCount(Arc<AtomicUsize>);
    impl Drop for DropCount {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let (d, r) = (DropCount(Arc::clone(&drops)), Arc::clone(&ran));
    assert_eq!(
        pool.spawn(move || {
            let _d = d;
            r.fetch_add(1, Ordering::SeqCst);
        }),
        Err(Error::Spawn)
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the refused closure was not dropped exactly once");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the refused closure ran");
    assert_eq!(pool.stats().threads, 0);
    assert!(pool.stats().spawn_failures >= 5, "spawn failures not counted: {:?}", pool.stats());
    pool.shutdown().unwrap();
    assert_eq!(counter.total(), 0, "a refused task ran (at shutdown?)");
    // Still the caller's: it runs exactly once on a healthy pool.
    let healthy = ThreadPool::new(config(2)).unwrap();
    for i in 0..4 {
        // SAFETY: none of them is queued anywhere; `jobs` outlives `healthy`.
        unsafe { healthy.submit(jobs.task(i)) }.unwrap();
    }
    healthy.shutdown().unwrap();
    counter.assert_all_once();
}

/// Only the k-th spawn fails; for k = 0 the first submit is refused and the next one works.
#[test]
fn spawn_fails_only_the_kth() {
    let _g = common::shared();
    let n = scaled_min(20_000, 100);
    watchdog("spawn_fails_only_the_kth", watchdog_secs(30), move |p| {
        for k in 0..=4usize {
            p.stage(format!("k = {k}"));
            let pool = ThreadPool::with_spawner(config(4), Faulty::<FutexParker>::new(Policy::FailOnly(k))).unwrap();
            let errors = workload_with_retries(p, &pool, n);
            assert_eq!(errors, usize::from(k == 0), "k = {k}: Err(Spawn) count");
            pool.shutdown().unwrap();
        }
    });
}

#[test]
fn spawn_fails_every_other_time() {
    let _g = common::shared();
    let (n, depth) = (scaled_min(50_000, 100), tree_depth(13));
    watchdog("spawn_fails_every_other_time", watchdog_secs(30), move |p| {
        for max_threads in [2, 4, 8] {
            p.stage(format!("odd spawns fail, max_threads {max_threads}"));
            let pool = ThreadPool::with_spawner(config(max_threads), Faulty::<FutexParker>::new(Policy::FailOdd)).unwrap();
            assert_eq!(workload_with_retries(p, &pool, n), 0);
            tree(p, pool, depth, TreeMode::Batch, false);
            p.stage(format!("even spawns fail, max_threads {max_threads}"));
            let pool = ThreadPool::with_spawner(config(max_threads), Faulty::<CondvarParker>::new(Policy::FailEven)).unwrap();
            // The very first spawn fails: exactly one Err(Spawn), then work flows.
            assert_eq!(workload_with_retries(p, &pool, n), 1);
            tree(p, pool, depth, TreeMode::Single, false);
        }
    });
}

#[test]
fn spawn_fails_at_random_while_racing_shutdown() {
    let _g = common::shared();
    let rounds = scaled_min(400, 3);
    watchdog("spawn_fails_at_random_while_racing_shutdown", watchdog_secs(30), move |p| {
        shutdown_race_with(p, &|| Faulty::<FutexParker>::new(Policy::Random { per_mille: 500 }), rounds, 3, scaled_min(500, 30), "random spawn failures", true);
        let pool = ThreadPool::with_spawner(config(4), Faulty::<FutexParker>::new(Policy::Random { per_mille: 700 })).unwrap();
        workload_with_retries(p, &pool, scaled_min(50_000, 100));
        assert!(pool.stats().spawn_failures > 0 || pool.stats().threads == 4);
    });
}

// ---------------------------------------------------------------------------------------------
// Parkers that wake spuriously or early

/// How often the pool called each method (shared by all parkers of one spawner).
#[derive(Debug, Default)]
struct ParkCounts {
    parks: AtomicUsize,
    spurious: AtomicUsize,
    park_timeouts: AtomicUsize,
    unparks: AtomicUsize,
}

/// `park` returns immediately (without consuming a token) with probability per_mille/1000;
/// `park_timeout` sleeps a random fraction of its timeout.
struct Spurious<P> {
    inner: P,
    rng: AtomicU64,
    per_mille: u64,
    counts: Arc<ParkCounts>,
}

impl<P> Spurious<P> {
    fn roll(&self) -> u64 {
        // Owner-only in practice (park is called by the owning thread); racy use is harmless.
        let mut r = XorShift::new(self.rng.load(Ordering::Relaxed));
        let v = r.next();
        self.rng.store(r.0, Ordering::Relaxed);
        v
    }
}

impl<P: Parker> Parker for Spurious<P> {
    fn park(&self) {
        self.counts.parks.fetch_add(1, Ordering::Relaxed);
        if self.roll() % 1000 < self.per_mille {
            self.counts.spurious.fetch_add(1, Ordering::Relaxed);
            if self.roll() % 2 == 0 {
                std::thread::yield_now();
            }
            return;
        }
        self.inner.park()
    }
    fn park_timeout(&self, timeout: Duration) {
        self.counts.park_timeouts.fetch_add(1, Ordering::Relaxed);
        let frac = self.roll() % 4;
        if frac == 0 {
            return;
        }
        self.inner.park_timeout(timeout * frac as u32 / 4)
    }
    fn unpark(&self) {
        self.counts.unparks.fetch_add(1, Ordering::Relaxed);
        self.inner.unpark()
    }
}

/// A parker that never blocks for long: `park` is a `park_timeout` of up to 300 µs (a legal
/// parker: spurious returns are allowed), and `park_timeout` returns early.
struct Dozy<P> {
    inner: P,
    rng: AtomicU64,
    counts: Arc<ParkCounts>,
}

impl<P: Parker> Parker for Dozy<P> {
    fn park(&self) {
        self.counts.parks.fetch_add(1, Ordering::Relaxed);
        let mut r = XorShift::new(self.rng.load(Ordering::Relaxed));
        let us = r.below(300);
        self.rng.store(r.0, Ordering::Relaxed);
        self.inner.park_timeout(Duration::from_micros(us))
    }
    fn park_timeout(&self, timeout: Duration) {
        self.counts.park_timeouts.fetch_add(1, Ordering::Relaxed);
        self.inner.park_timeout(timeout / 3)
    }
    fn unpark(&self) {
        self.counts.unparks.fetch_add(1, Ordering::Relaxed);
        self.inner.unpark()
    }
}

#[derive(Clone, Copy, Debug)]
enum ParkerKind {
    Spurious { per_mille: u64 },
    Dozy,
}

/// A ThreadSpawner whose parkers are wrapped in a faulty parker.
struct FaultyParkers<P: Parker + Default + 'static> {
    inner: ThreadSpawner<P>,
    kind: ParkerKind,
    seed: AtomicU64,
    counts: Arc<ParkCounts>,
}

impl<P: Parker + Default + 'static> FaultyParkers<P> {
    fn new(kind: ParkerKind) -> Self {
        Self { inner: ThreadSpawner::new(), kind, seed: AtomicU64::new(1), counts: Arc::default() }
    }
}

/// Either faulty parker, chosen per spawner.
enum AnyFaulty<P> {
    Spurious(Spurious<P>),
    Dozy(Dozy<P>),
}

impl<P: Parker> Parker for AnyFaulty<P> {
    fn park(&self) {
        match self {
            AnyFaulty::Spurious(p) => p.park(),
            AnyFaulty::Dozy(p) => p.park(),
        }
    }
    fn park_timeout(&self, timeout: Duration) {
        match self {
            AnyFaulty::Spurious(p) => p.park_timeout(timeout),
            AnyFaulty::Dozy(p) => p.park_timeout(timeout),
        }
    }
    fn unpark(&self) {
        match self {
            AnyFaulty::Spurious(p) => p.unpark(),
            AnyFaulty::Dozy(p) => p.unpark(),
        }
    }
}

// SAFETY: threads, joining and the current-worker slot are ThreadSpawner's; only the parkers
// differ, and the pool accepts any parker that keeps the Parker contract (these do: spurious
// returns are allowed, tokens are never lost).
unsafe impl<P: Parker + Default + 'static> Spawner for FaultyParkers<P> {
    type Parker = AnyFaulty<P>;
    fn new_parker(&self) -> AnyFaulty<P> {
        let seed = self.seed.fetch_add(0x9E37_79B9, Ordering::Relaxed).wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
        let (inner, rng, counts) = (P::default(), AtomicU64::new(seed), Arc::clone(&self.counts));
        match self.kind {
            ParkerKind::Spurious { per_mille } => AnyFaulty::Spurious(Spurious { inner, rng, per_mille, counts }),
            ParkerKind::Dozy => AnyFaulty::Dozy(Dozy { inner, rng, counts }),
        }
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.inner.join_all()
    }
    fn available_parallelism(&self) -> usize {
        self.inner.available_parallelism()
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

/// External producers, a tree, waves with idle gaps (so workers park and are woken), and the
/// shutdown race, all on faulty parkers.
fn faulty_parker_load<P: Parker + Default + 'static>(p: &Progress, kind: ParkerKind, label: &'static str) {
    let (n, depth) = (scaled_min(50_000, 100), tree_depth(13));
    for max_threads in [1, 2, 4] {
        p.stage(format!("{label}: {max_threads} threads, producers"));
        let spawner = FaultyParkers::<P>::new(kind);
        let counts = Arc::clone(&spawner.counts);
        external_producers(p, ThreadPool::with_spawner(config(max_threads), spawner).unwrap(), 2, n, label);
        tree(p, ThreadPool::with_spawner(config(max_threads), FaultyParkers::<P>::new(kind)).unwrap(), depth, TreeMode::Lifo, false);
        // Waves separated by idle time: every wave must be picked up by sleeping workers.
        let pool = ThreadPool::with_spawner(config(max_threads), FaultyParkers::<P>::new(kind)).unwrap();
        for wave in 0..scaled_min(30, 3) {
            p.stage(format!("{label}: {max_threads} threads, wave {wave}"));
            let counter = ExactOnce::new("wave", 1 + wave % 7);
            let jobs = Jobs::all(&counter);
            common::submit_range(&pool, &jobs, 0..counter.len());
            counter.wait_total(counter.len());
            counter.assert_all_once();
            std::thread::sleep(Duration::from_micros(500));
        }
        let c = &pool.spawner().counts;
        assert!(c.parks.load(Ordering::Relaxed) > 0 || max_threads == 0, "{label}: the workers never parked");
        pool.shutdown().unwrap();
        let _ = counts;
    }
    p.stage(format!("{label}: shutdown race"));
    shutdown_race_with(p, &|| FaultyParkers::<P>::new(kind), scaled_min(300, 3), 3, scaled_min(500, 30), label, false);
}

#[test]
fn spurious_wakeups_futex() {
    let _g = common::shared();
    watchdog("spurious_wakeups_futex", watchdog_secs(30), |p| {
        faulty_parker_load::<FutexParker>(p, ParkerKind::Spurious { per_mille: 300 }, "spurious futex");
    });
}

#[test]
fn spurious_wakeups_condvar() {
    let _g = common::shared();
    watchdog("spurious_wakeups_condvar", watchdog_secs(30), |p| {
        faulty_parker_load::<CondvarParker>(p, ParkerKind::Spurious { per_mille: 300 }, "spurious condvar");
    });
}

#[test]
fn early_timeouts_futex_and_condvar() {
    let _g = common::shared();
    watchdog("early_timeouts", watchdog_secs(30), |p| {
        faulty_parker_load::<FutexParker>(p, ParkerKind::Dozy, "dozy futex");
        faulty_parker_load::<CondvarParker>(p, ParkerKind::Dozy, "dozy condvar");
    });
}

/// Spurious wake-ups everywhere (always returning): the pool must still be correct, it just
/// spins. Small, since every idle worker busy-loops.
#[test]
fn park_that_never_blocks() {
    let _g = common::shared();
    watchdog("park_that_never_blocks", watchdog_secs(30), |p| {
        let n = scaled_min(20_000, 100);
        for max_threads in [1, 3] {
            let pool = ThreadPool::with_spawner(config(max_threads), FaultyParkers::<FutexParker>::new(ParkerKind::Spurious { per_mille: 1000 })).unwrap();
            external_producers(p, pool, 2, n, "never blocks");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Panics in closure tasks

#[test]
fn panicking_closure_is_caught_and_pool_keeps_serving() {
    let _g = common::shared();
    common::quiet_intentional_panics();
    watchdog("panicking_closure", watchdog_secs(30), |p| {
        for max_threads in [1, 2] {
            p.stage(format!("{max_threads} threads"));
            let pool = Arc::new(ThreadPool::new(config(max_threads)).unwrap());
            let before = pool::panic_count();
            let hits = Arc::new(AtomicUsize::new(0));
            const PANICS: usize = 10;
            let n = scaled_min(1000, 20);
            for i in 0..n {
                if i % (n / PANICS) == 0 && i / (n / PANICS) < PANICS {
                    pool.spawn(|| panic!("{}", common::INTENTIONAL)).unwrap();
                }
                let hits = Arc::clone(&hits);
                pool.spawn(move || {
                    hits.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
            // A panic inside a task that itself was spawned from a worker.
            let inner = Arc::clone(&pool);
            pool.spawn(move || {
                inner.spawn(|| panic!("{} (nested)", common::INTENTIONAL)).unwrap();
            })
            .unwrap();
            while hits.load(Ordering::Relaxed) < n || pool::panic_count() < before + PANICS + 1 {
                std::thread::sleep(Duration::from_micros(200));
            }
            // The pool keeps serving after the panics: intrusive tasks, and more closures.
            let counter = ExactOnce::new("after panics", scaled_min(10_000, 10));
            let jobs = Jobs::all(&counter);
            common::submit_range(&pool, &jobs, 0..counter.len());
            counter.wait_total(counter.len());
            let ok = Arc::new(AtomicUsize::new(0));
            let ok2 = Arc::clone(&ok);
            pool.spawn(move || {
                ok2.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            pool.shutdown().unwrap();
            counter.assert_all_once();
            assert_eq!(ok.load(Ordering::SeqCst), 1);
            assert_eq!(hits.load(Ordering::Relaxed), n);
            // Other tests of this binary cause no panics, so the delta is exact.
            assert_eq!(pool::panic_count() - before, PANICS + 1, "panic_count did not count every caught panic");
            assert_eq!(pool.stats().threads, 0);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// A shutdown that unwinds

/// A spawner whose first `join_all` panics before joining anything (a host whose join fails),
/// and that records being dropped: a pool drops its spawner only when it frees its state.
/// Its threads are shared with the test, which joins them itself once the pool is leaked.
struct PanickingJoin {
    inner: Arc<ThreadSpawner>,
    joins: AtomicUsize,
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for PanickingJoin {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

// SAFETY: forwards to ThreadSpawner, except that the first `join_all` panics instead of
// returning: it never returns without having joined, which is what the contract asks.
unsafe impl Spawner for PanickingJoin {
    type Parker = pool::DefaultParker;
    fn new_parker(&self) -> Self::Parker {
        self.inner.new_parker()
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        if self.joins.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("{}: join_all", common::INTENTIONAL);
        }
        self.inner.join_all()
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

impl PanickingJoin {
    fn new() -> (Self, Arc<std::sync::atomic::AtomicBool>, Arc<ThreadSpawner>) {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = Arc::new(ThreadSpawner::new());
        let spawner = Self { inner: Arc::clone(&threads), joins: AtomicUsize::new(0), dropped: Arc::clone(&dropped) };
        (spawner, dropped, threads)
    }
}

/// A pool whose shutdown unwound out of `join_all` may still have threads that use its state:
/// dropping it afterwards must leak that state (the spawner inside it is never dropped), not
/// free it under them.
#[test]
fn drop_after_unwound_shutdown_leaks_instead_of_freeing() {
    let _g = common::shared();
    common::quiet_intentional_panics();
    watchdog("unwound_shutdown", watchdog_secs(30), |p| {
        p.stage("thread pool");
        let (spawner, dropped, threads) = PanickingJoin::new();
        let pool = ThreadPool::with_spawner(config(2), spawner).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let ran = Arc::clone(&ran);
            pool.spawn(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.shutdown()));
        assert!(unwound.is_err(), "join_all's panic should have unwound out of shutdown");
        assert_eq!(ran.load(Ordering::SeqCst), 100, "the queued work ran before the join");
        drop(pool);
        assert!(!dropped.load(Ordering::SeqCst), "the pool freed its state after an unwound shutdown");
        // The leaked pool's threads had left its loop before `join_all`: join them here.
        threads.join_all();

        p.stage("blocking pool");
        static BLOCKING_RAN: AtomicUsize = AtomicUsize::new(0);
        unsafe extern "C" fn blocking_run(_: *mut pool::Task) {
            BLOCKING_RAN.fetch_add(1, Ordering::SeqCst);
        }
        static mut BLOCKING_TASK: Option<pool::BlockingTask> = None;
        let (spawner, dropped, threads) = PanickingJoin::new();
        let pool = pool::BlockingPool::with_spawner(pool::BlockingConfig::default(), spawner).unwrap();
        // SAFETY: the test's one use of the static, and it outlives the (leaked) pool.
        let slot = unsafe { (&raw mut BLOCKING_TASK).as_mut() }.expect("a static is never null");
        let task = slot.insert(pool::BlockingTask::new(blocking_run));
        // SAFETY: a live task, submitted once.
        unsafe { pool.submit(std::ptr::NonNull::from(task)) }.unwrap();
        while BLOCKING_RAN.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.shutdown()));
        assert!(unwound.is_err(), "join_all's panic should have unwound out of shutdown");
        drop(pool);
        assert!(!dropped.load(Ordering::SeqCst), "the blocking pool freed its state after an unwound shutdown");
        threads.join_all();

        p.stage("control: a completed shutdown frees");
        let (spawner, dropped, _threads) = PanickingJoin::new();
        let pool = ThreadPool::with_spawner(config(2), spawner).unwrap();
        // Any join_all after the first one joins: spend the panicking one up front.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.spawner().join_all()));
        pool.spawn(|| ()).unwrap();
        drop(pool);
        assert!(dropped.load(Ordering::SeqCst), "a pool that shut down normally frees its state");
    });
}
