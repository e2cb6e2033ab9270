//! The BENCH.md `blocking` workload on the blocking pool: 1,000 tasks that each sleep 1 ms,
//! submitted at once from the main thread; reports the wall time until the last one finished
//! and the peak OS thread count of the process (sampled from /proc/self/status by a monitor
//! thread every 100 µs), then how long the pool takes to return to zero threads.
//!
//! ```text
//! cargo run --release --example blocking_sleep -- [runs=7] [tasks=1000] [cap=512] [keep_alive_ms=200]
//! ```
//!
//! Each run uses a fresh pool (cap 512 like tokio's default `max_blocking_threads`) after a
//! warm-up run; the report gives each run, then the median and min-max. The process baseline
//! (main + monitor thread) is included in the OS figure, as it is in the tokio comparison.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool::{BlockingConfig, BlockingPool};

fn os_threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().parse().unwrap_or(0))))
        .unwrap_or(0)
}

struct Monitor {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<()>,
}

impl Monitor {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicUsize::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(os_threads(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        Self { stop, peak, handle }
    }

    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap();
        self.peak.load(Ordering::Relaxed)
    }
}

struct Run {
    wall_ms: f64,
    peak_os: usize,
    peak_pool: usize,
    to_zero_ms: f64,
}

fn run(tasks: usize, cap: usize, keep_alive: Duration) -> Run {
    let pool = BlockingPool::new(BlockingConfig::default().with_max_threads(cap).with_keep_alive(keep_alive)).unwrap();
    let monitor = Monitor::start();
    let done = Arc::new(AtomicUsize::new(0));
    let main = std::thread::current();
    let start = Instant::now();
    for _ in 0..tasks {
        let (done, main) = (done.clone(), main.clone());
        drop(
            pool.spawn_blocking(move || {
                std::thread::sleep(Duration::from_millis(1));
                if done.fetch_add(1, Ordering::AcqRel) + 1 == tasks {
                    main.unpark();
                }
            })
            .unwrap(),
        );
    }
    while done.load(Ordering::Acquire) < tasks {
        std::thread::park();
    }
    let wall = start.elapsed();
    let peak_os = monitor.stop();
    let peak_pool = pool.metrics().peak_threads;
    let idle_from = Instant::now();
    while pool.metrics().threads > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let to_zero = idle_from.elapsed();
    pool.shutdown().unwrap();
    Run { wall_ms: wall.as_secs_f64() * 1e3, peak_os, peak_pool, to_zero_ms: to_zero.as_secs_f64() * 1e3 }
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("numeric arguments")).collect();
    let runs = args.first().copied().unwrap_or(7);
    let tasks = args.get(1).copied().unwrap_or(1000);
    let cap = args.get(2).copied().unwrap_or(512);
    let keep_alive = Duration::from_millis(args.get(3).copied().unwrap_or(200) as u64);
    println!("blocking: {tasks} x 1 ms sleeps, cap {cap}, keep-alive {keep_alive:?}, {runs} runs after a warm-up");
    let _ = run(tasks, cap, keep_alive);
    let mut all = Vec::new();
    for i in 0..runs {
        let r = run(tasks, cap, keep_alive);
        println!(
            "run {i}: wall {:7.2} ms  peak OS threads {:4}  peak pool threads {:4}  back to 0 threads after {:6.1} ms",
            r.wall_ms, r.peak_os, r.peak_pool, r.to_zero_ms
        );
        all.push(r);
    }
    let (w, wmin, wmax) = median(all.iter().map(|r| r.wall_ms).collect());
    let (t, tmin, tmax) = median(all.iter().map(|r| r.peak_os as f64).collect());
    let (z, zmin, zmax) = median(all.iter().map(|r| r.to_zero_ms).collect());
    println!("pool: wall median {w:.2} ms (min {wmin:.2}, max {wmax:.2}); peak OS threads median {t:.0} (min {tmin:.0}, max {tmax:.0}); back to 0 threads median {z:.1} ms (min {zmin:.1}, max {zmax:.1})");
}
