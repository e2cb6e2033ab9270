//! `parallel_for`: a range split into chunks that run on the pool, built on fork-join
//! ([`ThreadPool::join`]): the range is halved recursively until a half is at most `grain`
//! long, so idle workers steal the biggest halves first and the caller returns once every
//! chunk has run.

use core::ops::Range;

use crate::platform::Spawner;
use crate::ThreadPool;

impl<S: Spawner> ThreadPool<S> {
    /// Calls `f` on disjoint chunks of `range` that together cover it, in parallel, and
    /// returns when every call has returned (like rayon's `par_iter` over a range, or
    /// `dispatch_apply`). Each chunk holds at most `grain` indices; `grain` 0 picks one from
    /// the range's length and the pool's size (about four chunks per worker). An empty range
    /// calls `f` never. Callable from any thread: on one of this pool's threads it helps run
    /// chunks, elsewhere it waits. A panic in `f` propagates to the caller once every chunk
    /// started has finished (as [`join`](Self::join)).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::sync::atomic::{AtomicU64, Ordering};
    /// use pool::{Config, ThreadPool};
    ///
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// let sum = AtomicU64::new(0);
    /// pool.parallel_for(0..10_000, 100, |chunk| {
    ///     assert!(chunk.len() <= 100);
    ///     sum.fetch_add(chunk.map(|i| i as u64).sum(), Ordering::Relaxed);
    /// });
    /// assert_eq!(sum.into_inner(), 9_999 * 10_000 / 2);
    /// # }
    /// ```
    pub fn parallel_for<F>(&self, range: Range<usize>, grain: usize, f: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        if range.is_empty() {
            return;
        }
        let grain = if grain == 0 { auto_grain(range.len(), self.max_threads()) } else { grain };
        self.split(range, grain, &f);
    }

    fn split<F: Fn(Range<usize>) + Sync>(&self, range: Range<usize>, grain: usize, f: &F) {
        if range.len() <= grain {
            return f(range);
        }
        let mid = range.start + range.len() / 2;
        self.join(|| self.split(range.start..mid, grain, f), || self.split(mid..range.end, grain, f));
    }
}

/// About four chunks per worker, at least one index each.
fn auto_grain(len: usize, workers: usize) -> usize {
    (len / (4 * workers.max(1))).max(1)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::auto_grain;

    #[test]
    fn auto_grain_is_positive_and_splits_per_worker() {
        assert_eq!(auto_grain(0, 4), 1);
        assert_eq!(auto_grain(3, 4), 1);
        assert_eq!(auto_grain(1600, 4), 100);
        assert_eq!(auto_grain(1600, 0), 400);
    }
}
