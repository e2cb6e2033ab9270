//! [`ThreadPool::spawn`]: a closure on the pool, in a boxed task (one allocation per call).

use super::handle::ThreadPool;
use crate::error::Error;
use crate::platform::Spawner;
use crate::heap_task::HeapTask;

impl<S: Spawner> ThreadPool<S> {
    /// Runs a closure on the pool. Convenience for Rust callers: allocates one box per call
    /// (the intrusive [`submit`](Self::submit) allocates nothing).
    ///
    /// With `std`, a panic in the closure is caught and counted, and the pool keeps running
    /// (see [`Stats`](crate::Stats)); without `std` a panic aborts (the callback is `extern "C"`).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..10u64 {
    ///     let tx = tx.clone();
    ///     pool.spawn(move || tx.send(i * i).unwrap()).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<u64>(), 285);
    /// # }
    /// ```
    pub fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), Error> {
        let job = HeapTask::boxed(move || crate::panic::run_catching(f));
        // SAFETY: the box stays alive until its callback runs (and frees it).
        let submitted = unsafe { self.submit(job.task()) };
        if submitted.is_err() {
            // SAFETY: refused, so never queued: still ours.
            unsafe { job.drop_unrun() };
        }
        submitted
    }
}
