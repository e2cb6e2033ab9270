//! The job header: the part of a fork-join job (`join`'s stack jobs, the C layer's `FnJob`)
//! that does not depend on its closure's type, so a worker can offer a latent frame knowing
//! only its task pointer (`context.rs`, `promote`), and a thief can record itself on it.
//!
//! A latent job has only its task written ([`JobHeader::latent`]). [`JobHeader::offer`]
//! writes the rest (the thief slot, the pool) just before the job is queued; the offered part
//! is only read after that. The job's completion (`latch::Completion`, what its owner waits
//! on) is the job's own, beside the header, written with the job.

use core::mem::MaybeUninit;
use core::ptr::NonNull;

use crate::latch::Signal;
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};
use crate::task::{Callback, Task};

/// A job's task and, once offered, what a queued job needs. `repr(C)`, task first: the task
/// pointer is a pointer to the header.
#[repr(C)]
pub(crate) struct JobHeader {
    pub(crate) task: Task,
    /// Written by `offer`, before the job is queued; read only after.
    offered: UnsafeCell<MaybeUninit<Offered>>,
}

/// What only a queued job needs.
pub(super) struct Offered {
    /// 1 + the index of the worker that took the job from a queue (0: not taken): whom a
    /// waiting owner steals related work from (`search.rs`, `find_for_wait`: leapfrogging).
    pub(super) thief: AtomicUsize,
    /// The address of the pool (an `Inner<S>`, `any_pool.rs`) whose worker context the
    /// closure gets when a worker of it runs the job.
    pub(super) pool: NonNull<()>,
}

impl JobHeader {
    /// A latent job whose task runs `callback`: not ready to queue until offered.
    #[inline(always)]
    pub(crate) fn latent(callback: Callback) -> Self {
        Self { task: Task::new(callback), offered: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    /// Makes the job behind `task` ready to queue: writes its thief slot and pool.
    ///
    /// # Safety
    /// `task` is the task of a live, not yet offered `JobHeader`, not queued, whose owner is
    /// the caller's thread.
    #[inline]
    pub(crate) unsafe fn offer(task: NonNull<Task>, pool: NonNull<()>) {
        // SAFETY: `task` is the first field of a repr(C) `JobHeader` (the caller's contract).
        let header = unsafe { task.cast::<JobHeader>().as_ref() };
        let offered = Offered { thief: AtomicUsize::new(0), pool };
        // SAFETY: nobody else can see the job before it is queued, after this write.
        header.offered.with_mut(|o| unsafe { (*o).write(offered) });
    }

    /// # Safety
    /// The job was offered.
    #[inline]
    pub(super) unsafe fn offered(&self) -> &Offered {
        // SAFETY: initialised by `offer` (the caller's contract); only read from now on.
        self.offered.with(|o| unsafe { (*o).assume_init_ref() })
    }

    /// What the owner waits for: `signal`, the job's, and the worker running the job (if
    /// known yet).
    ///
    /// # Safety
    /// The job was offered.
    #[inline]
    pub(crate) unsafe fn until<'a>(&self, signal: &'a Signal) -> Until<'a> {
        // SAFETY: the caller's contract.
        let thief = unsafe { self.offered() }.thief.load(Ordering::Relaxed).checked_sub(1);
        Until { signal, thief, deadline: None }
    }
}

/// What a wait waits for: a signal, and, when it is a stolen join half's, the worker that stole
/// it (whose join deque holds the forks of that half: related work, "leapfrogging"); at most
/// until a deadline, if it has one.
#[derive(Clone, Copy)]
pub(crate) struct Until<'a> {
    pub(crate) signal: &'a Signal,
    /// Index of the worker running the awaited job, if known.
    pub(crate) thief: Option<usize>,
    /// When the wait gives up: ns on the pool's clock (`Spawner::now_ns`).
    pub(crate) deadline: Option<u64>,
}
