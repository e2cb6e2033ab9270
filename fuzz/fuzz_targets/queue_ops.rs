//! The queue ops of `capi_ops` (`pool_queue_*`, include/pool.h): the driver's side (an
//! `impl Driver` block) and the callbacks of the queue jobs. The ops and the invariants are
//! listed in the module doc of `capi_ops.rs`; this file says how each is checked.
//!
//! How the checks stay exact while tasks race the driver:
//! * *FIFO start*: every submit to a queue, the driver's and its own tasks', is made holding
//!   the queue's `QRec::sync`, which hands out the sequence numbers, so they are the order of
//!   the queue's list. A task that starts counts the tasks submitted before it that have not
//!   started and were not cancelled: those were taken from the list before it (FIFO) by runners
//!   that have not entered their callback yet, so there are fewer than the queue's runners,
//!   which never exceed `QRec::allowed` (below). Width 1: none at all.
//! * *Width*, two checks when a task starts, on the count of the queue's tasks inside their
//!   callbacks (a subset of those the library counts as running, so of its runners):
//!   - `QRec::allowed` is the largest width set since the queue was last seen idle (its init,
//!     or a `pool_queue_wait` that returned); the driver raises it *before* a widening
//!     `pool_queue_set_width` and never lowers it on a narrowing (running tasks finish): the
//!     count is at most `allowed`, and a queue suspended since it was idle starts nothing;
//!   - `QRec::wstate` is the width in force with an epoch, seqlock-style: odd while a
//!     `pool_queue_set_width` is in flight, even with the new width once it returned. A task
//!     records it when it is submitted; if it is unchanged (and even) when the task starts,
//!     no width change began in between, so the runner that took the task saw at most that
//!     width of runners (`take` starts a task only then) and none were added above it since:
//!     the count is at most that width. This is what catches a narrowing that is not obeyed
//!     (tasks submitted after it start while the older ones still run).
//! * *Status codes*: the driver knows a queue's waiting count exactly (`QSlot::waiting`) while
//!   nothing of it can start (width 0 since it was idle, or its pool shut down) and right after
//!   it was idle; then every submit's status is exact (OK, FULL at the bound, SHUTDOWN on a
//!   shut-down pool with width > 0; a handoff queue is full at its width, as nothing runs).
//!   Otherwise a submit is OK, or FULL on a bounded queue.
//! * *Calls from a task*: a task (on one of the pool's workers) calls `pool_queue_wait` and
//!   `pool_queue_destroy` on its own queue: each must be INVALID. It then submits a child to
//!   its own queue with a 100 µs timeout: OK on an unbounded queue; on a bounded one OK, FULL
//!   (timed out) or INVALID (full, and only its own slot could free a place), the task
//!   untouched unless OK. A child not queued so gets one more plain submit (OK, or FULL on a
//!   bounded queue; never SHUTDOWN: a worker's submits are accepted during shutdown). The
//!   task maybe cancels the child at once. Tasks make these calls only while `QRec::sync` is free and the queue
//!   is not being destroyed (`pool_queue_destroy` must not race other calls), so the driver
//!   never waits for a task that waits for it.
//! * *Target queues*: a queue on a target (`QSlot::target`) is checked as any queue (its
//!   width, FIFO start, exact-once); where it depends on the target it is lenient: with the
//!   pool shut down its submits and widenings may be OK (the runner waits in a suspended
//!   target's list) as well as SHUTDOWN, it is waited for only while the target has a width
//!   on a live pool, and a shutdown checks it only if the target has a width. A target's list
//!   holds runners the driver does not count, so its `waiting` is never exact once a queue
//!   targeted it (`QSlot::targeted`). Destroying a target first expects BUSY, then destroys
//!   the queues on it.
//! * *Destroy*: the driver marks the queue as being destroyed under `QRec::sync`, then calls
//!   `pool_queue_destroy` with `IN_DESTROY` set on its thread: the only place where the cancel
//!   callback may be called and where a task may run outside a runner (no width to check).

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use pool::capi::{
    pool_queue_cancel, pool_queue_destroy, pool_queue_init, pool_queue_init_target, pool_queue_set_width, pool_queue_submit,
    pool_queue_submit_timeout, pool_queue_wait, PoolQueue, POOL_QUEUE_HANDOFF, POOL_QUEUE_WORDS,
};

use super::*;

const BUSY: c_int = pool_status::POOL_ERR_BUSY as c_int;

/// `CAPI_OPS_TRACE=1`: what each queue call of the driver returned.
macro_rules! qtrace {
    ($($arg:tt)*) => {
        if TRACE.get().copied().unwrap_or(false) {
            eprintln!("  {}", format!($($arg)*));
        }
    };
}

/// Live queues at once (each on one of the two pool slots).
const QSLOTS: usize = 4;

/// `State::status` of an accepted queue task: it runs, or is cancelled (`pool_queue_cancel`,
/// or handed to the cancel callback by `pool_queue_destroy`), exactly once. The blocking
/// pool's value, so the end-of-input check (runs + cancels == 1) covers queue tasks too;
/// queue tasks have their queue's generation as owner, which no pool or blocking pool has.
const Q_EITHER: u8 = B_EITHER;

/// Queue job kinds.
const Q_PLAIN: u8 = 0;
/// Sleeps 20 µs to 1.82 ms (`arg % 16` squared, times 8 µs): the driver's cancels, width
/// changes and submits race it, and the longer ones outlast several of them.
const Q_BLOCK: u8 = 1;
/// Calls its own queue from inside (module docs), then returns.
const Q_NESTED: u8 = 2;

/// `QTasks::cancel` values.
const C_NONE: u8 = 0;
/// A `pool_queue_cancel` of the task is in flight.
const C_TRYING: u8 = 1;
/// `pool_queue_cancel` returned POOL_OK for it.
const C_DONE: u8 = 2;

/// What a queue job has in `task.next` until the queue links it: a task refused with
/// POOL_ERR_FULL must come back untouched (pool.h).
fn unlinked() -> *mut CTask {
    ptr::dangling_mut()
}

thread_local! {
    /// Set on the driver's thread while it is inside `pool_queue_destroy` (module docs).
    static IN_DESTROY: Cell<bool> = const { Cell::new(false) };
}

/// Per task id (the ids of `State`): what the queue checks need besides runs and cancels.
pub(crate) struct QTasks {
    seq: [AtomicU32; CAP],
    started: [AtomicU8; CAP],
    cancel: [AtomicU8; CAP],
}

/// One queue's record, shared with its tasks: boxed (the `struct pool_queue` in it must not
/// move) and kept until the end of the input.
struct QRec {
    queue: UnsafeCell<PoolQueue>,
    gen: u32,
    pool: *mut Pool,
    bound: usize,
    has_cancel: bool,
    /// Held around every submit (module docs); `destroying` is set under it.
    sync: Mutex<QSync>,
    /// Tasks of the queue inside their callbacks now.
    running: AtomicUsize,
    /// The largest width set since the queue was last seen idle (module docs).
    allowed: AtomicUsize,
    /// `epoch << 32 | width` (module docs): the driver's `pool_queue_set_width` makes the
    /// epoch odd before the call and even, with the width set, after it.
    wstate: AtomicU64,
    st: *const State,
    tasks: *const QTasks,
}

struct QSync {
    next_seq: u32,
    destroying: bool,
}

impl QRec {
    fn queue(&self) -> *mut PoolQueue {
        self.queue.get()
    }
}

/// The driver's view of one live queue.
struct QSlot {
    rec: Box<QRec>,
    pool_gen: u32,
    /// Its pool was shut down: nothing of the queue runs any more.
    shut: bool,
    max_threads: usize,
    width: usize,
    /// Tasks waiting, where the driver knows it exactly (module docs).
    waiting: Option<usize>,
    /// Accepted jobs the driver frees after the destroy (not self-freeing, not cancelled).
    owned: Vec<(u32, *mut QJob)>,
    /// The slot of its target queue (`pool_queue_init_target`), one that has none.
    target: Option<usize>,
    /// Queues have targeted it: its list may hold their runners, which the driver does not
    /// count, so `waiting` is never exact again.
    targeted: bool,
}

impl QSlot {
    /// Nothing of the queue can start (so nothing of it runs, and no task of it submits).
    fn quiet(&self) -> bool {
        self.shut || self.rec.allowed.load(Ordering::SeqCst) == 0
    }
}

/// The driver's queues.
pub(crate) struct Queues {
    slots: [Option<QSlot>; QSLOTS],
    tasks: Box<QTasks>,
    /// Destroyed queues' records (a task never reaches one after its destroy returned, but
    /// keeping them costs nothing). Boxed: jobs point to their record, which must not move.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<QRec>>,
    /// Pools (generations) that have had a queue.
    hosted: Vec<u32>,
}

impl Queues {
    pub(crate) fn new() -> Self {
        Self {
            slots: [const { None }; QSLOTS],
            tasks: Box::new(QTasks {
                seq: [const { AtomicU32::new(0) }; CAP],
                started: [const { AtomicU8::new(0) }; CAP],
                cancel: [const { AtomicU8::new(C_NONE) }; CAP],
            }),
            retired: Vec::new(),
            hosted: Vec::new(),
        }
    }

    /// Whether the pool has had a queue: its runners are pool tasks, so its `polled` counts
    /// more than the task callbacks the driver counted.
    pub(crate) fn hosted(&self, pool_gen: u32) -> bool {
        self.hosted.contains(&pool_gen)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }
}

// ---------------------------------------------------------------------------------------------
// Queue jobs

#[repr(C)]
struct QJob {
    magic: u64,
    task: CTask,
    id: u32,
    seq: u32,
    /// `QRec::wstate` when it was submitted.
    wstate: u64,
    kind: u8,
    arg: u8,
    /// The callback (or the cancel callback) frees the job; else the driver does.
    self_free: bool,
    rec: *const QRec,
}

fn new_qjob(id: u32, seq: u32, kind: u8, arg: u8, self_free: bool, rec: &QRec) -> *mut QJob {
    let task = CTask { next: unlinked(), callback: Some(qjob_run) };
    let wstate = rec.wstate.load(Ordering::SeqCst);
    Box::into_raw(Box::new(QJob { magic: MAGIC, task, id, seq, wstate, kind, arg, self_free, rec }))
}

/// # Safety
/// `job` came from `new_qjob` and is not queued or running.
unsafe fn free_qjob(job: *mut QJob) {
    // SAFETY: the caller's contract; the magic is wiped so a late use is seen.
    unsafe {
        (*job).magic = 0;
        drop(Box::from_raw(job));
    }
}

fn qtask_of(job: *mut QJob) -> *mut CTask {
    // SAFETY: in bounds of the job's allocation; no reference is made.
    unsafe { ptr::addr_of_mut!((*job).task) }
}

/// # Safety
/// `task` is the `task` field of a live `QJob`.
unsafe fn qjob_of(task: *mut CTask) -> *mut QJob {
    // SAFETY: the caller's contract.
    let job = unsafe { task.byte_sub(offset_of!(QJob, task)).cast::<QJob>() };
    // SAFETY: as above.
    let magic = unsafe { (*job).magic };
    if magic != MAGIC {
        fail!("a queue callback got a pointer that is not a live queue job (magic {magic:#x})");
    }
    job
}

unsafe extern "C" fn qjob_run(task: *mut CTask) {
    // SAFETY: every task with this callback is embedded in a live `QJob` (the queue passes
    // back the pointer that was submitted).
    let job = unsafe { qjob_of(task) };
    // SAFETY: as above; the job is ours until it is freed below.
    let (id, seq, wstate, kind, arg, self_free, rec) =
        unsafe { ((*job).id, (*job).seq, (*job).wstate, (*job).kind, (*job).arg, (*job).self_free, &*(*job).rec) };
    // SAFETY: the state and the queue records outlive every task of the input.
    let (st, qt) = unsafe { (&*rec.st, &*rec.tasks) };
    let i = id as usize;
    let in_destroy = IN_DESTROY.get();
    qt.started[i].store(1, Ordering::SeqCst);
    if qt.cancel[i].load(Ordering::SeqCst) == C_DONE {
        fail!("queue {}: task {id} started after pool_queue_cancel returned POOL_OK for it", rec.gen);
    }
    let now = rec.running.fetch_add(1, Ordering::SeqCst) + 1;
    let allowed = rec.allowed.load(Ordering::SeqCst);
    if !in_destroy && now > allowed {
        fail!("queue {}: {now} of its tasks run at once, its width was at most {allowed} since it was last idle", rec.gen);
    }
    let width = (wstate & 0xffff_ffff) as usize;
    if !in_destroy && wstate & (1 << 32) == 0 && now > width && rec.wstate.load(Ordering::SeqCst) == wstate {
        fail!("queue {}: {now} of its tasks run at once, with its width {width} unchanged since task {id} was submitted", rec.gen);
    }
    // FIFO start: the tasks submitted before this one that have not started (module docs).
    let behind = st
        .ids()
        .filter(|&j| {
            j != i
                && st.status[j].load(Ordering::Acquire) == Q_EITHER
                && st.owner[j].load(Ordering::Relaxed) == rec.gen
                && qt.seq[j].load(Ordering::Relaxed) < seq
                && qt.started[j].load(Ordering::SeqCst) == 0
                && qt.cancel[j].load(Ordering::SeqCst) == C_NONE
        })
        .count();
    let slack = if in_destroy { 0 } else { allowed.max(1) - 1 };
    if behind > slack {
        fail!(
            "queue {}: task {id} (seq {seq}) started before {behind} tasks submitted before it (width at most {allowed}{})",
            rec.gen,
            if in_destroy { ", run by pool_queue_destroy" } else { "" }
        );
    }
    match kind {
        Q_BLOCK => std::thread::sleep(Duration::from_micros(20 + u64::from(arg % 16).pow(2) * 8)),
        Q_NESTED if !in_destroy => nested(rec, arg),
        _ => {}
    }
    rec.running.fetch_sub(1, Ordering::SeqCst);
    st.record_run(id);
    if self_free {
        // SAFETY: running, so no longer queued; nothing reads the job after this.
        unsafe { free_qjob(job) };
    }
}

/// The cancel callback of every queue that has one: only `pool_queue_destroy` calls it, once
/// per task still waiting.
unsafe extern "C" fn qjob_cancel(task: *mut CTask) {
    // SAFETY: as `qjob_run`.
    let job = unsafe { qjob_of(task) };
    // SAFETY: as above.
    let (id, self_free, rec) = unsafe { ((*job).id, (*job).self_free, &*(*job).rec) };
    // SAFETY: as `qjob_run`.
    let (st, qt) = unsafe { (&*rec.st, &*rec.tasks) };
    let i = id as usize;
    if !IN_DESTROY.get() {
        fail!("queue {}: its cancel callback was called for task {id} outside pool_queue_destroy", rec.gen);
    }
    if !rec.has_cancel {
        fail!("queue {} has no cancel callback, yet task {id} was handed to one", rec.gen);
    }
    if qt.started[i].load(Ordering::SeqCst) != 0 || qt.cancel[i].load(Ordering::SeqCst) == C_DONE {
        fail!("queue {}: pool_queue_destroy handed back task {id}, which had started or was cancelled", rec.gen);
    }
    let prev = st.cancels[i].fetch_add(1, Ordering::AcqRel);
    if prev != 0 || st.runs[i].load(Ordering::Acquire) != 0 {
        fail!("queue {}: task {id} handed back {} times, after {} runs", rec.gen, prev + 1, st.runs[i].load(Ordering::Relaxed));
    }
    if self_free {
        // SAFETY: handed back: the queue keeps no reference to it.
        unsafe { free_qjob(job) };
    }
}

/// A task's calls to its own queue (module docs). `arg`'s bits: 1 a blocking child, 8 the
/// child's second try (after a timed one that did not queue it) goes through a zero timeout,
/// 16 the child is cancelled at once.
fn nested(rec: &QRec, arg: u8) {
    if pool_current_worker(rec.pool).is_null() {
        // Run on the thread of a pool's shutdown (no worker ever took it): a task of the
        // queue there is not recognised as one (pool.h), so a wait would wait for itself.
        return;
    }
    let Ok(mut sync) = rec.sync.try_lock() else { return };
    if sync.destroying {
        return;
    }
    // SAFETY: as `qjob_run`.
    let (st, qt) = unsafe { (&*rec.st, &*rec.tasks) };
    let q = rec.queue();
    expect_rc("pool_queue_wait from a task of the queue", pool_queue_wait(q), INVALID);
    expect_rc("pool_queue_destroy from a task of the queue", pool_queue_destroy(q), INVALID);
    let Some(id) = st.new_id() else { return };
    let i = id as usize;
    let kind = if arg & 1 == 0 { Q_PLAIN } else { Q_BLOCK };
    let child = new_qjob(id, sync.next_seq, kind, arg >> 1, true, rec);
    let t = qtask_of(child);
    st.owner[i].store(rec.gen, Ordering::Relaxed);
    qt.seq[i].store(sync.next_seq, Ordering::Relaxed);
    // A timed submit from a task of the queue: queued (always, with room: an unbounded queue),
    // or, full, refused when only this task's slot could free a place, else waited for.
    let rc = pool_queue_submit_timeout(q, t, 100_000);
    let (what, rc) = match rc {
        OK => ("pool_queue_submit_timeout(100 µs)", OK),
        FULL | INVALID if rec.bound != 0 => {
            // SAFETY: not queued: still ours.
            if unsafe { (*child).task.next } != unlinked() {
                fail!("pool_queue_submit_timeout from a task returned {} but wrote the task", status_name(rc));
            }
            if arg & 8 == 0 {
                ("pool_queue_submit", pool_queue_submit(q, t))
            } else {
                ("pool_queue_submit_timeout(0)", pool_queue_submit_timeout(q, t, 0))
            }
        }
        rc => fail!("pool_queue_submit_timeout from a task of an unbounded queue returned {} ({rc})", status_name(rc)),
    };
    match rc {
        OK => {
            st.set(id, rec.gen, Q_EITHER);
            sync.next_seq += 1;
        }
        FULL if rec.bound != 0 => {
            st.set(id, rec.gen, REFUSED);
            // SAFETY: refused: still ours.
            unsafe { free_qjob(child) };
            return;
        }
        _ => fail!("{what} from a task of the queue (bound {}) returned {} ({rc})", rec.bound, status_name(rc)),
    }
    if arg & 16 != 0 {
        // Submits to this queue are ours (`sync`), so the child's address is no other task's.
        qt.cancel[i].store(C_TRYING, Ordering::SeqCst);
        match pool_queue_cancel(q, t) {
            OK => {
                cancelled(st, qt, rec.gen, id);
                expect_rc("second pool_queue_cancel from a task", pool_queue_cancel(q, t), BUSY);
                // SAFETY: cancelled: the queue keeps no reference to it.
                unsafe { free_qjob(child) };
            }
            BUSY => qt.cancel[i].store(C_NONE, Ordering::SeqCst),
            rc => fail!("pool_queue_cancel from a task returned {} ({rc})", status_name(rc)),
        }
    }
}

/// `pool_queue_cancel` returned POOL_OK for task `id`: it had not started; it never may.
fn cancelled(st: &State, qt: &QTasks, gen: u32, id: u32) {
    let i = id as usize;
    if qt.started[i].load(Ordering::SeqCst) != 0 || st.runs[i].load(Ordering::Acquire) != 0 {
        fail!("queue {gen}: pool_queue_cancel returned POOL_OK for task {id}, which had started");
    }
    qt.cancel[i].store(C_DONE, Ordering::SeqCst);
    if st.cancels[i].fetch_add(1, Ordering::AcqRel) != 0 {
        fail!("queue {gen}: task {id} cancelled twice");
    }
}

/// The pool's `max_threads` (0 in its config: the CPUs), which bounds a queue's width.
fn max_threads_of(pool: *mut Pool) -> usize {
    let mut s = PoolStats::default();
    expect_rc("pool_stats", pool_stats(pool, &mut s), OK);
    s.workers
}

/// `QRec::wstate` (the widths set are at most the pool's `max_threads`, below 2^14).
fn wstate_of(epoch: u32, width: usize) -> u64 {
    u64::from(epoch) << 32 | (width as u64 & 0xffff_ffff)
}

/// A width from one byte: 255 is SIZE_MAX, else 0 to `max + 1`.
fn width_of(b: u8, max: usize) -> usize {
    if b == 255 {
        usize::MAX
    } else {
        usize::from(b) % (max + 2)
    }
}

// ---------------------------------------------------------------------------------------------
// The driver's queue ops

impl Driver {
    fn tasks(&self) -> &'static QTasks {
        let tasks: *const QTasks = &*self.queues.tasks;
        // SAFETY: boxed in the driver, which is dropped after every task of the input ran.
        unsafe { &*tasks }
    }

    fn st_static(&self) -> &'static State {
        // SAFETY: the state is freed only after the driver is done.
        unsafe { &*self.st }
    }

    /// Ops 16 to 19 (`op - 16`).
    pub(crate) fn op_queue(&mut self, op: u8, inp: &mut Input) {
        match op {
            0 => self.op_qinit(inp),
            1 => self.op_qsubmit(inp),
            2 => self.op_qcancel(inp),
            _ => {
                let q = inp.below(QSLOTS);
                match inp.below(8) {
                    0 | 1 => self.op_qwidth(q, inp),
                    2 => self.op_qsettle(q, inp),
                    3 | 4 => self.op_qwait(q),
                    5 => self.qdestroy(q),
                    6 => self.op_qburst(q, inp),
                    _ => self.op_qnull(inp),
                }
            }
        }
    }

    /// `pool_queue_init` on a pool slot (or NULL), widths 0 to `max_threads + 1` (or
    /// SIZE_MAX), bounds 0 to 3 or POOL_QUEUE_HANDOFF, with or without a cancel callback;
    /// the queue slot's old queue is destroyed first.
    fn op_qinit(&mut self, inp: &mut Input) {
        let q = inp.below(QSLOTS);
        self.qdestroy(q);
        let (_, mut pool, mut pool_gen, mut shut) = self.target(inp);
        let wb = inp.byte();
        let bound = match inp.below(5) {
            4 => POOL_QUEUE_HANDOFF,
            b => b,
        };
        let cb = inp.byte();
        let has_cancel = cb % 2 == 0;
        // On a target queue: the cancel byte's bits 1-2 are 1, bits 3-4 pick the slot (a queue
        // that has no target itself).
        let on = (cb >> 1) & 3 == 1;
        let target = Some(usize::from(cb >> 3) % QSLOTS)
            .filter(|&t| on && t != q && self.queues.slots[t].as_ref().is_some_and(|s| s.target.is_none()));
        if let Some(t) = target {
            let ts = self.queues.slots[t].as_ref().expect("a queue in the slot");
            (pool, pool_gen, shut) = (ts.rec.pool, ts.pool_gen, ts.shut);
        }
        let max_threads = if pool.is_null() { 4 } else { max_threads_of(pool) };
        let width = width_of(wb, max_threads);
        let null_queue = inp.rare(32);
        let gen = self.gen();
        let sentinel = PoolQueue { opaque: [0x5a5a_5a5a_5a5a_5a5a; POOL_QUEUE_WORDS] };
        let rec = Box::new(QRec {
            queue: UnsafeCell::new(sentinel),
            gen,
            pool,
            bound,
            has_cancel,
            sync: Mutex::new(QSync { next_seq: 0, destroying: false }),
            running: AtomicUsize::new(0),
            allowed: AtomicUsize::new(width),
            wstate: AtomicU64::new(wstate_of(0, width)),
            st: self.st,
            tasks: self.tasks(),
        });
        let cancel: Option<unsafe extern "C" fn(*mut CTask)> = if has_cancel { Some(qjob_cancel) } else { None };
        let queue = if null_queue { null_mut() } else { rec.queue() };
        let (rc, valid) = match target {
            Some(t) => {
                let ts = self.queues.slots[t].as_ref().expect("a queue in the slot");
                let rc = pool_queue_init_target(queue, ts.rec.queue(), width, bound, cancel);
                (rc, !null_queue && width <= max_threads && ts.rec.bound == 0)
            }
            None => (pool_queue_init(queue, pool, width, bound, cancel), !null_queue && !pool.is_null() && width <= max_threads),
        };
        expect_rc(
            &format!(
                "pool_queue_init{}(NULL queue {null_queue}, NULL pool {}, width {width} of {max_threads}, bound {bound}, cancel {has_cancel})",
                if target.is_some() { "_target" } else { "" },
                pool.is_null()
            ),
            rc,
            if valid { OK } else { INVALID },
        );
        qtrace!("queue {gen} (slot {q}, target slot {target:?}): init width {width} of {max_threads}, bound {bound}, cancel {has_cancel}: {}", status_name(rc));
        if rc != OK {
            // SAFETY: ours; the library refused it.
            if unsafe { (*rec.queue()).opaque } != [0x5a5a_5a5a_5a5a_5a5a; POOL_QUEUE_WORDS] {
                fail!("pool_queue_init failed but wrote the queue");
            }
            return;
        }
        self.queues.hosted.push(pool_gen);
        if let Some(t) = target {
            let ts = self.queues.slots[t].as_mut().expect("a queue in the slot");
            ts.targeted = true;
            ts.waiting = None;
        }
        self.queues.slots[q] = Some(QSlot { rec, pool_gen, shut, max_threads, width, waiting: Some(0), owned: Vec::new(), target, targeted: false });
    }

    /// One to three jobs (plain, blocking briefly, calling their queue from inside), through
    /// `pool_queue_submit` or `pool_queue_submit_timeout` (0, 100 µs, 1 ms, or no limit where
    /// a place surely frees), some with a NULL callback or task; with no queue in the slot,
    /// NULL queues.
    fn op_qsubmit(&mut self, inp: &mut Input) {
        let q = inp.below(QSLOTS);
        let n = 1 + inp.below(3);
        if self.queues.slots[q].is_none() {
            let mut t = CTask { next: null_mut(), callback: Some(qjob_run) };
            expect_rc("pool_queue_submit(NULL, task)", pool_queue_submit(null_mut(), &mut t), INVALID);
            expect_rc("pool_queue_submit_timeout(NULL, task, -1)", pool_queue_submit_timeout(null_mut(), &mut t, -1), INVALID);
            return;
        }
        for _ in 0..n {
            let kind = inp.pick(&[Q_PLAIN, Q_PLAIN, Q_BLOCK, Q_NESTED]);
            let arg = inp.byte();
            let null_cb = inp.rare(16);
            let null_task = inp.rare(32);
            let how = inp.below(4);
            let t = inp.pick(&[100_000, 1_000_000, -1, i64::MIN]);
            let timeout = match how {
                0 | 1 => None,
                2 => Some(0),
                _ => Some(t),
            };
            if self.qsubmit(q, kind, arg, arg & 0x80 != 0, null_cb, null_task, timeout).is_none() {
                return;
            }
        }
    }

    /// Submits one job to queue slot `q` and checks the status; the accepted job's id and
    /// (if the driver owns it) pointer. `None` when out of ids.
    #[allow(clippy::too_many_arguments)]
    fn qsubmit(
        &mut self,
        q: usize,
        kind: u8,
        arg: u8,
        self_free: bool,
        null_cb: bool,
        null_task: bool,
        timeout: Option<i64>,
    ) -> Option<Option<(u32, *mut QJob)>> {
        let (st, qt) = (self.st_static(), self.tasks());
        let id = st.new_id()?;
        let i = id as usize;
        let target_width = self.target_width(q);
        let slot = self.queues.slots[q].as_mut().expect("a queue in the slot");
        let rec = &*slot.rec;
        // No limit only where a place surely frees: a live pool and a width (the target's too).
        let timeout = timeout.map(|t| if t < 0 && (slot.shut || slot.width == 0 || target_width == 0) { 100_000 } else { t });
        let quiet = slot.quiet();
        let mut sync = rec.sync.lock().unwrap();
        let seq = sync.next_seq;
        let job = new_qjob(id, seq, kind, arg, self_free, rec);
        if null_cb {
            // SAFETY: not submitted yet, ours.
            unsafe { (*job).task.callback = None };
        }
        st.owner[i].store(rec.gen, Ordering::Relaxed);
        qt.seq[i].store(seq, Ordering::Relaxed);
        let task = if null_task { null_mut() } else { qtask_of(job) };
        let (what, rc) = match timeout {
            None => ("pool_queue_submit", pool_queue_submit(rec.queue(), task)),
            Some(t) => ("pool_queue_submit_timeout", pool_queue_submit_timeout(rec.queue(), task, t)),
        };
        qtrace!("queue {}: {what} task {id} (kind {kind}, arg {arg:#x}, timeout {timeout:?}; waiting {:?}): {}", rec.gen, slot.waiting, status_name(rc));
        let invalid = null_cb || null_task;
        // A queue on a target, its pool shut down: the runner a task needs may wait in the
        // target's list (a suspended target) instead of being refused.
        let lenient = slot.target.is_some() && slot.shut;
        let ok = if invalid {
            rc == INVALID
        } else if let Some(w) = slot.waiting.filter(|_| !lenient) {
            // Nothing runs while the count is exact: a handoff queue is full at its width.
            let full = match rec.bound {
                0 => false,
                POOL_QUEUE_HANDOFF => w >= slot.width,
                b => w >= b,
            };
            let want = if full {
                FULL
            } else if slot.shut && slot.width > 0 {
                SHUTDOWN
            } else {
                OK
            };
            rc == want
        } else {
            rc == OK || (rc == FULL && rec.bound != 0) || (rc == SHUTDOWN && slot.shut && slot.width > 0)
        };
        if !ok {
            fail!(
                "{what} (timeout {timeout:?}, NULL task {null_task}, NULL callback {null_cb}; queue {}: width {}, bound {}, waiting {:?}, pool shut down {}) returned {} ({rc})",
                rec.gen,
                slot.width,
                rec.bound,
                slot.waiting,
                slot.shut,
                status_name(rc)
            );
        }
        if rc == OK {
            st.set(id, rec.gen, Q_EITHER);
            sync.next_seq += 1;
            drop(sync);
            slot.waiting = if quiet { slot.waiting.map(|w| w + 1) } else { None };
            if self_free {
                return Some(None);
            }
            slot.owned.push((id, job));
            return Some(Some((id, job)));
        }
        st.set(id, rec.gen, REFUSED);
        drop(sync);
        // SAFETY: refused, so not queued: still ours. Untouched when FULL (pool.h); a
        // SHUTDOWN may come after the task was linked (then unlinked): `next` is the pool's.
        unsafe {
            if rc == FULL && (*job).task.next != unlinked() {
                fail!("{what} refused a task with POOL_ERR_FULL but wrote it");
            }
            free_qjob(job);
        }
        Some(None)
    }

    /// Cancels the driver's job `k` of queue slot `q` (accepted, not cancelled before):
    /// POOL_OK (then it never runs, is freed at once, a second cancel is BUSY) or BUSY (it
    /// started: then the queue was not suspended since it was last idle).
    fn qcancel_owned(&mut self, q: usize, k: usize) {
        let (st, qt) = (self.st_static(), self.tasks());
        let slot = self.queues.slots[q].as_mut().expect("a queue in the slot");
        let rec = &*slot.rec;
        let (id, job) = slot.owned[k];
        let i = id as usize;
        qt.cancel[i].store(C_TRYING, Ordering::SeqCst);
        let t = qtask_of(job);
        let rc = pool_queue_cancel(rec.queue(), t);
        qtrace!("queue {}: cancel task {id}: {}", rec.gen, status_name(rc));
        match rc {
            OK => {
                cancelled(st, qt, rec.gen, id);
                expect_rc("second pool_queue_cancel", pool_queue_cancel(rec.queue(), t), BUSY);
                slot.owned.swap_remove(k);
                // SAFETY: cancelled: the queue keeps no reference to it (pool.h: free it at once).
                unsafe { free_qjob(job) };
                slot.waiting = match slot.waiting {
                    Some(0) => fail!("queue {}: pool_queue_cancel returned POOL_OK with no task waiting", rec.gen),
                    w => w.map(|w| w - 1),
                };
            }
            BUSY => {
                qt.cancel[i].store(C_NONE, Ordering::SeqCst);
                if rec.allowed.load(Ordering::SeqCst) == 0 && st.runs[i].load(Ordering::Acquire) == 0 {
                    fail!("queue {}: pool_queue_cancel returned POOL_ERR_BUSY for task {id}, waiting in a queue suspended since it was idle", rec.gen);
                }
            }
            rc => fail!("pool_queue_cancel of a task of the queue returned {} ({rc})", status_name(rc)),
        }
    }

    /// `pool_queue_cancel` of a waiting or started task of the queue, of a finished one, of a
    /// task of another queue, of one never submitted, and NULLs.
    fn op_qcancel(&mut self, inp: &mut Input) {
        let q = inp.below(QSLOTS);
        let what = inp.below(6);
        let pick = usize::from(inp.byte());
        let mut never = CTask { next: null_mut(), callback: Some(qjob_run) };
        let Some(slot) = &self.queues.slots[q] else {
            expect_rc("pool_queue_cancel(NULL, task)", pool_queue_cancel(null_mut(), &mut never), INVALID);
            return;
        };
        let queue = slot.rec.queue();
        let runs = &self.st_static().runs;
        let n_owned = slot.owned.len();
        match what {
            0..=2 if n_owned != 0 => self.qcancel_owned(q, pick % n_owned),
            3 => {
                // A task of another queue (still owned by the driver: alive), or none.
                let other = self
                    .queues
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|&(o, _)| o != q)
                    .flat_map(|(_, s)| s.iter().flat_map(|s| s.owned.iter()))
                    .nth(pick)
                    .map(|&(_, job)| qtask_of(job));
                let t = other.unwrap_or(&mut never);
                expect_rc("pool_queue_cancel of a task not in this queue", pool_queue_cancel(queue, t), BUSY);
            }
            5 => {
                // A finished task (its callback counted its run): out of the list for good.
                let done = slot.owned.iter().find(|&&(id, _)| runs[id as usize].load(Ordering::Acquire) == 1);
                if let Some(&(_, job)) = done {
                    expect_rc("pool_queue_cancel of a finished task", pool_queue_cancel(queue, qtask_of(job)), BUSY);
                }
            }
            _ => {
                expect_rc("pool_queue_cancel of a task never submitted", pool_queue_cancel(queue, &mut never), BUSY);
                expect_rc("pool_queue_cancel(queue, NULL)", pool_queue_cancel(queue, null_mut()), INVALID);
            }
        }
    }

    /// The width of the target of the queue in slot `q` (`usize::MAX` for a queue on a pool).
    fn target_width(&self, q: usize) -> usize {
        let t = self.queues.slots[q].as_ref().and_then(|s| s.target);
        t.map_or(usize::MAX, |t| self.queues.slots[t].as_ref().expect("a target outlives its queues").width)
    }

    /// `pool_queue_set_width`: 0 to `max_threads` (OK; SHUTDOWN where the pool, shut down,
    /// refuses the runners that waiting tasks need), above (INVALID, nothing changed).
    fn op_qwidth(&mut self, q: usize, inp: &mut Input) {
        let b = inp.byte();
        let Some(slot) = self.queues.slots[q].as_mut() else {
            expect_rc("pool_queue_set_width(NULL, 1)", pool_queue_set_width(null_mut(), 1), INVALID);
            return;
        };
        let rec = &*slot.rec;
        let w = width_of(b, slot.max_threads);
        if w <= slot.max_threads {
            // Before the call: a widening starts tasks at once.
            rec.allowed.fetch_max(w, Ordering::SeqCst);
        }
        let epoch = (rec.wstate.load(Ordering::SeqCst) >> 32) as u32;
        rec.wstate.store(wstate_of(epoch + 1, slot.width), Ordering::SeqCst);
        let rc = pool_queue_set_width(rec.queue(), w);
        rec.wstate.store(wstate_of(epoch + 2, if rc == INVALID { slot.width } else { w }), Ordering::SeqCst);
        qtrace!("queue {}: set_width {w} (waiting {:?}): {}", rec.gen, slot.waiting, status_name(rc));
        let want: &[c_int] = if w > slot.max_threads {
            &[INVALID]
        } else if !slot.shut || w == 0 {
            &[OK]
        } else if slot.target.is_some() {
            // The runners may wait in the target's list (a suspended target).
            &[OK, SHUTDOWN]
        } else {
            match slot.waiting {
                Some(0) => &[OK],
                Some(_) => &[SHUTDOWN],
                None => &[OK, SHUTDOWN],
            }
        };
        if !want.contains(&rc) {
            fail!(
                "pool_queue_set_width({w}) (max_threads {}, pool shut down {}, waiting {:?}) returned {} ({rc})",
                slot.max_threads,
                slot.shut,
                slot.waiting,
                status_name(rc)
            );
        }
        if rc != INVALID {
            slot.width = w;
            if !slot.shut && w > 0 && slot.waiting != Some(0) {
                slot.waiting = None;
            }
        }
    }

    /// Lets the queue's tasks get going: waits until 1 to 4 of them are inside their callbacks,
    /// at most 2 ms. The driver's calls take microseconds and a pool starts its threads as
    /// work comes: without this, most tasks start after the input's last width change, and a
    /// narrowing is never tested against tasks running under it.
    fn op_qsettle(&mut self, q: usize, inp: &mut Input) {
        let n = 1 + inp.below(4);
        let Some(slot) = &self.queues.slots[q] else { return };
        let start = Instant::now();
        while slot.rec.running.load(Ordering::SeqCst) < n && start.elapsed() < Duration::from_millis(2) {
            std::thread::yield_now();
        }
        qtrace!("queue {}: {} tasks running after {:?}", slot.rec.gen, slot.rec.running.load(Ordering::SeqCst), start.elapsed());
    }

    /// `pool_queue_wait` where it returns (a live pool and a width, or nothing waiting); then
    /// the queue is idle: every task accepted so far ran or was cancelled, none runs.
    fn op_qwait(&mut self, q: usize) {
        let target_width = self.target_width(q);
        let Some(slot) = &self.queues.slots[q] else {
            expect_rc("pool_queue_wait(NULL)", pool_queue_wait(null_mut()), INVALID);
            return;
        };
        if !((!slot.shut && slot.width > 0) || slot.waiting == Some(0)) {
            return;
        }
        // On a target: its runners start only through the target's width, on a live pool.
        if slot.target.is_some() && (slot.shut || target_width == 0) {
            return;
        }
        let st = self.st_static();
        let slot = self.queues.slots[q].as_mut().expect("a queue in the slot");
        let rec = &*slot.rec;
        let start = Instant::now();
        expect_rc("pool_queue_wait", pool_queue_wait(rec.queue()), OK);
        qtrace!("queue {}: wait returned after {:?}", rec.gen, start.elapsed());
        if start.elapsed() > WAIT_LIMIT {
            fail!("pool_queue_wait took {:?}", start.elapsed());
        }
        st.check_queue(rec, false, "after pool_queue_wait");
        let targeted = slot.targeted;
        slot.waiting = Some(0).filter(|_| !targeted);
        slot.rec.allowed.store(slot.width, Ordering::SeqCst);
    }

    /// Two to five plain jobs submitted, then some cancelled, newest first (the list's tail,
    /// middle and head).
    fn op_qburst(&mut self, q: usize, inp: &mut Input) {
        let k = 2 + inp.below(4);
        let pattern = inp.byte();
        if self.queues.slots[q].is_none() {
            return;
        }
        let mut ids = Vec::new();
        for _ in 0..k {
            match self.qsubmit(q, Q_PLAIN, 0, false, false, false, None) {
                None => break,
                Some(Some((id, _))) => ids.push(id),
                Some(None) => {}
            }
        }
        for (n, &id) in ids.iter().enumerate().rev() {
            if pattern & (1 << n) == 0 {
                continue;
            }
            let slot = self.queues.slots[q].as_ref().expect("a queue in the slot");
            if let Some(k) = slot.owned.iter().position(|&(o, _)| o == id) {
                self.qcancel_owned(q, k);
            }
        }
    }

    /// NULL and out-of-range arguments to every `pool_queue_*` entry point: INVALID, nothing
    /// changed.
    fn op_qnull(&mut self, _inp: &mut Input) {
        let pool = self.slots.iter().flatten().next().map_or(null_mut(), |s| s.pool);
        let mut t = CTask { next: null_mut(), callback: Some(qjob_run) };
        let mut no_cb = CTask { next: null_mut(), callback: None };
        let mut fresh = PoolQueue { opaque: [7; POOL_QUEUE_WORDS] };
        expect_rc("pool_queue_init(NULL, pool)", pool_queue_init(null_mut(), pool, 1, 0, None), INVALID);
        expect_rc("pool_queue_init(queue, NULL)", pool_queue_init(&mut fresh, null_mut(), 1, 0, None), INVALID);
        if !pool.is_null() {
            let w = max_threads_of(pool) + 1;
            expect_rc("pool_queue_init(width max_threads + 1)", pool_queue_init(&mut fresh, pool, w, 0, None), INVALID);
            expect_rc("pool_queue_init(width SIZE_MAX)", pool_queue_init(&mut fresh, pool, usize::MAX, 1, None), INVALID);
        }
        expect_rc("pool_queue_init_target(NULL, NULL)", pool_queue_init_target(null_mut(), null_mut(), 1, 0, None), INVALID);
        expect_rc("pool_queue_init_target(queue, NULL)", pool_queue_init_target(&mut fresh, null_mut(), 1, 0, None), INVALID);
        for slot in self.queues.slots.iter().flatten() {
            let (queue, w) = (slot.rec.queue(), slot.max_threads + 1);
            expect_rc("pool_queue_init_target(NULL, target)", pool_queue_init_target(null_mut(), queue, 1, 0, None), INVALID);
            expect_rc("pool_queue_init_target(width max_threads + 1)", pool_queue_init_target(&mut fresh, queue, w, 0, None), INVALID);
        }
        if fresh.opaque != [7; POOL_QUEUE_WORDS] {
            fail!("a refused pool_queue_init wrote the queue");
        }
        expect_rc("pool_queue_submit(NULL, task)", pool_queue_submit(null_mut(), &mut t), INVALID);
        expect_rc("pool_queue_submit_timeout(NULL, task, 0)", pool_queue_submit_timeout(null_mut(), &mut t, 0), INVALID);
        expect_rc("pool_queue_cancel(NULL, task)", pool_queue_cancel(null_mut(), &mut t), INVALID);
        expect_rc("pool_queue_cancel(NULL, NULL)", pool_queue_cancel(null_mut(), null_mut()), INVALID);
        expect_rc("pool_queue_set_width(NULL, 0)", pool_queue_set_width(null_mut(), 0), INVALID);
        expect_rc("pool_queue_wait(NULL)", pool_queue_wait(null_mut()), INVALID);
        expect_rc("pool_queue_destroy(NULL)", pool_queue_destroy(null_mut()), INVALID);
        for slot in self.queues.slots.iter().flatten() {
            let queue = slot.rec.queue();
            expect_rc("pool_queue_submit(queue, NULL)", pool_queue_submit(queue, null_mut()), INVALID);
            expect_rc("pool_queue_submit(queue, NULL callback)", pool_queue_submit(queue, &mut no_cb), INVALID);
            expect_rc("pool_queue_submit_timeout(queue, NULL, -1)", pool_queue_submit_timeout(queue, null_mut(), -1), INVALID);
            expect_rc("pool_queue_submit_timeout(queue, NULL callback, 1 ms)", pool_queue_submit_timeout(queue, &mut no_cb, 1_000_000), INVALID);
            expect_rc("pool_queue_cancel(queue, NULL)", pool_queue_cancel(queue, null_mut()), INVALID);
            expect_rc("pool_queue_set_width(max_threads + 1)", pool_queue_set_width(queue, slot.max_threads + 1), INVALID);
            expect_rc("pool_queue_set_width(SIZE_MAX)", pool_queue_set_width(queue, usize::MAX), INVALID);
            if !no_cb.next.is_null() {
                fail!("a refused queue submit wrote the task");
            }
        }
    }

    /// `pool_queue_destroy`: every task still waiting is handed to the cancel callback, or
    /// run (in order) without one; then every accepted task ran or was cancelled exactly
    /// once, and the driver frees its jobs.
    fn qdestroy(&mut self, q: usize) {
        let children: Vec<usize> = (0..QSLOTS).filter(|&c| self.queues.slots[c].as_ref().is_some_and(|s| s.target == Some(q))).collect();
        if !children.is_empty() {
            let queue = self.queues.slots[q].as_ref().expect("a target in the slot").rec.queue();
            expect_rc("pool_queue_destroy of a target with queues on it", pool_queue_destroy(queue), BUSY);
            for c in children {
                self.qdestroy(c);
            }
        }
        let Some(slot) = self.queues.slots[q].take() else { return };
        let rec = slot.rec;
        rec.sync.lock().unwrap().destroying = true;
        IN_DESTROY.set(true);
        let rc = pool_queue_destroy(rec.queue());
        IN_DESTROY.set(false);
        expect_rc("pool_queue_destroy", rc, OK);
        qtrace!("queue {}: destroyed", rec.gen);
        self.st().check_queue(&rec, true, "after pool_queue_destroy");
        for (_, job) in slot.owned {
            // SAFETY: its queue is destroyed: nothing refers to it.
            unsafe { free_qjob(job) };
        }
        self.queues.retired.push(rec);
    }

    /// Destroys the queues of a pool (before the pool: pool.h).
    pub(crate) fn destroy_queues_of(&mut self, pool_gen: u32) {
        for q in 0..QSLOTS {
            if self.queues.slots[q].as_ref().is_some_and(|s| s.pool_gen == pool_gen) {
                self.qdestroy(q);
            }
        }
    }

    /// The pool was shut down: its queues with a width ran every task (each had a runner,
    /// and the shutdown ran every pool task); those suspended keep theirs until destroyed.
    pub(crate) fn queues_after_shutdown(&mut self, pool_gen: u32) {
        let st = self.st_static();
        let widths: Vec<usize> = (0..QSLOTS).map(|q| self.target_width(q)).collect();
        for (slot, target_width) in self.queues.slots.iter_mut().zip(widths).filter_map(|(s, w)| s.as_mut().map(|s| (s, w))) {
            if slot.pool_gen != pool_gen {
                continue;
            }
            slot.shut = true;
            // A queue on a target ran everything only if the target has a width too.
            if slot.width > 0 && target_width > 0 {
                st.check_queue(&slot.rec, false, "after pool_shutdown (a queue with a width)");
                let targeted = slot.targeted;
                slot.waiting = Some(0).filter(|_| !targeted);
            }
        }
    }
}

impl State {
    /// Queue `rec` is idle (or destroyed): each task accepted by it ran or was cancelled
    /// exactly once (by the cancel callback only at a destroy, and only if it has one); none
    /// refused ran; none is in its callback.
    fn check_queue(&self, rec: &QRec, destroyed: bool, when: &str) {
        // SAFETY: as `qjob_run`.
        let qt = unsafe { &*rec.tasks };
        for id in self.ids() {
            if self.owner[id].load(Ordering::Relaxed) != rec.gen {
                continue;
            }
            let (runs, cancels) = (self.runs[id].load(Ordering::Acquire), self.cancels[id].load(Ordering::Acquire));
            let by_cancel = u32::from(qt.cancel[id].load(Ordering::SeqCst) == C_DONE);
            match self.status[id].load(Ordering::Acquire) {
                Q_EITHER => {
                    let handed = cancels - by_cancel.min(cancels);
                    if runs + cancels != 1 || (handed != 0 && !(destroyed && rec.has_cancel)) {
                        fail!(
                            "{when}: queue {} task {id}: {runs} runs, {by_cancel} cancels, {handed} hand-backs (cancel callback {})",
                            rec.gen,
                            rec.has_cancel
                        );
                    }
                }
                _ if runs + cancels != 0 => fail!("{when}: refused queue {} task {id}: {runs} runs, {cancels} cancels", rec.gen),
                _ => {}
            }
        }
        let running = rec.running.load(Ordering::SeqCst);
        if running != 0 {
            fail!("{when}: {running} tasks of queue {} still in their callbacks", rec.gen);
        }
    }
}
