//! [`ParkedBlockOn`]: `block_on` through a handle, from any thread, for an
//! executor whose fibers run on threads of its own (exec-wstp's workers,
//! exec-tokio's tokio runtime), so that the calling thread only parks until
//! the main fiber has ended. Written once here for every such executor;
//! the executor's [`IORuntime::block_on_with`](crate::IORuntime::block_on_with)
//! is the same call on its own handle.
//!
//! The protocol is in the trait's documentation, because this module is
//! private (the trait is public as `executor::ParkedBlockOn`; applications
//! call it through `use spindle_effect::prelude::*;`).

use crate::executor::{Executor, Fiber, OnDeadlock};
use crate::io::IO;
use crate::outcome::Outcome;

use super::support::{MainFiber, RunError};

/// A handle on which any thread that is not one of the executor's own may
/// run a program to its outcome: [`block_on`](ParkedBlockOn::block_on) and
/// [`try_block_on`](ParkedBlockOn::try_block_on), with the meaning of
/// [`IORuntime`](crate::IORuntime)'s methods of those names, for threads
/// that hold only the handle. Implemented by the handles of the executors
/// whose fibers run on threads of their own (exec-wstp, exec-tokio); import
/// the trait to call them (the entry crate's prelude does).
///
/// An executor implements the three hooks; the rest is provided, written
/// once for every such executor on top of [`Executor`] and its
/// [`is_shut_down`](Executor::is_shut_down).
///
/// # Protocol
///
/// 1. Refuse where blocking would stop the executor
///    ([`refuses_block_on_here`](ParkedBlockOn::refuses_block_on_here):
///    [`RunError::Nested`]) or where it is shut down
///    ([`RunError::ShutDown`]), before the program is touched.
/// 2. Make the main fiber with a [`MainFiber`] slot whose waiter is the
///    calling thread, and hand it to the executor
///    ([`start_main`](ParkedBlockOn::start_main)).
/// 3. Park until the slot is `Done` or `Abandoned`
///    ([`MainFiber::park_until_ended`]: the completion unparks after it
///    released the slot's lock, so no wake-up is lost).
/// 4. Done: the outcome. Abandoned (the fiber was freed without finishing)
///    means either the executor dropped it while shutting down
///    ([`RunError::ShutDown`]) or nothing could ever resume it: a
///    deadlock, reported for [`OnDeadlock::Report`]; for
///    [`OnDeadlock::Wait`] the caller keeps waiting, as Cats Effect's
///    `unsafeRunSync` does, until the executor shuts down
///    ([`wait_until_shut_down`](ParkedBlockOn::wait_until_shut_down)).
///
/// The shutdown flag is read again after the fiber was abandoned: a
/// shutdown sets it before it drops any fiber, so a fiber dropped by a
/// shutdown is never taken for a deadlock.
pub trait ParkedBlockOn: Executor {
    /// Whether parking the calling thread must be refused as nested
    /// ([`RunError::Nested`]): on one of the executor's own threads, inside
    /// one of its fibers, or anywhere else a parked thread would stall the
    /// executor that has to run the program.
    fn refuses_block_on_here(&self) -> bool;

    /// Hands the main fiber (not yet scheduled) to the executor, on the
    /// calling thread. The default schedules it from outside
    /// ([`Executor::schedule_fiber`]); an executor may run it on the
    /// calling thread first (exec-wstp and exec-tokio run it there until
    /// its first wait), as long as it returns once the fiber waits or ends.
    fn start_main(&self, fiber: Fiber<Self>) {
        self.schedule_fiber(fiber);
    }

    /// Blocks the calling thread until the executor has shut down (a
    /// `block_on` of a program that can never finish keeps waiting for
    /// that, then returns [`RunError::ShutDown`]). It must not lose a
    /// shutdown that happens between the caller's last check and the wait.
    fn wait_until_shut_down(&self);

    /// Runs `io` as a new fiber and parks the calling thread until it has
    /// ended; returns its outcome. A program that can never finish keeps
    /// it waiting until the executor shuts down (`Err(RunError::ShutDown)`);
    /// see [`IORuntime::block_on`](crate::IORuntime::block_on).
    fn block_on<A, E>(&self, io: IO<A, E>) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.block_on_with(io, OnDeadlock::Wait)
    }

    /// Like [`block_on`](ParkedBlockOn::block_on), but
    /// `Err(RunError::Deadlock)` when the fiber can provably never finish
    /// (see [`IORuntime::try_block_on`](crate::IORuntime::try_block_on)).
    fn try_block_on<A, E>(&self, io: IO<A, E>) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.block_on_with(io, OnDeadlock::Report)
    }

    /// Runs `io` as the main fiber and parks the calling thread until it
    /// has ended, with `on_deadlock` saying what a provable deadlock does:
    /// the body of [`block_on`](ParkedBlockOn::block_on),
    /// [`try_block_on`](ParkedBlockOn::try_block_on) and of the executor's
    /// [`IORuntime::block_on_with`](crate::IORuntime::block_on_with).
    fn block_on_with<A, E>(
        &self,
        io: IO<A, E>,
        on_deadlock: OnDeadlock,
    ) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        if self.refuses_block_on_here() {
            return Err(RunError::Nested);
        }
        if self.is_shut_down() {
            return Err(RunError::ShutDown);
        }
        let (main, fiber) = MainFiber::new(io, self.clone(), std::thread::current());
        self.start_main(fiber);
        main.park_until_ended();
        if let Some(outcome) = main.take() {
            return Ok(outcome);
        }
        // Abandoned: freed without finishing, by a shutdown or because
        // nothing can resume it.
        if self.is_shut_down() {
            return Err(RunError::ShutDown);
        }
        if on_deadlock.reports() {
            return Err(RunError::Deadlock);
        }
        self.wait_until_shut_down();
        Err(RunError::ShutDown)
    }
}
