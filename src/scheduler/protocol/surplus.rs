//! The resizing of the waking protocol's model (`model.rs`): `set_max_threads` as a thread of
//! its own (`Resizer`), and the surplus worker's rows (README S5, `scheduler/surplus.rs`):
//! between two tasks of its own loop, and at the top of that loop, a worker at or above
//! `max_threads` hands on what it holds and owes and parks on its parker
//! outside the protocol until it serves again or shutdown begins (`Seeking::parks_outside`).
//! Its idle wait ends when it turns surplus (`Model::over`).
//!
//! A retiring worker's ring is not modelled apart from the shared queue: with tasks queued it
//! may say it holds some or not, and the model takes both. Its LIFO slot is: a task woken on
//! it (`Kind::Waker`) stays there for the others to steal.

use std::vec::Vec;

use super::model::{Config, Event, Model, Notifying, Pc, Resizer, Resizing, Shutdown, MAX_WORKERS};
use crate::scheduler::sync_word::State;

impl Model {
    /// Whether worker `i` is at or above `max_threads` (`Inner::is_surplus`).
    pub(super) fn is_surplus(&self, i: usize) -> bool {
        u32::from(self.workers[i].index) >= self.max
    }

    /// Where worker `i` goes after its wait consumed a notification or ended: the own loop's
    /// top looks at `max_threads` first (in scenarios that resize), a wait inside a task
    /// searches.
    pub(super) fn loop_top(&self, c: &Config, i: usize) -> Pc {
        if self.workers[i].outer.is_none() && !c.resize.is_empty() { Pc::Retire { search: true } } else { Pc::Search }
    }

    /// The resizer's next step (`Inner::set_max_threads`), into `out`.
    pub(super) fn resizer_steps(&self, c: &Config, out: &mut Vec<(Event, Model)>) {
        let r = self.resizer;
        match r.step {
            // It is refused once shutdown began (the injector is closed); one that began
            // before runs on beside shutdown.
            None if usize::from(r.begun) < c.resize.len() && matches!(self.shutdown, Shutdown::Off | Shutdown::Ready) => {
                let mut m = *self;
                m.max = c.resize[usize::from(r.begun)];
                m.resizer = Resizer { begun: r.begun + 1, step: Some(Resizing::Flags) };
                out.push((Event::Resize("stores max_threads"), m));
            }
            None => {}
            Some(Resizing::Flags) => {
                let mut m = *self;
                // The workers in the worker table: not one still starting (it reads
                // `max_threads` before its first wait).
                for i in (0..MAX_WORKERS).filter(|&i| !matches!(self.workers[i].pc, Pc::Unused | Pc::Start)) {
                    m.workers[i].surplus = m.is_surplus(i);
                }
                m.resizer.step = Some(Resizing::UnparkAll);
                out.push((Event::Resize("sets the surplus flags"), m));
            }
            Some(Resizing::UnparkAll) => {
                let mut m = *self;
                for w in m.workers.iter_mut().filter(|w| !matches!(w.pc, Pc::Unused | Pc::Start | Pc::Exited)) {
                    w.token = true;
                }
                m.resizer.step = Some(Resizing::Notify(Notifying::Cas { is_waking: false }));
                out.push((Event::Resize("unparks every worker"), m));
            }
            Some(Resizing::Notify(n)) => {
                for m in self.notify_then(c, n, &|m, next| m.resizer.step = next.map(Resizing::Notify)) {
                    out.push((Event::Resize("notifies"), m));
                }
            }
        }
    }

    /// The surplus worker's steps of worker `i` (`Pc::AfterTask`, `Retire`, `RetireNotify`,
    /// `Retired`), into `out`.
    pub(super) fn surplus_steps(&self, c: &Config, i: usize, out: &mut Vec<(Event, Model)>) {
        let w = self.workers[i];
        let mut push = |label: &'static str, m: Model| out.push((Event::Thread(i as u8, label), m));
        let after = |search: bool| if search { Pc::Search } else { Pc::AfterSearch };
        match w.pc {
            Pc::AfterTask => {
                let mut m = *self;
                m.workers[i].pc = if w.surplus { Pc::Retire { search: true } } else { Pc::Search };
                push(if w.surplus { "reads its surplus flag: set" } else { "reads its surplus flag: clear" }, m);
            }
            Pc::Retire { search } if !self.is_surplus(i) || w.seeking.draining().is_some() => {
                let mut m = *self;
                m.workers[i].pc = after(search);
                push("is not surplus (or drains)", m);
            }
            Pc::Retire { search } => {
                // It holds tasks if its LIFO slot does; with tasks queued, its ring may hold
                // some or not.
                for holds in [false, true] {
                    if holds != w.lifo && (w.lifo || self.queue.is_empty()) {
                        continue;
                    }
                    let mut m = *self;
                    m.workers[i].pc = match m.workers[i].seeking.parks_outside(holds) {
                        Some(is_waking) => Pc::RetireNotify { search, n: Notifying::Cas { is_waking } },
                        None => Pc::Retired { search, parked: false },
                    };
                    push(if holds { "turns surplus, tasks left in its ring" } else { "turns surplus" }, m);
                }
            }
            Pc::RetireNotify { search, n } => {
                let then = |m: &mut Model, next: Option<Notifying>| {
                    m.workers[i].pc = match next {
                        Some(n) => Pc::RetireNotify { search, n },
                        None => Pc::Retired { search, parked: false },
                    }
                };
                for m in self.notify_then(c, n, &then) {
                    push("hands on what it holds and owes", m);
                }
            }
            Pc::Retired { search, parked: false } => {
                let mut m = *self;
                let parks = self.is_surplus(i) && self.word.state() != State::Shutdown;
                m.workers[i].pc = if parks { Pc::Retired { search, parked: true } } else { after(search) };
                push(if parks { "parks as surplus" } else { "serves again" }, m);
            }
            Pc::Retired { search, parked: true } if w.token => {
                let mut m = *self;
                m.workers[i].token = false;
                m.workers[i].pc = Pc::Retired { search, parked: false };
                push("is unparked", m);
            }
            _ => {}
        }
    }
}
