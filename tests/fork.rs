//! `fork()` with Rust pools (README, "Process and threading rules"): a `ThreadPool` and a
//! `BlockingPool` built with `new` (on `ThreadSpawner`, which links every pool into the fork
//! registry), busy in the parent with tasks queued behind a blocked one, are inherited by a
//! child: there every call that would take work or wait returns `Error::Forked` at once,
//! none of the parent's tasks runs, dropping them returns, and a pool built in the child (and
//! the global pool, reset) works. The parent's pools are unaffected.
//!
//! One test in this file: the child is forked from a process whose only other threads are
//! the pools' (no test harness thread holding a lock the child would need).
#![cfg(all(unix, feature = "std"))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool::{BlockingConfig, BlockingPool, Config, Error, ThreadPool};

/// Tasks of the parent that ran, counted in each process's own copy.
static RAN: AtomicUsize = AtomicUsize::new(0);

/// How long the child may take before its alarm kills it (a hang fails the test).
const CHILD_LIMIT_S: u32 = 20;

/// The child's checks; returns the exit status (0: all passed) and never unwinds.
fn child(pool: &ThreadPool<pool::ThreadSpawner>, blocking: &BlockingPool<pool::ThreadSpawner>) -> i32 {
    let ran_at_fork = RAN.load(Ordering::SeqCst);
    let check = |ok: bool, what: &str| {
        if !ok {
            eprintln!("fork child: {what}");
        }
        ok
    };
    let mut ok = true;
    ok &= check(pool.spawn(|| ()) == Err(Error::Forked), "spawn on an inherited pool");
    ok &= check(pool.spawn_future(async {}).err() == Some(Error::Forked), "spawn_future on an inherited pool");
    ok &= check(pool.install(|_| ()).err() == Some(Error::Forked), "install on an inherited pool");
    ok &= check(pool.wait_idle() == Err(Error::Forked), "wait_idle on an inherited pool");
    ok &= check(pool.shutdown() == Err(Error::Forked), "shutdown of an inherited pool");
    ok &= check(blocking.spawn_blocking(|| ()).err() == Some(Error::Forked), "spawn_blocking on an inherited pool");
    ok &= check(blocking.shutdown() == Err(Error::Forked), "shutdown of an inherited blocking pool");
    ok &= check(Error::Forked.to_string().contains("fork"), "Error::Forked's message");
    // The global pool is reset, not inherited: it works.
    let (tx, rx) = std::sync::mpsc::channel();
    ok &= check(pool::global().spawn(move || tx.send(7).unwrap()).is_ok(), "the global pool refused work");
    ok &= check(rx.recv_timeout(Duration::from_secs(10)) == Ok(7), "the global pool's task did not run");
    // A pool built in the child works.
    let fresh = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    ok &= check(fresh.spawn(move || tx.send(8).unwrap()).is_ok(), "a fresh pool refused work");
    ok &= check(rx.recv_timeout(Duration::from_secs(10)) == Ok(8), "a fresh pool's task did not run");
    ok &= check(fresh.shutdown().is_ok(), "shutdown of a fresh pool");
    // None of the parent's queued tasks ran here.
    std::thread::sleep(Duration::from_millis(50));
    ok &= check(RAN.load(Ordering::SeqCst) == ran_at_fork, "a task of the parent ran in the child");
    i32::from(!ok)
}

/// Sets its flag when dropped.
struct ReleaseOnDrop(Arc<AtomicBool>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn an_inherited_rust_pool_refuses_work_and_its_drop_returns() {
    let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    let blocking = BlockingPool::new(BlockingConfig::default().with_max_threads(1)).unwrap();
    // The parent's pools are busy: one task of each blocks until released, more wait behind.
    let release = Arc::new(AtomicBool::new(false));
    // Declared after the pools, so dropped before them: a failing assertion below releases
    // the blocked tasks before the pools' drop waits for them.
    let _release_on_exit = ReleaseOnDrop(release.clone());
    let started = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let (release, started) = (release.clone(), started.clone());
        pool.spawn(move || {
            started.fetch_add(1, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            RAN.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    let held = {
        let (release, started) = (release.clone(), started.clone());
        blocking
            .spawn_blocking(move || {
                started.fetch_add(1, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                RAN.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
    };
    let queued: Vec<_> = (0..8).map(|_| blocking.spawn_blocking(|| RAN.fetch_add(1, Ordering::SeqCst)).unwrap()).collect();
    for _ in 0..64 {
        pool.spawn(|| {
            RAN.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    let t0 = Instant::now();
    while started.load(Ordering::SeqCst) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the blocking tasks did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    pool::global().spawn(|| ()).unwrap(); // built in the parent: reset in the child

    // SAFETY: the child runs only `child` and then `_exit`s; its alarm bounds it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe; the child never returns into the
        // harness (its threads do not exist here).
        unsafe { libc::alarm(CHILD_LIMIT_S) };
        let status = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let status = child(&pool, &blocking);
            let t = Instant::now();
            drop(pool);
            drop(blocking);
            if t.elapsed() > Duration::from_secs(5) {
                eprintln!("fork child: dropping the inherited pools took {:?}", t.elapsed());
                return 1;
            }
            status
        }))
        .unwrap_or(2);
        // SAFETY: ends the child without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(status) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the child did not exit (signal {}: a hang hit its alarm?)", libc::WTERMSIG(status));
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's checks failed (its stderr says which)");

    // The parent's pools are unaffected: everything runs.
    release.store(true, Ordering::SeqCst);
    held.join().unwrap();
    for h in queued {
        h.join().unwrap();
    }
    pool.shutdown().unwrap();
    blocking.shutdown().unwrap();
    assert_eq!(RAN.load(Ordering::SeqCst), 2 + 64 + 1 + 8);
}
