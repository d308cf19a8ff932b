//! The header: the part of a fiber that other threads touch.
//!
//! First field of the fiber (`repr(C)`), independent of the executor type,
//! so that a callback, a handle or a weak reference reaches it through a
//! type-erased pointer. It holds the state word (`state.rs`), the slot the
//! winning completer writes its result into, the join state (`join.rs`),
//! the fiber's number, and, with tracing, the pointer to the ring (which
//! also keeps the activity byte) that fiber dumps read.
//! Which thread may touch which field, and when: the `fiber` module doc.

use super::id::FiberId;
use super::join::FiberJoin;
use super::run_state::Completion;
use super::state::{
    Claim, State, TransitionToCancelRequested, TransitionToDelivered, TransitionToSuspended,
};
use crate::engine::erased::ResSlot;
use crate::engine::node::Res;
use crate::engine::tracing::RingSlot;
use crate::sync::UnsafeCell;

/// The part of a fiber shared with callbacks and handles on other threads.
pub(crate) struct Header {
    pub(super) state: State,
    /// Written by the completer that won the claim, read by the fiber after
    /// it saw `DONE`. Two words: the result's side is a bit of its vtable
    /// pointer ([`ResSlot`]).
    slot: UnsafeCell<ResSlot>,
    /// The join state: the outcome once the fiber has completed (for a
    /// fiber started with `IO::start` or [`FiberHandle::spawn`]), and the
    /// joiners waiting for it; or, in its place, the completion callback
    /// of a fiber whose outcome goes to one ([`FiberJoin`]: which one, the
    /// run state says; dropped by `FiberInner`'s drop).
    /// Inside the fiber, so that starting a fiber is one allocation (see
    /// `join.rs`).
    ///
    /// [`FiberHandle::spawn`]: super::handle::FiberHandle::spawn
    pub(crate) join: FiberJoin,
    /// The fiber's number on its executor, for dumps and `Debug`: set
    /// when the fiber is made, never written again, never read by the
    /// run-loop.
    pub(crate) id: FiberId,
    /// The fiber's trace ring, once it records (`engine/tracing/fiber_on.rs`):
    /// here, in the part other threads may read, for fiber dumps. One
    /// word, pointing at the ring's one allocation, which also keeps what
    /// the fiber does now for dumps (its activity byte, set only while the
    /// fiber traces). Zero-sized without the `tracing` feature.
    pub(crate) ring: RingSlot,
}

// SAFETY: `slot` is written only by the single completer that won the CAS to
// `CLAIMED` and read only by the fiber after observing `DONE` with `Acquire`
// (which the completer set with `Release` after writing); see the module doc
// of `fiber`. Every other field is atomic or behind a lock.
unsafe impl Sync for Header {}
// SAFETY: everything in the slot is `Send` (erased values are made only from
// `Send` types).
unsafe impl Send for Header {}

impl Header {
    /// The header of a new fiber numbered `id`, whose outcome goes to
    /// `on_complete`, or, without one, to its join state.
    pub(super) fn new(id: FiberId, on_complete: Option<Completion>) -> Self {
        Header {
            state: State::new(),
            slot: UnsafeCell::new(ResSlot::empty()),
            join: FiberJoin::new(on_complete),
            id,
            ring: RingSlot::new(),
        }
    }

    /// Starts a new suspension; returns its generation (step 1).
    #[inline(always)]
    pub(super) fn begin_suspension(&self) -> usize {
        self.state.begin_suspension()
    }

    /// Takes the result if a completer has already delivered it
    /// (`Some(None)`: the suspension was ended by cancellation).
    #[inline]
    pub(super) fn take_if_done(&self) -> Option<Option<Res>> {
        if self.state.is_done() {
            Some(self.take_result())
        } else {
            None
        }
    }

    /// Marks the fiber suspended (step 3).
    #[inline(always)]
    pub(super) fn suspend(&self, interruptible: bool) -> TransitionToSuspended {
        self.state.transition_to_suspended(interruptible)
    }

    /// Takes the delivered result (`None`: resumed by cancellation). Only
    /// after `DONE` was observed.
    #[inline]
    pub(super) fn take_result(&self) -> Option<Res> {
        // SAFETY: the caller observed `DONE` with `Acquire`, so the completer's
        // write happened before, and no completer writes again this generation.
        self.slot.with_mut(|slot| unsafe { (*slot).take() })
    }

    /// Whether cancellation was requested.
    #[inline(always)]
    pub(super) fn is_cancel_requested(&self) -> bool {
        self.state.is_cancel_requested()
    }

    /// Requests cancellation (idempotent).
    #[inline(always)]
    pub(super) fn request_cancel(&self) -> TransitionToCancelRequested {
        self.state.transition_to_cancel_requested()
    }

    /// Records the fiber's own cancellation request (`IO::canceled`).
    #[inline(always)]
    pub(super) fn request_self_cancel(&self) {
        self.state.request_self_cancel()
    }

    /// The claim of step 2 of the protocol.
    #[inline(always)]
    pub(super) fn claim(&self, generation: usize) -> Claim {
        self.state.claim(generation)
    }

    /// Whether the fiber has completed (`mark_completed`).
    #[inline(always)]
    pub(super) fn is_completed(&self) -> bool {
        self.state.is_completed()
    }

    /// Records that the fiber has completed.
    #[inline(always)]
    pub(super) fn mark_completed(&self) {
        self.state.mark_completed()
    }

    /// Ends the suspension without a result after a won claim (the slot
    /// stays empty; the fiber resumes as after a cancellation's claim).
    #[cfg(target_pointer_width = "64")]
    #[inline]
    pub(super) fn deliver_empty(&self) -> TransitionToDelivered {
        self.state.transition_to_delivered()
    }

    /// Delivers the result after a won claim (the rest of step 2).
    #[inline]
    pub(super) fn deliver(&self, res: Res) -> TransitionToDelivered {
        // SAFETY: the caller won the claim for the current generation, so it
        // is the only writer, and the fiber reads only after `DONE`.
        self.slot.with_mut(|slot| unsafe { (*slot).put(res) });
        self.state.transition_to_delivered()
    }
}
