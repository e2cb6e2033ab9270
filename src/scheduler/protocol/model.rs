//! The exhaustive test of the waking protocol: the `Sync` word's transitions (`sync_word.rs`)
//! and a worker's `Seeking` (`seeking.rs`), composed without threads into an abstract pool of
//! up to three workers, and every reachable state explored depth-first, every enabled event
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
//!
//! A scenario may resize the pool while it runs (`surplus.rs`): `set_max_threads` as a thread
//! of its own, and the surplus worker's rows (S5) in the workers' own loops.
//!
//! The steps of one worker are in `steps.rs`; the surplus worker's and the resizer's in
//! `surplus.rs`.

use std::vec::Vec;

use crate::scheduler::seeking::Seeking;
use crate::scheduler::sync_word::{Notify, Sync, Waiter, Wake};

pub(super) const MAX_WORKERS: usize = 3;

/// A task of the model.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) enum Kind {
    Plain,
    /// Submits a `Child` and waits for it.
    Wait,
    Child,
    /// An async task whose poll wakes another (a `Plain`) on its own worker: into that
    /// worker's LIFO slot, with no notification (README row X3), and returns.
    Waker,
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
    /// The own loop's busy path after a task: reads its `surplus` flag (`run.rs`).
    AfterTask,
    /// `retire_if_surplus` (`surplus.rs`): reads `max_threads`. `search`: the loop searches
    /// after it (else it waits: the loop's first turn).
    Retire { search: bool },
    /// A retiring worker's notify (`Seeking::parks_outside`).
    RetireNotify { search: bool, n: Notifying },
    /// Surplus, parked on its parker outside the protocol (`parked`), or looking again at
    /// `max_threads` and the word.
    Retired { search: bool, parked: bool },
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) struct Thread {
    pub(super) pc: Pc,
    pub(super) seeking: Seeking,
    /// The outer loop's state while a `Wait` task waits inside it.
    pub(super) outer: Option<Seeking>,
    pub(super) waiter: Waiter,
    pub(super) token: bool,
    pub(super) in_idle_set: bool,
    pub(super) spinning: bool,
    /// Its start order (`Worker::index`): whether it is surplus. Kept only in scenarios that
    /// resize; elsewhere the workers are interchangeable (`canonical`).
    pub(super) index: u8,
    /// Its `Worker::surplus` flag, which its busy path reads.
    pub(super) surplus: bool,
    /// Its LIFO slot holds a task (a `Plain` woken by its `Waker`'s poll).
    pub(super) lifo: bool,
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
        index: 0,
        surplus: false,
        lifo: false,
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

    pub(super) fn push(&mut self, k: Kind) {
        *self.items.iter_mut().find(|i| i.is_none()).expect("room in the queue") = Some(k);
    }

    pub(super) fn pop(&mut self) -> Option<Kind> {
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
pub(super) enum Shutdown {
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
    pub(super) shutdown: Shutdown,
    pub(super) released: bool,
    /// The child is done (its signal set).
    pub(super) child_done: bool,
    /// The worker registered as the child's waiter.
    pub(super) waiter_of_child: Option<usize>,
    pub(super) ran: u8,
    /// A thread start failed on the way here.
    pub(super) spawn_failed: bool,
    /// `Protocol::max_threads`.
    pub(super) max: u32,
    pub(super) resizer: Resizer,
}

/// `set_max_threads`, run once for each value of the scenario's `resize`, in order: it stores
/// `max_threads`, sets the workers' `surplus` flags, unparks every worker and notifies.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct Resizer {
    /// The values of `resize` begun.
    pub(super) begun: u8,
    pub(super) step: Option<Resizing>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Resizing {
    Flags,
    UnparkAll,
    Notify(Notifying),
}

/// One scenario: the pool's size, the idle spin, the producers' tasks, shutdown at the end,
/// and the values `set_max_threads` sets meanwhile (none: the pool is not resized).
#[derive(Clone, Copy, Debug)]
pub(super) struct Config {
    pub(super) max_threads: u32,
    pub(super) spins: bool,
    pub(super) shutdown: bool,
    pub(super) resize: &'static [u32],
}

/// One event of the exploration, for the trace of a failure.
#[derive(Clone, Copy)]
pub(super) enum Event {
    Producer(u8, &'static str),
    Thread(u8, &'static str),
    Shutdown(&'static str),
    Resize(&'static str),
}

impl core::fmt::Debug for Event {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Event::Producer(p, what) => write!(f, "producer {p} {what}"),
            Event::Thread(w, what) => write!(f, "worker {w} {what}"),
            Event::Shutdown(what) => write!(f, "shutdown {what}"),
            Event::Resize(what) => write!(f, "set_max_threads {what}"),
        }
    }
}

impl Model {
    pub(super) fn new(producers: &[&[Kind]], c: &Config) -> Self {
        Model {
            word: Sync::default(),
            workers: [Thread::UNUSED; MAX_WORKERS],
            queue: Fifo::default(),
            producers: core::array::from_fn(|p| producers.get(p).map(|t| Producer { tasks: Fifo::of(t), notifying: None })),
            shutdown: if c.shutdown { Shutdown::Ready } else { Shutdown::Off },
            released: false,
            child_done: false,
            waiter_of_child: None,
            ran: 0,
            spawn_failed: false,
            max: c.max_threads,
            resizer: Resizer { begun: 0, step: None },
        }
    }

    pub(super) fn tasks_total(producers: &[&[Kind]]) -> u8 {
        // A `Wait` task brings its child, a `Waker` the task it wakes.
        producers.iter().flat_map(|t| t.iter()).map(|k| if matches!(k, Kind::Wait | Kind::Waker) { 2 } else { 1 }).sum()
    }

    /// The notify step `n` of a notifier; the next step, if the notify goes on.
    fn notify_step(&mut self, c: &Config, n: Notifying, spawn_ok: bool) -> Option<Notifying> {
        match n {
            Notifying::Cas { is_waking } => match self.word.notify(is_waking, self.max) {
                Notify::Stop | Notify::Shared => None,
                Notify::Write(next, wake) => {
                    self.word = next;
                    match wake {
                        Wake::Nothing => None,
                        Wake::Unpark => Some(Notifying::TakeSleeper),
                        Wake::Spawn => {
                            if spawn_ok {
                                let started = self.workers.iter().filter(|w| w.pc != Pc::Unused).count();
                                let slot = self.workers.iter().position(|w| w.pc == Pc::Unused).expect("a slot for every spawn");
                                self.workers[slot].pc = Pc::Start;
                                if !c.resize.is_empty() {
                                    self.workers[slot].index = started as u8;
                                }
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

    /// A notify in progress inside a step of anyone: its CAS, or its scan for a sleeper (a
    /// choice); `then` records where the notifier goes on.
    pub(super) fn notify_then(&self, c: &Config, n: Notifying, then: &dyn Fn(&mut Model, Option<Notifying>)) -> Vec<Model> {
        let mut v = Vec::new();
        match n {
            Notifying::TakeSleeper => {
                for s in self.sleepers() {
                    let mut m = *self;
                    m.take_sleeper(s);
                    then(&mut m, None);
                    v.push(m);
                }
            }
            n => {
                for &spawn_ok in self.spawn_outcomes() {
                    let mut m = *self;
                    let next = m.notify_step(c, n, spawn_ok);
                    then(&mut m, next);
                    v.push(m);
                }
            }
        }
        v
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

    /// Whether a task waits anywhere: in the queue or a LIFO slot.
    pub(super) fn queued(&self) -> bool {
        !self.queue.is_empty() || self.workers.iter().any(|w| w.lifo)
    }

    /// Whether the wait of worker `i` inside its `Wait` task is over.
    pub(super) fn done_for(&self, i: usize) -> bool {
        self.workers[i].outer.is_some() && self.child_done
    }

    /// The condition of the idle wait of worker `i`: its wait inside a task is over, or (its
    /// own loop) it is surplus.
    pub(super) fn over(&self, i: usize) -> bool {
        if self.workers[i].outer.is_some() { self.child_done } else { self.is_surplus(i) }
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
                Some(n) => {
                    for m in self.notify_then(c, n, &|m, next| m.producers[p].as_mut().expect("a producer").notifying = next) {
                        out.push((Event::Producer(p as u8, "notifies"), m));
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
        self.resizer_steps(c, &mut out);
        for i in 0..MAX_WORKERS {
            self.worker_steps(c, i, &mut out);
        }
        out
    }
}

