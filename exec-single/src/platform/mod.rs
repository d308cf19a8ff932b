//! What differs between builds, in two whole-file swaps (embassy's habit)
//! that export the same API, so that the loop is written once without
//! `cfg`:
//!
//! * `imp`: the loop marker (how the loop thread is recognised), how a push
//!   from elsewhere wakes a loop without a poller, and idle waiting without
//!   one. `hosted.rs` with `std` (a thread-local marker, thread parking),
//!   `bare.rs` without (one loop context, the clock's `wait` and `notify`
//!   hooks).
//! * `io`: the I/O capability. `io.rs` with `std` on Unix: an executor on
//!   the system clock owns a spindle-net reactor, runs its fibers as that
//!   reactor's driver and waits in its poller (every other clock falls back
//!   to `imp`). `no_io.rs` everywhere else (no `std`, or no spindle-net off
//!   Unix): the same types, empty, which always use `imp`.
//!
//! The I/O capability comes in two halves: [`Io`] (in the shared state:
//! wakes the loop from any thread, counts I/O waiters, closes) and
//! [`IoPoller`] (in the executor: the loop thread waits and looks in it).

#[cfg(feature = "std")]
#[path = "hosted.rs"]
mod imp;

#[cfg(not(feature = "std"))]
#[path = "bare.rs"]
mod imp;

#[cfg(all(feature = "std", unix))]
#[path = "io.rs"]
mod io;

#[cfg(not(all(feature = "std", unix)))]
#[path = "no_io.rs"]
mod io;

pub(crate) use imp::{LoopGuard, enter_loop, on_loop_thread};
pub(crate) use io::{Io, IoPoller, io_for, no_io};
