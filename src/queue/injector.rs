//! The pool's unbounded intrusive queue: lock-free for producers, try-locked for the consumer.
//!
//! Design text 002, "Vyukov MPSC queue - made non-blocking MC": Dmitry Vyukov's intrusive
//! multi-producer single-consumer queue, where the single consumer is whoever wins a try-lock
//! on the consumer end. A worker that loses the try-lock does not wait: it looks elsewhere for
//! work (the sleep protocol guarantees a later notification if it finds none).
//!
//! We chose Vyukov's FIFO over the text's Treiber-stack variant: external submissions then run
//! in submission order, which keeps a stream of submits fair.
//!
//! # Layout and states
//! * `tail` (producer end) points to the last task pushed. Null and `&stub` both mean "the
//!   stub is last". Its low bit is [`CLOSED`]: once set, external pushes are refused. Producers
//!   swing `tail` with a CAS (not a swap, so the CLOSED bit is read and kept atomically with
//!   the push; this makes "accepted" vs "refused after shutdown" a single linearisation point).
//! * `head` (consumer end) is the consumer's cursor: the oldest unconsumed node (null = the
//!   stub), or [`locked()`] while a consumer holds the queue, [`contended()`] once another
//!   consumer failed to take it meanwhile (that consumer may count on the holder to look at
//!   the queue again after it unlocks: [`Consumer::unlock`] reports it, `has_ready` acts on it).
//! * Nodes are linked oldest to newest through `Task::next`. The stub is a dummy node that lets
//!   the consumer detach the last real node: it re-pushes the stub behind it.
//!
//! # The push preempted between its CAS and its link
//! A producer first swings `tail` to its batch, then links the previous tail to it. In between,
//! the chain is broken: the consumer sees a node with no `next` although `tail` is elsewhere.
//! It then reports "empty" spuriously and leaves the node in place. That is safe: the producer
//! notifies the pool after linking, so a worker will come back (see `scheduler/README.md`).
//!
//! # Prepending (the consumer's front push)
//! The lock holder may also put a batch *in front* of the queue ([`Consumer::push_front`]): a
//! worker's ring overflowing with tasks it took from here sends them back to where they were,
//! ahead of newer submissions (`Inner::spill`, `scheduler/search.rs`, "Order"). That touches
//! only the consumer side: the batch's last task links to the oldest node (the cursor's node,
//! or the stub when the cursor is null or the stub), and the cursor moves to the batch's first
//! task. So the states above hold:
//! * Producers never see the batch: `tail` and the newest node's `next`, all they touch, are
//!   unchanged, and so is the CLOSED bit. The batch's tasks are never the last node (their
//!   last links to a node already in the chain), so `pop` never detaches through them and
//!   re-pushes the stub only as before, when the cursor passed it.
//! * The stub stays where it was in the chain (at most once): the batch links *to* it when it is
//!   the front node, and nothing else links to it.
//! * A half-linked push is unaffected: it links behind the node it swung `tail` from, which is
//!   not one of ours; `pop` still reports empty at that node, after the batch.
//! * After the unlock (Release, as every holder's), the cursor is a real task whose `next` is
//!   linked: `is_empty`, `is_settled_empty` and `try_lock` see a non-empty queue, and
//!   `has_ready` a ready one, as for any queued task.
//! * The length estimate counts the batch as queued: `popped` goes down by its length.
//!
//! # Invariants
//! * Only the lock holder reads or moves the cursor, or reads `next` of consumed-side nodes.
//! * A node is returned by `pop` at most once per time it is queued: the cursor only moves
//!   forward, except onto a prepended batch (tasks that were not in the queue).
//! * The queue must not move in memory while it holds tasks (the stub's address is linked into
//!   the chain); it lives inside the heap-allocated pool.

use core::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, CachePadded, Counter, Ordering};
use crate::task::{Batch, Task};

/// Low bit of `tail`: the queue refuses external pushes (the pool is shutting down).
const CLOSED: usize = 0b1;

/// Value of `head` while a consumer holds the queue. Never a task address (tasks are aligned).
fn locked() -> *mut Task {
    ptr::without_provenance_mut(0b1)
}

/// Value of `head` while a consumer holds the queue and another consumer failed to take it
/// meanwhile (module docs). Never a task address.
fn contended() -> *mut Task {
    ptr::without_provenance_mut(0b11)
}

/// Whether `head` is held ([`locked()`] or [`contended()`]).
fn is_held(head: *mut Task) -> bool {
    head.addr() & 0b1 != 0
}

/// The unbounded intrusive MPSC queue with a try-locked consumer. See the module docs.
pub(crate) struct Injector {
    producer: CachePadded<ProducerEnd>,
    consumer: CachePadded<ConsumerEnd>,
    /// The dummy node (never run).
    stub: Task,
}

/// The producers' cache line.
struct ProducerEnd {
    /// The last task pushed; low bit [`CLOSED`].
    tail: AtomicPtr<Task>,
    /// About how many tasks were ever pushed (wrapping), added after the push's CAS, on the
    /// line that CAS just took, without a second locked instruction (`Counter::add_lossy`):
    /// with `ConsumerEnd::popped`, the queue's approximate length ([`Injector::len`]). It orders
    /// nothing.
    pushed: Counter,
}

/// The consumers' cache line.
struct ConsumerEnd {
    /// Consumer cursor, or [`locked()`] / [`contended()`].
    head: AtomicPtr<Task>,
    /// Tasks ever popped, less those prepended (wrapping). Written only by the lock holder
    /// (`add_owned`: one writer at a time, the lock's Release/Acquire ordering the writers).
    popped: Counter,
}

impl core::fmt::Debug for Injector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Injector")
            .field("tail", &self.producer.tail.load(Ordering::Relaxed))
            .field("head", &self.consumer.head.load(Ordering::Relaxed))
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// Why a push was refused: the queue is closed. The batch's tasks are still the caller's.
#[derive(Debug)]
pub(crate) struct Closed;

unsafe extern "C" fn stub_callback(_: *mut Task) {
    unreachable!("the injector's stub node is never run");
}

impl Injector {
    pub(crate) fn new() -> Self {
        Self {
            producer: CachePadded(ProducerEnd { tail: AtomicPtr::new(ptr::null_mut()), pushed: Counter::default() }),
            consumer: CachePadded(ConsumerEnd { head: AtomicPtr::new(ptr::null_mut()), popped: Counter::default() }),
            stub: Task::new(stub_callback),
        }
    }

    #[inline]
    fn stub_ptr(&self) -> *mut Task {
        ptr::from_ref(&self.stub).cast_mut()
    }

    /// Pushes a batch at the tail. With `external`, a closed queue refuses it.
    #[inline]
    pub(crate) fn push(&self, batch: Batch, external: bool) -> Result<(), Closed> {
        let (Some(first), Some(last), len) = (batch.head, batch.tail, batch.len) else { return Ok(()) };
        // `last.next` is already null (a `Batch` keeps its tail's link null), and that store
        // happened before the CAS below publishes the batch.
        let mut tail = self.producer.tail.load(Ordering::Relaxed);
        loop {
            let closed = tail.addr() & CLOSED;
            if external && closed != 0 {
                return Err(Closed);
            }
            let new = last.as_ptr().map_addr(|a| a | closed);
            // AcqRel: Release publishes `last.next == null` (and the batch's links) to the next
            // producer, which will store into `last.next`; Acquire makes the previous
            // producer's `prev.next = null` happen before our store into it below.
            match self.producer.tail.compare_exchange_weak(tail, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => tail = actual,
            }
        }
        self.producer.pushed.add_lossy(len);
        let prev = tail.map_addr(|a| a & !CLOSED);
        let prev = if prev.is_null() { self.stub_ptr() } else { prev };
        // Release: the consumer's Acquire load of `prev.next` sees the whole batch.
        // SAFETY: `prev` is the stub or a node still in the queue: the consumer never releases a
        // node whose `next` is null (it re-pushes the stub behind it first), so `prev` is live.
        unsafe { (*prev).store_next(first.as_ptr(), Ordering::Release) };
        Ok(())
    }

    /// About how many tasks are queued, for sizing batches (design text 003's fair share),
    /// never for deciding whether the queue is empty: pushes minus pops, never below zero.
    ///
    /// Exact with one producer and nothing in flight. Concurrent producers may lose each
    /// other's additions (`Counter::add_lossy`: a `fetch_add` there cost ~5 ns per submit from
    /// outside, half of `spawn_remote`'s time, for a heuristic), so with several the estimate
    /// runs low; a consumer that finds the queue empty re-synchronises it (`Consumer`'s drop),
    /// so the error does not build up beyond one busy period.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        // Popped first: a push counted after this read only makes the answer larger.
        let popped = self.consumer.popped.get();
        let queued = self.producer.pushed.get().wrapping_sub(popped);
        if queued > usize::MAX / 2 { 0 } else { queued }
    }

    /// Closes the queue to external pushes. Returns false if it was already closed.
    ///
    /// Out of line: once per pool (shutdown, a fork's child), from two places.
    #[inline(never)]
    pub(crate) fn close(&self) -> bool {
        let mut tail = self.producer.tail.load(Ordering::Relaxed);
        loop {
            if tail.addr() & CLOSED != 0 {
                return false;
            }
            // AcqRel: orders the close after every push it displaces in `tail`'s modification
            // order, and makes it visible to those that read it.
            match self.producer.tail.compare_exchange_weak(
                tail,
                tail.map_addr(|a| a | CLOSED),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => tail = actual,
            }
        }
    }

    /// Whether the queue is closed to external pushes.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.producer.tail.load(Ordering::Acquire).addr() & CLOSED != 0
    }

    /// Whether the queue looks empty. May be wrong while a push is in flight (that push is
    /// followed by a notification) or while another worker holds the consumer end.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        let head = self.consumer.head.load(Ordering::Acquire);
        if is_held(head) {
            return false;
        }
        (head.is_null() || head == self.stub_ptr())
            && self.stub.load_next(Ordering::Acquire).is_null()
    }

    /// Whether a task is ready to pop right now: the consumer end is free and the oldest node
    /// is linked (not the stub with nothing behind it, not the last node of a push that is
    /// still linking). Used by a consumer after it unlocked (see `take_from_injector`): a
    /// half-linked push notifies when it links, and a current lock holder re-checks after
    /// its own unlock, so neither needs a notification from us.
    ///
    /// It takes the try-lock to look: without it, another consumer could pop the oldest node
    /// and its task could run and free it while we read its link (Miri found exactly that).
    /// That hold is a lock like any other: a worker whose `try_lock` failed against it may
    /// have gone to sleep counting on us to see what it was told about, so when one did
    /// ([`Consumer::unlock`]), we look again (a lost wake-up otherwise: both workers asleep
    /// with tasks queued; found by `make test-tsan` in `tests/stress.rs` `futex_parker_pool`
    /// and by the shuttle scenario `bursts_into_two_idle_workers`). Each round needs another
    /// consumer's failed `try_lock` during our look, so the loop ends.
    pub(crate) fn has_ready(&self) -> bool {
        loop {
            let Some(consumer) = self.try_lock() else { return false };
            if consumer.peek_ready() {
                return true;
            }
            if !consumer.unlock() {
                return false;
            }
        }
    }

    /// Whether the queue is empty *and* no push is half-way (its CAS on `tail` done, its link
    /// not yet stored), so `None` from `pop` can be trusted.
    ///
    /// Exact only once no push can begin any more: the queue is closed (external pushes fail)
    /// and no thread that pushes internally is left (shutdown, after joining every worker).
    /// Then `tail` read here is at least `close`'s value (our own CAS), so it covers every
    /// accepted push: if it is still the stub (or null), nothing is in flight.
    pub(crate) fn is_settled_empty(&self) -> bool {
        let head = self.consumer.head.load(Ordering::Acquire);
        if is_held(head) {
            return false;
        }
        let stub = self.stub_ptr();
        let tail = self.producer.tail.load(Ordering::Acquire).map_addr(|a| a & !CLOSED);
        (head.is_null() || head == stub)
            && (tail.is_null() || tail == stub)
            && self.stub.load_next(Ordering::Acquire).is_null()
    }

    /// The consumer end is held (`head`, read held): tells its holder that a `try_lock` failed
    /// (module docs). `Err(actual)`: `head` changed first (unlocked: the caller tries again).
    /// Release: what the caller knows (the pushes its notification stood for) is visible to
    /// the holder, whose unlock reads the mark (AcqRel swap).
    fn mark_contended(&self, head: *mut Task) -> Result<(), *mut Task> {
        if head == contended() {
            return Ok(());
        }
        self.consumer.head.compare_exchange(head, contended(), Ordering::Release, Ordering::Relaxed).map(|_| ())
    }

    /// Takes the consumer end if it is free, whether the queue holds tasks or not: for a
    /// holder that prepends ([`Consumer::push_front`]).
    pub(crate) fn try_lock_even_empty(&self) -> Option<Consumer<'_>> {
        self.lock_if(false)
    }

    /// Takes the consumer end if it is free and the queue is not empty.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Consumer<'_>> {
        self.lock_if(true)
    }

    /// The one try-lock of the consumer end: refused while held (marking the holder
    /// contended) and, with `nonempty`, while the queue holds no task.
    #[inline(never)]
    fn lock_if(&self, nonempty: bool) -> Option<Consumer<'_>> {
        let mut head = self.consumer.head.load(Ordering::Relaxed);
        loop {
            if is_held(head) {
                match self.mark_contended(head) {
                    Ok(()) => return None,
                    Err(actual) => {
                        head = actual;
                        continue;
                    }
                }
            }
            if nonempty
                && (head.is_null() || head == self.stub_ptr())
                && self.stub.load_next(Ordering::Acquire).is_null()
            {
                return None;
            }
            // Acquire pairs with the previous consumer's Release unlock: its cursor and the
            // nodes it consumed are settled.
            match self.consumer.head.compare_exchange_weak(head, locked(), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(Consumer { queue: self, cursor: head, popped: 0, drained: false }),
                Err(actual) => head = actual,
            }
        }
    }
}

/// The consumer end of an [`Injector`], held until dropped.
pub(crate) struct Consumer<'a> {
    queue: &'a Injector,
    /// The oldest unconsumed node; null means the stub.
    cursor: *mut Task,
    /// Pushes this holder consumed (tasks popped, and its stub re-pushes, which count as
    /// pushes), less the tasks it prepended (wrapping): added to `ConsumerEnd::popped` on
    /// unlock.
    popped: usize,
    /// A `pop` found the queue empty (the stub alone, no push half-way), and nothing was
    /// prepended since. Every caller stops popping at the first `None`, so the queue is still
    /// about empty when the holder unlocks.
    drained: bool,
}

impl core::fmt::Debug for Consumer<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Consumer").field("cursor", &self.cursor).finish()
    }
}

impl Consumer<'_> {
    /// Whether `pop` would return a task now (not a spurious empty).
    fn peek_ready(&self) -> bool {
        let stub = self.queue.stub_ptr();
        let node = if self.cursor.is_null() { stub } else { self.cursor };
        // SAFETY: we hold the consumer end, so the cursor node (the stub or the oldest queued
        // task) cannot be popped, run or freed meanwhile.
        let next = unsafe { (*node).load_next(Ordering::Acquire) };
        if node == stub {
            return !next.is_null();
        }
        !next.is_null() || self.queue.producer.tail.load(Ordering::Acquire).map_addr(|a| a & !CLOSED) == node
    }

    /// Pops the oldest task; `None` if the queue is empty or a push is half-way (see module).
    pub(crate) fn pop(&mut self) -> Option<NonNull<Task>> {
        let stub = self.queue.stub_ptr();
        let mut node = if self.cursor.is_null() { stub } else { self.cursor };
        // SAFETY: (all derefs of `node` and `next` below) nodes between the cursor and `tail`
        // are queued tasks (or the stub), valid until popped, and only the lock holder pops.
        let mut next = unsafe { (*node).load_next(Ordering::Acquire) };
        if node == stub {
            if next.is_null() {
                self.drained = true;
                return None;
            }
            node = next;
            self.cursor = next;
            // SAFETY: see above.
            next = unsafe { (*node).load_next(Ordering::Acquire) };
        }
        if !next.is_null() {
            self.cursor = next;
            self.popped = self.popped.wrapping_add(1);
            return NonNull::new(node);
        }
        // `node` may be the last one. If a producer already moved `tail` past it but has not
        // linked yet, report empty (the producer will notify after linking).
        let tail = self.queue.producer.tail.load(Ordering::Acquire).map_addr(|a| a & !CLOSED);
        if tail != node {
            return None;
        }
        // Detach `node` by re-pushing the stub behind it (ignoring CLOSED: internal push).
        // SAFETY: the stub is not in the chain any more (the cursor passed it), so it is ours.
        let stub_task = unsafe { NonNull::new_unchecked(stub) };
        let _ = self.queue.push(Batch::from(stub_task), false);
        // That push is counted in `pushed`; the stub is no task, so it counts as consumed.
        self.popped = self.popped.wrapping_add(1);
        // SAFETY: see above.
        next = unsafe { (*node).load_next(Ordering::Acquire) };
        if next.is_null() {
            // Another producer got in between our tail check and the stub push and has not
            // linked yet; try again later.
            return None;
        }
        self.cursor = next;
        self.popped = self.popped.wrapping_add(1);
        NonNull::new(node)
    }

    /// Puts `batch` in front of the queue: the next pops return its tasks first, in order.
    /// An internal push (accepted while the queue is closed). See the module docs,
    /// "Prepending", for why the queue's states and invariants hold.
    ///
    /// Other consumers see the batch once this holder unlocks (its Release store of the
    /// cursor), as any queued task; the caller wakes a worker for it if one should run it.
    pub(crate) fn push_front(&mut self, batch: Batch) {
        let (Some(first), Some(last), len) = (batch.head, batch.tail, batch.len) else { return };
        let front = if self.cursor.is_null() { self.queue.stub_ptr() } else { self.cursor };
        // Relaxed: only lock holders read the link, and the next one acquires it with the
        // lock (the Release unlock in `drop`, the Acquire CAS in `try_lock`).
        // SAFETY: the batch's tasks are ours (the batch owns them) and in no queue.
        unsafe { last.as_ref().store_next(front, Ordering::Relaxed) };
        self.cursor = first.as_ptr();
        self.popped = self.popped.wrapping_sub(len);
        self.drained = false;
    }

    /// [`Injector::len`], as seen by the lock holder (its own pops and prepends included).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        // `popped` is below zero (wrapped) after a prepend; the answer is never below zero.
        let queued = self.queue.len().wrapping_sub(self.popped);
        if queued > usize::MAX / 2 { 0 } else { queued }
    }
}

impl Consumer<'_> {
    /// Unlocks; true if another consumer failed to take the queue meanwhile (it may count on
    /// this holder to look again: `Injector::has_ready`).
    pub(crate) fn unlock(self) -> bool {
        let mut this = core::mem::ManuallyDrop::new(self);
        this.release()
    }

    /// The unlock itself (`unlock`, `drop`): one out-of-line copy, once per batch taken.
    #[inline(never)]
    fn release(&mut self) -> bool {
        if self.drained {
            // Empty: whatever `pushed` says now is all consumed (a push counted after its CAS
            // but not linked yet is missed: one task low). Drops any error producers' lost
            // additions left (see `Injector::len`).
            self.queue.consumer.popped.set(self.queue.producer.pushed.get());
        } else {
            self.queue.consumer.popped.add_owned(self.popped);
        }
        let cursor = if self.cursor == self.queue.stub_ptr() { ptr::null_mut() } else { self.cursor };
        // Release pairs with the next consumer's Acquire in `try_lock`; Acquire with a failed
        // consumer's Release mark (`mark_contended`).
        self.queue.consumer.head.swap(cursor, Ordering::AcqRel) == contended()
    }
}

impl Drop for Consumer<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(all(test, loom))]
mod loom;
#[cfg(all(test, not(loom)))]
mod tests;
