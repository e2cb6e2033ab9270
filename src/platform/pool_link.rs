//! [`PoolLink`]: a pool's entry in its platform's registry of pools, and [`PoolList`], that
//! registry's intrusive list.
//!
//! A pool whose threads can be lost under it (the `std` platform's `fork()`: the child has
//! one thread, the pools' threads stay in the parent) must be found and closed where that
//! happens. Each pool's shared state embeds one `PoolLink` and hands it to its spawner
//! ([`Spawner::track_pool`](super::Spawner::track_pool)) once built, and takes it back
//! ([`Spawner::untrack_pool`](super::Spawner::untrack_pool)) before that memory is freed. The
//! registry links it into a `PoolList`, as a thread links itself into its pool (design text
//! 002): nothing is allocated, there is no limit on the number of pools, and nothing is left
//! once the last one is gone.
//!
//! Invariants:
//! * `prev` and `next` are read and written only by the `PoolList` the link is in, under the
//!   registry's lock; a link is in at most one list, from `push` to `remove`.
//! * `inherited` is set only by [`PoolList::on_fork_child`], in a child process on its only
//!   thread (before it starts any other), and never cleared: every read in that process
//!   happens after the write, on that thread or on a thread started after it, so a plain cell
//!   suffices (no two threads ever access it concurrently with the write).

// Only the `std` layer's fork registry builds a `PoolList`; elsewhere the links are inert.
#![cfg_attr(not(all(feature = "std", unix, not(loom))), allow(dead_code))]

use core::cell::Cell;
use core::fmt;
use core::ptr::{self, NonNull};


/// What a pool becomes in a child process after `fork()`, called by the registry's child
/// handler with the pool's link: closed (it returns true: the pool is inherited, and refuses
/// work with [`Error::Forked`](crate::Error::Forked)) or reset in place (false).
pub(crate) type OnForkChild = unsafe fn(NonNull<PoolLink>) -> bool;

/// A pool's entry in its platform's registry of pools (module docs). Opaque: a platform
/// passes it on, it never looks inside.
pub struct PoolLink {
    prev: Cell<*const PoolLink>,
    next: Cell<*const PoolLink>,
    on_fork_child: OnForkChild,
    inherited: Cell<bool>,
}

// SAFETY: `prev` and `next` are touched only under the registry's lock, and `inherited` is
// written only before any other thread of its process exists (module invariants);
// `on_fork_child` is immutable.
unsafe impl Send for PoolLink {}
// SAFETY: as above.
unsafe impl Sync for PoolLink {}

impl fmt::Debug for PoolLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolLink").field("inherited", &self.is_inherited()).finish_non_exhaustive()
    }
}

impl PoolLink {
    /// A link not in any list, for a pool that `on_fork_child` closes or resets.
    pub(crate) fn new(on_fork_child: OnForkChild) -> Self {
        Self {
            prev: Cell::new(ptr::null()),
            next: Cell::new(ptr::null()),
            on_fork_child,
            inherited: Cell::new(false),
        }
    }

    /// Whether the pool was inherited through `fork()` and closed in this process (its threads
    /// are in the parent). Read on the paths that refuse work or would wait for threads only.
    #[inline]
    pub(crate) fn is_inherited(&self) -> bool {
        // Only the `std` layer's fork registry walks a `PoolList` in a child: elsewhere no
        // pool is ever inherited, and the paths for one compile away.
        if !cfg!(all(feature = "std", unix, not(loom))) {
            return false;
        }
        // Written before any other thread of this process existed (module invariants).
        self.inherited.get()
    }
}

/// A platform's registry of pools: the links of every live pool on it, newest first.
/// Guarded by its owner's lock (every method takes `&mut self`).
#[derive(Debug)]
pub(crate) struct PoolList {
    head: *const PoolLink,
}

// SAFETY: the list only names links, which are `Sync`; its owner serialises every use.
unsafe impl Send for PoolList {}

impl PoolList {
    pub(crate) const fn new() -> Self {
        Self { head: ptr::null() }
    }

    /// Links `link` at the front.
    ///
    /// # Safety
    /// `link` is in no list, and stays valid and unmoved until [`remove`](Self::remove).
    pub(crate) unsafe fn push(&mut self, link: NonNull<PoolLink>) {
        // SAFETY: the caller's contract.
        let l = unsafe { link.as_ref() };
        l.prev.set(ptr::null());
        l.next.set(self.head);
        // SAFETY: every linked link is valid (push's contract).
        if let Some(head) = unsafe { self.head.as_ref() } {
            head.prev.set(link.as_ptr());
        }
        self.head = link.as_ptr();
    }

    /// Unlinks `link`.
    ///
    /// # Safety
    /// `link` was pushed onto this list and not removed since.
    pub(crate) unsafe fn remove(&mut self, link: NonNull<PoolLink>) {
        // SAFETY: linked, so valid (push's contract), as are its neighbours.
        let l = unsafe { link.as_ref() };
        let (prev, next) = (l.prev.get(), l.next.get());
        // SAFETY: as above.
        match unsafe { prev.as_ref() } {
            Some(p) => p.next.set(next),
            None => self.head = next,
        }
        // SAFETY: as above.
        if let Some(n) = unsafe { next.as_ref() } {
            n.prev.set(prev);
        }
        l.prev.set(ptr::null());
        l.next.set(ptr::null());
    }

    /// In a child after `fork()`: every pool closes or resets itself (its `on_fork_child`);
    /// the closed ones are inherited from now on.
    ///
    /// # Safety
    /// In the child's fork handler, on its only thread, with no call on any listed pool in
    /// progress in the child.
    pub(crate) unsafe fn on_fork_child(&mut self) {
        let mut at = self.head;
        // SAFETY: every linked link is valid (push's contract).
        while let Some(link) = unsafe { at.as_ref() } {
            // Read first: a reset pool may rebuild its state around the link.
            at = link.next.get();
            // SAFETY: the caller's contract; the function is the one its pool registered.
            if unsafe { (link.on_fork_child)(NonNull::from(link)) } {
                link.inherited.set(true);
            }
        }
    }

    /// Whether no pool is linked.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    unsafe fn close(_: NonNull<PoolLink>) -> bool {
        true
    }
    unsafe fn reset(_: NonNull<PoolLink>) -> bool {
        false
    }

    fn order(list: &PoolList) -> Vec<*const PoolLink> {
        let mut v = Vec::new();
        let mut at = list.head;
        // SAFETY: the test's links are boxed and outlive the list's use of them.
        while let Some(l) = unsafe { at.as_ref() } {
            v.push(at);
            at = l.next.get();
        }
        v
    }

    #[test]
    fn push_remove_in_any_order_leaves_an_empty_list() {
        let links: Vec<Box<PoolLink>> = (0..4).map(|i| Box::new(PoolLink::new(if i % 2 == 0 { close } else { reset }))).collect();
        let ptr = |i: usize| NonNull::from(&*links[i]);
        let mut list = PoolList::new();
        for i in 0..4 {
            // SAFETY: each link is boxed (unmoved) and outlives the list's use of it.
            unsafe { list.push(ptr(i)) };
        }
        assert_eq!(order(&list), [3, 2, 1, 0].map(|i| ptr(i).as_ptr().cast_const()));
        // SAFETY: linked above, removed once each.
        unsafe {
            list.remove(ptr(1)); // middle
            list.remove(ptr(3)); // head
        }
        assert_eq!(order(&list), [2, 0].map(|i| ptr(i).as_ptr().cast_const()));
        // SAFETY: the only thread; the functions touch nothing.
        unsafe { list.on_fork_child() };
        // The flag itself (`is_inherited` reads it only where a fork registry exists).
        assert!(links[0].inherited.get() && links[2].inherited.get());
        assert!(!links[1].inherited.get() && !links[3].inherited.get());
        // SAFETY: linked, removed once each.
        unsafe {
            list.remove(ptr(0)); // tail
            list.remove(ptr(2));
        }
        assert!(list.is_empty());
    }
}
