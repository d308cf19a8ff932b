//! The errors of exec-single: building ([`BuildError`]) and running
//! ([`RunError`], io-core's one error of every executor's `block_on`,
//! `try_block_on` and `spawn`).

use core::fmt;

use spindle_core::ConfigError;
pub use spindle_core::RunError;

/// A configuration the [`Builder`](crate::Builder) refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The fiber configuration read from the environment
    /// ([`SingleThreaded::from_env`](crate::SingleThreaded::from_env)) is
    /// invalid: for instance `SPINDLE_TRACING` names an unknown tracing mode
    /// (the message names the valid ones).
    Config(ConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "exec-single: {e}"),
        }
    }
}

impl core::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            BuildError::Config(e) => Some(e),
        }
    }
}
