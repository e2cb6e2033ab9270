//! Unit tests of the task state word (`state.rs`): its transitions, without threads.

use super::*;

#[test]
fn fields_do_not_overlap() {
    let flags = [
        Snapshot::SCHEDULED,
        Snapshot::RUNNING,
        Snapshot::NOTIFIED,
        Snapshot::COMPLETE,
        Snapshot::CANCELLED,
        Snapshot::JOIN_INTEREST,
    ];
    let mut seen = 0usize;
    for f in flags {
        assert_eq!(f.count_ones(), 1, "{f:#x} is one bit");
        assert_eq!(seen & f, 0, "{f:#x} overlaps another flag");
        seen |= f;
    }
    assert_eq!(seen, Snapshot::FLAGS, "every flag bit is named");
    assert_eq!(Snapshot::FLAGS & Snapshot::REF_MASK, 0, "flags and count overlap");
    assert_eq!(Snapshot::FREE & (Snapshot::FLAGS | Snapshot::REF_MASK), 0, "free bits are free");
    assert_eq!(Snapshot::REF_ONE & Snapshot::REF_MASK, Snapshot::REF_ONE);
    assert_eq!(Snapshot::FLAGS | Snapshot::FREE | Snapshot::REF_MASK, usize::MAX, "every bit has one meaning");
}

#[test]
fn refcount_round_trip() {
    let s = Snapshot::INITIAL;
    assert_eq!(s.refs(), 2);
    assert!(s.is_scheduled() && s.has_join_interest() && !s.is_running());
    let s = s.ref_inc().ref_dec().ref_dec();
    assert_eq!(s.refs(), 1);
    assert_eq!(s.0 & Snapshot::FLAGS, Snapshot::SCHEDULED | Snapshot::JOIN_INTEREST);
    assert!(Snapshot(0).is_idle());
    assert!(!Snapshot::INITIAL.is_idle());
}

#[test]
fn debug_is_hex_and_named() {
    let text = std::format!("{:?}", Snapshot::INITIAL);
    assert!(text.contains("0x221"), "{text}");
    assert!(text.contains("SCHEDULED") && text.contains("JOIN_INTEREST") && text.contains("refs: 2"), "{text}");
}

/// One life on one thread: every transition returns what the caller must do.
#[test]
fn transitions_in_sequence() {
    let state = State::new();
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    // Woken by value while running: NOTIFIED, the waker's reference consumed.
    state.ref_inc();
    assert_eq!(state.transition_to_notified_by_val(), TransitionToNotifiedByVal::DoNothing);
    let s = state.load(Ordering::Relaxed);
    assert!(s.is_running() && s.is_notified() && !s.may_requeue_running());
    assert_eq!(state.transition_to_idle(s, false), TransitionToIdle::Requeue);
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    let s = state.load(Ordering::Relaxed);
    assert_eq!(state.transition_to_idle(s, false), TransitionToIdle::Idle);
    // Idle: a wake by reference queues it with a new reference.
    assert_eq!(state.transition_to_notified_by_ref(), TransitionToNotifiedByRef::Submit);
    assert_eq!(state.transition_to_notified_by_ref(), TransitionToNotifiedByRef::DoNothing);
    assert_eq!(state.load(Ordering::Relaxed).refs(), 2);
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(state.transition_to_complete(), TransitionToComplete::NotifyJoin);
    assert_eq!(state.transition_to_cancelled(), TransitionToCancelled::DoNothing);
    assert_eq!(state.transition_to_join_handle_dropped(), TransitionToJoinHandleDropped::DropOutput);
    assert!(!state.ref_dec());
    assert!(state.ref_dec());
}

#[test]
fn abort_claims_only_an_idle_task() {
    let state = State::new();
    // Queued: abort only marks it; the runner sees the cancellation.
    assert_eq!(state.transition_to_cancelled(), TransitionToCancelled::DoNothing);
    assert_eq!(state.transition_to_running(), TransitionToRunning::Cancelled);
    assert_eq!(state.transition_to_complete(), TransitionToComplete::NotifyJoin);

    let state = State::new();
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    let s = state.load(Ordering::Relaxed);
    assert_eq!(state.transition_to_idle(s, false), TransitionToIdle::Idle);
    assert_eq!(state.transition_to_cancelled(), TransitionToCancelled::CancelIdle);
    assert!(state.load(Ordering::Relaxed).is_running());
    // The handle dropped before completion detaches; the last reference frees.
    assert_eq!(state.transition_to_complete(), TransitionToComplete::NotifyJoin);
    let state = State::new();
    assert_eq!(state.transition_to_join_handle_dropped(), TransitionToJoinHandleDropped::Detached);
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(state.transition_to_complete(), TransitionToComplete::DropOutput);
    assert!(state.ref_dec());
}
