//! Scheduler statistics (design text 003, "per-worker statistics"): what each worker did,
//! kept lock-free in the worker's own state and summed by whoever reads them.
//!
//! # Writing costs the worker (almost) nothing
//! Each worker's [`Counters`] sit in its own [`Worker`](super::worker::Worker), on a cache line
//! of their own (`CachePadded`), and **only that worker writes them**: an increment is a Relaxed
//! load and a Relaxed store ([`Counter::bump_owned`]), no read-modify-write, so the hot path
//! pays two plain moves and an add per event. A reader only loads: the line moves to it and back
//! once per read, and nothing the worker's thieves touch (its ring's head, its LIFO slot) shares
//! that line, so neither a stats reader nor the counters themselves slow the queues.
//!
//! Events on threads that are not workers (an async task spawned from `main`, a task the
//! shutting-down thread runs itself) go to one shared [`Counters`] block in the pool with a
//! Relaxed `fetch_add`: those paths already write shared memory (the injector), so one more
//! RMW there is noise.
//!
//! # Reading
//! `ThreadPool::stats` (`stats.rs`) sums every started worker's counters and the
//! shared block; `ThreadPool::worker_stats` reads one worker.
//! Each value is some recent value of its counter (Relaxed): exact once the pool is quiet
//! (for example after a `wait_for`/`join` on the last task, or after `shutdown`), approximate
//! while it runs, never torn.


use crate::sync::Counter;

/// One worker's counters (or the shared "outside the workers" block). See the module docs
/// for who writes which.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Async tasks spawned (`spawn_future`) from this thread.
    pub(crate) spawned: Counter,
    /// Tasks run (an async task's run is one poll).
    pub(crate) polled: Counter,
    /// Tasks taken from other workers (the one run at once plus those moved into our ring).
    pub(crate) stolen: Counter,
    /// Successful steal operations (a steal-half moves several tasks at once).
    pub(crate) steals: Counter,
    /// Times this worker went to sleep.
    pub(crate) parks: Counter,
    /// Tasks taken from this worker's LIFO slot.
    pub(crate) lifo_hits: Counter,
    /// Batches taken from the pool's injector.
    pub(crate) injector_fetches: Counter,
}

impl Counters {
    /// A snapshot (each field one Relaxed load).
    pub(crate) fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            spawned: self.spawned.get(),
            polled: self.polled.get(),
            stolen: self.stolen.get(),
            steals: self.steals.get(),
            parks: self.parks.get(),
            lifo_hits: self.lifo_hits.get(),
            injector_fetches: self.injector_fetches.get(),
            queued: 0,
        }
    }
}

/// What one worker did (or, summed, all of them): see
/// [`ThreadPool::worker_stats`](super::ThreadPool::worker_stats); the pool-wide totals are in
/// [`Stats`](super::Stats). Counts since the pool was built, wrapping at `usize::MAX`.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{Config, ThreadPool};
/// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
/// pool.spawn_future(async {}).unwrap().join().unwrap();
/// let runs: usize = (0..pool.thread_limit()).map(|i| pool.worker_stats(i).unwrap().polled).sum();
/// assert_eq!(runs, 1); // the one poll ran on a worker
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Async tasks spawned from this worker (`spawn_future` inside a task).
    pub spawned: usize,
    /// Tasks run on this worker: intrusive tasks, closures, fork-join jobs it took from a queue,
    /// and async task polls (one run of an async task is one poll).
    pub polled: usize,
    /// Tasks obtained by stealing from other workers (every task a steal moved, the one run
    /// first included).
    pub stolen: usize,
    /// Successful steals (one steal-half moves up to half the victim's ring: `stolen / steals`
    /// is the average batch).
    pub steals: usize,
    /// Times the worker went to sleep (parked on its parker).
    pub parks: usize,
    /// Tasks taken from the worker's LIFO slot (the cache-hot "run next" slot).
    pub lifo_hits: usize,
    /// Batches fetched from the pool's injector (each takes up to half a ring of tasks: the
    /// worker's fair share of the queue).
    pub injector_fetches: usize,
    /// Not a count but a reading, when the statistics were taken: about how many tasks wait
    /// in this worker's own queues (its ring, LIFO slot and join deque; a join's latent half
    /// is not offered yet and not counted), or, for the threads that are not workers, in the
    /// pool's injector. Approximate while the pool runs (and the injector's count runs low
    /// while several threads submit at once); exact when nothing runs.
    pub queued: usize,
}

impl WorkerStats {
    /// Field-by-field sum (wrapping, as the counters).
    pub(crate) fn sum(self, o: WorkerStats) -> WorkerStats {
        WorkerStats {
            spawned: self.spawned.wrapping_add(o.spawned),
            polled: self.polled.wrapping_add(o.polled),
            stolen: self.stolen.wrapping_add(o.stolen),
            steals: self.steals.wrapping_add(o.steals),
            parks: self.parks.wrapping_add(o.parks),
            lifo_hits: self.lifo_hits.wrapping_add(o.lifo_hits),
            injector_fetches: self.injector_fetches.wrapping_add(o.injector_fetches),
            queued: self.queued.wrapping_add(o.queued),
        }
    }
}

