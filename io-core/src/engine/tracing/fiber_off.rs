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

/// The empty trace ([`FiberFlags::snapshot`](super::FiberFlags::snapshot)).
#[inline(always)]
#[allow(dead_code)]
pub(crate) fn snapshot(_run: Option<&OwnedRing>, _slot: &RingSlot) -> Trace {
    Trace::empty()
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
