//! No I/O capability: without `std` (bare metal), or with `std` off Unix
//! (spindle-net is Unix-only). The same API as `io.rs`, empty: the loop
//! waits and is woken the platform's way (`imp`: the clock's `wait` and
//! `notify` hooks without `std`, thread parking with it), and no fiber ever
//! waits for readiness.

use core::time::Duration;

use spindle_core::executor::support::RemoteQueue;

use super::imp;
use crate::clock::Clock;
use crate::error::BuildError;

/// The shared half of the I/O capability: nothing.
pub(crate) struct Io;

/// The loop's half: nothing.
pub(crate) struct IoPoller;

/// No I/O capability, on any clock.
pub(crate) fn io_for<C: Clock>(_clock: &C) -> Result<(Io, IoPoller), BuildError> {
    Ok(no_io())
}

/// No I/O capability.
pub(crate) fn no_io() -> (Io, IoPoller) {
    (Io, IoPoller)
}

impl Io {
    /// After a push or notification from elsewhere: the platform's wake-up.
    #[inline]
    pub(crate) fn wake<C: Clock>(&self, clock: &C) {
        imp::after_push(clock);
    }

    /// No blocking pool.
    pub(crate) fn blocking_counts(&self) -> Option<[usize; 3]> {
        None
    }

    /// Sockets registered: none.
    pub(crate) fn sources(&self) -> usize {
        0
    }

    /// No fiber waits for readiness.
    pub(crate) fn waiters(&self) -> usize {
        0
    }

    /// Runs `run` (no driver to install).
    pub(crate) fn drive<R>(&self, run: impl FnOnce() -> R) -> R {
        run()
    }

    /// No blocking pool: `task` comes back, to run on the calling thread.
    pub(crate) fn spawn_blocking(
        &self,
        task: spindle_core::BlockingTask,
    ) -> Result<(), spindle_core::BlockingTask> {
        Err(task)
    }

    /// Nothing to close.
    pub(crate) fn close(&self) {}
}

impl IoPoller {
    /// No fiber is ready: the platform's idle wait until `deadline` or a
    /// wake-up. No poller: no fiber resumed by readiness (0).
    pub(crate) fn idle<T, C: Clock>(
        &mut self,
        remote: &RemoteQueue<T>,
        clock: &C,
        deadline: Option<Duration>,
    ) -> usize {
        imp::idle(remote, clock, deadline);
        0
    }

    /// Nothing to look at (0 fibers resumed).
    pub(crate) fn look(&mut self) -> usize {
        0
    }
}
