//! [`BlockingMetrics`]: the blocking pool's counters.

/// A snapshot of a blocking pool's counters. Every field is one atomic load (Relaxed): no lock
/// is taken, and while the pool runs the fields are individually, not jointly, up to date.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use pool::{BlockingConfig, BlockingPool};
/// use std::time::Duration;
///
/// let pool = BlockingPool::new(BlockingConfig::default().with_keep_alive(Duration::from_millis(1))).unwrap();
/// pool.spawn_blocking(|| ()).unwrap().join().unwrap();
/// // Idle threads leave after the keep-alive. Each field is read on its own and counted after
/// // the fact: `tasks_run` just after the callback returns (`join` may return first), a
/// // leaving thread in `threads_exited` just after it left `threads`.
/// let m = loop {
///     let m = pool.metrics();
///     if m.threads == 0 && m.threads_exited == m.threads_spawned && m.tasks_run == 1 {
///         break m;
///     }
///     std::thread::sleep(Duration::from_millis(1));
/// };
/// assert_eq!(m.queue_depth, 0);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockingMetrics {
    /// Threads started (or being started) and not yet exited.
    pub threads: usize,
    /// Threads waiting for work.
    pub idle_threads: usize,
    /// Tasks accepted and not yet taken by a thread.
    pub queue_depth: usize,
    /// Tasks whose callback ran (including mandatory tasks run during shutdown); counted just
    /// after the callback returns, so a `join` on the task may return before the count moves.
    pub tasks_run: usize,
    /// Tasks handed back through their cancel callback at shutdown.
    pub tasks_cancelled: usize,
    /// Threads started successfully.
    pub threads_spawned: usize,
    /// Threads that exited (keep-alive expired, or shutdown).
    pub threads_exited: usize,
    /// Thread starts the platform refused.
    pub spawn_failures: usize,
    /// The most threads counted at once since the pool was built.
    pub peak_threads: usize,
    /// Submits refused because the queue held [`max_queued`](crate::BlockingConfig::max_queued)
    /// waiting tasks ([`Error::Full`](crate::Error::Full)).
    pub tasks_refused: usize,
}
