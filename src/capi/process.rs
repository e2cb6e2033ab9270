//! What the C layer does about the process around it (README, "Process and threading
//! rules"): the thread stack a C host expects. (Its pools enter the fork registry, which closes
//! the pools a child inherits, through their spawner: `platform.rs`, `os::fork`.)
//!
//! # Stack size
//! `stack_size = 0` in `struct pool_config` and `struct pool_blocking_config` means the
//! system's default thread stack, as `pthread_attr_init` gives it (on glibc it follows
//! `ulimit -s`, read when the process started), not Rust std's 2 MiB: C code sized for
//! pthread's default must not overflow on a pool thread. It is resolved when the pool is
//! built, for pools on OS threads; a pool on a host's platform passes 0 on to the host.

/// `requested`, or the stack size of a fresh `pthread_attr_t` for 0.
pub(crate) fn c_stack_size(requested: usize) -> usize {
    if requested != 0 {
        return requested;
    }
    pthread_default_stack().unwrap_or(0)
}

/// The stack size `pthread_attr_init` gives a new attribute, or `None` if it fails (0 then
/// falls back to the spawner's own default).
fn pthread_default_stack() -> Option<usize> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `attr` is writable storage for one attribute object.
    if unsafe { libc::pthread_attr_init(attr.as_mut_ptr()) } != 0 {
        return None;
    }
    let mut size: libc::size_t = 0;
    // SAFETY: `attr` was initialised above; `size` is writable.
    let rc = unsafe { libc::pthread_attr_getstacksize(attr.as_ptr(), &mut size) };
    // SAFETY: initialised above and destroyed once.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    (rc == 0 && size != 0).then_some(size)
}
