//! The worker context: `ThreadPool::install`, `WorkerContext::join` / `scope`, and
//! demand-driven promotion (an idle worker's request makes a busy worker offer a latent join).

use std::sync::atomic::{AtomicUsize, Ordering};

use pool::{Config, Error, ThreadPool, ThreadSpawner, WorkerContext};

type Cx = WorkerContext<ThreadSpawner>;

fn fib(cx: &Cx, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = cx.join(|cx| fib(cx, n - 1), |cx| fib(cx, n - 2));
    a + b
}

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn pool(threads: usize) -> ThreadPool<ThreadSpawner> {
    ThreadPool::new(Config::default().with_max_threads(threads)).unwrap()
}

#[test]
fn install_runs_on_a_worker_with_its_context() {
    for threads in [1, 2, 4] {
        let pool = pool(threads);
        let n = if cfg!(miri) { 10 } else { 24 };
        let (r, on_worker, index) = pool.install(|cx| (fib(cx, n), cx.pool().is_worker_thread(), cx.index())).unwrap();
        assert_eq!(r, fib_seq(n), "threads={threads}");
        assert!(on_worker);
        assert!(index < threads);
        // From inside, install runs directly on the same worker. (A context cannot be captured
        // by the closure: it is neither Send nor Sync. Its index can.)
        let nested = pool
            .install(|cx| {
                let index = cx.index();
                cx.pool().install(|inner| inner.index() == index).unwrap()
            })
            .unwrap();
        assert!(nested);
    }
}

#[test]
fn install_after_shutdown_is_an_error_and_does_not_run() {
    let pool = pool(2);
    pool.shutdown().unwrap();
    let ran = AtomicUsize::new(0);
    let r = pool.install(|_| ran.fetch_add(1, Ordering::Relaxed));
    assert_eq!(r, Err(Error::Shutdown));
    assert_eq!(ran.load(Ordering::Relaxed), 0);
}

#[test]
fn each_half_gets_the_context_of_the_worker_running_it() {
    let pool = pool(2);
    // Every half checks that the context it got is the one of the thread it runs on.
    fn check(cx: &Cx, depth: u32, wrong: &AtomicUsize) {
        let index = cx.index();
        if !cx.pool().install(|here| here.index() == index).unwrap() {
            wrong.fetch_add(1, Ordering::Relaxed);
        }
        if depth > 0 {
            cx.join(|cx| check(cx, depth - 1, wrong), |cx| check(cx, depth - 1, wrong));
        }
    }
    let wrong = AtomicUsize::new(0);
    pool.install(|cx| check(cx, if cfg!(miri) { 4 } else { 14 }, &wrong)).unwrap();
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
}

#[test]
fn an_idle_worker_gets_a_latent_join_offered() {
    if cfg!(miri) {
        return;
    }
    let pool = pool(2);
    // The second worker starts, finds nothing, raises the first one's hungry flag; the next
    // join on the first offers its oldest latent half, which the second steals. Bounded by a
    // count, not a time: on a loaded machine a round may finish before the thief runs.
    for round in 0.. {
        assert_eq!(pool.install(|cx| fib(cx, 25)).unwrap(), fib_seq(25));
        if pool.stats().steals > 0 {
            break;
        }
        assert!(round < 500, "no join half was ever stolen in 500 rounds of fib(25)");
    }
}

#[test]
fn scope_on_the_context_waits_for_its_spawns() {
    let pool = pool(2);
    let hits = AtomicUsize::new(0);
    pool.install(|cx| {
        cx.scope(|s| {
            for _ in 0..100 {
                s.spawn(|s| {
                    hits.fetch_add(1, Ordering::Relaxed);
                    s.spawn(|_| {
                        hits.fetch_add(1, Ordering::Relaxed);
                    });
                });
            }
        })
    })
    .unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), 200);
}

#[test]
fn deeper_than_the_frame_stack_still_exact() {
    // A left-deep chain of joins, deeper than the 64 frames a worker records: the deeper ones
    // run both halves inline.
    fn chain(cx: &Cx, n: u32) -> u64 {
        if n == 0 {
            return 0;
        }
        let (a, b) = cx.join(|cx| chain(cx, n - 1), |_| 1u64);
        a + b
    }
    let pool = pool(2);
    assert_eq!(pool.install(|cx| chain(cx, 500)).unwrap(), 500);
}

#[test]
fn a_panic_in_a_with_b_latent_drops_b_unrun_and_propagates() {
    let pool = pool(1);
    let b_ran = AtomicUsize::new(0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.install(|cx| {
            cx.join(
                |_| panic!("boom in a"),
                |_| {
                    b_ran.fetch_add(1, Ordering::Relaxed);
                },
            )
        })
    }));
    assert!(r.is_err());
    assert_eq!(b_ran.load(Ordering::Relaxed), 0, "b was dropped unrun");
    // The pool still works, and the frame stack is back at depth 0 (a later join is exact).
    assert_eq!(pool.install(|cx| fib(cx, 15)).unwrap(), fib_seq(15));
}

/// A forked task (`submit_fork`) bumps a counter and marks its latch done.
#[repr(C)]
struct Forked<'a> {
    task: pool::Task,
    hits: &'a AtomicUsize,
    latch: &'a pool::CountLatch,
}

unsafe extern "C" fn forked_run(task: *mut pool::Task) {
    // SAFETY: every task with this callback is the first field of a live `Forked`, whose latch
    // outlives the `done` (its waiter waits for it).
    let f = unsafe { &*task.cast::<Forked>() };
    f.hits.fetch_add(1, Ordering::Relaxed);
    // SAFETY: one `done` per unit added.
    unsafe { f.latch.done() };
}

/// `n` forks counting into `hits`, each marking `latch` done (which counts them).
fn forks<'a>(n: usize, hits: &'a AtomicUsize, latch: &'a pool::CountLatch) -> Vec<Forked<'a>> {
    latch.add(n);
    (0..n).map(|_| Forked { task: pool::Task::new(forked_run), hits, latch }).collect()
}

/// Forks `n` tasks from `forks` (their latch counts them) and waits for none.
fn fork_all(pool: &ThreadPool<ThreadSpawner>, forks: &mut [Forked<'_>]) {
    for f in forks.iter_mut() {
        let f: *mut Forked = f;
        // SAFETY: the tasks outlive their runs: the caller waits for the latch before they go.
        // The task pointer is projected from the whole `Forked`, which the callback reads.
        unsafe { pool.submit_fork(std::ptr::NonNull::new_unchecked(&raw mut (*f).task)).unwrap() };
    }
}

#[test]
fn forks_not_waited_for_inside_a_join_half_still_run() {
    // `a` forks tasks (latent frames above the join's own) and returns without waiting: the
    // join hands them to the deque before it pops its frame; the latch wait after finds them.
    for threads in [1, 2] {
        let pool = pool(threads);
        let (hits, latch, n) = (AtomicUsize::new(0), pool::CountLatch::new(), 10);
        let mut forks = forks(n, &hits, &latch);
        pool.install(|cx| {
            let ((), x) = cx.join(|_| fork_all(&pool, &mut forks), |cx| fib(cx, 10));
            assert_eq!(x, fib_seq(10));
            pool.wait_for_latch(&latch);
        })
        .unwrap();
        assert_eq!(hits.load(Ordering::Relaxed), n, "threads={threads}");
    }
}

#[test]
fn a_panic_after_forking_inside_a_join_half_strands_no_fork() {
    let pool = pool(1);
    let (hits, latch, n) = (AtomicUsize::new(0), pool::CountLatch::new(), 5);
    let mut forks = forks(n, &hits, &latch);
    pool.install(|cx| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cx.join(
                |_| {
                    fork_all(&pool, &mut forks);
                    panic!("after forking");
                },
                |_| 0,
            )
        }));
        assert!(caught.is_err());
        pool.wait_for_latch(&latch);
    })
    .unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), n);
}
