//! [`Builder`]: configures and builds an [`EventLoop`], with the setters
//! every Spindle executor's builder has (`fiber_config`,
//! `fiber_config_from_env`, `track_fibers`, and with std the starvation
//! watchdog's `starvation_threshold` and `on_starvation`: io-core's [`RuntimeBuilder`],
//! over the [`CommonSettings`] embedded here), `build`, those it shares
//! with exec-wstp for the blocking pool (`max_blocking_threads`,
//! `blocking_keep_alive`) and exec-batching's own (`batch_size`, `mode`).

use std::num::NonZeroUsize;
use std::time::Duration;

use spindle_core::executor::support::{
    self, BlockingPool, CommonSettings, Origin, Published, RemoteQueue, RunSlots, TimerHeap,
    Watchdog,
};
use spindle_core::{IORuntime, RuntimeBuilder};

use crate::error::BuildError;
use crate::event_loop::{EventLoop, Scratch};
use crate::handle::{Handle, Shared};
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex};
use spindle_net::driver::Reactor;

/// The default bound of a microtask batch: 64 fibers (Cats Effect's
/// `BatchingMacrotaskExecutor` default).
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// The default cap on the threads running `IO::blocking` work: 512 (as
/// exec-wstp's; tokio's default).
pub const DEFAULT_MAX_BLOCKING_THREADS: usize = support::DEFAULT_MAX_BLOCKING_THREADS;

/// How long an idle blocking thread waits for work before it exits, by
/// default: 10 seconds (as exec-wstp's).
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = support::DEFAULT_BLOCKING_KEEP_ALIVE;

/// The name of the blocking pool's threads.
const BLOCKING_THREAD_NAME: &str = "exec-batching-blocking";

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

/// Configures and builds an [`EventLoop`]. The setters every executor's
/// builder has come from [`RuntimeBuilder`] (import it).
#[derive(Debug, Clone)]
pub struct Builder {
    batch_size: usize,
    mode: Mode,
    common: CommonSettings,
    max_blocking_threads: usize,
    blocking_keep_alive: Duration,
}

impl RuntimeBuilder for Builder {
    fn common_settings(&mut self) -> &mut CommonSettings {
        &mut self.common
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: batches of [`DEFAULT_BATCH_SIZE`] fibers,
    /// [`Mode::Batching`], io-core's default fiber configuration (the
    /// environment is not read: see `IORuntime::from_env`), fibers listed
    /// for dumps while they trace, up to [`DEFAULT_MAX_BLOCKING_THREADS`]
    /// blocking threads kept [`DEFAULT_BLOCKING_KEEP_ALIVE`] when idle.
    pub fn new() -> Builder {
        Builder {
            batch_size: DEFAULT_BATCH_SIZE,
            mode: Mode::Batching,
            common: CommonSettings::default(),
            max_blocking_threads: DEFAULT_MAX_BLOCKING_THREADS,
            blocking_keep_alive: DEFAULT_BLOCKING_KEEP_ALIVE,
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

    /// The cap on threads running `IO::blocking` work at once (at least
    /// 1): further calls wait for one of them. Blocking work never runs on
    /// the loop thread. See the [crate documentation](crate#blocking-work).
    pub fn max_blocking_threads(mut self, n: usize) -> Builder {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking thread waits for work before it exits.
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Builder {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// Checks the configuration and makes the loop (and its poller; the
    /// blocking pool starts its threads on demand).
    pub fn build(self) -> Result<EventLoop, BuildError> {
        if self.batch_size == 0 {
            return Err(BuildError::ZeroBatchSize);
        }
        let Some(max_blocking_threads) = NonZeroUsize::new(self.max_blocking_threads) else {
            return Err(BuildError::ZeroBlockingThreads);
        };
        let config = self.common.fiber_config().map_err(BuildError::Config)?;
        let starvation = self.common.starvation().map_err(BuildError::Config)?;
        let fibers = self.common.registry(&config, 1);
        let lists_fibers = fibers.is_enabled();
        let watch_slots = starvation.as_ref().map(|_| RunSlots::new());
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
            canceled: AtomicU64::new(0),
            freed: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            io_events: AtomicU64::new(0),
            timers_fired: AtomicU64::new(0),
            turns: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            microtasks_run: AtomicU64::new(0),
            macrotasks_run: AtomicU64::new(0),
            published: Published::new(),
            blocking: Arc::new(BlockingPool::new(
                max_blocking_threads,
                self.blocking_keep_alive,
                String::from(BLOCKING_THREAD_NAME),
            )),
            watch_slot: watch_slots.as_ref().map(RunSlots::add),
        });
        let mut event_loop = EventLoop::from_parts(
            Handle { shared },
            Scratch {
                poller,
                due: Vec::new(),
            },
        );
        if let (Some(starvation), Some(slots)) = (starvation, watch_slots) {
            let watchdog = Watchdog::start(
                starvation,
                slots,
                event_loop.handle().clone(),
                lists_fibers,
                String::from("spindle-batching-watchdog"),
            )
            .map_err(BuildError::Watchdog)?;
            event_loop.watchdog = Some(watchdog);
        }
        Ok(event_loop)
    }
}
