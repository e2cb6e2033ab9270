//! Loom models of fork-join (`src/join/`): the join deque (owner push / take-back at the
//! bottom, thieves steal one at the top, the two SeqCst fences of Chase-Lev), the join
//! handshake on a real stack job (its second half stolen and run by a thief vs taken back by
//! the owner, who then waits on the job's signal), and the counting latch that C and Rust
//! callers wait on. The deque holds 4 jobs under loom.
//!
//! Every model checks exactly-once: each job comes out once (owner or one thief), a stack job's
//! closure runs once, and what the runner wrote is visible to the waiter when it returns.
//!
//! Run: `make test-loom` (`RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release
//! --target-dir target/loom --test 'loom_*'`).
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use pool::loom_join::{Demand, Frames, JoinDeque, StackJob, DEQUE_CAPACITY, LATENT_SUPPLY};
use pool::loom_support::{model, LoomSpawner, Tasks};
use pool::{Config, CountLatch, ThreadPool};

fn assert_exactly_once(n: usize, seen: &[usize]) {
    let mut flags = vec![0u32; n];
    for &i in seen {
        flags[i] += 1;
    }
    for (i, &f) in flags.iter().enumerate() {
        assert_eq!(f, 1, "job {i} came out {f} times (seen: {seen:?})");
    }
}

fn steal_one(d: &JoinDeque, tasks: &Tasks) -> Option<usize> {
    d.steal().map(|t| tasks.index_of(t))
}

/// The owner takes back its two jobs newest first (as two nested joins do) while one thief
/// steals: the n >= 2 case (no CAS for the owner) and the last-job case (CAS on `top`).
#[test]
fn join_deque_take_back_vs_steal() {
    model("join_deque_take_back_vs_steal", || {
        let tasks = Arc::new(Tasks::new(2));
        let d = Arc::new(JoinDeque::new());
        let (d2, t2) = (d.clone(), tasks.clone());
        let thief = thread::spawn(move || steal_one(&d2, &t2));
        let mut seen = Vec::new();
        // SAFETY: this thread owns `d`; each task is pushed once.
        unsafe {
            assert!(d.push(tasks.ptr(0)));
            assert!(d.push(tasks.ptr(1)));
            for i in [1, 0] {
                if d.pop_if(tasks.ptr(i)) {
                    seen.push(i);
                }
            }
        }
        if let Some(i) = thief.join().unwrap() {
            // A thief takes the oldest.
            assert_eq!(i, 0, "a thief took the newest job while the oldest was there");
            seen.push(i);
        }
        assert_exactly_once(2, &seen);
    });
}

/// One job, two thieves and the owner: exactly one of the three gets it.
#[test]
fn join_deque_last_job_three_way() {
    model("join_deque_last_job_three_way", || {
        let tasks = Arc::new(Tasks::new(1));
        let d = Arc::new(JoinDeque::new());
        // SAFETY: owner; pushed once.
        assert!(unsafe { d.push(tasks.ptr(0)) });
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let (d, t) = (d.clone(), tasks.clone());
                thread::spawn(move || steal_one(&d, &t))
            })
            .collect();
        let mut seen = Vec::new();
        // SAFETY: owner.
        if unsafe { d.pop_if(tasks.ptr(0)) } {
            seen.push(0);
        }
        for t in thieves {
            seen.extend(t.join().unwrap());
        }
        assert_exactly_once(1, &seen);
    });
}

/// The owner fills the deque (4 under loom), is refused a fifth, pops and pushes again so the
/// indices wrap and a slot is rewritten while a thief may still be reading it: the thief's CAS
/// must fail then, never hand out a job twice or a job the owner took back.
#[test]
fn join_deque_full_and_slot_reuse() {
    model("join_deque_full_and_slot_reuse", || {
        let cap = DEQUE_CAPACITY as usize;
        let tasks = Arc::new(Tasks::new(cap + 2));
        let d = Arc::new(JoinDeque::new());
        let (d2, t2) = (d.clone(), tasks.clone());
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                got.extend(steal_one(&d2, &t2));
            }
            got
        });
        let mut seen = Vec::new();
        // SAFETY: owner; each task pushed once.
        unsafe {
            let mut pushed = 0;
            for i in 0..cap {
                if d.push(tasks.ptr(i)) {
                    pushed += 1;
                }
            }
            assert!(pushed >= cap - 2 || pushed == cap);
            // Take back the newest, push two more (wrapping the 4 slots).
            if d.pop_if(tasks.ptr(cap - 1)) {
                seen.push(cap - 1);
            }
            for i in [cap, cap + 1] {
                if !d.push(tasks.ptr(i)) {
                    seen.push(i); // full: the owner runs it itself
                }
            }
            while let Some(t) = d.pop() {
                seen.push(tasks.index_of(t));
            }
        }
        seen.extend(thief.join().unwrap());
        assert_exactly_once(cap + 2, &seen);
    });
}

/// The join handshake on a real stack job: the owner offers `b`, a thief may steal and run it
/// (the task callback sets the job's signal as its last access); the owner takes it back and
/// runs it inline, or waits on the signal (here from outside any pool: it parks). The closure
/// runs once, and its result and side effect are visible to the owner when it returns.
#[test]
fn join_handshake_stolen_vs_taken_back() {
    model("join_handshake_stolen_vs_taken_back", || {
        let pool = ThreadPool::with_spawner(Config { max_threads: 1, ..Config::default() }, LoomSpawner::new()).unwrap();
        let d = Arc::new(JoinDeque::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let side = Arc::new(AtomicUsize::new(0));
        let (r2, s2) = (runs.clone(), side.clone());
        let job = StackJob::new(move || {
            r2.fetch_add(1, Ordering::Relaxed);
            s2.store(42, Ordering::Relaxed);
            7usize
        });
        let task = job.task();
        // SAFETY: owner; the job outlives every use (we wait below before it drops).
        assert!(unsafe { d.push(task) });
        let d2 = d.clone();
        let thief = thread::spawn(move || {
            if let Some(t) = d2.steal() {
                // SAFETY: stolen once, so this is its one run; the owner keeps the job alive
                // until the signal is set.
                unsafe { (pool::Task::callback(t.as_ref()).unwrap())(t.as_ptr()) };
                true
            } else {
                false
            }
        });
        // (`a` would run here.)
        // SAFETY: owner.
        // SAFETY: owner of the deque.
        let taken_back = unsafe { d.pop_if(task) };
        let result = if taken_back {
            // SAFETY: taken back: ours to run, once.
            unsafe { job.run_inline() }
        } else {
            pool.wait_for(job.signal());
            // SAFETY: stolen and run once; its signal is set (the wait above); taken once.
            unsafe { job.into_result() }
        };
        assert_eq!(result, 7);
        // Relaxed: visible through the signal (or because it ran on this thread).
        assert_eq!(side.load(Ordering::Relaxed), 42);
        let stolen = thief.join().unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 1, "b ran once (stolen: {stolen})");
    });
}

/// The counting latch: two workers' `done` racing the waiter's close and park (outside any
/// pool, as `pool_latch_wait` from a C host thread). The waiter returns only after both, and
/// sees their writes.
#[test]
fn latch_two_done_vs_wait() {
    model("latch_two_done_vs_wait", || {
        let pool = ThreadPool::with_spawner(Config { max_threads: 1, ..Config::default() }, LoomSpawner::new()).unwrap();
        let latch = Arc::new(CountLatch::new());
        let data = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        latch.add(2);
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let (l, d) = (latch.clone(), data.clone());
                thread::spawn(move || {
                    d[i].store(i + 1, Ordering::Relaxed);
                    // SAFETY: one done per added unit.
                    unsafe { l.done() };
                })
            })
            .collect();
        pool.wait_for_latch(&latch);
        assert_eq!(latch.pending(), 0);
        // Relaxed: the latch orders them before the wait's return.
        assert_eq!(data[0].load(Ordering::Relaxed), 1);
        assert_eq!(data[1].load(Ordering::Relaxed), 2);
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// The record flag's handshake (`join::frame`, "The record flag"): an idle worker asks while
/// the owner fills its latent supply (and clears the flag). Once both are done, a hunger that
/// is up has the flag set, so the owner's next join takes the recording path and promotes:
/// no request for work is lost. (Without the two fences, the idle worker's `record = true`
/// can land before the owner's `record = false` while the owner reads a stale `hungry`.)
#[test]
fn record_flag_ask_vs_supply_filling() {
    model("record_flag_ask_vs_supply_filling", || {
        let tasks = Tasks::new(LATENT_SUPPLY);
        let demand = Arc::new(Demand::new());
        demand.lower_hunger();
        let frames = Frames::new(&demand);
        for i in 0..LATENT_SUPPLY - 1 {
            frames.push(tasks.ptr(i));
        }
        assert!(demand.must_record(), "a short supply records");
        let d2 = demand.clone();
        let idle = thread::spawn(move || d2.ask());
        frames.push(tasks.ptr(LATENT_SUPPLY - 1));
        let saw_hunger = demand.must_record();
        idle.join().unwrap();
        assert!(demand.is_hungry());
        assert!(demand.must_record(), "the hunger was lost (the owner saw it at once: {saw_hunger})");
    });
}

/// The owner serves one hunger (promotes its oldest frame, lowers the hunger, refills its
/// supply) while a second request comes in: a hunger left up has the flag set, and a flag
/// left clear means no hunger is up.
#[test]
fn record_flag_serve_vs_second_ask() {
    model("record_flag_serve_vs_second_ask", || {
        let tasks = Tasks::new(LATENT_SUPPLY + 1);
        let demand = Arc::new(Demand::new());
        let frames = Frames::new(&demand);
        for i in 0..LATENT_SUPPLY {
            frames.push(tasks.ptr(i));
        }
        assert!(demand.is_hungry() && demand.must_record(), "a new worker is hungry");
        let d2 = demand.clone();
        let idle = thread::spawn(move || d2.ask());
        // The recording join: promote the oldest, lower the hunger, record its own frame.
        frames.promote_oldest();
        demand.lower_hunger();
        frames.push(tasks.ptr(LATENT_SUPPLY));
        assert_eq!(frames.latent(), LATENT_SUPPLY);
        idle.join().unwrap();
        assert!(!demand.is_hungry() || demand.must_record(), "a hunger is up with the flag clear");
    });
}
