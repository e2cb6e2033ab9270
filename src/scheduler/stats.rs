//! [`Stats`] and [`ThreadPool::stats`], [`ThreadPool::worker_stats`]: reading the counters
//! (`counters.rs` has who writes them and what a read gets).
use super::handle::ThreadPool;
use super::sync_word::State;
use super::worker::Worker;
use crate::platform::Spawner;
use super::counters::WorkerStats;
use crate::sync::Ordering;

/// Counters kept by the pool (Relaxed; approximate while the pool runs).
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
/// assert_eq!(pool.stats().threads, 0); // threads start lazily
/// pool.spawn(|| ()).unwrap();
/// let stats = pool.stats();
/// assert!(stats.threads >= 1 && stats.idle_threads <= stats.threads);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Threads started and not yet exited.
    pub threads: usize,
    /// Threads counted idle (asleep or about to sleep).
    pub idle_threads: usize,
    /// Threads parked as surplus, above the pool's `max_threads` after
    /// [`ThreadPool::set_max_threads`] lowered it: neither idle nor running (not counted in
    /// `idle_threads`).
    pub surplus_threads: usize,
    /// Worker slots (the thread limit): [`ThreadPool::worker_stats`] takes `0..workers` for the
    /// workers and `workers` for the threads that are not workers.
    pub workers: usize,
    // The per-worker counters below are summed over every worker (see
    // `ThreadPool::worker_stats` for one) plus the work done on threads that are not workers.
    /// Async tasks spawned (`spawn_future`, accepted).
    pub spawned: usize,
    /// Tasks run: intrusive tasks, closures, fork-join jobs taken from a queue, async task
    /// polls (one run of an async task is one poll; a cancellation counts as one).
    pub polled: usize,
    /// Tasks obtained by stealing from another worker (every task a steal moved).
    pub stolen: usize,
    /// Successful steal operations (a steal-half moves several tasks at once).
    pub steals: usize,
    /// Times a worker went to sleep.
    pub parks: usize,
    /// Tasks taken from a worker's LIFO slot.
    pub lifo_hits: usize,
    /// Batches fetched from the injector by workers.
    pub injector_fetches: usize,
    /// Thread starts that failed.
    pub spawn_failures: usize,
    /// Tasks waiting, read when the statistics were taken: the injector and every worker's
    /// own queues (see [`WorkerStats::queued`]). Approximate while the pool runs.
    pub queued: usize,
}

impl<S: Spawner> ThreadPool<S> {
    /// A snapshot of the pool's counters.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// for _ in 0..100 {
    ///     pool.spawn(|| ()).unwrap();
    /// }
    /// pool.shutdown().unwrap();
    /// let stats = pool.stats();
    /// assert_eq!((stats.threads, stats.spawn_failures), (0, 0)); // all joined
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let inner = self.inner();
        let s = inner.protocol.load(Ordering::Relaxed);
        let mut total = self.worker_stats(inner.worker_table.len()).unwrap_or_default();
        for index in 0..inner.worker_table.len() {
            total = total.sum(self.worker_stats(index).unwrap_or_default());
        }
        Stats {
            threads: s.spawned() as usize,
            // Workers idle when shutdown came leave without giving their idle count back
            // (nothing reads it after Shutdown): none is idle then (tests/stats.rs).
            idle_threads: if s.state() == State::Shutdown { 0 } else { s.idle() as usize },
            surplus_threads: inner.surplus_threads.load(Ordering::Relaxed),
            workers: inner.worker_table.len(),
            spawned: total.spawned,
            polled: total.polled,
            stolen: total.stolen,
            steals: total.steals,
            parks: total.parks,
            lifo_hits: total.lifo_hits,
            injector_fetches: total.injector_fetches,
            spawn_failures: inner.stats_spawn_failed.load(Ordering::Relaxed),
            queued: total.queued,
        }
    }

    /// The counters of worker `index` (`0..max_threads`; all zero for a worker whose thread
    /// has not started yet), or, for `index == max_threads`, of the work done on threads that
    /// are not workers (futures spawned and tasks run from outside); `None` beyond. Lock-free,
    /// as [`stats`](Self::stats), which sums all of them.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool};
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// assert_eq!(pool.worker_stats(0).unwrap().polled, 0);
    /// pool.spawn_future(async {}).unwrap().join().unwrap(); // spawned from outside the pool
    /// assert_eq!(pool.worker_stats(2).unwrap().spawned, 1); // index 2: outside threads
    /// assert!(pool.worker_stats(3).is_none());
    /// # }
    /// ```
    pub fn worker_stats(&self, index: usize) -> Option<WorkerStats> {
        let inner = self.inner();
        let workers = inner.worker_table.len();
        Some(match inner.worker_at(index) {
            // SAFETY: from the worker table.
            Some(worker) => WorkerStats { queued: unsafe { Worker::queued_of(worker) }, ..Worker::stats_of(worker).snapshot() },
            None if index < workers => WorkerStats::default(),
            None if index == workers => WorkerStats { queued: inner.injector.len(), ..inner.outside.snapshot() },
            None => return None,
        })
    }
}

