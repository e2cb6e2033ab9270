//! Loom models of the injector (`injector.rs`): Vyukov's intrusive MPSC queue with a
//! try-locked consumer end and a CLOSED bit in `tail`.
//!
//! Each model counts every task exactly once (what consumers popped while racing, plus what a
//! final drain finds after every thread joined) and checks FIFO order where it is defined.
//!
//! Run: `make test-loom`.

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::vec::Vec;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use super::Injector;
use crate::loom::{assert_exactly_once, model, Tasks};

/// Pops up to `max` tasks under one try-lock; stops at the first `None`.
fn pop_some(q: &Injector, tasks: &Tasks, max: usize) -> Vec<usize> {
    let mut got = Vec::new();
    if let Some(mut c) = q.try_lock() {
        while got.len() < max {
            match c.pop() {
                Some(t) => got.push(tasks.index_of(t)),
                None => break,
            }
        }
    }
    got
}

/// After every thread joined: everything left, in order. Nothing is in flight any more, so a
/// `None` now means truly empty.
fn drain(q: &Injector, tasks: &Tasks) -> Vec<usize> {
    let mut got = Vec::new();
    let Some(mut c) = q.try_lock() else {
        // Refused: must be because the queue is empty (is_empty is false while locked).
        assert!(q.is_empty(), "try_lock refused a non-empty queue with no other consumer");
        return got;
    };
    while let Some(t) = c.pop() {
        got.push(tasks.index_of(t));
    }
    drop(c);
    assert!(q.is_empty(), "drained but not empty");
    assert!(q.try_lock().is_none(), "try_lock on an empty queue must refuse");
    got
}

#[test]
fn injector_two_producers_one_consumer() {
    // Interleaving: two producers' CASes on `tail` (one pushes a batch of two) and their link
    // stores, racing a consumer that pops (and, at the last node, re-pushes the stub as a
    // third producer). Checks exactly-once, that a batch stays contiguous and in order, and
    // that each producer's tasks come out in push order.
    model("injector_two_producers_one_consumer", || {
        let tasks = Arc::new(Tasks::new(3));
        let q = Arc::new(Injector::new());
        let producers: Vec<_> = [0..1, 1..3]
            .into_iter()
            .map(|range| {
                let (q, tasks) = (q.clone(), tasks.clone());
                thread::spawn(move || q.push(tasks.batch(range), true).unwrap())
            })
            .collect();
        let mut got = pop_some(&q, &tasks, 3);
        for p in producers {
            p.join().unwrap();
        }
        got.extend(drain(&q, &tasks));
        assert_exactly_once(3, &got);
        let at = |i| got.iter().position(|&x| x == i).unwrap();
        assert_eq!(at(2), at(1) + 1, "a batch must come out contiguous and in order: {got:?}");
    });
}

/// Executions in which the consumer reported `None` although task 0 was fully queued: the
/// push of task 1 had swung `tail` but not linked yet.
static HALF_LINKED_SEEN: StdAtomicUsize = StdAtomicUsize::new(0);

#[test]
fn injector_consumer_vs_half_linked_push() {
    // Interleaving: a producer preempted between its CAS on `tail` and its store of
    // `prev.next`. The consumer then finds task 0 with no `next` while `tail` points past it:
    // it must report None (not return task 0 and lose the link, not return garbage), leave
    // task 0 in place, and get both tasks, in order, once the link is stored. The test also
    // asserts that loom did explore that interleaving.
    HALF_LINKED_SEEN.store(0, StdOrdering::Relaxed);
    model("injector_consumer_vs_half_linked_push", || {
        let tasks = Arc::new(Tasks::new(2));
        let q = Arc::new(Injector::new());
        q.push(tasks.batch(0..1), true).unwrap();
        let producer = {
            let (q, tasks) = (q.clone(), tasks.clone());
            thread::spawn(move || q.push(tasks.batch(1..2), true).unwrap())
        };
        let mut got = Vec::new();
        {
            let mut c = q.try_lock().expect("task 0 is linked: the queue is not empty");
            for _ in 0..2 {
                match c.pop() {
                    Some(t) => got.push(tasks.index_of(t)),
                    None => {
                        if got.is_empty() {
                            HALF_LINKED_SEEN.fetch_add(1, StdOrdering::Relaxed);
                        }
                        break;
                    }
                }
            }
        }
        producer.join().unwrap();
        got.extend(drain(&q, &tasks));
        assert_eq!(got, [0, 1], "FIFO, each once");
    });
    assert!(
        HALF_LINKED_SEEN.load(StdOrdering::Relaxed) > 0,
        "loom never preempted the push between its CAS and its link"
    );
}

/// The queue plus a log that only the consumer-lock holder may touch. Loom checks every
/// `with_mut` on the log: two lock holders at once, or a hand-over without a happens-before
/// edge (Release unlock -> Acquire try_lock), is reported as a data race.
struct Guarded {
    q: Injector,
    log: UnsafeCell<Vec<usize>>,
}

// SAFETY: `log` is accessed only while holding the injector's consumer lock (what the model
// checks).
unsafe impl Sync for Guarded {}

#[test]
fn injector_two_consumers_contend_for_try_lock() {
    // Interleaving: two consumers race for the try-lock (CAS of `head` to LOCKED) while a
    // producer pushes. At most one holds the consumer end at a time (loom would report the
    // log's concurrent access otherwise), the loser returns None at once without blocking,
    // and no task is popped twice; the lock holders' pops, in lock order, are FIFO.
    model("injector_two_consumers_contend_for_try_lock", || {
        let tasks = Arc::new(Tasks::new(3));
        let g = Arc::new(Guarded { q: Injector::new(), log: UnsafeCell::new(Vec::new()) });
        g.q.push(tasks.batch(0..2), true).unwrap();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (g, tasks) = (g.clone(), tasks.clone());
                thread::spawn(move || {
                    if let Some(mut c) = g.q.try_lock() {
                        // SAFETY: we hold the consumer lock (checked by loom).
                        g.log.with_mut(|log| unsafe { (*log).push(usize::MAX) });
                        if let Some(t) = c.pop() {
                            // SAFETY: as above.
                            g.log.with_mut(|log| unsafe { (*log).push(tasks.index_of(t)) });
                        }
                    }
                })
            })
            .collect();
        g.q.push(tasks.batch(2..3), true).unwrap();
        for c in consumers {
            c.join().unwrap();
        }
        // SAFETY: every other thread joined.
        let log: Vec<usize> = g.log.with(|log| unsafe { (*log).clone() });
        let mut got: Vec<usize> = log.into_iter().filter(|&i| i != usize::MAX).collect();
        got.extend(drain(&g.q, &tasks));
        assert_eq!(got, [0, 1, 2], "FIFO, each once");
    });
}

#[test]
fn injector_close_vs_external_push_vs_stub_repush() {
    // Interleaving: `close` (CAS setting CLOSED in `tail`) racing an external push (refused iff
    // its CAS read CLOSED) and a consumer that takes the last node and re-pushes the stub with
    // an internal push. An accepted push is popped later; a refused one is not in the queue;
    // neither is lost or doubled; and the stub re-push never drops the CLOSED bit (a `swap`
    // there would).
    model("injector_close_vs_external_push_vs_stub_repush", || {
        let tasks = Arc::new(Tasks::new(3));
        let q = Arc::new(Injector::new());
        q.push(tasks.batch(0..1), true).unwrap();
        let producer = {
            let (q, tasks) = (q.clone(), tasks.clone());
            thread::spawn(move || q.push(tasks.batch(1..2), true).is_ok())
        };
        let consumer = {
            let (q, tasks) = (q.clone(), tasks.clone());
            thread::spawn(move || pop_some(&q, &tasks, 2))
        };
        assert!(q.close(), "first close");
        assert!(q.push(tasks.batch(2..3), true).is_err(), "an external push after close is refused");
        let accepted = producer.join().unwrap();
        let mut got = consumer.join().unwrap();
        assert!(q.is_closed(), "the CLOSED bit was lost");
        assert!(!q.close(), "second close");
        got.extend(drain(&q, &tasks));
        let want: &[usize] = if accepted { &[0, 1] } else { &[0] };
        assert_eq!(got, want, "accepted tasks come out once, in order; refused ones never");
    });
}

/// A log entry of `injector_prepend_vs_push_vs_contending_consumer`: the prepend happened.
const PREPENDED: usize = usize::MAX - 1;

#[test]
fn injector_prepend_vs_push_vs_contending_consumer() {
    // Interleaving: a worker spilling its ring (`Inner::spill`) takes the consumer end with
    // `try_lock_even_empty`, pops one task (so the cursor is a task, not the stub) and prepends
    // a batch, while a producer pushes at the tail and a second consumer contends for the
    // try-lock and pops. When the lock is taken, the spill pushes its batch at the tail
    // instead. Every task comes out exactly once; a prepended batch is the next thing popped
    // after the prepend, in order; the queued tasks keep their FIFO order. (Linking the batch
    // to the stub instead of the cursor's node pops task 2 twice here.)
    model("injector_prepend_vs_push_vs_contending_consumer", || {
        let tasks = Arc::new(Tasks::new(5));
        let g = Arc::new(Guarded { q: Injector::new(), log: UnsafeCell::new(Vec::new()) });
        g.q.push(tasks.batch(2..4), true).unwrap();
        let producer = {
            let (g, tasks) = (g.clone(), tasks.clone());
            thread::spawn(move || g.q.push(tasks.batch(4..5), true).unwrap())
        };
        let consumer = {
            let (g, tasks) = (g.clone(), tasks.clone());
            thread::spawn(move || {
                if let Some(mut c) = g.q.try_lock() {
                    if let Some(t) = c.pop() {
                        // SAFETY: we hold the consumer lock (checked by loom).
                        g.log.with_mut(|log| unsafe { (*log).push(tasks.index_of(t)) });
                    }
                }
            })
        };
        if let Some(mut c) = g.q.try_lock_even_empty() {
            if let Some(t) = c.pop() {
                // SAFETY: we hold the consumer lock (checked by loom).
                g.log.with_mut(|log| unsafe { (*log).push(tasks.index_of(t)) });
            }
            c.push_front(tasks.batch(0..2));
            // SAFETY: as above.
            g.log.with_mut(|log| unsafe { (*log).push(PREPENDED) });
        } else {
            g.q.push(tasks.batch(0..2), false).unwrap();
        }
        producer.join().unwrap();
        consumer.join().unwrap();
        // SAFETY: every other thread joined.
        let mut log: Vec<usize> = g.log.with(|log| unsafe { (*log).clone() });
        log.extend(drain(&g.q, &tasks));
        let got: Vec<usize> = log.iter().copied().filter(|&i| i != PREPENDED).collect();
        assert_exactly_once(5, &got);
        if let Some(at) = log.iter().position(|&i| i == PREPENDED) {
            assert_eq!(log[at + 1..at + 3], [0, 1], "the prepended batch comes out first, in order: {log:?}");
        }
        let queued: Vec<usize> = got.iter().copied().filter(|&i| i >= 2).collect();
        assert_eq!(queued, [2, 3, 4], "the queued tasks stay FIFO: {log:?}");
    });
}

#[test]
fn injector_prepend_onto_empty_vs_half_linked_push() {
    // Interleaving: the consumer prepends onto an empty queue (cursor null: the batch links to
    // the stub) while a producer's push, maybe preempted between its CAS on `tail` and its link
    // of the stub's `next`, adds a task. The consumer pops until `None`: the batch first, then
    // the pushed task if linked, else a spurious empty; after the join, the drain finds the
    // rest. Order 0, 1, 2, each once, and the queue settles empty.
    model("injector_prepend_onto_empty_vs_half_linked_push", || {
        let tasks = Arc::new(Tasks::new(3));
        let q = Arc::new(Injector::new());
        let producer = {
            let (q, tasks) = (q.clone(), tasks.clone());
            thread::spawn(move || q.push(tasks.batch(2..3), true).unwrap())
        };
        let mut got = Vec::new();
        {
            let mut c = q.try_lock_even_empty().expect("no other consumer");
            c.push_front(tasks.batch(0..2));
            while let Some(t) = c.pop() {
                got.push(tasks.index_of(t));
            }
        }
        producer.join().unwrap();
        got.extend(drain(&q, &tasks));
        assert_eq!(got, [0, 1, 2], "the prepended batch first, then the push, each once");
    });
}
