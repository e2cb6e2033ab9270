//! [`ThreadPool::spawn`]: a closure on the pool, in a boxed task (one allocation per call).

use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use super::handle::ThreadPool;
use crate::error::Error;
use crate::platform::Spawner;
use crate::task::Task;

impl<S: Spawner> ThreadPool<S> {
    /// Runs a closure on the pool. Convenience for Rust callers: allocates one box per call
    /// (the intrusive [`submit`](Self::submit) allocates nothing).
    ///
    /// With `std`, a panic in the closure is caught and counted, and the pool keeps running
    /// (see [`Stats`](crate::Stats)); without `std` a panic aborts (the callback is `extern "C"`).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..10u64 {
    ///     let tx = tx.clone();
    ///     pool.spawn(move || tx.send(i * i).unwrap()).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<u64>(), 285);
    /// # }
    /// ```
    pub fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), Error> {
        let job = Box::into_raw(Box::new(ClosureTask { task: Task::new(ClosureTask::<F>::run), f: Some(f) }));
        // Projected from the raw pointer to the whole box (not `&leaked.task`): the callback
        // turns it back into the box and frees it, so it must carry the whole allocation's
        // provenance (Miri/Stacked Borrows rejects a pointer made from a field reference).
        // SAFETY: `job` is a live, non-null allocation.
        let task = unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*job).task)) };
        // SAFETY: the box stays alive until its callback runs and frees it.
        match unsafe { self.submit(task) } {
            Ok(()) => Ok(()),
            Err(e) => {
                // SAFETY: not queued, so still ours: free it.
                drop(unsafe { Box::from_raw(task.as_ptr().cast::<ClosureTask<F>>()) });
                Err(e)
            }
        }
    }
}

/// A boxed closure with its task header first.
#[repr(C)]
struct ClosureTask<F> {
    task: Task,
    f: Option<F>,
}

impl<F: FnOnce() + Send + 'static> ClosureTask<F> {
    unsafe extern "C" fn run(task: *mut Task) {
        // SAFETY: `task` is the first field of a leaked `Box<ClosureTask<F>>` (repr(C)).
        let mut job = unsafe { Box::from_raw(task.cast::<ClosureTask<F>>()) };
        let f = job.f.take();
        drop(job);
        if let Some(f) = f {
            crate::panic::run_catching(f);
        }
    }
}
