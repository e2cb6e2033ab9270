//! The adaptive injector interval (design text 003: "Workers do not check the global queue on
//! every tick. The interval adapts based on task duration using EWMA"): how many searches a
//! busy worker makes in its own queues between two looks at the pool's injector.
//!
//! ```text
//! interval = clamp(TARGET_LATENCY_NS / mean poll time, MIN_INTERVAL, MAX_INTERVAL)
//! ```
//!
//! Short tasks mean rare checks (tokio's fixed 61 costs a try-lock every 61 polls of a few
//! nanoseconds); long tasks mean frequent ones, so a task submitted from outside waits about
//! `TARGET_LATENCY_NS` (1 ms, the text's figure) behind a worker busy with its own queue, not 61
//! long tasks. Whatever the interval, the cooperative budget also makes the first search of
//! every tick (128 runs) an injector-first one (`run.rs`, `end_tick`).
//!
//! # Measuring
//! A *window* is the runs between two injector-first searches. When a window ends (the
//! worker's countdown reaches zero), the worker reads the platform's clock once
//! ([`Spawner::now_ns`](crate::Spawner::now_ns)) and folds the window into the mean:
//!
//! ```text
//! mean = (mean * 9 + window's elapsed ns) / (9 + window's runs)
//! ```
//!
//! Each run of the window counts as one sample and the old mean as nine: for a one-run window
//! that is the text's EWMA with alpha 0.1, and a long window of uniform tasks replaces most of
//! the mean at once. Integer arithmetic only (no float on small targets). A window during
//! which the worker went idle (`interrupt`, from the sleep path) is discarded, not folded: idle
//! time is not poll time, and a worker that keeps running dry searches the injector every time
//! its queues are empty anyway, so only continuously busy workers need the estimate.
//!
//! One clock read per window, so at most one per `MIN_INTERVAL` runs (each then at least
//! `TARGET_LATENCY_NS / MIN_INTERVAL` long) and, for short tasks, one per `MAX_INTERVAL` runs.
//! Without a clock (`now_ns` is `None`, the default of a `no_std` platform's spawner) the
//! interval stays at [`INJECTOR_INTERVAL`], tokio's fixed value.
//!
//! # Ownership
//! Owner-only: the interval lives in the worker's `WorkerContext`, which only the worker's own
//! thread holds, so its state is plain `Cell`s.

use core::cell::Cell;

/// Searches between injector checks when no estimate exists (no clock, or no full window yet):
/// tokio's fixed interval (prime, so it does not beat with other periodic behaviour).
pub(crate) const INJECTOR_INTERVAL: u32 = 61;
/// How long a task submitted from outside should wait at most behind a busy worker's own
/// queue, in ns (design text 003: 1 ms).
pub(crate) const TARGET_LATENCY_NS: u64 = 1_000_000;
/// Fewest searches between injector checks (text 003: 8), for tasks of 125 µs and more.
pub(crate) const MIN_INTERVAL: u32 = 8;
/// Most searches between injector checks: tokio's upper bound (the text's 255 would act as 128
/// here anyway: every tick's first search looks at the injector).
pub(crate) const MAX_INTERVAL: u32 = 127;
/// The old mean's weight, in runs (see the module docs).
const MEAN_WEIGHT: u64 = 9;

/// The interval for a mean poll time (`mean_ns == 0`: no estimate yet).
#[inline]
pub(crate) fn interval_for(mean_ns: u32) -> u32 {
    if mean_ns == 0 {
        return INJECTOR_INTERVAL;
    }
    let n = TARGET_LATENCY_NS / u64::from(mean_ns);
    n.clamp(u64::from(MIN_INTERVAL), u64::from(MAX_INTERVAL)) as u32
}

/// Folds a window of `runs` runs that took `elapsed_ns` into `mean_ns` (0: none yet, so the
/// window is the mean). Saturates at `u32::MAX` ns (4.3 s: far beyond `MIN_INTERVAL`'s bound).
#[inline]
pub(crate) fn fold(mean_ns: u32, elapsed_ns: u64, runs: u64) -> u32 {
    debug_assert!(runs > 0);
    let mean = if mean_ns == 0 {
        elapsed_ns / runs
    } else {
        let weighted = u64::from(mean_ns).saturating_mul(MEAN_WEIGHT).saturating_add(elapsed_ns);
        weighted / (MEAN_WEIGHT + runs)
    };
    // A nonzero mean, so "no estimate" stays distinguishable (a sub-nanosecond poll is 1 ns).
    mean.clamp(1, u64::from(u32::MAX)) as u32
}

/// Where the current window began.
#[derive(Clone, Copy, Debug)]
struct Window {
    /// Clock reading at the start.
    start_ns: u64,
    /// The worker's run counter at the start.
    start_runs: usize,
    /// False when no window is open (none yet, or the worker went idle since).
    open: bool,
}

/// One worker's adaptive injector interval. See the module docs.
#[derive(Debug)]
pub(crate) struct InjectorInterval {
    /// Searches between injector checks.
    current: Cell<u32>,
    /// Mean poll time in ns, 0 until the first window closed.
    mean_ns: Cell<u32>,
    /// The open window.
    window: Cell<Window>,
}

impl InjectorInterval {
    pub(crate) fn new() -> Self {
        Self {
            current: Cell::new(INJECTOR_INTERVAL),
            mean_ns: Cell::new(0),
            window: Cell::new(Window { start_ns: 0, start_runs: 0, open: false }),
        }
    }

    /// Searches between injector checks, as last computed.
    #[inline]
    pub(crate) fn current(&self) -> u32 {
        self.current.get()
    }

    /// The mean poll time in ns (0: no estimate).
    #[inline]
    pub(crate) fn mean_ns(&self) -> u32 {
        self.mean_ns.get()
    }

    /// Ends the current window at clock reading `now` (`None`: the platform has no clock) with
    /// the worker's run counter at `runs`, opens the next one, and returns the interval to use.
    #[inline]
    pub(crate) fn end_window(&self, now: Option<u64>, runs: usize) -> u32 {
        let Some(now) = now else { return self.current() };
        let w = self.window.get();
        let window_runs = runs.wrapping_sub(w.start_runs) as u64;
        if w.open && window_runs > 0 {
            let mean = fold(self.mean_ns(), now.saturating_sub(w.start_ns), window_runs);
            self.mean_ns.set(mean);
            self.current.set(interval_for(mean));
        }
        self.window.set(Window { start_ns: now, start_runs: runs, open: true });
        self.current()
    }

    /// The worker goes idle: the open window is discarded (see the module docs).
    #[inline]
    pub(crate) fn interrupt(&self) {
        let w = self.window.get();
        self.window.set(Window { open: false, ..w });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn short_tasks_check_rarely_long_tasks_often() {
        assert_eq!(interval_for(0), INJECTOR_INTERVAL, "no estimate: the fixed interval");
        assert_eq!(interval_for(10), MAX_INTERVAL, "10 ns polls");
        assert_eq!(interval_for(10_000), 100, "10 µs polls: 1 ms / 10 µs");
        assert_eq!(interval_for(50_000), 20);
        assert_eq!(interval_for(1_000_000), MIN_INTERVAL, "1 ms polls");
        assert_eq!(interval_for(u32::MAX), MIN_INTERVAL);
    }

    #[test]
    fn fold_weights_the_window_by_its_runs() {
        assert_eq!(fold(0, 6_100, 61), 100, "the first window is the mean");
        // One run of 1,100 ns against a mean of 100: alpha 0.1.
        assert_eq!(fold(100, 1_100, 1), 200);
        // 91 runs of 1,000 ns against a mean of 100: (900 + 91,000) / 100.
        assert_eq!(fold(100, 91_000, 91), 919);
        assert_eq!(fold(0, 5, 10), 1, "sub-nanosecond polls still give an estimate");
        assert_eq!(fold(7, u64::MAX, 1), u32::MAX, "saturates");
    }

    #[test]
    fn windows_adapt_the_interval_and_idle_windows_are_dropped() {
        let i = InjectorInterval::new();
        {
            assert_eq!(i.end_window(None, 0), INJECTOR_INTERVAL, "no clock: fixed");
            assert_eq!(i.end_window(Some(1_000), 0), INJECTOR_INTERVAL, "opens the first window");
            // 8 runs of 200 µs: the interval drops to the minimum.
            assert_eq!(i.end_window(Some(1_000 + 8 * 200_000), 8), MIN_INTERVAL);
            assert_eq!(i.mean_ns(), 200_000);
            // The worker idles for a second: that window is not folded.
            i.interrupt();
            assert_eq!(i.end_window(Some(2_000_000_000), 9), MIN_INTERVAL);
            assert_eq!(i.mean_ns(), 200_000);
            // Windows of 127 runs of 10 ns: (9 x 200,000 + 1,270) / 136 = 13,244 ns, then 885.
            assert_eq!(i.end_window(Some(2_000_001_270), 136), 75);
            assert_eq!(i.mean_ns(), 13_244);
            assert_eq!(i.end_window(Some(2_000_002_540), 263), MAX_INTERVAL);
            assert_eq!(i.mean_ns(), 885);
            // A window without runs leaves the mean alone.
            assert_eq!(i.end_window(Some(3_000_000_000), 263), MAX_INTERVAL);
            assert_eq!(i.mean_ns(), 885);
        }
    }
}
