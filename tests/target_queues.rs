//! Queues on a target queue (`Queue::with_target`): a queue whose runners are tasks of another
//! queue, so two queues of one pool start their tasks in submission order across each other
//! (what libuv's thread pool needs for its slow-I/O cap beside `uv_cancel`), with each queue's
//! own width, FIFO start and exact-once kept.
//!
//! Every test runs under a watchdog and counts each task's runs (tests/common/queue_probe.rs).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::queue_probe::{eventually, jobs, pool, task_of, watchdog, Probe};
use pool::{Config, Error, Queue, QueueConfig, ThreadPool};

/// libuv's `threadpool_cancel_getaddrinfo` on a pool of 4: a queue as wide as the pool, and a
/// "slow" queue of width 2 on it. 4 blockers fill the wide queue, then slow and plain quick
/// tasks arrive: none of them starts while the blockers block (the slow queue's runner waits
/// behind them in the wide queue), so every one can still be cancelled, and none runs.
#[test]
fn a_task_behind_the_target_busy_slots_stays_cancellable() {
    watchdog("behind", 60, || {
        for _round in 0..20 {
            // Every thread started and parked first, as libuv's are: a woken worker then takes
            // a batch from the pool's injector and blocks in its first task.
            let pool = ThreadPool::new(Config::default().with_max_threads(4).with_min_threads(4)).unwrap();
            let all = Queue::new(&pool, QueueConfig::new(4)).unwrap();
            let slow = Queue::with_target(&all, QueueConfig::new(2)).unwrap();
            let probe = Arc::new(Probe::default());
            let jobs = jobs(12, &probe, |i| i < 4);
            for i in 0..12 {
                let queue = if i >= 4 && i % 2 == 0 { &slow } else { &all };
                // SAFETY: the jobs outlive the queues' waits below.
                unsafe { queue.try_submit(task_of(&jobs, i)).unwrap() };
            }
            eventually("4 blockers started", || probe.active.load(Ordering::SeqCst) == 4);
            thread::sleep(Duration::from_millis(2));
            let mut started = probe.started.lock().unwrap().clone();
            started.sort_unstable();
            assert_eq!(started, vec![0, 1, 2, 3], "a task started beside the blockers");
            assert_eq!(slow.stats().waiting, 4);
            for i in 4..12 {
                let queue = if i % 2 == 0 { &slow } else { &all };
                assert_eq!(queue.cancel(task_of(&jobs, i)), Ok(()), "task {i} started: not cancellable");
            }
            probe.gate.open(4);
            slow.wait().unwrap();
            all.wait().unwrap();
            let runs: Vec<usize> = jobs.iter().map(|j| j.runs.load(Ordering::SeqCst)).collect();
            assert_eq!(runs, [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0], "runs per task");
            assert_eq!(slow.stats().cancelled, 4);
        }
    });
}

/// A queue of width 2 on a target of width 3 (pool of 4): its blocking tasks run 2 at a time
/// and leave the target one slot, in which the target's own blocking task runs; the target's
/// next task waits until one of the 3 ends. Each queue starts its tasks in order (released a
/// permit at a time, so the recorded order is the queue's), each task runs once, and the
/// pool's fourth thread stays free for plain spawns.
#[test]
fn widths_nest() {
    watchdog("nest", 60, || {
        let pool = pool(4);
        let target = Queue::new(&pool, QueueConfig::new(3)).unwrap();
        let child = Queue::with_target(&target, QueueConfig::new(2)).unwrap();
        let child_probe = Arc::new(Probe::default());
        let target_probe = Arc::new(Probe::default());
        let child_jobs = jobs(8, &child_probe, |_| true);
        let target_jobs = jobs(4, &target_probe, |_| true);
        for i in 0..8 {
            // SAFETY: the jobs outlive the waits below.
            unsafe { child.try_submit(task_of(&child_jobs, i)).unwrap() };
        }
        eventually("2 child tasks run", || child_probe.active.load(Ordering::SeqCst) == 2);
        for i in 0..4 {
            // SAFETY: as above.
            unsafe { target.try_submit(task_of(&target_jobs, i)).unwrap() };
        }
        eventually("a target task runs", || target_probe.active.load(Ordering::SeqCst) == 1);
        thread::sleep(Duration::from_millis(2));
        assert_eq!((child_probe.active.load(Ordering::SeqCst), target_probe.active.load(Ordering::SeqCst)), (2, 1));
        let (t, c) = (target.stats(), child.stats());
        assert_eq!((t.running, t.waiting), (3, 3), "the target counts the child's 2 runners as running tasks");
        assert_eq!((c.running, c.waiting), (2, 6));
        let free = Arc::new(AtomicUsize::new(0));
        let f = free.clone();
        pool.spawn(move || {
            f.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        eventually("a plain spawn runs on the free thread", || free.load(Ordering::SeqCst) == 1);
        // One permit at a time, each new start awaited before the next: tasks of a queue of
        // width > 1 released together may record their starts out of the order the queue
        // started them in (a runner that took the older one can be descheduled before its
        // callback records it), so the order checked below is made observable this way.
        let started = |p: &Probe| p.started.lock().unwrap().len();
        for k in 3..=8 {
            child_probe.gate.open(1);
            eventually("a child task ends and the next starts in its place", || started(&child_probe) == k);
        }
        for k in 2..=3 {
            // A child runner finds nothing left and ends: its target slot takes the next target task.
            child_probe.gate.open(1);
            eventually("the target starts its next task in a freed slot", || started(&target_probe) == k);
        }
        target_probe.gate.open(1);
        eventually("the target's last task starts", || started(&target_probe) == 4);
        target_probe.gate.open(3);
        child.wait().unwrap();
        target.wait().unwrap();
        assert_eq!(child_probe.max.load(Ordering::SeqCst), 2, "the child's width");
        assert!(target_probe.max.load(Ordering::SeqCst) <= 3, "the target's width");
        assert_eq!(*child_probe.started.lock().unwrap(), (0..8).collect::<Vec<_>>(), "the child's FIFO start");
        assert_eq!(*target_probe.started.lock().unwrap(), (0..4).collect::<Vec<_>>(), "the target's FIFO start");
        assert!(child_jobs.iter().chain(&target_jobs).all(|j| j.runs.load(Ordering::SeqCst) == 1), "exactly once");
    });
}

/// Three queues (widths 1, 2, 3) on one target of width 3 on a pool of 4, each fed by its own
/// thread while the widths change: every task runs once, the serial one's in order, and the
/// target never runs more than 3 of its tasks (the children's runners) at once.
#[test]
fn many_queues_on_one_target_with_width_changes() {
    watchdog("many", 120, || {
        let pool = pool(4);
        let target = Queue::new(&pool, QueueConfig::new(3)).unwrap();
        let children: Vec<Queue<'_, _>> = (1..=3).map(|w| Queue::with_target(&target, QueueConfig::new(w)).unwrap()).collect();
        let probes: Vec<Arc<Probe>> = (0..3).map(|_| Arc::new(Probe::default())).collect();
        let n = common::scaled(3000).max(100);
        let all: Vec<_> = probes.iter().map(|p| jobs(n, p, |_| false)).collect();
        // The shared concurrency: the target's running count (each running child task is
        // inside one of the target's tasks, a child runner).
        let max_running = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        thread::scope(|s| {
            for (q, jobs) in children.iter().zip(all.iter()) {
                let done = &done;
                s.spawn(move || {
                    for i in 0..jobs.len() {
                        // SAFETY: the jobs outlive the waits below.
                        unsafe { q.try_submit(task_of(jobs, i)).unwrap() };
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
            let children = &children;
            let (done, max_running, target) = (&done, &max_running, &target);
            s.spawn(move || {
                let mut k = 0usize;
                while done.load(Ordering::SeqCst) < 3 {
                    children[1].set_width(1 + k % 2).unwrap();
                    children[2].set_width(k % 4).unwrap();
                    max_running.fetch_max(target.stats().running, Ordering::SeqCst);
                    k += 1;
                    thread::yield_now();
                }
                children[2].set_width(3).unwrap();
            });
        });
        for q in &children {
            q.wait().unwrap();
        }
        target.wait().unwrap();
        for (q, jobs) in all.iter().enumerate() {
            assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1), "queue {q}: exactly once");
        }
        assert_eq!(*probes[0].started.lock().unwrap(), (0..n).collect::<Vec<_>>(), "the serial queue's order");
        assert!(max_running.load(Ordering::SeqCst) <= 3, "the target ran over its width");
        assert_eq!(target.stats().waiting + target.stats().running, 0);
    });
}

/// The rules at the edges: a bounded queue cannot be a target; a wait or blocking submit on a
/// child from a task of its target is refused (it could wait for the slot it holds); so is a
/// wait on the target from a task of the child; a child made while the target is suspended
/// holds its tasks until the target is widened.
#[test]
fn the_rules_at_the_edges() {
    watchdog("edges", 30, || {
        let pool = pool(2);
        let bounded = Queue::new(&pool, QueueConfig::new(1).with_bound(4)).unwrap();
        assert_eq!(Queue::with_target(&bounded, QueueConfig::new(1)).unwrap_err(), Error::InvalidArgument);
        assert_eq!(Queue::with_target(&bounded, QueueConfig::new(1)).unwrap_err(), Error::InvalidArgument, "twice: nothing kept");
        drop(bounded);

        let target: &'static Queue<'static, _> = Box::leak(Box::new(Queue::new(Box::leak(Box::new(pool)), QueueConfig::new(0)).unwrap()));
        let child: &'static Queue<'static, _> = Box::leak(Box::new(Queue::with_target(target, QueueConfig::new(1)).unwrap()));
        assert_eq!(Queue::with_target(target, QueueConfig::new(3)).unwrap_err(), Error::InvalidArgument, "over the pool's threads");
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        child.spawn(move || s.lock().unwrap().push(("child waits on target", target.wait()))).unwrap();
        let s = seen.clone();
        target.spawn(move || s.lock().unwrap().push(("target task waits on child", child.wait()))).unwrap();
        thread::sleep(Duration::from_millis(5));
        assert!(seen.lock().unwrap().is_empty(), "a suspended target started something");
        assert_eq!(child.stats().waiting, 1);
        target.set_width(2).unwrap();
        child.wait().unwrap();
        target.wait().unwrap();
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_by_key(|(what, _)| *what);
        assert_eq!(seen, [("child waits on target", Err(Error::InvalidArgument)), ("target task waits on child", Err(Error::InvalidArgument))]);
    });
}

/// A queue dropped while its runner waits on a suspended target (which would never start it):
/// the drop takes the runner back from the target's list and runs the waiting tasks itself
/// (no cancel callback), in order, instead of waiting for the target to be widened. The same
/// on a pool that was shut down (its runners refused), where nothing would ever start them.
#[test]
fn a_drop_takes_back_its_runners_from_the_target() {
    watchdog("recall", 30, || {
        recall(false);
        recall(true);
    });
}

/// A child of width 1 with 3 tasks on a suspended target (`shut_down`: whose pool then shuts
/// down and refuses the runner a widening needs), dropped.
fn recall(shut_down: bool) {
    let pool = pool(2);
    let target = Queue::new(&pool, QueueConfig::new(0)).unwrap();
    let child = Queue::with_target(&target, QueueConfig::new(1)).unwrap();
    let probe = Arc::new(Probe::default());
    let jobs = jobs(3, &probe, |_| false);
    for i in 0..3 {
        // SAFETY: the jobs outlive the child's drop, which runs them.
        unsafe { child.try_submit(task_of(&jobs, i)).unwrap() };
    }
    assert_eq!(target.stats().waiting, 1, "the child's runner waits on the target");
    if shut_down {
        pool.shutdown().unwrap();
        assert!(target.set_width(1).is_err(), "the shut-down pool refuses the target's runner");
    }
    drop(child);
    assert_eq!(*probe.started.lock().unwrap(), vec![0, 1, 2], "run by the drop, in order");
    assert!(jobs.iter().all(|j| j.runs.load(Ordering::SeqCst) == 1));
    let t = target.stats();
    assert_eq!((t.waiting, t.running, t.started), (0, 0, 0), "nothing of the child left on the target");
    if !shut_down {
        target.set_width(2).unwrap();
        target.wait().unwrap();
    }
}
