//! The `echo` workload (`src/echo.rs`) as a process of its own, one server per run, for
//! interleaved runs and for counting what one run does (`strace -f -c`, `valgrind --tool=
//! callgrind`): a loopback TCP echo server on our runtime (`pool::net`) or on tokio's, 2
//! workers each, and the same client as the harness (one thread, a tokio current-thread
//! runtime, 64 connections each doing `round_trips` round trips of 64 bytes).
//!
//! ```sh
//! cargo build --release --manifest-path bench/Cargo.toml --example echo
//! for i in 1 2 3 4 5; do for s in pool tokio; do bench/target/release/examples/echo $s; done; done
//! ```
//!
//! Arguments: `pool|tokio [round_trips per connection, default 1000] [workers, default 2]`.
//! Prints one line: server, µs per request, requests per second, and for our pool its `Stats`
//! (parks, polled). `ECHO_SPINS=n` sets our pool's `Config::idle_spins`. `ECHO_THREADS=1`
//! also prints, on stderr, each thread's CPU ms, run-queue wait ms and time slices
//! (`/proc/.../schedstat`): the client's at its end, the server's after the run.
//!
//! `pairs N [round_trips] [workers]`: N pairs of one-server processes (this program, `pool` then
//! `tokio`, the order swapped every other pair), then the medians (min–max), the median and
//! geometric mean of the per-pair ratios pool ÷ tokio (µs per request: below 1, ours is
//! faster), and in how many pairs ours was faster.
//!
//! `idle`: the process CPU time (getrusage) over 2 s of idleness after one task, with no pool,
//! with our pool, and with our pool and its I/O driver installed (one worker blocked in
//! `epoll_wait`), as BENCH.md's `idle_cpu`.

use std::sync::Arc;

#[allow(dead_code)]
#[path = "../src/echo_serve.rs"]
mod echo_serve;
use echo_serve::{drive, serve_ours, serve_tokio, CONNECTIONS};

fn ours(threads: usize, round_trips: usize) -> (f64, String) {
    let (pool, _net, addr) = serve_ours(threads);
    let secs = drive(addr, round_trips);
    if std::env::var_os("ECHO_THREADS").is_some() {
        print_threads();
    }
    let s = pool.stats();
    (secs, format!("parks {} polled {} steals {}", s.parks, s.polled, s.steals))
}

fn tokio(threads: usize, round_trips: usize) -> (f64, String) {
    let (rt, addr) = serve_tokio(threads);
    let secs = drive(addr, round_trips);
    if std::env::var_os("ECHO_THREADS").is_some() {
        print_threads();
    }
    drop(rt);
    (secs, String::new())
}

/// Prints each live thread of this process with its CPU time so far (`ECHO_THREADS`).
fn print_threads() {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return };
    let mut line = String::new();
    for t in dir.flatten() {
        let p = t.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        let ms = echo_serve::thread_cpu_ms(&p.join("schedstat").to_string_lossy());
        line += &format!("{}={} ", comm.trim(), ms);
    }
    eprintln!("threads cpu/wait ms/slices: {line}");
}

/// Process CPU time (user + system) in ms.
fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

/// CPU ms burnt during 2 s of idleness after `setup` (kept alive meanwhile).
fn idle_cpu<T>(setup: impl FnOnce() -> T) -> f64 {
    let keep = setup();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = cpu_ms();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let spent = cpu_ms() - before;
    drop(keep);
    spent
}

fn idle() {
    let no_pool = idle_cpu(|| ());
    let one_task = |net: bool| {
        move || {
            let pool = Arc::new(pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).expect("pool"));
            let net = net.then(|| pool::net::Net::install(&pool).expect("net"));
            pool.spawn_future(async {}).expect("spawn").join().expect("task");
            (pool, net)
        }
    };
    let ours = idle_cpu(one_task(false));
    let ours_net = idle_cpu(one_task(true));
    println!("idle CPU ms over 2 s: no pool {no_pool:.2}, pool {ours:.2}, pool with its I/O driver {ours_net:.2}");
}

/// One run of `server` in a process of its own: its µs per request.
fn run_child(server: &str, rest: &[String]) -> f64 {
    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe).arg(server).args(rest).output().expect("run a server");
    assert!(out.status.success(), "{server} run failed: {}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8_lossy(&out.stdout);
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("unexpected output {line:?}"))
}

fn pairs(n: usize, rest: &[String]) {
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0
    };
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let (p, t) = if i % 2 == 0 {
            let p = run_child("pool", rest);
            (p, run_child("tokio", rest))
        } else {
            let t = run_child("tokio", rest);
            (run_child("pool", rest), t)
        };
        ours.push(p);
        theirs.push(t);
        ratios.push(p / t);
    }
    let range = |v: &[f64]| (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
    let ((pl, ph), (tl, th)) = (range(&ours), range(&theirs));
    let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / n as f64).exp();
    println!(
        "{n} pairs, µs/request: pool {:.2} ({pl:.2}–{ph:.2}), tokio {:.2} ({tl:.2}–{th:.2}); pool ÷ tokio per pair: median {:.3}, geometric mean {geomean:.3}; pool faster in {} of {n}",
        median(&ours),
        median(&theirs),
        median(&ratios),
        ratios.iter().filter(|&&r| r < 1.0).count()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let server = args.get(1).map_or("pool", String::as_str);
    if server == "idle" {
        return idle();
    }
    if server == "pairs" {
        let n = args.get(2).and_then(|v| v.parse().ok()).filter(|&n| n > 0).expect("pairs N: N > 0");
        return pairs(n, &args[3..]);
    }
    let round_trips = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1_000);
    let threads = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(2);
    let (secs, extra) = match server {
        "pool" => ours(threads, round_trips),
        "tokio" => tokio(threads, round_trips),
        other => panic!("unknown server {other:?}: pool or tokio"),
    };
    let requests = (CONNECTIONS * round_trips) as f64;
    println!("{server:5} {:6.2} µs/request {:8.0} requests/s {extra}", secs * 1e6 / requests, requests / secs);
}
