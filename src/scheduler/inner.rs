//! [`Inner`]: the state shared by a pool's handle, its threads and its tasks (heap-allocated,
//! never moved), how it is built, and how long it lives: the handle holds one reference on
//! it and every live async task or pending timer one more, and the last to let go frees it
//! (`release_pool`), so a waker kept past the pool's end stays safe to call.

use core::ptr::{self, addr_of_mut, NonNull};

use alloc::boxed::Box;

use super::any_pool::{AnyPool, PoolOps};
use super::config::{Config, MAX_IDLE_SPINS};
use super::driver::DriverSlot;
use super::counters::Counters;
use super::protocol::Protocol;
use super::sync_word::{State, MAX_THREADS};
use super::worker::Worker;
use crate::error::Error;
use crate::fallible::{try_box_in_place, try_boxed_slice};
use crate::platform::{PoolLink, Spawner};
use crate::queue::injector::Injector;
use crate::shutdown::ShutdownGate;
use crate::sync::{AtomicPtr, AtomicUsize, CachePadded, IdleSet, Ordering};
use crate::timer::Timers;

/// The state shared by the pool's handle and its threads. Heap-allocated and pinned.
pub(crate) struct Inner<S: Spawner> {
    /// The waking protocol's state: the `Sync` word, the spinning count, the idle set, the
    /// timer role and `waits_released` (`protocol.rs`). First: the word is the line every
    /// notify reads.
    pub(crate) protocol: Protocol,
    /// External submissions and ring overflow.
    pub(crate) injector: Injector,
    /// Push-only intrusive list of workers (newest first).
    pub(super) workers: AtomicPtr<Worker<S>>,
    /// Worker by index, for `worker_at` (the worker a notify or a hand-over wakes).
    pub(super) worker_table: Box<[AtomicPtr<Worker<S>>]>,
    /// Rounds an idle worker watches `Sync` before it parks (`Config::idle_spins`).
    pub(super) idle_spins: u32,
    /// Next worker index to hand out.
    pub(super) next_index: AtomicUsize,
    pub(super) stack_size: usize,
    /// The thread in `shutdown` sleeps on this until the last worker leaves.
    pub(super) join_parker: S::Parker,
    /// Claimed by the first `shutdown` call; the dropper waits on it (`crate::shutdown`).
    pub(super) gate: ShutdownGate,
    pub(super) stats_spawn_failed: AtomicUsize,
    /// Workers parked as surplus (`surplus.rs`): neither idle nor running.
    pub(super) surplus_threads: AtomicUsize,
    /// Counters of events on threads that are not workers (shared: `bump_shared`).
    pub(crate) outside: CachePadded<Counters>,
    pub(crate) spawner: S,
    /// References to this memory: 1 for the `ThreadPool` handle + 1 per live async task or
    /// bound timer (they keep it alive past the handle's drop: `release_pool`).
    refs: CachePadded<AtomicUsize>,
    /// The pool's timing wheel (`crate::timer`; fired by `timers.rs`).
    pub(crate) timers: Timers,
    /// The pool's I/O driver, if one is installed (`driver.rs`).
    pub(crate) driver: DriverSlot,
    /// The pool's entry in its platform's registry (`Spawner::track_pool` once boxed,
    /// `untrack_pool` before it is freed): closed in a child after `fork` (`fork.rs`).
    pub(crate) link: PoolLink,
}

impl<S: Spawner> Inner<S> {
    /// The start of every shutdown (`ThreadPool::shutdown`, and the drop on one of the pool's
    /// own threads, which detaches): outside submits are refused from here on, the workers are
    /// woken to drain (`begin_shutdown`), and the waits are released (`release_waits`). One
    /// out-of-line copy for both callers.
    #[cold]
    #[inline(never)]
    pub(super) fn stop(&self) {
        self.injector.close();
        self.begin_shutdown();
        self.release_waits();
    }

    /// Shutdown (`stop`), after `begin_shutdown`: fires
    /// the timers and lets the I/O driver wake its waiters ([`crate::io::Driver::shutdown`]),
    /// so the waiting tasks are woken into a closing pool and cancelled, and shutdown waits for
    /// neither a deadline nor I/O; then lets the draining workers leave (`waits_released`) and
    /// unparks them to see it. Until then a worker that drained everything parks instead of
    /// leaving: a delayed task the fire queues is a pool task, whose own submits must be
    /// accepted, and only a worker can give it that (on the shutdown thread, after the workers
    /// left, they would be refused).
    fn release_waits(&self) {
        self.shutdown_timers();
        self.driver.shutdown();
        self.protocol.release_waits();
        self.unpark_all();
    }

    /// The error for work this pool refuses because its queue is closed: shut down, or
    /// inherited through `fork()` (closed in the child, `fork.rs`).
    #[cold]
    pub(crate) fn refusal(&self) -> Error {
        if self.link.is_inherited() {
            Error::Forked
        } else {
            Error::Shutdown
        }
    }

    /// Whether no task is queued or running (`ThreadPool::wait_idle`): every started thread is
    /// counted idle or parked as surplus, none of them sleeps inside a task's wait, and every
    /// queue is empty. Once
    /// true it stays true until the next submit, which is not ordered with this check anyway.
    pub(super) fn is_idle(&self) -> bool {
        let s = self.protocol.load(Ordering::Relaxed);
        // Pairs with the Release fence a worker makes before it counts itself idle inside a
        // task's wait (`run.rs`): seeing that count, we see its `waiting_in_task`.
        crate::sync::fence(Ordering::Acquire);
        if s.state() == State::Shutdown {
            return s.spawned() == 0 && self.injector.is_empty();
        }
        if s.idle() as usize + self.surplus_threads.load(Ordering::Relaxed) != s.spawned() as usize || !self.injector.is_empty() {
            return false;
        }
        let mut worker = self.workers.load(Ordering::Acquire);
        while let Some(w) = NonNull::new(worker) {
            // SAFETY: workers live until the pool is dropped; `next` is immutable once published.
            let w = unsafe { w.as_ref() };
            if w.waiting_in_task.load(Ordering::Relaxed)
                || !w.ring.is_empty()
                || !w.joins.is_empty_hint()
                || !w.lifo.load(Ordering::Relaxed).is_null()
            {
                return false;
            }
            worker = w.next;
        }
        // Nobody woke meanwhile (a wake would have changed the word).
        self.protocol.load(Ordering::Acquire) == s
    }
}

impl<S: Spawner> Drop for Inner<S> {
    fn drop(&mut self) {
        // SAFETY: tracked once boxed (`ThreadPool::with_spawner`), and freed only after this.
        unsafe { self.spawner.untrack_pool(NonNull::from(&self.link)) };
        let mut worker = self.workers.load(Ordering::Acquire);
        while !worker.is_null() {
            // SAFETY: every thread is joined (drop runs after shutdown), so nothing else
            // references the workers; each was leaked from a Box in `register`.
            let boxed = unsafe { Box::from_raw(worker) };
            worker = boxed.next;
        }
    }
}

/// What building a pool's state can fail on, done before its memory is allocated: the
/// checked configuration and the tables sized by it.
pub(super) struct Tables<S: Spawner> {
    max_threads: usize,
    worker_table: Box<[AtomicPtr<Worker<S>>]>,
    idle_words: Box<[AtomicUsize]>,
}

impl<S: Spawner> Inner<S> {
    /// A pool's state for `config`, not yet in its place (a reset after fork writes it over
    /// the old one).
    #[cfg(feature = "std")]
    pub(super) fn build(config: Config, spawner: S) -> Result<Self, Error> {
        let tables = Self::tables(&config, &spawner)?;
        let mut inner = core::mem::MaybeUninit::<Self>::uninit();
        // SAFETY: a local, aligned and writable; `init` writes every field.
        unsafe {
            Self::init(inner.as_mut_ptr(), tables, &config, spawner);
            Ok(inner.assume_init())
        }
    }

    /// A pool's state for `config` in its own heap block (`ThreadPool::with_spawner`): the
    /// block is allocated first and the state written straight into it, field by field
    /// (`init`).
    pub(super) fn build_boxed(config: Config, spawner: S) -> Result<Box<Self>, Error> {
        let tables = Self::tables(&config, &spawner)?;
        // SAFETY: `init` writes every field.
        unsafe { try_box_in_place(|dst| Self::init(dst, tables, &config, spawner)) }
    }

    fn tables(config: &Config, spawner: &S) -> Result<Tables<S>, Error> {
        let max_threads = match config.max_threads {
            0 => spawner.available_parallelism().clamp(1, MAX_THREADS),
            n if n <= MAX_THREADS => n,
            _ => return Err(Error::InvalidArgument),
        };
        if config.idle_spins > MAX_IDLE_SPINS {
            return Err(Error::InvalidArgument);
        }
        let worker_table = try_boxed_slice(max_threads, |_| AtomicPtr::new(ptr::null_mut()))?;
        let idle_words = try_boxed_slice(IdleSet::words_for(max_threads), |_| AtomicUsize::new(0))?;
        Ok(Tables { max_threads, worker_table, idle_words })
    }

    /// Writes a pool's state at `dst`, field by field: over 2 KiB with its timer wheel, which
    /// made as a value would be built on the stack and copied into its block.
    ///
    /// # Safety
    /// `dst` is aligned and valid for writes.
    unsafe fn init(dst: *mut Self, tables: Tables<S>, config: &Config, spawner: S) {
        // SAFETY: the caller's contract; every field is written.
        unsafe {
            addr_of_mut!((*dst).protocol).write(Protocol::new(tables.max_threads as u32, tables.idle_words));
            addr_of_mut!((*dst).injector).write(Injector::new());
            addr_of_mut!((*dst).workers).write(AtomicPtr::new(ptr::null_mut()));
            addr_of_mut!((*dst).worker_table).write(tables.worker_table);
            addr_of_mut!((*dst).idle_spins).write(config.idle_spins);
            addr_of_mut!((*dst).next_index).write(AtomicUsize::new(0));
            addr_of_mut!((*dst).stack_size).write(config.stack_size);
            addr_of_mut!((*dst).join_parker).write(spawner.new_parker());
            addr_of_mut!((*dst).gate).write(ShutdownGate::new());
            addr_of_mut!((*dst).stats_spawn_failed).write(AtomicUsize::new(0));
            addr_of_mut!((*dst).surplus_threads).write(AtomicUsize::new(0));
            addr_of_mut!((*dst).outside).write(CachePadded(Counters::default()));
            addr_of_mut!((*dst).refs).write(CachePadded(AtomicUsize::new(1)));
            Timers::init(addr_of_mut!((*dst).timers));
            addr_of_mut!((*dst).driver).write(DriverSlot::new());
            addr_of_mut!((*dst).link).write(PoolLink::new(Self::close_on_fork));
            addr_of_mut!((*dst).spawner).write(spawner);
        }
        // Names every field: one added and not written above fails to compile here.
        let _ = |inner: &Self| {
            let Inner {
                protocol: _,
                injector: _,
                workers: _,
                worker_table: _,
                idle_spins: _,
                next_index: _,
                stack_size: _,
                join_parker: _,
                gate: _,
                stats_spawn_failed: _,
                surplus_threads: _,
                outside: _,
                spawner: _,
                refs: _,
                timers: _,
                driver: _,
                link: _,
            } = inner;
        };
    }
}

impl<S: Spawner> Inner<S> {
    /// A task (or a bound timer, or a delayed task) takes a reference on the pool's memory.
    #[inline]
    pub(crate) fn acquire(&self) {
        // Relaxed: a new reference from an existing one (the handle's, or a task's), as
        // `Arc::clone`.
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops a reference; true if it was the last (the caller frees `Inner`).
    ///
    /// The handle's drop calls this after shutdown has joined every thread.
    #[inline]
    pub(crate) fn release(&self) -> bool {
        // Release, and on the last an Acquire load of the count, as `Arc`'s fence: everything
        // any owner did happens before the free (the count changes only by RMWs, so the load,
        // reading our decrement, synchronises with every earlier one). A load so that
        // ThreadSanitizer, which does not model fences, sees the pairing.
        if self.refs.fetch_sub(1, Ordering::Release) == 1 {
            let _ = self.refs.load(Ordering::Acquire);
            return true;
        }
        false
    }
}

impl<S: Spawner> Inner<S> {
    /// The table of this platform type (`any_pool.rs`).
    pub(crate) const OPS: PoolOps = PoolOps {
        schedule: Self::schedule_of,
        wait: Self::wait_of,
        timers: Self::timers_of,
        now_ns: Self::now_of,
        kick: Self::kick_of,
        acquire: Self::acquire_of,
        release: Self::release_of,
    };

    /// This pool, erased (`any_pool.rs`; links the table's entries).
    pub(crate) fn any(&self) -> AnyPool {
        AnyPool { pool: NonNull::from(self).cast(), ops: &Self::OPS }
    }

    /// The table's `release`.
    ///
    /// # Safety
    /// `pool` is a live `Inner<S>`, with the provenance of the whole pool (the handle's
    /// pointer), on which the caller gives up a reference.
    unsafe fn release_of(pool: NonNull<()>) {
        // SAFETY: the caller's contract.
        unsafe { release_pool::<S>(pool.cast()) };
    }
}

/// Drops a reference on the pool's memory taken with [`Inner::acquire`] (a task's, a bound
/// timer's, a delayed task's); the last one frees it, as the handle's drop would have.
///
/// # Safety
/// `inner` is a live `Inner<S>` from `Box::leak` (the handle's pointer, or one derived from
/// it), on which the caller owns one reference, which it gives up.
pub(crate) unsafe fn release_pool<S: Spawner>(inner: NonNull<Inner<S>>) {
    // SAFETY: our reference keeps it alive until this call.
    if unsafe { inner.as_ref() }.release() {
        // SAFETY: no thread and no other reference is left; `Inner` came from Box::leak.
        drop(unsafe { Box::from_raw(inner.as_ptr()) });
    }
}
