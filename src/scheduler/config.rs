//! [`Config`]: how to build a [`ThreadPool`](super::ThreadPool), and the limits on it.

/// How to build a pool.
///
/// ```
/// use pool::Config;
/// // Two threads with 256 KiB stacks; `..Config::default()` keeps the rest at their defaults.
/// let config = Config { max_threads: 2, stack_size: 256 << 10, ..Config::default() };
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(config).unwrap();
/// assert_eq!(pool.max_threads(), 2);
/// # }
/// // The default: one thread per CPU, the platform's stack size, a short spin before sleeping.
/// assert_eq!(Config::default(), Config { max_threads: 0, stack_size: 0, idle_spins: pool::DEFAULT_IDLE_SPINS });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most threads the pool starts; 0 means the platform's available parallelism. At most
    /// [`MAX_THREADS`](crate::MAX_THREADS).
    pub max_threads: usize,
    /// Stack size of each thread in bytes; 0 means the platform default: for
    /// `ThreadSpawner`, Rust std's (2 MiB, or `RUST_MIN_STACK`), not
    /// pthread's (the C API's `stack_size = 0` means pthread's default instead).
    pub stack_size: usize,
    /// Rounds (one load and one spin-loop hint each) an idle worker watches for new work from
    /// outside the pool before it sleeps, so that a submit soon after costs neither side a
    /// system call (`scheduler/README.md`, "Idle means idle"); 0 sleeps at once. At most
    /// [`MAX_IDLE_SPINS`](crate::MAX_IDLE_SPINS); default
    /// [`DEFAULT_IDLE_SPINS`](crate::DEFAULT_IDLE_SPINS).
    pub idle_spins: u32,
}

/// [`Config::idle_spins`]'s default: 256 rounds, about 7 µs on the machine it was measured on
/// (a spin-loop hint takes ~30 ns there; `scheduler/README.md` has the figures). 0 under loom,
/// where spinning would multiply every model's interleavings; the spin phase has a model of
/// its own that asks for it (`scheduler/sleep/loom.rs`).
pub const DEFAULT_IDLE_SPINS: u32 = if cfg!(loom) { 0 } else { 256 };

/// The most [`Config::idle_spins`] a pool accepts (more is refused as an invalid argument).
pub const MAX_IDLE_SPINS: u32 = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Self { max_threads: 0, stack_size: 0, idle_spins: DEFAULT_IDLE_SPINS }
    }
}
