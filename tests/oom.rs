//! Allocation failure is an error, not an abort: a `#[global_allocator]` that refuses the
//! k-th allocation of the test's thread (k = 0, 1, 2, ...) until a constructor succeeds.
//! Each refused construction must return `Error::OutOfMemory` and leave nothing allocated
//! (the thread's live allocations are back to where they were); a lazy thread start whose
//! worker state cannot be allocated is a failed spawn (`Error::Spawn` when the pool has no
//! thread), and the pool works once memory is back.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use pool::{BlockingConfig, BlockingPool, Config, Error, Task, ThreadPool};

struct Refusing;

std::thread_local! {
    /// Allocations left before this thread's next one is refused; `usize::MAX`: never.
    static LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// This thread's allocations minus its deallocations.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn refuse_after(k: usize) {
    LEFT.with(|l| l.set(k));
}

fn live() -> isize {
    LIVE.with(Cell::get)
}

// SAFETY: forwards to `System`, except that it returns null (a refused allocation, which
// `GlobalAlloc` allows) when the thread's budget is spent.
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let refuse = LEFT
            .try_with(|l| match l.get() {
                usize::MAX => false,
                0 => true,
                n => {
                    l.set(n - 1);
                    false
                }
            })
            .unwrap_or(false);
        if refuse {
            return std::ptr::null_mut();
        }
        let _ = LIVE.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|c| c.set(c.get() - 1));
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Refusing = Refusing;

/// Calls `build` with the k-th allocation refused, k = 0, 1, ... until it succeeds; every
/// failure must be OutOfMemory with nothing left allocated. Returns the successful value and
/// how many refusals were seen.
fn until_built<T>(what: &str, build: impl Fn() -> Result<T, Error>) -> (T, usize) {
    for k in 0..1000 {
        let before = live();
        refuse_after(k);
        let result = build();
        refuse_after(usize::MAX);
        match result {
            Ok(value) => return (value, k),
            Err(e) => {
                assert_eq!(e, Error::OutOfMemory, "{what} with allocation {k} refused");
                assert_eq!(live(), before, "{what} with allocation {k} refused left memory allocated");
            }
        }
    }
    panic!("{what} never succeeded");
}

#[test]
fn constructors_report_out_of_memory_and_leave_nothing() {
    let (pool, refusals) = until_built("ThreadPool::new", || ThreadPool::new(Config::default().with_max_threads(2)));
    assert!(refusals >= 3, "the spawner, the tables and the state each allocate: {refusals}");
    drop(pool);
    let (pool, refusals) = until_built("BlockingPool::new", || BlockingPool::new(BlockingConfig::default().with_max_threads(4)));
    assert!(refusals >= 3, "{refusals}");
    drop(pool);
}

#[test]
fn lazy_start_without_memory_is_a_failed_spawn() {
    static RAN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    unsafe extern "C" fn count(_: *mut Task) {
        RAN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    static mut TASK: Task = Task::new(count);
    let pool = ThreadPool::new(Config::default().with_max_threads(1)).unwrap();
    let task = std::ptr::NonNull::new(&raw mut TASK).unwrap();
    // The first thread's state is allocated on the submitting thread, before the thread is
    // asked for: refused, the submit reports that no thread could start.
    refuse_after(0);
    // SAFETY: a static task, submitted once at a time (refused here, so still ours).
    let refused = unsafe { pool.submit(task) };
    refuse_after(usize::MAX);
    assert_eq!(refused, Err(Error::Spawn));
    assert_eq!(pool.stats().spawn_failures, 1);
    assert_eq!(RAN.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Memory is back: the same task is accepted and runs.
    // SAFETY: as above; not queued.
    unsafe { pool.submit(task) }.unwrap();
    pool.shutdown().unwrap();
    assert_eq!(RAN.load(std::sync::atomic::Ordering::SeqCst), 1);
}
