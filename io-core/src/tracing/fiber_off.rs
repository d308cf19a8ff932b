//! Fiber tracing compiled out (no `tracing` feature): the API of
//! `fiber_on.rs` with nothing inside. Every type is zero-sized, so the
//! fiber's header and run state have no tracing field; every call is an
//! empty `#[inline(always)]` function, so the run-loop has no branch.

use crate::config::FiberConfig;
use crate::fiber::FiberState;
use spindle_trace::Trace;

/// A new fiber never traces.
#[inline(always)]
pub(crate) fn fiber_traces(_traced: bool, _config: &FiberConfig) -> bool {
    false
}

/// No activity is kept.
pub(crate) struct Activity;

impl Activity {
    /// Does nothing.
    #[inline(always)]
    pub(crate) fn set(_ring: &OwnedRing, _state: FiberState) {}

    /// Nothing was recorded.
    pub(crate) fn get(_slot: &RingSlot) -> Option<FiberState> {
        None
    }
}

/// A fiber's flags, one byte: never tracing; whether its executor was told
/// that it lives on after a run, and whether its outcome goes to a
/// completion callback.
pub(crate) struct FiberFlags(u8);

impl FiberFlags {
    const LISTED: u8 = 2;
    const CALLBACK: u8 = 4;

    /// A new fiber's flags (`on` is ignored: nothing records).
    pub(crate) fn new(_on: bool, callback: bool) -> Self {
        FiberFlags(if callback { Self::CALLBACK } else { 0 })
    }

    /// Whether the fiber's outcome goes to a completion callback kept in
    /// its join state (set when the fiber is made, never changed).
    #[inline(always)]
    pub(crate) fn has_callback(&self) -> bool {
        self.0 & Self::CALLBACK != 0
    }

    /// Never.
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        false
    }

    /// Does nothing (there are no traced scopes to switch).
    #[inline(always)]
    pub(crate) fn set_on(&mut self, _on: bool) {}

    /// Whether the executor was told that the fiber lives on after a run.
    #[inline(always)]
    pub(crate) fn is_listed(&self) -> bool {
        self.0 & Self::LISTED != 0
    }

    /// Records that the executor was told.
    #[inline(always)]
    pub(crate) fn set_listed(&mut self) {
        self.0 |= Self::LISTED;
    }

    /// The empty trace.
    #[inline(always)]
    #[allow(dead_code)]
    pub(crate) fn snapshot(&self, _run: Option<&OwnedRing>, _slot: &RingSlot) -> Trace {
        Trace::empty()
    }
}

/// No ring to record into (the run-loop is given `None`).
pub(crate) struct OwnedRing;

/// No ring.
pub(crate) struct RingSlot;

impl RingSlot {
    pub(crate) fn new() -> Self {
        RingSlot
    }

    /// There is no ring.
    #[allow(dead_code)]
    pub(crate) fn get(&self) -> Option<&spindle_trace::Ring> {
        None
    }
}
