//! The async runtime (`src/runtime/`): spawn / await / join / abort / block_on / yield_now on a
//! real pool, every test under a watchdog (a lost wake-up fails in seconds instead of hanging)
//! and with exact counts (polls, drops, outputs). Sizes shrink under Miri.
//!
//! The allocation test counts with a process-wide counting allocator, so it holds the binary's
//! exclusive lock (`common::exclusive`) and every other test the shared one.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{scaled_min, watchdog, watchdog_secs};
use pool::runtime::yield_now;
use pool::{Config, Parker, ThreadPool, ThreadSpawner};

// ---------------------------------------------------------------------------------------------
// Counting allocator (only counts while COUNTING is on; the test that turns it on runs alone)

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    // Only threads that opted in count (the test's thread and the pool's workers): the test
    // harness starts other test threads meanwhile, and those allocate.
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    if COUNTING.load(Ordering::Relaxed) && COUNTED.try_with(std::cell::Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------------------------------------
// Helpers

type Pool = ThreadPool<ThreadSpawner>;

fn pool(threads: usize) -> Arc<Pool> {
    Arc::new(ThreadPool::new(Config::default().with_max_threads(threads)).unwrap())
}

/// A one-shot event a future can await (a minimal channel: set a flag, wake the waiter).
#[derive(Default)]
struct Event {
    set: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Event {
    fn fire(&self) {
        self.set.store(true, Ordering::Release);
        let waker = self.waker.lock().unwrap().take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn wait(&self) -> EventWait<'_> {
        EventWait(self)
    }
}

struct EventWait<'a>(&'a Event);

impl Future for EventWait<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.set.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        // Re-check after registering: a fire in between took no waker (or the old one).
        if self.0.set.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// Counts drops (of a future's captured state, or of an output).
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A future that counts its polls and never completes (until dropped).
struct Forever {
    polls: Arc<AtomicUsize>,
    _drop: DropCount,
    stash: Option<Arc<Mutex<Option<Waker>>>>,
}

impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, Ordering::AcqRel);
        if let Some(stash) = &self.stash {
            *stash.lock().unwrap() = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(watchdog_secs(10)), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_micros(100));
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn spawn_await_chains() {
    let _g = common::shared();
    watchdog("spawn_await_chains", watchdog_secs(20), |progress| {
        let pool = pool(2);
        // A chain: each task spawns the next and awaits it.
        fn chain(pool: Arc<Pool>, depth: usize) -> Pin<Box<dyn Future<Output = usize> + Send>> {
            Box::pin(async move {
                if depth == 0 {
                    return 0;
                }
                let p = pool.clone();
                1 + pool.spawn_future(chain(p, depth - 1)).unwrap().await.unwrap()
            })
        }
        progress.stage("recursive chain");
        let depth = scaled_min(2_000, 20);
        assert_eq!(pool.block_on(chain(pool.clone(), depth)), depth);
        progress.stage("sequential round trips from block_on");
        let n = scaled_min(20_000, 50);
        let p = pool.clone();
        let sum = pool.block_on(async move {
            let mut sum = 0u64;
            for i in 0..n as u64 {
                sum += p.spawn_future(async move { i }).unwrap().await.unwrap();
            }
            sum
        });
        assert_eq!(sum, (n as u64) * (n as u64 - 1) / 2);
        progress.stage("blocking join from outside");
        for i in 0..scaled_min(2_000, 20) {
            assert_eq!(pool.spawn_future(async move { i * 3 }).unwrap().join().unwrap(), i * 3);
        }
        let s = pool.stats();
        assert!(s.spawned >= depth + n, "{s:?}");
        assert!(s.polled >= s.spawned, "{s:?}");
    });
}

/// The "done" program: 100k futures that wake each other across threads (each fires
/// its neighbour's event, then awaits its own), all awaited from block_on.
fn hundred_k_wake_each_other<P: Parker + Default + 'static>(pool: Arc<ThreadPool<ThreadSpawner<P>>>) {
    let n = scaled_min(100_000, 64);
    let events: Arc<Vec<Event>> = Arc::new((0..n).map(|_| Event::default()).collect());
    let done = Arc::new(AtomicUsize::new(0));
    let p = pool.clone();
    let (ev, dn) = (events.clone(), done.clone());
    let total = pool.block_on(async move {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (ev, dn) = (ev.clone(), dn.clone());
                p.spawn_future(async move {
                    ev[(i + 1) % n].fire();
                    ev[i].wait().await;
                    dn.fetch_add(1, Ordering::Relaxed);
                    i as u64
                })
                .unwrap()
            })
            .collect();
        let mut total = 0u64;
        for h in handles {
            total += h.await.unwrap();
        }
        total
    });
    assert_eq!(total, (n as u64) * (n as u64 - 1) / 2);
    assert_eq!(done.load(Ordering::Relaxed), n);
}

#[test]
fn hundred_k_tasks_wake_each_other_across_threads() {
    let _g = common::shared();
    watchdog("hundred_k", watchdog_secs(20), |progress| {
        progress.stage("100k on the default parker");
        hundred_k_wake_each_other(pool(2));
    });
}

/// The same on a host-supplied parker (a spin-then-yield parker written here, as a no_std host
/// would write its own): the runtime only needs the `Parker` trait.
#[test]
fn hundred_k_on_a_custom_parker() {
    #[derive(Default)]
    struct YieldParker {
        token: AtomicBool,
    }
    impl Parker for YieldParker {
        fn park(&self) {
            while !self.token.swap(false, Ordering::Acquire) {
                std::thread::yield_now();
            }
        }
        fn park_timeout(&self, _: Duration) {
            self.token.swap(false, Ordering::Acquire);
        }
        fn unpark(&self) {
            self.token.store(true, Ordering::Release);
        }
    }
    let _g = common::shared();
    watchdog("hundred_k_custom_parker", watchdog_secs(20), |_| {
        let pool = Arc::new(ThreadPool::with_spawner(Config::default().with_max_threads(2), ThreadSpawner::<YieldParker>::new()).unwrap());
        hundred_k_wake_each_other(pool);
    });
}

#[test]
fn wake_from_another_thread() {
    let _g = common::shared();
    watchdog("wake_from_another_thread", watchdog_secs(10), |_| {
        let pool = pool(2);
        for _ in 0..scaled_min(200, 5) {
            let ev = Arc::new(Event::default());
            let e = ev.clone();
            let h = pool.spawn_future(async move {
                e.wait().await;
                7
            })
            .unwrap();
            let t = std::thread::spawn(move || ev.fire());
            assert_eq!(h.join().unwrap(), 7);
            t.join().unwrap();
        }
    });
}

#[test]
fn wake_after_completion_is_a_no_op_and_frees() {
    let _g = common::shared();
    watchdog("wake_after_completion", watchdog_secs(10), |_| {
        let pool = pool(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
        let (s, d) = (stash.clone(), drops.clone());
        let h = pool
            .spawn_future(async move {
                let guard = DropCount(d);
                std::future::poll_fn(|cx| {
                    *s.lock().unwrap() = Some(cx.waker().clone());
                    Poll::Ready(())
                })
                .await;
                drop(guard);
                1
            })
            .unwrap();
        assert_eq!(h.join().unwrap(), 1);
        assert_eq!(drops.load(Ordering::Acquire), 1);
        let waker = stash.lock().unwrap().take().unwrap();
        // Many wakes, by reference and by value, from here and another thread: nothing runs.
        for _ in 0..100 {
            waker.wake_by_ref();
            #[allow(clippy::waker_clone_wake)] // a by-value wake (consumes a reference) is the point
            waker.clone().wake();
        }
        let w2 = waker.clone();
        std::thread::spawn(move || w2.wake()).join().unwrap();
        drop(waker); // the last reference: the task is freed here (Miri/ASan would see a leak)
        assert_eq!(pool.stats().polled, 1);
    });
}

/// The future hands a waker to another thread that wakes it at once, racing with the end of
/// the poll (NOTIFIED while RUNNING), over and over; none of the wakes may be lost.
#[test]
fn wake_during_poll() {
    let _g = common::shared();
    watchdog("wake_during_poll", watchdog_secs(15), |progress| {
        let pool = pool(2);
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        let waker_thread = std::thread::spawn(move || {
            for w in rx {
                w.wake();
            }
        });
        let rounds = scaled_min(20_000, 50);
        let polls = Arc::new(AtomicUsize::new(0));
        progress.track_value("polls", &polls);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let tx = tx.clone();
                let polls = polls.clone();
                let mut left = rounds;
                pool.spawn_future(std::future::poll_fn(move |cx| {
                    polls.fetch_add(1, Ordering::Relaxed);
                    if left == 0 {
                        return Poll::Ready(());
                    }
                    left -= 1;
                    tx.send(cx.waker().clone()).unwrap();
                    // Still inside the poll while the other thread wakes us.
                    for _ in 0..(left % 64) {
                        std::hint::spin_loop();
                    }
                    Poll::Pending
                }))
                .unwrap()
            })
            .collect();
        drop(tx);
        for h in handles {
            h.join().unwrap();
        }
        // Each task polled exactly rounds + 1 times: one wake, one poll (no double queueing).
        assert_eq!(polls.load(Ordering::Relaxed), 4 * (rounds + 1));
        drop(pool);
        waker_thread.join().unwrap();
    });
}

/// Parkers that stall an unpark issued from an outside waking thread (after the wake itself,
/// before returning into the pool) and report whether that parker was freed meanwhile: a
/// worker's parker lives in the pool's memory, which must outlive every call into the pool.
mod stall {
    use super::*;
    /// The parker whose unpark is stalled (its address), cleared by its drop.
    static STALLED: AtomicUsize = AtomicUsize::new(0);
    /// Unparks stalled so far (the test fails unless some were: else it checked nothing).
    pub(crate) static STALLED_UNPARKS: AtomicUsize = AtomicUsize::new(0);
    /// Stalled unparks whose parker was freed before they returned.
    pub(crate) static FREED_DURING_UNPARK: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        pub(crate) static STALLS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    #[derive(Default)]
    pub(crate) struct StallParker(pool::DefaultParker);
    impl Parker for StallParker {
        fn park(&self) {
            self.0.park();
        }
        fn park_timeout(&self, timeout: Duration) {
            self.0.park_timeout(timeout);
        }
        fn unpark(&self) {
            if !STALLS.with(std::cell::Cell::get) {
                return self.0.unpark();
            }
            STALLED_UNPARKS.fetch_add(1, Ordering::SeqCst);
            STALLED.store(self as *const Self as usize, Ordering::SeqCst);
            self.0.unpark();
            // `self` may be gone after this sleep (the bug this catches): only statics.
            std::thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 20 }));
            if STALLED.swap(0, Ordering::SeqCst) == 0 {
                FREED_DURING_UNPARK.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    impl Drop for StallParker {
        fn drop(&mut self) {
            let _ = STALLED.compare_exchange(self as *const Self as usize, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

/// A task woken by value from outside the pool, by the last reference to it, after the pool's
/// handle is gone: the wake pushes the task, a worker runs it to its end (its reference to the
/// pool goes) while the waking thread is still in the push's notify, stalled in the unpark of
/// that worker's parker. The pool must not be freed under it (it was: `submit_of` now holds a
/// reference of its own; found by the TSan loop in `wake_during_poll`, where the window is a
/// few instructions; here the stall makes it 20 ms wide).
#[test]
fn pool_outlives_an_outside_wake() {
    let _g = common::shared();
    watchdog("pool_outlives_an_outside_wake", watchdog_secs(20), |_| {
        let rounds = scaled_min(10, 3);
        for _ in 0..rounds {
            let config = Config::default().with_max_threads(1).with_idle_spins(0);
            let pool = ThreadPool::with_spawner(config, ThreadSpawner::<stall::StallParker>::new()).unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<Waker>();
            let mut first = true;
            let handle = pool
                .spawn_future(std::future::poll_fn(move |cx| {
                    if std::mem::take(&mut first) {
                        tx.send(cx.waker().clone()).unwrap();
                        return Poll::Pending;
                    }
                    Poll::Ready(())
                }))
                .unwrap();
            let waker = rx.recv().unwrap();
            let waking = std::thread::spawn(move || {
                // Let the worker park (no spinning), so the wake's notify unparks it.
                std::thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 10 }));
                stall::STALLS.with(|s| s.set(true));
                waker.wake();
            });
            handle.join().unwrap();
            drop(pool);
            waking.join().unwrap();
        }
        assert!(stall::STALLED_UNPARKS.load(Ordering::SeqCst) > 0, "no outside wake unparked a worker");
        assert_eq!(stall::FREED_DURING_UNPARK.load(Ordering::SeqCst), 0, "the pool was freed during an outside wake's unpark");
    });
}

/// Many wakes of one idle task, from several threads at once, queue it once: one poll.
#[test]
fn concurrent_wakes_schedule_once() {
    let _g = common::shared();
    watchdog("concurrent_wakes_schedule_once", watchdog_secs(10), |_| {
        let pool = pool(2);
        for _ in 0..scaled_min(200, 5) {
            let polls = Arc::new(AtomicUsize::new(0));
            let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
            let go = Arc::new(AtomicBool::new(false));
            let (p, s, g) = (polls.clone(), stash.clone(), go.clone());
            let h = pool
                .spawn_future(std::future::poll_fn(move |cx| {
                    let n = p.fetch_add(1, Ordering::AcqRel);
                    if n == 0 {
                        *s.lock().unwrap() = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    // Second poll: complete once the wakers are done (more polls are allowed
                    // only if a wake came after this poll started, which we prevent below).
                    if g.load(Ordering::Acquire) { Poll::Ready(()) } else { cx.waker().wake_by_ref(); Poll::Pending }
                }))
                .unwrap();
            wait_until("first poll", || stash.lock().unwrap().is_some());
            let waker = stash.lock().unwrap().take().unwrap();
            let wakers: Vec<_> = (0..4).map(|_| waker.clone()).collect();
            std::thread::scope(|sc| {
                for w in &wakers {
                    sc.spawn(move || {
                        for _ in 0..50 {
                            w.wake_by_ref();
                        }
                    });
                }
            });
            go.store(true, Ordering::Release);
            drop(wakers);
            drop(waker);
            h.join().unwrap();
            assert!(polls.load(Ordering::Acquire) >= 2);
        }
    });
}

#[test]
fn abort_races() {
    let _g = common::shared();
    watchdog("abort_races", watchdog_secs(15), |_| {
        let pool = pool(2);
        let n = scaled_min(2_000, 20);
        let drops = Arc::new(AtomicUsize::new(0));
        let mut cancelled = 0;
        for i in 0..n {
            let d = DropCount(drops.clone());
            let h = pool
                .spawn_future(async move {
                    let _d = d;
                    // Some finish, some yield a while, some forever.
                    for _ in 0..(i % 3) * 50 + (i % 7 == 0) as usize * usize::MAX / 2 {
                        yield_now().await;
                    }
                    i
                })
                .unwrap();
            let h = Arc::new(h);
            let h2 = h.clone();
            // Abort from another thread, racing with the polls.
            std::thread::scope(|s| {
                s.spawn(move || h2.abort());
            });
            let h = Arc::into_inner(h).unwrap();
            match h.join() {
                Ok(v) => assert_eq!(v, i),
                Err(e) => {
                    assert!(e.is_cancelled(), "{e:?}");
                    cancelled += 1;
                }
            }
        }
        // Every future (finished or cancelled) dropped exactly once, at the latest when joined.
        assert_eq!(drops.load(Ordering::Acquire), n);
        assert!(cancelled > 0);
    });
}

/// Abort of an idle task drops its future right away, on the aborting thread.
#[test]
fn abort_idle_task_drops_future_now() {
    let _g = common::shared();
    watchdog("abort_idle", watchdog_secs(10), |_| {
        let pool = pool(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
        let h = pool
            .spawn_future(Forever { polls: polls.clone(), _drop: DropCount(drops.clone()), stash: Some(stash.clone()) })
            .unwrap();
        wait_until("first poll", || stash.lock().unwrap().is_some());
        // Idle now (its poll returned; the stash is filled inside the poll, so wait for idle).
        wait_until("idle", || !format!("{h:?}").contains("RUNNING"));
        h.abort();
        assert_eq!(drops.load(Ordering::Acquire), 1, "future dropped by abort");
        assert!(h.is_finished());
        assert!(h.join().unwrap_err().is_cancelled());
        // The stashed waker still works (no-op) and frees the task when dropped.
        let w = stash.lock().unwrap().take().unwrap();
        w.wake();
        assert_eq!(polls.load(Ordering::Acquire), 1);
    });
}

/// Never-polled tasks: refused at spawn (shut-down pool), cancelled while queued, detached
/// and cancelled by shutdown. Each future is dropped exactly once and never polled.
#[test]
fn drop_of_never_polled_tasks() {
    let _g = common::shared();
    watchdog("never_polled", watchdog_secs(10), |_| {
        // Refused: the pool is shut down.
        let p = pool(1);
        p.shutdown().unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let e = p.spawn_future(Forever { polls: polls.clone(), _drop: DropCount(drops.clone()), stash: None }).unwrap_err();
        assert_eq!(e, pool::Error::Shutdown);
        assert_eq!(drops.load(Ordering::Acquire), 1);

        // Cancelled while queued: the only worker is busy, the task waits in the injector.
        let p = pool(1);
        let release = Arc::new(AtomicBool::new(false));
        let r = release.clone();
        p.spawn(move || {
            while !r.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        })
        .unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let h = p.spawn_future(Forever { polls: polls.clone(), _drop: DropCount(drops.clone()), stash: None }).unwrap();
        h.abort();
        assert_eq!(drops.load(Ordering::Acquire), 0, "a queued task is cancelled by its runner");
        // Detached and queued: shutdown cancels it instead of polling it.
        let h2 = p.spawn_future(Forever { polls: polls.clone(), _drop: DropCount(drops.clone()), stash: None }).unwrap();
        drop(h2);
        release.store(true, Ordering::Release);
        assert!(h.join().unwrap_err().is_cancelled());
        // The detached one is polled once (nobody keeps its waker: freed right after), or is
        // cancelled by the shutdown below; either way dropped exactly once.
        drop(p);
        assert_eq!(drops.load(Ordering::Acquire), 2);
        assert!(polls.load(Ordering::Acquire) <= 1, "the aborted one was never polled");
    });
}

/// Fairness: a task that keeps waking itself (yield loop) does not starve a task queued
/// behind it on the same single worker.
#[test]
fn self_waking_task_does_not_starve_others() {
    let _g = common::shared();
    watchdog("fairness", watchdog_secs(10), |_| {
        let pool = pool(1);
        let p = pool.clone();
        let (spins_before, total) = pool
            .spawn_future(async move {
                let flag = Arc::new(AtomicBool::new(false));
                let spins = Arc::new(AtomicUsize::new(0));
                let (f, s) = (flag.clone(), spins.clone());
                // Both spawned from the worker: B first, then the yielder A (A takes the LIFO
                // slot, B moves to the ring behind it).
                let b = p.spawn_future(async move {
                    f.store(true, Ordering::Release);
                })
                .unwrap();
                let (f, s2) = (flag.clone(), s.clone());
                let a = p.spawn_future(async move {
                    while !f.load(Ordering::Acquire) {
                        s2.fetch_add(1, Ordering::Relaxed);
                        yield_now().await;
                    }
                })
                .unwrap();
                b.await.unwrap();
                let before = spins.load(Ordering::Relaxed);
                a.await.unwrap();
                (before, spins.load(Ordering::Relaxed))
            })
            .unwrap()
            .join()
            .unwrap();
        // The yielder goes to the back of the queue after each poll: B runs after at most a
        // few of A's polls (LIFO cap 3), not after A gives up.
        assert!(spins_before <= 4, "the self-waking task ran {spins_before} times before the queued one");
        assert!(total >= spins_before);

        // From outside: both go through the injector; the yielder's re-queues go to the ring,
        // the injector is checked every 61 searches, so the other runs within a bounded wait.
        let flag = Arc::new(AtomicBool::new(false));
        let spins = Arc::new(AtomicUsize::new(0));
        let (f, s) = (flag.clone(), spins.clone());
        let a = pool
            .spawn_future(async move {
                while !f.load(Ordering::Acquire) {
                    s.fetch_add(1, Ordering::Relaxed);
                    yield_now().await;
                }
            })
            .unwrap();
        wait_until("the yielder runs", || spins.load(Ordering::Relaxed) > 0);
        let f = flag.clone();
        let b = pool.spawn_future(async move { f.store(true, Ordering::Release) }).unwrap();
        b.join().unwrap();
        a.join().unwrap();
    });
}

/// `join` inside a task on a one-worker pool must help (run the joined task itself), not block.
#[test]
fn join_on_a_worker_helps() {
    let _g = common::shared();
    watchdog("join_helps", watchdog_secs(10), |_| {
        let pool = pool(1);
        let p = pool.clone();
        let v = pool
            .spawn_future(async move {
                let mut sum = 0;
                for i in 0..100 {
                    sum += p.spawn_future(async move { i }).unwrap().join().unwrap();
                }
                sum
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(v, 4950);
    });
}

/// `block_on` inside a task on a one-worker pool waits through the pool's waiting loop: it runs
/// the task its future waits for, rather than blocking the only worker.
#[test]
fn block_on_on_a_worker_helps() {
    let _g = common::shared();
    watchdog("block_on_helps", watchdog_secs(10), |_| {
        let pool = pool(1);
        let p = pool.clone();
        let v = pool
            .spawn_future(async move {
                let q = p.clone();
                p.block_on(async move {
                    let mut sum = 0;
                    for i in 0..100 {
                        sum += q.spawn_future(async move { i }).unwrap().await.unwrap();
                    }
                    sum
                })
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(v, 4950);
    });
}

#[test]
fn detached_outputs_dropped_exactly_once() {
    let _g = common::shared();
    watchdog("detached", watchdog_secs(10), |_| {
        let pool = pool(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let n = scaled_min(20_000, 50);
        for i in 0..n {
            // Dropped with the future if shutdown cancels the task, else with the output.
            let d = DropCount(drops.clone());
            let h = pool
                .spawn_future(async move {
                    if i % 2 == 0 {
                        yield_now().await;
                    }
                    d
                })
                .unwrap();
            if i % 3 == 0 {
                drop(h.join().unwrap());
            } else {
                drop(h); // races with completion: the output is dropped by one side only
            }
        }
        drop(pool); // drains
        assert_eq!(drops.load(Ordering::Acquire), n);
    });
}

#[test]
fn panic_in_task_is_reported() {
    let _g = common::shared();
    watchdog("panic", watchdog_secs(10), |_| {
        let pool = pool(2);
        let h = pool.spawn_future(async { panic!("boom (expected in this test)") }).unwrap();
        let e: pool::JoinError = h.join().unwrap_err();
        assert!(e.is_panic());
        let payload = e.try_into_panic().unwrap();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom (expected in this test)"));
        assert_eq!(pool.spawn_future(async { 3 }).unwrap().join().unwrap(), 3);
    });
}

/// A waker kept past the pool's drop: calling it is safe; the task is cancelled on the waking
/// thread and its JoinHandle says so. The pool's memory is freed by the last task reference.
#[test]
fn wake_after_pool_dropped() {
    let _g = common::shared();
    watchdog("wake_after_pool_dropped", watchdog_secs(10), |_| {
        let pool = pool(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
        let h = pool
            .spawn_future(Forever { polls: polls.clone(), _drop: DropCount(drops.clone()), stash: Some(stash.clone()) })
            .unwrap();
        wait_until("first poll", || stash.lock().unwrap().is_some());
        wait_until("idle", || !format!("{h:?}").contains("RUNNING"));
        drop(Arc::into_inner(pool).unwrap()); // shutdown + join; the task stays (idle)
        assert_eq!(drops.load(Ordering::Acquire), 0);
        let w = stash.lock().unwrap().take().unwrap();
        w.wake(); // refused by the closed pool: cancelled here
        assert_eq!(drops.load(Ordering::Acquire), 1);
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(polls.load(Ordering::Acquire), 1);
    });
}

#[test]
fn block_on_with_yield_and_external_wakes() {
    let _g = common::shared();
    watchdog("block_on", watchdog_secs(10), |_| {
        let pool = pool(2);
        let v = pool.block_on(async {
            for _ in 0..1000 {
                yield_now().await;
            }
            let ev = Arc::new(Event::default());
            let e = ev.clone();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20)); // past the spin: block_on parks
                e.fire();
            });
            ev.wait().await;
            t.join().unwrap();
            11
        });
        assert_eq!(v, 11);
    });
}

/// One allocation per spawn (the task), none per poll or wake.
#[test]
#[cfg_attr(miri, ignore)]
fn one_allocation_per_spawn_none_per_wake() {
    let _g = common::exclusive();
    watchdog("allocs", watchdog_secs(15), |_| {
        let pool = pool(2);
        // Warm up: threads started, thread-locals touched.
        for _ in 0..100 {
            pool.spawn_future(async { yield_now().await }).unwrap().join().unwrap();
        }
        // Opt in: this thread, and both workers (each runs one of these; the barrier keeps
        // either from taking both).
        COUNTED.with(|c| c.set(true));
        let barrier = Arc::new(std::sync::Barrier::new(3));
        for _ in 0..2 {
            let b = barrier.clone();
            pool.spawn(move || {
                COUNTED.with(|c| c.set(true));
                b.wait();
            })
            .unwrap();
        }
        barrier.wait();
        let n = 1_000;
        let yields = 20;
        let handles_cap: Vec<Option<pool::JoinHandle<usize>>> = (0..n).map(|_| None).collect();
        let mut handles = handles_cap;
        ALLOCS.store(0, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        for (i, slot) in handles.iter_mut().enumerate() {
            *slot = Some(
                pool.spawn_future(async move {
                    for _ in 0..yields {
                        yield_now().await;
                    }
                    i
                })
                .unwrap(),
            );
        }
        let mut sum = 0;
        for h in handles.iter_mut() {
            sum += h.take().unwrap().join().unwrap();
        }
        COUNTING.store(false, Ordering::SeqCst);
        let allocs = ALLOCS.load(Ordering::SeqCst);
        assert_eq!(sum, n * (n - 1) / 2);
        let polls = pool.stats().polled;
        assert!(polls >= n * (yields + 1));
        assert_eq!(allocs, n, "{allocs} allocations for {n} spawns with {yields} wakes each");
    });
}

/// Self-wakes recorded per poll (`runtime/current.rs`): a task that yields inside a task it
/// helps run (a blocking `join` on a one-worker pool nests the inner task's poll in the outer
/// one's), then yields itself; neither wake may be lost or credited to the other task.
#[test]
fn self_wakes_in_nested_polls() {
    let _g = common::shared();
    watchdog("nested_self_wakes", watchdog_secs(10), |_| {
        let pool = pool(1);
        let p = pool.clone();
        let rounds = scaled_min(200, 5);
        let total = pool
            .spawn_future(async move {
                let mut total = 0;
                for i in 0..rounds {
                    yield_now().await;
                    // The inner task runs nested in this poll (help-until-complete), yielding
                    // three times; then the outer one yields again.
                    total += p
                        .spawn_future(async move {
                            for _ in 0..3 {
                                yield_now().await;
                            }
                            i
                        })
                        .unwrap()
                        .join()
                        .unwrap();
                    yield_now().await;
                }
                total
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(total, rounds * (rounds - 1) / 2);
    });
}

/// Tasks that yield forever sit in the queues still `RUNNING` (the self-wake re-queue) when the
/// pool shuts down: each is cancelled exactly once, its future dropped once, and its
/// `JoinHandle` says so.
#[test]
fn shutdown_cancels_tasks_requeued_by_their_own_yield() {
    let _g = common::shared();
    watchdog("shutdown_with_yielders", watchdog_secs(10), |_| {
        let pool = pool(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let n = scaled_min(64, 4);
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (d, p) = (DropCount(drops.clone()), polls.clone());
                pool.spawn_future(async move {
                    let _d = d;
                    loop {
                        p.fetch_add(1, Ordering::Relaxed);
                        yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        wait_until("every task yielded", || polls.load(Ordering::Relaxed) > 4 * n);
        drop(Arc::into_inner(pool).unwrap());
        assert_eq!(drops.load(Ordering::Acquire), n, "every future dropped once");
        for h in handles {
            assert!(h.join().unwrap_err().is_cancelled());
        }
    });
}

/// A task that mostly wakes itself (re-queued without leaving `RUNNING`) while another thread
/// wakes it too and publishes a value before each wake: no wake is lost (the task sees every
/// value), and the task finishes.
#[test]
fn external_wakes_racing_self_wakes() {
    let _g = common::shared();
    watchdog("external_wakes_racing_self_wakes", watchdog_secs(15), |progress| {
        let pool = pool(2);
        let rounds = scaled_min(20_000, 50);
        let published = Arc::new(AtomicUsize::new(0));
        progress.track_value("published", &published);
        let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
        let (p, s) = (published.clone(), stash.clone());
        let mut seen = 0;
        let mut spins = 0usize;
        let h = pool
            .spawn_future(std::future::poll_fn(move |cx| {
                let now = p.load(Ordering::Acquire);
                assert!(now >= seen);
                seen = now;
                if seen == rounds {
                    return Poll::Ready(seen);
                }
                *s.lock().unwrap() = Some(cx.waker().clone());
                spins += 1;
                if spins % 4 != 0 {
                    // Mostly a yield; every fourth poll waits for the other thread's wake.
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            }))
            .unwrap();
        for i in 1..=rounds {
            let w = loop {
                if let Some(w) = stash.lock().unwrap().take() {
                    break w;
                }
                std::thread::yield_now();
            };
            published.store(i, Ordering::Release);
            w.wake();
        }
        assert_eq!(h.join().unwrap(), rounds);
    });
}
