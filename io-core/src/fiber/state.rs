//! The fiber's state word and its transitions.
//!
//! One `AtomicUsize`, `generation << 5 | CANCEL | INTERRUPTIBLE | DONE |
//! CLAIMED | SUSPENDED`; the protocol that moves it is written down in the
//! `fiber` module doc (steps 1 to 4, cancellation). Every transition is one
//! method here, and every transition that can go more than one way returns
//! a `#[must_use]` enum that says what happened and, by its name, what the
//! caller must do next (tokio's `TransitionToRunning` style): a caller
//! cannot mistake "I won the claim" for "I must schedule the fiber", which
//! two `bool`s would allow.
//!
//! Only the word lives here. The result slot it guards is in the header
//! (`header.rs`), which pairs the slot's accesses with these transitions.

use crate::sync::{AtomicUsize, Ordering};

const SUSPENDED: usize = 0b0001;
const CLAIMED: usize = 0b0010;
const DONE: usize = 0b0100;
/// The suspension may be ended by cancellation (the fiber was not masked).
const INTERRUPTIBLE: usize = 0b1000;
/// Cancellation was requested (set once, kept across suspensions).
const CANCEL: usize = 0b1_0000;
const FLAG_BITS: u32 = 5;
/// The word of a completed fiber: generation 0 (never the generation of a
/// suspension: those start at 1), claimed and done, not suspended.
const COMPLETED: usize = CLAIMED | DONE;
const GEN_MASK: usize = usize::MAX >> FLAG_BITS;

/// The state word of one fiber.
pub(super) struct State {
    word: AtomicUsize,
}

/// What a completer's (or a canceler's) claim of a suspension found.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The caller claimed the suspension: it alone may end it (deliver a
    /// result, or end it for cancellation).
    Won,
    /// The suspension was already claimed, or the word belongs to another
    /// generation (a stale callback, a completed fiber): change nothing.
    Lost,
}

/// What the fiber found when it marked itself suspended (step 3).
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TransitionToSuspended {
    /// Suspended: whoever ends the suspension schedules the fiber; the
    /// fiber's thread must not touch `core` any more.
    Suspended,
    /// A completer delivered the result before the fiber suspended (during
    /// the registration, or racing it): continue at once, on this thread.
    ResultArrived,
    /// Cancellation was requested before an interruptible suspension, and
    /// the fiber claimed its own suspension: continue at once, to finalize
    /// (the slot is empty).
    CanceledBeforeSuspending,
}

/// What a completer that won the claim found when it set `DONE`.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TransitionToDelivered {
    /// The fiber has not suspended yet: it will see `DONE` and continue by
    /// itself.
    FiberNotSuspended,
    /// The fiber was suspended: the completer must schedule it.
    Schedule,
}

/// What a cancellation request found.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TransitionToCancelRequested {
    /// The request is recorded; the fiber observes it at its next
    /// cancellation check (or was already finalizing, masked, completed).
    Requested,
    /// The fiber was suspended interruptibly, and the caller claimed the
    /// suspension without a result: it must schedule the fiber, which then
    /// finds the slot empty and finalizes.
    Schedule,
}

/// A copy of the word, for fiber listings.
#[derive(Clone, Copy)]
pub(super) struct Snapshot(usize);

impl Snapshot {
    /// The fiber has completed.
    #[inline]
    pub(super) fn is_completed(self) -> bool {
        self.0 & !CANCEL == COMPLETED
    }

    /// The fiber is suspended and its suspension has not ended yet.
    #[inline]
    pub(super) fn is_waiting(self) -> bool {
        self.0 & (SUSPENDED | DONE) == SUSPENDED
    }

    /// The fiber's last suspension has ended (result or cancellation), and
    /// the fiber has not suspended again since: it is queued, or runs.
    #[inline]
    pub(super) fn is_resumed(self) -> bool {
        self.0 & (SUSPENDED | DONE) == SUSPENDED | DONE
    }

    /// The (last) suspension may be ended by cancellation.
    #[inline]
    pub(super) fn is_interruptible(self) -> bool {
        self.0 & INTERRUPTIBLE != 0
    }
}

impl State {
    /// A fiber that has not run yet: generation 0, no flag.
    pub(super) fn new() -> Self {
        State {
            word: AtomicUsize::new(0),
        }
    }

    /// Step 1: starts a new suspension; returns its generation.
    #[inline]
    pub(super) fn begin_suspension(&self) -> usize {
        // Stale callbacks compare against the whole word, so they fail from
        // here on; no completer of this generation exists yet. A CAS, not a
        // store: a canceler may set `CANCEL` at any moment, and it must stay.
        let mut state = self.word.load(Ordering::Relaxed);
        loop {
            // 1..=GEN_MASK: generation 0 is never used, so `COMPLETED` is
            // never the word of a suspension.
            let generation = (state >> FLAG_BITS) % GEN_MASK + 1;
            let next = (generation << FLAG_BITS) | (state & CANCEL);
            match self
                .word
                .compare_exchange_weak(state, next, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return generation,
                Err(actual) => state = actual,
            }
        }
    }

    /// Whether the current suspension has ended (`DONE`), with `Acquire`:
    /// after `true`, the completer's write of the slot is visible.
    #[inline]
    pub(super) fn is_done(&self) -> bool {
        self.word.load(Ordering::Acquire) & DONE != 0
    }

    /// Step 3: marks the fiber suspended, interruptibly if `interruptible`.
    #[inline]
    pub(super) fn transition_to_suspended(&self, interruptible: bool) -> TransitionToSuspended {
        let flags = if interruptible {
            SUSPENDED | INTERRUPTIBLE
        } else {
            SUSPENDED
        };
        let previous = self.word.fetch_or(flags, Ordering::AcqRel);
        if previous & DONE != 0 {
            return TransitionToSuspended::ResultArrived;
        }
        // A canceler whose `fetch_or(CANCEL)` came before ours saw no
        // suspension to claim: we see its bit, and claim it ourselves. One
        // that comes after sees `SUSPENDED | INTERRUPTIBLE` and claims. Both
        // are read-modify-writes of the same word, so exactly one case holds.
        if interruptible
            && previous & CANCEL != 0
            && self.claim_for_cancel(previous >> FLAG_BITS) == Claim::Won
        {
            return TransitionToSuspended::CanceledBeforeSuspending;
        }
        TransitionToSuspended::Suspended
    }

    /// Whether cancellation was requested (a relaxed load: the run-loop's
    /// cancellation checks).
    #[inline(always)]
    pub(super) fn is_cancel_requested(&self) -> bool {
        self.word.load(Ordering::Relaxed) & CANCEL != 0
    }

    /// Requests cancellation (idempotent).
    #[inline]
    pub(super) fn transition_to_cancel_requested(&self) -> TransitionToCancelRequested {
        let state = self.word.fetch_or(CANCEL, Ordering::AcqRel);
        if state & (SUSPENDED | INTERRUPTIBLE) == SUSPENDED | INTERRUPTIBLE
            && self.claim_for_cancel(state >> FLAG_BITS) == Claim::Won
        {
            TransitionToCancelRequested::Schedule
        } else {
            TransitionToCancelRequested::Requested
        }
    }

    /// Records the fiber's own cancellation request (`IO::canceled`): the
    /// fiber is running, so there is no suspension to claim.
    #[inline]
    pub(super) fn request_self_cancel(&self) {
        self.word.fetch_or(CANCEL, Ordering::AcqRel);
    }

    /// Claims the suspension `generation` without a result (for
    /// cancellation): `CLAIMED | DONE` in one step, the slot left empty.
    #[inline]
    fn claim_for_cancel(&self, generation: usize) -> Claim {
        self.claim_setting(generation, CLAIMED | DONE, Ordering::AcqRel)
    }

    /// Step 2: a completer's claim of the suspension `generation`.
    #[inline]
    pub(super) fn claim(&self, generation: usize) -> Claim {
        self.claim_setting(generation, CLAIMED, Ordering::Acquire)
    }

    /// Sets `bits` (which include `CLAIMED`) if the word still belongs to
    /// `generation` and nobody has claimed it.
    #[inline]
    fn claim_setting(&self, generation: usize, bits: usize, success: Ordering) -> Claim {
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            if state >> FLAG_BITS != generation || state & CLAIMED != 0 {
                return Claim::Lost;
            }
            match self
                .word
                .compare_exchange_weak(state, state | bits, success, Ordering::Acquire)
            {
                Ok(_) => return Claim::Won,
                Err(actual) => state = actual,
            }
        }
    }

    /// Step 2, second half: the winner of the claim, having written the
    /// slot, sets `DONE` (`AcqRel`: the slot's write is released to the
    /// fiber, the fiber's saved state acquired by a completer that resumes
    /// it).
    #[inline]
    pub(super) fn transition_to_delivered(&self) -> TransitionToDelivered {
        if self.word.fetch_or(DONE, Ordering::AcqRel) & SUSPENDED != 0 {
            TransitionToDelivered::Schedule
        } else {
            TransitionToDelivered::FiberNotSuspended
        }
    }

    /// Whether the fiber has completed (`mark_completed`).
    #[inline]
    pub(super) fn is_completed(&self) -> bool {
        self.snapshot().is_completed()
    }

    /// Records that the fiber has completed (for fiber listings): the word
    /// becomes `COMPLETED`, which no callback or canceler can claim (it has
    /// `CLAIMED` set, and a completed fiber is never suspended again).
    #[inline]
    pub(super) fn mark_completed(&self) {
        self.word.store(COMPLETED, Ordering::Release);
    }

    /// The word now (`Acquire`), for fiber listings.
    #[inline]
    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot(self.word.load(Ordering::Acquire))
    }
}
