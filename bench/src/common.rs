//! What every workload shares: the tiny task's counter and completion signal, fixed sizes,
//! samples, and small helpers. Identical for every pool.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// BENCH.md fixed sizes.
pub const SPAWN_TASKS: usize = 1_000_000;
pub const BATCH_SIZE: usize = 256;
pub const PRODUCERS: usize = 8;
pub const PER_PRODUCER: usize = 125_000;
pub const CHAIN_HOPS: usize = 100_000;
pub const FIB_N: u64 = 32;
pub const QSORT_LEN: usize = 10_000_000;
pub const QSORT_CUTOFF: usize = 2_048;
pub const QSORT_SEED: u32 = 0xdead_beef;
pub const IDLE: Duration = Duration::from_secs(2);
/// idle_cpu: the pause between the one task and the measured window (the pool is "built and
/// warmed" when the window starts).
pub const SETTLE: Duration = Duration::from_millis(100);
pub const BLOCKING_TASKS: usize = 1_000;
pub const BLOCKING_SLEEP: Duration = Duration::from_millis(1);

/// Keeps the counter on its own cache lines, away from the signal's mutex.
#[repr(align(128))]
pub struct Padded<T>(pub T);

/// The state every tiny task touches: one relaxed `fetch_add` on `counter`; the task that
/// brings it to `target` signals the waiting main thread (Mutex + Condvar, same for all pools).
pub struct Shared {
    counter: Padded<AtomicUsize>,
    target: usize,
    done: Mutex<bool>,
    cv: Condvar,
}

impl Shared {
    /// Leaked on purpose: closures capture a `&'static Shared` (8 bytes, no refcount traffic
    /// in the timed region). One per (workload, pool); reset between runs.
    pub fn leak(target: usize) -> &'static Shared {
        Box::leak(Box::new(Shared {
            counter: Padded(AtomicUsize::new(0)),
            target,
            done: Mutex::new(false),
            cv: Condvar::new(),
        }))
    }

    /// The tiny task's body. Returns true for the task that finished last (it has signalled).
    #[inline(always)]
    pub fn tick(&self) -> bool {
        let n = self.counter.0.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.target {
            self.signal();
            true
        } else {
            false
        }
    }

    #[cold]
    fn signal(&self) {
        *self.done.lock().unwrap() = true;
        self.cv.notify_one();
    }

    /// Blocks until the last task has signalled.
    pub fn wait(&self) {
        let mut done = self.done.lock().unwrap();
        while !*done {
            done = self.cv.wait(done).unwrap();
        }
    }

    /// Before a run (outside the timed region).
    pub fn reset(&self) {
        self.counter.0.store(0, Ordering::Relaxed);
        *self.done.lock().unwrap() = false;
    }

    /// After a run (outside the timed region): every task ran exactly once.
    pub fn check(&self) {
        let n = self.counter.0.load(Ordering::Relaxed);
        assert_eq!(n, self.target, "counter {n} after the run, expected {}", self.target);
    }
}

/// A raw pointer that may cross threads (the harness guarantees the pointee outlives use).
pub struct SendPtr<T>(pub *mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: only used for disjoint slices / pointees that outlive every user (see call sites).
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

/// One measured run: the figure in the workload's unit, plus an optional second figure
/// (peak OS threads for `blocking`).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub value: f64,
    pub extra: Option<f64>,
}

impl Sample {
    pub fn per_item(elapsed: Duration, items: usize) -> Self {
        Sample { value: elapsed.as_nanos() as f64 / items as f64, extra: None }
    }
    pub fn millis(elapsed: Duration) -> Self {
        Sample { value: elapsed.as_secs_f64() * 1e3, extra: None }
    }
}

/// Runs `f` between two clock reads.
#[inline]
pub fn time<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let start = Instant::now();
    let r = f();
    (start.elapsed(), r)
}

/// A measured run of one pool on one workload; dropping it drops the pool.
pub type Runner = Box<dyn FnMut() -> Sample>;

/// A contender: a label, a note for the table, and how to build its runner (pool built
/// outside every timed region).
pub struct Contender {
    pub pool: &'static str,
    pub note: &'static str,
    pub make: Box<dyn FnOnce(usize) -> Runner>,
}

impl Contender {
    pub fn new(pool: &'static str, note: &'static str, make: impl FnOnce(usize) -> Runner + 'static) -> Self {
        Contender { pool, note, make: Box::new(make) }
    }
}

/// Process CPU time (user + system, all threads) from getrusage(RUSAGE_SELF).
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let rc = libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        assert_eq!(rc, 0, "getrusage failed");
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The `Threads:` line of /proc/self/status.
pub fn os_threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Samples `os_threads` every millisecond on its own thread until stopped; reports the peak.
pub struct ThreadMonitor {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<usize>,
}

impl ThreadMonitor {
    pub fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("thread-monitor".into())
            .spawn(move || {
                let mut peak = 0;
                while !flag.load(Ordering::Relaxed) {
                    peak = peak.max(os_threads());
                    std::thread::sleep(Duration::from_millis(1));
                }
                peak.max(os_threads())
            })
            .expect("monitor thread");
        ThreadMonitor { stop, handle }
    }

    pub fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("monitor")
    }
}

/// Branchless Lomuto partition around the median of first / middle / last (the code of
/// `examples/fib_qsort.rs`; every pool's row calls this one function, so the ratios compare
/// scheduling, not partitioning). Returns `mid` with `0 < mid < len`, every element of
/// `v[..mid]` <= every element of `v[mid..]` (the pivot ends at `mid - 1`).
///
/// Branchless because a branchy scan (Hoare's, used here before) mispredicts on about half of
/// the elements of random input: its partitions cost more than `sort_unstable`'s own, and no
/// pool could reach a speed-up over `sort_unstable` on 2 cores (every row was 1.3-1.8x slower).
pub fn partition(v: &mut [u32]) -> usize {
    let last = v.len() - 1;
    let mid = v.len() / 2;
    // Sort first / middle / last, then move the median to `last`: the maximum of the three
    // (now at `mid`) is >= the pivot, so at least one element goes right (`mid < len`).
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
    store + 1
}

/// xorshift32 (13, 17, 5), the values after each step.
pub fn xorshift32_vec(seed: u32, len: usize) -> Vec<u32> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

/// matmul's size: C = A·B, `MM_N`×`MM_N` f64, recursion by quadrants down to `MM_BLOCK`².
pub const MM_N: usize = 1024;
pub const MM_BLOCK: usize = 64;

/// matmul's input matrices A and B (xorshift32 seeds 1 and 2, values in 0..1) and a zeroed C.
pub fn mm_matrices() -> [Vec<f64>; 3] {
    let matrix = |seed| xorshift32_vec(seed, MM_N * MM_N).into_iter().map(|x| f64::from(x) / f64::from(u32::MAX)).collect();
    [matrix(1), matrix(2), vec![0.0; MM_N * MM_N]]
}

/// A square view into a row-major `MM_N`-wide matrix.
#[derive(Clone, Copy)]
pub struct View {
    pub ptr: *mut f64,
    pub n: usize,
}

// SAFETY: views handed to two joined halves never overlap where either writes (the quadrants of
// C are disjoint; A and B are only read).
unsafe impl Send for View {}
// SAFETY: as above.
unsafe impl Sync for View {}

impl View {
    pub fn quad(self, r: usize, c: usize) -> View {
        let h = self.n / 2;
        // SAFETY: inside the matrix (r, c in 0..2, h = n / 2).
        View { ptr: unsafe { self.ptr.add(r * h * MM_N + c * h) }, n: h }
    }
}

/// c += a·b on one block, sequentially (i-k-j order).
pub fn mm_block(c: View, a: View, b: View) {
    for i in 0..c.n {
        for k in 0..c.n {
            // SAFETY: inside the views (i, k < n).
            let aik = unsafe { *a.ptr.add(i * MM_N + k) };
            for j in 0..c.n {
                // SAFETY: as above.
                unsafe { *c.ptr.add(i * MM_N + j) += aik * *b.ptr.add(k * MM_N + j) };
            }
        }
    }
}

/// c += a·b by quadrants: the four products of each half run in parallel through `join4`.
pub fn mm_rec(c: View, a: View, b: View, join4: &(dyn Fn(&mut dyn FnMut(usize)) + Sync)) {
    if c.n <= MM_BLOCK {
        return mm_block(c, a, b);
    }
    for k in 0..2 {
        join4(&mut |q| {
            let (r, col) = (q / 2, q % 2);
            mm_rec(c.quad(r, col), a.quad(r, k), b.quad(k, col), join4)
        });
    }
}

/// Median, min, max of a non-empty slice.
pub fn stats(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (median, v[0], v[n - 1])
}

/// multi_producer: starts `PRODUCERS` threads (outside the timed region), waits until all are
/// ready, then starts the clock and releases them at once; `body(p)` submits producer `p`'s
/// share. Returns the time from release until the last task signalled.
pub fn producers(shared: &Shared, body: impl Fn(usize) + Sync) -> Duration {
    let gate = std::sync::RwLock::new(());
    let ready = AtomicUsize::new(0);
    let closed = gate.write().unwrap();
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let (gate, ready, body) = (&gate, &ready, &body);
            s.spawn(move || {
                ready.fetch_add(1, Ordering::Release);
                drop(gate.read().unwrap());
                body(p);
            });
        }
        while ready.load(Ordering::Acquire) < PRODUCERS {
            std::thread::yield_now();
        }
        let start = Instant::now();
        drop(closed);
        shared.wait();
        start.elapsed()
    })
}

/// idle_cpu: after `one_task` ran one tiny task to completion, the process CPU time spent
/// during `IDLE` of sleeping on the main thread, in ms.
pub fn idle_sample(one_task: impl FnOnce()) -> Sample {
    one_task();
    // Warmed: threads the task's wake-up cascade started finish starting before the window.
    std::thread::sleep(SETTLE);
    let before = process_cpu();
    std::thread::sleep(IDLE);
    let after = process_cpu();
    Sample::millis(after - before)
}

/// blocking: wall time of `submit_all` + waiting for the last task, with the peak OS thread
/// count sampled by a monitor thread.
pub fn blocking_sample(shared: &Shared, submit_all: impl FnOnce()) -> Sample {
    shared.reset();
    let monitor = ThreadMonitor::start();
    let (elapsed, ()) = time(|| {
        submit_all();
        shared.wait();
    });
    let peak = monitor.stop();
    shared.check();
    Sample { value: elapsed.as_secs_f64() * 1e3, extra: Some(peak as f64) }
}

/// Busy and total jiffies of the whole machine (/proc/stat), and this process's own CPU
/// jiffies (/proc/self/stat utime + stime).
fn cpu_jiffies() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let total: u64 = cpu.iter().take(8).sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    let me = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the ")" that closes the command name: state is field 3; utime 14, stime 15.
    let rest: Vec<&str> = me.rsplit_once(')')?.1.split_whitespace().collect();
    let own = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
    Some((total - idle, total, own))
}

/// Fraction of the machine's CPU used by *other* processes over `window`.
pub fn foreign_load(window: Duration) -> Option<f64> {
    let (b0, t0, o0) = cpu_jiffies()?;
    std::thread::sleep(window);
    let (b1, t1, o1) = cpu_jiffies()?;
    let total = t1.saturating_sub(t0);
    if total == 0 {
        return None;
    }
    let foreign = (b1.saturating_sub(b0)).saturating_sub(o1.saturating_sub(o0));
    Some(foreign as f64 / total as f64)
}

/// Waits (up to `max`) until other processes use less than `threshold` of the machine's CPU.
/// Returns how long it waited, or None if the machine never got quiet within `max`.
pub fn wait_quiet(threshold: f64, max: Duration) -> Option<Duration> {
    let start = Instant::now();
    loop {
        match foreign_load(Duration::from_millis(250)) {
            Some(load) if load >= threshold => {}
            _ => return Some(start.elapsed()),
        }
        if start.elapsed() >= max {
            return None;
        }
    }
}
