//! The I/O driver hook (`src/io/`): a driver that blocks on a condvar until unparked or timed
//! out, and counts its calls. Checks that an idle worker blocks in it, that a submit or a
//! notification wakes a worker blocked in it (a lost wake-up would hang: watchdog), that busy
//! workers poll it at tick ends, that timers still fire while a worker waits in it, and that
//! shutdown tells it once.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::{watchdog, watchdog_secs};
use pool::io::Driver;
use pool::{Config, ThreadPool};

#[derive(Default)]
struct CondDriver {
    token: Mutex<bool>,
    cond: Condvar,
    polls: AtomicUsize,
    parks: AtomicUsize,
    timed_parks: AtomicUsize,
    unparks: AtomicUsize,
    shutdowns: AtomicUsize,
}

impl Driver for CondDriver {
    fn poll(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }
    fn park(&self, timeout: Option<Duration>) {
        self.parks.fetch_add(1, Ordering::Relaxed);
        let mut token = self.token.lock().unwrap();
        match timeout {
            Some(t) => {
                self.timed_parks.fetch_add(1, Ordering::Relaxed);
                if !*token {
                    token = self.cond.wait_timeout(token, t).unwrap().0;
                }
            }
            None => {
                while !*token {
                    token = self.cond.wait(token).unwrap();
                }
            }
        }
        *token = false;
    }
    fn unpark(&self) {
        self.unparks.fetch_add(1, Ordering::Relaxed);
        *self.token.lock().unwrap() = true;
        self.cond.notify_one();
    }
    fn shutdown(&self) {
        self.shutdowns.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn idle_worker_blocks_in_the_driver_and_wakes_for_work() {
    watchdog("idle_worker_blocks_in_the_driver_and_wakes_for_work", watchdog_secs(60), |progress| {
        for threads in [1, 2] {
            progress.stage(format!("{threads} threads"));
            let driver = Arc::new(CondDriver::default());
            let pool = ThreadPool::new(Config::default().with_max_threads(threads).with_idle_spins(0)).unwrap();
            pool.set_driver(Box::new(driver.clone())).unwrap();
            assert_eq!(pool.set_driver(Box::new(driver.clone())), Err(pool::Error::AlreadyStarted));
            let (tx, rx) = std::sync::mpsc::channel();
            for round in 0..200 {
                // Let the pool go idle: a worker blocks in the driver (no timeout: no timer).
                if round % 20 == 0 {
                    while driver.parks.load(Ordering::Relaxed) == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                let tx = tx.clone();
                pool.spawn(move || tx.send(round).unwrap()).unwrap();
                assert_eq!(rx.recv().unwrap(), round, "a submit must wake a worker blocked in the driver");
            }
            assert!(driver.unparks.load(Ordering::Relaxed) > 0, "the driver's unpark was used");
            assert_eq!(driver.shutdowns.load(Ordering::Relaxed), 0);
            pool.shutdown().unwrap();
            assert_eq!(driver.shutdowns.load(Ordering::Relaxed), 1, "shutdown tells the driver once");
            drop(pool);
            assert_eq!(driver.shutdowns.load(Ordering::Relaxed), 1, "the drop after a shutdown does not tell it again");
        }
    });
}

#[test]
fn busy_workers_poll_the_driver_at_tick_ends() {
    watchdog("busy_workers_poll_the_driver_at_tick_ends", watchdog_secs(60), |_| {
        let driver = Arc::new(CondDriver::default());
        let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
        pool.set_driver(Box::new(driver.clone())).unwrap();
        let total = pool.block_on(async {
            let handles: Vec<_> = (0..64)
                .map(|_| {
                    pool.spawn_future(async {
                        for _ in 0..200 {
                            pool::runtime::yield_now().await;
                        }
                    })
                    .unwrap()
                })
                .collect();
            for h in handles {
                h.await.unwrap();
            }
            1
        });
        assert_eq!(total, 1);
        assert!(driver.polls.load(Ordering::Relaxed) > 0, "no tick-end poll in 12,800 polls");
    });
}

#[test]
fn timers_fire_while_a_worker_waits_in_the_driver() {
    watchdog("timers_fire_while_a_worker_waits_in_the_driver", watchdog_secs(60), |_| {
        let driver = Arc::new(CondDriver::default());
        let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(1)).unwrap());
        pool.set_driver(Box::new(driver.clone())).unwrap();
        let p = pool.clone();
        let slept = pool
            .spawn_future(async move {
                let start = p.now().unwrap();
                for _ in 0..5 {
                    pool::time::sleep(Duration::from_millis(3)).await;
                }
                p.now().unwrap() - start
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(slept >= Duration::from_millis(15));
        assert!(driver.timed_parks.load(Ordering::Relaxed) > 0, "the worker waited for the deadline in the driver");
    });
}
