//! The C ABI behind `include/pool.h` (feature `capi`): `extern "C"` functions exported from
//! `libpool.a`.
//!
//! Every entry point:
//! * checks every pointer and range first and returns a [`pool_status`] code;
//! * runs inside a panic boundary: no panic or unwind ever crosses into C (a caught panic
//!   returns `POOL_ERR_PANIC`; `void` functions swallow it);
//! * states in its doc comment who owns what.
//!
//! The C `struct task` is [`CTask`]; it has the layout of [`Task`](crate::Task) (asserted in `task.rs`), so a
//! `struct task *` is handed to the core as a `*mut Task` without conversion.
#![allow(non_camel_case_types)]

// The order of the modules is the order of pool.h's declarations (cbindgen follows it).
mod status;
pub use status::*;
mod blocking;
pub use blocking::*;
mod convenience;
pub use convenience::*;
mod job;
pub use job::*;
mod latch;
pub use latch::*;
mod platform;
pub use platform::*;
pub(crate) mod process;
mod stats;
pub use stats::*;
mod timer;
pub use timer::*;
mod driver;
pub use driver::*;
mod task;
pub use task::*;
mod config;
pub use config::*;
mod pool;
pub use pool::*;
mod queue;
pub use queue::*;
