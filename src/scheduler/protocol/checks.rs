//! The invariants of the waking protocol's model (`model.rs`), checked on every state the
//! search reaches (`explore.rs`), and the renaming of workers that makes symmetric states one.

use super::model::{Config, Model, Pc, MAX_WORKERS};
use crate::scheduler::sync_word::State;

impl Model {
    /// The state up to a renaming of the workers (they are interchangeable): sorted by their
    /// state, the child's waiter renamed with them.
    pub(super) fn canonical(mut self) -> Model {
        let mut order: [usize; MAX_WORKERS] = core::array::from_fn(|i| i);
        order.sort_by_key(|&i| self.workers[i]);
        let workers = self.workers;
        self.workers = core::array::from_fn(|k| workers[order[k]]);
        self.waiter_of_child = self.waiter_of_child.map(|v| order.iter().position(|&o| o == v).expect("a worker"));
        self
    }

    /// The invariants of a state (README): counts, and the idle set.
    pub(super) fn check(&self) -> Result<(), std::string::String> {
        let idle = self.workers.iter().filter(|w| w.waiter.is_idle && matches!(w.pc, Pc::WaitRead | Pc::Spin | Pc::Announce | Pc::Sleeping | Pc::Withdraw)).count();
        if self.word.state() != State::Shutdown && self.word.idle() as usize != idle {
            return Err(std::format!("idle count {} but {idle} workers idle", self.word.idle()));
        }
        let live = self.workers.iter().filter(|w| !matches!(w.pc, Pc::Unused | Pc::Exited)).count();
        if self.word.spawned() as usize != live {
            return Err(std::format!("spawned count {} but {live} threads", self.word.spawned()));
        }
        if let Some(w) = self.workers.iter().find(|w| w.in_idle_set && !matches!(w.pc, Pc::Sleeping | Pc::Withdraw)) {
            return Err(std::format!("an idle bit outside a park: {w:?}"));
        }
        // The throttle: at most one worker holds the waking right, and only while the word
        // says `Waking` (README, "Why there is no thundering herd").
        let waking = self.workers.iter().filter(|w| w.seeking.is_waking || w.waiter.is_waking).count();
        if waking > 1 || (waking == 1 && !matches!(self.word.state(), State::Waking | State::Shutdown)) {
            return Err(std::format!("{waking} workers hold the waking right, the word is {:?}", self.word));
        }
        Ok(())
    }

    /// A state where nothing can happen but running tasks end: no work may be queued while a
    /// worker sleeps, or while a thread could still be started (unless a start failed: the
    /// work then waits for a worker to come back, `Sync::spawn_failed`). Either would be a
    /// lost wake-up.
    pub(super) fn check_quiet(&self) -> Result<(), std::string::String> {
        let queued = self.queued();
        let sleeper = self.workers.iter().any(|w| matches!(w.pc, Pc::Sleeping | Pc::DrainPark) && !w.token);
        if queued && sleeper {
            return Err("lost wake-up: work queued while a worker sleeps".into());
        }
        let stays_surplus = |i: usize| matches!(self.workers[i].pc, Pc::Retired { parked: true, .. }) && !self.workers[i].token;
        if let Some(i) = (0..MAX_WORKERS).find(|&i| stays_surplus(i) && !self.is_surplus(i)) {
            return Err(std::format!("worker {i} stays parked as surplus below max_threads {}", self.max));
        }
        if queued && !self.spawn_failed && self.word.spawned() < self.max && self.word.state() != State::Shutdown {
            return Err("lost wake-up: work queued while a thread could be started".into());
        }
        Ok(())
    }

    /// A state where nothing at all can happen: every task ran and, after shutdown, every
    /// worker left.
    pub(super) fn check_finished(&self, c: &Config, total: u8) -> Result<(), std::string::String> {
        let all_ran = self.ran == total && !self.queued();
        let all_left = !c.shutdown || self.workers.iter().all(|w| matches!(w.pc, Pc::Unused | Pc::Exited));
        if all_ran && all_left { Ok(()) } else { Err(std::format!("stuck ({} of {total} tasks ran)", self.ran)) }
    }
}
