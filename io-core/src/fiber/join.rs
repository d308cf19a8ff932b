//! A fiber's join state: the join cell (`wait/cell.rs`) that holds its
//! outcome, or the completion callback in the cell's place.
//!
//! # The join protocol
//!
//! The fiber's cell holds, once the fiber has completed, its erased outcome
//! and the errors its finalizers suppressed, and, if it failed with an
//! error, the traces that a joiner raising the error again hands on
//! ([`Completed`]). The run-loop
//! completes it exactly once ([`complete_join`]), waking every joiner. The
//! outcome is stored erased (`Outcome<Value, Value>`): the header does not
//! know the fiber's types. The handle does (it is made only for a fiber of
//! an `IO<A, E>`), and reads the values back as `A` and `E` (`handle.rs`).
//!
//! A fiber whose outcome goes to a completion callback instead (a child of
//! `race` or `both`) never completes its cell, and nothing joins it: the
//! callback takes the cell's bytes ([`FiberJoin`], "The callback's place"),
//! and only a [`JoinRef`], made for fibers without a callback, reaches a
//! fiber's cell.
//!
//! Keeping the join state in the fiber makes starting a fiber one
//! allocation, and a handle one pointer and a vtable; the cost is that a
//! handle kept after the fiber completed keeps the fiber's allocation
//! (whose program and stack are gone by then) rather than a smaller
//! separate one, as tokio's `JoinHandle` keeps its task.

use alloc::vec::Vec;
use core::mem::ManuallyDrop;

use super::run_state::Completion;
use super::vtable::{RawFiberRef, WeakFiberRef};
use crate::engine::erased::Value;
use crate::engine::tracing::ChildTraces;
use crate::outcome::Outcome;
use crate::sync::UnsafeCell;
use crate::wait::{CellOwner, JoinCell};

/// What a completed fiber leaves besides its outcome, when there is
/// anything: the errors its finalizers suppressed, and, when it failed with
/// an error, the traces a joiner that raises the error again hands on
/// (`ChildTraces`: zero-sized without the `tracing` feature).
#[derive(Default)]
pub(crate) struct Leftovers {
    pub(crate) suppressed: Vec<Value>,
    pub(crate) traces: ChildTraces,
}

/// What a completed fiber leaves: its erased outcome and its
/// [`Leftovers`] (boxed, and only if there are any: the join state is part
/// of every fiber).
pub(crate) type Completed = (Outcome<Value, Value>, Option<alloc::boxed::Box<Leftovers>>);

/// A fiber's join state, or, in its place, the completion callback of a
/// fiber whose outcome goes to one.
///
/// # The callback's place
///
/// A fiber made with a completion callback (a child of `race`, `both`,
/// `par_sequence`, a memoized program's evaluator, a `JoinSet` child, a
/// fiber an executor runs for a caller) hands its outcome to the callback
/// and never completes its join state, and nothing joins it: only a
/// [`JoinRef`] reaches a fiber's join cell, and only fibers made without a
/// callback get one. So the two share their bytes: a union, whose field in
/// use is decided when the fiber is made and never changes. The fiber's run
/// state says which (`Core::has_callback`, read by the run-loop when the
/// fiber completes and by the fiber's drop); other threads reach the cell
/// only through a `JoinRef`, and never the callback.
///
/// The callback is touched only by the thread that runs the fiber (it
/// takes it when the fiber completes, [`FiberJoin::take_callback`]) and by
/// the fiber's drop: no lock. The fiber is no larger (the callback's two
/// words take less than the cell), and a callback fiber needs no separate
/// block for its callback: before, it was in the fiber's `Cold` block, one
/// pool block per race or `both` child, whose allocation, initialisation
/// and release cost the host benchmarks 3 to 5%.
pub(crate) union FiberJoin {
    /// For a fiber made without a completion callback.
    cell: ManuallyDrop<JoinCell<Completed>>,
    /// For a fiber made with one; `None` once taken.
    callback: ManuallyDrop<UnsafeCell<Option<Completion>>>,
}

impl FiberJoin {
    /// The join state of a fiber whose outcome goes to `on_complete`, or,
    /// without one, to its join cell.
    pub(super) fn new(on_complete: Option<Completion>) -> Self {
        match on_complete {
            Some(on_complete) => FiberJoin {
                callback: ManuallyDrop::new(UnsafeCell::new(Some(on_complete))),
            },
            None => FiberJoin {
                cell: ManuallyDrop::new(JoinCell::new()),
            },
        }
    }

    /// The join cell.
    ///
    /// # Safety
    /// * The fiber was made without a completion callback.
    #[inline(always)]
    pub(super) unsafe fn cell(&self) -> &JoinCell<Completed> {
        // SAFETY: forwarded precondition: `cell` is the field in use.
        unsafe { &self.cell }
    }

    /// Takes the completion callback (when the fiber completes).
    ///
    /// # Safety
    /// * The fiber was made with a completion callback.
    /// * The caller runs the fiber (it holds its unique `Fiber` handle):
    ///   nothing else touches the callback.
    #[inline(always)]
    pub(super) unsafe fn take_callback(&self) -> Option<Completion> {
        // SAFETY: forwarded preconditions: `callback` is the field in use,
        // and the caller alone accesses it.
        unsafe { self.callback.with_mut(|callback| (*callback).take()) }
    }

    /// Whether the callback is still there (for tests, which are not loom
    /// models).
    ///
    /// # Safety
    /// * As for [`take_callback`](FiberJoin::take_callback).
    #[cfg(all(test, not(loom)))]
    pub(super) unsafe fn has_callback(&self) -> bool {
        // SAFETY: forwarded preconditions.
        unsafe { self.callback.with(|callback| (*callback).is_some()) }
    }

    /// Drops the field in use.
    ///
    /// # Safety
    /// * `callback`: the fiber was made with a completion callback.
    /// * Called once, from the fiber's drop (nothing else holds a reference
    ///   to it), and the join state is not used after.
    #[inline]
    pub(super) unsafe fn drop_in_place(&mut self, callback: bool) {
        if callback {
            // SAFETY: forwarded preconditions: `callback` is the field in
            // use, dropped once.
            unsafe { ManuallyDrop::drop(&mut self.callback) }
        } else {
            // SAFETY: as above, for `cell`.
            unsafe { ManuallyDrop::drop(&mut self.cell) }
        }
    }
}

/// A strong reference to a fiber made without a completion callback: a
/// [`RawFiberRef`] that also reaches the fiber's join cell (held by fiber
/// handles, join futures and supervisors; see [`FiberJoin`]).
#[derive(Clone)]
pub(crate) struct JoinRef(RawFiberRef);

impl JoinRef {
    /// The joinable reference of `fiber`.
    ///
    /// # Safety
    /// * `fiber` was made without a completion callback.
    #[inline]
    pub(crate) unsafe fn new(fiber: RawFiberRef) -> Self {
        JoinRef(fiber)
    }
}

impl core::ops::Deref for JoinRef {
    type Target = RawFiberRef;

    fn deref(&self) -> &RawFiberRef {
        &self.0
    }
}

/// A weak [`JoinRef`] (the cleanup of a join's wait).
pub(crate) struct WeakJoinRef(WeakFiberRef);

/// Completes a fiber's join state (from the run-loop, once), for a fiber
/// made without a completion callback.
pub(crate) fn complete_join(
    join: &JoinCell<Completed>,
    outcome: Outcome<Value, Value>,
    suppressed: Vec<Value>,
    traces: ChildTraces,
) {
    let leftovers = if suppressed.is_empty() && traces.is_empty() {
        None
    } else {
        Some(alloc::boxed::Box::new(Leftovers { suppressed, traces }))
    };
    // A fiber completes once, so the cell is empty here.
    let _ = join.complete((outcome, leftovers));
}

impl CellOwner<Completed> for JoinRef {
    type Weak = WeakJoinRef;

    fn cell(&self) -> &JoinCell<Completed> {
        // SAFETY: a `JoinRef` is made only for a fiber made without a
        // completion callback (`JoinRef::new`).
        unsafe { self.0.header().join.cell() }
    }

    fn downgrade(&self) -> WeakJoinRef {
        WeakJoinRef(RawFiberRef::downgrade(&self.0))
    }

    fn upgrade(weak: &WeakJoinRef) -> Option<Self> {
        // SAFETY: the weak reference was made from a `JoinRef`'s fiber.
        weak.0.upgrade().map(|fiber| unsafe { JoinRef::new(fiber) })
    }
}
