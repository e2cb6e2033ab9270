//! The C ABI of the scheduler statistics (`pool_stats`, `pool_worker_stats`,
//! `pool_global_stats`): the counters of [`Stats`] / [`WorkerStats`] (see
//! `scheduler/stats.rs`), read without any lock and without slowing the workers.
#![allow(non_camel_case_types)]

use core::ffi::c_int;
use core::ptr::NonNull;

use super::pool::{borrow, global_pool, Pool};
use super::status::boundary;
use super::config::POOL_RESERVED_WORDS;
use crate::{Stats, WorkerStats};

use super::status::pool_status::*;

/// Counters of a pool (`pool_stats`, `pool_global_stats`) or of one of its workers
/// (`pool_worker_stats`). Read without any lock: each field is some recent value of its
/// counter, exact once the pool is quiet (for example after `pool_shutdown`). Counts since the
/// pool was created.
#[cfg_attr(doc, doc = include_str!("examples/stats.md"))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct pool_stats {
    /// Threads started and not yet exited (0 from `pool_worker_stats`).
    pub threads: usize,
    /// Threads idle (asleep or about to sleep) (0 from `pool_worker_stats`).
    pub idle_threads: usize,
    /// Worker slots (the pool's `max_threads`): `pool_worker_stats` accepts indices
    /// `0 .. workers - 1`.
    pub workers: usize,
    /// Async tasks spawned (Rust `spawn_future`; 0 for a pool used only from C).
    pub spawned: usize,
    /// Tasks run (each `struct task` callback called; an async task's poll counts as one).
    pub polled: usize,
    /// Tasks obtained by stealing from another worker.
    pub stolen: usize,
    /// Successful steal operations (one steal moves up to half a worker's queue).
    pub steals: usize,
    /// Times a worker went to sleep.
    pub parks: usize,
    /// Tasks taken from a worker's LIFO ("run next") slot.
    pub lifo_hits: usize,
    /// Batches taken from the pool's shared queue (where tasks submitted from outside go).
    pub injector_fetches: usize,
    /// Thread starts that failed (0 from `pool_worker_stats`).
    pub spawn_failures: usize,
    /// Not a count but a reading: about how many tasks wait, in the whole pool (`pool_stats`:
    /// the workers' own queues and the shared queue that outside submits go to) or in one
    /// worker's own queues (`pool_worker_stats`). Approximate while the pool runs, exact when
    /// nothing runs. In the first of the reserved words that 0.1 had.
    pub queued: usize,
    /// Threads parked as surplus, above the pool's thread count after `pool_set_max_threads`
    /// lowered it: neither idle nor running (0 from `pool_worker_stats`). In the second of the
    /// reserved words that 0.1 had.
    pub surplus_threads: usize,
    /// Reserved for counters of later minor versions; written as 0.
    pub reserved: [usize; POOL_STATS_RESERVED_WORDS],
}

/// The reserved words left in `struct pool_stats`: `queued` and `surplus_threads` took the
/// first two.
pub const POOL_STATS_RESERVED_WORDS: usize = POOL_RESERVED_WORDS - 2;

impl From<Stats> for pool_stats {
    fn from(s: Stats) -> Self {
        Self {
            threads: s.threads,
            idle_threads: s.idle_threads,
            workers: s.workers,
            spawned: s.spawned,
            polled: s.polled,
            stolen: s.stolen,
            steals: s.steals,
            parks: s.parks,
            lifo_hits: s.lifo_hits,
            injector_fetches: s.injector_fetches,
            spawn_failures: s.spawn_failures,
            queued: s.queued,
            surplus_threads: s.surplus_threads,
            reserved: [0; POOL_STATS_RESERVED_WORDS],
        }
    }
}

impl pool_stats {
    fn worker(workers: usize, w: WorkerStats) -> Self {
        Self {
            workers,
            spawned: w.spawned,
            polled: w.polled,
            stolen: w.stolen,
            steals: w.steals,
            parks: w.parks,
            lifo_hits: w.lifo_hits,
            injector_fetches: w.injector_fetches,
            threads: 0,
            idle_threads: 0,
            spawn_failures: 0,
            queued: w.queued,
            surplus_threads: 0,
            reserved: [0; POOL_STATS_RESERVED_WORDS],
        }
    }
}

/// Reads `pool`'s counters (every worker's summed, and the pool-wide ones) into `*out`,
/// without any lock. POOL_ERR_INVALID for a NULL argument (`*out` untouched). Callable from
/// any thread, the pool's own tasks included, before and after `pool_shutdown`.
#[cfg_attr(doc, doc = include_str!("examples/stats.md"))]
#[no_mangle]
pub extern "C" fn pool_stats(pool: *const Pool, out: *mut pool_stats) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool.cast_mut()) else { return POOL_ERR_INVALID };
        let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        let stats = unsafe { borrow(pool) }.stats();
        // SAFETY: non-null; the caller passes a writable `struct pool_stats`.
        unsafe { out.as_ptr().write(stats.into()) };
        POOL_OK
    })
}

/// Reads the counters of worker `index` of `pool` into `*out` (all zero for a worker whose
/// thread has not started yet; `threads`, `idle_threads`, `surplus_threads` and
/// `spawn_failures` are pool-wide and left 0). POOL_ERR_INVALID for a NULL argument, POOL_ERR_RANGE for `index >= workers`
/// (`pool_stats` gives `workers`); `*out` is untouched on error.
#[cfg_attr(doc, doc = include_str!("examples/stats.md"))]
#[no_mangle]
pub extern "C" fn pool_worker_stats(pool: *const Pool, index: usize, out: *mut pool_stats) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool.cast_mut()) else { return POOL_ERR_INVALID };
        let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
        // SAFETY: `pool` is a live pool (pool.h contract).
        let pool = unsafe { borrow(pool) };
        // `worker_stats(max_threads)` is the Rust API's outside-threads slot; C has workers only.
        let Some(w) = pool.worker_stats(index).filter(|_| index < pool.thread_limit()) else { return POOL_ERR_RANGE };
        // SAFETY: non-null; the caller passes a writable `struct pool_stats`.
        unsafe { out.as_ptr().write(pool_stats::worker(pool.thread_limit(), w)) };
        POOL_OK
    })
}

/// Reads the global pool's counters (the pool behind `pool_submit`) into `*out`, as
/// `pool_stats`. POOL_ERR_INVALID for NULL.
#[cfg_attr(doc, doc = include_str!("examples/global.md"))]
#[no_mangle]
pub extern "C" fn pool_global_stats(out: *mut pool_stats) -> c_int {
    boundary(|| {
        let Some(out) = NonNull::new(out) else { return POOL_ERR_INVALID };
        let stats = match global_pool() {
            Ok(pool) => pool.stats(),
            Err(s) => return s,
        };
        // SAFETY: non-null; the caller passes a writable `struct pool_stats`.
        unsafe { out.as_ptr().write(stats.into()) };
        POOL_OK
    })
}
