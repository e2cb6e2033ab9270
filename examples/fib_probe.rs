//! BENCH.md's `fib` join pattern as a standalone program, for `valgrind --tool=callgrind`:
//! fib(N) through `WorkerContext::join` at every level (no cutoff), on THREADS workers.
//! Usage: fib_probe N [THREADS] (default 1 worker). Instructions per join =
//! (Ir(fib 20) - Ir(fib 15)) / (J(20) - J(15)) with J(n) = fib(n + 1) - 1 joins, i.e.
//! / 9,959; one worker keeps the count repeatable (no steals).

use pool::{Config, ThreadPool, ThreadSpawner, WorkerContext};

fn fib(cx: &WorkerContext<ThreadSpawner>, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = cx.join(|cx| fib(cx, n - 1), |cx| fib(cx, n - 2));
    a + b
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(20, |s| s.parse().expect("N"));
    let threads: usize = args.next().map_or(1, |s| s.parse().expect("THREADS"));
    let pool = ThreadPool::new(Config { max_threads: threads, ..Config::default() }).unwrap();
    let r = pool.install(|cx| fib(cx, n)).unwrap();
    println!("fib({n}) = {r}");
}
