//! Loom models of the timing wheel (`wheel.rs`): register vs fire, cancel (a dropped
//! `Sleep`) vs fire, two owners registering while one of them fires, register vs shutdown.
//! The real wheel, lock and entries run under loom; each model checks that a timer's waker is
//! woken at most once (exactly once if it was not cancelled and the wheel fired past its
//! deadline), that the wheel keeps no reference to a cancelled entry (its waker clone is
//! dropped: counted), and that the wheel ends empty.
//!
//! Run: `make test-loom`.

use core::pin::Pin;
use core::ptr::NonNull;

use std::boxed::Box;
use std::sync::Arc as StdArc;
use std::task::{Wake, Waker};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::{Action, Entry, Registered, Timers};
use crate::loom::model;

/// A timer's entry, pinned in a box (as a `Sleep` pins it in its task).
fn entry() -> Pin<Box<Entry>> {
    Box::pin(Entry::new())
}

/// Registers `entry` for `tick` with `waker` (the owner's call: one thread per entry).
fn register(timers: &Timers, entry: &Pin<Box<Entry>>, tick: u64, waker: Waker) -> Registered {
    // SAFETY: the entry is pinned in its box; the models cancel it or see it fired before
    // dropping it.
    unsafe { timers.register(NonNull::from(&**entry), tick, Action::Wake(waker)) }
}

/// Cancels `entry` (the owner's call), as dropping a `Sleep` does.
fn cancel(timers: &Timers, entry: &Pin<Box<Entry>>) {
    // SAFETY: as `register`.
    unsafe { timers.cancel(NonNull::from(&**entry)) }
}

/// Counts wakes.
struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

fn counter() -> (StdArc<Count>, Waker) {
    let c = StdArc::new(Count(AtomicUsize::new(0)));
    let w = Waker::from(c.clone());
    (c, w)
}

/// The owner registers while another thread fires past the deadline: the timer fires exactly
/// once in the end (the owner's register, or a later fire, queues it; a fire after it wakes).
#[test]
fn register_racing_fire() {
    model("register_racing_fire", || {
        let timers = Arc::new(Timers::new());
        let entry = entry();
        let (count, waker) = counter();
        let t = timers.clone();
        let firer = thread::spawn(move || t.fire(5));
        let outcome = register(&timers, &entry, 3, waker);
        firer.join().unwrap();
        if matches!(outcome, Registered::Queued { .. }) {
            timers.fire(5);
        }
        assert!(entry.is_fired());
        let woken = count.0.load(Ordering::Acquire);
        match outcome {
            Registered::Queued { .. } => assert_eq!(woken, 1),
            Registered::Elapsed => assert_eq!(woken, 0, "elapsed at register: the owner completes, no wake"),
            Registered::Closed => unreachable!(),
        }
        assert_eq!(StdArc::strong_count(&count), 1, "the wheel kept a waker");
        assert_eq!(timers.pending(), 0);
    });
}

/// A queued timer is cancelled (its `Sleep` dropped) while another thread fires it: woken at
/// most once, never after the cancel returned, and the entry is free to go either way.
#[test]
fn cancel_racing_fire() {
    model("cancel_racing_fire", || {
        let timers = Arc::new(Timers::new());
        let entry = entry();
        let (count, waker) = counter();
        assert!(matches!(register(&timers, &entry, 3, waker), Registered::Queued { .. }));
        let t = timers.clone();
        let firer = thread::spawn(move || t.fire_if_late(4, 0));
        cancel(&timers, &entry);
        let woken_at_cancel = count.0.load(Ordering::Acquire);
        let fired = entry.is_fired();
        drop(entry); // the memory goes away, as a dropped Sleep's does
        firer.join().unwrap();
        let woken = count.0.load(Ordering::Acquire);
        assert!(woken <= 1);
        if !fired {
            assert_eq!(woken, 0, "woken after its cancel");
            assert_eq!(woken_at_cancel, 0);
        }
        assert_eq!(StdArc::strong_count(&count), 1, "a waker clone leaked");
        assert_eq!(timers.pending(), 0);
    });
}

/// Two owners register, one on another thread, while the main thread fires at an
/// intermediate tick: the due one fires once, the other not before its tick; the wheel ends
/// empty with `next_tick` `NONE`.
#[test]
fn two_registers_and_fire() {
    model("two_registers_and_fire", || {
        let timers = Arc::new(Timers::new());
        let (c1, w1) = counter();
        let (c2, w2) = counter();
        let t1 = timers.clone();
        let a = thread::spawn(move || {
            let e = entry();
            let o = register(&t1, &e, 2, w1);
            (e, o)
        });
        let e2 = entry();
        let o2 = register(&timers, &e2, 70, w2);
        timers.fire(3);
        let (e1, o1) = a.join().unwrap();
        assert!(matches!(o2, Registered::Queued { .. }), "tick 70 is never elapsed at 3");
        assert!(!e2.is_fired(), "fired early");
        timers.fire(69);
        assert!(!e2.is_fired(), "fired early");
        timers.fire(70);
        assert!(e1.is_fired() && e2.is_fired());
        assert_eq!(c1.0.load(Ordering::Acquire), usize::from(matches!(o1, Registered::Queued { .. })));
        assert_eq!(c2.0.load(Ordering::Acquire), 1);
        assert_eq!(timers.pending(), 0);
        assert_eq!(timers.next_tick(), u64::MAX);
    });
}

/// Register racing the wheel's shutdown: either refused (Closed) or fired by the shutdown;
/// nothing stays in the wheel.
#[test]
fn register_racing_shutdown() {
    model("register_racing_shutdown", || {
        let timers = Arc::new(Timers::new());
        let entry = entry();
        let (count, waker) = counter();
        let t = timers.clone();
        let closer = thread::spawn(move || t.shutdown());
        let outcome = register(&timers, &entry, 1 << 40, waker);
        closer.join().unwrap();
        match outcome {
            Registered::Queued { .. } => {
                assert!(entry.is_fired(), "shutdown left a timer in the wheel");
                assert_eq!(count.0.load(Ordering::Acquire), 1);
            }
            Registered::Closed => assert_eq!(count.0.load(Ordering::Acquire), 0),
            Registered::Elapsed => unreachable!(),
        }
        assert_eq!(StdArc::strong_count(&count), 1);
        assert_eq!(timers.pending(), 0);
    });
}
