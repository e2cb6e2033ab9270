//! The timers' structures, which know nothing of a pool: the hierarchical timing wheel and
//! its intrusive entries ([`wheel`]), and the handle through which a timer reaches the pool
//! that owns its wheel ([`handle`]). The pool's side (who fires, who parks on the next
//! deadline) is the scheduler's; the futures (`Sleep`, `Timeout`, `Interval`) are
//! `crate::time`'s.

pub(crate) mod handle;
pub(crate) mod wheel;

pub(crate) use handle::{TimerHandle, TimerOps};
pub(crate) use wheel::Timers;
