//! `Deferred`: a value that is set once and awaited by any number of fibers.
//!
//! # Protocol
//!
//! The state (behind a short lock of the sync shim, never held across a
//! suspension) is either *empty* with a list of waiters, or *complete* with
//! the value. `complete` moves it from empty to complete and takes the
//! waiter list under the lock; each waiter reads the value under the lock
//! and hands back the fiber to resume with what it read, and the fibers are
//! resumed after the lock is released (a resumed fiber may run at once on
//! another thread and read this cell: it must not find the lock held while
//! its waker schedules it). `get`
//! either reads the value under the lock or registers a waiter; a `get`
//! canceled while waiting removes its own waiter (the async finalizer), so
//! nothing is left behind. A second `complete` finds the state complete and
//! gives its value back as an error; the first value stays.

#[cfg(all(loom, test))]
use alloc::boxed::Box;
use core::fmt;

use super::waiters::WaiterList;
use crate::erased::Value;
use crate::fiber::RawCallback;
use crate::io::IO;
use crate::sync::{Arc, Mutex};
use crate::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};

// The operations as traces name them.
super::trace_ops! {
    Get = "Deferred::get",
    TryGet = "Deferred::try_get",
    Complete = "Deferred::complete",
}

/// One waiting reader of a cell.
pub(crate) enum Waiter<A> {
    /// A fiber (a `get`, a join) to resume with what `read` makes of the
    /// value. Stored inline in the waiter list: waiting is no allocation
    /// beyond the list's entry.
    Resume {
        callback: RawCallback,
        read: fn(&A) -> Value,
    },
    /// Any reader (the loom models' probes): reads the value, and returns
    /// the fiber to resume, if any.
    #[cfg(all(loom, test))]
    Call(Box<dyn FnOnce(&A) -> Option<Wake> + Send>),
}

impl<A> Waiter<A> {
    /// Reads the value; returns the fiber to resume (once the cell's lock is
    /// released) with what it read.
    fn read(self, value: &A) -> Option<Wake> {
        match self {
            Waiter::Resume { callback, read } => Some(Wake {
                callback,
                value: read(value),
            }),
            #[cfg(all(loom, test))]
            Waiter::Call(f) => f(value),
        }
    }
}

/// How a waiter reads a cell's value: a type, so that the reading function
/// is a plain `fn` pointer (no closure to box per waiter).
pub(crate) trait Read<A>: 'static {
    /// What the waiting fiber receives.
    type Out: Send + 'static;
    /// Reads the value.
    fn read(value: &A) -> Self::Out;
}

/// Reads a clone of the value (`Deferred::get`).
pub(crate) struct CloneValue;

impl<A: Clone + Send + 'static> Read<A> for CloneValue {
    type Out = A;
    fn read(value: &A) -> A {
        value.clone()
    }
}

/// Reads nothing: the waiter only waits for the value to be there.
pub(crate) struct Presence;

impl<A> Read<A> for Presence {
    type Out = ();
    fn read(_: &A) {}
}

/// The erased reading function of a `Waiter::Resume` for `R`.
fn read_erased<A, R: Read<A>>(value: &A) -> Value {
    Value::new(R::read(value))
}

/// A fiber to resume with a value, once no lock is held.
pub(crate) struct Wake {
    callback: RawCallback,
    value: Value,
}

impl Wake {
    /// Resumes the fiber (if it was not resumed already, by cancellation).
    pub(crate) fn run(self) {
        self.callback.complete(Ok(self.value));
    }
}

struct State<A> {
    value: Option<A>,
    /// In registration order: woken in that order, removed in O(log n)
    /// when a `get` is canceled (see `waiters`).
    waiters: WaiterList<Waiter<A>>,
}

/// The shared cell behind a [`Deferred`] (also used by fiber handles).
pub(crate) struct Cell<A> {
    state: Mutex<State<A>>,
}

impl<A> Cell<A> {
    pub(crate) fn new() -> Self {
        Cell {
            state: Mutex::new(State {
                value: None,
                waiters: WaiterList::new(),
            }),
        }
    }

    /// Sets the value and wakes the waiters; gives the value back if the
    /// cell was already complete.
    pub(crate) fn complete(&self, value: A) -> Result<(), A> {
        let waiters = {
            let mut state = self.state.lock();
            if state.value.is_some() {
                return Err(value);
            }
            state.value = Some(value);
            state.waiters.take_all()
        };
        let mut waiters = waiters.peekable();
        if waiters.peek().is_some() {
            // The waiters read the value under the lock (it may be moved out
            // by a handle's owner later, so it is not read without it); the
            // fibers are resumed once the lock is released.
            let mut first = None;
            let mut rest = alloc::vec::Vec::new();
            {
                let state = self.state.lock();
                let value = state.value.as_ref().expect("set just above");
                for waiter in waiters {
                    if let Some(wake) = waiter.read(value) {
                        if first.is_none() {
                            first = Some(wake);
                        } else {
                            rest.push(wake);
                        }
                    }
                }
            }
            first.into_iter().chain(rest).for_each(Wake::run);
        }
        Ok(())
    }

    /// Calls `f` with the value now if there is one (returns `None`), or
    /// registers it as a waiter (returns its id).
    pub(crate) fn on_value(&self, f: Waiter<A>) -> Option<u64> {
        let mut state = self.state.lock();
        match &state.value {
            Some(value) => {
                let wake = f.read(value);
                drop(state);
                if let Some(wake) = wake {
                    wake.run();
                }
                None
            }
            None => Some(state.waiters.push(f)),
        }
    }

    /// Removes a waiter that has not been woken (its `get` was canceled).
    pub(crate) fn remove_waiter(&self, id: u64) {
        let removed = {
            let mut state = self.state.lock();
            state.waiters.remove(id)
        };
        drop(removed);
    }

    /// Reads the value, if set.
    pub(crate) fn with_value<R>(&self, f: impl FnOnce(Option<&A>) -> R) -> R {
        f(self.state.lock().value.as_ref())
    }

    /// Changes the value in place, if set (for fiber handles' owners).
    pub(crate) fn with_value_mut<R>(&self, f: impl FnOnce(Option<&mut A>) -> R) -> R {
        f(self.state.lock().value.as_mut())
    }

    /// How many waiters are registered (for tests of cancellation).
    pub(crate) fn waiter_count(&self) -> usize {
        self.state.lock().waiters.len()
    }
}

/// Something that owns a cell (a deferred's `Arc`, or a reference to a
/// fiber, whose join state is a cell inside the fiber).
pub(crate) trait CellOwner<A>: Send + 'static {
    /// The cell.
    fn cell(&self) -> &Cell<A>;
}

impl<A: Send + 'static> CellOwner<A> for Arc<Cell<A>> {
    fn cell(&self) -> &Cell<A> {
        self
    }
}

/// An IO that waits for the cell's value and produces what `R` reads of it,
/// recorded as the operation `M` at `site` (a join, a `Deferred::get`).
pub(crate) fn wait_for<A, R, E, C, M>(site: Option<Site>, owner: C) -> IO<R::Out, E>
where
    A: 'static,
    R: Read<A>,
    E: Send + 'static,
    C: CellOwner<A>,
    M: OpMeta,
{
    IO::from_callback_at::<M, _>(site, move |cb| {
        let id = owner.cell().on_value(Waiter::Resume {
            callback: cb.into_raw(),
            read: read_erased::<A, R>,
        });
        id.map(|id| IO::delay_untraced(move || owner.cell().remove_waiter(id)))
    })
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
            cell: Arc::new(Cell::new()),
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
