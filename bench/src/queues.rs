//! Queue workloads (issue 27, "Benchmarks"): `pool::Queue` against the small C programs' own
//! pool (a mutex + condvar FIFO, `mutex_pool.rs`) and against plain submits to a `ThreadPool`.
//!
//! * `queue_serial`: one thread submits 100,000 independent small tasks (a ~100 ns hash loop,
//!   then the shared counter's tick); the time until all have run, per task. `pool` = a queue
//!   of width 1 on a 4-thread pool (intrusive tasks, preallocated); `pool(boxed)` = the same
//!   queue's `spawn`; `pool(1 thread)` = plain `submit` to a pool of `max_threads = 1`; `mutex`
//!   = a one-thread mutex + condvar pool with the function pointer and argument stored in its
//!   FIFO (no allocation per task once the deque has grown, as zstd's pool and libuv's
//!   intrusive work requests), `mutex(boxed)` = the same pool with one `Box` per task (as
//!   C-Thread-Pool's `malloc` per job); `sequential` = the same bodies called in a loop.
//!   Target: the queue no slower than the mutex pool.
//! * `queue_width`: 4,000 independent ~10 µs tasks on a 4-thread pool: a queue of width 4
//!   (`pool`) against a queue of width 1 (`pool(serial)`), and plain submits to the same kind of
//!   pool (`pool(submit)`, the ceiling). Target: width 4 at least 3x the serial queue's
//!   throughput, which needs 4 cores (a machine with fewer caps it at its core count).
//! * `queue_latency`, `queue_latency_idle`: one task at a time on an otherwise idle pool; the
//!   time from just before the submit to the first instruction of its callback (a clock read
//!   stored in the task), median over the run's tasks (the second figure: their 99th
//!   percentile). `pool` = a width-4 queue on a 4-thread pool, `pool(serial)` = width 1,
//!   `pool(submit)` = plain `ThreadPool::submit` (the Rust side of `pool_submit_to`) on a
//!   4-thread pool, `mutex` = the one-thread mutex pool. `queue_latency` submits the next task
//!   as soon as the previous one has run (the workers are still in their idle spin);
//!   `queue_latency_idle` waits 1 ms first (they have gone to sleep: a wake-up per task).
//!   Target: the queue within 2x of plain submit.
//! * `queue_producers`: 8 threads each submit 12,500 small tasks (as `queue_serial`'s) to
//!   their own serial executor, released at once: 8 width-1 queues on one pool of the default
//!   size (`pool`), against 8 pools of 1 thread (`pool(8 pools)`) and 8 one-thread mutex pools
//!   (`mutex(8 pools)`); time until all 100,000 have run, and the OS threads the executors use
//!   (our pools: `Stats::threads` after the run, summed; mutex pools: their threads).
//!
//! These workloads fix their own pool sizes (4 threads, or the default for `queue_producers`;
//! `--threads` does not apply). Every run checks the shared counter: each task ran exactly once
//! (a broken run panics instead of reporting).

use std::hint::black_box;
use std::ptr::{addr_of_mut, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pool::{container_of, Queue, QueueConfig, Task, ThreadSpawner};

use crate::common::*;
use crate::mutex_pool::MutexPool;
use crate::ours::{PoolBox, BOXED, INTRUSIVE};
use crate::Workload;

/// queue_serial's task count, and its body's rounds (~1-1.4 ns per round on the 2-core AMD
/// EPYC VM: ~100 ns a task with the counter's tick; the `sequential` row measures it).
pub const SERIAL_TASKS: usize = 100_000;
pub const SMALL_ROUNDS: u32 = 96;
/// queue_width's task count and body (~10 µs a task on the same VM).
pub const WIDE_TASKS: usize = 4_000;
pub const WIDE_ROUNDS: u32 = 7_500;
/// The pool of queue_serial, queue_width and the latency workloads.
pub const QUEUE_THREADS: usize = 4;
/// Tasks timed per run: back to back, and 1 ms apart.
pub const LATENCY_TASKS: usize = 2_000;
pub const LATENCY_IDLE_TASKS: usize = 200;
pub const LATENCY_GAP: Duration = Duration::from_millis(1);
/// queue_producers: tasks per producer (`PRODUCERS` = 8 producers).
pub const PER_QUEUE: usize = 12_500;

pub fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "queue_serial",
            unit: "ns/task",
            what: "one thread submits 100,000 ~100 ns tasks to a serial executor (queue of width 1, mutex + condvar pool, 1-thread pool)",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: serial,
        },
        Workload {
            name: "queue_width",
            unit: "ms",
            what: "4,000 independent ~10 µs tasks on a 4-thread pool: queue of width 4 vs width 1",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: width,
        },
        Workload {
            name: "queue_latency",
            unit: "ns",
            what: "submit-to-start latency, one task at a time, back to back (median of 2,000 per run)",
            warmup: true,
            extra: Some("p99 ns, highest run"),
            baseline: None,
            interleave: true,
            contenders: || latency(LATENCY_TASKS, None),
        },
        Workload {
            name: "queue_latency_idle",
            unit: "ns",
            what: "submit-to-start latency, one task every 1 ms (workers asleep; median of 200 per run)",
            warmup: true,
            extra: Some("p99 ns, highest run"),
            baseline: None,
            interleave: true,
            contenders: || latency(LATENCY_IDLE_TASKS, Some(LATENCY_GAP)),
        },
        Workload {
            name: "queue_producers",
            unit: "ms",
            what: "8 threads each submit 12,500 ~100 ns tasks to their own serial executor: 8 queues on one pool vs 8 pools",
            warmup: true,
            extra: Some("OS threads"),
            baseline: None,
            interleave: true,
            contenders: producers,
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The task body and the intrusive task.

/// The task's work: a dependent multiply-xorshift chain, ~1.4 ns per round.
#[inline(never)]
fn work(seed: u64, rounds: u32) -> u64 {
    let mut x = seed | 1;
    for _ in 0..rounds {
        x ^= x >> 29;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
    x
}

/// An intrusive task: header first, then what the callback needs.
#[repr(C)]
struct Job {
    task: Task,
    shared: &'static Shared,
    seed: u64,
    rounds: u32,
}

unsafe extern "C" fn job(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a live `Job` (the arrays
    // below outlive their runs; pointers derived from the whole `Job`).
    let job = unsafe { &*container_of!(task, Job, task) };
    black_box(work(job.seed, job.rounds));
    job.shared.tick();
}

fn jobs(n: usize, rounds: u32, shared: &'static Shared) -> Vec<Job> {
    (0..n).map(|i| Job { task: Task::new(job), shared, seed: i as u64, rounds }).collect()
}

/// Pointer to the `i`th task header of a `Job` array.
///
/// # Safety
/// `base` points to at least `i + 1` live `Job`s.
#[inline(always)]
unsafe fn header(base: *mut Job, i: usize) -> NonNull<Task> {
    // SAFETY: the caller's contract; a field pointer is never null.
    unsafe { NonNull::new_unchecked(addr_of_mut!((*base.add(i)).task)) }
}

/// One timed run over a `Job` array: `submit(i)` for each, then the last task's signal.
fn run_jobs(shared: &'static Shared, n: usize, mut submit: impl FnMut(usize)) -> Duration {
    shared.reset();
    let (elapsed, ()) = time(|| {
        for i in 0..n {
            submit(i);
        }
        shared.wait();
    });
    shared.check();
    elapsed
}

/// How a workload hands a task to an executor.
///
/// # Safety
/// `task` is valid, has a callback, is queued nowhere, and stays valid and unmoved until its
/// callback has started (`ThreadPool::submit`'s contract).
type Submit<E> = unsafe fn(&E, NonNull<Task>);

/// A contender that submits a preallocated `Job` array through `submit`, to an executor built
/// by `make` (outside the timed region); `per_task` reports ns per task, else ms.
fn array_contender<E: 'static>(
    pool: &'static str,
    note: &'static str,
    (n, rounds, per_task): (usize, u32, bool),
    make: fn() -> E,
    submit: Submit<E>,
) -> Contender {
    Contender::new(pool, note, move |_| {
        let executor = make();
        let shared = Shared::leak(n);
        let mut tasks = jobs(n, rounds, shared);
        Box::new(move || {
            let base = tasks.as_mut_ptr();
            let elapsed = run_jobs(shared, n, |i| {
                // SAFETY: the array outlives the run, which ends when every task ran, so no
                // task of it is still queued from the previous run (`Submit`'s contract).
                unsafe { submit(&executor, header(base, i)) }
            });
            if per_task { Sample::per_item(elapsed, n) } else { Sample::millis(elapsed) }
        })
    })
}

/// The same bodies called one after another on the measuring thread.
fn sequential(n: usize, rounds: u32, per_task: bool) -> Contender {
    Contender::new("sequential", "the same task bodies called in a loop on one thread", move |_| {
        let shared = Shared::leak(n);
        let mut tasks = jobs(n, rounds, shared);
        Box::new(move || {
            let base = tasks.as_mut_ptr();
            // SAFETY: `header(base, i)` is the `task` of the live `Job` `i`, as `job` expects.
            let elapsed = run_jobs(shared, n, |i| unsafe { job(header(base, i).as_ptr()) });
            if per_task { Sample::per_item(elapsed, n) } else { Sample::millis(elapsed) }
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Executors.

/// A queue and the pool it runs on (fields drop in order: the queue before its pool).
struct OnQueue {
    queue: Queue<'static, ThreadSpawner>,
    _pool: PoolBox,
}

fn on_queue(threads: usize, width: usize) -> OnQueue {
    let pool = PoolBox::new(threads);
    let queue = Queue::new(pool.get(), QueueConfig::new(width)).expect("Queue::new");
    OnQueue { queue, _pool: pool }
}

/// # Safety
/// As [`Submit`].
unsafe fn queue_submit(q: &OnQueue, task: NonNull<Task>) {
    // SAFETY: the caller's contract is `try_submit`'s.
    unsafe { q.queue.try_submit(task) }.expect("Queue::try_submit");
}

/// # Safety
/// As [`Submit`].
unsafe fn pool_submit(p: &PoolBox, task: NonNull<Task>) {
    // SAFETY: the caller's contract is `submit`'s.
    unsafe { p.get().submit(task) }.expect("ThreadPool::submit");
}

/// Stores the task's own callback beside it (function pointer and argument, as C pools do).
///
/// # Safety
/// As [`Submit`].
unsafe fn mutex_submit(m: &MutexPool, task: NonNull<Task>) {
    // SAFETY: a live task (the caller's contract), not queued yet: its callback is only read.
    let f = unsafe { task.as_ref() }.callback().expect("a task with a callback");
    // SAFETY: the caller's contract is `submit_raw`'s, and `f` is the task's own callback.
    unsafe { m.submit_raw(f, task) };
}

// ---------------------------------------------------------------------------------------------
// queue_serial

fn serial() -> Vec<Contender> {
    let size = (SERIAL_TASKS, SMALL_ROUNDS, true);
    vec![
        array_contender(INTRUSIVE, "Queue width 1 on a 4-thread pool, try_submit of a preallocated Task array", size, || on_queue(QUEUE_THREADS, 1), queue_submit),
        Contender::new(BOXED, "Queue width 1 on a 4-thread pool, Queue::spawn (one Box per task)", |_| {
            let q = on_queue(QUEUE_THREADS, 1);
            let shared = Shared::leak(SERIAL_TASKS);
            Box::new(move || {
                let q = &q; // the whole `OnQueue`: capturing only `q.queue` would drop the pool
                let elapsed = run_jobs(shared, SERIAL_TASKS, |i| {
                    q.queue
                        .spawn(move || {
                            black_box(work(i as u64, SMALL_ROUNDS));
                            shared.tick();
                        })
                        .expect("Queue::spawn")
                });
                Sample::per_item(elapsed, SERIAL_TASKS)
            })
        }),
        array_contender("pool(1 thread)", "ThreadPool with max_threads = 1, submit of the same array", size, || PoolBox::new(1), pool_submit),
        array_contender("mutex", "1 thread, Mutex<VecDeque> + Condvar, (fn, arg) stored in the deque: no allocation per task", size, || MutexPool::new(1), mutex_submit),
        Contender::new("mutex(boxed)", "the same mutex pool, one Box<dyn FnOnce> per task", |_| {
            let m = MutexPool::new(1);
            let shared = Shared::leak(SERIAL_TASKS);
            Box::new(move || {
                let elapsed = run_jobs(shared, SERIAL_TASKS, |i| {
                    m.spawn(move || {
                        black_box(work(i as u64, SMALL_ROUNDS));
                        shared.tick();
                    })
                });
                Sample::per_item(elapsed, SERIAL_TASKS)
            })
        }),
        sequential(SERIAL_TASKS, SMALL_ROUNDS, true),
    ]
}

// ---------------------------------------------------------------------------------------------
// queue_width

fn width() -> Vec<Contender> {
    let size = (WIDE_TASKS, WIDE_ROUNDS, false);
    vec![
        array_contender(INTRUSIVE, "Queue width 4 on a 4-thread pool", size, || on_queue(QUEUE_THREADS, 4), queue_submit),
        array_contender("pool(serial)", "Queue width 1 on a 4-thread pool", size, || on_queue(QUEUE_THREADS, 1), queue_submit),
        array_contender("pool(submit)", "plain ThreadPool::submit, 4-thread pool (no width limit: the ceiling)", size, || PoolBox::new(QUEUE_THREADS), pool_submit),
        sequential(WIDE_TASKS, WIDE_ROUNDS, false),
    ]
}

// ---------------------------------------------------------------------------------------------
// queue_latency, queue_latency_idle

/// Nanoseconds since the first call (a process-wide origin, so that a stamp taken on one
/// thread and one taken on another compare).
fn now_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The latency task: its callback stamps its start first, then counts itself and says done.
#[repr(C)]
struct Probe {
    task: Task,
    started: AtomicU64,
    runs: AtomicUsize,
    done: AtomicBool,
}

unsafe extern "C" fn probe(task: *mut Task) {
    let now = now_ns();
    // SAFETY: every task with this callback is the `task` of the live `Probe` of a `ProbeBox`
    // (freed only after its last run was seen done).
    let p = unsafe { &*container_of!(task, Probe, task) };
    p.started.store(now, Ordering::Relaxed);
    p.runs.fetch_add(1, Ordering::Relaxed);
    p.done.store(true, Ordering::Release);
}

/// A heap `Probe` reached only through its raw pointer (the executor holds the task while it is
/// queued); freed on drop.
struct ProbeBox(*mut Probe);

impl ProbeBox {
    fn new() -> Self {
        let p = Probe { task: Task::new(probe), started: AtomicU64::new(0), runs: AtomicUsize::new(0), done: AtomicBool::new(false) };
        ProbeBox(Box::into_raw(Box::new(p)))
    }
    fn task(&self) -> NonNull<Task> {
        // SAFETY: live until drop; a field pointer is never null.
        unsafe { NonNull::new_unchecked(addr_of_mut!((*self.0).task)) }
    }
    fn get(&self) -> (&AtomicU64, &AtomicUsize, &AtomicBool) {
        // SAFETY: live until drop; the atomics are shared with the callback, nothing else.
        unsafe { (&(*self.0).started, &(*self.0).runs, &(*self.0).done) }
    }
}

impl Drop for ProbeBox {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw in `new`; every run waited until the callback's last
        // store (`done`), after which neither the callback nor the executor touches the probe.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// One run: `n` tasks one at a time, the submit-to-start time of each; the median, and the
/// 99th percentile as the second figure. With `gap`, the measuring thread sleeps that long
/// after each submit (blocked, so it neither delays the woken worker nor shares its CPU), then
/// checks the task ran; without, it spins until the task has run and submits the next at once.
fn latency_run(p: &ProbeBox, n: usize, gap: Option<Duration>, submit: impl Fn(NonNull<Task>)) -> Sample {
    let (started, runs, done) = p.get();
    runs.store(0, Ordering::Relaxed);
    let mut ns = Vec::with_capacity(n);
    for _ in 0..n {
        done.store(false, Ordering::Relaxed);
        let t0 = now_ns();
        submit(p.task());
        if let Some(gap) = gap {
            std::thread::sleep(gap);
        }
        let mut spins = 0u32;
        while !done.load(Ordering::Acquire) {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        ns.push(started.load(Ordering::Relaxed).saturating_sub(t0) as f64);
    }
    assert_eq!(runs.load(Ordering::Relaxed), n, "latency probe: runs != submits");
    ns.sort_by(f64::total_cmp);
    let (median, _, _) = stats(&ns);
    Sample { value: median, extra: Some(ns[(n * 99 / 100).min(n - 1)]) }
}

fn latency_contender<E: 'static>(pool: &'static str, note: &'static str, (n, gap): (usize, Option<Duration>), make: fn() -> E, submit: Submit<E>) -> Contender {
    Contender::new(pool, note, move |_| {
        let executor = make();
        let p = ProbeBox::new();
        now_ns();
        // SAFETY: `latency_run` submits the probe again only after its callback has run (its
        // `done`), and the probe lives as long as this runner.
        Box::new(move || latency_run(&p, n, gap, |t| unsafe { submit(&executor, t) }))
    })
}

fn latency(n: usize, gap: Option<Duration>) -> Vec<Contender> {
    let size = (n, gap);
    vec![
        latency_contender(INTRUSIVE, "Queue width 4 on a 4-thread pool", size, || on_queue(QUEUE_THREADS, 4), queue_submit),
        latency_contender("pool(serial)", "Queue width 1 on a 4-thread pool", size, || on_queue(QUEUE_THREADS, 1), queue_submit),
        latency_contender("pool(submit)", "plain ThreadPool::submit (pool_submit_to's Rust side), 4-thread pool", size, || PoolBox::new(QUEUE_THREADS), pool_submit),
        latency_contender("mutex", "1-thread Mutex<VecDeque> + Condvar pool", size, || MutexPool::new(1), mutex_submit),
        latency_contender("pool(1 thread)", "plain ThreadPool::submit, pool of max_threads = 1", size, || PoolBox::new(1), pool_submit),
    ]
}

// ---------------------------------------------------------------------------------------------
// queue_producers

/// 8 serial executors and how to submit to executor `p`.
trait Executors: Sync + 'static {
    /// # Safety
    /// As [`Submit`].
    unsafe fn submit(&self, p: usize, task: NonNull<Task>);
    /// OS threads they run now.
    fn threads(&self) -> usize;
}

/// 8 width-1 queues on one pool (fields drop in order: the queues before their pool).
struct SharedPool {
    queues: Vec<Queue<'static, ThreadSpawner>>,
    pool: PoolBox,
}

impl Executors for SharedPool {
    unsafe fn submit(&self, p: usize, task: NonNull<Task>) {
        // SAFETY: the caller's contract is `try_submit`'s.
        unsafe { self.queues[p].try_submit(task) }.expect("Queue::try_submit");
    }
    fn threads(&self) -> usize {
        self.pool.get().stats().threads
    }
}

impl Executors for Vec<PoolBox> {
    unsafe fn submit(&self, p: usize, task: NonNull<Task>) {
        // SAFETY: forwarded contract.
        unsafe { pool_submit(&self[p], task) };
    }
    fn threads(&self) -> usize {
        self.iter().map(|p| p.get().stats().threads).sum()
    }
}

impl Executors for Vec<MutexPool> {
    unsafe fn submit(&self, p: usize, task: NonNull<Task>) {
        // SAFETY: forwarded contract.
        unsafe { mutex_submit(&self[p], task) };
    }
    fn threads(&self) -> usize {
        self.iter().map(MutexPool::threads).sum()
    }
}

fn producers_contender<E: Executors>(pool: &'static str, note: &'static str, make: fn() -> E) -> Contender {
    Contender::new(pool, note, move |_| {
        let executors = make();
        let n = PRODUCERS * PER_QUEUE;
        let shared = Shared::leak(n);
        let mut tasks = jobs(n, SMALL_ROUNDS, shared);
        Box::new(move || {
            let base = SendPtr(tasks.as_mut_ptr());
            let executors = &executors;
            shared.reset();
            let elapsed = crate::common::producers(shared, move |p| {
                let base = base; // the whole `SendPtr` (Sync), not its raw field
                for i in p * PER_QUEUE..(p + 1) * PER_QUEUE {
                    // SAFETY: the array outlives the run, which ends when every task ran; each
                    // producer submits its own disjoint range, none still queued.
                    unsafe { executors.submit(p, header(base.0, i)) };
                }
            });
            shared.check();
            Sample { value: elapsed.as_secs_f64() * 1e3, extra: Some(executors.threads() as f64) }
        })
    })
}

fn producers() -> Vec<Contender> {
    vec![
        producers_contender(INTRUSIVE, "8 Queues of width 1 on one pool of the default size (one thread per CPU)", || {
            let pool = PoolBox::new(0);
            let queues = (0..PRODUCERS).map(|_| Queue::new(pool.get(), QueueConfig::new(1)).expect("Queue::new")).collect();
            SharedPool { queues, pool }
        }),
        producers_contender("pool(8 pools)", "8 ThreadPools of max_threads = 1, plain submit", || (0..PRODUCERS).map(|_| PoolBox::new(1)).collect::<Vec<_>>()),
        producers_contender("mutex(8 pools)", "8 one-thread Mutex<VecDeque> + Condvar pools", || (0..PRODUCERS).map(|_| MutexPool::new(1)).collect::<Vec<_>>()),
    ]
}

