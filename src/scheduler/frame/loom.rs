//! Loom models of the record flag's handshake (`frame.rs`, "The record flag") on the real
//! [`Demand`] word and [`FrameStack`]: an idle worker's request racing the owner filling its
//! latent supply (and clearing the flag), and a second request racing the owner serving the
//! first. Once both are done, a hunger that is up has the flag set: no request for work is
//! lost.
//!
//! Run: `make test-loom`.

use core::ptr::NonNull;

use loom::sync::Arc;
use loom::thread;

use super::{Demand, FrameStack, LATENT_SUPPLY};
use crate::loom::{model, Tasks};

/// The owner's frame stack over `demand` (which outlives it: the caller keeps it alive).
fn frame_stack(demand: &Arc<Demand>) -> FrameStack {
    // SAFETY: the caller keeps `demand` alive as long as the stack.
    unsafe { FrameStack::new(NonNull::from(&**demand)) }
}

/// A join records `task` as its newest latent frame.
fn push(frames: &FrameStack, task: NonNull<crate::task::Task>) {
    frames.push(frames.depth(), task);
}

/// The record flag's handshake (`join::frame`, "The record flag"): an idle worker asks while
/// the owner fills its latent supply (and clears the flag). Once both are done, a hunger that
/// is up has the flag set, so the owner's next join takes the recording path and promotes:
/// no request for work is lost. (Without the two fences, the idle worker's `record = true`
/// can land before the owner's `record = false` while the owner reads a stale `hungry`.)
#[test]
fn record_flag_ask_vs_supply_filling() {
    model("record_flag_ask_vs_supply_filling", || {
        let tasks = Tasks::new(LATENT_SUPPLY);
        let demand = Arc::new(Demand::new());
        demand.lower_hunger();
        let frames = frame_stack(&demand);
        for i in 0..LATENT_SUPPLY - 1 {
            push(&frames, tasks.ptr(i));
        }
        assert!(demand.must_record(), "a short supply records");
        let d2 = demand.clone();
        let idle = thread::spawn(move || d2.ask());
        push(&frames, tasks.ptr(LATENT_SUPPLY - 1));
        let saw_hunger = demand.must_record();
        idle.join().unwrap();
        assert!(demand.is_hungry());
        assert!(demand.must_record(), "the hunger was lost (the owner saw it at once: {saw_hunger})");
    });
}

/// The owner serves one hunger (promotes its oldest frame, lowers the hunger, refills its
/// supply) while a second request comes in: a hunger left up has the flag set, and a flag
/// left clear means no hunger is up.
#[test]
fn record_flag_serve_vs_second_ask() {
    model("record_flag_serve_vs_second_ask", || {
        let tasks = Tasks::new(LATENT_SUPPLY + 1);
        let demand = Arc::new(Demand::new());
        let frames = frame_stack(&demand);
        for i in 0..LATENT_SUPPLY {
            push(&frames, tasks.ptr(i));
        }
        assert!(demand.is_hungry() && demand.must_record(), "a new worker is hungry");
        let d2 = demand.clone();
        let idle = thread::spawn(move || d2.ask());
        // The recording join: promote the oldest, lower the hunger, record its own frame.
        frames.mark_oldest_promoted();
        demand.lower_hunger();
        push(&frames, tasks.ptr(LATENT_SUPPLY));
        assert_eq!(frames.latent(), LATENT_SUPPLY);
        idle.join().unwrap();
        assert!(!demand.is_hungry() || demand.must_record(), "a hunger is up with the flag clear");
    });
}
