//! The wheel's unit tests (`wheel.rs`): levels and slots, firing order, cancellation, closing.
use super::*;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicUsize as StdCounter;
use std::sync::Mutex;
use std::task::Wake;

#[test]
fn levels_and_slots() {
    assert_eq!(level_for(0, 1), 0);
    assert_eq!(level_for(0, 63), 0);
    assert_eq!(level_for(0, 64), 1);
    assert_eq!(level_for(63, 64), 1);
    assert_eq!(level_for(0, 1 << 30), 5);
    assert_eq!(level_for(0, u64::MAX), 5);
    assert_eq!(slot_for(64 * 3 + 5, 1), 3);
    assert_eq!(tick_for_deadline(1), 1, "rounded up");
    assert_eq!(tick_for_deadline(TICK_NS), 1);
    assert_eq!(tick_of(TICK_NS - 1), 0, "rounded down");
}

/// `fire_if_late` fires only once the deadline is `late` ticks behind, and not while another
/// thread holds the wheel's lock (a worker's tick end leaves the work to that thread).
#[test]
fn fire_if_late_waits_for_its_lateness_and_the_lock() {
    let timers = Timers::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let entry = alloc::boxed::Box::pin(Entry::new());
    let waker = Waker::from(Arc::new(LogHit(log.clone(), 10)));
    // SAFETY: the pinned box outlives the wheel's use (it fires below).
    let r = unsafe { timers.register(NonNull::from(&*entry), 10, Action::Wake(waker)) };
    assert!(matches!(r, Registered::Queued { .. }));
    timers.fire_if_late(9, 0);
    timers.fire_if_late(11, 2);
    assert!(log.lock().unwrap().is_empty() && !entry.is_fired(), "fired before it was late enough");
    {
        let _held = timers.lock();
        timers.fire_if_late(12, 2);
    }
    assert!(!entry.is_fired(), "fired while another thread held the wheel");
    timers.fire_if_late(12, 2);
    assert_eq!(*log.lock().unwrap(), [10]);
    assert!(entry.is_fired());
    assert_eq!((timers.pending(), timers.next_tick()), (0, NONE));
}

/// Fires in deadline order across levels, never before the deadline, each exactly once.
#[test]
fn fires_in_order_never_early() {
    let timers = Timers::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let ticks: Vec<u64> = (0..400u64).map(|i| (i * 7919) % 300_000 + 1).collect();
    let entries: Vec<core::pin::Pin<alloc::boxed::Box<Entry>>> = ticks.iter().map(|_| alloc::boxed::Box::pin(Entry::new())).collect();
    for (&t, e) in ticks.iter().zip(&entries) {
        let waker = Waker::from(Arc::new(LogHit(log.clone(), t)));
        // SAFETY: pinned boxes outlive the wheel's use (all fire or are cancelled below).
        let r = unsafe { timers.register(NonNull::from(&**e), t, Action::Wake(waker)) };
        assert!(matches!(r, Registered::Queued { .. }));
    }
    assert_eq!(timers.pending(), 400);
    let mut now = 0;
    while now < 300_001 {
        now += 997;
        timers.fire(now);
        let fired = log.lock().unwrap().clone();
        assert!(fired.iter().all(|&t| t <= now), "fired early");
    }
    let fired = log.lock().unwrap().clone();
    assert_eq!(fired.len(), 400);
    // In deadline order, even within one advance that passes many deadlines at once.
    let mut last = 0;
    for &t in &fired {
        assert!(t >= last, "out of order: {t} after {last}");
        last = t;
    }
    // One jump over everything: still in order.
    let log2 = Arc::new(Mutex::new(Vec::new()));
    let timers2 = Timers::new();
    for (&t, e) in ticks.iter().zip(&entries) {
        // SAFETY: as above (the entries fired, so the first wheel no longer uses them).
        unsafe { e.rearm() };
        let waker = Waker::from(Arc::new(LogHit(log2.clone(), t)));
        // SAFETY: as above.
        unsafe { timers2.register(NonNull::from(&**e), t, Action::Wake(waker)) };
    }
    timers2.fire(1 << 30);
    let fired2 = log2.lock().unwrap().clone();
    assert_eq!(fired2.len(), 400);
    assert!(fired2.windows(2).all(|w| w[0] <= w[1]), "one big jump fired out of order");
    assert_eq!(timers.pending(), 0);
    assert_eq!(timers.next_tick(), NONE);
    assert!(entries.iter().all(|e| e.is_fired()));
}

struct LogHit(Arc<Mutex<Vec<u64>>>, u64);
impl Wake for LogHit {
    fn wake(self: Arc<Self>) {
        self.0.lock().unwrap().push(self.1);
    }
}

struct Count(Arc<StdCounter>);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn cancel_drops_the_waker_and_never_fires() {
    let timers = Timers::new();
    let hits = Arc::new(StdCounter::new(0));
    let waker_arc = Arc::new(Count(hits.clone()));
    let e = alloc::boxed::Box::pin(Entry::new());
    // SAFETY: `e` outlives its registration (cancelled below).
    unsafe {
        timers.register(NonNull::from(&*e), 5, Action::Wake(Waker::from(waker_arc.clone())));
        assert_eq!(Arc::strong_count(&waker_arc), 2);
        // Re-register later: the same entry moves.
        assert_eq!(timers.register(NonNull::from(&*e), 100_000, Action::Wake(Waker::from(waker_arc.clone()))), Registered::Queued { earliest: false });
        assert_eq!(Arc::strong_count(&waker_arc), 2, "the old waker was dropped");
        timers.cancel(NonNull::from(&*e));
    }
    assert_eq!(Arc::strong_count(&waker_arc), 1, "cancel dropped the waker");
    assert_eq!(timers.pending(), 0);
    timers.fire(1 << 40);
    assert_eq!(hits.load(Ordering::Relaxed), 0);
    assert!(!e.is_fired());
}

#[test]
fn elapsed_and_closed() {
    let timers = Timers::new();
    timers.fire(1000);
    let e = alloc::boxed::Box::pin(Entry::new());
    let hits = Arc::new(StdCounter::new(0));
    // SAFETY: `e` outlives the wheel's use.
    unsafe {
        let w = Waker::from(Arc::new(Count(hits.clone())));
        assert_eq!(timers.register(NonNull::from(&*e), 1000, Action::Wake(w.clone())), Registered::Elapsed);
        assert!(e.is_fired());
        e.rearm();
        assert_eq!(timers.register(NonNull::from(&*e), 1 << 50, Action::Wake(w.clone())), Registered::Queued { earliest: true });
        timers.shutdown();
        assert!(e.is_fired(), "shutdown fires every entry");
        assert_eq!(hits.load(Ordering::Relaxed), 1);
        let e2 = alloc::boxed::Box::pin(Entry::new());
        assert_eq!(timers.register(NonNull::from(&*e2), 5000, Action::Wake(w)), Registered::Closed);
    }
}
