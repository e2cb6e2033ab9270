//! Unit tests of the injector (`injector.rs`).

use super::*;
use std::vec::Vec;

unsafe extern "C" fn noop(_: *mut Task) {}

/// `n` no-op tasks in one allocation, every pointer derived once from its raw pointer, so
/// Miri's aliasing model sees no later `&mut` of the tasks invalidating earlier pointers.
struct TestTasks {
    raw: *mut [Task],
    ptrs: Vec<NonNull<Task>>,
}

impl TestTasks {
    fn new(n: usize) -> Self {
        let raw = alloc::boxed::Box::into_raw((0..n).map(|_| Task::new(noop)).collect::<alloc::boxed::Box<[Task]>>());
        let base = raw.cast::<Task>();
        // SAFETY: `i < n`, inside the allocation; `base` is non-null (from a Box).
        let ptrs = (0..n).map(|i| unsafe { NonNull::new_unchecked(base.add(i)) }).collect();
        Self { raw, ptrs }
    }
}

impl core::ops::Deref for TestTasks {
    type Target = [NonNull<Task>];
    fn deref(&self) -> &[NonNull<Task>] {
        &self.ptrs
    }
}

impl Drop for TestTasks {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` in `new`; the queues are done with the tasks.
        drop(unsafe { alloc::boxed::Box::from_raw(self.raw) });
    }
}

fn batch_of(ts: &[NonNull<Task>]) -> Batch {
    let mut b = Batch::new();
    for &t in ts {
        // SAFETY: the tasks outlive the test's queue use and are in no other list.
        unsafe { b.push(t) };
    }
    b
}

#[test]
fn fifo_across_batches_and_stub_reuse() {
    let q = Injector::new();
    let ptrs = TestTasks::new(10);
    assert!(q.is_empty());
    assert!(q.try_lock().is_none());
    q.push(batch_of(&ptrs[0..1]), true).unwrap();
    q.push(batch_of(&ptrs[1..4]), true).unwrap();
    assert!(!q.is_empty());
    {
        let mut c = q.try_lock().unwrap();
        assert!(q.try_lock().is_none(), "second consumer must be refused");
        for p in &ptrs[0..4] {
            assert_eq!(c.pop(), Some(*p));
        }
        assert_eq!(c.pop(), None);
    }
    assert!(q.is_empty());
    // After the stub was re-pushed, the queue keeps working.
    q.push(batch_of(&ptrs[4..10]), true).unwrap();
    let mut c = q.try_lock().unwrap();
    for p in &ptrs[4..8] {
        assert_eq!(c.pop(), Some(*p));
    }
    drop(c);
    let mut c = q.try_lock().unwrap();
    assert_eq!(c.pop(), Some(ptrs[8]));
    assert_eq!(c.pop(), Some(ptrs[9]));
    assert_eq!(c.pop(), None);
}

/// The approximate length is exact when nothing is in flight, stub re-pushes included, and
/// a holder's own pops count before it unlocks.
#[test]
fn len_counts_pushes_minus_pops() {
    let q = Injector::new();
    let ptrs = TestTasks::new(10);
    assert_eq!(q.len(), 0);
    q.push(batch_of(&ptrs[0..3]), true).unwrap();
    q.push(batch_of(&ptrs[3..4]), false).unwrap();
    assert_eq!(q.len(), 4);
    {
        let mut c = q.try_lock().unwrap();
        assert_eq!(c.len(), 4);
        assert_eq!(c.pop(), Some(ptrs[0]));
        assert_eq!(c.len(), 3);
        assert_eq!(q.len(), 4, "others see the pops at unlock");
    }
    assert_eq!(q.len(), 3);
    // Draining pops the last node through the stub re-push, which is no task.
    {
        let mut c = q.try_lock().unwrap();
        for p in &ptrs[1..4] {
            assert_eq!(c.pop(), Some(*p));
        }
        assert_eq!(c.pop(), None);
        assert_eq!(c.len(), 0);
    }
    assert_eq!(q.len(), 0);
    q.push(batch_of(&ptrs[4..10]), true).unwrap();
    assert_eq!(q.len(), 6);
    let mut c = q.try_lock().unwrap();
    for p in &ptrs[4..10] {
        assert_eq!(c.pop(), Some(*p));
    }
    drop(c);
    assert_eq!(q.len(), 0);
}

/// Additions lost between concurrent producers make the estimate low, never negative, and
/// a consumer that empties the queue makes it exact again.
#[test]
fn len_recovers_from_lost_additions() {
    let q = Injector::new();
    let ptrs = TestTasks::new(5);
    q.push(batch_of(&ptrs[0..3]), true).unwrap();
    q.producer.pushed.set(1); // two additions lost
    assert_eq!(q.len(), 1);
    {
        let mut c = q.try_lock().unwrap();
        for p in &ptrs[0..3] {
            assert_eq!(c.pop(), Some(*p));
            assert_eq!(c.len(), 0);
        }
        assert_eq!(c.pop(), None);
    }
    assert_eq!(q.len(), 0, "popped 3 of 1: zero, not a wrapped huge count");
    q.push(batch_of(&ptrs[3..5]), true).unwrap();
    assert_eq!(q.len(), 2, "exact again after the empty queue's resynchronisation");
}

/// A prepended batch comes out first and in order, whatever the front node is: the stub
/// of an empty or a non-empty queue, a task, the last task; the queue keeps working after.
#[test]
fn push_front_comes_out_first() {
    let q = Injector::new();
    let ts = TestTasks::new(12);
    // Onto a never-used queue (the cursor null, the stub alone): `try_lock` refuses it.
    assert!(q.try_lock().is_none());
    q.try_lock_even_empty().unwrap().push_front(batch_of(&ts[0..2]));
    assert!(!q.is_empty());
    assert!(!q.is_settled_empty());
    assert!(q.has_ready());
    assert_eq!(q.len(), 2);
    // Onto queued tasks behind the stub.
    q.push(batch_of(&ts[4..6]), true).unwrap();
    {
        let mut c = q.try_lock().unwrap();
        assert_eq!(c.pop(), Some(ts[0]));
        // The cursor is a task (ts[1]): the batch goes in front of it.
        c.push_front(batch_of(&ts[2..4]));
        assert_eq!(c.len(), 5);
        for &t in &[ts[2], ts[3], ts[1], ts[4], ts[5]] {
            assert_eq!(c.pop(), Some(t));
        }
        assert_eq!(c.pop(), None);
    }
    assert!(q.is_empty());
    assert!(q.is_settled_empty());
    assert_eq!(q.len(), 0);
    // In front of the last task (its `next` null, `tail` at it), and after a drain.
    q.push(batch_of(&ts[6..7]), true).unwrap();
    {
        let mut c = q.try_lock().unwrap();
        c.push_front(batch_of(&ts[7..8]));
        assert_eq!(c.pop(), Some(ts[7]));
        assert_eq!(c.pop(), Some(ts[6]));
        assert_eq!(c.pop(), None);
        c.push_front(batch_of(&ts[8..9]));
    }
    assert_eq!(q.len(), 1, "a prepend after the drain is counted");
    // A push behind the prepended task, then everything in order.
    q.push(batch_of(&ts[9..10]), true).unwrap();
    let mut c = q.try_lock().unwrap();
    assert_eq!(c.pop(), Some(ts[8]));
    assert_eq!(c.pop(), Some(ts[9]));
    assert_eq!(c.pop(), None);
    drop(c);
    assert!(q.is_settled_empty());
    // An empty batch changes nothing.
    q.try_lock_even_empty().unwrap().push_front(Batch::new());
    assert!(q.is_empty());
    assert_eq!(q.len(), 0);
}

/// The empty-queue lock is a lock like `try_lock`: one holder at a time.
#[test]
fn try_lock_even_empty_excludes_other_holders() {
    let q = Injector::new();
    let ts = TestTasks::new(1);
    let c = q.try_lock_even_empty().unwrap();
    assert!(q.try_lock_even_empty().is_none());
    q.push(batch_of(&ts[0..1]), true).unwrap();
    assert!(q.try_lock().is_none(), "held");
    assert!(!q.has_ready(), "held: the holder re-checks");
    drop(c);
    let mut c = q.try_lock().unwrap();
    assert!(q.try_lock_even_empty().is_none());
    assert_eq!(c.pop(), Some(ts[0]));
}

/// A closed queue takes a prepend (an internal push) and stays closed.
#[test]
fn push_front_on_a_closed_queue() {
    let q = Injector::new();
    let ts = TestTasks::new(2);
    q.push(batch_of(&ts[1..2]), true).unwrap();
    assert!(q.close());
    q.try_lock_even_empty().unwrap().push_front(batch_of(&ts[0..1]));
    assert!(q.is_closed());
    let mut c = q.try_lock().unwrap();
    assert_eq!(c.pop(), Some(ts[0]));
    assert_eq!(c.pop(), Some(ts[1]));
    assert_eq!(c.pop(), None);
    drop(c);
    assert!(q.is_closed());
    assert!(q.is_settled_empty());
}

#[test]
fn close_refuses_external_only() {
    let q = Injector::new();
    let ts = TestTasks::new(3);
    q.push(batch_of(&ts[0..1]), true).unwrap();
    assert!(q.close());
    assert!(!q.close());
    assert!(q.is_closed());
    assert!(q.push(batch_of(&ts[1..2]), true).is_err());
    q.push(batch_of(&ts[2..3]), false).unwrap();
    let mut c = q.try_lock().unwrap();
    assert_eq!(c.pop(), Some(ts[0]));
    assert_eq!(c.pop(), Some(ts[2]));
    assert_eq!(c.pop(), None);
    drop(c);
    assert!(q.is_closed(), "the stub re-push keeps the CLOSED bit");
}

#[test]
fn a_failed_try_lock_is_reported_to_the_holder_at_unlock() {
    let q = Injector::new();
    let ts = TestTasks::new(1);
    q.push(batch_of(&ts[0..1]), true).unwrap();
    let c = q.try_lock().unwrap();
    assert!(!q.is_empty(), "held: not reported empty");
    assert!(q.try_lock().is_none());
    assert!(q.try_lock_even_empty().is_none());
    assert!(!q.has_ready(), "held by another consumer: its holder re-checks");
    assert!(c.unlock(), "the failed tries are reported");
    let c = q.try_lock().unwrap();
    assert!(!c.unlock(), "an uncontended hold reports nothing");
    assert!(q.has_ready());
}
