//! Completion paths as a standalone program, for `valgrind --tool=callgrind`: ROUNDS times in a
//! row, spawn a task and wait for it, by one of three ways.
//! * `await`: inside an async task on the pool's one worker, `spawn_future(..).await` (the
//!   child runs on the same worker; the parent is woken through the join signal's waker).
//! * `join`: inside a task on the pool's one worker, `spawn_future(..).join()` (the worker
//!   helps: it runs the child from its LIFO slot while it waits on the join signal).
//! * `blocking`: from the main thread, `BlockingPool::spawn_blocking(..).join()` (parks on
//!   the job's signal until a blocking thread ran the closure).
//!
//! Usage: join_probe MODE ROUNDS. Instructions per round = (Ir(R2) - Ir(R1)) / (R2 - R1).
//! `await` and `join` run on one worker while the main thread is parked, so their counts
//! repeat exactly; `blocking` crosses threads, so its count varies with who spins.

use std::sync::Arc;

use pool::{BlockingPool, Config, ThreadPool};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "await".into());
    let rounds: u64 = args.next().map_or(10_000, |s| s.parse().expect("ROUNDS"));
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(1)).unwrap());
    let sum = match mode.as_str() {
        "await" => {
            let p = pool.clone();
            let h = pool
                .spawn_future(async move {
                    let mut sum = 0;
                    for i in 0..rounds {
                        sum += p.spawn_future(async move { i }).unwrap().await.unwrap();
                    }
                    sum
                })
                .unwrap();
            h.join().unwrap()
        }
        "join" => {
            let p = pool.clone();
            let h = pool
                .spawn_future(async move {
                    let mut sum = 0;
                    for i in 0..rounds {
                        sum += p.spawn_future(async move { i }).unwrap().join().unwrap();
                    }
                    sum
                })
                .unwrap();
            h.join().unwrap()
        }
        "blocking" => {
            let bp = BlockingPool::new(Default::default()).unwrap();
            (0..rounds).map(|i| bp.spawn_blocking(move || i).unwrap().join().unwrap()).sum()
        }
        other => panic!("unknown mode {other}: await, join or blocking"),
    };
    assert_eq!(sum, rounds * rounds.saturating_sub(1) / 2);
    println!("{mode}: {rounds} rounds, sum {sum}");
}
