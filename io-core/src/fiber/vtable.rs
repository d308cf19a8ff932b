//! The raw fiber: its one allocation, the vtable that erases its executor
//! type, and the handles built on them.
//!
//! * [`FiberInner<X>`]: header, run state and executor in one `Arc`
//!   allocation (`repr(C)`, header first).
//! * [`RawFiberVTable`]: `clone`, `drop` and `schedule` of an
//!   `Arc<FiberInner<X>>` behind a `*const ()`, for whoever must not know
//!   `X` (callbacks, handles), as tokio's `RawTask` erases its scheduler.
//! * [`RawFiberRef`]: an erased strong reference that can request
//!   cancellation (held by fiber handles and `par_sequence`'s table).
//! * [`Fiber`]: the unique handle executors queue and run.
//! * [`Spawner`]: the erased starter of child fibers that `Start` nodes
//!   receive (the second, and last, type-erased boundary of a fiber).
//!
//! The same code in every build: the weak references of the vtable come
//! from the sync shim, whose loom variant is a strong reference with the
//! same raw API (`sync::Weak`).

use core::ptr::NonNull;

use alloc::vec::Vec;

use super::callback::RawCallback;
use super::header::Header;
use super::id::FiberId;
use super::run_state::{CompleteK, Completion, Core};
use super::state::TransitionToCancelRequested;
use crate::engine::erased::ErasedFn;
use crate::engine::node::Node;
use crate::engine::tracing::{ChildTraces, Trace};
use crate::executor::Executor;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::{Arc, UnsafeCell};

/// One fiber, shared by its handle, the thread running it and its callbacks.
#[repr(C)]
pub(crate) struct FiberInner<X: Executor> {
    /// Must stay the first field: callbacks reach it through an erased pointer.
    pub(super) header: Header,
    pub(super) core: UnsafeCell<Core>,
    pub(super) executor: X,
    /// The executor's own data ([`Executor::FiberSlot`]; zero-sized for
    /// most executors), dropped last, after the program and the join state.
    pub(super) slot: X::FiberSlot,
}

// SAFETY: `core` is accessed only by the thread that holds the unique
// `Fiber` handle (see the module doc of `fiber`: the protocol hands the
// fiber from thread to thread with Release/Acquire); `header` is Sync by its
// protocol; the executor and its slot are `Send + Sync`; everything inside
// `core` is `Send`.
unsafe impl<X: Executor> Sync for FiberInner<X> {}
// SAFETY: as above.
unsafe impl<X: Executor> Send for FiberInner<X> {}

impl<X: Executor> Drop for FiberInner<X> {
    fn drop(&mut self) {
        // A fiber freed before it completed (dropped by a shut-down executor,
        // or suspended with every callback gone) ends here.
        if !self.header.is_completed() {
            self.executor.fiber_freed();
        }
        // The program goes first (its node, its continuation frames and
        // whatever its wait holds: a future, a finalizer), then the
        // completion callback: whoever the callback tells that the fiber is
        // gone (a `block_on` that returns `Deadlock`) finds the program's
        // resources already released.
        // SAFETY: the last reference is gone; nothing else touches the run
        // state.
        let callback = self.core.with_mut(|core| unsafe {
            let run = &mut *core;
            drop(core::mem::replace(
                &mut run.next,
                super::run_state::Next::Resume,
            ));
            drop(core::mem::take(&mut run.stack));
            run.has_callback()
        });
        // SAFETY: the run state says which field of the join state is in
        // use (set when the fiber was made, never changed); dropped once,
        // here.
        unsafe { self.header.join.drop_in_place(callback) }
    }
}

/// Type-erased operations on an `Arc<FiberInner<X>>`.
pub(crate) struct RawFiberVTable {
    /// Adds a strong reference.
    pub(super) clone: unsafe fn(*const ()),
    /// Drops a strong reference.
    pub(super) drop: unsafe fn(*const ()),
    /// Schedules the fiber (taking a new strong reference for the handle).
    pub(super) schedule: unsafe fn(*const ()),
    /// Makes a weak reference (`Weak::into_raw`) from a strong one, which
    /// the caller keeps.
    pub(super) downgrade: unsafe fn(*const ()) -> *const (),
    /// Makes a strong reference (`Arc::into_raw`) from a weak one, which
    /// the caller keeps, if the fiber is still alive.
    pub(super) upgrade: unsafe fn(*const ()) -> Option<NonNull<()>>,
    /// Drops a weak reference.
    pub(super) drop_weak: unsafe fn(*const ()),
}

impl<X: Executor> FiberInner<X> {
    /// A reference that can request the cancellation of the fiber behind
    /// `strong`, taking over that strong reference (for
    /// [`WeakFiber::request_cancel`](super::WeakFiber::request_cancel)).
    pub(super) fn into_raw_ref(strong: Arc<Self>) -> RawFiberRef {
        let ptr = Arc::into_raw(strong) as *mut ();
        RawFiberRef {
            // SAFETY: `Arc::into_raw` never returns null.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: FiberInner::<X>::VTABLE,
        }
    }

    pub(super) const VTABLE: &'static RawFiberVTable = &RawFiberVTable {
        clone: Self::raw_clone,
        drop: Self::raw_drop,
        schedule: Self::raw_schedule,
        downgrade: Self::raw_downgrade,
        upgrade: Self::raw_upgrade,
        drop_weak: Self::raw_drop_weak,
    };

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw` of a live `Arc<FiberInner<X>>`,
    ///   which the caller keeps.
    unsafe fn raw_downgrade(ptr: *const ()) -> *const () {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // strong reference as it was.
        let strong =
            core::mem::ManuallyDrop::new(unsafe { Arc::from_raw(ptr.cast::<FiberInner<X>>()) });
        crate::sync::Weak::into_raw(crate::sync::downgrade(&strong)).cast()
    }

    /// # Safety
    /// * `ptr` comes from `Weak::into_raw` of a `Weak<FiberInner<X>>` that
    ///   the caller keeps.
    unsafe fn raw_upgrade(ptr: *const ()) -> Option<NonNull<()>> {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // weak reference as it was.
        let weak = core::mem::ManuallyDrop::new(unsafe {
            crate::sync::Weak::from_raw(ptr.cast::<FiberInner<X>>())
        });
        let strong = weak.upgrade()?;
        NonNull::new(Arc::into_raw(strong) as *mut ())
    }

    /// # Safety
    /// * `ptr` comes from `Weak::into_raw`, and the caller gives up its weak
    ///   reference.
    unsafe fn raw_drop_weak(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        drop(unsafe { crate::sync::Weak::from_raw(ptr.cast::<FiberInner<X>>()) })
    }

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw` of a live `Arc<FiberInner<X>>`.
    unsafe fn raw_clone(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        unsafe { Arc::increment_strong_count(ptr.cast::<FiberInner<X>>()) }
    }

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw`, and the caller gives up its reference.
    unsafe fn raw_drop(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        drop(unsafe { Arc::from_raw(ptr.cast::<FiberInner<X>>()) })
    }

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw` of a live fiber, and the caller has
    ///   the right to resume it (it won the claim of a suspended fiber).
    unsafe fn raw_schedule(ptr: *const ()) {
        // SAFETY: the caller's reference keeps the fiber alive; we take a new
        // one for the handle.
        let inner = unsafe {
            Arc::increment_strong_count(ptr.cast::<FiberInner<X>>());
            Arc::from_raw(ptr.cast::<FiberInner<X>>())
        };
        // The caller's own reference keeps `inner.executor` alive during the
        // call, even if the fiber runs and finishes on another thread.
        let executor: *const X = &inner.executor;
        // SAFETY: see the line above.
        unsafe { (*executor).schedule_fiber(Fiber { inner }) }
    }

    /// A callback handle for the given suspension generation.
    pub(super) fn callback(this: &Arc<Self>, generation: usize) -> RawCallback {
        let ptr = Arc::into_raw(this.clone()) as *mut ();
        RawCallback {
            // SAFETY: `Arc::into_raw` never returns null.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: Self::VTABLE,
            generation,
        }
    }
}

/// A strong reference to a fiber, erased of its executor type, that can
/// request the fiber's cancellation (held by fiber handles).
pub(crate) struct RawFiberRef {
    fiber: NonNull<()>,
    vtable: &'static RawFiberVTable,
}

// SAFETY: as for `RawCallback`: only the header and the count are touched.
unsafe impl Send for RawFiberRef {}
// SAFETY: as above.
unsafe impl Sync for RawFiberRef {}

impl RawFiberRef {
    pub(super) fn header(&self) -> &Header {
        // SAFETY: we hold a strong reference; the header is the first field.
        unsafe { &*self.fiber.as_ptr().cast::<Header>() }
    }

    /// Requests cancellation; if the fiber was suspended interruptibly, ends
    /// the suspension and schedules the fiber so that it finalizes.
    pub(crate) fn request_cancel(&self) {
        match self.header().request_cancel() {
            TransitionToCancelRequested::Requested => {}
            // SAFETY: the fiber is alive (we hold a reference), suspended, and
            // we won the claim of its suspension: we alone resume it.
            TransitionToCancelRequested::Schedule => unsafe {
                (self.vtable.schedule)(self.fiber.as_ptr())
            },
        }
    }

    /// The fiber's number on its executor ([`Fiber::id`]).
    pub(crate) fn id(&self) -> FiberId {
        self.header().id
    }

    /// A reference that does not keep the fiber alive (for the cleanup of
    /// a join's wait: `wait/cell.rs`, "Waits nobody can end").
    pub(crate) fn downgrade(&self) -> WeakFiberRef {
        // SAFETY: we hold a strong reference, which `downgrade` leaves as it was.
        let weak = unsafe { (self.vtable.downgrade)(self.fiber.as_ptr()) };
        WeakFiberRef {
            // SAFETY: `Weak::into_raw` of a live allocation is never null.
            fiber: unsafe { NonNull::new_unchecked(weak as *mut ()) },
            vtable: self.vtable,
        }
    }
}

/// A weak reference to a fiber, erased of its executor type: it does not
/// keep the fiber alive, and gives a [`RawFiberRef`] while the fiber is.
/// (Under loom, whose `Arc` has no weak references, the shim's `Weak` is
/// a strong reference with the same raw API, so this one is too: see
/// `sync::Weak`.)
pub(crate) struct WeakFiberRef {
    /// From `Weak::into_raw` of a `Weak<FiberInner<X>>`.
    fiber: NonNull<()>,
    vtable: &'static RawFiberVTable,
}

// SAFETY: a weak reference touches only the reference counts (atomic); an
// upgraded one is a `RawFiberRef`, which is `Send`.
unsafe impl Send for WeakFiberRef {}
// SAFETY: as above; `upgrade` takes `&self` and is atomic.
unsafe impl Sync for WeakFiberRef {}

impl WeakFiberRef {
    /// A strong reference, if the fiber has not been freed.
    pub(crate) fn upgrade(&self) -> Option<RawFiberRef> {
        // SAFETY: we own the weak reference behind `fiber`.
        let strong = unsafe { (self.vtable.upgrade)(self.fiber.as_ptr()) }?;
        Some(RawFiberRef {
            fiber: strong,
            vtable: self.vtable,
        })
    }
}

impl Drop for WeakFiberRef {
    fn drop(&mut self) {
        // SAFETY: releases the weak reference this handle owns.
        unsafe { (self.vtable.drop_weak)(self.fiber.as_ptr()) }
    }
}

impl Clone for RawFiberRef {
    fn clone(&self) -> Self {
        // SAFETY: we hold a strong reference, so the count is at least one.
        unsafe { (self.vtable.clone)(self.fiber.as_ptr()) };
        RawFiberRef {
            fiber: self.fiber,
            vtable: self.vtable,
        }
    }
}

impl Drop for RawFiberRef {
    fn drop(&mut self) {
        // SAFETY: releases the strong reference this handle owns.
        unsafe { (self.vtable.drop)(self.fiber.as_ptr()) }
    }
}

/// Starts child fibers on the running fiber's executor, for `Start` nodes,
/// which do not know the executor's type.
pub(super) trait Spawn {
    /// Makes a fiber of `node` on this executor, schedules it, and returns
    /// a reference to it (for handles and cancellation). Its outcome goes
    /// to `on_complete`, or without one to its join state. `traced`: the
    /// parent traces now (a child started in `traced()` traces too).
    fn spawn_child(&self, node: Node, on_complete: Option<Completion>, traced: bool)
    -> RawFiberRef;

    /// [`spawn_child`](Spawn::spawn_child) for a child that starts with
    /// its parent's `locals` (out of the way of the others).
    fn spawn_child_with_locals(
        &self,
        node: Node,
        on_complete: Option<Completion>,
        traced: bool,
        locals: Arc<super::locals::LocalMap>,
    ) -> RawFiberRef;

    /// An owned, erased view of this executor for code that lives outside
    /// any fiber (a `Dispatcher` used from foreign threads). With `std`
    /// only: no entry in the vtable of a firmware image.
    #[cfg(feature = "std")]
    fn probe(&self) -> alloc::boxed::Box<dyn ExecutorProbe>;
}

/// What code outside the executor may ask of it, with its type erased: a
/// clone of the executor behind [`Spawn::probe`].
#[cfg(feature = "std")]
pub(crate) trait ExecutorProbe: Send + Sync {
    /// [`Executor::refuses_blocking_here`].
    fn refuses_blocking_here(&self) -> bool;
    /// [`Executor::is_shut_down`].
    fn is_shut_down(&self) -> bool;
}

#[cfg(feature = "std")]
impl<X: Executor> ExecutorProbe for X {
    fn refuses_blocking_here(&self) -> bool {
        Executor::refuses_blocking_here(self)
    }

    fn is_shut_down(&self) -> bool {
        Executor::is_shut_down(self)
    }
}

impl<X: Executor> Spawn for X {
    fn spawn_child(
        &self,
        node: Node,
        on_complete: Option<Completion>,
        traced: bool,
    ) -> RawFiberRef {
        let child = Fiber::from_parts_traced(node, on_complete, self.clone(), traced);
        let child_ref = child.raw_ref();
        self.schedule_fiber(child);
        child_ref
    }

    #[cold]
    #[inline(never)]
    fn spawn_child_with_locals(
        &self,
        node: Node,
        on_complete: Option<Completion>,
        traced: bool,
        locals: Arc<super::locals::LocalMap>,
    ) -> RawFiberRef {
        let child = Fiber::from_parts_traced(node, on_complete, self.clone(), traced);
        child.start_with_locals(locals);
        let child_ref = child.raw_ref();
        self.schedule_fiber(child);
        child_ref
    }

    #[cfg(feature = "std")]
    fn probe(&self) -> alloc::boxed::Box<dyn ExecutorProbe> {
        alloc::boxed::Box::new(self.clone())
    }
}

/// What a `Start` node's closure receives: the executor of the fiber that
/// evaluates the node, to start children on.
///
/// Made by the run-loop for the duration of one call, and never kept: the
/// pointer is valid while the closure runs (the running fiber, which owns
/// the executor, is alive), so [`spawn`](Spawner::spawn) is safe to call
/// from inside the closure.
#[derive(Clone, Copy)]
pub(crate) struct Spawner {
    executor: *const dyn Spawn,
    /// The running fiber's state (its locals), valid like `executor`; the
    /// run-loop does not touch it while the closure runs.
    core: *mut Core,
    /// The parent traces now.
    traced: bool,
    /// The running fiber's number (for the fiber observer).
    #[cfg(feature = "observe")]
    id: super::FiberId,
}

impl Spawner {
    pub(super) fn new<X: Executor>(
        executor: &X,
        core: &mut Core,
        #[cfg_attr(not(feature = "observe"), allow(unused_variables))] id: super::FiberId,
    ) -> Self {
        Spawner {
            executor: executor as &dyn Spawn,
            traced: core.flags.is_on(),
            core,
            #[cfg(feature = "observe")]
            id,
        }
    }

    /// Starts a child fiber of `node` (see [`Spawn::spawn_child`]), with a
    /// copy of the running fiber's locals.
    pub(crate) fn spawn(&self, node: Node, on_complete: Option<Completion>) -> RawFiberRef {
        // SAFETY: the spawner lives only during the `Start` node's call, in
        // which the running fiber keeps its state and its executor alive,
        // and nothing else reaches its state (type doc).
        if unsafe { (*self.core).has_locals() } {
            return self.spawn_with_locals(node, on_complete);
        }
        // SAFETY: as above, for the executor.
        unsafe { (*self.executor).spawn_child(node, on_complete, self.traced) }
    }

    /// [`spawn`](Spawner::spawn) from a fiber that holds locals.
    #[cold]
    #[inline(never)]
    fn spawn_with_locals(&self, node: Node, on_complete: Option<Completion>) -> RawFiberRef {
        // SAFETY: as in `spawn`.
        let locals = unsafe { (*self.core).locals() };
        match locals {
            // SAFETY: as in `spawn`, for the executor.
            Some(locals) => unsafe {
                (*self.executor).spawn_child_with_locals(node, on_complete, self.traced, locals)
            },
            // SAFETY: as above.
            None => unsafe { (*self.executor).spawn_child(node, on_complete, self.traced) },
        }
    }

    /// An owned, erased view of the running fiber's executor.
    #[cfg(feature = "std")]
    pub(crate) fn probe(&self) -> alloc::boxed::Box<dyn ExecutorProbe> {
        // SAFETY: as in `spawn`, for the executor.
        unsafe { (*self.executor).probe() }
    }

    /// The running fiber's locals (for `IOLocal`'s closures on targets
    /// narrower than 64 bits, which run them as `Start` nodes).
    #[cfg(not(target_pointer_width = "64"))]
    pub(crate) fn locals(&self) -> super::FiberLocals {
        super::FiberLocals::from_ptr(self.core)
    }

    /// Makes the running fiber observed, if an observer is installed and it
    /// is not observed yet (`observe::observe_current`): its run is
    /// reported as beginning now, and will be as ending.
    #[cfg(feature = "observe")]
    pub(crate) fn observe(&self) {
        // SAFETY: as in `spawn`; the only reference to the state made
        // while the closure runs is this one, for this call.
        let core = unsafe { &mut *self.core };
        crate::observe::observe_running(core, self.id);
    }
}

/// A fiber ready to run: the handle executors queue and run.
///
/// A `Fiber` is unique (not `Clone`): whoever holds it is the only one that
/// may run the fiber, by calling [`run`](Fiber::run) once. Dropping it
/// without running drops the fiber's program and pending continuations
/// (an executor that shuts down does that).
pub struct Fiber<X: Executor> {
    pub(super) inner: Arc<FiberInner<X>>,
}

impl<X: Executor> Fiber<X> {
    /// Makes a fiber that will run `io` on `executor` and hand its outcome to
    /// `on_complete`. The fiber does not run until it is scheduled and run;
    /// usually the caller passes it to [`Executor::schedule_fiber`].
    pub fn new<A, E, F>(io: IO<A, E>, executor: X, on_complete: F) -> Fiber<X>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Outcome<A, E>) + Send + 'static,
    {
        let on_complete =
            move |outcome: Outcome<A, E>,
                  _suppressed: Vec<E>,
                  _trace: Trace,
                  _children: ChildTraces| on_complete(outcome);
        Fiber::from_parts(
            io.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
            executor,
        )
    }

    /// Like [`Fiber::new`], and `on_complete` also receives the errors of
    /// finalizers that could not be propagated (they ran while the program
    /// was already failing, canceled or panicking), so that none is lost.
    pub fn with_suppressed<A, E, F>(io: IO<A, E>, executor: X, on_complete: F) -> Fiber<X>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Outcome<A, E>, Vec<E>) + Send + 'static,
    {
        let on_complete = move |outcome: Outcome<A, E>, suppressed: Vec<E>, _trace: Trace| {
            on_complete(outcome, suppressed)
        };
        Fiber::with_report(io, executor, on_complete)
    }

    /// Like [`Fiber::with_suppressed`], and `on_complete` also receives the
    /// fiber's trace at the point of failure, when it ended with an error
    /// or a panic and recorded events (tracing on); an empty trace
    /// otherwise. Entry points print it under the error, like Cats Effect's
    /// enhanced exceptions. (An error that came from a child fiber also
    /// has the child's trace: run the program as
    /// [`io.trace_errors()`](IO::trace_errors) to get both, in
    /// [`Traced::child_traces`](crate::Traced::child_traces).)
    pub fn with_report<A, E, F>(io: IO<A, E>, executor: X, on_complete: F) -> Fiber<X>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Outcome<A, E>, Vec<E>, Trace) + Send + 'static,
    {
        let on_complete =
            move |outcome: Outcome<A, E>,
                  suppressed: Vec<E>,
                  trace: Trace,
                  _children: ChildTraces| { on_complete(outcome, suppressed, trace) };
        Fiber::from_parts(
            io.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
            executor,
        )
    }

    /// A fiber of `node`; its outcome goes to `on_complete`, or, without
    /// one, to its join state (for fibers that `FiberHandle`s join).
    pub(crate) fn from_parts(node: Node, on_complete: Option<Completion>, executor: X) -> Fiber<X> {
        Fiber::from_parts_traced(node, on_complete, executor, false)
    }

    /// [`Fiber::from_parts`], tracing from the start if `traced` (a child
    /// of a traced scope) or if the executor's mode records.
    pub(crate) fn from_parts_traced(
        node: Node,
        on_complete: Option<Completion>,
        executor: X,
        traced: bool,
    ) -> Fiber<X> {
        let traces = crate::engine::tracing::fiber_traces(traced, executor.config());
        let id = executor.next_fiber_id();
        let core = Core::new(
            node,
            crate::engine::tracing::FiberFlags::new(traces, on_complete.is_some()),
        );
        let fiber = Fiber {
            inner: Arc::new(FiberInner {
                header: Header::new(id, on_complete),
                core: UnsafeCell::new(core),
                executor,
                slot: X::FiberSlot::default(),
            }),
        };
        // After the fiber is built in place (a `Core` borrowed before it
        // moved into the allocation would be built on the stack and
        // copied, for every fiber).
        #[cfg(feature = "observe")]
        if crate::observe::active() {
            fiber.offer_to_observer(id);
        }
        fiber.inner.executor.fiber_created(&fiber);
        fiber
    }

    /// Offers a fiber just made (not yet seen by anyone) to the fiber
    /// observer, which says whether it is observed.
    #[cfg(feature = "observe")]
    #[cold]
    #[inline(never)]
    fn offer_to_observer(&self, id: FiberId) {
        // SAFETY: the fiber was just made and is not scheduled or shared
        // yet: nothing else touches its run state.
        self.inner.core.with_mut(|core| {
            let core = unsafe { &mut *core };
            if crate::observe::created(core, id) {
                core.flags.set_observed();
            }
        });
    }

    /// Gives a fiber just made (not yet seen by anyone) its parent's
    /// locals; out of the way of the starts of fibers without locals.
    #[cold]
    #[inline(never)]
    fn start_with_locals(&self, locals: Arc<super::locals::LocalMap>) {
        // SAFETY: the fiber was made by the caller and is not scheduled or
        // shared yet: nothing else touches its run state.
        self.inner
            .core
            .with_mut(|core| unsafe { (*core).set_locals(Some(locals)) });
    }

    /// A reference to this fiber that can request its cancellation.
    pub(crate) fn raw_ref(&self) -> RawFiberRef {
        let ptr = Arc::into_raw(self.inner.clone()) as *mut ();
        RawFiberRef {
            // SAFETY: `Arc::into_raw` never returns null.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: FiberInner::<X>::VTABLE,
        }
    }

    /// The executor this fiber runs on.
    pub fn executor(&self) -> &X {
        &self.inner.executor
    }

    /// The executor's own data in this fiber ([`Executor::FiberSlot`]):
    /// made when the fiber was made, shared by every holder of the fiber
    /// (the slot is `Sync`), dropped with the fiber.
    #[inline]
    pub fn slot(&self) -> &X::FiberSlot {
        &self.inner.slot
    }

    /// The fiber's number on its executor (`#1` for the first fiber the
    /// executor made, then `#2`, ...; see [`FiberId`]), given when the
    /// fiber was made and kept for its whole life: what fiber dumps, this
    /// type's `Debug` and [`FiberHandle`](crate::FiberHandle)'s show.
    pub fn id(&self) -> FiberId {
        self.inner.header.id
    }
}

impl<X: Executor> core::fmt::Debug for Fiber<X> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fiber").field("id", &self.id()).finish()
    }
}
