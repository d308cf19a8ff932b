//! Scopes for fibers: [`Supervisor`] (Cats Effect's `Supervisor`) and
//! [`JoinSet`] (the shape of tokio's `JoinSet`).
//!
//! Both are [`Resource`]s: inside the scope, any fiber holding a clone may
//! start children in it; when the scope ends, the children still running
//! are canceled (or, for [`Supervisor::scoped_awaiting`] after a successful
//! use, awaited), and the release returns only once every child has
//! completed, so every child's finalizers have run, exactly once, before
//! the code after the scope runs. A child's failure (an error, a panic, its
//! own cancellation) is its own: it does not touch the scope, its owner or
//! its siblings; read it from the child's [`FiberHandle`] (supervisor) or
//! from [`JoinSet::join_next`].
//!
//! # Protocol
//!
//! The state is a short lock of the sync shim (never held across a
//! suspension): `closed`, and the children started and not yet known to
//! have ended.
//!
//! * **Starting a child** is one step of the caller (a `Start` node): under
//!   the lock, it checks `closed`, spawns the child and records it. The
//!   executor contract says that `schedule_fiber` never runs a fiber inline,
//!   so spawning under the lock cannot re-enter it; a child that runs at
//!   once on another thread and completes waits for the lock, and then
//!   finds itself recorded. So a child is either refused (the scope had
//!   closed) or recorded before the scope can close: the close never
//!   misses a child.
//! * **A refused child** is canceled before it runs, as the close would
//!   have canceled it had it started a moment earlier: `supervise` and
//!   `JoinSet::spawn` drop its program and start, outside the lock, a
//!   stand-in fiber that ends at once as `Outcome::Canceled`, so their
//!   callers get a handle (or a fiber number) whatever the state of the
//!   scope, and no error type has to take a closed scope. `try_supervise`
//!   and `JoinSet::try_spawn` say [`SupervisorClosed`] instead, for code
//!   that wants to know.
//! * **Closing** sets `closed` and takes the recorded children under the
//!   lock; from then on every start is refused. Outside the lock it requests
//!   the cancellation of each (unless awaiting), then waits until each has
//!   completed (the fiber's own join state for a supervisor; the set's
//!   count for a join set). The release runs masked, as every release does.
//! * **Forgetting ended children.** A supervisor's children keep their join
//!   state for their handles, so the supervisor records them as fiber
//!   references and forgets the completed ones lazily: when the record has
//!   doubled since it was last swept, a start drops the references of the
//!   children that have completed (amortised O(1) per start, and a
//!   long-lived supervisor holds O(running) references). A join set's
//!   children complete into the set (a completion callback, no join state):
//!   the callback moves the child from "running" to "completed" under the
//!   lock and wakes the joiners.
//! * **Waking joiners** ([`JoinSet::join_next`], and the join set's close):
//!   a joiner that finds nothing to take clones the set's current *signal*
//!   (a [`Deferred`]) under the lock and marks it wanted; a completion that
//!   finds it wanted swaps in a fresh signal and completes the old one
//!   outside the lock. A joiner either saw the completion (under the lock)
//!   or holds the signal the completion completes: no wake-up is lost, and a
//!   canceled joiner leaves nothing behind (the `Deferred`'s own wait
//!   removes its waiter).
//!
//! Cancellation of the scope's *owner* while children run is the
//! resource's business: `use_with` releases with `ExitCase::Canceled`, so
//! the children are canceled and awaited before the owner's cancellation
//! completes.
//!
//! Design credits: the semantics follow Cats Effect 3.5's `Supervisor`
//! (including its `await` flag, which waits only when the scope succeeded
//! and cancels otherwise) and tokio's `JoinSet` (`join_next` in order of
//! completion, the rest aborted when the set goes away). No code is copied.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;

use crate::engine::erased::ErasedFn;
use crate::engine::tracing::{ChildTraces, Internal, NO_SITE, Op};
use crate::fiber::handle::FiberHandle;
use crate::fiber::join::Completed;
use crate::fiber::join::JoinRef;
use crate::fiber::{CompleteK, FiberId, RawFiberRef, Spawner};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::deferred::Deferred;
use crate::stdlib::resource::{ExitCase, Resource};
use crate::sync::{Arc, Mutex};
use crate::wait::{Presence, wait_for};

// The operations as traces name them.
static SUPERVISE: Op = Op::new("Supervisor::supervise");
static TRY_SUPERVISE: Op = Op::new("Supervisor::try_supervise");
static SPAWN: Op = Op::new("JoinSet::spawn");
static TRY_SPAWN: Op = Op::new("JoinSet::try_spawn");
static JOIN_NEXT: Op = Op::new("JoinSet::join_next");
static JOIN_NEXT_WITH_ID: Op = Op::new("JoinSet::join_next_with_id");

/// A child was started in a scope that has closed ([`Supervisor`],
/// [`JoinSet`]): the child was not started (its program was dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupervisorClosed;

impl fmt::Display for SupervisorClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the supervisor's scope has closed")
    }
}

impl core::error::Error for SupervisorClosed {}

/// A closed scope as an I/O error (kind
/// [`ErrorKind::Other`](std::io::ErrorKind::Other), the
/// [`SupervisorClosed`] as its source), for programs whose error type is
/// [`std::io::Error`] and that raise the `Err` of
/// [`Supervisor::try_supervise`].
#[cfg(feature = "std")]
impl From<SupervisorClosed> for std::io::Error {
    fn from(e: SupervisorClosed) -> Self {
        std::io::Error::other(e)
    }
}

/// Waits (on any fiber) until `fiber` has completed, without reading its
/// outcome.
fn completion<E: Send + 'static>(fiber: JoinRef) -> IO<(), E> {
    wait_for::<Completed, Presence, E, _, Internal>(NO_SITE, fiber)
}

/// Whether `fiber` has completed (its join state holds its outcome).
fn has_completed(fiber: &JoinRef) -> bool {
    use crate::wait::CellOwner;
    fiber.cell().with_value(|completed| completed.is_some())
}

// ----- Supervisor --------------------------------------------------------------

/// The children of one supervisor, behind its lock.
struct Supervised {
    closed: bool,
    /// Children started and not yet known to have completed.
    children: Vec<JoinRef>,
    /// Sweep completed children out of `children` when it reaches this.
    sweep_at: usize,
}

/// The smallest record swept (below it, sweeping costs more than it saves).
const MIN_SWEEP: usize = 16;

impl Supervised {
    /// Forgets the children that have completed, if the record has doubled
    /// since the last sweep.
    fn sweep(&mut self) {
        if self.children.len() >= self.sweep_at {
            self.children.retain(|child| !has_completed(child));
            self.sweep_at = (self.children.len() * 2).max(MIN_SWEEP);
        }
    }
}

/// A scope for fibers (Cats Effect's `Supervisor`): children started with
/// [`supervise`](Supervisor::supervise) run on their own, and when the
/// scope ends the ones still running are canceled, and the release waits
/// until they have completed (their finalizers have run).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Deferred, Supervisor, wstp::Runtime};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let finalized = Arc::new(AtomicUsize::new(0));
/// let f = finalized.clone();
/// let started = Deferred::<()>::new();
/// let s = started.clone();
/// let io: IO<u32, std::io::Error> = Supervisor::scoped().use_with(move |supervisor| {
///     // A child that never ends on its own: the scope's end cancels it.
///     let forever = s.complete(()).product_r(never::<u32, std::io::Error>())
///         .on_cancel(IO::delay(move || { f.fetch_add(1, Ordering::SeqCst); }));
///     supervisor.supervise(forever)
///         .product_r(started.get()) // its finalizer is in place
///         .product_r(supervisor.supervise(IO::<u32, std::io::Error>::pure(7)))
///         .flat_map(|quick| quick.join())
///         .map(|outcome| outcome.ok().unwrap_or(0))
/// });
/// assert_eq!(Runtime::new()?.block_on(io)?.ok(), Some(7));
/// assert_eq!(finalized.load(Ordering::SeqCst), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A supervisor is a cheap handle (`Clone`): hand clones to the fibers that
/// start children. Children start on the executor of the fiber that
/// supervises them. A child supervised after the scope has closed (by a
/// clone that outlived it, or while the release awaits the children) is
/// canceled before it runs: its handle joins as `Outcome::Canceled`, and
/// [`try_supervise`](Supervisor::try_supervise) tells that case apart
/// ([`SupervisorClosed`]). Never a panic.
#[derive(Clone)]
pub struct Supervisor {
    state: Arc<Mutex<Supervised>>,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Supervisor")
            .field("closed", &state.closed)
            .field("children", &state.children.len())
            .finish()
    }
}

impl Supervisor {
    fn open() -> Supervisor {
        Supervisor {
            state: Arc::new(Mutex::new(Supervised {
                closed: false,
                children: Vec::new(),
                sweep_at: MIN_SWEEP,
            })),
        }
    }

    /// A supervisor for the scope of the resource: when the scope ends,
    /// however it ends, the children still running are canceled, and the
    /// release waits until every child has completed.
    #[track_caller]
    pub fn scoped<E: Send + 'static>() -> Resource<Supervisor, E> {
        Resource::make_case(IO::delay(Supervisor::open), |supervisor, _| {
            supervisor.close(false)
        })
    }

    /// A supervisor that waits for its children (Cats Effect's
    /// `Supervisor(await = true)`): when the scope's use *succeeds*, the
    /// release waits until every child has completed on its own; when the
    /// use fails, panics or is canceled, the children are canceled (and
    /// awaited) as with [`scoped`](Supervisor::scoped). Either way, no
    /// child can be started once the release has begun.
    #[track_caller]
    pub fn scoped_awaiting<E: Send + 'static>() -> Resource<Supervisor, E> {
        Resource::make_case(IO::delay(Supervisor::open), |supervisor, exit| {
            supervisor.close(exit == ExitCase::Succeeded)
        })
    }

    /// Starts `io` as a child of this scope and returns its handle (join
    /// it, cancel it; dropping it leaves the child to the scope). It cannot
    /// fail, so it is generic in its error type `E2` (as [`IO::start`]): it
    /// fits any program without a conversion.
    ///
    /// If the scope has closed (a clone of the supervisor used after the
    /// scope, or a child supervising a sibling while the release awaits
    /// it), the child is canceled before it runs: `io` is dropped, and the
    /// handle joins as `Outcome::Canceled`. See
    /// [`try_supervise`](Supervisor::try_supervise) to tell that case
    /// apart.
    #[track_caller]
    pub fn supervise<A, E, E2>(&self, io: IO<A, E>) -> IO<FiberHandle<A, E>, E2>
    where
        A: Send + 'static,
        E: Send + 'static,
        E2: Send + 'static,
    {
        let state = self.state.clone();
        IO::with_spawner(
            move |spawner| match Supervisor::spawn_in(&state, spawner, io) {
                Ok(child) => child,
                Err(refused) => {
                    drop(refused);
                    refused_child(spawner)
                }
            },
        )
        .traced_as(&SUPERVISE)
    }

    /// Starts `io` as a child of this scope: its handle, or
    /// `Err(SupervisorClosed)` (and `io` is dropped, not run) if the scope
    /// has closed.
    #[track_caller]
    pub fn try_supervise<A, E, E2>(
        &self,
        io: IO<A, E>,
    ) -> IO<Result<FiberHandle<A, E>, SupervisorClosed>, E2>
    where
        A: Send + 'static,
        E: Send + 'static,
        E2: Send + 'static,
    {
        let state = self.state.clone();
        IO::with_spawner(move |spawner| {
            Supervisor::spawn_in(&state, spawner, io).map_err(|refused| {
                drop(refused);
                SupervisorClosed
            })
        })
        .traced_as(&TRY_SUPERVISE)
    }

    /// Starts `io` as a child recorded in `state`, or hands it back if the
    /// scope has closed (to be dropped outside the lock: dropping a program
    /// runs user code).
    fn spawn_in<A, E>(
        state: &Mutex<Supervised>,
        spawner: Spawner,
        io: IO<A, E>,
    ) -> Result<FiberHandle<A, E>, IO<A, E>>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let mut supervised = state.lock();
        if supervised.closed {
            return Err(io);
        }
        supervised.sweep();
        // Spawned under the lock (see the module doc): the close
        // cannot come between the start and the record.
        let child = spawner.spawn(io.into_node(), None);
        // SAFETY: spawned just above without a completion callback.
        supervised
            .children
            .push(unsafe { JoinRef::new(child.clone()) });
        drop(supervised);
        // SAFETY: the child runs `io`, an `IO<A, E>`, without a
        // completion callback (its outcome goes to its join state).
        Ok(unsafe { FiberHandle::from_fiber(child) })
    }

    /// How many children the supervisor still records (started, and not
    /// yet swept after completing): an upper bound of those running.
    pub fn children(&self) -> usize {
        self.state.lock().children.len()
    }

    /// Closes the scope now, from any thread, and requests the
    /// cancellation of the running children without waiting for them: for
    /// a scope whose release will never run and whose owner is gone (a
    /// `Dispatcher` whose every handle was dropped). The references are
    /// dropped outside the lock (dropping the last one frees a fiber).
    pub(crate) fn cancel_now(&self) {
        let children = {
            let mut supervised = self.state.lock();
            supervised.closed = true;
            core::mem::take(&mut supervised.children)
        };
        for child in &children {
            child.request_cancel();
        }
    }

    /// Closes the scope: refuses new children, cancels the running ones
    /// unless `awaiting`, and waits until all have completed (masked).
    fn close<E: Send + 'static>(self, awaiting: bool) -> IO<(), E> {
        IO::uncancelable_untraced(move |_| {
            IO::defer_untraced(move || {
                let children = {
                    let mut supervised = self.state.lock();
                    supervised.closed = true;
                    core::mem::take(&mut supervised.children)
                };
                if !awaiting {
                    // All at once, so that they finalize concurrently.
                    for child in &children {
                        child.request_cancel();
                    }
                }
                children.into_iter().fold(IO::unit(), |waited, child| {
                    waited.product_r_untraced(completion(child))
                })
            })
        })
    }
}

/// A child refused by a closed scope: a fiber that is canceled before it
/// does anything (module doc, "A refused child").
fn refused_child<A, E>(spawner: Spawner) -> FiberHandle<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    let child = spawner.spawn(refused_program::<A, E>().into_node(), None);
    // SAFETY: the child runs an `IO<A, E>` without a completion callback.
    unsafe { FiberHandle::from_fiber(child) }
}

/// The program of a refused child: canceled at once (unmasked, so the
/// cancellation is observed there), so `never` is not reached.
fn refused_program<A: Send + 'static, E: Send + 'static>() -> IO<A, E> {
    IO::<(), E>::canceled_untraced().product_r_untraced(IO::never_untraced())
}

// ----- JoinSet -------------------------------------------------------------------

/// A running child of a join set.
struct Running {
    /// The set's own number for it (known before it is spawned, for its
    /// completion callback).
    key: u64,
    id: FiberId,
    fiber: RawFiberRef,
}

/// The children of one join set, behind its lock.
struct Joining<A, E> {
    closed: bool,
    /// Children started and not yet completed.
    running: Vec<Running>,
    /// The key of the next child.
    next_key: u64,
    /// Outcomes not yet joined, in order of completion.
    completed: VecDeque<(FiberId, Outcome<A, E>)>,
    /// Completed (and replaced) when a child completes, if `wanted`.
    signal: Deferred<()>,
    /// A joiner holds `signal`.
    wanted: bool,
}

impl<A, E> Joining<A, E> {
    /// The signal to wait on for the next change (a completion).
    fn wait_signal(&mut self) -> Deferred<()> {
        self.wanted = true;
        self.signal.clone()
    }
}

/// A set of children whose outcomes are joined in the order they complete
/// (the shape of tokio's `JoinSet`): [`spawn`](JoinSet::spawn) starts a
/// child, [`join_next`](JoinSet::join_next) waits for the next child to
/// complete and gives its outcome, `None` once no child is left. A
/// resource: when its scope ends, the children still running are canceled
/// and awaited (their finalizers have run), and outcomes never joined are
/// dropped.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{JoinSet, wstp::Runtime};
/// use std::time::Duration;
///
/// let io: IO<Vec<u32>, ()> = JoinSet::<u32, ()>::scoped().use_with(|set| {
///     let slow = sleep(Duration::from_millis(100)).map_to(2);
///     let fast = sleep(Duration::from_millis(1)).map_to(1);
///     set.spawn(slow)
///         .product_r(set.spawn(fast))
///         .product_r(IO::replicate(3, move || set.join_next()))
///         .map(|joined| joined.into_iter().map(|o| o.and_then(|o| o.succeeded()).unwrap_or(0)).collect())
/// });
/// // In order of completion; `None` (0 here) once the set is empty.
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(vec![1, 2, 0]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JoinSet<A, E> {
    state: Arc<Mutex<Joining<A, E>>>,
}

impl<A, E> Clone for JoinSet<A, E> {
    fn clone(&self) -> Self {
        JoinSet {
            state: self.state.clone(),
        }
    }
}

impl<A, E> fmt::Debug for JoinSet<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("JoinSet")
            .field("closed", &state.closed)
            .field("running", &state.running.len())
            .field("completed", &state.completed.len())
            .finish()
    }
}

impl<A: Send + 'static, E: Send + 'static> JoinSet<A, E> {
    fn open() -> Self {
        JoinSet {
            state: Arc::new(Mutex::new(Joining {
                closed: false,
                running: Vec::new(),
                next_key: 0,
                completed: VecDeque::new(),
                signal: Deferred::new(),
                wanted: false,
            })),
        }
    }

    /// A join set for the scope of the resource: when the scope ends,
    /// however it ends, the children still running are canceled, and the
    /// release waits until every child has completed.
    #[track_caller]
    pub fn scoped<E2: Send + 'static>() -> Resource<JoinSet<A, E>, E2> {
        Resource::make_case(IO::delay(JoinSet::open), |set, _| set.close())
    }

    /// Starts `io` as a child of the set; its fiber's number (the one
    /// [`join_next_with_id`](JoinSet::join_next_with_id) gives with its
    /// outcome). It cannot fail, so it is generic in its error type `E2`.
    ///
    /// If the scope has closed, the child is canceled before it runs
    /// (`io` is dropped; the number is that of the refused fiber, which no
    /// `join_next` gives: the closed set is joined no more). See
    /// [`try_spawn`](JoinSet::try_spawn) to tell that case apart.
    #[track_caller]
    pub fn spawn<E2: Send + 'static>(&self, io: IO<A, E>) -> IO<FiberId, E2> {
        let state = self.state.clone();
        IO::with_spawner(
            move |spawner| match JoinSet::spawn_in(&state, spawner, io) {
                Ok(id) => id,
                Err(refused) => {
                    drop(refused);
                    spawner
                        .spawn(refused_program::<A, E>().into_node(), None)
                        .id()
                }
            },
        )
        .traced_as(&SPAWN)
    }

    /// Starts `io` as a child of the set: its fiber's number, or
    /// `Err(SupervisorClosed)` (and `io` is dropped, not run) if the scope
    /// has closed.
    #[track_caller]
    pub fn try_spawn<E2: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> IO<Result<FiberId, SupervisorClosed>, E2> {
        let state = self.state.clone();
        IO::with_spawner(move |spawner| {
            JoinSet::spawn_in(&state, spawner, io).map_err(|refused| {
                drop(refused);
                SupervisorClosed
            })
        })
        .traced_as(&TRY_SPAWN)
    }

    /// Starts `io` as a child of the set behind `state`, or hands it back
    /// if the scope has closed (to be dropped outside the lock).
    fn spawn_in(
        state: &Arc<Mutex<Joining<A, E>>>,
        spawner: Spawner,
        io: IO<A, E>,
    ) -> Result<FiberId, IO<A, E>> {
        let mut joining = state.lock();
        if joining.closed {
            return Err(io);
        }
        let key = joining.next_key;
        joining.next_key += 1;
        let set = state.clone();
        let on_complete =
            move |outcome: Outcome<A, E>,
                  _: Vec<E>,
                  _: crate::engine::tracing::Trace,
                  _: ChildTraces| { JoinSet { state: set }.record(key, outcome) };
        // Spawned under the lock (see the module doc): the child's
        // completion waits for the lock, and finds itself running.
        let child = spawner.spawn(
            io.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
        );
        let id = child.id();
        joining.running.push(Running {
            key,
            id,
            fiber: child,
        });
        Ok(id)
    }

    /// A child's completion callback (exactly once per child): moves the
    /// child `key` from running to completed and wakes the joiners.
    fn record(&self, key: u64, outcome: Outcome<A, E>) {
        let (signal, dropped) = {
            let mut joining = self.state.lock();
            let position = joining.running.iter().position(|child| child.key == key);
            let child = position.map(|at| joining.running.swap_remove(at));
            // After the close, nobody joins: the outcome is dropped (outside
            // the lock: dropping a value runs user code).
            let dropped = match child {
                Some(child) if !joining.closed => {
                    joining.completed.push_back((child.id, outcome));
                    None
                }
                _ => Some(outcome),
            };
            let signal = if core::mem::take(&mut joining.wanted) {
                Some(core::mem::take(&mut joining.signal))
            } else {
                None
            };
            (signal, dropped)
        };
        drop(dropped);
        if let Some(signal) = signal {
            let _ = signal.complete_now(());
        }
    }

    /// Waits for the next child to complete and gives its outcome (in order
    /// of completion; an outcome that was already there first), or `None`
    /// when the set has no child left (none running, none unjoined).
    /// Cancelable while it waits; a canceled `join_next` takes nothing.
    #[track_caller]
    pub fn join_next<E2: Send + 'static>(&self) -> IO<Option<Outcome<A, E>>, E2> {
        self.join_next_untraced()
            .map_untraced(|next| next.map(|(_, outcome)| outcome))
            .traced_as(&JOIN_NEXT)
    }

    /// Like [`join_next`](JoinSet::join_next), with the child's fiber
    /// number (as [`spawn`](JoinSet::spawn) gave it).
    // The pair reads better spelled out than behind an alias.
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn join_next_with_id<E2: Send + 'static>(
        &self,
    ) -> IO<Option<(FiberId, Outcome<A, E>)>, E2> {
        self.join_next_untraced().traced_as(&JOIN_NEXT_WITH_ID)
    }

    #[allow(clippy::type_complexity)]
    fn join_next_untraced<E2: Send + 'static>(&self) -> IO<Option<(FiberId, Outcome<A, E>)>, E2> {
        let set = self.clone();
        IO::defer_untraced(move || {
            let signal = {
                let mut joining = set.state.lock();
                if let Some(next) = joining.completed.pop_front() {
                    return IO::pure(Some(next));
                }
                if joining.running.is_empty() {
                    return IO::pure(None);
                }
                joining.wait_signal()
            };
            signal
                .get_untraced()
                .flat_map_untraced(move |()| set.join_next_untraced())
        })
    }

    /// How many children the set holds: running, or completed and not yet
    /// joined.
    pub fn len(&self) -> usize {
        let joining = self.state.lock();
        joining.running.len() + joining.completed.len()
    }

    /// Whether the set holds no child ([`len`](JoinSet::len) is 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes the set: refuses new children, cancels the running ones and
    /// waits until all have completed (masked); drops unjoined outcomes.
    fn close<E2: Send + 'static>(self) -> IO<(), E2> {
        IO::uncancelable_untraced(move |_| {
            IO::delay_untraced(move || {
                let mut joining = self.state.lock();
                joining.closed = true;
                let unjoined = core::mem::take(&mut joining.completed);
                for child in &joining.running {
                    child.fiber.request_cancel();
                }
                drop(joining);
                drop(unjoined);
                self
            })
            .flat_map_untraced(JoinSet::drained)
        })
    }

    /// Waits until no child is running.
    fn drained<E2: Send + 'static>(self) -> IO<(), E2> {
        IO::defer_untraced(move || {
            let signal = {
                let mut joining = self.state.lock();
                if joining.running.is_empty() {
                    return IO::unit();
                }
                joining.wait_signal()
            };
            signal
                .get_untraced()
                .flat_map_untraced(move |()| self.drained())
        })
    }
}
