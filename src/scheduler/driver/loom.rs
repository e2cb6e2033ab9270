//! Loom model of the I/O driver slot (`driver.rs`, `DriverSlot`; the trait is `crate::io`):
//! installing a driver (`ThreadPool::set_driver`) racing the pool's shutdown, on a whole
//! `ThreadPool` on loom threads ([`LoomSpawner`]). Whichever comes first, the driver is told of the shutdown exactly
//! once (`Driver::shutdown`: a driver never told leaves the tasks waiting on it suspended for
//! ever; told twice, a count of 2), and an install that lost the race reports
//! `Error::Shutdown`. The worker that the install may start blocks in the driver's `park`
//! (a loom condvar), so a shutdown that does not unpark it shows as a loom deadlock.
//!
//! Explored executions at `LOOM_MAX_PREEMPTIONS=2`: 86. Each half of the pair is needed: without
//! the install's own tell the model finds a driver never told (0), without `told` one told twice.
//!
//! Run: `make test-loom`.

use core::time::Duration;

use std::boxed::Box;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};

use crate::io::Driver;
use core::ptr::NonNull;

use crate::loom::{job, model, wait_until_ran, Job, LoomSpawner};
use crate::{Config, Error, ThreadPool};

/// A driver with no I/O: `park` waits on a condvar for `unpark`'s token; counts `shutdown`;
/// and lets a model thread wait until a worker is blocked in it.
#[derive(Default)]
struct ModelDriver {
    state: Mutex<DriverState>,
    cond: Condvar,
    shutdowns: AtomicUsize,
}

#[derive(Default)]
struct DriverState {
    token: bool,
    /// A worker is blocked in `park`.
    blocked: bool,
}

impl ModelDriver {
    /// Blocks until a worker is blocked in `park` (with every other model thread blocked too,
    /// the worker then runs alone up to there: no interleavings to explore on the way).
    fn wait_until_blocked(&self) {
        let mut st = self.state.lock().unwrap();
        while !st.blocked {
            st = self.cond.wait(st).unwrap();
        }
    }
}

impl Driver for ModelDriver {
    fn poll(&self) {}
    fn park(&self, _timeout: Option<Duration>) {
        // No timer in this model, so no timeout to honour: wait for the token.
        let mut st = self.state.lock().unwrap();
        while !st.token {
            st.blocked = true;
            self.cond.notify_all();
            st = self.cond.wait(st).unwrap();
        }
        st.blocked = false;
        st.token = false;
    }
    fn unpark(&self) {
        self.state.lock().unwrap().token = true;
        self.cond.notify_all();
    }
    fn shutdown(&self) {
        self.shutdowns.fetch_add(1, Ordering::Relaxed);
    }
}

/// `set_driver` on one thread, `shutdown` on another: the driver is told once, and the install
/// fails exactly when it came after the shutdown had begun.
#[test]
fn driver_install_racing_shutdown() {
    model("driver_install_racing_shutdown", || {
        let pool = Arc::new(ThreadPool::with_spawner(Config { max_threads: 1, ..Config::default() }, LoomSpawner::new()).unwrap());
        let driver = Arc::new(ModelDriver::default());
        let (p, d) = (pool.clone(), driver.clone());
        let installer = loom::thread::spawn(move || p.set_driver(Box::new(LoomArc(d))));
        pool.shutdown().unwrap();
        let installed = installer.join().unwrap();
        assert!(matches!(installed, Ok(()) | Err(Error::Shutdown)), "{installed:?}");
        assert_eq!(driver.shutdowns.load(Ordering::Relaxed), 1, "the driver must be told of the shutdown exactly once");
    });
}

fn submit(pool: &ThreadPool<LoomSpawner>, job: &Job) {
    // SAFETY: the job outlives the pool's use of it (kept until after shutdown), submitted once.
    unsafe { pool.submit(NonNull::from(&job.task)) }.unwrap();
}

/// A notify's wake decided on one idle spell of the only worker, carried out on its next one,
/// while that worker is on its way to block in the driver (the lost wake-up the shuttle
/// scenario `shuttle_worker_parked_in_the_io_driver` found at PCT depth 4).
///
/// Interleavings: the worker runs `a`, goes idle and blocks in the driver, holding the timer
/// role (the model waits for that alone: no interleavings before it). The main thread's
/// submit of `b` writes `Signaled` and is preempted before it takes the worker's bit from the
/// idle set; meanwhile the driver returns by itself (an I/O event: the second thread's
/// `unpark`), and the worker, back from its park, consumes the notification, runs `b`, goes
/// idle again and sets its bit. The main thread now takes that bit and unparks the worker's
/// parker only (the worker holds no role yet), then waits. The worker claims the role and,
/// with no notification in the word, blocks in the driver. The second thread, woken by `b`'s
/// run, submits `c`: its notify finds one idle worker and no bit to take, and wakes nobody.
/// The worker must read its own bit after its claim and not block when a notifier took it
/// (`Protocol::still_announced`). Once `c` ran, the model waits for the worker to block in
/// the driver again before it shuts down (fewer interleavings to explore there too).
///
/// Explored: see the test's output (`LOOM_MAX_PREEMPTIONS=2`). Without the bit's re-read the
/// model deadlocks (`c` never runs).
#[test]
fn stale_wake_of_a_worker_parking_in_the_driver() {
    model("stale_wake_of_a_worker_parking_in_the_driver", || {
        let config = Config { max_threads: 1, idle_spins: 0, ..Config::default() };
        let pool = Arc::new(ThreadPool::with_spawner(config, LoomSpawner::new()).unwrap());
        let driver = Arc::new(ModelDriver::default());
        pool.set_driver(Box::new(LoomArc(driver.clone()))).unwrap();
        let (a, b, c) = (job(), job(), job());
        submit(&pool, &a);
        driver.wait_until_blocked();
        let (p, d, b2, c2) = (pool.clone(), driver.clone(), b.clone(), c.clone());
        let second = loom::thread::spawn(move || {
            d.unpark();
            wait_until_ran(&b2);
            submit(&p, &c2);
        });
        submit(&pool, &b);
        wait_until_ran(&c);
        second.join().unwrap();
        driver.wait_until_blocked();
        pool.shutdown().unwrap();
        let sp = pool.spawner();
        assert_eq!(sp.spawned(), sp.joined(), "threads started vs joined");
    });
}

/// A loom `Arc` is not a `std::sync::Arc`, for which the crate implements `Driver`.
struct LoomArc(Arc<ModelDriver>);

impl Driver for LoomArc {
    fn poll(&self) {
        self.0.poll();
    }
    fn park(&self, timeout: Option<Duration>) {
        self.0.park(timeout);
    }
    fn unpark(&self) {
        self.0.unpark();
    }
    fn shutdown(&self) {
        self.0.shutdown();
    }
}
