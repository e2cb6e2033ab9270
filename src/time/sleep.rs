//! The timer futures: [`Sleep`], [`Timeout`], [`Interval`] (see the module docs of
//! `crate::time` for binding, shutdown and the clock).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll};
use core::time::Duration;

use alloc::boxed::Box;

use crate::timer::wheel::{tick_for_deadline, Action, Entry, Registered};
use super::instant::Instant;
use crate::scheduler::AnyPool;

const NO_CLOCK: &str = "pool timers need a clock: this pool's Spawner::now_ns returns None";
const NO_POOL: &str = "a pool::time timer was polled outside a task of a pool: use ThreadPool::sleep and friends there";
const SHUT_DOWN: &str = "a pool::time timer was polled after its pool shut down";

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// When a [`Sleep`] completes.
#[derive(Clone, Copy, Debug)]
enum Deadline {
    /// A clock reading in ns.
    At(u64),
    /// This long after the timer binds to its pool (at creation inside a task with `std`, else
    /// at its first poll).
    After(Duration),
}

/// Waits until `duration` has passed. For a task on a pool: the timer uses that pool's clock
/// and wheel. With `std` it starts counting when created inside a pool task; otherwise (no
/// `std`, or created outside any task) when first polled. Outside a pool's tasks (a
/// `block_on` on the main thread), use [`ThreadPool::sleep`](crate::ThreadPool::sleep).
///
/// # Panics
/// When polled outside any task of a pool, on a platform without a clock, or, outside a task,
/// after the pool shut down (see the module docs).
///
/// ```
/// # #[cfg(feature = "std")] {
/// use std::time::{Duration, Instant};
/// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
/// let slept = pool
///     .spawn_future(async {
///         let start = Instant::now();
///         pool::time::sleep(Duration::from_millis(10)).await;
///         start.elapsed()
///     })
///     .unwrap()
///     .join()
///     .unwrap();
/// assert!(slept >= Duration::from_millis(10));
/// # }
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    Sleep::unbound(Deadline::After(duration))
}

/// Waits until the pool's clock reaches `deadline` (from [`ThreadPool::now`](crate::ThreadPool::now)
/// of the same pool). As [`sleep`] otherwise.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use std::sync::Arc;
/// use std::time::Duration;
/// let pool = Arc::new(pool::ThreadPool::new(pool::Config::default()).unwrap());
/// let deadline = pool.now().unwrap() + Duration::from_millis(5);
/// let p = pool.clone();
/// let woke = pool
///     .spawn_future(async move {
///         pool::time::sleep_until(deadline).await;
///         p.now().unwrap()
///     })
///     .unwrap()
///     .join()
///     .unwrap();
/// assert!(woke >= deadline);
/// # }
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::unbound(Deadline::At(deadline.as_nanos()))
}

/// Runs `future` for at most `duration`: its output, or [`Elapsed`] if the time ran out first
/// (the future is dropped with the `Timeout`). The future is polled before the timer, so one
/// that is ready at the deadline wins.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use std::time::Duration;
/// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
/// let (fast, never) = pool
///     .spawn_future(async {
///         let fast = pool::time::timeout(Duration::from_secs(5), async { 7 }).await;
///         let never = pool::time::timeout(Duration::from_millis(1), std::future::pending::<u8>()).await;
///         (fast, never)
///     })
///     .unwrap()
///     .join()
///     .unwrap();
/// assert_eq!(fast, Ok(7));
/// assert_eq!(never, Err(pool::time::Elapsed));
/// # }
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout { future, sleep: sleep(duration) }
}

/// A stream of instants `period` apart: the first [`tick`](Interval::tick) completes at once,
/// each later one `period` after the previous deadline. A tick that is late by a whole period
/// or more (the task was busy) is not made up: the next deadline is `period` after the late
/// tick. One allocation per interval (its pinned timer), none per tick.
///
/// # Panics
/// `period` is zero.
///
/// ```
/// # #[cfg(feature = "std")] {
/// use std::time::Duration;
/// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
/// let spans = pool
///     .spawn_future(async {
///         let mut every = pool::time::interval(Duration::from_millis(3));
///         let first = every.tick().await;
///         let second = every.tick().await;
///         let third = every.tick().await;
///         (second - first, third - second)
///     })
///     .unwrap()
///     .join()
///     .unwrap();
/// assert!(spans.0 >= Duration::from_millis(3) && spans.1 >= Duration::from_millis(3));
/// # }
/// ```
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "an interval's period must not be zero");
    Interval { sleep: Box::pin(sleep(Duration::ZERO)), period, first: true }
}

/// The future of [`sleep`], [`sleep_until`] and [`ThreadPool::sleep`](crate::ThreadPool::sleep).
/// Holds its wheel entry inline (no allocation); dropping it cancels the timer.
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    /// In the pool's wheel while pending (pinned: the wheel points at it).
    entry: Entry,
    deadline: Deadline,
    /// The pool, once bound; holds a reference on the pool's memory.
    handle: Option<AnyPool>,
    /// Completed without the wheel firing the entry (the deadline had passed when polled).
    done: bool,
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep").field("deadline", &self.deadline).field("bound", &self.handle.is_some()).finish_non_exhaustive()
    }
}

impl Sleep {
    fn unbound(deadline: Deadline) -> Self {
        let mut sleep = Self { entry: Entry::new(), deadline, handle: None, done: false };
        if let Some(handle) = crate::runtime::task_timers(None) {
            sleep.bind(handle);
        }
        sleep
    }

    /// A timer bound to `handle`'s pool at once.
    pub(crate) fn bound(handle: AnyPool, deadline_ns: Option<u64>, after: Duration) -> Self {
        let deadline = deadline_ns.map_or(Deadline::After(after), Deadline::At);
        let mut sleep = Self { entry: Entry::new(), deadline, handle: None, done: false };
        sleep.bind(handle);
        sleep
    }

    /// Binds to a pool: takes a reference on it and fixes a relative deadline on its clock.
    fn bind(&mut self, handle: AnyPool) {
        // SAFETY: the caller got the handle from a live pool (a task of it, or its handle).
        unsafe { (handle.ops.acquire)(handle.pool) };
        self.handle = Some(handle);
        if let Deadline::After(d) = self.deadline {
            // SAFETY: we hold a reference on the pool.
            if let Some(now) = unsafe { (handle.ops.now_ns)(handle.pool) } {
                self.deadline = Deadline::At(now.saturating_add(duration_ns(d)));
            }
        }
    }

    /// The deadline on the pool's clock, once known (bound on a pool with a clock).
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let sleep = pool.sleep(std::time::Duration::from_secs(1));
    /// assert!(sleep.deadline().unwrap() > pool.now().unwrap());
    /// # }
    /// ```
    pub fn deadline(&self) -> Option<Instant> {
        match self.deadline {
            Deadline::At(ns) => Some(Instant::from_nanos(ns)),
            Deadline::After(_) => None,
        }
    }

    /// Whether the deadline has passed (the timer completed, or would on its next poll).
    pub fn is_elapsed(&self) -> bool {
        self.done || self.entry.is_fired()
    }

    /// Moves the deadline to `deadline` (the timer is pending again, even if it had completed).
    /// Takes effect at the next poll.
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use std::time::Duration;
    /// let pool = pool::ThreadPool::new(pool::Config::default()).unwrap();
    /// let mut sleep = Box::pin(pool.sleep(Duration::from_secs(3600)));
    /// sleep.as_mut().reset(pool.now().unwrap() + Duration::from_millis(1));
    /// pool.block_on(sleep); // done in about a millisecond, not an hour
    /// # }
    /// ```
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        // SAFETY: nothing is moved out; the entry stays where it is.
        let this = unsafe { self.get_unchecked_mut() };
        this.deadline = Deadline::At(deadline.as_nanos());
        this.done = false;
        if this.entry.is_fired() {
            // SAFETY: FIRED: the wheel no longer touches the entry.
            unsafe { this.entry.rearm() };
        }
        // A queued entry is moved to the new deadline by the next poll's `register`.
    }

    /// The handle for this poll: bound, or bound now from the polling task.
    fn handle_for(&mut self, cx: &Context<'_>) -> AnyPool {
        if let Some(handle) = self.handle {
            return handle;
        }
        let handle = crate::runtime::task_timers(Some(cx.waker())).expect(NO_POOL);
        self.bind(handle);
        handle
    }

    /// The pool's current clock reading (binding first if needed).
    fn now_ns(&mut self, cx: &Context<'_>) -> u64 {
        let handle = self.handle_for(cx);
        // SAFETY: bound: we hold a reference on the pool.
        unsafe { (handle.ops.now_ns)(handle.pool) }.expect(NO_CLOCK)
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: the entry is never moved out of the pinned `Sleep`.
        let this = unsafe { self.get_unchecked_mut() };
        if this.is_elapsed() {
            return Poll::Ready(());
        }
        let now = this.now_ns(cx);
        let Some(handle) = this.handle else { unreachable!("bound by now_ns") };
        let deadline = match this.deadline {
            Deadline::At(ns) => ns,
            Deadline::After(d) => {
                // Bound without a clock reading (cannot happen with a clock; kept total).
                let ns = now.saturating_add(duration_ns(d));
                this.deadline = Deadline::At(ns);
                ns
            }
        };
        // SAFETY: bound: the pool (and its wheel) is live.
        let timers = unsafe { (handle.ops.timers)(handle.pool).as_ref() };
        let entry = NonNull::from(&this.entry);
        if now >= deadline {
            // SAFETY: our entry; `cancel` is a no-op unless it is queued.
            unsafe { timers.cancel(entry) };
            this.done = true;
            return Poll::Ready(());
        }
        // SAFETY: the entry is pinned inside this `Sleep`, whose drop cancels it.
        match unsafe { timers.register(entry, tick_for_deadline(deadline), Action::Wake(cx.waker().clone())) } {
            Registered::Queued { earliest } => {
                if earliest {
                    // SAFETY: bound: the pool is live.
                    unsafe { (handle.ops.kick)(handle.pool) };
                }
                Poll::Pending
            }
            Registered::Elapsed => Poll::Ready(()),
            Registered::Closed => {
                // In a task, the pool cancels it instead of polling it again (it is shutting
                // down); anywhere else it could never complete.
                assert!(crate::runtime::task_timers(Some(cx.waker())).is_some(), "{SHUT_DOWN}");
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(handle) = self.handle {
            // SAFETY: we hold a reference on the pool, so the wheel is live; the entry is ours.
            unsafe {
                (handle.ops.timers)(handle.pool).as_ref().cancel(NonNull::from(&self.entry));
                (handle.ops.release)(handle.pool);
            }
        }
    }
}

/// The error of a [`Timeout`] whose time ran out.
///
/// ```
/// assert_eq!(pool::time::Elapsed.to_string(), "deadline has elapsed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Elapsed {}

/// The future of [`timeout`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F> Timeout<F> {
    /// The wrapped future.
    pub fn into_inner(self) -> F {
        // `Sleep` has a destructor: move the future out field by field.
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: each field is read exactly once and `this` is never dropped.
        unsafe {
            drop(core::ptr::read(&this.sleep));
            core::ptr::read(&this.future)
        }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of both fields: neither is moved out while pinned
        // (`into_inner` takes the `Timeout` by value, so it is not pinned).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        if let Poll::Ready(output) = unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        // SAFETY: as above.
        match unsafe { Pin::new_unchecked(&mut this.sleep) }.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The stream of [`interval`].
#[derive(Debug)]
pub struct Interval {
    sleep: Pin<Box<Sleep>>,
    period: Duration,
    first: bool,
}

impl Interval {
    /// Waits for the next tick and returns its deadline (the first tick: the time it was
    /// polled).
    pub fn tick(&mut self) -> impl Future<Output = Instant> + '_ {
        core::future::poll_fn(move |cx| self.poll_tick(cx))
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Polls for the next tick (see [`tick`](Self::tick)).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        // SAFETY: `now_ns` does not move the entry.
        let now = unsafe { self.sleep.as_mut().get_unchecked_mut() }.now_ns(cx);
        let fired = if self.first {
            self.first = false;
            now
        } else {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep.deadline().map_or(now, Instant::as_nanos)
        };
        let period = duration_ns(self.period);
        let mut next = fired.saturating_add(period);
        if next <= now {
            // A whole period late: skip what was missed.
            next = now.saturating_add(period);
        }
        self.sleep.as_mut().reset(Instant::from_nanos(next));
        Poll::Ready(Instant::from_nanos(fired))
    }
}
