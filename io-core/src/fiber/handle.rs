//! Fiber handles: what `IO::start` returns.
//!
//! A [`FiberHandle`] is a strong reference to its fiber: it reaches the
//! fiber's header, where the join state lives, and requests cancellation
//! there.
//!
//! # Join: one owner moves the outcome out
//!
//! The outcome waits in the join cell inside the fiber's header (protocol:
//! `join.rs`). A handle is unique, as tokio's `JoinHandle` is: it is not
//! `Clone`, and [`join`](FiberHandle::join) takes it by value and *moves*
//! the outcome out of the cell. So joining asks nothing of `A` and `E`: a
//! fiber whose error is `std::io::Error`, or whose value is a socket, can be
//! joined. (An earlier design let any number of cloned handles join, each
//! receiving a clone of the outcome; that made `join` require `A: Clone`
//! and `E: Clone`, which ruled those programs out.)
//!
//! What borrows the handle, and so may be called any number of times before
//! the join: [`cancel`](FiberHandle::cancel) and
//! [`join_void`](FiberHandle::join_void) (which waits without reading the
//! outcome); each builds a program that holds its own reference to the
//! fiber, so the handle can be moved or joined after building them. That is
//! all io-core's own combinators need (a race's cancel paths use `cancel`,
//! and the one reader of the outcome owns the handle).
//!
//! Code that must cancel from elsewhere while the owner joins (a signal
//! handler that cancels the main fiber, any number of times) takes a
//! [`CancelHandle`] ([`FiberHandle::cancel_handle`]): `Clone`, untyped, it
//! can cancel and wait but never read the outcome, as tokio's `AbortHandle`
//! beside its `JoinHandle`. Code that wants the outcome in several places
//! shares a `Deferred` that the one joiner completes, which says who owns
//! the value.
//!
//! # Cancel
//!
//! `cancel` is uncancelable: it requests cancellation (an atomic flag the
//! fiber reads at its cancellation points; a fiber suspended unmasked is
//! resumed at once), then waits until the fiber has completed, so its
//! finalizers have run when `cancel` returns. Canceling twice, or canceling
//! a fiber that has completed, only waits for (or finds) the completion;
//! joining after a cancel finds `Outcome::Canceled` (unless the fiber
//! completed first).

use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;

use super::join::{Completed, JoinRef};
use super::run_state::typed_outcome;
use super::vtable::{RawFiberRef, Spawn};
use crate::engine::tracing::{ChildTraces, Internal, NO_SITE, Named, OpMeta, Site, here};
use crate::executor::{Executor, FiberId};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::wait::{CellOwner, Presence, Read, wait_for};

// The handle's operations as traces name them.
crate::engine::tracing::trace_ops! {
    Join = "join",
    JoinVoid = "join_void",
    JoinWithNever = "join_with_never",
    Cancel = "cancel",
}

/// Moves a joined fiber's outcome out of its join state as an
/// `Outcome<A, E>`, leaving `Outcome::Canceled` behind. Used only by the
/// owner of a `FiberHandle<A, E>`, whose fiber's program is an `IO<A, E>`:
/// that is what makes the typed reads sound.
struct TakeOutcome<A, E>(PhantomData<fn() -> (A, E)>);

impl<A: Send + 'static, E: Send + 'static> TakeOutcome<A, E> {
    /// Moves the outcome out (every completed fiber has one).
    fn take((outcome, _): &mut Completed) -> Outcome<A, E> {
        let taken = core::mem::replace(outcome, Outcome::Canceled);
        // SAFETY: this reader waits only on the join state of a fiber whose
        // program is an `IO<A, E>` (see the type's doc).
        unsafe { typed_outcome::<A, E>(taken) }
    }
}

impl<A, E> Read<Completed> for TakeOutcome<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    type Out = Outcome<A, E>;

    fn read(completed: &mut Completed) -> Option<Outcome<A, E>> {
        Some(Self::take(completed))
    }
}

/// Moves a joined fiber's outcome out of its join state, with the traces
/// its error came from (for [`FiberHandle::join_with_never`], which raises
/// the error again with them); as [`TakeOutcome`] otherwise.
struct TakeFailure<A, E>(PhantomData<fn() -> (A, E)>);

impl<A, E> Read<Completed> for TakeFailure<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    type Out = (Outcome<A, E>, ChildTraces);

    fn read(completed: &mut Completed) -> Option<(Outcome<A, E>, ChildTraces)> {
        let traces = completed
            .1
            .as_mut()
            .map(|leftovers| core::mem::take(&mut leftovers.traces))
            .unwrap_or_default();
        Some((TakeOutcome::<A, E>::take(completed), traces))
    }
}

/// A started fiber: join it, cancel it.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
/// use std::time::Duration;
///
/// let rt = Runtime::new()?;
/// let joined: IO<Outcome<u32, ()>, ()> = IO::<u32, ()>::pure(7).start().flat_map(|f| f.join());
/// assert_eq!(rt.block_on(joined)?.succeeded(), Some(Outcome::Succeeded(7)));
///
/// let sleeper: IO<u32, ()> = IO::<(), ()>::sleep(Duration::from_secs(3600)).map_to(1);
/// let canceled = sleeper
///     .start()
///     .flat_map(|f| IO::<(), ()>::cede().product_r(f.cancel()).product_r(f.join()));
/// assert_eq!(rt.block_on(canceled)?.succeeded(), Some(Outcome::Canceled));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A handle is unique (not `Clone`): [`join`](FiberHandle::join) consumes
/// it and moves the outcome out, so `A` and `E` need not be `Clone`
/// (module doc of `handle`). Dropping the handle does not cancel the fiber
/// (as in Cats Effect: a started fiber runs on its own; use `background`
/// to tie its life to a scope).
///
/// Async code awaits a handle directly: `FiberHandle` is
/// [`IntoFuture`](core::future::IntoFuture), with the fiber's outcome as
/// output (a [`JoinFuture`](crate::JoinFuture), which detaches the fiber
/// when dropped unless asked to cancel it).
pub struct FiberHandle<A, E> {
    /// A fiber whose program is an `IO<A, E>`.
    fiber: JoinRef,
    _types: PhantomData<fn() -> (A, E)>,
}

impl<A, E> fmt::Debug for FiberHandle<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiberHandle")
            .field("fiber", &self.fiber.id())
            .finish()
    }
}

impl<A: Send + 'static, E: Send + 'static> FiberHandle<A, E> {
    /// The handle of `fiber`.
    ///
    /// # Safety
    /// * `fiber`'s program is an `IO<A, E>`, and its outcome goes to its
    ///   join state (it was made without a completion callback).
    pub(crate) unsafe fn from_fiber(fiber: RawFiberRef) -> Self {
        FiberHandle {
            // SAFETY: forwarded precondition: made without a completion
            // callback.
            fiber: unsafe { JoinRef::new(fiber) },
            _types: PhantomData,
        }
    }

    /// The fiber's number on its executor (`#1` for the first fiber the
    /// executor made; see [`FiberId`]): the number fiber dumps and this
    /// handle's `Debug` (`FiberHandle { fiber: #2 }`) show.
    pub fn id(&self) -> FiberId {
        self.fiber.id()
    }

    /// The fiber reference (for the handle's future, `future/join.rs`),
    /// whose program is an `IO<A, E>`.
    pub(crate) fn into_raw(self) -> JoinRef {
        self.fiber
    }

    /// Starts `io` as a new fiber on `executor` from outside any fiber (a
    /// runtime's `spawn`, a test): the fiber is scheduled at once, and the
    /// handle joins or cancels it like one from [`IO::start`].
    pub fn spawn<X: Executor>(io: IO<A, E>, executor: &X) -> Self {
        let fiber = Spawn::spawn_child(executor, io.into_node(), None, false);
        // SAFETY: the fiber runs `io` and has no completion callback.
        unsafe { FiberHandle::from_fiber(fiber) }
    }

    /// Waits for the fiber to complete and returns its outcome, moved out
    /// of the fiber (no `Clone` needed). Consumes the handle: a fiber is
    /// joined once; [`join_void`](FiberHandle::join_void) and
    /// [`cancel`](FiberHandle::cancel) borrow it and may come before.
    ///
    /// An error in the outcome is a plain value, without the child's trace
    /// (an `E` cannot carry it): raise it again with
    /// [`join_with_never`](FiberHandle::join_with_never) to keep the trace,
    /// or run the child as `io.trace_errors()`.
    #[track_caller]
    pub fn join<E2: Send + 'static>(self) -> IO<Outcome<A, E>, E2> {
        wait_for::<Completed, TakeOutcome<A, E>, E2, _, Named<Join>>(here(), self.fiber)
    }

    /// Like [`join`](FiberHandle::join), but a canceled fiber makes the
    /// joiner wait forever (Cats Effect's `joinWithNever`), and an error is
    /// raised in the joiner; a panic is raised as well (as a panic).
    ///
    /// An error raised again here keeps the child's trace at the point of
    /// failure: [`trace_errors`](IO::trace_errors) in the joiner shows it
    /// before the joiner's own ([`Traced::child_traces`](crate::Traced::child_traces)).
    /// ([`join`](FiberHandle::join) hands the outcome over as a value,
    /// without the child's trace.)
    #[track_caller]
    pub fn join_with_never(self) -> IO<A, E> {
        wait_for::<Completed, TakeFailure<A, E>, E, _, Named<JoinWithNever>>(here(), self.fiber)
            .flat_map_untraced(|(outcome, traces)| outcome.embed_never_from_child(traces))
    }

    /// Waits for the fiber to complete, without reading its outcome.
    #[track_caller]
    pub fn join_void<E2: Send + 'static>(&self) -> IO<(), E2> {
        wait_for::<Completed, Presence, E2, _, Named<JoinVoid>>(here(), self.fiber.clone())
    }

    /// [`FiberHandle::join_void`] for io-core's own nodes (no trace event).
    pub(crate) fn join_void_untraced<E2: Send + 'static>(&self) -> IO<(), E2> {
        wait_for::<Completed, Presence, E2, _, Internal>(NO_SITE, self.fiber.clone())
    }

    /// Requests the fiber's cancellation and waits until it has completed
    /// (its finalizers have run). Uncancelable, idempotent; does nothing
    /// more than wait on a fiber that has already completed.
    #[track_caller]
    pub fn cancel<E2: Send + 'static>(&self) -> IO<(), E2> {
        self.cancel_at::<Named<Cancel>, E2>(here())
    }

    /// [`FiberHandle::cancel`] for io-core's own nodes (no trace event).
    pub(crate) fn cancel_untraced<E2: Send + 'static>(&self) -> IO<(), E2> {
        self.cancel_at::<Internal, E2>(NO_SITE)
    }

    fn cancel_at<M: OpMeta, E2: Send + 'static>(&self, site: Option<Site>) -> IO<(), E2> {
        cancel_at::<M, E2>(&self.fiber, site)
    }

    /// A cheap, cloneable handle that can cancel the fiber and wait for it,
    /// but not read its outcome (module doc of `handle`).
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            fiber: self.fiber.clone(),
        }
    }

    /// Waits for the fiber to complete and moves its outcome out, without
    /// consuming the handle (for the combinators of this crate, whose
    /// handles are shared by their cancel paths, and which read the outcome
    /// once). A second take finds `Canceled`.
    pub(crate) fn take_outcome<E2: Send + 'static>(&self) -> IO<Outcome<A, E>, E2> {
        wait_for::<Completed, TakeOutcome<A, E>, E2, _, Internal>(NO_SITE, self.fiber.clone())
    }

    /// Moves the outcome out of a completed fiber, for the one reader that
    /// owns it (a runtime's entry point that joined with
    /// [`join_void`](FiberHandle::join_void)). `None` if the fiber has not
    /// completed, or its outcome was taken already; a take after that sees
    /// `Outcome::Canceled`.
    pub fn try_take_outcome(&self) -> Option<Outcome<A, E>> {
        let taken = self.fiber.cell().with_value_mut(|completed| {
            completed.map(|(outcome, _)| core::mem::replace(outcome, Outcome::Canceled))
        })?;
        // SAFETY: the fiber's program is an `IO<A, E>` (`from_fiber`).
        Some(unsafe { typed_outcome::<A, E>(taken) })
    }

    /// The errors the fiber's finalizers suppressed (ran while the fiber was
    /// already failing, canceled or panicking), once it has completed.
    ///
    /// Only errors of the fiber's error type `E`: one suppressed inside a
    /// scope of another error type (under `map_err`, before it became an
    /// `E`) cannot be expressed as an `E` and is left out.
    pub fn suppressed_errors(&self) -> Vec<E>
    where
        E: Clone,
    {
        self.fiber.cell().with_value(|completed| match completed {
            Some((_, Some(leftovers))) => leftovers
                .suppressed
                .iter()
                // An error suppressed inside a scope of another error type
                // (under `map_err`) is not an `E`: left out (see
                // `run_state::typed_suppressed`).
                .filter(|e| e.is::<E>())
                // SAFETY: the filter above checked that the value is an `E`.
                .map(|e| unsafe { e.peek::<E>() }.clone())
                .collect(),
            _ => Vec::new(),
        })
    }
}

/// Requests the cancellation of `fiber` and waits until it has completed
/// (shared by [`FiberHandle::cancel`] and [`CancelHandle::cancel`]).
fn cancel_at<M: OpMeta, E2: Send + 'static>(fiber: &JoinRef, site: Option<Site>) -> IO<(), E2> {
    let wait = wait_for::<Completed, Presence, E2, _, Internal>(NO_SITE, fiber.clone());
    let fiber = fiber.clone();
    IO::uncancelable_at::<M, _>(site, move |_| {
        IO::delay_untraced(move || fiber.request_cancel()).product_r_untraced(wait)
    })
}

/// Cancels a started fiber, or waits for it, from anywhere: made by
/// [`FiberHandle::cancel_handle`], `Clone`, and blind to the fiber's types
/// (it never reads the outcome; the [`FiberHandle`] owns that).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
/// use std::time::Duration;
///
/// let sleeper: IO<u32, ()> = IO::<(), ()>::sleep(Duration::from_secs(3600)).map_to(1);
/// let io = sleeper.start().flat_map(|f| {
///     let canceler = f.cancel_handle();
///     IO::<(), ()>::cede().product_r(canceler.cancel()).product_r(f.join())
/// });
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(Outcome::Canceled));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CancelHandle {
    fiber: JoinRef,
}

impl fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelHandle")
            .field("fiber", &self.fiber.id())
            .finish()
    }
}

impl CancelHandle {
    /// Requests the fiber's cancellation and waits until it has completed,
    /// as [`FiberHandle::cancel`] does.
    #[track_caller]
    pub fn cancel<E2: Send + 'static>(&self) -> IO<(), E2> {
        cancel_at::<Named<Cancel>, E2>(&self.fiber, here())
    }

    /// Waits for the fiber to complete, as [`FiberHandle::join_void`] does.
    #[track_caller]
    pub fn join_void<E2: Send + 'static>(&self) -> IO<(), E2> {
        wait_for::<Completed, Presence, E2, _, Named<JoinVoid>>(here(), self.fiber.clone())
    }
}
