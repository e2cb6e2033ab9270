//! [`Counter`]: a statistics counter that orders nothing.

use core::sync::atomic::Ordering;

/// A statistics counter: a number that only ever goes up, read by anyone at any time and
/// ordering nothing (every access is Relaxed: a reader gets some recent value, and no other
/// memory is published through it).
///
/// Two ways to write it:
/// * [`bump_owned`](Self::bump_owned) / [`add_owned`](Self::add_owned): a plain Relaxed load
///   and store, no read-modify-write (no `lock` prefix on x86, no LL/SC loop on Arm). Only for a
///   counter that **one thread alone writes** (a worker's own counters, `scheduler::stats`):
///   with a single writer no increment can be lost, and readers only ever load.
/// * [`bump_shared`](Self::bump_shared): a Relaxed `fetch_add`, for a counter several threads
///   write (the pool's "outside the workers" slot).
///
/// Under loom this is a plain `core` atomic, not loom's: counters synchronise nothing, and
/// loom would otherwise explore every interleaving of every increment (a branch point per task
/// run) without checking anything more. Wrapping on overflow (a `usize` of events).
#[derive(Debug, Default)]
pub(crate) struct Counter(CounterAtomic);

#[cfg(loom)]
type CounterAtomic = core::sync::atomic::AtomicUsize;
#[cfg(not(loom))]
type CounterAtomic = portable_atomic::AtomicUsize;

impl Counter {
    /// A counter at 0 (usable in a `static`: `panic.rs`'s count, kept with `std` only).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) const fn new() -> Self {
        Self(CounterAtomic::new(0))
    }

    /// The current value (Relaxed).
    #[inline]
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// +1 by the counter's only writer (see the type's docs); returns the new value.
    #[inline]
    pub(crate) fn bump_owned(&self) -> usize {
        let n = self.0.load(Ordering::Relaxed).wrapping_add(1);
        self.0.store(n, Ordering::Relaxed);
        n
    }

    /// +n by the counter's only writer (see the type's docs).
    #[inline]
    pub(crate) fn add_owned(&self, n: usize) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// +1 by any thread (a read-modify-write).
    #[inline]
    pub(crate) fn bump_shared(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// +n by any thread **without** a read-modify-write: a load and a store, so of two
    /// threads adding at once one addition may be lost (an estimate, never a count; see
    /// `Injector::len`). Sets the counter to `n` more than the value this thread read.
    #[inline]
    pub(crate) fn add_lossy(&self, n: usize) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Overwrites the value (`Injector`'s resynchronisation).
    #[inline]
    pub(crate) fn set(&self, n: usize) {
        self.0.store(n, Ordering::Relaxed);
    }
}
