//! Where the time of the `qsort` workload goes (BENCH.md: 10M u32, join above 2,048 elements,
//! `sort_unstable` below), on our pool (default `idle_spins`, and `idle_spins = 0`) and on
//! rayon, 2 workers each, the same quicksort for all three (`common::partition`). With
//! `matmul` as the second argument, the same for the `matmul` workload (1024² f64, quadrant
//! recursion with a join per split, `common::mm_block` on 64² leaves): there `top` is 0 (no
//! sequential first step) and `first steal` counts from the start of the run.
//!
//! Every partition and leaf sort is timed on the thread that runs it. Per run:
//! * `work`: the sum of those times over the threads (the same code and data for every pool:
//!   only the machine moves it);
//! * `idle`: threads × wall − work: what the scheduler leaves unused (the sequential top
//!   partition, the imbalance at the end, wake and steal latency, the joins themselves);
//! * `top`: the top partition (one thread, the other necessarily idle);
//! * `first steal`: from the end of the top partition to the first piece of work on a second
//!   thread (the wake-up of the idle worker and its steal).
//!
//! The pools take turns in a rotating order (round `r` starts with pool `r mod 3`), so no pool
//! always runs first or last. Prints one line per run and the medians.
//!
//! ```sh
//! cargo build --release --manifest-path bench/Cargo.toml --example qsort_breakdown
//! bench/target/release/examples/qsort_breakdown [rounds, default 9] [qsort|matmul]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

#[allow(dead_code)]
#[path = "../src/common.rs"]
mod common;
use common::{mm_block, mm_matrices, partition, stats, xorshift32_vec, View, MM_BLOCK, MM_N, QSORT_CUTOFF, QSORT_LEN, QSORT_SEED};

const THREADS: usize = 2;
const POOLS: [&str; 3] = ["pool", "pool(spins 0)", "rayon"];

/// One thread's totals for the current run.
struct Totals {
    work_ns: AtomicU64,
    first_ns: AtomicU64,
}

/// Every thread's totals (registered on first use, never freed: a handful of threads).
static THREADS_TOTALS: Mutex<Vec<&'static Totals>> = Mutex::new(Vec::new());
/// The top partition's end in this run, ns since `epoch`.
static TOP_END_NS: AtomicU64 = AtomicU64::new(0);
static TOP_NS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static TOTALS: &'static Totals = {
        let t: &'static Totals = Box::leak(Box::new(Totals { work_ns: AtomicU64::new(0), first_ns: AtomicU64::new(u64::MAX) }));
        THREADS_TOTALS.lock().unwrap().push(t);
        t
    };
}

/// The process's time origin.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Runs `f`, adding its time to this thread's work.
fn timed<R>(f: impl FnOnce() -> R) -> (R, u64, u64) {
    let start = now_ns();
    let r = f();
    let end = now_ns();
    TOTALS.with(|t| {
        t.work_ns.fetch_add(end - start, Ordering::Relaxed);
        t.first_ns.fetch_min(start, Ordering::Relaxed);
    });
    (r, end - start, end)
}

/// A leaf sorted (None), or the split point of a partition.
fn leaf_or_split(v: &mut [u32]) -> Option<usize> {
    if v.len() <= QSORT_CUTOFF {
        timed(|| v.sort_unstable());
        return None;
    }
    let (mid, took, end) = timed(|| partition(v));
    if v.len() == QSORT_LEN {
        TOP_NS.store(took, Ordering::Relaxed);
        TOP_END_NS.store(end, Ordering::Relaxed);
    }
    Some(mid)
}

fn qsort_ours(cx: &pool::WorkerContext<pool::ThreadSpawner>, v: &mut [u32]) {
    let Some(mid) = leaf_or_split(v) else { return };
    let (l, r) = v.split_at_mut(mid);
    cx.join(|cx| qsort_ours(cx, l), |cx| qsort_ours(cx, r));
}

fn qsort_rayon(v: &mut [u32]) {
    let Some(mid) = leaf_or_split(v) else { return };
    let (l, r) = v.split_at_mut(mid);
    rayon::join(|| qsort_rayon(l), || qsort_rayon(r));
}

/// `common::mm_rec`'s recursion with a timed leaf and the pool's own join, as the harness's
/// `mm_ours` / `mm_rayon`.
fn mm_ours(cx: &pool::WorkerContext<pool::ThreadSpawner>, c: View, a: View, b: View) {
    if c.n <= MM_BLOCK {
        timed(|| mm_block(c, a, b));
        return;
    }
    for k in 0..2 {
        cx.join(
            |cx| cx.join(|cx| mm_ours(cx, c.quad(0, 0), a.quad(0, k), b.quad(k, 0)), |cx| mm_ours(cx, c.quad(0, 1), a.quad(0, k), b.quad(k, 1))),
            |cx| cx.join(|cx| mm_ours(cx, c.quad(1, 0), a.quad(1, k), b.quad(k, 0)), |cx| mm_ours(cx, c.quad(1, 1), a.quad(1, k), b.quad(k, 1))),
        );
    }
}

fn mm_rayon(c: View, a: View, b: View) {
    if c.n <= MM_BLOCK {
        timed(|| mm_block(c, a, b));
        return;
    }
    for k in 0..2 {
        rayon::join(
            || rayon::join(|| mm_rayon(c.quad(0, 0), a.quad(0, k), b.quad(k, 0)), || mm_rayon(c.quad(0, 1), a.quad(0, k), b.quad(k, 1))),
            || rayon::join(|| mm_rayon(c.quad(1, 0), a.quad(1, k), b.quad(k, 0)), || mm_rayon(c.quad(1, 1), a.quad(1, k), b.quad(k, 1))),
        );
    }
}

/// The pool a run goes to.
enum On<'a> {
    Ours(&'a pool::ThreadPool<pool::ThreadSpawner>),
    Rayon(&'a rayon::ThreadPool),
}

/// The workload: sorts `v`, or multiplies `m`'s A and B into its C (zeroed first).
enum Work {
    Qsort { input: Vec<u32>, v: Vec<u32> },
    Matmul { m: [Vec<f64>; 3] },
}

impl Work {
    fn new(matmul: bool) -> Self {
        if !matmul {
            let input = xorshift32_vec(QSORT_SEED, QSORT_LEN);
            return Work::Qsort { v: input.clone(), input };
        }
        Work::Matmul { m: mm_matrices() }
    }

    /// Resets the output, then times one run on `on` (ns).
    fn run(&mut self, on: On<'_>) -> u64 {
        match self {
            Work::Qsort { input, v } => {
                v.copy_from_slice(input);
                TOP_NS.store(0, Ordering::Relaxed);
                let start = now_ns();
                match on {
                    On::Ours(pool) => pool.install(|cx| qsort_ours(cx, v)).expect("install"),
                    On::Rayon(pool) => pool.install(|| qsort_rayon(v)),
                }
                let wall = now_ns() - start;
                assert!(v.windows(2).all(|w| w[0] <= w[1]), "not sorted");
                wall
            }
            Work::Matmul { m: [a, b, c] } => {
                c.iter_mut().for_each(|x| *x = 0.0);
                let view = |v: &mut Vec<f64>| View { ptr: v.as_mut_ptr(), n: MM_N };
                let (c, a, b) = (view(c), view(a), view(b));
                let start = now_ns();
                // The first steal counts from the start: there is no sequential first step.
                TOP_NS.store(0, Ordering::Relaxed);
                TOP_END_NS.store(start, Ordering::Relaxed);
                match on {
                    On::Ours(pool) => pool.install(|cx| mm_ours(cx, c, a, b)).expect("install"),
                    On::Rayon(pool) => pool.install(|| mm_rayon(c, a, b)),
                }
                now_ns() - start
            }
        }
    }
}

/// One run's figures, ms: wall, work, idle, top, first steal.
fn take_run(wall_ns: u64) -> [f64; 5] {
    let per: Vec<(u64, u64)> = THREADS_TOTALS
        .lock()
        .unwrap()
        .iter()
        .map(|t| (t.work_ns.swap(0, Ordering::Relaxed), t.first_ns.swap(u64::MAX, Ordering::Relaxed)))
        .filter(|&(work, _)| work > 0)
        .collect();
    let work: u64 = per.iter().map(|p| p.0).sum();
    let mut firsts: Vec<u64> = per.iter().map(|p| p.1).collect();
    firsts.sort_unstable();
    let first_steal = firsts.get(1).map_or(0, |&f| f.saturating_sub(TOP_END_NS.load(Ordering::Relaxed)));
    let ms = |ns: u64| ns as f64 / 1e6;
    [ms(wall_ns), ms(work), ms((THREADS as u64 * wall_ns).saturating_sub(work)), ms(TOP_NS.load(Ordering::Relaxed)), ms(first_steal)]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(9, |s| s.parse().expect("rounds"));
    let matmul = match args.next().as_deref() {
        None | Some("qsort") => false,
        Some("matmul") => true,
        Some(other) => panic!("qsort or matmul, not {other}"),
    };
    let mut work = Work::new(matmul);
    let ours = pool::ThreadPool::new(pool::Config::default().with_max_threads(THREADS)).expect("pool");
    let ours_no_spin = pool::ThreadPool::new(pool::Config::default().with_max_threads(THREADS).with_idle_spins(0)).expect("pool");
    let rayon = rayon::ThreadPoolBuilder::new().num_threads(THREADS).build().expect("rayon");
    let mut figures: Vec<Vec<[f64; 5]>> = vec![Vec::new(); POOLS.len()];
    // Round 0 warms up every pool and is not counted.
    for round in 0..=rounds {
        for k in 0..POOLS.len() {
            let which = (round + k) % POOLS.len();
            let wall = match which {
                0 => work.run(On::Ours(&ours)),
                1 => work.run(On::Ours(&ours_no_spin)),
                _ => work.run(On::Rayon(&rayon)),
            };
            let run = take_run(wall);
            if round > 0 {
                println!(
                    "{:14} wall {:6.1}  work {:6.1}  idle {:5.1}  top {:4.1}  first steal {:4.2} ms",
                    POOLS[which], run[0], run[1], run[2], run[3], run[4]
                );
                figures[which].push(run);
            }
        }
    }
    println!("medians of {rounds} runs (min-max), ms:");
    for (name, runs) in POOLS.iter().zip(&figures) {
        let col = |i: usize| {
            let (median, min, max) = stats(&runs.iter().map(|r| r[i]).collect::<Vec<_>>());
            format!("{median:.1} ({min:.1}-{max:.1})")
        };
        println!("{name:14} wall {}  work {}  idle {}  top {}  first steal {}", col(0), col(1), col(2), col(3), col(4));
    }
}
