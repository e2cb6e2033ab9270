//! Submitting to a [`Queue`]: without blocking ([`Queue::try_submit`]), or waiting for a place
//! in a bounded queue ([`Queue::submit_timeout`]).
//!
//! A submitter that finds the queue full registers a node on its own stack in the queue's
//! place-waiter chain, under the same lock section that found it full, so no freed place is
//! missed: each transition that leaves the queue with room (a task starting in a bounded
//! queue, ending in a handoff one, a cancel) takes one node off the chain under the lock
//! (`State::freed_place`; a widening that leaves room takes all of them) and sets its signal
//! after the unlock. A submitter whose deadline passes unlinks its node under the lock; if a
//! waker took it first, it waits for that set (the node must live until then) and tries once
//! more.
//!
//! A task of the queue (or of a queue on it) may wait for a place in it, as it may in the
//! FIFO pools programs replace with a queue (lz4 reads its next chunk from a task of the pool
//! it submits to): only while another runner can take the next task once its own ends, which
//! frees a place ([`Admission::others_free_places`](super::admission::Admission)). Otherwise,
//! and for a queue on a target (its runners wait for the target's slots, which the caller may
//! hold), it would wait for itself: refused. A narrowing below 2 wakes the place-waiters so
//! they check again.

use core::ptr::{self, NonNull};
use core::time::Duration;

use super::inner::{wake, Inner, State, Waiter};
use super::Queue;
use crate::error::Error;
use crate::platform::Spawner;
use crate::scheduler::job::Until;
use crate::task::Task;

impl<S: Spawner> Queue<'_, S> {
    /// Submits `task` without blocking.
    ///
    /// # Errors
    /// [`Error::Full`] when `bound` tasks wait already (a handoff queue: when every width slot
    /// holds a task, [`QueueConfig::HANDOFF`](super::QueueConfig::HANDOFF));
    /// [`Error::Shutdown`], [`Error::Spawn`] or [`Error::Forked`] when the pool refused the
    /// runner the task needed (`Forked`
    /// always, for a queue inherited through `fork()`). On error the
    /// task was not queued and is still the caller's. (A task accepted while the pool refuses
    /// work, behind another one's runner, waits until the queue's drop hands it back.)
    ///
    /// # Safety
    /// As [`ThreadPool::submit`](crate::ThreadPool::submit): `task` is valid, has a callback, is
    /// queued nowhere, and stays valid and unmoved until its callback has started or it was
    /// cancelled.
    pub unsafe fn try_submit(&self, task: NonNull<Task>) -> Result<(), Error> {
        // SAFETY: the caller's contract.
        unsafe { self.inner().admit(task, None) }
    }

    /// Submits `task`, waiting while the queue is full until a place frees (a waiting task
    /// starts or is cancelled, or in a handoff queue a running one ends; woken by it, never
    /// by polling) or `timeout` passes (`None`: no limit; zero: as
    /// [`try_submit`](Self::try_submit)). On one of the pool's workers it waits
    /// through the pool's waiting loop (runs other work meanwhile); elsewhere it parks.
    ///
    /// From a task of this queue (or of a queue on it) it waits only while another of the
    /// queue's runners can free a place: the width is at least 2 and another runner is out,
    /// so one of the other running tasks ending starts the next waiting task. Such tasks that
    /// all wait for places in their own queue wait for each other, as in any bounded pool.
    ///
    /// # Errors
    /// As [`try_submit`](Self::try_submit), [`Error::Full`] once the timeout passed;
    /// [`Error::InvalidArgument`] from a task of this queue (or of a queue on it) that finds
    /// it full when nothing but its own runner could free a place (width 1, no other runner
    /// out, or a queue on a target: it would wait for itself), also after a narrowing below 2
    /// while it waits; for a finite non-zero timeout on a platform without a clock
    /// (`Spawner::now_ns`); [`Error::Forked`] in a child that inherited the pool through
    /// `fork()`. On error the task was not queued.
    ///
    /// # Safety
    /// As [`try_submit`](Self::try_submit).
    pub unsafe fn submit_timeout(&self, task: NonNull<Task>, timeout: Option<Duration>) -> Result<(), Error> {
        let inner = self.inner();
        if timeout == Some(Duration::ZERO) {
            // SAFETY: forwarded contract.
            return unsafe { self.try_submit(task) };
        }
        let own = inner.on_own_task();
        let spawner = inner.pool().spawner();
        let deadline = match timeout {
            None => None,
            Some(t) => {
                let now = spawner.now_ns().ok_or(Error::InvalidArgument)?;
                Some(now.saturating_add(u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)))
            }
        };
        loop {
            let place = Waiter::new();
            // SAFETY: forwarded contract; `place` outlives its registration (below).
            match unsafe { inner.admit(task, Some(Place { waiter: &place, own_task: own })) } {
                Err(Error::Full) => {}
                done => return done,
            }
            if inner.pool().wait_until(Until { signal: &place.signal, thief: None, deadline }) {
                continue;
            }
            {
                let mut st = inner.lock();
                if st.unlink_place(&place) {
                    st.refused += 1;
                    return Err(Error::Full);
                }
            }
            // A waker took the node: it sets the signal soon, and the place is ours to try.
            inner.pool().wait_for(&place.signal);
            // SAFETY: forwarded contract.
            return unsafe { self.try_submit(task) };
        }
    }
}

/// A blocking submitter's node for the place-waiter chain, and whether the submitter is a task
/// of the queue (or of a queue on it), which may wait only while another runner can free a
/// place (module docs).
pub(super) struct Place<'a> {
    pub(super) waiter: &'a Waiter,
    pub(super) own_task: bool,
}

impl<S: Spawner> Inner<S> {
    /// Admits `task` or, full, registers `place` (if any) in the place-waiter chain; then
    /// submits the runner the task needs, undoing the admission if the pool (or the target
    /// queue) refuses it.
    ///
    /// # Safety
    /// As [`Queue::try_submit`]; `place`'s node stays valid until its signal is set or it
    /// is unlinked.
    pub(super) unsafe fn admit(&self, task: NonNull<Task>, place: Option<Place<'_>>) -> Result<(), Error> {
        if self.inherited() {
            return Err(Error::Forked);
        }
        // SAFETY: the caller's contract.
        let runner = unsafe { self.enqueue(&mut self.lock(), task, place) }?;
        // SAFETY: as above; the runner was taken for this task.
        runner.map_or(Ok(()), |runner| unsafe { self.start_runner(task, runner) })
    }

    /// `admit`'s part under this queue's lock (`st`): links `task`, or refuses it (closed,
    /// or full: then `place` is registered, unless only the submitting task's own slot could
    /// free one); the idle runner to submit for it, if it needs one (counted already).
    ///
    /// # Safety
    /// As [`admit`](Self::admit); `st` is this queue's state.
    pub(super) unsafe fn enqueue(&self, st: &mut State, task: NonNull<Task>, place: Option<Place<'_>>) -> Result<Option<NonNull<Task>>, Error> {
        if st.closed {
            st.refused += 1;
            return Err(Error::Shutdown);
        }
        let Ok(grew) = st.adm.submit() else {
            match place {
                // A queue on a target waits for the target's slots, which the task may hold.
                Some(p) if p.own_task && !(self.target().is_none() && st.adm.others_free_places()) => {
                    return Err(Error::InvalidArgument);
                }
                Some(p) => st.register_place(p.waiter),
                None => st.refused += 1,
            }
            return Err(Error::Full);
        };
        // SAFETY: the caller's contract.
        unsafe { st.waiting.push(task) };
        Ok(grew.then(|| st.idle.pop().expect("a runner slot for each unit of width")))
    }

    /// `admit`'s part after the unlock: submits `runner` (which `enqueue` took for `task`) and,
    /// if it is refused, undoes the admission of `task` unless a runner took it meanwhile.
    ///
    /// # Safety
    /// `runner` came from `enqueue` for `task`, and is submitted once.
    pub(super) unsafe fn start_runner(&self, task: NonNull<Task>, runner: NonNull<Task>) -> Result<(), Error> {
        // SAFETY: an idle runner's task is ours to submit; it stays valid while counted.
        let Err(e) = (unsafe { self.submit_runner(runner) }) else { return Ok(()) };
        let (removed, waiters, place) = {
            let mut st = self.lock();
            // SAFETY: the runner came back unsubmitted.
            let idle = unsafe { st.take_back(runner) };
            let removed = st.waiting.remove(task);
            st.refused += usize::from(removed);
            let idle = if removed { st.adm.remove(1) } else { idle };
            let place = if removed { st.freed_place() } else { ptr::null() };
            (removed, if idle { st.take_waiters() } else { ptr::null() }, place)
        };
        // SAFETY: taken from their chains under the lock, each set once.
        unsafe {
            wake(waiters);
            wake(place);
        }
        if removed { Err(e) } else { Ok(()) }
    }
}
