//! Fiber lifecycle hooks, for integrations such as `spindle-tracing` (the
//! `tracing` crate, tokio-console): one process-wide [`FiberObserver`] told
//! when an observed fiber is made, each time one of its runs begins and
//! ends, and when it ends.
//!
//! Compiled only with io-core's `observe` feature (std). With the feature
//! on and no observer installed, a fiber pays one relaxed load when it is
//! made and one flag test per run (a bit of the flags byte the run-loop
//! reads anyway); without the feature, nothing.
//!
//! # Protocol
//!
//! - An observer is installed once for the process ([`set_observer`]); it
//!   cannot be replaced or removed (its hooks may be running on any thread).
//! - A fiber made while an observer is installed is offered to it
//!   ([`created`](FiberObserver::created), on the thread of its parent,
//!   with where it was started), which says whether it is *observed*
//!   ([`Observation`]). A fiber also becomes observed when it runs
//!   [`observe_current`], which offers it again (`parent_observed` true,
//!   no site) and cannot be refused. Fibers made before the observer was
//!   installed are not offered when made.
//! - For an observed fiber, on the thread that runs it, for each run [`run_begins`](FiberObserver::run_begins) and either
//!   [`run_ends`](FiberObserver::run_ends) (it suspended or yielded) or,
//!   for its last run, [`ended`](FiberObserver::ended) (it completed, before
//!   its outcome reaches whoever waits for it). Calls for one fiber never
//!   overlap, and each happens before the next (a run that begins on
//!   another thread was scheduled after the last one ended).
//! - A fiber freed without completing (its executor shut down while it
//!   waited) gets no `ended`: its observer state
//!   ([`created`](FiberObserver::created)'s value) is dropped with it.
//! - A run that [`observe_current`] makes observed gets `created` and
//!   `run_begins` at that step, and the usual end.
//! - A panic in [`run_begins`](FiberObserver::run_begins) or
//!   [`run_ends`](FiberObserver::run_ends) is a panic of the fiber it
//!   observes (inside its run), ending it as a panic in its program would;
//!   a panic in [`ended`](FiberObserver::ended) is caught and dropped (the
//!   fiber's outcome stands).
//!
//! The model is `tracing::Instrument`'s for futures (a span entered for
//! each poll) and tokio's task hooks; the code is Spindle's own.

use alloc::boxed::Box;
use core::any::Any;
use core::fmt;
use core::panic::Location;
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::IO;
use crate::IOLocal;
use crate::fiber::FiberId;
use crate::fiber::run_state::Core;

/// What an observer is told of fibers (see the module doc for when each
/// hook is called). Every hook runs on the thread running the fiber, inside
/// its run: keep them short.
pub trait FiberObserver: Send + Sync + 'static {
    /// A fiber numbered `fiber` was made; `spawned_at` is where its parent
    /// started it (`None`: an executor's main fiber, or a site not kept);
    /// `parent_observed`: it was started by an observed fiber (which may
    /// have handed it fiber-local values the observer reads at each run).
    /// Says whether the fiber is observed, and with what state: the
    /// [`Observation::Observe`] value is kept by the fiber, handed back by
    /// [`ObservedFiber::state`] in the later hooks, and dropped with the
    /// fiber. A fiber the observer [ignores](Observation::Ignore) costs
    /// nothing more (until [`observe_current`]).
    fn created(
        &self,
        fiber: FiberId,
        spawned_at: Option<&'static Location<'static>>,
        parent_observed: bool,
    ) -> Observation;

    /// A run of the fiber begins: it starts (`resumed` false), goes on after
    /// a yield (false), or after a wait (`resumed` true).
    fn run_begins(&self, fiber: &mut ObservedFiber<'_>, resumed: bool);

    /// A run ends without the fiber completing.
    fn run_ends(&self, fiber: &mut ObservedFiber<'_>, end: RunEnd);

    /// The fiber completed, in its last run, before its outcome is
    /// delivered.
    fn ended(&self, fiber: &mut ObservedFiber<'_>, ending: Ending);
}

/// Whether a new fiber is observed ([`FiberObserver::created`]).
pub enum Observation {
    /// Not observed: no more hooks for it.
    Ignore,
    /// Observed, with the observer's state for it, if it keeps one.
    Observe(Option<Box<dyn Any + Send>>),
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observation::Ignore => f.write_str("Ignore"),
            Observation::Observe(state) => f
                .debug_tuple("Observe")
                .field(&state.as_ref().map(|_| ".."))
                .finish(),
        }
    }
}

/// How a run ended without the fiber completing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// It waits for something (a callback, a timer, a data type, I/O).
    Suspended,
    /// It gave its thread up (a cede, an auto-yield) and is queued again.
    Yielded,
}

/// How a fiber completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// With a value.
    Succeeded,
    /// With an error.
    Errored,
    /// Canceled.
    Canceled,
    /// A panic in its program.
    Panicked,
}

/// A fiber being observed, as a hook sees it: its number, the observer's
/// own state for it, and its fiber-local values.
pub struct ObservedFiber<'a> {
    id: FiberId,
    core: &'a mut Core,
}

impl ObservedFiber<'_> {
    /// The fiber's number.
    pub fn id(&self) -> FiberId {
        self.id
    }

    /// The state [`created`](FiberObserver::created) returned for this
    /// fiber, if it returned one of type `T`.
    pub fn state<T: Any>(&mut self) -> Option<&mut T> {
        self.core.observer_state()?.downcast_mut::<T>()
    }

    /// The fiber's value of `local`, if it holds one (`None`: it would read
    /// the local's default).
    pub fn local<A: Clone + Send + Sync + 'static>(&self, local: &IOLocal<A>) -> Option<A> {
        crate::fiber::locals::get(self.core.locals_ref()?, local.key())
    }
}

impl fmt::Debug for ObservedFiber<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedFiber")
            .field("id", &self.id)
            .finish()
    }
}

/// [`set_observer`] was already called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverAlreadySet;

impl fmt::Display for ObserverAlreadySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a fiber observer is already installed for this process")
    }
}

impl core::error::Error for ObserverAlreadySet {}

/// The observer: a pointer to a leaked `&'static dyn FiberObserver` (a
/// thin pointer, so that one atomic holds it); null until one is set.
static OBSERVER: AtomicPtr<&'static dyn FiberObserver> = AtomicPtr::new(core::ptr::null_mut());

/// Installs `observer` for the process: fibers made from now on are
/// observed. Once only: a second call is an [`ObserverAlreadySet`] error
/// and changes nothing.
pub fn set_observer(observer: &'static dyn FiberObserver) -> Result<(), ObserverAlreadySet> {
    let slot = Box::into_raw(Box::new(observer));
    match OBSERVER.compare_exchange(
        core::ptr::null_mut(),
        slot,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Ok(()),
        Err(_) => {
            // SAFETY: `slot` came from `Box::into_raw` above and was not
            // published.
            drop(unsafe { Box::from_raw(slot) });
            Err(ObserverAlreadySet)
        }
    }
}

/// The observer, if one is installed.
#[inline]
pub fn observer() -> Option<&'static dyn FiberObserver> {
    let slot = OBSERVER.load(Ordering::Acquire);
    // SAFETY: a non-null slot was published by `set_observer` from a
    // leaked box and is never freed or changed.
    (!slot.is_null()).then(|| unsafe { *slot })
}

/// Whether an observer is installed (a fiber made now is observed).
#[inline(always)]
pub(crate) fn active() -> bool {
    !OBSERVER.load(Ordering::Relaxed).is_null()
}

/// Makes the running fiber observed from this step on, if an observer is
/// installed (nothing otherwise, and nothing for a fiber already
/// observed): for integrations whose operations need their fiber's runs
/// reported (`spindle-tracing`'s `instrument`), in a fiber made before
/// the observer was installed. The observer's
/// [`created`](FiberObserver::created) and
/// [`run_begins`](FiberObserver::run_begins) are called at this step.
pub fn observe_current<E: Send + 'static>() -> IO<(), E> {
    IO::with_spawner(|spawner| spawner.observe())
}

std::thread_local! {
    /// While a `start` is evaluated on this thread and an observer is
    /// installed: where it was written, and whether the fiber evaluating
    /// it is observed.
    static SPAWNING: core::cell::Cell<(Option<&'static Location<'static>>, bool)> =
        const { core::cell::Cell::new((None, false)) };
}

/// Keeps where fibers made on this thread are started from, and whether
/// their parent is observed, until the guard is dropped.
pub(crate) struct Spawning((Option<&'static Location<'static>>, bool));

impl Spawning {
    #[inline]
    pub(crate) fn set(site: Option<&'static Location<'static>>, parent_observed: bool) -> Spawning {
        Spawning(SPAWNING.with(|cell| cell.replace((site, parent_observed))))
    }
}

impl Drop for Spawning {
    fn drop(&mut self) {
        SPAWNING.with(|cell| cell.set(self.0));
    }
}

/// Offers the fiber numbered `id`, whose run state is `core`, to the
/// observer (it was just made); `true` if it is observed (its state kept).
#[cold]
#[inline(never)]
pub(crate) fn created(core: &mut Core, id: FiberId) -> bool {
    let Some(observer) = observer() else {
        return false;
    };
    let (site, parent_observed) = SPAWNING.with(core::cell::Cell::get);
    match observer.created(id, site, parent_observed) {
        Observation::Ignore => false,
        Observation::Observe(state) => {
            if let Some(state) = state {
                core.set_observer_state(state);
            }
            true
        }
    }
}

/// Makes the running fiber (`core`, numbered `id`) observed from this step
/// on (`observe_current`), if an observer is installed and it is not
/// already: `created` with `Observe` forced, then `run_begins`.
#[cold]
#[inline(never)]
pub(crate) fn observe_running(core: &mut Core, id: FiberId) {
    let Some(observer) = observer() else {
        return;
    };
    if !core.set_observed() {
        return;
    }
    if let Observation::Observe(Some(state)) = observer.created(id, None, true) {
        core.set_observer_state(state);
    }
    observer.run_begins(&mut ObservedFiber { id, core }, false);
}

/// A run of an observed fiber begins.
#[cold]
#[inline(never)]
pub(crate) fn run_begins(core: &mut Core, id: FiberId, resumed: bool) {
    if let Some(observer) = observer() {
        observer.run_begins(&mut ObservedFiber { id, core }, resumed);
    }
}

/// A run of an observed fiber ends without it completing.
#[cold]
#[inline(never)]
pub(crate) fn run_ends(core: &mut Core, id: FiberId, end: RunEnd) {
    if let Some(observer) = observer() {
        observer.run_ends(&mut ObservedFiber { id, core }, end);
    }
}

/// An observed fiber completed.
#[cold]
#[inline(never)]
pub(crate) fn ended(core: &mut Core, id: FiberId, ending: Ending) {
    if let Some(observer) = observer() {
        let call = || observer.ended(&mut ObservedFiber { id, core }, ending);
        // The fiber is past its last frame: a panic here has nowhere to go.
        drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)));
    }
}
