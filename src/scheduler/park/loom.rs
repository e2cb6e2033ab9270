//! Loom models of the timer parker (`park.rs`, with the role word in `protocol.rs`): the one idle
//! worker that parks with the wheel's next deadline as its timeout, and how the others, the
//! timers' owners and the wheel hand that role and its deadline around. A whole `ThreadPool`
//! runs on loom threads ([`LoomSpawner::with_clock`]): real workers, `Sync` word, wheel, role
//! word and kick; a model clock that only the model moves, and parkers whose timed park ends
//! when the clock passes its deadline or when they are unparked, as an OS timed wait does.
//!
//! A timer whose deadline passed and that nobody fires (a lost wake-up, a role nobody holds,
//! a parker asleep on a later deadline) shows as a loom deadlock: the model's threads wait
//! for the timer's task on a condvar (`wait_until_ran`), the workers sleep; a double fire as a count of 2; a wheel that
//! touches a cancelled timer's memory as a loom causality error (a loom `Entry` writes its
//! links when freed).
//!
//! Explored executions (`LOOM_MAX_PREEMPTIONS=2` unless the test says otherwise) are in each
//! test's doc.
//!
//! Run: `make test-loom`.

use core::ptr::NonNull;
use core::time::Duration;
use std::boxed::Box;
use std::future::Future;
use std::sync::Arc as StdArc;
use std::task::{Context, Wake, Waker};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};

use crate::loom::{job, model, model_with_bound, run_job, runs, wait_until_ran, Job, LoomSpawner};
use crate::{container_of, Config, Task, ThreadPool};

/// One wheel tick (2^20 ns): the model clock moves in whole ticks.
const TICK: u64 = 1 << 20;
/// A near deadline, in ticks from 0.
const NEAR: u64 = 2;
/// A deadline the model never reaches: a worker parked until it stays parked.
const FAR: u64 = 1_000;

fn pool(max_threads: usize) -> ThreadPool<LoomSpawner> {
    ThreadPool::with_spawner(Config { max_threads, ..Config::default() }, LoomSpawner::with_clock()).unwrap()
}

fn submit(pool: &ThreadPool<LoomSpawner>, job: &Job) {
    // SAFETY: the job outlives the pool's use of it (kept until after shutdown), submitted once.
    unsafe { pool.submit(NonNull::from(&job.task)) }.unwrap();
}

/// `job` as a delayed task due at tick `ticks` (the clock is at 0 when the models call this).
fn submit_at(pool: &ThreadPool<LoomSpawner>, job: &Job, ticks: u64) {
    // SAFETY: as `submit`.
    unsafe { pool.submit_after(NonNull::from(&job.task), Duration::from_nanos(ticks * TICK)) }.unwrap();
}

/// Starts both workers of a pool of 2 and lets them go idle: two tasks in a row, so the first
/// worker, woken for them, starts the second as it hands the waking right on. Returns the two
/// jobs, for the caller to keep until shutdown (a job's callback may still be running).
#[must_use]
fn start_two_workers(pool: &ThreadPool<LoomSpawner>) -> (Arc<Job>, Arc<Job>) {
    let (first, second) = (job(), job());
    submit(pool, &first);
    submit(pool, &second);
    wait_until_ran(&first);
    wait_until_ran(&second);
    (first, second)
}

/// Shuts down and checks that every thread was joined.
fn shutdown(pool: &ThreadPool<LoomSpawner>) {
    pool.shutdown().unwrap();
    let sp = pool.spawner();
    assert_eq!(sp.unjoined(), 0, "a thread handle was left unjoined");
    assert_eq!(sp.spawned(), sp.joined(), "threads started vs joined");
}

/// A timer with an earlier deadline is registered (from outside the pool) while the only
/// worker goes idle and parks with a timeout on a far one, or already has.
///
/// Interleavings: the worker starts (the far timer's `submit_after` starts it), finds no
/// work and parks: it claims the role (SeqCst CAS), reads `next_tick` under the wheel's lock
/// and parks until that tick; or it saw no timer yet and parks without a timeout. Meanwhile
/// the main thread links the near deadline under the wheel's lock and, after its unlock,
/// reads the role (SeqCst fence and load): it unparks the holder, or, with nobody in the
/// role, notifies the pool. Then the clock passes the near deadline. Whatever the order, the
/// worker parks with the near deadline (or is awake) and fires the near timer without the
/// clock reaching the far one; the far one runs at shutdown, early, as every delayed task
/// still pending does. (The same race with the registrar on a worker, whose kick does not
/// notify the pool, needs two preemptions: the shuttle scenario
/// `earlier_deadline_from_a_worker`.)
///
/// Explored: 7,153 executions (~1 s). Fails (a loom deadlock) when the kick does not unpark
/// the holder, when it does not notify the pool with nobody in the role, or when the holder
/// does not give the role back as it wakes.
#[test]
fn timer_earlier_deadline_wakes_the_parker() {
    model("timer_earlier_deadline_wakes_the_parker", || {
        let pool = pool(1);
        let (far, near) = (job(), job());
        submit_at(&pool, &far, FAR);
        submit_at(&pool, &near, NEAR);
        pool.spawner().advance_to(NEAR * TICK);
        wait_until_ran(&near);
        assert_eq!(runs(&far), 0, "fired early");
        shutdown(&pool);
        assert_eq!((runs(&far), runs(&near)), (1, 1));
    });
}

/// A flag set by a timer's waker, that a thread can block on.
#[derive(Default)]
struct Flag {
    set: Mutex<bool>,
    cond: Condvar,
}

impl Wake for Flag {
    fn wake(self: StdArc<Self>) {
        *self.set.lock().unwrap() = true;
        self.cond.notify_all();
    }
}

impl Flag {
    fn wait(&self) {
        let mut set = self.set.lock().unwrap();
        while !*set {
            set = self.cond.wait(set).unwrap();
        }
    }
}

/// A task that blocks its worker until `flag` is set (a long task), then counts its run.
#[repr(C)]
struct LongJob {
    task: Task,
    flag: StdArc<Flag>,
    done: Arc<Job>,
}

unsafe extern "C" fn run_long(task: *mut Task) {
    // SAFETY: the `task` field of a `LongJob` the model keeps alive until shutdown.
    let job = unsafe { &*container_of!(task, LongJob, task) };
    job.flag.wait();
    // SAFETY: as `submit`: `done` is a job of its own, run once here.
    unsafe { run_job(NonNull::from(&job.done.task).as_ptr()) };
}

/// A due timer fires while one worker runs a long task: the role is held by the other one.
///
/// Interleavings: two workers are started and idle (the first, woken for two tasks, starts
/// the second as it hands the waking right on). The main thread polls a `ThreadPool::sleep`
/// once (registering it: with nobody in the role, the kick notifies the pool; the worker that
/// claims the role parks on the deadline, the other without a timeout), then submits a long
/// task that blocks its worker until the sleep's waker is woken. Its notification may wake
/// the role's holder, which gives the role back; the waking cascade (the woken worker, finding
/// work, wakes the other idle one) or the holder's hand-off (`unpark_idle_except`) puts the
/// other worker in the role. The clock then passes the deadline: the worker that is not
/// running the long task must fire the timer, or the long task never ends (loom: deadlock).
///
/// Too large for the suite's bound (at 2 preemptions it ran past 13 minutes): it runs at 1,
/// 47,250 executions (~15 s). At that bound the explicit hand-off is never the path that
/// matters (with it removed the model still passes: the long task's own notification and the
/// waking cascade always wake the other worker first), so this model checks the property, not
/// that mechanism.
#[test]
fn timer_role_passes_on_when_its_holder_runs_work() {
    model_with_bound("timer_role_passes_on_when_its_holder_runs_work", 1, || {
        let pool = pool(2);
        let _started = start_two_workers(&pool);
        let flag = StdArc::new(Flag::default());
        let mut sleep = Box::pin(pool.sleep(Duration::from_nanos(NEAR * TICK)));
        let waker = Waker::from(flag.clone());
        assert!(sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        let long = LongJob { task: Task::new(run_long), flag: flag.clone(), done: job() };
        // SAFETY: `long` outlives the pool's use of it (shutdown below), submitted once.
        unsafe { pool.submit(NonNull::from(&long.task)) }.unwrap();
        pool.spawner().advance_to(NEAR * TICK);
        wait_until_ran(&long.done);
        drop(sleep);
        shutdown(&pool);
        assert_eq!(pool.spawner().spawned(), 2);
    });
}

/// A timer's task runs long on the worker whose fire woke it: the other timers must not go
/// unwatched meanwhile.
///
/// Interleavings: two workers are started and idle. A task sleeps until tick `NEAR`, then
/// blocks its worker until a second timer (polled by the main thread, due at `NEAR + 2`) has
/// fired. One worker holds the role and parks on `NEAR`, the other parks without a timeout.
/// The clock passes `NEAR`: the holder fires the task into its own LIFO slot (no
/// notification) and runs it, so it blocks; once the task has started, the clock passes the
/// second deadline. The holder must have handed the role on as it left its park for its own
/// queue's work (`park_worker`, `leaves_idle`), so that the other worker parks on the second
/// deadline and fires it; otherwise nobody fires it (loom: deadlock).
///
/// Explored at one preemption (at two it would not finish): 640,102 executions (~112 s).
/// Fails (a deadlock) with the hand-off limited to a notified holder, as it was.
#[test]
fn timer_role_passes_on_when_its_fire_wakes_its_own_long_task() {
    model_with_bound("timer_role_passes_on_when_its_fire_wakes_its_own_long_task", 1, || {
        // No spin phase: every spin round is a loom branch, and with the role's hand-offs the
        // default's 256 rounds take an execution far past any branch limit.
        let config = Config { max_threads: 2, idle_spins: 0, ..Config::default() };
        let pool = ThreadPool::with_spawner(config, LoomSpawner::with_clock()).unwrap();
        let _started = start_two_workers(&pool);
        let flag = StdArc::new(Flag::default());
        let mut later = Box::pin(pool.sleep(Duration::from_nanos((NEAR + 2) * TICK)));
        let waker = Waker::from(flag.clone());
        assert!(later.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        let (started, done) = (job(), job());
        let sleep = pool.sleep(Duration::from_nanos(NEAR * TICK));
        let (f, s2, d2) = (flag.clone(), started.clone(), done.clone());
        let handle = pool
            .spawn_future(async move {
                sleep.await;
                // SAFETY: `started` and `done` are jobs of their own, each run once here.
                unsafe { run_job(NonNull::from(&s2.task).as_ptr()) };
                f.wait();
                // SAFETY: as above.
                unsafe { run_job(NonNull::from(&d2.task).as_ptr()) };
            })
            .unwrap();
        // Once the task's poll registered its timer (see `timer_wakes_a_task_into_the_parkers_own_queue`).
        while pool.pending_timers() < 2 {
            loom::thread::yield_now();
        }
        pool.spawner().advance_to(NEAR * TICK);
        wait_until_ran(&started);
        pool.spawner().advance_to((NEAR + 2) * TICK);
        wait_until_ran(&done);
        drop((handle, later));
        shutdown(&pool);
    });
}

/// Counts wakes.
struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A `Sleep` is dropped (cancelled) while the timer parker fires it.
///
/// Interleavings: the main thread polls a `ThreadPool::sleep` once (registering it and
/// kicking the idle worker), moves the clock past its deadline and drops it, while the
/// worker, woken by the clock, fires the wheel: the fire and the cancel race for the wheel's
/// lock. The waker is woken at most once, the wheel keeps no clone of it, and the wheel never
/// touches the entry after the drop freed it (loom checks the entry's memory).
///
/// Explored: 3,984 executions (<1 s).
#[test]
fn timer_fire_racing_cancel_by_drop() {
    model("timer_fire_racing_cancel_by_drop", || {
        let pool = pool(1);
        let start = job();
        submit(&pool, &start);
        let count = StdArc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut sleep = Box::pin(pool.sleep(Duration::from_nanos(NEAR * TICK)));
        assert!(sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        drop(waker);
        pool.spawner().advance_to(NEAR * TICK);
        drop(sleep);
        wait_until_ran(&start);
        shutdown(&pool);
        assert!(count.0.load(Ordering::Acquire) <= 1, "woken twice");
        assert_eq!(StdArc::strong_count(&count), 1, "the wheel kept a waker clone");
        assert_eq!(pool.pending_timers(), 0);
    });
}

/// A pool task asleep on a timer is woken by the only worker's timed park: the wheel fires
/// inside `park_worker`, the task's waker queues it in that worker's LIFO slot, which does
/// not notify (`push_lifo`: the slot's task is its owner's to run), so the worker, back from
/// its park with nothing notified, must see its own queue and run it (`sleep.rs`, `park`)
/// instead of parking again.
///
/// Interleavings: the main thread spawns the task (waking the worker) and, once the task has
/// registered its timer, moves the clock past its deadline, while the worker polls the task
/// (registering the timer: it is a worker, so it kicks nobody), runs dry, claims the role and
/// parks until the deadline. The clock may pass the deadline before or after the worker
/// parks. Fails (a loom deadlock) when the worker ignores its own queue after the park.
#[test]
fn timer_wakes_a_task_into_the_parkers_own_queue() {
    model("timer_wakes_a_task_into_the_parkers_own_queue", || {
        let pool = pool(1);
        let done = job();
        let sleep = pool.sleep(Duration::from_nanos(NEAR * TICK));
        let d2 = done.clone();
        let handle = pool
            .spawn_future(async move {
                sleep.await;
                // SAFETY: `done` is a job of its own, run once here.
                unsafe { run_job(NonNull::from(&d2.task).as_ptr()) };
            })
            .unwrap();
        // Once the task's poll registered its timer (the model clock is not a loom object, so
        // a move of it is ordered only by what the model waits for).
        while pool.pending_timers() == 0 {
            loom::thread::yield_now();
        }
        pool.spawner().advance_to(NEAR * TICK);
        wait_until_ran(&done);
        drop(handle);
        shutdown(&pool);
        assert_eq!(runs(&done), 1);
    });
}

/// A delayed task whose callback submits a child to the pool it runs on.
#[repr(C)]
struct Parent {
    task: Task,
    pool: *const ThreadPool<LoomSpawner>,
    child: Arc<Job>,
    refused: AtomicUsize,
}

unsafe extern "C" fn run_parent(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a `Parent` the model keeps
    // alive, with its pool, until the pool is shut down.
    let parent = unsafe { &*container_of!(task, Parent, task) };
    // SAFETY: as above.
    let pool = unsafe { &*parent.pool };
    // SAFETY: the child outlives the pool's use of it (the model keeps the parent, with its
    // child, until after shutdown), and this run of its parent is its one submit.
    if unsafe { pool.submit(NonNull::from(&parent.child.task)) }.is_err() {
        parent.refused.fetch_add(1, Ordering::Relaxed);
    }
}

/// A delayed task still pending at shutdown runs then, as a pool task: its own submit is
/// accepted (a task's own submits always are during shutdown) and the child runs, whether
/// the only worker is still starting, drains, or has drained when shutdown fires the wheel.
///
/// Interleavings: `submit_after` starts the worker; the shutdown (main thread) closes the
/// injector, sets `Shutdown`, fires the wheel (the parent goes to the injector) and releases
/// the waits, while the worker starts, drains and would leave. Found by the C API fuzzer: the
/// worker left before the fire, the parent ran on the shutdown thread, and its submit was
/// refused. Explored: 341 executions. Fails (a refused submit) when a draining worker leaves
/// without waiting for `release_waits`.
#[test]
fn timer_delayed_task_fired_at_shutdown_runs_as_a_pool_task() {
    model("timer_delayed_task_fired_at_shutdown_runs_as_a_pool_task", || {
        let pool = pool(1);
        let parent = Arc::new(Parent { task: Task::new(run_parent), pool: &pool, child: job(), refused: AtomicUsize::new(0) });
        // SAFETY: the parent (and its child) outlive the pool's use of them (kept until after
        // shutdown), each submitted once.
        unsafe { pool.submit_after(NonNull::from(&parent.task), Duration::from_nanos(FAR * TICK)) }.unwrap();
        shutdown(&pool);
        assert_eq!(parent.refused.load(Ordering::Relaxed), 0, "the delayed task's own submit was refused");
        assert_eq!(runs(&parent.child), 1);
    });
}
