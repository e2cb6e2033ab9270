//! The blocking pool's counts word ([`Counts`]): live threads against the cap, and the
//! `SHUTDOWN` and `SPAWNING` flags, in one `usize`; and the bounded queue's admission
//! ([`admit`]).

use core::fmt;

/// The counts word: live threads (including one being started) and two flags.
///
/// ```text
///  bit  usize::BITS-1   SHUTDOWN   set once by shutdown; no thread starts after it
///  bit  usize::BITS-2   SPAWNING   a thread is being started (at most one at a time)
///  bits 0 ..            threads    threads counted against the cap
/// ```
///
/// A thread's place is reserved (`threads + 1`) with a compare-and-swap *before* it is
/// started, and released when it leaves or its start fails, so `threads <= cap` always.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts(pub(super) usize);

impl Counts {
    pub(super) const SHUTDOWN: usize = 1 << (usize::BITS - 1);
    pub(super) const SPAWNING: usize = 1 << (usize::BITS - 2);
    pub(super) const THREADS_MASK: usize = Self::SPAWNING - 1;
    pub(super) const ONE_THREAD: usize = 1;

    #[inline]
    pub(super) fn threads(self) -> usize {
        self.0 & Self::THREADS_MASK
    }

    #[inline]
    pub(super) fn shutdown(self) -> bool {
        self.0 & Self::SHUTDOWN != 0
    }

    #[inline]
    pub(super) fn spawning(self) -> bool {
        self.0 & Self::SPAWNING != 0
    }
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counts")
            .field("raw", &format_args!("{:#x}", self.0))
            .field("threads", &self.threads())
            .field("spawning", &self.spawning())
            .field("shutdown", &self.shutdown())
            .finish()
    }
}
/// The bounded announcement as a value: the `queued` count after one more task, or `None`
/// when `bound` (not 0) tasks wait already. A bound lowered below the count refuses until
/// enough tasks have started.
pub(super) fn admit(queued: usize, bound: usize) -> Option<usize> {
    (bound == 0 || queued < bound).then(|| queued + 1)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Counts;

    #[test]
    fn admit_counts_up_to_the_bound_only() {
        assert_eq!(super::admit(0, 0), Some(1));
        assert_eq!(super::admit(usize::MAX - 1, 0), Some(usize::MAX));
        assert_eq!(super::admit(0, 1), Some(1));
        assert_eq!(super::admit(1, 1), None);
        assert_eq!(super::admit(2, 3), Some(3));
        assert_eq!(super::admit(3, 3), None);
        // A bound lowered below the count refuses until enough tasks have started.
        assert_eq!(super::admit(5, 2), None);
    }

    #[test]
    pub(super) fn counts_fields_do_not_overlap() {
        assert_eq!(Counts::SHUTDOWN & Counts::SPAWNING, 0);
        assert_eq!(Counts::SHUTDOWN & Counts::THREADS_MASK, 0);
        assert_eq!(Counts::SPAWNING & Counts::THREADS_MASK, 0);
        let c = Counts(Counts::SHUTDOWN | Counts::SPAWNING | 7);
        assert!(c.shutdown() && c.spawning());
        assert_eq!(c.threads(), 7);
        const { assert!(crate::BlockingConfig::MAX_THREADS < Counts::THREADS_MASK) };
    }
}
