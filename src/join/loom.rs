//! Loom model of the join handshake (`stack_job.rs` over the join deque): a real stack job's
//! second half stolen and run by a thief vs taken back by the owner, who then waits on the
//! job's signal. It checks exactly-once: the job's closure runs once, and what the runner
//! wrote is visible to the waiter when it returns.
//!
//! The deque's own models are `queue/deque/loom.rs`; the record flag's, `scheduler/frame/loom.rs`;
//! the counting latch's, `latch/loom.rs`.
//!
//! Run: `make test-loom`.

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use super::stack_job::StackJob;
use crate::loom::{model, LoomSpawner};
use crate::queue::deque::JoinDeque;
use crate::{Config, Task, ThreadPool};

/// The join handshake on a real stack job: the owner offers `b`, a thief may steal and run it
/// (the task callback sets the job's signal as its last access); the owner takes it back and
/// runs it inline, or waits on the signal (here from outside any pool: it parks). The closure
/// runs once, and its result and side effect are visible to the owner when it returns.
#[test]
fn join_handshake_stolen_vs_taken_back() {
    model("join_handshake_stolen_vs_taken_back", || {
        let pool = ThreadPool::with_spawner(Config { max_threads: 1, ..Config::default() }, LoomSpawner::new()).unwrap();
        let d = Arc::new(JoinDeque::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let side = Arc::new(AtomicUsize::new(0));
        let (r2, s2) = (runs.clone(), side.clone());
        // Run without a worker context: the model runs it on plain loom threads, none of them
        // a worker of `pool`.
        let job = StackJob::<_, usize, LoomSpawner>::new(
            move |_| {
                r2.fetch_add(1, Ordering::Relaxed);
                s2.store(42, Ordering::Relaxed);
                7usize
            },
            pool.inner(),
        );
        let task = job.task();
        // SAFETY: this thread owns `d`; the Arc outlives the half.
        let owner = unsafe { d.owner() };
        // The job outlives every use (we wait below before it drops).
        assert!(owner.push(task));
        let d2 = d.clone();
        let thief = thread::spawn(move || {
            if let Some(t) = d2.steal() {
                // SAFETY: stolen once, so this is its one run; the owner keeps the job alive
                // until the signal is set.
                unsafe { (Task::callback(t.as_ref()).unwrap())(t.as_ptr()) };
                true
            } else {
                false
            }
        });
        // (`a` would run here.)
        let taken_back = owner.pop_if(task);
        let result = if taken_back {
            // SAFETY: taken back: ours to run, once.
            unsafe { job.run_inline(None) }
        } else {
            pool.wait_for(job.signal());
            // SAFETY: stolen and run once; its signal is set (the wait above); taken once.
            unsafe { job.take_result() }
        };
        assert_eq!(result, 7);
        // Relaxed: visible through the signal (or because it ran on this thread).
        assert_eq!(side.load(Ordering::Relaxed), 42);
        let stolen = thief.join().unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 1, "b ran once (stolen: {stolen})");
    });
}
