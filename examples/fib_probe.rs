//! BENCH.md's `fib` join pattern as a standalone program, for `valgrind --tool=callgrind`:
//! fib(N) through `WorkerContext::join` at every level (no cutoff), on THREADS workers.
//! Usage: fib_probe N [THREADS] [ref|move] (default 1 worker, `ref`). Instructions per join =
//! (Ir(fib 20) - Ir(fib 15)) / (J(20) - J(15)) with J(n) = fib(n + 1) - 1 joins, i.e.
//! / 9,959; one worker keeps the count repeatable (no steals).
//!
//! `ref` writes the closures as BENCH.md's fib does (`|cx| fib(cx, n - 1)`: they borrow `n`,
//! so `n` lives in the caller's stack frame); `move` copies `n` into them, which lets the
//! compiler keep it in a register.

use pool::{Config, ThreadPool, ThreadSpawner, WorkerContext};

fn fib(cx: &WorkerContext<ThreadSpawner>, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = cx.join(|cx| fib(cx, n - 1), |cx| fib(cx, n - 2));
    a + b
}

fn fib_move(cx: &WorkerContext<ThreadSpawner>, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = cx.join(move |cx| fib_move(cx, n - 1), move |cx| fib_move(cx, n - 2));
    a + b
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(20, |s| s.parse().expect("N"));
    let threads: usize = args.next().map_or(1, |s| s.parse().expect("THREADS"));
    let by_move = match args.next().as_deref() {
        None | Some("ref") => false,
        Some("move") => true,
        Some(other) => panic!("ref or move, not {other}"),
    };
    let pool = ThreadPool::new(Config::default().with_max_threads(threads)).unwrap();
    let r = pool.install(|cx| if by_move { fib_move(cx, n) } else { fib(cx, n) }).unwrap();
    println!("fib({n}) = {r}");
}
