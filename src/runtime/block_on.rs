//! [`ThreadPool::block_on`]: runs a future to completion on the calling thread (the main
//! thread, typically), waiting between polls as every wait does (`latch`, "Waiting"): on one
//! of the pool's workers through its waiting loop, which runs other tasks meanwhile; elsewhere
//! parked on a parker from the pool's platform.
//!
//! The waker is a small reference-counted block (one allocation per `block_on` call, none per
//! poll or wake) holding a three-state word and the signal a round's wait waits on:
//!
//! ```text
//!   IDLE --wake--> NOTIFIED --(poller consumes: swap IDLE)--> IDLE
//!   IDLE --(poller about to wait: CAS)--> PARKED --wake: swap NOTIFIED, sees PARKED--> set
//! ```
//! A wake always leaves NOTIFIED behind, and sets the signal only if it displaced PARKED, so a
//! wake while the poller runs or spins costs one swap and no system call. The poller waits
//! only after its CAS from IDLE to PARKED succeeded, so a wake cannot fall between its check
//! and its wait (a set before the wait registers is seen by it). One wake displaces PARKED
//! per round, so the signal is set once per round; the poller makes it unset again once it
//! saw SET (the setter's last access), before it publishes PARKED again (Release, paired with
//! the wake's Acquire: the next round's setter sees the reset).
//!
//! Before waiting, the poller spins for [`BLOCK_ON_SPINS`] rounds (~2 µs where a spin-loop hint
//! takes ~30 ns). With the workers' own idle spin (`Config::idle_spins`), a `block_on` that
//! awaits a task it just spawned then costs neither side a system call: the worker that was
//! still spinning takes the task, and the result lands while this thread still spins. 64
//! rounds take a round trip from 59.5 µs to 0.46 µs on a VM where a futex wake-up takes 20-30
//! µs to land; longer spins win nothing more and take the core a worker may need
//! (BENCHMARKS.md, "tokio's scheduler workloads", for the measurements).

use core::future::Future;
use core::mem::ManuallyDrop;
use core::pin::pin;
use core::ptr::NonNull;
use core::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use alloc::boxed::Box;

use crate::latch::Signal;
use crate::platform::Spawner;
use crate::scheduler::ThreadPool;
use crate::sync::{spin_hint, AtomicU32, AtomicUsize, Ordering};

/// Spin iterations before waiting in `block_on` (see the module docs for the measurement).
pub(crate) const BLOCK_ON_SPINS: u32 = if cfg!(loom) { 0 } else { 64 };

const IDLE: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = 2;

/// The waker's target, reference-counted by the wakers and the `block_on` frame.
struct Waiter {
    refs: AtomicUsize,
    state: AtomicU32,
    /// Set by the wake that displaced PARKED; unset again by the poller (module docs).
    signal: Signal,
}

impl Waiter {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(Self::clone_raw, Self::wake_raw, Self::wake_by_ref_raw, Self::drop_raw);

    fn wake(&self) {
        // Release: what the waker did before waking is visible after the poller's Acquire
        // swap. Acquire: pairs with the poller's Release CAS to PARKED (module docs).
        if self.state.swap(NOTIFIED, Ordering::AcqRel) == PARKED {
            // SAFETY: we displaced PARKED: this round's one setter (module docs).
            unsafe { self.signal.set() };
        }
    }

    /// Takes a pending notification (Acquire: pairs with `wake`'s Release).
    #[inline]
    fn consume(&self) -> bool {
        self.state.load(Ordering::Relaxed) == NOTIFIED && self.state.swap(IDLE, Ordering::Acquire) == NOTIFIED
    }

    /// Waits until woken: spin, then wait for the round's signal through `pool`.
    fn wait<S: Spawner>(&self, pool: &ThreadPool<S>) {
        let mut spins = BLOCK_ON_SPINS;
        while spins > 0 {
            if self.consume() {
                return;
            }
            spin_hint();
            spins -= 1;
        }
        // Announce the wait; fails only if a wake came in (NOTIFIED). Release: the reset of
        // the last round's signal comes before the set of this one's (module docs).
        if self.state.compare_exchange(IDLE, PARKED, Ordering::Release, Ordering::Relaxed).is_ok() {
            pool.wait_for(&self.signal);
            // SAFETY: SET: this round's setter is done with it, and no wake sets it again
            // until we publish PARKED again.
            unsafe { self.signal.reset() };
        }
        let consumed = self.consume();
        debug_assert!(consumed, "woke without a notification");
    }

    /// # Safety
    /// `ptr` is a `Waiter` on which the caller holds a reference.
    unsafe fn from_ptr<'a>(ptr: *const ()) -> &'a Self {
        // SAFETY: the caller's contract.
        unsafe { &*ptr.cast::<Self>() }
    }

    fn raw(ptr: *const Self) -> RawWaker {
        RawWaker::new(ptr.cast::<()>(), &Self::VTABLE)
    }

    unsafe fn clone_raw(ptr: *const ()) -> RawWaker {
        // SAFETY: a waker holds a reference.
        let this = unsafe { Self::from_ptr(ptr) };
        // Relaxed: as `Arc::clone`.
        let prev = this.refs.fetch_add(1, Ordering::Relaxed);
        assert!(prev < usize::MAX / 2, "block_on waker reference count overflow");
        Self::raw(this)
    }

    unsafe fn wake_raw(ptr: *const ()) {
        // SAFETY: a waker holds a reference, dropped right after.
        unsafe {
            Self::wake_by_ref_raw(ptr);
            Self::drop_raw(ptr);
        }
    }

    unsafe fn wake_by_ref_raw(ptr: *const ()) {
        // SAFETY: a waker holds a reference.
        unsafe { Self::from_ptr(ptr) }.wake();
    }

    unsafe fn drop_raw(ptr: *const ()) {
        // SAFETY: the waker's reference, given back here.
        unsafe { Self::release(NonNull::new_unchecked(ptr.cast_mut().cast::<Self>())) }
    }

    /// # Safety
    /// The caller gives back one reference and does not use it again.
    unsafe fn release(this: NonNull<Self>) {
        // Release, and on the last an Acquire load of the count (which only RMWs change: it
        // reads our decrement, in the release sequence of every earlier one), as `Arc`'s fence;
        // a load so that ThreadSanitizer, which does not model fences, sees the pairing.
        // SAFETY: our reference keeps it alive until the decrement.
        let refs = &unsafe { this.as_ref() }.refs;
        if refs.fetch_sub(1, Ordering::Release) == 1 {
            let _ = refs.load(Ordering::Acquire);
            // SAFETY: the last reference; allocated as a Box in `block_on`.
            drop(unsafe { Box::from_raw(this.as_ptr()) });
        }
    }
}

/// Gives the `block_on` frame's reference back, even on unwind.
struct FrameRef(NonNull<Waiter>);

impl Drop for FrameRef {
    fn drop(&mut self) {
        // SAFETY: the frame's reference, given back once.
        unsafe { Waiter::release(self.0) }
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Runs `future` to completion on the calling thread and returns its output. Tasks it
    /// spawns run on the pool; between polls the thread spins briefly, then waits until the
    /// future's waker is called: on one of the pool's workers it runs other tasks meanwhile
    /// (as [`JoinHandle::join`](crate::runtime::JoinHandle::join) does, so a future that waits
    /// for a task of this pool completes even with a single worker); on any other thread it
    /// parks on a parker from the pool's platform.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let v = pool.block_on(async {
    ///     pool::runtime::yield_now().await;
    ///     pool.spawn_future(async { 5 }).unwrap().await.unwrap()
    /// });
    /// assert_eq!(v, 5);
    /// # }
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let waiter = NonNull::from(Box::leak(Box::new(Waiter {
            refs: AtomicUsize::new(1),
            state: AtomicU32::new(IDLE),
            signal: Signal::new(),
        })));
        let frame = FrameRef(waiter);
        // A borrowed waker: the frame's reference covers it; clones take their own.
        // SAFETY: the vtable's functions expect a live `Waiter`.
        let waker = ManuallyDrop::new(unsafe { Waker::from_raw(Waiter::raw(waiter.as_ptr())) });
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                drop(frame);
                return output;
            }
            // SAFETY: the frame's reference keeps it alive.
            unsafe { waiter.as_ref() }.wait(self);
        }
    }
}
