//! [`Builder`]: configures and builds an [`EventLoop`], with the setter
//! names every Spindle executor's builder has (`fiber_config`,
//! `track_fibers`, `build`) and exec-batching's own (`batch_size`, `mode`).

use spindle_core::FiberConfig;
use spindle_core::executor::support::{
    ConfigSource, FiberRegistry, Origin, Published, RemoteQueue, TimerHeap,
};

use crate::error::BuildError;
use crate::event_loop::{EventLoop, Scratch};
use crate::handle::{Handle, Shared};
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex};
use spindle_net::driver::Reactor;

/// The default bound of a microtask batch: 64 fibers (Cats Effect's
/// `BatchingMacrotaskExecutor` default).
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// How fibers made ready are queued. See the [crate documentation](crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `schedule_fiber` (start, resumption) puts the fiber in the microtask
    /// batch of the current turn; `reschedule_fiber` (cede, auto-yield) goes
    /// through the macrotask queue. The default.
    #[default]
    Batching,
    /// Every fiber waits for a later turn as a macrotask, like Cats
    /// Effect's plain `MacrotaskExecutor` (Node's `setImmediate`): the
    /// baseline the batching mode is measured against.
    Macrotask,
}

/// Configures and builds an [`EventLoop`].
#[derive(Debug, Clone)]
pub struct Builder {
    batch_size: usize,
    mode: Mode,
    pub(crate) fiber_config: ConfigSource,
    track_fibers: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: batches of [`DEFAULT_BATCH_SIZE`] fibers,
    /// [`Mode::Batching`], io-core's default fiber configuration (the
    /// environment is not read: see [`EventLoop::from_env`]), fibers listed
    /// for dumps while they trace.
    pub fn new() -> Builder {
        Builder {
            batch_size: DEFAULT_BATCH_SIZE,
            mode: Mode::Batching,
            fiber_config: ConfigSource::Default,
            track_fibers: false,
        }
    }

    /// The most fibers one microtask batch runs before the loop takes
    /// another turn (timers, I/O, macrotasks). At least 1.
    pub fn batch_size(mut self, n: usize) -> Builder {
        self.batch_size = n;
        self
    }

    /// Batching (the default) or the plain macrotask baseline.
    pub fn mode(mut self, mode: Mode) -> Builder {
        self.mode = mode;
        self
    }

    /// The run-loop configuration of every fiber (auto-yield budget,
    /// tracing). Without this call: [`FiberConfig::default`].
    pub fn fiber_config(mut self, config: FiberConfig) -> Builder {
        self.fiber_config = ConfigSource::Explicit(config);
        self
    }

    /// Keeps a weak reference to every fiber so that
    /// [`EventLoop::live_fibers`] and [`EventLoop::fiber_dump`] can list
    /// them, also when fibers do not trace. Fibers are listed anyway while
    /// they trace (io-core's `tracing` feature and a tracing mode other
    /// than `none`); with tracing off and this option off (the default)
    /// nothing is kept per fiber. Listing costs a lock and a push per fiber
    /// started (the counts in [`Metrics`](crate::Metrics) are always kept).
    pub fn track_fibers(mut self, on: bool) -> Builder {
        self.track_fibers = on;
        self
    }

    /// Checks the configuration and makes the loop (and its poller).
    pub fn build(self) -> Result<EventLoop, BuildError> {
        if self.batch_size == 0 {
            return Err(BuildError::ZeroBatchSize);
        }
        let config = self.fiber_config.resolve().map_err(BuildError::Config)?;
        let fibers = FiberRegistry::new(&config, self.track_fibers, 1);
        let (reactor, poller) = Reactor::new().map_err(BuildError::Poller)?;
        let shared = Arc::new(Shared {
            config,
            batch_size: self.batch_size,
            mode: self.mode,
            origin: Origin::now(),
            reactor,
            timers: Mutex::new(TimerHeap::new()),
            remote: RemoteQueue::new(),
            closed: AtomicBool::new(false),
            fibers,
            created: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            turns: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            microtasks_run: AtomicU64::new(0),
            macrotasks_run: AtomicU64::new(0),
            published: Published::new(),
        });
        Ok(EventLoop::from_parts(
            Handle { shared },
            Scratch {
                poller,
                due: Vec::new(),
            },
        ))
    }
}
