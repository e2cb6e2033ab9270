//! Loom models of the join deque (`deque.rs`): owner push / take-back at the bottom, thieves
//! steal one at the top, the two SeqCst fences of Chase-Lev. The deque holds 4 jobs under
//! loom. Every model checks exactly-once: each job comes out once (owner or one thief).
//!
//! The join handshake on a real stack job over this deque is `join/loom.rs`.
//!
//! Run: `make test-loom`.

use std::vec::Vec;

use loom::sync::Arc;
use loom::thread;

use super::{JoinDeque, CAPACITY};
use crate::loom::{assert_exactly_once, model, Tasks};

fn steal_one(d: &JoinDeque, tasks: &Tasks) -> Option<usize> {
    d.steal().map(|t| tasks.index_of(t))
}

/// The owner takes back its two jobs newest first (as two nested joins do) while one thief
/// steals: the n >= 2 case (no CAS for the owner) and the last-job case (CAS on `top`).
#[test]
fn join_deque_take_back_vs_steal() {
    model("join_deque_take_back_vs_steal", || {
        let tasks = Arc::new(Tasks::new(2));
        let d = Arc::new(JoinDeque::new());
        let (d2, t2) = (d.clone(), tasks.clone());
        let thief = thread::spawn(move || steal_one(&d2, &t2));
        // SAFETY: this thread owns `d`; the Arc outlives the half.
        let owner = unsafe { d.owner() };
        let mut seen = Vec::new();
        // Each task is pushed once.
        assert!(owner.push(tasks.ptr(0)));
        assert!(owner.push(tasks.ptr(1)));
        for i in [1, 0] {
            if owner.pop_if(tasks.ptr(i)) {
                seen.push(i);
            }
        }
        if let Some(i) = thief.join().unwrap() {
            // A thief takes the oldest.
            assert_eq!(i, 0, "a thief took the newest job while the oldest was there");
            seen.push(i);
        }
        assert_exactly_once(2, &seen);
    });
}

/// One job, two thieves and the owner: exactly one of the three gets it.
#[test]
fn join_deque_last_job_three_way() {
    model("join_deque_last_job_three_way", || {
        let tasks = Arc::new(Tasks::new(1));
        let d = Arc::new(JoinDeque::new());
        // SAFETY: this thread owns `d`; the Arc outlives the half.
        let owner = unsafe { d.owner() };
        // Pushed once.
        assert!(owner.push(tasks.ptr(0)));
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let (d, t) = (d.clone(), tasks.clone());
                thread::spawn(move || steal_one(&d, &t))
            })
            .collect();
        let mut seen = Vec::new();
        if owner.pop_if(tasks.ptr(0)) {
            seen.push(0);
        }
        for t in thieves {
            seen.extend(t.join().unwrap());
        }
        assert_exactly_once(1, &seen);
    });
}

/// The owner fills the deque (4 under loom), is refused a fifth, pops and pushes again so the
/// indices wrap and a slot is rewritten while a thief may still be reading it: the thief's CAS
/// must fail then, never hand out a job twice or a job the owner took back.
#[test]
fn join_deque_full_and_slot_reuse() {
    model("join_deque_full_and_slot_reuse", || {
        let cap = CAPACITY as usize;
        let tasks = Arc::new(Tasks::new(cap + 2));
        let d = Arc::new(JoinDeque::new());
        let (d2, t2) = (d.clone(), tasks.clone());
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                got.extend(steal_one(&d2, &t2));
            }
            got
        });
        // SAFETY: this thread owns `d`; the Arc outlives the half.
        let owner = unsafe { d.owner() };
        let mut seen = Vec::new();
        // Each task pushed once.
        let mut pushed = 0;
        for i in 0..cap {
            if owner.push(tasks.ptr(i)) {
                pushed += 1;
            }
        }
        assert!(pushed >= cap - 2 || pushed == cap);
        // Take back the newest, push two more (wrapping the 4 slots).
        if owner.pop_if(tasks.ptr(cap - 1)) {
            seen.push(cap - 1);
        }
        for i in [cap, cap + 1] {
            if !owner.push(tasks.ptr(i)) {
                seen.push(i); // full: the owner runs it itself
            }
        }
        while let Some(t) = owner.pop() {
            seen.push(tasks.index_of(t));
        }
        seen.extend(thief.join().unwrap());
        assert_exactly_once(cap + 2, &seen);
    });
}
