//! [`Seeking`]: what a worker in the waiting loop (`run.rs`, `run_until`) holds and owes
//! between its searches and its waits, as one value. Its transitions are methods that return
//! what the worker must tell the pool; they touch no atomic, and the exhaustive test of the
//! protocol (`protocol/model.rs`) runs them beside the `Sync` word's.
//!
//! * **The waking right** (`is_waking`): consumed with a `Signaled` word, or handed on by the
//!   waking thread. Its holder notifies before it runs what it found (handing the right on) or
//!   gives it back when it goes idle (`Sync::wait`).
//! * **A search owed** (`owes_search`): a consumed notification stands for pushes this worker
//!   must look for until a search of its comes up empty (a notify that finds `notified` set
//!   writes nothing: several pushes share one notification). A worker that leaves its search
//!   before that hands a notification on: a wait that leaves (even one that was over when it
//!   consumed the notification), and a search that found a task, which may run for ever.
//! * **The drain** (`drain`): shutdown began; the worker runs what is left, and leaves only once
//!   a search that began after shutdown released its waits came up empty.
//! * **The registration** (`registered`): a wait inside a task registers as its signal's waiter
//!   only before its first sleep (a fork-join wait usually finds its forks and runs them, and
//!   its signal is then set with nobody to wake).

/// What a leaving wait tells the pool ([`Seeking::leaving`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// Nothing.
    Nothing,
    /// A notification (`notify(false)`).
    Notify,
    /// Its waking right, handed on (`notify(true)`).
    Waking,
}

/// A worker's state in `run_until` (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Seeking {
    /// It holds the waking right.
    pub(crate) is_waking: bool,
    /// It consumed a notification and no search of its came up empty since.
    owes_search: bool,
    /// Draining after shutdown began: `Some(released)`, with whether shutdown had released its
    /// waits when the last search began.
    drain: Option<bool>,
    /// Registered as its wait's waiter (always, for the worker's own loop, which waits for
    /// nothing but a notification).
    registered: bool,
}

impl Seeking {
    /// The state of a worker's own loop (`wait: false`), or of a wait inside a task.
    #[inline]
    pub(crate) const fn new(wait: bool) -> Self {
        Self { is_waking: false, owes_search: false, drain: None, registered: !wait }
    }

    /// A search found a task (`pushed`: it moved more into the worker's queues, where others
    /// may take them, or left more in its victim's): `Some(is_waking)` if the worker must
    /// notify before running it: the wake-up cascade, the waking right handed on, and a search
    /// it owes. The task may run for as long as it likes, so the search that the consumed
    /// notification stood for cannot wait until it returns: the pushes that shared that
    /// notification may sit where this search did not look (another worker's ring), with every
    /// other worker asleep. The right and the search are used up either way.
    #[inline]
    pub(crate) fn found(&mut self, pushed: bool) -> Option<bool> {
        let notify = (self.is_waking || self.owes_search || pushed).then_some(self.is_waking);
        self.is_waking = false;
        self.owes_search = false;
        notify
    }

    /// A search came up empty: whatever a consumed notification stood for has been looked at.
    #[inline]
    pub(crate) fn came_up_empty(&mut self) {
        self.owes_search = false;
    }

    /// The worker waits (`wait_or`): the waking right, if it holds it, goes with it into the
    /// wait (which gives it back when it goes idle). Returns whether it held it.
    #[inline]
    pub(crate) fn wait_begins(&mut self) -> bool {
        core::mem::take(&mut self.is_waking)
    }

    /// A wait consumed a notification (as the waking thread if `waking`).
    #[inline]
    pub(crate) fn notified(&mut self, waking: bool) {
        self.is_waking = waking;
        self.owes_search = true;
    }

    /// The wait saw shutdown: drain from now on.
    #[inline]
    pub(crate) fn drain(&mut self) {
        self.drain.get_or_insert(false);
    }

    /// A search begins; `released`: shutdown has released its waits (read only while
    /// draining, since it costs a fence).
    #[inline]
    pub(crate) fn search_begins(&mut self, released: impl FnOnce() -> bool) {
        if let Some(r) = self.drain.as_mut() {
            *r = released();
        }
    }

    /// `None` before shutdown; while draining, whether the last search began after shutdown
    /// released its waits (a drained worker may then leave).
    #[inline]
    pub(crate) fn draining(&self) -> Option<bool> {
        self.drain
    }

    /// Whether the wait still has to register as its signal's waiter before it sleeps.
    #[inline]
    pub(crate) fn must_register(&self) -> bool {
        !self.registered
    }

    /// The wait registered (or tried to: a signal set meanwhile ends the wait instead).
    #[inline]
    pub(crate) fn registered(&mut self) {
        self.registered = true;
    }

    /// The wait is over and the worker goes back to the waiting task's code, maybe for long:
    /// it hands its waking right on, or, owing a search (work it was told about may still be
    /// queued while every other worker sleeps) or holding tasks in its own queues (re-queued
    /// with the cheap notification, README "Self-requeued tasks"), sends a notification. The
    /// waking right is used up.
    #[inline]
    pub(crate) fn leaving(&mut self, own_tasks: bool) -> Handoff {
        if core::mem::take(&mut self.is_waking) {
            Handoff::Waking
        } else if self.owes_search || own_tasks {
            Handoff::Notify
        } else {
            Handoff::Nothing
        }
    }

    /// The worker sleeps on its parker outside the protocol (not idle: no notification picks
    /// it): a wait past its nesting bound, or a surplus worker (`surplus.rs`). `Some(is_waking)`
    /// if it must notify first, for what it will not run: its waking right (handed on), a
    /// search it owes, work it knows queued (`work_queued`: its own queues, the injector). It
    /// owes nothing after (the notification stands for the search), so a surplus worker that
    /// serves again starts afresh.
    #[inline]
    pub(crate) fn parks_outside(&mut self, work_queued: bool) -> Option<bool> {
        let is_waking = core::mem::take(&mut self.is_waking);
        let owes_search = core::mem::take(&mut self.owes_search);
        (is_waking || owes_search || work_queued).then_some(is_waking)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_consumed_notification_is_owed_until_a_search_comes_up_empty() {
        let mut s = Seeking::new(true);
        assert!(s.must_register());
        s.notified(false);
        assert_eq!(s.leaving(false), Handoff::Notify, "owes the search");
        assert_eq!(s.found(false), Some(false), "a task found: the owed search handed on");
        assert_eq!(s.leaving(false), Handoff::Nothing, "handed on already");
        assert_eq!(s.found(false), None);
        s.notified(false);
        s.came_up_empty();
        assert_eq!(s.leaving(false), Handoff::Nothing);
        assert_eq!(s.leaving(true), Handoff::Notify, "own tasks left behind");
        s.notified(true);
        assert_eq!(s.leaving(false), Handoff::Waking);
        assert_eq!(s.leaving(false), Handoff::Notify, "the right was handed on; the search is owed");
        s.notified(true);
        assert_eq!(s.parks_outside(false), Some(true));
        s.notified(true);
        assert!(s.wait_begins(), "the right goes into the wait");
        assert!(!s.wait_begins());
        s.notified(true);
        assert_eq!(s.found(false), Some(true), "the waking right is handed on");
        assert_eq!(s.found(true), Some(false), "more moved: notify");
        s.came_up_empty();
        assert_eq!(s.parks_outside(false), None);
        assert_eq!(s.parks_outside(true), Some(false));
    }

    #[test]
    fn a_worker_parking_outside_hands_on_what_it_holds_and_owes_nothing_after() {
        let mut s = Seeking::new(false);
        assert_eq!(s.parks_outside(false), None, "nothing held, nothing owed, nothing handed on");
        assert_eq!(s.parks_outside(true), Some(false), "its own tasks handed on: a notification");
        s.notified(true);
        assert_eq!(s.parks_outside(false), Some(true), "the waking right handed on");
        assert_eq!(s.parks_outside(false), None, "the search was handed on with it");
        s.notified(false);
        assert_eq!(s.parks_outside(false), Some(false), "a search owed: a notification");
        assert_eq!(s.leaving(false), Handoff::Nothing);
    }

    #[test]
    fn draining_remembers_whether_the_waits_were_released() {
        let mut s = Seeking::new(false);
        assert!(!s.must_register());
        s.search_begins(|| unreachable!("not read before shutdown"));
        assert_eq!(s.draining(), None);
        s.drain();
        s.search_begins(|| false);
        assert_eq!(s.draining(), Some(false));
        s.search_begins(|| true);
        s.drain();
        assert_eq!(s.draining(), Some(true), "a second Shutdown keeps the drain");
    }
}
