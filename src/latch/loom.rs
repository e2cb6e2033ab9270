//! Loom models of the crate's completion primitives (`signal.rs`, `count.rs`).
//!
//! `Signal`, the one completion primitive, with its waker slot: the first registration racing
//! `set`, a waker replacement (an async waiter's second poll) racing `set`, a parker's waiter
//! racing `set`, and a timed waiter withdrawing racing `set`. Fork-join halves, latches,
//! async join slots and blocking-pool handles all complete through it. What each of these
//! models checks: the waiter is woken exactly once, or its registration reports the signal
//! complete (being set or set) and then it is never woken; a replaced or withdrawn waker is
//! never woken; no clone of a waker outlives the signal's protocol (counted with `Arc`'s
//! strong count); a lost wake-up shows as a loom deadlock (the waiter parks forever).
//!
//! `CountLatch`, the counting latch that C and Rust callers wait on: two `done`s racing the
//! waiter's close and park; the waiter returns only after both and sees their writes.
//!
//! Run: `make test-loom`.

use std::task::{Wake, Waker};
use std::vec::Vec;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::{CountLatch, Signal};
use crate::loom::{model, LoomParker, LoomSpawner};
use crate::{Config, ThreadPool};

/// A waker that counts its wakes and unparks the loom thread that made it. Its clones are
/// counted by the `std::sync::Arc` it lives in.
struct CountingWaker {
    wakes: AtomicUsize,
    thread: thread::Thread,
}

impl Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::AcqRel);
        self.thread.unpark();
    }
}

fn counting_waker() -> (std::sync::Arc<CountingWaker>, Waker) {
    let count = std::sync::Arc::new(CountingWaker { wakes: AtomicUsize::new(0), thread: thread::current() });
    (count.clone(), Waker::from(count))
}

fn wakes(c: &CountingWaker) -> usize {
    c.wakes.load(Ordering::Acquire)
}

/// Waits as an async waiter that registered: until woken (a lost wake-up parks forever: loom
/// reports the deadlock).
fn park_until_woken(c: &CountingWaker) {
    while wakes(c) == 0 {
        thread::park();
    }
}

fn setter(signal: &Arc<Signal>) -> thread::JoinHandle<()> {
    let s = signal.clone();
    // SAFETY: the only `set` of this signal.
    thread::spawn(move || unsafe { s.set() })
}

#[test]
fn signal_set_vs_first_registration() {
    // Interleaving: the setter swaps in SETTING before, between or after the waiter's write of
    // its waker and its EMPTY -> WAITING publication. Registered: the setter saw WAITING and
    // wakes it exactly once. Not registered: complete, the waker taken back out, never woken.
    model("signal_set_vs_first_registration", || {
        let signal = Arc::new(Signal::new());
        let (count, waker) = counting_waker();
        let t = setter(&signal);
        // SAFETY: this thread is the signal's one waiter.
        let registered = unsafe { signal.register(&waker) };
        if registered {
            park_until_woken(&count);
        } else {
            assert!(signal.is_setting(), "a failed registration means complete");
        }
        t.join().unwrap();
        assert!(signal.is_set());
        assert_eq!(wakes(&count), usize::from(registered), "woken once iff registered");
        // The slot holds no clone: the setter consumed it, or the waiter took it back.
        drop(waker);
        assert_eq!(std::sync::Arc::strong_count(&count), 1, "a waker clone leaked");
    });
}

#[test]
fn signal_set_vs_waker_replacement() {
    // Interleaving: the waiter registered w1 (WAITING) and polls again with w2: it takes the
    // slot back (WAITING -> EMPTY), replaces the waker, publishes WAITING again; the setter's
    // swap lands before, inside or after that. Replaced: w2 is woken once and w1 never (it was
    // dropped). Not replaced: complete; w1 is woken at most once (if the setter displaced the
    // first WAITING) and w2 never.
    model("signal_set_vs_waker_replacement", || {
        let signal = Arc::new(Signal::new());
        let (first, w1) = counting_waker();
        let (second, w2) = counting_waker();
        // SAFETY: this thread is the signal's one waiter (for every registration below).
        assert!(unsafe { signal.register(&w1) });
        let t = setter(&signal);
        // SAFETY: as above.
        let replaced = unsafe { signal.register(&w2) };
        if replaced {
            park_until_woken(&second);
        } else {
            assert!(signal.is_setting());
        }
        t.join().unwrap();
        assert!(signal.is_set());
        if replaced {
            assert_eq!((wakes(&first), wakes(&second)), (0, 1));
        } else {
            assert!(wakes(&first) <= 1 && wakes(&second) == 0);
        }
        drop((w1, w2));
        assert_eq!(std::sync::Arc::strong_count(&first), 1, "a waker clone leaked");
        assert_eq!(std::sync::Arc::strong_count(&second), 1, "a waker clone leaked");
    });
}

#[test]
fn signal_waker_then_parker_vs_set() {
    // Interleaving: an async waiter's waker is in the slot when the same waiter turns into a
    // blocking one (a JoinHandle polled, then `join`ed): it replaces the waker with its
    // parker's and parks until SET, while the setter runs. The parker is woken or never needed;
    // the waiter returns only after SET (the setter's last access); no wake-up is lost.
    model("signal_waker_then_parker_vs_set", || {
        let signal = Arc::new(Signal::new());
        let (count, waker) = counting_waker();
        // SAFETY: this thread is the signal's one waiter.
        assert!(unsafe { signal.register(&waker) });
        let t = setter(&signal);
        let parker = LoomParker::default();
        signal.wait(&parker, None);
        assert!(signal.is_set());
        t.join().unwrap();
        assert!(wakes(&count) <= 1);
        drop(waker);
        assert_eq!(std::sync::Arc::strong_count(&count), 1, "a waker clone leaked");
    });
}

/// A parker that fails the model if it is unparked after its waiter gave up on it.
#[derive(Default)]
struct WatchedParker {
    parker: LoomParker,
    gone: loom::sync::atomic::AtomicBool,
}

impl crate::Parker for WatchedParker {
    fn park(&self) {
        self.parker.park();
    }
    fn park_timeout(&self, timeout: core::time::Duration) {
        self.parker.park_timeout(timeout);
    }
    fn unpark(&self) {
        assert!(!self.gone.load(Ordering::Acquire), "a waiter that gave up was woken");
        self.parker.unpark();
    }
}

#[test]
fn signal_timed_wait_vs_set() {
    // Interleaving: a waiter whose deadline has passed by its first look registers its parker
    // and withdraws it while the setter runs: the setter's swap lands before the registration
    // (complete: true), between the registration and the withdrawal (the withdrawal fails: it
    // waits for SET, true) or after the withdrawal (false; the setter, which displaced EMPTY,
    // never reads the slot). A waiter that returned false is never woken after.
    model("signal_timed_wait_vs_set", || {
        let signal = Arc::new(Signal::new());
        let t = setter(&signal);
        let parker = WatchedParker::default();
        let set = signal.wait(&parker, Some((1, &|| Some(1))));
        if set {
            assert!(signal.is_set());
        } else {
            parker.gone.store(true, Ordering::Release);
        }
        t.join().unwrap();
        assert!(signal.is_set());
    });
}

/// The counting latch: two workers' `done` racing the waiter's close and park (outside any
/// pool, as `pool_latch_wait` from a C host thread). The waiter returns only after both, and
/// sees their writes.
#[test]
fn latch_two_done_vs_wait() {
    model("latch_two_done_vs_wait", || {
        let pool = ThreadPool::with_spawner(Config { max_threads: 1, ..Config::default() }, LoomSpawner::new()).unwrap();
        let latch = Arc::new(CountLatch::new());
        let data = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        latch.add(2);
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let (l, d) = (latch.clone(), data.clone());
                thread::spawn(move || {
                    d[i].store(i + 1, Ordering::Relaxed);
                    // SAFETY: one done per added unit.
                    unsafe { l.done() };
                })
            })
            .collect();
        pool.wait_for_latch(&latch);
        assert_eq!(latch.pending(), 0);
        // Relaxed: the latch orders them before the wait's return.
        assert_eq!(data[0].load(Ordering::Relaxed), 1);
        assert_eq!(data[1].load(Ordering::Relaxed), 2);
        for w in workers {
            w.join().unwrap();
        }
    });
}
