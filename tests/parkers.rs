//! Unit tests of the two std parkers, [`FutexParker`] and [`CondvarParker`], against the
//! `Parker` contract (binary semaphore, like `std::thread::park`):
//!
//! * an unpark before park makes that park return at once;
//! * park blocks until another thread unparks;
//! * park_timeout with no token returns after roughly the timeout (only a generous lower bound
//!   is asserted, never an upper bound: machines under load are slow), and leaves no token;
//! * many unparks merge into one token;
//! * a ping-pong of many round trips between two threads loses no wake-up.
//!
//! (The contract allows spurious returns from `park`; these two implementations loop on their
//! token and never return without one, which the "blocks" test checks.)

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{scaled_min, watchdog, watchdog_secs};
#[cfg(target_os = "linux")]
use pool::FutexParker;
use pool::{CondvarParker, Parker};

/// Generates the same tests for each parker type.
macro_rules! parker_tests {
    ($module:ident, $P:ty) => {
        mod $module {
            use super::*;

            fn new() -> Arc<$P> {
                Arc::new(<$P>::default())
            }

            #[test]
            fn unpark_before_park_returns_at_once() {
                watchdog(concat!(stringify!($module), "::unpark_before_park"), watchdog_secs(10), |_| {
                    let p = new();
                    p.unpark();
                    p.park(); // must not block: the token is there
                    p.unpark();
                    p.park_timeout(Duration::from_secs(3600)); // token: returns at once
                });
            }

            #[test]
            fn park_blocks_until_unparked_from_another_thread() {
                watchdog(concat!(stringify!($module), "::park_blocks"), watchdog_secs(10), |_| {
                    for _ in 0..scaled_min(5, 2) {
                        let p = new();
                        let returned = Arc::new(AtomicBool::new(false));
                        let (p2, r2) = (Arc::clone(&p), Arc::clone(&returned));
                        let t = std::thread::spawn(move || {
                            p2.park();
                            r2.store(true, Ordering::SeqCst);
                        });
                        std::thread::sleep(Duration::from_millis(30));
                        assert!(!returned.load(Ordering::SeqCst), "park returned without a token");
                        p.unpark();
                        t.join().unwrap();
                        assert!(returned.load(Ordering::SeqCst));
                    }
                });
            }

            #[test]
            fn park_timeout_without_token_waits_and_leaves_no_token() {
                watchdog(concat!(stringify!($module), "::park_timeout"), watchdog_secs(10), |_| {
                    let p = new();
                    let timeout = Duration::from_millis(40);
                    let start = Instant::now();
                    p.park_timeout(timeout);
                    let waited = start.elapsed();
                    // Generous lower bound only (early returns are allowed by the contract, but
                    // these parkers should not make a habit of it).
                    assert!(waited >= timeout / 2, "park_timeout({timeout:?}) returned after {waited:?}");
                    // The timeout produced no token: the next timed park waits again.
                    let start = Instant::now();
                    p.park_timeout(timeout);
                    assert!(start.elapsed() >= timeout / 2, "a timed-out park left a token behind");
                    // A token is consumed by park_timeout: the one after it waits.
                    p.unpark();
                    let start = Instant::now();
                    p.park_timeout(Duration::from_secs(3600));
                    assert!(start.elapsed() < Duration::from_secs(3000));
                    let start = Instant::now();
                    p.park_timeout(timeout);
                    assert!(start.elapsed() >= timeout / 2, "park_timeout did not consume the token");
                });
            }

            #[test]
            fn park_timeout_is_woken_by_unpark() {
                watchdog(concat!(stringify!($module), "::park_timeout_woken"), watchdog_secs(10), |_| {
                    let p = new();
                    let p2 = Arc::clone(&p);
                    let t = std::thread::spawn(move || {
                        // An hour: only the unpark can end it within the watchdog.
                        p2.park_timeout(Duration::from_secs(3600));
                    });
                    std::thread::sleep(Duration::from_millis(20));
                    p.unpark();
                    t.join().unwrap();
                });
            }

            #[test]
            fn many_unparks_merge_into_one_token() {
                watchdog(concat!(stringify!($module), "::merge"), watchdog_secs(10), |_| {
                    let p = new();
                    for _ in 0..100 {
                        p.unpark();
                    }
                    p.park(); // the one token
                    let timeout = Duration::from_millis(40);
                    let start = Instant::now();
                    p.park_timeout(timeout);
                    assert!(start.elapsed() >= timeout / 2, "100 unparks left more than one token");
                    // The same with unparks from several threads at once.
                    let threads: Vec<_> = (0..4)
                        .map(|_| {
                            let p = Arc::clone(&p);
                            std::thread::spawn(move || {
                                for _ in 0..1000 {
                                    p.unpark();
                                }
                            })
                        })
                        .collect();
                    for t in threads {
                        t.join().unwrap();
                    }
                    p.park();
                    let start = Instant::now();
                    p.park_timeout(timeout);
                    assert!(start.elapsed() >= timeout / 2, "concurrent unparks left more than one token");
                });
            }

            /// Two threads hand a turn back and forth many times, each sleeping on its own
            /// parker in a loop on the condition: a lost wake-up hangs, and the watchdog fails.
            #[test]
            fn ping_pong_loses_no_wakeup() {
                let rounds = scaled_min(50_000, 50);
                watchdog(concat!(stringify!($module), "::ping_pong"), watchdog_secs(30), move |p| {
                    let parkers = [new(), new()];
                    let turn = Arc::new(AtomicUsize::new(0));
                    let done = Arc::new(AtomicUsize::new(0));
                    p.track_value("round trips", &done);
                    let threads: Vec<_> = (0..2usize)
                        .map(|me| {
                            let parkers = parkers.clone();
                            let (turn, done) = (Arc::clone(&turn), Arc::clone(&done));
                            std::thread::spawn(move || {
                                for _ in 0..rounds {
                                    while turn.load(Ordering::Acquire) % 2 != me {
                                        parkers[me].park();
                                    }
                                    turn.fetch_add(1, Ordering::AcqRel);
                                    parkers[1 - me].unpark();
                                    if me == 1 {
                                        done.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            })
                        })
                        .collect();
                    for t in threads {
                        t.join().unwrap();
                    }
                    assert_eq!(turn.load(Ordering::SeqCst), 2 * rounds);
                });
            }

            /// Unparks racing a park that is just starting: the parked thread always wakes.
            #[test]
            fn unpark_racing_park() {
                let rounds = scaled_min(20_000, 20);
                watchdog(concat!(stringify!($module), "::unpark_racing_park"), watchdog_secs(30), move |p| {
                    let parker = new();
                    let progress = Arc::new(AtomicUsize::new(0));
                    p.track_value("rounds", &progress);
                    let (pk, pr) = (Arc::clone(&parker), Arc::clone(&progress));
                    let parked = std::thread::spawn(move || {
                        for i in 0..rounds {
                            // Wait for round i's token (each round's unpark comes after we
                            // announced the round).
                            pr.store(2 * i + 1, Ordering::SeqCst);
                            pk.park();
                        }
                    });
                    for i in 0..rounds {
                        while progress.load(Ordering::SeqCst) != 2 * i + 1 {
                            std::hint::spin_loop();
                            if i % 64 == 0 {
                                std::thread::yield_now();
                            }
                        }
                        progress.store(2 * i + 2, Ordering::SeqCst);
                        parker.unpark();
                    }
                    parked.join().unwrap();
                });
            }
        }
    };
}

#[cfg(target_os = "linux")]
parker_tests!(futex, FutexParker);
parker_tests!(condvar, CondvarParker);
