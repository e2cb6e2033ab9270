//! A parker on `std::sync::{Mutex, Condvar}`: portable to every `std` target.

use core::time::Duration;
use std::sync::{Condvar, Mutex, PoisonError};

use crate::platform::Parker;

/// A [`Parker`] on a mutex-protected token and a condition variable.
///
/// ```
/// use pool::{CondvarParker, Parker};
/// let p = CondvarParker::new();
/// p.unpark();
/// p.park(); // returns at once: the token was there
/// ```
#[derive(Debug, Default)]
pub struct CondvarParker {
    token: Mutex<bool>,
    cond: Condvar,
}

impl CondvarParker {
    /// A parker with no token.
    ///
    /// ```
    /// use pool::{CondvarParker, Parker};
    /// use std::sync::Arc;
    /// let parker = Arc::new(CondvarParker::new());
    /// let waker = parker.clone();
    /// let t = std::thread::spawn(move || waker.unpark());
    /// parker.park(); // returns once the other thread has unparked it (or spuriously)
    /// t.join().unwrap();
    /// ```
    pub const fn new() -> Self {
        Self { token: Mutex::new(false), cond: Condvar::new() }
    }
}

impl Parker for CondvarParker {
    fn park(&self) {
        // Poisoning cannot happen (no user code runs under the lock); ignore it anyway.
        let mut token = self.token.lock().unwrap_or_else(PoisonError::into_inner);
        while !*token {
            token = self.cond.wait(token).unwrap_or_else(PoisonError::into_inner);
        }
        *token = false;
    }

    fn park_timeout(&self, timeout: Duration) {
        let mut token = self.token.lock().unwrap_or_else(PoisonError::into_inner);
        if !*token {
            token = self.cond.wait_timeout(token, timeout).unwrap_or_else(PoisonError::into_inner).0;
        }
        *token = false;
    }

    fn unpark(&self) {
        let mut token = self.token.lock().unwrap_or_else(PoisonError::into_inner);
        *token = true;
        drop(token);
        self.cond.notify_one();
    }
}
