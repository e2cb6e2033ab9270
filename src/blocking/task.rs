//! [`BlockingTask`]: the intrusive task of the blocking pool, with its flags and cancel
//! callback.

use core::ffi::c_uint;
use core::fmt;


use crate::task::{Callback, Task};

/// The header of a blocking task: a [`Task`] plus what shutdown needs to know about it.
///
/// Embed it (first, or anywhere with [`container_of!`](crate::container_of)) in your own
/// `#[repr(C)]` struct and submit a pointer to it. Layout-identical to the C
/// `struct pool_blocking_task { struct task task; void (*cancel)(struct task *); unsigned flags; }`.
///
/// Both callbacks receive a pointer to the embedded `task` field, which is the first field, so
/// the pointer is also a pointer to this header. The contract is [`Task`]'s, extended:
/// * once submitted, **exactly one** of the two callbacks is called, exactly once: `callback`
///   when it runs, or `cancel` when the pool shuts down before it ran and it is not
///   [`MANDATORY`](Self::MANDATORY) (a task without `cancel` runs even then);
/// * the memory stays valid, unmoved and unmodified until that call starts; from then on the
///   pool does not touch it (the callback may free it).
///
/// ```
/// use pool::{container_of, BlockingTask, Task};
///
/// #[repr(C)]
/// struct ReadFile { header: BlockingTask, path: &'static str }
///
/// unsafe extern "C" fn read(task: *mut Task) {
///     // SAFETY: every task with this callback is the header of a `ReadFile`.
///     let job = unsafe { &*container_of!(task.cast::<BlockingTask>(), ReadFile, header) };
///     let _ = job.path; // ... blocking I/O ...
/// }
/// unsafe extern "C" fn give_back(_task: *mut Task) { /* free what the job owns */ }
///
/// let job = ReadFile { header: BlockingTask::new(read).with_cancel(give_back), path: "/etc/hosts" };
/// assert!(!job.header.is_mandatory());
/// ```
#[repr(C)]
pub struct BlockingTask {
    /// The intrusive task: its `next` links the queue, its callback runs the work.
    pub(crate) task: Task,
    /// Called instead of `callback` when shutdown hands the task back; `None`: never cancelled.
    pub(crate) cancel: Option<Callback>,
    /// [`BlockingTask::MANDATORY`] or 0.
    pub(crate) flags: c_uint,
}

// SAFETY: as `Task`: the pool moves it between threads by pointer under the submission contract.
unsafe impl Send for BlockingTask {}
// SAFETY: shared access reads plain fields and touches `next` atomically.
unsafe impl Sync for BlockingTask {}

impl fmt::Debug for BlockingTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingTask")
            .field("task", &self.task)
            .field("cancel", &self.cancel.map(|c| c as *const ()))
            .field("flags", &self.flags)
            .finish()
    }
}

impl BlockingTask {
    /// Flag: run this task even when the pool shuts down before it started.
    pub const MANDATORY: c_uint = 1;

    /// A task that runs `callback`. Until [`with_cancel`](Self::with_cancel) gives it a cancel
    /// callback it cannot be handed back, so it runs even at shutdown.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn fsync(_task: *mut Task) { /* the blocking call */ }
    /// let task = BlockingTask::new(fsync);
    /// assert!(task.is_mandatory()); // no cancel callback: it always runs
    /// ```
    pub fn new(callback: Callback) -> Self {
        Self { task: Task::new(callback), cancel: None, flags: 0 }
    }

    /// Sets the callback shutdown calls instead of `callback` to hand the task back.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn download(_task: *mut Task) {}
    /// unsafe extern "C" fn give_back(_task: *mut Task) { /* free the buffers, report "cancelled" */ }
    /// let task = BlockingTask::new(download).with_cancel(give_back);
    /// assert!(!task.is_mandatory()); // shutdown may hand it back unrun
    /// ```
    pub fn with_cancel(mut self, cancel: Callback) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Marks the task mandatory: it runs even if the pool shuts down before it started.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn flush(_task: *mut Task) {}
    /// unsafe extern "C" fn unused(_task: *mut Task) {}
    /// let task = BlockingTask::new(flush).with_cancel(unused).mandatory();
    /// assert!(task.is_mandatory()); // runs even if shutdown comes first
    /// ```
    pub fn mandatory(mut self) -> Self {
        self.flags |= Self::MANDATORY;
        self
    }

    /// Whether the task runs even when shutdown begins before it started.
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn run(_task: *mut Task) {}
    /// assert!(!BlockingTask::new(run).with_cancel(run).is_mandatory());
    /// assert!(BlockingTask::new(run).with_cancel(run).mandatory().is_mandatory());
    /// ```
    pub fn is_mandatory(&self) -> bool {
        self.flags & Self::MANDATORY != 0 || self.cancel.is_none()
    }

    /// The embedded task (what the callbacks receive a pointer to).
    ///
    /// ```
    /// use pool::{BlockingTask, Task};
    /// unsafe extern "C" fn run(_task: *mut Task) {}
    /// let header = BlockingTask::new(run);
    /// assert!(header.task().callback().is_some());
    /// // The task is the header's first field: the callbacks may cast one pointer to the other.
    /// assert!(core::ptr::eq(header.task(), (&raw const header).cast::<Task>()));
    /// ```
    pub fn task(&self) -> &Task {
        &self.task
    }
}
