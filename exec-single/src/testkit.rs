//! `TestControl`: run a program on virtual time, step by step (Cats
//! Effect's `TestControl`).
//!
//! The program runs on a [`SingleThreaded`] executor whose clock is a
//! [`VirtualClock`] that only moves when the test says so. Nothing ever
//! waits for real time: a program that sleeps for a day finishes in
//! microseconds, and every run of the same program steps through the same
//! states.
//!
//! * [`tick`](TestControl::tick) runs every fiber that can run at the
//!   current virtual time, until none can (firing the timers that are due).
//! * [`advance`](TestControl::advance) moves the clock without running.
//! * [`next_interval`](TestControl::next_interval) is the time to the next
//!   timer; [`tick_all`](TestControl::tick_all) alternates ticks and
//!   advances until the main fiber completes or nothing is left to do.
//! * [`results`](TestControl::results) is the main fiber's outcome, once it
//!   has one; [`is_deadlocked`](TestControl::is_deadlocked) says that it
//!   never will (no runnable fiber, no timer, not completed).
//!
//! There is no I/O under `TestControl`: virtual time has no poller to wait
//! in, so a socket made by a program under test (spindle-net's
//! `TcpListener::bind`, ...) fails with an `io::Error` of kind
//! `Unsupported`.
//!
//! ```
//! use std::time::Duration;
//!
//! use spindle_effect::single::testkit::TestControl;
//! use spindle_effect::{IO, Outcome};
//!
//! let day = Duration::from_secs(86_400);
//! let program: IO<Duration, ()> = IO::sleep(day).product_r(IO::monotonic());
//! let mut control = TestControl::execute(program);
//! control.tick();
//! assert_eq!(control.next_interval(), Some(day));
//! control.advance_and_tick(day);
//! assert_eq!(control.results(), Some(&Outcome::Succeeded(day)));
//! ```

use core::fmt;
use core::time::Duration;

use spindle_core::error::RunError;
use spindle_core::executor::support::MainFiber;
use spindle_core::{FiberConfig, IO, Outcome};

use crate::sync::Arc;
use crate::{Clock, SingleThreaded};

/// A clock that moves only when told to (shared by its clones).
#[derive(Clone, Default)]
pub struct VirtualClock {
    now: Arc<spin::Mutex<Duration>>,
}

impl fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("VirtualClock").field(&self.now()).finish()
    }
}

impl VirtualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        VirtualClock::default()
    }

    /// Moves the clock forward by `by` (saturating at `Duration::MAX`).
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock();
        *now = now.saturating_add(by);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        *self.now.lock()
    }

    fn wait(&self, _deadline: Option<Duration>) {
        // Never called by TestControl, which never idles; a loop on a
        // virtual clock must not wait for real time.
    }
}

/// A program under test, run on virtual time. See the [module doc](self).
pub struct TestControl<A, E> {
    executor: SingleThreaded<VirtualClock>,
    clock: VirtualClock,
    slot: MainFiber<A, E>,
    outcome: Option<Outcome<A, E>>,
}

impl<A, E> fmt::Debug for TestControl<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestControl")
            .field("now", &self.clock.now())
            .field("completed", &self.outcome.is_some())
            .finish_non_exhaustive()
    }
}

impl<A: Send + 'static, E: Send + 'static> TestControl<A, E> {
    /// Prepares `program` as the main fiber, at virtual time zero; nothing
    /// runs until [`tick`](TestControl::tick).
    pub fn execute(program: IO<A, E>) -> Self {
        TestControl::execute_with_config(program, FiberConfig::default())
    }

    /// Like [`execute`](TestControl::execute), with a fiber configuration.
    pub fn execute_with_config(program: IO<A, E>, config: FiberConfig) -> Self {
        let clock = VirtualClock::new();
        // No I/O capability: virtual time has no poller to wait in, and a
        // socket made here fails with spindle-net's `Unsupported` error.
        let executor = SingleThreaded::from_parts(
            clock.clone(),
            config,
            spindle_core::executor::support::FiberRegistry::new(&config, false, 1),
            crate::platform::no_io(),
        );
        let slot = {
            let _on_loop = executor.enter();
            executor.spawn_main(program)
        };
        TestControl {
            executor,
            clock,
            slot,
            outcome: None,
        }
    }

    /// Runs `program` to its outcome on virtual time ([`tick_all`]); fails
    /// with [`RunError::Deadlock`] if it can never complete.
    ///
    /// [`tick_all`]: TestControl::tick_all
    pub fn run(program: IO<A, E>) -> Result<Outcome<A, E>, RunError> {
        let mut control = TestControl::execute(program);
        control.tick_all();
        control.outcome.take().ok_or(RunError::Deadlock)
    }

    /// Runs every fiber that can run at the current virtual time, firing
    /// the timers that are due, until none can.
    pub fn tick(&mut self) {
        let _on_loop = self.executor.enter();
        let remote = &self.executor.handle.shared.remote;
        loop {
            self.executor.turn();
            if !self.executor.has_runnable() && !self.due_timer() && remote.is_empty() {
                break;
            }
        }
        if self.outcome.is_none() {
            self.outcome = self.slot.take();
        }
    }

    fn due_timer(&self) -> bool {
        self.executor
            .next_deadline()
            .is_some_and(|deadline| deadline <= self.clock.now())
    }

    /// Moves virtual time forward without running anything.
    pub fn advance(&mut self, by: Duration) {
        self.clock.advance(by);
    }

    /// [`advance`](TestControl::advance), then [`tick`](TestControl::tick).
    pub fn advance_and_tick(&mut self, by: Duration) {
        self.advance(by);
        self.tick();
    }

    /// Time from now to the next timer, if one is set.
    pub fn next_interval(&self) -> Option<Duration> {
        let _on_loop = self.executor.enter();
        self.executor
            .next_deadline()
            .map(|deadline| deadline.saturating_sub(self.clock.now()))
    }

    /// Ticks, and advances to the next timer, until the main fiber has an
    /// outcome or nothing is left to run.
    pub fn tick_all(&mut self) {
        loop {
            self.tick();
            if self.outcome.is_some() {
                return;
            }
            match self.next_interval() {
                Some(interval) => self.advance(interval),
                None => return,
            }
        }
    }

    /// The main fiber's outcome, once it has one.
    pub fn results(&self) -> Option<&Outcome<A, E>> {
        self.outcome.as_ref()
    }

    /// Takes the main fiber's outcome out.
    pub fn take_results(&mut self) -> Option<Outcome<A, E>> {
        self.outcome.take()
    }

    /// The current virtual time.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Whether the main fiber can never complete: it has no outcome, no
    /// fiber can run, no timer is set, and no wake-up is pending.
    pub fn is_deadlocked(&self) -> bool {
        let _on_loop = self.executor.enter();
        self.outcome.is_none()
            && !self.slot.is_done()
            && !self.executor.has_runnable()
            && self.executor.next_deadline().is_none()
            && self.executor.handle.shared.remote.is_empty()
    }
}
