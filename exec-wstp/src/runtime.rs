//! The runtime: its builder, shared state, handle and the `Executor`
//! implementation. See the crate documentation for the design.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Stealer, Worker};
use crossbeam_utils::CachePadded;
use spindle_core::{
    BlockingTask, ConfigError, Executor, Fiber, FiberConfig, FiberDump, FiberHandle, IO, Outcome,
    TimerCallback,
};

use crate::blocking::BlockingPool;
use crate::idle::{Idle, Parker};
use crate::sync::{AtomicBool, Condvar, Mutex, Ordering, fence};
use crate::{metrics, sync, worker};
use spindle_core::timers::TimerHeap;

pub use crate::metrics::{FiberInfo, Metrics};
pub use crate::timer::TimerKey;

/// The default number of global-queue checks: one every 61 local ticks
/// (tokio's default; a prime, so it does not beat with loops of even size).
pub const DEFAULT_GLOBAL_QUEUE_INTERVAL: u32 = 61;
/// The default cap on blocking threads (tokio's default).
pub const DEFAULT_MAX_BLOCKING_THREADS: usize = 512;
/// How long an idle blocking thread waits for work before it exits.
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A configuration the [`Builder`] refused, or a thread it could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `worker_threads(0)`: a pool needs at least one worker.
    ZeroWorkerThreads,
    /// More workers than the scheduler's counters hold (65,535).
    TooManyWorkerThreads(usize),
    /// `global_queue_interval(0)`: the global queue must be checked every
    /// N ticks for some N of at least 1.
    ZeroGlobalQueueInterval,
    /// `max_blocking_threads(0)`: `IO::blocking` needs at least one thread.
    ZeroBlockingThreads,
    /// The fiber configuration read from the environment
    /// ([`FiberConfig::from_env`], when [`Builder::fiber_config`] was not
    /// called) is invalid: for instance `SPINDLE_TRACING` names an unknown
    /// tracing mode (the message names the valid ones).
    Config(ConfigError),
    /// The operating system refused to start a worker thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroWorkerThreads => {
                f.write_str("exec-wstp: worker_threads must be at least 1 (got 0)")
            }
            BuildError::TooManyWorkerThreads(n) => {
                write!(
                    f,
                    "exec-wstp: worker_threads must be at most 65535 (got {n})"
                )
            }
            BuildError::ZeroGlobalQueueInterval => {
                f.write_str("exec-wstp: global_queue_interval must be at least 1 (got 0)")
            }
            BuildError::ZeroBlockingThreads => {
                f.write_str("exec-wstp: max_blocking_threads must be at least 1 (got 0)")
            }
            BuildError::Config(e) => write!(f, "exec-wstp: {e}"),
            BuildError::Spawn(e) => write!(f, "exec-wstp: could not start a worker thread: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(e) => Some(e),
            BuildError::Config(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a runtime could not run or spawn a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The runtime has been shut down.
    ShutDown,
    /// `block_on` was called on one of this runtime's own worker threads
    /// (from inside a fiber's `delay`): waiting there could deadlock the
    /// pool. Use `start`/`join` inside fibers instead.
    BlockOnInsideWorker,
    /// The main fiber can never finish: it was freed while suspended, with
    /// nothing left that could resume it (for instance `IO::never()`).
    Deadlock,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuntimeError::ShutDown => "exec-wstp: the runtime has been shut down",
            RuntimeError::BlockOnInsideWorker => {
                "exec-wstp: block_on called on one of the runtime's worker threads \
                 (inside a fiber); start and join the program instead"
            }
            RuntimeError::Deadlock => {
                "exec-wstp: deadlock: the main fiber is suspended and nothing can resume it"
            }
        })
    }
}

impl std::error::Error for RuntimeError {}

/// Not every thread stopped within the timeout given to
/// [`Runtime::shutdown`]; the ones still running (blocked in user code) were
/// told to stop and detached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownTimedOut {
    /// Threads (workers and blocking threads) still running.
    pub threads_still_running: usize,
}

impl fmt::Display for ShutdownTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exec-wstp: {} thread(s) did not stop within the shutdown timeout",
            self.threads_still_running
        )
    }
}

impl std::error::Error for ShutdownTimedOut {}

/// Configures and builds a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    worker_threads: Option<usize>,
    /// `None`: [`FiberConfig::from_env`] at build time.
    fiber_config: Option<FiberConfig>,
    global_queue_interval: u32,
    max_blocking_threads: usize,
    blocking_keep_alive: Duration,
    thread_name: String,
    track_fibers: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: one worker per available CPU, io-core's default fiber
    /// configuration with the tracing mode of `SPINDLE_TRACING` when it is
    /// set ([`FiberConfig::from_env`], read by [`build`](Builder::build)),
    /// the global queue every 61 ticks, up to 512 blocking threads kept
    /// 10 s when idle, fibers listed for dumps while they trace.
    pub fn new() -> Builder {
        Builder {
            worker_threads: None,
            fiber_config: None,
            global_queue_interval: DEFAULT_GLOBAL_QUEUE_INTERVAL,
            max_blocking_threads: DEFAULT_MAX_BLOCKING_THREADS,
            blocking_keep_alive: DEFAULT_BLOCKING_KEEP_ALIVE,
            thread_name: String::from("spindle-worker"),
            track_fibers: false,
        }
    }

    /// The number of worker threads (default: `std::thread::available_parallelism`).
    pub fn worker_threads(mut self, n: usize) -> Builder {
        self.worker_threads = Some(n);
        self
    }

    /// The run-loop configuration of every fiber (auto-yield budget,
    /// tracing). Without this call, [`build`](Builder::build) uses
    /// [`FiberConfig::from_env`] (the defaults, with `SPINDLE_TRACING`).
    pub fn fiber_config(mut self, config: FiberConfig) -> Builder {
        self.fiber_config = Some(config);
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

    /// Keeps a weak reference to every fiber so that
    /// [`Runtime::live_fibers`] and [`Runtime::fiber_dump`] can list them,
    /// also when fibers do not trace. Fibers are listed anyway while they
    /// trace ([`spindle_core::executor::lists_fibers`]: io-core's `tracing`
    /// feature and a tracing mode other than `none`); with tracing off and
    /// this option off (the default) nothing is kept per fiber. Listing
    /// costs one uncontended per-worker lock per fiber started.
    pub fn track_fibers(mut self, on: bool) -> Builder {
        self.track_fibers = on;
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
        if self.max_blocking_threads == 0 {
            return Err(BuildError::ZeroBlockingThreads);
        }
        let fiber_config = match self.fiber_config {
            Some(config) => config,
            None => FiberConfig::from_env().map_err(BuildError::Config)?,
        };
        let traces = spindle_core::executor::adopt_config(&fiber_config);
        let track_fibers = self.track_fibers || traces;
        let locals: Vec<Worker<Fiber<Handle>>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        let remotes = locals
            .iter()
            .map(|local| Remote {
                stealer: local.stealer(),
                parker: Parker::new(),
                timers: Mutex::new(TimerHeap::new()),
                has_timers: AtomicBool::new(false),
                counters: CachePadded::new(Counters::default()),
                fibers: Mutex::new(spindle_core::WeakFibers::new()),
            })
            .collect();
        let shared = std::sync::Arc::new(Shared {
            injector: Injector::new(),
            remotes,
            idle: Idle::new(workers),
            config: fiber_config,
            global_queue_interval: self.global_queue_interval,
            shutdown: AtomicBool::new(false),
            blocking: std::sync::Arc::new(BlockingPool::new(
                self.max_blocking_threads,
                self.blocking_keep_alive,
                format!("{}-blocking", self.thread_name),
            )),
            origin: Instant::now(),
            track_fibers,
            external: CachePadded::new(Counters::default()),
            external_fibers: Mutex::new(spindle_core::WeakFibers::new()),
            running_workers: Mutex::new(workers),
            workers_exited: Condvar::new(),
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
                    let runtime = Runtime {
                        handle: Handle { shared },
                        threads: std::sync::Mutex::new(threads),
                    };
                    drop(runtime);
                    return Err(BuildError::Spawn(e));
                }
            }
        }
        Ok(Runtime {
            handle: Handle { shared },
            threads: std::sync::Mutex::new(threads),
        })
    }
}

/// Fiber counters of one worker (written by that worker only) or of the
/// threads outside the pool (written with atomic adds).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) created: AtomicU64,
    pub(crate) ended: AtomicU64,
}

/// What other threads may touch of a worker.
pub(crate) struct Remote {
    pub(crate) stealer: Stealer<Fiber<Handle>>,
    pub(crate) parker: Parker,
    pub(crate) timers: Mutex<TimerHeap>,
    /// A hint that the shard may hold timers (skips the lock when idle).
    pub(crate) has_timers: AtomicBool,
    pub(crate) counters: CachePadded<Counters>,
    /// Weak references to the fibers started here (with `track_fibers`).
    pub(crate) fibers: Mutex<spindle_core::WeakFibers>,
}

/// The state shared by the workers and every [`Handle`].
pub(crate) struct Shared {
    pub(crate) injector: Injector<Fiber<Handle>>,
    pub(crate) remotes: Box<[Remote]>,
    pub(crate) idle: Idle,
    pub(crate) config: FiberConfig,
    pub(crate) global_queue_interval: u32,
    pub(crate) shutdown: AtomicBool,
    pub(crate) blocking: std::sync::Arc<BlockingPool>,
    pub(crate) origin: Instant,
    /// Whether fibers are listed (`Builder::track_fibers`, or they trace).
    pub(crate) track_fibers: bool,
    pub(crate) external: CachePadded<Counters>,
    pub(crate) external_fibers: Mutex<spindle_core::WeakFibers>,
    pub(crate) running_workers: Mutex<usize>,
    pub(crate) workers_exited: Condvar,
}

impl Shared {
    #[inline]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Wakes a sleeping worker if nobody searches (idle.rs, rule 2). The
    /// caller made work visible just before.
    #[inline]
    pub(crate) fn notify_one(&self) {
        if let Some(worker) = self.idle.worker_to_notify() {
            self.remotes[worker].parker.unpark();
        }
    }

    /// After a push: the fence of the module doc of `idle`, then rule 2.
    #[inline]
    pub(crate) fn notify_after_push(&self) {
        fence(Ordering::SeqCst);
        self.notify_one();
    }

    /// Work another worker could take: the global queue or a local queue.
    pub(crate) fn has_visible_work(&self) -> bool {
        !self.injector.is_empty() || self.remotes.iter().any(|r| !r.stealer.is_empty())
    }

    pub(crate) fn inject(&self, fiber: Fiber<Handle>) {
        self.injector.push(fiber);
        self.notify_after_push();
    }

    pub(crate) fn worker_exited(&self) {
        let mut running = self.running_workers.lock();
        *running -= 1;
        if *running == 0 {
            self.workers_exited.notify_all();
        }
    }

    /// Sets the shutdown flag and wakes every thread.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        for remote in self.remotes.iter() {
            remote.parker.unpark();
        }
    }

    /// Drops every fiber still reachable from the shared state (queued
    /// globally, or held by a timer): they hold handles to this state, so
    /// this also breaks the reference cycles.
    pub(crate) fn drop_pending(&self) {
        loop {
            match self.injector.steal() {
                crossbeam_deque::Steal::Success(fiber) => drop(fiber),
                crossbeam_deque::Steal::Retry => continue,
                crossbeam_deque::Steal::Empty => break,
            }
        }
        for remote in self.remotes.iter() {
            let callbacks = remote.timers.lock().drain();
            drop(callbacks);
            drop(std::mem::take(&mut *remote.fibers.lock()));
        }
        drop(std::mem::take(&mut *self.external_fibers.lock()));
    }

    pub(crate) fn live_fibers_count(&self) -> u64 {
        let mut created = self.external.created.load(Ordering::Relaxed);
        let mut ended = self.external.ended.load(Ordering::Relaxed);
        for remote in self.remotes.iter() {
            created += remote.counters.created.load(Ordering::Relaxed);
            ended += remote.counters.ended.load(Ordering::Relaxed);
        }
        created.saturating_sub(ended)
    }
}

/// The executor handle fibers hold: cheap to clone, usable from any
/// thread; implements [`Executor`].
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: std::sync::Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_wstp::Handle")
            .field("workers", &self.shared.remotes.len())
            .finish_non_exhaustive()
    }
}

/// Adds one to a counter that only this thread writes.
#[inline(always)]
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

impl Executor for Handle {
    type TimerKey = TimerKey;

    #[inline]
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => ctx.schedule_next(fiber),
            None => shared.inject(fiber),
        })
    }

    #[inline]
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        worker::with_current(shared, |ctx| match ctx {
            // Behind the local work, without waking anyone: if the queue is
            // empty this worker runs the fiber again at once.
            Some(ctx) => ctx.local.push(fiber),
            None => shared.inject(fiber),
        })
    }

    fn monotonic(&self) -> Duration {
        self.shared.origin.elapsed()
    }

    fn real_time(&self) -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> TimerKey {
        let shared = &*self.shared;
        let deadline_ns = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
        let (shard, on_owner) = worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => (ctx.index, true),
            None => (0, false),
        });
        let remote = &shared.remotes[shard];
        let key = TimerKey {
            shard: shard as u32,
            id: remote.timers.lock().insert(deadline_ns, callback),
        };
        remote.has_timers.store(true, Ordering::Relaxed);
        if !on_owner {
            // Set from outside the pool: the owner may sleep past this
            // deadline; wake it so that it recomputes its timeout.
            remote.parker.unpark();
        }
        if shared.is_shutdown() {
            drop(remote.timers.lock().drain());
        }
        key
    }

    fn cancel_timer(&self, key: TimerKey) {
        if let Some(remote) = self.shared.remotes.get(key.shard as usize) {
            let callback = remote.timers.lock().cancel(key.id);
            drop(callback);
        }
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    fn spawn_blocking(&self, task: BlockingTask) {
        BlockingPool::spawn(&self.shared.blocking, task);
    }

    #[inline]
    fn fiber_created(&self, fiber: &Fiber<Self>) {
        let shared = &*self.shared;
        worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => {
                let remote = &shared.remotes[ctx.index];
                bump(&remote.counters.created);
                if shared.track_fibers {
                    remote.fibers.lock().push(fiber.downgrade());
                }
            }
            None => {
                shared.external.created.fetch_add(1, Ordering::Relaxed);
                if shared.track_fibers {
                    shared.external_fibers.lock().push(fiber.downgrade());
                }
            }
        })
    }

    /// Every live fiber (while fibers are listed: see
    /// [`Builder::track_fibers`]) and the pool's `workers`, `local queues`
    /// (summed over the workers), `global queue`, `timers`,
    /// `blocking threads` and `parked workers`.
    fn fiber_dump(&self) -> FiberDump {
        metrics::fiber_dump(&self.shared)
    }

    #[inline]
    fn fiber_ended(&self) {
        let shared = &*self.shared;
        worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => bump(&shared.remotes[ctx.index].counters.ended),
            None => {
                shared.external.ended.fetch_add(1, Ordering::Relaxed);
            }
        })
    }
}

impl Handle {
    /// Starts `io` as a new fiber; join or cancel it through the handle
    /// (from a fiber, or from any thread with [`Handle::block_on`]).
    pub fn spawn<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<FiberHandle<A, E>, RuntimeError> {
        if self.shared.is_shutdown() {
            return Err(RuntimeError::ShutDown);
        }
        Ok(FiberHandle::spawn(io, self))
    }

    /// Runs `io` as a new fiber and blocks the calling thread until it
    /// ends. Not on this runtime's worker threads (see
    /// [`RuntimeError::BlockOnInsideWorker`]).
    pub fn block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RuntimeError> {
        let shared = &*self.shared;
        if worker::with_current(shared, |ctx| ctx.is_some()) {
            return Err(RuntimeError::BlockOnInsideWorker);
        }
        if shared.is_shutdown() {
            return Err(RuntimeError::ShutDown);
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let fiber = Fiber::new(io, self.clone(), move |outcome| {
            let _ = sender.send(outcome);
        });
        self.schedule_fiber(fiber);
        // The sender is dropped unsent only if the fiber is freed without
        // completing: by a shutdown, or because nothing can resume it.
        receiver.recv().map_err(|_| {
            if shared.is_shutdown() {
                RuntimeError::ShutDown
            } else {
                RuntimeError::Deadlock
            }
        })
    }

    /// A snapshot of the scheduler's state.
    pub fn metrics(&self) -> Metrics {
        metrics::snapshot(&self.shared)
    }

    /// The live fibers (while fibers are listed: they trace, or
    /// [`Builder::track_fibers`]; empty otherwise): id and status of every
    /// fiber started and not finished.
    pub fn live_fibers(&self) -> Vec<FiberInfo> {
        metrics::live_fibers(&self.shared)
    }

    /// A fiber dump: every live fiber with its state and trace, and the
    /// pool's state. See [`Executor::fiber_dump`]; the app entry point
    /// prints it on SIGUSR1.
    pub fn fiber_dump(&self) -> FiberDump {
        Executor::fiber_dump(self)
    }

    /// The number of worker threads.
    pub fn worker_threads(&self) -> usize {
        self.shared.remotes.len()
    }
}

/// A work-stealing runtime: the worker threads, their queues, timers and
/// blocking pool. Dropping it shuts it down and waits for every thread.
pub struct Runtime {
    handle: Handle,
    threads: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_wstp::Runtime")
            .field("workers", &self.handle.shared.remotes.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime with the default configuration (one worker per CPU).
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    /// A builder to configure the runtime.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A handle usable from any thread (and cheap to clone).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `io` on the pool and blocks the calling thread until it ends.
    /// See [`Handle::block_on`].
    pub fn block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RuntimeError> {
        self.handle.block_on(io)
    }

    /// Starts `io` as a new fiber. See [`Handle::spawn`].
    pub fn spawn<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<FiberHandle<A, E>, RuntimeError> {
        self.handle.spawn(io)
    }

    /// A snapshot of the scheduler's state. See [`Metrics`].
    pub fn metrics(&self) -> Metrics {
        self.handle.metrics()
    }

    /// The live fibers. See [`Handle::live_fibers`].
    pub fn live_fibers(&self) -> Vec<FiberInfo> {
        self.handle.live_fibers()
    }

    /// A fiber dump. See [`Handle::fiber_dump`].
    pub fn fiber_dump(&self) -> FiberDump {
        self.handle.fiber_dump()
    }

    /// Stops the runtime: workers finish the fiber they are running and
    /// exit, queued and sleeping fibers are dropped (their finalizers do not
    /// run: cancel fibers first for that), blocking threads exit after their
    /// current call. Waits at most `timeout` for the threads; those still
    /// running then (blocked in user code) are detached.
    pub fn shutdown(self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        self.stop(Some(timeout))
    }

    fn stop(&self, timeout: Option<Duration>) -> Result<(), ShutdownTimedOut> {
        let shared = &*self.handle.shared;
        let deadline = timeout.map(|t| Instant::now() + t);
        shared.begin_shutdown();
        let blocking_threads = shared.blocking.shutdown();
        let on_own_worker = worker::with_current(shared, |ctx| ctx.is_some());
        // Workers still in their loop when the deadline passed (then also
        // blocking threads that did not stop in time).
        let mut still_running = 0;
        {
            let mut running = shared.running_workers.lock();
            while *running > usize::from(on_own_worker) {
                match deadline {
                    None => running = sync::wait(&shared.workers_exited, running),
                    Some(deadline) => {
                        let now = Instant::now();
                        if now >= deadline {
                            still_running += *running - usize::from(on_own_worker);
                            break;
                        }
                        running =
                            sync::wait_timeout(&shared.workers_exited, running, deadline - now);
                    }
                }
            }
        }
        let workers = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        let current = std::thread::current().id();
        for thread in workers {
            if thread.thread().id() == current {
                // `stop` runs on one of this runtime's workers (a fiber
                // dropped the runtime): it cannot join itself.
                continue;
            }
            // A worker that counted itself out of `running_workers` has left
            // its loop and has only the end of its thread to run: join it, so
            // that no worker thread outlives `stop` (joining only the ones
            // already finished left a worker that was between its count and
            // its exit running after `drop` returned). Only when some
            // workers are still in their loop at the deadline (blocked in
            // user code) are the unfinished ones detached.
            if still_running == 0 || thread.is_finished() {
                let _ = thread.join();
            }
        }
        for thread in blocking_threads {
            let can_join = match deadline {
                None => !on_own_worker,
                Some(deadline) => {
                    while !thread.is_finished() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    thread.is_finished()
                }
            };
            if can_join {
                let _ = thread.join();
            } else {
                still_running += 1;
            }
        }
        shared.drop_pending();
        if still_running == 0 {
            Ok(())
        } else {
            Err(ShutdownTimedOut {
                threads_still_running: still_running,
            })
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.stop(None);
    }
}

#[cfg(test)]
mod tests {
    //! Small runs of the whole pool, also under Miri (the `unsafe` of the
    //! worker context, the queues, timers, the blocking pool, shutdown).

    use super::*;
    use std::sync::Arc as StdArc;
    use std::sync::atomic::AtomicUsize;

    fn small() -> Runtime {
        Runtime::builder().worker_threads(2).build().unwrap()
    }

    #[test]
    fn fibers_started_on_workers_run_and_are_joined() {
        let rt = small();
        let n = if cfg!(miri) { 8 } else { 1000 };
        let program = IO::<u64, ()>::par_traverse((0..n).collect::<Vec<u64>>(), |i| {
            IO::cede().product_r(IO::delay(move || i))
        })
        .map(|v| v.iter().sum::<u64>());
        assert_eq!(
            rt.block_on(program),
            Ok(Outcome::Succeeded(n * (n - 1) / 2))
        );
        assert_eq!(rt.metrics().live_fibers, 0);
    }

    #[test]
    fn a_sleep_a_blocking_call_and_a_spawn_from_outside_complete() {
        let rt = small();
        let slept: IO<u32, ()> = IO::sleep(Duration::from_millis(1)).map_to(1);
        assert_eq!(rt.block_on(slept), Ok(Outcome::Succeeded(1)));
        let blocked: IO<u32, ()> = IO::blocking(|| 2);
        assert_eq!(rt.block_on(blocked), Ok(Outcome::Succeeded(2)));
        let spawned = rt.spawn(IO::<u32, ()>::pure(3)).unwrap();
        assert_eq!(
            rt.block_on(spawned.join::<()>()),
            Ok(Outcome::Succeeded(Outcome::Succeeded(3)))
        );
    }

    #[test]
    fn shutdown_drops_sleeping_fibers_and_their_pending_work() {
        let rt = small();
        let dropped = StdArc::new(AtomicUsize::new(0));
        struct CountDrop(StdArc<AtomicUsize>);
        impl Drop for CountDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        for _ in 0..3 {
            let guard = CountDrop(dropped.clone());
            let sleeper: IO<(), ()> =
                IO::sleep(Duration::from_secs(3600)).map(move |()| drop(guard));
            rt.spawn(sleeper).unwrap();
        }
        // Each sleeper is held by its worker's timer (or still queued).
        assert_eq!(rt.shutdown(Duration::from_secs(10)), Ok(()));
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn block_on_after_the_last_handle_outlives_the_runtime_reports_shut_down() {
        let rt = small();
        let handle = rt.handle().clone();
        drop(rt);
        assert_eq!(
            handle.block_on(IO::<(), ()>::unit()),
            Err(RuntimeError::ShutDown)
        );
        assert!(matches!(
            handle.spawn(IO::<(), ()>::unit()),
            Err(RuntimeError::ShutDown)
        ));
    }
}
