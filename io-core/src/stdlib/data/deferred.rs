//! `Deferred`: a value that is set once and awaited by any number of fibers.
//!
//! # Protocol
//!
//! A `Deferred` is the fiber's join cell (`JoinCell`, `wait/cell.rs`,
//! where its protocol is written down) in an `Arc`, with a typed API: the
//! same cell holds a started fiber's outcome, so the fiber core depends on
//! no data type and this one builds on it. `complete` sets the value once
//! and wakes every waiter; a second `complete` gives its value back as an
//! error, and the first value stays. `get` reads a clone of the value, or
//! waits for it; a `get` canceled while waiting removes its own waiter.
//!
//! # One-shot reads (`take`)
//!
//! The cell holds `Option<A>`: `Some` once completed, `None` once a `take`
//! has moved the value out. A `take` waits for the value to be there
//! without reading it (the cell's `Presence` reader), and moves it out in
//! its own next step, under the cell's lock. So the value leaves the cell
//! only into a taker that is running: a taker canceled while it waits, or
//! as it is woken, takes nothing, and the value stays for another. Of
//! several takers, the first to run gets `Some(value)`, the others `None`.
//! After a take the deferred stays complete but empty: `try_get` gives
//! `None` and `get` never ends (it can only be canceled); a one-shot
//! deferred is read with `take` only.

use core::fmt;

use crate::engine::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};
use crate::io::IO;
use crate::sync::{Arc, Weak};
use crate::wait::{CellOwner, JoinCell, Presence, Read, wait_for};

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Get = "Deferred::get",
    TryGet = "Deferred::try_get",
    Complete = "Deferred::complete",
    Take = "Deferred::take",
    TryTake = "Deferred::try_take",
}

/// Reads a clone of the value (`Deferred::get`); finds nothing if a
/// `take` moved it out (the getter then waits forever: `Read::read`).
pub(crate) struct CloneValue;

impl<A: Clone + Send + 'static> Read<Option<A>> for CloneValue {
    type Out = A;
    fn read(value: &mut Option<A>) -> Option<A> {
        value.clone()
    }
}

/// A deferred's cell: the value, or `None` once a `take` moved it out.
type Cell<A> = JoinCell<Option<A>>;

impl<A: Send + 'static> CellOwner<A> for Arc<JoinCell<A>> {
    type Weak = Weak<JoinCell<A>>;

    fn cell(&self) -> &JoinCell<A> {
        self
    }

    fn downgrade(&self) -> Weak<JoinCell<A>> {
        crate::sync::downgrade(self)
    }

    fn upgrade(weak: &Weak<JoinCell<A>>) -> Option<Self> {
        weak.upgrade()
    }
}

/// A value set once, awaited by any number of fibers (Cats Effect's
/// `Deferred`).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Deferred, wstp::Runtime};
///
/// let d = Deferred::<u32>::new();
/// let waiter = d.get::<()>();
/// let io = waiter.start().flat_map(move |fiber| {
///     d.complete(7).product_r(fiber.join_with_never())
/// });
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(7));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Deferred<A> {
    cell: Arc<Cell<A>>,
}

impl<A> Clone for Deferred<A> {
    fn clone(&self) -> Self {
        Deferred {
            cell: self.cell.clone(),
        }
    }
}

impl<A> fmt::Debug for Deferred<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deferred")
            .field("complete", &self.cell.with_value(|v| v.is_some()))
            .finish()
    }
}

impl<A> Default for Deferred<A> {
    fn default() -> Self {
        Deferred::new()
    }
}

/// `Deferred::complete` on a deferred that already had a value: the value
/// given is handed back, the first value stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlreadyCompleted<A>(pub A);

impl<A> fmt::Display for AlreadyCompleted<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the deferred was already completed; its first value stays")
    }
}

impl<A: fmt::Debug> core::error::Error for AlreadyCompleted<A> {}

impl<A> Deferred<A> {
    /// An empty deferred.
    pub fn new() -> Self {
        Deferred {
            cell: Arc::new(JoinCell::new()),
        }
    }

    /// Sets the value now, from inside the crate's own combinators (not as a
    /// program); gives the value back if it was already set.
    pub(crate) fn complete_now(&self, value: A) -> Result<(), A> {
        complete_cell(&self.cell, value)
    }

    /// How many fibers are waiting in `get` (for diagnostics and tests).
    pub fn waiters(&self) -> usize {
        self.cell.waiter_count()
    }
}

impl<A: Send + 'static> Deferred<A> {
    /// Sets the value and wakes every waiting `get`; if the deferred was
    /// already complete, the value comes back in `Err(AlreadyCompleted)`.
    #[track_caller]
    pub fn complete<E: Send + 'static>(&self, value: A) -> IO<Result<(), AlreadyCompleted<A>>, E> {
        self.complete_at::<Named<Complete>, E>(here(), value)
    }

    /// [`Deferred::complete`] for io-core's own nodes (no trace event).
    pub(crate) fn complete_untraced<E: Send + 'static>(
        &self,
        value: A,
    ) -> IO<Result<(), AlreadyCompleted<A>>, E> {
        self.complete_at::<Internal, E>(NO_SITE, value)
    }

    fn complete_at<M: OpMeta, E: Send + 'static>(
        &self,
        site: Option<Site>,
        value: A,
    ) -> IO<Result<(), AlreadyCompleted<A>>, E> {
        let cell = self.cell.clone();
        IO::delay_at::<M, _>(site, move || {
            complete_cell(&cell, value).map_err(AlreadyCompleted)
        })
    }

    /// Waits for the value and moves it out: `Some(value)` for the first
    /// `take` to run after the deferred is completed, `None` for every other
    /// (the value is read once; see the module doc). For values that are
    /// not `Clone`, or that must not be copied. A `take` canceled while it
    /// waits takes nothing: the value stays for another.
    ///
    /// Do not mix `take` with `get` on one deferred: after a `take`, `get`
    /// never ends (it can still be canceled) and `try_get` gives `None`.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Deferred, wstp::Runtime};
    ///
    /// struct Token(u32); // not Clone
    /// let d = Deferred::<Token>::new();
    /// let (d1, d2) = (d.clone(), d.clone());
    /// let io: IO<(Option<u32>, Option<u32>), ()> = d.take().start().flat_map(move |first| {
    ///     d1.complete(Token(7)).product_r(first.join_with_never()).flat_map(move |got| {
    ///         d2.take().map(move |again| (got.map(|t| t.0), again.map(|t| t.0)))
    ///     })
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some((Some(7), None)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn take<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let cell = self.cell.clone();
        IO::defer_at::<Named<Take>, _>(here(), move || {
            if cell.with_value(|v| v.is_some()) {
                // Complete: move it out now, in this step.
                return IO::pure(take_from(&cell));
            }
            // Wait for the value without reading it; move it out in the
            // step that follows the wake-up (a taker canceled before that
            // step takes nothing).
            let owner = cell.clone();
            wait_for::<Option<A>, Presence, E, _, Internal>(NO_SITE, owner)
                .map_untraced(move |()| take_from(&cell))
        })
    }

    /// Moves the value out if it is there, without waiting: `None` if the
    /// deferred is not complete yet, or its value was taken already.
    #[track_caller]
    pub fn try_take<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let cell = self.cell.clone();
        IO::delay_at::<Named<TryTake>, _>(here(), move || take_from(&cell))
    }
}

/// [`Deferred::get`] of a deferred whose value was `taken` (there is
/// nothing to read, ever), or that is not complete yet (wait). Out of line:
/// the complete case stays small.
#[cold]
#[inline(never)]
fn get_slow<A: Clone + Send + 'static, E: Send + 'static>(
    cell: Arc<Cell<A>>,
    taken: bool,
) -> IO<A, E> {
    if taken {
        return IO::never_untraced();
    }
    // Completed and taken between the check and the registration: the
    // reader finds nothing and waits forever (`CloneValue`).
    wait_for::<Option<A>, CloneValue, E, _, Internal>(NO_SITE, cell)
}

/// Completes `cell` with `value`; gives the value back if it was already
/// completed (even if a `take` emptied it since).
fn complete_cell<A>(cell: &Cell<A>, value: A) -> Result<(), A> {
    match cell.complete(Some(value)) {
        Ok(()) => Ok(()),
        Err(Some(value)) => Err(value),
        // The cell gives back what it was given, which was `Some`.
        Err(None) => Ok(()),
    }
}

/// Moves the value out of `cell`, under its lock, if it is there.
fn take_from<A>(cell: &Cell<A>) -> Option<A> {
    cell.with_value_mut(|v| v.and_then(Option::take))
}

impl<A: Clone + Send + 'static> Deferred<A> {
    /// Waits for the value (a clone of it). Canceling the wait leaves no
    /// waiter behind.
    #[track_caller]
    pub fn get<E: Send + 'static>(&self) -> IO<A, E> {
        self.get_at::<Named<Get>, E>(here())
    }

    /// [`Deferred::get`] for io-core's own nodes (no trace event).
    pub(crate) fn get_untraced<E: Send + 'static>(&self) -> IO<A, E> {
        self.get_at::<Internal, E>(NO_SITE)
    }

    /// [`Deferred::get`] recorded as the operation `M` at `site`.
    pub(crate) fn get_at<M: OpMeta, E: Send + 'static>(&self, site: Option<Site>) -> IO<A, E> {
        let cell = self.cell.clone();
        IO::defer_at::<M, _>(site, move || match cell.with_value(|v| v.cloned()) {
            // Already complete: one step, no waiter, no suspension.
            Some(Some(value)) => IO::pure(value),
            taken_or_not_yet => get_slow(cell, taken_or_not_yet.is_some()),
        })
    }

    /// The value if it is set, without waiting.
    #[track_caller]
    pub fn try_get<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let cell = self.cell.clone();
        IO::delay_at::<Named<TryGet>, _>(here(), move || cell.with_value(|v| v.cloned().flatten()))
    }
}
