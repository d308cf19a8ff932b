//! The errors of exec-tokio: building ([`BuildError`]), running
//! ([`RunError`], io-core's one error of every executor's `block_on`,
//! `try_block_on`, `spawn` and, here, [`Handle::run_async`](crate::Handle::run_async))
//! and shutting down ([`ShutdownTimedOut`], io-core's too: the
//! `IO::blocking` calls an owned runtime left running).

use std::fmt;

use spindle_core::error::ConfigError;
pub use spindle_core::error::{RunError, ShutdownTimedOut};

/// A configuration the [`Builder`](crate::Builder) refused, or a runtime
/// or thread it could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// [`TokioExecutor::current`](crate::TokioExecutor::current) was called
    /// outside a tokio runtime: there is no runtime to attach to. Call it
    /// from async code (or inside `Runtime::enter`), pass a runtime's
    /// handle to [`Builder::handle`](crate::Builder::handle), or let the
    /// executor own a runtime ([`Builder::multi_thread`](crate::Builder::multi_thread)).
    NoCurrentRuntime,
    /// The tokio runtime to attach to was built without timers
    /// (`tokio::runtime::Builder::enable_time` or `enable_all` was not
    /// called): `IO::sleep` and `timeout` need them.
    TimersDisabled,
    /// `multi_thread(0)`: a multi-thread runtime needs at least one worker.
    ZeroWorkerThreads,
    /// `max_blocking_threads(0)`: `IO::blocking` needs at least one thread.
    ZeroBlockingThreads,
    /// An option that configures an owned runtime (its value names it:
    /// `"thread_name"`, `"max_blocking_threads"`) was given together with
    /// [`Builder::handle`](crate::Builder::handle): an attached runtime is
    /// configured by whoever built it.
    OptionOfOwnedRuntime(&'static str),
    /// The fiber configuration read from the environment
    /// (`IORuntime::from_env`, the builder's `fiber_config_from_env`) is
    /// invalid: for instance `SPINDLE_TRACING` names an unknown tracing
    /// mode (the message names the valid ones).
    Config(ConfigError),
    /// tokio could not build the owned runtime, or the operating system
    /// refused the thread that drives a current-thread one.
    Runtime(std::io::Error),
    /// The operating system refused to start the starvation watchdog's
    /// thread (`RuntimeBuilder::starvation_threshold`).
    Watchdog(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoCurrentRuntime => f.write_str(
                "exec-tokio: not inside a tokio runtime, so there is none to attach to \
                 (pass a runtime handle to Builder::handle, or own one with Builder::multi_thread)",
            ),
            BuildError::TimersDisabled => f.write_str(
                "exec-tokio: the tokio runtime has no timers; build it with enable_time() or enable_all()",
            ),
            BuildError::ZeroWorkerThreads => {
                f.write_str("exec-tokio: multi_thread needs at least 1 worker thread (got 0)")
            }
            BuildError::ZeroBlockingThreads => {
                f.write_str("exec-tokio: max_blocking_threads must be at least 1 (got 0)")
            }
            BuildError::OptionOfOwnedRuntime(option) => write!(
                f,
                "exec-tokio: {option} configures a runtime the executor owns; \
                 it cannot be set together with Builder::handle (an attached runtime)"
            ),
            BuildError::Config(e) => write!(f, "exec-tokio: {e}"),
            BuildError::Runtime(e) => write!(f, "exec-tokio: could not start the tokio runtime: {e}"),
            BuildError::Watchdog(e) => write!(
                f,
                "exec-tokio: could not start the starvation watchdog's thread: {e}"
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Runtime(e) | BuildError::Watchdog(e) => Some(e),
            BuildError::Config(e) => Some(e),
            _ => None,
        }
    }
}
