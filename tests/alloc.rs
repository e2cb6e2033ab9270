//! Zero allocations per task on the intrusive path (ARCHITECTURE.md guarantee 5), counted with a
//! counting `#[global_allocator]`; and exactly one allocation per task on the boxed
//! `ThreadPool::spawn` path (expected: it boxes the closure with its task header).
//!
//! The allocator counts only while counting is switched on, and only on threads that opted in:
//! the test's own thread, and the pool's workers, which opt in through a spawner wrapper whose
//! `set_current_worker` marks the thread (the pool calls it on each worker as it starts). So
//! allocations of the test harness or of other tests in this binary never count; the
//! process-wide number is reported too, for information.
//!
//! The pool is warmed up first (every thread started, so thread starts and each worker's own
//! state are allocated before the window); the window then covers submitting, running and
//! waiting for every task.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{scaled_min, watchdog, watchdog_secs, ExactOnce, Jobs, Progress};
use pool::{container_of, CondvarParker, Config, FutexParker, Parker, SpawnError, Spawner, Task, ThreadPool, ThreadSpawner, ThreadStart};

// ---------------------------------------------------------------------------------------------
// The counting allocator

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Allocations (alloc, alloc_zeroed, realloc) on opted-in threads while counting.
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
/// Deallocations on opted-in threads while counting.
static DEALLOCS: AtomicUsize = AtomicUsize::new(0);
/// Allocations on any thread while counting (information only).
static ALLOCS_ANY_THREAD: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    // `const` and without destructor: no lazy registration, so usable inside the allocator.
    static COUNTED_THREAD: Cell<bool> = const { Cell::new(false) };
}

fn count_alloc() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCS_ANY_THREAD.fetch_add(1, Ordering::Relaxed);
        if COUNTED_THREAD.try_with(Cell::get).unwrap_or(false) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_alloc();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_alloc();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_alloc();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) && COUNTED_THREAD.try_with(Cell::get).unwrap_or(false) {
            DEALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What was counted in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    allocs: usize,
    deallocs: usize,
    allocs_any_thread: usize,
}

/// Runs `f` with counting switched on (and this thread opted in); returns what was counted.
fn count_during(f: impl FnOnce()) -> Counts {
    COUNTED_THREAD.with(|c| c.set(true));
    ALLOCS.store(0, Ordering::SeqCst);
    DEALLOCS.store(0, Ordering::SeqCst);
    ALLOCS_ANY_THREAD.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    f();
    COUNTING.store(false, Ordering::SeqCst);
    COUNTED_THREAD.with(|c| c.set(false));
    Counts {
        allocs: ALLOCS.load(Ordering::SeqCst),
        deallocs: DEALLOCS.load(Ordering::SeqCst),
        allocs_any_thread: ALLOCS_ANY_THREAD.load(Ordering::SeqCst),
    }
}

// ---------------------------------------------------------------------------------------------
// A spawner whose workers opt in to counting

struct Marking<S>(S);

// SAFETY: every call is forwarded to the inner spawner, which keeps the contract;
// `set_current_worker` additionally sets a thread-local flag of this test.
unsafe impl<S: Spawner> Spawner for Marking<S> {
    type Parker = S::Parker;
    fn new_parker(&self) -> S::Parker {
        self.0.new_parker()
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        self.0.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.0.join_all()
    }
    fn available_parallelism(&self) -> usize {
        self.0.available_parallelism()
    }
    fn current_worker(&self) -> *const () {
        self.0.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        COUNTED_THREAD.with(|c| c.set(!worker.is_null()));
        self.0.set_current_worker(worker)
    }
}

/// Starts every thread of `pool` (tasks that hold their thread until all threads run one),
/// so no thread start falls in the counting window.
fn warm_up<S: Spawner>(pool: &ThreadPool<S>) {
    let max = pool.max_threads();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.stats().threads < max {
        assert!(Instant::now() < deadline, "warm-up: only {} of {max} threads started", pool.stats().threads);
        let running = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..max {
            let (running, done) = (Arc::clone(&running), Arc::clone(&done));
            pool.spawn(move || {
                running.fetch_add(1, Ordering::SeqCst);
                let until = Instant::now() + Duration::from_millis(200);
                while running.load(Ordering::SeqCst) < max && Instant::now() < until {
                    std::thread::yield_now();
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        while done.load(Ordering::SeqCst) < max {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Intrusive path: zero allocations

/// A task that, on a worker, submits `n` jobs (from inside the pool).
#[repr(C)]
struct Driver<S: Spawner> {
    task: Task,
    pool: *const ThreadPool<S>,
    jobs: *const Jobs,
    first: usize,
    n: usize,
    on_worker: AtomicBool,
}

unsafe extern "C" fn driver_run<S: Spawner>(task: *mut Task) {
    let d = container_of!(task, Driver<S>, task);
    // SAFETY: every task with this callback is the `task` of a live Driver whose pool and jobs
    // outlive it.
    let (pool, jobs, first, n) = unsafe { (&*(*d).pool, &*(*d).jobs, (*d).first, (*d).n) };
    // SAFETY: as above.
    unsafe { (*d).on_worker.store(pool.is_worker_thread(), Ordering::Relaxed) };
    for i in first..first + n {
        // SAFETY: each job is submitted once; the jobs outlive the pool's work. Errors are
        // impossible from a worker; they would show as missing counts.
        let _ = unsafe { pool.submit(jobs.task(i)) };
    }
}

fn intrusive_zero_alloc<S: Spawner>(p: &Progress, spawner: S, max_threads: usize, n: usize) {
    let pool = ThreadPool::with_spawner(Config::default().with_max_threads(max_threads), Marking(spawner)).unwrap();
    p.stage(format!("warm-up, {max_threads} threads"));
    warm_up(&pool);
    // Everything the window needs is allocated before it.
    let counter = ExactOnce::new("intrusive", 2 * n);
    p.track(&counter);
    let jobs = Jobs::all(&counter);
    // A raw pointer to the whole driver (not just its task field), so the callback may reach
    // the other fields through `container_of!` (Miri's aliasing model checks this).
    let driver: *mut Driver<Marking<S>> = Box::into_raw(Box::new(Driver::<Marking<S>> {
        task: Task::new(driver_run::<Marking<S>>),
        pool: &pool,
        jobs: &jobs,
        first: n,
        n,
        on_worker: AtomicBool::new(false),
    }));
    // SAFETY: `driver` is a live allocation; `addr_of_mut!` makes no reference.
    let driver_task = unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*driver).task)) };
    p.stage(format!("counting window, {max_threads} threads"));
    let counts = count_during(|| {
        for i in 0..n {
            // SAFETY: each job is submitted once; `jobs` outlives the pool's work.
            unsafe { pool.submit(jobs.task(i)) }.unwrap();
        }
        // SAFETY: submitted once; `driver` lives until after shutdown.
        unsafe { pool.submit(driver_task) }.unwrap();
        counter.wait_total(2 * n);
    });
    p.stage("shutdown");
    pool.shutdown().unwrap();
    counter.assert_all_once();
    // SAFETY: the pool is shut down: nothing references the driver any more.
    let driver = unsafe { Box::from_raw(driver) };
    assert!(driver.on_worker.load(Ordering::Relaxed), "the driver task did not run on a worker");
    assert_eq!(
        counts.allocs, 0,
        "intrusive path with {max_threads} threads: {} allocations (and {} frees) for {} tasks ({n} submitted from outside, \
         {n} from inside a worker); want 0. Allocations by any thread in the window: {}",
        counts.allocs, counts.deallocs, 2 * n, counts.allocs_any_thread
    );
    assert_eq!(counts.deallocs, 0, "intrusive path: {} frees in the window", counts.deallocs);
    eprintln!(
        "alloc: intrusive, {max_threads} threads, {} tasks: {} allocations on pool/test threads ({} on any thread)",
        2 * n,
        counts.allocs,
        counts.allocs_any_thread
    );
    drop(jobs);
}

#[test]
fn intrusive_submit_allocates_nothing_futex() {
    let _g = common::exclusive();
    let n = scaled_min(100_000, 50);
    watchdog("intrusive_submit_allocates_nothing_futex", watchdog_secs(30), move |p| {
        for threads in [1, 2, 4] {
            intrusive_zero_alloc(p, ThreadSpawner::<FutexParker>::new(), threads, n);
        }
    });
}

#[test]
fn intrusive_submit_allocates_nothing_condvar() {
    let _g = common::exclusive();
    let n = scaled_min(100_000, 50);
    watchdog("intrusive_submit_allocates_nothing_condvar", watchdog_secs(30), move |p| {
        intrusive_zero_alloc(p, ThreadSpawner::<CondvarParker>::new(), 2, n);
    });
}

/// A queue's intrusive path (issue 27): its allocations are made when it is created; its
/// submits, runners (re-submitted every 32 tasks) and waits allocate nothing.
#[test]
fn queue_submit_allocates_nothing() {
    let _g = common::exclusive();
    let n = scaled_min(100_000, 50);
    watchdog("queue_submit_allocates_nothing", watchdog_secs(30), move |p| {
        for width in [1, 2] {
            let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2), Marking(ThreadSpawner::<FutexParker>::new())).unwrap();
            warm_up(&pool);
            let queue = pool::Queue::new(&pool, pool::QueueConfig::new(width)).unwrap();
            let counter = ExactOnce::new("queue", n);
            p.track(&counter);
            let jobs = Jobs::all(&counter);
            p.stage(format!("queue counting window, width {width}"));
            let counts = count_during(|| {
                for i in 0..n {
                    // SAFETY: each job is submitted once; `jobs` outlives the queue's wait.
                    unsafe { queue.try_submit(jobs.task(i)) }.unwrap();
                }
                queue.wait().unwrap();
            });
            counter.assert_all_once();
            assert_eq!(
                (counts.allocs, counts.deallocs),
                (0, 0),
                "queue of width {width}: {} allocations, {} frees for {n} tasks; want 0",
                counts.allocs,
                counts.deallocs
            );
            drop(queue);
            pool.shutdown().unwrap();
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Boxed path: exactly one allocation per task (expected and documented on `spawn`)

#[test]
fn spawn_allocates_exactly_one_box_per_task() {
    let _g = common::exclusive();
    let n = scaled_min(20_000, 20);
    watchdog("spawn_allocates_exactly_one_box_per_task", watchdog_secs(30), move |_| {
        let pool = Arc::new(ThreadPool::with_spawner(Config::default().with_max_threads(2), Marking(ThreadSpawner::<FutexParker>::new())).unwrap());
        warm_up(&pool);
        let hits = Arc::new(AtomicUsize::new(0));
        // From outside: n closures; from inside a worker: one closure that spawns n more.
        let inner_pool = Arc::clone(&pool);
        let counts = count_during(|| {
            for _ in 0..n {
                let hits = Arc::clone(&hits);
                pool.spawn(move || {
                    hits.fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
            let (hits2, pool2) = (Arc::clone(&hits), Arc::clone(&inner_pool));
            pool.spawn(move || {
                for _ in 0..n {
                    let hits = Arc::clone(&hits2);
                    pool2
                        .spawn(move || {
                            hits.fetch_add(1, Ordering::Relaxed);
                        })
                        .unwrap();
                }
                hits2.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            while hits.load(Ordering::Relaxed) < 2 * n + 1 {
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        drop(inner_pool);
        pool.shutdown().unwrap();
        let tasks = 2 * n + 1;
        assert_eq!(
            counts.allocs, tasks,
            "spawn: {} allocations for {tasks} closure tasks; want exactly 1 per task (the box holding task header + closure)",
            counts.allocs
        );
        // Each task frees its own box when it runs (some frees may land just after the window:
        // the hit is counted before the box of the spawning closure is freed).
        assert!(counts.deallocs <= tasks, "spawn: {} frees for {tasks} tasks", counts.deallocs);
        eprintln!("alloc: spawn, {tasks} tasks: {} allocations, {} frees", counts.allocs, counts.deallocs);
    });
}

/// The warm-up itself: a pool's first submit starts threads and allocates (documented: thread
/// starts and per-worker state happen before the counting windows above). Not an assertion of
/// zero, just that the counter works at all: a plain `Box` counts as one.
#[test]
fn counter_counts() {
    let _g = common::exclusive();
    let counts = count_during(|| {
        let b = std::hint::black_box(Box::new(7u64));
        drop(b);
    });
    assert_eq!(counts.allocs, 1);
    assert_eq!(counts.deallocs, 1);
    // Parkers allocate nothing either.
    let counts = count_during(|| {
        let p = FutexParker::new();
        p.unpark();
        p.park();
        let c = CondvarParker::new();
        c.unpark();
        c.park();
    });
    assert_eq!(counts.allocs, 0, "parking allocated");
}
