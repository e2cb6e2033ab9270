//! The pool's timing wheel ([`Timers`]) and its intrusive [`Entry`].
//!
//! A hierarchical wheel in tokio's form: [`LEVELS`] levels of 64 slots; a slot of level `l`
//! spans `64^l` ticks of [`TICK_NS`] (2^20 ns, about 1.05 ms), so the six levels cover 2^36
//! ticks (about two years; a deadline further away is placed at [`MAX_AHEAD`] ticks and placed
//! again when that slot comes up). An entry goes to the lowest level whose slot boundary
//! separates its deadline from `elapsed` (the last tick the wheel processed); when the wheel
//! advances into a slot of level `l > 0`, that slot's entries move down to finer levels, so
//! each entry is moved at most [`LEVELS`] times whatever its deadline.
//!
//! # Entries
//! An [`Entry`] lives in the timer's own memory (the pinned `Sleep` future, or the small box of
//! a delayed task): the wheel links it into a slot's doubly linked list, so inserting and
//! cancelling allocate nothing and are O(1). Its `state` is `IDLE` (not in the wheel),
//! `QUEUED` (linked) or `FIRED` (unlinked by the wheel, action taken).
//!
//! # Locking
//! One spin lock guards the wheel and every entry's links and action. Held only for O(1) list
//! operations and for moving a bounded batch of expired entries out ([`FIRE_BATCH`]); the
//! actions themselves (waking a task, queueing a delayed task) run after it is released, and
//! so does every drop of a waker (dropping a task's last waker may free the task, whose future
//! may own another timer: its drop takes the lock again).
//!
//! The owner of an entry reads `state` without the lock: `FIRED` is stored (Release) under the
//! lock after the wheel's last access to the entry, so an owner that sees it (Acquire) may
//! free the entry at once. An owner that sees `QUEUED` takes the lock to unlink.
//!
//! # The next deadline
//! `next_tick` is the earliest tick at which the wheel has work (a slot start: an entry's
//! deadline or a cascade), `NONE` when it is empty. Written under the lock after every change
//! but a cancel (which leaves it early: a wake-up for nothing), and read under the lock too
//! (`Timers::next_tick`): the lock's Release and Acquire order it with the timer role's claim
//! (`scheduler::park`). Without the lock, `pending` (the entries in the wheel) says whether
//! there is any: the workers' tick end and their park decision read that (`scheduler`). A
//! 64-bit atomic would do for `next_tick` only where the target has one: elsewhere its
//! emulation costs a global lock table and some 400 bytes of code.

use core::marker::PhantomPinned;
use core::ptr::{self, NonNull};
use core::task::Waker;

use self::batch::Batch;
use crate::sync::{spin_hint, AtomicU32, AtomicUsize, Locked, Ordering, TryLock, UnsafeCell};

mod batch;

/// Levels of the wheel.
pub(crate) const LEVELS: usize = 6;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
/// log2 of a tick in nanoseconds.
pub(crate) const TICK_SHIFT: u32 = 20;
/// One tick of the wheel in nanoseconds (2^20: a shift, not a division).
pub(crate) const TICK_NS: u64 = 1 << TICK_SHIFT;
/// Deadlines further than this many ticks from `elapsed` are placed here, and again later.
pub(crate) const MAX_AHEAD: u64 = 1 << 35;
/// `next_tick` when the wheel is empty.
pub(crate) const NONE: u64 = u64::MAX;
/// Most expired entries moved out per lock hold (their actions then run unlocked).
pub(crate) const FIRE_BATCH: usize = if cfg!(loom) { 2 } else { 32 };

/// The first tick at whose start `deadline_ns` has passed (rounded up: a timer never fires
/// early).
#[inline]
pub(crate) fn tick_for_deadline(deadline_ns: u64) -> u64 {
    deadline_ns.div_ceil(TICK_NS)
}

/// The tick a clock reading falls in (rounded down).
#[inline]
pub(crate) fn tick_of(now_ns: u64) -> u64 {
    now_ns >> TICK_SHIFT
}

const IDLE: u32 = 0;
const QUEUED: u32 = 1;
const FIRED: u32 = 2;

/// What firing an entry does.
pub(crate) enum Action {
    /// Nothing (the entry is not in the wheel).
    None,
    /// Wake a task (a `Sleep`).
    Wake(Waker),
    /// Call `f(entry)`, which from then on owns the entry (a delayed task: it frees the box and
    /// queues the task). `shutdown`: the pool is shutting down.
    Call(unsafe fn(NonNull<Entry>, bool)),
}

/// The wheel's part of an entry (guarded by the wheel's lock).
struct Links {
    prev: *mut Entry,
    next: *mut Entry,
    /// The deadline tick.
    tick: u64,
    level: u8,
    slot: u8,
    action: Action,
}

/// A timer's node in the wheel, embedded in the timer's own (pinned) memory. See the module
/// docs for who may touch what.
pub(crate) struct Entry {
    state: AtomicU32,
    links: UnsafeCell<Links>,
    _pin: PhantomPinned,
}

// SAFETY: `links` is only accessed under the wheel's lock (or by the owner while IDLE, when the
// wheel does not know the entry); `state` is atomic. The waker inside is Send + Sync.
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

impl Entry {
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU32::new(IDLE),
            links: UnsafeCell::new(Links {
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                tick: 0,
                level: 0,
                slot: 0,
                action: Action::None,
            }),
            _pin: PhantomPinned,
        }
    }

    /// Whether the wheel fired this entry (Acquire: the wheel is done with it).
    #[inline]
    pub(crate) fn is_fired(&self) -> bool {
        self.state.load(Ordering::Acquire) == FIRED
    }

    /// Whether the entry is in the wheel (owner's view).
    #[inline]
    pub(crate) fn is_queued(&self) -> bool {
        self.state.load(Ordering::Acquire) == QUEUED
    }

    /// Owner: makes a fired entry usable again (`Sleep::reset`).
    ///
    /// # Safety
    /// The entry is not queued (IDLE or FIRED: the wheel no longer touches it).
    pub(crate) unsafe fn rearm(&self) {
        self.state.store(IDLE, Ordering::Relaxed);
    }
}

/// Under loom, freeing an entry counts as a write to its links, so a model catches a wheel
/// access that does not happen before the owner's free.
#[cfg(loom)]
impl Drop for Entry {
    fn drop(&mut self) {
        self.links.with_mut(|_| ());
    }
}

/// The result of [`Timers::register`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Registered {
    /// In the wheel. `earliest`: it is now the wheel's earliest deadline (someone must look at
    /// the new `next_tick`).
    Queued { earliest: bool },
    /// The deadline tick has already been processed: the timer is due now.
    Elapsed,
    /// The wheel is shut down: nothing was registered.
    Closed,
}

struct Wheel {
    /// The last tick processed: every deadline up to it has fired.
    elapsed: u64,
    /// Earliest tick with work (module docs), `NONE` if empty.
    next: u64,
    occupied: [u64; LEVELS],
    slots: [[*mut Entry; SLOTS]; LEVELS],
    closed: bool,
}

/// The wheel with its lock and the lock-free count of its entries. One per pool.
pub(crate) struct Timers {
    wheel: TryLock<Wheel>,
    /// Entries in the wheel (written under the lock; a gauge for anyone).
    pending: AtomicUsize,
}

// SAFETY: the wheel's raw pointers (entries in the timers' own pinned memory) are only
// followed under the lock.
unsafe impl Send for Wheel {}

impl core::fmt::Debug for Timers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timers")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The level an entry with deadline `tick` goes to when the wheel is at `elapsed` (`tick >
/// elapsed`): the highest 6-bit group in which they differ.
#[inline]
fn level_for(elapsed: u64, tick: u64) -> usize {
    let masked = (elapsed ^ tick) | (SLOTS as u64 - 1);
    let significant = 63 - masked.leading_zeros();
    ((significant / SLOT_BITS) as usize).min(LEVELS - 1)
}

#[inline]
fn slot_for(tick: u64, level: usize) -> usize {
    ((tick >> (SLOT_BITS as usize * level)) & (SLOTS as u64 - 1)) as usize
}

impl Wheel {
    /// The earliest (level, slot, start tick) with entries.
    fn next_expiration(&self) -> Option<(usize, usize, u64)> {
        let mut best: Option<(usize, usize, u64)> = None;
        for level in 0..LEVELS {
            let occupied = self.occupied[level];
            if occupied == 0 {
                continue;
            }
            let shift = SLOT_BITS as usize * level;
            let level_range = 1u64 << (shift + SLOT_BITS as usize);
            let now_slot = slot_for(self.elapsed, level);
            // The first occupied slot at or after the current one, going round the level.
            let slot = (occupied.rotate_right(now_slot as u32).trailing_zeros() as usize + now_slot) % SLOTS;
            let mut start = (self.elapsed & !(level_range - 1)) + ((slot as u64) << shift);
            if slot < now_slot {
                // Wrapped round: the slot belongs to the next turn of this level.
                start += level_range;
            }
            if best.is_none_or(|(_, _, b)| start < b) {
                best = Some((level, slot, start));
            }
        }
        best
    }

    /// Links `e` (its `tick` set, `tick > elapsed`) into its slot.
    ///
    /// # Safety
    /// Under the lock; `e` is live and not linked.
    unsafe fn link(&mut self, e: *mut Entry) {
        // SAFETY: the caller's contract: we hold the lock, so the links are ours.
        unsafe {
            (*e).links.with_mut(|l| {
                let place = (*l).tick.min(self.elapsed.saturating_add(MAX_AHEAD));
                let level = level_for(self.elapsed, place);
                let slot = slot_for(place, level);
                let head = self.slots[level][slot];
                (*l).prev = ptr::null_mut();
                (*l).next = head;
                (*l).level = level as u8;
                (*l).slot = slot as u8;
                if !head.is_null() {
                    (*head).links.with_mut(|h| (*h).prev = e);
                }
                self.slots[level][slot] = e;
                self.occupied[level] |= 1 << slot;
            });
        }
    }

    /// Unlinks `e` from its slot.
    ///
    /// # Safety
    /// Under the lock; `e` is linked.
    unsafe fn unlink(&mut self, e: *mut Entry) {
        // SAFETY: the caller's contract.
        unsafe {
            let (prev, next, level, slot) = (*e).links.with(|l| ((*l).prev, (*l).next, (*l).level as usize, (*l).slot as usize));
            if prev.is_null() {
                // In bounds: `link` stored them from `level_for` and `slot_for`.
                *self.head_mut(level, slot) = next;
                if next.is_null() {
                    *self.occupied.get_unchecked_mut(level) &= !(1 << slot);
                }
            } else {
                (*prev).links.with_mut(|p| (*p).next = next);
            }
            if !next.is_null() {
                (*next).links.with_mut(|n| (*n).prev = prev);
            }
        }
    }

    /// The head of slot `slot` of level `level`, without a bounds check (the callers' indices
    /// come from `level_for`/`slot_for` or `next_expiration`, in bounds by construction).
    ///
    /// # Safety
    /// `level < LEVELS` and `slot < SLOTS`.
    #[inline]
    unsafe fn head_mut(&mut self, level: usize, slot: usize) -> &mut *mut Entry {
        debug_assert!(level < LEVELS && slot < SLOTS);
        // SAFETY: the caller's contract: both indices in bounds.
        unsafe { self.slots.get_unchecked_mut(level).get_unchecked_mut(slot) }
    }

    fn next_tick(&self) -> u64 {
        self.next_expiration().map_or(NONE, |(_, _, start)| start)
    }
}

/// Expired entries moved out of the wheel, whose actions run once the lock is released.
type Expired = Batch<(Action, NonNull<Entry>), FIRE_BATCH>;

/// Runs the actions of a batch of expired entries (outside the lock), in the order they
/// expired.
fn run_expired(batch: &mut Expired, shutdown: bool) {
    batch.drain(|(action, entry)| match action {
        Action::Wake(waker) => waker.wake(),
        // SAFETY: the wheel handed the entry over with its action (`Action::Call`).
        Action::Call(f) => unsafe { f(entry, shutdown) },
        Action::None => {}
    });
}

impl Timers {
    /// An empty wheel, as a value (the tests and models; a pool builds its own in place).
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        // SAFETY: `init` writes every field of the value it is given (its contract).
        unsafe { crate::fallible::value_in_place(Self::init) }
    }

    /// Writes an empty wheel at `dst`, in place: the pool's state holds it, and its 1.5 KiB of
    /// slots made as a value would be built on the stack and copied.
    ///
    /// # Safety
    /// `dst` is aligned and valid for writes.
    pub(crate) unsafe fn init(dst: *mut Self) {
        // SAFETY: the caller's contract; every field is written (the wheel's by its lock's
        // `init`, with every field of `Wheel`).
        unsafe {
            TryLock::init(ptr::addr_of_mut!((*dst).wheel), |w: *mut Wheel| {
                ptr::addr_of_mut!((*w).elapsed).write(0);
                ptr::addr_of_mut!((*w).next).write(NONE);
                ptr::addr_of_mut!((*w).occupied).write([0; LEVELS]);
                let slots = ptr::addr_of_mut!((*w).slots).cast::<*mut Entry>();
                for i in 0..LEVELS * SLOTS {
                    slots.add(i).write(ptr::null_mut());
                }
                ptr::addr_of_mut!((*w).closed).write(false);
                // Names every field: one added and not written above fails to compile here.
                let _ = |w: &Wheel| {
                    let Wheel { elapsed: _, next: _, occupied: _, slots: _, closed: _ } = w;
                };
            });
            ptr::addr_of_mut!((*dst).pending).write(AtomicUsize::new(0));
        }
        // As above.
        let _ = |t: &Self| {
            let Self { wheel: _, pending: _ } = t;
        };
    }

    /// The earliest tick with work, `NONE` if none, read under the lock (module docs): the
    /// timer role's decision (`scheduler::park`).
    pub(crate) fn next_tick(&self) -> u64 {
        self.lock().next
    }

    /// Timers in the wheel.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// The wheel's lock, waited for: a holder that was descheduled (2 cores, many threads) gets
    /// the core back through a yield every 64 spins.
    fn lock(&self) -> Locked<'_, Wheel> {
        let mut spins = 0u32;
        self.wheel.lock(|| {
            spins = spins.wrapping_add(1);
            #[cfg(all(feature = "std", not(any(loom, shuttle))))]
            if spins % 64 == 0 {
                std::thread::yield_now();
                return;
            }
            spin_hint();
        })
    }

    /// Records the wheel's next deadline after a change (module docs), and returns it.
    fn publish(wheel: &mut Wheel) -> u64 {
        wheel.next = wheel.next_tick();
        wheel.next
    }

    /// Puts `entry` in the wheel for `tick` with `action`, or moves it there if it is already
    /// in (a re-poll with a new waker, or a reset). The entry's previous action is dropped
    /// after the lock is released.
    ///
    /// # Safety
    /// `entry` stays valid and unmoved until it is cancelled ([`cancel`](Self::cancel)) or
    /// seen fired; only its owner calls this (one thread at a time).
    pub(crate) unsafe fn register(&self, entry: NonNull<Entry>, tick: u64, action: Action) -> Registered {
        let e = entry.as_ptr();
        let mut guard = self.lock();
        let wheel = &mut *guard;
        if wheel.closed {
            drop(guard);
            drop(action);
            return Registered::Closed;
        }
        // SAFETY: the entry is live (caller); its state changes only under the lock.
        let state = unsafe { (*e).state.load(Ordering::Relaxed) };
        if state == FIRED {
            drop(guard);
            drop(action);
            return Registered::Elapsed;
        }
        if tick <= wheel.elapsed {
            if state == QUEUED {
                // SAFETY: linked (QUEUED), under the lock.
                unsafe { wheel.unlink(e) };
                self.pending.fetch_sub(1, Ordering::Relaxed);
            }
            // SAFETY: unlinked: the owner's, and we hold the lock.
            let old = unsafe { (*e).links.with_mut(|l| core::mem::replace(&mut (*l).action, Action::None)) };
            // SAFETY: live entry. Release: see `is_fired`.
            unsafe { (*e).state.store(FIRED, Ordering::Release) };
            Self::publish(wheel);
            drop(guard);
            drop(old);
            drop(action);
            return Registered::Elapsed;
        }
        // SAFETY: as above (state read under the lock).
        let old = unsafe {
            if state == QUEUED {
                if (*e).links.with(|l| (*l).tick) == tick {
                    // Same slot: only the action changes.
                    let old = (*e).links.with_mut(|l| core::mem::replace(&mut (*l).action, action));
                    drop(guard);
                    drop(old);
                    return Registered::Queued { earliest: false };
                }
                wheel.unlink(e);
            } else {
                self.pending.fetch_add(1, Ordering::Relaxed);
            }
            let old = (*e).links.with_mut(|l| {
                (*l).tick = tick;
                core::mem::replace(&mut (*l).action, action)
            });
            wheel.link(e);
            (*e).state.store(QUEUED, Ordering::Relaxed);
            old
        };
        let before = wheel.next;
        let next = Self::publish(wheel);
        drop(guard);
        drop(old);
        Registered::Queued { earliest: next < before }
    }

    /// Takes `entry` out of the wheel if it is in; its action is dropped (outside the lock).
    /// Afterwards the wheel no longer touches the entry.
    ///
    /// # Safety
    /// `entry` is live; only its owner calls this.
    pub(crate) unsafe fn cancel(&self, entry: NonNull<Entry>) {
        // SAFETY: live (caller).
        let e = unsafe { entry.as_ref() };
        if !e.is_queued() {
            // IDLE, or FIRED (the wheel's last access came before its Release store).
            return;
        }
        let mut guard = self.lock();
        let wheel = &mut *guard;
        if e.state.load(Ordering::Relaxed) != QUEUED {
            // Fired meanwhile (by the thread that held the lock).
            return;
        }
        // SAFETY: QUEUED under the lock: linked.
        unsafe { wheel.unlink(entry.as_ptr()) };
        self.pending.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: unlinked, lock held.
        let old = unsafe { e.links.with_mut(|l| core::mem::replace(&mut (*l).action, Action::None)) };
        e.state.store(IDLE, Ordering::Relaxed);
        drop(guard);
        drop(old);
    }

    /// Moves out, under the lock, up to a batch of entries whose deadline is at or before
    /// `now_tick`; true if more may remain.
    fn collect_expired(&self, wheel: &mut Wheel, now_tick: u64, batch: &mut Expired) -> bool {
        loop {
            let Some((level, slot, start)) = wheel.next_expiration() else {
                wheel.elapsed = wheel.elapsed.max(now_tick);
                return false;
            };
            if start > now_tick {
                wheel.elapsed = wheel.elapsed.max(now_tick);
                return false;
            }
            wheel.elapsed = wheel.elapsed.max(start);
            // Empty the slot one entry at a time (a full batch stops part-way).
            loop {
                // SAFETY: `next_expiration` returns `level < LEVELS` (its loop's bound) and
                // `slot < SLOTS` (taken modulo `SLOTS`).
                let e = unsafe { *wheel.head_mut(level, slot) };
                if e.is_null() {
                    break;
                }
                if batch.is_full() {
                    return true;
                }
                // SAFETY: linked entries are live (their owners unlink them before freeing),
                // and we hold the lock; the batch is not full (checked above).
                unsafe {
                    wheel.unlink(e);
                    let tick = (*e).links.with(|l| (*l).tick);
                    // Due at this slot's start: fire. Anything later moves down to a finer
                    // level (tick > elapsed = start), even if it is due by `now_tick` too: it
                    // then fires when its own slot comes up, so timers fire in deadline order
                    // however far the clock jumped (tokio does the same).
                    if tick <= start {
                        let action = (*e).links.with_mut(|l| core::mem::replace(&mut (*l).action, Action::None));
                        batch.push((action, NonNull::new_unchecked(e)));
                        self.pending.fetch_sub(1, Ordering::Relaxed);
                        // Release: our last access to the entry (`is_fired`).
                        (*e).state.store(FIRED, Ordering::Release);
                    } else {
                        wheel.link(e);
                    }
                }
            }
        }
    }

    /// Fires every entry due at `now_tick`, waiting for the lock if another thread holds it.
    pub(crate) fn fire(&self, now_tick: u64) {
        self.expire(now_tick, None, false);
    }

    /// Fires what is due at `now_tick` if the wheel's next deadline is at least `late` ticks
    /// before it, read under the same hold of the lock that fires (a worker's tick end: one
    /// try-lock both looks and fires). If another thread holds the lock (registering or
    /// firing), returns at once and leaves the work to that thread or a later call.
    pub(crate) fn fire_if_late(&self, now_tick: u64, late: u64) {
        self.expire(now_tick, Some(late), false);
    }

    /// Closes the wheel and fires every entry in it (the pool is shutting down: `Call`
    /// actions get `shutdown = true`). Later registrations return `Closed`.
    pub(crate) fn shutdown(&self) {
        self.expire(u64::MAX - 1, None, true);
    }

    /// `fire`, `fire_if_late` and `shutdown`: batch by batch, moves out what is due at
    /// `now_tick` (closing the wheel first if `shutdown`) and runs it unlocked. `late`: the
    /// try-lock, and on its first hold the check of `fire_if_late`; `None`: wait for the lock.
    /// One copy for the three (none is on a hot path).
    #[inline(never)]
    fn expire(&self, now_tick: u64, late: Option<u64>, shutdown: bool) {
        let mut batch = Expired::new();
        let mut check = late;
        loop {
            let mut guard = if late.is_none() {
                self.lock()
            } else {
                match self.wheel.try_lock() {
                    Some(g) => g,
                    None => return,
                }
            };
            if let Some(late) = check.take() {
                if now_tick < guard.next.saturating_add(late) {
                    return;
                }
            }
            let wheel = &mut *guard;
            if shutdown {
                wheel.closed = true;
            }
            let more = self.collect_expired(wheel, now_tick, &mut batch);
            Self::publish(wheel);
            drop(guard);
            run_expired(&mut batch, shutdown);
            if !more {
                return;
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom;
#[cfg(all(test, not(loom)))]
mod tests;
