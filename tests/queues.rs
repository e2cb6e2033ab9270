//! Queues (`pool::Queue`, issue 27 item 2): width, FIFO start, exact-once, bound, cancel,
//! suspension, wait from inside, drop's hand-back, a closure's panic.
//!
//! Every test runs its body under a watchdog (a stranded task fails in seconds instead of
//! hanging) and counts every task's runs with a per-task counter (exactly once, or never for a
//! cancelled one). Tasks that must block wait on a `Gate` the test opens a permit at a time.

mod common;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::queue_probe::{eventually, jobs, pool, task_of, watchdog, Job, Probe};
use pool::{container_of, Error, Queue, QueueConfig, Task, ThreadPool, ThreadSpawner};

/// Widths 1, 2, 3 on pools of 1, 2, 4 and 8 threads: with blocking tasks released one at a time,
/// exactly min(width, threads) run at every quiescent point, never more than the width, the
/// tasks started so far are always the oldest ones (FIFO start), and each runs exactly once.
#[test]
fn width_bounds_concurrency_and_starts_fifo() {
    watchdog("width", 60, || {
        for threads in [1, 2, 4, 8] {
            let pool = pool(threads);
            for width in [1, 2, 3] {
                let probe = Arc::new(Probe::default());
                let jobs = jobs(24, &probe, |_| true);
                // A width is at most the pool's thread count.
                assert_eq!(Queue::new(&pool, QueueConfig::new(threads + 1)).unwrap_err(), Error::InvalidArgument);
                let width = width.min(threads);
                let queue = Queue::new(&pool, QueueConfig::new(width)).unwrap();
                for i in 0..jobs.len() {
                    // SAFETY: the jobs outlive the queue's wait below.
                    unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
                }
                let expect = width;
                for released in 0..jobs.len() {
                    let want = (released + expect).min(jobs.len());
                    eventually("the width's worth of tasks running", || probe.started.lock().unwrap().len() == want);
                    let started = probe.started.lock().unwrap().clone();
                    let mut sorted = started.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..want).collect::<Vec<_>>(), "threads {threads} width {width}: not the oldest tasks");
                    if width == 1 {
                        assert_eq!(started, sorted, "a serial queue starts strictly in order");
                    }
                    // The last released task may still be on its way out.
                    eventually("min(width, threads) running", || probe.active.load(Ordering::SeqCst) == want - released);
                    probe.gate.open(1);
                }
                queue.wait().unwrap();
                assert!(probe.max.load(Ordering::SeqCst) <= width, "threads {threads} width {width}: over the width");
                assert_eq!(probe.max.load(Ordering::SeqCst), expect, "threads {threads} width {width}: never reached");
                assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1), "exactly once");
            }
        }
    });
}

/// Quick tasks through several queues of one pool at once: exact-once, and a serial queue's
/// tasks start in order whatever the others do.
#[test]
fn many_queues_share_a_pool_exactly_once_in_order() {
    watchdog("many", 60, || {
        let pool = pool(4);
        let probes: Vec<Arc<Probe>> = (0..4).map(|_| Arc::new(Probe::default())).collect();
        let all: Vec<Vec<Job>> = probes.iter().map(|p| jobs(2000, p, |_| false)).collect();
        let queues: Vec<Queue<'_, _>> = (0..4).map(|q| Queue::new(&pool, QueueConfig::new(if q == 0 { 1 } else { q })).unwrap()).collect();
        thread::scope(|s| {
            for (q, jobs) in queues.iter().zip(all.iter()) {
                s.spawn(move || {
                    for i in 0..jobs.len() {
                        // SAFETY: the jobs outlive the waits below.
                        unsafe { q.try_submit(task_of(jobs, i)).unwrap() };
                    }
                });
            }
        });
        for q in &queues {
            q.wait().unwrap();
        }
        for (q, jobs) in all.iter().enumerate() {
            assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1), "queue {q}: exactly once");
            assert!(probes[q].max.load(Ordering::SeqCst) <= q.max(1), "queue {q}: over its width");
        }
        let started = probes[0].started.lock().unwrap().clone();
        assert_eq!(started, (0..2000).collect::<Vec<_>>(), "the serial queue started in order");
    });
}

/// A serial queue with 1,000 waiting tasks (the first one blocked) holds one thread: the
/// pool's 3 others run 3 plain tasks at once meanwhile.
#[test]
fn serial_queue_leaves_other_threads_free() {
    watchdog("free", 30, || {
        let pool = pool(4);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(1000, &probe, |i| i == 0);
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        for i in 0..jobs.len() {
            // SAFETY: the jobs outlive the queue's wait below.
            unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
        }
        eventually("the first task blocks", || probe.active.load(Ordering::SeqCst) == 1);
        let barrier = Arc::new(Barrier::new(4));
        for _ in 0..3 {
            let b = barrier.clone();
            pool.spawn(move || {
                b.wait();
            })
            .unwrap();
        }
        barrier.wait(); // three plain tasks ran at once beside the queue's blocked one
        assert_eq!(queue.stats().waiting, 999);
        probe.gate.open(1);
        queue.wait().unwrap();
        assert_eq!(*probe.started.lock().unwrap(), (0..1000).collect::<Vec<_>>());
        assert_eq!(probe.max.load(Ordering::SeqCst), 1);
    });
}

/// The scenario on a width-4 queue of a 4-thread pool: 4 blockers, then 16 quick
/// tasks. No quick task starts before every blocker has started (and while they block, none
/// starts at all); cancelling all 16 succeeds, none runs, and a second cancel, or a cancel of a
/// blocker, is `Busy`.
#[test]
fn blockers_then_quick_tasks_cancel_before_start() {
    watchdog("blockers", 30, || {
        for _round in 0..20 {
            let pool = pool(4);
            let probe = Arc::new(Probe::default());
            let jobs = jobs(20, &probe, |i| i < 4);
            let queue = Queue::new(&pool, QueueConfig::new(4)).unwrap();
            for i in 0..jobs.len() {
                // SAFETY: the jobs outlive the queue's wait below.
                unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
            }
            eventually("4 blockers started", || probe.active.load(Ordering::SeqCst) == 4);
            thread::sleep(Duration::from_millis(2));
            let mut started = probe.started.lock().unwrap().clone();
            started.sort_unstable();
            assert_eq!(started, vec![0, 1, 2, 3], "a quick task started beside the blockers");
            assert_eq!(queue.stats().waiting, 16);
            for i in 4..20 {
                assert_eq!(queue.cancel(task_of(&jobs, i)), Ok(()), "quick task {i}");
            }
            let stats = queue.stats();
            assert_eq!((stats.waiting, stats.running, stats.started, stats.cancelled), (0, 4, 4, 16));
            assert_eq!(queue.cancel(task_of(&jobs, 4)), Err(Error::Busy), "cancelled twice");
            assert_eq!(queue.cancel(task_of(&jobs, 0)), Err(Error::Busy), "a running task");
            // The cancelled jobs are the caller's at once: reuse one as a fresh submit.
            // SAFETY: cancelled, so queued nowhere; it outlives the wait below.
            unsafe { queue.try_submit(task_of(&jobs, 19)).unwrap() };
            probe.gate.open(4);
            queue.wait().unwrap();
            let runs: Vec<usize> = jobs.iter().map(|j| j.runs.load(Ordering::SeqCst)).collect();
            assert_eq!(&runs[..4], &[1, 1, 1, 1]);
            assert!(runs[4..19].iter().all(|&r| r == 0), "a cancelled task ran: {runs:?}");
            assert_eq!(runs[19], 1, "resubmitted after its cancel");
        }
    });
}

/// A bounded queue (bound 4, width 1, its first task blocked): from two submitting threads,
/// accepted + refused = attempts, the waiting count never exceeds the bound, a refused task
/// is untouched (submitted again later it runs once), and a started task frees its place.
#[test]
fn bounded_queue_refuses_when_full() {
    watchdog("bounded", 30, || {
        let pool = pool(2);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(202, &probe, |i| i == 0);
        let queue = Queue::new(&pool, QueueConfig::new(1).with_bound(4)).unwrap();
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe { queue.try_submit(task_of(&jobs, 0)).unwrap() };
        eventually("the first task blocks", || probe.active.load(Ordering::SeqCst) == 1);
        let (left, right) = jobs[1..].split_at(101);
        let tallies: Vec<(usize, usize, Vec<usize>)> = thread::scope(|s| {
            let hs: Vec<_> = [left, right]
                .into_iter()
                .map(|half| {
                    let queue = &queue;
                    s.spawn(move || {
                        let (mut ok, mut full, mut refused) = (0, 0, Vec::new());
                        for i in 0..half.len() {
                            // SAFETY: as above.
                            match unsafe { queue.try_submit(task_of(half, i)) } {
                                Ok(()) => ok += 1,
                                Err(Error::Full) => {
                                    full += 1;
                                    refused.push(i);
                                }
                                Err(e) => panic!("{e:?}"),
                            }
                            assert!(queue.stats().waiting <= 4, "over the bound");
                        }
                        (ok, full, refused)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let accepted: usize = tallies.iter().map(|t| t.0).sum();
        let refused: usize = tallies.iter().map(|t| t.1).sum();
        assert_eq!(accepted + refused, 201);
        assert_eq!(accepted, 4, "the blocked task holds the width: exactly the bound waits");
        let stats = queue.stats();
        assert_eq!((stats.waiting, stats.running, stats.started, stats.refused, stats.bound), (4, 1, 1, refused, 4));
        probe.gate.open(1);
        queue.wait().unwrap();
        // A place frees as tasks start: a refused job, untouched, is accepted now and runs once.
        // SAFETY: refused, so queued nowhere; it outlives the wait below.
        unsafe { queue.try_submit(task_of(&jobs, 1 + tallies[0].2[0])).unwrap() };
        queue.wait().unwrap();
        let ran = jobs.iter().filter(|j| j.runs.load(Ordering::SeqCst) == 1).count();
        assert_eq!(ran, 1 + 4 + 1);
        assert_eq!((queue.stats().started, queue.stats().cancelled), (ran, 0));
        assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) <= 1));
    });
}

/// Width 0 holds every task (none runs, however long) until widened; then all run in order.
#[test]
fn suspended_queue_holds_every_task_until_widened() {
    watchdog("suspended", 30, || {
        let pool = pool(2);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(50, &probe, |_| false);
        let queue = Queue::new(&pool, QueueConfig::new(0)).unwrap();
        for i in 0..jobs.len() {
            // SAFETY: the jobs outlive the queue's wait below.
            unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
        }
        thread::sleep(Duration::from_millis(50));
        assert_eq!(probe.started.lock().unwrap().len(), 0);
        assert_eq!(queue.stats().waiting, 50);
        assert_eq!(queue.set_width(3), Err(Error::InvalidArgument), "above the pool's threads");
        queue.set_width(1).unwrap();
        queue.wait().unwrap();
        assert_eq!(*probe.started.lock().unwrap(), (0..50).collect::<Vec<_>>());
        assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1));
    });
}

/// A task that calls its own queue once it holds `full_at` waiting tasks: `wait`, then a
/// blocking submit of `child`.
#[repr(C)]
struct OwnCall {
    task: Task,
    queue: *const Queue<'static, ThreadSpawner>,
    full_at: usize,
    child: NonNull<Task>,
    wait: Mutex<Option<Result<(), Error>>>,
    submit: Mutex<Option<Result<(), Error>>>,
}

impl OwnCall {
    fn new(queue: &Queue<'static, ThreadSpawner>, full_at: usize, child: NonNull<Task>) -> Self {
        Self { task: Task::new(own_call), queue, full_at, child, wait: Mutex::new(None), submit: Mutex::new(None) }
    }
    fn task(&self) -> NonNull<Task> {
        NonNull::from(self).cast()
    }
}

unsafe extern "C" fn own_call(task: *mut Task) {
    // SAFETY: the `task` of a live `OwnCall`, whose queue outlives its tasks.
    let w = unsafe { &*container_of!(task, OwnCall, task) };
    // SAFETY: as above.
    let q = unsafe { &*w.queue };
    eventually("the queue holds its waiting tasks", || q.stats().waiting >= w.full_at);
    *w.wait.lock().unwrap() = Some(q.wait());
    // SAFETY: the child is a live job's task, queued nowhere.
    *w.submit.lock().unwrap() = Some(unsafe { q.submit_timeout(w.child, None) });
}

/// From a task of the queue, `wait` is refused (it would wait for itself), and so is a
/// blocking submit that finds a width-1 queue full: only the caller's own slot could free a
/// place. With room, the same submit is accepted as from anywhere.
#[test]
fn waits_from_a_task_of_the_queue_for_itself_are_refused() {
    watchdog("own task", 30, || {
        let pool: &'static ThreadPool<ThreadSpawner> = Box::leak(Box::new(pool(2)));
        let probe = Arc::new(Probe::default());
        let jobs = jobs(3, &probe, |_| false);
        let queue = Queue::new(pool, QueueConfig::new(1).with_bound(1)).unwrap();
        let own = OwnCall::new(&queue, 1, task_of(&jobs, 1));
        // SAFETY: `own` and `jobs` outlive the queue's wait below.
        unsafe { queue.try_submit(own.task()).unwrap() };
        eventually("the caller runs", || queue.stats().running == 1);
        // SAFETY: as above.
        unsafe { queue.try_submit(task_of(&jobs, 0)).unwrap() };
        queue.wait().unwrap();
        assert_eq!(*own.wait.lock().unwrap(), Some(Err(Error::InvalidArgument)));
        assert_eq!(*own.submit.lock().unwrap(), Some(Err(Error::InvalidArgument)), "full at width 1");
        assert_eq!((jobs[0].runs.load(Ordering::SeqCst), jobs[1].runs.load(Ordering::SeqCst)), (1, 0));

        let unbounded = Queue::new(pool, QueueConfig::new(1)).unwrap();
        let own = OwnCall::new(&unbounded, 0, task_of(&jobs, 2));
        // SAFETY: as above.
        unsafe { unbounded.try_submit(own.task()).unwrap() };
        unbounded.wait().unwrap();
        assert_eq!(*own.submit.lock().unwrap(), Some(Ok(())), "room: accepted");
        assert_eq!(jobs[2].runs.load(Ordering::SeqCst), 1);
    });
}

/// lz4's reader (`programs/lz4io.c`, `LZ4IO_readAndProcess`): a task that queues a work item
/// and then the next link of its own chain, both with a blocking submit, on the bounded pool
/// that runs it. Each link finds the queue full behind the slow work items and waits for the
/// place another runner frees; every item runs exactly once.
#[test]
fn a_task_waits_for_a_place_that_another_runner_frees() {
    const LINKS: usize = 40;
    #[repr(C)]
    struct Link {
        task: Task,
        i: usize,
        chain: *const Chain,
    }
    struct Chain {
        queue: *const Queue<'static, ThreadSpawner>,
        reads: Vec<Link>,
        works: Vec<Link>,
        runs: Vec<AtomicUsize>,
        found_full: AtomicUsize,
        errors: Mutex<Vec<Error>>,
    }
    unsafe extern "C" fn read(task: *mut Task) {
        // SAFETY: a `Link` of a live chain, whose queue outlives its tasks.
        let link = unsafe { &*container_of!(task, Link, task) };
        // SAFETY: as above.
        let (c, i) = (unsafe { &*link.chain }, link.i);
        // SAFETY: as above.
        let q = unsafe { &*c.queue };
        let mut next = vec![NonNull::from(&c.works[i]).cast::<Task>()];
        if i + 1 < LINKS {
            next.push(NonNull::from(&c.reads[i + 1]).cast());
        }
        for t in next {
            if q.stats().waiting >= 1 {
                c.found_full.fetch_add(1, Ordering::SeqCst);
            }
            // SAFETY: a link of the chain, queued nowhere.
            if let Err(e) = unsafe { q.submit_timeout(t, None) } {
                c.errors.lock().unwrap().push(e);
            }
        }
    }
    unsafe extern "C" fn work(task: *mut Task) {
        // SAFETY: as in `read`.
        let link = unsafe { &*container_of!(task, Link, task) };
        // SAFETY: as above.
        let c = unsafe { &*link.chain };
        thread::sleep(Duration::from_micros(300));
        c.runs[link.i].fetch_add(1, Ordering::SeqCst);
    }
    watchdog("lz4 chain", 60, || {
        for (threads, width) in [(2, 2), (4, 3)] {
            let pool: &'static ThreadPool<ThreadSpawner> = Box::leak(Box::new(pool(threads)));
            let queue = Queue::new(pool, QueueConfig::new(width).with_bound(1)).unwrap();
            let mut chain = Box::new(Chain {
                queue: &queue,
                reads: Vec::new(),
                works: Vec::new(),
                runs: (0..LINKS).map(|_| AtomicUsize::new(0)).collect(),
                found_full: AtomicUsize::new(0),
                errors: Mutex::new(Vec::new()),
            });
            let cp: *const Chain = &*chain;
            chain.reads = (0..LINKS).map(|i| Link { task: Task::new(read), i, chain: cp }).collect();
            chain.works = (0..LINKS).map(|i| Link { task: Task::new(work), i, chain: cp }).collect();
            // SAFETY: the chain outlives the queue's wait below.
            unsafe { queue.submit_timeout(NonNull::from(&chain.reads[0]).cast(), None).unwrap() };
            queue.wait().unwrap();
            assert_eq!(*chain.errors.lock().unwrap(), []);
            assert!(chain.runs.iter().all(|r| r.load(Ordering::SeqCst) == 1), "each work item exactly once");
            assert!(chain.found_full.load(Ordering::SeqCst) > 0, "the reader never found the queue full: nothing tested");
            assert_eq!(queue.stats().started, 2 * LINKS);
        }
    });
}

/// A task of the queue waiting for a place that another runner would free is refused as soon
/// as the queue is narrowed to 1: that runner ends after its task instead of taking the next.
#[test]
fn a_narrowing_to_one_ends_an_own_task_waiting_for_a_place() {
    watchdog("narrowing", 30, || {
        let pool: &'static ThreadPool<ThreadSpawner> = Box::leak(Box::new(pool(3)));
        let probe = Arc::new(Probe::default());
        let jobs = jobs(3, &probe, |i| i == 0);
        let queue = Queue::new(pool, QueueConfig::new(2).with_bound(1)).unwrap();
        let own = OwnCall::new(&queue, 1, task_of(&jobs, 2));
        // SAFETY: `own` and `jobs` outlive the queue's wait below.
        unsafe { queue.try_submit(task_of(&jobs, 0)).unwrap() };
        eventually("the blocker runs", || queue.stats().running == 1);
        // SAFETY: as above.
        unsafe { queue.try_submit(own.task()).unwrap() };
        eventually("both run", || queue.stats().running == 2);
        // SAFETY: as above.
        unsafe { queue.try_submit(task_of(&jobs, 1)).unwrap() };
        thread::sleep(Duration::from_millis(30));
        assert_eq!(*own.submit.lock().unwrap(), None, "it waits: the blocked task's runner will free a place");
        queue.set_width(1).unwrap();
        eventually("the waiting submit is refused", || own.submit.lock().unwrap().is_some());
        assert_eq!(*own.submit.lock().unwrap(), Some(Err(Error::InvalidArgument)));
        probe.gate.open(1);
        queue.wait().unwrap();
        let runs: Vec<usize> = jobs.iter().map(|j| j.runs.load(Ordering::SeqCst)).collect();
        assert_eq!(runs, [1, 1, 0]);
    });
}

static HANDED_BACK: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn hand_back(_task: *mut Task) {
    HANDED_BACK.fetch_add(1, Ordering::SeqCst);
}

/// Drop hands waiting tasks to the cancel callback (none runs), or runs them in order when
/// the queue has none; the running task finishes first.
#[test]
fn drop_hands_back_or_runs_waiting_tasks() {
    watchdog("drop", 30, || {
        let pool = pool(2);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(10, &probe, |i| i == 0);
        let queue = Queue::new(&pool, QueueConfig::new(1).with_cancel(hand_back)).unwrap();
        for i in 0..10 {
            // SAFETY: the jobs outlive the queue's drop below.
            unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
        }
        eventually("the first task blocks", || probe.active.load(Ordering::SeqCst) == 1);
        probe.gate.open(1);
        drop(queue);
        assert_eq!(jobs[0].runs.load(Ordering::SeqCst), 1, "the running task finished first");
        let ran = jobs.iter().filter(|j| j.runs.load(Ordering::SeqCst) == 1).count();
        assert_eq!(ran + HANDED_BACK.load(Ordering::SeqCst), 10, "each once: run or handed back");

        let probe = Arc::new(Probe::default());
        let jobs = super_jobs(&probe);
        let queue = Queue::new(&pool, QueueConfig::new(0)).unwrap();
        for i in 0..10 {
            // SAFETY: as above.
            unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
        }
        drop(queue);
        assert_eq!(*probe.started.lock().unwrap(), (0..10).collect::<Vec<_>>(), "run in order by the drop");
    });
}

fn super_jobs(probe: &Arc<Probe>) -> Vec<Job> {
    jobs(10, probe, |_| false)
}

/// A closure task that panics frees its width slot as one that returns: the serial queue
/// goes on with the next.
#[test]
fn a_panicking_closure_frees_its_width_slot() {
    watchdog("panic", 30, || {
        let pool = pool(2);
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let after = Arc::new(AtomicUsize::new(0));
        queue.spawn(|| panic!("a queue task's planned panic")).unwrap();
        let a = after.clone();
        queue.spawn(move || {
            a.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        queue.wait().unwrap();
        assert_eq!(after.load(Ordering::SeqCst), 1);
        assert_eq!(queue.stats().running, 0);
        let with_cancel = Queue::new(&pool, QueueConfig::new(1).with_cancel(hand_back)).unwrap();
        assert_eq!(with_cancel.spawn(|| ()), Err(Error::InvalidArgument));
    });
}

/// A blocking submit to a full queue (bound 1, width 1, its running task blocked, one task
/// waiting) times out with `Full` when no place frees, the task untouched; one without a
/// timeout is woken when the waiting task starts and is accepted; each task runs once.
#[test]
fn blocking_submit_wakes_on_a_freed_place_and_times_out_otherwise() {
    watchdog("blocking submit", 30, || {
        let pool = pool(2);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(3, &probe, |i| i == 0);
        let queue = Queue::new(&pool, QueueConfig::new(1).with_bound(1)).unwrap();
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe { queue.try_submit(task_of(&jobs, 0)).unwrap() };
        eventually("the first task blocks", || probe.active.load(Ordering::SeqCst) == 1);
        // SAFETY: as above.
        unsafe { queue.try_submit(task_of(&jobs, 1)).unwrap() };
        let t0 = Instant::now();
        // SAFETY: as above.
        let r = unsafe { queue.submit_timeout(task_of(&jobs, 2), Some(Duration::from_millis(30))) };
        assert_eq!(r, Err(Error::Full));
        assert!(t0.elapsed() >= Duration::from_millis(30), "returned before its timeout");
        let third = task_of(&jobs, 2).as_ptr() as usize;
        let accepted = AtomicUsize::new(0);
        thread::scope(|s| {
            let (queue, accepted) = (&queue, &accepted);
            s.spawn(move || {
                // SAFETY: as above.
                unsafe { queue.submit_timeout(NonNull::new(third as *mut Task).unwrap(), None).unwrap() };
                accepted.store(1, Ordering::SeqCst);
            });
            thread::sleep(Duration::from_millis(20));
            assert_eq!(accepted.load(Ordering::SeqCst), 0, "accepted while full");
            probe.gate.open(1); // the first finishes, the second starts: a place frees
        });
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        queue.wait().unwrap();
        assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1));
        assert_eq!(*probe.started.lock().unwrap(), vec![0, 1, 2]);
    });
}

/// A handoff queue (zstd's pool with `queueSize` 0) of width 2: two blocked tasks fill it
/// though none waits, so a third is refused; a blocking submit of it is woken when a running
/// task ends (no task starts then, which is what frees a place in a bounded queue), and after
/// a narrowing to 1, by the widening back to 2; each task runs once, in order.
#[test]
fn handoff_queue_accepts_only_what_can_start_at_once() {
    watchdog("handoff", 30, || {
        let pool = pool(2);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(4, &probe, |i| i < 2);
        let queue = Queue::new(&pool, QueueConfig::new(2).with_bound(QueueConfig::HANDOFF)).unwrap();
        for i in 0..2 {
            // SAFETY: the jobs outlive the queue's wait below.
            unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
        }
        eventually("both first tasks block", || probe.active.load(Ordering::SeqCst) == 2);
        // SAFETY: as above.
        assert_eq!(unsafe { queue.try_submit(task_of(&jobs, 2)) }, Err(Error::Full));
        let stats = queue.stats();
        assert_eq!((stats.bound, stats.waiting, stats.running, stats.refused), (QueueConfig::HANDOFF, 0, 2, 1));
        let accepted = AtomicUsize::new(0);
        let blocked_submit = |i: usize| {
            let task = task_of(&jobs, i).as_ptr() as usize;
            let (queue, accepted) = (&queue, &accepted);
            move || {
                // SAFETY: as above.
                unsafe { queue.submit_timeout(NonNull::new(task as *mut Task).unwrap(), None).unwrap() };
                accepted.fetch_add(1, Ordering::SeqCst);
            }
        };
        thread::scope(|s| {
            s.spawn(blocked_submit(2));
            thread::sleep(Duration::from_millis(20));
            assert_eq!(accepted.load(Ordering::SeqCst), 0, "accepted while full");
            probe.gate.open(1); // one blocked task ends: a slot frees, nothing starts
        });
        eventually("the third task ran", || jobs[2].runs.load(Ordering::SeqCst) == 1);
        queue.set_width(1).unwrap();
        thread::scope(|s| {
            s.spawn(blocked_submit(3));
            thread::sleep(Duration::from_millis(20));
            assert_eq!(accepted.load(Ordering::SeqCst), 1, "accepted while the last blocked task fills width 1");
            queue.set_width(2).unwrap();
        });
        eventually("the fourth task ran beside the blocked one", || jobs[3].runs.load(Ordering::SeqCst) == 1);
        assert_eq!(probe.active.load(Ordering::SeqCst), 1, "the other first task still blocks");
        probe.gate.open(1);
        queue.wait().unwrap();
        assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1));
        assert_eq!(*probe.started.lock().unwrap(), vec![0, 1, 2, 3]);
    });
}

/// Width changes (0 to 4) racing submits, cancels and waits on a 4-thread pool: each task
/// either was cancelled (and never ran) or ran exactly once; nothing is stranded once the
/// queue is widened again; the width in force is never exceeded by more than the tasks that
/// were running when it narrowed (checked at the end against the widest width, 4).
#[test]
fn width_changes_racing_submits_cancels_and_waits() {
    watchdog("racing widths", 60, || {
        let pool = pool(4);
        let probe = Arc::new(Probe::default());
        let jobs = jobs(4000, &probe, |_| false);
        let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
        let tasks: Vec<usize> = (0..jobs.len()).map(|i| task_of(&jobs, i).as_ptr() as usize).collect();
        let cancelled: Vec<AtomicUsize> = (0..jobs.len()).map(|_| AtomicUsize::new(0)).collect();
        let submitted = AtomicUsize::new(0);
        thread::scope(|s| {
            let (queue, tasks, cancelled, submitted) = (&queue, &tasks, &cancelled, &submitted);
            s.spawn(move || {
                for &t in tasks {
                    // SAFETY: the jobs outlive the queue's wait below.
                    unsafe { queue.try_submit(NonNull::new(t as *mut Task).unwrap()).unwrap() };
                    if submitted.fetch_add(1, Ordering::SeqCst) % 16 == 0 {
                        thread::yield_now();
                    }
                }
            });
            s.spawn(move || {
                let mut i = 7usize;
                while submitted.load(Ordering::SeqCst) < tasks.len() {
                    queue.set_width(i % 5).unwrap();
                    i = i.wrapping_mul(31).wrapping_add(11);
                    thread::yield_now();
                }
                queue.set_width(3).unwrap();
            });
            s.spawn(move || {
                let mut i = 0usize;
                loop {
                    let n = submitted.load(Ordering::SeqCst);
                    if n == tasks.len() {
                        break;
                    }
                    // Mostly the newest tasks (likely waiting), sometimes any (likely started).
                    let k = if i % 4 == 0 { (i * 7919) % tasks.len() } else { n.saturating_sub(1 + i % 8) };
                    if queue.cancel(NonNull::new(tasks[k] as *mut Task).unwrap()).is_ok() {
                        cancelled[k].fetch_add(1, Ordering::SeqCst);
                    }
                    i += 1;
                }
            });
            s.spawn(move || {
                while submitted.load(Ordering::SeqCst) < tasks.len() {
                    if queue.width() > 0 && queue.stats().waiting == 0 {
                        queue.wait().unwrap();
                    }
                    thread::yield_now();
                }
            });
        });
        queue.wait().unwrap();
        for (i, j) in jobs.iter().enumerate() {
            let (runs, c) = (j.runs.load(Ordering::SeqCst), cancelled[i].load(Ordering::SeqCst));
            assert_eq!(runs + c, 1, "task {i}: ran {runs} times, cancelled {c} times");
        }
        assert!(probe.max.load(Ordering::SeqCst) <= 4);
        assert_eq!((queue.stats().waiting, queue.stats().running), (0, 0));
        let c: usize = cancelled.iter().map(|c| c.load(Ordering::SeqCst)).sum();
        eprintln!("racing widths: {} ran, {c} cancelled", jobs.len() - c);
    });
}

/// A queue inherited through `fork()` follows its pool's rule: in the child, submits, cancels,
/// width changes and waits return `Forked` at once (its lock is never taken: a thread of the
/// parent may have held it), and its drop returns; the parent's queue is unaffected.
#[cfg(target_os = "linux")]
#[test]
fn an_inherited_queue_refuses_work_and_its_drop_returns() {
    let pool = pool(2);
    let probe = Arc::new(Probe::default());
    let jobs = jobs(6, &probe, |i| i == 0);
    let queue = Queue::new(&pool, QueueConfig::new(1)).unwrap();
    for i in 0..5 {
        // SAFETY: the jobs outlive the queue's wait below.
        unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
    }
    eventually("the first task blocks", || probe.active.load(Ordering::SeqCst) == 1);
    let (last, waiting) = (task_of(&jobs, 5), task_of(&jobs, 3));
    // SAFETY: the child runs only the checks below and then `_exit`s; its alarm bounds it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: async-signal-safe calls; the child never returns into the harness.
        unsafe { libc::alarm(20) };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: refused before the task is touched.
            let submit = unsafe { queue.try_submit(last) };
            // SAFETY: as above.
            let timed = unsafe { queue.submit_timeout(last, None) };
            let checks = [
                submit == Err(Error::Forked),
                timed == Err(Error::Forked),
                queue.cancel(waiting) == Err(Error::Forked),
                queue.set_width(2) == Err(Error::Forked),
                queue.wait() == Err(Error::Forked),
                queue.stats().waiting == 0,
            ];
            let t = Instant::now();
            drop(queue);
            checks.iter().all(|&c| c) && t.elapsed() < Duration::from_secs(5)
        }))
        .unwrap_or(false);
        // SAFETY: ends the child without the parent's atexit handlers or destructors.
        unsafe { libc::_exit(i32::from(!ok)) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's checks failed or hung: {status}");
    probe.gate.open(1);
    queue.wait().unwrap();
    assert!(jobs[..5].iter().all(|j| j.runs.load(Ordering::SeqCst) == 1));
}
