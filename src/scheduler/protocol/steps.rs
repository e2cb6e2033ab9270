//! The steps of one worker of the waking protocol's model (`model.rs`): the code of
//! `run_until` (`run.rs`) and of `wait_or`'s loop (`sleep.rs`), one step per atomic access of
//! `protocol.rs`. The surplus worker's steps are in `surplus.rs`.

use std::vec::Vec;

use super::model::{Config, Event, Kind, Model, Notifying, Pc, MAX_WORKERS};
use crate::scheduler::seeking::{Handoff, Seeking};
use crate::scheduler::sync_word::{State, Sync, WaitEnd, WaitStep, Waiter};

impl Model {
    /// Every step worker `i` may take now, into `out`.
    pub(super) fn worker_steps(&self, c: &Config, i: usize, out: &mut Vec<(Event, Model)>) {
        let w = self.workers[i];
        let mut push = |label: &'static str, m: Model| out.push((Event::Thread(i as u8, label), m));
        let notify_then = |m: &Model, n: Notifying, then: &dyn Fn(&mut Model, Option<Notifying>)| m.notify_then(c, n, then);
        match w.pc {
            Pc::Unused | Pc::Exited | Pc::Running(_) => {}
            Pc::AfterTask | Pc::Retire { .. } | Pc::RetireNotify { .. } | Pc::Retired { .. } => self.surplus_steps(c, i, out),
            Pc::Start => {
                let mut m = *self;
                m.workers[i].seeking = Seeking::new(false);
                m.workers[i].waiter = Waiter::default();
                // The loop's first turn: it waits (after looking at `max_threads`).
                m.workers[i].pc = if c.resize.is_empty() { Pc::WaitRead } else { Pc::Retire { search: false } };
                push("starts", m);
            }
            Pc::Search => {
                let mut m = *self;
                let released = m.released;
                m.workers[i].seeking.search_begins(|| released);
                if m.done_for(i) {
                    m.workers[i].pc = Pc::AfterSearch;
                    push("search: its wait is over", m);
                    return;
                }
                // Its own LIFO slot first, then the queue, then another worker's LIFO slot.
                let kind = if m.workers[i].lifo {
                    m.workers[i].lifo = false;
                    Kind::Plain
                } else if let Some(kind) = m.queue.pop() {
                    kind
                } else if let Some(v) = m.workers.iter_mut().find(|w| w.lifo) {
                    v.lifo = false;
                    Kind::Plain
                } else {
                    m.workers[i].seeking.came_up_empty();
                    m.workers[i].pc = Pc::AfterSearch;
                    push("search comes up empty", m);
                    return;
                };
                // With tasks left, the real search may report them (it moved a batch into its
                // ring, or stole half a ring) or not (they sit in a ring it did not reach).
                for pushed in [false, true] {
                    if pushed && m.queue.is_empty() {
                        continue;
                    }
                    let mut m = m;
                    let notify = m.workers[i].seeking.found(pushed).map(|is_waking| Notifying::Cas { is_waking });
                    m.workers[i].pc = Pc::Found { kind, notify };
                    push(if pushed { "finds a task, reports the rest" } else { "finds a task" }, m);
                }
            }
            Pc::Found { kind, notify: Some(n) } => {
                for m in notify_then(self, n, &|m, next| m.workers[i].pc = Pc::Found { kind, notify: next }) {
                    push("notifies before running it", m);
                }
            }
            Pc::Found { kind, notify: None } => {
                let mut m = *self;
                match kind {
                    Kind::Plain | Kind::Child => m.workers[i].pc = Pc::Running(kind),
                    Kind::Wait => {
                        m.queue.push(Kind::Child);
                        m.workers[i].pc = Pc::Submit(Notifying::Cas { is_waking: false });
                    }
                    Kind::Waker => {
                        // Its poll: the woken task into the LIFO slot (empty: a search takes
                        // its own slot first), and it returns at once.
                        assert!(!m.workers[i].lifo, "the LIFO slot was taken first");
                        m.workers[i].lifo = true;
                        m.ran += 1;
                        m.workers[i].pc = m.after_task(c, i);
                    }
                }
                push("runs its task", m);
            }
            Pc::Submit(n) => {
                for m in notify_then(self, n, &|m, next| {
                    m.workers[i].pc = match next {
                        Some(next) => Pc::Submit(next),
                        None => {
                            // The wait inside the task begins (`wait_until` -> `run_until`).
                            let outer = m.workers[i].seeking;
                            m.workers[i].outer = Some(outer);
                            m.workers[i].seeking = Seeking::new(true);
                            Pc::Search
                        }
                    }
                }) {
                    push("submits the child", m);
                }
            }
            Pc::AfterSearch => {
                let mut m = *self;
                if m.workers[i].outer.is_some() {
                    if m.child_done {
                        m.workers[i].pc = Pc::Leave(None);
                        push("its wait is over: leaves", m);
                        return;
                    }
                    if m.workers[i].seeking.must_register() {
                        m.workers[i].seeking.registered();
                        m.waiter_of_child = Some(i);
                    }
                }
                match (m.workers[i].seeking.draining(), m.workers[i].outer.is_some()) {
                    (Some(true), false) => {
                        m.workers[i].pc = Pc::Exited;
                        m.word = Sync(m.word.0 - Sync::ONE_SPAWNED);
                        push("drained: leaves the pool", m);
                    }
                    (Some(false), _) | (Some(true), true) => {
                        if !m.released || m.workers[i].outer.is_some() {
                            m.workers[i].pc = Pc::DrainPark;
                        } else {
                            m.workers[i].pc = Pc::Search;
                        }
                        push("drained: parks until released", m);
                    }
                    (None, _) => {
                        m.workers[i].waiter = Waiter { is_waking: m.workers[i].seeking.wait_begins(), ..Waiter::default() };
                        m.workers[i].pc = Pc::WaitRead;
                        push("waits", m);
                    }
                }
            }
            Pc::Leave(None) => {
                let mut m = *self;
                let handoff = m.workers[i].seeking.leaving(w.lifo);
                let n = match handoff {
                    Handoff::Nothing => None,
                    Handoff::Notify => Some(Notifying::Cas { is_waking: false }),
                    Handoff::Waking => Some(Notifying::Cas { is_waking: true }),
                };
                match n {
                    Some(n) => m.workers[i].pc = Pc::Leave(Some(n)),
                    None => m.finish_wait(i),
                }
                push("leaves its wait", m);
            }
            Pc::Leave(Some(n)) => {
                for m in notify_then(self, n, &|m, next| match next {
                    Some(next) => m.workers[i].pc = Pc::Leave(Some(next)),
                    None => m.finish_wait(i),
                }) {
                    push("hands a notification on", m);
                }
            }
            Pc::WaitRead => {
                let mut m = *self;
                let mut waiter = w.waiter;
                waiter.leaving = m.over(i);
                let label = match m.word.wait(waiter) {
                    WaitStep::Shutdown => {
                        // `wait_or` returns: its waiter state is gone.
                        m.workers[i].waiter = Waiter::default();
                        m.workers[i].seeking.drain();
                        m.workers[i].pc = Pc::Search;
                        "sees shutdown: drains"
                    }
                    WaitStep::Park => {
                        m.workers[i].pc = if c.spins { Pc::Spin } else { Pc::Announce };
                        m.workers[i].spinning = c.spins;
                        "nothing to consume: sleeps"
                    }
                    WaitStep::Write(next, end) => {
                        m.word = next;
                        if end != WaitEnd::Idle {
                            // `wait_or` returns: its waiter state is gone.
                            m.workers[i].waiter = Waiter::default();
                        }
                        match end {
                            WaitEnd::Notified { waking } => {
                                m.workers[i].seeking.notified(waking);
                                m.workers[i].pc = m.loop_top(c, i);
                            }
                            // The own loop's wait is over: it turned surplus.
                            WaitEnd::Done if w.outer.is_none() => m.workers[i].pc = m.loop_top(c, i),
                            WaitEnd::Done => m.workers[i].pc = Pc::Leave(None),
                            WaitEnd::LocalWork => unreachable!("no park of the model fills a queue"),
                            WaitEnd::Idle => {
                                m.workers[i].waiter = Waiter { is_idle: true, ..Waiter::default() };
                            }
                        }
                        "takes a wait step"
                    }
                };
                push(label, m);
            }
            Pc::Spin => {
                // The spin ends early for what it sees; or it runs out (any time: a choice).
                let s = self.word;
                if (s.notified() && !self.queue.is_empty()) || s.state() == State::Shutdown || self.over(i) {
                    let mut m = *self;
                    m.workers[i].spinning = false;
                    m.workers[i].pc = Pc::WaitRead;
                    push("spin sees something", m);
                }
                let mut m = *self;
                m.workers[i].spinning = false;
                m.workers[i].pc = Pc::Announce;
                push("spin runs out", m);
            }
            Pc::Announce => {
                let mut m = *self;
                m.workers[i].in_idle_set = true;
                let s = m.word;
                m.workers[i].pc =
                    if !s.notified() && s.state() != State::Shutdown && !m.over(i) { Pc::Sleeping } else { Pc::Withdraw };
                push("announces its park", m);
            }
            Pc::Sleeping | Pc::DrainPark if w.token => {
                let mut m = *self;
                m.workers[i].token = false;
                m.workers[i].pc = if w.pc == Pc::Sleeping { Pc::Withdraw } else { Pc::Search };
                push("is unparked", m);
            }
            Pc::Sleeping | Pc::DrainPark => {}
            Pc::Withdraw => {
                let mut m = *self;
                m.workers[i].in_idle_set = false;
                m.workers[i].pc = Pc::WaitRead;
                push("withdraws its park", m);
            }
        }
    }

    /// The `Wait` task's wait returned: the task goes on with its own code.
    fn finish_wait(&mut self, i: usize) {
        let w = &mut self.workers[i];
        w.seeking = w.outer.take().expect("in a wait");
        w.pc = Pc::Running(Kind::Wait);
    }

    /// Where worker `i` goes when its task returns: the own loop's busy path looks at its
    /// surplus flag (`run.rs`, in scenarios that resize); a wait inside a task searches again.
    fn after_task(&self, c: &Config, i: usize) -> Pc {
        if self.workers[i].outer.is_none() && !c.resize.is_empty() { Pc::AfterTask } else { Pc::Search }
    }

    /// The running tasks that may end now (`Pc::Running`).
    pub(super) fn task_ends(&self, c: &Config) -> Vec<(Event, Model)> {
        let mut out = Vec::new();
        for i in 0..MAX_WORKERS {
            let Pc::Running(kind) = self.workers[i].pc else { continue };
            let mut m = *self;
            m.ran += 1;
            m.workers[i].pc = m.after_task(c, i);
            if kind == Kind::Child {
                m.child_done = true;
                // The signal's setter wakes the registered waiter's parker.
                if let Some(v) = m.waiter_of_child {
                    m.workers[v].token = true;
                }
            }
            out.push((Event::Thread(i as u8, "ends its task"), m));
        }
        out
    }
}
