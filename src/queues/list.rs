//! [`List`]: a queue's waiting tasks, an intrusive FIFO through each task's `next` link, that
//! can also unlink a task from the middle (a cancel). Reached only under the queue's lock, so
//! the links are read and written Relaxed.
//!
//! Invariant: `head` .. `tail` are the waiting tasks in submission order, each linked to the
//! next, the tail's link null; `remove` reads only the links of tasks in the list, never the
//! task it looks for (which the caller may have freed).

use core::ptr::{self, NonNull};

use crate::sync::Ordering;
use crate::task::Task;

/// The waiting tasks (module docs).
#[derive(Debug)]
pub(super) struct List {
    head: Option<NonNull<Task>>,
    tail: Option<NonNull<Task>>,
}

impl List {
    pub(super) const fn new() -> Self {
        Self { head: None, tail: None }
    }

    /// Appends `task`.
    ///
    /// # Safety
    /// `task` is valid, in no other list or queue, and stays valid until popped or removed.
    pub(super) unsafe fn push(&mut self, task: NonNull<Task>) {
        // SAFETY: the caller hands the task over; its link is ours while it waits.
        unsafe { task.as_ref().store_next(ptr::null_mut(), Ordering::Relaxed) };
        match self.tail {
            // SAFETY: the tail is a task of this list (module invariant).
            Some(tail) => unsafe { tail.as_ref().store_next(task.as_ptr(), Ordering::Relaxed) },
            None => self.head = Some(task),
        }
        self.tail = Some(task);
    }

    /// Removes and returns the oldest task.
    pub(super) fn pop(&mut self) -> Option<NonNull<Task>> {
        let task = self.head?;
        // SAFETY: the head is a task of this list (module invariant).
        self.head = NonNull::new(unsafe { task.as_ref().load_next(Ordering::Relaxed) });
        if self.head.is_none() {
            self.tail = None;
        }
        Some(task)
    }

    /// Unlinks `task` if it is in the list (compared by address only): whether it was.
    pub(super) fn remove(&mut self, task: NonNull<Task>) -> bool {
        let mut prev: Option<NonNull<Task>> = None;
        let mut cur = self.head;
        while let Some(c) = cur {
            // SAFETY: `c` is a task of this list (reached from the head through its links).
            let next = NonNull::new(unsafe { c.as_ref().load_next(Ordering::Relaxed) });
            if c == task {
                match prev {
                    // SAFETY: `p` is a task of this list.
                    Some(p) => unsafe { p.as_ref().store_next(next.map_or(ptr::null_mut(), NonNull::as_ptr), Ordering::Relaxed) },
                    None => self.head = next,
                }
                if self.tail == Some(c) {
                    self.tail = prev;
                }
                return true;
            }
            prev = cur;
            cur = next;
        }
        false
    }

    /// Takes every task, leaving the list empty.
    pub(super) fn take(&mut self) -> List {
        core::mem::replace(self, List::new())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::vec::Vec;

    unsafe extern "C" fn noop(_: *mut Task) {}

    #[test]
    fn fifo_and_remove_anywhere() {
        let mut tasks: Vec<Task> = (0..4).map(|_| Task::new(noop)).collect();
        let p: Vec<NonNull<Task>> = tasks.iter_mut().map(NonNull::from).collect();
        let mut list = List::new();
        for &t in &p {
            // SAFETY: each task is in this list only and outlives it.
            unsafe { list.push(t) };
        }
        assert!(list.remove(p[1]), "middle");
        assert!(!list.remove(p[1]), "gone");
        assert!(list.remove(p[3]), "tail");
        assert!(list.remove(p[0]), "head");
        // SAFETY: as above.
        unsafe { list.push(p[1]) };
        assert_eq!(list.pop(), Some(p[2]));
        assert_eq!(list.pop(), Some(p[1]), "the tail was fixed after removing the old tail");
        assert_eq!(list.pop(), None);
        assert!(!list.remove(p[0]));
    }
}
