//! # exec-single: a single-threaded executor for Spindle fibers
//!
//! One thread (the one that calls [`SingleThreaded::block_on`]) runs every
//! fiber. It is the executor for tests, for embedded targets (`#![no_std]`
//! with `alloc`; build with `default-features = false`) and for programs that
//! want one deterministic thread.
//!
//! ```
//! use spindle_exec_single::SingleThreaded;
//! use spindle_core::{IO, Outcome};
//! use std::time::Duration;
//!
//! let mut rt = SingleThreaded::new();
//! let program: IO<&str, ()> = IO::sleep(Duration::from_millis(1)).map_to("done");
//! assert_eq!(rt.block_on(program), Outcome::Succeeded("done"));
//! ```
//!
//! # The loop
//!
//! Each turn of [`SingleThreaded::block_on`]:
//!
//! 1. moves fibers woken from elsewhere (other threads, interrupt handlers)
//!    from the *remote* queue to the end of the run queue;
//! 2. fires the timers whose deadline has passed, in deadline order (ties in
//!    the order they were set), which queues their fibers;
//! 3. runs the fibers that were queued at the start of this step, in FIFO
//!    order (a fiber that yields goes behind them);
//! 4. if nothing is runnable, waits: with `std` it parks the thread until
//!    the next deadline or a remote wake-up; without `std` it calls
//!    [`Clock::wait`].
//!
//! Same program, same order of events, every run: nothing depends on thread
//! timing except when a wake-up from another thread or an interrupt arrives.
//!
//! # Wake-ups from other contexts
//!
//! [`Executor::schedule_fiber`] may be called from any thread and (without
//! `std`) from interrupt handlers: callbacks resume fibers that way. On the
//! loop's own thread it pushes to the run queue without a lock; from
//! anywhere else it pushes to the remote queue, behind a `std` mutex or a
//! `critical-section` (never picked by this library: the final binary
//! provides the implementation, for instance cortex-m's single-core one).
//!
//! # Fiber dumps
//!
//! [`Executor::fiber_dump`] (also [`SingleThreaded::fiber_dump`]) lists
//! every live fiber with its state and trace, and the loop's state: the
//! ready queue, the remote queue and the timers. The loop keeps io-core's
//! [`WeakFibers`] list of its fibers, filled from
//! [`Executor::fiber_created`], only when its fibers trace
//! ([`spindle_core::executor::lists_fibers`]: io-core's `tracing` feature on and
//! a mode other than `none`); otherwise it keeps nothing per fiber and a
//! dump lists no fiber. The list is behind a short lock (a `std` mutex, or
//! a critical section without `std`), since fibers may be made on any
//! thread. On the loop thread a dump reads the ready queue and the timers
//! exactly; elsewhere (another thread, an interrupt handler, any caller
//! without `std`) it reads their lengths as of the end of the last turn,
//! which the loop publishes with two relaxed stores per turn.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod clock;
mod platform;
pub mod testkit;

use alloc::collections::VecDeque;
use core::cell::UnsafeCell;
use core::fmt;
use core::time::Duration;

#[cfg(feature = "std")]
use spindle_core::ConfigError;
use spindle_core::timers::{TimerHeap, TimerId};
use spindle_core::{Executor, Fiber, FiberConfig, IO, Outcome, TimerCallback};
// Fiber listings are not part of io-core's loom builds (which build this
// crate as a dev-dependency): under `--cfg loom` this executor has no dump.
use portable_atomic::{AtomicUsize, Ordering};
use portable_atomic_util::Arc;
#[cfg(not(loom))]
use spindle_core::{FiberDump, WeakFibers};

pub use clock::Clock;
#[cfg(feature = "std")]
pub use clock::StdClock;

/// The executor handle fibers hold: cheap to clone, `Send + Sync`.
///
/// Get one with [`SingleThreaded::handle`]; it implements [`Executor`].
pub struct Handle<C: Clock> {
    shared: Arc<Shared<C>>,
}

impl<C: Clock> Clone for Handle<C> {
    fn clone(&self) -> Self {
        Handle {
            shared: self.shared.clone(),
        }
    }
}

impl<C: Clock> fmt::Debug for Handle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_single::Handle")
            .finish_non_exhaustive()
    }
}

/// Key of a timer: io-core's timer heap's identifier (ties fire in the
/// order they were set).
type TimerKey = TimerId;

/// State touched only by the thread running the loop.
struct Local<C: Clock> {
    run_queue: VecDeque<Fiber<Handle<C>>>,
    /// Deadlines in nanoseconds of the clock ([`nanos`]).
    timers: TimerHeap,
}

/// A clock reading in nanoseconds (saturating; no 128-bit or 64-bit
/// division, which small cores do in software).
fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

struct Shared<C: Clock> {
    clock: C,
    config: FiberConfig,
    local: UnsafeCell<Local<C>>,
    remote: platform::Remote<Fiber<Handle<C>>>,
    /// Weak references to the live fibers, for dumps: only while fibers
    /// trace (see the crate documentation).
    #[cfg(not(loom))]
    fibers: Option<platform::Lock<WeakFibers>>,
    /// The ready queue's length at the end of the last turn (for dumps
    /// taken off the loop thread).
    published_ready: AtomicUsize,
    /// The number of timers at the end of the last turn.
    published_timers: AtomicUsize,
}

// SAFETY: `local` is only accessed by the thread that runs the loop, which
// `platform::on_loop_thread` identifies (with `std`: a thread-local marker
// set for the duration of `block_on`; without `std` there is one context
// that runs the loop, and everything from interrupt handlers goes through
// `remote`). `remote` is a lock. The clock is `Send + Sync`.
unsafe impl<C: Clock> Sync for Shared<C> {}
// SAFETY: as above; fibers and timer callbacks are `Send`.
unsafe impl<C: Clock> Send for Shared<C> {}

impl<C: Clock> Shared<C> {
    /// Exclusive access to the loop-thread state.
    ///
    /// # Safety
    /// * The caller runs on the loop thread, and does not hold another
    ///   reference from `local()` (no re-entrancy while it is used).
    #[allow(clippy::mut_from_ref)]
    unsafe fn local(&self) -> &mut Local<C> {
        // SAFETY: forwarded precondition.
        unsafe { &mut *self.local.get() }
    }
}

impl<C: Clock> Executor for Handle<C> {
    type TimerKey = TimerKey;

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        if platform::on_loop_thread(self.shared_id()) {
            // SAFETY: on the loop thread; the borrow ends within the call.
            unsafe { self.shared.local() }.run_queue.push_back(fiber);
        } else {
            self.shared.remote.push(fiber, &self.shared.clock);
        }
    }

    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        // Called by the loop thread right after running the fiber.
        self.schedule_fiber(fiber)
    }

    fn monotonic(&self) -> Duration {
        self.shared.clock.now()
    }

    fn real_time(&self) -> Duration {
        self.shared.clock.real_time()
    }

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> TimerKey {
        // SAFETY: fibers run on the loop thread, and set_timer is called by
        // a running fiber (Executor contract).
        let local = unsafe { self.shared.local() };
        local.timers.insert(nanos(deadline), callback)
    }

    fn cancel_timer(&self, key: TimerKey) {
        // SAFETY: as in `set_timer`.
        let local = unsafe { self.shared.local() };
        drop(local.timers.cancel(key));
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    #[inline]
    #[cfg_attr(loom, allow(unused_variables))]
    fn fiber_created(&self, fiber: &Fiber<Self>) {
        #[cfg(not(loom))]
        if let Some(fibers) = &self.shared.fibers {
            fibers.with(|fibers| fibers.push(fiber.downgrade()));
        }
    }

    /// The live fibers (while they trace; see the crate documentation) and
    /// the loop's `ready queue`, `remote queue` and `timers`.
    #[cfg(not(loom))]
    fn fiber_dump(&self) -> FiberDump {
        let shared = &*self.shared;
        let fibers = match &shared.fibers {
            Some(list) => list.with(|list| list.infos().collect()),
            None => alloc::vec::Vec::new(),
        };
        let (ready, timers) = if platform::on_loop_thread(self.shared_id()) {
            // SAFETY: on the loop thread; the borrow ends with the read
            // (a dump is taken by a running fiber or between fibers, never
            // while another borrow of `local` is live).
            let local = unsafe { shared.local() };
            (local.run_queue.len(), local.timers.len())
        } else {
            (
                shared.published_ready.load(Ordering::Relaxed),
                shared.published_timers.load(Ordering::Relaxed),
            )
        };
        FiberDump {
            fibers,
            executor: alloc::vec![
                ("ready queue", ready as u64),
                ("remote queue", shared.remote.len() as u64),
                ("timers", timers as u64),
            ],
        }
    }
}

impl<C: Clock> Handle<C> {
    fn shared_id(&self) -> usize {
        Arc::as_ptr(&self.shared) as *const () as usize
    }
}

/// The main fiber could never finish: it was dropped while suspended, with
/// nothing left that could resume it (for instance `IO::never()`, or an
/// async callback dropped without being called), and no other work remains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlock;

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "deadlock: the main fiber is suspended and nothing can resume it \
             (no runnable fiber, no timer, and every callback that could wake it was dropped)",
        )
    }
}

impl core::error::Error for Deadlock {}

/// A single-threaded executor. See the [crate documentation](crate).
pub struct SingleThreaded<C: Clock> {
    handle: Handle<C>,
}

#[cfg(feature = "std")]
impl SingleThreaded<StdClock> {
    /// An executor on the system's monotonic clock with the default
    /// [`FiberConfig`].
    pub fn new() -> Self {
        SingleThreaded::with_clock(StdClock::new())
    }

    /// An executor on the system clock with the given fiber configuration.
    pub fn with_config(config: FiberConfig) -> Self {
        SingleThreaded::with_clock_and_config(StdClock::new(), config)
    }

    /// An executor on the system clock with the default configuration and
    /// the tracing mode named by the `SPINDLE_TRACING` environment variable
    /// ([`FiberConfig::from_env`]); an unknown mode is a
    /// [`ConfigError::Tracing`] naming the valid ones. ([`new`](SingleThreaded::new)
    /// does not read the environment.)
    ///
    /// ```
    /// use spindle_exec_single::SingleThreaded;
    ///
    /// let mut rt = SingleThreaded::from_env()?;
    /// # let _ = &mut rt;
    /// # Ok::<(), spindle_core::ConfigError>(())
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(SingleThreaded::with_config(FiberConfig::from_env()?))
    }
}

#[cfg(feature = "std")]
impl Default for SingleThreaded<StdClock> {
    fn default() -> Self {
        SingleThreaded::new()
    }
}

impl<C: Clock> fmt::Debug for SingleThreaded<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleThreaded").finish_non_exhaustive()
    }
}

impl<C: Clock> SingleThreaded<C> {
    /// An executor on a clock of the user's (a SysTick counter on a
    /// microcontroller, say), with the default fiber configuration.
    pub fn with_clock(clock: C) -> Self {
        SingleThreaded::with_clock_and_config(clock, FiberConfig::default())
    }

    /// An executor on the given clock and fiber configuration.
    pub fn with_clock_and_config(clock: C, config: FiberConfig) -> Self {
        #[cfg(not(loom))]
        let fibers = spindle_core::executor::adopt_config(&config)
            .then(|| platform::Lock::new(WeakFibers::new()));
        SingleThreaded {
            handle: Handle {
                shared: Arc::new(Shared {
                    clock,
                    config,
                    local: UnsafeCell::new(Local {
                        run_queue: VecDeque::new(),
                        timers: TimerHeap::new(),
                    }),
                    remote: platform::Remote::new(),
                    #[cfg(not(loom))]
                    fibers,
                    published_ready: AtomicUsize::new(0),
                    published_timers: AtomicUsize::new(0),
                }),
            },
        }
    }

    /// A fiber dump of this executor: see [`Executor::fiber_dump`] and
    /// the [crate documentation](crate#fiber-dumps).
    #[cfg(not(loom))]
    pub fn fiber_dump(&self) -> FiberDump {
        self.handle.fiber_dump()
    }

    /// The executor handle that fibers on this executor use.
    pub fn handle(&self) -> Handle<C> {
        self.handle.clone()
    }

    /// Runs `io` as the main fiber, with every fiber it wakes, until the
    /// main fiber ends; returns its outcome.
    ///
    /// If the main fiber can never finish (see [`Deadlock`]), this waits
    /// forever, as Cats Effect's `unsafeRunSync` does on `IO.never`; use
    /// [`try_block_on`](SingleThreaded::try_block_on) to get an error instead.
    pub fn block_on<A, E>(&mut self, io: IO<A, E>) -> Outcome<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        match self.run(io, false) {
            Ok(outcome) => outcome,
            Err(Deadlock) => unreachable!("exec-single: run(.., false) waits instead of failing"),
        }
    }

    /// Like [`block_on`](SingleThreaded::block_on), but returns
    /// `Err(Deadlock)` when the main fiber can provably never finish.
    pub fn try_block_on<A, E>(&mut self, io: IO<A, E>) -> Result<Outcome<A, E>, Deadlock>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.run(io, true)
    }

    fn run<A, E>(&mut self, io: IO<A, E>, fail_on_deadlock: bool) -> Result<Outcome<A, E>, Deadlock>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let shared = &*self.handle.shared;
        let _on_loop = platform::enter_loop(self.handle.shared_id(), &shared.remote);
        let slot = self.spawn_main(io);
        loop {
            self.turn();
            if let Some(outcome) = slot.take() {
                return Ok(outcome);
            }
            if !self.has_runnable() {
                let next_deadline = self.next_deadline();
                if fail_on_deadlock
                    && next_deadline.is_none()
                    && slot.is_abandoned()
                    && shared.remote.is_empty()
                {
                    return Err(Deadlock);
                }
                platform::idle(&shared.remote, &shared.clock, next_deadline);
            }
        }
    }

    /// Queues `io` as a main fiber whose outcome lands in the returned slot.
    /// The caller runs the loop (it holds the loop marker).
    fn spawn_main<A, E>(&self, io: IO<A, E>) -> Arc<RootSlot<A, E>>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let slot = Arc::new(RootSlot::<A, E>::new());
        let guard = CompletionGuard {
            slot: slot.clone(),
            loop_handle: self.handle.clone(),
        };
        let main = Fiber::new(io, self.handle.clone(), move |outcome| {
            guard.complete(outcome)
        });
        // SAFETY: the caller runs the loop on this thread (module doc), and
        // the borrow ends with the push.
        unsafe { self.handle.shared.local() }
            .run_queue
            .push_back(main);
        slot
    }

    /// One turn of the loop: take in remote wake-ups, fire due timers, run
    /// the fibers queued now (fibers queued meanwhile wait for the next
    /// turn, so that timers and remote wake-ups are checked between
    /// batches). The caller holds the loop marker.
    fn turn(&self) {
        let shared = &*self.handle.shared;
        shared.remote.drain_into(
            // SAFETY: loop thread; the borrow ends with the call.
            &mut unsafe { shared.local() }.run_queue,
        );
        self.fire_due_timers();
        // SAFETY: loop thread.
        let batch = unsafe { shared.local() }.run_queue.len();
        for _ in 0..batch {
            // SAFETY: loop thread; the borrow ends before `run`, which
            // may re-enter `local()` through schedule_fiber/set_timer.
            let next = unsafe { shared.local() }.run_queue.pop_front();
            match next {
                Some(fiber) => fiber.run(),
                None => break,
            }
        }
        // SAFETY: loop thread; the borrow ends with the reads.
        let local = unsafe { shared.local() };
        shared
            .published_ready
            .store(local.run_queue.len(), Ordering::Relaxed);
        shared
            .published_timers
            .store(local.timers.len(), Ordering::Relaxed);
    }

    /// Whether a fiber is queued (on the loop thread).
    fn has_runnable(&self) -> bool {
        // SAFETY: loop thread; the borrow ends with the check.
        !unsafe { self.handle.shared.local() }.run_queue.is_empty()
    }

    /// The earliest timer deadline (on the loop thread).
    fn next_deadline(&self) -> Option<Duration> {
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
                Some(callback) => callback.fire(),
                None => return,
            }
        }
    }
}

impl<C: Clock> Drop for SingleThreaded<C> {
    fn drop(&mut self) {
        // Queued fibers and timer callbacks hold handles to `shared`: drop
        // them now, or the reference cycle would keep everything alive.
        let _on_loop = platform::enter_loop(self.handle.shared_id(), &self.handle.shared.remote);
        // SAFETY: `&mut self` and the marker make this thread the loop thread.
        let local = unsafe { self.handle.shared.local() };
        let queue = core::mem::take(&mut local.run_queue);
        let timers = local.timers.drain();
        drop(queue);
        drop(timers);
        let mut remote = VecDeque::new();
        self.handle.shared.remote.drain_into(&mut remote);
        drop(remote);
    }
}

/// Where the main fiber leaves its outcome.
struct RootSlot<A, E> {
    state: spin::Mutex<RootState<A, E>>,
}

enum RootState<A, E> {
    Running,
    Done(Outcome<A, E>),
    Taken,
    /// The completion callback was dropped without being called.
    Abandoned,
}

impl<A, E> RootSlot<A, E> {
    fn new() -> Self {
        RootSlot {
            state: spin::Mutex::new(RootState::Running),
        }
    }

    fn take(&self) -> Option<Outcome<A, E>> {
        let mut state = self.state.lock();
        match core::mem::replace(&mut *state, RootState::Taken) {
            RootState::Done(outcome) => Some(outcome),
            other => {
                *state = other;
                None
            }
        }
    }

    fn is_set(&self) -> bool {
        matches!(*self.state.lock(), RootState::Done(_))
    }

    fn is_abandoned(&self) -> bool {
        matches!(*self.state.lock(), RootState::Abandoned)
    }
}

/// Completes the root slot, or marks it abandoned when dropped uncalled.
///
/// Abandonment may happen on any thread (the last callback that could
/// resume the main fiber is dropped there), so it wakes the loop, which may
/// be parked waiting for exactly that fiber.
struct CompletionGuard<A, E, C: Clock> {
    slot: Arc<RootSlot<A, E>>,
    loop_handle: Handle<C>,
}

impl<A, E, C: Clock> CompletionGuard<A, E, C> {
    fn complete(self, outcome: Outcome<A, E>) {
        *self.slot.state.lock() = RootState::Done(outcome);
    }
}

impl<A, E, C: Clock> Drop for CompletionGuard<A, E, C> {
    fn drop(&mut self) {
        let abandoned = {
            let mut state = self.slot.state.lock();
            if let RootState::Running = *state {
                *state = RootState::Abandoned;
                true
            } else {
                false
            }
        };
        if abandoned {
            let shared = &self.loop_handle.shared;
            shared.remote.notify(&shared.clock);
        }
    }
}

/// Unit tests of the loop's `unsafe` paths (thread-confined state, the
/// remote queue, timers); they also run under Miri in CI.
#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use core::time::Duration;

    #[test]
    fn a_program_with_binds_timers_and_a_remote_wake_up_runs_to_its_value() {
        let mut rt = SingleThreaded::new();
        let io: IO<u32, ()> = IO::sleep(Duration::from_millis(1))
            .product_r(IO::from_callback(|cb| {
                std::thread::spawn(move || cb.succeed(20));
                None
            }))
            .flat_map(|x: u32| IO::delay(move || x + 1))
            .map(|x| x * 2);
        assert_eq!(rt.block_on(io), Outcome::Succeeded(42));
        assert_eq!(rt.block_on(IO::<u8, ()>::pure(7)), Outcome::Succeeded(7));
    }

    #[test]
    fn a_main_fiber_nothing_can_resume_is_reported_as_a_deadlock() {
        let mut rt = SingleThreaded::new();
        assert_eq!(rt.try_block_on(IO::<u8, ()>::never()), Err(Deadlock));
    }

    #[test]
    fn fibers_left_queued_are_freed_when_the_executor_is_dropped() {
        let rt = SingleThreaded::new();
        let witness = alloc::sync::Arc::new(());
        let w = witness.clone();
        let fiber = Fiber::new(
            IO::<(), ()>::sleep(Duration::from_secs(3600)).map(move |_| drop(w)),
            rt.handle(),
            |_| {},
        );
        rt.handle().schedule_fiber(fiber);
        drop(rt);
        assert_eq!(alloc::sync::Arc::strong_count(&witness), 1);
    }
}
