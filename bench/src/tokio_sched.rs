//! tokio's own scheduler workloads (`benches/rt_multi_threaded.rs` in the tokio repository),
//! with tokio's sizes, on our async runtime and on tokio's multi-thread runtime side by side,
//! with the same worker count (`--threads`, 2 by default; tokio's file uses 4):
//!
//! | workload | tokio's size | what one iteration does |
//! |---|---|---|
//! | `spawn_many_local` | 10,000 | inside `block_on`, spawn 10,000 tasks that count down a shared counter; the last one signals through a std channel |
//! | `spawn_many_remote_idle` | 10,000 | from the main thread spawn 10,000 empty tasks, then `block_on` awaits every handle |
//! | `yield_many` | 200 x 1,000 | 200 tasks each yield 1,000 times, then signal through a std channel |
//! | `ping_pong` | 1,000 | inside `block_on`, one task spawns 1,000 tasks; each spawns a partner and the two trade messages over two oneshot channels |
//! | `chained_spawn` | 1,000 | inside `block_on`, one task spawns the next, 1,000 deep; the last signals |
//!
//! Also BENCH.md's two async workloads, which the harness did not have yet: `yield` (10,000
//! tasks each yield 100 times; ns per yield) and `spawn_await` (from `block_on`, spawn one task
//! and await it, 100,000 times; ns per round trip).
//!
//! Written here from the description of those benches (our code, not tokio's). Differences,
//! the same for both columns: one oneshot channel of our own (a mutex, a value and a waker)
//! instead of `tokio::sync::oneshot`, so `ping_pong` compares schedulers and not channels; the
//! runtime without `enable_all` (no timers or I/O are used). Each measured run repeats the
//! iteration a fixed number of times ([`ITERS`]) and reports microseconds per iteration.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::common::{Contender, Sample};
use crate::ours::{OurPool, PoolBox};
use crate::Workload;

/// tokio's sizes.
const NUM_SPAWN: usize = 10_000;
const YIELD_TASKS: usize = 200;
const NUM_YIELD: usize = 1_000;
const NUM_PINGS: usize = 1_000;
const CHAIN: usize = 1_000;
/// BENCH.md's sizes.
const TASKS: usize = 10_000;
const YIELDS: usize = 100;
const ROUND_TRIPS: usize = 100_000;

/// Iterations per measured run, per workload (a run takes some tens of ms on 2 cores).
const ITERS: [(&str, usize); 5] =
    [("spawn_many_local", 10), ("spawn_many_remote_idle", 10), ("yield_many", 2), ("ping_pong", 20), ("chained_spawn", 50)];

fn iters(name: &str) -> usize {
    ITERS.iter().find(|(n, _)| *n == name).map_or(1, |(_, k)| *k)
}

/// The workloads, for `main.rs`'s table.
pub fn workloads() -> Vec<Workload> {
    let w = |name: &'static str, what: &'static str, contenders: fn() -> Vec<Contender>| Workload {
        name,
        unit: "µs/iter",
        what,
        warmup: true,
        extra: None,
        baseline: None,
        interleave: true,
        contenders,
    };
    vec![
        w("spawn_many_local", "tokio's bench: block_on spawns 10,000 tasks, the last signals", || {
            contenders("spawn_many_local", |p| {
                let p = p.get();
                Box::new(move || spawn_many_local_ours(p))
            }, |rt| Box::new(move || spawn_many_local_tokio(rt)))
        }),
        w("spawn_many_remote_idle", "tokio's bench: main spawns 10,000 empty tasks, block_on awaits all", || {
            contenders("spawn_many_remote_idle", |p| {
                let p = p.get();
                Box::new(move || spawn_many_remote_idle_ours(p))
            }, |rt| Box::new(move || spawn_many_remote_idle_tokio(rt)))
        }),
        w("yield_many", "tokio's bench: 200 tasks x 1,000 yields", || {
            contenders("yield_many", |p| {
                let p = p.get();
                Box::new(move || yield_many_ours(p))
            }, |rt| Box::new(move || yield_many_tokio(rt)))
        }),
        w("ping_pong", "tokio's bench: 1,000 task pairs trade two oneshot messages", || {
            contenders("ping_pong", |p| {
                let p = p.get();
                Box::new(move || ping_pong_ours(p))
            }, |rt| Box::new(move || ping_pong_tokio(rt)))
        }),
        w("chained_spawn", "tokio's bench: each task spawns the next, 1,000 deep", || {
            contenders("chained_spawn", |p| {
                let p = p.get();
                Box::new(move || chained_spawn_ours(p))
            }, |rt| Box::new(move || chained_spawn_tokio(rt)))
        }),
        Workload {
            unit: "ns/yield",
            ..w("yield", "BENCH.md: 10,000 async tasks each yield 100 times", || {
                contenders("yield", |p| {
                    let p = p.get();
                    Box::new(move || yield_ours(p))
                }, |rt| Box::new(move || yield_tokio(rt)))
            })
        },
        Workload {
            unit: "ns/round trip",
            ..w("spawn_await", "BENCH.md: block_on spawns one task and awaits it, 100,000 times", || {
                contenders("spawn_await", |p| {
                    let p = p.get();
                    Box::new(move || spawn_await_ours(p))
                }, |rt| Box::new(move || spawn_await_tokio(rt)))
            })
        },
    ]
}

/// Our pool and tokio for one workload: each builds its runtime outside the timed region and
/// times `iters(name)` iterations per run.
fn contenders(
    name: &'static str,
    ours: fn(&PoolBox) -> Box<dyn FnMut()>,
    tokio: fn(&'static tokio::runtime::Runtime) -> Box<dyn FnMut()>,
) -> Vec<Contender> {
    let k = iters(name);
    // Per-item workloads: one iteration per run, reported per item.
    let per_iter = move |k: usize, once: &mut dyn FnMut()| match per_item(name) {
        Some(items) => Sample { value: per_iter(k, once).value * 1e3 / items as f64, extra: None },
        None => per_iter(k, once),
    };
    vec![
        Contender::new(crate::ours::INTRUSIVE, "pool::ThreadPool::spawn_future / block_on", move |threads| {
            let pool = PoolBox::new(threads);
            let mut once = ours(&pool);
            Box::new(move || {
                let _keep = &pool; // dropped (shut down) with the runner
                per_iter(k, &mut once)
            })
        }),
        Contender::new("tokio", "tokio multi-thread runtime, same worker count", move |threads| {
            let rt = TokioRt::new(threads);
            let mut once = tokio(rt.get());
            Box::new(move || {
                let _keep = &rt;
                per_iter(k, &mut once)
            })
        }),
    ]
}

fn per_iter(k: usize, once: &mut dyn FnMut()) -> Sample {
    let start = Instant::now();
    for _ in 0..k {
        once();
    }
    Sample { value: start.elapsed().as_secs_f64() * 1e6 / k as f64, extra: None }
}

/// Per-item units (`yield`, `spawn_await`): one iteration, in ns per item.
fn per_item(name: &str) -> Option<usize> {
    match name {
        "yield" => Some(TASKS * YIELDS),
        "spawn_await" => Some(ROUND_TRIPS),
        _ => None,
    }
}

/// A tokio runtime reachable as `&'static` (as `PoolBox` for ours); shut down on drop.
struct TokioRt(&'static tokio::runtime::Runtime);

impl TokioRt {
    fn new(threads: usize) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).build().expect("tokio runtime");
        TokioRt(Box::leak(Box::new(rt)))
    }
    fn get(&self) -> &'static tokio::runtime::Runtime {
        self.0
    }
}

impl Drop for TokioRt {
    fn drop(&mut self) {
        // SAFETY: came from Box::leak in `new`; every run completed, so no task refers to it,
        // and the runner that used the reference is being dropped with us.
        let rt = unsafe { Box::from_raw(self.0 as *const tokio::runtime::Runtime as *mut tokio::runtime::Runtime) };
        rt.shutdown_timeout(std::time::Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------------
// A oneshot channel, the same for both columns.

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

struct Sender<T>(Arc<Mutex<Slot<T>>>);
struct Receiver<T>(Arc<Mutex<Slot<T>>>);

fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot { value: None, waker: None }));
    (Sender(slot.clone()), Receiver(slot))
}

impl<T> Sender<T> {
    fn send(self, value: T) {
        let waker = {
            let mut slot = self.0.lock().unwrap();
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.0.lock().unwrap();
        match slot.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// spawn_many_local

fn spawn_many_local_ours(pool: &'static OurPool) {
    let (tx, rx) = mpsc::sync_channel(1);
    let rem = Arc::new(AtomicUsize::new(NUM_SPAWN));
    pool.block_on(async {
        for _ in 0..NUM_SPAWN {
            let (tx, rem) = (tx.clone(), rem.clone());
            drop(pool.spawn_future(async move {
                if rem.fetch_sub(1, Relaxed) == 1 {
                    tx.send(()).unwrap();
                }
            }));
        }
        rx.recv().unwrap();
    });
}

fn spawn_many_local_tokio(rt: &'static tokio::runtime::Runtime) {
    let (tx, rx) = mpsc::sync_channel(1);
    let rem = Arc::new(AtomicUsize::new(NUM_SPAWN));
    rt.block_on(async {
        for _ in 0..NUM_SPAWN {
            let (tx, rem) = (tx.clone(), rem.clone());
            tokio::spawn(async move {
                if rem.fetch_sub(1, Relaxed) == 1 {
                    tx.send(()).unwrap();
                }
            });
        }
        rx.recv().unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// spawn_many_remote_idle

fn spawn_many_remote_idle_ours(pool: &'static OurPool) {
    let handles: Vec<_> = (0..NUM_SPAWN).map(|_| pool.spawn_future(async {}).unwrap()).collect();
    pool.block_on(async {
        for h in handles {
            h.await.unwrap();
        }
    });
}

fn spawn_many_remote_idle_tokio(rt: &'static tokio::runtime::Runtime) {
    let handles: Vec<_> = (0..NUM_SPAWN).map(|_| rt.spawn(async {})).collect();
    rt.block_on(async {
        for h in handles {
            h.await.unwrap();
        }
    });
}

// ---------------------------------------------------------------------------------------------
// yield_many

fn yield_many_ours(pool: &'static OurPool) {
    let (tx, rx) = mpsc::sync_channel(YIELD_TASKS);
    for _ in 0..YIELD_TASKS {
        let tx = tx.clone();
        drop(pool.spawn_future(async move {
            for _ in 0..NUM_YIELD {
                pool::runtime::yield_now().await;
            }
            tx.send(()).unwrap();
        }));
    }
    for _ in 0..YIELD_TASKS {
        rx.recv().unwrap();
    }
}

fn yield_many_tokio(rt: &'static tokio::runtime::Runtime) {
    let (tx, rx) = mpsc::sync_channel(YIELD_TASKS);
    for _ in 0..YIELD_TASKS {
        let tx = tx.clone();
        rt.spawn(async move {
            for _ in 0..NUM_YIELD {
                tokio::task::yield_now().await;
            }
            tx.send(()).unwrap();
        });
    }
    for _ in 0..YIELD_TASKS {
        rx.recv().unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// ping_pong

fn ping_pong_ours(pool: &'static OurPool) {
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let rem = Arc::new(AtomicUsize::new(NUM_PINGS));
    pool.block_on(async {
        drop(pool.spawn_future(async move {
            for _ in 0..NUM_PINGS {
                let (rem, done_tx) = (rem.clone(), done_tx.clone());
                drop(pool.spawn_future(async move {
                    let (tx1, rx1) = oneshot::<()>();
                    let (tx2, rx2) = oneshot::<()>();
                    drop(pool.spawn_future(async move {
                        rx1.await;
                        tx2.send(());
                    }));
                    tx1.send(());
                    rx2.await;
                    if rem.fetch_sub(1, Relaxed) == 1 {
                        done_tx.send(()).unwrap();
                    }
                }));
            }
        }));
        done_rx.recv().unwrap();
    });
}

fn ping_pong_tokio(rt: &'static tokio::runtime::Runtime) {
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let rem = Arc::new(AtomicUsize::new(NUM_PINGS));
    rt.block_on(async {
        tokio::spawn(async move {
            for _ in 0..NUM_PINGS {
                let (rem, done_tx) = (rem.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let (tx1, rx1) = oneshot::<()>();
                    let (tx2, rx2) = oneshot::<()>();
                    tokio::spawn(async move {
                        rx1.await;
                        tx2.send(());
                    });
                    tx1.send(());
                    rx2.await;
                    if rem.fetch_sub(1, Relaxed) == 1 {
                        done_tx.send(()).unwrap();
                    }
                });
            }
        });
        done_rx.recv().unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// chained_spawn

fn chain_ours(pool: &'static OurPool, done_tx: mpsc::SyncSender<()>, n: usize) {
    if n == 0 {
        done_tx.send(()).unwrap();
    } else {
        drop(pool.spawn_future(async move { chain_ours(pool, done_tx, n - 1) }));
    }
}

fn chained_spawn_ours(pool: &'static OurPool) {
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    pool.block_on(async {
        drop(pool.spawn_future(async move { chain_ours(pool, done_tx, CHAIN) }));
        done_rx.recv().unwrap();
    });
}

fn chain_tokio(done_tx: mpsc::SyncSender<()>, n: usize) {
    if n == 0 {
        done_tx.send(()).unwrap();
    } else {
        tokio::spawn(async move { chain_tokio(done_tx, n - 1) });
    }
}

fn chained_spawn_tokio(rt: &'static tokio::runtime::Runtime) {
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    rt.block_on(async {
        tokio::spawn(async move { chain_tokio(done_tx, CHAIN) });
        done_rx.recv().unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// BENCH.md: yield, spawn_await

fn yield_ours(pool: &'static OurPool) {
    pool.block_on(async {
        let handles: Vec<_> = (0..TASKS)
            .map(|_| {
                pool.spawn_future(async {
                    for _ in 0..YIELDS {
                        pool::runtime::yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
}

fn yield_tokio(rt: &'static tokio::runtime::Runtime) {
    rt.block_on(async {
        let handles: Vec<_> = (0..TASKS)
            .map(|_| {
                tokio::spawn(async {
                    for _ in 0..YIELDS {
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
}

fn spawn_await_ours(pool: &'static OurPool) {
    pool.block_on(async {
        for i in 0..ROUND_TRIPS {
            let v = pool.spawn_future(async move { i }).unwrap().await.unwrap();
            std::hint::black_box(v);
        }
    });
}

fn spawn_await_tokio(rt: &'static tokio::runtime::Runtime) {
    rt.block_on(async {
        for i in 0..ROUND_TRIPS {
            let v = tokio::spawn(async move { i }).await.unwrap();
            std::hint::black_box(v);
        }
    });
}
