//! Unit tests of the signal and the counting latch.
extern crate std;

use super::*;
use core::task::Waker;

#[test]
fn signal_without_waiter() {
    let s = Signal::new();
    assert!(!s.is_set());
    // SAFETY: set once.
    unsafe { s.set() };
    assert!(s.is_set());
    // Registering after the set fails: the waiter does not wait.
    let p = NoopParker;
    // SAFETY: we are the only waiter; `p` outlives the signal.
    assert!(!unsafe { s.register(&parker_waker(&p)) });
}

#[test]
fn count_latch_counts() {
    let l = CountLatch::new();
    l.add(3);
    assert_eq!(l.pending(), 3);
    // SAFETY: one done per unit.
    unsafe {
        l.done();
        l.done();
    }
    let signal = l.close().expect("a unit is outstanding: the waiter must wait");
    assert!(!signal.is_set());
    // SAFETY: the last unit.
    unsafe { l.done() };
    assert!(signal.is_set());
    assert!(l.is_released());
}

#[test]
fn count_latch_closes_without_its_signal_when_nothing_is_outstanding() {
    // Every unit done before the wait: the close finishes the latch by itself.
    let l = CountLatch::new();
    l.add(2);
    // SAFETY: one done per unit.
    unsafe {
        l.done();
        l.done();
    }
    assert!(l.only_open());
    assert!(l.close().is_none());
    assert!(l.is_released());
    assert!(!l.signal.is_set(), "nobody waits on it: not set");
    // Nothing added at all: the same.
    let l = CountLatch::new();
    assert!(l.close().is_none());
    assert!(l.is_released());
}

/// A waker that counts its wakes; `Arc::strong_count` counts its clones.
struct CountWakes(core::sync::atomic::AtomicUsize);
impl std::task::Wake for CountWakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }
}
fn counting_waker() -> (std::sync::Arc<CountWakes>, Waker) {
    let count = std::sync::Arc::new(CountWakes(Default::default()));
    (count.clone(), Waker::from(count))
}
fn wakes(c: &CountWakes) -> usize {
    c.0.load(core::sync::atomic::Ordering::Relaxed)
}

#[test]
fn waker_replaced_then_woken_once() {
    let s = Signal::new();
    let (first, w1) = counting_waker();
    let (second, w2) = counting_waker();
    // SAFETY: this thread is the only waiter.
    unsafe {
        assert!(s.register(&w1));
        // The same waker again keeps the slot's clone (no second clone).
        assert!(s.register(&w1));
        assert_eq!(std::sync::Arc::strong_count(&first), 3);
        // A new waker replaces it: the old clone is dropped, not woken.
        assert!(s.register(&w2));
    }
    assert_eq!(std::sync::Arc::strong_count(&first), 2);
    // SAFETY: set once.
    unsafe { s.set() };
    assert!(s.is_set());
    assert_eq!((wakes(&first), wakes(&second)), (0, 1));
    // The setter took the slot's clone and consumed it waking.
    assert_eq!(std::sync::Arc::strong_count(&second), 2);
    // SAFETY: as above.
    assert!(!unsafe { s.register(&w2) }, "set: complete, nothing registered");
    assert_eq!(std::sync::Arc::strong_count(&second), 2);
}

#[test]
fn waker_left_in_an_unset_signal_is_dropped_with_it() {
    let (count, w) = counting_waker();
    let s = Signal::new();
    // SAFETY: the only waiter.
    assert!(unsafe { s.register(&w) });
    assert_eq!(std::sync::Arc::strong_count(&count), 3);
    drop(s);
    assert_eq!(std::sync::Arc::strong_count(&count), 2);
    assert_eq!(wakes(&count), 0);
}

#[test]
fn panicking_wake_still_sets() {
    struct Boom;
    impl std::task::Wake for Boom {
        fn wake(self: std::sync::Arc<Self>) {
            panic!("waker panicked");
        }
    }
    let s = Signal::new();
    // SAFETY: the only waiter.
    assert!(unsafe { s.register(&Waker::from(std::sync::Arc::new(Boom))) });
    // SAFETY: set once.
    let caught = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| unsafe { s.set() }));
    assert!(caught.is_err());
    assert!(s.is_set(), "SET is stored even when the wake panics");
}

#[test]
fn timed_wait_gives_up_and_takes_its_waker_back() {
    let s = Signal::new();
    let p = NoopParker;
    // A clock 5 ns further on at each reading: the deadline passes at the second.
    let now = core::cell::Cell::new(0u64);
    let read = || {
        now.set(now.get() + 5);
        Some(now.get())
    };
    assert!(!s.wait(&p, Some((8, &read))));
    // Withdrawn: the set finds no waiter, and a later wait sees it set at once.
    // SAFETY: set once.
    unsafe { s.set() };
    assert!(s.wait(&p, Some((0, &read))));
    assert!(s.wait(&p, None));
}

struct NoopParker;
impl crate::Parker for NoopParker {
    fn park(&self) {}
    fn park_timeout(&self, _: core::time::Duration) {}
    fn unpark(&self) {}
}

/// A wait with a deadline on a signal nobody sets gives up at its deadline, off the pool (the
/// parked wait) and on a worker (the waiting loop); a set signal is seen by the next wait.
#[cfg(feature = "std")]
#[test]
fn timed_waits_on_and_off_the_pool_give_up_at_their_deadline() {
    use crate::scheduler::job::Until;
    use crate::Spawner;
    use std::sync::Arc;
    const MS: u64 = 1_000_000;

    let pool = Arc::new(crate::ThreadPool::new(crate::Config::default().with_max_threads(1)).unwrap());
    let signal = Arc::new(Signal::new());
    fn until<'a>(pool: &crate::ThreadPool<crate::ThreadSpawner>, signal: &'a Signal) -> (Until<'a>, u64) {
        let deadline = pool.spawner().now_ns().unwrap() + 2 * MS;
        (Until { signal, thief: None, deadline: Some(deadline) }, deadline)
    }
    let (u, deadline) = until(&pool, &signal);
    assert!(!pool.wait_until(u), "off the pool: nobody sets it");
    assert!(pool.spawner().now_ns().unwrap() >= deadline);
    let (p, s) = (pool.clone(), signal.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    pool.spawn(move || {
        let (u, deadline) = until(&p, &s);
        let set = p.wait_until(u);
        let late = p.spawner().now_ns().unwrap() >= deadline;
        drop(p); // before `send`: the last handle must not drop on a worker
        tx.send((set, late)).unwrap();
    })
    .unwrap();
    assert_eq!(rx.recv().unwrap(), (false, true), "on a worker: nobody sets it");
    // SAFETY: set once; both waits withdrew their wakers.
    unsafe { signal.set() };
    assert!(pool.wait_until(until(&pool, &signal).0));
}
