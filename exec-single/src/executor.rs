//! [`SingleThreaded`]: the executor proper, its [`IORuntime`]
//! implementation (`block_on_with` runs the loop), the turn, and the
//! `Drop` that frees what it holds. The loop is described in the [crate
//! documentation](crate#the-loop).
//!
//! The loop is written once for every build and clock: what differs (the
//! loop marker, idle waiting, the I/O capability) is behind `platform`'s
//! API. The executor owns the loop's half of the I/O capability
//! (`platform::IoPoller`: where the loop waits when idle, and looks once
//! per busy turn) and the shared state the other half (`platform::Io`:
//! wakes the loop from other threads, counts I/O waiters, installs the
//! driver for the duration of a run, closes on drop). Without I/O (no
//! `std`, not Unix, or a clock other than the system clock) both halves
//! fall back to the platform's parking or `Clock::wait`.

use core::cell::{Cell, RefCell};
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use spindle_core::executor::OnDeadlock;
use spindle_core::executor::support::{FiberRegistry, MainFiber, RunError, WakeWaiter, nanos};
#[cfg(feature = "std")]
use spindle_core::executor::support::{RunSlot, Watchdog};
use spindle_core::{Fiber, FiberConfig, IO, IORuntime, Outcome, Ran, RuntimeBuilder};

use crate::builder::Builder;
use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::StdClock;
use crate::error::BuildError;
use crate::handle::{Handle, Metrics, Shared, add};
use crate::platform;
use crate::sync::Arc;

/// A single-threaded executor. See the [crate documentation](crate).
///
/// Programs run through [`IORuntime`] (`block_on`, `try_block_on`,
/// `spawn`, `metrics`, `fiber_dump`, `from_env`, `shutdown`: import the
/// trait), implemented for every clock with a `Default` (its `from_env`
/// makes the clock with it: [`StdClock`](crate::StdClock), the test kit's
/// [`VirtualClock`](crate::testkit::VirtualClock), a zero-sized clock over a
/// hardware counter). Without `std`, `from_env` is the default
/// configuration (there is no environment).
///
/// `Send` but not `Sync`: one thread at a time runs its loop, and a fiber
/// cannot capture a reference to the executor that runs it (fibers hold
/// [`Handle`]s). A `block_on` nested inside one of its own fibers is
/// refused with [`RunError::Nested`].
pub struct SingleThreaded<C: Clock> {
    pub(crate) handle: Handle<C>,
    /// Whether a `block_on` of this executor runs (on this thread: the
    /// executor is not `Sync`). Catches every nesting, also one through a
    /// fiber of another executor whose loop runs inside one of ours.
    running: Cell<bool>,
    /// The loop's half of the I/O capability (module doc): borrowed by the
    /// one `block_on` that runs.
    poller: RefCell<platform::IoPoller>,
    /// Not `Sync` (see above).
    _not_sync: PhantomData<Cell<()>>,
    /// The starvation watchdog and the loop thread's slot, when the
    /// builder turned it on (`RuntimeBuilder::starvation_threshold`).
    /// (Boxed: one word here, so that the loop's state keeps its layout.)
    #[cfg(feature = "std")]
    pub(crate) watch: Option<std::boxed::Box<Watched>>,
}

/// The starvation watchdog of an executor that has it: the thread, stopped
/// first when the executor is dropped, and the slot the loop marks each
/// fiber run in (one: one thread runs the loop at a time).
#[cfg(feature = "std")]
pub(crate) struct Watched {
    pub(crate) slot: std::sync::Arc<RunSlot>,
    pub(crate) _watchdog: Watchdog,
}

/// Clears [`SingleThreaded::running`] when a run ends (also when unwinding).
struct Running<'a>(&'a Cell<bool>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

#[cfg(feature = "std")]
impl SingleThreaded<StdClock> {
    /// An executor on the system's monotonic clock with the default
    /// [`FiberConfig`] (the environment is not read):
    /// `SingleThreaded::builder().build()`.
    pub fn new() -> Result<Self, BuildError> {
        Builder::new().build()
    }

    /// [`IORuntime::from_env`] on the system clock, so that
    /// `SingleThreaded::from_env()` names no clock (as `HashMap::new()`
    /// names no hasher): the trait's is implemented for every clock, and
    /// a call through the trait needs the clock named
    /// (`SingleThreaded::<StdClock>::from_env()`).
    pub fn from_env() -> Result<Self, BuildError> {
        <Self as IORuntime>::from_env()
    }

    /// A builder on the system clock (see [`Builder::with_clock`] for
    /// another clock).
    pub fn builder() -> Builder<StdClock> {
        Builder::new()
    }
}

impl<C: Clock> fmt::Debug for SingleThreaded<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleThreaded").finish_non_exhaustive()
    }
}

/// Wakes the loop when its main fiber completes or is abandoned (on any
/// thread: the loop may be idle, waiting for exactly that).
struct LoopWaiter<C: Clock>(Handle<C>);

impl<C: Clock> WakeWaiter for LoopWaiter<C> {
    fn wake(&self) {
        let shared = &self.0.shared;
        // Published first (the remote queue's flag), then the loop is woken:
        // from its park, its poller, or the clock's `wait`.
        shared.remote.notify();
        shared.io.wake(&shared.clock);
    }
}

impl<C: Clock> SingleThreaded<C> {
    pub(crate) fn from_parts(
        clock: C,
        config: FiberConfig,
        fibers: FiberRegistry,
        (io, poller): (platform::Io, platform::IoPoller),
    ) -> Self {
        SingleThreaded {
            handle: Handle {
                shared: Arc::new(Shared::new(clock, config, fibers, io)),
            },
            running: Cell::new(false),
            poller: RefCell::new(poller),
            _not_sync: PhantomData,
            #[cfg(feature = "std")]
            watch: None,
        }
    }

    /// Runs `io` as the main fiber, with every fiber it wakes, on this
    /// thread until the main fiber ends (the loop of the [crate
    /// documentation](crate#the-loop)): the body of
    /// [`IORuntime::block_on_with`]. A deadlock is provable when the main
    /// fiber was freed while suspended and nothing is left: no fiber
    /// ready, no timer, no fiber waiting for a socket, no wake-up from
    /// elsewhere.
    fn run<A, E>(&self, io: IO<A, E>, on_deadlock: OnDeadlock) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let shared = &*self.handle.shared;
        if self.running.replace(true) {
            // This loop already runs: one of our fibers (perhaps through a
            // loop of another executor it runs) called `block_on`.
            return Err(RunError::Nested);
        }
        let _running = Running(&self.running);
        let Some(_on_loop) = platform::enter_loop(self.handle.shared_id(), &shared.remote) else {
            // The loop marker says the same (kept as a second line of
            // defence: entering again would alias `local`).
            return Err(RunError::Nested);
        };
        let Ok(mut poller) = self.poller.try_borrow_mut() else {
            // Unreachable while `running` is set; refused rather than
            // panicking all the same.
            return Err(RunError::Nested);
        };
        let main = self.spawn_main(io);
        // Sockets made by the fibers run here register with this
        // executor's reactor, and waits on them are allowed, until the run
        // ends (no-op without I/O).
        shared.io.drive(|| {
            loop {
                self.turn();
                if let Some(outcome) = main.take() {
                    return Ok(outcome);
                }
                if self.has_runnable() {
                    // Busy: a look at the sockets (no wait), once per turn,
                    // only if a fiber waits for one.
                    let resumed = poller.look();
                    if resumed > 0 {
                        add(&shared.counters.io_events, resumed);
                    }
                    continue;
                }
                let next_deadline = self.next_deadline();
                if on_deadlock.reports()
                    && next_deadline.is_none()
                    && shared.io.waiters() == 0
                    && main.is_abandoned()
                    && shared.remote.is_empty()
                {
                    return Err(RunError::Deadlock);
                }
                // Until the next timer, a readiness event, or a wake-up
                // from elsewhere (a push, the main fiber's end).
                add(&shared.counters.parks, 1);
                let resumed = poller.idle(&shared.remote, &shared.clock, next_deadline);
                if resumed > 0 {
                    add(&shared.counters.io_events, resumed);
                }
            }
        })
    }

    /// Queues `io` as a main fiber whose outcome lands in the returned slot.
    /// The caller runs the loop (it holds the loop marker).
    pub(crate) fn spawn_main<A, E>(&self, io: IO<A, E>) -> MainFiber<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let (main, fiber) =
            MainFiber::new(io, self.handle.clone(), LoopWaiter(self.handle.clone()));
        // SAFETY: the caller runs the loop on this thread (module doc), and
        // the borrow ends with the push.
        unsafe { self.handle.shared.local() }
            .run_queue
            .push_back(fiber);
        main
    }

    /// One turn of the loop: take in remote wake-ups, fire due timers, run
    /// the fibers queued now (fibers queued meanwhile wait for the next
    /// turn, so that timers and remote wake-ups are checked between
    /// batches). The caller holds the loop marker.
    pub(crate) fn turn(&self) {
        let shared = &*self.handle.shared;
        shared.remote.drain_into(
            // SAFETY: loop thread; the borrow ends with the call.
            &mut unsafe { shared.local() }.run_queue,
        );
        self.fire_due_timers();
        // SAFETY: loop thread.
        let batch = unsafe { shared.local() }.run_queue.len();
        // With the starvation watchdog on, each run is marked in the loop's
        // slot (a batch of its own, out of line); off, one branch per turn.
        #[cfg(feature = "std")]
        if let Some(watch) = &self.watch {
            self.run_watched(batch, &watch.slot);
        } else {
            self.run_batch(batch, |fiber| fiber.run_with(|fiber| self.requeue(fiber)));
        }
        #[cfg(not(feature = "std"))]
        self.run_batch(batch, |fiber| fiber.run_with(|fiber| self.requeue(fiber)));
        // SAFETY: loop thread; the borrow ends with the reads.
        let local = unsafe { shared.local() };
        shared
            .published
            .store([local.run_queue.len(), local.timers.len()]);
    }

    /// Runs at most `batch` fibers of the ready queue, each with `run` (the
    /// loop thread).
    #[inline(always)]
    fn run_batch(&self, batch: usize, run: impl Fn(Fiber<Handle<C>>) -> Ran) {
        let shared = &*self.handle.shared;
        for _ in 0..batch {
            // SAFETY: loop thread; the borrow ends before `run`, which
            // may re-enter `local()` through schedule_fiber/set_timer.
            let next = unsafe { shared.local() }.run_queue.pop_front();
            match next {
                Some(fiber) => {
                    run(fiber);
                }
                None => break,
            }
        }
    }

    /// [`run_batch`](Self::run_batch) with each run marked in the
    /// starvation watchdog's `slot`.
    #[cfg(feature = "std")]
    #[cold]
    #[inline(never)]
    fn run_watched(&self, batch: usize, slot: &RunSlot) {
        self.run_batch(batch, |fiber| {
            slot.run_with(fiber, |fiber| self.requeue(fiber))
        });
    }

    /// Puts a fiber that yielded back in line, as `reschedule_fiber` does,
    /// through the loop's own handle (`Fiber::run_with`: no clone of the
    /// handle out of the fiber per yield).
    #[inline(always)]
    fn requeue(&self, fiber: Fiber<Handle<C>>) {
        spindle_core::Executor::reschedule_fiber(&self.handle, fiber);
    }

    /// Whether a fiber is queued (on the loop thread).
    pub(crate) fn has_runnable(&self) -> bool {
        // SAFETY: loop thread; the borrow ends with the check.
        !unsafe { self.handle.shared.local() }.run_queue.is_empty()
    }

    /// The earliest timer deadline (on the loop thread).
    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        // SAFETY: loop thread; the borrow ends with the read.
        unsafe { self.handle.shared.local() }
            .timers
            .next_deadline()
            .map(Duration::from_nanos)
    }

    fn fire_due_timers(&self) {
        // SAFETY: loop thread; the borrow ends with the check.
        if unsafe { self.handle.shared.local() }.timers.is_empty() {
            return;
        }
        let now = nanos(self.handle.shared.clock.now());
        loop {
            // SAFETY: loop thread; the borrow ends before `fire`.
            let due = unsafe { self.handle.shared.local() }.timers.pop_due(now);
            match due {
                Some(callback) => {
                    add(&self.handle.shared.counters.timers_fired, 1);
                    callback.fire();
                }
                None => return,
            }
        }
    }

    /// Marks this thread as the loop's for a `TestControl` step; `None`
    /// if the loop already runs here.
    pub(crate) fn enter(&self) -> Option<platform::LoopGuard> {
        platform::enter_loop(self.handle.shared_id(), &self.handle.shared.remote)
    }
}

/// exec-single's side of the surface every executor shares (see
/// [`IORuntime`]'s table). `block_on_with` runs the loop on the calling
/// thread; `shutdown` is the provided one: dropping the executor frees
/// every fiber, timer and socket waiter at once (always `Ok`).
impl<C: Clock + Default> IORuntime for SingleThreaded<C> {
    type Handle = Handle<C>;
    type Metrics = Metrics;
    type BuildError = BuildError;

    /// An executor on `C::default()` (on the system clock, the inherent
    /// [`SingleThreaded::from_env`] names no clock) with the
    /// fiber configuration of the environment; without `std`, the default
    /// configuration.
    ///
    /// ```
    /// # #[cfg(feature = "std")] { // The system clock needs `std`.
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::single::SingleThreaded;
    /// use spindle_effect::single::testkit::VirtualClock;
    ///
    /// let on_the_system_clock = SingleThreaded::from_env()?;
    /// let on_virtual_time = SingleThreaded::<VirtualClock>::from_env()?;
    /// # let _ = (on_the_system_clock, on_virtual_time);
    /// # }
    /// # Ok::<(), spindle_effect::single::BuildError>(())
    /// ```
    fn from_env() -> Result<Self, BuildError> {
        Builder::with_clock(C::default())
            .fiber_config_from_env()
            .build()
    }

    fn handle(&self) -> &Handle<C> {
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

    /// The loop's queues, timers and socket waiters: exact on the loop
    /// thread (and between runs, on the owner's), as the loop published
    /// them at the end of its last turn elsewhere ([`Handle::metrics`]).
    fn handle_metrics(handle: &Handle<C>) -> Metrics {
        handle.metrics()
    }
}

impl<C: Clock> Drop for SingleThreaded<C> {
    fn drop(&mut self) {
        // The watchdog thread first (it holds a handle): joined, so that no
        // thread outlives the executor.
        #[cfg(feature = "std")]
        drop(self.watch.take());
        // Queued fibers, timer callbacks and I/O waiters hold handles to
        // `shared`: take them out and drop them now, or the reference cycle
        // would keep everything alive (io-core's support module, "Breaking
        // the executor/fiber cycle"). The remote queue is closed first, so a
        // fiber scheduled from elsewhere from now on is freed at once.
        let shared = &*self.handle.shared;
        let remote = shared.remote.close();
        // `&mut self`: no `block_on` runs, so nothing borrows `local`, and
        // the marker makes this thread the loop's while the fibers drop.
        let _on_loop = platform::enter_loop(self.handle.shared_id(), &shared.remote);
        // SAFETY: `&mut self` and the marker make this thread the loop
        // thread; the borrow ends before anything is dropped.
        let (queue, timers) = {
            let local = unsafe { shared.local() };
            (core::mem::take(&mut local.run_queue), local.timers.drain())
        };
        drop(remote);
        // Fibers waiting for a socket: the reactor is closed (every later
        // wait fails) and their callbacks are dropped, outside its lock and
        // ours (see `platform::Io::close`).
        shared.io.close();
        drop(queue);
        drop(timers);
        shared.fibers.clear();
    }
}
