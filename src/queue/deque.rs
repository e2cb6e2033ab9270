//! A worker's join deque: a fixed-capacity Chase-Lev deque of stack jobs (design text 001's
//! "Chase-Lev deques with wait-free push/pop", in the weak-memory form of Lê, Pop, Cohen and
//! Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models", PPoPP 2013).
//!
//! * The owner pushes and pops at `bottom`, through its half of the deque ([`Owner`], which only
//!   its thread holds) (LIFO: `join` takes back the job it just offered,
//!   the most recent and cache-hot one). Thieves take **one** job at a time at `top` (the oldest:
//!   in fork-join, the biggest piece of work left), with one CAS on `top`.
//! * Slots `[top, bottom)` (wrapping `u32` indices modulo `CAPACITY`) hold queued jobs. Only the
//!   owner writes slots, and only at `bottom`, after an Acquire load of `top` proved the slot
//!   free (a thief's slot read is ordered before its CAS, which that load reads).
//! * Full: `push` refuses, and `join` runs its second closure itself after the first. A join
//!   nested 256 deep with nothing stolen gains nothing from more slots.
//!
//! # Why a second structure next to the ring
//! The ring (`queue::ring`) serves submitted tasks FIFO, and its thieves take **half** of it with
//! a single CAS on `head`, which validates `head` only. An owner pop at the tail cannot be added
//! to that ring safely: a thief reads `head = h` and `tail = T`, computes its run
//! `[h, h + ceil((T-h)/2))`, and is delayed before its CAS; meanwhile the owner pops back from
//! `T - 1` down into that run (each pop sees `head = h`, far below, so takes its slot without a
//! CAS); the thief's CAS then still finds `head == h` and succeeds: both run the same tasks.
//! Fences between the loads do not help, since the thief's values were true when it read them.
//! (With one pop in flight the run never reaches the owner's slot when `T - h >= 2`; it is the
//! *repeated* pops during one delayed steal that break it.) crossbeam-deque's LIFO flavour steals
//! batches one CAS per task for this reason; tokio's queue has no owner pop at the tail.
//! So fork-join jobs get this deque (one-at-a-time steals, the classic proof), and submitted
//! tasks keep the ring (steal-half, FIFO fairness).
//!
//! # Orderings (the two SeqCst fences are the algorithm)
//! * `pop_if` stores `bottom - 1`, fences, loads `top`; `steal` loads `top`, fences, loads
//!   `bottom`. By the fences' total order either the thief sees the decremented `bottom` (and
//!   does not take that slot unless it is the last one), or the owner sees the thief's `top`
//!   (and so knows the slot may be contested). The last job (`top == bottom - 1`) goes to
//!   whoever wins the CAS on `top`.
//! * Every store of `bottom` is Release and thieves load it with Acquire: a thief that sees a
//!   slot also sees the job behind it (its closure, written before the push).
//!
//! Capacity: 256 (4 under loom).
//!
//! Loom: `deque/loom.rs` (`join_deque_*`) and `join/loom.rs` (`join_handshake_*`).

use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::sync::{fence, AtomicPtr, AtomicU32, Ordering};
use crate::task::Task;

/// Slots in a join deque. Always a power of two.
#[cfg(not(loom))]
pub(crate) const CAPACITY: u32 = 256;
/// Slots in a join deque. Tiny under loom so models reach "full".
#[cfg(loom)]
pub(crate) const CAPACITY: u32 = 4;

const MASK: u32 = CAPACITY - 1;
const _: () = assert!(CAPACITY.is_power_of_two());

/// A fixed-capacity Chase-Lev deque of task pointers. See the module docs.
pub(crate) struct JoinDeque {
    /// Index of the oldest job. Advanced only by CAS (thieves, and the owner taking the last).
    top: AtomicU32,
    /// One past the newest job. Stored only by the owner, always with Release.
    bottom: AtomicU32,
    /// The slots. Atomic because a thief may read a slot the owner is about to rewrite (its
    /// CAS then fails).
    buffer: [AtomicPtr<Task>; CAPACITY as usize],
}

impl core::fmt::Debug for JoinDeque {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinDeque")
            .field("top", &self.top.load(Ordering::Relaxed))
            .field("bottom", &self.bottom.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl JoinDeque {
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
            ptr::addr_of_mut!((*dst).top).write(AtomicU32::new(0));
            ptr::addr_of_mut!((*dst).bottom).write(AtomicU32::new(0));
            let slots = ptr::addr_of_mut!((*dst).buffer).cast::<AtomicPtr<Task>>();
            for i in 0..CAPACITY as usize {
                slots.add(i).write(AtomicPtr::new(ptr::null_mut()));
            }
        }
        // Names every field: one added and not written above fails to compile here.
        let _ = |this: &Self| {
            let Self { top: _, bottom: _, buffer: _ } = this;
        };
    }

    /// The owner's half of this deque.
    ///
    /// # Safety
    /// Every owner half of this deque lives on one thread (its owner), and the deque outlives
    /// them: the owner's operations assume no other thread runs one concurrently.
    pub(crate) unsafe fn owner(&self) -> Owner {
        Owner { deque: NonNull::from(self), _single_thread: PhantomData }
    }

    /// A cheap emptiness hint for thieves scanning victims (no fence; may be stale).
    #[inline]
    pub(crate) fn is_empty_hint(&self) -> bool {
        let t = self.top.load(Ordering::Relaxed);
        let b = self.bottom.load(Ordering::Relaxed);
        b.wrapping_sub(t) as i32 <= 0
    }

    /// About how many jobs are offered (for statistics; no fence, may be stale).
    pub(crate) fn len_hint(&self) -> usize {
        let t = self.top.load(Ordering::Relaxed);
        let b = self.bottom.load(Ordering::Relaxed);
        usize::try_from(b.wrapping_sub(t) as i32).unwrap_or(0)
    }

    /// Steals the oldest job. Retries while it loses CAS races and jobs remain.
    pub(crate) fn steal(&self) -> Option<NonNull<Task>> {
        // Thieves scan every victim: skip the fence when there is clearly nothing.
        if self.is_empty_hint() {
            return None;
        }
        loop {
            // Acquire pairs with other thieves' (and the owner's) CAS on `top`.
            let t = self.top.load(Ordering::Acquire);
            // Pairs with the fence in `take_bottom` (see the module docs).
            fence(Ordering::SeqCst);
            // Acquire pairs with the owner's Release stores of `bottom`: slot and job visible.
            let b = self.bottom.load(Ordering::Acquire);
            if b.wrapping_sub(t) as i32 <= 0 {
                return None;
            }
            let task = self.buffer[(t & MASK) as usize].load(Ordering::Relaxed);
            // SeqCst/AcqRel: Acquire for the job's contents along the CAS chain, Release so the
            // owner's next `push` (Acquire load of `top`) sees our slot read as done.
            if self.top.compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                return NonNull::new(task);
            }
            crate::sync::spin_hint();
        }
    }
}

/// The owner's half of a [`JoinDeque`]: push, pop and take back at the bottom. Made once per
/// worker ([`JoinDeque::owner`]) and held only by its `WorkerContext`; neither `Send` nor
/// `Sync`, so holding one proves the caller is on the owner's thread, and the owner's
/// operations need no contract of their own.
pub(crate) struct Owner {
    deque: NonNull<JoinDeque>,
    _single_thread: PhantomData<*mut ()>,
}

impl core::fmt::Debug for Owner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.deque().fmt(f)
    }
}

impl Owner {
    #[inline(always)]
    fn deque(&self) -> &JoinDeque {
        // SAFETY: the deque outlives its owner halves (`JoinDeque::owner`'s contract).
        unsafe { self.deque.as_ref() }
    }

    /// Our view of `bottom`: only the owner stores it, so Relaxed reads its own store.
    #[inline]
    fn bottom(&self) -> u32 {
        self.deque().bottom.load(Ordering::Relaxed)
    }

    /// Pushes a job at the bottom. Returns false (and queues nothing) when full. The deque
    /// only stores the pointer: whoever takes the job out runs it (`Task::run`'s contract).
    #[inline]
    pub(crate) fn push(&self, task: NonNull<Task>) -> bool {
        let d = self.deque();
        let b = self.bottom();
        // Acquire pairs with the thieves' CAS on `top`: their reads of the slot we may reuse
        // are done before our store below.
        let t = d.top.load(Ordering::Acquire);
        if b.wrapping_sub(t) >= CAPACITY {
            return false;
        }
        d.buffer[(b & MASK) as usize].store(task.as_ptr(), Ordering::Relaxed);
        // Release: a thief that loads this `bottom` (Acquire) sees the slot and the job.
        d.bottom.store(b.wrapping_add(1), Ordering::Release);
        true
    }

    /// Takes back `expected` if it is still the newest job (not stolen, not yet popped by a
    /// helping loop). Returns whether the caller now owns it (to run it inline).
    #[inline]
    pub(crate) fn pop_if(&self, expected: NonNull<Task>) -> bool {
        let b = self.bottom();
        let last = b.wrapping_sub(1);
        // Owner-only peek: only the owner writes slots. If the newest slot is not our job, the
        // job is gone (stolen, or popped by this thread's own help loop) and so is everything
        // pushed after it; a stale slot equal to it is handled below (empty deque).
        if self.deque().buffer[(last & MASK) as usize].load(Ordering::Relaxed) != expected.as_ptr() {
            return false;
        }
        self.take_bottom(b).is_some()
    }

    /// Pops the newest job (a helping owner runs it).
    #[inline]
    pub(crate) fn pop(&self) -> Option<NonNull<Task>> {
        let b = self.bottom();
        if b == self.deque().top.load(Ordering::Relaxed) {
            return None;
        }
        self.take_bottom(b)
    }

    /// The Chase-Lev `take`: claims slot `b - 1`, with `b` our current `bottom`.
    #[inline]
    fn take_bottom(&self, b: u32) -> Option<NonNull<Task>> {
        let d = self.deque();
        let last = b.wrapping_sub(1);
        // Release like every store of `bottom`; the fence below is what orders it.
        d.bottom.store(last, Ordering::Release);
        // Pairs with the fence in `steal`: either the thief sees `bottom = last` or we see its
        // `top`. See the module docs.
        fence(Ordering::SeqCst);
        let t = d.top.load(Ordering::Relaxed);
        let queued = last.wrapping_sub(t) as i32;
        if queued < 0 {
            // Empty (a thief took the last job): restore.
            d.bottom.store(b, Ordering::Release);
            return None;
        }
        let task = d.buffer[(last & MASK) as usize].load(Ordering::Relaxed);
        if queued > 0 {
            // At least one more job above ours: no thief can reach this slot (see module docs).
            return NonNull::new(task);
        }
        // The last job: whoever moves `top` past it owns it. AcqRel/Acquire is enough for the
        // CAS itself; the thieves' CAS on the same word is in the same modification order.
        let won = d.top.compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed).is_ok();
        // Empty either way: `bottom = top`.
        d.bottom.store(b, Ordering::Release);
        if won {
            NonNull::new(task)
        } else {
            None
        }
    }
}

#[cfg(all(test, loom))]
mod loom;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    unsafe extern "C" fn noop(_: *mut Task) {}

    fn tasks(n: usize) -> (*mut [Task], Vec<NonNull<Task>>) {
        let raw = Box::into_raw((0..n).map(|_| Task::new(noop)).collect::<Box<[Task]>>());
        let base = raw.cast::<Task>();
        // SAFETY: `i < n`, inside the allocation.
        let ptrs = (0..n).map(|i| unsafe { NonNull::new_unchecked(base.add(i)) }).collect();
        (raw, ptrs)
    }

    #[test]
    fn lifo_owner_fifo_thief_and_full() {
        let d = JoinDeque::new();
        // SAFETY: this test's thread is the only one, and `d` outlives `o`.
        let o = unsafe { d.owner() };
        let (raw, ts) = tasks(CAPACITY as usize + 1);
        for &t in &ts[..CAPACITY as usize] {
            assert!(o.push(t));
        }
        assert!(!o.push(ts[CAPACITY as usize]), "full");
        assert_eq!(d.steal(), Some(ts[0]));
        assert!(o.pop_if(ts[CAPACITY as usize - 1]));
        assert!(!o.pop_if(ts[1]));
        assert_eq!(o.pop(), Some(ts[CAPACITY as usize - 2]));
        let mut n = 0;
        while d.steal().is_some() {
            n += 1;
        }
        assert_eq!(n, CAPACITY as usize - 3);
        assert!(o.pop().is_none());
        // Stale slot equal to `expected` on an empty deque: not taken.
        assert!(!o.pop_if(ts[1]));
        // SAFETY: from Box::into_raw; the deque is done with them.
        drop(unsafe { Box::from_raw(raw) });
    }

    #[test]
    fn wraps_around() {
        let d = JoinDeque::new();
        // SAFETY: this test's thread is the only one, and `d` outlives `o`.
        let o = unsafe { d.owner() };
        let (raw, ts) = tasks(3);
        for round in 0..(3 * CAPACITY) {
            assert!(o.push(ts[0]));
            assert!(o.push(ts[1]));
            if round % 2 == 0 {
                assert_eq!(d.steal(), Some(ts[0]));
                assert!(o.pop_if(ts[1]));
            } else {
                assert!(o.pop_if(ts[1]));
                assert!(o.pop_if(ts[0]));
            }
            assert!(d.is_empty_hint());
        }
        // SAFETY: from Box::into_raw.
        drop(unsafe { Box::from_raw(raw) });
    }
}
