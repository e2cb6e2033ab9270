//! The blocking pool (`pool::BlockingPool`): cap, keep-alive, shutdown hand-back, spawn
//! failure, closures and futures, zero allocation per intrusive task.
//!
//! Every test runs its body under a watchdog (a lost wake-up fails in seconds instead of
//! hanging) and counts every task with a per-task flag (exactly once, never both run and
//! cancelled). Tests that count OS threads or allocations take the exclusive lock so no other
//! test of this binary runs meanwhile. The whole file runs in a few seconds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use pool::{
    container_of, BlockingConfig, BlockingJoinError, BlockingPool, BlockingTask, Error, SpawnError, Spawner, Task,
    ThreadSpawner, ThreadStart,
};

// ---------------------------------------------------------------------------------------------
// Harness: watchdog, serialisation, allocation counting, OS threads

/// Runs `f` on its own thread and fails the test if it does not finish in `secs` seconds.
fn watchdog<T: Send + 'static>(what: &'static str, secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = thread::Builder::new().name(format!("watched:{what}")).spawn(move || tx.send(f()).unwrap()).unwrap();
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            h.join().unwrap();
            v
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!(),
        },
        Err(_) => panic!("WATCHDOG: {what} did not finish in {secs} s (lost wake-up or stuck shutdown?)"),
    }
}

static SERIAL: RwLock<()> = RwLock::new(());
fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(PoisonError::into_inner)
}
fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    SERIAL.write().unwrap_or_else(PoisonError::into_inner)
}

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

/// OS threads of this process named `name` (Linux: /proc/self/task/*/comm). Counting by name
/// keeps the test harness's own threads (it starts one per test) out of the figure.
fn named_threads(name: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok()).filter(|c| c.trim_end() == name).count()
}

/// A blocking pool on OS threads named `name`.
fn named_pool(config: BlockingConfig, name: &'static str) -> BlockingPool<ThreadSpawner> {
    BlockingPool::with_spawner(config, ThreadSpawner::named(name)).unwrap()
}

/// Waits up to `limit` for `cond`, polling every millisecond. Returns whether it held.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Intrusive jobs counted exactly once

/// Per-task flags: `ran` and `cancelled` must each go 0 -> 1 at most once, never both.
struct Ledger {
    ran: Box<[AtomicU8]>,
    cancelled: Box<[AtomicU8]>,
    doubles: AtomicUsize,
    runs: AtomicUsize,
    cancels: AtomicUsize,
}

impl Ledger {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            ran: (0..n).map(|_| AtomicU8::new(0)).collect(),
            cancelled: (0..n).map(|_| AtomicU8::new(0)).collect(),
            doubles: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
            cancels: AtomicUsize::new(0),
        })
    }
    fn hit(&self, flags: &[AtomicU8], id: usize, total: &AtomicUsize) {
        if flags[id].swap(1, Ordering::AcqRel) != 0 {
            self.doubles.fetch_add(1, Ordering::Relaxed);
        }
        total.fetch_add(1, Ordering::Release);
    }
    fn ran(&self, id: usize) -> bool {
        self.ran[id].load(Ordering::Acquire) != 0
    }
    fn cancelled(&self, id: usize) -> bool {
        self.cancelled[id].load(Ordering::Acquire) != 0
    }
    fn done(&self) -> usize {
        self.runs.load(Ordering::Acquire) + self.cancels.load(Ordering::Acquire)
    }
}

/// The intrusive blocking task of these tests.
#[repr(C)]
struct Job {
    header: BlockingTask,
    id: usize,
    sleep: Duration,
    ledger: *const Ledger,
}

unsafe extern "C" fn job_run(task: *mut Task) {
    // SAFETY: every task with this callback is the header of a live `Job`.
    let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), Job, header) };
    if !job.sleep.is_zero() {
        thread::sleep(job.sleep);
    }
    // SAFETY: the ledger outlives the pool's use of the job.
    let ledger = unsafe { &*job.ledger };
    ledger.hit(&ledger.ran, job.id, &ledger.runs);
}

unsafe extern "C" fn job_cancel(task: *mut Task) {
    // SAFETY: as `job_run`.
    let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), Job, header) };
    // SAFETY: as `job_run`.
    let ledger = unsafe { &*job.ledger };
    ledger.hit(&ledger.cancelled, job.id, &ledger.cancels);
}

/// A block of jobs at stable addresses.
struct Jobs {
    jobs: Box<[Job]>,
    _ledger: Arc<Ledger>,
}
// SAFETY: the jobs go to other threads only by pointer through the pool.
unsafe impl Send for Jobs {}
// SAFETY: as above.
unsafe impl Sync for Jobs {}

impl Jobs {
    /// `n` jobs; `kind(id)` gives (mandatory, has_cancel, sleep).
    fn new(ledger: &Arc<Ledger>, n: usize, kind: impl Fn(usize) -> (bool, bool, Duration)) -> Self {
        let jobs = (0..n)
            .map(|id| {
                let (mandatory, cancel, sleep) = kind(id);
                let mut header = BlockingTask::new(job_run);
                if cancel {
                    header = header.with_cancel(job_cancel);
                }
                if mandatory {
                    header = header.mandatory();
                }
                Job { header, id, sleep, ledger: Arc::as_ptr(ledger) }
            })
            .collect();
        Self { jobs, _ledger: ledger.clone() }
    }
    fn task(&self, i: usize) -> NonNull<BlockingTask> {
        NonNull::from(&self.jobs[i].header)
    }
}

fn config(max_threads: usize, keep_alive: Duration) -> BlockingConfig {
    BlockingConfig::default().with_max_threads(max_threads).with_keep_alive(keep_alive)
}

/// A minimal executor for the async test: polls on this thread, parks between polls.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(thread::Thread, AtomicUsize);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.unpark();
        }
    }
    let unpark = Arc::new(Unpark(thread::current(), AtomicUsize::new(0)));
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn closures_join_await_and_panic() {
    let _g = shared();
    watchdog("closures", 20, || {
        let pool = BlockingPool::new(config(8, Duration::from_secs(5))).unwrap();
        let handles: Vec<_> = (0..100u64).map(|i| pool.spawn_blocking(move || i * i).unwrap()).collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join(), Ok((i * i) as u64));
        }
        // Awaiting: completion wakes the future (the task sleeps, so the first poll is Pending).
        let out = block_on(async {
            let a = pool.spawn_blocking(|| {
                thread::sleep(Duration::from_millis(20));
                "slow"
            });
            let b = pool.spawn_blocking(|| "fast");
            (a.unwrap().await, b.unwrap().await)
        });
        assert_eq!(out, (Ok("slow"), Ok("fast")));
        // A panic is caught and reported, and the thread survives it.
        let before = pool::panic_count();
        let h = pool.spawn_blocking(|| -> u32 { panic!("pool-test: intentional panic") }).unwrap();
        assert_eq!(h.join(), Err(BlockingJoinError::Panicked));
        assert!(pool::panic_count() > before);
        assert_eq!(pool.spawn_blocking(|| 5).unwrap().join(), Ok(5));
        // A detached closure still runs.
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        drop(pool.spawn_mandatory(move || f.store(true, Ordering::Release)).unwrap());
        pool.shutdown().unwrap();
        assert!(flag.load(Ordering::Acquire));
        assert_eq!(pool.spawn_blocking(|| ()).unwrap_err(), Error::Shutdown);
        assert_eq!(pool.shutdown(), Err(Error::Shutdown));
        let m = pool.metrics();
        assert_eq!((m.threads, m.idle_threads, m.queue_depth), (0, 0, 0));
        assert_eq!(m.threads_spawned, m.threads_exited);
        assert_eq!(m.tasks_run, 100 + 2 + 2 + 1);
    });
}

/// `join` inside a task on a one-worker pool waits through the pool's waiting loop: the worker
/// runs the pool task that the blocking closure waits for, rather than blocking on it.
#[test]
fn join_on_a_worker_runs_other_work() {
    let _g = shared();
    watchdog("join_on_a_worker", 20, || {
        let blocking = Arc::new(BlockingPool::new(config(2, Duration::from_secs(5))).unwrap());
        let pool = Arc::new(pool::ThreadPool::new(pool::Config::default().with_max_threads(1)).unwrap());
        let (p, b) = (pool.clone(), blocking.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel::<u32>();
            let h = b.spawn_blocking(move || ready_rx.recv().unwrap() + 1).unwrap();
            // Queued behind this task on the only worker: it runs inside the join's wait.
            p.spawn(move || ready_tx.send(41).unwrap()).unwrap();
            let v = h.join();
            drop((p, b));
            tx.send(v).unwrap();
        })
        .unwrap();
        assert_eq!(rx.recv().unwrap(), Ok(42));
    });
}

#[test]
fn global_pool_spawn_blocking() {
    let _g = shared();
    watchdog("global", 20, || {
        let hs: Vec<_> = (0..16).map(|i| pool::spawn_blocking(move || i + 1).unwrap()).collect();
        let sum: i32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (1..=16).sum());
        assert_eq!(pool::global_blocking().max_threads(), 512);
    });
}

/// 10,000 sleeping tasks never run on more threads than the cap; each runs exactly once.
#[test]
fn cap_respected_under_10000_sleeping_tasks() {
    let _g = exclusive();
    watchdog("cap", 30, || {
        const N: usize = 10_000;
        const CAP: usize = 64;
        let pool = named_pool(config(CAP, Duration::from_secs(5)), "blk-cap");
        let ledger = Ledger::new(N);
        let jobs = Jobs::new(&ledger, N, |_| (false, true, Duration::from_micros(500)));
        let stop = Arc::new(AtomicBool::new(false));
        let peak_os = Arc::new(AtomicUsize::new(0));
        let monitor = {
            let (stop, peak_os) = (stop.clone(), peak_os.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak_os.fetch_max(named_threads("blk-cap"), Ordering::Relaxed);
                    thread::sleep(Duration::from_micros(500));
                }
            })
        };
        let start = Instant::now();
        let mut peak_depth = 0;
        for i in 0..N {
            // SAFETY: the jobs outlive the pool's use of them (we wait for all below).
            unsafe { pool.submit(jobs.task(i)).unwrap() };
            if i % 256 == 0 {
                let m = pool.metrics();
                assert!(m.threads <= CAP, "{m:?}");
                peak_depth = peak_depth.max(m.queue_depth);
            }
        }
        assert!(wait_until(Duration::from_secs(20), || ledger.done() == N), "only {} of {N} ran", ledger.done());
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        monitor.join().unwrap();
        let m = pool.metrics();
        assert!(m.peak_threads <= CAP, "peak {} over the cap {CAP}", m.peak_threads);
        let os_peak = peak_os.load(Ordering::Relaxed);
        assert!(os_peak <= CAP, "OS threads peaked at {os_peak} (cap {CAP})");
        assert!(peak_depth > 0, "the queue never held a task: the test did not load the pool");
        pool.shutdown().unwrap();
        for id in 0..N {
            assert!(ledger.ran(id) && !ledger.cancelled(id), "task {id}");
        }
        assert_eq!(ledger.doubles.load(Ordering::Relaxed), 0);
        let m = pool.metrics();
        assert_eq!((m.tasks_run, m.tasks_cancelled, m.threads), (N, 0, 0));
        eprintln!("cap: {N} x 500 us on cap {CAP}: {elapsed:?}, peak {} threads (OS {os_peak}), peak queue {peak_depth}", m.peak_threads);
    });
}

/// The pool grows under load and shrinks back to zero threads (and zero OS threads) after the
/// keep-alive; it then grows again on demand.
#[test]
fn keep_alive_shrinks_to_zero_threads() {
    let _g = exclusive();
    watchdog("keep-alive", 30, || {
        let keep_alive = Duration::from_millis(100);
        let pool = named_pool(config(32, keep_alive), "blk-keep");
        for round in 0..2 {
            let n = 300;
            let ledger = Ledger::new(n);
            let jobs = Jobs::new(&ledger, n, |_| (false, true, Duration::from_millis(1)));
            for i in 0..n {
                // SAFETY: the jobs outlive the pool's use of them (we wait below).
                unsafe { pool.submit(jobs.task(i)).unwrap() };
            }
            assert!(wait_until(Duration::from_secs(10), || ledger.done() == n));
            let grown = pool.metrics();
            assert!(grown.threads >= 2, "round {round}: the pool did not grow: {grown:?}");
            // Not before the keep-alive: threads finishing now stay idle for about 100 ms.
            let t0 = Instant::now();
            // A leaving thread counts in `threads_exited` just after it left `threads`
            // (`BlockingMetrics`): wait for both.
            assert!(
                wait_until(Duration::from_secs(5), || {
                    let m = pool.metrics();
                    m.threads == 0 && m.threads_exited == m.threads_spawned
                }),
                "round {round}: threads still alive long after the keep-alive: {:?}",
                pool.metrics()
            );
            let shrink = t0.elapsed();
            assert!(shrink + Duration::from_millis(5) >= keep_alive / 2, "round {round}: left too early ({shrink:?})");
            let m = pool.metrics();
            assert_eq!((m.idle_threads, m.queue_depth), (0, 0), "{m:?}");
            assert_eq!(m.threads_spawned, m.threads_exited, "{m:?}");
            // The OS threads are gone too (a /proc entry can outlive the exit by a moment).
            assert!(
                wait_until(Duration::from_secs(2), || named_threads("blk-keep") == 0),
                "OS threads left: {}",
                named_threads("blk-keep")
            );
            drop(jobs);
        }
        pool.shutdown().unwrap();
    });
}

/// Spurious returns of `park_timeout` are absorbed (with the platform's clock): idle threads stay for the
/// whole keep-alive, and are notified normally.
#[test]
fn spurious_wakeups_absorbed() {
    let _g = shared();
    watchdog("spurious", 20, || {
        /// A parker whose park_timeout returns after at most 1 ms, token or not.
        #[derive(Default)]
        struct Jittery(pool::CondvarParker);
        impl pool::Parker for Jittery {
            fn park(&self) {
                self.0.park()
            }
            fn park_timeout(&self, timeout: Duration) {
                self.0.park_timeout(timeout.min(Duration::from_millis(1)))
            }
            fn unpark(&self) {
                self.0.unpark()
            }
        }
        let keep_alive = Duration::from_millis(300);
        let pool = BlockingPool::with_spawner(config(4, keep_alive), ThreadSpawner::<Jittery>::new()).unwrap();
        pool.spawn_blocking(|| ()).unwrap().join().unwrap();
        thread::sleep(Duration::from_millis(100));
        let m = pool.metrics();
        assert_eq!((m.threads, m.idle_threads), (1, 1), "a spurious return ended the keep-alive early: {m:?}");
        // The idle thread takes the next task (no new thread).
        pool.spawn_blocking(|| ()).unwrap().join().unwrap();
        assert_eq!(pool.metrics().threads_spawned, 1);
        assert!(wait_until(Duration::from_secs(5), || pool.metrics().threads == 0));
        // Without a clock a return without notification counts as the timeout: the thread
        // leaves early (documented), and nothing is lost.
        /// A platform without a clock (`now_ns` is `None`), otherwise `ThreadSpawner`'s.
        struct NoClock(ThreadSpawner<Jittery>);
        // SAFETY: every method is `ThreadSpawner`'s, whose contract holds; `now_ns` returning
        // `None` is always allowed (a platform without a clock).
        unsafe impl pool::Spawner for NoClock {
            type Parker = Jittery;
            fn new_parker(&self) -> Jittery {
                self.0.new_parker()
            }
            fn spawn(&self, start: pool::ThreadStart, stack_size: usize) -> Result<(), pool::SpawnError> {
                self.0.spawn(start, stack_size)
            }
            fn join_all(&self) {
                self.0.join_all()
            }
            fn current_worker(&self) -> *const () {
                self.0.current_worker()
            }
            fn set_current_worker(&self, worker: *const ()) {
                self.0.set_current_worker(worker)
            }
            fn now_ns(&self) -> Option<u64> {
                None
            }
        }
        let pool2 = BlockingPool::with_spawner(config(4, keep_alive), NoClock(ThreadSpawner::<Jittery>::new())).unwrap();
        for i in 0..50 {
            assert_eq!(pool2.spawn_blocking(move || i).unwrap().join(), Ok(i));
        }
        pool.shutdown().unwrap();
        pool2.shutdown().unwrap();
    });
}

/// At shutdown, mandatory tasks (and tasks without a cancel callback) run, the others are
/// handed back through their cancel callback; none is lost, none runs twice, none both.
#[test]
fn shutdown_runs_mandatory_and_hands_back_the_rest() {
    let _g = shared();
    watchdog("mandatory", 20, || {
        const N: usize = 300;
        let pool = Arc::new(BlockingPool::new(config(2, Duration::from_secs(5))).unwrap());
        // Two blockers hold both threads until shutdown has begun.
        let gate = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicUsize::new(0));
        let blockers: Vec<_> = (0..2)
            .map(|_| {
                let (gate, started) = (gate.clone(), started.clone());
                pool.spawn_blocking(move || {
                    started.fetch_add(1, Ordering::AcqRel);
                    while !gate.load(Ordering::Acquire) {
                        thread::sleep(Duration::from_millis(1));
                    }
                })
                .unwrap()
            })
            .collect();
        assert!(wait_until(Duration::from_secs(5), || started.load(Ordering::Acquire) == 2));
        let ledger = Ledger::new(N);
        // id % 3: 0 mandatory (with cancel), 1 plain (with cancel), 2 no cancel callback.
        let jobs = Arc::new(Jobs::new(&ledger, N, |id| (id % 3 == 0, id % 3 != 2, Duration::ZERO)));
        for i in 0..N {
            // SAFETY: the jobs outlive the pool's use of them (shutdown below finishes them).
            unsafe { pool.submit(jobs.task(i)).unwrap() };
        }
        let closures: Vec<_> = (0..10).map(|i| pool.spawn_blocking(move || i).unwrap()).collect();
        let must: Vec<_> = (0..10).map(|i| pool.spawn_mandatory(move || i).unwrap()).collect();
        assert_eq!(pool.metrics().queue_depth, N + 20);
        let p = pool.clone();
        let shutter = thread::spawn(move || p.shutdown());
        // Shutdown has begun once submits are refused. Probes accepted before that are
        // queued behind the blockers and must be handed back.
        let probe_ledger = Ledger::new(100_000);
        let probes = Jobs::new(&probe_ledger, 100_000, |_| (false, true, Duration::ZERO));
        let mut accepted_probes = 0;
        loop {
            // SAFETY: the probes outlive the pool's use of them (shutdown finishes them below).
            match unsafe { pool.submit(probes.task(accepted_probes)) } {
                Ok(()) => accepted_probes += 1,
                Err(Error::Shutdown) => break,
                Err(e) => panic!("{e:?}"),
            }
            thread::sleep(Duration::from_micros(100));
        }
        gate.store(true, Ordering::Release);
        shutter.join().unwrap().unwrap();
        for id in 0..N {
            let (ran, cancelled) = (ledger.ran(id), ledger.cancelled(id));
            match id % 3 {
                0 | 2 => assert!(ran && !cancelled, "task {id} (must run): ran {ran}, cancelled {cancelled}"),
                _ => assert!(!ran && cancelled, "task {id} (cancellable): ran {ran}, cancelled {cancelled}"),
            }
        }
        assert_eq!(ledger.doubles.load(Ordering::Relaxed), 0);
        for h in blockers {
            h.join().unwrap();
        }
        for h in closures {
            assert_eq!(h.join(), Err(BlockingJoinError::Cancelled));
        }
        for (i, h) in must.into_iter().enumerate() {
            assert_eq!(h.join(), Ok(i));
        }
        let m = pool.metrics();
        let must_run = (0..N).filter(|id| id % 3 != 1).count();
        assert_eq!(m.tasks_cancelled, N - must_run + 10 + accepted_probes, "{m:?}");
        assert_eq!(m.tasks_run, 2 + must_run + 10, "{m:?}");
        assert_eq!((m.threads, m.queue_depth), (0, 0));
        for id in 0..accepted_probes + 1 {
            assert_eq!((probe_ledger.ran(id), probe_ledger.cancelled(id)), (false, id < accepted_probes), "probe {id}");
        }
    });
}

/// With no thread at all (every one left by keep-alive), shutdown runs the mandatory tasks on
/// the calling thread and hands back the rest.
#[test]
fn shutdown_with_no_threads_drains_on_the_caller() {
    let _g = shared();
    watchdog("no threads", 20, || {
        // A spawner that can be switched off: the first submit starts a thread which blocks,
        // later ones queue behind it.
        let pool = BlockingPool::with_spawner(config(1, Duration::ZERO), Flaky::new(usize::MAX)).unwrap();
        let ledger = Ledger::new(6);
        let jobs = Jobs::new(&ledger, 6, |id| (id % 2 == 0, true, Duration::from_millis(if id == 0 { 50 } else { 0 })));
        for i in 0..6 {
            // SAFETY: the jobs outlive the pool's use of them.
            unsafe { pool.submit(jobs.task(i)).unwrap() };
        }
        pool.shutdown().unwrap();
        for id in 0..6 {
            assert_eq!(ledger.ran(id), id == 0 || id % 2 == 0, "task {id}");
            assert_eq!(ledger.cancelled(id), id != 0 && id % 2 == 1, "task {id}");
        }
    });
}

/// A bounded queue (`max_queued`): with the only thread held, producers racing for the places
/// get exactly the bound accepted and `Error::Full` for the rest (accepted + refused =
/// attempts, a refused closure dropped at once); the waiting count never passes the bound;
/// lowering the bound drops nothing, and a place frees when a waiting task starts.
#[test]
fn bounded_queue_refuses_when_full() {
    const BOUND: usize = 3;
    const PRODUCERS: usize = 4;
    const TRIES: usize = 40;
    let _g = shared();
    watchdog("bounded queue", 20, || {
        let pool = Arc::new(BlockingPool::new(config(1, Duration::from_secs(10)).with_max_queued(BOUND)).unwrap());
        let (started, wait_started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let gate = pool.spawn_blocking(move || {
            started.send(()).unwrap();
            released.recv().unwrap();
        });
        wait_started.recv().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let token = Arc::new(());
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let (pool, ran, token) = (pool.clone(), ran.clone(), token.clone());
                thread::spawn(move || {
                    let (mut accepted, mut full, mut deepest) = (Vec::new(), 0, 0);
                    for _ in 0..TRIES {
                        let (ran, token) = (ran.clone(), token.clone());
                        match pool.spawn_blocking(move || {
                            drop(token);
                            ran.fetch_add(1, Ordering::Relaxed);
                        }) {
                            Ok(h) => accepted.push(h),
                            Err(Error::Full) => full += 1,
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                        deepest = deepest.max(pool.metrics().queue_depth);
                    }
                    (accepted, full, deepest)
                })
            })
            .collect();
        let (mut handles, mut full, mut deepest) = (Vec::new(), 0, 0);
        for p in producers {
            let (h, f, d) = p.join().unwrap();
            handles.extend(h);
            full += f;
            deepest = deepest.max(d);
        }
        assert_eq!(handles.len(), BOUND, "accepted while the thread is held");
        assert_eq!(full, PRODUCERS * TRIES - BOUND, "refused with Error::Full");
        assert!(deepest <= BOUND, "{deepest} waiting, bound {BOUND}");
        // Every refused closure (and its token) is dropped already.
        assert_eq!(Arc::strong_count(&token), 1 + BOUND);
        pool.set_max_queued(1);
        assert_eq!(pool.spawn_blocking(|| ()).unwrap_err(), Error::Full, "lowered below what waits");
        assert_eq!(pool.metrics().tasks_refused, full + 1, "every refusal counted");
        release.send(()).unwrap();
        gate.unwrap().join().unwrap();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(ran.load(Ordering::Relaxed), BOUND);
        // The queue is empty again: a place is free under the lowered bound.
        pool.spawn_blocking(|| ()).unwrap().join().unwrap();
    });
}

/// Shutdown while other threads are still submitting: every accepted task runs or is handed
/// back exactly once; every refused one is untouched.
#[test]
fn shutdown_while_submitting_from_other_threads() {
    let _g = shared();
    watchdog("racing shutdown", 20, || {
        for round in 0..20 {
            const PER: usize = 2_000;
            const SUBMITTERS: usize = 3;
            let pool = Arc::new(BlockingPool::new(config(4, Duration::from_millis(if round % 2 == 0 { 0 } else { 50 }))).unwrap());
            let ledger = Ledger::new(PER * SUBMITTERS);
            let jobs = Arc::new(Jobs::new(&ledger, PER * SUBMITTERS, |id| (id % 4 == 0, id % 8 != 1, Duration::ZERO)));
            let accepted: Arc<Vec<AtomicU8>> = Arc::new((0..PER * SUBMITTERS).map(|_| AtomicU8::new(0)).collect());
            let go = Arc::new(AtomicBool::new(false));
            let submitters: Vec<_> = (0..SUBMITTERS)
                .map(|s| {
                    let (pool, jobs, accepted, go) = (pool.clone(), jobs.clone(), accepted.clone(), go.clone());
                    thread::spawn(move || {
                        while !go.load(Ordering::Acquire) {
                            std::hint::spin_loop();
                        }
                        for i in s * PER..(s + 1) * PER {
                            // SAFETY: the jobs outlive the pool (joined below, before drop).
                            match unsafe { pool.submit(jobs.task(i)) } {
                                Ok(()) => accepted[i].store(1, Ordering::Relaxed),
                                Err(Error::Shutdown) => break,
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                    })
                })
                .collect();
            go.store(true, Ordering::Release);
            thread::sleep(Duration::from_micros(200 + 150 * round as u64));
            pool.shutdown().unwrap();
            for s in submitters {
                s.join().unwrap();
            }
            let mut n_accepted = 0;
            for id in 0..PER * SUBMITTERS {
                let acc = accepted[id].load(Ordering::Relaxed) != 0;
                let (ran, cancelled) = (ledger.ran(id), ledger.cancelled(id));
                n_accepted += acc as usize;
                if !acc {
                    assert!(!ran && !cancelled, "round {round}: refused task {id} was touched");
                } else if id % 4 == 0 || id % 8 == 1 {
                    assert!(ran && !cancelled, "round {round}: task {id} must run: ran {ran} cancelled {cancelled}");
                } else {
                    assert!(ran ^ cancelled, "round {round}: task {id}: ran {ran} cancelled {cancelled}");
                }
            }
            assert_eq!(ledger.doubles.load(Ordering::Relaxed), 0);
            assert_eq!(ledger.done(), n_accepted, "round {round}");
            let m = pool.metrics();
            assert_eq!(m.tasks_run + m.tasks_cancelled, n_accepted, "round {round}: {m:?}");
            assert_eq!((m.threads, m.queue_depth, m.idle_threads), (0, 0, 0), "round {round}: {m:?}");
        }
    });
}

/// A spawner that refuses to start threads once its budget is used up (or while `off`).
struct Flaky {
    inner: ThreadSpawner,
    budget: AtomicUsize,
    off: AtomicBool,
    refused: AtomicUsize,
}

impl Flaky {
    fn new(budget: usize) -> Self {
        Self { inner: ThreadSpawner::new(), budget: AtomicUsize::new(budget), off: AtomicBool::new(false), refused: AtomicUsize::new(0) }
    }
}

// SAFETY: forwards to ThreadSpawner, or refuses (Err) without running `start`.
unsafe impl Spawner for Flaky {
    type Parker = <ThreadSpawner as Spawner>::Parker;
    fn new_parker(&self) -> Self::Parker {
        self.inner.new_parker()
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        if self.off.load(Ordering::Acquire)
            || self.budget.fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| b.checked_sub(1)).is_err()
        {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(SpawnError);
        }
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.inner.join_all()
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

/// Spawn failure: with no thread, submit reports it (the task stays the caller's); with one,
/// tasks wait for it; when spawning works again, the pool grows again.
#[test]
fn spawn_failure_is_survived() {
    let _g = shared();
    watchdog("spawn failure", 20, || {
        let pool = BlockingPool::with_spawner(config(8, Duration::from_millis(30)), Flaky::new(1)).unwrap();
        let ledger = Ledger::new(40);
        let jobs = Jobs::new(&ledger, 40, |_| (false, true, Duration::from_millis(1)));
        // One thread may start: everything runs on it.
        for i in 0..20 {
            // SAFETY: the jobs outlive the pool's use of them.
            unsafe { pool.submit(jobs.task(i)).unwrap() };
        }
        assert!(wait_until(Duration::from_secs(5), || ledger.done() == 20));
        let m = pool.metrics();
        assert_eq!(m.threads_spawned, 1, "{m:?}");
        assert!(m.spawn_failures >= 1, "the one thread should have been asked for help: {m:?}");
        // Let it leave by keep-alive: with no thread and no spawn, submit reports it.
        assert!(wait_until(Duration::from_secs(5), || pool.metrics().threads == 0));
        // SAFETY: on error the task is still ours (checked below: never run).
        assert_eq!(unsafe { pool.submit(jobs.task(20)) }, Err(Error::Spawn));
        assert!(!ledger.ran(20) && !ledger.cancelled(20));
        assert_eq!(pool.metrics().queue_depth, 0);
        // Spawning works again: the pool recovers.
        pool.spawner().budget.store(usize::MAX, Ordering::Release);
        for i in 20..40 {
            // SAFETY: as above.
            unsafe { pool.submit(jobs.task(i)).unwrap() };
        }
        assert!(wait_until(Duration::from_secs(5), || ledger.done() == 40));
        assert!(pool.metrics().threads_spawned >= 2);
        pool.shutdown().unwrap();
        assert_eq!(ledger.doubles.load(Ordering::Relaxed), 0);
        for id in 0..40 {
            assert!(ledger.ran(id), "task {id}");
        }
    });
}

/// Shutdown or drop from inside the pool's own task: refused / no deadlock.
#[test]
fn shutdown_from_inside_is_refused_and_drop_inside_does_not_deadlock() {
    let _g = shared();
    watchdog("inside", 20, || {
        let pool = Arc::new(BlockingPool::new(config(2, Duration::from_secs(1))).unwrap());
        let p = pool.clone();
        let r = pool.spawn_blocking(move || (p.shutdown(), p.is_pool_thread())).unwrap().join().unwrap();
        assert_eq!(r, (Err(Error::InvalidArgument), true));
        assert!(!pool.is_pool_thread());
        // The last handle dropped inside a task: the pool shuts down without joining itself.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = pool.clone();
        drop(pool);
        let inner = p.clone();
        p.spawn_blocking(move || {
            drop(inner);
            tx.send(()).unwrap();
        })
        .unwrap();
        drop(p);
        rx.recv_timeout(Duration::from_secs(5)).expect("the task ran");
    });
}

/// A spawner that forwards to `ThreadSpawner` and counts `detach_all` calls.
struct Detaching {
    inner: ThreadSpawner,
    detached: Arc<AtomicUsize>,
}

// SAFETY: forwards every call to ThreadSpawner.
unsafe impl Spawner for Detaching {
    type Parker = <ThreadSpawner as Spawner>::Parker;
    fn new_parker(&self) -> Self::Parker {
        self.inner.new_parker()
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.inner.join_all()
    }
    fn detach_all(&self) {
        self.detached.fetch_add(1, Ordering::AcqRel);
        self.inner.detach_all()
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

/// The last handle dropped inside a task cannot join the pool's threads: it detaches them, once,
/// so none is left neither joined nor detached (a finished, unjoined thread keeps its stack;
/// ThreadSanitizer reports it as a thread leak).
#[test]
fn drop_inside_detaches_the_threads() {
    let _g = shared();
    watchdog("drop inside detaches", 20, || {
        let detached = Arc::new(AtomicUsize::new(0));
        let spawner = Detaching { inner: ThreadSpawner::new(), detached: detached.clone() };
        let pool = Arc::new(BlockingPool::with_spawner(config(2, Duration::from_secs(1)), spawner).unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let inner = pool.clone();
        pool.spawn_blocking(move || {
            // Ours is the last handle once the test's is gone.
            go_rx.recv().unwrap();
            drop(inner);
            tx.send(()).unwrap();
        })
        .unwrap();
        drop(pool);
        go_tx.send(()).unwrap();
        rx.recv_timeout(Duration::from_secs(5)).expect("the task ran");
        assert_eq!(detached.load(Ordering::Acquire), 1, "detached once, by the drop inside the task");
    });
}

/// The intrusive path allocates nothing per task (a warm pool at its cap).
#[test]
fn zero_allocation_per_intrusive_task() {
    let _g = exclusive();
    watchdog("alloc", 20, || {
        const N: usize = 2_000;
        let pool = BlockingPool::new(config(2, Duration::from_secs(10))).unwrap();
        let ledger = Ledger::new(N);
        let jobs = Jobs::new(&ledger, N, |_| (false, true, Duration::ZERO));
        // Warm up: both threads started and idle.
        for h in [pool.spawn_blocking(|| thread::sleep(Duration::from_millis(20))).unwrap(), pool.spawn_blocking(|| thread::sleep(Duration::from_millis(20))).unwrap()] {
            h.join().unwrap();
        }
        let before = ALLOCS.load(Ordering::Relaxed);
        for i in 0..N {
            // SAFETY: the jobs outlive the pool's use of them.
            unsafe { pool.submit(jobs.task(i)).unwrap() };
        }
        while ledger.done() < N {
            std::hint::spin_loop();
        }
        let allocs = ALLOCS.load(Ordering::Relaxed) - before;
        assert!(allocs == 0, "{allocs} allocations for {N} intrusive tasks");
        pool.shutdown().unwrap();
    });
}

/// Create / use / shut down in a loop: no thread left behind.
#[test]
fn create_shutdown_loop_leaks_no_thread() {
    let _g = exclusive();
    watchdog("loop", 20, || {
        for i in 0..50 {
            let pool = named_pool(config(4, Duration::from_millis(if i % 2 == 0 { 0 } else { 1000 })), "blk-loop");
            let hs: Vec<_> = (0..8).map(|j| pool.spawn_blocking(move || j).unwrap()).collect();
            for (j, h) in hs.into_iter().enumerate() {
                assert_eq!(h.join(), Ok(j));
            }
            drop(pool);
        }
        assert!(wait_until(Duration::from_secs(2), || named_threads("blk-loop") == 0), "threads left: {}", named_threads("blk-loop"));
    });
}

#[test]
fn config_validation() {
    assert_eq!(BlockingPool::new(config(BlockingConfig::MAX_THREADS + 1, Duration::ZERO)).unwrap_err(), Error::InvalidArgument);
    assert_eq!(BlockingPool::new(config(0, Duration::ZERO)).unwrap().max_threads(), 512);
}
