//! Without `std`: one context runs the loop, interrupt handlers (or other
//! cores) wake fibers through io-core's `RemoteQueue` (behind a
//! `critical-section`), and idle waiting is the clock's `wait` hook (for
//! instance `wfi`), ended by its `notify` hook after a push.
//!
//! # No lost wake-up before `wfi`
//!
//! The loop decides to sleep when nothing is runnable and the remote
//! queue's `pending` flag is clear. An interrupt between that check and
//! `wfi` would push a fiber, set the flag and return; a `wfi` after it
//! would then sleep until some *other* interrupt (the next SysTick, or
//! never). So the check and the wait happen inside one critical section
//! ([`idle`]): with the single-core implementation, interrupts are masked
//! from before the check until after `wfi` returns. `wfi` wakes on an
//! interrupt that becomes *pending* even while masked; the handler then
//! runs as the critical section ends, its push is drained at the next turn.
//! Either the check sees the flag (the interrupt ran before the section),
//! or the interrupt is pending during the section and ends the `wfi`.
//! That is why [`Clock::wait`] runs inside a critical section and must
//! only sleep until an interrupt is pending (`wfi`, `wfe`), never wait for
//! something a handler must do first.

use core::time::Duration;

use spindle_core::executor::support::RemoteQueue;

use crate::clock::Clock;
use crate::sync::{AtomicUsize, Ordering};

/// The executor whose loop is running (its shared address), 0 if none.
static LOOP: AtomicUsize = AtomicUsize::new(0);

/// Whether the caller is the loop context of executor `id`.
///
/// Without threads, "on the loop" means "the loop of `id` is running and we
/// are not in an interrupt handler". The library cannot tell an interrupt
/// handler apart portably, so every wake-up goes through the critical
/// section queue unless it comes from the loop itself: the loop drains that
/// queue at every turn, so this costs a critical section, not correctness.
#[inline]
pub(crate) fn on_loop_thread(_id: usize) -> bool {
    false
}

/// Marks the loop of `id` as running until the guard drops; `None` if it
/// runs already (a nested `block_on`, from a fiber or an interrupt handler).
pub(crate) fn enter_loop<T>(id: usize, _remote: &RemoteQueue<T>) -> Option<LoopGuard> {
    let previous = LOOP.swap(id, Ordering::AcqRel);
    if previous == id {
        return None;
    }
    Some(LoopGuard { previous })
}

/// Restores the previous loop marker.
pub(crate) struct LoopGuard {
    previous: usize,
}

impl Drop for LoopGuard {
    fn drop(&mut self) {
        LOOP.store(self.previous, Ordering::Release);
    }
}

/// After a push from elsewhere: ends the clock's `wait` (for instance `sev`).
#[inline]
pub(crate) fn after_push<C: Clock>(clock: &C) {
    clock.notify();
}

/// Asks the clock to wait until `deadline` or a notification, unless a
/// wake-up is pending: the check and the wait in one critical section
/// (module doc, "No lost wake-up before `wfi`").
pub(crate) fn idle<T, C: Clock>(remote: &RemoteQueue<T>, clock: &C, deadline: Option<Duration>) {
    critical_section::with(|_| {
        if !remote.has_pending() {
            clock.wait(deadline);
        }
    });
}
