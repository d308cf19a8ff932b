//! Run-loop configuration, validated when it is built.

use core::fmt;
use core::num::NonZeroU32;

/// How fibers run: set once per executor, read by each fiber when it runs.
///
/// Build one with [`FiberConfig::builder`]; a value that cannot work is a
/// [`ConfigError`] at construction, never a hang at run time.
///
/// ```
/// use io_core::{ConfigError, FiberConfig};
///
/// let config = FiberConfig::builder().auto_yield_after(256).build()?;
/// assert_eq!(config.auto_yield_after(), 256);
///
/// let err = FiberConfig::builder().auto_yield_after(0).build().unwrap_err();
/// assert_eq!(err, ConfigError::AutoYieldAfterZero);
/// assert!(err.to_string().contains("auto_yield_after"));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiberConfig {
    auto_yield_after: NonZeroU32,
}

/// The default number of run-loop steps before a fiber yields (as Cats
/// Effect's `autoYieldThreshold` default).
pub const DEFAULT_AUTO_YIELD_AFTER: u32 = 1024;

impl FiberConfig {
    /// The default configuration: yield after 1024 steps.
    pub const DEFAULT: FiberConfig = FiberConfig {
        auto_yield_after: match NonZeroU32::new(DEFAULT_AUTO_YIELD_AFTER) {
            Some(n) => n,
            None => unreachable!(),
        },
    };

    /// A builder starting from the defaults.
    pub fn builder() -> FiberConfigBuilder {
        FiberConfigBuilder {
            auto_yield_after: DEFAULT_AUTO_YIELD_AFTER,
        }
    }

    /// How many run-loop steps a fiber takes before it asks its executor to
    /// reschedule it (auto-yield), so that one busy fiber cannot starve others.
    pub fn auto_yield_after(&self) -> u32 {
        self.auto_yield_after.get()
    }
}

impl Default for FiberConfig {
    fn default() -> Self {
        FiberConfig::DEFAULT
    }
}

/// Builds a [`FiberConfig`]; [`build`](FiberConfigBuilder::build) validates.
#[derive(Debug, Clone)]
pub struct FiberConfigBuilder {
    auto_yield_after: u32,
}

impl FiberConfigBuilder {
    /// Sets the auto-yield threshold in run-loop steps (at least 1).
    pub fn auto_yield_after(mut self, steps: u32) -> Self {
        self.auto_yield_after = steps;
        self
    }

    /// Checks the settings and builds the configuration.
    pub fn build(self) -> Result<FiberConfig, ConfigError> {
        let auto_yield_after =
            NonZeroU32::new(self.auto_yield_after).ok_or(ConfigError::AutoYieldAfterZero)?;
        Ok(FiberConfig { auto_yield_after })
    }
}

/// A configuration value that cannot work, named with the setting it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `auto_yield_after` was 0: a fiber would have to yield before its first
    /// step and could never make progress.
    AutoYieldAfterZero,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::AutoYieldAfterZero => f.write_str(
                "invalid fiber configuration: auto_yield_after must be at least 1 step \
                 (0 would yield before any progress)",
            ),
        }
    }
}

impl core::error::Error for ConfigError {}
