//! fib, qsort and tree sums: fork-join on rayon and chili against plain sequential code.
//!
//! Our pool's column takes the worker context once (`ThreadPool::install`) and passes it down
//! to `WorkerContext::join`, as chili's passes its `Scope`. [`bench_join`] is the join the
//! harness built from `submit_lifo` + `wait_for` before the library had one (`--bench-join`).

use std::cell::{RefCell, UnsafeCell};
use std::hint::black_box;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::rc::Rc;

use pool::{Signal, Task};

use crate::common::*;
use crate::ours::{OurPool, PoolBox, INTRUSIVE};

/// `--bench-join`: also run qsort with the harness's own join ([`bench_join`]), for comparison.
pub static BENCH_JOIN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A closure, its result and a completion [`Signal`], behind a task header; lives in the
/// stack frame of the thread that waits for it (no allocation).
#[repr(C)]
struct StackJob<F, R> {
    task: Task,
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
    signal: Signal,
}

impl<F: FnOnce() -> R + Send, R: Send> StackJob<F, R> {
    fn new(f: F) -> Self {
        StackJob { task: Task::new(Self::run), f: UnsafeCell::new(Some(f)), result: UnsafeCell::new(None), signal: Signal::new() }
    }

    unsafe extern "C" fn run(task: *mut Task) {
        // SAFETY: `task` is the first field of a repr(C) StackJob<F, R> that stays alive until
        // its signal is set (the owner waits with `wait_for`); the callback runs once.
        unsafe {
            let job = &*task.cast::<StackJob<F, R>>();
            let f = (*job.f.get()).take().expect("job ran twice");
            *job.result.get() = Some(catch_unwind(AssertUnwindSafe(f)));
            job.signal.set();
        }
    }

    /// Submits the job (LIFO slot from a worker, injector from elsewhere).
    ///
    /// # Safety
    /// The job must not move, and the caller must `wait` before it goes out of scope.
    unsafe fn submit(&self, pool: &OurPool) {
        // SAFETY: the caller's contract; the header's `next` is atomic, so a shared borrow is
        // enough for the pool to link it.
        unsafe { pool.submit_lifo(NonNull::from(&self.task)).expect("submit_lifo") };
    }

    fn wait(&self, pool: &OurPool) -> std::thread::Result<R> {
        pool.wait_for(&self.signal);
        // SAFETY: the signal is set: the callback finished writing the result.
        unsafe { (*self.result.get()).take().expect("job result") }
    }
}

/// Runs `f` on one of the pool's workers; the calling (non-worker) thread parks until done.
fn ours_install<F: FnOnce() -> R + Send, R: Send>(pool: &OurPool, f: F) -> R {
    let job = StackJob::new(f);
    // SAFETY: `job` stays in this frame until `wait` returns.
    unsafe { job.submit(pool) };
    match job.wait(pool) {
        Ok(r) => r,
        Err(p) => resume_unwind(p),
    }
}

/// The join the harness used before the library had one, from the public API: `b` as a
/// stack-allocated task submitted with `submit_lifo`, `a` inline, then `wait_for` helps until
/// `b` is done. Kept for comparison (`--bench-join`); fib(32) overflows a worker stack with it.
pub fn bench_join<A, B, RA, RB>(pool: &OurPool, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    if !pool.is_worker_thread() {
        return ours_install(pool, || bench_join(pool, a, b));
    }
    let job_b = StackJob::new(b);
    // SAFETY: `job_b` stays in this frame until `wait` returns below, panic or not.
    unsafe { job_b.submit(pool) };
    let ra = catch_unwind(AssertUnwindSafe(a));
    let rb = job_b.wait(pool);
    match (ra, rb) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(p), _) | (_, Err(p)) => resume_unwind(p),
    }
}

fn qsort_bench_join(pool: &OurPool, v: &mut [u32]) {
    if v.len() <= QSORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (l, r) = v.split_at_mut(mid);
    bench_join(pool, || qsort_bench_join(pool, l), || qsort_bench_join(pool, r));
}

// ---------------------------------------------------------------------------------------------
// fib(32), join at every level down to n < 2, no cutoff.

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn fib_chili(s: &mut chili::Scope<'_>, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = s.join(|s| fib_chili(s, n - 1), |s| fib_chili(s, n - 2));
    a + b
}

fn fib_ours(cx: &Cx, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = cx.join(|cx| fib_ours(cx, n - 1), |cx| fib_ours(cx, n - 2));
    a + b
}

/// Our pool's worker context (the handle `install` passes down; chili's `Scope`).
type Cx = pool::WorkerContext<pool::ThreadSpawner>;

const FIB_32: u64 = 2_178_309;

fn fib_sample(f: impl FnOnce(u64) -> u64) -> Sample {
    let (elapsed, r) = time(|| f(black_box(FIB_N)));
    assert_eq!(r, FIB_32, "fib({FIB_N})");
    Sample::millis(elapsed)
}

pub fn fib() -> Vec<Contender> {
    let mut v = vec![
        Contender::new("sequential", "plain recursive fib(32), one thread (the baseline)", |_| {
            Box::new(|| fib_sample(fib_seq))
        }),
        Contender::new("rayon", "rayon::join inside ThreadPool::install", |threads| {
            let pool = rayon_pool(threads);
            Box::new(move || fib_sample(|n| pool.install(|| fib_rayon(n))))
        }),
        Contender::new("chili", "Scope::join; thread_count = N (main thread + N-1 workers)", |threads| {
            let pool = chili_pool(threads);
            Box::new(move || {
                let mut scope = pool.scope();
                let s = fib_sample(|n| fib_chili(&mut scope, n));
                drop(scope);
                s
            })
        }),
    ];
    v.insert(1, Contender::new(INTRUSIVE, "WorkerContext::join inside ThreadPool::install", |threads| {
        let pool = PoolBox::new(threads);
        Box::new(move || fib_sample(|n| pool.get().install(|cx| fib_ours(cx, n)).expect("install")))
    }));
    v
}

// ---------------------------------------------------------------------------------------------
// qsort: 10M u32 from xorshift32(0xdeadbeef); join above 2048 elements, sort_unstable below.

fn qsort_rayon(v: &mut [u32]) {
    if v.len() <= QSORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (l, r) = v.split_at_mut(mid);
    rayon::join(|| qsort_rayon(l), || qsort_rayon(r));
}

fn qsort_chili(s: &mut chili::Scope<'_>, v: &mut [u32]) {
    if v.len() <= QSORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (l, r) = v.split_at_mut(mid);
    s.join(|s| qsort_chili(s, l), |s| qsort_chili(s, r));
}

fn qsort_ours(cx: &Cx, v: &mut [u32]) {
    if v.len() <= QSORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (l, r) = v.split_at_mut(mid);
    cx.join(|cx| qsort_ours(cx, l), |cx| qsort_ours(cx, r));
}

/// A workload's data, one copy for all its contenders: every contender sorts or multiplies in
/// the same memory. With a buffer each, the physical pages differ per contender, and with them
/// the cache-set conflicts of a power-of-two-strided matrix walk (and the page placement of a
/// 40 MB sort): a bias that holds for every run of one invocation and differs in the next.
struct OneCopy<T>(Rc<RefCell<T>>);

impl<T> Clone for OneCopy<T> {
    fn clone(&self) -> Self {
        OneCopy(Rc::clone(&self.0))
    }
}

impl<T> OneCopy<T> {
    fn new(data: T) -> Self {
        OneCopy(Rc::new(RefCell::new(data)))
    }

    /// The data, for one run (contenders run one at a time, on the harness's thread).
    fn get(&self) -> std::cell::RefMut<'_, T> {
        self.0.borrow_mut()
    }
}

/// The input (generated once, outside the timed region) and a work buffer that gets a fresh
/// copy before every run. One for every contender ([`OneCopy`]).
struct SortData {
    input: Vec<u32>,
    sum: u64,
    work: Vec<u32>,
}

impl SortData {
    fn new() -> Self {
        let input = xorshift32_vec(QSORT_SEED, QSORT_LEN);
        let sum = input.iter().map(|&x| x as u64).sum();
        let work = input.clone();
        SortData { input, sum, work }
    }

    fn sample(&mut self, sort: impl FnOnce(&mut [u32])) -> Sample {
        self.work.copy_from_slice(&self.input);
        let (elapsed, ()) = time(|| sort(&mut self.work));
        assert!(self.work.windows(2).all(|w| w[0] <= w[1]), "qsort: output not sorted");
        assert_eq!(self.work.iter().map(|&x| x as u64).sum::<u64>(), self.sum, "qsort: not a permutation");
        Sample::millis(elapsed)
    }
}

pub fn qsort() -> Vec<Contender> {
    let data = OneCopy::new(SortData::new());
    let mut v = vec![
        Contender::new("sequential", "slice::sort_unstable on the whole input (the baseline)", {
            let data = data.clone();
            move |_| {
                Box::new(move || data.get().sample(|v| v.sort_unstable()))
            }
        }),
        Contender::new(INTRUSIVE, "WorkerContext::join inside ThreadPool::install", {
            let data = data.clone();
            move |threads| {
                let pool = PoolBox::new(threads);
                Box::new(move || data.get().sample(|v| pool.get().install(|cx| qsort_ours(cx, v)).expect("install")))
            }
        }),
        Contender::new("rayon", "rayon::join inside ThreadPool::install", {
            let data = data.clone();
            move |threads| {
                let pool = rayon_pool(threads);
                Box::new(move || data.get().sample(|v| pool.install(|| qsort_rayon(v))))
            }
        }),
        Contender::new("chili", "Scope::join; thread_count = N (main thread + N-1 workers)", {
            let data = data.clone();
            move |threads| {
                let pool = chili_pool(threads);
                Box::new(move || {
                    let mut scope = pool.scope();
                    let s = data.get().sample(|v| qsort_chili(&mut scope, v));
                    drop(scope);
                    s
                })
            }
        }),
    ];
    if BENCH_JOIN.load(std::sync::atomic::Ordering::Relaxed) {
        v.insert(2, Contender::new("pool(bench-join)", "harness join: stack task + submit_lifo + wait_for", {
            let data = data.clone();
            move |threads| {
                let pool = PoolBox::new(threads);
                Box::new(move || data.get().sample(|v| qsort_bench_join(pool.get(), v)))
            }
        }));
    }
    v
}

fn rayon_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool")
}

fn chili_pool(threads: usize) -> chili::ThreadPool {
    chili::ThreadPool::with_config(chili::Config {
        thread_count: std::num::NonZero::new(threads),
        ..Default::default()
    })
}

// ---------------------------------------------------------------------------------------------
// tree_sum (spice's benchmark): a balanced binary tree, each node allocated after its children,
// summed with a join at every node; every contender visits the right subtree first.

/// A node of the tree: its value and the indices of its children (`NONE`: no child).
#[derive(Clone, Copy)]
struct Node {
    value: u64,
    left: u32,
    right: u32,
}

const NONE: u32 = u32::MAX;

/// The tree of `n` nodes with values 1..=n, stored children before parents (so a right-first
/// visit streams memory backwards from the root, the way the nodes were allocated).
struct Tree {
    nodes: Vec<Node>,
    root: u32,
    sum: u64,
}

impl Tree {
    fn new(n: usize) -> Self {
        fn build(nodes: &mut Vec<Node>, lo: u64, hi: u64) -> u32 {
            if lo >= hi {
                return NONE;
            }
            let mid = lo + (hi - lo) / 2;
            let left = build(nodes, lo, mid);
            let right = build(nodes, mid + 1, hi);
            nodes.push(Node { value: mid + 1, left, right });
            (nodes.len() - 1) as u32
        }
        let mut nodes = Vec::with_capacity(n);
        let root = build(&mut nodes, 0, n as u64);
        Tree { nodes, root, sum: n as u64 * (n as u64 + 1) / 2 }
    }

    fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }
}

fn tree_seq_right_first(t: &Tree, i: u32) -> u64 {
    if i == NONE {
        return 0;
    }
    let n = t.node(i);
    let r = tree_seq_right_first(t, n.right);
    let l = tree_seq_right_first(t, n.left);
    n.value + l + r
}

fn tree_seq_left_first(t: &Tree, i: u32) -> u64 {
    if i == NONE {
        return 0;
    }
    let n = t.node(i);
    let l = tree_seq_left_first(t, n.left);
    let r = tree_seq_left_first(t, n.right);
    n.value + l + r
}

fn tree_ours(cx: &Cx, t: &Tree, i: u32) -> u64 {
    if i == NONE {
        return 0;
    }
    let n = t.node(i);
    let (r, l) = cx.join(|cx| tree_ours(cx, t, n.right), |cx| tree_ours(cx, t, n.left));
    n.value + l + r
}

fn tree_rayon(t: &Tree, i: u32) -> u64 {
    if i == NONE {
        return 0;
    }
    let n = t.node(i);
    let (r, l) = rayon::join(|| tree_rayon(t, n.right), || tree_rayon(t, n.left));
    n.value + l + r
}

/// chili's `join` runs its second closure first: the right subtree goes second here.
fn tree_chili(s: &mut chili::Scope<'_>, t: &Tree, i: u32) -> u64 {
    if i == NONE {
        return 0;
    }
    let n = t.node(i);
    let (l, r) = s.join(|s| tree_chili(s, t, n.left), |s| tree_chili(s, t, n.right));
    n.value + l + r
}

/// The floor of this machine: two plain threads, each summing one subtree of the root
/// sequentially (no scheduler at all).
fn tree_two_threads(t: &Tree) -> u64 {
    let root = t.node(t.root);
    let (right, left) = std::thread::scope(|s| {
        let right = s.spawn(|| tree_seq_right_first(t, root.right));
        let left = tree_seq_right_first(t, root.left);
        (right.join().unwrap(), left)
    });
    root.value + left + right
}

/// `repeat` sums of `tree`, one sample; ns per node.
fn tree_sample(t: &Tree, repeat: usize, f: impl FnOnce() -> u64) -> Sample {
    let (elapsed, total) = time(f);
    assert_eq!(total, t.sum.wrapping_mul(repeat as u64), "tree_sum");
    Sample::per_item(elapsed, t.nodes.len() * repeat)
}

fn tree_contenders(nodes: usize, repeat: usize) -> Vec<Contender> {
    let tree = std::sync::Arc::new(Tree::new(nodes));
    let t = tree.clone();
    let mut v = vec![
        Contender::new("sequential", "the faster visiting order of the two, one thread (the baseline)", move |_| {
            let t = t.clone();
            Box::new(move || {
                let right = tree_sample(&t, repeat, || (0..repeat).map(|_| tree_seq_right_first(&t, black_box(t.root))).sum());
                let left = tree_sample(&t, repeat, || (0..repeat).map(|_| tree_seq_left_first(&t, black_box(t.root))).sum());
                if right.value <= left.value { right } else { left }
            })
        }),
    ];
    let t = tree.clone();
    v.push(Contender::new(INTRUSIVE, "WorkerContext::join, all repetitions inside one install", move |threads| {
        let pool = PoolBox::new(threads);
        let t = t.clone();
        Box::new(move || {
            tree_sample(&t, repeat, || {
                pool.get().install(|cx| (0..repeat).map(|_| tree_ours(cx, &t, black_box(t.root))).sum()).expect("install")
            })
        })
    }));
    let t = tree.clone();
    v.push(Contender::new("rayon", "rayon::join, all repetitions inside one install", move |threads| {
        let pool = rayon_pool(threads);
        let t = t.clone();
        Box::new(move || tree_sample(&t, repeat, || pool.install(|| (0..repeat).map(|_| tree_rayon(&t, black_box(t.root))).sum())))
    }));
    let t = tree.clone();
    v.push(Contender::new("chili", "Scope::join (second closure first), one scope", move |threads| {
        let pool = chili_pool(threads);
        let t = t.clone();
        Box::new(move || {
            let mut scope = pool.scope();
            let s = tree_sample(&t, repeat, || (0..repeat).map(|_| tree_chili(&mut scope, &t, black_box(t.root))).sum());
            drop(scope);
            s
        })
    }));
    if repeat == 1 {
        let t = tree.clone();
        v.push(Contender::new("two threads", "the floor: each root subtree summed by one plain thread", move |_| {
            let t = t.clone();
            Box::new(move || tree_sample(&t, 1, || tree_two_threads(&t)))
        }));
    }
    v
}

pub fn tree_sum() -> Vec<Contender> {
    tree_contenders(10_000_000, 1)
}

pub fn tree_sum_small() -> Vec<Contender> {
    tree_contenders(1_023, 10_000_000 / 1_023)
}

// ---------------------------------------------------------------------------------------------
// idle_cpu_ctx: process CPU time while a fork-join context is held open with no work.

/// CPU ms of the whole process over `IDLE`, measured by `hold` around its sleep.
fn ctx_idle_sample(hold: impl FnOnce(&(dyn Fn() -> f64 + Sync)) -> f64) -> Sample {
    let measure = || {
        let before = process_cpu();
        std::thread::sleep(IDLE);
        process_cpu() - before
    };
    Sample { value: hold(&|| measure().as_secs_f64() * 1e3), extra: None }
}

pub fn idle_cpu_ctx() -> Vec<Contender> {
    vec![
        Contender::new("no pool", "the floor: main thread sleeps, no pool exists", |_| Box::new(|| ctx_idle_sample(|m| m()))),
        Contender::new(INTRUSIVE, "inside ThreadPool::install (a worker holds its context), the other workers idle", |threads| {
            let pool = PoolBox::new(threads);
            Box::new(move || {
                pool.get().install(|cx| fib_ours(cx, 20)).expect("install");
                ctx_idle_sample(|m| pool.get().install(|_| m()).expect("install"))
            })
        }),
        Contender::new("chili", "inside a Scope held open (ThreadPool::scope), after one join", |threads| {
            let pool = chili_pool(threads);
            Box::new(move || {
                let mut scope = pool.scope();
                fib_chili(&mut scope, 20);
                let s = ctx_idle_sample(|m| m());
                drop(scope);
                s
            })
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// matmul: C = A·B, 1024×1024 f64, quadrant recursion with a join per split down to 64×64
// blocks (coarse work: latent joins must not lose to eager stealing).

fn mm_ours(cx: &Cx, c: View, a: View, b: View) {
    if c.n <= MM_BLOCK {
        return mm_block(c, a, b);
    }
    for k in 0..2 {
        cx.join(
            |cx| cx.join(|cx| mm_ours(cx, c.quad(0, 0), a.quad(0, k), b.quad(k, 0)), |cx| mm_ours(cx, c.quad(0, 1), a.quad(0, k), b.quad(k, 1))),
            |cx| cx.join(|cx| mm_ours(cx, c.quad(1, 0), a.quad(1, k), b.quad(k, 0)), |cx| mm_ours(cx, c.quad(1, 1), a.quad(1, k), b.quad(k, 1))),
        );
    }
}

fn mm_rayon(c: View, a: View, b: View) {
    if c.n <= MM_BLOCK {
        return mm_block(c, a, b);
    }
    for k in 0..2 {
        rayon::join(
            || rayon::join(|| mm_rayon(c.quad(0, 0), a.quad(0, k), b.quad(k, 0)), || mm_rayon(c.quad(0, 1), a.quad(0, k), b.quad(k, 1))),
            || rayon::join(|| mm_rayon(c.quad(1, 0), a.quad(1, k), b.quad(k, 0)), || mm_rayon(c.quad(1, 1), a.quad(1, k), b.quad(k, 1))),
        );
    }
}

fn mm_chili(s: &mut chili::Scope<'_>, c: View, a: View, b: View) {
    if c.n <= MM_BLOCK {
        return mm_block(c, a, b);
    }
    for k in 0..2 {
        s.join(
            |s| s.join(|s| mm_chili(s, c.quad(0, 0), a.quad(0, k), b.quad(k, 0)), |s| mm_chili(s, c.quad(0, 1), a.quad(0, k), b.quad(k, 1))),
            |s| s.join(|s| mm_chili(s, c.quad(1, 0), a.quad(1, k), b.quad(k, 0)), |s| mm_chili(s, c.quad(1, 1), a.quad(1, k), b.quad(k, 1))),
        );
    }
}

/// The matrices: A and B from xorshift32 (values in 0..1), C zeroed before each run; the
/// checksum of the sequential product checks every contender. One set for every contender
/// ([`OneCopy`]).
struct Matrices {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
    expect: f64,
}

impl Matrices {
    fn new() -> Self {
        let [a, b, c] = mm_matrices();
        let mut m = Matrices { a, b, c, expect: 0.0 };
        m.run(|c, a, b| mm_rec(c, a, b, &|f| (0..4).for_each(|q| f(q))));
        m.expect = m.c.iter().sum();
        m
    }

    fn run(&mut self, f: impl FnOnce(View, View, View)) {
        self.c.iter_mut().for_each(|x| *x = 0.0);
        let view = |v: &mut Vec<f64>| View { ptr: v.as_mut_ptr(), n: MM_N };
        let (c, a, b) = (view(&mut self.c), view(&mut self.a), view(&mut self.b));
        f(c, a, b);
    }

    fn sample(&mut self, f: impl FnOnce(View, View, View)) -> Sample {
        let (elapsed, ()) = time(|| self.run(f));
        let sum: f64 = self.c.iter().sum();
        assert!((sum - self.expect).abs() <= 1e-6 * self.expect.abs(), "matmul: checksum {sum} != {}", self.expect);
        Sample::millis(elapsed)
    }
}

pub fn matmul() -> Vec<Contender> {
    let m = OneCopy::new(Matrices::new());
    vec![
        Contender::new("sequential", "the same blocked recursion, one thread (the baseline)", {
            let m = m.clone();
            move |_| {
                Box::new(move || m.get().sample(|c, a, b| mm_rec(c, a, b, &|f| (0..4).for_each(|q| f(q)))))
            }
        }),
        Contender::new(INTRUSIVE, "WorkerContext::join inside ThreadPool::install", {
            let m = m.clone();
            move |threads| {
                let pool = PoolBox::new(threads);
                Box::new(move || m.get().sample(|c, a, b| pool.get().install(|cx| mm_ours(cx, c, a, b)).expect("install")))
            }
        }),
        Contender::new("rayon", "rayon::join inside ThreadPool::install", {
            let m = m.clone();
            move |threads| {
                let pool = rayon_pool(threads);
                Box::new(move || m.get().sample(|c, a, b| pool.install(|| mm_rayon(c, a, b))))
            }
        }),
        Contender::new("chili", "Scope::join; thread_count = N", {
            let m = m.clone();
            move |threads| {
                let pool = chili_pool(threads);
                Box::new(move || {
                    let mut scope = pool.scope();
                    let s = m.get().sample(|c, a, b| mm_chili(&mut scope, c, a, b));
                    drop(scope);
                    s
                })
            }
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// nqueens: count the solutions of 12-queens; a join over the placements of each row (a binary
// split of the columns) down to row 4, sequential below.

const NQ_N: u32 = 12;
const NQ_SPLIT_ROWS: u32 = 4;
const NQ_SOLUTIONS: u64 = 14_200;

/// Solutions below a partial board (bitmasks of attacked columns and diagonals), sequentially.
fn nq_seq(row: u32, cols: u32, d1: u32, d2: u32) -> u64 {
    if row == NQ_N {
        return 1;
    }
    let mut free = !(cols | d1 | d2) & ((1 << NQ_N) - 1);
    let mut n = 0;
    while free != 0 {
        let bit = free & free.wrapping_neg();
        free ^= bit;
        n += nq_seq(row + 1, cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1);
    }
    n
}

/// The placements of row `row` still free, as a bitmask, and how to place one.
fn nq_free(cols: u32, d1: u32, d2: u32) -> u32 {
    !(cols | d1 | d2) & ((1 << NQ_N) - 1)
}

/// Splits the free placements `free` in two halves (by count) and joins them, with `join`.
fn nq_split(free: u32) -> (u32, u32) {
    let half = free.count_ones() / 2;
    let mut low = 0;
    let mut rest = free;
    for _ in 0..half {
        let bit = rest & rest.wrapping_neg();
        low |= bit;
        rest ^= bit;
    }
    (low, rest)
}

fn nq_ours(cx: &Cx, row: u32, cols: u32, d1: u32, d2: u32, free: u32) -> u64 {
    if row >= NQ_SPLIT_ROWS {
        return nq_place(row, cols, d1, d2, free, &nq_seq);
    }
    if free.count_ones() <= 1 {
        return nq_place(row, cols, d1, d2, free, &|r, c, a, b| nq_ours(cx, r, c, a, b, nq_free(c, a, b)));
    }
    let (lo, hi) = nq_split(free);
    let (x, y) = cx.join(|cx| nq_ours(cx, row, cols, d1, d2, lo), |cx| nq_ours(cx, row, cols, d1, d2, hi));
    x + y
}

fn nq_rayon(row: u32, cols: u32, d1: u32, d2: u32, free: u32) -> u64 {
    if row >= NQ_SPLIT_ROWS {
        return nq_place(row, cols, d1, d2, free, &nq_seq);
    }
    if free.count_ones() <= 1 {
        return nq_place(row, cols, d1, d2, free, &|r, c, a, b| nq_rayon(r, c, a, b, nq_free(c, a, b)));
    }
    let (lo, hi) = nq_split(free);
    let (x, y) = rayon::join(|| nq_rayon(row, cols, d1, d2, lo), || nq_rayon(row, cols, d1, d2, hi));
    x + y
}

fn nq_chili(s: &mut chili::Scope<'_>, row: u32, cols: u32, d1: u32, d2: u32, free: u32) -> u64 {
    if row >= NQ_SPLIT_ROWS {
        return nq_place(row, cols, d1, d2, free, &nq_seq);
    }
    if free.count_ones() <= 1 {
        let mut n = 0;
        let mut f = free;
        while f != 0 {
            let bit = f & f.wrapping_neg();
            f ^= bit;
            let (c, a, b) = (cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1);
            n += nq_chili(s, row + 1, c, a, b, nq_free(c, a, b));
        }
        return n;
    }
    let (lo, hi) = nq_split(free);
    let (x, y) = s.join(|s| nq_chili(s, row, cols, d1, d2, lo), |s| nq_chili(s, row, cols, d1, d2, hi));
    x + y
}

/// Places each queen of `free` on row `row` and counts below with `below`.
fn nq_place(row: u32, cols: u32, d1: u32, d2: u32, free: u32, below: &dyn Fn(u32, u32, u32, u32) -> u64) -> u64 {
    let mut n = 0;
    let mut f = free;
    while f != 0 {
        let bit = f & f.wrapping_neg();
        f ^= bit;
        n += below(row + 1, cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1);
    }
    n
}

fn nq_sample(f: impl FnOnce() -> u64) -> Sample {
    let (elapsed, n) = time(f);
    assert_eq!(n, NQ_SOLUTIONS, "nqueens({NQ_N})");
    Sample::millis(elapsed)
}

pub fn nqueens() -> Vec<Contender> {
    let all = (1u32 << NQ_N) - 1;
    vec![
        Contender::new("sequential", "bitmask backtracking, one thread (the baseline)", |_| Box::new(|| nq_sample(|| nq_seq(0, 0, 0, 0)))),
        Contender::new(INTRUSIVE, "WorkerContext::join inside ThreadPool::install", move |threads| {
            let pool = PoolBox::new(threads);
            Box::new(move || nq_sample(|| pool.get().install(|cx| nq_ours(cx, 0, 0, 0, 0, all)).expect("install")))
        }),
        Contender::new("rayon", "rayon::join inside ThreadPool::install", move |threads| {
            let pool = rayon_pool(threads);
            Box::new(move || nq_sample(|| pool.install(|| nq_rayon(0, 0, 0, 0, all))))
        }),
        Contender::new("chili", "Scope::join; thread_count = N", move |threads| {
            let pool = chili_pool(threads);
            Box::new(move || {
                let mut scope = pool.scope();
                let s = nq_sample(|| nq_chili(&mut scope, 0, 0, 0, 0, all));
                drop(scope);
                s
            })
        }),
    ]
}
