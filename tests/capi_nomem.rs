//! `pool_submit_fn` reports allocation failure as POOL_ERR_NOMEM and queues nothing: a global
//! allocator that fails the next allocation of the submit's size when armed.
#![cfg(feature = "capi")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pool::capi::{pool_create, pool_destroy, pool_status, pool_submit_fn, Pool};

/// Fails one allocation of exactly `FAIL_SIZE` bytes once armed (the submit's block: a task
/// header and two pointers), from the thread that armed it.
struct FailOnce;
static ARMED: AtomicBool = AtomicBool::new(false);
static FAIL_SIZE: usize = 4 * core::mem::size_of::<usize>();
static FAILED: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    static ARMING_THREAD: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

// SAFETY: forwards to System except for the one allocation it fails (returning null, which
// GlobalAlloc allows).
unsafe impl GlobalAlloc for FailOnce {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == FAIL_SIZE
            && ARMING_THREAD.try_with(|c| c.get()).unwrap_or(false)
            && ARMED.swap(false, Ordering::Relaxed)
        {
            FAILED.fetch_add(1, Ordering::Relaxed);
            return core::ptr::null_mut();
        }
        // SAFETY: the caller's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: FailOnce = FailOnce;

static CALLS: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn count(_: *mut c_void) {
    CALLS.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn submit_fn_reports_nomem_and_queues_nothing() {
    let mut pool: *mut Pool = core::ptr::null_mut();
    assert_eq!(pool_create(core::ptr::null(), &mut pool), pool_status::POOL_OK as i32);
    assert_eq!(pool_submit_fn(pool, Some(count), core::ptr::null_mut()), 0); // warms the pool up
    ARMING_THREAD.with(|c| c.set(true));
    ARMED.store(true, Ordering::Relaxed);
    let rc = pool_submit_fn(pool, Some(count), core::ptr::null_mut());
    ARMING_THREAD.with(|c| c.set(false));
    assert_eq!(FAILED.load(Ordering::Relaxed), 1, "the submit did not allocate FAIL_SIZE bytes");
    assert_eq!(rc, pool_status::POOL_ERR_NOMEM as i32);
    assert_eq!(pool_submit_fn(pool, Some(count), core::ptr::null_mut()), 0);
    pool_destroy(pool); // runs what was queued
    assert_eq!(CALLS.load(Ordering::Relaxed), 2, "the failed submit's function ran");
}
