//! `pool_set_driver`: a C host's I/O driver (`crate::io::Driver`) through function pointers.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use core::time::Duration;
use std::boxed::Box;

use super::pool::{borrow, Pool};
use super::status::{boundary, pool_status};
use crate::io::Driver;
use crate::Error;
use pool_status::*;

/// `pool_driver.park`'s `timeout_ns` when there is no deadline.
pub const POOL_NO_TIMEOUT: u64 = u64::MAX;

/// An I/O driver provided by the host (an event loop: epoll, kqueue, an RTOS event group).
/// Every function pointer must be non-NULL. The pool calls `poll` at its workers' tick ends and
/// `park` when one idle worker blocks in the driver instead of its parker, never two of them at
/// once; `unpark` from any thread at any time. All three run on pool threads, and may submit
/// tasks to the pool (`pool_submit_to`: that is how the driver wakes the work waiting for I/O);
/// they must stay callable, and `context` valid, until `pool_destroy` returns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pool_driver {
    /// Passed as the first argument of every callback.
    pub context: *mut c_void,
    /// Dispatches whatever I/O is ready, without blocking.
    pub poll: Option<unsafe extern "C" fn(context: *mut c_void)>,
    /// Blocks until some I/O is ready, `unpark` is called, or `timeout_ns` nanoseconds pass
    /// (POOL_NO_TIMEOUT: no limit), then dispatches what is ready. May return early. An
    /// `unpark` that comes before `park` must make it return at once.
    pub park: Option<unsafe extern "C" fn(context: *mut c_void, timeout_ns: u64)>,
    /// Makes a thread blocked in `park` return.
    pub unpark: Option<unsafe extern "C" fn(context: *mut c_void)>,
}

/// The checked callbacks.
struct CDriver {
    context: *mut c_void,
    poll: unsafe extern "C" fn(*mut c_void),
    park: unsafe extern "C" fn(*mut c_void, u64),
    unpark: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: pool.h requires the callbacks to be callable from any thread with `context`.
unsafe impl Send for CDriver {}
// SAFETY: as above.
unsafe impl Sync for CDriver {}

impl Driver for CDriver {
    fn poll(&self) {
        // SAFETY: the host's callback with its context (pool.h contract).
        unsafe { (self.poll)(self.context) }
    }
    fn park(&self, timeout: Option<Duration>) {
        let ns = timeout.map_or(POOL_NO_TIMEOUT, |t| u64::try_from(t.as_nanos()).unwrap_or(POOL_NO_TIMEOUT - 1));
        // SAFETY: as above.
        unsafe { (self.park)(self.context, ns) }
    }
    fn unpark(&self) {
        // SAFETY: as above.
        unsafe { (self.unpark)(self.context) }
    }
}

/// Installs `driver` (copied) as `pool`'s I/O driver, once. Returns POOL_ERR_INVALID for a NULL
/// pool, driver or callback, POOL_ERR_STARTED if the pool already has a driver,
/// POOL_ERR_SHUTDOWN if the pool was shut down (the driver is then never called, but its
/// callbacks and `context` must still stay valid until `pool_destroy` returns).
#[no_mangle]
pub extern "C" fn pool_set_driver(pool: *mut Pool, driver: *const pool_driver) -> c_int {
    boundary(|| {
        let Some(pool) = NonNull::new(pool) else { return POOL_ERR_INVALID };
        let Some(driver) = NonNull::new(driver.cast_mut()) else { return POOL_ERR_INVALID };
        // SAFETY: non-null; the caller passes a readable `struct pool_driver` (pool.h).
        let d = unsafe { driver.as_ptr().read() };
        let (Some(poll), Some(park), Some(unpark)) = (d.poll, d.park, d.unpark) else { return POOL_ERR_INVALID };
        let driver = CDriver { context: d.context, poll, park, unpark };
        // SAFETY: `pool` is a live pool (pool.h contract).
        match unsafe { borrow(pool) }.set_driver(Box::new(driver)) {
            Ok(()) => POOL_OK,
            Err(Error::AlreadyStarted) => POOL_ERR_STARTED,
            Err(Error::Shutdown) => POOL_ERR_SHUTDOWN,
            Err(_) => POOL_ERR_INVALID,
        }
    })
}
