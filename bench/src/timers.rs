//! BENCH.md's `timers` workload, on our runtime and on tokio's side by side: 100,000 async
//! tasks, spawned from the main thread, each sleeping until a deadline a random 1–100 ms
//! (fixed seed) after its spawn. Per run: the p99 of lateness (wake time minus deadline, in
//! ms, on the monotonic clock both runtimes use) and, as the extra figure, the process CPU
//! time from the first spawn to the last wake. The p50 is printed to stderr per run.
//!
//! Runs are not interleaved (process CPU time is a process-wide figure).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{process_cpu, Contender, Sample};
use crate::ours::OurPool;
use pool::Config;

/// Tasks per run.
pub const TIMERS: usize = 100_000;

/// The deadlines (ms after spawn), from a fixed seed.
fn delays() -> Vec<u64> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    (0..TIMERS)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            1 + seed % 100
        })
        .collect()
}

struct Run {
    late_ns: Vec<AtomicU64>,
    done: AtomicUsize,
}

impl Run {
    fn new() -> Arc<Self> {
        Arc::new(Run { late_ns: (0..TIMERS).map(|_| AtomicU64::new(0)).collect(), done: AtomicUsize::new(0) })
    }

    fn wait(&self) {
        while self.done.load(Relaxed) < TIMERS {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn sample(&self, name: &str, cpu: Duration) -> Sample {
        let mut late: Vec<u64> = self.late_ns.iter().map(|l| l.load(Relaxed)).collect();
        late.sort_unstable();
        let p50 = late[late.len() / 2] as f64 / 1e6;
        let p99 = late[late.len() * 99 / 100] as f64 / 1e6;
        eprint!(" [{name} p50 {p50:.2} ms]");
        Sample { value: p99, extra: Some(cpu.as_secs_f64() * 1e3) }
    }
}

pub fn workloads() -> Vec<crate::Workload> {
    vec![crate::Workload {
        name: "timers",
        unit: "ms p99 late",
        what: "100,000 tasks each sleep a random 1-100 ms (fixed seed); p99 lateness vs deadline",
        warmup: true,
        extra: Some("process CPU ms"),
        baseline: None,
        interleave: false,
        contenders,
    }]
}

fn contenders() -> Vec<Contender> {
    vec![
        Contender::new("pool", "pool::time::sleep_until in ThreadPool::spawn_future tasks", |threads| {
            let pool = Arc::new(OurPool::new(Config::default().with_max_threads(threads)).expect("pool"));
            let delays = delays();
            Box::new(move || {
                let run = Run::new();
                let cpu0 = process_cpu();
                for (i, &ms) in delays.iter().enumerate() {
                    let deadline = pool.now().expect("clock") + Duration::from_millis(ms);
                    let (run, p) = (run.clone(), pool.clone());
                    pool.spawn_future(async move {
                        pool::time::sleep_until(deadline).await;
                        let late = p.now().expect("clock") - deadline;
                        drop(p);
                        run.late_ns[i].store(late.as_nanos() as u64, Relaxed);
                        run.done.fetch_add(1, Relaxed);
                    })
                    .expect("spawn");
                }
                run.wait();
                let cpu = process_cpu() - cpu0;
                run.sample("pool", cpu)
            })
        }),
        Contender::new("tokio", "tokio::time::sleep_until in Runtime::spawn tasks (enable_time)", |threads| {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_time().build().expect("tokio");
            let delays = delays();
            Box::new(move || {
                let run = Run::new();
                let cpu0 = process_cpu();
                for (i, &ms) in delays.iter().enumerate() {
                    let deadline = Instant::now() + Duration::from_millis(ms);
                    let run = run.clone();
                    rt.spawn(async move {
                        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
                        let late = Instant::now().saturating_duration_since(deadline);
                        run.late_ns[i].store(late.as_nanos() as u64, Relaxed);
                        run.done.fetch_add(1, Relaxed);
                    });
                }
                run.wait();
                let cpu = process_cpu() - cpu0;
                run.sample("tokio", cpu)
            })
        }),
    ]
}
