//! A thread outside the pool that waits (`wait_for`, `wait_for_latch`, `pool_latch_wait` from
//! C) parks on a parker of its own, made for that wait. The setter may still be inside that
//! parker's `unpark` when the waiter sees the signal SETTING, so the parker must live until the
//! setter's last access (SET), not only until the waiter stops parking.
//!
//! Found by the `capi_ops` fuzz target under ASan (stack-use-after-scope in `pool_latch_done` →
//! `FutexParker::unpark`, on the parker of a thread in `pool_latch_wait_global`): the parker was
//! dropped at the end of the `match` arm, before `spin_until_set`. With a C host platform the
//! drop calls the host's `parker_free`, so the setter's `unpark` then ran on a freed parker.
//!
//! Here the waiter's parker records its drop, parks for at most 1 ms at a time (a spurious
//! return, which the Parker contract allows, so the waiter sees SETTING without a wake-up), and
//! its `unpark` sleeps before it touches anything: with the bug the waiter dropped the parker
//! during that sleep, and `unpark` saw it.

mod common;

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{watchdog, watchdog_secs};
use pool::{container_of, Config, CountLatch, DefaultParker, Parker, SpawnError, Spawner, Task, ThreadPool, ThreadSpawner, ThreadStart};

#[derive(Default)]
struct Life {
    dropped: AtomicBool,
    /// `unpark` calls that found the parker already dropped.
    late_unparks: AtomicUsize,
}

struct Tracked {
    inner: DefaultParker,
    life: Arc<Life>,
    /// The waiter's parker (made on the test thread while it waits): short parks, slow unpark.
    waiter: bool,
}

impl Parker for Tracked {
    fn park(&self) {
        if self.waiter {
            self.inner.park_timeout(Duration::from_millis(1));
        } else {
            self.inner.park();
        }
    }
    fn park_timeout(&self, timeout: Duration) {
        self.inner.park_timeout(timeout)
    }
    fn unpark(&self) {
        if self.waiter {
            std::thread::sleep(Duration::from_millis(20));
            if self.life.dropped.load(Ordering::SeqCst) {
                self.life.late_unparks.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.inner.unpark()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.life.dropped.store(true, Ordering::SeqCst);
    }
}

thread_local! {
    /// Set on the test thread around its wait: the parker it makes then is the waiter's.
    static WAITING: Cell<bool> = const { Cell::new(false) };
}

/// ThreadSpawner's threads and current-worker slot, with `Tracked` parkers whose `Life` is kept
/// here (so a late `unpark` reads live memory and can report instead of crashing).
struct TrackingSpawner {
    inner: ThreadSpawner,
    lives: Mutex<Vec<Arc<Life>>>,
}

// SAFETY: threads, joining and the current-worker slot are ThreadSpawner's; only the parkers
// differ, and they keep the Parker contract (a spurious return from `park` is allowed).
unsafe impl Spawner for TrackingSpawner {
    type Parker = Tracked;
    fn new_parker(&self) -> Tracked {
        let life = Arc::new(Life::default());
        self.lives.lock().unwrap().push(Arc::clone(&life));
        Tracked { inner: DefaultParker::default(), life, waiter: WAITING.with(Cell::get) }
    }
    fn spawn(&self, start: ThreadStart, stack_size: usize) -> Result<(), SpawnError> {
        self.inner.spawn(start, stack_size)
    }
    fn join_all(&self) {
        self.inner.join_all()
    }
    fn available_parallelism(&self) -> usize {
        self.inner.available_parallelism()
    }
    fn current_worker(&self) -> *const () {
        self.inner.current_worker()
    }
    fn set_current_worker(&self, worker: *const ()) {
        self.inner.set_current_worker(worker)
    }
}

#[repr(C)]
struct Done {
    task: Task,
    latch: *const CountLatch,
}

unsafe extern "C" fn done_later(task: *mut Task) {
    // SAFETY: the only task with this callback is the `task` field of the test's `Done`.
    let latch = unsafe { (*container_of!(task, Done, task)).latch };
    // Let the test thread register and park first.
    std::thread::sleep(Duration::from_millis(10));
    // SAFETY: one `done` for the one unit added; the latch lives until the wait returned.
    unsafe { (*latch).done() };
}

#[test]
fn external_waiter_keeps_its_parker_until_the_setter_is_done() {
    let _g = common::shared();
    watchdog("external_waiter_keeps_its_parker", watchdog_secs(30), |_| {
        for round in 0..5 {
            let spawner = TrackingSpawner { inner: ThreadSpawner::new(), lives: Mutex::new(Vec::new()) };
            let pool = ThreadPool::with_spawner(Config::default().with_max_threads(1), spawner).unwrap();
            let latch = CountLatch::new();
            latch.add(1);
            let mut job = Done { task: Task::new(done_later), latch: &latch };
            // SAFETY: `job` outlives its run (the wait below returns after its `done`, and the
            // callback touches nothing after `done`); submitted once.
            unsafe { pool.submit(NonNull::from(&mut job.task)) }.unwrap();
            WAITING.with(|w| w.set(true));
            pool.wait_for_latch(&latch);
            WAITING.with(|w| w.set(false));
            pool.shutdown().unwrap();
            let lives = pool.spawner().lives.lock().unwrap();
            let waiters = lives.len();
            let late: usize = lives.iter().map(|l| l.late_unparks.load(Ordering::SeqCst)).sum();
            assert_eq!(
                late, 0,
                "round {round}: the setter unparked the waiter's parker after the waiter had dropped it ({waiters} parkers)"
            );
        }
    });
}
