//! [`CTask`], the C `struct task`, and the checks that turn one, or a NULL-terminated list of
//! them, into the core's tasks.

use core::ptr::NonNull;

use crate::task::{Batch, Task};

/// A unit of work: embed it in your own struct, set `callback`, submit a pointer to it.
///
/// The pool owns `next` while the task is queued. `callback` must not be NULL; it is called
/// exactly once with the submitted pointer, on a pool thread; recover your struct with
/// `POOL_CONTAINER_OF(task, struct your_struct, member)`.
///
/// Every callback (a task's, a blocking task's `cancel`) must return normally:
/// * `longjmp` (or `siglongjmp`) out of a callback is undefined behaviour: it cannot be
///   detected, and it leaves the pool's thread in the middle of its own code;
/// * a C++ exception escaping a callback, or `pthread_exit` called inside one, ends the
///   process (abort) with the message "pool: a task callback was left by unwinding ...
///   callbacks must return normally": catch exceptions inside the callback if you need to
///   survive them; end a pool thread only by returning.
#[cfg_attr(doc, doc = include_str!("examples/own_pool.md"))]
#[repr(C)]
#[derive(Debug)]
pub struct CTask {
    /// Link used by the pool while the task is queued; need not be initialised.
    pub next: *mut CTask,
    /// Called once when the task runs. Must not be NULL. Must return normally (no `longjmp`,
    /// C++ exception or `pthread_exit` out of it: see above).
    pub callback: Option<unsafe extern "C" fn(task: *mut CTask)>,
}

// The C struct and the core's Task are the same memory: same size, alignment and offsets.
#[cfg(not(loom))]
mod layout {
    use super::CTask;
    use crate::Task;
    use core::mem::{align_of, offset_of, size_of};
    static_assertions::const_assert_eq!(size_of::<CTask>(), size_of::<Task>());
    static_assertions::const_assert_eq!(align_of::<CTask>(), align_of::<Task>());
    static_assertions::const_assert_eq!(offset_of!(CTask, next), offset_of!(Task, next));
    static_assertions::const_assert_eq!(offset_of!(CTask, callback), offset_of!(Task, callback));
    static_assertions::const_assert_eq!(size_of::<CTask>(), 2 * size_of::<usize>());
}

/// Checks one task and turns it into a core task pointer.
pub(super) fn checked_task(task: *mut CTask) -> Option<NonNull<Task>> {
    let task = NonNull::new(task)?;
    // SAFETY: non-null; the caller promises it points to a `struct task` it owns.
    unsafe { task.as_ref() }.callback?;
    Some(task.cast())
}

/// Validates a NULL-terminated list and links it into a batch, all or nothing: a NULL
/// callback anywhere, or a cycle, rejects the whole list before anything is queued.
pub(super) fn checked_batch(first: *mut CTask) -> Option<Batch> {
    if first.is_null() {
        return None;
    }
    // Pass 1: validate, detecting a cycle with Floyd's tortoise (one step per two nodes).
    let mut node = first;
    let mut slow = first;
    let mut steps = 0usize;
    while !node.is_null() {
        // SAFETY: the caller promises every node of the list is a valid `struct task`.
        let n = unsafe { &*node };
        n.callback?;
        node = n.next;
        steps += 1;
        if steps % 2 == 0 {
            // SAFETY: `slow` trails `node` inside the same list.
            slow = unsafe { (*slow).next };
            if slow == node && !node.is_null() {
                return None;
            }
        }
    }
    // Pass 2: link (Batch::push rewrites `next`, so read it first).
    let mut batch = Batch::new();
    let mut node = first;
    while let Some(task) = NonNull::new(node) {
        // SAFETY: validated above.
        node = unsafe { task.as_ref() }.next;
        // SAFETY: the task is the caller's to hand over and in no other queue.
        unsafe { batch.push(task.cast()) };
    }
    Some(batch)
}
