//! A queue's admission ([`Admission`]): its counts as a value, with one transition per event
//! (a submit, a runner taking its next task, a cancel, a width change), each returning what
//! the caller must do. The queue applies them under its own lock (`queues::Inner::state`),
//! together with the list they count, so the counts and the list never disagree.
//!
//! Invariants (checked exhaustively over small counts below, without atomics):
//! * `running <= runners`: a task runs only inside a runner, one at a time;
//! * a task starts (`Step::Run`) only while `runners <= width`, so `running <= width` once
//!   the runners left over from a narrowing have ended (they finish their task first);
//! * `runners` grows only while `runners < width`;
//! * nothing is stranded: `waiting > 0 && width > 0` implies `runners > 0`, and a queue with
//!   room (`runners < width`) has at least as many idle runners (`runners - running`, pool
//!   tasks submitted and not yet started) as waiting tasks, up to the room;
//! * `bound` (0 = none) caps `waiting` on submit: a task refused is counted nowhere;
//! * a handoff queue (`bound` = [`HANDOFF`]) accepts a task only while `waiting + running <
//!   width`, so an accepted task has a width slot, and an idle runner, to start it at once
//!   (`runners - running >= waiting`);
//! * a place frees where a transition leaves the queue not [full](Admission::is_full): a
//!   task starting (bounded) or ending (handoff), a cancel, a widening (handoff). The queue
//!   wakes a place-waiter after each such transition.

/// The `bound` of a handoff queue (module docs; `QueueConfig::HANDOFF`).
pub(super) const HANDOFF: usize = usize::MAX;

/// The counts of one queue (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Admission {
    /// Tasks in the queue's list, not started.
    pub(super) waiting: usize,
    /// Tasks started and not finished (each inside a runner).
    pub(super) running: usize,
    /// Runners submitted to the pool and not ended (running a task or about to take one).
    pub(super) runners: usize,
    /// At most this many tasks start to run at once; 0 = suspended.
    pub(super) width: usize,
    /// At most this many tasks wait; 0 = unbounded; [`HANDOFF`]: none waits for a slot.
    pub(super) bound: usize,
}

/// What a runner does next ([`Admission::take`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Pop the oldest waiting task and run it (counted as running already).
    Run,
    /// Its batch is spent and tasks wait: submit itself to the pool again (it stays a runner).
    Yield,
    /// It ended (no longer counted); `idle`: the queue has nothing waiting and no runner, so
    /// its waiters are woken.
    End { idle: bool },
}

impl Admission {
    /// An empty queue.
    pub(super) const fn new(width: usize, bound: usize) -> Self {
        Self { waiting: 0, running: 0, runners: 0, width, bound }
    }

    /// Whether a task of this queue, running in one of its runners, may wait for a place in
    /// it: another runner is out and the width lets it take the next task once its own has
    /// ended (a place frees then). When only the caller's runner could free one, it would
    /// wait for itself.
    pub(super) fn others_free_places(&self) -> bool {
        self.runners > 1 && self.width > 1
    }

    /// Nothing waits and no runner is out: waits return, and the queue may be freed.
    pub(super) fn is_idle(&self) -> bool {
        self.waiting == 0 && self.runners == 0
    }

    /// Whether a submit would be refused for room: `bound` tasks wait, or, in a handoff
    /// queue, every width slot holds a task (running, or about to start in an idle runner).
    pub(super) fn is_full(&self) -> bool {
        match self.bound {
            0 => false,
            HANDOFF => self.waiting + self.running >= self.width,
            bound => self.waiting >= bound,
        }
    }

    /// One more task waits: `Err(())` if the queue [is full](Self::is_full) (nothing changed),
    /// else whether the caller must submit one more runner (already counted).
    pub(super) fn submit(&mut self) -> Result<bool, ()> {
        if self.is_full() {
            return Err(());
        }
        self.waiting += 1;
        Ok(self.grow())
    }

    /// Counts one more runner if there is room under the width and fewer idle runners than
    /// waiting tasks; the caller submits it.
    fn grow(&mut self) -> bool {
        let idle = self.runners - self.running;
        let grow = self.runners < self.width && idle < self.waiting;
        if grow {
            self.runners += 1;
        }
        grow
    }

    /// The width becomes `width`: how many runners the caller submits now (already counted).
    /// Narrowing starts none and stops none; runners above the width end after their task.
    pub(super) fn set_width(&mut self, width: usize) -> usize {
        self.width = width;
        let mut n = 0;
        while self.grow() {
            n += 1;
        }
        n
    }

    /// A runner's next step: `finished` if it just ran a task, `batch_left` if it may run one
    /// more before yielding its thread.
    pub(super) fn take(&mut self, finished: bool, batch_left: bool) -> Step {
        if finished {
            self.running -= 1;
        }
        if self.runners > self.width || self.waiting == 0 {
            self.runners -= 1;
            return Step::End { idle: self.is_idle() };
        }
        if !batch_left {
            return Step::Yield;
        }
        self.waiting -= 1;
        self.running += 1;
        Step::Run
    }

    /// The pool refused a runner that `submit` or `set_width` counted: it is not counted.
    pub(super) fn refused(&mut self) -> bool {
        self.runners -= 1;
        self.is_idle()
    }

    /// A waiting task was unlinked (cancelled, or handed back): whether the queue is idle now.
    pub(super) fn remove(&mut self, n: usize) -> bool {
        self.waiting -= n;
        self.is_idle()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Admission, Step, HANDOFF};
    use std::collections::HashSet;
    use std::vec::Vec;

    const MAX_WIDTH: usize = 3;
    const MAX_WAITING: usize = 4;

    fn check(a: &Admission) {
        assert!(a.running <= a.runners, "{a:?}: a task runs outside a runner");
        assert!(a.waiting == 0 || a.width == 0 || a.runners > 0, "{a:?}: waiting tasks stranded");
        let room = a.width.saturating_sub(a.runners);
        let idle = a.runners - a.running;
        assert!(room == 0 || idle >= a.waiting, "{a:?}: room, but a waiting task has no runner");
        assert!(a.bound == 0 || a.bound == HANDOFF || a.waiting <= a.bound, "{a:?}: over the bound");
    }

    /// Every state reachable from an empty queue (each width and bound) through every event,
    /// in any order: each satisfies the module's invariants, a start never exceeds the width,
    /// and the runners only grow below the width.
    #[test]
    fn every_reachable_state_keeps_the_invariants() {
        let mut seen = HashSet::new();
        let mut todo: Vec<Admission> =
            (0..=MAX_WIDTH).flat_map(|w| [0, 1, 2, HANDOFF].map(move |b| Admission::new(w, b))).collect();
        while let Some(a) = todo.pop() {
            if !seen.insert(a) {
                continue;
            }
            check(&a);
            let mut next = Vec::new();
            if a.waiting < MAX_WAITING {
                let mut b = a;
                match b.submit() {
                    Ok(grew) => {
                        assert_eq!(b.waiting, a.waiting + 1);
                        assert!(!grew || a.runners < a.width, "{a:?}: a runner beyond the width");
                        if a.bound == HANDOFF {
                            assert!(b.waiting + b.running <= b.width, "{a:?}: handed off with no slot");
                            assert!(b.runners - b.running >= b.waiting, "{a:?}: handed off with no runner to start it");
                        }
                        next.push(b);
                    }
                    Err(()) => {
                        let full = if a.bound == HANDOFF { a.waiting + a.running >= a.width } else { a.bound != 0 && a.waiting >= a.bound };
                        assert!(full && b == a, "{a:?}: refused with room");
                    }
                }
            }
            // An idle runner starts (a pending one, or one that yielded).
            if a.runners > a.running {
                for batch_left in [true, false] {
                    let mut b = a;
                    let step = b.take(false, batch_left);
                    step_checks(&a, &b, step);
                    next.push(b);
                }
            }
            // A running task finishes.
            if a.running > 0 {
                for batch_left in [true, false] {
                    let mut b = a;
                    let step = b.take(true, batch_left);
                    step_checks(&a, &b, step);
                    next.push(b);
                }
            }
            if a.waiting > 0 {
                let mut b = a;
                assert_eq!(b.remove(1), b.is_idle());
                next.push(b);
            }
            for w in 0..=MAX_WIDTH {
                let mut b = a;
                let n = b.set_width(w);
                assert_eq!(b.runners, a.runners + n);
                assert!(n == 0 || b.runners <= w, "{a:?} -> width {w}: runners beyond the width");
                next.push(b);
            }
            todo.extend(next);
        }
        assert!(seen.len() > 100, "explored {} states", seen.len());
    }

    fn step_checks(a: &Admission, b: &Admission, step: Step) {
        match step {
            Step::Run => {
                assert!(b.running <= b.width, "{a:?} -> {b:?}: started beyond the width");
                assert_eq!(b.waiting + 1, a.waiting);
            }
            Step::Yield => assert!(b.waiting > 0 && b.runners <= b.width),
            Step::End { idle } => {
                assert_eq!(idle, b.is_idle());
                assert!(b.waiting == 0 || a.runners > a.width, "{a:?}: a runner ended with work it could run");
            }
        }
    }

    #[test]
    fn narrowing_lets_running_tasks_finish_and_starts_none_until_below() {
        let mut a = Admission::new(3, 0);
        for _ in 0..5 {
            a.submit().unwrap();
        }
        assert_eq!(a.runners, 3);
        for _ in 0..3 {
            assert_eq!(a.take(false, true), Step::Run);
        }
        assert_eq!(a.set_width(1), 0);
        assert_eq!(a.take(true, true), Step::End { idle: false });
        assert_eq!(a.take(true, true), Step::End { idle: false });
        assert_eq!((a.running, a.runners), (1, 1));
        assert_eq!(a.take(true, true), Step::Run, "below the width again: the next starts");
        assert_eq!(a.set_width(3), 1, "widening starts a waiting task at once");
    }

    /// A full queue's own task may wait for a place only while another runner can take the
    /// next task: at width 1 (or with its runner the only one out) it would wait for itself.
    #[test]
    fn a_place_frees_for_an_own_task_only_through_another_runner() {
        let mut a = Admission::new(2, 1);
        assert_eq!(a.submit(), Ok(true));
        assert_eq!(a.take(false, true), Step::Run);
        assert!(!a.others_free_places(), "one runner out: the caller's");
        assert_eq!(a.submit(), Ok(true));
        assert!(a.others_free_places(), "a second runner will take the next task");
        assert_eq!(a.take(false, true), Step::Run);
        assert_eq!(a.submit(), Ok(false));
        assert_eq!(a.submit(), Err(()), "full");
        assert!(a.others_free_places());
        assert_eq!(a.take(true, true), Step::Run, "the other's task ends: it takes the waiting one");
        assert_eq!(a.waiting, 0, "a place freed");
        a.set_width(1);
        assert!(!a.others_free_places(), "narrowed to 1: nothing else may start");
    }

    /// A handoff queue takes a task only while a slot can start it; a running task ending (not
    /// a waiting one starting) frees a place, as does a widening.
    #[test]
    fn handoff_accepts_only_what_can_start_at_once() {
        let mut a = Admission::new(2, HANDOFF);
        assert_eq!(a.submit(), Ok(true));
        assert_eq!(a.submit(), Ok(true), "a second slot is free");
        assert_eq!(a.submit(), Err(()), "both slots taken, though neither task started yet");
        assert_eq!(a.take(false, true), Step::Run);
        assert!(a.is_full(), "a start frees no place");
        assert_eq!(a.take(false, true), Step::Run);
        assert_eq!(a.take(true, true), Step::End { idle: false });
        assert!(!a.is_full(), "an end frees one");
        assert_eq!(a.submit(), Ok(true));
        assert!(a.is_full());
        a.set_width(3);
        assert!(!a.is_full(), "a widening frees one");
        a.set_width(0);
        assert!(a.is_full(), "suspended: nothing can start");
        assert!(!Admission::new(1, 1).is_full() && !Admission::new(0, 0).is_full());
    }

    #[test]
    fn width_zero_holds_every_task_until_widened() {
        let mut a = Admission::new(0, 0);
        for _ in 0..4 {
            assert_eq!(a.submit(), Ok(false));
        }
        assert_eq!(a.set_width(2), 2);
        assert_eq!(a.set_width(8), 2, "no more runners than waiting tasks");
    }

    #[test]
    fn bound_counts_waiting_not_running() {
        let mut a = Admission::new(1, 2);
        assert_eq!(a.submit(), Ok(true));
        assert_eq!(a.submit(), Ok(false));
        assert_eq!(a.submit(), Err(()));
        assert_eq!(a.take(false, true), Step::Run);
        assert_eq!(a.submit(), Ok(false), "a started task frees its place");
        assert_eq!(a.submit(), Err(()));
    }
}
