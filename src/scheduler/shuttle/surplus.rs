//! The live thread count (`surplus.rs`): a pool of 2 lowered to 1 and raised back while a
//! thread outside submits.

use std::sync::Arc;

use super::{pool, shutdown, start_two_workers, submit};
use crate::shuttle::{check_pct, check_random, ShuttleSpawner, Tally};

/// Both workers started and idle; a producer submits four tasks while the main thread lowers
/// `max_threads` to 1 (the second worker turns surplus: in its busy loop, before a search, or
/// idle, unparked to leave the idle set, handing on its waking right and a notification for
/// what its queues hold), waits for the four, raises it back to 2 (the surplus worker serves
/// again) and submits two more. Every task runs once: none is left in a surplus worker's
/// queues, or behind a waking right it took with it (`Seeking::parks_outside`), with the serving
/// worker asleep.
fn resize_racing_submits(idle_spins: u32) {
    let pool = Arc::new(pool(2, idle_spins, ShuttleSpawner::new()));
    let _started = start_two_workers(&pool);
    let tally = Tally::new(6);
    let (p, t) = (pool.clone(), tally.clone());
    let producer = shuttle::thread::spawn(move || {
        for i in 0..4 {
            submit(&p, &t, i);
        }
    });
    pool.set_max_threads(1).unwrap();
    tally.wait_for(4);
    producer.join().unwrap();
    pool.set_max_threads(2).unwrap();
    submit(&pool, &tally, 4);
    submit(&pool, &tally, 5);
    tally.wait_for(6);
    shutdown(&pool);
    tally.assert_all_once();
}

#[test]
fn shuttle_resize_racing_submits() {
    check_pct("resize_spin_0", 40_000, 4, || resize_racing_submits(0));
    check_pct("resize_spin_2", 20_000, 4, || resize_racing_submits(2));
    check_random("resize_spin_0", 20_000, || resize_racing_submits(0));
}
