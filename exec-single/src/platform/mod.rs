//! What differs between hosted (`std`) and bare-metal builds: how the loop
//! thread is recognised, the remote queue's lock, and idle waiting. Each
//! variant is a whole file exporting the same API (embassy's habit).

#[cfg(feature = "std")]
#[path = "hosted.rs"]
mod imp;

#[cfg(not(feature = "std"))]
#[path = "bare.rs"]
mod imp;

#[cfg_attr(loom, allow(unused_imports))]
pub(crate) use imp::{Lock, Remote, enter_loop, idle, on_loop_thread};
