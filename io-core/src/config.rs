//! Run-loop configuration, validated when it is built.

use core::fmt;
use core::num::NonZeroU32;

use crate::engine::tracing::TracingMode;

/// How fibers run: set once per executor, read by each fiber when it runs.
///
/// Build one with [`FiberConfig::builder`]; a value that cannot work is a
/// [`ConfigError`] at construction, never a hang at run time.
///
/// ```
/// use spindle_effect::{FiberConfig, error::ConfigError};
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
    tracing: TracingMode,
    /// A power of two (validated by `spindle_trace::ring_capacity`).
    trace_capacity: usize,
}

/// The default number of run-loop steps before a fiber yields (as Cats
/// Effect's `autoYieldThreshold` default).
pub const DEFAULT_AUTO_YIELD_AFTER: u32 = 1024;

impl FiberConfig {
    /// The default configuration: yield after 1024 steps.
    /// Tracing is `cached` with 16 events per fiber (Cats Effect's
    /// defaults); this constant does not read `SPINDLE_TRACING` (the
    /// builder does).
    pub const DEFAULT: FiberConfig = FiberConfig {
        auto_yield_after: match NonZeroU32::new(DEFAULT_AUTO_YIELD_AFTER) {
            Some(n) => n,
            None => unreachable!(),
        },
        tracing: TracingMode::Cached,
        trace_capacity: spindle_trace::DEFAULT_CAPACITY,
    };

    /// A builder starting from the defaults.
    pub fn builder() -> FiberConfigBuilder {
        FiberConfigBuilder {
            auto_yield_after: DEFAULT_AUTO_YIELD_AFTER,
            tracing: None,
            trace_capacity: spindle_trace::DEFAULT_CAPACITY,
        }
    }

    /// The defaults, with the tracing mode read from the `SPINDLE_TRACING`
    /// environment variable when it is set and not empty (std builds); an
    /// unknown value is a [`ConfigError::Tracing`] naming the valid ones.
    pub fn from_env() -> Result<FiberConfig, ConfigError> {
        FiberConfig::builder().build()
    }

    /// The tracing mode fibers start in (`io.traced()` switches tracing on
    /// inside its scope whatever the mode). Without io-core's `tracing`
    /// feature nothing is recorded whatever the mode.
    pub fn tracing(&self) -> TracingMode {
        self.tracing
    }

    /// How many trace events each fiber keeps (a power of two).
    pub fn trace_capacity(&self) -> usize {
        self.trace_capacity
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
    /// `None`: from the environment (std), else `cached`.
    tracing: Option<TracingMode>,
    trace_capacity: usize,
}

impl FiberConfigBuilder {
    /// Sets the auto-yield threshold in run-loop steps (at least 1).
    pub fn auto_yield_after(mut self, steps: u32) -> Self {
        self.auto_yield_after = steps;
        self
    }

    /// Sets the tracing mode (`none`, `cached`, `full`). Without this
    /// call, std builds take it from the `SPINDLE_TRACING` environment
    /// variable when set, and use `cached` otherwise.
    pub fn tracing(mut self, mode: TracingMode) -> Self {
        self.tracing = Some(mode);
        self
    }

    /// Sets how many trace events each fiber keeps (default 16). 0 is a
    /// [`ConfigError::TraceCapacity`] (use mode `none` to record nothing);
    /// a value that is not a power of two is rounded up to one (10 keeps
    /// 16 events), since a slot is found with a mask.
    pub fn trace_capacity(mut self, events: usize) -> Self {
        self.trace_capacity = events;
        self
    }

    /// Checks the settings and builds the configuration. Mode `none`, in a
    /// process where nothing traced yet, makes programs built from then on
    /// leave out the site of a leaf whose closure is one word (it would
    /// cost an allocation; see `spindle_trace::call_sites_for`); `cached` or `full`
    /// keeps every site for good; `full` also switches on backtrace capture
    /// (`spindle_trace::set_full_capture`). `full` needs io-core's `tracing-full`
    /// feature: without it, it is a [`ConfigError::FullTracingNotCompiled`].
    pub fn build(self) -> Result<FiberConfig, ConfigError> {
        let auto_yield_after =
            NonZeroU32::new(self.auto_yield_after).ok_or(ConfigError::AutoYieldAfterZero)?;
        let trace_capacity = spindle_trace::ring_capacity(self.trace_capacity)
            .map_err(ConfigError::TraceCapacity)?;
        let tracing = match self.tracing {
            Some(mode) => mode,
            #[cfg(feature = "std")]
            None => tracing_from_env()?.unwrap_or_default(),
            #[cfg(not(feature = "std"))]
            None => TracingMode::default(),
        };
        match tracing {
            #[cfg(feature = "tracing-full")]
            TracingMode::Full => {
                spindle_trace::call_sites_for(true);
                spindle_trace::set_full_capture(true);
            }
            #[cfg(not(feature = "tracing-full"))]
            TracingMode::Full => return Err(ConfigError::FullTracingNotCompiled),
            TracingMode::Cached => spindle_trace::call_sites_for(true),
            TracingMode::None => spindle_trace::call_sites_for(false),
        }
        Ok(FiberConfig {
            auto_yield_after,
            tracing,
            trace_capacity,
        })
    }
}

/// The tracing mode named by `SPINDLE_TRACING`: `None` when the variable is
/// unset *or empty* (`SPINDLE_TRACING= cargo run` means "not set", as for
/// `RUST_LOG`; it is not a startup failure).
#[cfg(feature = "std")]
fn tracing_from_env() -> Result<Option<TracingMode>, ConfigError> {
    match std::env::var_os(spindle_trace::ENV_VAR) {
        Some(value) if value.is_empty() => Ok(None),
        _ => TracingMode::from_env().map_err(ConfigError::Tracing),
    }
}

/// A configuration value that cannot work, named with the setting it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `auto_yield_after` was 0: a fiber would have to yield before its first
    /// step and could never make progress.
    AutoYieldAfterZero,
    /// The trace buffer capacity was 0 or too large.
    TraceCapacity(spindle_trace::CapacityError),
    /// The tracing mode named by `SPINDLE_TRACING` is not one of `none`,
    /// `cached`, `full`.
    Tracing(spindle_trace::ParseModeError),
    /// `full` tracing captures a `std::backtrace` backtrace where each
    /// operation is built: it needs io-core's `tracing-full` feature (with
    /// std), which also costs a check wherever a program is built, so it is
    /// off by default.
    FullTracingNotCompiled,
    /// The builder's `starvation_threshold` was zero: every fiber run
    /// would be reported.
    StarvationThresholdZero,
    /// `SPINDLE_STARVATION_MS` (kept here) is not a whole number of
    /// milliseconds of at least 1.
    StarvationEnv(alloc::boxed::Box<str>),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::AutoYieldAfterZero => f.write_str(
                "invalid fiber configuration: auto_yield_after must be at least 1 step \
                 (0 would yield before any progress)",
            ),
            ConfigError::TraceCapacity(e) => write!(f, "invalid fiber configuration: {e}"),
            ConfigError::Tracing(e) => write!(f, "invalid fiber configuration: {e}"),
            ConfigError::FullTracingNotCompiled => f.write_str(
                "invalid fiber configuration: tracing mode `full` needs the \
                 `tracing-full` cargo feature (backtraces, std); use `cached`, or build with \
                 that feature (`spindle-effect = { features = [\"tracing-full\"] }`, \
                 or `--features spindle-effect/tracing-full`)",
            ),
            ConfigError::StarvationThresholdZero => f.write_str(
                "invalid starvation_threshold: it must be more than zero \
                 (zero would report every fiber run)",
            ),
            ConfigError::StarvationEnv(value) => write!(
                f,
                "invalid SPINDLE_STARVATION_MS={value:?}: expected a whole number of \
                 milliseconds of at least 1 (unset or empty: no starvation watchdog)",
            ),
        }
    }
}

impl core::error::Error for ConfigError {}
