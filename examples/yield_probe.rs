//! BENCH.md's `yield` workload as a standalone program, for `valgrind --tool=callgrind`:
//! from `block_on` on the main thread, spawn TASKS async tasks that each yield YIELDS times,
//! and await them all. Usage: yield_probe [TASKS] [YIELDS] [threads] (default 10000 100 2).
//! Instructions per yield = (Ir(YIELDS) - Ir(0)) / (TASKS * YIELDS), the spawn and join
//! costs cancelling out.

use std::sync::Arc;

use pool::runtime::yield_now;
use pool::{Config, ThreadPool};

fn main() {
    let mut args = std::env::args().skip(1);
    let tasks: usize = args.next().map_or(10_000, |s| s.parse().expect("TASKS"));
    let yields: usize = args.next().map_or(100, |s| s.parse().expect("YIELDS"));
    let threads: usize = args.next().map_or(2, |s| s.parse().expect("threads"));
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(threads)).unwrap());
    let p = pool.clone();
    let start = std::time::Instant::now();
    pool.block_on(async move {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                p.spawn_future(async move {
                    for _ in 0..yields {
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
    let elapsed = start.elapsed();
    let s = pool.stats();
    println!(
        "{tasks} tasks x {yields} yields on {threads} threads: {:.1} ns/yield; polled {}, stolen {}, parks {}",
        elapsed.as_nanos() as f64 / (tasks * yields.max(1)) as f64,
        s.polled,
        s.stolen,
        s.parks
    );
}
