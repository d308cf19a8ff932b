//! [`CommonSettings`]: what every executor's builder keeps for the setters
//! of [`RuntimeBuilder`](crate::RuntimeBuilder), and what `build` makes of
//! it.

use crate::config::{ConfigError, FiberConfig};

use super::{ConfigSource, FiberRegistry};

/// The settings every executor's builder has, embedded in each builder and
/// changed by the provided setters of
/// [`RuntimeBuilder`](crate::RuntimeBuilder) (`fiber_config`,
/// `fiber_config_from_env`, `track_fibers`, and with std
/// `starvation_threshold` and `on_starvation`), so that those setters and
/// their documentation are written once.
///
/// A builder's `build` reads it first, before it starts anything:
/// [`fiber_config`](CommonSettings::fiber_config) (an invalid environment
/// is a [`ConfigError`], which each executor wraps in its
/// `BuildError::Config`), then [`registry`](CommonSettings::registry) for
/// the fiber registry behind its dumps, and with std
/// [`starvation`](CommonSettings::starvation) for the starvation watchdog.
#[derive(Debug, Clone, Default)]
pub struct CommonSettings {
    /// Where the fiber configuration comes from (default: the defaults,
    /// reading no environment).
    pub fiber_config: ConfigSource,
    /// Whether fibers are listed for dumps also when they do not trace.
    pub track_fibers: bool,
    /// The starvation watchdog's settings (off unless given a threshold).
    #[cfg(feature = "std")]
    pub starvation: StarvationSettings,
}

/// What a builder was told of the starvation watchdog
/// ([`watchdog`](super::watchdog)): the setters
/// [`starvation_threshold`](crate::RuntimeBuilder::starvation_threshold) and
/// [`on_starvation`](crate::RuntimeBuilder::on_starvation), and whether the
/// environment may turn it on. Resolved by [`CommonSettings::starvation`].
#[cfg(feature = "std")]
#[derive(Clone, Default)]
pub struct StarvationSettings {
    /// The threshold given to the builder (`None`: not given).
    pub threshold: Option<core::time::Duration>,
    /// Read `SPINDLE_STARVATION_MS` when no threshold is given (set by
    /// `fiber_config_from_env`, hence by `X::from_env()`).
    pub from_env: bool,
    /// Who gets the reports (`None`: a warning on stderr).
    pub handler: Option<super::StarvationHandler>,
}

#[cfg(feature = "std")]
impl core::fmt::Debug for StarvationSettings {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StarvationSettings")
            .field("threshold", &self.threshold)
            .field("from_env", &self.from_env)
            .field("handler", &self.handler.as_ref().map(|_| "custom"))
            .finish()
    }
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

    /// The starvation watchdog's configuration, `None` when it is off:
    /// the builder's threshold, else (after `fiber_config_from_env`) the
    /// one of `SPINDLE_STARVATION_MS`, with the builder's handler or the
    /// default (a warning on stderr). A zero threshold, or a variable that
    /// is not a whole number of milliseconds of at least 1, is a
    /// [`ConfigError`] naming the setting (each executor wraps it in its
    /// `BuildError::Config`).
    #[cfg(feature = "std")]
    pub fn starvation(&self) -> Result<Option<super::StarvationConfig>, ConfigError> {
        let settings = &self.starvation;
        let threshold = match settings.threshold {
            Some(threshold) => Some(threshold),
            None if settings.from_env => super::watchdog::threshold_from_env()?,
            None => None,
        };
        let Some(threshold) = threshold else {
            return Ok(None);
        };
        if threshold.is_zero() {
            return Err(ConfigError::StarvationThresholdZero);
        }
        let handler = settings.handler.clone().unwrap_or_else(|| {
            std::sync::Arc::new(super::print_starvation_report) as super::StarvationHandler
        });
        Ok(Some(super::StarvationConfig { threshold, handler }))
    }
}
