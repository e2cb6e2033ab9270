//! A parker on one Linux futex word (private futex; `linux-futex` crate).
//!
//! States: `EMPTY` (0, no token), `PARKED` (-1 as u32: the owner sleeps or is about to),
//! `NOTIFIED` (1, a token). The owner moves EMPTY->PARKED and sleeps while the word is PARKED;
//! `unpark` swaps in NOTIFIED and issues a wake only if it displaced PARKED, so an unpark of a
//! running thread costs one atomic swap and no syscall.

use core::time::Duration;
use crate::sync::Ordering;

use linux_futex::{Futex, Private};

use crate::platform::Parker;

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = u32::MAX;

/// A [`Parker`] on a Linux futex.
///
/// ```
/// use pool::{FutexParker, Parker};
/// let p = FutexParker::new();
/// p.unpark();
/// p.park(); // returns at once: the token was there
/// ```
pub struct FutexParker {
    state: Futex<Private>,
}

impl core::fmt::Debug for FutexParker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FutexParker").field("state", &self.state.value.load(Ordering::Relaxed)).finish()
    }
}

impl Default for FutexParker {
    fn default() -> Self {
        Self::new()
    }
}

impl FutexParker {
    /// A parker with no token.
    ///
    /// ```
    /// use pool::{FutexParker, Parker};
    /// let parker = FutexParker::new();
    /// parker.park_timeout(std::time::Duration::from_millis(1)); // no token: times out
    /// ```
    pub const fn new() -> Self {
        Self { state: Futex::new(EMPTY) }
    }

    /// Consumes a token if there is one; otherwise announces PARKED. Returns true if a token
    /// was consumed.
    fn try_consume_or_announce(&self) -> bool {
        // Acquire: pairs with unpark's Release swap, so what the unparker did is visible.
        if self.state.value.swap(EMPTY, Ordering::Acquire) == NOTIFIED {
            return true;
        }
        // EMPTY -> PARKED. Only the owner moves away from EMPTY except unpark (-> NOTIFIED).
        if self.state.value.compare_exchange(EMPTY, PARKED, Ordering::Acquire, Ordering::Acquire).is_err() {
            // An unpark got in: take its token.
            self.state.value.store(EMPTY, Ordering::Relaxed);
            return true;
        }
        false
    }
}

impl Parker for FutexParker {
    fn park(&self) {
        if self.try_consume_or_announce() {
            return;
        }
        loop {
            // Sleeps only while the word is still PARKED; EINTR/EAGAIN just loop.
            let _ = self.state.wait(PARKED);
            if self.state.value.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Acquire).is_ok() {
                return;
            }
            // Spurious wake-up: the word is still PARKED, sleep again.
        }
    }

    fn park_timeout(&self, timeout: Duration) {
        if self.try_consume_or_announce() {
            return;
        }
        let _ = self.state.wait_for(PARKED, timeout);
        // Whatever woke us (token, timeout, signal), leave PARKED; keep no stale token.
        self.state.value.swap(EMPTY, Ordering::Acquire);
    }

    fn unpark(&self) {
        // Release: pairs with the Acquire in park.
        if self.state.value.swap(NOTIFIED, Ordering::Release) == PARKED {
            self.state.wake(1);
        }
    }
}
