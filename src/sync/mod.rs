//! The atomics shim: every atomic, `UnsafeCell` and spin hint in the crate comes from here.
//!
//! * `cfg(loom)`: loom's model-checked types, so `tests/loom_*.rs` can explore every interleaving.
//! * otherwise: [`portable_atomic`], which is `core::sync::atomic` on targets that have the
//!   instructions and an emulation (interrupt masking or `critical-section`) on targets without
//!   compare-and-swap such as `thumbv6m-none-eabi` (see the crate features `single-core` and
//!   `critical-section`).
//!
//! Loom's `UnsafeCell` hands out access through closures (`with`/`with_mut`) so it can track
//! every access; the non-loom [`UnsafeCell`] here offers the same interface at zero cost, so the
//! code using it reads the same under both.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use portable_atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

pub(crate) use core::sync::atomic::Ordering;

mod backoff;
pub(crate) use backoff::Backoff;

/// A spin-loop hint (loom: a yield point, so spinning models terminate).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `core::cell::UnsafeCell` with loom's closure-based access interface.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    /// Shared access through a raw pointer; the caller's closure upholds aliasing.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Exclusive access through a raw pointer; the caller's closure upholds aliasing.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Pads and aligns a value to 128 bytes (two 64-byte lines: adjacent-line prefetchers on x86
/// pull pairs of lines), so the hot atomics of different owners never share a cache line.
#[derive(Debug, Default)]
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), repr(align(128)))]
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), repr(align(64)))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

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
