//! The exhaustive test of the waking protocol: the `Sync` word's transitions (`sync_word.rs`)
//! and a worker's `Seeking` (`seeking.rs`), composed without threads into an abstract pool of
//! up to three workers, and every reachable state explored breadth-first, every enabled event
//! of every state taken. The machine follows the code step by step: each atomic access or
//! compare-and-swap of `protocol.rs` is one step, and the decisions are the real transitions,
//! called here as the workers call them. Memory is sequentially consistent (the fences and
//! orderings are loom's to check: `scheduler/sleep/loom.rs`).
//!
//! After every step the README's invariants are checked: the word's counts match the workers
//! (`idle`: the workers counted idle; `spawned`: the threads started and not gone), the idle set
//! holds only announced workers, and no state is stuck: a state where nothing can happen any
//! more has run every task (and, after shutdown, let every worker leave). A stuck state is a
//! lost wake-up; the test prints the events that reach it.
//!
//! The model's tasks sit in one queue (the injector, and the rings and join deques that any
//! worker may reach by stealing, as one): a search takes one task, and with more left it may
//! report them (`pushed`: the real search moved a batch into its ring, or stole half a ring
//! and left the rest with its victim) or not (they sit in a ring it did not reach). Leftovers
//! in the injector are the injector's re-check's to notify (`after_injector_unlock`). A `Wait` task submits a child and waits for it inside the
//! task (`run_until` with a condition): it runs what it finds meanwhile, registers as the
//! child's waiter before it sleeps, and is unparked by whoever runs the child.

use std::vec::Vec;

use crate::scheduler::seeking::{Handoff, Seeking};
use crate::scheduler::sync_word::{Notify, State, Sync, WaitEnd, WaitStep, Waiter, Wake};

pub(super) const MAX_WORKERS: usize = 3;

/// A task of the model.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) enum Kind {
    Plain,
    /// Submits a `Child` and waits for it.
    Wait,
    Child,
}

/// Where a notify stands: its CAS (`Sync::notify`), then, for `Wake::Unpark`, the scan that
/// takes a sleeper's bit (`Protocol::take_sleeper`), a step of its own.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) enum Notifying {
    Cas { is_waking: bool },
    TakeSleeper,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) enum Pc {
    Unused,
    /// Started: its loop begins with a wait (it consumes the notification that started it).
    Start,
    Search,
    /// Found a task: notifies first if `Seeking::found` says so, then runs it.
    Found { kind: Kind, notify: Option<Notifying> },
    /// Running a task's own code, for as long as it likes (`Found` runs the task's start): it
    /// may end at any step, and a state where nothing else can happen is checked for lost
    /// wake-ups first (a task may block on what the rest of the pool does, so no other worker
    /// may count on this one to come back).
    Running(Kind),
    /// A `Wait` task's submit of its child: the push is done, the notify in progress.
    Submit(Notifying),
    /// The search loop is over (`run_until` after its `while`).
    AfterSearch,
    /// Leaving a wait: the hand-off's notify.
    Leave(Option<Notifying>),
    /// `wait_or`: read the word, take a wait step.
    WaitRead,
    Spin,
    Announce,
    Sleeping,
    Withdraw,
    /// Drained before shutdown released its waits: parked on its parker.
    DrainPark,
    Exited,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) struct Thread {
    pub(super) pc: Pc,
    pub(super) seeking: Seeking,
    /// The outer loop's state while a `Wait` task waits inside it.
    outer: Option<Seeking>,
    pub(super) waiter: Waiter,
    pub(super) token: bool,
    pub(super) in_idle_set: bool,
    spinning: bool,
}

impl Thread {
    const UNUSED: Thread = Thread {
        pc: Pc::Unused,
        seeking: Seeking::new(false),
        outer: None,
        waiter: Waiter { is_waking: false, is_idle: false, leaving: false, local_work: false },
        token: false,
        in_idle_set: false,
        spinning: false,
    };
}

/// A small FIFO of tasks (the model's queue, a producer's tasks), `Copy` so states are cheap.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub(super) struct Fifo {
    items: [Option<Kind>; 3],
}

impl Fifo {
    fn of(kinds: &[Kind]) -> Self {
        let mut f = Fifo::default();
        kinds.iter().for_each(|&k| f.push(k));
        f
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items[0].is_none()
    }

    fn push(&mut self, k: Kind) {
        *self.items.iter_mut().find(|i| i.is_none()).expect("room in the queue") = Some(k);
    }

    fn pop(&mut self) -> Option<Kind> {
        let first = self.items[0].take();
        self.items.rotate_left(1);
        first
    }
}

/// A submitting thread outside the pool: pushes its tasks one by one, each followed by a
/// notify.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Producer {
    tasks: Fifo,
    notifying: Option<Notifying>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Shutdown {
    Off,
    /// May begin once every producer is done.
    Ready,
    /// The word says `Shutdown`: unpark every worker.
    UnparkAll,
    /// Fire the timers (nothing here) and set `waits_released`; unpark every worker again.
    Release,
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct Model {
    pub(super) word: Sync,
    pub(super) workers: [Thread; MAX_WORKERS],
    pub(super) queue: Fifo,
    producers: [Option<Producer>; 2],
    shutdown: Shutdown,
    released: bool,
    /// The child is done (its signal set).
    child_done: bool,
    /// The worker registered as the child's waiter.
    pub(super) waiter_of_child: Option<usize>,
    pub(super) ran: u8,
    /// A thread start failed on the way here.
    pub(super) spawn_failed: bool,
}

/// One scenario: the pool's size, the idle spin, the producers' tasks, shutdown at the end.
#[derive(Clone, Copy, Debug)]
pub(super) struct Config {
    pub(super) max_threads: u32,
    pub(super) spins: bool,
    pub(super) shutdown: bool,
}

/// One event of the exploration, for the trace of a failure.
#[derive(Clone, Copy)]
pub(super) enum Event {
    Producer(u8, &'static str),
    Thread(u8, &'static str),
    Shutdown(&'static str),
}

impl core::fmt::Debug for Event {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Event::Producer(p, what) => write!(f, "producer {p} {what}"),
            Event::Thread(w, what) => write!(f, "worker {w} {what}"),
            Event::Shutdown(what) => write!(f, "shutdown {what}"),
        }
    }
}

impl Model {
    pub(super) fn new(producers: &[&[Kind]], shutdown: bool) -> Self {
        Model {
            word: Sync::default(),
            workers: [Thread::UNUSED; MAX_WORKERS],
            queue: Fifo::default(),
            producers: core::array::from_fn(|p| producers.get(p).map(|t| Producer { tasks: Fifo::of(t), notifying: None })),
            shutdown: if shutdown { Shutdown::Ready } else { Shutdown::Off },
            released: false,
            child_done: false,
            waiter_of_child: None,
            ran: 0,
            spawn_failed: false,
        }
    }

    pub(super) fn tasks_total(producers: &[&[Kind]]) -> u8 {
        // A `Wait` task brings its child.
        producers.iter().flat_map(|t| t.iter()).map(|k| if *k == Kind::Wait { 2 } else { 1 }).sum()
    }

    /// The notify step `n` of a notifier; the next step, if the notify goes on.
    fn notify_step(&mut self, c: &Config, n: Notifying, spawn_ok: bool) -> Option<Notifying> {
        match n {
            Notifying::Cas { is_waking } => match self.word.notify(is_waking, c.max_threads) {
                Notify::Stop | Notify::Shared => None,
                Notify::Write(next, wake) => {
                    self.word = next;
                    match wake {
                        Wake::Nothing => None,
                        Wake::Unpark => Some(Notifying::TakeSleeper),
                        Wake::Spawn => {
                            if spawn_ok {
                                let slot = self.workers.iter().position(|w| w.pc == Pc::Unused).expect("a slot for every spawn");
                                self.workers[slot].pc = Pc::Start;
                            } else {
                                self.word = self.word.spawn_failed();
                                self.spawn_failed = true;
                            }
                            None
                        }
                    }
                }
            },
            Notifying::TakeSleeper => {
                unreachable!("taking a sleeper is a choice of the explorer (`take_sleeper`)")
            }
        }
    }

    /// `Protocol::take_sleeper`: nobody if a worker spins; else the bit of `victim` (one of
    /// the set bits, chosen by the explorer), whose owner gets a token.
    fn take_sleeper(&mut self, victim: Option<usize>) {
        if self.workers.iter().any(|w| w.spinning) {
            return;
        }
        if let Some(v) = victim {
            self.workers[v].in_idle_set = false;
            self.workers[v].token = true;
        }
    }

    fn sleepers(&self) -> Vec<Option<usize>> {
        if self.workers.iter().any(|w| w.spinning) {
            return std::vec![None];
        }
        let set: Vec<_> = (0..MAX_WORKERS).filter(|&i| self.workers[i].in_idle_set).map(Some).collect();
        if set.is_empty() { std::vec![None] } else { set }
    }

    /// Whether a thread start may succeed, or fail too: failing only while another thread
    /// runs (a pool with no thread refuses work at submit, `Error::Spawn`).
    fn spawn_outcomes(&self) -> &'static [bool] {
        if self.word.spawned() >= 1 { &[true, false] } else { &[true] }
    }

    fn done_for(&self, i: usize) -> bool {
        self.workers[i].outer.is_some() && self.child_done
    }

    /// Every event enabled in this state, as successor states, with a label.
    pub(super) fn successors(&self, c: &Config) -> Vec<(Event, Model)> {
        let mut out = Vec::new();
        for (p, prod) in self.producers.iter().enumerate() {
            let Some(prod) = prod else { continue };
            match prod.notifying {
                None if !prod.tasks.is_empty() => {
                    let mut m = *self;
                    let producer = m.producers[p].as_mut().expect("a producer");
                    let kind = producer.tasks.pop().expect("a task");
                    producer.notifying = Some(Notifying::Cas { is_waking: false });
                    m.queue.push(kind);
                    out.push((Event::Producer(p as u8, "pushes a task"), m));
                }
                None => {}
                Some(Notifying::TakeSleeper) => {
                    for v in self.sleepers() {
                        let mut m = *self;
                        m.take_sleeper(v);
                        m.producers[p].as_mut().expect("a producer").notifying = None;
                        out.push((Event::Producer(p as u8, "takes a sleeper's bit"), m));
                    }
                }
                Some(n) => {
                    for &spawn_ok in self.spawn_outcomes() {
                        let mut m = *self;
                        let next = m.notify_step(c, n, spawn_ok);
                        m.producers[p].as_mut().expect("a producer").notifying = next;
                        out.push((Event::Producer(p as u8, if spawn_ok { "notifies" } else { "notifies (a spawn fails)" }), m));
                    }
                }
            }
        }
        match self.shutdown {
            Shutdown::Ready if self.producers.iter().flatten().all(|p| p.tasks.is_empty() && p.notifying.is_none()) => {
                let mut m = *self;
                m.word = m.word.shutdown();
                m.shutdown = Shutdown::UnparkAll;
                out.push((Event::Shutdown("begins"), m));
            }
            Shutdown::UnparkAll | Shutdown::Release => {
                let mut m = *self;
                for w in m.workers.iter_mut().filter(|w| !matches!(w.pc, Pc::Unused | Pc::Exited)) {
                    w.token = true;
                }
                if m.shutdown == Shutdown::UnparkAll {
                    m.shutdown = Shutdown::Release;
                } else {
                    m.released = true;
                    m.shutdown = Shutdown::Done;
                }
                out.push((Event::Shutdown("unparks every worker"), m));
            }
            _ => {}
        }
        for i in 0..MAX_WORKERS {
            self.worker_steps(c, i, &mut out);
        }
        out
    }

    fn worker_steps(&self, c: &Config, i: usize, out: &mut Vec<(Event, Model)>) {
        let w = self.workers[i];
        let mut push = |label: &'static str, m: Model| out.push((Event::Thread(i as u8, label), m));
        // A notify in progress inside a step: its CAS, or its scan for a sleeper (a choice).
        let notify_then = |m: &Model, n: Notifying, then: &dyn Fn(&mut Model, Option<Notifying>)| -> Vec<Model> {
            let mut v = Vec::new();
            match n {
                Notifying::TakeSleeper => {
                    for s in m.sleepers() {
                        let mut m2 = *m;
                        m2.take_sleeper(s);
                        then(&mut m2, None);
                        v.push(m2);
                    }
                }
                n => {
                    for &spawn_ok in m.spawn_outcomes() {
                        let mut m2 = *m;
                        let next = m2.notify_step(c, n, spawn_ok);
                        then(&mut m2, next);
                        v.push(m2);
                    }
                }
            }
            v
        };
        match w.pc {
            Pc::Unused | Pc::Exited | Pc::Running(_) => {}
            Pc::Start => {
                let mut m = *self;
                m.workers[i].seeking = Seeking::new(false);
                m.workers[i].waiter = Waiter::default();
                m.workers[i].pc = Pc::WaitRead;
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
                if m.queue.is_empty() {
                    m.workers[i].seeking.came_up_empty();
                    m.workers[i].pc = Pc::AfterSearch;
                    push("search comes up empty", m);
                    return;
                }
                let kind = m.queue.pop().expect("not empty");
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
                let handoff = m.workers[i].seeking.leaving(false);
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
                waiter.leaving = m.done_for(i);
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
                                m.workers[i].pc = Pc::Search;
                            }
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
                if (s.notified() && !self.queue.is_empty()) || s.state() == State::Shutdown || self.done_for(i) {
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
                    if !s.notified() && s.state() != State::Shutdown && !m.done_for(i) { Pc::Sleeping } else { Pc::Withdraw };
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


    /// The running tasks that may end now (`Pc::Running`).
    pub(super) fn task_ends(&self) -> Vec<(Event, Model)> {
        let mut out = Vec::new();
        for i in 0..MAX_WORKERS {
            let Pc::Running(kind) = self.workers[i].pc else { continue };
            let mut m = *self;
            m.ran += 1;
            m.workers[i].pc = Pc::Search;
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
