//! The blocking pool: separate, dynamically sized threads for blocking calls and long CPU work,
//! so that such work never starves the work-stealing workers (design text 000).
//!
//! * Threads start on demand when a task arrives and no thread is idle, up to a cap
//!   ([`BlockingConfig::max_threads`], default 512). At most one thread is *being started* at a
//!   time (the `SPAWNING` token, design text 002's "one waking thread" applied to spawning);
//!   each new thread, once running, starts the next one if work is still waiting and no thread
//!   is idle. A burst of N submits therefore grows the pool one thread per thread-start
//!   latency, instead of paying N thread starts on the submitting thread.
//! * An idle thread exits after [`BlockingConfig::keep_alive`] (default 10 s) without work,
//!   so the pool shrinks back to zero threads. Idle threads are woken lowest slot first, so a
//!   shrinking pool keeps a stable low set busy and lets the high slots time out.
//! * Tasks wait in the intrusive FIFO [`Injector`](crate::queue::injector) (zero allocation per
//!   task): the host embeds a [`BlockingTask`] in its own struct, as with [`Task`].
//! * Shutdown ([`BlockingPool::shutdown`]) follows the text's order: set the flag, wake every
//!   idle thread, wait for the threads to leave, join them all (through the spawner, outside
//!   any lock). Tasks still queued are not dropped: those marked
//!   [`BlockingTask::MANDATORY`] run, every other one is handed back to its owner through its
//!   **cancel callback** (we chose the callback over a returned list: each task goes back to
//!   the code that made it, which knows how to free it).
//! * [`BlockingMetrics`] are plain atomic counters, readable without a lock.
//! * Closures: [`BlockingPool::spawn_blocking`] returns a [`BlockingHandle`], which can be
//!   joined from a thread or awaited from async code (the text's `concurrent()`): completion
//!   wakes the awaiting future.
//!
//! The protocol (slot states, the counts word, why no wake-up is lost and why no thread is
//! leaked) is argued in `src/blocking/README.md`.
//!
//! # Notification, spurious wake-up and timeout (no clock in `no_std`)
//! Each thread owns a *slot* with a state word and a parker. A notifier wakes a thread by
//! moving its slot `IDLE -> NOTIFIED` with a compare-and-swap and only then unparking it: the
//! text's `num_notify` counter, made exact and per thread. So when `park_timeout` returns, the
//! state word alone says whether this was a notification (`NOTIFIED`). If it was not, it was a
//! timeout or a spurious return; the platform's clock ([`Spawner::now_ns`]; `std`'s
//! `ThreadSpawner` has one) tells those apart, and a spurious return parks again for the rest
//! of the keep-alive. **Without a clock** every return without a notification counts
//! as the keep-alive expiring: a parker that returns early only makes a thread leave early
//! (it is started again when needed), it never loses or delays a task.
//!
//! # Invariants
//! * A task accepted by `submit` (it returned `Ok`) runs exactly once, or, if it was still
//!   queued when shutdown began and is not mandatory, its cancel callback is called exactly
//!   once instead (a task without a cancel callback cannot be cancelled: it runs).
//! * `threads` (the count in the counts word) never exceeds the cap: every thread start and
//!   every return from the exit path reserves its place with a compare-and-swap first.
//! * A slot is `EMPTY` exactly when no thread owns it; only the owner moves its slot out of
//!   `RUNNING`/`NOTIFIED`/`EXITING`, and notifiers only ever move `IDLE -> NOTIFIED`. Slots,
//!   with their parkers, live as long as the pool, so an unpark can never reach freed memory.
//! * After the `SHUTDOWN` bit is set no thread is started, so once the count reaches zero
//!   [`Spawner::join_all`] joins every thread this pool ever started.

#[cfg(doc)]
use crate::platform::Spawner;

mod config;
mod counts;
mod fork;
mod handle;
mod inner;
#[cfg(all(test, loom))]
mod loom;
mod metrics;
mod pool;
#[cfg(all(test, shuttle))]
mod shuttle;
mod slot;
mod task;
mod thread;

pub use config::BlockingConfig;
pub use handle::{BlockingHandle, BlockingJoinError};
pub use metrics::BlockingMetrics;
pub use pool::BlockingPool;
pub use task::BlockingTask;
