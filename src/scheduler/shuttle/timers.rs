//! The idle worker that parks on the next timer deadline or in the I/O driver (`park.rs`).

use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::boxed::Box;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{pool, shutdown, start_two_workers, submit};
use crate::io::Driver;
use crate::shuttle::{check_pct, check_random, Gate, ShuttleSpawner, Tally};
use crate::time::Sleep;
use crate::ThreadPool;

/// One wheel tick: the model clock moves in whole ticks.
const TICK: u64 = crate::timer::wheel::TICK_NS;
/// A near deadline, in ticks from 0.
const NEAR: u64 = 2;

/// Two started, idle workers on the model clock, and a timer due at tick `at`, polled once
/// from outside (its kick notifies: a worker claims the timer role and parks until `at`).
/// Returns the pool, the start-up tally (kept to the end), the timer and the gate its waker
/// opens.
fn two_idle_workers_and_a_timer(at: u64) -> (ThreadPool<ShuttleSpawner>, Arc<Tally>, Pin<Box<Sleep>>, Arc<Gate>) {
    let pool = pool(2, 0, ShuttleSpawner::new().with_clock());
    let started = start_two_workers(&pool);
    let gate = Arc::new(Gate::default());
    let mut timer = Box::pin(pool.sleep(Duration::from_nanos(at * TICK)));
    let waker = Waker::from(gate.clone());
    assert!(timer.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    (pool, started, timer, gate)
}

/// Waits until a task's poll registered the second timer (the clock is outside the model: a
/// move of it is ordered only by what the scenario waits for).
fn both_timers_registered(pool: &ThreadPool<ShuttleSpawner>) {
    while pool.pending_timers() < 2 {
        shuttle::thread::yield_now();
    }
}

/// A timer's task runs long on the worker whose fire woke it; the other timer must not go
/// unwatched meanwhile. Two idle workers: one holds the timer role and parks until tick
/// `NEAR`, the other parks without a timeout. The clock passes `NEAR`: the holder fires the
/// task into its own LIFO slot (no notification) and runs it; the task blocks its worker until
/// a second timer (polled from outside, due at `NEAR + 2`) fires. The holder must hand the role
/// on as it leaves its park for its own queue's work (`park_worker`, `leaves_idle`), so the
/// other worker parks on the second deadline and fires it (the bug of VERIFY.md's table: the
/// role handed on only for notified work; loom's model of it runs at one preemption).
fn timer_role_handed_on() {
    let (pool, _started, later, flag) = two_idle_workers_and_a_timer(NEAR + 2);
    let (started, done) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
    let sleep = pool.sleep(Duration::from_nanos(NEAR * TICK));
    let (f, s, d) = (flag.clone(), started.clone(), done.clone());
    let handle = pool
        .spawn_future(async move {
            sleep.await;
            s.open();
            f.wait();
            d.open();
        })
        .unwrap();
    both_timers_registered(&pool);
    pool.spawner().advance_to(NEAR * TICK);
    started.wait();
    pool.spawner().advance_to((NEAR + 2) * TICK);
    done.wait();
    drop((handle, later));
    shutdown(&pool);
}

#[test]
fn shuttle_timer_role_handed_on() {
    check_pct("timer_role_handed_on", 40_000, 4, timer_role_handed_on);
    check_random("timer_role_handed_on", 20_000, timer_role_handed_on);
}

/// A deadline the scenario never reaches.
const FAR: u64 = 1_000;

/// An earlier deadline registered on a worker reaches the role's holder, parked (or about to
/// park) on a later one (`park.rs`, "The timer parker"). Two idle workers; a far timer polled
/// from outside (its kick notifies: one worker claims the role and parks until `FAR`); then a
/// task that sleeps until `NEAR`, its timer registered by the worker that polls it, whose kick
/// does not notify the pool. The holder must see the near deadline (its read under the wheel's
/// lock after its claim) or be unparked by the registrar (its read of the role after its
/// unlock); else, the clock past `NEAR`, nobody fires the near timer: the holder sleeps until
/// `FAR` and the other worker, the role taken, without a timeout (a deadlock).
fn earlier_deadline_from_a_worker() {
    let (pool, _started, later, _far) = two_idle_workers_and_a_timer(FAR);
    let woke = Arc::new(Gate::default());
    let sleep = pool.sleep(Duration::from_nanos(NEAR * TICK));
    let w = woke.clone();
    let handle = pool
        .spawn_future(async move {
            sleep.await;
            w.open();
        })
        .unwrap();
    both_timers_registered(&pool);
    pool.spawner().advance_to(NEAR * TICK);
    woke.wait();
    drop((handle, later));
    shutdown(&pool);
}

#[test]
fn shuttle_earlier_deadline_from_a_worker() {
    check_pct("earlier_deadline_from_a_worker", 40_000, 5, earlier_deadline_from_a_worker);
    check_random("earlier_deadline_from_a_worker", 20_000, earlier_deadline_from_a_worker);
}

/// A model I/O driver: one readiness event and its waiter. `park` blocks until unparked or
/// until the event is ready with a waiter to wake, then dispatches (wakes the waiter, which on
/// a worker lands in that worker's LIFO slot: `schedule_woken`); `poll` dispatches without
/// blocking; `shutdown` wakes the waiter, which then sees the driver closed.
#[derive(Default)]
struct ModelIo {
    state: shuttle::sync::Mutex<IoState>,
    cond: shuttle::sync::Condvar,
}

#[derive(Default)]
struct IoState {
    token: bool,
    ready: bool,
    closed: bool,
    waiter: Option<Waker>,
}

impl ModelIo {
    /// The event arrives (as a socket becoming readable: the poller wakes).
    fn fire(&self) {
        self.state.lock().unwrap().ready = true;
        self.cond.notify_all();
    }

    fn dispatch(&self) {
        let waker = {
            let mut st = self.state.lock().unwrap();
            if st.ready || st.closed { st.waiter.take() } else { None }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Driver for ModelIo {
    fn poll(&self) {
        self.dispatch();
    }

    fn park(&self, _timeout: Option<Duration>) {
        {
            let mut st = self.state.lock().unwrap();
            while !(st.token || st.ready && st.waiter.is_some()) {
                st = self.cond.wait(st).unwrap();
            }
            st.token = false;
        }
        self.dispatch();
    }

    fn unpark(&self) {
        self.state.lock().unwrap().token = true;
        self.cond.notify_all();
    }

    fn shutdown(&self) {
        self.state.lock().unwrap().closed = true;
        self.dispatch();
    }
}

/// Waits for the model event (or the driver's shutdown).
struct Readable(Arc<ModelIo>);

impl Future for Readable {
    type Output = bool;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.0.state.lock().unwrap();
        if st.ready || st.closed {
            return Poll::Ready(st.ready);
        }
        st.waiter = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A pool with an I/O driver: an async task waits for the event, so an idle worker blocks in
/// the driver (the timer role, without spinning: README row X5); meanwhile a thread outside
/// submits tasks (each wake of the role's holder must unpark the driver, `unpark_worker`) and
/// the event arrives (the holder's dispatch wakes the task into its own LIFO slot with no
/// notification, and back from its park it must run it: `park` returns whether its own queues
/// hold work, README "Tasks woken on a worker").
fn worker_parked_in_the_driver(workers: usize) {
    let pool = Arc::new(pool(workers, 2, ShuttleSpawner::new()));
    let io = Arc::new(ModelIo::default());
    pool.set_driver(Box::new(io.clone())).unwrap();
    let done = Arc::new(Gate::default());
    let (r, d) = (Readable(io.clone()), done.clone());
    let handle = pool
        .spawn_future(async move {
            assert!(r.await, "woken by the event, not by shutdown");
            d.open();
        })
        .unwrap();
    let tally = Tally::new(2);
    let (p, t) = (pool.clone(), tally.clone());
    let producer = shuttle::thread::spawn(move || {
        submit(&p, &t, 0);
        submit(&p, &t, 1);
    });
    io.fire();
    producer.join().unwrap();
    tally.wait_for(2);
    done.wait();
    drop(handle);
    shutdown(&pool);
    tally.assert_all_once();
}

#[test]
fn shuttle_worker_parked_in_the_io_driver() {
    check_pct("driver_1_worker", 40_000, 4, || worker_parked_in_the_driver(1));
    check_pct("driver_2_workers", 40_000, 4, || worker_parked_in_the_driver(2));
    check_random("driver_2_workers", 20_000, || worker_parked_in_the_driver(2));
}

/// A task waits for I/O that never comes when the pool shuts down: shutdown tells the driver
/// (`Driver::shutdown`, beside the timers' fire in `release_waits`), which wakes its waiters,
/// so the task ends (the closing pool cancels it, or its poll sees the driver closed) and its
/// handle's `join` from outside returns. A driver never told leaves the task suspended and the
/// `join` waiting for ever (VERIFY.md's table: tasks waiting on `pool::net` sockets).
fn shutdown_ends_an_io_wait(workers: usize) {
    let pool = pool(workers, 0, ShuttleSpawner::new());
    let io = Arc::new(ModelIo::default());
    pool.set_driver(Box::new(io.clone())).unwrap();
    let r = Readable(io.clone());
    let handle = pool.spawn_future(r).unwrap();
    shutdown(&pool);
    if let Ok(ready) = handle.join() {
        assert!(!ready, "no event was fired");
    }
}

#[test]
fn shuttle_shutdown_ends_an_io_wait() {
    check_pct("shutdown_ends_an_io_wait_1", 40_000, 4, || shutdown_ends_an_io_wait(1));
    check_pct("shutdown_ends_an_io_wait_2", 20_000, 4, || shutdown_ends_an_io_wait(2));
}
