//! A worker's bounded ring of tasks: single producer (the owning worker), many consumers.
//!
//! The algorithm is Go's runqueue as described in design text 002 ("Going Lock-Free:
//! Bounded"), also the base of tokio's queue:
//!
//! * `tail` is written only by the owner, through its half of the ring ([`Local`], which only
//!   its thread holds). `head` moves forward by compare-and-swap, by the owner
//!   popping one task or by a thief claiming a whole run of tasks (steal-half).
//! * Slots `[head, tail)` (wrapping `u32` indices, taken modulo `CAPACITY`) hold queued tasks.
//!   The owner writes a slot only outside that range, after an Acquire load of `head` proved the
//!   slot free.
//! * A thief copies the run it wants into its *own* ring beyond its published tail, then claims
//!   the run with one CAS on the victim's `head`. If the CAS fails, the copies are simply never
//!   published. If it succeeds, the thief publishes them with one Release store of its tail.
//!   Slots are atomics, so a stale thief reading a slot the owner is rewriting is no data race;
//!   its CAS then fails because `head` has moved.
//! * On overflow the owner claims half of its own ring with the same CAS and hands it, with the
//!   new task, to the injector as one batch, so the next 128 pushes are cheap again. The ring
//!   was full, so the batch's tasks are those at indices `tail - CAPACITY` onwards, the oldest:
//!   the worker sends those it had taken from the injector back to the injector's front, the
//!   rest to its back (`Inner::spill`, `scheduler/search.rs`, "Order").
//!
//! Order: FIFO for the owner and for thieves (both take from `head`). The LIFO order a worker
//! wants for a task it has just woken is served by the LIFO slot in front of this ring, and
//! fork-join's by the join deque (`queue::deque`), not by the ring itself.
//!
//! Capacity: 256 tasks (4 under loom, so overflow and wrap-around happen in small models).

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::sync::{spin_hint, AtomicPtr, AtomicU32, Ordering};
use crate::task::{Batch, Task};

/// Slots in a ring. Always a power of two.
#[cfg(not(loom))]
pub(crate) const CAPACITY: u32 = 256;
/// Slots in a ring. Always a power of two. Tiny under loom so models reach overflow.
#[cfg(loom)]
pub(crate) const CAPACITY: u32 = 4;

const MASK: u32 = CAPACITY - 1;
const _: () = assert!(CAPACITY.is_power_of_two());

/// A bounded SPMC ring of task pointers. See the module docs for the protocol.
pub(crate) struct Ring {
    /// Index of the oldest queued task. Advanced by CAS (owner pop, thieves, overflow).
    head: AtomicU32,
    /// Index one past the newest queued task. Stored only by the owner (Release: publishes the
    /// slot and the task's contents); others load it with Acquire.
    tail: AtomicU32,
    /// The slots. Atomic because a thief may read a slot while the owner rewrites it (the thief
    /// then loses its CAS and discards what it read).
    buffer: [AtomicPtr<Task>; CAPACITY as usize],
}

impl core::fmt::Debug for Ring {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What a successful steal returns: one task to run now, how many more it queued in the
/// thief's ring, and how many it left in the victim's (it takes half). Either non-zero means
/// the thief should notify (design text 002 "Season 1 pt. 3").
#[derive(Debug)]
pub(crate) struct Stolen {
    pub(crate) task: NonNull<Task>,
    pub(crate) queued: u32,
    pub(crate) left: u32,
}

impl Ring {
    /// An empty one, as a value (the tests and models; a worker builds its own in place).
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        // SAFETY: `init` writes every field of the value it is given (its contract).
        unsafe { crate::fallible::value_in_place(Self::init) }
    }

    /// Writes an empty one at `dst`, in place: a worker holds it, and its 1 KiB of slots
    /// made as a value would be built on the stack and copied.
    ///
    /// # Safety
    /// `dst` is aligned and valid for writes.
    pub(crate) unsafe fn init(dst: *mut Self) {
        // SAFETY: the caller's contract; every field is written.
        unsafe {
            ptr::addr_of_mut!((*dst).head).write(AtomicU32::new(0));
            ptr::addr_of_mut!((*dst).tail).write(AtomicU32::new(0));
            let slots = ptr::addr_of_mut!((*dst).buffer).cast::<AtomicPtr<Task>>();
            for i in 0..CAPACITY as usize {
                slots.add(i).write(AtomicPtr::new(ptr::null_mut()));
            }
        }
        // Names every field: one added and not written above fails to compile here.
        let _ = |this: &Self| {
            let Self { head: _, tail: _, buffer: _ } = this;
        };
    }

    /// The owner's half of this ring.
    ///
    /// # Safety
    /// Every owner half of this ring lives on one thread (its owner), and the ring outlives
    /// them: the owner's operations assume no other thread runs one concurrently.
    pub(crate) unsafe fn local(&self) -> Local {
        Local { ring: NonNull::from(self), _single_thread: PhantomData }
    }

    /// Approximate number of queued tasks (exact when called by the owner with no thief active).
    #[inline]
    pub(crate) fn len(&self) -> u32 {
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Acquire);
        tail.wrapping_sub(head).min(CAPACITY)
    }

    /// Whether the ring looks empty (a hint for thieves; may be stale).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Steals half (rounded up) of this ring into `dst`, the thief's own ring (its owner half:
    /// only its owner fills it), and returns one of the stolen tasks to run at once.
    pub(crate) fn steal_into(&self, dst: &Local) -> Option<Stolen> {
        let dst_tail = dst.tail();
        let dst = dst.ring();
        debug_assert!(!ptr::eq(self, dst));
        let dst_free = CAPACITY - dst.len();
        loop {
            // Acquire on both: `tail` pairs with the owner's Release store (slots and tasks
            // visible); `head` pairs with other thieves' CAS.
            let head = self.head.load(Ordering::Acquire);
            let tail = self.tail.load(Ordering::Acquire);
            let queued = tail.wrapping_sub(head);
            if queued == 0 {
                return None;
            }
            if queued > CAPACITY {
                // `head` and `tail` read at different moments, the owner refilled in between.
                spin_hint();
                continue;
            }
            let take = (queued - queued / 2).min(dst_free);
            if take == 0 {
                return None;
            }
            for i in 0..take {
                let task = self.buffer[(head.wrapping_add(i) & MASK) as usize].load(Ordering::Relaxed);
                // Beyond our published tail: invisible to our own thieves until the Release
                // store below; a stale thief of ours that reads it fails its CAS.
                dst.buffer[(dst_tail.wrapping_add(i) & MASK) as usize].store(task, Ordering::Relaxed);
            }
            // AcqRel: Acquire orders the slot reads above before any reuse by the owner (who
            // loads `head` with Acquire); Release lets the next thief see our claim.
            if self
                .head
                .compare_exchange(head, head.wrapping_add(take), Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                spin_hint();
                continue;
            }
            // Keep the last stolen task to run now, publish the rest.
            let last = dst_tail.wrapping_add(take - 1);
            let task = dst.buffer[(last & MASK) as usize].load(Ordering::Relaxed);
            if take > 1 {
                dst.tail.store(last, Ordering::Release);
            }
            let task = NonNull::new(task).expect("stolen slot is null");
            return Some(Stolen { task, queued: take - 1, left: queued - take });
        }
    }
}

/// The owner's half of a [`Ring`]: push and pop, and the destination of its steals. Made once
/// per worker ([`Ring::local`]) and held only by its `WorkerContext`; neither `Send` nor
/// `Sync`, so holding one proves the caller is on the owner's thread, and the owner's
/// operations need no contract of their own.
pub(crate) struct Local {
    ring: NonNull<Ring>,
    _single_thread: PhantomData<*mut ()>,
}

impl core::fmt::Debug for Local {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.ring().fmt(f)
    }
}

impl Local {
    #[inline(always)]
    fn ring(&self) -> &Ring {
        // SAFETY: the ring outlives its owner halves (`Ring::local`'s contract).
        unsafe { self.ring.as_ref() }
    }

    /// Our view of `tail`: only the owner stores it, so a Relaxed load reads our own last
    /// store.
    #[inline(always)]
    fn tail(&self) -> u32 {
        self.ring().tail.load(Ordering::Relaxed)
    }

    /// The owner's view of `head` and `tail`, for its bookkeeping of which tasks it took from
    /// the injector (`WorkerContext`'s `injected_end`). `head` is loaded Relaxed: it may lag
    /// behind thieves' claims (never behind the owner's own pops and overflows), and the
    /// bookkeeping is a hint for order that tolerates that (no slot is read through it).
    #[inline]
    pub(crate) fn indices(&self) -> (u32, u32) {
        (self.ring().head.load(Ordering::Relaxed), self.tail())
    }

    /// Pushes a task at the tail; on a full ring, moves half of the ring plus `task` into the
    /// returned batch, which the caller must hand to the injector: the tasks at indices
    /// `tail - CAPACITY .. tail - CAPACITY / 2` in order (`tail` does not move), then `task`.
    /// `task` is queued nowhere else (every task the pool queues meets `ThreadPool::submit`'s
    /// contract): a full ring links it into the batch.
    ///
    /// Always inlined (it is on the yield path, inside `harness::run`); a full ring is
    /// `push_full`'s, out of line.
    #[inline(always)]
    pub(crate) fn push(&self, task: NonNull<Task>) -> Result<(), Batch> {
        let tail = self.tail();
        // Acquire pairs with the thieves' AcqRel CAS on `head`: their reads of the slots we
        // are about to reuse happen before our store below.
        let head = self.ring().head.load(Ordering::Acquire);
        if tail.wrapping_sub(head) < CAPACITY {
            self.store_slot(tail, task);
            return Ok(());
        }
        self.push_full(task, head, tail)
    }

    /// Fills slot `tail` (free) and publishes it.
    #[inline(always)]
    fn store_slot(&self, tail: u32, task: NonNull<Task>) {
        let ring = self.ring();
        ring.buffer[(tail & MASK) as usize].store(task.as_ptr(), Ordering::Relaxed);
        // Release: publishes the slot and the task's contents to thieves.
        ring.tail.store(tail.wrapping_add(1), Ordering::Release);
    }

    /// `push` on a ring that was full when `head` was read: claim half for the injector. If a
    /// thief moved `head` meanwhile, there is room again and the task is pushed normally.
    /// `tail` is our tail.
    #[cold]
    #[inline(never)]
    fn push_full(&self, task: NonNull<Task>, mut head: u32, tail: u32) -> Result<(), Batch> {
        loop {
            if let Some(mut batch) = self.claim_half(head) {
                // SAFETY: `task` is queued nowhere else (`push`), so its link is ours to write.
                unsafe { batch.push(task) };
                return Err(batch);
            }
            // As in `push`.
            head = self.ring().head.load(Ordering::Acquire);
            if tail.wrapping_sub(head) < CAPACITY {
                self.store_slot(tail, task);
                return Ok(());
            }
        }
    }

    /// Claims `CAPACITY / 2` tasks from a full ring (`tail - head == CAPACITY`).
    fn claim_half(&self, head: u32) -> Option<Batch> {
        let ring = self.ring();
        let take = CAPACITY / 2;
        // Acquire: as in `push`, thieves' slot reads of this range are done before we reuse it.
        if ring
            .head
            .compare_exchange(head, head.wrapping_add(take), Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        let mut batch = Batch::new();
        for i in 0..take {
            let slot = &ring.buffer[(head.wrapping_add(i) & MASK) as usize];
            // The claimed slots are ours now: no thief can validate a read of them any more,
            // and only we write slots.
            let task = NonNull::new(slot.load(Ordering::Relaxed)).expect("queued slot is null");
            // SAFETY: claimed above; the task is ours to link.
            unsafe { batch.push(task) };
        }
        Some(batch)
    }

    /// Pops the oldest task.
    #[inline]
    pub(crate) fn pop(&self) -> Option<NonNull<Task>> {
        let ring = self.ring();
        let tail = self.tail();
        let mut head = ring.head.load(Ordering::Acquire);
        loop {
            if head == tail {
                return None;
            }
            // Our own earlier store (or a slot we filled when stealing): no race with a writer,
            // only with thieves reading, and the CAS below decides who gets it.
            let task = ring.buffer[(head & MASK) as usize].load(Ordering::Relaxed);
            match ring.head.compare_exchange_weak(
                head,
                head.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return NonNull::new(task),
                Err(actual) => head = actual,
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom;

#[cfg(all(test, not(loom)))]
mod tests {
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

    #[test]
    fn push_pop_fifo() {
        let owned = Ring::new();
        // SAFETY: this test's thread is the only one, and `owned` outlives `ring`.
        let ring = unsafe { owned.local() };
        let ts = TestTasks::new(10);
        for &t in ts.iter() {
            ring.push(t).unwrap();
        }
        assert_eq!(owned.len(), 10);
        for &t in ts.iter() {
            assert_eq!(ring.pop(), Some(t));
        }
        assert!(ring.pop().is_none());
    }

    #[test]
    fn overflow_moves_half_plus_one() {
        let owned = Ring::new();
        // SAFETY: this test's thread is the only one, and `owned` outlives `ring`.
        let ring = unsafe { owned.local() };
        let ts = TestTasks::new(CAPACITY as usize + 1);
        let (&last, first) = ts.split_last().unwrap();
        for &t in first {
            ring.push(t).unwrap();
        }
        let mut batch = ring.push(last).unwrap_err();
        assert_eq!(batch.len(), CAPACITY as usize / 2 + 1);
        assert_eq!(owned.len(), CAPACITY / 2);
        // The batch holds the oldest half in order, then the new task.
        for &t in &first[..CAPACITY as usize / 2] {
            assert_eq!(batch.pop(), Some(t));
        }
        assert_eq!(batch.pop(), Some(last));
    }

    #[test]
    fn steal_half_rounds_up_and_wraps() {
        let (victim_ring, thief_ring) = (Ring::new(), Ring::new());
        // SAFETY: this test's thread is the only one (it owns both rings), and the rings
        // outlive their halves.
        let (victim, thief) = unsafe { (victim_ring.local(), thief_ring.local()) };
        let ts = TestTasks::new(CAPACITY as usize * 3);
        let mut next = 0;
        let mut expected = std::collections::VecDeque::new();
        // Push, pop and steal around the ring a few times so the indices wrap the buffer.
        for round in 0..20 {
            for _ in 0..(7 + round % 5) {
                let len = ts.len();
                let t = ts[next % len];
                next += 1;
                victim.push(t).unwrap();
                expected.push_back(t);
            }
            let queued = victim_ring.len();
            let stolen = victim_ring.steal_into(&thief).unwrap();
            let take = queued - queued / 2;
            assert_eq!(stolen.queued, take - 1);
            assert_eq!(stolen.left, queued - take);
            assert_eq!(victim_ring.len(), stolen.left, "what the victim kept");
            let mut got = Vec::new();
            while let Some(t) = thief.pop() {
                got.push(t);
            }
            got.push(stolen.task);
            let want: Vec<_> = expected.drain(..take as usize).collect();
            assert_eq!(got, want);
            while let Some(t) = victim.pop() {
                assert_eq!(Some(t), expected.pop_front());
            }
        }
    }

    #[test]
    fn steal_from_empty() {
        let (victim, thief_ring) = (Ring::new(), Ring::new());
        // SAFETY: this test's thread is the only one, and the ring outlives its half.
        let thief = unsafe { thief_ring.local() };
        assert!(victim.steal_into(&thief).is_none());
    }
}
