//! Fork-join: [`WorkerContext::join`], [`ThreadPool::install`], [`ThreadPool::join`],
//! [`ThreadPool::scope`] and the stack jobs behind them. Design texts 001 (the fork-join pool: a
//! Chase-Lev deque per worker, owner LIFO, thieves take the oldest) and 003 (help-until-complete
//! on a worker, block-on elsewhere).
//!
//! # `cx.join(a, b)` on a worker (the context: `scheduler/context.rs`)
//! 0. If the worker's record flag is clear (it has enough latent frames to offer and nobody
//!    asked it for work: [`frame`], "The record flag"), `a` and `b` run inline, in order, and
//!    nothing is recorded: one load is the whole cost. Otherwise:
//! 1. `b` becomes a latent [`StackJob`] in the caller's frame: its task header and its
//!    closure, nothing else written; its address goes in the next slot of the worker's private
//!    frame stack ([`frame`]). No allocation, no shared write, no fence.
//! 2. If the worker is hungry (an idle worker asked for work), the join **promotes**
//!    the oldest latent `b` of its worker: [`JobHeader::offer`] writes the rest of that job (its
//!    signal, thief slot, pool), it goes on the worker's **join deque** ([`deque`]), where idle
//!    workers can steal it, and a thread is woken.
//! 3. `a` runs inline, with this context.
//! 4. If `b` stayed latent (the common case while every worker is busy), the worker runs it
//!    inline. If it was promoted and is still the newest job of the deque, the worker takes it
//!    back (`pop_if`) and runs it inline. Otherwise a thief has it: the worker waits in the one
//!    waiting loop (`Inner::run_until`, `scheduler/run.rs`), running related work first (its own deque,
//!    then the thief's: leapfrogging) until `b`'s signal is set.
//!
//! # Why a join deque next to the ring
//! Submitted tasks want FIFO (a stream of submits is served fairly) and cheap bulk stealing
//! (the ring's steal-half); fork-join wants LIFO for the owner (the most recent job is the
//! cache-hot one, and taking it back keeps the stack discipline) and the *oldest* job for
//! thieves (the biggest piece left). One structure cannot give both safely: an owner pop at the
//! ring's tail races steal-half's single CAS (the counterexample is in [`deque`]'s docs). So each
//! worker has both: the ring for tasks, a Chase-Lev deque for join jobs. Thieves look at a
//! victim's ring first, then its join deque, then its LIFO slot (`scheduler::search`).
//!
//! Why not the LIFO slot alone (the other option in the brief): a nested join displaces the
//! outer `b` from the slot into the ring, where it is found FIFO (oldest first): after `a`
//! returns, the outer `b` is no longer in the slot, and the waiting worker would run the
//! *oldest* queued job — an outer frame's, the biggest — nested deep in its stack. The deque
//! keeps every `b` where its frame can take it back.
//!
//! # Missed wake-ups for join jobs
//! A promotion wakes a thread only when one is idle (or can be started) and no wake is in
//! flight ([`notify_join`](crate::scheduler)); it does not take part in the `notified` flag.
//! So a worker going to sleep at the same instant may miss a join job. That costs parallelism,
//! never progress: the pushing worker is awake and takes its own job back (rayon makes the
//! same trade for jobs pushed to a local deque; see `scheduler/README.md`, "Join jobs").
//!
//! # Called from outside the pool
//! `install`/`join`/`scope` package the whole call as one stack job, submit it (the injector),
//! and park the caller until it is done ([`ThreadPool::wait_for`]). If the pool cannot take
//! work (shut down, no thread), `join` and `scope` run on the caller, sequentially, and
//! `install` returns the error.
//!
//! # Panics
//! A panic is re-raised in the caller only after both halves are finished (or, if `a`
//! panicked and `b` was never started, after `b` was taken back and dropped unrun); if both
//! panic, `a`'s panic wins, as in rayon. `a` runs without `catch_unwind`: a guard whose drop
//! runs only while unwinding settles `b` (takes it back, or waits for its thief), so the fast
//! path has no unwinding frame. A stolen `b` runs under `catch_unwind` on its thief (with
//! `std`; the task callback is `extern "C"` and must not unwind) and its panic travels back in
//! the job's result.

mod context;
// The C API's fork-join (`capi::job`); built without it too, for its tests.
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) mod fn_job;
mod install;
#[cfg(all(test, loom))]
mod loom;
mod scope;
pub(crate) mod stack_job;

pub use scope::Scope;
