//! Loom models of the async task state word and its transitions (`state.rs`, run by
//! `harness.rs`): wake vs poll vs complete, abort vs poll, abort vs complete, JoinHandle drop
//! vs complete, the join signal's waker and a blocking join vs complete, wake vs shutdown. The
//! task runs on a hand-driven queue ([`ManualQueue`], below), a [`Schedule`] whose queue the
//! model's threads drain by hand (`run_one`), so each model picks which thread polls, wakes,
//! aborts or drops, and loom explores every interleaving of those operations on the real state
//! word, join slot and stage (loom's `UnsafeCell` reports any access the ownership rules in
//! `header.rs` do not order). A lost wake-up shows as a loom deadlock (every thread parked or
//! spinning); a double poll, a double drop or a leak as a failed count.
//!
//! Run: `make test-loom`.

use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll, Waker};

use std::collections::VecDeque;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use super::header::{Header, Schedule};
use super::{harness, waker};
use super::JoinHandle;
use crate::latch::Signal;
use crate::loom::{model, LoomParker};
use crate::scheduler::any_pool::PoolOps;
use crate::task::Task;

struct Queued(NonNull<Task>);
// SAFETY: a queued task is handed between loom threads by the queue.
unsafe impl Send for Queued {}

/// A queue of tasks that the model runs by hand.
struct ManualQueue {
    queue: Mutex<VecDeque<Queued>>,
    closed: AtomicBool,
    /// Tasks allocated and not yet freed.
    live: AtomicUsize,
    /// Times a task was queued.
    scheduled: AtomicUsize,
}

impl ManualQueue {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            scheduled: AtomicUsize::new(0),
        })
    }

    /// Runs the oldest queued task, if any.
    fn run_one(&self) -> bool {
        let task = self.queue.lock().unwrap().pop_front();
        match task {
            Some(Queued(task)) => {
                // SAFETY: dequeued, so this is its one run.
                unsafe { Task::run(task) };
                true
            }
            None => false,
        }
    }

    /// Runs queued tasks until the queue is empty.
    fn run_all(&self) {
        while self.run_one() {}
    }

    /// Refuse further tasks, and cancel those that come up to run (as a pool's shutdown).
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn len(&self) -> usize {
        self.queue.lock().unwrap().len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    fn scheduled(&self) -> usize {
        self.scheduled.load(Ordering::Acquire)
    }
}

impl ManualQueue {
    /// The queue behind a task's scheduler.
    ///
    /// # Safety
    /// `sched` is a queue's (`spawn`), on which the caller's task holds an `Arc` reference.
    unsafe fn of<'a>(sched: NonNull<()>) -> &'a Self {
        // SAFETY: the caller's contract.
        unsafe { sched.cast::<Self>().as_ref() }
    }

    /// Helps while there is queued work, then parks until the signal is set (so a model's
    /// blocking `join` registers a parker in the join signal, as a pool's wait does; another
    /// thread of the model must then run the task).
    unsafe fn wait(sched: NonNull<()>, signal: &Signal) {
        // SAFETY: as `of`.
        let q = unsafe { Self::of(sched) };
        while !signal.is_set() {
            if !q.run_one() {
                signal.wait(&LoomParker::default(), None);
                return;
            }
        }
    }

    unsafe fn release(sched: NonNull<()>) {
        // SAFETY: as `of`.
        unsafe { Self::of(sched) }.live.fetch_sub(1, Ordering::Release);
        // SAFETY: the task's reference, from `Arc::into_raw` in `spawn`.
        drop(unsafe { Arc::from_raw(sched.cast::<Self>().as_ptr().cast_const()) });
    }
}

/// The queue's table: a task reaches its queue through it as it reaches a pool
/// (`scheduler::any_pool`). No timers in these models.
static OPS: PoolOps = PoolOps {
    schedule: <ManualQueue as Schedule>::schedule,
    wait: ManualQueue::wait,
    timers: |_| unreachable!("no timers in the runtime models"),
    now_ns: |_| None,
    kick: |_| {},
    acquire: |_| {},
    release: ManualQueue::release,
};

// SAFETY: `schedule` queues the task for exactly one `run_one`, or refuses it (closed); the
// queue lives until every task released its `Arc` reference.
unsafe impl Schedule for ManualQueue {
    const OPS: &'static PoolOps = &OPS;

    unsafe fn schedule(sched: NonNull<()>, task: NonNull<Task>, _lifo: bool) -> Result<(), ()> {
        // SAFETY: a task holds an Arc reference on the queue.
        let q = unsafe { Self::of(sched) };
        if q.closed.load(Ordering::Acquire) {
            return Err(());
        }
        q.scheduled.fetch_add(1, Ordering::Relaxed);
        q.queue.lock().unwrap().push_back(Queued(task));
        Ok(())
    }

    unsafe fn is_closed(sched: NonNull<()>) -> bool {
        // SAFETY: as above.
        unsafe { Self::of(sched) }.closed.load(Ordering::Acquire)
    }
}

/// Spawns `future` onto this queue (queued, not yet polled).
fn spawn<F>(q: &Arc<ManualQueue>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    q.live.fetch_add(1, Ordering::Relaxed);
    let sched = NonNull::new(Arc::into_raw(q.clone()).cast_mut()).unwrap().cast::<()>();
    let header = harness::allocate::<F, ManualQueue>(future, sched);
    // SAFETY: a fresh task: SCHEDULED with the queue's reference.
    unsafe { ManualQueue::schedule(sched, Header::task(header), true) }.unwrap();
    // SAFETY: output type F::Output; the handle takes the handle's reference.
    unsafe { JoinHandle::from_raw(header) }
}

/// A waker for a task from its JoinHandle side (for models that wake a task from outside
/// without a poll having handed out a waker).
fn waker_of<T>(handle: &JoinHandle<T>) -> Waker {
    // SAFETY: the handle holds a reference for the call; the waker takes its own.
    unsafe { waker::waker(handle.header()) }
}

/// Counts drops.
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// Pending on the first poll (after handing its waker out through `stash`, or waking itself),
/// Ready(7) on the second. Counts polls; `_drop` counts the future's drop.
struct TwoPolls {
    polls: Arc<AtomicUsize>,
    stash: Option<Arc<Mutex<Option<Waker>>>>,
    _drop: DropCount,
}

impl Future for TwoPolls {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        if self.polls.fetch_add(1, Ordering::AcqRel) > 0 {
            return Poll::Ready(7);
        }
        match &self.stash {
            Some(stash) => *stash.lock().unwrap() = Some(cx.waker().clone()),
            None => cx.waker().wake_by_ref(),
        }
        Poll::Pending
    }
}

/// Polls `f` on this loom thread, parking between polls (loom's `future` feature is off).
fn block_on<F: Future>(f: F) -> F::Output {
    struct ThreadWaker(thread::Thread);
    impl std::task::Wake for ThreadWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(std::sync::Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = core::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

fn counters() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)))
}

/// Runs the queue until `polls` reaches `n`.
fn run_until_polled(q: &ManualQueue, polls: &AtomicUsize, n: usize) {
    while polls.load(Ordering::Acquire) < n {
        if !q.run_one() {
            thread::yield_now();
        }
    }
}

#[test]
fn runtime_wake_vs_poll_vs_complete() {
    // Interleaving: the poller's first poll hands the waker out; the waker thread wakes it
    // while that poll is still running (NOTIFIED: the poller re-queues it), or after the poll
    // returned (idle: the wake queues it); meanwhile main awaits the JoinHandle, whose waker
    // registration races with completion. Exactly two polls, one output, nothing leaked.
    model("runtime_wake_vs_poll_vs_complete", || {
        let q = ManualQueue::new();
        let (polls, drops) = counters();
        let stash: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let h = spawn(&q, TwoPolls { polls: polls.clone(), stash: Some(stash.clone()), _drop: DropCount(drops.clone()) });
        let waker_thread = thread::spawn(move || loop {
            let w = stash.lock().unwrap().take();
            match w {
                Some(w) => return w.wake(),
                None => thread::yield_now(),
            }
        });
        let (q2, p2) = (q.clone(), polls.clone());
        let poller = thread::spawn(move || run_until_polled(&q2, &p2, 2));
        assert_eq!(block_on(h).unwrap(), 7);
        waker_thread.join().unwrap();
        poller.join().unwrap();
        assert_eq!(polls.load(Ordering::Acquire), 2);
        assert_eq!(drops.load(Ordering::Acquire), 1);
        assert_eq!(q.scheduled(), 2, "queued once at spawn, once by the wake");
        assert_eq!(q.live(), 0, "the task was freed");
    });
}

#[test]
fn runtime_concurrent_wakes_queue_once() {
    // Interleaving: two threads wake the same idle task by reference at once: only the wake
    // that finds it idle queues it (one SCHEDULED, one queue reference).
    model("runtime_concurrent_wakes_queue_once", || {
        let q = ManualQueue::new();
        let (polls, drops) = counters();
        let stash: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let h = spawn(&q, TwoPolls { polls: polls.clone(), stash: Some(stash.clone()), _drop: DropCount(drops.clone()) });
        q.run_one();
        let w = stash.lock().unwrap().take().unwrap();
        let w2 = w.clone();
        let t = thread::spawn(move || w2.wake_by_ref());
        w.wake_by_ref();
        t.join().unwrap();
        assert_eq!(q.len(), 1);
        q.run_all();
        assert_eq!(polls.load(Ordering::Acquire), 2);
        drop(w);
        assert_eq!(block_on(h).unwrap(), 7);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_abort_vs_poll() {
    // Interleaving: the poller runs a task that wakes itself during its first poll (NOTIFIED,
    // re-queued) while another thread aborts it: before the first poll (run cancels), during a
    // poll (CANCELLED while RUNNING: the poller cancels after Pending), between polls (queued:
    // cancelled when dequeued) or after completion (no-op). The future is dropped exactly once;
    // the handle sees the output or Cancelled.
    model("runtime_abort_vs_poll", || {
        let q = ManualQueue::new();
        let (polls, drops) = counters();
        let h = Arc::new(spawn(&q, TwoPolls { polls: polls.clone(), stash: None, _drop: DropCount(drops.clone()) }));
        let h2 = h.clone();
        let aborter = thread::spawn(move || h2.abort());
        let q2 = q.clone();
        let poller = thread::spawn(move || q2.run_all());
        aborter.join().unwrap();
        poller.join().unwrap();
        q.run_all();
        let h = Arc::try_unwrap(h).ok().unwrap();
        match block_on(h) {
            Ok(v) => {
                assert_eq!(v, 7);
                assert_eq!(polls.load(Ordering::Acquire), 2);
            }
            Err(e) => assert!(e.is_cancelled()),
        }
        assert_eq!(drops.load(Ordering::Acquire), 1);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_self_requeue_vs_external_wake() {
    // Interleaving: the first poll hands the waker out and wakes the task itself, so it goes
    // back to the queue still RUNNING (no RMW on the state word; `raw::after_pending`). Another
    // thread sets a flag and wakes the task through the handed-out waker: before the first poll
    // ends (NOTIFIED while RUNNING, then the self-wake path must not take the no-RMW shortcut),
    // while the task sits in the queue still RUNNING (NOTIFIED on a queued task: the second
    // poll's end re-queues it), or after the second poll (idle: queued again). The second and
    // later polls complete only once they see the flag, and never wake themselves: if the
    // external wake were lost, the task would stay pending and `block_on` would deadlock.
    model("runtime_self_requeue_vs_external_wake", || {
        let q = ManualQueue::new();
        let (polls, drops) = counters();
        let flag = Arc::new(AtomicUsize::new(0));
        let stash: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let (p, f, s, d) = (polls.clone(), flag.clone(), stash.clone(), DropCount(drops.clone()));
        let h = spawn(&q, std::future::poll_fn(move |cx| {
            let _keep = &d;
            if p.fetch_add(1, Ordering::AcqRel) == 0 {
                *s.lock().unwrap() = Some(cx.waker().clone());
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if f.load(Ordering::Acquire) == 1 { Poll::Ready(7) } else { Poll::Pending }
        }));
        let q2 = q.clone();
        let poller = thread::spawn(move || q2.run_all());
        let waker = loop {
            if let Some(w) = stash.lock().unwrap().take() {
                break w;
            }
            thread::yield_now();
        };
        flag.store(1, Ordering::Release);
        waker.wake();
        poller.join().unwrap();
        q.run_all();
        assert_eq!(block_on(h).unwrap(), 7);
        assert_eq!(drops.load(Ordering::Acquire), 1);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_abort_idle_vs_wake() {
    // Interleaving: the task is idle with its waker handed out; one thread aborts (claims
    // RUNNING, drops the future on its own thread) while another wakes it (queues it, or finds
    // it running/complete). Never polled again after the abort claimed it; dropped once.
    model("runtime_abort_idle_vs_wake", || {
        let q = ManualQueue::new();
        let (polls, drops) = counters();
        let stash: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let h = Arc::new(spawn(&q, TwoPolls { polls: polls.clone(), stash: Some(stash.clone()), _drop: DropCount(drops.clone()) }));
        q.run_one();
        let w = stash.lock().unwrap().take().unwrap();
        let h2 = h.clone();
        let aborter = thread::spawn(move || h2.abort());
        w.wake();
        aborter.join().unwrap();
        q.run_all();
        let h = Arc::try_unwrap(h).ok().unwrap();
        match block_on(h) {
            Ok(v) => assert_eq!(v, 7),
            Err(e) => assert!(e.is_cancelled()),
        }
        assert_eq!(drops.load(Ordering::Acquire), 1);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_join_handle_drop_vs_complete() {
    // Interleaving: the task completes on one thread while main drops its JoinHandle. If the
    // handle goes first, the completing thread drops the output; if the task completes first,
    // the handle's drop does. Exactly one of them drops it; the task is freed once.
    model("runtime_join_handle_drop_vs_complete", || {
        let q = ManualQueue::new();
        let out_drops = Arc::new(AtomicUsize::new(0));
        let od = out_drops.clone();
        let h = spawn(&q, async move { DropCount(od) });
        let q2 = q.clone();
        let runner = thread::spawn(move || q2.run_all());
        drop(h);
        runner.join().unwrap();
        assert_eq!(out_drops.load(Ordering::Acquire), 1);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_join_waker_vs_complete() {
    // Interleaving: main polls the JoinHandle twice with different wakers (registers, then
    // replaces its waker in the join signal: WAITING -> EMPTY, write, WAITING) while the task
    // completes on another thread and sets the signal. No torn slot, no lost completion.
    model("runtime_join_waker_vs_complete", || {
        let q = ManualQueue::new();
        let mut h = spawn(&q, async { 5u32 });
        let q2 = q.clone();
        let runner = thread::spawn(move || q2.run_all());
        let (polls, drops) = counters();
        let other = ManualQueue::new();
        let dummy = spawn(&other, TwoPolls { polls, stash: None, _drop: DropCount(drops) });
        let w1 = waker_of(&dummy);
        let mut cx = Context::from_waker(&w1);
        let first = Pin::new(&mut h).poll(&mut cx);
        let out = match first {
            Poll::Ready(v) => v,
            Poll::Pending => block_on(&mut h),
        };
        assert_eq!(out.unwrap(), 5);
        runner.join().unwrap();
        drop(h);
        drop(w1);
        drop(dummy);
        other.close();
        other.run_all();
        assert_eq!(q.live(), 0);
        assert_eq!(other.live(), 0);
    });
}

#[test]
fn runtime_wake_vs_shutdown() {
    // Interleaving: a waker queues an idle task while another thread closes the queue (pool
    // shutdown): the wake is accepted (then the run cancels it: closed) or refused (the waking
    // thread cancels it). Either way the future is dropped once and the handle sees the output
    // (if it ran before the close) or Cancelled.
    model("runtime_wake_vs_shutdown", || {
        let q = ManualQueue::new();
        let (polls, drops) = counters();
        let stash: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let h = spawn(&q, TwoPolls { polls: polls.clone(), stash: Some(stash.clone()), _drop: DropCount(drops.clone()) });
        q.run_one();
        let w = stash.lock().unwrap().take().unwrap();
        let q2 = q.clone();
        let closer = thread::spawn(move || q2.close());
        w.wake();
        closer.join().unwrap();
        q.run_all();
        let r = block_on(h);
        assert!(r.as_ref().map_or_else(|e| e.is_cancelled(), |v| *v == 7));
        assert_eq!(drops.load(Ordering::Acquire), 1);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_abort_vs_complete() {
    // Interleaving: the task completes on its first poll on the runner thread while main aborts
    // it: before the run (the run cancels), while it runs (CANCELLED on a RUNNING task that
    // then completes: the output is kept) or after completion (no-op). The future is dropped
    // once, the output (if any) once; the handle sees 5 or Cancelled.
    model("runtime_abort_vs_complete", || {
        let q = ManualQueue::new();
        let (fut_drops, out_drops) = counters();
        let (fd, od) = (fut_drops.clone(), out_drops.clone());
        // Dropped with the future: unpolled (cancelled before the run) or when it completes.
        let guard = DropCount(fd);
        let h = spawn(&q, async move {
            let _future = guard;
            (5u32, DropCount(od))
        });
        let q2 = q.clone();
        let runner = thread::spawn(move || q2.run_all());
        h.abort();
        runner.join().unwrap();
        match block_on(h) {
            Ok((v, out)) => {
                assert_eq!(v, 5);
                drop(out);
                assert_eq!(out_drops.load(Ordering::Acquire), 1);
            }
            Err(e) => {
                assert!(e.is_cancelled());
                assert_eq!(out_drops.load(Ordering::Acquire), 0);
            }
        }
        assert_eq!(fut_drops.load(Ordering::Acquire), 1);
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_blocking_join_vs_complete() {
    // Interleaving: main `join`s the handle (registers its parker in the join signal and parks
    // until SET) while the runner completes the task and sets the signal: the registration
    // lands before the set (the setter unparks it) or after (complete, no park). No lost
    // wake-up (a loom deadlock), the output read once, the task freed.
    model("runtime_blocking_join_vs_complete", || {
        let q = ManualQueue::new();
        let h = spawn(&q, async { 9u32 });
        let q2 = q.clone();
        let runner = thread::spawn(move || q2.run_all());
        // Nothing to help with on this thread: the runner takes the task (the wait parks once
        // the queue looks empty).
        while !q.is_empty() {
            thread::yield_now();
        }
        assert_eq!(h.join().unwrap(), 9);
        runner.join().unwrap();
        assert_eq!(q.live(), 0);
    });
}

#[test]
fn runtime_block_on_rounds_vs_wakes() {
    // Interleaving: `ThreadPool::block_on` (outside the pool, so it parks) polls a future that is
    // Pending twice, handing its waker to another thread each time, which wakes it: the wake
    // lands while the poller still polls (NOTIFIED: no wait), or after it announced its wait
    // (PARKED: the wake sets the round's signal, which the poller resets before the next
    // round). Three polls; a lost wake-up (a wake whose round's signal was reset after it set
    // it, or set before the reset) is a loom deadlock; a poll that no wake asked for (a round
    // that ended on a stale set) fails the count.
    model("runtime_block_on_rounds_vs_wakes", || {
        let pool = crate::ThreadPool::with_spawner(crate::Config { max_threads: 1, ..crate::Config::default() }, crate::loom::LoomSpawner::new()).unwrap();
        let stash: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let woken = Arc::new(AtomicUsize::new(0));
        let (s, w2) = (stash.clone(), woken.clone());
        let waker_thread = thread::spawn(move || {
            for _ in 0..2 {
                loop {
                    let w = s.lock().unwrap().take();
                    match w {
                        Some(w) => {
                            w2.fetch_add(1, Ordering::Relaxed);
                            break w.wake();
                        }
                        None => thread::yield_now(),
                    }
                }
            }
        });
        let mut polls = 0;
        let v = pool.block_on(std::future::poll_fn(|cx| {
            polls += 1;
            // Relaxed: the wake's Release and the poller's Acquire order it.
            assert!(woken.load(Ordering::Relaxed) >= polls - 1, "polled again without a wake");
            if polls == 3 {
                return Poll::Ready(7);
            }
            *stash.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }));
        assert_eq!((v, polls), (7, 3));
        waker_thread.join().unwrap();
    });
}
