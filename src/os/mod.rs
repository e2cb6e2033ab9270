//! The `std` platform: parkers, the OS-thread spawner, and the lazily started global pool.
//!
//! * [`FutexParker`] (Linux): one `u32` futex word per thread, no lock, one syscall per wake.
//! * [`CondvarParker`] (everywhere `std` runs): a `Mutex<bool>` + `Condvar`.
//! * [`ThreadSpawner`]: `std::thread` with a configurable stack size, joins what it started.
//! * [`DefaultParker`]: the futex parker on Linux, the condvar parker elsewhere; chosen here,
//!   in one place.
//! * `cpus`: the default thread count, from the affinity mask and the cgroup CPU quota.

pub(crate) mod clock;
mod condvar;
pub(crate) mod cpus;
mod defaults;
#[cfg(target_os = "linux")]
mod futex;
// Nothing forks under loom (and its atomics cannot be the registry's statics).
#[cfg(all(unix, not(loom)))]
pub(crate) mod fork;
pub(crate) mod global;
mod parker;
pub(crate) mod thread;

pub use condvar::CondvarParker;
pub use parker::DefaultParker;
#[cfg(target_os = "linux")]
pub use futex::FutexParker;
pub use global::{configure_global_blocking, global, global_blocking, join, scope, spawn_blocking};
pub use thread::ThreadSpawner;
