//! [`SimBuilder`]: the simulator's settings, checked when it is built
//! ([`SimConfigError`] names the setting that was wrong).

use core::fmt;
use core::ops::Range;
use std::time::Duration;

use spindle_core::{FiberConfig, TracingMode};

use crate::Sim;
use crate::disk::{DiskConfig, DiskParams};
use crate::net::{NetConfig, NetParams};
use crate::rng::threshold;
use crate::strategy::Strategy;

/// Which fibers the cancellation fault
/// ([`SimBuilder::cancel_at_suspension`]) may cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CancelScope {
    /// Only fibers that ran [`cancelable`](crate::cancelable) (the
    /// default): the program says which of its fibers are expected to
    /// survive cancellation, e.g. the per-connection fibers of a server,
    /// not its supervisor.
    #[default]
    Marked,
    /// Every fiber but the main one (the program's own fibers and those
    /// io-core starts for it, e.g. the two sides of `par_map`).
    AllButMain,
}

/// The settings of a [`Sim`]; [`build`](SimBuilder::build) checks them.
///
/// ```
/// use spindle_sim::{Sim, Strategy};
///
/// let sim = Sim::builder()
///     .seeds(0..200)
///     .strategy(Strategy::pct())
///     .cancel_at_suspension(0.05)
///     .build()?;
/// # let _ = sim;
/// # Ok::<(), spindle_sim::SimConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SimBuilder {
    seeds: Range<u64>,
    strategy: Strategy,
    preempt_after: u32,
    cancel: f64,
    cancel_scope: CancelScope,
    io_errors: f64,
    blocking_errors: f64,
    clock_jumps: f64,
    max_clock_jump: Duration,
    max_steps: u64,
    no_fibers_left: bool,
    shrink: bool,
    tracing: TracingMode,
    network: NetConfig,
    disk: DiskConfig,
}

impl Default for SimBuilder {
    fn default() -> Self {
        SimBuilder {
            seeds: 0..100,
            strategy: Strategy::Random,
            preempt_after: 1,
            cancel: 0.0,
            cancel_scope: CancelScope::Marked,
            io_errors: 0.0,
            blocking_errors: 0.0,
            clock_jumps: 0.0,
            max_clock_jump: Duration::from_secs(1),
            max_steps: 100_000,
            no_fibers_left: false,
            shrink: true,
            tracing: TracingMode::Cached,
            network: NetConfig::default(),
            disk: DiskConfig::default(),
        }
    }
}

/// A setting of [`SimBuilder`] that cannot be used.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SimConfigError {
    /// [`seeds`](SimBuilder::seeds) is empty.
    NoSeeds,
    /// A probability outside `0.0..=1.0` (or NaN): which setting, and the
    /// value.
    Probability(&'static str, f64),
    /// [`preempt_after`](SimBuilder::preempt_after) is 0.
    PreemptAfterZero,
    /// [`max_steps`](SimBuilder::max_steps) is 0.
    MaxStepsZero,
    /// [`Strategy::Pct`] with `depth` 0 or `expected_steps` 0.
    PctZero,
    /// [`clock_jumps`](SimBuilder::clock_jumps) is on with a zero
    /// [`max_clock_jump`](SimBuilder::max_clock_jump).
    MaxClockJumpZero,
    /// The fiber configuration was refused (io-core's error, as text).
    FiberConfig(String),
    /// A setting of [`network`](SimBuilder::network) cannot be used:
    /// which one and why.
    Network(String),
}

impl fmt::Display for SimConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimConfigError::NoSeeds => f.write_str("spindle-sim: the range of seeds is empty"),
            SimConfigError::Probability(name, p) => write!(
                f,
                "spindle-sim: `{name}` must be a probability in 0.0..=1.0, not {p}"
            ),
            SimConfigError::PreemptAfterZero => {
                f.write_str("spindle-sim: `preempt_after` must be at least 1 step")
            }
            SimConfigError::MaxStepsZero => {
                f.write_str("spindle-sim: `max_steps` must be at least 1")
            }
            SimConfigError::PctZero => f.write_str(
                "spindle-sim: `Strategy::Pct` needs a depth and expected_steps of at least 1",
            ),
            SimConfigError::MaxClockJumpZero => {
                f.write_str("spindle-sim: `clock_jumps` is on but `max_clock_jump` is zero")
            }
            SimConfigError::FiberConfig(e) => write!(f, "spindle-sim: fiber configuration: {e}"),
            SimConfigError::Network(e) => write!(f, "spindle-sim: network: {e}"),
        }
    }
}

impl std::error::Error for SimConfigError {}

impl SimBuilder {
    /// The seeds [`Sim::check`] runs, in order (default `0..100`). Each
    /// seed is one run.
    pub fn seeds(mut self, seeds: Range<u64>) -> Self {
        self.seeds = seeds;
        self
    }

    /// How the next fiber is picked (default [`Strategy::Random`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Interpreter steps a fiber runs before it yields to the scheduler
    /// (default 1: every bind is a point where another fiber may run,
    /// which is what finds check-then-act races; larger values make runs
    /// shorter and coarser). At least 1.
    pub fn preempt_after(mut self, steps: u32) -> Self {
        self.preempt_after = steps;
        self
    }

    /// Probability (per suspension) that a fiber is canceled when it
    /// suspends (waits for a callback, a timer, a data type, a join): it is
    /// resumed to run its finalizers, as if another fiber had canceled it.
    /// Which fibers: [`cancel_scope`](SimBuilder::cancel_scope). Default 0.
    pub fn cancel_at_suspension(mut self, p: f64) -> Self {
        self.cancel = p;
        self
    }

    /// Which fibers [`cancel_at_suspension`](SimBuilder::cancel_at_suspension)
    /// applies to (default [`CancelScope::Marked`]).
    pub fn cancel_scope(mut self, scope: CancelScope) -> Self {
        self.cancel_scope = scope;
        self
    }

    /// Probability that a [`io_fault`](crate::io_fault) point (in an
    /// `IO::try_blocking` thunk, a callback, ...) returns an injected error.
    /// Default 0.
    pub fn io_errors(mut self, p: f64) -> Self {
        self.io_errors = p;
        self
    }

    /// Probability that blocking I/O work fails with an injected error
    /// instead of running: the work of an `IO<A, std::io::Error>` made
    /// with `IO::blocking` or `IO::try_blocking`, which is every file,
    /// process and name-resolution operation of Spindle's I/O crates
    /// (`spindle_effect::fs`, `process`, `TcpStream::connect_host` outside
    /// a simulated network) and your own. The program sees an
    /// `io::Error` of kind `Other` whose payload is
    /// [`InjectedFault`](crate::InjectedFault). Blocking work with another
    /// error type always runs. Default 0.
    pub fn blocking_errors(mut self, p: f64) -> Self {
        self.blocking_errors = p;
        self
    }

    /// Probability (per step) that virtual time jumps forward by a random
    /// amount up to [`max_clock_jump`](SimBuilder::max_clock_jump): timers
    /// fire "early" relative to the work done, as after a pause of the
    /// process. Default 0.
    pub fn clock_jumps(mut self, p: f64) -> Self {
        self.clock_jumps = p;
        self
    }

    /// The largest clock jump (default one second).
    pub fn max_clock_jump(mut self, max: Duration) -> Self {
        self.max_clock_jump = max;
        self
    }

    /// Steps after which a run fails as [`FailureKind::StepLimit`]
    /// (a livelock, or a program that never ends; default 100,000).
    ///
    /// [`FailureKind::StepLimit`]: crate::FailureKind::StepLimit
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    /// Whether a run whose main fiber succeeded fails if other fibers are
    /// still alive (waiting, or ready and not run) at that moment:
    /// [`FailureKind::FibersLeft`](crate::FailureKind::FibersLeft).
    /// Default off (many programs leave daemons behind on purpose).
    pub fn no_fibers_left(mut self, on: bool) -> Self {
        self.no_fibers_left = on;
        self
    }

    /// Whether a failing run's injected faults are shrunk (default on):
    /// see [`Sim::check`].
    pub fn shrink(mut self, on: bool) -> Self {
        self.shrink = on;
        self
    }

    /// The tracing mode of the simulated fibers (default `cached`: the
    /// traces in failure reports); `none` makes runs faster.
    pub fn tracing(mut self, mode: TracingMode) -> Self {
        self.tracing = mode;
        self
    }

    /// The simulated network's delays and faults (default
    /// [`NetConfig::default`]: 1 ms latency, no fault). The network is
    /// always there: every fiber's TCP and UDP sockets run on it (see
    /// [`crate::net`]).
    pub fn network(mut self, network: NetConfig) -> Self {
        self.network = network;
        self
    }

    /// The simulated disks' settings (default [`DiskConfig::default`]:
    /// no injected error). Every host always has a disk: its fibers'
    /// files (spindle-os's `fs`) are on it (see [`crate::disk`]).
    pub fn disk(mut self, disk: DiskConfig) -> Self {
        self.disk = disk;
        self
    }

    /// Checks the settings and makes the simulator.
    pub fn build(self) -> Result<Sim, SimConfigError> {
        if self.seeds.is_empty() {
            return Err(SimConfigError::NoSeeds);
        }
        for (name, p) in [
            ("cancel_at_suspension", self.cancel),
            ("io_errors", self.io_errors),
            ("blocking_errors", self.blocking_errors),
            ("clock_jumps", self.clock_jumps),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(SimConfigError::Probability(name, p));
            }
        }
        if self.preempt_after == 0 {
            return Err(SimConfigError::PreemptAfterZero);
        }
        if self.max_steps == 0 {
            return Err(SimConfigError::MaxStepsZero);
        }
        if let Strategy::Pct {
            depth,
            expected_steps,
        } = self.strategy
            && (depth == 0 || expected_steps == 0)
        {
            return Err(SimConfigError::PctZero);
        }
        if self.clock_jumps > 0.0 && self.max_clock_jump.is_zero() {
            return Err(SimConfigError::MaxClockJumpZero);
        }
        let network = self.network.check().map_err(SimConfigError::Network)?;
        let disk = self
            .disk
            .params()
            .map_err(|(name, p)| SimConfigError::Probability(name, p))?;
        let fiber_config = FiberConfig::builder()
            .auto_yield_after(self.preempt_after)
            .tracing(self.tracing)
            .build()
            .map_err(|e| SimConfigError::FiberConfig(e.to_string()))?;
        Ok(Sim {
            config: Config {
                seeds: self.seeds,
                strategy: self.strategy,
                fiber_config,
                cancel: threshold(self.cancel),
                cancel_scope: self.cancel_scope,
                io_errors: threshold(self.io_errors),
                blocking_errors: threshold(self.blocking_errors),
                clock_jumps: threshold(self.clock_jumps),
                max_clock_jump_ns: u64::try_from(self.max_clock_jump.as_nanos())
                    .unwrap_or(u64::MAX),
                max_steps: self.max_steps,
                no_fibers_left: self.no_fibers_left,
                shrink: self.shrink,
                network,
                disk,
            },
        })
    }
}

/// The checked settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) seeds: Range<u64>,
    pub(crate) strategy: Strategy,
    pub(crate) fiber_config: FiberConfig,
    pub(crate) cancel: u64,
    pub(crate) cancel_scope: CancelScope,
    pub(crate) io_errors: u64,
    pub(crate) blocking_errors: u64,
    pub(crate) clock_jumps: u64,
    pub(crate) max_clock_jump_ns: u64,
    pub(crate) max_steps: u64,
    pub(crate) no_fibers_left: bool,
    pub(crate) shrink: bool,
    pub(crate) network: NetParams,
    pub(crate) disk: DiskParams,
}
