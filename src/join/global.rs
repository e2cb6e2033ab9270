//! [`join`] and [`scope`] on the process-wide [`global`](crate::global) pool. (A file of its own:
//! examples on the global pool leave its threads running at exit, which `make test-doc` runs
//! under Miri with `-Zmiri-ignore-leaks`, selected by this file's name.)

use super::Scope;

/// [`ThreadPool::join`](crate::ThreadPool::join) on the [`global`](crate::global) pool.
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = pool::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// assert_eq!(fib(12), 144);
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    crate::global().join(a, b)
}

/// [`ThreadPool::scope`](crate::ThreadPool::scope) on the [`global`](crate::global) pool.
///
/// ```
/// let mut halves = [0u64; 2];
/// let (lo, hi) = halves.split_at_mut(1);
/// pool::scope(|s| {
///     s.spawn(|_| lo[0] = (1..=50).sum());
///     s.spawn(|_| hi[0] = (51..=100).sum());
/// });
/// assert_eq!(halves[0] + halves[1], 5050);
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope, crate::ThreadSpawner>) -> R + Send,
    R: Send,
{
    crate::global().scope(op)
}
