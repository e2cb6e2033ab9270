//! Timers for tasks on the pool (design text 003's tick-end timer maintenance): [`sleep`],
//! [`sleep_until`], [`timeout`] and [`interval`], and [`ThreadPool::submit_after`] for
//! intrusive tasks. `no_std` + `alloc`; time comes from the platform's clock
//! ([`Spawner::now_ns`]), one origin per pool.
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use std::time::Duration;
//! use pool::time::{sleep, timeout};
//!
//! let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
//! let start = std::time::Instant::now();
//! let handle = pool
//!     .spawn_future(async {
//!         sleep(Duration::from_millis(20)).await;
//!         // A future that never completes, cut short.
//!         timeout(Duration::from_millis(5), std::future::pending::<()>()).await
//!     })
//!     .unwrap();
//! assert!(handle.join().unwrap().is_err(), "timed out");
//! assert!(start.elapsed() >= Duration::from_millis(25), "never early");
//! # }
//! ```
//!
//! # Design
//! * **The wheel** (`wheel.rs`): one hierarchical timing wheel per pool (tokio's: six levels
//!   of 64 slots, ticks of 2^20 ns, about 1.05 ms), guarded by a spin lock held only for list
//!   operations. Its entries are intrusive: a [`Sleep`] embeds its entry, so a timer costs no
//!   allocation; it is pinned once polled, and dropping it takes it out of the wheel
//!   (cancellation). A deadline is rounded **up** to a tick and a tick fires only once the
//!   clock has passed its start, so a timer never fires early; it fires up to about a tick
//!   late, plus scheduling.
//! * **Who fires** (`scheduler::timers`, `scheduler::park`): the scheduler's two hooks. At the end of each tick (every 128
//!   tasks run, `scheduler::run`), worker 0 fires the timers that are due, and any other
//!   worker does if they are overdue by `STALE_TICKS` (2 ticks: worker 0 is busy in a long task); with
//!   no timer pending that costs one Relaxed load per tick. An idle worker about to sleep
//!   claims the *timer parker* role if nobody holds it and parks with a timeout equal to the
//!   next deadline; every other idle worker parks without a timeout, so a timer wakes exactly
//!   one thread, and a far timer costs no CPU meanwhile. A timer that becomes the earliest
//!   wakes the timer parker (or, if there is none and the caller is not one of the pool's
//!   workers, notifies the pool so that one idle worker takes the role).
//! * **Binding**: a timer belongs to one pool's wheel. [`ThreadPool::sleep`] and friends bind
//!   at once; the free functions ([`sleep`], …) bind to the pool of the task that creates them
//!   (`std`: the task this thread is polling) or, failing that, of the task that first polls
//!   them (its waker). A bound timer holds a reference on the pool's memory, so it may outlive
//!   the pool handle safely.
//! * **Shutdown**: [`ThreadPool::shutdown`] closes the wheel after the pool stops polling tasks
//!   and fires every pending timer: a sleeping task is woken into a closed pool and cancelled
//!   (its `JoinHandle` reports [`JoinError::is_cancelled`](crate::JoinError::is_cancelled));
//!   a delayed task ([`ThreadPool::submit_after`]) is queued and runs then, early. Shutdown
//!   never waits for a deadline. A timer polled after that outside any task (in `block_on`)
//!   panics: it could never complete.
//! * **No clock**: on a platform whose spawner has none (`now_ns` returns `None`), polling a
//!   timer panics with a message that says so, and [`ThreadPool::submit_after`] returns
//!   [`Error::InvalidArgument`](crate::Error::InvalidArgument): a clear failure, never a hang.

mod instant;
mod pool;
mod sleep;

pub use instant::Instant;
pub use sleep::{interval, sleep, sleep_until, timeout, Elapsed, Interval, Sleep, Timeout};

#[cfg(doc)]
use crate::{Spawner, ThreadPool};
