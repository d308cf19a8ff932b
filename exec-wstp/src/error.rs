//! The errors of exec-wstp: building ([`BuildError`]), running
//! ([`RunError`], io-core's one error of every executor's `block_on`,
//! `try_block_on` and `spawn`) and shutting down ([`ShutdownTimedOut`],
//! io-core's too: the worker and blocking threads still running).

use std::fmt;

use spindle_core::error::ConfigError;
pub use spindle_core::error::{RunError, ShutdownTimedOut};

/// A configuration the [`Builder`](crate::Builder) refused, or a thread it could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `worker_threads(0)`: a pool needs at least one worker.
    ZeroWorkerThreads,
    /// More workers than the scheduler's counters hold (65,535).
    TooManyWorkerThreads(usize),
    /// `global_queue_interval(0)`: the global queue must be checked every
    /// N ticks for some N of at least 1.
    ZeroGlobalQueueInterval,
    /// `max_blocking_threads(0)`: `IO::blocking` needs at least one thread.
    ZeroBlockingThreads,
    /// The fiber configuration read from the environment
    /// (`IORuntime::from_env`, the builder's `fiber_config_from_env`) is
    /// invalid: for instance `SPINDLE_TRACING` names an unknown tracing
    /// mode (the message names the valid ones).
    Config(ConfigError),
    /// The operating system refused to start a worker thread.
    Spawn(std::io::Error),
    /// The operating system refused a worker's I/O poller (out of file
    /// descriptors, typically).
    Poller(std::io::Error),
    /// The operating system refused to start the starvation watchdog's
    /// thread (`RuntimeBuilder::starvation_threshold`).
    Watchdog(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroWorkerThreads => {
                f.write_str("exec-wstp: worker_threads must be at least 1 (got 0)")
            }
            BuildError::TooManyWorkerThreads(n) => {
                write!(
                    f,
                    "exec-wstp: worker_threads must be at most 65535 (got {n})"
                )
            }
            BuildError::ZeroGlobalQueueInterval => {
                f.write_str("exec-wstp: global_queue_interval must be at least 1 (got 0)")
            }
            BuildError::ZeroBlockingThreads => {
                f.write_str("exec-wstp: max_blocking_threads must be at least 1 (got 0)")
            }
            BuildError::Config(e) => write!(f, "exec-wstp: {e}"),
            BuildError::Spawn(e) => write!(f, "exec-wstp: could not start a worker thread: {e}"),
            BuildError::Poller(e) => {
                write!(f, "exec-wstp: could not make the pool's I/O poller: {e}")
            }
            BuildError::Watchdog(e) => {
                write!(
                    f,
                    "exec-wstp: could not start the starvation watchdog's thread: {e}"
                )
            }
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(e) | BuildError::Poller(e) | BuildError::Watchdog(e) => Some(e),
            BuildError::Config(e) => Some(e),
            _ => None,
        }
    }
}
