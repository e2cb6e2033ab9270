//! The blocking pool's shared state, its thread loop, and the submit / notify / exit / shutdown
//! transitions. The protocol is argued in `src/blocking/README.md`; the comments here name the
//! pairing of each fence.
//!
//! Every cross-thread decision in this file is one of four "Dekker pairs": each side writes its
//! own variable, issues `fence(SeqCst)`, then reads the other side's variable, so at least one
//! side sees the other (the fences are totally ordered). Loom models SeqCst *accesses* as
//! AcqRel but supports SeqCst *fences*, so the fences are explicit and the accesses Relaxed.
//!
//! | writer A (then fence, then reads)   | writer B (then fence, then reads)        |
//! |-------------------------------------|------------------------------------------|
//! | submit: `queued += 1`; reads `idle` (and bits) | thread going idle: `IDLE`, `idle += 1`, bit; reads `queued`, `SHUTDOWN` |
//! | submit: `queued += 1`; reads `threads` | exiting thread: slot `EMPTY`, `threads -= 1`; reads `queued` |
//! | submit: `queued += 1`; reads `SPAWNING` | new thread: clears `SPAWNING`; reads `queued`, `idle` |
//! | shutdown: sets `SHUTDOWN`; reads slot states | thread going idle (as above)             |

use core::ffi::c_void;
use core::fmt;
use core::ptr::{self, NonNull};
use core::time::Duration;

use alloc::boxed::Box;

use super::{BlockingConfig, BlockingMetrics, BlockingTask, Clock};
use crate::platform::{Parker, Spawner, ThreadStart};
use crate::queue::injector::Injector;
use crate::fallible::{try_box, try_boxed_slice};
use crate::error::Error;
use crate::shutdown::ShutdownGate;
use crate::sync::{fence, spin_hint, AtomicU32, AtomicUsize, CachePadded, Ordering};
use crate::task::{Batch, Task};

/// The counts word: live threads (including one being started) and two flags.
///
/// ```text
///  bit  usize::BITS-1   SHUTDOWN   set once by shutdown; no thread starts after it
///  bit  usize::BITS-2   SPAWNING   a thread is being started (at most one at a time)
///  bits 0 ..            threads    threads counted against the cap
/// ```
///
/// A thread's place is reserved (`threads + 1`) with a compare-and-swap *before* it is
/// started, and released when it leaves or its start fails, so `threads <= cap` always.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Counts(usize);

impl Counts {
    const SHUTDOWN: usize = 1 << (usize::BITS - 1);
    const SPAWNING: usize = 1 << (usize::BITS - 2);
    const THREADS_MASK: usize = Self::SPAWNING - 1;
    const ONE_THREAD: usize = 1;

    #[inline]
    fn threads(self) -> usize {
        self.0 & Self::THREADS_MASK
    }

    #[inline]
    fn shutdown(self) -> bool {
        self.0 & Self::SHUTDOWN != 0
    }

    #[inline]
    fn spawning(self) -> bool {
        self.0 & Self::SPAWNING != 0
    }
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counts")
            .field("raw", &format_args!("{:#x}", self.0))
            .field("threads", &self.threads())
            .field("spawning", &self.spawning())
            .field("shutdown", &self.shutdown())
            .finish()
    }
}

// Slot states. Only the owning thread moves a slot out of RUNNING, NOTIFIED and EXITING;
// notifiers only move IDLE -> NOTIFIED; a thread start moves EMPTY -> RUNNING.
/// No thread owns the slot.
const EMPTY: u32 = 0;
/// The owner is running tasks or looking for them.
const RUNNING: u32 = 1;
/// The owner is parked (or about to park) and may be notified.
const IDLE: u32 = 2;
/// A notifier took the owner out of the idle set and unparked it: it must look for work.
const NOTIFIED: u32 = 3;
/// The owner's keep-alive expired; it is leaving and can no longer be notified.
const EXITING: u32 = 4;

/// One thread's place in the pool: its state and its parker. Lives as long as the pool, so a
/// notifier may unpark it at any time without racing with the thread's exit.
#[repr(C)]
pub(crate) struct Slot<S: Spawner> {
    /// The pool. First field: threads store the slot as their "current worker", and
    /// `super::same_pool` reads this field to tell which pool a thread belongs to.
    pool: *const Inner<S>,
    /// Index in `Inner::slots` (and bit in `Inner::idle_map`).
    index: usize,
    /// EMPTY, RUNNING, IDLE, NOTIFIED or EXITING.
    state: AtomicU32,
    /// What the owner parks on while IDLE (and backs off on while draining).
    parker: S::Parker,
}

/// Totals for [`BlockingMetrics`]; Relaxed counters, never used for synchronisation.
#[derive(Debug, Default)]
struct Totals {
    run: AtomicUsize,
    cancelled: AtomicUsize,
    spawned: AtomicUsize,
    exited: AtomicUsize,
    spawn_failures: AtomicUsize,
    peak: AtomicUsize,
}

/// What `spawn_one` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spawn {
    /// A thread was started (it holds the SPAWNING token until it runs).
    Started,
    /// None was started: at the cap, another start in flight, or shutting down.
    NotNeeded,
    /// The platform refused to start a thread.
    Failed,
}

/// Why `idle_wait` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Woken {
    /// Notified, or work (or shutdown) seen before parking: look for work.
    Work,
    /// The keep-alive expired; the slot is EXITING.
    TimedOut,
}

/// The state shared by the pool's handle and its threads. Heap-allocated, never moved.
pub(crate) struct Inner<S: Spawner> {
    /// See [`Counts`]. Padded: every submit and every thread start or exit touches it.
    counts: CachePadded<AtomicUsize>,
    /// Threads in the idle set (slot IDLE). Incremented by the owner; decremented by whoever
    /// moves the slot out of IDLE.
    idle: CachePadded<AtomicUsize>,
    /// Tasks accepted and not yet taken (plus submits in flight: incremented *before* the push,
    /// decremented after a pop or a refused push). Never zero while a task is in the queue.
    queued: CachePadded<AtomicUsize>,
    /// The intrusive FIFO (MPSC with a try-locked consumer end; `queue::injector`).
    queue: Injector,
    /// One slot per thread the cap allows.
    slots: Box<[Slot<S>]>,
    /// One bit per slot, set by the owner while IDLE, cleared by the owner when it leaves IDLE.
    /// A hint for notifiers (a set bit may be stale; the slot's CAS decides).
    idle_map: Box<[AtomicUsize]>,
    /// The cap (1 ..= BlockingConfig::MAX_THREADS).
    pub(crate) cap: usize,
    keep_alive: Duration,
    clock: Option<Clock>,
    stack_size: usize,
    /// The thread in `shutdown` sleeps on this until the last thread leaves.
    join_parker: S::Parker,
    /// Claimed by the first shutdown; the dropper waits on it (`crate::shutdown`).
    pub(crate) gate: ShutdownGate,
    totals: Totals,
    pub(crate) spawner: S,
}

impl<S: Spawner> Inner<S> {
    /// Allocates the pool (slots and parkers included) and leaks it; `BlockingPool` frees it.
    pub(crate) fn new(config: BlockingConfig, spawner: S) -> Result<NonNull<Self>, Error> {
        let raw: *mut Inner<S> = Box::into_raw(try_box(Self::build(config, spawner)?)?);
        // SAFETY: just allocated and not shared yet.
        unsafe { Self::point_slots_at(raw) };
        // SAFETY: Box::into_raw never returns null.
        Ok(unsafe { NonNull::new_unchecked(raw) })
    }

    /// Points every slot at the pool state at `raw` (where it now lives).
    ///
    /// # Safety
    /// `raw` is a valid `Inner` that nothing else accesses yet.
    unsafe fn point_slots_at(raw: *mut Inner<S>) {
        // SAFETY: the caller's contract: exclusive access through `raw`.
        for slot in unsafe { (*raw).slots.iter_mut() } {
            slot.pool = raw.cast_const();
        }
    }

    /// The state for `config`, not yet in its place (slots not pointed at it yet).
    fn build(config: BlockingConfig, spawner: S) -> Result<Self, Error> {
        let cap = match config.max_threads {
            0 => BlockingConfig::DEFAULT_MAX_THREADS,
            n if n <= BlockingConfig::MAX_THREADS => n,
            _ => return Err(Error::InvalidArgument),
        };
        let slots = try_boxed_slice(cap, |index| Slot {
            pool: ptr::null(),
            index,
            state: AtomicU32::new(EMPTY),
            parker: spawner.new_parker(),
        })?;
        let words = cap.div_ceil(usize::BITS as usize);
        let idle_map = try_boxed_slice(words, |_| AtomicUsize::new(0))?;
        Ok(Inner {
            counts: CachePadded(AtomicUsize::new(0)),
            idle: CachePadded(AtomicUsize::new(0)),
            queued: CachePadded(AtomicUsize::new(0)),
            queue: Injector::new(),
            slots,
            idle_map,
            cap,
            keep_alive: config.keep_alive,
            clock: config.clock,
            stack_size: config.stack_size,
            join_parker: spawner.new_parker(),
            gate: ShutdownGate::new(),
            totals: Totals::default(),
            spawner,
        })
    }

    // ----------------------------------------------------------------------------------------
    // After fork (see `scheduler/fork.rs` for the rules)

    /// Writes a fresh state (same configuration, threads on `spawner`) over the one at `raw`,
    /// in the child after a fork; the old one (the parent's queue and spawner) is kept unused.
    ///
    /// # Safety
    /// In a child after `fork`, with no other use of this pool in progress in the child.
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn reset_after_fork(raw: *mut Inner<S>, spawner: S) -> Result<(), Error> {
        // SAFETY: the caller's contract: a valid state that nothing else reads now.
        let old = unsafe { &*raw };
        let config = BlockingConfig { max_threads: old.cap, keep_alive: old.keep_alive, stack_size: old.stack_size, clock: old.clock };
        let fresh = Self::build(config, spawner)?;
        // SAFETY: as above; the old value is moved out and kept, never dropped.
        let old = unsafe { ptr::replace(raw, fresh) };
        crate::keep::keep(old);
        // SAFETY: as above.
        unsafe { Self::point_slots_at(raw) };
        Ok(())
    }

    /// Refuses every submit from here on (`Error::Shutdown`), in the child after a fork: the
    /// parent's queued tasks are never run.
    #[cfg(feature = "std")]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn close_inherited(&self) {
        self.queue.close();
        self.counts.fetch_or(Counts::SHUTDOWN, Ordering::AcqRel);
    }

    /// Frees the tables and the memory of a pool inherited through `fork`, without shutting
    /// down; its spawner and parkers (they may hold the parent's locks) are kept unused.
    ///
    /// # Safety
    /// In a child after `fork`; `raw` came from `new` and nothing else uses it.
    #[cfg(feature = "std")]
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) unsafe fn free_inherited(raw: *mut Inner<S>) {
        // SAFETY: from `new` (a leaked box); `ManuallyDrop` has the same layout, so dropping
        // this box frees the memory without running the fields' destructors.
        let mut inner = unsafe { Box::from_raw(raw.cast::<core::mem::ManuallyDrop<Inner<S>>>()) };
        // The slots hold parkers: kept with the spawner and the join parker, never dropped.
        crate::keep::keep(core::mem::take(&mut inner.slots));
        drop(core::mem::take(&mut inner.idle_map));
        // SAFETY: moved out once from memory that is freed without dropping its fields.
        crate::keep::keep(unsafe { ptr::read(&inner.join_parker) });
        // SAFETY: as above.
        crate::keep::keep(unsafe { ptr::read(&inner.spawner) });
    }

    #[inline]
    fn counts(&self) -> Counts {
        Counts(self.counts.load(Ordering::Relaxed))
    }

    pub(crate) fn metrics(&self) -> BlockingMetrics {
        let t = &self.totals;
        BlockingMetrics {
            threads: self.counts().threads(),
            idle_threads: self.idle.load(Ordering::Relaxed),
            queue_depth: self.queued.load(Ordering::Relaxed),
            tasks_run: t.run.load(Ordering::Relaxed),
            tasks_cancelled: t.cancelled.load(Ordering::Relaxed),
            threads_spawned: t.spawned.load(Ordering::Relaxed),
            threads_exited: t.exited.load(Ordering::Relaxed),
            spawn_failures: t.spawn_failures.load(Ordering::Relaxed),
            peak_threads: t.peak.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn is_pool_thread(&self) -> bool {
        super::same_pool(self.spawner.current_worker(), ptr::from_ref(self).cast())
    }

    // ----------------------------------------------------------------------------------------
    // Submitting

    /// See `BlockingPool::submit`.
    ///
    /// # Safety
    /// As `BlockingPool::submit`.
    pub(crate) unsafe fn submit(&self, task: NonNull<BlockingTask>) -> Result<(), Error> {
        // SAFETY: the caller's contract: a valid task, ours until queued.
        if unsafe { task.as_ref() }.task.callback().is_none() {
            return Err(Error::InvalidArgument);
        }
        // Announce the task before looking at the threads. This fence is the submit side of
        // three Dekker pairs (module table): with `leave` (either we see the place released and
        // start a thread first, or the leaving thread sees `queued > 0` and comes back), with
        // `idle_wait` and with `on_start` (the loads in `notify`).
        self.queued.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let mut started = false;
        loop {
            let counts = self.counts();
            if counts.shutdown() {
                self.unqueue();
                return Err(Error::Shutdown);
            }
            if counts.threads() == 0 {
                // No thread: start one before queueing, so that a pool which cannot run the
                // task says so instead of accepting it.
                match self.spawn_one() {
                    Spawn::Started => started = true,
                    // Another submit reserved the first place meanwhile (or shutdown began):
                    // look again.
                    Spawn::NotNeeded => continue,
                    Spawn::Failed if self.counts().threads() == 0 => {
                        self.unqueue();
                        return Err(Error::Spawn);
                    }
                    Spawn::Failed => continue,
                }
            } else if counts.threads() == 1 && counts.spawning() {
                // The only thread is another submit's start in flight, which may still fail:
                // wait for it to resolve, so that we either have a thread or report that we
                // have none. Rare (only while the pool has no running thread) and short (one
                // thread start).
                spin_hint();
                continue;
            }
            break;
        }
        if self.queue.push(Batch::from(task.cast::<Task>()), true).is_err() {
            self.unqueue();
            return Err(Error::Shutdown);
        }
        // A thread we just started finds the task by itself (it drains before idling).
        if !started {
            self.notify();
        }
        Ok(())
    }

    /// Takes back a `queued` announcement whose task was not queued.
    #[inline]
    fn unqueue(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
    }

    /// A task was pushed: wake an idle thread, or start one.
    fn notify(&self) {
        // No fence here: the one in `submit`, after `queued += 1`, already orders our
        // announcement before the loads below. It pairs with the fence in `idle_wait` (either
        // we see that thread in `idle`, and then its bit, or it sees `queued > 0` and does not
        // park) and with the one in `on_start` (if we see SPAWNING, the starting thread sees
        // our task in `queued`).
        if self.idle.load(Ordering::Relaxed) > 0 && self.wake_one() {
            return;
        }
        // Not started (cap, a start in flight, shutdown) or failed: the task waits in the FIFO
        // for a thread that is running or starting, each of which drains it before idling.
        let _ = self.spawn_one();
    }

    /// Notifies the idle thread in the lowest slot (so the high slots time out and the pool
    /// shrinks). Returns false if no thread could be taken out of the idle set.
    fn wake_one(&self) -> bool {
        for (w, word) in self.idle_map.iter().enumerate() {
            // Acquire: pairs with the owner's Release `fetch_or`, so its `idle += 1` is visible
            // before we decrement `idle` for it.
            let mut bits = word.load(Ordering::Acquire);
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let slot = &self.slots[w * usize::BITS as usize + bit];
                // The one transition a notifier makes. Success means the owner will see
                // NOTIFIED after it wakes, and not exit.
                if slot.state.compare_exchange(IDLE, NOTIFIED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    self.idle.fetch_sub(1, Ordering::Relaxed);
                    slot.parker.unpark();
                    return true;
                }
            }
        }
        false
    }

    /// Reserves a place (`threads + 1`, and SPAWNING when `spawning`) if the cap, the flags
    /// and shutdown allow. The thread start (`spawning`) requires that no other start is in
    /// flight; a leaving thread coming back does not. On failure, returns the counts that
    /// refused it.
    fn try_reserve(&self, spawning: bool) -> Result<(), Counts> {
        let add = Counts::ONE_THREAD | if spawning { Counts::SPAWNING } else { 0 };
        let mut raw = self.counts.load(Ordering::Relaxed);
        loop {
            let c = Counts(raw);
            if c.shutdown() || c.threads() >= self.cap || (spawning && c.spawning()) {
                return Err(c);
            }
            // AcqRel: the count is part of the Dekker pairs (with fences around it) and the
            // shutdown bit must not be missed.
            match self.counts.compare_exchange_weak(raw, raw + add, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    self.totals.peak.fetch_max(c.threads() + 1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(actual) => raw = actual,
            }
        }
    }

    /// Releases `amount` from the counts word (a place, and maybe SPAWNING). The release that
    /// takes the last place while shutting down wakes the thread waiting in `shutdown`.
    fn release(&self, amount: usize) {
        let prev = Counts(self.counts.fetch_sub(amount, Ordering::AcqRel));
        debug_assert!(prev.threads() >= 1, "released a place that was not reserved: {prev:?}");
        if prev.shutdown() && prev.threads() == 1 {
            self.join_parker.unpark();
        }
    }

    /// Takes an EMPTY slot for a reserved place. One always exists: a slot is non-EMPTY only
    /// while its place is counted (owners empty their slot before releasing the place), and
    /// our own place is counted without a slot. The scan may still miss one while others
    /// claim and release concurrently, so it repeats.
    fn claim_slot(&self) -> &Slot<S> {
        loop {
            for slot in self.slots.iter() {
                // Acquire: pairs with the previous owner's Release store of EMPTY.
                if slot.state.load(Ordering::Relaxed) == EMPTY
                    && slot.state.compare_exchange(EMPTY, RUNNING, Ordering::Acquire, Ordering::Relaxed).is_ok()
                {
                    return slot;
                }
            }
            spin_hint();
        }
    }

    /// Starts one thread if no start is in flight and the cap allows.
    fn spawn_one(&self) -> Spawn {
        if self.try_reserve(true).is_err() {
            return Spawn::NotNeeded;
        }
        let slot = self.claim_slot();
        let start = ThreadStart { entry: thread_main::<S>, arg: ptr::from_ref(slot).cast_mut().cast() };
        match self.spawner.spawn(start, self.stack_size) {
            Ok(()) => {
                self.totals.spawned.fetch_add(1, Ordering::Relaxed);
                Spawn::Started
            }
            Err(_) => {
                self.totals.spawn_failures.fetch_add(1, Ordering::Relaxed);
                // Release: nothing of ours is left in the slot for its next owner.
                slot.state.store(EMPTY, Ordering::Release);
                self.release(Counts::ONE_THREAD | Counts::SPAWNING);
                Spawn::Failed
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // The thread loop

    /// The body of every pool thread: pass on the SPAWNING token, then drain / idle until the
    /// keep-alive expires or shutdown, and leave (or come back, see `leave`).
    fn thread_loop(&self, first: &Slot<S>) {
        let mut slot = first;
        self.spawner.set_current_worker(ptr::from_ref(slot).cast());
        self.on_start();
        loop {
            self.drain(&slot.parker);
            // Shutdown: leave once the queue is drained. Otherwise idle; notified (or work
            // seen), drain again; keep-alive expired, leave.
            if !self.counts().shutdown() && self.idle_wait(slot) == Woken::Work {
                continue;
            }
            match self.leave(slot) {
                Some(next) => {
                    slot = next;
                    self.spawner.set_current_worker(ptr::from_ref(slot).cast());
                }
                None => break,
            }
        }
        self.spawner.set_current_worker(ptr::null());
    }

    /// A new thread hands back the SPAWNING token it was started with, and starts the next
    /// thread if work is still waiting beyond the task it will take and no thread is idle
    /// (the spawn cascade: one start in flight at a time, each new thread starting the next).
    fn on_start(&self) {
        self.counts.fetch_and(!Counts::SPAWNING, Ordering::AcqRel);
        // Pairs with the fence in `notify`: a submit that saw SPAWNING (and so did not start a
        // thread) has its task counted in the `queued` we read here.
        fence(Ordering::SeqCst);
        if self.queued.load(Ordering::Relaxed) > 1 && self.idle.load(Ordering::Relaxed) == 0 {
            let _ = self.spawn_one();
        }
    }

    /// Runs (or, during shutdown, cancels) tasks until `queued` is zero.
    ///
    /// `queued > 0` with nothing to pop is transient: a push between its announcement and its
    /// link, another thread holding the consumer end for one pop, or a pop not yet counted. We
    /// spin briefly, then back off on `parker` in 50 µs naps (no clock needed).
    fn drain(&self, parker: &S::Parker) {
        let mut misses = 0u32;
        loop {
            if let Some(task) = self.pop() {
                self.execute(task);
                misses = 0;
                continue;
            }
            if self.queued.load(Ordering::Acquire) == 0 {
                return;
            }
            misses += 1;
            if misses < 64 {
                spin_hint();
            } else {
                parker.park_timeout(Duration::from_micros(50));
            }
        }
    }

    /// Pops one task (holding the consumer end only for the pop).
    fn pop(&self) -> Option<NonNull<Task>> {
        let mut consumer = self.queue.try_lock()?;
        let task = consumer.pop();
        drop(consumer);
        if task.is_some() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        task
    }

    /// Runs a dequeued task, or hands it back through its cancel callback if shutdown has
    /// begun and it is neither mandatory nor without a cancel callback.
    fn execute(&self, task: NonNull<Task>) {
        // SAFETY: `submit` only queues the `task` field of a `BlockingTask`, which is its first
        // field (repr(C)); it stays valid and unmodified until one of its callbacks starts.
        let (cancel, flags) = unsafe {
            let header = task.cast::<BlockingTask>();
            ((*header.as_ptr()).cancel, (*header.as_ptr()).flags)
        };
        if flags & BlockingTask::MANDATORY == 0 && self.counts().shutdown() {
            if let Some(cancel) = cancel {
                // SAFETY: dequeued, so this is its one callback; the pool does not touch the
                // task afterwards.
                unsafe { crate::task::call(cancel, task.as_ptr()) };
                self.totals.cancelled.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        // SAFETY: dequeued, so this is its one run.
        unsafe { Task::run(task) };
        self.totals.run.fetch_add(1, Ordering::Relaxed);
    }

    /// Joins the idle set and parks until notified or the keep-alive expires.
    fn idle_wait(&self, slot: &Slot<S>) -> Woken {
        // Order: state, count, bit. A notifier that finds the bit (Acquire) sees the count it
        // will decrement; one that sees only the count and not the bit is covered by the fence.
        slot.state.store(IDLE, Ordering::Release);
        self.idle.fetch_add(1, Ordering::Relaxed);
        self.set_idle_bit(slot.index);
        // Pairs with the fences in `notify` and `begin_shutdown`: either the submitter sees us
        // (count, bit, IDLE) or we see its `queued`; either shutdown sees our IDLE or we see
        // SHUTDOWN.
        fence(Ordering::SeqCst);
        if self.queued.load(Ordering::Relaxed) > 0 || self.counts().shutdown() {
            return self.stop_idling(slot);
        }
        let start = self.clock.map(|now| now());
        loop {
            let timeout = match (self.clock, start) {
                (Some(now), Some(t0)) => match self.remaining(now, t0) {
                    Some(d) => d,
                    None => break,
                },
                _ => self.keep_alive,
            };
            if timeout.is_zero() {
                break;
            }
            slot.parker.park_timeout(timeout);
            // Acquire: pairs with the notifier's AcqRel CAS.
            if slot.state.load(Ordering::Acquire) == NOTIFIED {
                self.woken(slot);
                return Woken::Work;
            }
            // Still IDLE: a timeout, or a spurious return. Without a clock we cannot tell: treat
            // it as the timeout (module docs). With one, `remaining` decides.
            if self.clock.is_none() {
                break;
            }
        }
        // Keep-alive expired: leave the idle set for good, unless a notifier got there first.
        match slot.state.compare_exchange(IDLE, EXITING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                self.clear_idle_bit(slot.index);
                self.idle.fetch_sub(1, Ordering::Relaxed);
                Woken::TimedOut
            }
            Err(_) => {
                self.woken(slot);
                Woken::Work
            }
        }
    }

    /// Leaves the idle set before parking (work or shutdown was seen).
    fn stop_idling(&self, slot: &Slot<S>) -> Woken {
        match slot.state.compare_exchange(IDLE, RUNNING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                self.clear_idle_bit(slot.index);
                self.idle.fetch_sub(1, Ordering::Relaxed);
            }
            // NOTIFIED: the notifier already took us out of `idle`.
            Err(_) => self.woken(slot),
        }
        Woken::Work
    }

    /// The owner of a NOTIFIED slot takes the notification.
    fn woken(&self, slot: &Slot<S>) {
        debug_assert_eq!(slot.state.load(Ordering::Relaxed), NOTIFIED);
        self.clear_idle_bit(slot.index);
        slot.state.store(RUNNING, Ordering::Relaxed);
    }

    /// Time left of the keep-alive that started at `t0`; `None` once it has passed.
    fn remaining(&self, now: Clock, t0: u64) -> Option<Duration> {
        let keep = u64::try_from(self.keep_alive.as_nanos()).unwrap_or(u64::MAX);
        let elapsed = now().saturating_sub(t0);
        (elapsed < keep).then(|| Duration::from_nanos(keep - elapsed))
    }

    fn set_idle_bit(&self, index: usize) {
        let (w, b) = (index / usize::BITS as usize, index % usize::BITS as usize);
        // Release: pairs with the Acquire scan in `wake_one` (publishes `idle += 1`).
        self.idle_map[w].fetch_or(1 << b, Ordering::Release);
    }

    fn clear_idle_bit(&self, index: usize) {
        let (w, b) = (index / usize::BITS as usize, index % usize::BITS as usize);
        self.idle_map[w].fetch_and(!(1 << b), Ordering::Relaxed);
    }

    /// The thread leaves: it empties its slot, releases its place, and exits, unless a task
    /// was submitted meanwhile and it can take a place again (it then returns the slot it runs
    /// in from now on).
    fn leave(&self, slot: &Slot<S>) -> Option<&Slot<S>> {
        // Slot first, place second: keeps "a slot is non-EMPTY only while its place is
        // counted" (see `claim_slot`). Release: our last use of the slot happens before the
        // next owner's claim.
        slot.state.store(EMPTY, Ordering::Release);
        let prev = Counts(self.counts.fetch_sub(Counts::ONE_THREAD, Ordering::AcqRel));
        debug_assert!(prev.threads() >= 1, "a thread left without a place: {prev:?}");
        // Pairs with the fence in `submit`: a submit that still counted us (and so started no
        // thread) has announced its task in the `queued` we read here.
        fence(Ordering::SeqCst);
        if !prev.shutdown() && self.queued.load(Ordering::Relaxed) > 0 {
            loop {
                match self.try_reserve(false) {
                    Ok(()) => return Some(self.claim_slot()),
                    // Full, and one of the places is a start in flight, which may still fail
                    // and give its place back: wait for it to resolve, then try again (else the
                    // task could be left with no thread at all). Deciding on the counts that
                    // refused us, not on a later load, closes the window where the start fails
                    // between our attempt and our look.
                    Err(c) if !c.shutdown() && c.spawning() => spin_hint(),
                    // Full with running threads (they drain the queue before idling), or
                    // shutting down (shutdown drains it).
                    Err(_) => break,
                }
            }
        }
        self.totals.exited.fetch_add(1, Ordering::Relaxed);
        if prev.shutdown() && prev.threads() == 1 {
            self.join_parker.unpark();
        }
        None
    }

    // ----------------------------------------------------------------------------------------
    // Shutdown

    /// Closes the queue, sets SHUTDOWN and wakes every idle thread. Called once, by whoever
    /// claimed the gate.
    pub(crate) fn begin_shutdown(&self) {
        // From here every submit is refused (the queue's CLOSED bit is the linearisation
        // point: a push either got in before, and is drained below, or is refused).
        self.queue.close();
        self.counts.fetch_or(Counts::SHUTDOWN, Ordering::AcqRel);
        // Pairs with the fence in `idle_wait`: a thread going idle either sees SHUTDOWN or is
        // IDLE in the scan below.
        fence(Ordering::SeqCst);
        for slot in self.slots.iter() {
            if slot.state.compare_exchange(IDLE, NOTIFIED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                self.idle.fetch_sub(1, Ordering::Relaxed);
                slot.parker.unpark();
            }
        }
    }

    /// See `BlockingPool::shutdown`.
    pub(crate) fn shutdown(&self) -> Result<(), Error> {
        if self.is_pool_thread() {
            return Err(Error::InvalidArgument);
        }
        let Some(finishing) = self.gate.claim() else { return Err(Error::Shutdown) };
        self.begin_shutdown();
        // The threads drain the queue (running mandatory tasks, cancelling the rest) and
        // leave; the last one out unparks us (`leave` / `release`).
        while self.counts().threads() != 0 {
            self.join_parker.park();
        }
        // Acquire: everything the threads did happens before what follows.
        fence(Ordering::Acquire);
        // No thread can start any more, so this joins every thread the pool started, with no
        // lock of ours held.
        self.spawner.join_all();
        // Left-overs exist only if no thread was there to take them (every thread had exited
        // by keep-alive, or none could be started): mandatory ones run here, the rest are
        // handed back.
        self.drain(&self.join_parker);
        // The last access to `self`: a dropper waiting in `Drop` may free it from here.
        finishing.finish();
        Ok(())
    }
}

/// The entry point of every pool thread.
///
/// # Safety
/// `arg` points to a slot of a live pool, claimed for this thread. The pool is freed only after
/// `join_all`, which waits for this function to return.
unsafe extern "C" fn thread_main<S: Spawner>(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let slot = unsafe { &*arg.cast_const().cast::<Slot<S>>() };
    // SAFETY: `pool` was set at construction, before any thread started; the pool outlives us.
    let inner = unsafe { &*slot.pool };
    inner.thread_loop(slot);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Counts;

    #[test]
    fn counts_fields_do_not_overlap() {
        assert_eq!(Counts::SHUTDOWN & Counts::SPAWNING, 0);
        assert_eq!(Counts::SHUTDOWN & Counts::THREADS_MASK, 0);
        assert_eq!(Counts::SPAWNING & Counts::THREADS_MASK, 0);
        let c = Counts(Counts::SHUTDOWN | Counts::SPAWNING | 7);
        assert!(c.shutdown() && c.spawning());
        assert_eq!(c.threads(), 7);
        const { assert!(crate::BlockingConfig::MAX_THREADS < Counts::THREADS_MASK) };
    }
}
