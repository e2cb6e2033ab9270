//! `pool`: a work-stealing thread pool core for Rust, C, C++ and Zig hosts.
//!
//! * `#![no_std]` + `alloc` core: intrusive [`Task`]s and [`Batch`]es, a bounded per-worker
//!   ring with steal-half, an unbounded lock-free injector, and the packed `Sync` word that
//!   throttles wake-ups (design text 002), generic over the host's [`Parker`] and [`Spawner`].
//! * `std` feature (default): [`FutexParker`] (Linux), [`CondvarParker`], [`ThreadSpawner`],
//!   and the lazily started [`global()`] pool.
//! * `capi` feature: the `extern "C"` layer behind `include/pool.h` / `libpool.a`.
//!
//! No allocation per task on the intrusive path: the host embeds a [`Task`] in its own struct.
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use core::ptr::NonNull;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use pool::{container_of, Config, Task, ThreadPool};
//!
//! #[repr(C)]
//! struct Square { input: u64, task: Task, output: AtomicU64 }
//!
//! unsafe extern "C" fn square(task: *mut Task) {
//!     // SAFETY: every task with this callback is the `task` field of a `Square`.
//!     let job = unsafe { &*container_of!(task, Square, task) };
//!     job.output.store(job.input * job.input, Ordering::Release);
//! }
//!
//! let pool = ThreadPool::new(Config::default()).unwrap();
//! let mut jobs: Vec<Square> = (0..100)
//!     .map(|i| Square { input: i, task: Task::new(square), output: AtomicU64::new(0) })
//!     .collect();
//! for job in jobs.iter_mut() {
//!     // Derive the task pointer from a pointer to the whole job, so that the callback's
//!     // `container_of!` may widen it back (Rust's aliasing rules; see `container_of!`).
//!     let job: *mut Square = job;
//!     // SAFETY: `jobs` outlives the pool's use of it: shutdown below runs every task first.
//!     unsafe { pool.submit(NonNull::new_unchecked(&raw mut (*job).task)).unwrap() };
//! }
//! pool.shutdown().unwrap();
//! assert!(jobs.iter().all(|j| j.output.load(Ordering::Acquire) == j.input * j.input));
//! # }
//! ```
#![no_std]
// docs.rs (`--cfg docsrs`, Cargo.toml's package.metadata.docs.rs) marks feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

mod blocking;
mod error;
mod fallible;
mod heap_task;
mod join;
mod keep;
mod latch;
mod panic;
mod parallel;
mod platform;
mod queue;
mod queues;
mod raw_handle;
pub mod runtime;
mod scheduler;
mod shutdown;
pub(crate) mod sync;
mod task;
pub mod time;
mod timer;
pub mod io;
#[cfg(feature = "net")]
pub mod net;

#[cfg(feature = "std")]
mod os;

#[cfg(feature = "capi")]
#[cfg_attr(docsrs, doc(cfg(feature = "capi")))]
pub mod capi;

// The loom models' platform (`LoomSpawner`, `model`); the models sit beside their code.
#[cfg(all(test, loom))]
mod loom;

// The shuttle scenarios' model platform; the scenarios sit beside their code.
#[cfg(all(test, shuttle))]
mod shuttle;

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use error::Error;
pub use blocking::{BlockingConfig, BlockingHandle, BlockingJoinError, BlockingMetrics, BlockingPool, BlockingTask};
pub use join::Scope;
pub use latch::{CountLatch, Signal};
pub use panic::panic_count;
pub use platform::{Parker, PoolLink, SpawnError, Spawner, ThreadStart};
pub use runtime::{JoinError, JoinHandle};
pub use scheduler::{
    Config, Stats, ThreadPool, WorkerContext, WorkerStats, DEFAULT_IDLE_SPINS, MAX_IDLE_SPINS,
};
pub use scheduler::MAX_THREADS;
pub use queues::{Queue, QueueConfig, QueueStats};
pub use task::{Batch, Callback, Task};

#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub use os::{configure_global_blocking, global_blocking, spawn_blocking};
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub use os::{join, scope};
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub use os::{global, CondvarParker, DefaultParker, ThreadSpawner};
#[cfg(all(feature = "std", target_os = "linux"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "std", target_os = "linux"))))]
pub use os::FutexParker;
