//! Which task this thread is polling, so that a task waking **itself** during its own poll (a
//! `yield_now`, a channel it both sends to and receives from) costs a thread-local write instead
//! of a read-modify-write on its state word (`std` only: it needs thread-locals).
//!
//! One thread-local word: the address of the task being polled, with bit 0 set once that task
//! woke itself by reference. The harness's `run` saves the old word and installs its task
//! before the poll, and restores the old word after it (polls nest when a task helps in a
//! blocking `join`: the inner poll has its own word, and the outer one gets its own back).
//! `wake_by_ref` on the task in the word sets bit 0 and returns; `after_pending` then re-queues
//! the task (still `RUNNING`, with no RMW: see `state.rs`).
//!
//! A leaf of the runtime: it knows a task only as an address (`NonNull<()>`, the task's
//! header), so the harness and the waker depend on it and it on nothing of theirs.
//!
//! Why this is enough: the word names the task only while this thread holds its `RUNNING`
//! (between `run`, which claims it, and `after_pending`), and only this thread reads or
//! writes the word, so the poller sees the bit in program order; no other thread needs to see a
//! wake that the poller itself acts on. Wakes from other threads, and by value, still go through
//! the state word (`NOTIFIED`). A task header is 8-byte aligned, so bit 0 is free.

use core::cell::Cell;
use core::ptr::NonNull;

#[cfg(not(any(loom, shuttle)))]
std::thread_local! {
    static POLLING: Cell<usize> = const { Cell::new(0) };
}

// Under loom the word is per loom thread, so the models in `runtime/loom.rs` take the
// self-wake path (and its re-queue without an RMW) like real threads do.
#[cfg(loom)]
loom::thread_local! {
    static POLLING: Cell<usize> = Cell::new(0);
}

// Under shuttle, per shuttle thread (they all run on one OS thread), for the same reason.
#[cfg(all(shuttle, not(loom)))]
shuttle::thread_local! {
    static POLLING: Cell<usize> = Cell::new(0);
}

const SELF_WOKEN: usize = 1;

/// The word to restore after the poll of `task`, which is installed now.
#[inline]
pub(super) fn enter(task: NonNull<()>) -> usize {
    // Exposed: `polling` turns the word back into a pointer.
    POLLING.with(|w| w.replace(task.as_ptr().expose_provenance()))
}

/// Ends the poll `enter` began (restoring `saved`); whether the task woke itself meanwhile.
#[inline]
pub(super) fn exit(saved: usize) -> bool {
    POLLING.with(|w| w.replace(saved)) & SELF_WOKEN != 0
}

/// If `task` is the task this thread is polling, records its self-wake and returns true.
#[inline]
pub(super) fn wake_self(task: NonNull<()>) -> bool {
    POLLING
        .try_with(|w| {
            let word = w.get();
            if word & !SELF_WOKEN == task.as_ptr() as usize {
                w.set(word | SELF_WOKEN);
                return true;
            }
            false
        })
        .unwrap_or(false)
}

/// The task this thread is polling, if any (a timer binds to its pool, `crate::time`).
#[inline]
pub(crate) fn polling() -> Option<NonNull<()>> {
    // The word holds an address exposed by `enter` (a plain integer keeps the yield path's
    // self-wake test a compare and an or): take that provenance back.
    POLLING.try_with(|w| NonNull::new(core::ptr::with_exposed_provenance_mut::<()>(w.get() & !SELF_WOKEN))).ok().flatten()
}
