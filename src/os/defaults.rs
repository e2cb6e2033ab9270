//! The `std` defaults: the constructors and waits on the default platform,
//! [`ThreadPool::new`], [`BlockingPool::new`] and [`BlockingHandle::join`] (on a pool's worker,
//! the pool's waiting loop; elsewhere a park on the [`DefaultParker`]).

use crate::blocking::{BlockingConfig, BlockingHandle, BlockingJoinError, BlockingPool};
use crate::error::Error;
use crate::scheduler::{Config, ThreadPool};
use super::parker::DefaultParker;
use super::thread::ThreadSpawner;

impl ThreadPool<ThreadSpawner> {
    /// A pool on OS threads with the [`DefaultParker`]. No thread starts until work arrives.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for `max_threads` above
    /// [`MAX_THREADS`](crate::MAX_THREADS); [`Error::OutOfMemory`](crate::Error::OutOfMemory)
    /// if the allocator fails.
    ///
    /// ```
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// assert_eq!(pool.max_threads(), 2);
    /// ```
    pub fn new(config: Config) -> Result<Self, Error> {
        Self::with_spawner(config, ThreadSpawner::try_named("pool-worker")?)
    }
}

impl BlockingPool<ThreadSpawner> {
    /// A blocking pool on OS threads named "pool-blocking". No thread starts until work arrives.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for `max_threads` above
    /// [`BlockingConfig::MAX_THREADS`](crate::BlockingConfig::MAX_THREADS);
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) if the allocator fails.
    ///
    /// ```
    /// let pool = pool::BlockingPool::new(pool::BlockingConfig::default().with_max_threads(4)).unwrap();
    /// assert_eq!(pool.max_threads(), 4);
    /// ```
    pub fn new(config: BlockingConfig) -> Result<Self, Error> {
        Self::with_spawner(config, ThreadSpawner::try_named("pool-blocking")?)
    }
}

impl<T> BlockingHandle<T> {
    /// Blocks the calling thread until the closure has finished, and returns its value.
    ///
    /// # Errors
    /// [`BlockingJoinError::Cancelled`] if the pool shut down before the closure started,
    /// [`BlockingJoinError::Panicked`] if it panicked.
    ///
    /// ```
    /// let pool = pool::BlockingPool::new(Default::default()).unwrap();
    /// let handles: Vec<_> = (1..=3u64)
    ///     .map(|ms| pool.spawn_blocking(move || { std::thread::sleep(std::time::Duration::from_millis(ms)); ms }).unwrap())
    ///     .collect();
    /// let slept: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(slept, 6);
    /// ```
    pub fn join(mut self) -> Result<T, BlockingJoinError> {
        let done = self.done();
        match super::thread::current_pool() {
            // SAFETY: the pool this thread works for outlives the code it runs; the handle is
            // the signal's one waiter.
            Some(pool) => unsafe { (pool.ops.wait)(pool.pool, done) },
            None => {
                done.wait(&DefaultParker::default(), None);
            }
        }
        self.take_output()
    }
}
