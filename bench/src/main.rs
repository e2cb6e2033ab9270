//! Benchmark harness for `pool` against its peers (BENCH.md), in one process, same worker count.
//!
//! ```text
//! cargo run --release --manifest-path bench/Cargo.toml -- [WORKLOAD...] [--runs N] [--threads N]
//!     [--pools a,b,...] [--markdown FILE] [--json FILE] [--sequential] [--no-wait-quiet]
//!     [--quiet-max SECS] [--bench-join] [--list]
//! ```
//!
//! For every workload: build every pool (not timed) and warm each up with one run, then N
//! rounds of one measured run per pool (round-robin, so drift on a shared machine hits all pools
//! alike). `idle_cpu` and `blocking` (process-wide figures) and `--sequential` instead build,
//! warm up, measure and drop one pool before the next. Progress goes to stderr, the table to
//! stdout.

mod blocking_pool;
mod c_spawn;
mod common;
mod echo;
mod echo_serve;
mod forkjoin;
mod mutex_pool;
mod ours;
mod peers;
mod queues;
mod report;
mod timers;
mod tokio_sched;

use std::io::Write;

use common::{Contender, Sample};
use report::Record;

/// A BENCH.md workload: its unit and the contenders that can express it.
pub struct Workload {
    pub name: &'static str,
    pub unit: &'static str,
    pub what: &'static str,
    /// Whether one un-measured run precedes the measured ones.
    pub warmup: bool,
    /// Name of a second per-run figure (e.g. peak OS threads), if any.
    pub extra: Option<&'static str>,
    /// The row every other row is also compared with (fib, qsort).
    pub baseline: Option<&'static str>,
    /// Whether the pools' runs may be interleaved (all pools alive at once). Not for idle_cpu
    /// (process CPU) or blocking (process thread count).
    pub interleave: bool,
    pub contenders: fn() -> Vec<Contender>,
}

fn workloads() -> Vec<Workload> {
    fn cat(a: Vec<Contender>, b: Vec<Contender>) -> Vec<Contender> {
        a.into_iter().chain(b).collect()
    }
    vec![
        Workload {
            name: "spawn_remote",
            unit: "ns/task",
            what: "main thread submits 1,000,000 tiny tasks",
            warmup: true,
            extra: None,
            baseline: None,
            interleave: true,
            contenders: || cat(ours::spawn_remote(), peers::spawn_remote(false)),
        },
        Workload {
            name: "spawn_local",
            unit: "ns/task",
            what: "one task submits 1,000,000 tiny tasks from inside a worker",
            warmup: true,
            extra: None,
            baseline: None,
            interleave: true,
            contenders: || cat(ours::spawn_local(), peers::spawn_local()),
        },
        Workload {
            name: "spawn_batch",
            unit: "ns/task",
            what: "main thread submits 1,000,000 tiny tasks in batches of 256",
            warmup: true,
            extra: None,
            baseline: None,
            interleave: true,
            contenders: || cat(ours::spawn_batch(), peers::spawn_remote(true)),
        },
        Workload {
            name: "multi_producer",
            unit: "ns/task",
            what: "8 external threads each submit 125,000 tiny tasks at once",
            warmup: true,
            extra: None,
            baseline: None,
            interleave: true,
            contenders: || cat(ours::multi_producer(), peers::multi_producer()),
        },
        Workload {
            name: "chain",
            unit: "ns/hop",
            what: "100,000 tasks, each submits the next",
            warmup: true,
            extra: None,
            baseline: None,
            interleave: true,
            contenders: || cat(ours::chain(), peers::chain()),
        },
        Workload {
            name: "fib",
            unit: "ms",
            what: "fork-join fib(32), join at every level",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: forkjoin::fib,
        },
        Workload {
            name: "qsort",
            unit: "ms",
            what: "quicksort 10,000,000 u32, join above 2,048 elements",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: forkjoin::qsort,
        },
        Workload {
            name: "matmul",
            unit: "ms",
            what: "1024x1024 f64 C = A*B, quadrant recursion with join down to 64x64 blocks",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: forkjoin::matmul,
        },
        Workload {
            name: "nqueens",
            unit: "ms",
            what: "count the solutions of 12-queens, join over placements down to row 4",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: forkjoin::nqueens,
        },
        Workload {
            name: "tree_sum",
            unit: "ns/node",
            what: "sum a 10,000,000-node tree, join at every node, right subtree first",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: forkjoin::tree_sum,
        },
        Workload {
            name: "tree_sum_small",
            unit: "ns/node",
            what: "sum a 1,023-node tree 9,775 times, join at every node",
            warmup: true,
            extra: None,
            baseline: Some("sequential"),
            interleave: true,
            contenders: forkjoin::tree_sum_small,
        },
        Workload {
            name: "idle_cpu",
            unit: "CPU ms",
            what: "process CPU time during 2 s idle after one tiny task",
            warmup: false,
            extra: None,
            baseline: None,
            interleave: false,
            contenders: || {
                let mut peers = peers::idle_cpu();
                let floor = peers.remove(0);
                let mut v = vec![floor];
                v.extend(ours::idle_cpu());
                v.extend(peers);
                v
            },
        },
        Workload {
            name: "idle_cpu_ctx",
            unit: "CPU ms",
            what: "process CPU time during 2 s while a fork-join context is held open with no work",
            warmup: false,
            extra: None,
            baseline: None,
            interleave: false,
            contenders: forkjoin::idle_cpu_ctx,
        },
        Workload {
            name: "blocking",
            unit: "ms",
            what: "1,000 tasks each sleep 1 ms",
            warmup: true,
            extra: Some("peak OS threads"),
            baseline: None,
            interleave: false,
            contenders: || cat(ours::blocking(), peers::blocking()),
        },
    ]
    .into_iter()
    .chain(tokio_sched::workloads())
    .chain(timers::workloads())
    .chain(echo::workloads())
    .chain(blocking_pool::workloads())
    .chain(c_spawn::workloads())
    .chain(queues::workloads())
    .collect()
}

pub struct Options {
    pub workloads: Vec<String>,
    pub runs: usize,
    pub threads: usize,
    pub pools: Option<Vec<String>>,
    pub markdown: Option<String>,
    pub json: Option<String>,
    pub sequential: bool,
    pub no_wait_quiet: bool,
    pub quiet_max_s: u64,
    pub argv: Vec<String>,
}

const USAGE: &str = "usage: pool-bench [WORKLOAD...|all] [--runs N] [--threads N] [--pools a,b,...] \
[--markdown FILE] [--json FILE] [--sequential] [--no-wait-quiet] [--quiet-max SECS] [--bench-join] [--list]";

fn parse_args() -> Options {
    let argv: Vec<String> = std::env::args().collect();
    let mut o = Options {
        workloads: Vec::new(),
        runs: 7,
        threads: 2,
        pools: None,
        markdown: None,
        json: None,
        sequential: false,
        no_wait_quiet: false,
        quiet_max_s: 15,
        argv: argv.clone(),
    };
    let known: Vec<&str> = workloads().iter().map(|w| w.name).collect();
    // `--flag=value` is the same as `--flag value`.
    let mut args: std::collections::VecDeque<String> = argv
        .iter()
        .skip(1)
        .flat_map(|a| match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => vec![f.to_string(), v.to_string()],
            _ => vec![a.clone()],
        })
        .collect();
    while let Some(flag) = args.pop_front() {
        let mut val = || args.pop_front().unwrap_or_else(|| die(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--runs" => o.runs = val().parse().unwrap_or_else(|_| die("--runs: not a number")),
            "--threads" => o.threads = val().parse().unwrap_or_else(|_| die("--threads: not a number")),
            "--pools" => o.pools = Some(val().split(',').map(|s| s.trim().to_string()).collect()),
            "--markdown" => o.markdown = Some(val()),
            "--json" => o.json = Some(val()),
            "--sequential" => o.sequential = true,
            "--no-wait-quiet" => o.no_wait_quiet = true,
            "--quiet-max" => o.quiet_max_s = val().parse().unwrap_or_else(|_| die("--quiet-max: seconds")),
            "--bench-join" => forkjoin::BENCH_JOIN.store(true, std::sync::atomic::Ordering::Relaxed),
            "--list" => {
                for w in workloads() {
                    let names: Vec<&str> = (w.contenders)().iter().map(|c| c.pool).collect();
                    println!("{:<15} {:<8} {}  [{}]", w.name, w.unit, w.what, names.join(", "));
                }
                std::process::exit(0);
            }
            "-h" | "--help" => {
                println!("{USAGE}\nworkloads: {}", known.join(" "));
                std::process::exit(0);
            }
            "all" => o.workloads.extend(known.iter().map(|s| s.to_string())),
            w if known.contains(&w) => o.workloads.push(w.to_string()),
            other => die(&format!("unknown argument {other:?}\n{USAGE}\nworkloads: {}", known.join(" "))),
        }
    }
    if o.workloads.is_empty() {
        o.workloads = known.iter().map(|s| s.to_string()).collect();
    }
    if o.runs == 0 || o.threads == 0 {
        die("--runs and --threads must be at least 1");
    }
    o
}

fn die(msg: &str) -> ! {
    eprintln!("pool-bench: {msg}");
    std::process::exit(2)
}

fn fmt_sample(s: Sample, unit: &str) -> String {
    match s.extra {
        Some(x) => format!("{} {unit} ({x:.0})", report::num(s.value)),
        None => format!("{} {unit}", report::num(s.value)),
    }
}

/// Before a round (or a pool, when sequential): wait until other processes are nearly idle.
fn settle_machine(opts: &Options, noisy: &mut usize) {
    if opts.no_wait_quiet {
        return;
    }
    const THRESHOLD: f64 = 0.10;
    let max = std::time::Duration::from_secs(opts.quiet_max_s);
    match common::wait_quiet(THRESHOLD, max) {
        Some(waited) if waited > std::time::Duration::from_millis(300) => {
            eprint!(" (waited {:.1} s for other processes)", waited.as_secs_f64());
        }
        Some(_) => {}
        None => {
            *noisy += 1;
            eprint!(" (machine still busy after {} s: measuring anyway)", max.as_secs());
        }
    }
    flush();
}

fn flush() {
    let _ = std::io::stderr().flush();
}

fn record(w: &Workload, (pool, note): (&'static str, &'static str), warmup: Option<Sample>, samples: Vec<Sample>) -> Record {
    Record {
        workload: w.name,
        unit: w.unit,
        pool,
        note,
        extra: w.extra,
        baseline: w.baseline,
        warmup,
        samples,
    }
}

/// Build one pool, warm it up, measure it N times, drop it; then the next pool.
fn run_sequential(w: &Workload, c: Contender, opts: &Options, noisy: &mut usize) -> Record {
    let Contender { pool, note, make } = c;
    eprint!("  {pool:<12}");
    settle_machine(opts, noisy);
    let mut runner = make(opts.threads);
    let warmup = w.warmup.then(|| {
        let s = runner();
        eprint!(" warm-up {} |", fmt_sample(s, w.unit));
        flush();
        s
    });
    let mut samples = Vec::with_capacity(opts.runs);
    for _ in 0..opts.runs {
        let s = runner();
        eprint!(" {}", fmt_sample(s, ""));
        flush();
        samples.push(s);
    }
    drop(runner);
    let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
    eprintln!("  -> median {} {}", report::num(common::stats(&values).0), w.unit);
    record(w, (pool, note), warmup, samples)
}

/// Build every pool and warm each up, then N rounds of one run per pool (each round starting
/// one pool further along), with a short pause between runs so the previous pool's threads
/// are asleep again. Drift on a shared machine then hits every pool alike.
fn run_interleaved(w: &Workload, contenders: Vec<Contender>, opts: &Options, noisy: &mut usize) -> Vec<Record> {
    const SETTLE: std::time::Duration = std::time::Duration::from_millis(20);
    let k = contenders.len();
    let mut runners = Vec::with_capacity(k);
    let mut warmups = Vec::with_capacity(k);
    let mut meta = Vec::with_capacity(k);
    eprint!("  warm-up:");
    settle_machine(opts, noisy);
    for Contender { pool, note, make } in contenders {
        let mut runner = make(opts.threads);
        let warmup = w.warmup.then(|| {
            let s = runner();
            eprint!(" {pool} {}", fmt_sample(s, w.unit));
            flush();
            s
        });
        std::thread::sleep(SETTLE);
        runners.push(runner);
        warmups.push(warmup);
        meta.push((pool, note));
    }
    eprintln!();
    let mut samples: Vec<Vec<Sample>> = (0..k).map(|_| Vec::with_capacity(opts.runs)).collect();
    for round in 0..opts.runs {
        eprint!("  run {}/{}:", round + 1, opts.runs);
        settle_machine(opts, noisy);
        for step in 0..k {
            let i = (round + step) % k;
            let s = runners[i]();
            eprint!(" {} {}", meta[i].0, fmt_sample(s, ""));
            flush();
            samples[i].push(s);
            std::thread::sleep(SETTLE);
        }
        eprintln!();
    }
    drop(runners);
    meta.into_iter()
        .zip(warmups)
        .zip(samples)
        .map(|((m, warmup), samples)| {
            let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
            eprintln!("  {:<12} median {} {}", m.0, report::num(common::stats(&values).0), w.unit);
            record(w, m, warmup, samples)
        })
        .collect()
}

fn main() {
    let opts = parse_args();
    let all = workloads();
    let mut records: Vec<Record> = Vec::new();
    let started = std::time::Instant::now();
    let load_start = report::loadavg();
    let mut noisy = 0usize;
    eprintln!(
        "pool-bench: {} worker threads, 1 warm-up + {} runs, nproc {}, load average {}",
        opts.threads,
        opts.runs,
        report::nproc(),
        load_start
    );
    for name in &opts.workloads {
        let w = all.iter().find(|w| w.name == name).expect("known workload");
        let contenders: Vec<Contender> = (w.contenders)()
            .into_iter()
            .filter(|c| match &opts.pools {
                Some(pools) => pools.iter().any(|p| p == c.pool) || w.baseline == Some(c.pool) || c.pool == "no pool",
                None => true,
            })
            .collect();
        let interleave = w.interleave && !opts.sequential;
        eprintln!(
            "[{}] {} ({}){}",
            w.name,
            w.what,
            w.unit,
            if interleave { ", runs interleaved round-robin" } else { "" }
        );
        if interleave {
            records.extend(run_interleaved(w, contenders, &opts, &mut noisy));
        } else {
            for c in contenders {
                records.push(run_sequential(w, c, &opts, &mut noisy));
            }
        }
    }
    let elapsed = started.elapsed();
    eprintln!("pool-bench: done in {:.1} s", elapsed.as_secs_f64());

    let meta = report::Meta::collect(&opts, elapsed, load_start, noisy);
    eprintln!("pool-bench: load average {} at the end", meta.load_end);
    print!("{}", report::text_table(&records));
    if let Some(path) = &opts.markdown {
        std::fs::write(path, report::markdown(&meta, &records)).unwrap_or_else(|e| die(&format!("{path}: {e}")));
        eprintln!("pool-bench: wrote {path}");
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, report::json(&meta, &records)).unwrap_or_else(|e| die(&format!("{path}: {e}")));
        eprintln!("pool-bench: wrote {path}");
    }
}
