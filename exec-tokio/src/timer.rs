//! Timers and the clock, from `tokio::time`.
//!
//! The monotonic clock is `tokio::time::Instant` since the executor was
//! built, so a runtime whose clock is paused (`#[tokio::test(start_paused
//! = true)]`, `tokio::time::pause`) runs `IO::sleep` and `timeout` on
//! virtual time, advanced by tokio whenever nothing else can run.
//!
//! Each timer is one small tokio task that sleeps until the deadline
//! (`tokio::time::sleep_until`, tokio's hierarchical timer wheel) and then
//! fires its callback; its [`TimerKey`] is the task's `AbortHandle`. The
//! task's future ([`Fire`]) holds only the `Sleep`, the callback and the
//! timer count (144 bytes), so that the task fits a 256-byte cell of
//! tokio's (a suspended fiber's timer was a 384-byte cell with an `async`
//! block, which also kept the deadline next to the `Sleep`).
//! Cancelling aborts the task: tokio drops the sleeping future, and the
//! callback with it, unfired; aborting a task that already fired does
//! nothing, as the contract asks. One task per timer costs a spawn where
//! a heap of our own would cost a lock, and it leaves the timer wheel,
//! its driver and the paused clock to tokio instead of duplicating them
//! (exec-single, exec-wstp and exec-batching keep io-core's `TimerHeap`
//! because they own their loop; here tokio owns it).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
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
    let sleep = {
        // A `Sleep` is made in its runtime's context (a fiber's task is in
        // it already; entering again is allowed and cheap).
        let _context = shared.tokio.enter();
        tokio::time::sleep_until(at)
    };
    let task = shared.tokio.spawn(Fire {
        sleep,
        callback: Some(callback),
        _pending: InFlight::new(&shared.counters.timers),
    });
    TimerKey(task.abort_handle())
}

pin_project_lite::pin_project! {
    /// A timer's task: sleeps until the deadline, then fires the callback.
    /// Written out rather than as an `async` block so that it holds nothing
    /// else (see the module doc): aborted, it drops the callback unfired
    /// and the count with it.
    pub(crate) struct Fire {
        #[pin]
        sleep: tokio::time::Sleep,
        callback: Option<TimerCallback>,
        _pending: InFlight,
    }
}

impl Future for Fire {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.sleep.poll(cx).is_pending() {
            return Poll::Pending;
        }
        if let Some(callback) = this.callback.take() {
            callback.fire();
        }
        Poll::Ready(())
    }
}

/// Cancels a timer that has not fired; does nothing for one that has.
pub(crate) fn cancel(key: TimerKey) {
    key.0.abort();
}

#[cfg(test)]
mod tests {
    use super::Fire;

    #[test]
    fn a_timer_task_future_holds_only_the_sleep_the_callback_and_the_count() {
        // tokio's task cell adds about 100 bytes (header, scheduler, id,
        // trailer) and is aligned to 128 on x86-64 and aarch64: a future of
        // at most 152 bytes keeps a timer's task in a 256-byte cell, where
        // the `async` block it replaces (176 bytes) took a 384-byte one.
        let sleep = size_of::<tokio::time::Sleep>();
        let fire = size_of::<Fire>();
        assert!(
            fire <= sleep + 32,
            "the timer future is {fire} bytes, the Sleep {sleep}"
        );
    }
}
