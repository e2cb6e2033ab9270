//! Loom models of the worker ring (`ring.rs`): the owner's push/pop, steal-half, overflow into
//! the injector's batch, several thieves, chained steals. Ring capacity is 4 under loom, so
//! four pushes fill it.
//!
//! Every model counts each task exactly once: popped by the owner, stolen by a thief (the task
//! returned plus what it queued in its own ring), or handed out in an overflow batch.
//!
//! Run: `make test-loom` (`RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release
//! --target-dir target/loom --lib loom`).

use std::vec::Vec;

use loom::sync::Arc;
use loom::thread;

use super::{Local, Ring, CAPACITY};
use crate::loom::{assert_exactly_once, model, Tasks};
use crate::task::Batch;

/// A thief: steals once from `victim` into a fresh ring of its own, then drains that ring.
/// Returns the stolen indices in the order it got them.
fn steal_all(victim: &Ring, tasks: &Tasks) -> Vec<usize> {
    let ring = Ring::new();
    // SAFETY: this thread is the new ring's only owner; the ring outlives the half.
    let mine = unsafe { ring.local() };
    let mut got = Vec::new();
    if let Some(stolen) = victim.steal_into(&mine) {
        let (task, queued) = (stolen.task, stolen.queued);
        assert!(queued < CAPACITY);
        assert_eq!(ring.len(), queued, "the thief's ring holds exactly what it reported queued");
        while let Some(t) = mine.pop() {
            got.push(tasks.index_of(t));
        }
        got.push(tasks.index_of(task));
        assert_eq!(got.len() as u32, queued + 1);
    }
    got
}

/// The stolen run is consecutive in push order (steal-half takes from the head, in order).
fn assert_consecutive(run: &[usize]) {
    for w in run.windows(2) {
        assert_eq!(w[1], w[0] + 1, "a steal took a non-contiguous run: {run:?}");
    }
}

fn drain_batch(mut batch: Batch, tasks: &Tasks, out: &mut Vec<usize>) {
    while let Some(t) = batch.pop() {
        out.push(tasks.index_of(t));
    }
}

/// The owner pushes task `i`; an overflow batch (ring full) goes to `overflow`.
fn push(ring: &Local, tasks: &Tasks, i: usize, overflow: &mut Vec<usize>) {
    if let Err(batch) = ring.push(tasks.ptr(i)) {
        drain_batch(batch, tasks, overflow);
    }
}

fn pop(ring: &Local, tasks: &Tasks) -> Option<usize> {
    ring.pop().map(|t| tasks.index_of(t))
}

#[test]
fn ring_push_pop_vs_one_thief() {
    // Interleaving: the owner's pop CAS on `head` racing a thief's steal-half CAS on the same
    // `head`, and the owner reusing slots (push after pop, wrapping the 4-slot buffer) that a
    // stale thief may still be reading: the thief must lose its CAS then, never hand out a
    // task twice. Also checks the owner's order stays FIFO.
    model("ring_push_pop_vs_one_thief", || {
        let tasks = Arc::new(Tasks::new(5));
        let victim = Arc::new(Ring::new());
        let thief = {
            let (victim, tasks) = (victim.clone(), tasks.clone());
            thread::spawn(move || steal_all(&victim, &tasks))
        };
        // SAFETY: the main thread owns `victim`; the Arc outlives the half.
        let owner = unsafe { victim.local() };
        let mut popped = Vec::new();
        let mut overflow = Vec::new();
        for i in 0..3 {
            push(&owner, &tasks, i, &mut overflow);
        }
        popped.extend(pop(&owner, &tasks));
        for i in 3..5 {
            push(&owner, &tasks, i, &mut overflow);
        }
        while let Some(i) = pop(&owner, &tasks) {
            popped.push(i);
        }
        let stolen = thief.join().unwrap();
        assert!(overflow.is_empty(), "at most 4 queued at once: no overflow");
        assert!(popped.windows(2).all(|w| w[0] < w[1]), "owner pops out of order: {popped:?}");
        assert_consecutive(&stolen);
        let all: Vec<usize> = popped.iter().chain(&stolen).copied().collect();
        assert_exactly_once(5, &all);
    });
}

#[test]
fn ring_overflow_while_stealing() {
    // Interleaving: the owner fills the ring and, on the next push, claims half of it for the
    // injector with the same CAS on `head` a thief is using to steal half. Exactly one of
    // them wins each task: if the thief moved `head` first, the owner's claim fails and it
    // finds room instead; if the owner's claim wins, the thief's CAS fails and it retries on
    // what is left. Every task ends up popped, stolen, or in an overflow batch, once.
    model("ring_overflow_while_stealing", || {
        const N: usize = 6;
        let tasks = Arc::new(Tasks::new(N));
        let victim = Arc::new(Ring::new());
        let thief = {
            let (victim, tasks) = (victim.clone(), tasks.clone());
            thread::spawn(move || steal_all(&victim, &tasks))
        };
        // SAFETY: the main thread owns `victim`; the Arc outlives the half.
        let owner = unsafe { victim.local() };
        let mut overflow = Vec::new();
        for i in 0..N {
            push(&owner, &tasks, i, &mut overflow);
        }
        let mut popped = Vec::new();
        while let Some(i) = pop(&owner, &tasks) {
            popped.push(i);
        }
        let stolen = thief.join().unwrap();
        // An overflow batch is the oldest half of the ring, in order, then the new task.
        assert!(overflow.is_empty() || overflow.len() == CAPACITY as usize / 2 + 1, "{overflow:?}");
        assert_consecutive(&stolen);
        let all: Vec<usize> = popped.iter().chain(&stolen).chain(&overflow).copied().collect();
        assert_exactly_once(N, &all);
    });
}

#[test]
fn ring_two_thieves() {
    // Interleaving: two thieves read the same `head`/`tail` and copy the same run into their
    // own rings; only one CAS on the victim's `head` succeeds, the other retries on the
    // remainder (or finds it empty), while the owner pushes one more and pops.
    model("ring_two_thieves", || {
        const N: usize = 4;
        let tasks = Arc::new(Tasks::new(N));
        let victim = Arc::new(Ring::new());
        // SAFETY: the main thread owns `victim`; the Arc outlives the half.
        let owner = unsafe { victim.local() };
        let mut overflow = Vec::new();
        for i in 0..3 {
            push(&owner, &tasks, i, &mut overflow);
        }
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let (victim, tasks) = (victim.clone(), tasks.clone());
                thread::spawn(move || steal_all(&victim, &tasks))
            })
            .collect();
        push(&owner, &tasks, 3, &mut overflow);
        let mut popped = Vec::new();
        while let Some(i) = pop(&owner, &tasks) {
            popped.push(i);
        }
        let mut all = popped.clone();
        for t in thieves {
            let stolen = t.join().unwrap();
            assert_consecutive(&stolen);
            all.extend(stolen);
        }
        assert!(overflow.is_empty());
        assert_exactly_once(N, &all);
    });
}

#[test]
fn ring_chained_steal() {
    // Interleaving: A's owner steals from B into A's ring (writing A's slots beyond A's
    // published tail, then publishing them with one Release store of A's tail) while C steals
    // from A, twice. C must never take A's unpublished copies, nor a task that A's owner also
    // pops. (tokio's `chained_steal`, with A not drained first so the steals overlap.) The main
    // thread owns A and B.
    model("ring_chained_steal", || {
        const N: usize = 6;
        let tasks = Arc::new(Tasks::new(N));
        let a = Arc::new(Ring::new());
        let b = Ring::new();
        // SAFETY: the main thread owns `a` and `b`; both outlive their halves.
        let (a_owner, b_owner) = unsafe { (a.local(), b.local()) };
        let mut overflow = Vec::new();
        for i in 0..2 {
            push(&a_owner, &tasks, i, &mut overflow);
        }
        for i in 2..N {
            push(&b_owner, &tasks, i, &mut overflow);
        }
        assert!(overflow.is_empty());
        // C steals from A, twice (the second may see what A took from B).
        let c = {
            let (a, tasks) = (a.clone(), tasks.clone());
            thread::spawn(move || {
                let first = steal_all(&a, &tasks);
                let second = steal_all(&a, &tasks);
                (first, second)
            })
        };
        // A's owner pops one, then steals from B into A, then drains A.
        let mut from_a = Vec::new();
        from_a.extend(pop(&a_owner, &tasks));
        if let Some(stolen) = b.steal_into(&a_owner) {
            from_a.push(tasks.index_of(stolen.task));
        }
        while let Some(i) = pop(&a_owner, &tasks) {
            from_a.push(i);
        }
        let (c1, c2) = c.join().unwrap();
        while let Some(i) = pop(&b_owner, &tasks) {
            from_a.push(i);
        }
        assert_consecutive(&c1);
        assert_consecutive(&c2);
        let all: Vec<usize> = from_a.iter().chain(&c1).chain(&c2).copied().collect();
        assert_exactly_once(N, &all);
    });
}
