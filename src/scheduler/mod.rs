//! The thread pool: [`ThreadPool`], its [`Config`] and [`Error`].
//!
//! Design text 002 end to end. The pool owns the injector, the `Sync` word, the list of
//! workers and the platform ([`Spawner`]). Threads start lazily: the first submit starts the
//! first thread, and each notify may start one more while none is idle, up to `max_threads`.
//! The sleep/wake protocol is in [`sleep`] (its transitions in [`protocol`] and [`sync_word`])
//! and argued in `scheduler/README.md`; the worker loop in [`run`], its search in [`search`],
//! the adaptive injector interval it uses in [`interval`], its counters in [`counters`] (read
//! by [`stats`]); [`worker`] is the part of a worker that other threads touch.
//!
//! # Shutdown
//! [`ThreadPool::shutdown`] (also run by `Drop`):
//! 1. closes the injector: from here on, submits from outside the pool's threads fail with
//!    [`Error::Shutdown`]; every submit that returned `Ok` before is in the queue;
//! 2. moves `Sync` to `Shutdown` and unparks every worker;
//! 3. fires the timers, tells the I/O driver (its waiting tasks are woken and cancelled), sets
//!    `waits_released` and unparks every worker again (`Inner::release_waits`);
//! 4. workers run everything still queued (tasks running on them may still submit to their own
//!    queues: that work is part of what was queued, as are the delayed tasks step 3 fired); a
//!    worker that drained everything leaves only after a search that began with
//!    `waits_released` set, and parks until then; the last one out wakes us;
//! 5. joins every thread through the spawner;
//! 6. runs, on the calling thread, anything left in the injector — possible only if no thread
//!    could ever be started, or if an external submit accepted just before step 1 was still
//!    linking its task while the workers left (it waits that out) — so no accepted task is
//!    dropped.

pub(crate) mod any_pool;
mod config;
pub(crate) mod context;
pub(crate) mod counters;
pub(crate) mod driver;
mod fork;
pub(crate) mod frame;
mod handle;
pub(crate) mod inner;
pub(crate) mod interval;
pub(crate) mod job;
mod park;
mod pool;
pub(crate) mod protocol;
mod run;
mod search;
mod seeking;
mod surplus;
#[cfg(all(test, shuttle))]
mod shuttle;
pub(crate) mod sleep;
mod spawn;
pub(crate) mod timers;
pub(crate) mod stats;
pub(crate) mod sync_word;
mod thread;
pub(crate) mod worker;

pub(crate) use any_pool::AnyPool;
pub use config::{Config, DEFAULT_IDLE_SPINS, MAX_IDLE_SPINS};
pub use context::WorkerContext;
pub(crate) use inner::Inner;
pub use handle::ThreadPool;
pub use counters::WorkerStats;
pub use stats::Stats;
pub use sync_word::MAX_THREADS;
