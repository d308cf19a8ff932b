//! The event loop: its builder, shared state, handle, the `Executor`
//! implementation and the turn. See the crate documentation for the design.
//!
//! # Who may touch what
//!
//! * The microtask and macrotask queues (`Local`) belong to the thread that
//!   runs the loop. While [`EventLoop::block_on`] runs, they live in a
//!   thread-local (`CURRENT`) together with the loop's handle; between runs
//!   they are kept in the [`EventLoop`] value. `schedule_fiber` on the loop
//!   thread pushes there without a lock. The thread-local is borrowed only
//!   for a push or a pop, never while a fiber runs or user data is dropped,
//!   so no borrow is ever re-entered.
//! * Everything else is in `Shared`, behind mutexes that the loop thread
//!   takes uncontended: the *remote* queue (fibers scheduled from other
//!   threads; the pusher then wakes the loop with `Poller::notify`), the
//!   timers, the reactor's table of I/O waiters and the bag of live fibers.
//!   No callback is fired and no fiber is dropped while one of these locks
//!   is held: either may free a fiber whose program owns a socket whose
//!   drop takes the reactor's lock.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use polling::Events;
use spindle_core::{
    BlockingTask, ConfigError, Executor, Fiber, FiberConfig, FiberDump, FiberHandle, IO, Outcome,
    TimerCallback,
};

use crate::TimerKey;
use crate::lock;
use crate::reactor::{Reactor, Wake};
use crate::stats::{FiberInfo, Stats};
use spindle_core::WeakFibers;
use spindle_core::timers::TimerHeap;

/// The default bound of a microtask batch: 64 fibers (Cats Effect's
/// `BatchingMacrotaskExecutor` default).
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// Capacity of the poller's event buffer: sockets reported per `wait`.
const EVENTS_CAPACITY: usize = 1024;

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

/// A configuration the [`Builder`] refused, or a poller it could not make.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `batch_size(0)`: a microtask batch must be allowed to run at least
    /// one fiber, or fibers started or resumed would never run.
    ZeroBatchSize,
    /// The operating system refused to make the I/O poller (for instance:
    /// too many open files).
    Poller(io::Error),
    /// The fiber configuration read from the environment
    /// ([`FiberConfig::from_env`], when [`Builder::config`] was not called)
    /// is invalid: for instance `SPINDLE_TRACING` names an unknown tracing
    /// mode (the message names the valid ones).
    Config(ConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroBatchSize => f.write_str(
                "exec-batching: batch_size must be at least 1 (got 0): \
                 a microtask batch of 0 fibers would never run a started or resumed fiber",
            ),
            BuildError::Poller(e) => write!(f, "exec-batching: could not make the I/O poller: {e}"),
            BuildError::Config(e) => write!(f, "exec-batching: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Poller(e) => Some(e),
            BuildError::Config(e) => Some(e),
            BuildError::ZeroBatchSize => None,
        }
    }
}

/// The main fiber can never finish: it was freed while suspended, with
/// nothing left that could resume it (for instance `IO::never()`, or an
/// async callback dropped without being called), and no fiber, timer, I/O
/// interest or wake-up from another thread remains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlock;

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "exec-batching: deadlock: the main fiber is suspended and nothing can resume it \
             (no runnable fiber, no timer, no I/O interest, and every callback that could wake it \
             was dropped)",
        )
    }
}

impl std::error::Error for Deadlock {}

/// Configures and builds an [`EventLoop`].
#[derive(Debug, Clone)]
pub struct Builder {
    batch_size: usize,
    mode: Mode,
    /// `None`: [`FiberConfig::from_env`] at build time.
    config: Option<FiberConfig>,
    track_fibers: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: batches of [`DEFAULT_BATCH_SIZE`] fibers,
    /// [`Mode::Batching`], io-core's default fiber configuration with the
    /// tracing mode of `SPINDLE_TRACING` when it is set
    /// ([`FiberConfig::from_env`], read by [`build`](Builder::build)),
    /// fibers listed for dumps while they trace.
    pub fn new() -> Builder {
        Builder {
            batch_size: DEFAULT_BATCH_SIZE,
            mode: Mode::Batching,
            config: None,
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
    /// tracing). Without this call, [`build`](Builder::build) uses
    /// [`FiberConfig::from_env`] (the defaults, with `SPINDLE_TRACING`).
    pub fn config(mut self, config: FiberConfig) -> Builder {
        self.config = Some(config);
        self
    }

    /// Keeps a weak reference to every fiber so that
    /// [`EventLoop::live_fibers`] and [`EventLoop::fiber_dump`] can list
    /// them, also when fibers do not trace. Fibers are listed anyway while
    /// they trace ([`spindle_core::executor::lists_fibers`]: io-core's `tracing`
    /// feature and a tracing mode other than `none`); with tracing off and
    /// this option off (the default) nothing is kept per fiber. Listing
    /// costs a lock and a push per fiber started (the counts in [`Stats`]
    /// are always kept).
    pub fn track_fibers(mut self, on: bool) -> Builder {
        self.track_fibers = on;
        self
    }

    /// Checks the configuration and makes the loop (and its poller).
    pub fn build(self) -> Result<EventLoop, BuildError> {
        if self.batch_size == 0 {
            return Err(BuildError::ZeroBatchSize);
        }
        let config = match self.config {
            Some(config) => config,
            None => FiberConfig::from_env().map_err(BuildError::Config)?,
        };
        let traces = spindle_core::executor::adopt_config(&config);
        let track_fibers = self.track_fibers || traces;
        let reactor = Reactor::new().map_err(BuildError::Poller)?;
        let shared = Arc::new(Shared {
            config,
            batch_size: self.batch_size,
            mode: self.mode,
            track_fibers,
            origin: Instant::now(),
            reactor,
            timers: Mutex::new(TimerHeap::new()),
            remote: Mutex::new(VecDeque::new()),
            remote_pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            fibers: Mutex::new(WeakFibers::new()),
            created: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            turns: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            microtasks_run: AtomicU64::new(0),
            macrotasks_run: AtomicU64::new(0),
            published_microtasks: AtomicUsize::new(0),
            published_macrotasks: AtomicUsize::new(0),
        });
        let capacity = NonZeroUsize::new(EVENTS_CAPACITY).unwrap_or(NonZeroUsize::MIN);
        Ok(EventLoop {
            handle: Handle { shared },
            local: Local::default(),
            scratch: Scratch {
                events: Events::with_capacity(capacity),
                due: Vec::new(),
                ready: Vec::new(),
            },
        })
    }
}

/// The loop-thread queues.
#[derive(Default)]
struct Local {
    /// Fibers started or resumed: the microtask batch.
    microtasks: VecDeque<Fiber<Handle>>,
    /// Fibers that ceded or yielded (all fibers in [`Mode::Macrotask`]).
    macrotasks: VecDeque<Fiber<Handle>>,
}

impl Local {
    /// The lengths of the microtask and macrotask queues.
    fn lengths(&mut self) -> (usize, usize) {
        (self.microtasks.len(), self.macrotasks.len())
    }
}

/// The loop running on this thread (at most one at a time; a loop run from
/// inside a fiber of another saves and restores the outer one).
struct Current {
    handle: Handle,
    local: Local,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

/// Runs `f` on the queues of `shared`'s loop if this thread runs it now;
/// `None` otherwise.
fn with_local<R>(shared: &Shared, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    CURRENT
        .try_with(|cell| {
            let mut current = cell.try_borrow_mut().ok()?;
            match current.as_mut() {
                Some(current) if std::ptr::eq(&*current.handle.shared, shared) => {
                    Some(f(&mut current.local))
                }
                _ => None,
            }
        })
        .ok()
        .flatten()
}

/// Puts a loop's queues into [`CURRENT`] for the duration of a run, and
/// back into the [`EventLoop`] afterwards (also when unwinding).
struct Enter<'a> {
    home: &'a mut Local,
    previous: Option<Current>,
}

impl<'a> Enter<'a> {
    fn new(handle: &Handle, home: &'a mut Local) -> Enter<'a> {
        let local = std::mem::take(home);
        let current = Current {
            handle: handle.clone(),
            local,
        };
        // Nothing borrows CURRENT here: borrows last for one push or pop,
        // and `block_on` is not called from inside one.
        let previous = CURRENT.with(|cell| cell.replace(Some(current)));
        Enter { home, previous }
    }
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        let previous = self.previous.take();
        if let Ok(Some(current)) = CURRENT.try_with(|cell| cell.replace(previous)) {
            *self.home = current.local;
        }
    }
}

/// The state shared by the loop and every [`Handle`].
pub(crate) struct Shared {
    config: FiberConfig,
    batch_size: usize,
    mode: Mode,
    /// Whether fibers are listed (`Builder::track_fibers`, or they trace).
    track_fibers: bool,
    origin: Instant,
    pub(crate) reactor: Reactor,
    timers: Mutex<TimerHeap>,
    /// Fibers scheduled from other threads.
    remote: Mutex<VecDeque<Fiber<Handle>>>,
    /// A hint that `remote` is not empty (the loop skips the lock otherwise).
    remote_pending: AtomicBool,
    /// The [`EventLoop`] was dropped: fibers scheduled now are dropped.
    closed: AtomicBool,
    fibers: Mutex<WeakFibers>,
    created: AtomicU64,
    ended: AtomicU64,
    turns: AtomicU64,
    batches: AtomicU64,
    microtasks_run: AtomicU64,
    macrotasks_run: AtomicU64,
    /// The queue lengths at the end of the last turn, for dumps taken off
    /// the loop thread (written by the loop thread alone).
    published_microtasks: AtomicUsize,
    published_macrotasks: AtomicUsize,
}

/// Adds `n` to a counter that only the loop thread writes.
#[inline(always)]
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

impl Shared {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Queues a fiber from a thread that does not run the loop now, and
    /// wakes the loop.
    fn push_remote(&self, fiber: Fiber<Handle>) {
        let refused = {
            let mut remote = lock(&self.remote);
            if self.closed.load(Ordering::Relaxed) {
                Some(fiber)
            } else {
                remote.push_back(fiber);
                self.remote_pending.store(true, Ordering::Release);
                None
            }
        };
        match refused {
            // The loop is gone: the fiber is freed (outside the lock).
            Some(fiber) => drop(fiber),
            None => self.wake_loop(),
        }
    }

    /// Ends the loop's `Poller::wait`, or makes the next one return at once.
    fn wake_loop(&self) {
        // An error means the notification descriptor is broken; the loop
        // then still sees the work at its next turn.
        let _ = self.reactor.poller.notify();
    }

    /// Moves fibers scheduled from other threads into the loop's queues.
    fn drain_remote(&self) {
        if !self.remote_pending.load(Ordering::Acquire) {
            return;
        }
        let mode = self.mode;
        let mut remote = lock(&self.remote);
        // Moves fibers between queues only: nothing is dropped while the
        // lock and the thread-local are held.
        let moved = with_local(self, |local| match mode {
            Mode::Batching => local.microtasks.extend(remote.drain(..)),
            Mode::Macrotask => local.macrotasks.extend(remote.drain(..)),
        });
        if moved.is_some() {
            self.remote_pending.store(false, Ordering::Relaxed);
        }
    }

    fn fire_due_timers(&self, due: &mut Vec<TimerCallback>) {
        {
            let mut timers = lock(&self.timers);
            if timers.is_empty() {
                return;
            }
            timers.take_due(self.now_ns(), due);
        }
        for callback in due.drain(..) {
            callback.fire();
        }
    }

    /// Waits at most `timeout` (`None`: until woken) for I/O readiness and
    /// resumes the fibers waiting for the sockets reported.
    fn poll_io(&self, scratch: &mut Scratch, timeout: Option<Duration>) {
        scratch.events.clear();
        if self
            .reactor
            .poller
            .wait(&mut scratch.events, timeout)
            .is_err()
        {
            // `wait` retries interrupted calls itself; any other error is a
            // broken poller. Sleep instead of spinning, so timers and remote
            // wake-ups still make progress (checked at the next turn).
            let nap = Duration::from_millis(1);
            std::thread::sleep(timeout.map_or(nap, |t| t.min(nap)));
            return;
        }
        self.reactor.take_ready(&scratch.events, &mut scratch.ready);
        for wake in scratch.ready.drain(..) {
            wake.succeed(());
        }
    }

    /// One turn of the loop. See the crate documentation.
    fn turn(
        &self,
        scratch: &mut Scratch,
        main_abandoned: &dyn Fn() -> bool,
        fail_on_deadlock: bool,
    ) -> Result<(), Deadlock> {
        add(&self.turns, 1);

        // 1. Timers.
        self.fire_due_timers(&mut scratch.due);

        // 2. I/O readiness and wake-ups from other threads.
        let queued = with_local(self, |local| {
            !local.microtasks.is_empty() || !local.macrotasks.is_empty()
        })
        .unwrap_or(false)
            || self.remote_pending.load(Ordering::Acquire);
        if queued {
            // Work is waiting: only look (no wait), and only if a fiber
            // waits for I/O at all.
            if self.reactor.waiters() > 0 {
                self.poll_io(scratch, Some(Duration::ZERO));
            }
        } else {
            let next_deadline = lock(&self.timers).next_deadline();
            if fail_on_deadlock
                && next_deadline.is_none()
                && self.reactor.waiters() == 0
                && !self.remote_pending.load(Ordering::Acquire)
                && main_abandoned()
            {
                return Err(Deadlock);
            }
            let timeout = next_deadline
                .map(|deadline| Duration::from_nanos(deadline.saturating_sub(self.now_ns())));
            // Returns on readiness, at the deadline, or when another thread
            // queues a fiber, sets a timer or abandons the main fiber.
            self.poll_io(scratch, timeout);
        }
        self.drain_remote();

        // 3. The macrotasks queued before this step (a fiber that cedes
        //    now runs next turn, after timers and I/O).
        let macrotasks = with_local(self, |local| local.macrotasks.len()).unwrap_or(0);
        let mut ran = 0;
        while ran < macrotasks {
            let Some(fiber) = with_local(self, |local| local.macrotasks.pop_front()).flatten()
            else {
                break;
            };
            fiber.run();
            ran += 1;
        }
        add(&self.macrotasks_run, ran as u64);

        // 4. One microtask batch: at most `batch_size` fibers, counting
        //    those started or resumed while it runs.
        let mut ran = 0;
        while ran < self.batch_size {
            let Some(fiber) = with_local(self, |local| local.microtasks.pop_front()).flatten()
            else {
                break;
            };
            fiber.run();
            ran += 1;
        }
        if ran > 0 {
            add(&self.batches, 1);
            add(&self.microtasks_run, ran as u64);
        }
        if let Some((micro, macro_)) = with_local(self, Local::lengths) {
            self.published_microtasks.store(micro, Ordering::Relaxed);
            self.published_macrotasks.store(macro_, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Every listed live fiber and the loop's state; `local`: the queues
    /// if the caller can read them (on the loop thread, or between runs).
    fn fiber_dump(&self, local: Option<(usize, usize)>) -> FiberDump {
        let fibers = if self.track_fibers {
            lock(&self.fibers).infos().collect()
        } else {
            Vec::new()
        };
        let (microtasks, macrotasks) = local.unwrap_or_else(|| {
            (
                self.published_microtasks.load(Ordering::Relaxed),
                self.published_macrotasks.load(Ordering::Relaxed),
            )
        });
        let remote = lock(&self.remote).len();
        FiberDump {
            fibers,
            executor: vec![
                ("microtask queue", microtasks as u64),
                ("macrotask queue", macrotasks as u64),
                ("remote queue", remote as u64),
                ("timers", lock(&self.timers).len() as u64),
                ("io waiters", self.reactor.waiters() as u64),
            ],
        }
    }

    fn stats(&self) -> Stats {
        let created = self.created.load(Ordering::Relaxed);
        let ended = self.ended.load(Ordering::Relaxed);
        Stats {
            turns: self.turns.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            microtasks_run: self.microtasks_run.load(Ordering::Relaxed),
            macrotasks_run: self.macrotasks_run.load(Ordering::Relaxed),
            live_fibers: created.saturating_sub(ended),
            timers: lock(&self.timers).len(),
            io_sources: self.reactor.sources(),
            io_waiters: self.reactor.waiters(),
        }
    }
}

/// Buffers the loop reuses from turn to turn.
struct Scratch {
    events: Events,
    due: Vec<TimerCallback>,
    ready: Vec<Wake>,
}

/// The executor handle fibers hold: cheap to clone, `Send + Sync`, usable
/// from any thread; implements [`Executor`].
///
/// Get one with [`EventLoop::handle`], or inside a running fiber with
/// [`Handle::current`].
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_batching::Handle")
            .field("mode", &self.shared.mode)
            .field("batch_size", &self.shared.batch_size)
            .finish_non_exhaustive()
    }
}

impl Executor for Handle {
    type TimerKey = TimerKey;

    #[inline]
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        let mut fiber = Some(fiber);
        let mode = self.shared.mode;
        with_local(&self.shared, |local| {
            if let Some(fiber) = fiber.take() {
                match mode {
                    Mode::Batching => local.microtasks.push_back(fiber),
                    Mode::Macrotask => local.macrotasks.push_back(fiber),
                }
            }
        });
        if let Some(fiber) = fiber {
            self.shared.push_remote(fiber);
        }
    }

    #[inline]
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        let mut fiber = Some(fiber);
        with_local(&self.shared, |local| {
            if let Some(fiber) = fiber.take() {
                local.macrotasks.push_back(fiber);
            }
        });
        if let Some(fiber) = fiber {
            self.shared.push_remote(fiber);
        }
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
        let (key, refused) = {
            let mut timers = lock(&shared.timers);
            let key = timers.insert(deadline_ns, callback);
            // Dropped with the loop: take back what was just set (and
            // anything else), to drop outside the lock.
            let refused = if shared.closed.load(Ordering::Relaxed) {
                timers.drain()
            } else {
                Vec::new()
            };
            (key, refused)
        };
        drop(refused);
        if with_local(shared, |_| ()).is_none() {
            // Set from outside the loop: it may be waiting past this
            // deadline; wake it so that it computes its timeout again.
            shared.wake_loop();
        }
        key
    }

    fn cancel_timer(&self, key: TimerKey) {
        let callback = lock(&self.shared.timers).cancel(key);
        drop(callback);
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    /// Runs the blocking work on a thread of its own, so that the loop
    /// keeps serving timers and I/O; the fiber resumes on the loop through
    /// the remote queue. There is no pool: a thread costs tens of
    /// microseconds to start, and an event loop should rarely block. If the
    /// thread cannot be started, the work runs inline (it still completes).
    fn spawn_blocking(&self, task: BlockingTask) {
        let cell = Arc::new(Mutex::new(Some(task)));
        let on_thread = cell.clone();
        let spawned = std::thread::Builder::new()
            .name(String::from("exec-batching-blocking"))
            .spawn(move || {
                let task = lock(&on_thread).take();
                if let Some(task) = task {
                    task.run();
                }
            });
        if spawned.is_err() {
            let task = lock(&cell).take();
            if let Some(task) = task {
                task.run();
            }
        }
    }

    #[inline]
    fn fiber_created(&self, fiber: &Fiber<Self>) {
        let shared = &*self.shared;
        shared.created.fetch_add(1, Ordering::Relaxed);
        if shared.track_fibers {
            lock(&shared.fibers).push(fiber.downgrade());
        }
    }

    #[inline]
    fn fiber_ended(&self) {
        self.shared.ended.fetch_add(1, Ordering::Relaxed);
    }

    /// Every live fiber (while fibers are listed: see
    /// [`Builder::track_fibers`]) and the loop's `microtask queue`,
    /// `macrotask queue`, `remote queue`, `timers` and `io waiters`. On
    /// the loop thread the queue lengths are exact; elsewhere they are
    /// those at the end of the last turn.
    fn fiber_dump(&self) -> FiberDump {
        let shared = &*self.shared;
        shared.fiber_dump(with_local(shared, Local::lengths))
    }
}

impl Handle {
    /// The handle of the loop running on this thread now (inside a fiber,
    /// or anything a fiber calls); `None` outside an exec-batching loop.
    pub fn current() -> Option<Handle> {
        CURRENT
            .try_with(|cell| {
                let current = cell.try_borrow().ok()?;
                current.as_ref().map(|current| current.handle.clone())
            })
            .ok()
            .flatten()
    }

    /// Whether this thread runs this handle's loop now.
    pub(crate) fn is_current(&self) -> bool {
        with_local(&self.shared, |_| ()).is_some()
    }

    /// Starts `io` as a new fiber; join or cancel it through the handle.
    /// From outside the loop the fiber waits in the remote queue until the
    /// loop runs (the next [`EventLoop::block_on`]). If the loop has been
    /// dropped, the fiber is dropped at once (a join then never completes).
    pub fn spawn<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> FiberHandle<A, E> {
        FiberHandle::spawn(io, self)
    }

    /// A snapshot of the loop's counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// A fiber dump: every live fiber with its state and trace, and the
    /// loop's state. See [`Executor::fiber_dump`].
    pub fn fiber_dump(&self) -> FiberDump {
        Executor::fiber_dump(self)
    }

    /// The live fibers (while fibers are listed: they trace, or
    /// [`Builder::track_fibers`]; empty otherwise): id and status of every
    /// fiber made and not finished.
    pub fn live_fibers(&self) -> Vec<FiberInfo> {
        lock(&self.shared.fibers)
            .live()
            .map(|(id, status)| FiberInfo { id, status })
            .collect()
    }

    /// The loop's mode.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// The loop's microtask batch bound.
    pub fn batch_size(&self) -> usize {
        self.shared.batch_size
    }
}

/// Where the main fiber leaves its outcome.
struct RootSlot<A, E> {
    state: Mutex<RootState<A, E>>,
}

enum RootState<A, E> {
    Running,
    Done(Outcome<A, E>),
    Taken,
    /// The completion callback was dropped without being called.
    Abandoned,
}

impl<A, E> RootSlot<A, E> {
    fn take(&self) -> Option<Outcome<A, E>> {
        let mut state = lock(&self.state);
        match std::mem::replace(&mut *state, RootState::Taken) {
            RootState::Done(outcome) => Some(outcome),
            other => {
                *state = other;
                None
            }
        }
    }

    fn is_abandoned(&self) -> bool {
        matches!(*lock(&self.state), RootState::Abandoned)
    }
}

/// Completes the root slot, or marks it abandoned when dropped uncalled
/// (on any thread: then it wakes the loop, which may wait for exactly that).
struct CompletionGuard<A, E> {
    slot: Arc<RootSlot<A, E>>,
    handle: Handle,
}

impl<A, E> CompletionGuard<A, E> {
    fn complete(self, outcome: Outcome<A, E>) {
        *lock(&self.slot.state) = RootState::Done(outcome);
    }
}

impl<A, E> Drop for CompletionGuard<A, E> {
    fn drop(&mut self) {
        let abandoned = {
            let mut state = lock(&self.slot.state);
            if let RootState::Running = *state {
                *state = RootState::Abandoned;
                true
            } else {
                false
            }
        };
        if abandoned {
            self.handle.shared.wake_loop();
        }
    }
}

/// An event loop: one thread runs every fiber, timer and I/O callback. See
/// the [crate documentation](crate).
///
/// Dropping it drops every fiber still queued, sleeping or waiting for I/O
/// (their finalizers do not run: cancel fibers first for that).
pub struct EventLoop {
    handle: Handle,
    local: Local,
    scratch: Scratch,
}

impl fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_batching::EventLoop")
            .field("mode", &self.handle.shared.mode)
            .field("batch_size", &self.handle.shared.batch_size)
            .finish_non_exhaustive()
    }
}

impl EventLoop {
    /// A loop with the default configuration (see [`Builder::new`]).
    pub fn new() -> Result<EventLoop, BuildError> {
        Builder::new().build()
    }

    /// A builder to configure the loop.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The executor handle of this loop (cheap to clone, any thread).
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Runs `io` as the main fiber, with every fiber it wakes, on this
    /// thread until the main fiber ends; returns its outcome.
    ///
    /// If the main fiber can never finish (see [`Deadlock`]), this waits
    /// forever, as Cats Effect's `unsafeRunSync` does on `IO.never`; use
    /// [`try_block_on`](EventLoop::try_block_on) to get an error instead.
    pub fn block_on<A, E>(&mut self, io: IO<A, E>) -> Outcome<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        match self.run(io, false) {
            Ok(outcome) => outcome,
            // Not reached: `run(.., false)` waits instead of reporting a
            // deadlock. (A value rather than a panic all the same.)
            Err(Deadlock) => Outcome::Canceled,
        }
    }

    /// Like [`block_on`](EventLoop::block_on), but returns `Err(Deadlock)`
    /// when the main fiber can provably never finish.
    pub fn try_block_on<A, E>(&mut self, io: IO<A, E>) -> Result<Outcome<A, E>, Deadlock>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.run(io, true)
    }

    /// Starts `io` as a new fiber, run by the loop from its next turn (or
    /// its next `block_on`). See [`Handle::spawn`].
    pub fn spawn<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> FiberHandle<A, E> {
        self.handle.spawn(io)
    }

    /// A snapshot of the loop's counters.
    pub fn stats(&self) -> Stats {
        self.handle.stats()
    }

    /// The live fibers, for a fiber dump. See [`Handle::live_fibers`].
    pub fn live_fibers(&self) -> Vec<FiberInfo> {
        self.handle.live_fibers()
    }

    /// A fiber dump: every live fiber with its state and trace, and the
    /// loop's state (its queues exactly, since they are not running). See
    /// [`Executor::fiber_dump`].
    pub fn fiber_dump(&self) -> FiberDump {
        let local = (self.local.microtasks.len(), self.local.macrotasks.len());
        self.handle.shared.fiber_dump(Some(local))
    }

    fn run<A, E>(&mut self, io: IO<A, E>, fail_on_deadlock: bool) -> Result<Outcome<A, E>, Deadlock>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let EventLoop {
            handle,
            local,
            scratch,
        } = self;
        let _enter = Enter::new(handle, local);
        let slot = Arc::new(RootSlot {
            state: Mutex::new(RootState::Running),
        });
        let guard = CompletionGuard {
            slot: slot.clone(),
            handle: handle.clone(),
        };
        let main = Fiber::new(io, handle.clone(), move |outcome| guard.complete(outcome));
        handle.schedule_fiber(main);
        let shared = &*handle.shared;
        let main_abandoned = || slot.is_abandoned();
        loop {
            if let Some(outcome) = slot.take() {
                return Ok(outcome);
            }
            shared.turn(scratch, &main_abandoned, fail_on_deadlock)?;
        }
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        // Queued fibers, timer callbacks and I/O waiters hold handles to
        // `shared`: drop them now, or the reference cycles would keep
        // everything alive. Everything is taken out under the locks and
        // dropped after they are released.
        let shared = &*self.handle.shared;
        let remote = {
            let mut remote = lock(&shared.remote);
            shared.closed.store(true, Ordering::Relaxed);
            std::mem::take(&mut *remote)
        };
        let timers = lock(&shared.timers).drain();
        let waiters = shared.reactor.drain_waiters();
        let local = std::mem::take(&mut self.local);
        let bag = std::mem::take(&mut *lock(&shared.fibers));
        drop(remote);
        drop(timers);
        drop(waiters);
        drop(local);
        drop(bag);
    }
}
