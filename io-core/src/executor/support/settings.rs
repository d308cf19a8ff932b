//! [`CommonSettings`]: what every executor's builder keeps for the setters
//! of [`RuntimeBuilder`](crate::RuntimeBuilder), and what `build` makes of
//! it.

use crate::config::{ConfigError, FiberConfig};

use super::{ConfigSource, FiberRegistry};

/// The settings every executor's builder has, embedded in each builder and
/// changed by the provided setters of
/// [`RuntimeBuilder`](crate::RuntimeBuilder) (`fiber_config`,
/// `fiber_config_from_env`, `track_fibers`), so that those setters and
/// their documentation are written once.
///
/// A builder's `build` reads it first, before it starts anything:
/// [`fiber_config`](CommonSettings::fiber_config) (an invalid environment
/// is a [`ConfigError`], which each executor wraps in its
/// `BuildError::Config`), then [`registry`](CommonSettings::registry) for
/// the fiber registry behind its dumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommonSettings {
    /// Where the fiber configuration comes from (default: the defaults,
    /// reading no environment).
    pub fiber_config: ConfigSource,
    /// Whether fibers are listed for dumps also when they do not trace.
    pub track_fibers: bool,
}

impl CommonSettings {
    /// The fiber configuration the builder was given (or the defaults, or
    /// the environment's).
    pub fn fiber_config(&self) -> Result<FiberConfig, ConfigError> {
        self.fiber_config.resolve()
    }

    /// The fiber registry of an executor built with `config`, with
    /// `shards` shards: enabled while fibers trace or with
    /// `track_fibers` (see [`FiberRegistry::new`], which this calls once
    /// per executor).
    pub fn registry(&self, config: &FiberConfig, shards: usize) -> FiberRegistry {
        FiberRegistry::new(config, self.track_fibers, shards)
    }
}
