//! The errors of exec-single: building ([`BuildError`]), running
//! ([`RunError`], io-core's one error of every executor's `block_on`,
//! `try_block_on` and `spawn`) and shutting down ([`ShutdownTimedOut`],
//! io-core's too, which exec-single's `shutdown` never returns).

use core::fmt;

use spindle_core::error::ConfigError;
pub use spindle_core::error::{RunError, ShutdownTimedOut};

/// A configuration the [`Builder`](crate::Builder) refused, or an I/O
/// poller it could not make.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The fiber configuration read from the environment
    /// (`IORuntime::from_env`, the builder's `fiber_config_from_env`) is
    /// invalid: for instance `SPINDLE_TRACING` names an unknown tracing mode
    /// (the message names the valid ones).
    Config(ConfigError),
    /// The operating system refused to make the I/O poller of an executor
    /// on the system clock (for instance: too many open files). Only with
    /// `std`, on Unix (see the [crate documentation](crate#the-loop)).
    #[cfg(feature = "std")]
    Poller(std::io::Error),
    /// The operating system refused to start the starvation watchdog's
    /// thread (`RuntimeBuilder::starvation_threshold`).
    #[cfg(feature = "std")]
    Watchdog(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "exec-single: {e}"),
            #[cfg(feature = "std")]
            BuildError::Poller(e) => write!(f, "exec-single: could not make the I/O poller: {e}"),
            #[cfg(feature = "std")]
            BuildError::Watchdog(e) => {
                write!(
                    f,
                    "exec-single: could not start the starvation watchdog's thread: {e}"
                )
            }
        }
    }
}

impl core::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            BuildError::Config(e) => Some(e),
            #[cfg(feature = "std")]
            BuildError::Poller(e) | BuildError::Watchdog(e) => Some(e),
        }
    }
}
