//! What differs between hosted (`std`) and bare-metal builds: how the loop
//! thread is recognised, how a push from elsewhere wakes the loop, and idle
//! waiting. Each variant is a whole file exporting the same API (embassy's
//! habit).

#[cfg(feature = "std")]
#[path = "hosted.rs"]
mod imp;

#[cfg(not(feature = "std"))]
#[path = "bare.rs"]
mod imp;

pub(crate) use imp::{LoopGuard, after_push, enter_loop, idle, on_loop_thread};
