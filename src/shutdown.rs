//! The shutdown gate of a pool ([`ThreadPool`](crate::ThreadPool) and
//! [`BlockingPool`](crate::BlockingPool)): who shuts the pool down, and when its memory may be
//! freed.
//!
//! A pool is shut down once, by the first caller that claims the gate; the pool's memory is
//! freed by whoever drops its last handle. Through the C layer the two may race: `pool_destroy`
//! may run while another thread is still inside `pool_shutdown`, which borrows the pool. The
//! dropper therefore waits on the gate ([`ShutdownGate::wait_finished`]) until that shutdown has
//! finished, and frees only a pool whose shutdown completed: a shutdown that unwound (a
//! [`Spawner::join_all`](crate::Spawner::join_all) that panicked) may have left threads running
//! in the pool, so its memory is leaked instead.
//!
//! ```text
//!   OPEN --claim--> RUNNING --finish--> DONE      (free)
//!     |                  \--unwind--> UNWOUND     (leak: threads may still use it)
//!     \--detach--> DETACHED                       (last handle dropped on a pool thread: leak)
//! ```
//!
//! Nothing here is on a submit path: the gate is read by shutdown and drop only. Calls that
//! begin after the last handle's drop began are the caller's error (a use after free), as for
//! any object: the gate does not count its users.

use crate::latch::Signal;
use crate::platform::Parker;
use crate::sync::{AtomicU32, Ordering};

const OPEN: u32 = 0;
const RUNNING: u32 = 1;
const DONE: u32 = 2;
const UNWOUND: u32 = 3;
const DETACHED: u32 = 4;

/// See the module docs.
pub(crate) struct ShutdownGate {
    state: AtomicU32,
    /// Set once by the claimer when its shutdown ends (finished or unwound); waited on by the
    /// one dropper.
    finished: Signal,
}

impl ShutdownGate {
    pub(crate) fn new() -> Self {
        Self { state: AtomicU32::new(OPEN), finished: Signal::new() }
    }

    /// Claims the shutdown. `None` if it was already claimed (by a shutdown or a detach). The
    /// returned guard must be [`finish`](Finishing::finish)ed when the shutdown completes;
    /// dropped unfinished (an unwind), it marks the pool as not safe to free.
    pub(crate) fn claim(&self) -> Option<Finishing<'_>> {
        // AcqRel: orders the claim with everything before it on both sides.
        self.state.compare_exchange(OPEN, RUNNING, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        Some(Finishing { gate: self, done: false })
    }

    /// Claims the shutdown for a pool whose last handle is dropped on one of its own threads:
    /// nobody will wait, and the pool is never freed. False if already claimed.
    pub(crate) fn detach(&self) -> bool {
        self.state.compare_exchange(OPEN, DETACHED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// The dropper, after its own shutdown call returned (done, or refused because another
    /// call had claimed it): waits until the claimer's shutdown has ended, parking on `parker`
    /// (made only if it has to wait). True if the pool may be freed (its shutdown completed);
    /// false if it must be leaked. Called at most once per gate, by the dropper.
    pub(crate) fn wait_finished<P: Parker>(&self, parker: impl FnOnce() -> P) -> bool {
        // Acquire pairs with `Finishing::drop`'s Release (through the signal when waiting).
        match self.state.load(Ordering::Acquire) {
            DONE => return true,
            RUNNING => {}
            _ => return false,
        }
        let parker = parker();
        self.finished.wait(&parker, None);
        self.state.load(Ordering::Acquire) == DONE
    }
}

/// A claimed shutdown in progress (see [`ShutdownGate::claim`]).
pub(crate) struct Finishing<'a> {
    gate: &'a ShutdownGate,
    done: bool,
}

impl Finishing<'_> {
    /// The shutdown completed: every thread is joined. The caller's last access to the pool
    /// must come before this (a waiting dropper may free it as soon as the gate is set).
    pub(crate) fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        let state = if self.done { DONE } else { UNWOUND };
        // Release: the shutdown's work (the joins) happens before the dropper's free.
        self.gate.state.store(state, Ordering::Release);
        // SAFETY: only the claimer holds a `Finishing`, and it is dropped once: the one `set`.
        // This is the claimer's last access to the gate and the pool.
        unsafe { self.gate.finished.set() };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct SpinParker;
    impl Parker for SpinParker {
        fn park(&self) {}
        fn park_timeout(&self, _: core::time::Duration) {}
        fn unpark(&self) {}
    }

    #[test]
    fn finished_shutdown_may_free() {
        let gate = ShutdownGate::new();
        gate.claim().unwrap().finish();
        assert!(gate.claim().is_none());
        assert!(gate.wait_finished(|| SpinParker));
    }

    #[test]
    fn unwound_shutdown_must_leak() {
        let gate = ShutdownGate::new();
        drop(gate.claim().unwrap());
        assert!(!gate.wait_finished(|| SpinParker));
    }

    #[test]
    fn detached_pool_must_leak() {
        let gate = ShutdownGate::new();
        assert!(gate.detach());
        assert!(gate.claim().is_none());
        assert!(!gate.wait_finished(|| SpinParker));
    }

    #[test]
    fn open_gate_is_not_freeable() {
        // Drop always shuts down first; an unclaimed gate means it never got that far.
        assert!(!ShutdownGate::new().wait_finished(|| SpinParker));
    }

    #[cfg(feature = "std")]
    #[test]
    fn dropper_waits_for_the_shutdown_in_progress() {
        use std::sync::atomic::AtomicBool;
        let gate = ShutdownGate::new();
        let joined = AtomicBool::new(false);
        let claim = gate.claim().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                joined.store(true, Ordering::Relaxed);
                claim.finish();
            });
            assert!(gate.wait_finished(crate::CondvarParker::new));
            assert!(joined.load(Ordering::Relaxed));
        });
    }
}
