//! The table (stdout and Markdown) and the raw JSON.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use crate::common::{stats, Sample};
use crate::ours::{BOXED, INTRUSIVE};
use crate::Options;

pub struct Record {
    pub workload: &'static str,
    pub unit: &'static str,
    pub pool: &'static str,
    pub note: &'static str,
    pub extra: Option<&'static str>,
    pub baseline: Option<&'static str>,
    pub warmup: Option<Sample>,
    pub samples: Vec<Sample>,
}

impl Record {
    fn values(&self) -> Vec<f64> {
        self.samples.iter().map(|s| s.value).collect()
    }
    pub fn median(&self) -> f64 {
        stats(&self.values()).0
    }
}

/// Three significant-ish figures.
pub fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
}

fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub struct Meta {
    pub date: String,
    pub nproc: usize,
    pub cpu: String,
    pub kernel: String,
    pub rustc: &'static str,
    pub commit: String,
    pub command: String,
    pub argv: Vec<String>,
    pub threads: usize,
    pub runs: usize,
    pub sequential: bool,
    pub elapsed: Duration,
    pub load_start: String,
    pub load_end: String,
    pub quiet_wait: bool,
    pub quiet_max_s: u64,
    /// Rounds measured although other processes were still busy.
    pub noisy: usize,
}

/// The 1, 5 and 15 minute load averages (/proc/loadavg): a busy machine shows here.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl Meta {
    pub fn collect(o: &Options, elapsed: Duration, load_start: String, noisy: usize) -> Self {
        let date = sh("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_else(|| {
            let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            format!("unix {secs}")
        });
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())))
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let commit = match sh("git", &["-C", root, "rev-parse", "--short", "HEAD"]) {
            Some(c) => {
                let dirty = sh("git", &["-C", root, "status", "--porcelain", "--untracked-files=no", "--", "src", "Cargo.toml"])
                    .is_some_and(|s| !s.is_empty());
                if dirty { format!("{c} + uncommitted changes in src/") } else { c }
            }
            None => "unknown".into(),
        };
        let args: Vec<String> = o.argv.iter().skip(1).map(|a| shell_quote(a)).collect();
        let command = format!("cargo run --release --manifest-path bench/Cargo.toml -- {}", args.join(" "))
            .trim_end()
            .to_string();
        Meta {
            date,
            nproc: nproc(),
            cpu,
            kernel,
            rustc: env!("BENCH_RUSTC_VERSION"),
            commit,
            command,
            argv: o.argv.clone(),
            threads: o.threads,
            runs: o.runs,
            sequential: o.sequential,
            elapsed,
            load_start,
            load_end: loadavg(),
            quiet_wait: !o.no_wait_quiet,
            quiet_max_s: o.quiet_max_s,
            noisy,
        }
    }
}

const HEADERS: [&str; 7] = ["workload", "pool", "median", "min–max", "pool ÷ this", "pool(boxed) ÷ this", "notes"];

fn ratio(ours: Option<f64>, this: f64) -> String {
    match ours {
        Some(o) if this > 0.0 && o.is_finite() => format!("{:.2}", o / this),
        _ => String::new(),
    }
}

fn rows(records: &[Record]) -> Vec<[String; 7]> {
    let mut out = Vec::new();
    for r in records {
        let same = |name: &str| records.iter().find(|x| x.workload == r.workload && x.pool == name).map(Record::median);
        let (median, min, max) = stats(&r.values());
        let mut notes = vec![r.note.to_string()];
        if let Some(extra) = r.extra {
            let peak = r.samples.iter().filter_map(|s| s.extra).fold(0.0f64, f64::max);
            notes.push(format!("{extra}: {peak:.0}"));
        }
        if let Some(base) = r.baseline {
            if r.pool != base {
                if let Some(b) = same(base).filter(|b| *b > 0.0) {
                    notes.push(format!("{:.2}× {base}", median / b));
                }
            }
        }
        out.push([
            r.workload.to_string(),
            r.pool.to_string(),
            format!("{} {}", num(median), r.unit),
            format!("{}–{}", num(min), num(max)),
            if r.pool == INTRUSIVE { String::new() } else { ratio(same(INTRUSIVE), median) },
            if r.pool == BOXED { String::new() } else { ratio(same(BOXED), median) },
            notes.join("; "),
        ]);
    }
    out
}

pub fn text_table(records: &[Record]) -> String {
    let rows = rows(records);
    let mut width = HEADERS.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row.iter()).take(6) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == 6 {
                s.push_str(c);
            } else if (2..=5).contains(&i) {
                let _ = write!(s, "{:>w$}  ", c, w = width[i]);
            } else {
                let _ = write!(s, "{:<w$}  ", c, w = width[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&HEADERS.map(String::from));
    let mut last = "";
    for (row, r) in rows.iter().zip(records) {
        if r.workload != last && !last.is_empty() {
            out.push('\n');
        }
        last = r.workload;
        out.push_str(&line(row));
    }
    out
}

fn legend(meta: &Meta) -> String {
    format!(
        "Every pool gets {threads} worker threads. Pools are built outside every timed region and warmed up \
with one run. {order} Cells are the median and min–max of the {runs} measured runs.

* **tiny task** = one relaxed `fetch_add` on a shared counter; the task that brings it to N signals a \
`Mutex` + `Condvar` on which the main thread waits (the same for every pool). The timed region runs from \
the first submit until the main thread wakes.
* **pool ÷ this**, **pool(boxed) ÷ this**: our median divided by this row's median. Below 1 means our pool \
is faster (for `idle_cpu`: burns less CPU).
* **pool** = the intrusive path (`Task` headers in a preallocated array, `submit`/`submit_batch` by \
pointer). The 1,000,000-task array (chain: the 100,000 hops) is allocated and initialised **outside the \
timed region**; nothing is allocated while timed. **pool(boxed)** = `ThreadPool::spawn`, one `Box` per \
task, allocated inside the timed region (as the peers do).
* **spawn_batch**: only our pool has a batch API; the peers' rows are the same 1,000,000 single spawns in \
a loop (identical to their spawn_remote).
* **spawn_local**: threadpool has no worker-local queue; its row is one job that submits 1,000,000 jobs \
through a cloned handle.
* **multi_producer**: the 8 producer threads are started and parked on a gate before the clock starts.
* **fib**, **qsort**: `× sequential` = this median ÷ the sequential median (fib: plain recursive fib(32); \
qsort: `slice::sort_unstable` of the same input). rayon runs inside `install` (the main thread waits); \
chili's `thread_count` = N is the calling thread + N−1 workers (plus a heartbeat thread). qsort input \
(xorshift32, seed 0xdeadbeef) is copied into the work buffer before each run, outside the timed region; \
the output is checked sorted and a permutation (by sum). Our pool row uses `WorkerContext::join` inside `ThreadPool::install`; `pool(bench-join)` (only with `--bench-join`) is the join \
the harness built earlier from `submit_lifo` + `wait_for`.
* **chain**: `pool(lifo)` = the intrusive chain with the next hop submitted by `submit_lifo`.
* **idle_cpu**: no warm-up; each run builds a fresh pool, runs one tiny task, then the main thread sleeps \
2 s; the cell is the process CPU time (getrusage, all threads) during those 2 s. `no pool` is the floor.
* **blocking**: 1,000 tasks each `sleep(1 ms)`; wall ms; `peak OS threads` = the maximum over the \
measured runs of `/proc/self/status` Threads, sampled every 1 ms by a monitor thread (counts the main and \
monitor threads and the pool's threads). tokio keeps its blocking threads alive between runs \
(10 s keep-alive).
* **blocking_pool**: `blocking` on blocking pools, ours (`pool` = `BlockingPool::submit` of a \
preallocated `BlockingTask` array, `pool(boxed)` = `spawn_blocking`) and tokio's `spawn_blocking`, both \
capped at 512 threads with a 200 ms keep-alive (both default to 10 s: shortened so every run starts from \
zero threads). `peak OS threads added` = the maximum over the measured runs of the threads a run added to \
the process (monitor excluded). After every run each pool must be back to zero threads within \
keep-alive + 2 s (checked).
* **queue_serial**, **queue_width**, **queue_latency**, **queue_latency_idle**, **queue_producers** \
(issue 27, `bench/src/queues.rs`): `pool` = a `pool::Queue` of intrusive tasks (width 1 on a 4-thread pool in \
queue_serial, width 4 in queue_width and the latency rows, 8 queues of width 1 on one pool of the default \
size in queue_producers); `pool(serial)` = a width-1 queue, `pool(submit)` = plain `ThreadPool::submit`, \
`pool(1 thread)` = a pool of `max_threads = 1`; `mutex` = a mutex + condvar FIFO pool of one thread \
(`bench/src/mutex_pool.rs`; function pointer and argument stored in its deque, no allocation per task), \
`mutex(boxed)` = the same with one `Box` per task. These workloads fix their own pool sizes (`--threads` does \
not apply). Task body: a multiply-xorshift loop (~100 ns; ~10 µs in queue_width) and the tiny task's tick. \
Latency rows: median over the run's tasks of the time from just before the submit to the callback's first \
clock read, one task at a time (queue_latency_idle: 1 ms apart, the workers asleep); the second figure is \
their 99th percentile (the highest run's). queue_producers: `OS threads` = the threads the executors run.
* **c_spawn**: `C` = spawn_remote written in C (`bench/c/c_spawn.c`: `pool_submit_to` against \
`libpool.a`), one process per measured run; in its row `pool ÷ this` = the Rust ns/task ÷ C's.
",
        threads = meta.threads,
        runs = meta.runs,
        order = if meta.sequential {
            "Each pool is measured {runs} times and dropped before the next is built (`--sequential`)."
                .replace("{runs}", &meta.runs.to_string())
        } else {
            "All pools of a workload are alive together and measured round-robin (run 1 of each, run 2 of \
each, ..., each round starting one pool further along, 20 ms pause between runs), so drift on a shared \
machine hits every pool alike; `idle_cpu` and `blocking` (process-wide figures) instead measure one pool \
at a time and drop it before building the next."
                .to_string()
        }
    )
}

pub fn markdown(meta: &Meta, records: &[Record]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# pool benchmarks\n");
    let _ = writeln!(s, "* date: {}", meta.date);
    let _ = writeln!(s, "* machine: nproc {} ({}), Linux {}", meta.nproc, meta.cpu, meta.kernel);
    let _ = writeln!(s, "* rustc: {}", meta.rustc);
    let _ = writeln!(s, "* pool commit: {}", meta.commit);
    let _ = writeln!(s, "* command: `{}`", meta.command);
    let _ = writeln!(s, "* worker threads: {}; runs: 1 warm-up + {} measured; total {:.0} s", meta.threads, meta.runs, meta.elapsed.as_secs_f64());
    let _ = writeln!(s, "* load average (1/5/15 min): {} at start, {} at end", meta.load_start, meta.load_end);
    if meta.quiet_wait {
        let _ = writeln!(
            s,
            "* before every round the harness waited (up to {} s) for other processes to use < 10% CPU; rounds measured on a still-busy machine: {}",
            meta.quiet_max_s, meta.noisy
        );
    } else {
        let _ = writeln!(s, "* `--no-wait-quiet`: rounds were not held back while other processes were busy");
    }
    let _ = writeln!(s, "\nWorkloads and sizes: `bench/README.md`. Shared noisy machines: compare the ratios within one run, not absolute times across runs.\n");
    s.push_str(&legend(meta));
    s.push('\n');
    let esc = |c: &str| c.replace('|', "\\|");
    let _ = writeln!(s, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(s, "|---|---|--:|--:|--:|--:|---|");
    for row in rows(records) {
        let cells: Vec<String> = row.iter().map(|c| esc(c)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s
}

fn js(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn jnum(x: f64) -> String {
    if x.is_finite() { format!("{x}") } else { "null".into() }
}

pub fn json(meta: &Meta, records: &[Record]) -> String {
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"date\": {},", js(&meta.date));
    let _ = writeln!(s, "  \"nproc\": {},", meta.nproc);
    let _ = writeln!(s, "  \"cpu\": {},", js(&meta.cpu));
    let _ = writeln!(s, "  \"kernel\": {},", js(&meta.kernel));
    let _ = writeln!(s, "  \"rustc\": {},", js(meta.rustc));
    let _ = writeln!(s, "  \"pool_commit\": {},", js(&meta.commit));
    let _ = writeln!(s, "  \"command\": {},", js(&meta.command));
    let argv: Vec<String> = meta.argv.iter().map(|a| js(a)).collect();
    let _ = writeln!(s, "  \"argv\": [{}],", argv.join(", "));
    let _ = writeln!(s, "  \"threads\": {},", meta.threads);
    let _ = writeln!(s, "  \"runs\": {},", meta.runs);
    let _ = writeln!(s, "  \"interleaved\": {},", !meta.sequential);
    let _ = writeln!(s, "  \"elapsed_s\": {:.3},", meta.elapsed.as_secs_f64());
    let _ = writeln!(s, "  \"loadavg_start\": {},", js(&meta.load_start));
    let _ = writeln!(s, "  \"loadavg_end\": {},", js(&meta.load_end));
    let _ = writeln!(s, "  \"quiet_wait\": {},", meta.quiet_wait);
    let _ = writeln!(s, "  \"noisy_rounds\": {},", meta.noisy);
    s.push_str("  \"results\": [\n");
    for (i, r) in records.iter().enumerate() {
        let (median, min, max) = stats(&r.values());
        let runs: Vec<String> = r.samples.iter().map(|x| jnum(x.value)).collect();
        let extra = match r.extra {
            Some(_) => format!("[{}]", r.samples.iter().map(|x| x.extra.map_or("null".into(), jnum)).collect::<Vec<_>>().join(", ")),
            None => "null".into(),
        };
        let _ = write!(
            s,
            "    {{\"workload\": {}, \"pool\": {}, \"unit\": {}, \"note\": {}, \"baseline\": {}, \"warmup\": {}, \
\"runs\": [{}], \"median\": {}, \"min\": {}, \"max\": {}, \"extra_name\": {}, \"extra\": {}}}",
            js(r.workload),
            js(r.pool),
            js(r.unit),
            js(r.note),
            r.baseline.map_or("null".into(), js),
            r.warmup.map_or("null".into(), |w| jnum(w.value)),
            runs.join(", "),
            jnum(median),
            jnum(min),
            jnum(max),
            r.extra.map_or("null".into(), js),
            extra,
        );
        s.push_str(if i + 1 < records.len() { ",\n" } else { "\n" });
    }
    s.push_str("  ]\n}\n");
    s
}
