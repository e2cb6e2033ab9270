//! Measurement for issue 4 (BENCH.md `fib` and `qsort`) on this crate's pool only:
//!
//! * fib(32) through `join` at every level down to n < 2 (no cutoff) vs plain recursive fib(32);
//! * quicksort of 10,000,000 u32 (xorshift32, seed 0xdeadbeef), `join` on both halves above
//!   2,048 elements and `sort_unstable` below, vs `slice::sort_unstable`.
//!
//! 2 worker threads (the caller parks: `join` from outside runs the whole call on the pool).
//! Each figure: median and min-max of 5 runs after a warm-up; every result is verified.
//!
//! Run: `cargo run --release --example fib_qsort [-- threads runs]`.
//! The side-by-side with rayon and chili is the benchmark crate's `bench/src/forkjoin.rs` (peers
//! are never dependencies of the library); BENCHMARKS.md has the figures.

use std::hint::black_box;
use std::time::{Duration, Instant};

use pool::{Config, ThreadPool, ThreadSpawner};

type Pool = ThreadPool<ThreadSpawner>;

const FIB_N: u64 = 32;
const SORT_LEN: usize = 10_000_000;
const SEQ_BELOW: usize = 2048;

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn fib_join(pool: &Pool, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = pool.join(|| fib_join(pool, n - 1), || fib_join(pool, n - 2));
    a + b
}

fn input() -> Vec<u32> {
    let mut x = 0xdead_beefu32;
    (0..SORT_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

/// Branchless Lomuto partition around the median of three (the same code in every pool's
/// version, so ratios compare scheduling, not partitioning). Returns the pivot's final index:
/// `v[..p] < pivot <= v[p+1..]`.
fn partition(v: &mut [u32]) -> usize {
    let last = v.len() - 1;
    let mid = v.len() / 2;
    // Median of three to `last`.
    if v[0] > v[mid] {
        v.swap(0, mid);
    }
    if v[mid] > v[last] {
        v.swap(mid, last);
        if v[0] > v[mid] {
            v.swap(0, mid);
        }
    }
    v.swap(mid, last);
    let pivot = v[last];
    let mut store = 0;
    for i in 0..last {
        let smaller = v[i] < pivot;
        v.swap(i, store);
        store += smaller as usize;
    }
    v.swap(store, last);
    store
}

fn qsort(pool: &Pool, v: &mut [u32]) {
    if v.len() <= SEQ_BELOW {
        v.sort_unstable();
        return;
    }
    let p = partition(v);
    let (lo, hi) = v.split_at_mut(p);
    pool.join(|| qsort(pool, lo), || qsort(pool, &mut hi[1..]));
}

fn qsort_seq(v: &mut [u32]) {
    if v.len() <= SEQ_BELOW {
        v.sort_unstable();
        return;
    }
    let p = partition(v);
    let (lo, hi) = v.split_at_mut(p);
    qsort_seq(lo);
    qsort_seq(&mut hi[1..]);
}

fn stats(mut t: Vec<Duration>) -> (f64, f64, f64) {
    t.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(t[t.len() / 2]), ms(t[0]), ms(t[t.len() - 1]))
}

fn time<R>(runs: usize, mut f: impl FnMut() -> R, check: impl Fn(&R)) -> (f64, f64, f64) {
    check(&f()); // warm-up
    let mut t = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let r = black_box(f());
        t.push(start.elapsed());
        check(&r);
    }
    stats(t)
}

/// As `time`, for a sort: the copy of the input is made outside the timed part.
fn time_sort(runs: usize, data: &[u32], mut sort: impl FnMut(&mut [u32]), want: &[u32]) -> (f64, f64, f64) {
    let mut t = Vec::new();
    for round in 0..=runs {
        let mut v = data.to_vec();
        let start = Instant::now();
        sort(black_box(&mut v));
        let e = start.elapsed();
        assert!(v == want, "sorted exactly");
        if round > 0 {
            t.push(e);
        }
    }
    stats(t)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let pool = ThreadPool::new(Config::default().with_max_threads(threads)).unwrap();
    let want_fib = fib_seq(FIB_N);

    let seq = time(runs, || fib_seq(black_box(FIB_N)), |&r| assert_eq!(r, want_fib));
    let par = time(runs, || fib_join(&pool, black_box(FIB_N)), |&r| assert_eq!(r, want_fib));
    println!("fib({FIB_N}) sequential      {:8.1} ms  ({:.1}-{:.1})", seq.0, seq.1, seq.2);
    println!("fib({FIB_N}) pool.join x{threads}     {:8.1} ms  ({:.1}-{:.1})  ratio {:.2}x", par.0, par.1, par.2, par.0 / seq.0);

    let data = input();
    let mut want = data.clone();
    want.sort_unstable();
    let sq = time_sort(runs, &data, qsort_seq, &want);
    let seq = time_sort(runs, &data, |v| v.sort_unstable(), &want);
    let par = time_sort(runs, &data, |v| qsort(&pool, v), &want);
    println!("qsort 10M same code, no pool {:8.1} ms  ({:.1}-{:.1})", sq.0, sq.1, sq.2);
    println!("qsort 10M sort_unstable     {:8.1} ms  ({:.1}-{:.1})", seq.0, seq.1, seq.2);
    println!("qsort 10M pool.join x{threads}    {:8.1} ms  ({:.1}-{:.1})  ratio {:.2}x", par.0, par.1, par.2, par.0 / seq.0);
    let s = pool.stats();
    println!("pool stats: steals {} parks {}", s.steals, s.parks);
}
