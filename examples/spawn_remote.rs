//! spawn_remote from BENCH.md as a standalone program, for `valgrind --tool=callgrind`:
//! submit N tiny intrusive tasks from the main thread, wait for the last one.
//! Usage: spawn_remote [N] [threads]. Instructions per task = (Ir(N) - Ir(1)) / (N - 1).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::Thread;

use pool::{Config, Task, ThreadPool};

#[repr(C)]
struct Tiny {
    task: Task,
    shared: *const Shared,
}

struct Shared {
    remaining: AtomicUsize,
    counter: AtomicUsize,
    main: Thread,
}

unsafe extern "C" fn tiny(task: *mut Task) {
    // SAFETY: every task with this callback is the first field of a live `Tiny`.
    let shared = unsafe { &*(*task.cast::<Tiny>()).shared };
    shared.counter.fetch_add(1, Ordering::Relaxed);
    if shared.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        shared.main.unpark();
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1_000_000, |s| s.parse().expect("N"));
    let threads: usize = args.next().map_or(2, |s| s.parse().expect("threads"));
    let pool = ThreadPool::new(Config::default().with_max_threads(threads)).unwrap();
    let shared = Shared { remaining: AtomicUsize::new(n), counter: AtomicUsize::new(0), main: std::thread::current() };
    let mut tasks: Vec<Tiny> = (0..n).map(|_| Tiny { task: Task::new(tiny), shared: &shared }).collect();
    let start = std::time::Instant::now();
    for t in tasks.iter_mut() {
        // SAFETY: `tasks` outlives the run (we wait for every task below).
        unsafe { pool.submit(NonNull::from(&mut t.task)).unwrap() };
    }
    while shared.remaining.load(Ordering::Acquire) != 0 {
        std::thread::park();
    }
    let elapsed = start.elapsed();
    assert_eq!(shared.counter.load(Ordering::Relaxed), n);
    println!("{n} tasks on {threads} threads: {:.1} ns/task", elapsed.as_nanos() as f64 / n as f64);
}
