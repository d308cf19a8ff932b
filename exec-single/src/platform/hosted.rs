//! With `std`: a thread-local marks the loop thread; a loop without a
//! poller (a clock other than the system clock, or no spindle-net off
//! Unix: see `io.rs`) waits while idle by parking the thread until the
//! next deadline or a remote wake-up (never a busy spin), through io-core's
//! `RemoteQueue::park` (its module doc argues why no wake-up is lost). A
//! loop with a poller waits in it instead and is woken through its reactor.

use core::cell::Cell;
use core::time::Duration;

use spindle_core::executor::support::RemoteQueue;

use crate::clock::Clock;

std::thread_local! {
    /// The executor whose loop this thread is running (its shared address).
    static LOOP: Cell<usize> = const { Cell::new(0) };
}

/// Whether the calling thread runs the loop of the executor `id`.
#[inline]
pub(crate) fn on_loop_thread(id: usize) -> bool {
    LOOP.try_with(|l| l.get() == id).unwrap_or(false)
}

/// Marks this thread as the loop thread of `id` until the guard drops;
/// `None` if this thread runs that loop already (a nested `block_on`).
pub(crate) fn enter_loop<T>(id: usize, _remote: &RemoteQueue<T>) -> Option<LoopGuard> {
    let previous = LOOP.try_with(|l| l.get()).ok()?;
    if previous == id {
        return None;
    }
    LOOP.with(|l| l.set(id));
    Some(LoopGuard { previous })
}

/// Restores the previous loop marker (nested executors on one thread).
pub(crate) struct LoopGuard {
    previous: usize,
}

impl Drop for LoopGuard {
    fn drop(&mut self) {
        let _ = LOOP.try_with(|l| l.set(self.previous));
    }
}

/// After a push from elsewhere: the queue has unparked the loop already.
#[inline]
pub(crate) fn after_push<C: Clock>(_clock: &C) {}

/// Parks until `deadline` (by `clock`) or an unpark from a remote push or
/// notification.
pub(crate) fn idle<T, C: Clock>(remote: &RemoteQueue<T>, clock: &C, deadline: Option<Duration>) {
    let timeout = deadline.map(|deadline| deadline.saturating_sub(clock.now()));
    remote.park(timeout);
}
