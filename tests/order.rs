//! Start order on a pool with one worker (ARCHITECTURE.md, "Order where it is promised"): the
//! tasks submitted from outside the pool start in submission order, from one thread and per
//! thread from several, while the worker's ring overflows into the injector and while a task
//! keeps resubmitting itself locally beside them. Local submits are not ordered against the
//! outside ones (the LIFO slot may run a task's newest child first); they are only counted.
//!
//! Each outside task appends `(stream, seq)` to a start log when it starts; an *inversion* is
//! a task that started after a task of its own stream submitted later. Every test wants 0 of
//! them, every task run exactly once (`common::ExactOnce`), under a watchdog; sizes scale with
//! `POOL_STRESS_SCALE` (tiny under Miri).

mod common;

use std::ptr::{addr_of_mut, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use common::{scaled_min, watchdog, watchdog_secs, ExactOnce, Progress};
use pool::{container_of, Config, Task, ThreadPool, ThreadSpawner};

/// What an outside task does when it starts, besides logging itself.
#[derive(Clone, Copy)]
enum Extra {
    Nothing,
    /// Every `every`th task of stream 0 submits `locals` no-op tasks from inside the pool (to
    /// its worker's ring, which overflows past 256).
    FanOut { every: usize, locals: usize },
    /// Task 0 of stream 0 starts the self-resubmitting task (`Ctx::spin`).
    StartSpinner,
}

/// The state a test's tasks share.
struct Ctx {
    /// `stream << 32 | seq` of each outside task, in start order.
    log: Box<[AtomicU64]>,
    /// Next free entry of `log`.
    next: AtomicUsize,
    counter: Arc<ExactOnce>,
    per_stream: usize,
    extra: Extra,
    /// The pool, for the tasks' own submits (set once the pool exists).
    pool: OnceLock<Arc<ThreadPool<ThreadSpawner>>>,
    /// Local tasks run (`Extra::FanOut`).
    locals_ran: Arc<AtomicUsize>,
    /// Rounds of the self-resubmitting task (`Extra::StartSpinner`).
    spins: Arc<AtomicUsize>,
    /// The submitting thread has queued every outside task.
    submitted_all: AtomicBool,
    /// `spins` when `submitted_all` was first seen by the spinner.
    spins_at_submitted_all: AtomicUsize,
    /// Most rounds the spinner may make once every outside task is queued.
    spin_bound: usize,
    /// The spinner stopped at `spin_bound` with outside tasks left: they were starved.
    starved: AtomicBool,
    /// The spinner stopped.
    spinner_done: AtomicBool,
}

impl Ctx {
    fn new(name: &'static str, streams: usize, per_stream: usize, extra: Extra) -> Arc<Self> {
        let total = streams * per_stream;
        Arc::new(Self {
            log: (0..total).map(|_| AtomicU64::new(u64::MAX)).collect(),
            next: AtomicUsize::new(0),
            counter: ExactOnce::new(name, total),
            per_stream,
            extra,
            pool: OnceLock::new(),
            locals_ran: Arc::new(AtomicUsize::new(0)),
            spins: Arc::new(AtomicUsize::new(0)),
            submitted_all: AtomicBool::new(false),
            spins_at_submitted_all: AtomicUsize::new(usize::MAX),
            // The injector is searched first at least once per tick of 128 runs, so each queued
            // outside task waits for at most about 128 rounds: 8x that, plus slack for startup.
            spin_bound: total * 1024 + 100_000,
            starved: AtomicBool::new(false),
            spinner_done: AtomicBool::new(false),
        })
    }

    fn pool(&self) -> &Arc<ThreadPool<ThreadSpawner>> {
        self.pool.get().expect("the pool is set before the first submit")
    }

    /// Stream and sequence number of outside task `id`.
    fn split(&self, id: usize) -> (usize, usize) {
        (id / self.per_stream, id % self.per_stream)
    }
}

/// An outside task: `Task` first, recovered with `container_of!`.
#[repr(C)]
struct OrderJob {
    task: Task,
    id: usize,
    ctx: *const Ctx,
}

unsafe extern "C" fn order_job_run(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a live `OrderJob`.
    let job = container_of!(task, OrderJob, task);
    // SAFETY: the job is live until its callback has run; its `Ctx` outlives the pool.
    let (id, ctx) = unsafe { ((*job).id, &*(*job).ctx) };
    let (stream, seq) = ctx.split(id);
    let at = ctx.next.fetch_add(1, Ordering::Relaxed);
    ctx.log[at].store(((stream as u64) << 32) | seq as u64, Ordering::Relaxed);
    match ctx.extra {
        Extra::Nothing => {}
        Extra::FanOut { every, locals } => {
            if stream == 0 && seq % every == every / 2 {
                for _ in 0..locals {
                    let ran = Arc::clone(&ctx.locals_ran);
                    ctx.pool()
                        .spawn(move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                        })
                        .expect("a task's own submit is accepted");
                }
            }
        }
        Extra::StartSpinner => {
            if id == 0 {
                spin(SpinCtx(ctx));
            }
        }
    }
    // The last access to the job: the test may free it once every task counted itself.
    ctx.counter.hit(id);
}

/// A `&Ctx` for the spinner's closures (the `Ctx` outlives the pool: see `run`).
#[derive(Clone, Copy)]
struct SpinCtx(*const Ctx);
// SAFETY: `Ctx` is Sync, and the pointer stays valid until after the pool shut down.
unsafe impl Send for SpinCtx {}

/// One round of the self-resubmitting task: it submits itself again (a local submit, to its
/// worker's ring) until every outside task ran, or until `spin_bound` rounds once every
/// outside task was queued (then it marks them starved).
fn spin(ctx: SpinCtx) {
    // SAFETY: see `SpinCtx`.
    let c = unsafe { &*ctx.0 };
    let rounds = c.spins.fetch_add(1, Ordering::Relaxed) + 1;
    if c.counter.total() == c.counter.len() {
        c.spinner_done.store(true, Ordering::Release);
        return;
    }
    if c.submitted_all.load(Ordering::Acquire) {
        let since = c.spins_at_submitted_all.load(Ordering::Relaxed);
        if since == usize::MAX {
            c.spins_at_submitted_all.store(rounds, Ordering::Relaxed);
        } else if rounds - since > c.spin_bound {
            c.starved.store(true, Ordering::Relaxed);
            c.spinner_done.store(true, Ordering::Release);
            return;
        }
    }
    c.pool().spawn(move || spin(ctx)).expect("a task's own submit is accepted");
}

/// The outside tasks of a test, at stable addresses.
struct OrderJobs(Box<[OrderJob]>);
// SAFETY: the jobs reach other threads only through the pool, by pointer; they are freed after
// the pool shut down.
unsafe impl Send for OrderJobs {}
// SAFETY: as above; `task` only computes a pointer.
unsafe impl Sync for OrderJobs {}

impl OrderJobs {
    fn new(ctx: &Arc<Ctx>) -> Arc<Self> {
        let n = ctx.counter.len();
        Arc::new(Self((0..n).map(|id| OrderJob { task: Task::new(order_job_run), id, ctx: Arc::as_ptr(ctx) }).collect()))
    }

    fn task(&self, id: usize) -> NonNull<Task> {
        let job = &self.0[id] as *const OrderJob as *mut OrderJob;
        // SAFETY: in bounds; `addr_of_mut!` creates no reference.
        unsafe { NonNull::new_unchecked(addr_of_mut!((*job).task)) }
    }
}

/// How the tasks are submitted.
#[derive(Clone, Copy)]
struct Submit {
    streams: usize,
    /// Yield the submitting thread after every `pause_every` submits (0: never).
    pause_every: usize,
}

/// Inversions in a start log: (how many, the first as (stream, seq, a later seq that had
/// already started)).
fn inversions(ctx: &Ctx, streams: usize) -> (usize, Option<(usize, usize, usize)>) {
    let mut max_seen = vec![None::<usize>; streams];
    let (mut count, mut first) = (0, None);
    for entry in &ctx.log[..ctx.next.load(Ordering::Relaxed)] {
        let v = entry.load(Ordering::Relaxed);
        let (stream, seq) = ((v >> 32) as usize, (v & 0xffff_ffff) as usize);
        match max_seen[stream] {
            Some(max) if seq < max => {
                count += 1;
                first.get_or_insert((stream, seq, max));
            }
            _ => max_seen[stream] = Some(seq),
        }
    }
    (count, first)
}

/// Runs one test on a fresh pool with one worker: submits every outside task, waits for all,
/// shuts down, checks exact-once; returns the context for the test's own checks.
fn run(p: &Progress, name: &'static str, per_stream: usize, how: Submit, extra: Extra) -> Arc<Ctx> {
    let ctx = Ctx::new(name, how.streams, per_stream, extra);
    p.track(&ctx.counter);
    p.track_value("local tasks run", &ctx.locals_ran);
    p.track_value("spinner rounds", &ctx.spins);
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(1)).unwrap());
    assert!(ctx.pool.set(Arc::clone(&pool)).is_ok());
    let jobs = OrderJobs::new(&ctx);
    p.stage(format!("{name}: submitting"));
    let handles: Vec<_> = (0..how.streams)
        .map(|stream| {
            let (pool, jobs) = (Arc::clone(&pool), Arc::clone(&jobs));
            std::thread::spawn(move || {
                for seq in 0..per_stream {
                    if how.pause_every != 0 && seq % how.pause_every == 0 {
                        std::thread::yield_now();
                    }
                    // SAFETY: each job is submitted once and outlives the pool (freed below,
                    // after shutdown).
                    unsafe { pool.submit(jobs.task(stream * per_stream + seq)) }.unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a submitting thread panicked");
    }
    ctx.submitted_all.store(true, Ordering::Release);
    p.stage(format!("{name}: waiting for the tasks"));
    // A starved stream still runs once the spinner gives up (the worker's ring runs dry).
    ctx.counter.wait_total(ctx.counter.len());
    if matches!(extra, Extra::StartSpinner) {
        p.stage(format!("{name}: waiting for the spinner to stop"));
        while !ctx.spinner_done.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }
    p.stage(format!("{name}: shutdown"));
    pool.shutdown().unwrap();
    // The tasks' handle (in `ctx`) and ours: the pool is freed when the test drops `ctx`.
    drop(pool);
    drop(jobs);
    ctx.counter.assert_all_once();
    ctx
}

fn assert_in_order(ctx: &Ctx, streams: usize, what: &str) {
    let (count, first) = inversions(ctx, streams);
    assert_eq!(
        count,
        0,
        "{what}: {count} of {} outside tasks started after a task of their own stream submitted later \
         (first: stream {} task {} after task {})",
        ctx.counter.len(),
        first.map_or(0, |f| f.0),
        first.map_or(0, |f| f.1),
        first.map_or(0, |f| f.2),
    );
}

fn tasks() -> usize {
    scaled_min(100_000, 64)
}

#[test]
fn one_thread_submits_in_order() {
    let _g = common::shared();
    let n = tasks();
    watchdog("one_thread_submits_in_order", watchdog_secs(30), move |p| {
        let ctx = run(p, "one thread", n, Submit { streams: 1, pause_every: 0 }, Extra::Nothing);
        assert_in_order(&ctx, 1, "1 submitting thread");
    });
}

#[test]
fn one_thread_with_pauses_in_order() {
    let _g = common::shared();
    let n = tasks();
    watchdog("one_thread_with_pauses_in_order", watchdog_secs(30), move |p| {
        let ctx = run(p, "one thread, pauses", n, Submit { streams: 1, pause_every: 8 }, Extra::Nothing);
        assert_in_order(&ctx, 1, "1 submitting thread yielding every 8 submits");
    });
}

#[test]
fn four_threads_each_in_order() {
    let _g = common::shared();
    let n = tasks() / 4;
    watchdog("four_threads_each_in_order", watchdog_secs(30), move |p| {
        let ctx = run(p, "four threads", n, Submit { streams: 4, pause_every: 0 }, Extra::Nothing);
        assert_in_order(&ctx, 4, "4 submitting threads (per thread)");
    });
}

#[test]
fn ring_overflow_keeps_outside_order() {
    let _g = common::shared();
    let n = tasks();
    // 300 local submits overflow the 256-slot ring at least once per fan-out.
    let (every, locals) = if cfg!(miri) { (n / 2, 300) } else { (1_000, 300) };
    watchdog("ring_overflow_keeps_outside_order", watchdog_secs(30), move |p| {
        let ctx = run(p, "overflow", n, Submit { streams: 1, pause_every: 0 }, Extra::FanOut { every, locals });
        let fan_outs = (0..n).filter(|seq| seq % every == every / 2).count();
        assert_eq!(ctx.locals_ran.load(Ordering::Relaxed), fan_outs * locals, "every local task ran");
        assert_in_order(&ctx, 1, "outside tasks with local fan-outs overflowing the ring");
    });
}

#[test]
fn self_resubmitting_task_neither_starves_nor_reorders_outside_tasks() {
    let _g = common::shared();
    let n = scaled_min(20_000, 64);
    watchdog("self_resubmitting_task", watchdog_secs(30), move |p| {
        let ctx = run(p, "beside a spinner", n, Submit { streams: 1, pause_every: 0 }, Extra::StartSpinner);
        assert!(
            !ctx.starved.load(Ordering::Relaxed),
            "the self-resubmitting task made {} rounds after every outside task was queued, and {} of {} outside \
             tasks had still not run",
            ctx.spin_bound,
            ctx.counter.len() - ctx.counter.total(),
            ctx.counter.len(),
        );
        assert!(ctx.spins.load(Ordering::Relaxed) > 1, "the spinner resubmitted itself");
        assert_in_order(&ctx, 1, "outside tasks beside a self-resubmitting task");
    });
}
