//! Wake-ups of idle workers by submits from outside the pool.

use std::sync::Arc;
use std::vec::Vec;

use super::{pool, shutdown, submit};
use crate::shuttle::{check_pct, check_random, ShuttleSpawner, Tally};

/// One worker, three rounds of: submit a task, wait until it ran. Each submit races the only
/// worker on its way to sleep after the last task (`wait`: idle count, spin, idle-set bit,
/// re-read, park), the race of README "Why no wake-up is lost", steps 2 and 3; with a spin
/// phase, the notify that sees the spinner counted unparks nobody and trusts it.
fn submit_racing_sleep(idle_spins: u32) {
    let pool = pool(1, idle_spins, ShuttleSpawner::new());
    let tally = Tally::new(3);
    for i in 0..3 {
        submit(&pool, &tally, i);
        tally.wait_for(i + 1);
    }
    shutdown(&pool);
    tally.assert_all_once();
    assert_eq!(pool.spawner().spawned(), 1, "max_threads 1");
}

#[test]
fn shuttle_submit_racing_the_last_worker_going_idle() {
    check_pct("submit_racing_sleep_spin_0", 40_000, 4, || submit_racing_sleep(0));
    check_pct("submit_racing_sleep_spin_2", 40_000, 4, || submit_racing_sleep(2));
    check_random("submit_racing_sleep_spin_2", 20_000, || submit_racing_sleep(2));
}

/// `producers` threads outside a pool of `workers` submit `per` tasks each (one at a time),
/// while the workers run them, go idle and are woken: the shape of `tests/stress.rs`
/// `futex_parker_pool`, small enough to explore (the try-lock hand-off of README step 4, the
/// waking right's cascade, a submit starting the first thread while another submit races it).
/// The main thread waits for every task before shutting down.
fn external_producers(workers: usize, idle_spins: u32, producers: usize, per: usize) {
    let pool = Arc::new(pool(workers, idle_spins, ShuttleSpawner::new()));
    let tally = Tally::new(producers * per);
    let threads: Vec<_> = (0..producers)
        .map(|p| {
            let (pool, tally) = (pool.clone(), tally.clone());
            shuttle::thread::spawn(move || {
                for i in p * per..(p + 1) * per {
                    submit(&pool, &tally, i);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    tally.wait_for(producers * per);
    shutdown(&pool);
    tally.assert_all_once();
}

#[test]
fn shuttle_external_producers_one_worker() {
    check_pct("producers_1_worker_spin_0", 40_000, 4, || external_producers(1, 0, 2, 3));
    check_pct("producers_1_worker_spin_0_depth_6", 20_000, 6, || external_producers(1, 0, 2, 3));
    check_pct("producers_1_worker_spin_2", 20_000, 4, || external_producers(1, 2, 2, 3));
    check_random("producers_1_worker_spin_0", 20_000, || external_producers(1, 0, 2, 3));
}

#[test]
fn shuttle_external_producers_two_workers() {
    check_pct("producers_2_workers_spin_0", 40_000, 4, || external_producers(2, 0, 2, 3));
    check_pct("producers_2_workers_spin_2", 20_000, 5, || external_producers(2, 2, 2, 3));
    check_random("producers_2_workers_spin_0", 20_000, || external_producers(2, 0, 2, 3));
}

/// Both workers of a pool of 2 started and idle, then bursts from two producers outside (two
/// tasks each, two rounds, the main thread waiting after each): the shape in which
/// `futex_parker_pool` hung under ThreadSanitizer (both workers parked with tasks queued).
fn bursts_into_two_idle_workers() {
    let pool = Arc::new(pool(2, 0, ShuttleSpawner::new()));
    let warm = Tally::new(2);
    submit(&pool, &warm, 0);
    submit(&pool, &warm, 1);
    warm.wait_for(2);
    let tally = Tally::new(8);
    for round in 0..2 {
        let threads: Vec<_> = (0..2)
            .map(|p| {
                let (pool, tally) = (pool.clone(), tally.clone());
                shuttle::thread::spawn(move || {
                    let first = 4 * round + 2 * p;
                    submit(&pool, &tally, first);
                    submit(&pool, &tally, first + 1);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        tally.wait_for(4 * round + 4);
    }
    shutdown(&pool);
    tally.assert_all_once();
}

#[test]
fn shuttle_bursts_into_two_idle_workers() {
    check_pct("bursts_2_workers", 40_000, 4, bursts_into_two_idle_workers);
    check_pct("bursts_2_workers_depth_6", 20_000, 6, bursts_into_two_idle_workers);
    check_random("bursts_2_workers", 20_000, bursts_into_two_idle_workers);
}
