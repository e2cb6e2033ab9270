//! The blocking pool's shared state ([`Inner`]) and the submit / notify / spawn / shutdown
//! transitions; a thread's own loop is `thread.rs`. The protocol is argued in `src/blocking/README.md`; the comments here name the
//! pairing of each fence.
//!
//! Every cross-thread decision here and in `thread.rs` is one of four "Dekker pairs": each side writes its
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

use core::ptr::{self, NonNull};
use core::time::Duration;

use alloc::boxed::Box;

use crate::error::Error;
use crate::fallible::{try_box, try_boxed_slice};
use crate::platform::{Parker, PoolLink, Spawner};
use crate::queue::injector::Injector;
use crate::shutdown::ShutdownGate;
use crate::sync::{fence, spin_hint, AtomicU32, AtomicUsize, CachePadded, IdleSet, Ordering};
use crate::task::{Batch, Task};

use super::config::BlockingConfig;
use super::counts::{admit, Counts};
use super::metrics::BlockingMetrics;
use super::slot::{EMPTY, IDLE, NOTIFIED, RUNNING};
use super::task::BlockingTask;

/// One thread's place in the pool: its state and its parker. Lives as long as the pool, so a
/// notifier may unpark it at any time without racing with the thread's exit.
pub(crate) struct Slot<S: Spawner> {
    /// The pool.
    pub(super) pool: *const Inner<S>,
    /// Index in `Inner::slots` (and bit in `Inner::idle_set`).
    pub(super) index: usize,
    /// EMPTY, RUNNING, IDLE, NOTIFIED or EXITING.
    pub(super) state: AtomicU32,
    /// What the owner parks on while IDLE (and backs off on while draining).
    pub(super) parker: S::Parker,
}

/// Totals for [`BlockingMetrics`]; Relaxed counters, never used for synchronisation.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub(super) run: AtomicUsize,
    pub(super) cancelled: AtomicUsize,
    pub(super) spawned: AtomicUsize,
    pub(super) exited: AtomicUsize,
    pub(super) spawn_failures: AtomicUsize,
    pub(super) peak: AtomicUsize,
    pub(super) refused: AtomicUsize,
}

/// What `spawn_one` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Spawn {
    /// A thread was started (it holds the SPAWNING token until it runs).
    Started,
    /// None was started: at the cap, another start in flight, or shutting down.
    NotNeeded,
    /// The platform refused to start a thread.
    Failed,
}

/// Why `idle_wait` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Woken {
    /// Notified, or work (or shutdown) seen before parking: look for work.
    Work,
    /// The keep-alive expired; the slot is EXITING.
    TimedOut,
}

/// The state shared by the pool's handle and its threads. Heap-allocated, never moved.
pub(crate) struct Inner<S: Spawner> {
    /// See [`Counts`]. Padded: every submit and every thread start or exit touches it.
    pub(super) counts: CachePadded<AtomicUsize>,
    /// Threads in the idle set (slot IDLE). Incremented by the owner; decremented by whoever
    /// moves the slot out of IDLE.
    pub(super) idle: CachePadded<AtomicUsize>,
    /// Tasks accepted and not yet taken (plus submits in flight: incremented *before* the push,
    /// decremented after a pop or a refused push). Never zero while a task is in the queue.
    pub(super) queued: CachePadded<AtomicUsize>,
    /// The bound on `queued` (`BlockingConfig::max_queued`; 0: none). Read by every submit,
    /// written by `set_max_queued`.
    pub(super) max_queued: AtomicUsize,
    /// The intrusive FIFO (MPSC with a try-locked consumer end; `queue::injector`).
    pub(super) queue: Injector,
    /// One slot per thread the cap allows.
    pub(super) slots: Box<[Slot<S>]>,
    /// One bit per slot, set by the owner while IDLE, cleared by the owner when it leaves IDLE.
    /// A hint for notifiers (a set bit may be stale; the slot's CAS decides).
    pub(super) idle_set: IdleSet,
    /// The cap (1 ..= BlockingConfig::MAX_THREADS).
    pub(crate) cap: usize,
    pub(super) keep_alive: Duration,
    pub(super) stack_size: usize,
    /// The thread in `shutdown` sleeps on this until the last thread leaves.
    pub(super) join_parker: S::Parker,
    /// Claimed by the first shutdown; the dropper waits on it (`crate::shutdown`).
    pub(crate) gate: ShutdownGate,
    pub(super) totals: Totals,
    pub(crate) spawner: S,
    /// The pool's entry in its platform's registry (tracked once boxed, untracked in `drop`):
    /// closed in a child after `fork` (`fork.rs`).
    pub(crate) link: PoolLink,
    /// Null. Its address is what this pool's threads store as their current worker
    /// (`Spawner::set_current_worker`, `is_pool_thread`); code that reads a current worker as
    /// the head of a worker context (`ContextHead::pool`, the pool whose waiting loop the
    /// thread runs) finds none in it.
    pub(super) thread_mark: *const (),
}

impl<S: Spawner> Drop for Inner<S> {
    fn drop(&mut self) {
        // SAFETY: tracked once boxed (`new`), and freed only after this.
        unsafe { self.spawner.untrack_pool(NonNull::from(&self.link)) };
    }
}

impl<S: Spawner> Inner<S> {
    /// Allocates the pool (slots and parkers included) and leaks it; `BlockingPool` frees it.
    pub(crate) fn new(config: BlockingConfig, spawner: S) -> Result<NonNull<Self>, Error> {
        let raw: *mut Inner<S> = Box::into_raw(try_box(Self::build(config, spawner)?)?);
        // SAFETY: just allocated and not shared yet.
        unsafe { Self::point_slots_at(raw) };
        // SAFETY: boxed, so the link stays put until the drop untracks it.
        unsafe { (*raw).spawner.track_pool(NonNull::from(&(*raw).link)) };
        // SAFETY: Box::into_raw never returns null.
        Ok(unsafe { NonNull::new_unchecked(raw) })
    }

    /// Points every slot at the pool state at `raw` (where it now lives).
    ///
    /// # Safety
    /// `raw` is a valid `Inner` that nothing else accesses yet.
    pub(super) unsafe fn point_slots_at(raw: *mut Inner<S>) {
        // SAFETY: the caller's contract: exclusive access through `raw`.
        for slot in unsafe { (*raw).slots.iter_mut() } {
            slot.pool = raw.cast_const();
        }
    }

    /// The state for `config`, not yet in its place (slots not pointed at it yet).
    pub(super) fn build(config: BlockingConfig, spawner: S) -> Result<Self, Error> {
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
        let idle_words = try_boxed_slice(IdleSet::words_for(cap), |_| AtomicUsize::new(0))?;
        Ok(Inner {
            counts: CachePadded(AtomicUsize::new(0)),
            idle: CachePadded(AtomicUsize::new(0)),
            queued: CachePadded(AtomicUsize::new(0)),
            max_queued: AtomicUsize::new(config.max_queued),
            queue: Injector::new(),
            slots,
            idle_set: IdleSet::from_words(idle_words),
            cap,
            keep_alive: config.keep_alive,
            stack_size: config.stack_size,
            join_parker: spawner.new_parker(),
            gate: ShutdownGate::new(),
            totals: Totals::default(),
            spawner,
            link: PoolLink::new(Self::close_on_fork),
            thread_mark: ptr::null(),
        })
    }

    /// The error for work this pool refuses after its shutdown began: shut down, or inherited
    /// through `fork()` (closed in the child, `fork.rs`).
    #[cold]
    pub(super) fn refusal(&self) -> Error {
        if self.link.is_inherited() {
            Error::Forked
        } else {
            Error::Shutdown
        }
    }

    #[inline]
    pub(super) fn counts(&self) -> Counts {
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
            tasks_refused: t.refused.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn is_pool_thread(&self) -> bool {
        self.spawner.current_worker() == ptr::from_ref(&self.thread_mark).cast()
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
        if !self.announce() {
            // A closed pool says so, full or not.
            if self.counts().shutdown() || self.link.is_inherited() {
                return Err(self.refusal());
            }
            self.totals.refused.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Full);
        }
        fence(Ordering::SeqCst);
        let mut started = false;
        loop {
            let counts = self.counts();
            if counts.shutdown() {
                self.unqueue();
                return Err(self.refusal());
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
            return Err(self.refusal());
        }
        // A thread we just started finds the task by itself (it drains before idling).
        if !started {
            self.notify();
        }
        Ok(())
    }

    /// Announces a task (`queued += 1`), unless the queue holds `max_queued` tasks already
    /// (then false, nothing changed). Relaxed: the fence after it in `submit` orders it.
    #[inline]
    fn announce(&self) -> bool {
        let bound = self.max_queued.load(Ordering::Relaxed);
        if bound == 0 {
            self.queued.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        let mut queued = self.queued.load(Ordering::Relaxed);
        while let Some(next) = admit(queued, bound) {
            match self.queued.compare_exchange_weak(queued, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => queued = now,
            }
        }
        false
    }

    /// See `BlockingPool::set_max_queued`.
    pub(crate) fn set_max_queued(&self, max_queued: usize) {
        self.max_queued.store(max_queued, Ordering::Relaxed);
    }

    /// Takes back a `queued` announcement whose task was not queued.
    #[inline]
    pub(super) fn unqueue(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
    }

    /// A task was pushed: wake an idle thread, or start one.
    pub(super) fn notify(&self) {
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
    pub(super) fn wake_one(&self) -> bool {
        // Acquire: pairs with the owner's Release insert (`set_idle_bit`), so its `idle += 1`
        // is visible before we decrement `idle` for it.
        for index in self.idle_set.iter(Ordering::Acquire) {
            let slot = &self.slots[index];
            // The one transition a notifier makes. Success means the owner will see NOTIFIED
            // after it wakes, and not exit.
            if slot.state.compare_exchange(IDLE, NOTIFIED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                self.idle.fetch_sub(1, Ordering::Relaxed);
                slot.parker.unpark();
                return true;
            }
        }
        false
    }

    /// Reserves a place (`threads + 1`, and SPAWNING when `spawning`) if the cap, the flags
    /// and shutdown allow. The thread start (`spawning`) requires that no other start is in
    /// flight; a leaving thread coming back does not. On failure, returns the counts that
    /// refused it.
    pub(super) fn try_reserve(&self, spawning: bool) -> Result<(), Counts> {
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
    pub(super) fn release(&self, amount: usize) {
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
    pub(super) fn claim_slot(&self) -> &Slot<S> {
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
        if self.link.is_inherited() {
            return Err(Error::Forked);
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
