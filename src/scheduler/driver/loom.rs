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
use crate::loom::{model, LoomSpawner};
use crate::{Config, Error, ThreadPool};

/// A driver with no I/O: `park` waits on a condvar for `unpark`'s token; counts `shutdown`.
#[derive(Default)]
struct ModelDriver {
    token: Mutex<bool>,
    cond: Condvar,
    shutdowns: AtomicUsize,
}

impl Driver for ModelDriver {
    fn poll(&self) {}
    fn park(&self, _timeout: Option<Duration>) {
        // No timer in this model, so no timeout to honour: wait for the token.
        let mut token = self.token.lock().unwrap();
        while !*token {
            token = self.cond.wait(token).unwrap();
        }
        *token = false;
    }
    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cond.notify_one();
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
