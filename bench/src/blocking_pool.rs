//! `blocking_pool`: the BENCH.md `blocking` workload (1,000 tasks, each sleeps 1 ms) on our
//! blocking pool, side by side with tokio's `spawn_blocking` (issue 6, item 6), at the same
//! thread cap and keep-alive.
//!
//! * Cap 512 for both: tokio's default `max_blocking_threads` and our default.
//! * Keep-alive 200 ms for both (both default to 10 s): short, so that every run starts with no
//!   blocking thread (the burst-from-idle case) and the return to zero is checked in every run
//!   without making the benchmark slow.
//! * Each run: the wall time from the first submit until the last task finished, and the peak
//!   number of OS threads the run added to the process (`Threads:` of /proc/self/status,
//!   sampled every 1 ms by a monitor thread, minus the threads alive before the run and the
//!   monitor itself; idle threads stay for the keep-alive, so a 1 ms sample sees the peak).
//! * After each run (not timed), the pool must go back to zero blocking threads within the
//!   keep-alive + 2 s, or the run panics: ours by its own count (`metrics().threads`) and by
//!   the OS count, tokio by the OS count. The time it took is printed on stderr.
//!
//! Rows: `pool` = `BlockingPool::submit` of intrusive `BlockingTask`s preallocated outside the
//! timed region; `pool(boxed)` = `BlockingPool::spawn_blocking` (one allocation per task, handle
//! dropped, as tokio's `JoinHandle` is); `tokio` = `Handle::spawn_blocking`.

use std::ptr::NonNull;
use std::time::{Duration, Instant};

use pool::{container_of, BlockingConfig, BlockingPool, BlockingTask, Task, ThreadSpawner};

use crate::common::*;
use crate::ours::{BOXED, INTRUSIVE};
use crate::Workload;

/// The thread cap of every pool in this workload.
pub const CAP: usize = 512;
/// The keep-alive of every pool in this workload (see the module docs).
pub const KEEP_ALIVE: Duration = Duration::from_millis(200);
/// How long after a run the pool may take to hold no blocking thread.
const ZERO_DEADLINE: Duration = Duration::from_millis(200 + 2_000);

pub fn workloads() -> Vec<Workload> {
    vec![Workload {
        name: "blocking_pool",
        unit: "ms",
        what: "1,000 tasks each sleep 1 ms on a blocking pool (cap 512, keep-alive 200 ms, each run from 0 threads)",
        warmup: true,
        extra: Some("peak OS threads added"),
        baseline: None,
        interleave: false,
        contenders,
    }]
}

fn contenders() -> Vec<Contender> {
    vec![
        Contender::new(INTRUSIVE, "BlockingPool::submit, BlockingTask array preallocated", |_| {
            let pool = ours();
            let shared = Shared::leak(BLOCKING_TASKS);
            let mut tasks: Vec<Sleeper> =
                (0..BLOCKING_TASKS).map(|_| Sleeper { header: BlockingTask::new(sleeper), shared }).collect();
            Box::new(move || {
                let base = tasks.as_mut_ptr();
                let sample = measure(shared, || {
                    for i in 0..BLOCKING_TASKS {
                        // SAFETY: the array outlives the run, which ends when every task ran;
                        // the pointer is derived from the whole `Sleeper`.
                        let task = unsafe { NonNull::new_unchecked(&raw mut (*base.add(i)).header) };
                        // SAFETY: as above; the previous run's tasks have all started.
                        unsafe { pool.submit(task) }.expect("BlockingPool::submit");
                    }
                });
                back_to_zero_ours(&pool);
                sample
            })
        }),
        Contender::new(BOXED, "BlockingPool::spawn_blocking, handle dropped", |_| {
            let pool = ours();
            let shared = Shared::leak(BLOCKING_TASKS);
            Box::new(move || {
                let sample = measure(shared, || {
                    for _ in 0..BLOCKING_TASKS {
                        drop(
                            pool.spawn_blocking(move || {
                                std::thread::sleep(BLOCKING_SLEEP);
                                shared.tick();
                            })
                            .expect("spawn_blocking"),
                        );
                    }
                });
                back_to_zero_ours(&pool);
                sample
            })
        }),
        Contender::new("tokio", "Handle::spawn_blocking; max_blocking_threads 512, thread_keep_alive 200 ms", |threads| {
            let rt = Tokio(Some(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .max_blocking_threads(CAP)
                    .thread_keep_alive(KEEP_ALIVE)
                    .build()
                    .expect("tokio runtime"),
            ));
            let shared = Shared::leak(BLOCKING_TASKS);
            Box::new(move || {
                let handle = rt.0.as_ref().expect("runtime").handle().clone();
                let before = os_threads();
                let sample = measure(shared, || {
                    for _ in 0..BLOCKING_TASKS {
                        drop(handle.spawn_blocking(move || {
                            std::thread::sleep(BLOCKING_SLEEP);
                            shared.tick();
                        }));
                    }
                });
                let took = wait_until(ZERO_DEADLINE, || os_threads() <= before)
                    .unwrap_or_else(|| panic!("tokio: blocking threads still alive {ZERO_DEADLINE:?} after the run"));
                eprint!(" [0 after {:.0} ms]", took.as_secs_f64() * 1e3);
                sample
            })
        }),
    ]
}

fn ours() -> BlockingPool<ThreadSpawner> {
    BlockingPool::new(BlockingConfig::default().with_max_threads(CAP).with_keep_alive(KEEP_ALIVE))
        .expect("BlockingPool::new")
}

/// An intrusive blocking task: the header first, then what the callback needs.
#[repr(C)]
struct Sleeper {
    header: BlockingTask,
    shared: &'static Shared,
}

unsafe extern "C" fn sleeper(task: *mut Task) {
    // SAFETY: every task with this callback is the header of a live `Sleeper` (pointer derived
    // from the whole `Sleeper`); `shared` is leaked.
    let shared = unsafe { (*container_of!(task.cast::<BlockingTask>(), Sleeper, header)).shared };
    std::thread::sleep(BLOCKING_SLEEP);
    shared.tick();
}

/// One run: wall time of `submit_all` + waiting for the last task, and the peak number of OS
/// threads added to the process meanwhile.
fn measure(shared: &Shared, submit_all: impl FnOnce()) -> Sample {
    shared.reset();
    let before = os_threads();
    let monitor = ThreadMonitor::start();
    let (elapsed, ()) = time(|| {
        submit_all();
        shared.wait();
    });
    let peak = monitor.stop();
    shared.check();
    // The monitor thread itself is not the pool's.
    let added = peak.saturating_sub(before + 1);
    Sample { value: elapsed.as_secs_f64() * 1e3, extra: Some(added as f64) }
}

/// Our pool holds no thread again within the deadline: by its own count, then by the OS's
/// (its threads, named "pool-blocking", gone from /proc/self/task).
fn back_to_zero_ours(pool: &BlockingPool<ThreadSpawner>) {
    let took = wait_until(ZERO_DEADLINE, || pool.metrics().threads == 0)
        .unwrap_or_else(|| panic!("blocking pool: {:?} {ZERO_DEADLINE:?} after the run", pool.metrics()));
    wait_until(Duration::from_secs(1), || named_threads("pool-blocking") == 0).unwrap_or_else(|| {
        panic!("blocking pool: counts 0 threads, the OS still lists {}", named_threads("pool-blocking"))
    });
    eprint!(" [0 after {:.0} ms]", took.as_secs_f64() * 1e3);
}

/// Threads of this process whose name is `name` (/proc/self/task/*/comm).
fn named_threads(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|comm| comm.trim_end() == name)
                .count()
        })
        .unwrap_or(0)
}

/// Polls `done` every millisecond until it holds (returns how long that took) or `deadline`.
fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Some(start.elapsed())
}

/// Shuts the runtime down without waiting forever on anything left.
struct Tokio(Option<tokio::runtime::Runtime>);
impl Drop for Tokio {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}
