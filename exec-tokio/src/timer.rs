//! Timers and the clock, from `tokio::time`.
//!
//! The monotonic clock is `tokio::time::Instant` since the executor was
//! built, so a runtime whose clock is paused (`#[tokio::test(start_paused
//! = true)]`, `tokio::time::pause`) runs `IO::sleep` and `timeout` on
//! virtual time, advanced by tokio whenever nothing else can run.
//!
//! Each timer is one small tokio task that sleeps until the deadline
//! (`tokio::time::sleep_until`, tokio's hierarchical timer wheel) and then
//! fires its callback; its [`TimerKey`] is the task's `AbortHandle`.
//! Cancelling aborts the task: tokio drops the sleeping future, and the
//! callback with it, unfired; aborting a task that already fired does
//! nothing, as the contract asks. One task per timer costs a spawn where
//! a heap of our own would cost a lock, and it leaves the timer wheel,
//! its driver and the paused clock to tokio instead of duplicating them
//! (exec-wstp and exec-batching keep io-core's `TimerHeap` because they
//! own their loop; here tokio owns it).

use std::time::Duration;

use spindle_core::TimerCallback;

use crate::handle::Shared;
use crate::task::InFlight;

const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Identifies a timer of this executor, to cancel it: the tokio task that
/// will fire it.
#[derive(Debug)]
pub struct TimerKey(tokio::task::AbortHandle);

/// Spawns the task that fires `callback` once the clock reaches `deadline`
/// (time since the executor's origin).
pub(crate) fn set(shared: &Shared, deadline: Duration, callback: TimerCallback) -> TimerKey {
    // A deadline past what `Instant` holds is as good as never: 30 years
    // (tokio's own "far future").
    let at = shared
        .origin
        .checked_add(deadline)
        .unwrap_or_else(|| shared.origin + FAR_FUTURE);
    let pending = InFlight::new(&shared.counters.timers);
    let task = shared.tokio.spawn(async move {
        let _pending = pending;
        tokio::time::sleep_until(at).await;
        callback.fire();
    });
    TimerKey(task.abort_handle())
}

/// Cancels a timer that has not fired; does nothing for one that has.
pub(crate) fn cancel(key: TimerKey) {
    key.0.abort();
}
