//! Reproducer: a fork-join `join` built on the public API (`b` as a stack task submitted with
//! `submit_lifo`, `a` inline, `wait_for(&Signal)` helps until `b` is done) nests unrelated work.
//! A worker waiting in `wait_for` runs queued work that is not its own forks inside its own
//! frame, but only while at most half its stack is in use (bounded helping); after a few LIFO
//! pops in a row the slot's task goes to the back of the FIFO ring and the waiter runs the
//! *oldest* queued task (a big subtree), which joins and waits in turn.
//!
//! cargo run --release --manifest-path bench/Cargo.toml --example join_overflow -- [n] [stack_mib] [threads]
//!   n = 20: 773 nested wait_for calls on 1 thread, 483 on 2 (fib(20) needs depth 20)
//!   n = 32: never finishes: every worker waits, half its stack in use, for work only a free
//!           worker could run (it overflowed the stack before bounded helping).
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use pool::{Config, Signal, Task, ThreadPool, ThreadSpawner};

type Pool = ThreadPool<ThreadSpawner>;

#[repr(C)]
struct Job<F, R> {
    task: Task,
    f: UnsafeCell<Option<F>>,
    r: UnsafeCell<Option<R>>,
    done: Signal,
}

fn job<F: FnOnce() -> R, R>(f: F) -> Job<F, R> {
    Job { task: Task::new(run::<F, R>), f: UnsafeCell::new(Some(f)), r: UnsafeCell::new(None), done: Signal::new() }
}

unsafe extern "C" fn run<F: FnOnce() -> R, R>(t: *mut Task) {
    // SAFETY: `t` is the first field of a live repr(C) Job<F, R>; it runs once; the owner waits
    // for `done` before the job leaves its frame.
    unsafe {
        let j = &*t.cast::<Job<F, R>>();
        *j.r.get() = Some((*j.f.get()).take().unwrap()());
        j.done.set();
    }
}

thread_local! { static NESTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) }; }
static MAX_NESTED: AtomicUsize = AtomicUsize::new(0);

fn join<A, B, RA, RB>(p: &Pool, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let jb = job(b);
    // SAFETY: `jb` stays in this frame until `wait_for` returned.
    unsafe { p.submit_lifo(NonNull::from(&jb.task)).unwrap() };
    let ra = a();
    let d = NESTED.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    MAX_NESTED.fetch_max(d, Ordering::Relaxed);
    p.wait_for(&jb.done);
    NESTED.with(|n| n.set(n.get() - 1));
    // SAFETY: done is set: the result is written.
    (ra, unsafe { (*jb.r.get()).take().unwrap() })
}

fn fib(p: &Pool, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = join(p, || fib(p, n - 1), || fib(p, n - 2));
    a + b
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(20, |s| s.parse().unwrap());
    let stack_mib: usize = args.next().map_or(0, |s| s.parse().unwrap());
    let threads: usize = args.next().map_or(2, |s| s.parse().unwrap());
    let pool = Pool::new(Config::default().with_max_threads(threads).with_stack_size(stack_mib << 20)).unwrap();
    let p = &pool;
    let root = job(move || fib(p, n));
    let t = std::time::Instant::now();
    // SAFETY: `root` stays here until `wait_for` returned.
    unsafe { pool.submit(NonNull::from(&root.task)).unwrap() };
    pool.wait_for(&root.done);
    // SAFETY: done is set.
    let r = unsafe { (*root.r.get()).take().unwrap() };
    println!(
        "fib({n}) = {r} in {:?} on {threads} threads; deepest nesting of wait_for on one thread: {} (recursion depth {n})",
        t.elapsed(),
        MAX_NESTED.load(Ordering::Relaxed)
    );
}
