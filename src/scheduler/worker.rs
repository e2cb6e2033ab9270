//! A worker thread: its state ([`Worker`]), its entry point, its run loop and the order in
//! which it looks for work (design text 002, "dequeue"):
//!
//! 1. its own ring (FIFO);
//! 2. the pool's injector (try-lock; takes up to half a ring in one go);
//! 3. every other worker's ring, starting with the next one in the list, stealing half.
//!
//! A worker that finds work after taking more than one task (`pushed`), or while it is the
//! waking thread, notifies before running it, so sleeping threads join in as work appears
//! (the wake-up cascade) but never more than one at a time.
//!
//! # Lifetime
//! A `Worker` is heap-allocated by its own thread when it starts and linked into the pool's
//! intrusive, push-only list. It is freed only when the pool is dropped, after every thread
//! was joined: so thieves, notifiers and shutdown may touch any worker in the list at any time
//! without further synchronisation.

use core::ffi::c_void;
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use super::Inner;
use crate::platform::{Spawner, ThreadStart};
use crate::queue::ring::{Ring, CAPACITY};
use crate::sync::Ordering;
use crate::task::Task;

/// One worker thread's state.
///
/// `#[repr(C)]` with `pool` first: the thread-local "current worker" pointer is type-erased,
/// and `ThreadPool::current_worker` reads `pool` through it before knowing the worker's type.
#[repr(C)]
pub(crate) struct Worker<S: Spawner> {
    /// The pool this worker belongs to (type-erased `*const Inner<S>`).
    pub(crate) pool: *const (),
    /// The next worker in the pool's list (older). Immutable once the worker is published.
    pub(crate) next: *mut Worker<S>,
    /// Position in the idle map and the worker table.
    pub(crate) index: usize,
    /// The worker's own tasks.
    pub(crate) ring: Ring,
    /// The worker sleeps on this.
    pub(crate) parker: S::Parker,
}

impl<S: Spawner> core::fmt::Debug for Worker<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).field("ring", &self.ring).finish_non_exhaustive()
    }
}

impl<S: Spawner> Inner<S> {
    pub(crate) fn thread_start(&self) -> ThreadStart {
        ThreadStart { entry: worker_main::<S>, arg: ptr::from_ref(self).cast_mut().cast::<c_void>() }
    }

    /// Allocates this thread's worker and links it into the pool.
    fn register(&self) -> NonNull<Worker<S>> {
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        // `spawned` never exceeds `max_threads` and threads only exit at shutdown, so every
        // started thread gets a slot.
        assert!(index < self.worker_table.len(), "more threads started than max_threads");
        let worker = Box::new(Worker {
            pool: ptr::from_ref(self).cast::<()>(),
            next: ptr::null_mut(),
            index,
            ring: Ring::new(),
            parker: self.spawner.new_parker(),
        });
        let worker = NonNull::from(Box::leak(worker));
        // Release: the worker's fields are initialised before anyone can reach it.
        self.worker_table[index].store(worker.as_ptr(), Ordering::Release);
        let mut head = self.workers.load(Ordering::Relaxed);
        loop {
            // SAFETY: not yet published, so still exclusively ours.
            unsafe { (*worker.as_ptr()).next = head };
            match self.workers.compare_exchange_weak(head, worker.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return worker,
                Err(actual) => head = actual,
            }
        }
    }

    /// The worker loop: wait for a notification, run everything there is, repeat; after
    /// shutdown, run what is left and exit.
    fn run(&self, me: &Worker<S>) {
        let mut is_waking = false;
        loop {
            match self.wait(me, is_waking) {
                Ok(waking) => is_waking = waking,
                Err(_shutdown) => match self.find_work(me) {
                    // Drain: queued work still runs after shutdown began.
                    Some((task, _)) => {
                        self.run_task(task);
                        continue;
                    }
                    None => return,
                },
            }
            while let Some((task, pushed)) = self.find_work(me) {
                if is_waking || pushed {
                    self.notify(is_waking);
                }
                is_waking = false;
                self.run_task(task);
            }
        }
    }

    #[inline]
    fn run_task(&self, task: NonNull<Task>) {
        // SAFETY: `find_work` dequeued the task, so this is its one run.
        unsafe { Task::run(task) };
    }

    /// Finds a task: own ring, injector, then steal. The bool says whether more tasks were
    /// moved into our ring (so another thread may be woken to share them).
    #[inline]
    pub(crate) fn find_work(&self, me: &Worker<S>) -> Option<(NonNull<Task>, bool)> {
        // SAFETY: `me` is this thread's own worker.
        if let Some(task) = unsafe { me.ring.pop() } {
            return Some((task, false));
        }
        self.find_work_slow(me)
    }

    #[inline(never)]
    fn find_work_slow(&self, me: &Worker<S>) -> Option<(NonNull<Task>, bool)> {
        if let Some(found) = self.take_from_injector(me) {
            return Some(found);
        }
        let head = self.workers.load(Ordering::Acquire);
        let me_ptr = ptr::from_ref(me).cast_mut();
        let mut victim = if me.next.is_null() { head } else { me.next };
        while victim != me_ptr && !victim.is_null() {
            // SAFETY: workers live until the pool is dropped; `next` is immutable.
            let v = unsafe { &*victim };
            if !v.ring.is_empty() {
                // SAFETY: `me.ring` is our own ring.
                if let Some(stolen) = unsafe { v.ring.steal_into(&me.ring) } {
                    self.stats_steals.fetch_add(1, Ordering::Relaxed);
                    return Some((stolen.task, stolen.queued > 0));
                }
            }
            victim = if v.next.is_null() { head } else { v.next };
        }
        None
    }

    /// Takes up to half a ring from the injector into our (empty) ring, returns one to run.
    fn take_from_injector(&self, me: &Worker<S>) -> Option<(NonNull<Task>, bool)> {
        if self.injector.is_empty() {
            return None;
        }
        let mut consumer = self.injector.try_lock()?;
        let first = consumer.pop()?;
        let mut moved = 0;
        while moved < CAPACITY / 2 {
            let Some(task) = consumer.pop() else { break };
            // SAFETY: our own ring; it was empty when we came here and only we push to it, so
            // it has room and `push` cannot overflow.
            let pushed = unsafe { me.ring.push(task) };
            debug_assert!(pushed.is_ok());
            moved += 1;
        }
        Some((first, moved > 0))
    }
}

/// The entry point of every worker thread.
///
/// # Safety
/// `arg` is the `Inner<S>` of a live pool, which outlives this thread (the pool joins it).
unsafe extern "C" fn worker_main<S: Spawner>(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let pool = unsafe { &*arg.cast_const().cast::<Inner<S>>() };
    let worker = pool.register();
    pool.spawner.set_current_worker(worker.as_ptr().cast_const().cast());
    // SAFETY: the worker lives until the pool is dropped, after this thread is joined.
    pool.run(unsafe { worker.as_ref() });
    pool.spawner.set_current_worker(ptr::null());
    pool.unregister_thread();
}
