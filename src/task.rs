//! The intrusive unit of work: [`Task`] and the list of tasks scheduled together, [`Batch`].
//!
//! From design text 002: the pool never allocates or owns task memory. The host embeds a
//! `Task` in its own struct, hands the pool a pointer to it, and the callback recovers the
//! host struct from the task pointer (`container_of` in C, `@fieldParentPtr` in Zig,
//! [`container_of!`](crate::container_of) in Rust). The pool links queued tasks through
//! `next`, so a task can be in at most one queue at a time.
//!
//! # The contract on every task
//! * Submitted once, it runs **exactly once**: its `callback` is called with the task pointer on
//!   one of the pool's threads (or, if the pool could never start a thread, on the thread that
//!   shuts the pool down).
//! * The memory stays valid, unmoved, and is not submitted again until its callback has started.
//!   From the moment the callback starts, the pool never touches the task again: the callback
//!   may free it or submit it again.
//! * `next` belongs to the pool while the task is queued.
//!
//! `Task` is `#[repr(C)]` and, outside loom, layout-identical to the C `struct task`
//! (`{ struct task *next; void (*callback)(struct task *); }`), asserted below.

use core::fmt;
use core::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, Ordering};

/// The callback a task runs: called exactly once with the pointer that was submitted.
///
/// `extern "C"`, so a C host's `void (*)(struct task *)` is one too; it must return normally.
/// A callback left by unwinding (a C++ exception, `pthread_exit`) ends the process with a
/// message naming this rule; a `longjmp` out of it is undefined behaviour.
///
/// ```
/// use pool::{Callback, Task};
/// unsafe extern "C" fn log(_task: *mut Task) { /* recover the job with `container_of!` */ }
/// let callback: Callback = log;
/// let task = Task::new(callback);
/// assert!(task.callback().is_some());
/// ```
pub type Callback = unsafe extern "C" fn(task: *mut Task);

/// Calls a host's callback (a task's, or a blocking task's cancel callback).
///
/// A callback must return normally. One left by unwinding (a C++ exception escaping it, or
/// `pthread_exit`'s forced unwind) would leave the pool's state half-updated on the way out,
/// so the unwind is stopped here and the process ends with a message naming the rule
/// ([`LeftByUnwinding`]). The callback is called through a `"C-unwind"` pointer for that: a
/// `"C-unwind"` caller may call a `"C"` callee (the `fn` type's ABI compatibility rules), and
/// only then does an unwind reach this frame instead of being undefined. The normal path costs
/// nothing: the guard is a zero-sized value that is forgotten after the call.
///
/// # Safety
/// As calling `callback(task)`.
///
/// Without `std` the callback is called as what it is, an `extern "C"` function: catching an
/// unwind needs the platform's unwinder (its personality routine), which a `no_std` host
/// need not have; unwinding out of a callback there is undefined, like `longjmp`.
#[inline(always)]
pub(crate) unsafe fn call(callback: Callback, task: *mut Task) {
    #[cfg(feature = "std")]
    {
        // SAFETY: the same function, called with the `"C-unwind"` ABI string (compatible with
        // the callee's `"C"`, see above).
        let callback: unsafe extern "C-unwind" fn(*mut Task) = unsafe { core::mem::transmute(callback) };
        let guard = LeftByUnwinding;
        // SAFETY: the caller's contract.
        unsafe { callback(task) };
        core::mem::forget(guard);
    }
    // SAFETY: the caller's contract.
    #[cfg(not(feature = "std"))]
    unsafe {
        callback(task)
    };
}

/// Dropped only when a callback is left by unwinding (see [`call`]): ends the process.
#[cfg(feature = "std")]
struct LeftByUnwinding;

#[cfg(feature = "std")]
const LEFT_BY_UNWINDING: &str = "pool: a task callback was left by unwinding (a C++ exception or \
    pthread_exit escaped it); callbacks must return normally (pool.h, struct task): aborting\n";

#[cfg(feature = "std")]
impl Drop for LeftByUnwinding {
    #[cold]
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stderr().write_all(LEFT_BY_UNWINDING.as_bytes());
        std::process::abort();
    }
}

/// An intrusive task header: embed it in your own struct and submit a pointer to it.
///
/// The contract on every task:
/// * submitted once, it runs **exactly once**: its callback is called with the task pointer on
///   one of the pool's threads (or, if the pool could never start a thread, on the thread that
///   shuts the pool down);
/// * the memory stays valid, unmoved, and is not submitted again until its callback has
///   started; from then on the pool never touches the task again: the callback may free it or
///   submit it again;
/// * the link inside belongs to the pool while the task is queued.
///
/// `#[repr(C)]`, layout-identical to the C `struct task { struct task *next; void (*callback)(struct task *); }`.
///
/// ```
/// use pool::{container_of, Task};
///
/// #[repr(C)]
/// struct Job { value: u64, task: Task }
///
/// unsafe extern "C" fn run(task: *mut Task) {
///     // SAFETY: every task with this callback is the `task` field of a `Job`.
///     let job = unsafe { &mut *container_of!(task, Job, task) };
///     job.value += 1;
/// }
///
/// let mut job = Job { value: 41, task: Task::new(run) };
/// let job_ptr: *mut Job = &mut job;
/// // The pointer a host submits, derived from the whole job (see `container_of!`):
/// // SAFETY: `job_ptr` points to a live `Job`.
/// let task = unsafe { &raw mut (*job_ptr).task };
/// // Calling the callback by hand, as a worker would:
/// // SAFETY: `task` is the `task` field of a live `Job`, as `run` expects.
/// unsafe { ((*task).callback().unwrap())(task) };
/// assert_eq!(job.value, 42);
/// ```
#[repr(C)]
pub struct Task {
    /// Link to the next task while queued. Written by the pool only; atomic because the
    /// injector's consumer reads it while a producer may be storing it (see `queue::injector`).
    pub(crate) next: AtomicPtr<Task>,
    /// Called once when the task runs. `None` is rejected at submission.
    pub(crate) callback: Option<Callback>,
}

// SAFETY: a Task is only a link and a function pointer; the pool hands it between threads as a
// pointer, and the host guarantees (by the submission contract) that its memory stays valid.
unsafe impl Send for Task {}
// SAFETY: shared access only reads `callback` and touches `next` atomically.
unsafe impl Sync for Task {}

impl Task {
    /// A task that will call `callback` when it runs.
    ///
    /// `const`, so a task can be a `static`:
    ///
    /// ```
    /// use pool::Task;
    /// unsafe extern "C" fn tick(_task: *mut Task) {}
    /// static TICK: Task = Task::new(tick);
    /// assert!(TICK.callback().is_some());
    /// ```
    #[cfg(not(loom))]
    pub const fn new(callback: Callback) -> Self {
        Self { next: AtomicPtr::new(ptr::null_mut()), callback: Some(callback) }
    }

    /// A task that will call `callback` when it runs.
    #[cfg(loom)]
    pub fn new(callback: Callback) -> Self {
        Self { next: AtomicPtr::new(ptr::null_mut()), callback: Some(callback) }
    }

    /// The callback, `None` if the task was built without one (the C layer allows that and
    /// rejects such a task at submission).
    ///
    /// ```
    /// use pool::Task;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// static RAN: AtomicBool = AtomicBool::new(false);
    /// unsafe extern "C" fn run(_task: *mut Task) {
    ///     RAN.store(true, Ordering::Relaxed);
    /// }
    /// let mut task = Task::new(run);
    /// let callback = task.callback().unwrap();
    /// // SAFETY: `run` ignores its argument (a worker would pass the submitted pointer).
    /// unsafe { callback(&mut task) };
    /// assert!(RAN.load(Ordering::Relaxed));
    /// ```
    pub fn callback(&self) -> Option<Callback> {
        self.callback
    }

    /// Replaces the callback (for reusing a task struct; only while the task is not queued).
    ///
    /// ```
    /// use pool::Task;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// static STAGE: AtomicU32 = AtomicU32::new(0);
    /// unsafe extern "C" fn first(_task: *mut Task) { STAGE.store(1, Ordering::Relaxed); }
    /// unsafe extern "C" fn second(_task: *mut Task) { STAGE.store(2, Ordering::Relaxed); }
    /// let mut task = Task::new(first);
    /// task.set_callback(second); // e.g. a job moving on to its next stage
    /// // SAFETY: the callbacks ignore their argument.
    /// unsafe { task.callback().unwrap()(&mut task) };
    /// assert_eq!(STAGE.load(Ordering::Relaxed), 2);
    /// ```
    pub fn set_callback(&mut self, callback: Callback) {
        self.callback = Some(callback);
    }

    /// Runs the task: calls its callback with its own pointer.
    ///
    /// # Safety
    /// `task` points to a live task that has been dequeued, and is run at most once per
    /// submission. After this call starts, the caller must not touch `*task` again.
    #[inline]
    pub(crate) unsafe fn run(task: NonNull<Task>) {
        // SAFETY: the caller owns the dequeued task; reading the callback before the call is
        // the last access the pool makes to the task's memory.
        let callback = unsafe { (*task.as_ptr()).callback };
        debug_assert!(callback.is_some(), "task without callback reached a worker");
        // SAFETY: every submission has a callback: the Rust constructors set one, the C layer
        // rejects a task without (`capi::checked_task`, `checked_batch`), and a queued task is
        // the pool's until it runs (nobody else writes it). No test and branch per task.
        let callback = unsafe { callback.unwrap_unchecked() };
        // SAFETY: the submission contract: the host's callback expects this pointer.
        unsafe { call(callback, task.as_ptr()) }
    }

    /// Loads `next` (the pool's link) with the given ordering.
    #[inline]
    pub(crate) fn load_next(&self, order: Ordering) -> *mut Task {
        self.next.load(order)
    }

    /// Stores `next` (the pool's link) with the given ordering.
    #[inline]
    pub(crate) fn store_next(&self, next: *mut Task, order: Ordering) {
        self.next.store(next, order)
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("next", &self.next.load(Ordering::Relaxed))
            .field("callback", &self.callback.map(|c| c as *const ()))
            .finish()
    }
}

/// Recovers a pointer to the struct that contains a field, from a pointer to that field.
///
/// `container_of!(ptr, Type, field)` where `ptr: *mut FieldType` points to `field` inside a
/// `Type`. Computing the pointer is safe; dereferencing it is the caller's business.
///
/// Under Rust's aliasing rules the result may be used for the whole container only if `ptr`
/// was itself derived from a pointer to the whole container (`&raw mut (*job).task` from a
/// `*mut Job`), not from a reference to the field alone (`&mut job.task`): submit pointers
/// made the first way.
///
/// ```
/// use pool::{container_of, Task};
///
/// #[repr(C)]
/// struct Job { id: u32, task: Task }
/// unsafe extern "C" fn run(_task: *mut Task) {}
///
/// let mut job = Job { id: 7, task: Task::new(run) };
/// let job_ptr: *mut Job = &mut job;
/// // SAFETY: `job_ptr` is live; the field pointer is derived from the whole job.
/// let task: *mut Task = unsafe { &raw mut (*job_ptr).task };
/// let back: *mut Job = container_of!(task, Job, task);
/// assert_eq!(back, job_ptr);
/// // SAFETY: `back` points to the live `job`, with the whole job's provenance.
/// assert_eq!(unsafe { (*back).id }, 7);
/// ```
#[macro_export]
macro_rules! container_of {
    ($ptr:expr, $Container:ty, $field:ident) => {{
        let field_ptr: *mut _ = $ptr;
        field_ptr
            .cast::<u8>()
            .wrapping_sub(::core::mem::offset_of!($Container, $field))
            .cast::<$Container>()
    }};
}

/// An intrusive singly linked list of tasks, scheduled together with one queue operation.
///
/// Pushing appends, so a batch runs roughly in the order it was built. Invariant: the tail's
/// `next` is null (the injector relies on it when it links a batch in). A batch does not own
/// its tasks; dropping a non-empty batch forgets them (they never run), so submit it.
///
/// ```
/// use pool::{Batch, Task};
/// unsafe extern "C" fn noop(_: *mut Task) {}
/// let mut tasks = [Task::new(noop), Task::new(noop)];
/// let mut batch = Batch::new();
/// for t in tasks.iter_mut() {
///     // SAFETY: the tasks outlive the batch and are in no other list.
///     unsafe { batch.push(t.into()) };
/// }
/// assert_eq!(batch.len(), 2);
/// ```
pub struct Batch {
    pub(crate) head: Option<NonNull<Task>>,
    pub(crate) tail: Option<NonNull<Task>>,
    pub(crate) len: usize,
}

// SAFETY: a batch is a list of tasks, which are Send (see Task).
unsafe impl Send for Batch {}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch").field("head", &self.head).field("len", &self.len).finish()
    }
}

impl From<NonNull<Task>> for Batch {
    #[inline]
    fn from(task: NonNull<Task>) -> Self {
        // SAFETY: `task` is exclusively the caller's to hand over (submission contract).
        unsafe { task.as_ref().store_next(ptr::null_mut(), Ordering::Relaxed) };
        Self { head: Some(task), tail: Some(task), len: 1 }
    }
}

impl Batch {
    /// An empty batch.
    ///
    /// ```
    /// assert!(pool::Batch::new().is_empty());
    /// ```
    pub const fn new() -> Self {
        Self { head: None, tail: None, len: 0 }
    }

    /// Number of tasks in the batch.
    ///
    /// ```
    /// use pool::{Batch, Task};
    /// unsafe extern "C" fn noop(_: *mut Task) {}
    /// let mut task = Task::new(noop);
    /// let mut batch = Batch::new();
    /// // SAFETY: `task` outlives the batch and is in no other list.
    /// unsafe { batch.push((&mut task).into()) };
    /// assert_eq!(batch.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no task.
    ///
    /// ```
    /// let mut batch = pool::Batch::new();
    /// assert!(batch.is_empty());
    /// assert!(batch.pop().is_none());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a task.
    ///
    /// # Safety
    /// `task` is valid, in no other batch or queue, and stays valid until it has run.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Batch, Config, Task, ThreadPool};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// static RAN: AtomicUsize = AtomicUsize::new(0);
    /// unsafe extern "C" fn count(_: *mut Task) {
    ///     RAN.fetch_add(1, Ordering::Relaxed);
    /// }
    ///
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// let mut tasks: Vec<Task> = (0..16).map(|_| Task::new(count)).collect();
    /// let mut batch = Batch::new();
    /// for task in tasks.iter_mut() {
    ///     // SAFETY: each task is in this batch only, and outlives its run (shutdown below).
    ///     unsafe { batch.push(task.into()) };
    /// }
    /// // SAFETY: as above: every task stays valid until it has run.
    /// unsafe { pool.submit_batch(batch).unwrap() };
    /// pool.shutdown().unwrap();
    /// assert_eq!(RAN.load(Ordering::Relaxed), 16);
    /// # }
    /// ```
    #[inline]
    pub unsafe fn push(&mut self, task: NonNull<Task>) {
        // SAFETY: the caller hands the task over exclusively.
        unsafe { task.as_ref().store_next(ptr::null_mut(), Ordering::Relaxed) };
        match self.tail {
            // SAFETY: `tail` is a task of this batch, owned by it.
            Some(tail) => unsafe { tail.as_ref().store_next(task.as_ptr(), Ordering::Relaxed) },
            None => self.head = Some(task),
        }
        self.tail = Some(task);
        self.len += 1;
    }

    /// Appends all of `other` after this batch's tasks.
    ///
    /// ```
    /// use pool::{Batch, Task};
    /// unsafe extern "C" fn noop(_: *mut Task) {}
    /// let mut tasks = [Task::new(noop), Task::new(noop), Task::new(noop)];
    /// let [a, b, c] = &mut tasks;
    /// let (mut first, mut second) = (Batch::new(), Batch::new());
    /// // SAFETY: each task is in one batch only and outlives it.
    /// unsafe {
    ///     first.push(a.into());
    ///     second.push(b.into());
    ///     second.push(c.into());
    /// }
    /// first.append(second);
    /// assert_eq!(first.len(), 3);
    /// ```
    pub fn append(&mut self, other: Batch) {
        let Some(other_head) = other.head else { return };
        match self.tail {
            // SAFETY: `tail` is a task of this batch, owned by it.
            Some(tail) => unsafe { tail.as_ref().store_next(other_head.as_ptr(), Ordering::Relaxed) },
            None => self.head = Some(other_head),
        }
        self.tail = other.tail;
        self.len += other.len;
    }

    /// Splits off the first `n` tasks (every task if the batch has no more) as a batch of
    /// their own, in order; `self` keeps the rest.
    pub(crate) fn split_front(&mut self, n: usize) -> Batch {
        if n >= self.len {
            return core::mem::take(self);
        }
        let Some(first) = self.head.filter(|_| n > 0) else { return Batch::new() };
        let mut last = first;
        for _ in 1..n {
            // SAFETY: `last` is owned by this batch; fewer than `len` links are followed, so
            // each is a task of the batch.
            last = unsafe { NonNull::new_unchecked(last.as_ref().load_next(Ordering::Relaxed)) };
        }
        // SAFETY: as above; `last` is not the batch's tail (`n < len`), so its link is a task.
        let rest = unsafe { last.as_ref().load_next(Ordering::Relaxed) };
        // SAFETY: as above; the new batch's tail keeps a null link (see `push`).
        unsafe { last.as_ref().store_next(ptr::null_mut(), Ordering::Relaxed) };
        self.head = NonNull::new(rest);
        self.len -= n;
        Batch { head: Some(first), tail: Some(last), len: n }
    }

    /// Removes and returns the first task.
    ///
    /// ```
    /// use core::ptr::NonNull;
    /// use pool::{Batch, Task};
    /// unsafe extern "C" fn noop(_: *mut Task) {}
    /// let mut tasks = [Task::new(noop), Task::new(noop)];
    /// let first = NonNull::from(&mut tasks[0]);
    /// let mut batch = Batch::new();
    /// for task in tasks.iter_mut() {
    ///     // SAFETY: each task is in this batch only and outlives it.
    ///     unsafe { batch.push(task.into()) };
    /// }
    /// assert_eq!(batch.pop(), Some(first)); // first in, first out
    /// assert_eq!(batch.len(), 1);
    /// ```
    #[inline]
    pub fn pop(&mut self) -> Option<NonNull<Task>> {
        let task = self.head?;
        // SAFETY: `task` is owned by this batch; its `next` is the batch's own link.
        let next = unsafe { task.as_ref().load_next(Ordering::Relaxed) };
        self.head = NonNull::new(next);
        if self.head.is_none() {
            self.tail = None;
        }
        self.len -= 1;
        Some(task)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    unsafe extern "C" fn noop(_: *mut Task) {}

    #[test]
    fn batch_split_front_keeps_both_halves_in_order() {
        let mut tasks: [Task; 4] = [Task::new(noop), Task::new(noop), Task::new(noop), Task::new(noop)];
        let ptrs: std::vec::Vec<NonNull<Task>> = tasks.iter_mut().map(NonNull::from).collect();
        let mut batch = Batch::new();
        for &t in &ptrs {
            // SAFETY: each task is in this batch only and outlives it.
            unsafe { batch.push(t) };
        }
        assert!(batch.split_front(0).is_empty());
        let mut front = batch.split_front(3);
        assert_eq!((front.len(), batch.len()), (3, 1));
        for &t in &ptrs[..3] {
            assert_eq!(front.pop(), Some(t));
        }
        assert_eq!(front.pop(), None);
        let mut all = batch.split_front(5);
        assert!(batch.is_empty() && batch.pop().is_none());
        assert_eq!(all.pop(), Some(ptrs[3]));
        assert_eq!(all.pop(), None);
    }

    #[test]
    fn batch_push_pop_fifo() {
        let mut tasks: [Task; 3] = [Task::new(noop), Task::new(noop), Task::new(noop)];
        let ptrs: [NonNull<Task>; 3] = {
            let [a, b, c] = &mut tasks;
            [a.into(), b.into(), c.into()]
        };
        let mut batch = Batch::new();
        for &t in &ptrs {
            // SAFETY: the tasks outlive the batch and are in no other list.
            unsafe { batch.push(t) };
        }
        let mut other = Batch::new();
        other.append(batch);
        assert_eq!(other.len(), 3);
        for &t in &ptrs {
            assert_eq!(other.pop(), Some(t));
        }
        assert!(other.pop().is_none());
        assert!(other.is_empty());
    }

    #[test]
    fn container_of_recovers_host() {
        #[repr(C)]
        struct Host {
            a: u32,
            task: Task,
        }
        let mut host = Host { a: 7, task: Task::new(noop) };
        // The field pointer is projected from a pointer to the whole host (not taken as
        // `&mut host.task`), so it may reach the rest of the host: Stacked Borrows (Miri's
        // default) confines a pointer made from a field reference to that field.
        let host_ptr: *mut Host = &mut host;
        // SAFETY: `host_ptr` points to `host`, which is live.
        let task_ptr = unsafe { core::ptr::addr_of_mut!((*host_ptr).task) };
        let recovered = container_of!(task_ptr, Host, task);
        assert_eq!(recovered, host_ptr);
        // SAFETY: `recovered` points to `host`, which is live.
        assert_eq!(unsafe { (*recovered).a }, 7);
    }
}
