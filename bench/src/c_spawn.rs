//! `c_spawn` (BENCH.md): spawn_remote written in C against `pool.h` and `libpool.a`
//! (`bench/c/c_spawn.c`, compiled and linked by `bench/build.rs` when
//! `target/release/libpool.a` exists: `make lib`), next to the Rust spawn_remote rows in the
//! same run.
//!
//! The C program is its own process (a Rust staticlib carries its own copy of `std`, which
//! cannot be linked into this Rust binary next to ours): each measured run starts it once; it
//! builds a pool with the same worker count, preallocates the 1,000,000 tasks, runs the
//! workload once as a warm-up, then once timed, and prints the ns per task. Process start, pool
//! build and warm-up are outside its timed region, which is the same as the Rust rows' (first
//! submit until the main thread wakes; same tiny task, same mutex + condvar signal). Runs are
//! interleaved round-robin with the Rust rows, so `pool ÷ this` in the C row is the Rust
//! intrusive path's ns/task over C's in the same run.

use std::process::Command;

use crate::common::*;
use crate::Workload;

/// The C program built by build.rs, or "" if it could not be built.
const BIN: &str = env!("C_SPAWN_BIN");

pub fn workloads() -> Vec<Workload> {
    vec![Workload {
        name: "c_spawn",
        unit: "ns/task",
        what: "spawn_remote (1,000,000 tiny tasks from the main thread) from C via pool.h + libpool.a, and from Rust",
        warmup: true,
        extra: None,
        baseline: None,
        interleave: true,
        contenders: || {
            let mut v = Vec::new();
            if BIN.is_empty() {
                eprintln!("  c_spawn: no C program (build target/release/libpool.a with `make lib`, then rebuild the harness)");
            } else {
                v.push(Contender::new("C", "bench/c/c_spawn.c: pool_submit_to per task, 1M-task array preallocated; one process per run", |threads| {
                    Box::new(move || c_run(threads))
                }));
            }
            v.extend(crate::ours::spawn_remote());
            v
        },
    }]
}

/// One run of the C program: its timed figure, ns per task.
fn c_run(threads: usize) -> Sample {
    let out = Command::new(BIN)
        .args([SPAWN_TASKS.to_string(), threads.to_string(), "1".into()])
        .output()
        .unwrap_or_else(|e| panic!("{BIN}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{BIN} failed ({}): {}{}", out.status, stdout, String::from_utf8_lossy(&out.stderr));
    let ns: f64 = stdout.trim().parse().unwrap_or_else(|_| panic!("{BIN}: unexpected output {stdout:?}"));
    Sample { value: ns, extra: None }
}
