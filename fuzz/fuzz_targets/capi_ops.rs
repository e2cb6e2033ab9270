//! `capi_ops`: every input is a small program of C API calls (`pool::capi`, the functions
//! behind `include/pool.h`), run against real pools, with the invariants checked as it goes.
//!
//! Encoding: the input is read byte by byte; each op is one byte (`byte % 20`, `OP_NAMES`)
//! followed by its argument bytes (a missing byte reads as 0, the ordinary choice); ops 16-19
//! are the queue ops (`queue_ops.rs`). At most `MAX_OPS` ops run per input and at most `CAP`
//! tasks are made, so each execution stays in the milliseconds.
//!
//! What the ops do: `pool_config_init` / `pool_create` with in- and out-of-range values (two
//! live pool slots of 1 to 4 threads, plus create-and-destroy probes at the range edges);
//! `pool_submit_to`, `pool_fork`, `pool_submit_after` (delays up to 1.5 ms),
//! `pool_submit_batch_to` of boxed jobs that embed a
//! `struct task` (plain tasks; tasks that submit children from inside the pool one by one, as a
//! batch or with `pool_fork`; fork-join tasks that wait on a `struct pool_latch` on their own
//! stack), some with a NULL callback, batches with a NULL callback somewhere or a cycle;
//! `pool_shutdown` (also twice), `pool_destroy`; resizing before a wait (`pool_set_max_threads`
//! with 0 to one above the limit, `pool_refresh_max_threads`: exact status codes, and every
//! wait and exact-once check after it holds on the resized pool); the latch entry points from the driver, with
//! the global pool now and then (`pool_submit`, `pool_latch_wait_global`); the blocking pool
//! (`pool_blocking_*`: config, task init, submit with flags and cancel callbacks, shutdown,
//! metrics, destroy, `pool_blocking_global_configure`, a queue bound with
//! `pool_blocking_set_max_queued`); `pool_stats` / `pool_worker_stats`
//! after each shutdown; `pool_status_str` with any code; NULL for every pointer argument.
//! Queues (`pool_queue_*`, up to four live, on the two pool slots): `pool_queue_init` with
//! widths 0 to `max_threads` + 1 (and SIZE_MAX), bounds 0 to 3, with or without a cancel
//! callback, NULL queue or pool; `pool_queue_submit` / `pool_queue_submit_timeout` (0, 100 µs,
//! 1 ms, or no limit where the queue has a width on a live pool) of boxed jobs embedding a
//! `struct task`: plain, blocking 20 µs-1.8 ms, or calling their own queue from inside
//! (`pool_queue_wait`, `pool_queue_destroy`, a timed submit; then a child submitted to it,
//! sometimes cancelled at once), some freeing themselves; `pool_queue_cancel` of a waiting
//! task, a started or finished one, another queue's, one never submitted, NULL;
//! `pool_queue_set_width` (0, back, out of range) while tasks run (a "settle" op waits, at
//! most 2 ms, until some of a queue's tasks run, so that width changes and submits land while
//! they do: the driver is far faster than the tasks start); bursts of submits then
//! cancels from the list's tail, middle and head; `pool_queue_wait`; `pool_queue_destroy`
//! (the driver destroys a pool's queues before the pool); a pool's shutdown under its queues;
//! queues on a target queue (`pool_queue_init_target`, a quarter of the inits where the
//! chosen slot holds a queue without a target; a bounded target is INVALID), whose runners
//! wait in the target's list: the same checks per queue, and a target's destroy is BUSY
//! while queues on it exist (the driver then destroys them first).
//!
//! Invariants (a broken one aborts with a message, which libFuzzer reports as a crash):
//! * every status code is exactly the documented one for the call (INVALID for NULL, a NULL
//!   callback, a bad config or batch; SHUTDOWN after shutdown; OK otherwise), and an `*out`
//!   is untouched on error;
//! * every accepted task runs exactly once: checked when `pool_shutdown` / `pool_destroy`
//!   returns, when a latch wait returns, and when a "wait" op sees the pool idle (a lost
//!   wake-up shows up there as a task that never runs, reported after 10 s);
//! * every refused task never runs (and the driver frees it at once);
//! * a submit from inside a task (children, forks) is always accepted, even during shutdown;
//! * a blocking task has exactly one of its callbacks called once; mandatory tasks and tasks
//!   without `cancel` run; after shutdown the metrics match the counts and no thread is left;
//! * after `pool_shutdown` the stats are exact: `polled` = the callbacks counted, plus those of
//!   the forked jobs (`pool_worker_fork`) a queue handed out rather than their join (also summed
//!   over `pool_worker_stats`), no thread, none idle; an index past the last worker is refused;
//! * after each input every pool is destroyed and the OS thread count (without the global
//!   pool's own threads, which live until exit by design) is back to where it was;
//! * queues (how each is checked exactly while tasks race the driver: `queue_ops.rs`):
//!   every accepted task runs exactly once or is cancelled exactly once: `pool_queue_cancel`
//!   returning OK means it had not started and never runs (and it is freed at once; a second
//!   cancel is BUSY), the cancel callback is called only by `pool_queue_destroy`, once per
//!   task still waiting, and a queue without one runs them instead; checked after each
//!   `pool_queue_wait` (the queue idle), each destroy, and each pool shutdown (a queue with a
//!   width has run everything); no task of a queue runs after its destroy; a refused submit
//!   never runs (freed by the driver, untouched when FULL); FIFO start per queue (sequence
//!   numbers checked at start); at most `width` tasks of a queue run at once (after a
//!   narrowing: the larger width until the older tasks finish); a queue suspended since it was
//!   idle starts nothing, and cancelling one of its tasks is never BUSY; status codes exact
//!   (OK / FULL at the bound / SHUTDOWN on a shut-down pool, exactly where the driver knows the
//!   waiting count; INVALID for NULL, a NULL callback, a width above `max_threads`, and for
//!   wait, destroy and a timed submit from a task of the same queue); a task's own submits to
//!   its queue are OK or FULL, never SHUTDOWN; the pool's `polled` upper bound is not checked
//!   on a pool that had queues (their runners are pool tasks).
//!
//! Every job is freed (by its callback or by the driver), so a leak inside the pool is left
//! for LeakSanitizer (on by default under `cargo fuzz`) to report.
//!
//! `CAPI_OPS_TRACE=1` prints each op as it is decoded (to read a crash input).
#![no_main]

use std::ffi::{c_int, c_uint, CStr};
use std::mem::offset_of;
use std::ptr::{self, null, null_mut};
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use pool::capi::{
    POOL_CONFIG_RESERVED_WORDS, POOL_RESERVED_WORDS,
    pool_blocking, pool_blocking_config, pool_blocking_config_init, pool_blocking_create, pool_blocking_destroy,
    pool_blocking_global_configure, pool_blocking_global_metrics, pool_blocking_metrics, pool_blocking_set_max_queued, pool_blocking_shutdown, pool_blocking_submit,
    pool_blocking_submit_to, pool_blocking_task, pool_blocking_task_init, pool_config_init, pool_create,
    pool_create_with_platform, pool_destroy, pool_fork, pool_latch_add, pool_latch_done, pool_latch_init,
    pool_latch_wait, pool_latch_wait_global, pool_shutdown, pool_current_worker, pool_worker_fork,
    pool_worker_join, PoolJob, PoolWorker, POOL_JOB_WORDS, pool_status, pool_status_str, pool_submit,
    pool_stats, pool_submit_after, pool_set_max_threads, pool_refresh_max_threads, pool_submit_batch, pool_submit_batch_to, pool_submit_to, pool_worker_stats, CTask, Pool, PoolConfig,
    PoolLatch, POOL_BLOCKING_MANDATORY, POOL_DEFAULT_IDLE_SPINS, POOL_LATCH_WORDS, POOL_MAX_IDLE_SPINS,
};
use pool::capi::pool_stats as PoolStats;

const OK: c_int = pool_status::POOL_OK as c_int;
const INVALID: c_int = pool_status::POOL_ERR_INVALID as c_int;
const SHUTDOWN: c_int = pool_status::POOL_ERR_SHUTDOWN as c_int;
const FULL: c_int = pool_status::POOL_ERR_FULL as c_int;

/// Ops per input.
const MAX_OPS: usize = 48;
/// Task ids per input (children are not made once they run out).
const CAP: usize = 1024;
/// How long a "wait" op or a latch wait may take before it counts as a lost wake-up.
const WAIT_LIMIT: Duration = Duration::from_secs(10);

const MIN_STACK: usize = 16 * 1024;
const MAX_STACK: usize = 1 << 30;
const POOL_MAX_THREADS: usize = (1 << 14) - 1;
const BLOCKING_MAX_THREADS: usize = 65536;

/// Aborts with a message: libFuzzer reports the input as a crash (a panic would do the same
/// from the driver, but task callbacks are `extern "C"` and must not unwind).
macro_rules! fail {
    ($($arg:tt)*) => {{
        eprintln!("capi_ops: INVARIANT BROKEN: {}", format!($($arg)*));
        std::process::abort()
    }};
}

/// Every status code, with its name and `pool_status_str` text.
const STATUSES: [pool_status; 11] = [
    pool_status::POOL_OK,
    pool_status::POOL_ERR_INVALID,
    pool_status::POOL_ERR_SHUTDOWN,
    pool_status::POOL_ERR_SPAWN,
    pool_status::POOL_ERR_NOMEM,
    pool_status::POOL_ERR_PANIC,
    pool_status::POOL_ERR_RANGE,
    pool_status::POOL_ERR_STARTED,
    pool_status::POOL_ERR_FORKED,
    pool_status::POOL_ERR_FULL,
    pool_status::POOL_ERR_BUSY,
];

/// Exhaustive: a new status fails to compile here (then add it to `STATUSES` too).
fn status_text(s: pool_status) -> (&'static str, &'static str) {
    match s {
        pool_status::POOL_OK => ("POOL_OK", "ok"),
        pool_status::POOL_ERR_INVALID => ("POOL_ERR_INVALID", "invalid argument"),
        pool_status::POOL_ERR_SHUTDOWN => ("POOL_ERR_SHUTDOWN", "pool is shut down"),
        pool_status::POOL_ERR_SPAWN => ("POOL_ERR_SPAWN", "no thread could be started"),
        pool_status::POOL_ERR_NOMEM => ("POOL_ERR_NOMEM", "out of memory"),
        pool_status::POOL_ERR_PANIC => ("POOL_ERR_PANIC", "internal panic caught"),
        pool_status::POOL_ERR_RANGE => ("POOL_ERR_RANGE", "index out of range"),
        pool_status::POOL_ERR_STARTED => ("POOL_ERR_STARTED", "already started: configure before first use"),
        pool_status::POOL_ERR_FORKED => ("POOL_ERR_FORKED", "pool inherited through fork: unusable in the child"),
        pool_status::POOL_ERR_FULL => ("POOL_ERR_FULL", "queue is full"),
        pool_status::POOL_ERR_BUSY => ("POOL_ERR_BUSY", "task is not waiting in the queue"),
    }
}

fn status_of(rc: c_int) -> Option<pool_status> {
    STATUSES.into_iter().find(|&s| s as c_int == rc)
}

fn status_name(rc: c_int) -> &'static str {
    status_of(rc).map_or("(not a pool_status)", |s| status_text(s).0)
}

fn expect_rc(what: &str, rc: c_int, want: c_int) {
    if rc != want {
        fail!("{what} returned {} ({rc}), want {} ({want})", status_name(rc), status_name(want));
    }
}

// ---------------------------------------------------------------------------------------------
// Input

struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// True about once in `n` (never for a missing byte).
    fn rare(&mut self, n: u8) -> bool {
        self.byte() % n == n - 1
    }

    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n
    }

    fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.below(choices.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// Per-input bookkeeping, shared with the task callbacks

/// `State::status` values.
const UNUSED: u8 = 0;
/// Accepted by a pool: must run exactly once.
const ACCEPTED: u8 = 1;
/// Refused (or never submitted): must never run.
const REFUSED: u8 = 2;
/// An accepted blocking task with a `cancel` callback: runs or is cancelled, exactly once.
const B_EITHER: u8 = 3;
/// An accepted mandatory blocking task, or one without `cancel`: runs exactly once.
const B_RUN: u8 = 4;

/// The owner of tasks given to the global pool.
const GLOBAL_GEN: u32 = u32::MAX;

struct State {
    runs: [AtomicU32; CAP],
    cancels: [AtomicU32; CAP],
    status: [AtomicU8; CAP],
    /// The pool instance (generation) a task was given to.
    owner: [AtomicU32; CAP],
    next_id: AtomicUsize,
    /// Runs of forked jobs (`pool_worker_fork`) by generation: a job that a queue handed out
    /// (offered, stolen) counts in `polled`, one run inline by its join does not.
    job_runs: std::sync::Mutex<std::collections::HashMap<u32, usize>>,
}

impl State {
    fn new() -> Box<Self> {
        Box::new(Self {
            runs: [const { AtomicU32::new(0) }; CAP],
            cancels: [const { AtomicU32::new(0) }; CAP],
            status: [const { AtomicU8::new(UNUSED) }; CAP],
            owner: [const { AtomicU32::new(0) }; CAP],
            next_id: AtomicUsize::new(0),
            job_runs: std::sync::Mutex::new(std::collections::HashMap::new()),
        })
    }

    fn new_id(&self) -> Option<u32> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        (id < CAP).then_some(id as u32)
    }

    fn ids(&self) -> std::ops::Range<usize> {
        0..self.next_id.load(Ordering::Acquire).min(CAP)
    }

    fn set(&self, id: u32, owner: u32, status: u8) {
        self.owner[id as usize].store(owner, Ordering::Relaxed);
        // Release: a scan that sees the status also sees the owner.
        self.status[id as usize].store(status, Ordering::Release);
    }

    fn record_run(&self, id: u32) {
        // AcqRel: the run count is what the driver's checks read (Acquire) after the fact.
        let prev = self.runs[id as usize].fetch_add(1, Ordering::AcqRel);
        if prev != 0 {
            fail!("task {id} ran {} times", prev + 1);
        }
        if self.cancels[id as usize].load(Ordering::Acquire) != 0 {
            fail!("blocking task {id} ran after its cancel callback was called");
        }
    }

    /// Every task of `owner` that was accepted ran exactly once, every refused one never.
    /// Only at a quiescent point (the pool was shut down or destroyed).
    fn check_owner(&self, owner: u32, when: &str) {
        for id in self.ids() {
            if self.owner[id].load(Ordering::Relaxed) != owner {
                continue;
            }
            let (runs, status) = (self.runs[id].load(Ordering::Acquire), self.status[id].load(Ordering::Acquire));
            match status {
                ACCEPTED if runs != 1 => fail!("{when}: accepted task {id} ran {runs} times"),
                REFUSED | UNUSED if runs != 0 => fail!("{when}: refused task {id} ran {runs} times"),
                _ => {}
            }
        }
    }

    /// Whether every task of `owner` accepted so far has run (for the "wait" op).
    fn all_ran(&self, owner: u32) -> bool {
        let ids = self.ids();
        let all = ids.clone().all(|id| {
            self.status[id].load(Ordering::Acquire) != ACCEPTED
                || self.owner[id].load(Ordering::Relaxed) != owner
                || self.runs[id].load(Ordering::Acquire) == 1
        });
        // A child made meanwhile (by a task still running) is caught by the next scan.
        all && self.ids() == ids
    }
}

// ---------------------------------------------------------------------------------------------
// Jobs: a `struct task` embedded in the middle of a boxed struct

const PLAIN: u8 = 0;
/// Submits `fanout` children (one by one, as a batch, or with `pool_fork`), `depth` levels.
const PARENT: u8 = 1;
/// Forks `fanout` children that count down a latch on its stack, then waits for them.
const FORK_JOIN: u8 = 2;
/// Calls `pool_latch_done(latch)` after counting itself.
const LATCH_DONE: u8 = 3;

const MAGIC: u64 = 0x706f_6f6c_6a6f_6221;

#[derive(Clone, Copy)]
struct Spec {
    id: u32,
    owner: u32,
    kind: u8,
    depth: u8,
    fanout: u8,
    via: u8,
    /// The callback frees the job (else the driver does, at the end of the input).
    self_free: bool,
    pool: *mut Pool,
    latch: *mut PoolLatch,
    st: *const State,
}

#[repr(C)]
struct Job {
    magic: u64,
    task: CTask,
    spec: Spec,
}

fn new_job(spec: Spec) -> *mut Job {
    Box::into_raw(Box::new(Job { magic: MAGIC, task: CTask { next: null_mut(), callback: Some(job_run) }, spec }))
}

/// # Safety
/// `job` came from `new_job` and is not queued or running.
unsafe fn free_job(job: *mut Job) {
    // SAFETY: the caller's contract; the magic is wiped so a late use is seen.
    unsafe {
        (*job).magic = 0;
        drop(Box::from_raw(job));
    }
}

/// The task pointer of a job (derived from the whole job, so the callback may use all of it).
fn task_of(job: *mut Job) -> *mut CTask {
    // SAFETY: in bounds of the job's allocation; no reference is made.
    unsafe { ptr::addr_of_mut!((*job).task) }
}

unsafe extern "C" fn job_run(task: *mut CTask) {
    // SAFETY: every task with this callback is the `task` field of a live `Job` from `new_job`
    // (the pool passes back the pointer that was submitted).
    let job = unsafe { task.byte_sub(offset_of!(Job, task)).cast::<Job>() };
    // SAFETY: as above; the job is ours until it is freed below.
    let (magic, spec) = unsafe { ((*job).magic, (*job).spec) };
    if magic != MAGIC {
        fail!("a task callback got a pointer that is not a live job (magic {magic:#x})");
    }
    // SAFETY: the state outlives every task of its input (all pools are destroyed first).
    let st = unsafe { &*spec.st };
    match spec.kind {
        PARENT => spawn_children(&spec, st),
        FORK_JOIN => fork_join(&spec, st),
        _ => {}
    }
    if spec.kind == LATCH_DONE {
        // Count first: when the waiter returns, every unit's task has counted itself.
        st.record_run(spec.id);
        if spec.self_free {
            // SAFETY: running, so no longer queued; nothing reads the job after this.
            unsafe { free_job(job) };
        }
        // SAFETY: one `done` per unit added; the latch lives until its wait returned.
        expect_rc("pool_latch_done from a task", pool_latch_done(spec.latch), OK);
        return;
    }
    if spec.self_free {
        // SAFETY: as above.
        unsafe { free_job(job) };
    }
    st.record_run(spec.id);
}

/// A submit from inside a task: must be accepted (even during shutdown).
fn nested_submit(what: &str, rc: c_int) {
    if rc != OK {
        fail!("{what} from inside a task returned {} ({rc}): a task's own submits must be accepted", status_name(rc));
    }
}

fn spawn_children(spec: &Spec, st: &State) {
    let mut kids: Vec<(u32, *mut Job)> = Vec::new();
    for i in 0..spec.fanout {
        let Some(id) = st.new_id() else { break };
        let kind = if spec.depth > 1 && (id + u32::from(i)) % 2 == 0 { PARENT } else { PLAIN };
        let kid = new_job(Spec { id, kind, depth: spec.depth - 1, self_free: true, via: (spec.via + i) % 3, ..*spec });
        st.owner[id as usize].store(spec.owner, Ordering::Relaxed);
        kids.push((id, kid));
    }
    match spec.via % 3 {
        0 => {
            for &(id, kid) in &kids {
                nested_submit("pool_submit_to", pool_submit_to(spec.pool, task_of(kid)));
                st.set(id, spec.owner, ACCEPTED);
            }
        }
        1 if !kids.is_empty() => {
            for w in kids.windows(2) {
                // SAFETY: not submitted yet, ours.
                unsafe { (*w[0].1).task.next = task_of(w[1].1) };
            }
            nested_submit("pool_submit_batch_to", pool_submit_batch_to(spec.pool, task_of(kids[0].1)));
            for &(id, _) in &kids {
                st.set(id, spec.owner, ACCEPTED);
            }
        }
        _ => {
            for &(id, kid) in &kids {
                nested_submit("pool_fork", pool_fork(spec.pool, task_of(kid)));
                st.set(id, spec.owner, ACCEPTED);
            }
        }
    }
}

/// A job forked with `pool_worker_fork`: counts its runs (jobs are not tasks: `pool_stats`
/// does not count them, so they have no task id).
#[repr(C)]
struct WJob {
    job: PoolJob,
    runs: AtomicU32,
}

unsafe extern "C" fn wjob_run(job: *mut PoolJob, worker: *mut PoolWorker) {
    if worker.is_null() {
        fail!("a forked job's function got a NULL worker");
    }
    // SAFETY: every job with this function is the `job` field (first) of a live `WJob`; its
    // `job` part is the pool's while it runs, so only `runs` is touched.
    unsafe { (*job.cast::<WJob>()).runs.fetch_add(1, Ordering::AcqRel) };
}

/// Fork-join through the worker passed down: forks `fanout` jobs, joins them in reverse, each
/// ran once. One join out of order first: refused (nothing changed) where the job is a latent
/// frame under newer ones, else a plain join of that job (pool.h `pool_worker_join`).
fn worker_fork_join(spec: &Spec, st: &State, worker: *mut PoolWorker) {
    let mut jobs: Vec<Box<WJob>> = (0..spec.fanout)
        .map(|_| Box::new(WJob { job: PoolJob { run: Some(wjob_run), opaque: [0; POOL_JOB_WORDS] }, runs: AtomicU32::new(0) }))
        .collect();
    let ptrs: Vec<*mut PoolJob> = jobs.iter_mut().map(|j| ptr::addr_of_mut!(j.job)).collect();
    for &p in &ptrs {
        expect_rc("pool_worker_fork in a task", pool_worker_fork(worker, p), OK);
    }
    let mut first_joined = false;
    if ptrs.len() >= 2 {
        match pool_worker_join(worker, ptrs[0]) {
            INVALID => {}
            OK => first_joined = true,
            rc => fail!("pool_worker_join out of order returned {} ({rc})", status_name(rc)),
        }
    }
    for (i, &p) in ptrs.iter().enumerate().rev() {
        if i == 0 && first_joined {
            continue;
        }
        expect_rc("pool_worker_join in a task", pool_worker_join(worker, p), OK);
    }
    for (i, j) in jobs.iter().enumerate() {
        let runs = j.runs.load(Ordering::Acquire);
        if runs != 1 {
            fail!("forked job {i} ran {runs} times when pool_worker_join returned");
        }
    }
    *st.job_runs.lock().unwrap().entry(spec.owner).or_default() += jobs.len();
}

fn fork_join(spec: &Spec, st: &State) {
    if spec.via % 2 == 1 {
        let worker = pool_current_worker(spec.pool);
        if !worker.is_null() {
            return worker_fork_join(spec, st, worker);
        }
    }
    let mut latch = PoolLatch { opaque: [0; POOL_LATCH_WORDS] };
    let latch: *mut PoolLatch = &mut latch;
    expect_rc("pool_latch_init in a task", pool_latch_init(latch), OK);
    expect_rc("pool_latch_add in a task", pool_latch_add(latch, usize::from(spec.fanout)), OK);
    let mut ids = Vec::new();
    for _ in 0..spec.fanout {
        let Some(id) = st.new_id() else {
            // No id left: count this unit down here.
            expect_rc("pool_latch_done in a task", pool_latch_done(latch), OK);
            continue;
        };
        let kid = new_job(Spec { id, kind: LATCH_DONE, self_free: true, latch, ..*spec });
        st.owner[id as usize].store(spec.owner, Ordering::Relaxed);
        // Forked, always: a task that waits for work it *submitted* may wait for a free worker
        // once its stack is half used (bounded helping, pool.h `pool_latch_wait`), which a
        // one-worker pool with a small stack never has. That is the documented rule, not a
        // lost wake-up, so the waits here are on forked work.
        nested_submit("pool_fork", pool_fork(spec.pool, task_of(kid)));
        st.set(id, spec.owner, ACCEPTED);
        ids.push(id);
    }
    expect_rc("pool_latch_wait in a task", pool_latch_wait(spec.pool, latch), OK);
    for id in ids {
        let runs = st.runs[id as usize].load(Ordering::Acquire);
        if runs != 1 {
            fail!("fork-join child {id} ran {runs} times when pool_latch_wait returned in its parent");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Blocking jobs

#[repr(C)]
struct BJob {
    magic: u64,
    bt: pool_blocking_task,
    id: u32,
    st: *const State,
}

/// # Safety
/// `task` is the `bt.task` field of a live `BJob`.
unsafe fn bjob_of(task: *mut CTask) -> (u32, &'static State) {
    // SAFETY: the caller's contract; `task` is the first field of `bt`.
    let job = unsafe { task.byte_sub(offset_of!(BJob, bt) + offset_of!(pool_blocking_task, task)).cast::<BJob>() };
    // SAFETY: as above; the driver frees blocking jobs only after their pool is destroyed, and
    // the state lives until then.
    unsafe {
        if (*job).magic != MAGIC {
            fail!("a blocking callback got a pointer that is not a live job");
        }
        ((*job).id, &*(*job).st)
    }
}

unsafe extern "C" fn bjob_run(task: *mut CTask) {
    // SAFETY: every task with this callback is embedded in a live `BJob`.
    let (id, st) = unsafe { bjob_of(task) };
    st.record_run(id);
}

unsafe extern "C" fn bjob_cancel(task: *mut CTask) {
    // SAFETY: as `bjob_run`.
    let (id, st) = unsafe { bjob_of(task) };
    let prev = st.cancels[id as usize].fetch_add(1, Ordering::AcqRel);
    if prev != 0 || st.runs[id as usize].load(Ordering::Acquire) != 0 {
        fail!("blocking task {id}: cancel called {} times, after {} runs", prev + 1, st.runs[id as usize].load(Ordering::Relaxed));
    }
    if st.status[id as usize].load(Ordering::Acquire) == B_RUN {
        fail!("blocking task {id} is mandatory (or has no cancel) and was cancelled");
    }
}

// ---------------------------------------------------------------------------------------------
// OS threads

/// Threads of this process that are not already exiting (PF_EXITING: joined, not yet reaped)
/// and are not the global pool's (they live until exit by design).
fn live_threads() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    let mut n = 0;
    for entry in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        if &stat[open + 1..close] == "pool-global" {
            continue;
        }
        // Fields after the name: state ppid pgrp session tty_nr tpgid flags.
        let flags: u64 = stat[close + 1..].split_whitespace().nth(6).and_then(|f| f.parse().ok()).unwrap_or(0);
        if flags & 0x4 == 0 {
            n += 1;
        }
    }
    n
}

static BASELINE_THREADS: AtomicUsize = AtomicUsize::new(0);

// ---------------------------------------------------------------------------------------------
// The driver

/// The queue ops (`pool_queue_*`): `queue_ops.rs`.
mod queue_ops;

struct Slot {
    pool: *mut Pool,
    gen: u32,
    shut: bool,
}

struct BSlot {
    pool: *mut pool_blocking,
    gen: u32,
    shut: bool,
    max_threads: usize,
    /// The bound set with `pool_blocking_set_max_queued` (0: none).
    max_queued: usize,
}

struct Driver {
    st: *const State,
    slots: [Option<Slot>; 2],
    blocking: Option<BSlot>,
    /// Jobs the driver frees at the end (accepted, not self-freeing).
    owned: Vec<*mut Job>,
    bowned: Vec<*mut BJob>,
    next_gen: u32,
    queues: queue_ops::Queues,
}

impl Driver {
    fn st(&self) -> &State {
        // SAFETY: the state is freed only after the driver is done.
        unsafe { &*self.st }
    }

    fn gen(&mut self) -> u32 {
        self.next_gen += 1;
        self.next_gen
    }

    fn pool_config(&self, inp: &mut Input, live: bool) -> (PoolConfig, bool) {
        let mut cfg = PoolConfig {
            max_threads: 7,
            stack_size: 7,
            idle_spins: 7,
            thread_name_prefix: 7 as *const _,
            on_thread_start: None,
            on_thread_stop: None,
            hook_context: 7 as *mut _,
            min_threads: 7,
            reserved: [7; POOL_CONFIG_RESERVED_WORDS],
        };
        pool_config_init(&mut cfg);
        if cfg.max_threads != 0 || cfg.stack_size != 0 || cfg.idle_spins != POOL_DEFAULT_IDLE_SPINS || cfg.reserved != [0; POOL_CONFIG_RESERVED_WORDS]
            || cfg.min_threads != 0
            || !cfg.thread_name_prefix.is_null()
            || !cfg.hook_context.is_null()
        {
            fail!("pool_config_init left {cfg:?}, want the defaults");
        }
        // Live pools stay small (the CPUs, or 1 to 4 threads) with stacks big enough for the
        // callbacks under ASan; the probes (no thread ever starts) cover the range edges.
        let (threads, stacks): (&[usize], &[usize]) = if live {
            (&[0, 1, 2, 2, 3, 4, POOL_MAX_THREADS + 1, usize::MAX], &[0, 0, 0, 256 << 10, 1 << 20, 1, MIN_STACK - 1, MAX_STACK + 1])
        } else {
            (
                &[0, 1, POOL_MAX_THREADS, POOL_MAX_THREADS + 1, usize::MAX],
                &[0, MIN_STACK, MAX_STACK, 1, MIN_STACK - 1, MAX_STACK + 1, usize::MAX],
            )
        };
        cfg.max_threads = inp.pick(threads);
        cfg.stack_size = inp.pick(stacks);
        // Live pools spin briefly or not at all; the probes cover the range edges.
        let spins: &[u32] = if live {
            &[POOL_DEFAULT_IDLE_SPINS, POOL_DEFAULT_IDLE_SPINS, 0, 1, POOL_MAX_IDLE_SPINS + 1]
        } else {
            &[0, POOL_MAX_IDLE_SPINS, POOL_MAX_IDLE_SPINS + 1, u32::MAX]
        };
        cfg.idle_spins = inp.pick(spins);
        let valid = cfg.max_threads <= POOL_MAX_THREADS
            && (cfg.stack_size == 0 || (MIN_STACK..=MAX_STACK).contains(&cfg.stack_size))
            && cfg.idle_spins <= POOL_MAX_IDLE_SPINS;
        (cfg, valid)
    }

    /// `pool_create` with a random config; the pool (if any) and its expected status.
    fn create(&mut self, inp: &mut Input, live: bool) -> Option<*mut Pool> {
        let (cfg, valid) = self.pool_config(inp, live);
        let null_config = inp.rare(8);
        let sentinel = ptr::dangling_mut::<Pool>();
        let mut out = sentinel;
        if inp.rare(16) {
            expect_rc("pool_create(config, NULL)", pool_create(&cfg, null_mut()), INVALID);
        }
        let rc = pool_create(if null_config { null() } else { &cfg }, &mut out);
        if null_config || valid {
            expect_rc(&format!("pool_create({cfg:?}, null config {null_config})"), rc, OK);
            if out.is_null() || out == sentinel {
                fail!("pool_create returned POOL_OK without writing *out");
            }
            Some(out)
        } else {
            expect_rc(&format!("pool_create({cfg:?})"), rc, INVALID);
            if out != sentinel {
                fail!("pool_create({cfg:?}) failed but wrote *out");
            }
            None
        }
    }

    fn destroy_slot(&mut self, s: usize) {
        if let Some(slot) = self.slots[s].take() {
            // Its queues first (pool.h).
            self.destroy_queues_of(slot.gen);
            pool_destroy(slot.pool);
            self.st().check_owner(slot.gen, "after pool_destroy");
        }
    }

    fn op_create(&mut self, inp: &mut Input) {
        let s = inp.below(2);
        self.destroy_slot(s);
        if let Some(pool) = self.create(inp, true) {
            let gen = self.gen();
            self.slots[s] = Some(Slot { pool, gen, shut: false });
        }
    }

    /// Create at the range edges, maybe shut down (twice) and submit, then destroy: no thread
    /// ever starts.
    /// `pool_set_max_threads` with a count from 0 to one above the pool's limit (`pick`
    /// selects it), and now and then `pool_refresh_max_threads`: the status is exactly the
    /// documented one. The tasks' exact-once checks and the waits that follow hold across it.
    fn resize(&mut self, pool: *mut Pool, shut: bool, pick: usize) {
        let mut st = pool_stats::default();
        expect_rc("pool_stats before a resize", pool_stats(pool, &mut st), OK);
        let limit = st.workers;
        let n = pick % (limit + 2);
        // A count out of range is refused first, shut down or not.
        let want = if n == 0 || n > limit { INVALID } else if shut { SHUTDOWN } else { OK };
        expect_rc("pool_set_max_threads", pool_set_max_threads(pool, n), want);
        if pick % 7 == 6 {
            let mut got = usize::MAX;
            expect_rc("pool_refresh_max_threads", pool_refresh_max_threads(pool, &mut got), if shut { SHUTDOWN } else { OK });
            if !shut && !(1..=limit).contains(&got) {
                fail!("pool_refresh_max_threads gave {got}, want 1 to {limit}");
            }
        }
    }

    fn op_probe(&mut self, inp: &mut Input) {
        let Some(pool) = self.create(inp, false) else { return };
        if inp.below(2) == 0 {
            expect_rc("pool_shutdown of an idle pool", pool_shutdown(pool), OK);
            expect_rc("second pool_shutdown", pool_shutdown(pool), SHUTDOWN);
            let Some(id) = self.st().new_id() else {
                pool_destroy(pool);
                return;
            };
            let job = new_job(self.spec(id, 0, PLAIN, pool));
            expect_rc("pool_submit_to after shutdown", pool_submit_to(pool, task_of(job)), SHUTDOWN);
            self.st().set(id, 0, REFUSED);
            // SAFETY: refused, so still ours.
            unsafe { free_job(job) };
        }
        pool_destroy(pool);
    }

    fn spec(&self, id: u32, owner: u32, kind: u8, pool: *mut Pool) -> Spec {
        Spec { id, owner, kind, depth: 1, fanout: 1, via: 0, self_free: false, pool, latch: null_mut(), st: self.st }
    }

    /// A random job for `slot` (not yet submitted).
    fn random_job(&self, inp: &mut Input, id: u32, owner: u32, pool: *mut Pool) -> *mut Job {
        let kind = inp.pick(&[PLAIN, PLAIN, PARENT, FORK_JOIN]);
        let b = inp.byte();
        let spec = Spec {
            depth: 1 + b % 3,
            fanout: 1 + (b / 3) % 3,
            via: (b / 9) % 3,
            self_free: b & 0x80 != 0,
            ..self.spec(id, owner, kind, pool)
        };
        new_job(spec)
    }

    /// After a submit returned `rc`: record the outcome and free what was refused.
    fn settle(&mut self, jobs: &[(u32, *mut Job)], owner: u32, rc: c_int) {
        for &(id, job) in jobs {
            if rc == OK {
                // Only the id: a self-freeing job may already be gone.
                self.st().set(id, owner, ACCEPTED);
            } else {
                self.st().set(id, owner, REFUSED);
                // SAFETY: refused, so never queued: still ours.
                unsafe { free_job(job) };
            }
        }
    }

    fn target(&self, inp: &mut Input) -> (Option<usize>, *mut Pool, u32, bool) {
        let s = inp.below(2);
        match &self.slots[s] {
            Some(slot) if !inp.rare(16) => (Some(s), slot.pool, slot.gen, slot.shut),
            _ => (None, null_mut(), 0, false),
        }
    }

    fn op_submit(&mut self, inp: &mut Input) {
        let (_, pool, owner, shut) = self.target(inp);
        let Some(id) = self.st().new_id() else { return };
        let job = self.random_job(inp, id, owner, pool);
        let null_cb = inp.rare(8);
        let null_task = inp.rare(16);
        if null_cb {
            // SAFETY: not submitted yet, ours.
            unsafe { (*job).task.callback = None };
        }
        // SAFETY: not submitted yet.
        let self_free = unsafe { (*job).spec.self_free };
        let task = if null_task { null_mut() } else { task_of(job) };
        self.st().owner[id as usize].store(owner, Ordering::Relaxed);
        let (what, rc) = match inp.below(4) {
            0 => ("pool_submit_to", pool_submit_to(pool, task)),
            1 => ("pool_fork (from outside the pool)", pool_fork(pool, task)),
            // Short delays (0 to 1.5 ms: a "wait" op waits for the task), often still pending
            // at a shutdown that follows.
            2 => ("pool_submit_after", pool_submit_after(pool, task, inp.below(4) as u64 * 500_000)),
            _ => ("pool_submit_batch_to (one task)", pool_submit_batch_to(pool, task)),
        };
        let invalid = pool.is_null() || null_task || null_cb;
        let want = if invalid { INVALID } else if shut { SHUTDOWN } else { OK };
        if rc != want && !(invalid && shut && rc == SHUTDOWN) {
            expect_rc(&format!("{what} (NULL pool {}, NULL task {null_task}, NULL callback {null_cb}, shut down {shut})", pool.is_null()), rc, want);
        }
        if rc == OK && !self_free {
            self.owned.push(job);
        }
        self.settle(&[(id, job)], owner, rc);
    }

    fn op_batch(&mut self, inp: &mut Input) {
        let (_, pool, owner, shut) = self.target(inp);
        let n = inp.below(7);
        let mut jobs = Vec::new();
        for _ in 0..n {
            let Some(id) = self.st().new_id() else { break };
            let job = if inp.below(4) == 0 { self.random_job(inp, id, owner, pool) } else {
                let self_free = inp.below(2) == 0;
                new_job(Spec { self_free, ..self.spec(id, owner, PLAIN, pool) })
            };
            self.st().owner[id as usize].store(owner, Ordering::Relaxed);
            jobs.push((id, job));
        }
        for w in jobs.windows(2) {
            // SAFETY: not submitted yet, ours.
            unsafe { (*w[0].1).task.next = task_of(w[1].1) };
        }
        let mut invalid = jobs.is_empty() || pool.is_null();
        if !jobs.is_empty() && inp.rare(4) {
            let at = inp.below(jobs.len());
            // SAFETY: as above.
            unsafe { (*jobs[at].1).task.callback = None };
            invalid = true;
        }
        if !jobs.is_empty() && inp.rare(8) {
            let to = inp.below(jobs.len());
            let (last, target) = (jobs[jobs.len() - 1].1, jobs[to].1);
            // SAFETY: as above. A cycle: the last task links back to an earlier one (or itself).
            unsafe { (*last).task.next = task_of(target) };
            invalid = true;
        }
        // SAFETY: as above (read before any job can be freed by its callback).
        let keep: Vec<bool> = jobs.iter().map(|&(_, j)| unsafe { !(*j).spec.self_free }).collect();
        let first = jobs.first().map_or(null_mut(), |&(_, j)| task_of(j));
        let rc = pool_submit_batch_to(pool, first);
        let want = if invalid { INVALID } else if shut { SHUTDOWN } else { OK };
        if rc != want && !(invalid && shut && rc == SHUTDOWN) {
            expect_rc(&format!("pool_submit_batch_to of {} tasks (invalid {invalid}, shut down {shut})", jobs.len()), rc, want);
        }
        if rc == OK {
            for (&(_, job), keep) in jobs.iter().zip(keep) {
                if keep {
                    self.owned.push(job);
                }
            }
        }
        self.settle(&jobs, owner, rc);
    }

    fn op_shutdown(&mut self, inp: &mut Input) {
        if inp.rare(16) {
            expect_rc("pool_shutdown(NULL)", pool_shutdown(null_mut()), INVALID);
            return;
        }
        let s = inp.below(2);
        let Some(slot) = &mut self.slots[s] else { return };
        let rc = pool_shutdown(slot.pool);
        expect_rc(if slot.shut { "second pool_shutdown" } else { "pool_shutdown" }, rc, if slot.shut { SHUTDOWN } else { OK });
        slot.shut = true;
        let (gen, pool) = (slot.gen, slot.pool);
        self.st().check_owner(gen, "after pool_shutdown");
        self.check_stats(pool, gen);
        if rc == OK {
            self.queues_after_shutdown(gen);
        }
    }

    /// After shutdown the counters are exact: as many task runs as callbacks counted, no
    /// thread, and the per-worker counts add up; indices past the last worker are refused.
    fn check_stats(&self, pool: *mut Pool, gen: u32) {
        let st = self.st();
        let runs: usize = st.ids().filter(|&id| st.owner[id].load(Ordering::Relaxed) == gen).map(|id| st.runs[id].load(Ordering::Acquire) as usize).sum();
        let jobs = st.job_runs.lock().unwrap().get(&gen).copied().unwrap_or(0);
        let mut s = PoolStats::default();
        expect_rc("pool_stats", pool_stats(pool, &mut s), OK);
        // A queue's runners are pool tasks too: they add to `polled` beyond the callbacks.
        let over = s.polled > runs + jobs && !self.queues.hosted(gen);
        if s.polled < runs || over || s.threads != 0 || s.idle_threads != 0 {
            fail!("pool_stats after pool_shutdown: {s:?}; the callbacks counted {runs} runs, and {jobs} forked jobs ran");
        }
        let mut polled = 0;
        for i in 0..s.workers.min(64) {
            let mut w = PoolStats::default();
            expect_rc("pool_worker_stats", pool_worker_stats(pool, i, &mut w), OK);
            if w.workers != s.workers {
                fail!("pool_worker_stats({i}).workers = {}, pool_stats.workers = {}", w.workers, s.workers);
            }
            polled += w.polled;
        }
        if s.workers <= 64 && polled != s.polled {
            fail!("pool_worker_stats: the workers' polled add up to {polled}, pool_stats says {}", s.polled);
        }
        let sentinel = PoolStats { parks: 12345, ..PoolStats::default() };
        let mut w = sentinel;
        let rc = pool_worker_stats(pool, s.workers, &mut w);
        expect_rc("pool_worker_stats(workers)", rc, pool_status::POOL_ERR_RANGE as c_int);
        if w != sentinel {
            fail!("pool_worker_stats failed but wrote *out");
        }
        expect_rc("pool_stats(pool, NULL)", pool_stats(pool, null_mut()), INVALID);
        expect_rc("pool_worker_stats(pool, 0, NULL)", pool_worker_stats(pool, 0, null_mut()), INVALID);
    }

    fn op_destroy(&mut self, inp: &mut Input) {
        if inp.rare(16) {
            pool_destroy(null_mut());
            return;
        }
        let s = inp.below(2);
        self.destroy_slot(s);
    }

    /// Waits until every task accepted by a live pool has run (a lost wake-up: never).
    fn op_wait(&mut self, inp: &mut Input) {
        // The slot is the byte's low bit; its next bits may first resize the pool (the byte's
        // other bits were unused, so older inputs decode to the same ops).
        let b = inp.byte() as usize;
        let s = b % 2;
        let Some(slot) = &self.slots[s] else { return };
        let (gen, shut, pool) = (slot.gen, slot.shut, slot.pool);
        if (b >> 1) % 4 == 1 {
            self.resize(pool, shut, b >> 3);
        }
        if shut {
            return self.st().check_owner(gen, "waiting on a shut down pool");
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while !self.st().all_ran(gen) {
            if start.elapsed() > WAIT_LIMIT {
                let pending: Vec<usize> = self
                    .st()
                    .ids()
                    .filter(|&id| {
                        let st = self.st();
                        st.owner[id].load(Ordering::Relaxed) == gen
                            && st.status[id].load(Ordering::Acquire) == ACCEPTED
                            && st.runs[id].load(Ordering::Acquire) == 0
                    })
                    .collect();
                fail!("lost wake-up? {} accepted tasks (ids {:?}) have not run after {WAIT_LIMIT:?} on a live pool", pending.len(), &pending[..pending.len().min(16)]);
            }
            spins += 1;
            if spins < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        self.st().check_owner(gen, "a live pool seen idle");
    }

    /// The latch from the driver: init, add in two parts, submit `k` tasks that count it down
    /// (the driver counts down for refused ones), wait, then check and reuse.
    fn op_latch(&mut self, inp: &mut Input) {
        let global = inp.rare(8);
        let (_, pool, owner, shut) = if global { (None, null_mut(), GLOBAL_GEN, false) } else { self.target(inp) };
        let latch = Box::into_raw(Box::new(PoolLatch { opaque: [0; POOL_LATCH_WORDS] }));
        expect_rc("pool_latch_init", pool_latch_init(latch), OK);
        let k = inp.below(6);
        let a = inp.below(k + 1);
        expect_rc("pool_latch_add", pool_latch_add(latch, a), OK);
        expect_rc("pool_latch_add", pool_latch_add(latch, k - a), OK);
        let mut accepted = Vec::new();
        for _ in 0..k {
            let Some(id) = self.st().new_id() else {
                expect_rc("pool_latch_done (driver)", pool_latch_done(latch), OK);
                continue;
            };
            let job = new_job(Spec { latch, ..self.spec(id, owner, LATCH_DONE, pool) });
            self.st().owner[id as usize].store(owner, Ordering::Relaxed);
            let (rc, want) = if global {
                let rc = if inp.below(2) == 0 { pool_submit(task_of(job)) } else { pool_submit_batch(task_of(job)) };
                (rc, OK)
            } else {
                let rc = if inp.below(2) == 0 { pool_submit_to(pool, task_of(job)) } else { pool_fork(pool, task_of(job)) };
                (rc, if pool.is_null() { INVALID } else if shut { SHUTDOWN } else { OK })
            };
            expect_rc("submit of a latch task", rc, want);
            if rc == OK {
                self.owned.push(job);
                accepted.push(id);
                self.st().set(id, owner, ACCEPTED);
            } else {
                self.st().set(id, owner, REFUSED);
                // SAFETY: refused: still ours.
                unsafe { free_job(job) };
                expect_rc("pool_latch_done (driver, for a refused task)", pool_latch_done(latch), OK);
            }
        }
        if inp.rare(4) {
            expect_rc("pool_latch_add(1) (driver)", pool_latch_add(latch, 1), OK);
            expect_rc("pool_latch_done (driver)", pool_latch_done(latch), OK);
        }
        let start = Instant::now();
        let rc = if pool.is_null() { pool_latch_wait_global(latch) } else { pool_latch_wait(pool, latch) };
        expect_rc("pool_latch_wait", rc, OK);
        if start.elapsed() > WAIT_LIMIT {
            fail!("pool_latch_wait took {:?} for {} tasks", start.elapsed(), accepted.len());
        }
        for id in accepted {
            let runs = self.st().runs[id as usize].load(Ordering::Acquire);
            if runs != 1 {
                fail!("latch task {id} ran {runs} times when pool_latch_wait returned");
            }
        }
        expect_rc("pool_latch_add after the wait completed", pool_latch_add(latch, 1), INVALID);
        if inp.below(2) == 0 {
            // Reuse after re-initialisation.
            expect_rc("pool_latch_init (again)", pool_latch_init(latch), OK);
            expect_rc("pool_latch_add", pool_latch_add(latch, 1), OK);
            expect_rc("pool_latch_done", pool_latch_done(latch), OK);
            expect_rc("pool_latch_wait_global (count already zero)", pool_latch_wait_global(latch), OK);
        }
        // SAFETY: the wait returned: no task touches the latch any more.
        drop(unsafe { Box::from_raw(latch) });
    }

    fn op_status_str(&mut self, inp: &mut Input) {
        let code = if inp.below(2) == 0 {
            inp.pick(&[0, -1, -2, -3, -4, -5, -6, -7, -8, 1, c_int::MIN, c_int::MAX])
        } else {
            c_int::from_le_bytes([inp.byte(), inp.byte(), inp.byte(), inp.byte()])
        };
        let want = status_of(code).map_or("unknown status", |s| status_text(s).1);
        let s = pool_status_str(code);
        if s.is_null() {
            fail!("pool_status_str({code}) returned NULL");
        }
        // SAFETY: documented to return a static NUL-terminated string.
        let got = unsafe { CStr::from_ptr(s) };
        if got.to_bytes() != want.as_bytes() {
            fail!("pool_status_str({code}) = {got:?}, want {want:?}");
        }
    }

    /// NULL for one pointer argument of one entry point.
    fn op_null(&mut self, inp: &mut Input) {
        let live = self.slots.iter().flatten().next().map(|s| s.pool);
        let mut latch = PoolLatch { opaque: [0; POOL_LATCH_WORDS] };
        let cfg = PoolConfig { idle_spins: 0, ..pool_config_default() };
        let mut out = ptr::dangling_mut::<Pool>();
        let mut task = CTask { next: null_mut(), callback: None };
        let mut metrics = pool_blocking_metrics::default();
        match inp.below(24) {
            0 => pool_config_init(null_mut()),
            1 => expect_rc("pool_create(NULL, NULL)", pool_create(null(), null_mut()), INVALID),
            2 => expect_rc("pool_create(&cfg, NULL)", pool_create(&cfg, null_mut()), INVALID),
            3 => expect_rc("pool_submit(NULL)", pool_submit(null_mut()), INVALID),
            4 => expect_rc("pool_submit(NULL callback)", pool_submit(&mut task), INVALID),
            5 => expect_rc("pool_submit_batch(NULL)", pool_submit_batch(null_mut()), INVALID),
            6 => expect_rc("pool_submit_to(NULL, NULL)", pool_submit_to(null_mut(), null_mut()), INVALID),
            7 => expect_rc("pool_submit_batch_to(NULL, NULL)", pool_submit_batch_to(null_mut(), null_mut()), INVALID),
            8 => {
                let pool = live.unwrap_or(null_mut());
                expect_rc("pool_submit_to(pool, NULL)", pool_submit_to(pool, null_mut()), INVALID);
                expect_rc("pool_submit_batch_to(pool, NULL)", pool_submit_batch_to(pool, null_mut()), INVALID);
                expect_rc("pool_fork(pool, NULL)", pool_fork(pool, null_mut()), INVALID);
            }
            9 => expect_rc("pool_shutdown(NULL)", pool_shutdown(null_mut()), INVALID),
            10 => pool_destroy(null_mut()),
            11 => {
                expect_rc("pool_latch_init(NULL)", pool_latch_init(null_mut()), INVALID);
                expect_rc("pool_latch_add(NULL)", pool_latch_add(null_mut(), 1), INVALID);
                expect_rc("pool_latch_done(NULL)", pool_latch_done(null_mut()), INVALID);
            }
            12 => {
                expect_rc("pool_latch_wait(NULL, NULL)", pool_latch_wait(null_mut(), null_mut()), INVALID);
                expect_rc("pool_latch_wait(NULL, latch)", pool_latch_wait(null_mut(), &mut latch), INVALID);
                if let Some(pool) = live {
                    expect_rc("pool_latch_wait(pool, NULL)", pool_latch_wait(pool, null_mut()), INVALID);
                }
                expect_rc("pool_latch_wait_global(NULL)", pool_latch_wait_global(null_mut()), INVALID);
            }
            13 => {
                expect_rc("pool_fork(NULL, task)", pool_fork(null_mut(), &mut task), INVALID);
                let mut job = PoolJob { run: None, opaque: [0; POOL_JOB_WORDS] };
                expect_rc("pool_worker_fork(NULL, job)", pool_worker_fork(null_mut(), &mut job), INVALID);
                expect_rc("pool_worker_join(NULL, job)", pool_worker_join(null_mut(), &mut job), INVALID);
                expect_rc("pool_install(NULL, job)", pool::capi::pool_install(null_mut(), &mut job), INVALID);
                if let Some(pool) = live {
                    expect_rc("pool_install(pool, NULL run)", pool::capi::pool_install(pool, &mut job), INVALID);
                    if !pool_current_worker(pool).is_null() {
                        fail!("pool_current_worker is not NULL on the fuzzer's own thread");
                    }
                }
                let mut s = PoolStats::default();
                expect_rc("pool_stats(NULL, out)", pool_stats(null(), &mut s), INVALID);
                expect_rc("pool_worker_stats(NULL, 0, out)", pool_worker_stats(null(), 0, &mut s), INVALID);
            }
            14 => pool_blocking_config_init(null_mut()),
            15 => expect_rc(
                "pool_blocking_task_init(NULL, ...)",
                pool_blocking_task_init(null_mut(), Some(bjob_run), None, 0),
                INVALID,
            ),
            16 => expect_rc("pool_blocking_create(NULL, NULL)", pool_blocking_create(null(), null_mut()), INVALID),
            17 => {
                expect_rc("pool_blocking_submit_to(NULL, NULL)", pool_blocking_submit_to(null_mut(), null_mut()), INVALID);
                if let Some(b) = &self.blocking {
                    expect_rc("pool_blocking_submit_to(pool, NULL)", pool_blocking_submit_to(b.pool, null_mut()), INVALID);
                }
            }
            18 => expect_rc("pool_blocking_submit(NULL)", pool_blocking_submit(null_mut()), INVALID),
            19 => {
                expect_rc("pool_blocking_shutdown(NULL)", pool_blocking_shutdown(null_mut()), INVALID);
                pool_blocking_destroy(null_mut());
            }
            20 => {
                expect_rc("pool_blocking_metrics(NULL, NULL)", pool_blocking_metrics(null(), null_mut()), INVALID);
                expect_rc("pool_blocking_metrics(NULL, out)", pool_blocking_metrics(null(), &mut metrics), INVALID);
                if let Some(b) = &self.blocking {
                    expect_rc("pool_blocking_metrics(pool, NULL)", pool_blocking_metrics(b.pool, null_mut()), INVALID);
                }
                expect_rc("pool_blocking_global_metrics(NULL)", pool_blocking_global_metrics(null_mut()), INVALID);
            }
            21 => {
                // The process-wide blocking pool: configured (once per process: OK the first
                // time, STARTED after), never given work, so its metrics stay all zero.
                let bad = pool_blocking_config { max_threads: BLOCKING_MAX_THREADS + 1, keep_alive_ms: 0, stack_size: 0, reserved: [0; POOL_RESERVED_WORDS] };
                expect_rc("pool_blocking_global_configure(NULL)", pool_blocking_global_configure(null()), INVALID);
                expect_rc("pool_blocking_global_configure(out of range)", pool_blocking_global_configure(&bad), INVALID);
                let good = pool_blocking_config { max_threads: 2, keep_alive_ms: 1, stack_size: 0, reserved: [0; POOL_RESERVED_WORDS] };
                let rc = pool_blocking_global_configure(&good);
                let started = pool_status::POOL_ERR_STARTED as c_int;
                let want = if GLOBAL_BLOCKING_CONFIGURED.swap(true, Ordering::Relaxed) { started } else { OK };
                expect_rc("pool_blocking_global_configure", rc, want);
                expect_rc("pool_blocking_global_metrics", pool_blocking_global_metrics(&mut metrics), OK);
                if metrics.tasks_run != 0 || metrics.threads != 0 || metrics.queue_depth != 0 {
                    fail!("global blocking pool metrics {metrics:?} without any work given to it");
                }
            }
            22 => {
                expect_rc("pool_create_with_platform(NULL, NULL, NULL)", pool_create_with_platform(null(), null(), null_mut()), INVALID);
                expect_rc("pool_create_with_platform(NULL, NULL, &out)", pool_create_with_platform(null(), null(), &mut out), INVALID);
                if out != ptr::dangling_mut() {
                    fail!("pool_create_with_platform failed but wrote *out");
                }
            }
            _ => {
                let bcfg = pool_blocking_config { max_threads: 1, keep_alive_ms: 0, stack_size: 0, reserved: [0; POOL_RESERVED_WORDS] };
                expect_rc("pool_blocking_create(&cfg, NULL)", pool_blocking_create(&bcfg, null_mut()), INVALID);
            }
        }
    }

    // --- the blocking pool --------------------------------------------------------------------

    fn bdestroy(&mut self) {
        if let Some(b) = self.blocking.take() {
            pool_blocking_destroy(b.pool);
            self.check_blocking(b.gen, None, "after pool_blocking_destroy");
        }
    }

    /// After shutdown: every accepted blocking task had exactly one callback (the run for
    /// mandatory ones), refused ones none; the metrics (if given) match.
    fn check_blocking(&self, gen: u32, metrics: Option<(&pool_blocking_metrics, usize)>, when: &str) {
        let st = self.st();
        let (mut runs, mut cancels) = (0, 0);
        for id in st.ids() {
            if st.owner[id].load(Ordering::Relaxed) != gen {
                continue;
            }
            let (r, c) = (st.runs[id].load(Ordering::Acquire), st.cancels[id].load(Ordering::Acquire));
            runs += r as usize;
            cancels += c as usize;
            match st.status[id].load(Ordering::Acquire) {
                B_RUN if (r, c) != (1, 0) => fail!("{when}: mandatory blocking task {id}: {r} runs, {c} cancels"),
                B_EITHER if r + c != 1 => fail!("{when}: blocking task {id}: {r} runs, {c} cancels"),
                REFUSED | UNUSED if r + c != 0 => fail!("{when}: refused blocking task {id}: {r} runs, {c} cancels"),
                _ => {}
            }
        }
        if let Some((m, max_threads)) = metrics {
            let cap = if max_threads == 0 { 512 } else { max_threads };
            if m.tasks_run != runs || m.tasks_cancelled != cancels {
                fail!("{when}: metrics say {} run, {} cancelled; the callbacks counted {runs} and {cancels}", m.tasks_run, m.tasks_cancelled);
            }
            if m.threads != 0 || m.idle_threads != 0 || m.queue_depth != 0 || m.threads_spawned != m.threads_exited || m.peak_threads > cap {
                fail!("{when}: metrics {m:?} (cap {cap})");
            }
        }
    }

    fn op_bcreate(&mut self, inp: &mut Input) {
        self.bdestroy();
        let mut cfg = pool_blocking_config { max_threads: 7, keep_alive_ms: 7, stack_size: 7, reserved: [7; POOL_RESERVED_WORDS] };
        pool_blocking_config_init(&mut cfg);
        if (cfg.max_threads, cfg.keep_alive_ms, cfg.stack_size) != (512, 10_000, 0) || cfg.reserved != [0; POOL_RESERVED_WORDS] {
            fail!("pool_blocking_config_init left {cfg:?}");
        }
        cfg.max_threads = inp.pick(&[0, 1, 2, 3, 4, BLOCKING_MAX_THREADS, BLOCKING_MAX_THREADS + 1, usize::MAX]);
        cfg.keep_alive_ms = inp.pick(&[10_000, 0, 1, 5, usize::MAX]);
        cfg.stack_size = inp.pick(&[0, 0, 256 << 10, 1 << 20, 1, MIN_STACK - 1, MAX_STACK + 1, usize::MAX]);
        let null_config = inp.rare(8);
        let valid = cfg.max_threads <= BLOCKING_MAX_THREADS
            && (cfg.stack_size == 0 || (MIN_STACK..=MAX_STACK).contains(&cfg.stack_size));
        let sentinel = ptr::dangling_mut::<pool_blocking>();
        let mut out = sentinel;
        let rc = pool_blocking_create(if null_config { null() } else { &cfg }, &mut out);
        if null_config || valid {
            expect_rc(&format!("pool_blocking_create({cfg:?}, null config {null_config})"), rc, OK);
            if out.is_null() || out == sentinel {
                fail!("pool_blocking_create returned POOL_OK without writing *out");
            }
            let gen = self.gen();
            let max_threads = if null_config { 0 } else { cfg.max_threads };
            self.blocking = Some(BSlot { pool: out, gen, shut: false, max_threads, max_queued: 0 });
        } else {
            expect_rc(&format!("pool_blocking_create({cfg:?})"), rc, INVALID);
            if out != sentinel {
                fail!("pool_blocking_create failed but wrote *out");
            }
        }
    }

    fn op_bsubmit(&mut self, inp: &mut Input) {
        let (pool, gen, shut, bounded) = match &self.blocking {
            Some(b) if !inp.rare(16) => (b.pool, b.gen, b.shut, b.max_queued != 0),
            _ => (null_mut(), 0, false, false),
        };
        for _ in 0..1 + inp.below(4) {
            let Some(id) = self.st().new_id() else { return };
            let callback: Option<unsafe extern "C" fn(*mut CTask)> = if inp.rare(8) { None } else { Some(bjob_run) };
            let cancel: Option<unsafe extern "C" fn(*mut CTask)> = if inp.below(2) == 0 { Some(bjob_cancel) } else { None };
            let flags: c_uint = inp.pick(&[0, 0, POOL_BLOCKING_MANDATORY, 2, 3, 0x8000_0000]);
            let task_valid = callback.is_some() && flags & !POOL_BLOCKING_MANDATORY == 0;
            let garbage = pool_blocking_task {
                task: CTask { next: ptr::dangling_mut(), callback: Some(bjob_cancel) },
                cancel: Some(bjob_run),
                flags: 0xdead,
            };
            let job = Box::into_raw(Box::new(BJob { magic: MAGIC, bt: garbage, id, st: self.st }));
            // SAFETY: ours, not submitted; a raw pointer to the field (no reference kept).
            let bt = unsafe { ptr::addr_of_mut!((*job).bt) };
            let rc = pool_blocking_task_init(bt, callback, cancel, flags);
            expect_rc(&format!("pool_blocking_task_init(flags {flags:#x}, callback {})", callback.is_some()), rc, if task_valid { OK } else { INVALID });
            // SAFETY: as above.
            unsafe {
                if rc != OK {
                    if (*bt).flags != 0xdead || (*bt).task.next != ptr::dangling_mut() {
                        fail!("pool_blocking_task_init failed but wrote the task");
                    }
                    // Fill it by hand (an invalid task, to submit anyway).
                    (*bt).task = CTask { next: null_mut(), callback };
                    (*bt).cancel = cancel;
                    (*bt).flags = flags;
                } else if (*bt).flags != flags || (*bt).cancel.is_some() != cancel.is_some() {
                    fail!("pool_blocking_task_init wrote the wrong fields");
                }
            }
            let null_task = inp.rare(16);
            self.st().owner[id as usize].store(gen, Ordering::Relaxed);
            let must_run = flags & POOL_BLOCKING_MANDATORY != 0 || cancel.is_none();
            // The status is set before submitting: a task can run (or be cancelled) at once.
            self.st().set(id, gen, if must_run { B_RUN } else { B_EITHER });
            let rc = pool_blocking_submit_to(pool, if null_task { null_mut() } else { bt });
            let invalid = pool.is_null() || null_task || !task_valid;
            let want = if invalid { INVALID } else if shut { SHUTDOWN } else { OK };
            // A bounded queue may be full (how full depends on the threads' timing).
            if rc != want && !(invalid && shut && rc == SHUTDOWN) && !(want == OK && bounded && rc == FULL) {
                expect_rc(&format!("pool_blocking_submit_to (NULL pool {}, NULL task {null_task}, valid task {task_valid}, shut down {shut})", pool.is_null()), rc, want);
            }
            if rc == OK {
                self.bowned.push(job);
            } else {
                self.st().set(id, gen, REFUSED);
                // SAFETY: refused, so never queued: ours.
                if rc == FULL && unsafe { !(*bt).task.next.is_null() || (*bt).flags != flags } {
                    fail!("pool_blocking_submit_to refused a task with POOL_ERR_FULL but wrote it");
                }
                // SAFETY: refused, so never queued: ours.
                drop(unsafe { Box::from_raw(job) });
            }
        }
    }

    /// `pool_blocking_set_max_queued`: a bound (or none) from now on, on a live or shut-down
    /// pool; then submits may be refused with POOL_ERR_FULL, the task untouched.
    fn op_bbound(&mut self, inp: &mut Input) {
        let Some(b) = &mut self.blocking else {
            expect_rc("pool_blocking_set_max_queued(NULL, 1)", pool_blocking_set_max_queued(null_mut(), 1), INVALID);
            return;
        };
        let bound = inp.pick(&[0, 1, 2, 3, usize::MAX]);
        expect_rc(&format!("pool_blocking_set_max_queued(pool, {bound})"), pool_blocking_set_max_queued(b.pool, bound), OK);
        b.max_queued = bound;
    }

    fn op_bshutdown(&mut self, inp: &mut Input) {
        let Some(b) = &mut self.blocking else { return };
        if inp.below(4) == 0 {
            let mut m = pool_blocking_metrics::default();
            expect_rc("pool_blocking_metrics", pool_blocking_metrics(b.pool, &mut m), OK);
            let cap = if b.max_threads == 0 { 512 } else { b.max_threads };
            if m.peak_threads > cap {
                fail!("blocking metrics {m:?}: peak above the cap {cap}");
            }
            return;
        }
        let rc = pool_blocking_shutdown(b.pool);
        expect_rc(if b.shut { "second pool_blocking_shutdown" } else { "pool_blocking_shutdown" }, rc, if b.shut { SHUTDOWN } else { OK });
        b.shut = true;
        let (pool, gen, max_threads) = (b.pool, b.gen, b.max_threads);
        let mut m = pool_blocking_metrics::default();
        expect_rc("pool_blocking_metrics", pool_blocking_metrics(pool, &mut m), OK);
        self.check_blocking(gen, Some((&m, max_threads)), "after pool_blocking_shutdown");
    }

    fn run(&mut self, inp: &mut Input) {
        let trace = *TRACE.get_or_init(|| std::env::var_os("CAPI_OPS_TRACE").is_some());
        let mut ops = 0;
        while !inp.done() && ops < MAX_OPS {
            ops += 1;
            let op = inp.byte() % 20;
            if trace {
                eprintln!("op {ops}: {} (at byte {})", OP_NAMES[op as usize], inp.pos - 1);
            }
            match op {
                0 | 1 => self.op_create(inp),
                2..=4 => self.op_submit(inp),
                5 | 6 => self.op_batch(inp),
                7 => self.op_shutdown(inp),
                8 => self.op_destroy(inp),
                9 => self.op_wait(inp),
                10 => self.op_latch(inp),
                11 => self.op_probe(inp),
                12 => {
                    if inp.below(2) == 0 {
                        self.op_status_str(inp)
                    } else {
                        self.op_null(inp)
                    }
                }
                13 => self.op_bcreate(inp),
                14 => self.op_bsubmit(inp),
                15 => match inp.below(4) {
                    0 => self.bdestroy(),
                    1 => self.op_bbound(inp),
                    _ => self.op_bshutdown(inp),
                },
                _ => self.op_queue(op - 16, inp),
            }
        }
        // The end: destroy everything, check every task, free every job.
        self.destroy_slot(0);
        self.destroy_slot(1);
        if !self.queues.is_empty() {
            fail!("a queue outlived every pool");
        }
        self.bdestroy();
        let st = self.st();
        for id in st.ids() {
            let (runs, cancels, status) =
                (st.runs[id].load(Ordering::Acquire), st.cancels[id].load(Ordering::Acquire), st.status[id].load(Ordering::Acquire));
            let ok = match status {
                ACCEPTED | B_RUN => runs == 1 && cancels == 0,
                B_EITHER => runs + cancels == 1,
                _ => runs == 0 && cancels == 0,
            };
            if !ok {
                fail!("at the end: task {id} (status {status}) ran {runs} times, cancelled {cancels} times");
            }
        }
        for job in self.owned.drain(..) {
            // SAFETY: its pool is destroyed (or it was a global latch task whose wait returned):
            // nothing touches it any more.
            unsafe { free_job(job) };
        }
        for job in self.bowned.drain(..) {
            // SAFETY: its blocking pool is destroyed.
            drop(unsafe { Box::from_raw(job) });
        }
    }
}

/// Destroy joined every thread: the count is back to the first input's. A few retries cover a
/// global-pool thread that the global pool is starting right now and that has not named
/// itself yet; a thread that was not joined stays.
static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
/// Whether this process configured the global blocking pool (only the first call succeeds).
static GLOBAL_BLOCKING_CONFIGURED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const OP_NAMES: [&str; 20] = [
    "create", "create", "submit", "submit", "submit", "batch", "batch", "shutdown", "destroy", "wait", "latch", "probe",
    "status_str or NULL", "blocking create", "blocking submit", "blocking shutdown/metrics/destroy/bound",
    "queue init", "queue submit", "queue cancel", "queue width/wait/destroy/burst/NULL",
];

fn thread_check() {
    let base = BASELINE_THREADS.load(Ordering::Relaxed);
    if base == 0 {
        BASELINE_THREADS.store(live_threads(), Ordering::Relaxed);
        return;
    }
    let mut now = live_threads();
    for _ in 0..20 {
        if now == base {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
        now = live_threads();
    }
    fail!("{now} threads after every pool was destroyed, {base} after the first input");
}

fuzz_target!(|data: &[u8]| {
    let st = Box::into_raw(State::new());
    let mut driver =
        Driver { st, slots: [None, None], blocking: None, owned: Vec::new(), bowned: Vec::new(), next_gen: 0, queues: queue_ops::Queues::new() };
    driver.run(&mut Input { data, pos: 0 });
    drop(driver);
    // SAFETY: every pool is destroyed and every global latch task counted itself before its
    // wait returned (they do not touch the state after `pool_latch_done`).
    drop(unsafe { Box::from_raw(st) });
    thread_check();
});

/// `pool_config_init`'s defaults, as a value.
fn pool_config_default() -> PoolConfig {
    let mut cfg = core::mem::MaybeUninit::<PoolConfig>::uninit();
    pool_config_init(cfg.as_mut_ptr());
    // SAFETY: pool_config_init writes every field.
    unsafe { cfg.assume_init() }
}
