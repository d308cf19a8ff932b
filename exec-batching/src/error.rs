//! The errors of exec-batching: building ([`BuildError`]), running
//! ([`RunError`], io-core's one error of every executor's `block_on`,
//! `try_block_on` and `spawn`) and shutting down ([`ShutdownTimedOut`],
//! io-core's too, which exec-batching's `shutdown` never returns).

use std::fmt;
use std::io;

use spindle_core::error::ConfigError;
pub use spindle_core::error::{RunError, ShutdownTimedOut};

/// A configuration the [`Builder`](crate::Builder) refused, or a poller it
/// could not make.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `batch_size(0)`: a microtask batch must be allowed to run at least
    /// one fiber, or fibers started or resumed would never run.
    ZeroBatchSize,
    /// `max_blocking_threads(0)`: `IO::blocking` needs at least one thread
    /// (it never runs on the loop thread).
    ZeroBlockingThreads,
    /// The operating system refused to make the I/O poller (for instance:
    /// too many open files).
    Poller(io::Error),
    /// The fiber configuration read from the environment
    /// (`IORuntime::from_env`, the builder's `fiber_config_from_env`) is invalid: for
    /// instance `SPINDLE_TRACING` names an unknown tracing mode (the message
    /// names the valid ones).
    Config(ConfigError),
    /// The operating system refused to start the starvation watchdog's
    /// thread (`RuntimeBuilder::starvation_threshold`).
    Watchdog(io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroBatchSize => f.write_str(
                "exec-batching: batch_size must be at least 1 (got 0): \
                 a microtask batch of 0 fibers would never run a started or resumed fiber",
            ),
            BuildError::ZeroBlockingThreads => f.write_str(
                "exec-batching: max_blocking_threads must be at least 1 (got 0): \
                 IO::blocking runs on blocking threads, never on the loop thread",
            ),
            BuildError::Poller(e) => write!(f, "exec-batching: could not make the I/O poller: {e}"),
            BuildError::Config(e) => write!(f, "exec-batching: {e}"),
            BuildError::Watchdog(e) => write!(
                f,
                "exec-batching: could not start the starvation watchdog's thread: {e}"
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Poller(e) | BuildError::Watchdog(e) => Some(e),
            BuildError::Config(e) => Some(e),
            BuildError::ZeroBatchSize | BuildError::ZeroBlockingThreads => None,
        }
    }
}
