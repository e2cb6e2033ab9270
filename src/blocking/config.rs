//! [`BlockingConfig`]: how to build a [`BlockingPool`](super::BlockingPool).

use core::time::Duration;


/// How to build a [`BlockingPool`](super::BlockingPool).
///
/// ```
/// use pool::BlockingConfig;
/// use std::time::Duration;
/// let config = BlockingConfig::default().with_max_threads(64).with_keep_alive(Duration::from_millis(500));
/// assert_eq!(BlockingConfig::default().max_threads, 512);
/// # let _ = config;
/// ```
///
/// `#[non_exhaustive]`: fields are added in minor versions, so build one from
/// [`BlockingConfig::default`] and the `with_` setters (or assign its fields).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct BlockingConfig {
    /// Most threads the pool runs at once: 1 to [`BlockingConfig::MAX_THREADS`]; 0 means the
    /// default (512). One slot (a state word and a parker) per thread is allocated up front.
    pub max_threads: usize,
    /// How long an idle thread waits for work before it exits. Zero: it exits as soon as it
    /// finds no work.
    pub keep_alive: Duration,
    /// Stack size of each thread in bytes; 0 means the platform default: for `ThreadSpawner`,
    /// Rust std's (2 MiB, or `RUST_MIN_STACK`), not pthread's (the C API's `stack_size = 0`
    /// means pthread's default instead).
    pub stack_size: usize,
    /// The most tasks that may wait in the queue (accepted, not yet started); 0 means no
    /// bound. A submit that finds the queue holding that many fails with
    /// [`Error::Full`](crate::Error::Full) and leaves the task to the caller. Changed on a live
    /// pool with [`BlockingPool::set_max_queued`](super::BlockingPool::set_max_queued).
    pub max_queued: usize,
}

impl BlockingConfig {
    /// The default cap (the design text's 512).
    pub const DEFAULT_MAX_THREADS: usize = 512;
    /// The largest cap accepted.
    pub const MAX_THREADS: usize = 1 << 16;
    /// The default keep-alive (the design text's 10 s).
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);

    /// The defaults (as [`Default::default`], usable in a `const`).
    pub const fn new() -> Self {
        Self { max_threads: Self::DEFAULT_MAX_THREADS, keep_alive: Self::DEFAULT_KEEP_ALIVE, stack_size: 0, max_queued: 0 }
    }

    /// Sets [`max_threads`](Self::max_threads).
    #[must_use]
    pub const fn with_max_threads(mut self, max_threads: usize) -> Self {
        self.max_threads = max_threads;
        self
    }

    /// Sets [`keep_alive`](Self::keep_alive).
    #[must_use]
    pub const fn with_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Sets [`stack_size`](Self::stack_size).
    #[must_use]
    pub const fn with_stack_size(mut self, stack_size: usize) -> Self {
        self.stack_size = stack_size;
        self
    }

    /// Sets [`max_queued`](Self::max_queued).
    #[must_use]
    pub const fn with_max_queued(mut self, max_queued: usize) -> Self {
        self.max_queued = max_queued;
        self
    }
}

impl Default for BlockingConfig {
    fn default() -> Self {
        Self::new()
    }
}
