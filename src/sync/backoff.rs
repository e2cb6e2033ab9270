//! [`Backoff`]: waiting for another thread to make progress that no signal announces (a push
//! half-linked, a lock held, a pool not idle yet): spin a little, then sleep on the caller's
//! parker in steps that grow, so a host without preemption still lets the other thread run
//! and a long wait costs no CPU.

use core::time::Duration;

use crate::platform::Parker;

/// Spin-loop hints before the first sleep. 0 under loom and shuttle, where a spin is a yield
/// already and one per round keeps the models' branch counts bounded.
const SPINS: u32 = if cfg!(any(loom, shuttle)) { 0 } else { 64 };

/// The state of one wait: how many rounds it spun, and its next sleep.
#[derive(Debug)]
pub(crate) struct Backoff {
    spins: u32,
    sleep_us: u32,
    max_us: u32,
}

impl Backoff {
    /// A wait whose sleeps start at `first_us` microseconds and double up to `max_us`.
    /// (32-bit: the sleeps are short, and a 64-bit product and division cost code on 32-bit
    /// targets.)
    pub(crate) const fn new(first_us: u32, max_us: u32) -> Self {
        Self { spins: 0, sleep_us: first_us, max_us }
    }

    /// One round: a spin-loop hint for the first rounds, then a sleep on `parker` (the calling
    /// thread's own: an unpark meant for it only ends a sleep early).
    pub(crate) fn snooze<P: Parker>(&mut self, parker: &P) {
        // Never true under loom and shuttle (SPINS is 0 there).
        #[allow(clippy::absurd_extreme_comparisons)]
        if self.spins < SPINS {
            self.spins += 1;
            super::hint::spin_hint();
            return;
        }
        parker.park_timeout(Duration::from_micros(u64::from(self.sleep_us)));
        self.sleep_us = self.sleep_us.saturating_mul(2).min(self.max_us);
    }
}
