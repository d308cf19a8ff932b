//! [`Builder`]: configures and builds a [`Runtime`], with the setters
//! every Spindle executor's builder has (`fiber_config`,
//! `fiber_config_from_env`, `track_fibers`, and with std the starvation
//! watchdog's `starvation_threshold` and `on_starvation`: io-core's [`RuntimeBuilder`],
//! over the [`CommonSettings`] embedded here), `build`, and exec-wstp's own
//! (`worker_threads`, `global_queue_interval`, `max_blocking_threads`,
//! `blocking_keep_alive`, `thread_name`).

use std::num::NonZeroUsize;
use std::time::Duration;

use crossbeam_deque::{Injector, Worker};
use crossbeam_utils::CachePadded;
use spindle_core::executor::support::{
    self, BlockingPool, CommonSettings, Origin, RunSlots, TimerHeap, Watchdog,
};
use spindle_core::{Fiber, IORuntime, RuntimeBuilder};

use crate::error::BuildError;
use crate::handle::{Counters, Handle, IoPoller, Remote, Shared};
use crate::idle::Idle;
use crate::park::Driver;
use crate::runtime::Runtime;
use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex};
use crate::worker;
use spindle_net::driver::Reactor;

/// The default number of global-queue checks: one every 61 local ticks
/// (tokio's default; a prime, so it does not beat with loops of even size).
pub const DEFAULT_GLOBAL_QUEUE_INTERVAL: u32 = 61;
/// The default cap on blocking threads (tokio's default; io-core's
/// `executor::support::DEFAULT_MAX_BLOCKING_THREADS`, shared with
/// exec-batching).
pub const DEFAULT_MAX_BLOCKING_THREADS: usize = support::DEFAULT_MAX_BLOCKING_THREADS;
/// How long an idle blocking thread waits for work before it exits
/// (io-core's `executor::support::DEFAULT_BLOCKING_KEEP_ALIVE`).
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = support::DEFAULT_BLOCKING_KEEP_ALIVE;

/// Configures and builds a [`Runtime`]. The setters every executor's
/// builder has come from [`RuntimeBuilder`] (import it).
#[derive(Debug, Clone)]
pub struct Builder {
    worker_threads: Option<usize>,
    common: CommonSettings,
    global_queue_interval: u32,
    max_blocking_threads: usize,
    blocking_keep_alive: Duration,
    thread_name: String,
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
    /// The defaults: one worker per available CPU, io-core's default fiber
    /// configuration (the environment is not read: see
    /// `IORuntime::from_env`), the global queue every 61 ticks, up to 512
    /// blocking threads kept 10 s when idle, fibers listed for dumps while
    /// they trace.
    pub fn new() -> Builder {
        Builder {
            worker_threads: None,
            common: CommonSettings::default(),
            global_queue_interval: DEFAULT_GLOBAL_QUEUE_INTERVAL,
            max_blocking_threads: DEFAULT_MAX_BLOCKING_THREADS,
            blocking_keep_alive: DEFAULT_BLOCKING_KEEP_ALIVE,
            thread_name: String::from("spindle-worker"),
        }
    }

    /// The number of worker threads (default: `std::thread::available_parallelism`).
    pub fn worker_threads(mut self, n: usize) -> Builder {
        self.worker_threads = Some(n);
        self
    }

    /// How many fibers a worker runs between two looks at the global queue.
    pub fn global_queue_interval(mut self, ticks: u32) -> Builder {
        self.global_queue_interval = ticks;
        self
    }

    /// The cap on threads running `IO::blocking` work.
    pub fn max_blocking_threads(mut self, n: usize) -> Builder {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking thread waits for work before it exits.
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Builder {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// The name prefix of worker threads (`<name>-<index>`); blocking
    /// threads are named `<name>-blocking`.
    pub fn thread_name(mut self, name: impl Into<String>) -> Builder {
        self.thread_name = name.into();
        self
    }

    /// Checks the configuration and starts the worker threads.
    pub fn build(self) -> Result<Runtime, BuildError> {
        let workers = match self.worker_threads {
            Some(0) => return Err(BuildError::ZeroWorkerThreads),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if workers > 0xFFFF {
            return Err(BuildError::TooManyWorkerThreads(workers));
        }
        if self.global_queue_interval == 0 {
            return Err(BuildError::ZeroGlobalQueueInterval);
        }
        let Some(max_blocking_threads) = NonZeroUsize::new(self.max_blocking_threads) else {
            return Err(BuildError::ZeroBlockingThreads);
        };
        let fiber_config = self.common.fiber_config().map_err(BuildError::Config)?;
        let starvation = self.common.starvation().map_err(BuildError::Config)?;
        // One shard per worker (pushed to by that worker only) and one for
        // threads outside the pool.
        let fibers = self.common.registry(&fiber_config, workers + 1);
        let locals: Vec<Worker<Fiber<Handle>>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        // A read after one that drained its socket cedes, then tries its
        // call: trying at once let a connection whose client answered fast
        // be served many times in one fiber run while connections waiting
        // in the poller starved for milliseconds; waiting for readiness
        // (tokio's rule) costs a trip through the poller, which a busy
        // worker looks at every few dozen fibers (BENCHMARKS, "HTTP
        // hello").
        let (reactor, poller) = Reactor::ceding().map_err(BuildError::Poller)?;
        // Driven from now on: the worker threads are about to start, and a
        // socket made before they do (by a main fiber run inline by
        // `block_on`) waits for their first poll.
        reactor.set_driven(true);
        let watch_slots = starvation.as_ref().map(|_| RunSlots::new());
        let lists_fibers = fibers.is_enabled();
        let remotes = locals
            .iter()
            .map(|local| Remote {
                stealer: local.stealer(),
                timers: Mutex::new(TimerHeap::new()),
                has_timers: AtomicBool::new(false),
                counters: CachePadded::new(Counters::default()),
            })
            .collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            remotes,
            driver: Driver::new(IoPoller(poller), reactor.clone(), workers),
            reactor,
            idle: Idle::new(workers),
            config: fiber_config,
            global_queue_interval: self.global_queue_interval,
            shutdown: AtomicBool::new(false),
            blocking: std::sync::Arc::new(BlockingPool::new(
                max_blocking_threads,
                self.blocking_keep_alive,
                format!("{}-blocking", self.thread_name),
            )),
            origin: Origin::now(),
            fibers,
            created: CachePadded::new(AtomicU64::new(0)),
            external: CachePadded::new(Counters::default()),
            running_workers: Mutex::new(workers),
            workers_exited: Condvar::new(),
            watch_slots: watch_slots
                .as_ref()
                .map(|slots| (0..workers).map(|_| slots.add()).collect()),
        });
        let mut threads = Vec::with_capacity(workers);
        for (index, local) in locals.into_iter().enumerate() {
            let worker_shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{index}", self.thread_name))
                .spawn(move || worker::run_worker(worker_shared, index, local));
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    // Stop what started; the workers never started count as exited.
                    *shared.running_workers.lock() -= workers - index;
                    let runtime = Runtime::from_parts(Handle { shared }, threads);
                    drop(runtime);
                    return Err(BuildError::Spawn(e));
                }
            }
        }
        let runtime = Runtime::from_parts(Handle { shared }, threads);
        if let (Some(starvation), Some(slots)) = (starvation, watch_slots) {
            // Dropping the runtime on failure stops the workers.
            let watchdog = Watchdog::start(
                starvation,
                slots,
                runtime.handle().clone(),
                lists_fibers,
                format!("{}-watchdog", self.thread_name),
            )
            .map_err(BuildError::Watchdog)?;
            runtime.set_watchdog(watchdog);
        }
        Ok(runtime)
    }
}
