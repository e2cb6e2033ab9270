//! [`Config`]: how to build a [`ThreadPool`](super::ThreadPool), and the limits on it.

/// How to build a pool.
///
/// ```
/// use pool::Config;
/// // Two threads with 256 KiB stacks; the rest keeps its default.
/// let config = Config::default().with_max_threads(2).with_stack_size(256 << 10);
/// # #[cfg(feature = "std")] {
/// let pool = pool::ThreadPool::new(config).unwrap();
/// assert_eq!(pool.max_threads(), 2);
/// # }
/// // The default: one thread per CPU, the platform's stack size, a short spin before sleeping.
/// let default = Config::default();
/// assert_eq!((default.max_threads, default.stack_size, default.idle_spins), (0, 0, pool::DEFAULT_IDLE_SPINS));
/// ```
///
/// `#[non_exhaustive]`: fields are added in minor versions, so build one from
/// [`Config::default`] and the `with_` setters (or assign its fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Most threads the pool starts; 0 means the platform's available parallelism (with `std`:
    /// the CPUs of the calling thread's affinity mask, capped by its cgroup's CPU quota). At
    /// most [`MAX_THREADS`](crate::MAX_THREADS).
    pub max_threads: usize,
    /// Stack size of each thread in bytes; 0 means the platform default: for
    /// `ThreadSpawner`, Rust std's (2 MiB, or `RUST_MIN_STACK`), not
    /// pthread's (the C API's `stack_size = 0` means pthread's default instead).
    pub stack_size: usize,
    /// Rounds (one load and one spin-loop hint each) an idle worker watches for new work from
    /// outside the pool before it sleeps, so that a submit soon after costs neither side a
    /// system call (`scheduler/README.md`, "Idle means idle"); 0 sleeps at once. At most
    /// [`MAX_IDLE_SPINS`](crate::MAX_IDLE_SPINS); default
    /// [`DEFAULT_IDLE_SPINS`](crate::DEFAULT_IDLE_SPINS). On a VM a spin can make the next
    /// wake-up of that worker slower: tasks that come far apart, and fork-join code, may
    /// start sooner with 0 (`scheduler/README.md`, "What the spin costs on this VM").
    pub idle_spins: u32,
    /// Threads started before the pool is handed out: each has been started, named and hooked
    /// by the spawner (with `std`: [`ThreadSpawner::on_thread_start`](crate::ThreadSpawner::on_thread_start)
    /// has run on it) and is waiting for work by parking when the constructor returns. A start
    /// that fails makes the constructor fail ([`Error::Spawn`](crate::Error::Spawn)) after
    /// the threads already started have been joined. Default 0: threads start as work waits
    /// for them. At most the pool's thread limit (`max_threads`, or the CPUs it defaults to).
    pub min_threads: usize,
}

/// [`Config::idle_spins`]'s default: 256 rounds, about 7 µs on the machine it was measured on
/// (a spin-loop hint takes ~30 ns there; `scheduler/README.md` has the figures). 0 under loom,
/// where spinning would multiply every model's interleavings; the spin phase has a model of
/// its own that asks for it (`scheduler/sleep/loom.rs`).
pub const DEFAULT_IDLE_SPINS: u32 = if cfg!(loom) { 0 } else { 256 };

/// The most [`Config::idle_spins`] a pool accepts (more is refused as an invalid argument).
pub const MAX_IDLE_SPINS: u32 = 1 << 20;

impl Config {
    /// The defaults (as [`Default::default`], usable in a `const`).
    pub const fn new() -> Self {
        Self { max_threads: 0, stack_size: 0, idle_spins: DEFAULT_IDLE_SPINS, min_threads: 0 }
    }

    /// Sets [`max_threads`](Self::max_threads).
    #[must_use]
    pub const fn with_max_threads(mut self, max_threads: usize) -> Self {
        self.max_threads = max_threads;
        self
    }

    /// Sets [`stack_size`](Self::stack_size).
    #[must_use]
    pub const fn with_stack_size(mut self, stack_size: usize) -> Self {
        self.stack_size = stack_size;
        self
    }

    /// Sets [`min_threads`](Self::min_threads).
    #[must_use]
    pub const fn with_min_threads(mut self, min_threads: usize) -> Self {
        self.min_threads = min_threads;
        self
    }

    /// Sets [`idle_spins`](Self::idle_spins).
    #[must_use]
    pub const fn with_idle_spins(mut self, idle_spins: u32) -> Self {
        self.idle_spins = idle_spins;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}
