//! [`Scope`]: spawning work that borrows from the caller's frame ([`ThreadPool::scope`],
//! [`WorkerContext::scope`]); every spawn is counted on a latch the scope waits for.

use core::fmt;
use core::marker::PhantomData;
#[cfg(feature = "std")]
use core::ptr::{self, NonNull};

use alloc::boxed::Box;

use crate::latch::CountLatch;
#[cfg(not(feature = "std"))]
use crate::panic::AbortOnUnwind;
use crate::panic::{catch, resume};
#[cfg(feature = "std")]
use crate::panic::Panic;
use crate::platform::Spawner;
use crate::scheduler::{ThreadPool, WorkerContext};
use crate::heap_task::HeapTask;
use crate::task::Task;

impl<S: Spawner> WorkerContext<S> {
    /// Creates a scope for spawning work that borrows from the caller's frame
    /// ([`ThreadPool::scope`] on this worker's pool, without looking the worker up).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let hits = AtomicUsize::new(0);
    /// pool.install(|cx| {
    ///     cx.scope(|s| {
    ///         for _ in 0..10 {
    ///             s.spawn(|_| { hits.fetch_add(1, Ordering::Relaxed); });
    ///         }
    ///     })
    /// })
    /// .unwrap();
    /// assert_eq!(hits.into_inner(), 10);
    /// # }
    /// ```
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope, S>) -> R + Send,
        R: Send,
    {
        self.pool().scope_here(op)
    }
}

impl<S: Spawner> ThreadPool<S> {
    /// Creates a scope for spawning work that borrows from the caller's frame; returns when
    /// `op` and everything spawned in the scope (transitively) has finished.
    ///
    /// Spawned closures go to the pool's queues as tasks (one allocation each). The calling
    /// worker runs other work while it waits; from outside the pool, the scope runs on the pool
    /// and the caller parks. With `std`, the first panic (of `op`, else of a spawned closure)
    /// is re-raised after everything finished.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use pool::{Config, ThreadPool};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// let pool = ThreadPool::new(Config::default().with_max_threads(2)).unwrap();
    /// let data: Vec<u64> = (1..=1000).collect();
    /// let sum = AtomicU64::new(0);
    /// pool.scope(|s| {
    ///     for chunk in data.chunks(100) {
    ///         let sum = &sum;
    ///         s.spawn(move |_| { sum.fetch_add(chunk.iter().sum(), Ordering::Relaxed); });
    ///     }
    /// });
    /// assert_eq!(sum.into_inner(), 500_500);
    /// # }
    /// ```
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope, S>) -> R + Send,
        R: Send,
    {
        if self.is_worker_thread() {
            self.scope_here(op)
        } else {
            self.run_on_pool(move |_| self.scope_here(op))
        }
    }

    /// The scope on the calling thread (a worker helps while it waits; another thread parks).
    pub(crate) fn scope_here<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope, S>) -> R + Send,
        R: Send,
    {
        let scope = Scope::new(self);
        #[cfg(not(feature = "std"))]
        let guard = AbortOnUnwind;
        let result = catch(|| op(&scope));
        self.wait_for_latch(&scope.latch);
        #[cfg(not(feature = "std"))]
        core::mem::forget(guard);
        match result {
            Ok(r) => {
                #[cfg(feature = "std")]
                if let Some(p) = scope.take_panic() {
                    resume(p);
                }
                r
            }
            Err(p) => resume(p),
        }
    }
}

/// A scope for spawning work that may borrow anything that outlives `'scope`. Created by
/// [`ThreadPool::scope`] (or [`crate::scope`]); see there.
///
/// ```
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
/// let mut words = vec!["a".to_string(), "b".to_string()];
/// pool.scope(|s| {
///     for w in words.iter_mut() {
///         s.spawn(move |_| w.push('!')); // borrows `words` mutably: the scope outlives it
///     }
/// });
/// assert_eq!(words, ["a!", "b!"]);
/// # }
/// ```
pub struct Scope<'scope, S: Spawner> {
    pool: *const ThreadPool<S>,
    /// One unit per spawned job not finished yet (plus the latch's own "open" unit).
    latch: CountLatch,
    /// The first panic of a spawned job (a leaked `Box<Panic>`), null if none.
    #[cfg(feature = "std")]
    panic: crate::sync::AtomicPtr<Panic>,
    /// Invariant in `'scope`, like rayon's: spawned closures may borrow for exactly `'scope`.
    marker: PhantomData<ScopeMarker<'scope, S>>,
}

type ScopeMarker<'scope, S> = Box<dyn FnOnce(&Scope<'scope, S>) + Send + Sync + 'scope>;

// SAFETY: the pool pointer is to a `Sync` pool that outlives the scope; the latch and the panic
// slot are atomics; the marker is Send + Sync.
unsafe impl<S: Spawner> Send for Scope<'_, S> {}
// SAFETY: as above; `spawn` takes `&self` and is thread-safe.
unsafe impl<S: Spawner> Sync for Scope<'_, S> {}

impl<S: Spawner> fmt::Debug for Scope<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("pending", &self.latch.pending()).finish_non_exhaustive()
    }
}

impl<'scope, S: Spawner> Scope<'scope, S> {
    fn new(pool: &ThreadPool<S>) -> Self {
        Self {
            pool,
            latch: CountLatch::new(),
            #[cfg(feature = "std")]
            panic: crate::sync::AtomicPtr::new(ptr::null_mut()),
            marker: PhantomData,
        }
    }

    /// Spawns `f` into the scope: it runs on the pool (or here, if the pool cannot take work)
    /// and the scope does not return before it finished. `f` gets the scope, to spawn more.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// // A tree walk: each node spawns its children into the same scope.
    /// fn visit<'s>(s: &pool::Scope<'s, pool::ThreadSpawner>, depth: u32, count: &'s AtomicUsize) {
    ///     count.fetch_add(1, Ordering::Relaxed);
    ///     if depth > 0 {
    ///         for _ in 0..2 {
    ///             s.spawn(move |s| visit(s, depth - 1, count));
    ///         }
    ///     }
    /// }
    /// let pool = pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap();
    /// let count = AtomicUsize::new(0);
    /// pool.scope(|s| visit(s, 4, &count));
    /// assert_eq!(count.into_inner(), 31); // 1 + 2 + 4 + 8 + 16 nodes
    /// # }
    /// ```
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce(&Scope<'scope, S>) + Send + 'scope,
    {
        self.latch.add(1);
        let scope = ScopePtr(self);
        let task = HeapTask::boxed(move || {
            // SAFETY: the scope waits for this job's latch unit, released below, so it is alive.
            let scope = unsafe { scope.get() };
            #[cfg(feature = "std")]
            if let Err(p) = catch(|| f(scope)) {
                scope.record_panic(p);
            }
            #[cfg(not(feature = "std"))]
            f(scope);
            // SAFETY: one `done` per `add(1)` in `spawn`. Our last access to the scope.
            unsafe { scope.latch.done() };
        })
        .task();
        // SAFETY: `self.pool` outlives the scope (the scope lives inside the pool's `scope`).
        let pool = unsafe { &*self.pool };
        // Forked, not submitted: the scope's waiter runs its own spawns first, as related work
        // (`scheduler/context.rs`, "Bounded helping"), so nested scopes nest like the recursion.
        // SAFETY: the box lives until its callback runs (and frees it); the scope waits for
        // the latch unit added above, so everything `f` borrows outlives the run.
        if unsafe { pool.submit_fork(task) }.is_err() {
            // Not queued (the pool is shut down): still ours, run it here.
            // SAFETY: the task was not queued; this is its one run.
            unsafe { Task::run(task) };
        }
    }

    #[cfg(feature = "std")]
    fn record_panic(&self, p: Panic) {
        let boxed = Box::into_raw(Box::new(p));
        // AcqRel: the scope's owner takes the box after the latch (which orders this anyway).
        if self
            .panic
            .compare_exchange(ptr::null_mut(), boxed, crate::sync::Ordering::AcqRel, crate::sync::Ordering::Relaxed)
            .is_err()
        {
            // Not the first: dropped (only the first panic is re-raised).
            // SAFETY: from Box::into_raw above, never shared.
            drop(unsafe { Box::from_raw(boxed) });
        }
    }

    #[cfg(feature = "std")]
    fn take_panic(&self) -> Option<Panic> {
        let p = self.panic.swap(ptr::null_mut(), crate::sync::Ordering::Acquire);
        // SAFETY: a non-null pointer came from `record_panic`'s Box::into_raw, taken once.
        NonNull::new(p).map(|p| *unsafe { Box::from_raw(p.as_ptr()) })
    }
}

#[cfg(feature = "std")]
impl<S: Spawner> Drop for Scope<'_, S> {
    fn drop(&mut self) {
        // A panic recorded but not re-raised (the scope body panicked too): free it.
        drop(self.take_panic());
    }
}

/// The scope, as a spawned closure captures it (a raw pointer: the closure is `Send`, and the
/// scope outlives it: it waits for the closure's latch unit).
struct ScopePtr<'scope, S: Spawner>(*const Scope<'scope, S>);

// SAFETY: `Scope` is `Sync`; the pointer is only dereferenced while the scope waits for it.
unsafe impl<S: Spawner> Send for ScopePtr<'_, S> {}

impl<'scope, S: Spawner> ScopePtr<'scope, S> {
    /// # Safety
    /// The scope is alive (it waits for the closure that calls this).
    unsafe fn get<'a>(self) -> &'a Scope<'scope, S> {
        // SAFETY: the caller's contract.
        unsafe { &*self.0 }
    }
}
