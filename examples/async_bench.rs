//! The async workloads of BENCH.md on this pool (2 workers unless `POOL_BENCH_THREADS`):
//! * yield: 10,000 tasks each yield 100 times; ns per yield.
//! * spawn_await: from `block_on` on the main thread, spawn one task and await its JoinHandle,
//!   100,000 times in a row; ns per round trip.
//!
//! Median and min-max of 5 runs after a warm-up. The side by side with tokio lives outside the
//! library (tokio is not a dependency): the same two loops on tokio's multi-thread runtime.
//!
//! Run: `cargo run --release --example async_bench`

use std::sync::Arc;
use std::time::Instant;

use pool::runtime::yield_now;
use pool::{Config, ThreadPool, ThreadSpawner};

const TASKS: usize = 10_000;
const YIELDS: usize = 100;
const ROUND_TRIPS: usize = 100_000;
const RUNS: usize = 5;

fn yield_bench(pool: &Arc<ThreadPool<ThreadSpawner>>) -> f64 {
    let p = pool.clone();
    let start = Instant::now();
    pool.block_on(async move {
        let handles: Vec<_> = (0..TASKS)
            .map(|_| {
                p.spawn_future(async {
                    for _ in 0..YIELDS {
                        yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    start.elapsed().as_nanos() as f64 / (TASKS * YIELDS) as f64
}

fn spawn_await_bench(pool: &Arc<ThreadPool<ThreadSpawner>>) -> f64 {
    let p = pool.clone();
    let start = Instant::now();
    pool.block_on(async move {
        for i in 0..ROUND_TRIPS {
            let v = p.spawn_future(async move { i }).unwrap().await.unwrap();
            std::hint::black_box(v);
        }
    });
    start.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64
}

fn report(name: &str, unit: &str, mut xs: Vec<f64>) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("pool  {name:<12} median {:>8.1} {unit}  (min {:.1}, max {:.1})", xs[xs.len() / 2], xs[0], xs[xs.len() - 1]);
}

fn main() {
    let threads = std::env::var("POOL_BENCH_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(threads)).unwrap());
    // Warm-up: threads started, allocator warm.
    yield_bench(&pool);
    spawn_await_bench(&pool);
    let y: Vec<f64> = (0..RUNS).map(|_| yield_bench(&pool)).collect();
    let s: Vec<f64> = (0..RUNS).map(|_| spawn_await_bench(&pool)).collect();
    report("yield", "ns/yield", y);
    report("spawn_await", "ns/round trip", s);
    println!("pool  {threads} workers; pool stats: {:?}", pool.stats());
}
