//! A bare-metal binary for `thumbv7em-none-eabihf` (Cortex-M4F/M7) whose `.text` measures the
//! pool's core: create a pool on host threads, submit single tasks and a batch, shut down,
//! free. Built with opt-level "s", LTO, panic = "abort" (this crate's release profile).
//!
//! ```text
//! cargo build --release --features footprint --bin footprint --target thumbv7em-none-eabihf
//! cargo build --release --features footprint,footprint-baseline --bin footprint --target thumbv7em-none-eabihf
//! llvm-size target/thumbv7em-none-eabihf/release/footprint
//! ```
//!
//! The `footprint-baseline` feature builds the same binary without the pool (allocator, entry,
//! host functions only), so core = full - baseline. FOOTPRINT.md has the figures.
//!
//! The host functions are hidden from the optimiser with `black_box`, as a real RTOS's would
//! be (they live in another object file): so the worker loop, parking and spawning stay in the
//! binary even though nothing here starts a thread. It is linked, not run.
#![no_std]
#![no_main]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::hint::black_box;
use core::sync::atomic::{AtomicUsize, Ordering};

use pool_nostd::{HostThreads, ThreadStart};

/// A bump allocator over a static arena; `dealloc` does nothing. Enough to link and measure.
struct Bump {
    arena: UnsafeCell<[u8; ARENA]>,
    next: AtomicUsize,
}

const ARENA: usize = 64 * 1024;

// SAFETY: `next` hands out disjoint ranges of the arena with an atomic bump.
unsafe impl Sync for Bump {}

// SAFETY: every returned block is inside the arena, aligned as asked, and never handed out
// twice (the bump only moves forward); null when the arena is exhausted.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.arena.get() as usize;
        let mut next = self.next.load(Ordering::Relaxed);
        loop {
            let start = (base + next).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > ARENA {
                return core::ptr::null_mut();
            }
            match self.next.compare_exchange_weak(next, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return self.arena.get().cast::<u8>().wrapping_add(start),
                Err(actual) => next = actual,
            }
        }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOC: Bump = Bump { arena: UnsafeCell::new([0; ARENA]), next: AtomicUsize::new(0) };

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

// Stand-ins for the RTOS's functions (opaque to the optimiser through `black_box`).
fn rtos_spawn(_ctx: *mut c_void, start: ThreadStart, _stack: usize) -> bool {
    black_box(start);
    black_box(false)
}
fn rtos_join(_ctx: *mut c_void) {}
fn rtos_yield() {}

#[cfg(not(feature = "footprint-baseline"))]
mod work {
    use core::ptr::NonNull;
    use core::sync::atomic::{AtomicU32, Ordering};

    use pool::{Batch, Config, Task, ThreadPool};
    use pool_nostd::{HostSpawner, HostThreads};

    pub(crate) static RUNS: AtomicU32 = AtomicU32::new(0);

    unsafe extern "C" fn count(_task: *mut Task) {
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn run(host: HostThreads) {
        let max_threads = core::hint::black_box(4);
        let Ok(pool) = ThreadPool::with_spawner(Config::default().with_max_threads(max_threads).with_stack_size(0), HostSpawner::new(host)) else {
            return;
        };
        let mut tasks = [Task::new(count), Task::new(count), Task::new(count), Task::new(count)];
        let [a, b, rest @ ..] = &mut tasks;
        // SAFETY: the tasks outlive the pool's use (shutdown below runs or returns them).
        let _ = unsafe { pool.submit(NonNull::from(a)) };
        // SAFETY: as above.
        let _ = unsafe { pool.submit_lifo(NonNull::from(b)) };
        let mut batch = Batch::new();
        for t in rest {
            // SAFETY: as above; each task is in one batch only.
            unsafe { batch.push(NonNull::from(t)) };
        }
        // SAFETY: as above.
        let _ = unsafe { pool.submit_batch(batch) };
        let _ = pool.shutdown();
        drop(pool);
    }
}

/// The entry point (`_start` is lld's default entry symbol).
#[no_mangle]
pub extern "C" fn _start() -> ! {
    let host = HostThreads {
        context: black_box(core::ptr::null_mut()),
        spawn: black_box(rtos_spawn as fn(*mut c_void, ThreadStart, usize) -> bool),
        join: black_box(rtos_join as fn(*mut c_void)),
        yield_now: black_box(rtos_yield as fn()),
        tls: None,
        parallelism: 1,
    };
    #[cfg(not(feature = "footprint-baseline"))]
    work::run(host);
    #[cfg(feature = "footprint-baseline")]
    {
        // Keep the allocator and the host functions, as the full binary does.
        let b = alloc::boxed::Box::new(black_box(host));
        black_box(&b);
        if (b.spawn)(b.context, ThreadStart { entry: dummy, arg: core::ptr::null_mut() }, 0) {
            (b.join)(b.context);
        }
        (b.yield_now)();
    }
    loop {
        core::hint::spin_loop();
    }
}

#[cfg(feature = "footprint-baseline")]
unsafe extern "C" fn dummy(_: *mut c_void) {}
