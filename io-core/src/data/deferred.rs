//! `Deferred`: a value that is set once and awaited by any number of fibers.
//!
//! # Protocol
//!
//! A `Deferred` is the fiber's join cell (`JoinCell`, `fiber/join.rs`,
//! where its protocol is written down) in an `Arc`, with a typed API: the
//! same cell holds a started fiber's outcome, so the fiber core depends on
//! no data type and this one builds on it. `complete` sets the value once
//! and wakes every waiter; a second `complete` gives its value back as an
//! error, and the first value stays. `get` reads a clone of the value, or
//! waits for it; a `get` canceled while waiting removes its own waiter.

use core::fmt;

use crate::fiber::join::{CellOwner, JoinCell, Read, wait_for};
use crate::io::IO;
use crate::sync::{Arc, Weak};
use crate::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};

// The operations as traces name them.
super::trace_ops! {
    Get = "Deferred::get",
    TryGet = "Deferred::try_get",
    Complete = "Deferred::complete",
}

/// Reads a clone of the value (`Deferred::get`).
pub(crate) struct CloneValue;

impl<A: Clone + Send + 'static> Read<A> for CloneValue {
    type Out = A;
    fn read(value: &mut A) -> A {
        value.clone()
    }
}

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
/// use spindle_core::{Deferred, IO};
/// use spindle_exec_single::SingleThreaded;
///
/// let d = Deferred::<u32>::new();
/// let waiter = d.get::<()>();
/// let io = waiter.start().flat_map(move |fiber| {
///     d.complete(7).product_r(fiber.join_with_never())
/// });
/// assert_eq!(SingleThreaded::new()?.block_on(io)?.succeeded(), Some(7));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Deferred<A> {
    cell: Arc<JoinCell<A>>,
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
        self.cell.complete(value)
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
        IO::delay_at::<M, _>(site, move || cell.complete(value).map_err(AlreadyCompleted))
    }
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
            Some(value) => IO::pure(value),
            None => wait_for::<A, CloneValue, E, _, Internal>(NO_SITE, cell),
        })
    }

    /// The value if it is set, without waiting.
    #[track_caller]
    pub fn try_get<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let cell = self.cell.clone();
        IO::delay_at::<Named<TryGet>, _>(here(), move || cell.with_value(|v| v.cloned()))
    }
}
