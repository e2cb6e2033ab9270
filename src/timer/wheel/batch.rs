//! [`Batch`]: values moved out under the wheel's lock and handled once it is released (the
//! expired entries with their actions, `Timers::expire`), in a fixed array that starts
//! uninitialised: making a batch writes nothing but its two counts.

use core::mem::MaybeUninit;

/// Up to `N` values, handed out in the order they were added. `items[done..len]` are added and
/// not yet handed out; the other items are uninitialised.
pub(super) struct Batch<T, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
    done: usize,
}

impl<T, const N: usize> Batch<T, N> {
    pub(super) const fn new() -> Self {
        Self { items: [const { MaybeUninit::uninit() }; N], len: 0, done: 0 }
    }

    pub(super) fn is_full(&self) -> bool {
        self.len == N
    }

    /// Adds `item`.
    ///
    /// # Safety
    /// The batch is not full ([`is_full`](Self::is_full)).
    pub(super) unsafe fn push(&mut self, item: T) {
        debug_assert!(!self.is_full());
        // SAFETY: `len < N` (the caller's contract), so the slot exists; it is at `len`, past
        // every item added, so nothing is overwritten.
        unsafe { self.items.get_unchecked_mut(self.len) }.write(item);
        self.len += 1;
    }

    /// Hands every item to `f`, oldest first, and leaves the batch empty. If `f` unwinds, the
    /// items not handed out yet are dropped with the batch.
    pub(super) fn drain(&mut self, mut f: impl FnMut(T)) {
        while self.done < self.len {
            // SAFETY: `done < len`: added and not handed out; `done` moves past it before `f`
            // runs, so it is read once (and `Drop` skips it if `f` unwinds).
            let item = unsafe { self.items.get_unchecked(self.done).assume_init_read() };
            self.done += 1;
            f(item);
        }
        self.len = 0;
        self.done = 0;
    }
}

impl<T, const N: usize> Drop for Batch<T, N> {
    /// Drops the items an unwinding `drain` left (none otherwise).
    fn drop(&mut self) {
        for item in &mut self.items[self.done..self.len] {
            // SAFETY: `done..len` are added and not handed out.
            unsafe { item.assume_init_drop() };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::vec::Vec;

    #[test]
    fn hands_out_in_order_and_drops_what_an_unwind_left() {
        let mut batch = Batch::<u32, 3>::new();
        for i in 0..3 {
            assert!(!batch.is_full());
            // SAFETY: not full (checked above).
            unsafe { batch.push(i) };
        }
        assert!(batch.is_full());
        let mut seen = Vec::new();
        batch.drain(|i| seen.push(i));
        assert_eq!(seen, [0, 1, 2]);
        assert!(!batch.is_full());

        let counted = Rc::new(());
        let mut batch = Batch::<Rc<()>, 4>::new();
        for _ in 0..3 {
            // SAFETY: 3 items in a batch of 4.
            unsafe { batch.push(counted.clone()) };
        }
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            batch.drain(|_| panic!("an action unwinds"));
        }));
        assert!(unwound.is_err());
        drop(batch);
        assert_eq!(Rc::strong_count(&counted), 1, "the two items left were dropped, the first by the unwind");
    }
}
