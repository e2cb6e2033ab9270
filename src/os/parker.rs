//! [`DefaultParker`]: the parker chosen for this OS, in one place.

#[cfg(not(target_os = "linux"))]
use super::condvar::CondvarParker;
#[cfg(target_os = "linux")]
use super::futex::FutexParker;

/// The parker `ThreadSpawner` uses unless told otherwise.
///
/// ```
/// use pool::{DefaultParker, Parker};
/// let parker = DefaultParker::default();
/// parker.unpark();
/// parker.park(); // the token was there: returns at once
/// ```
#[cfg(target_os = "linux")]
pub type DefaultParker = FutexParker;
/// The parker `ThreadSpawner` uses unless told otherwise.
#[cfg(not(target_os = "linux"))]
pub type DefaultParker = CondvarParker;
