//! Deadline regions: the payloads of a `Region` node (a body run under a
//! deadline on the fiber's own stack, `IO::timeout`) and of the
//! `RegionEnd` frame that marks where the region ends on the continuation
//! stack. The protocol (when the deadline is observed, how the stack is
//! unwound to the region) is the run-loop's: `fiber/region.rs`.

use core::time::Duration;

use super::Node;
use crate::engine::erased::{ErasedFn, Value};

/// What a region's fallback is told when the region ends without the
/// body's outcome: the body was canceled by the deadline (`None`), or it
/// canceled itself (`IO::canceled`) before the deadline: then the fallback
/// first waits until `Some(deadline)`, as the timer of Cats Effect's race
/// would. Erases nothing: an input any fallback adapter may be given
/// (`cont.rs`, `Plain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Expired {
    /// `Some(deadline)`: the body canceled itself; the deadline is still
    /// to come.
    pub(crate) canceled_until: Option<Duration>,
}

/// The fallback of a region: the program to run when the region ends
/// without the body's outcome.
pub(crate) type Fallback = ErasedFn<Expired, Node>;

/// The payload of a `Region` node: the body, how long it may take, and the
/// fallback.
pub(crate) struct RegionSpec {
    pub(crate) body: Node,
    pub(crate) duration: Duration,
    pub(crate) fallback: Fallback,
}

/// The innermost run of regions a fiber is in that share one mask depth
/// (the regions that the deadline may end at that depth): kept by the
/// fiber while it is in a region, and by each region's frame for the run
/// around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionTop {
    /// The mask depth at which the regions of the run were entered (the
    /// depth at which their deadline is observed).
    pub(crate) masks: u32,
    /// The earliest deadline of the run.
    pub(crate) deadline: Duration,
    /// The index on the continuation stack of the innermost region's frame.
    pub(crate) index: usize,
}

/// A `Region` node's payload as `Kind::Region` holds it: erased, so that
/// `Kind` stays as small as it was (a `RegionSpec` decoded in place made
/// every step of the loop cost 5 more instructions, callgrind).
pub(crate) struct PendingRegion(Value);

impl PendingRegion {
    /// # Safety
    /// * `value` was made by `Value::new::<RegionSpec>` (`Node::region`).
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    pub(super) unsafe fn new(value: Value) -> Self {
        PendingRegion(value)
    }

    /// The payload.
    pub(crate) fn into_spec(self) -> RegionSpec {
        // SAFETY: a `RegionSpec` (`new`'s precondition).
        unsafe { self.0.take::<RegionSpec>() }
    }
}

/// A `RegionEnd` frame's payload as `FrameKind::RegionEnd` holds it:
/// erased, as [`PendingRegion`].
pub(crate) struct EndedRegion(Value);

impl EndedRegion {
    /// # Safety
    /// * `value` was made by `Value::new::<RegionData>`
    ///   (`Frame::region_end`).
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    pub(super) unsafe fn new(value: Value) -> Self {
        EndedRegion(value)
    }

    /// The payload.
    pub(crate) fn into_data(self) -> RegionData {
        // SAFETY: a `RegionData` (`new`'s precondition).
        unsafe { self.0.take::<RegionData>() }
    }
}

/// The payload of a `RegionEnd` frame.
pub(crate) struct RegionData {
    /// The region's own deadline (on the executor's monotonic clock).
    pub(crate) deadline: Duration,
    /// The fiber's innermost run of regions before this one (restored when
    /// the region ends).
    pub(crate) outer: Option<RegionTop>,
    pub(crate) fallback: Fallback,
}
