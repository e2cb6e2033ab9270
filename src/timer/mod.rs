//! The timers' structures, which know nothing of a pool: the hierarchical timing wheel and
//! its intrusive entries ([`wheel`]). The pool's side (who fires, who parks on the next
//! deadline, and the pool a timer reaches through `scheduler::AnyPool`) is the scheduler's;
//! the futures (`Sleep`, `Timeout`, `Interval`) are `crate::time`'s.

pub(crate) mod wheel;

pub(crate) use wheel::Timers;
