//! Per-worker timers for `sleep` and `timeout`.
//!
//! Each worker owns a shard: io-core's [`TimerHeap`] (a min-heap of
//! deadlines over a slab of the callbacks they fire). A running
//! fiber sets its timer in the shard of the worker it runs on (no
//! contention: the owner is the only usual user of its shard's lock), and
//! the owner fires due timers between fibers and before it parks, sleeping
//! no longer than its earliest deadline. An idle pool with only sleepers
//! therefore uses no CPU: every worker is parked with a timeout.
//!
//! # Cancellation: O(1), heap cleanup amortized
//!
//! A fiber may be resumed (and cancel its timer) on another worker than the
//! one that set it; the key names the shard and the timer within it.
//! Cancelling frees the timer's slot at once and leaves its heap entry
//! behind as stale, rebuilt away in amortized O(log n) (see [`TimerHeap`]). Cats Effect keeps per-worker timer structures for
//! the same reason (the owner sets them without synchronization).

use spindle_core::executor::support::TimerId;

#[cfg(doc)]
use spindle_core::executor::support::TimerHeap;

/// Identifies a timer: the worker whose shard holds it, and the timer there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerKey {
    pub(crate) shard: u32,
    pub(crate) id: TimerId,
}
