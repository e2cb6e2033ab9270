//! Blocking tasks into idle workers: every one must start. The shape of `c_tests/queue.c`
//! scenario 3 and of `tests/elastic.rs`'s first stage, where under load a task stayed in a
//! blocked worker's ring while another worker slept: the one notification that several
//! submits shared was consumed by a worker that found one task, and the search it owed for the
//! others waited behind that task, which blocked (`Seeking::found` now hands it on).

use std::sync::Arc;

use shuttle::sync::{Condvar, Mutex};

use super::{pool, shutdown};
use crate::shuttle::{check_pct, check_random, ShuttleSpawner};

/// Counts the tasks that started; they block until `open`.
#[derive(Default)]
struct Blockers {
    state: Mutex<(usize, bool)>,
    cond: Condvar,
}

impl Blockers {
    fn run(&self) {
        let mut st = self.state.lock().unwrap();
        st.0 += 1;
        self.cond.notify_all();
        while !st.1 {
            st = self.cond.wait(st).unwrap();
        }
    }

    fn wait_started(&self, n: usize) {
        let mut st = self.state.lock().unwrap();
        while st.0 < n {
            st = self.cond.wait(st).unwrap();
        }
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.cond.notify_all();
    }
}

/// Two rounds of `workers` blockers submitted from outside, each round waited for until all
/// have started (each on its own thread, the others blocking theirs) and then released: the
/// first round starts the threads, the second finds them finishing and going idle.
fn blockers_into_idle_workers(workers: usize, idle_spins: u32) {
    let pool = Arc::new(pool(workers, idle_spins, ShuttleSpawner::new()));
    for _ in 0..2 {
        let b = Arc::new(Blockers::default());
        for _ in 0..workers {
            let b = b.clone();
            pool.spawn(move || b.run()).unwrap();
        }
        b.wait_started(workers);
        b.open();
    }
    shutdown(&pool);
}

#[test]
fn shuttle_blockers_into_idle_workers() {
    check_pct("blockers_3", 20_000, 4, || blockers_into_idle_workers(3, 0));
    check_pct("blockers_4", 40_000, 5, || blockers_into_idle_workers(4, 0));
    check_pct("blockers_3_spin", 20_000, 4, || blockers_into_idle_workers(3, 2));
    check_random("blockers_3", 20_000, || blockers_into_idle_workers(3, 0));
}
