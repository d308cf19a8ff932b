//! The run state: what the thread running a fiber keeps between runs.
//!
//! [`Core`] is the part of the fiber that only the thread holding the
//! unique `Fiber` handle touches (module doc of `fiber`): where the next run
//! starts ([`Next`]), the explicit continuation stack, the mask depth, why
//! the fiber finalizes ([`Ending`]) and the rarely used rest ([`Cold`]).
//! Also here: the erased completion callback (kept in the fiber's join
//! state, `join.rs`, [`FiberJoin`](super::join::FiberJoin)) and its typed
//! adapter. (tokio calls the same part `Core`, in `core.rs`;
//! here the file is `run_state.rs`, since a module named `core` would make
//! every `core::` path in `fiber/` ambiguous in a `no_std` crate.)

use core::marker::PhantomData;

use alloc::vec::Vec;

use crate::engine::erased::{Adapter, ErasedFn, Value};
use crate::engine::node::{Frame, Node, RegionTop};
use crate::engine::tracing::{ChildTraces, Trace};
use crate::outcome::Outcome;
use crate::sync::{Ordering, StaticAtomicUsize};

/// The run-loop state of a fiber, touched only by the thread running it.
///
/// Kept small, since every suspended fiber holds one: what is needed only
/// while a fiber finalizes after a panic, when a finalizer's error is
/// suppressed, or when an error came from a traced child fiber, lives in a
/// separate allocation made then ([`Cold`]); so does the poll owner (made
/// at the fiber's first uncancelable region). The completion callback of
/// the fibers that have one (children of `race`, `both` and
/// `par_sequence`, fibers an executor runs for a caller) is not here but
/// in the join state's free bytes ([`FiberJoin`](super::join::FiberJoin)).
pub(crate) struct Core {
    /// Where the next run starts.
    pub(super) next: Next,
    /// The explicit continuation stack. A fiber that is not running and
    /// whose stack is empty holds no buffer: it takes its thread's spare
    /// one when it runs, and leaves it when it suspends or completes with
    /// an empty stack (`pool::stacks`), so that a million fibers suspended
    /// between two programs hold no stacks.
    pub(super) stack: Vec<Frame>,
    /// Depth of nested uncancelable regions around the current node
    /// (cancellation is observed only at depth 0), up to `u16::MAX`; the
    /// levels beyond (a program nesting more than 65,535 regions) are
    /// counted in [`Rare::deep_masks`]. Two bytes, beside `ending` and
    /// `flags`, in the word a `u32` depth took alone.
    pub(super) masks: u16,
    /// Set once the fiber finalizes (canceled or panicked): the remaining
    /// frames are popped, running only finalizers.
    pub(super) ending: Option<Ending>,
    /// The rarely used rest: the poll owner, the panic message and
    /// suppressed errors, once there are any.
    pub(super) cold: Option<crate::engine::blocks::PoolBox<Cold>>,
    /// Whether the fiber traces now, whether the executor was told that
    /// the fiber lives on after a run
    /// ([`Executor::fiber_listed`](crate::Executor::fiber_listed)), and
    /// whether its outcome goes to a completion callback kept in its join
    /// state ([`FiberJoin`](super::join::FiberJoin); set when the fiber
    /// is made, never changed: the run-loop reads it without the join
    /// state's lock): one byte, beside `masks` and `ending`
    /// (`engine/tracing/fiber_on.rs`).
    pub(super) flags: crate::engine::tracing::FiberFlags,
}

/// Where a fiber's next run starts.
pub(crate) enum Next {
    /// Evaluate this node (a new fiber, or one that yielded).
    Node(Node),
    /// Suspended (async without finalizer, never, blocking work): the
    /// result is in the header's slot, or there is none because
    /// cancellation ended the suspension.
    Resume,
    /// Suspended in an async registration that returned this finalizer (run
    /// if cancellation ends the suspension).
    ResumeWithFinalizer(Node),
    /// Sleeping: the key of the timer (an erased `X::TimerKey`), canceled if
    /// cancellation ends the sleep.
    Wake(Value),
    /// Suspended in an `AsyncUntil` registration: its timer's key and the
    /// registration's finalizer, one erased `(X::TimerKey, Option<Node>)`
    /// (one value, so that `Next`, and every fiber, stays as small as
    /// without it). The timer is canceled however the suspension ends (a
    /// timer that fired is not affected); the finalizer runs if
    /// cancellation ends the suspension.
    ResumeUntil(Value),
}

/// Why a fiber finalizes instead of completing normally (the panic message
/// itself is in [`Rare`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Canceled,
    Panicked,
    /// A deadline region ends (its deadline passed, or its body canceled
    /// itself): frames are popped, running finalizers as for a
    /// cancellation, down to the region's frame (`Regions::target`), where
    /// the fiber goes on with the region's fallback (`region.rs`).
    Region,
}

/// A fiber's deadline regions (`region.rs`), made at its first region and
/// kept in [`Cold`].
#[derive(Default)]
pub(crate) struct Regions {
    /// The innermost run of regions of one mask depth the fiber is in
    /// (`None` outside every region).
    pub(super) top: Option<RegionTop>,
    /// The key of the region timer armed on the current suspension (an
    /// erased `X::TimerKey`), canceled when the fiber resumes.
    pub(super) timer: Option<Value>,
    /// While the fiber ends a region ([`Ending::Region`]): the stack index
    /// of the region's frame.
    pub(super) target: usize,
    /// Whether the region being ended canceled itself (its fallback waits
    /// until the deadline first).
    pub(super) target_canceled: bool,
    /// The stack index of a region whose body canceled itself while masked
    /// (observed when the mask ends).
    pub(super) canceled: Option<usize>,
}

/// The rarely used part of a fiber's state.
#[derive(Default)]
pub(crate) struct Cold {
    /// The number that marks this fiber's polls as its own
    /// ([`Core::poll_owner`]); 0 until its first uncancelable region.
    poll_owner: usize,
    /// The fiber's deadline regions, made at its first region.
    pub(super) regions: Option<crate::engine::blocks::PoolBox<Regions>>,
    /// The rarer rest, made when first needed: a fiber with a poll owner
    /// keeps a small `Cold` (a block of the pool) and no `Rare`.
    rare: Option<alloc::boxed::Box<Rare>>,
    /// The fiber's local values (`IOLocal`, `locals.rs`), shared with the
    /// children it starts; `None` while none is set. Four words in all, so
    /// that `Cold` stays one block of the pool with tracing compiled out.
    locals: super::locals::Locals,
}

/// What a fiber needs only after a panic, a suppressed finalizer error, or
/// an error from a traced child fiber.
#[derive(Default)]
struct Rare {
    /// Mask levels beyond `u16::MAX` ([`Core::masks`]); 0 for any program
    /// that nests fewer regions.
    deep_masks: u32,
    /// The message of the panic the fiber finalizes after.
    panic: Option<crate::outcome::PanicMessage>,
    /// Errors of finalizers that could not be propagated (the fiber was
    /// already failing, canceled or panicking): handed over with the outcome.
    suppressed: Vec<Value>,
    /// The traces of the child fibers errors came from (see [`Causes`]).
    #[cfg(feature = "tracing")]
    causes: Causes,
    /// The fiber observer's state for this fiber (`observe.rs`), if the
    /// fiber is observed and the observer keeps one.
    #[cfg(feature = "observe")]
    observer: Option<alloc::boxed::Box<dyn core::any::Any + Send>>,
}

/// The traces of the child fibers an error came from, kept next to the
/// error while it travels through the fiber's frames (an error that a
/// combinator raises again after a child failed with it: `race`, `both`,
/// `par_sequence`, `join_with_never`; see `ChildTraces`).
///
/// Kept in [`Rare`] (inside [`Cold`]), made when a first such error is raised: a fiber whose
/// errors never came from a traced child pays one check of `Core::cold` (and its `rare`) per
/// error step (`Core::before_unwind_error`) and per finalizer that an error
/// reaches, nothing per other step. The invariant: `in_flight` is not
/// empty only while the error it belongs to is in flight (a `Cause` mark
/// set it, and no handler, completion or cancellation took the error yet).
#[cfg(feature = "tracing")]
#[derive(Default)]
struct Causes {
    /// The cause of the error in flight.
    in_flight: ChildTraces,
    /// The cause of the error the last error handler received: read by
    /// `trace_errors`' snapshot (`MarkKind::FailureSnapshot`), which its
    /// handler evaluates in the steps right after it received the error
    /// (every handler replaces it, so it is never read for another error).
    handled: ChildTraces,
    /// The causes of errors waiting for a finalizer (`guarantee_case`) to
    /// run, each with the index of its `RestoreErr` frame on the stack:
    /// the finalizer's own errors must not take them, and the error gets
    /// its cause back when the finalizer is done.
    parked: Vec<(usize, ChildTraces)>,
}

/// Hands out the numbers that tell fibers' polls apart: each fiber takes
/// one, the first time it enters an uncancelable region, and no two fibers
/// of the process ever hold the same one (until the counter wraps, after
/// `usize::MAX` fibers with regions: never on 64-bit targets, after 2^32 on
/// 32-bit ones). A fiber's address would not do: once the fiber is freed, a
/// later fiber may be allocated at the same place, and a poll kept from the
/// first would take the second for its owner.
static POLL_OWNERS: StaticAtomicUsize = StaticAtomicUsize::new(1);

/// A number no other fiber holds (see [`POLL_OWNERS`]); never 0. Out of
/// line: once per fiber that uses a region, not per region.
#[cold]
#[inline(never)]
fn fresh_poll_owner() -> usize {
    loop {
        let owner = POLL_OWNERS.fetch_add(1, Ordering::Relaxed);
        if owner != 0 {
            return owner;
        }
    }
}

impl Core {
    /// A fiber's run state, about to evaluate `node`, with `flags` (which
    /// also say whether its outcome goes to a completion callback).
    #[inline]
    pub(super) fn new(node: Node, flags: crate::engine::tracing::FiberFlags) -> Self {
        Core {
            next: Next::Node(node),
            stack: Vec::new(),
            masks: 0,
            ending: None,
            cold: None,
            flags,
        }
    }

    /// The number of this fiber for its polls: a poll unmasks only on the
    /// fiber whose number it carries (`combinators/monad_cancel.rs`). Taken the first time the
    /// fiber enters an uncancelable region; a fiber that never does has
    /// none (0, which no poll carries). Kept in [`Cold`]: a fiber that uses
    /// regions pays for it once, a fiber that does not pays nothing.
    #[inline]
    pub(super) fn poll_owner(&mut self) -> usize {
        let cold = self.cold();
        if cold.poll_owner == 0 {
            cold.poll_owner = fresh_poll_owner();
        }
        cold.poll_owner
    }

    /// Whether the fiber's outcome goes to a completion callback (kept in
    /// its join state) rather than to the join state itself.
    #[inline(always)]
    pub(super) fn has_callback(&self) -> bool {
        self.flags.has_callback()
    }

    /// The fiber's poll number if it has one (0 otherwise), without taking
    /// one.
    #[inline(always)]
    pub(super) fn current_poll_owner(&self) -> usize {
        self.cold.as_ref().map_or(0, |cold| cold.poll_owner)
    }

    /// Enters a mask level (an uncancelable region, a finalizer).
    #[inline(always)]
    pub(super) fn mask(&mut self) {
        if self.masks < u16::MAX {
            self.masks += 1;
        } else {
            self.mask_deep();
        }
    }

    /// Leaves a mask level.
    #[inline(always)]
    pub(super) fn unmask(&mut self) {
        if self.masks < u16::MAX {
            self.masks -= 1;
        } else {
            self.unmask_deep();
        }
    }

    #[cold]
    #[inline(never)]
    fn mask_deep(&mut self) {
        self.rare().deep_masks += 1;
    }

    #[cold]
    #[inline(never)]
    fn unmask_deep(&mut self) {
        match self.rare_mut() {
            Some(rare) if rare.deep_masks > 0 => rare.deep_masks -= 1,
            _ => self.masks -= 1,
        }
    }

    /// The mask depth: 0 outside any uncancelable region.
    #[inline(always)]
    pub(super) fn mask_depth(&self) -> u32 {
        let depth = u32::from(self.masks);
        if self.masks < u16::MAX {
            depth
        } else {
            depth + self.rare_ref().map_or(0, |rare| rare.deep_masks)
        }
    }

    /// The fiber's deadline regions (made at the first).
    #[inline]
    pub(super) fn regions(&mut self) -> &mut Regions {
        self.cold()
            .regions
            .get_or_insert_with(|| crate::engine::blocks::PoolBox::new(Regions::default()))
    }

    /// The fiber's deadline regions, if it ever entered one.
    #[inline]
    pub(super) fn regions_ref(&self) -> Option<&Regions> {
        self.cold.as_ref()?.regions.as_deref()
    }

    fn rare(&mut self) -> &mut Rare {
        self.cold().rare.get_or_insert_with(Default::default)
    }

    fn rare_mut(&mut self) -> Option<&mut Rare> {
        self.cold.as_mut()?.rare.as_deref_mut()
    }

    fn rare_ref(&self) -> Option<&Rare> {
        self.cold.as_ref()?.rare.as_deref()
    }

    /// The fiber observer's state for this fiber, if it keeps one.
    #[cfg(feature = "observe")]
    pub(crate) fn observer_state(&mut self) -> Option<&mut (dyn core::any::Any + Send)> {
        self.rare_mut()?.observer.as_deref_mut()
    }

    /// Makes the fiber observed; `false` if it already was.
    #[cfg(feature = "observe")]
    pub(crate) fn set_observed(&mut self) -> bool {
        let was = self.flags.is_observed();
        self.flags.set_observed();
        !was
    }

    /// Keeps the fiber observer's state for this fiber.
    #[cfg(feature = "observe")]
    pub(crate) fn set_observer_state(
        &mut self,
        state: alloc::boxed::Box<dyn core::any::Any + Send>,
    ) {
        self.rare().observer = Some(state);
    }

    /// Whether the fiber holds locals (one or two loads).
    #[inline(always)]
    pub(super) fn has_locals(&self) -> bool {
        match &self.cold {
            None => false,
            Some(cold) => cold.locals.is_some(),
        }
    }

    /// The fiber's locals, for a child it starts (a clone of one `Arc`,
    /// or `None`).
    #[inline]
    pub(super) fn locals(&self) -> super::locals::Locals {
        match &self.cold {
            None => None,
            Some(cold) => cold.locals.clone(),
        }
    }

    /// The fiber's locals, to change in place (`None`: it has no rarely
    /// used state, so no locals).
    pub(super) fn locals_mut(&mut self) -> Option<&mut super::locals::Locals> {
        self.cold.as_mut().map(|cold| &mut cold.locals)
    }

    /// The fiber's locals, to read.
    #[inline]
    pub(crate) fn locals_ref(&self) -> Option<&super::locals::Locals> {
        self.cold.as_ref().map(|cold| &cold.locals)
    }

    /// Replaces the fiber's locals (a child's, when it is made; a `set`'s
    /// new map). `None` on a fiber that has no `Cold` makes none.
    #[inline]
    pub(super) fn set_locals(&mut self, locals: super::locals::Locals) {
        if locals.is_some() || self.cold.is_some() {
            self.cold().locals = locals;
        }
    }

    fn cold(&mut self) -> &mut Cold {
        self.cold
            .get_or_insert_with(|| crate::engine::blocks::PoolBox::new(Cold::default()))
    }

    /// Starts finalizing after a panic (unless already finalizing).
    pub(super) fn set_panicked(&mut self, message: crate::outcome::PanicMessage) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Panicked);
            self.rare().panic = Some(message);
        }
        // An error in flight, if any, is dropped.
        self.error_dropped();
    }

    /// The error in flight came from child fibers with these traces (a
    /// `Cause` mark).
    #[cfg(feature = "tracing")]
    pub(super) fn set_cause(&mut self, traces: ChildTraces) {
        self.rare().causes.in_flight = traces;
    }

    /// An error is about to pop frames (`unwind_error`, in the run-loop's
    /// error step): if the first frame that acts on it is a handler
    /// (`handle_error_with`, a fold: `attempt`, `redeem_with`,
    /// `trace_errors`, ...), the handler takes the error, and its cause
    /// becomes the handled one (see [`Causes::handled`]).
    ///
    /// This is the one place where a handler takes an error that may have a
    /// cause: the fast paths of the handler nodes take errors raised right
    /// there (a `Cause` mark is never a settled source, and
    /// `trace_errors` never reads the handled cause from a fast path). One
    /// check of `Core::cold` per error step, out of the way of the other
    /// steps (a check in `unwind_error` or in each handler arm made the
    /// compiler lay out the whole loop worse, 2 to 3 instructions per step
    /// of every program); nothing without the `tracing` feature.
    #[inline(always)]
    pub(super) fn before_unwind_error(&mut self) {
        #[cfg(feature = "tracing")]
        if self.rare_ref().is_some() {
            self.handler_takes_cause();
        }
    }

    #[cfg(feature = "tracing")]
    #[cold]
    #[inline(never)]
    fn handler_takes_cause(&mut self) {
        use crate::engine::node::Tag;
        let handler = self.stack.iter().rev().find_map(|frame| match frame.tag() {
            Tag::Map | Tag::FlatMap | Tag::OnCancel => None,
            tag => Some(matches!(
                tag,
                Tag::HandleErrorWith | Tag::Fold | Tag::FoldWith
            )),
        });
        if let (Some(true), Some(cold)) = (handler, self.rare_mut()) {
            cold.causes.handled = core::mem::take(&mut cold.causes.in_flight);
        }
    }

    /// The error in flight is dropped without a handler (cancellation, a
    /// panic, a finalizer's error suppressed while unwinding): so is its
    /// cause.
    #[inline(always)]
    pub(super) fn error_dropped(&mut self) {
        #[cfg(feature = "tracing")]
        if let Some(cold) = self.rare_mut() {
            cold.causes.in_flight = ChildTraces::none();
        }
    }

    /// The error in flight reaches a finalizer (`guarantee_case`), whose
    /// `RestoreErr` frame is pushed next: its cause waits with the frame.
    #[inline(always)]
    pub(super) fn park_cause(&mut self) {
        #[cfg(feature = "tracing")]
        {
            let frame = self.stack.len();
            if let Some(cold) = self.rare_mut() {
                cold.park(frame);
            }
        }
    }

    /// A `RestoreErr` frame was just popped: the error it restores gets its
    /// cause back (`restore`), or, when the error is suppressed instead,
    /// the cause goes with it. Either way the cause of the finalizer's own
    /// error, if it failed, is dropped. Out of line: inlined in the
    /// run-loop's error step, it made the compiler lay out the whole loop
    /// worse (3 instructions per step of every program).
    #[cfg_attr(feature = "tracing", inline(never))]
    #[cfg_attr(not(feature = "tracing"), inline(always))]
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(super) fn unpark_cause(&mut self, restore: bool) {
        #[cfg(feature = "tracing")]
        {
            let frame = self.stack.len();
            if let Some(cold) = self.rare_mut() {
                cold.unpark(frame, restore);
            }
        }
    }

    /// The cause of the error the fiber completes with, if it had one, and
    /// the end of every kept cause (the fiber is done).
    #[inline(always)]
    pub(super) fn take_cause(&mut self) -> ChildTraces {
        #[cfg(feature = "tracing")]
        if let Some(cold) = self.rare_mut() {
            cold.causes.handled = ChildTraces::none();
            cold.causes.parked = Vec::new();
            return core::mem::take(&mut cold.causes.in_flight);
        }
        ChildTraces::none()
    }

    /// The cause of the error the last handler received (for
    /// `trace_errors`' snapshot).
    #[cfg(feature = "tracing")]
    pub(super) fn take_handled_cause(&mut self) -> ChildTraces {
        self.rare_mut()
            .map(|cold| core::mem::take(&mut cold.causes.handled))
            .unwrap_or_default()
    }

    /// Keeps a finalizer error that could not be propagated.
    pub(super) fn suppress(&mut self, error: Value) {
        self.rare().suppressed.push(error);
    }

    /// Takes the suppressed errors (when the fiber completes).
    pub(super) fn take_suppressed(&mut self) -> Vec<Value> {
        self.rare_mut()
            .map(|cold| core::mem::take(&mut cold.suppressed))
            .unwrap_or_default()
    }

    /// The outcome a finalizing fiber ends with.
    pub(super) fn ending_outcome(&self) -> Outcome<Value, Value> {
        match self.ending {
            Some(Ending::Canceled | Ending::Region) => Outcome::Canceled,
            Some(Ending::Panicked) => Outcome::Panicked(
                self.rare_ref()
                    .and_then(|cold| cold.panic.clone())
                    .unwrap_or_else(|| crate::outcome::PanicMessage::new("")),
            ),
            None => unreachable!("io-core: unwinding without an ending"),
        }
    }
}

#[cfg(feature = "tracing")]
impl Rare {
    #[cold]
    #[inline(never)]
    fn park(&mut self, frame: usize) {
        if !self.causes.in_flight.is_empty() {
            let cause = core::mem::take(&mut self.causes.in_flight);
            self.causes.parked.push((frame, cause));
        }
    }

    #[cold]
    #[inline(never)]
    fn unpark(&mut self, frame: usize, restore: bool) {
        let parked = &mut self.causes.parked;
        // Frames above this one are gone: so are their causes.
        while parked.last().is_some_and(|(at, _)| *at > frame) {
            parked.pop();
        }
        let mine = match parked.last() {
            Some((at, _)) if *at == frame => parked.pop().map(|(_, cause)| cause),
            _ => None,
        };
        self.causes.in_flight = match mine {
            Some(cause) if restore => cause,
            _ => ChildTraces::none(),
        };
    }
}

/// What a completion callback receives: the fiber's outcome, the errors of
/// finalizers that were suppressed on the way, its trace at the point of
/// failure (empty on success, cancellation, or without tracing), and, when
/// its error came from child fibers, their traces.
pub(crate) type Report = (Outcome<Value, Value>, Vec<Value>, Trace, ChildTraces);

/// The erased completion callback of a fiber (see [`Report`]).
pub(crate) type Completion = ErasedFn<Report, ()>;

/// Adapter of the completion callback: erased outcome to typed outcome.
pub(crate) struct CompleteK<A, E>(PhantomData<fn(A, E)>);

impl<A: 'static, E: 'static, F: FnOnce(Outcome<A, E>, Vec<E>, Trace, ChildTraces)>
    Adapter<Report, (), F> for CompleteK<A, E>
{
    unsafe fn call(f: F, (outcome, suppressed, trace, children): Report) {
        // SAFETY: the fiber's program is an `IO<A, E>`, so its final value is
        // an `A` and its final error an `E` (the typed API guarantees it).
        let outcome = unsafe { typed_outcome::<A, E>(outcome) };
        let suppressed = if suppressed.capacity() == 0 {
            // No elements and no buffer: nothing to drop. Forgotten rather
            // than dropped, so that no out-of-line drop of a `Vec<Value>`
            // (about 19 instructions) is called for every fiber that
            // completes without suppressed errors, nearly all of them.
            core::mem::forget(suppressed);
            Vec::new()
        } else {
            typed_suppressed::<E>(suppressed)
        };
        f(outcome, suppressed, trace, children)
    }
}

/// The suppressed errors of a fiber whose error type is `E`, as `E`s.
///
/// A finalizer's error is suppressed in the scope where it happens, whose
/// error type is the fiber's unless the scope is inside a `map_err` or
/// `trace_errors` (an `IO<A, E1>` turned into an `IO<A, E>`): such an error
/// is an `E1`, which the fiber's completion cannot express as an `E`. It is
/// dropped here (its type is checked, never assumed); the others are kept
/// in the order they happened.
pub(crate) fn typed_suppressed<E: 'static>(suppressed: Vec<Value>) -> Vec<E> {
    suppressed
        .into_iter()
        .filter(Value::is::<E>)
        // SAFETY: the filter above checked that the value is an `E`.
        .map(|e| unsafe { e.take::<E>() })
        .collect()
}

/// Takes the values of an erased outcome back as their types.
///
/// # Safety
/// * The outcome is that of an `IO<A, E>`.
pub(crate) unsafe fn typed_outcome<A: 'static, E: 'static>(
    outcome: Outcome<Value, Value>,
) -> Outcome<A, E> {
    match outcome {
        // SAFETY: forwarded precondition: the value of an `IO<A, E>` is an `A`.
        Outcome::Succeeded(v) => Outcome::Succeeded(unsafe { v.take::<A>() }),
        // SAFETY: forwarded precondition: its error is an `E`.
        Outcome::Errored(e) => Outcome::Errored(unsafe { e.take::<E>() }),
        Outcome::Canceled => Outcome::Canceled,
        Outcome::Panicked(p) => Outcome::Panicked(p),
    }
}
