//! A queue's shared state behind its lock ([`State`], [`Inner`]), its waiters, and its
//! runners ([`Runner`]): pool tasks embedded in the queue's allocation that, each time the pool
//! starts one, run the queue's oldest waiting tasks one at a time (up to
//! [`BATCH`], then it submits itself again) and end when nothing waits or the
//! queue was narrowed below its runners (`Admission::take` decides each step, under the lock).
//!
//! Invariant: a runner's callback touches the queue's memory only while it is counted in
//! `Admission::runners`; the step that ends it (its task pushed back among the idle runners,
//! under the lock) is its last access before the unlock. After that it touches only the
//! waiters it took, whose nodes are on their own threads' stacks.

use core::cell::Cell;
use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use super::admission::{Admission, Step};
use super::list::List;
use crate::error::Error;
use crate::latch::Signal;
use crate::platform::Spawner;
use crate::scheduler::ThreadPool;
use crate::sync::{AtomicUsize, Backoff, Locked, Ordering, TryLock};
use crate::task::{Batch, Callback, Task};

/// Tasks a runner runs in a row before it yields its pool thread (submits itself again). One
/// under loom, so that its models reach a yield with two tasks.
pub(super) const BATCH: usize = if cfg!(loom) { 1 } else { 32 };

/// What the lock guards (module invariants).
pub(super) struct State {
    pub(super) adm: Admission,
    pub(super) waiting: List,
    /// Runner tasks not submitted to the pool (`runners` slots minus `adm.runners`).
    pub(super) idle: Batch,
    /// Threads in [`Queue::wait`] or `Drop`, woken when the admission turns idle.
    pub(super) waiters: *const Waiter,
    /// Submitters waiting for a place in a full queue (`Queue::submit_timeout`), one woken per
    /// place freed.
    pub(super) places: *const Waiter,
    /// The queue is being dropped (destroyed): submits are refused (`Error::Shutdown`) while
    /// the drop waits for the runners and hands the waiting tasks back, so a task it runs
    /// cannot queue behind a queue about to be freed.
    pub(super) closed: bool,
    /// Tasks started, cancelled and refused since the queue was made (`Queue::stats`): kept
    /// apart from the admission, whose states must stay few enough to enumerate.
    pub(super) started: usize,
    pub(super) cancelled: usize,
    pub(super) refused: usize,
    /// Queues whose runners run as this queue's tasks ([`Queue::with_target`]): while any
    /// exists, this queue is not dropped (a C destroy is refused), so none outlives it.
    ///
    /// [`Queue::with_target`]: super::Queue::with_target
    pub(super) children: usize,
}

// SAFETY: the list, the idle runners and the waiter chain are pointers handed between threads
// only under the queue's lock (module invariants); tasks are `Send`.
unsafe impl Send for State {}

/// One waiting thread's node, on its own stack, linked while it waits.
pub(super) struct Waiter {
    pub(super) signal: Signal,
    next: Cell<*const Waiter>,
}

impl Waiter {
    pub(super) fn new() -> Self {
        Self { signal: Signal::new(), next: Cell::new(ptr::null()) }
    }
}

/// The queue's one allocation (with its runner slots).
pub(crate) struct Inner<S: Spawner> {
    /// A copy of the pool's handle that never frees the pool (the handle is a pointer to the
    /// pool's state, so the copy does not depend on where the caller keeps its handle: a C
    /// host's handle is made per call).
    pub(super) pool: ManuallyDrop<ThreadPool<S>>,
    pub(super) state: TryLock<State>,
    pub(super) cancel: Option<Callback>,
    pub(super) runners: Box<[Runner<S>]>,
    /// Where the runners are submitted: the queue whose tasks they are (it outlives this one:
    /// its `children` counts it), or `None`: the pool.
    pub(super) target: Option<NonNull<Inner<S>>>,
}


impl<S: Spawner> Inner<S> {
    /// The pool: alive while the queue is (`Queue<'a, S>` borrows it; the C API's contract).
    pub(super) fn pool(&self) -> &ThreadPool<S> {
        &self.pool
    }

    /// The lock: short sections (list and counts) only; a holder preempted meanwhile is
    /// waited for with a backoff that sleeps (on a parker made at the first sleep).
    pub(super) fn lock(&self) -> Locked<'_, State> {
        if let Some(st) = self.state.try_lock() {
            return st;
        }
        let mut backoff = Backoff::new(1, 50);
        let mut parker = None;
        self.state.lock(|| backoff.snooze(parker.get_or_insert_with(|| self.pool().spawner().new_parker())))
    }

    /// The pool was inherited through `fork()`: its threads (and the queue's runners) are in
    /// the parent, so the queue follows the pool's rule: no work, no wait (`Error::Forked`).
    pub(super) fn inherited(&self) -> bool {
        self.pool().inner().link.is_inherited()
    }

    /// The target queue, if the runners are its tasks.
    pub(super) fn target(&self) -> Option<&Inner<S>> {
        // SAFETY: a target outlives the queues that target it (`State::children`).
        self.target.map(|t| unsafe { t.as_ref() })
    }

    /// The calling thread is a worker of the pool inside one of this queue's tasks, or of a
    /// task of its target (a runner of this queue is one: a wait there could wait for the
    /// slot it holds itself).
    pub(super) fn on_own_task(&self) -> bool {
        let me = self.pool().current_worker().map_or(0, |cx| cx.index() + 1);
        (me != 0 && self.runners.iter().any(|r| r.is_running_on(me))) || self.target().is_some_and(Inner::on_own_task)
    }

    /// Submits a runner's task where this queue's runners run: to the target queue, as one of
    /// its tasks (it has no bound, so only its pool refuses), or to the pool.
    ///
    /// # Safety
    /// `task` is an idle runner's, counted in `Admission::runners`: ours to submit.
    pub(super) unsafe fn submit_runner(&self, task: NonNull<Task>) -> Result<(), Error> {
        match self.target() {
            // SAFETY: the caller's contract: a valid task, queued nowhere, until it starts.
            Some(target) => unsafe { target.admit(task, None) },
            // SAFETY: as above.
            None => unsafe { self.pool().submit(task) },
        }
    }

    /// Unlinks `task` if it waits in this queue's list (compared by address, never read), with
    /// its place in the bound and, if that leaves the queue idle, its waiters woken; whether
    /// it was there. `cancel`: count it as cancelled (a user's cancel, not a runner recalled).
    pub(super) fn unlink(&self, task: NonNull<Task>, cancel: bool) -> bool {
        let (waiters, place) = {
            let mut st = self.lock();
            if !st.waiting.remove(task) {
                return false;
            }
            st.cancelled += usize::from(cancel);
            let idle = st.adm.remove(1);
            (if idle { st.take_waiters() } else { ptr::null() }, st.freed_place())
        };
        // SAFETY: taken from their chains under the lock, each set once.
        unsafe {
            wake(waiters);
            wake(place);
        }
        true
    }

    /// Takes back this queue's runners still waiting in the target's list, as if the target
    /// had refused them (a drop: a suspended target, or one whose pool refuses work, would
    /// never start them, and the drop waits for every runner out). A runner the target has
    /// started already is not in its list and ends by itself; one yielding links itself into
    /// the target's list under this queue's lock, so after the drop's closing section it is
    /// either there already or will find nothing waiting and end. At most the runners out and
    /// not running (read once, after the closing section: none can be added) are looked for,
    /// so an idle queue's drop does not walk the target's list at all.
    pub(super) fn recall_runners(&self) {
        let Some(target) = self.target() else { return };
        let mut out = {
            let st = self.lock();
            st.adm.runners - st.adm.running
        };
        for runner in self.runners.iter() {
            if out == 0 {
                return;
            }
            if target.unlink(runner.task(), false) {
                out -= 1;
                let waiters = {
                    let mut st = self.lock();
                    // SAFETY: unlinked before it started: the runner is ours again.
                    if unsafe { st.take_back(runner.task()) } { st.take_waiters() } else { ptr::null() }
                };
                // SAFETY: taken from the chain under the lock, each set once.
                unsafe { wake(waiters) };
            }
        }
    }

    /// Returns once the admission reads idle (a waiter registered under the lock is woken by
    /// the transition that makes it idle).
    pub(super) fn wait_idle(&self) {
        let waiter = Waiter::new();
        {
            let mut st = self.lock();
            if st.adm.is_idle() {
                return;
            }
            waiter.next.set(st.waiters);
            st.waiters = &waiter;
        }
        self.pool().wait_for(&waiter.signal);
    }
}

impl State {
    pub(super) fn new(width: usize, bound: usize) -> Self {
        let adm = Admission::new(width, bound);
        Self { adm, waiting: List::new(), idle: Batch::new(), waiters: ptr::null(), places: ptr::null(), closed: false, started: 0, cancelled: 0, refused: 0, children: 0 }
    }

    /// A runner back without having run (refused by the pool or the target, or taken back
    /// from the target's list): idle again and no longer counted. Whether the queue is idle.
    ///
    /// # Safety
    /// `runner` is one of this queue's runners, counted, and submitted nowhere.
    pub(super) unsafe fn take_back(&mut self, runner: NonNull<Task>) -> bool {
        // SAFETY: the caller's contract: the runner's task is ours.
        unsafe { self.idle.push(runner) };
        self.adm.refused()
    }

    pub(super) fn take_waiters(&mut self) -> *const Waiter {
        core::mem::replace(&mut self.waiters, ptr::null())
    }

    /// Links `place` into the place-waiter chain; it must stay valid until its signal is set
    /// or [`unlink_place`](Self::unlink_place) removed it.
    pub(super) fn register_place(&mut self, place: &Waiter) {
        place.next.set(self.places);
        self.places = place;
    }

    /// The whole place-waiter chain, for [`wake`] (`Queue::set_width`: a narrowing below 2 has
    /// them check again whether a place can still free, a widening that leaves room lets them
    /// in).
    pub(super) fn take_places(&mut self) -> *const Waiter {
        core::mem::replace(&mut self.places, ptr::null())
    }

    /// After a transition of the admission: one place-waiter, taken off the chain (a chain of
    /// one for [`wake`]), if the queue now has room (`Admission::is_full`: a start or a cancel
    /// frees a place in a bounded queue, an end or a cancel in a handoff one), else null.
    pub(super) fn freed_place(&mut self) -> *const Waiter {
        let head = if self.adm.is_full() { ptr::null() } else { self.places };
        if !head.is_null() {
            // SAFETY: a registered node lives until it is set or unlinked (register_place).
            unsafe {
                self.places = (*head).next.get();
                (*head).next.set(ptr::null());
            }
        }
        head
    }

    /// Unlinks `place` if it is still in the chain: whether it was.
    pub(super) fn unlink_place(&mut self, place: &Waiter) -> bool {
        let mut cur = self.places;
        let mut prev: *const Waiter = ptr::null();
        while !cur.is_null() {
            // SAFETY: registered nodes live until set or unlinked.
            let next = unsafe { (*cur).next.get() };
            if ptr::eq(cur, place) {
                if prev.is_null() {
                    self.places = next;
                } else {
                    // SAFETY: as above.
                    unsafe { (*prev).next.set(next) };
                }
                return true;
            }
            prev = cur;
            cur = next;
        }
        false
    }
}

/// Sets each waiter's signal (reading its link first: a waiter may return, and its node
/// vanish, as soon as its signal is set).
///
/// # Safety
/// `w` is a chain taken from a queue's state under its lock (its nodes live until set), and
/// this is its one wake.
pub(super) unsafe fn wake(mut w: *const Waiter) {
    while !w.is_null() {
        // SAFETY: a node of the chain, alive until its signal is set below.
        unsafe {
            let next = (*w).next.get();
            (*w).signal.set();
            w = next;
        }
    }
}

/// One runner slot (module docs). `repr(C)` with the task first: the task pointer is the
/// runner's.
#[repr(C)]
pub(super) struct Runner<S: Spawner> {
    task: Task,
    queue: *const Inner<S>,
    /// The worker (index + 1) running one of the queue's tasks in this runner, 0 otherwise:
    /// written by that worker only, so a worker that reads its own index here is inside a task
    /// of this queue (`Queue::wait`'s refusal). Relaxed: only the writer's own reads matter.
    worker: AtomicUsize,
}

impl<S: Spawner> Runner<S> {
    pub(super) fn new(queue: *const Inner<S>) -> Self {
        Self { task: Task::new(run::<S>), queue, worker: AtomicUsize::new(0) }
    }

    /// This runner's task, to submit to the pool or keep among the idle ones: the pointer to
    /// the whole runner (its first field), so the callback may reach the other fields through
    /// it (a pointer made from `&self.task` would cover the task only: Miri's aliasing model).
    pub(super) fn task(&self) -> NonNull<Task> {
        NonNull::from(self).cast()
    }

    pub(super) fn is_running_on(&self, worker: usize) -> bool {
        self.worker.load(Ordering::Relaxed) == worker
    }
}

/// The runner's callback (module docs).
///
/// # Safety
/// Called by the pool once per submit of a runner's task (the first field of a `Runner<S>` in
/// a live queue's slots).
unsafe extern "C" fn run<S: Spawner>(task: *mut Task) {
    let runner = task.cast::<Runner<S>>().cast_const();
    // SAFETY: the runner is counted (submitted), so its queue is alive (module invariant).
    let queue: *const Inner<S> = unsafe { (*runner).queue };
    // SAFETY: as above.
    let me = unsafe { (*queue).pool().current_worker().map_or(0, |cx| cx.index() + 1) };
    // Read while the queue is alive; the target outlives it (`State::children`).
    // SAFETY: as above.
    let target = unsafe { (*queue).target() };
    let mut finished = false;
    let mut left = BATCH;
    loop {
        // A yield to a target queue: its admission, made under this queue's lock (so a drop's
        // `recall_runners`, after it closed the queue, finds the runner in the target's list).
        let mut yielded = None;
        let (step, next, waiters, place) = {
            // SAFETY: as above; the guard ends before the queue may be freed.
            let mut st = unsafe { (*queue).lock() };
            let step = st.adm.take(finished, left > 0);
            let place = st.freed_place();
            match step {
                Step::Run => {
                    st.started += 1;
                    (step, st.waiting.pop(), ptr::null(), place)
                }
                Step::Yield => {
                    if let Some(target) = target {
                        // SAFETY: this runner's task is its callback's until handed on: now to
                        // the target (locks nest this queue's, then the target's).
                        yielded = Some(unsafe { target.enqueue(&mut target.lock(), NonNull::new_unchecked(task), None) });
                    }
                    (step, None, ptr::null(), place)
                }
                Step::End { idle } => {
                    // SAFETY: this runner's task is its callback's until handed on: now to
                    // the idle runners (the last access to the queue, under the lock).
                    unsafe { st.idle.push(NonNull::new_unchecked(task)) };
                    (step, None, if idle { st.take_waiters() } else { ptr::null() }, place)
                }
            }
        };
        // SAFETY: taken from their chains under the lock, each set once; only the waiters'
        // own nodes are touched (the queue may be gone after an `End`).
        unsafe {
            wake(waiters);
            wake(place);
        }
        match step {
            Step::Run => {
                let next = next.expect("a waiting task behind every Run");
                // SAFETY: still counted (running): the queue is alive; the slot is ours.
                let worker = unsafe { &(*runner).worker };
                worker.store(me, Ordering::Relaxed);
                // SAFETY: popped from the list under the lock: ours to run, once.
                unsafe { Task::run(next) };
                worker.store(0, Ordering::Relaxed);
                finished = true;
                left -= 1;
            }
            Step::Yield => {
                let submitted = match (target, yielded) {
                    // Linked in the target's list: the target's now (the queue may be gone).
                    (_, Some(Ok(None))) => Ok(()),
                    // SAFETY: the target's runner `enqueue` took for this task, counted there
                    // (so the target is alive); only the target is touched.
                    (Some(target), Some(Ok(Some(r)))) => unsafe { target.start_runner(NonNull::new_unchecked(task), r) },
                    (_, Some(Err(e))) => Err(e),
                    // SAFETY: still counted: the queue and its pool are alive; the task is ours
                    // to submit, and after an `Ok` it is the pool's (not touched again).
                    _ => unsafe { (*queue).pool().submit(NonNull::new_unchecked(task)) },
                };
                if submitted.is_ok() {
                    return;
                }
                // Refused (the pool's shutdown runs what is left on its own thread): go on here.
                finished = false;
                left = BATCH;
            }
            Step::End { .. } => return,
        }
    }
}
