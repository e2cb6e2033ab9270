//! The small C programs' pool, as a peer for the queue workloads (issue 27): one `Mutex` around
//! a FIFO (`VecDeque`), one `Condvar`, N threads (1 for the serial peer). Submit locks, pushes
//! at the tail, unlocks, and signals one thread if one sleeps; a thread locks, pops the head
//! (waiting on the condvar while the FIFO is empty), unlocks and runs the job.
//!
//! Two kinds of job, as the C pools have:
//! * [`MutexPool::submit_raw`]: a function pointer and its argument stored by value in the
//!   deque (zstd's `POOL_add`, libuv's intrusive `uv_work_t`): no allocation per job once the
//!   deque has grown to its size (it keeps its capacity between runs, so after the warm-up run
//!   nothing is allocated while timed). The argument is a `pool::Task`, so the same callback
//!   and task array serve our pool and this one.
//! * [`MutexPool::spawn`]: one `Box<dyn FnOnce>` per job (C-Thread-Pool's `malloc` of a job
//!   node per `thpool_add_work`).
//!
//! The signal is sent only when a thread waits (glibc's `pthread_cond_signal` costs no system
//! call without waiters, Rust's futex `Condvar::notify_one` always makes one), and after the
//! unlock, so the woken thread does not block on the mutex: the strongest form of this design.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use pool::Task;

/// A job: what the C pools keep per entry.
enum Job {
    Raw { f: unsafe extern "C" fn(*mut Task), arg: NonNull<Task> },
    Boxed(Box<dyn FnOnce() + Send>),
}

// SAFETY: a raw job's argument is handed to the pool's thread by `submit_raw`'s contract (valid
// until its callback has started, touched by nobody else meanwhile); boxed jobs are `Send`.
unsafe impl Send for Job {}

struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting on the condvar (the signal is sent only when one does).
    sleeping: usize,
    stop: bool,
}

struct Inner {
    state: Mutex<State>,
    cv: Condvar,
}

/// A mutex + condvar FIFO pool of `threads` threads; dropping it runs what is queued, then
/// joins the threads.
pub struct MutexPool {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl MutexPool {
    pub fn new(threads: usize) -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::new(State { jobs: VecDeque::new(), sleeping: 0, stop: false }),
            cv: Condvar::new(),
        });
        let threads = (0..threads)
            .map(|i| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("mutex-pool-{i}"))
                    .spawn(move || worker(&inner))
                    .expect("mutex pool thread")
            })
            .collect();
        MutexPool { inner, threads }
    }

    /// Threads this pool runs (all started by `new`).
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Queues `f(arg)`, no allocation once the deque has grown.
    ///
    /// # Safety
    /// `arg` is valid for `f` and stays valid, unmoved and unused by anyone else until `f` has
    /// started (the same contract as `ThreadPool::submit`).
    pub unsafe fn submit_raw(&self, f: unsafe extern "C" fn(*mut Task), arg: NonNull<Task>) {
        self.push(Job::Raw { f, arg });
    }

    /// Queues a boxed closure (one allocation per job).
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        self.push(Job::Boxed(Box::new(f)));
    }

    fn push(&self, job: Job) {
        let wake = {
            let mut st = self.inner.state.lock().unwrap();
            st.jobs.push_back(job);
            st.sleeping > 0
        };
        if wake {
            self.inner.cv.notify_one();
        }
    }
}

fn worker(inner: &Inner) {
    loop {
        let job = {
            let mut st = inner.state.lock().unwrap();
            loop {
                if let Some(job) = st.jobs.pop_front() {
                    break job;
                }
                if st.stop {
                    return;
                }
                st.sleeping += 1;
                st = inner.cv.wait(st).unwrap();
                st.sleeping -= 1;
            }
        };
        match job {
            // SAFETY: `submit_raw`'s contract: `arg` is valid for `f` and ours until `f` starts.
            Job::Raw { f, arg } => unsafe { f(arg.as_ptr()) },
            Job::Boxed(f) => f(),
        }
    }
}

impl Drop for MutexPool {
    fn drop(&mut self) {
        self.inner.state.lock().unwrap().stop = true;
        self.inner.cv.notify_all();
        for t in self.threads.drain(..) {
            t.join().expect("mutex pool thread panicked");
        }
    }
}
