//! Latent join frames: `join`'s second half stays private to its worker until another worker
//! asks for work (demand-driven promotion: the idea of heartbeat scheduling and lazy binary
//! splitting, with the "heartbeat" raised by idle workers instead of a timer).
//!
//! Offering every `b` on the join deque costs a push and a pop with a full fence per join: for
//! fine-grained recursion (fib) that is several times the work itself, and nearly every offer
//! is taken back by its owner anyway. So `join` records `b` as a **latent frame**: its task
//! pointer in the next slot of the worker's [`FrameStack`], owner-only memory in the worker's
//! context (no atomics, no fence). Only when the worker is *hungry* (a worker going idle asked
//! it for work: `Inner::raise_hunger`, from `sleep.rs`) does a `join` **promote** the *oldest*
//! latent frame: push its `b` on the join deque, where idle workers steal it, and wake one. The oldest frame is
//! the biggest piece of work left on this worker (the outermost unfinished `b`), so one
//! promotion feeds a thief for a long time, and two busy workers go on running their joins at
//! nearly sequential cost.
//!
//! Two kinds of frame share the stack:
//! * a **job frame**: the stack job of a `join`'s second half, or a forked `FnJob`
//!   (`join::fn_job`): popped by its own join, which runs it inline if it is still latent;
//! * a **task frame**: a plain task forked with `submit_fork` (`pool_fork` in C), which has no
//!   join: a wait of its forker pops it while it is the newest latent frame and runs it
//!   inline (`WorkerContext::wait_until`); whatever is left when the code that forked it is
//!   done goes to the join deque ([`truncate`](FrameStack::truncate)).
//!
//! # The record flag: a join's one test
//! A join records its `b` only while it is needed: while fewer than [`LATENT_SUPPLY`] frames are
//! latent (the outermost ones are what thieves get first, and the biggest), or while the worker
//! is hungry (the recording join promotes). Otherwise it runs both halves inline and records
//! nothing. Both conditions are summed up in one word the join reads, the worker's
//! [`Demand::record`] flag (a Relaxed load, no store): `true` sends the join down the recording
//! path. The owner keeps it equal to "supply short" after every change of its frames
//! ([`Demand::settle`]); an idle worker sets it when it raises the hunger ([`Demand::ask`]). The
//! two meet in a handshake of two SeqCst fences, so that a hunger is never missed:
//!
//! * the owner, clearing the flag (its supply became full): `record = false`; fence; if
//!   `hungry` then `record = true`;
//! * an idle worker: `hungry = true`; fence; `record = true`.
//!
//! Of the two fences one comes first in their total order. If the owner's does, the idle
//! worker's `record = true` follows the owner's `record = false` in the flag's modification
//! order, so the flag ends up set; if the idle worker's does, the owner's load sees `hungry`
//! and sets the flag itself. Either way the owner's next joins take the recording path until
//! it has served the hunger (`frame/loom.rs` checks this on the real type). Only the
//! owner lowers `hungry`, and only when it offered work.
//!
//! # Invariants (owner thread only: the stack lives in the `WorkerContext`, which is `!Sync`)
//! * The frames form a stack in call order. A job frame is pushed by its fork or `join` and
//!   popped by its join, and these nest like calls, so a job frame is popped when every frame
//!   above it is gone or is a task frame; the join first [truncates](FrameStack::truncate)
//!   the task frames above it. A task run from a queue leaves the stack as it found it (the
//!   scheduler truncates after each task).
//! * Slots `[0, latent_from)` are promoted (their tasks went to the join deque), slots
//!   `[latent_from, depth)` are latent (in no queue: only their owner knows them). Promotion
//!   goes oldest first, so this split is all the bookkeeping there is. A promoted task frame
//!   stays in its slot, as a placeholder, until a truncation drops it.
//! * After every operation of the stack, `record` is set if fewer than [`LATENT_SUPPLY`]
//!   frames are latent; it is clear only if that many are latent (or it was cleared, and an
//!   idle worker's `ask` is on its way: see above).
//! * At most [`FRAMES`] frames: a `join` nested deeper takes no frame and runs both halves
//!   inline, and a deeper fork goes to the join deque at once (promotion goes oldest first, so
//!   it would reach such frames only after [`FRAMES`] outer frames were offered, which a pool
//!   with fewer workers never needs).

use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::sync::{fence, AtomicBool, Ordering};
use crate::task::Task;

/// Latent frames a worker keeps to offer before it stops recording joins: the outermost ones
/// are the ones thieves get first, and the biggest.
pub(crate) const LATENT_SUPPLY: usize = 3;

/// The tag of a task frame in its slot (tasks are pointer-aligned: bit 0 is free).
const TASK_FRAME: usize = 1;

/// Slots in a worker's frame stack (the deepest join nesting whose frames can be promoted).
pub(crate) const FRAMES: usize = 64;

/// What decides a join's path, in the remote part of a worker (`Worker::demand`): idle
/// workers write it. See the module docs, "The record flag".
///
/// `repr(C)`, `record` first: the C header's inline fork reads the flag through the worker
/// context (`capi::job`, `pool_job_fork`).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Demand {
    /// Read by every `join` of the owner: `true` sends it down the recording path.
    record: AtomicBool,
    /// Raised by an idle worker that wants work ([`ask`](Self::ask)); lowered by the owner
    /// when it offered a frame, and raised again by it while the pool still wants work.
    hungry: AtomicBool,
}

// The record flag is the demand word's first byte (`repr(C)`): pool.h's inline fork reads it.
// (Loom's and shuttle's atomics are bigger: no C reads them.)
#[cfg(not(any(loom, shuttle)))]
const _: () = assert!(core::mem::offset_of!(Demand, record) == 0 && core::mem::size_of::<AtomicBool>() == 1);

impl Demand {
    /// A new worker's: hungry, so that the first join on a pool that may still start threads
    /// offers work (which starts one), and recording (no frame is latent yet).
    pub(crate) fn new() -> Self {
        Self { record: AtomicBool::new(true), hungry: AtomicBool::new(true) }
    }

    /// An idle worker asks this worker for work: its next join records and promotes. A
    /// hunger already raised is not written again (the flag's line stays with its owner).
    pub(crate) fn ask(&self) {
        if self.hungry.load(Ordering::Relaxed) {
            return;
        }
        self.hungry.store(true, Ordering::Relaxed);
        // SeqCst: the idle worker's half of the handshake (module docs): whoever fences
        // second sees the other's store.
        fence(Ordering::SeqCst);
        self.record.store(true, Ordering::Relaxed);
    }

    /// Whether an idle worker asked for work. Relaxed: a hint; the handshake in the module
    /// docs makes sure the owner gets here again while the hunger is up.
    #[inline(always)]
    pub(crate) fn is_hungry(&self) -> bool {
        self.hungry.load(Ordering::Relaxed)
    }

    /// Owner: lowers the hunger (it offered work). The flag stays as it is until the next
    /// change of the frames settles it.
    pub(crate) fn lower_hunger(&self) {
        self.hungry.store(false, Ordering::Relaxed);
    }

    /// Owner: keeps the hunger up (the pool still wants work after an offer), so that its next
    /// join offers again: hungry implies the flag is set (or an `ask` is about to set it).
    pub(crate) fn keep_hungry(&self) {
        self.hungry.store(true, Ordering::Relaxed);
        self.record.store(true, Ordering::Relaxed);
    }

    /// Whether the owner's next join takes the recording path: the whole test of the fast
    /// path, one Relaxed load of an owner-read word.
    #[inline(always)]
    pub(crate) fn must_record(&self) -> bool {
        self.record.load(Ordering::Relaxed)
    }

    /// Owner, after its frames changed: the flag says whether the supply is short (`!full`),
    /// or the worker is hungry. Stores only on a change.
    #[inline]
    fn settle(&self, full: bool) {
        let set = self.record.load(Ordering::Relaxed);
        if !full && !set {
            self.record.store(true, Ordering::Relaxed);
        } else if full && set {
            self.clear();
        }
    }

    /// Owner, with a full supply: clears the flag unless the worker is hungry (module docs).
    #[cold]
    fn clear(&self) {
        self.record.store(false, Ordering::Relaxed);
        // SeqCst: the owner's half of the handshake (module docs).
        fence(Ordering::SeqCst);
        if self.hungry.load(Ordering::Relaxed) {
            self.record.store(true, Ordering::Relaxed);
        }
    }
}

/// A worker's stack of latent join frames (see the module docs). Owner-only: `Cell`s.
///
/// `repr(C)`, `demand` first: the C header's inline fork finds the record flag through it
/// (`capi::job`).
#[repr(C)]
pub(crate) struct FrameStack {
    /// The worker's demand word (in its remote part, which outlives the context).
    pub(crate) demand: NonNull<Demand>,
    /// Frames pushed and not yet popped (at most `FRAMES`).
    depth: Cell<usize>,
    /// The first latent frame; slots below it are promoted. `<= depth`.
    latent_from: Cell<usize>,
    /// The frames' tasks by depth: a job frame's job header, or a task frame's task with
    /// [`TASK_FRAME`] set.
    slots: [Cell<*const Task>; FRAMES],
}

impl FrameStack {
    /// An empty stack whose record flag is `demand`'s.
    ///
    /// # Safety
    /// `demand` outlives the stack (it is read and written through the pointer).
    pub(crate) unsafe fn new(demand: NonNull<Demand>) -> Self {
        Self { demand, depth: Cell::new(0), latent_from: Cell::new(0), slots: [const { Cell::new(ptr::null()) }; FRAMES] }
    }

    /// The worker's demand word.
    #[inline(always)]
    pub(crate) fn demand(&self) -> &Demand {
        // SAFETY: `demand` outlives the stack (`new`'s contract).
        unsafe { self.demand.as_ref() }
    }

    /// Whether the next join records (module docs): the one test of a join's fast path.
    #[inline(always)]
    pub(crate) fn must_record(&self) -> bool {
        self.demand().must_record()
    }

    /// Frames pushed and not yet popped: the depth the next [`push`](Self::push) takes.
    #[inline(always)]
    pub(crate) fn depth(&self) -> usize {
        self.depth.get()
    }

    /// After a change of the frames: settles the record flag (module docs).
    #[inline(always)]
    fn settle(&self) {
        self.demand().settle(self.latent() >= LATENT_SUPPLY);
    }

    /// Pushes `task` as the newest, latent frame at `depth`, which is [`depth`](Self::depth)
    /// and below [`FRAMES`] (a deeper `join` takes no frame).
    #[inline(always)]
    pub(crate) fn push(&self, depth: usize, task: NonNull<Task>) {
        debug_assert_eq!(depth, self.depth.get());
        self.slots[depth].set(task.as_ptr());
        self.depth.set(depth + 1);
        self.settle();
    }

    /// Pushes `task` as the newest, latent *task* frame at `depth` (as [`push`](Self::push)).
    #[inline(always)]
    pub(crate) fn push_task(&self, depth: usize, task: NonNull<Task>) {
        debug_assert_eq!(depth, self.depth.get());
        self.slots[depth].set(task.as_ptr().map_addr(|a| a | TASK_FRAME));
        self.depth.set(depth + 1);
        self.settle();
    }

    /// The job of the job frame at `depth` (below [`FRAMES`], pushed and not popped); `None`
    /// for a task frame.
    #[inline]
    pub(crate) fn job_at(&self, depth: usize) -> Option<NonNull<Task>> {
        debug_assert!(depth < self.depth.get());
        let slot = self.slots[depth].get();
        if slot.addr() & TASK_FRAME != 0 {
            return None;
        }
        NonNull::new(slot.cast_mut())
    }

    /// The depth of the job frame of `job`, if every frame above it is a task frame (what a
    /// join may truncate before it pops its own).
    #[cold]
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn job_under_tasks(&self, job: NonNull<Task>) -> Option<usize> {
        (0..self.depth.get()).rev().map_while(|d| match self.job_at(d) {
            Some(j) if j == job => Some(Some(d)),
            Some(_) => None,
            None => Some(None),
        })
        .flatten()
        .next()
    }

    /// Pops the newest frame if it is a latent task frame, and returns its task (for the
    /// waiting forker to run inline).
    #[inline]
    pub(crate) fn pop_latent_task(&self) -> Option<NonNull<Task>> {
        let depth = self.depth.get();
        if depth == 0 || depth <= self.latent_from.get() {
            return None;
        }
        let slot = self.slots[depth - 1].get();
        if slot.addr() & TASK_FRAME == 0 {
            return None;
        }
        self.depth.set(depth - 1);
        self.settle();
        NonNull::new(slot.map_addr(|a| a & !TASK_FRAME).cast_mut())
    }

    /// Whether a latent frame is a task frame (which only a wait of its forker would run).
    #[cold]
    pub(crate) fn has_latent_task(&self) -> bool {
        (self.latent_from.get()..self.depth.get()).any(|d| self.slots[d].get().addr() & TASK_FRAME != 0)
    }

    /// Drops every frame at `base` and above (all task frames: see the invariants), handing
    /// each latent one's task to `hand_out` (oldest first); promoted ones are in the join
    /// deque already.
    #[cold]
    pub(crate) fn truncate(&self, base: usize, mut hand_out: impl FnMut(NonNull<Task>)) {
        let depth = self.depth.get();
        for d in base.max(self.latent_from.get())..depth {
            let slot = self.slots[d].get();
            debug_assert!(slot.addr() & TASK_FRAME != 0, "only task frames outlive their forker's code");
            if let Some(task) = NonNull::new(slot.map_addr(|a| a & !TASK_FRAME).cast_mut()) {
                hand_out(task);
            }
        }
        self.depth.set(base.min(depth));
        self.latent_from.set(self.latent_from.get().min(base));
        self.settle();
    }

    /// Pops the newest frame, pushed at `depth`; returns whether it was promoted (its task went
    /// to the join deque) rather than still private to this thread.
    #[inline(always)]
    pub(crate) fn pop(&self, depth: usize) -> bool {
        debug_assert_eq!(self.depth.get(), depth + 1, "join frames pop in reverse push order");
        self.depth.set(depth);
        let promoted = depth < self.latent_from.get();
        if promoted {
            // Every newer frame is gone: none is latent.
            self.latent_from.set(depth);
        }
        self.settle();
        promoted
    }

    /// Frames pushed, not popped and not offered: what promotion can still offer.
    #[inline(always)]
    pub(crate) fn latent(&self) -> usize {
        self.depth.get() - self.latent_from.get()
    }

    /// The oldest latent frame, if any, for the caller to offer: its task, and whether it is a
    /// task frame (a job frame's job must be offered before it is queued).
    #[inline]
    pub(crate) fn oldest_latent(&self) -> Option<(NonNull<Task>, bool)> {
        let from = self.latent_from.get();
        if from >= self.depth.get() {
            return None;
        }
        let slot = self.slots[from].get();
        let is_task = slot.addr() & TASK_FRAME != 0;
        NonNull::new(slot.map_addr(|a| a & !TASK_FRAME).cast_mut()).map(|t| (t, is_task))
    }

    /// Marks the oldest latent frame promoted (its task, from
    /// [`oldest_latent`](Self::oldest_latent), is now on the join deque).
    #[inline]
    pub(crate) fn mark_oldest_promoted(&self) {
        debug_assert!(self.latent_from.get() < self.depth.get());
        self.latent_from.set(self.latent_from.get() + 1);
        self.settle();
    }
}

#[cfg(all(test, loom))]
mod loom;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn task() -> Task {
        unsafe extern "C" fn nop(_: *mut Task) {}
        Task::new(nop)
    }

    #[test]
    fn promotion_goes_oldest_first_and_pop_reports_it() {
        let (mut t1, mut t2, mut t3) = (task(), task(), task());
        let (p1, p2, p3) = (NonNull::from(&mut t1), NonNull::from(&mut t2), NonNull::from(&mut t3));
        let demand = Demand::new();
        // SAFETY: `demand` outlives `stack` (declared first).
        let stack = unsafe { FrameStack::new(NonNull::from(&demand)) };
        assert_eq!(stack.oldest_latent(), None);
        let push = |p| {
            let d = stack.depth();
            stack.push(d, p);
            d
        };
        let d1 = push(p1);
        let d2 = push(p2);
        assert_eq!(stack.oldest_latent(), Some((p1, false)));
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), Some((p2, false)));
        let d3 = push(p3);
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), Some((p3, false)));
        assert_eq!(stack.job_at(d3), Some(p3));
        assert!(!stack.pop(d3), "f3 stayed latent");
        assert_eq!(stack.oldest_latent(), None, "f1 and f2 are promoted");
        assert!(stack.pop(d2));
        // A new inner frame after a promoted one is latent and the oldest latent.
        let d3 = push(p3);
        assert_eq!(stack.oldest_latent(), Some((p3, false)));
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), None);
        assert!(stack.pop(d3));
        assert!(stack.pop(d1));
        assert_eq!(stack.oldest_latent(), None);
    }

    #[test]
    fn task_frames_pop_while_latent_and_truncate_hands_out_the_latent_ones() {
        let (mut j, mut t1, mut t2, mut t3) = (task(), task(), task(), task());
        let (pj, p1, p2, p3) = (NonNull::from(&mut j), NonNull::from(&mut t1), NonNull::from(&mut t2), NonNull::from(&mut t3));
        let demand = Demand::new();
        // SAFETY: `demand` outlives `stack` (declared first).
        let stack = unsafe { FrameStack::new(NonNull::from(&demand)) };
        stack.push(0, pj);
        stack.push_task(1, p1);
        stack.push_task(2, p2);
        assert_eq!(stack.job_at(1), None, "a task frame is no job");
        assert_eq!(stack.pop_latent_task(), Some(p2));
        stack.push_task(2, p2);
        stack.push_task(3, p3);
        // Promotion goes oldest first, whatever the kind.
        assert_eq!(stack.oldest_latent(), Some((pj, false)));
        stack.mark_oldest_promoted();
        assert_eq!(stack.oldest_latent(), Some((p1, true)));
        stack.mark_oldest_promoted();
        // The job's frame is found under the task frames; truncating above it hands out the
        // latent ones (t2, t3), not the promoted t1.
        assert_eq!(stack.job_under_tasks(pj), Some(0));
        let mut out = [None; 3];
        let mut n = 0;
        stack.truncate(1, |t| {
            out[n] = Some(t);
            n += 1;
        });
        assert_eq!(out, [Some(p2), Some(p3), None]);
        assert_eq!(stack.depth(), 1);
        assert_eq!(stack.pop_latent_task(), None, "a job frame is no task frame");
        assert!(stack.pop(0), "the job was promoted");
    }

    #[test]
    fn the_record_flag_follows_the_supply_and_the_hunger() {
        let tasks: [Task; LATENT_SUPPLY + 1] = core::array::from_fn(|_| task());
        let ptrs: [NonNull<Task>; LATENT_SUPPLY + 1] = core::array::from_fn(|i| NonNull::from(&tasks[i]));
        let demand = Demand::new();
        // SAFETY: `demand` outlives `stack` (declared first).
        let stack = unsafe { FrameStack::new(NonNull::from(&demand)) };
        // A new worker is hungry: its first join records and promotes.
        assert!(stack.must_record() && demand.is_hungry());
        demand.lower_hunger();
        for (d, &p) in ptrs.iter().enumerate().take(LATENT_SUPPLY) {
            assert!(stack.must_record(), "{d} latent frames: the supply is short");
            stack.push(d, p);
        }
        assert!(!stack.must_record(), "a full supply: joins record nothing");
        // An idle worker asks: the flag goes up whatever the supply.
        demand.ask();
        assert!(stack.must_record() && demand.is_hungry());
        // The recording join pushes (the supply stays full: the flag stays, hungry is up),
        // promotes the oldest frame and lowers the hunger.
        stack.push(LATENT_SUPPLY, ptrs[LATENT_SUPPLY]);
        assert!(stack.must_record(), "hungry: the flag stays up until served");
        stack.mark_oldest_promoted();
        demand.lower_hunger();
        // The join pops its frame: the supply is short again (one frame went to the deque).
        assert!(!stack.pop(LATENT_SUPPLY));
        assert_eq!(stack.latent(), LATENT_SUPPLY - 1);
        assert!(stack.must_record());
        // The next recorded join fills it, and with nobody hungry the flag clears.
        stack.push(LATENT_SUPPLY, ptrs[LATENT_SUPPLY]);
        assert!(!stack.must_record());
        // A hunger raised while the flag is clear sets it; asking again changes nothing.
        demand.ask();
        demand.ask();
        assert!(stack.must_record());
    }
}
