//! The event loop proper: [`EventLoop`], its [`IORuntime`] implementation
//! (`block_on_with` runs the loop on the calling thread), the turn, and the
//! `Drop` that frees what it holds. See the crate documentation for the
//! design.
//!
//! # The turn, as the code runs it
//!
//! ```text
//! turn:
//!   budget = batch_size; macrotasks = unknown
//!   fire due timers                      -> their fibers: microtask queue
//!   checkpoint
//!   poll I/O (look, or wait if nothing is queued); drain the remote queue
//!   checkpoint
//!   repeat `macrotasks` times: run the next macrotask; checkpoint
//!
//! checkpoint:
//!   while budget > 0 and a microtask is queued:
//!     if macrotasks is unknown: macrotasks = length of the macrotask queue
//!     budget -= 1; run the microtask
//! ```
//!
//! `macrotasks` is read when the turn runs its first fiber: everything in
//! the macrotask queue then was queued by an earlier turn (in
//! [`Mode::Macrotask`] no microtask ever runs, so it is read at the
//! macrotask step and also takes the fibers the turn's timers, I/O and
//! remote queue made ready). A fiber that cedes during the turn
//! is queued after that count and waits for the next turn.
//!
//! # Who may touch what
//!
//! * The microtask and macrotask queues (`Local`) belong to the thread that
//!   runs the loop. While `block_on` runs, they live in a
//!   thread-local (`CURRENT`) together with the loop's handle; between runs
//!   they are kept in the [`EventLoop`] value (a `RefCell`: a nested
//!   `block_on` is refused with [`RunError::Nested`] before it could borrow
//!   them twice). `schedule_fiber` on the loop
//!   thread pushes there without a lock. The thread-local is borrowed only
//!   for a push or a pop, never while a fiber runs or user data is dropped,
//!   so no borrow is ever re-entered.
//! * Everything else is in `Shared`, behind mutexes that the loop thread
//!   takes uncontended: the *remote* queue (io-core's `RemoteQueue`: fibers
//!   scheduled from other threads; the pusher then wakes the loop with
//!   `Reactor::notify`), the timers, the reactor's table of I/O waiters and
//!   the fiber registry (io-core's `FiberRegistry`).
//!   No callback is fired and no fiber is dropped while one of these locks
//!   is held: either may free a fiber whose program owns a socket whose
//!   drop takes the reactor's lock.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use spindle_core::executor::OnDeadlock;
use spindle_core::executor::support::{MainFiber, RunError, WakeWaiter, Watchdog, run_fiber_with};
use spindle_core::{
    Executor, Fiber, FiberDump, IO, IORuntime, Outcome, RuntimeBuilder, RuntimeCounters,
    TimerCallback, WorkerCounters,
};

use crate::builder::{Builder, Mode};
use crate::error::BuildError;
use crate::handle::{Handle, Shared};
use crate::metrics::Metrics;
use crate::sync::{Ordering, lock};

/// Adds `n` to a counter that only the loop thread writes.
#[inline(always)]
pub(crate) fn add(counter: &crate::sync::AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// The loop-thread queues.
#[derive(Default)]
pub(crate) struct Local {
    /// Fibers started or resumed: the microtask batch.
    pub(crate) microtasks: VecDeque<Fiber<Handle>>,
    /// Fibers that ceded or yielded (all fibers in [`Mode::Macrotask`]).
    pub(crate) macrotasks: VecDeque<Fiber<Handle>>,
}

impl Local {
    /// The lengths of the microtask and macrotask queues.
    pub(crate) fn lengths(&mut self) -> (usize, usize) {
        (self.microtasks.len(), self.macrotasks.len())
    }
}

/// The loop running on this thread (at most one at a time; a loop run from
/// inside a fiber of another saves and restores the outer one).
pub(crate) struct Current {
    pub(crate) handle: Handle,
    pub(crate) local: Local,
}

thread_local! {
    pub(crate) static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

/// Runs `f` on the queues of `shared`'s loop if this thread runs it now;
/// `None` otherwise.
pub(crate) fn with_local<R>(shared: &Shared, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
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

impl Shared {
    /// Moves fibers scheduled from other threads into the loop's queues.
    fn drain_remote(&self) {
        if !self.remote.has_pending() {
            return;
        }
        let mode = self.mode;
        // Moves fibers between queues only: nothing is dropped while the
        // lock and the thread-local are held.
        with_local(self, |local| match mode {
            Mode::Batching => self.remote.drain_into(&mut local.microtasks),
            Mode::Macrotask => self.remote.drain_into(&mut local.macrotasks),
        });
    }

    fn fire_due_timers(&self, due: &mut Vec<TimerCallback>) {
        {
            let mut timers = lock(&self.timers);
            if timers.is_empty() {
                return;
            }
            timers.take_due(self.origin.elapsed_nanos(), due);
        }
        add(&self.timers_fired, due.len() as u64);
        for callback in due.drain(..) {
            callback.fire();
        }
    }

    /// Waits at most `timeout` (`None`: until woken) for I/O readiness and
    /// resumes the fibers waiting for the sockets reported.
    fn poll_io(&self, scratch: &mut Scratch, timeout: Option<Duration>) {
        match scratch.poller.poll(timeout) {
            Ok(resumed) => add(&self.io_events, resumed as u64),
            Err(_) => {
                // `wait` retries interrupted calls itself; any other error
                // is a broken poller. Sleep instead of spinning, so timers
                // and remote wake-ups still make progress (checked at the
                // next turn).
                let nap = Duration::from_millis(1);
                std::thread::sleep(timeout.map_or(nap, |t| t.min(nap)));
            }
        }
    }

    /// Puts a fiber that yielded back in line as a macrotask: what the
    /// handle's `reschedule_fiber` does, and what the loop hands
    /// `Fiber::run_with` (no clone of the handle out of the fiber per
    /// yield).
    #[inline]
    pub(crate) fn requeue(&self, fiber: Fiber<Handle>) {
        let mut fiber = Some(fiber);
        with_local(self, |local| {
            if let Some(fiber) = fiber.take() {
                local.macrotasks.push_back(fiber);
            }
        });
        if let Some(fiber) = fiber {
            self.push_remote(fiber);
        }
    }

    /// A microtask checkpoint: runs fibers from the microtask queue, in
    /// order, while the turn's microtask budget lasts (fibers started or
    /// resumed meanwhile join the queue and run here too).
    fn microtask_checkpoint(&self, turn: &mut Turn) {
        while turn.budget > 0 {
            let Some((fiber, queued_macrotasks)) = with_local(self, |local| {
                let fiber = local.microtasks.pop_front()?;
                Some((fiber, local.macrotasks.len()))
            })
            .flatten() else {
                break;
            };
            // The turn's first fiber run: what waits in the macrotask
            // queue now is what the turn's macrotask step runs.
            turn.macrotasks.get_or_insert(queued_macrotasks);
            turn.budget -= 1;
            turn.microtasks_run += 1;
            // Marked in the watchdog's slot when it is on; off, one branch.
            run_fiber_with(self.watch_slot.as_deref(), fiber, |fiber| {
                self.requeue(fiber)
            });
        }
    }

    /// One turn of the loop: timers, I/O, the macrotasks queued before
    /// its first fiber ran, with a microtask checkpoint after each of
    /// them. See the [crate documentation](crate#the-turn).
    fn turn(
        &self,
        scratch: &mut Scratch,
        main_abandoned: &dyn Fn() -> bool,
        on_deadlock: OnDeadlock,
    ) -> Result<(), RunError> {
        add(&self.turns, 1);
        let mut turn = Turn {
            budget: self.batch_size,
            microtasks_run: 0,
            macrotasks: None,
        };

        // 1. Timers, then a checkpoint: fibers they woke run now, before
        //    any macrotask.
        self.fire_due_timers(&mut scratch.due);
        self.microtask_checkpoint(&mut turn);

        // 2. I/O readiness and wake-ups from other threads, then a
        //    checkpoint.
        let queued = with_local(self, |local| {
            !local.microtasks.is_empty() || !local.macrotasks.is_empty()
        })
        .unwrap_or(false)
            || self.remote.has_pending();
        if queued {
            // Work is waiting: only look (no wait), and only if a fiber
            // waits for I/O at all.
            if self.reactor.waiters() > 0 {
                self.poll_io(scratch, Some(Duration::ZERO));
            }
        } else {
            let next_deadline = lock(&self.timers).next_deadline();
            if on_deadlock.reports()
                && next_deadline.is_none()
                && self.reactor.waiters() == 0
                && !self.remote.has_pending()
                && main_abandoned()
            {
                return Err(RunError::Deadlock);
            }
            let timeout = next_deadline.map(|deadline| {
                Duration::from_nanos(deadline.saturating_sub(self.origin.elapsed_nanos()))
            });
            // Returns on readiness, at the deadline, or when another thread
            // queues a fiber, sets a timer or abandons the main fiber.
            add(&self.parks, 1);
            self.poll_io(scratch, timeout);
        }
        self.drain_remote();
        self.microtask_checkpoint(&mut turn);

        // 3. The macrotasks queued before the turn's first fiber ran, each
        //    followed by a checkpoint (a fiber one of them starts or
        //    resumes runs before the next macrotask while the budget
        //    lasts). A fiber that cedes during this turn waits for the
        //    next one.
        let macrotasks = match turn.macrotasks {
            Some(n) => n,
            None => with_local(self, |local| local.macrotasks.len()).unwrap_or(0),
        };
        let mut ran = 0;
        while ran < macrotasks {
            let Some(fiber) = with_local(self, |local| local.macrotasks.pop_front()).flatten()
            else {
                break;
            };
            run_fiber_with(self.watch_slot.as_deref(), fiber, |fiber| {
                self.requeue(fiber)
            });
            ran += 1;
            self.microtask_checkpoint(&mut turn);
        }
        add(&self.macrotasks_run, ran as u64);

        if turn.microtasks_run > 0 {
            add(&self.batches, 1);
            add(&self.microtasks_run, turn.microtasks_run);
        }
        if let Some((micro, macro_)) = with_local(self, Local::lengths) {
            self.published.store([micro, macro_]);
        }
        Ok(())
    }

    /// Every listed live fiber and the loop's state; `local`: the queues
    /// if the caller can read them (on the loop thread, or between runs).
    pub(crate) fn fiber_dump(&self, local: Option<(usize, usize)>) -> FiberDump {
        let fibers = self.fibers.live_fibers();
        let (microtasks, macrotasks) = local.unwrap_or_else(|| {
            let [micro, macro_] = self.published.load();
            (micro, macro_)
        });
        let remote = self.remote.len();
        let blocking = self.blocking.counts();
        FiberDump {
            fibers,
            executor: vec![
                ("microtask queue", microtasks as u64),
                ("macrotask queue", macrotasks as u64),
                ("remote queue", remote as u64),
                ("timers", lock(&self.timers).len() as u64),
                ("io waiters", self.reactor.waiters() as u64),
                ("blocking threads", blocking.threads as u64),
                ("queued blocking calls", blocking.queued as u64),
            ],
        }
    }

    /// Fibers ended: completed (on the loop) or freed (anywhere).
    pub(crate) fn ended_count(&self) -> u64 {
        self.ended.load(Ordering::Relaxed) + self.freed.load(Ordering::Relaxed)
    }

    /// The executor-independent counters (`Executor::counters`).
    pub(crate) fn counters(&self, local: Option<(usize, usize)>) -> RuntimeCounters {
        let (microtasks, macrotasks) = local.unwrap_or_else(|| {
            let [micro, macro_] = self.published.load();
            (micro, macro_)
        });
        let started = self.created.load(Ordering::Relaxed);
        let ended = self.ended_count();
        let timers = lock(&self.timers).len() as u64;
        let blocking = self.blocking.counts();
        let mut c = RuntimeCounters::new("batching");
        c.fibers_started_total = Some(started);
        c.fibers_completed_total = Some(ended);
        c.fibers_canceled_total = Some(self.canceled.load(Ordering::Relaxed));
        c.fibers_live = Some(started.saturating_sub(ended));
        c.global_queue_depth = Some(self.remote.len() as u64);
        let mut worker = WorkerCounters::new();
        worker.queue_depth = Some((microtasks + macrotasks) as u64);
        worker.parks_total = Some(self.parks.load(Ordering::Relaxed));
        worker.timers = Some(timers);
        c.workers = vec![worker];
        c.io_events_total = Some(self.io_events.load(Ordering::Relaxed));
        c.io_sources = Some(self.reactor.sources() as u64);
        c.io_waiters = Some(self.reactor.waiters() as u64);
        c.timers = Some(timers);
        c.timers_fired_total = Some(self.timers_fired.load(Ordering::Relaxed));
        c.blocking_threads = Some(blocking.threads as u64);
        c.blocking_threads_idle = Some(blocking.idle as u64);
        c.blocking_queue_depth = Some(blocking.queued as u64);
        c
    }

    pub(crate) fn metrics(&self) -> Metrics {
        let created = self.created.load(Ordering::Relaxed);
        let ended = self.ended_count();
        let blocking = self.blocking.counts();
        Metrics {
            turns: self.turns.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            microtasks_run: self.microtasks_run.load(Ordering::Relaxed),
            macrotasks_run: self.macrotasks_run.load(Ordering::Relaxed),
            live_fibers: created.saturating_sub(ended),
            timers: lock(&self.timers).len(),
            io_sources: self.reactor.sources(),
            io_waiters: self.reactor.waiters(),
            blocking_threads: blocking.threads,
            idle_blocking_threads: blocking.idle,
            blocking_queue_len: blocking.queued,
        }
    }
}

/// The state of one turn ([`Shared::turn`]).
struct Turn {
    /// Microtask runs left in this turn's batch (starts at `batch_size`,
    /// shared by all of the turn's checkpoints).
    budget: usize,
    /// Microtask runs so far.
    microtasks_run: u64,
    /// The length of the macrotask queue when the turn ran its first
    /// fiber (`None`: no fiber ran yet): how many macrotasks step 3 runs.
    macrotasks: Option<usize>,
}

/// Buffers the loop reuses from turn to turn.
pub(crate) struct Scratch {
    /// The polling half of the loop's reactor (its events buffer, and the
    /// fibers it resumes).
    pub(crate) poller: spindle_net::driver::Poller,
    pub(crate) due: Vec<TimerCallback>,
}

/// An event loop: one thread runs every fiber, timer and I/O callback. See
/// the [crate documentation](crate).
///
/// Dropping it drops every fiber still queued, sleeping or waiting for I/O
/// (their finalizers do not run: cancel fibers first for that), and stops
/// its blocking pool: idle threads exit at once, busy ones after their
/// current call (the drop does not wait for them), queued blocking calls
/// are dropped with their fibers.
///
/// Programs run through [`IORuntime`] (`block_on`, `try_block_on`,
/// `spawn`, `metrics`, `fiber_dump`, `from_env`, `shutdown`: import the
/// trait).
///
/// `Send` but not `Sync` (its queues are `RefCell`s between runs): one
/// thread at a time runs the loop, and fibers hold [`Handle`]s, never the
/// loop itself.
pub struct EventLoop {
    handle: Handle,
    local: RefCell<Local>,
    scratch: RefCell<Scratch>,
    /// The starvation watchdog's thread, when on: stopped first when the
    /// loop is dropped.
    pub(crate) watchdog: Option<Watchdog>,
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
    pub(crate) fn from_parts(handle: Handle, scratch: Scratch) -> EventLoop {
        EventLoop {
            handle,
            local: RefCell::new(Local::default()),
            scratch: RefCell::new(scratch),
            watchdog: None,
        }
    }

    /// A loop with the default configuration (see [`Builder::new`]; the
    /// environment is not read): `EventLoop::builder().build()`.
    pub fn new() -> Result<EventLoop, BuildError> {
        Builder::new().build()
    }

    /// A builder to configure the loop.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// Runs `io` as the main fiber, with every fiber it wakes, on this
    /// thread until the main fiber ends (the turns of the [crate
    /// documentation](crate#the-turn)): the body of
    /// [`IORuntime::block_on_with`]. A deadlock is provable when the main
    /// fiber was freed without finishing and no fiber, timer, I/O interest
    /// or wake-up from another thread remains.
    fn run<A, E>(&self, io: IO<A, E>, on_deadlock: OnDeadlock) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        // A fiber of this loop calling `block_on`: the queues are in use.
        if self.handle.is_current() {
            return Err(RunError::Nested);
        }
        let (Ok(mut local), Ok(mut scratch)) =
            (self.local.try_borrow_mut(), self.scratch.try_borrow_mut())
        else {
            return Err(RunError::Nested);
        };
        let handle = &self.handle;
        let _enter = Enter::new(handle, &mut local);
        let (main, fiber) = MainFiber::new(io, handle.clone(), LoopWaiter(handle.clone()));
        handle.schedule_fiber(fiber);
        let shared = &*handle.shared;
        let main_abandoned = || main.is_abandoned();
        // Sockets made by this loop's fibers register with its reactor,
        // and waits on them are allowed while it runs (spindle-net's
        // driver contract).
        let _driven = Driven::new(&shared.reactor);
        spindle_net::driver::with_driver(&shared.reactor, || {
            loop {
                if let Some(outcome) = main.take() {
                    return Ok(outcome);
                }
                shared.turn(&mut scratch, &main_abandoned, on_deadlock)?;
            }
        })
    }
}

/// exec-batching's side of the surface every executor shares (see
/// [`IORuntime`]'s table). `block_on_with` runs the loop on the calling
/// thread; `shutdown` is the provided one: dropping the loop frees every
/// fiber, timer and socket waiter at once and stops its blocking pool
/// without waiting for busy blocking threads (always `Ok`).
impl IORuntime for EventLoop {
    type Handle = Handle;
    type Metrics = Metrics;
    type BuildError = BuildError;

    fn from_env() -> Result<EventLoop, BuildError> {
        Builder::new().fiber_config_from_env().build()
    }

    fn handle(&self) -> &Handle {
        &self.handle
    }

    fn block_on_with<A, E>(
        &self,
        io: IO<A, E>,
        on_deadlock: OnDeadlock,
    ) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.run(io, on_deadlock)
    }

    /// The loop's counters ([`Handle::metrics`]).
    fn handle_metrics(handle: &Handle) -> Metrics {
        handle.metrics()
    }

    /// Every listed live fiber and the loop's state, its queue lengths
    /// exact when the loop is not running (read from the loop itself);
    /// otherwise as [`Executor::fiber_dump`] on the handle.
    fn fiber_dump(&self) -> FiberDump {
        let local = self
            .local
            .try_borrow()
            .ok()
            .map(|local| (local.microtasks.len(), local.macrotasks.len()));
        match local {
            Some(local) => self.handle.shared.fiber_dump(Some(local)),
            None => Executor::fiber_dump(&self.handle),
        }
    }
}

/// Marks the loop's reactor as polled for the duration of a run (also
/// when unwinding): a wait on one of its sockets between runs fails
/// instead of hanging.
struct Driven<'a>(&'a spindle_net::driver::Reactor);

impl<'a> Driven<'a> {
    fn new(reactor: &'a spindle_net::driver::Reactor) -> Driven<'a> {
        reactor.set_driven(true);
        Driven(reactor)
    }
}

impl Drop for Driven<'_> {
    fn drop(&mut self) {
        self.0.set_driven(false);
    }
}

/// Wakes the loop when its main fiber completes or is abandoned (on any
/// thread: the loop may wait in its poller for exactly that).
struct LoopWaiter(Handle);

impl WakeWaiter for LoopWaiter {
    fn wake(&self) {
        self.0.shared.wake_loop();
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        // The watchdog thread first (it holds a handle): joined, so that no
        // thread outlives the loop.
        drop(self.watchdog.take());
        // Queued fibers, timer callbacks and I/O waiters hold handles to
        // `shared`: drop them now, or the reference cycles would keep
        // everything alive. Everything is taken out under the locks and
        // dropped after they are released.
        let shared = &*self.handle.shared;
        shared.closed.store(true, Ordering::Relaxed);
        let remote = shared.remote.close();
        let timers = lock(&shared.timers).drain();
        let waiters = shared.reactor.close();
        // Idle blocking threads exit now, busy ones after their current
        // call (not waited for: a call may block for as long as it likes);
        // queued calls are dropped here, with their fibers.
        let blocking_threads = shared.blocking.shutdown();
        drop(blocking_threads);
        let local = std::mem::take(self.local.get_mut());
        drop(remote);
        drop(timers);
        drop(waiters);
        drop(local);
        shared.fibers.clear();
    }
}
