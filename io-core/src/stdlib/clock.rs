//! `Clock`: the executor's clocks as a service (Cats Effect's `Clock`).
//!
//! Spindle's clocks belong to the executor that runs the fiber, not to a
//! global: [`IO::monotonic`] and [`IO::real_time`] read it, and a test
//! swaps it by running on a different executor (exec-single's
//! `TestControl` runs on virtual time). So `Clock` is a zero-sized handle
//! that names the service for code that takes its capabilities as values,
//! and adds [`Clock::timed`]; it holds no state and nothing to replace.
//! A program that must be tested with a fake clock needs no `Clock`
//! parameter: run it under `TestControl`.

use core::time::Duration;

use crate::io::IO;

/// The executor's monotonic and wall clocks, as programs.
///
/// ```
/// use core::time::Duration;
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Clock, wstp::Runtime};
///
/// let clock = Clock;
/// let io: IO<bool, ()> = clock
///     .timed(IO::sleep(Duration::from_millis(2)))
///     .map(|(took, ())| took >= Duration::from_millis(2));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock;

impl Clock {
    /// Time since a fixed origin of the executor; never goes back. For
    /// measuring durations.
    pub fn monotonic<E: Send + 'static>(&self) -> IO<Duration, E> {
        IO::monotonic()
    }

    /// Time since the Unix epoch, from the executor's wall clock (which
    /// may jump when the system time is set). For timestamps, not for
    /// measuring.
    pub fn real_time<E: Send + 'static>(&self) -> IO<Duration, E> {
        IO::real_time()
    }

    /// Runs `io` and measures how long it took on the monotonic clock
    /// ([`IO::timed`]).
    #[track_caller]
    pub fn timed<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> IO<(Duration, A), E> {
        io.timed()
    }
}
