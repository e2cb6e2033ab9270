//! [`IdleSet`]: one bit per thread of a pool, set while that thread is idle and may be woken
//! through it. Both pools keep one: the scheduler's workers announce a park in it (a notifier
//! takes a bit to unpark its owner), the blocking pool's threads announce going idle (a
//! submitter looks for one to notify).
//!
//! Each operation is one atomic access to one word; what a set or cleared bit means, and which
//! ordering pairs with which, is the caller's protocol (each caller names its orderings).

use alloc::boxed::Box;

use super::atomic::{AtomicUsize, Ordering};

const WORD_BITS: usize = usize::BITS as usize;

/// A fixed-size set of thread indices, one bit each. See the module docs.
#[derive(Debug)]
pub(crate) struct IdleSet {
    words: Box<[AtomicUsize]>,
}

impl IdleSet {
    /// Words needed for `threads` bits.
    pub(crate) const fn words_for(threads: usize) -> usize {
        threads.div_ceil(WORD_BITS)
    }

    /// The set over `words` (all zero: nobody idle), from [`words_for`](Self::words_for) words
    /// the caller allocated (fallibly).
    pub(crate) fn from_words(words: Box<[AtomicUsize]>) -> Self {
        Self { words }
    }

    /// Gives the words back (a forked child frees them without the rest of its pool).
    pub(crate) fn into_words(self) -> Box<[AtomicUsize]> {
        self.words
    }

    #[inline]
    fn word_and_mask(index: usize) -> (usize, usize) {
        (index / WORD_BITS, 1 << (index % WORD_BITS))
    }

    /// Sets `index`'s bit.
    #[inline]
    pub(crate) fn insert(&self, index: usize, order: Ordering) {
        let (w, mask) = Self::word_and_mask(index);
        self.words[w].fetch_or(mask, order);
    }

    /// Clears `index`'s bit.
    #[inline]
    pub(crate) fn remove(&self, index: usize, order: Ordering) {
        let (w, mask) = Self::word_and_mask(index);
        self.words[w].fetch_and(!mask, order);
    }

    /// Whether `index`'s bit is set.
    #[inline]
    pub(crate) fn contains(&self, index: usize, order: Ordering) -> bool {
        let (w, mask) = Self::word_and_mask(index);
        self.words[w].load(order) & mask != 0
    }

    /// Clears one set bit and returns its index: whoever clears a bit owns the wake of its
    /// thread (two takers never get the same bit). `order` is the clearing RMW's; the scan's
    /// loads are Relaxed.
    pub(crate) fn take_any(&self, order: Ordering) -> Option<usize> {
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let mask = 1usize << bits.trailing_zeros();
                let prev = word.fetch_and(!mask, order);
                if prev & mask != 0 {
                    return Some(w * WORD_BITS + mask.trailing_zeros() as usize);
                }
                bits = prev & !mask;
            }
        }
        None
    }

    /// The set bits, lowest first, as read word by word with `order` (a snapshot per word:
    /// bits may change while the caller walks them).
    pub(crate) fn iter(&self, order: Ordering) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(move |(w, word)| {
            let mut bits = word.load(order);
            core::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * WORD_BITS + bit)
            })
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn set(threads: usize) -> IdleSet {
        IdleSet::from_words((0..IdleSet::words_for(threads)).map(|_| AtomicUsize::new(0)).collect())
    }

    #[test]
    fn insert_take_and_iterate_across_words() {
        let s = set(130);
        assert_eq!(IdleSet::words_for(130), 3);
        for i in [0, 63, 64, 129] {
            s.insert(i, Ordering::Relaxed);
        }
        assert_eq!(s.iter(Ordering::Relaxed).collect::<Vec<_>>(), [0, 63, 64, 129]);
        s.remove(63, Ordering::Relaxed);
        assert!(!s.contains(63, Ordering::Relaxed) && s.contains(64, Ordering::Relaxed));
        assert_eq!(s.take_any(Ordering::Relaxed), Some(0));
        assert_eq!(s.take_any(Ordering::Relaxed), Some(64));
        assert_eq!(s.take_any(Ordering::Relaxed), Some(129));
        assert_eq!(s.take_any(Ordering::Relaxed), None);
        assert_eq!(s.iter(Ordering::Relaxed).count(), 0);
    }
}
