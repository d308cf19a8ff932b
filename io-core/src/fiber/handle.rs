//! Fiber handles: what `IO::start` returns.
//!
//! A [`FiberHandle`] shares a join state with its fiber's completion
//! callback, and holds a reference to the fiber itself to request its
//! cancellation.
//!
//! # Join protocol
//!
//! The join state holds the outcome once the fiber has completed, the
//! errors its finalizers suppressed, and the joiners waiting until then.
//! Completion stores the outcome and wakes every waiter, under the lock,
//! exactly once. A joiner that is canceled while waiting removes its waiter
//! (the async finalizer of `join`), so nothing is left behind. Every joiner
//! gets its own clone of the outcome, which is why `join` asks for `A: Clone`
//! and `E: Clone`; [`FiberHandle::join_void`] waits without reading it.
//!
//! # Cancel
//!
//! `cancel` is uncancelable: it requests cancellation (an atomic flag the
//! fiber reads at its cancellation points; a fiber suspended unmasked is
//! resumed at once), then waits until the fiber has completed, so its
//! finalizers have run when `cancel` returns. Canceling twice, or canceling
//! a fiber that has completed, only waits for (or finds) the completion.

use alloc::vec::Vec;
use core::fmt;

use super::{Fiber, RawFiberRef};
use crate::data::deferred::{Cell, wait_for};
use crate::executor::Executor;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::Arc;

/// What a completed fiber leaves: its outcome and the errors its finalizers
/// suppressed.
pub(crate) type Completed<A, E> = (Outcome<A, E>, Vec<E>);

/// The state a fiber's completion shares with its handles: a deferred
/// completed once, by the fiber's completion callback.
pub(crate) type JoinState<A, E> = Cell<Completed<A, E>>;

/// The completion callback of a fiber that fills the join state `state`.
pub(crate) fn complete_into<A: Send + 'static, E: Send + 'static>(
    state: Arc<JoinState<A, E>>,
) -> impl FnOnce(Outcome<A, E>, Vec<E>) + Send + 'static {
    move |outcome, suppressed| {
        // A fiber completes once, so the cell is empty here.
        let _ = state.complete((outcome, suppressed));
    }
}

/// A started fiber: join it, cancel it.
///
/// ```
/// use io_core::{IO, Outcome};
/// use exec_single::SingleThreaded;
/// use std::time::Duration;
///
/// let mut rt = SingleThreaded::new();
/// let joined: IO<Outcome<u32, ()>, ()> = IO::<u32, ()>::pure(7).start().flat_map(|f| f.join());
/// assert_eq!(rt.block_on(joined).succeeded(), Some(Outcome::Succeeded(7)));
///
/// let sleeper: IO<u32, ()> = IO::<(), ()>::sleep(Duration::from_secs(3600)).as_(1);
/// let canceled = sleeper.start().flat_map(|f| {
///     let joiner = f.clone();
///     IO::<(), ()>::cede().product_r(f.cancel()).product_r(joiner.join())
/// });
/// assert_eq!(rt.block_on(canceled).succeeded(), Some(Outcome::Canceled));
/// ```
///
/// Cloning a handle gives another handle to the same fiber. Dropping every
/// handle does not cancel the fiber (as in Cats Effect: a started fiber runs
/// on its own; use `background` to tie its life to a scope).
pub struct FiberHandle<A, E> {
    state: Arc<JoinState<A, E>>,
    fiber: RawFiberRef,
}

impl<A, E> Clone for FiberHandle<A, E> {
    fn clone(&self) -> Self {
        FiberHandle {
            state: self.state.clone(),
            fiber: self.fiber.clone(),
        }
    }
}

impl<A, E> fmt::Debug for FiberHandle<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiberHandle")
            .field("fiber", &self.fiber.id())
            .finish()
    }
}

impl<A: Send + 'static, E: Send + 'static> FiberHandle<A, E> {
    pub(crate) fn new(state: Arc<JoinState<A, E>>, fiber: RawFiberRef) -> Self {
        FiberHandle { state, fiber }
    }

    /// Starts `io` as a new fiber on `executor` from outside any fiber (a
    /// runtime's `spawn`, a test): the fiber is scheduled at once, and the
    /// handle joins or cancels it like one from [`IO::start`].
    pub fn spawn<X: Executor>(io: IO<A, E>, executor: &X) -> Self {
        let state = Arc::new(JoinState::new());
        let fiber = Fiber::with_suppressed(io, executor.clone(), complete_into(state.clone()));
        let handle = FiberHandle::new(state, fiber.raw_ref());
        executor.schedule_fiber(fiber);
        handle
    }

    /// Requests the fiber's cancellation without waiting (for combinators
    /// that cancel many fibers, then wait for all of them).
    pub(crate) fn request_cancel(&self) {
        self.fiber.request_cancel();
    }

    /// Waits for the fiber to complete, without reading its outcome.
    pub fn join_void<E2: Send + 'static>(&self) -> IO<(), E2> {
        wait_for(self.state.clone(), |_| ())
    }

    /// Requests the fiber's cancellation and waits until it has completed
    /// (its finalizers have run). Uncancelable, idempotent; does nothing
    /// more than wait on a fiber that has already completed.
    pub fn cancel<E2: Send + 'static>(&self) -> IO<(), E2> {
        let fiber = self.fiber.clone();
        let wait = self.join_void();
        IO::uncancelable(move |_| IO::delay(move || fiber.request_cancel()).product_r(wait))
    }

    /// Waits for the fiber to complete and moves its outcome out (for the
    /// combinators of this crate, which own the only handle that reads it:
    /// no `Clone` needed). A second take finds `Canceled`.
    pub(crate) fn take_outcome<E2: Send + 'static>(&self) -> IO<Outcome<A, E>, E2> {
        let state = self.state.clone();
        self.join_void().flat_map(move |()| {
            IO::delay(move || {
                state.with_value_mut(|completed| match completed {
                    Some((outcome, _)) => core::mem::replace(outcome, Outcome::Canceled),
                    None => unreachable!("io-core: joined fiber without an outcome"),
                })
            })
        })
    }

    /// Moves the outcome out of a completed fiber without cloning it, for
    /// the one reader that owns it (a runtime's entry point that joined
    /// with [`join_void`](FiberHandle::join_void)). `None` if the fiber has
    /// not completed, or its outcome was taken already; joiners that come
    /// after a take see `Outcome::Canceled`.
    pub fn try_take_outcome(&self) -> Option<Outcome<A, E>> {
        self.state.with_value_mut(|completed| {
            completed.map(|(outcome, _)| core::mem::replace(outcome, Outcome::Canceled))
        })
    }

    /// The errors the fiber's finalizers suppressed (ran while the fiber was
    /// already failing, canceled or panicking), once it has completed.
    pub fn suppressed_errors(&self) -> Vec<E>
    where
        E: Clone,
    {
        self.state
            .with_value(|completed| completed.map(|(_, suppressed)| suppressed.clone()))
            .unwrap_or_default()
    }
}

impl<A, E> FiberHandle<A, E>
where
    A: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    /// Waits for the fiber to complete and returns its outcome. Any number
    /// of fibers may join, any number of times: each gets the outcome.
    pub fn join<E2: Send + 'static>(&self) -> IO<Outcome<A, E>, E2> {
        wait_for(self.state.clone(), |(outcome, _)| outcome.clone())
    }

    /// Like [`join`](FiberHandle::join), but a canceled fiber makes the
    /// joiner wait forever (Cats Effect's `joinWithNever`), and an error is
    /// raised in the joiner; a panic is raised as well (as a panic).
    pub fn join_with_never(&self) -> IO<A, E> {
        self.join::<E>().flat_map(|outcome| match outcome {
            Outcome::Succeeded(a) => IO::pure(a),
            Outcome::Errored(e) => IO::raise_error(e),
            Outcome::Canceled => IO::never(),
            Outcome::Panicked(p) => IO::delay(move || -> A { panic!("{}", p.message()) }),
        })
    }
}
