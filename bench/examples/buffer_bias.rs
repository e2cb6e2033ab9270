//! Does where a workload's buffers lie change its time? The harness's qsort and matmul
//! workloads, sequentially (one thread, no pool), on `SETS` buffer sets allocated side by side,
//! taking turns for `rounds` rounds; prints each set's median (min–max). The same code on the
//! same data: any gap between the sets that holds across rounds is the buffers' placement
//! (which physical pages, and with them which cache sets, a power-of-two-strided walk hits).
//!
//! This is why the harness gives every contender of `qsort` and `matmul` one and the same
//! buffers (`forkjoin::OneCopy`): with a set each, such a gap would count against whichever pool
//! drew the slower set, in every run of an invocation.
//!
//! ```sh
//! cargo build --release --manifest-path bench/Cargo.toml --example buffer_bias
//! bench/target/release/examples/buffer_bias [qsort|matmul] [rounds, default 9]
//! ```

use std::time::Instant;

#[allow(dead_code)]
#[path = "../src/common.rs"]
mod common;
use common::{mm_matrices, mm_rec, stats, xorshift32_vec, View, MM_N, QSORT_LEN, QSORT_SEED};

const SETS: usize = 4;

/// Times `run` on every set in turn, `rounds` times; ms per set.
fn rotate<T>(sets: &mut [T], rounds: usize, mut run: impl FnMut(&mut T) -> f64) -> Vec<Vec<f64>> {
    let mut times = vec![Vec::with_capacity(rounds); sets.len()];
    for _ in 0..rounds {
        for (set, t) in sets.iter_mut().zip(&mut times) {
            t.push(run(set));
        }
    }
    times
}

fn qsort(rounds: usize) -> Vec<Vec<f64>> {
    let input = xorshift32_vec(QSORT_SEED, QSORT_LEN);
    let mut sets: Vec<Vec<u32>> = (0..SETS).map(|_| input.clone()).collect();
    rotate(&mut sets, rounds, |work| {
        work.copy_from_slice(&input);
        let start = Instant::now();
        work.sort_unstable();
        start.elapsed().as_secs_f64() * 1e3
    })
}

fn matmul(rounds: usize) -> Vec<Vec<f64>> {
    let mut sets: Vec<[Vec<f64>; 3]> = (0..SETS).map(|_| mm_matrices()).collect();
    rotate(&mut sets, rounds, |[a, b, c]| {
        c.iter_mut().for_each(|x| *x = 0.0);
        let view = |v: &mut Vec<f64>| View { ptr: v.as_mut_ptr(), n: MM_N };
        let (c, a, b) = (view(c), view(a), view(b));
        let start = Instant::now();
        mm_rec(c, a, b, &|f| (0..4).for_each(|q| f(q)));
        start.elapsed().as_secs_f64() * 1e3
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| "matmul".into());
    let rounds: usize = args.next().map_or(9, |s| s.parse().expect("rounds: a number"));
    let times = match workload.as_str() {
        "qsort" => qsort(rounds),
        "matmul" => matmul(rounds),
        other => panic!("qsort or matmul, not {other}"),
    };
    for (i, t) in times.iter().enumerate() {
        let (median, min, max) = stats(t);
        println!("{workload} set {i}: median {median:.1} ms ({min:.1}–{max:.1})");
    }
}
