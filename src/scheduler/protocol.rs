//! The waking protocol's shared state, in one place: the `Sync` word, the count of spinning
//! workers, the idle set, the timer role and the shutdown drain's `waits_released` flag. Every
//! atomic access of the protocol is a method here; every compare-and-swap on the word applies
//! one of its transitions (`sync_word.rs`), which decide, from a snapshot, the next word and
//! what the caller must do. So this file holds the orderings and their pairings, and
//! `sync_word.rs` the decisions; `sleep.rs` and `park.rs` do what a decision asks (unpark a
//! worker, start a thread, sleep).
//!
//! # The pairs of SeqCst fences (README, "Why no wake-up is lost")
//! | one side (write, fence, read)                         | other side (write, fence, read)                       |
//! |-------------------------------------------------------|-------------------------------------------------------|
//! | `notify` writes the word; `take_sleeper` reads `spinning`, the idle set | `announce_park` sets the worker's bit; reads the word |
//! | `notify`'s shared case writes nothing; re-reads the word | `wait` consumes `notified`; the worker then searches |
//! | `spin_end` (a spin that saw something) decrements `spinning`; the caller re-reads the word | `take_sleeper` (as above) |
//! | `begin_shutdown` writes `Shutdown`; reads the workers' list | `announce_park` (as above) |
//! | `release_role` gives the role back; `idle_except` reads the idle set | `announce_park`, then `claim_role` |
//! | `claim_role` takes the role; re-reads the word, and `still_announced` the worker's own bit | a notify writes the word or `take_sleeper` takes that bit; `wakes_driver_of` reads the role |
//!
//! Not a fence pair: the claim against a timer that becomes the earliest. The claimer reads the
//! wheel's next deadline under the wheel's lock; `register` links the timer under that lock,
//! and `kick_of` reads the role after the unlock: the lock orders the two (`park.rs`, "The
//! timer parker").
//! | `release_waits` sets `waits_released`; reads the workers' list | a worker registers; `waits_released` reads the flag |

use alloc::boxed::Box;

use super::sync_word::{Notify, Sync, WaitEnd, WaitStep, Waiter, Wake};
use crate::sync::{fence, AtomicBool, AtomicU32, AtomicUsize, CachePadded, IdleSet, Ordering};

/// How [`Protocol::wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitOutcome {
    /// The pool is shutting down.
    Shutdown,
    /// Nothing to consume: the caller sleeps, then calls `wait` again.
    Park,
    /// The word was written: this is how the step ended.
    End(WaitEnd),
}

/// The waking protocol's shared state (module docs).
pub(crate) struct Protocol {
    /// The packed `Sync` word. Padded: every notify reads it.
    sync: CachePadded<AtomicU32>,
    /// Idle workers in their spin phase (counted in `idle`, not in the idle set): a notify
    /// that sees one leaves the wake to it instead of unparking a sleeper.
    spinning: AtomicUsize,
    /// The workers parked or about to park: a notify takes one bit to unpark its worker.
    idle: IdleSet,
    /// The timer role (`park.rs`): 1 + the index of the worker that parks on the next timer
    /// deadline or in the I/O driver; 0 when nobody holds it.
    role: AtomicUsize,
    /// Shutdown has fired the timers and woken the I/O waiters (`Inner::release_waits`): a
    /// draining worker leaves only once it searched after this was set.
    waits_released: AtomicBool,
    /// Most threads that serve the pool now (`ThreadPool::set_max_threads`): a notify starts a
    /// thread only below it, and the workers at or above it turn surplus (`surplus.rs`).
    /// Relaxed: read on every notify's decision, written only by `set_max_threads`, whose
    /// unparks order it before the surplus workers' next look.
    max_threads: AtomicU32,
    /// The most threads the pool may have (its worker slots): the creation's `max_threads`.
    thread_limit: u32,
}

impl Protocol {
    /// The state of a pool of `max_threads` threads with no thread started, over an idle set
    /// of [`IdleSet::words_for`]`(max_threads)` words.
    pub(crate) fn new(max_threads: u32, idle_words: Box<[AtomicUsize]>) -> Self {
        Self {
            sync: CachePadded(AtomicU32::new(Sync::default().0)),
            spinning: AtomicUsize::new(0),
            idle: IdleSet::from_words(idle_words),
            role: AtomicUsize::new(0),
            waits_released: AtomicBool::new(false),
            max_threads: AtomicU32::new(max_threads),
            thread_limit: max_threads,
        }
    }

    /// Gives the idle set's words back (a forked child frees them without the rest).
    pub(crate) fn into_idle_words(self) -> Box<[AtomicUsize]> {
        self.idle.into_words()
    }

    /// Most threads that serve the pool now.
    #[inline(always)]
    pub(crate) fn max_threads(&self) -> u32 {
        self.max_threads.load(Ordering::Relaxed)
    }

    /// The most threads the pool may have (its worker slots).
    pub(crate) fn thread_limit(&self) -> u32 {
        self.thread_limit
    }

    /// Sets how many threads serve the pool (at most `thread_limit`; `surplus.rs`).
    #[cold]
    pub(crate) fn set_max_threads(&self, n: u32) {
        debug_assert!(n >= 1 && n <= self.thread_limit);
        self.max_threads.store(n, Ordering::Relaxed);
    }

    /// A snapshot of the word.
    #[inline(always)]
    pub(crate) fn load(&self, order: Ordering) -> Sync {
        Sync(self.sync.load(order))
    }

    /// Tells the pool there is new work ([`Sync::notify`]); returns whom to wake.
    ///
    /// The busy pool's fast path, inline: already notified and nobody to wake. It writes
    /// nothing, so no Release orders the caller's push before the consumer's search: a SeqCst
    /// fence pairs with the one after the consuming CAS in [`wait`](Self::wait). Either the
    /// re-read sees that consumption (`notified` clear: the slow path sets it again, with
    /// Release), or the consumer's search sees the push. Without it a worker consumes the flag,
    /// misses the task and sleeps (loom: `sync_notify_racing_wait`).
    #[inline(always)]
    pub(crate) fn notify(&self, is_waking: bool) -> Wake {
        if !is_waking {
            let s = self.load(Ordering::Relaxed);
            if s.notify(false, self.max_threads()) == Notify::Shared {
                fence(Ordering::SeqCst);
                if self.load(Ordering::Relaxed) == s {
                    return Wake::Nothing;
                }
            }
        }
        self.notify_slow(is_waking)
    }

    /// A notify after a join job was pushed (`notify_join`): only if a thread could be woken
    /// or started now with no wake in flight; otherwise one Relaxed load and nothing written.
    #[inline(always)]
    pub(crate) fn notify_join(&self) -> Wake {
        if self.load(Ordering::Relaxed).wants_work(self.max_threads()) {
            return self.notify_slow(false);
        }
        Wake::Nothing
    }

    /// The CAS loop of a notify.
    #[inline(never)]
    fn notify_slow(&self, is_waking: bool) -> Wake {
        let mut s = self.load(Ordering::Relaxed);
        let mut fenced = false;
        loop {
            match s.notify(is_waking, self.max_threads()) {
                Notify::Stop => return Wake::Nothing,
                Notify::Shared => {
                    // As on the fast path (`notify`): fence, and look once more.
                    if fenced {
                        return Wake::Nothing;
                    }
                    fenced = true;
                    fence(Ordering::SeqCst);
                    s = self.load(Ordering::Relaxed);
                }
                Notify::Write(next, wake) => {
                    // Release: the work pushed before this notify is visible to the thread
                    // that consumes the notification (its CAS in `wait` is Acquire).
                    match self.sync.compare_exchange_weak(s.0, next.0, Ordering::Release, Ordering::Relaxed) {
                        Ok(_) => return wake,
                        Err(actual) => s = Sync(actual),
                    }
                }
            }
        }
    }

    /// One step of a waiting worker from the snapshot `s` ([`Sync::wait`]); `s` becomes the
    /// word written (on `End`) or the one that made the step a park.
    #[inline]
    pub(crate) fn wait(&self, s: &mut Sync, w: Waiter) -> WaitOutcome {
        loop {
            match s.wait(w) {
                WaitStep::Shutdown => {
                    // `s` may come from a Relaxed load: Acquire pairs with `begin_shutdown`'s
                    // AcqRel CAS, so the drain that follows sees every push made before
                    // shutdown (found by Miri: tests/stress.rs tree_with_immediate_shutdown).
                    fence(Ordering::Acquire);
                    return WaitOutcome::Shutdown;
                }
                WaitStep::Park => return WaitOutcome::Park,
                WaitStep::Write(next, end) => {
                    // Acquire pairs with notify's Release: the notified work is visible.
                    // Release: the tasks this worker ran are visible to whoever sees it idle
                    // (`ThreadPool::wait_idle`; Miri's weak memory returned a count one short).
                    match self.sync.compare_exchange_weak(s.0, next.0, Ordering::AcqRel, Ordering::Relaxed) {
                        Ok(_) => {
                            if let WaitEnd::Notified { .. } = end {
                                // Pairs with the fence on `notify`'s shared case: the search
                                // that follows sees every push whose notify found `notified`
                                // set.
                                fence(Ordering::SeqCst);
                            }
                            *s = next;
                            return WaitOutcome::End(end);
                        }
                        Err(actual) => *s = Sync(actual),
                    }
                }
            }
        }
    }

    /// A thread start failed ([`Sync::spawn_failed`]); true if that made it the last thread of
    /// a pool shutting down (the caller wakes the joiner).
    #[cold]
    pub(crate) fn spawn_failed(&self) -> bool {
        let mut s = self.load(Ordering::Relaxed);
        loop {
            match self.sync.compare_exchange_weak(s.0, s.spawn_failed().0, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return s.last_out(),
                Err(actual) => s = Sync(actual),
            }
        }
    }

    /// Counts a thread the constructor starts (`Inner::prestart`): its place in `spawned`, as
    /// a notify's `Spawn` counts it, before any other thread can reach the word.
    #[cold]
    pub(crate) fn count_spawn(&self) {
        self.sync.fetch_add(Sync::ONE_SPAWNED, Ordering::Relaxed);
    }

    /// A thread leaves for good (`spawned - 1`); true if it was the last of a pool shutting
    /// down (the caller wakes the joiner).
    pub(crate) fn leave(&self) -> bool {
        // AcqRel: Release makes this thread's work visible to the joiner; Acquire orders us
        // after the shutdown transition we are reacting to.
        let s = Sync(self.sync.fetch_sub(Sync::ONE_SPAWNED, Ordering::AcqRel));
        debug_assert!(s.spawned() > 0);
        s.last_out()
    }

    /// Moves the word to `Shutdown` ([`Sync::shutdown`]). The caller then unparks every
    /// registered worker: the fence after the CAS pairs with the one in `announce_park` (a
    /// Dekker pair, as `take_sleeper`'s), so either a parking worker reads `Shutdown`, or the
    /// caller's read of the workers' list sees it (its insertion came before its park) and
    /// unparks it. The CAS alone is not enough: a worker's writes of the word are only
    /// Acquire, so they do not order its list insertion before that read, and a worker that
    /// registered just before shutdown could park for good (loom:
    /// `sync_shutdown_racing_notify_and_spawn`).
    pub(crate) fn begin_shutdown(&self) {
        let mut s = self.load(Ordering::Relaxed);
        while let Err(actual) = self.sync.compare_exchange_weak(s.0, s.shutdown().0, Ordering::AcqRel, Ordering::Relaxed) {
            s = Sync(actual);
        }
        fence(Ordering::SeqCst);
    }

    /// An idle worker starts to spin: counted in `spinning`, so a notify leaves the wake to
    /// it.
    #[inline]
    pub(crate) fn spin_begin(&self) {
        self.spinning.fetch_add(1, Ordering::Relaxed);
    }

    /// The spin is over (before `announce_park`'s bit and fence, see `take_sleeper`). `seen`:
    /// it ended early, for something it saw (a notification, shutdown, its wait's condition):
    /// then the worker skips `announce_park`'s fence, but a notifier may have counted on it
    /// (it saw `spinning > 0` and unparked nobody), so this fence pairs with the one in
    /// `take_sleeper`, and the caller's re-read of the word sees that notification (`wait`
    /// consumes it; `run_until` hands it on if the wait leaves). Without it a worker leaving
    /// for its condition could strand a `Signaled` word with every other worker parked.
    #[inline]
    pub(crate) fn spin_end(&self, seen: bool) {
        self.spinning.fetch_sub(1, Ordering::Relaxed);
        if seen {
            fence(Ordering::SeqCst);
        }
    }

    /// Worker `index` is about to park: its bit in the idle set, then (SeqCst fence) the word
    /// as it now reads. Pairs with the fence in `take_sleeper`: either the worker sees the
    /// notification in the word, or the notifier sees its bit.
    #[inline]
    pub(crate) fn announce_park(&self, index: usize) -> Sync {
        self.idle.insert(index, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.load(Ordering::Relaxed)
    }

    /// Worker `index` is back from its park (woken, or spuriously): out of the idle set (a
    /// notifier may have taken the bit already).
    #[inline]
    pub(crate) fn withdraw_park(&self, index: usize) {
        self.idle.remove(index, Ordering::Relaxed);
    }

    /// Whether worker `index`'s bit is still in the idle set, read after its role claim (and
    /// the claim's fence): false once a notifier took it (`take_sleeper`), a wake aimed at
    /// this park. The notifier may have decided that wake on an earlier idle spell of ours (its
    /// notification consumed since) and unparked only our parker, which the I/O driver does
    /// not watch: a worker that parked in the driver anyway would sleep through the next
    /// notify too, which finds no bit to take. The pair with `wakes_driver_of`: either this
    /// read sees the bit gone, or that one sees our claim.
    #[inline]
    pub(crate) fn still_announced(&self, index: usize) -> bool {
        self.idle.contains(index, Ordering::Relaxed)
    }

    /// Whether worker `index`, being woken (its bit taken, or a notification or shutdown
    /// written) holds the timer role, so that its waker must unpark the I/O driver too. The
    /// fence orders the caller's take or store before the read: the other half of the pairs
    /// with `claim_role`'s re-reads (`still_announced`, the word).
    #[inline]
    pub(crate) fn wakes_driver_of(&self, index: usize) -> bool {
        fence(Ordering::SeqCst);
        self.role.load(Ordering::Relaxed) == index + 1
    }

    /// A notify that wrote `Wake::Unpark`: the worker to unpark, whose bit it took, if any.
    /// `None` when a worker spins (it will take the notification within a few rounds, with no
    /// system call on either side; if it has just left the spin, its decrement not visible
    /// here, the fence pair makes its `announce_park` see the notification) or when no bit is
    /// set (the idle worker counted in the word has not announced its park yet, and will see
    /// the notification then).
    #[cold]
    pub(crate) fn take_sleeper(&self) -> Option<usize> {
        // Pairs with the fence in `announce_park` (and `spin_end`).
        fence(Ordering::SeqCst);
        if self.spinning.load(Ordering::Relaxed) > 0 {
            return None;
        }
        // Acquire: the parked worker's writes before its park are ours to see (it is ours to
        // wake now).
        self.idle.take_any(Ordering::Acquire)
    }

    /// An idle worker other than `me` (its bit left for it to clear), for the timer role's
    /// hand-over (`park.rs`). Pairs with the fence in `announce_park`, a Dekker pair over the
    /// role and the idle set: the caller gave the role back (`release_role`, a SeqCst store)
    /// before this scan, and a worker on its way to sleep set its bit before its fence and its
    /// claim. Either that claim sees the role free and takes it, or this scan sees the bit.
    #[cold]
    pub(crate) fn idle_except(&self, me: usize) -> Option<usize> {
        fence(Ordering::SeqCst);
        self.idle.iter(Ordering::Relaxed).find(|&index| index != me)
    }

    /// Takes the timer role for worker `index` if nobody holds it. After a successful claim
    /// the caller reads the wheel's next deadline under the wheel's lock (ordered with
    /// `kick_of` by that lock: `park.rs`) and re-reads the word and its own bit: the fence is
    /// the claim's half of the Dekker pair with `wakes_driver_of` (SeqCst accesses alone would
    /// do in the C++ model; loom checks the pair only through fences).
    #[inline]
    pub(crate) fn claim_role(&self, index: usize) -> bool {
        if self.role.compare_exchange(0, index + 1, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            return false;
        }
        fence(Ordering::SeqCst);
        true
    }

    /// Gives the timer role back.
    #[inline]
    pub(crate) fn release_role(&self) {
        self.role.store(0, Ordering::SeqCst);
    }

    /// The worker that holds the timer role, if any. SeqCst where it decides a wake (after the
    /// caller's notification or shutdown store and its fence, so a worker that claims the role
    /// later sees those in its own re-read); Relaxed where it is a hint.
    #[inline]
    pub(crate) fn role_holder(&self, order: Ordering) -> Option<usize> {
        self.role.load(order).checked_sub(1)
    }

    /// Shutdown released its waits: sets `waits_released`. Release: the fire's pushes come
    /// before the flag; a worker that reads it (Acquire) before a search finds them. The fence
    /// pairs with the one in `waits_released`, a Dekker pair over the flag and the workers'
    /// list: either a worker registered too late for the caller's walk that follows reads the
    /// flag set, or the walk finds it and unparks it (loom: `driver_install_racing_shutdown`,
    /// whose worker starts while the pool shuts down).
    pub(crate) fn release_waits(&self) {
        self.waits_released.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
    }

    /// Whether shutdown released its waits. Draining workers only: the fence is the worker's
    /// half of `release_waits`' pair (its registration in the workers' list came before).
    pub(crate) fn waits_released(&self) -> bool {
        fence(Ordering::SeqCst);
        self.waits_released.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod checks;
#[cfg(all(test, not(loom), not(miri)))]
mod explore;
#[cfg(all(test, not(loom), not(miri)))]
mod model;
#[cfg(all(test, not(loom), not(miri)))]
mod steps;
#[cfg(all(test, not(loom), not(miri)))]
mod surplus;
