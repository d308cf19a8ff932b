//! Fiber handles: what `IO::start` returns.
//!
//! A [`FiberHandle`] is a strong reference to its fiber: it reaches the
//! fiber's header, where the join state lives, and requests cancellation
//! there.
//!
//! # Join protocol
//!
//! The join state (a [`Cell`], the cell behind `Deferred`, inside the
//! fiber's header) holds the outcome once the fiber has completed, the
//! errors its finalizers suppressed, and the joiners waiting until then.
//! Completion stores the outcome and wakes every waiter exactly once. A
//! joiner that is canceled while waiting removes its waiter (the async
//! finalizer of `join`), so nothing is left behind. Every joiner gets its
//! own clone of the outcome, which is why `join` asks for `A: Clone` and
//! `E: Clone`; [`FiberHandle::join_void`] waits without reading it.
//!
//! The outcome is stored erased (`Outcome<Value, Value>`): the header does
//! not know the fiber's types. The handle does (it is made only for a fiber
//! of an `IO<A, E>`), and reads the values back as `A` and `E`. Keeping the
//! join state in the fiber makes starting a fiber one allocation, and a
//! handle one pointer and a vtable; the cost is that a handle kept after
//! the fiber completed keeps the fiber's allocation (whose program and
//! stack are gone by then) rather than a smaller separate one, as tokio's
//! `JoinHandle` keeps its task.
//!
//! # Cancel
//!
//! `cancel` is uncancelable: it requests cancellation (an atomic flag the
//! fiber reads at its cancellation points; a fiber suspended unmasked is
//! resumed at once), then waits until the fiber has completed, so its
//! finalizers have run when `cancel` returns. Canceling twice, or canceling
//! a fiber that has completed, only waits for (or finds) the completion.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;

use super::{RawFiberRef, Spawn, typed_outcome};
use crate::data::deferred::{Cell, CellOwner, Presence, Read, wait_for};
use crate::erased::Value;
use crate::executor::Executor;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};

// The handle's operations as traces name them.
crate::data::trace_ops! {
    Join = "join",
    JoinVoid = "join_void",
    JoinWithNever = "join_with_never",
    Cancel = "cancel",
}

/// What a completed fiber leaves: its erased outcome and the errors its
/// finalizers suppressed (boxed, and only if there are any: the join state
/// is part of every fiber).
pub(crate) type Completed = (Outcome<Value, Value>, Option<Box<Vec<Value>>>);

/// The join state in a fiber's header.
pub(crate) type JoinCell = Cell<Completed>;

/// Completes a fiber's join state (from the run-loop, once).
pub(crate) fn complete_join(
    join: &JoinCell,
    outcome: Outcome<Value, Value>,
    suppressed: Vec<Value>,
) {
    let suppressed = if suppressed.is_empty() {
        None
    } else {
        Some(Box::new(suppressed))
    };
    // A fiber completes once, so the cell is empty here.
    let _ = join.complete((outcome, suppressed));
}

impl CellOwner<Completed> for RawFiberRef {
    fn cell(&self) -> &Cell<Completed> {
        &self.header().join
    }
}

/// Reads a joined fiber's outcome as an `Outcome<A, E>` (a clone). Used
/// only by `FiberHandle<A, E>::join`, whose fiber's program is an
/// `IO<A, E>`: that is what makes the typed reads below sound.
struct CloneOutcome<A, E>(PhantomData<fn() -> (A, E)>);

impl<A, E> Read<Completed> for CloneOutcome<A, E>
where
    A: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    type Out = Outcome<A, E>;

    fn read((outcome, _): &Completed) -> Outcome<A, E> {
        // SAFETY: this reader waits only on the join state of a fiber whose
        // program is an `IO<A, E>` (see the type's doc): its value is an `A`,
        // its error an `E`.
        match outcome {
            Outcome::Succeeded(a) => Outcome::Succeeded(unsafe { a.peek::<A>() }.clone()),
            Outcome::Errored(e) => Outcome::Errored(unsafe { e.peek::<E>() }.clone()),
            Outcome::Canceled => Outcome::Canceled,
            Outcome::Panicked(p) => Outcome::Panicked(p.clone()),
        }
    }
}

/// A started fiber: join it, cancel it.
///
/// ```
/// use spindle_core::{IO, Outcome};
/// use spindle_exec_single::SingleThreaded;
/// use std::time::Duration;
///
/// let rt = SingleThreaded::new()?;
/// let joined: IO<Outcome<u32, ()>, ()> = IO::<u32, ()>::pure(7).start().flat_map(|f| f.join());
/// assert_eq!(rt.block_on(joined)?.succeeded(), Some(Outcome::Succeeded(7)));
///
/// let sleeper: IO<u32, ()> = IO::<(), ()>::sleep(Duration::from_secs(3600)).map_to(1);
/// let canceled = sleeper.start().flat_map(|f| {
///     let joiner = f.clone();
///     IO::<(), ()>::cede().product_r(f.cancel()).product_r(joiner.join())
/// });
/// assert_eq!(rt.block_on(canceled)?.succeeded(), Some(Outcome::Canceled));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Cloning a handle gives another handle to the same fiber. Dropping every
/// handle does not cancel the fiber (as in Cats Effect: a started fiber runs
/// on its own; use `background` to tie its life to a scope).
pub struct FiberHandle<A, E> {
    /// A fiber whose program is an `IO<A, E>`.
    fiber: RawFiberRef,
    _types: PhantomData<fn() -> (A, E)>,
}

impl<A, E> Clone for FiberHandle<A, E> {
    fn clone(&self) -> Self {
        FiberHandle {
            fiber: self.fiber.clone(),
            _types: PhantomData,
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
    /// The handle of `fiber`.
    ///
    /// # Safety
    /// * `fiber`'s program is an `IO<A, E>`, and its outcome goes to its
    ///   join state (it was made without a completion callback).
    pub(crate) unsafe fn from_fiber(fiber: RawFiberRef) -> Self {
        FiberHandle {
            fiber,
            _types: PhantomData,
        }
    }

    /// Starts `io` as a new fiber on `executor` from outside any fiber (a
    /// runtime's `spawn`, a test): the fiber is scheduled at once, and the
    /// handle joins or cancels it like one from [`IO::start`].
    pub fn spawn<X: Executor>(io: IO<A, E>, executor: &X) -> Self {
        let fiber = Spawn::spawn_child(executor, io.into_node(), None, false);
        // SAFETY: the fiber runs `io` and has no completion callback.
        unsafe { FiberHandle::from_fiber(fiber) }
    }

    /// Waits for the fiber to complete, without reading its outcome.
    #[track_caller]
    pub fn join_void<E2: Send + 'static>(&self) -> IO<(), E2> {
        wait_for::<Completed, Presence, E2, _, Named<JoinVoid>>(here(), self.fiber.clone())
    }

    /// [`FiberHandle::join_void`] for io-core's own nodes (no trace event).
    ///
    /// Public (hidden) for Spindle's other crates, whose plumbing must not
    /// show in their users' traces either; not a stable API.
    #[doc(hidden)]
    pub fn join_void_untraced<E2: Send + 'static>(&self) -> IO<(), E2> {
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
        let fiber = self.fiber.clone();
        let wait = self.join_void_untraced();
        IO::uncancelable_at::<M, _>(site, move |_| {
            IO::delay_untraced(move || fiber.request_cancel()).product_r_untraced(wait)
        })
    }

    /// Waits for the fiber to complete and moves its outcome out (for the
    /// combinators of this crate, which own the only handle that reads it:
    /// no `Clone` needed). A second take finds `Canceled`.
    pub(crate) fn take_outcome<E2: Send + 'static>(&self) -> IO<Outcome<A, E>, E2> {
        let handle = self.clone();
        self.join_void_untraced().flat_map_untraced(move |()| {
            IO::delay_untraced(move || match handle.try_take_outcome() {
                Some(outcome) => outcome,
                None => unreachable!("io-core: joined fiber without an outcome"),
            })
        })
    }

    /// Moves the outcome out of a completed fiber without cloning it, for
    /// the one reader that owns it (a runtime's entry point that joined
    /// with [`join_void`](FiberHandle::join_void)). `None` if the fiber has
    /// not completed, or its outcome was taken already; joiners that come
    /// after a take see `Outcome::Canceled`.
    pub fn try_take_outcome(&self) -> Option<Outcome<A, E>> {
        let taken = self.fiber.cell().with_value_mut(|completed| {
            completed.map(|(outcome, _)| core::mem::replace(outcome, Outcome::Canceled))
        })?;
        // SAFETY: the fiber's program is an `IO<A, E>` (`from_fiber`).
        Some(unsafe { typed_outcome::<A, E>(taken) })
    }

    /// The errors the fiber's finalizers suppressed (ran while the fiber was
    /// already failing, canceled or panicking), once it has completed.
    pub fn suppressed_errors(&self) -> Vec<E>
    where
        E: Clone,
    {
        self.fiber.cell().with_value(|completed| match completed {
            Some((_, Some(suppressed))) => suppressed
                .iter()
                // SAFETY: suppressed errors are values of the fiber's error
                // type `E` (`from_fiber`).
                .map(|e| unsafe { e.peek::<E>() }.clone())
                .collect(),
            _ => Vec::new(),
        })
    }
}

impl<A, E> FiberHandle<A, E>
where
    A: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    /// Waits for the fiber to complete and returns its outcome. Any number
    /// of fibers may join, any number of times: each gets the outcome.
    #[track_caller]
    pub fn join<E2: Send + 'static>(&self) -> IO<Outcome<A, E>, E2> {
        wait_for::<Completed, CloneOutcome<A, E>, E2, _, Named<Join>>(here(), self.fiber.clone())
    }

    /// Like [`join`](FiberHandle::join), but a canceled fiber makes the
    /// joiner wait forever (Cats Effect's `joinWithNever`), and an error is
    /// raised in the joiner; a panic is raised as well (as a panic).
    #[track_caller]
    pub fn join_with_never(&self) -> IO<A, E> {
        wait_for::<Completed, CloneOutcome<A, E>, E, _, Named<JoinWithNever>>(
            here(),
            self.fiber.clone(),
        )
        .flat_map_untraced(Outcome::embed_never_untraced)
    }
}
