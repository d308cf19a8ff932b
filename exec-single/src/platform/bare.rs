//! Without `std`: one context runs the loop, interrupt handlers (or other
//! cores) wake fibers through a queue behind a `critical-section`, and idle
//! waiting is the clock's `wait` hook (for instance `wfi`). The fiber list
//! is behind a `critical-section` too: a spin lock held by the loop would
//! deadlock an interrupt handler that starts a fiber.

use alloc::collections::VecDeque;
use core::cell::RefCell;
use core::time::Duration;

use critical_section::Mutex;
use portable_atomic::{AtomicUsize, Ordering};

use crate::clock::Clock;

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

/// Marks the loop of `id` as running until the guard drops.
pub(crate) fn enter_loop<T>(id: usize, _remote: &Remote<T>) -> LoopGuard {
    let previous = LOOP.swap(id, Ordering::AcqRel);
    LoopGuard { previous }
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

/// Fibers woken from interrupt handlers or other contexts.
pub(crate) struct Remote<T> {
    queue: Mutex<RefCell<VecDeque<T>>>,
}

impl<T> Remote<T> {
    pub(crate) fn new() -> Self {
        Remote {
            queue: Mutex::new(RefCell::new(VecDeque::new())),
        }
    }

    pub(crate) fn push<C: Clock>(&self, item: T, clock: &C) {
        critical_section::with(|cs| self.queue.borrow_ref_mut(cs).push_back(item));
        clock.notify();
    }

    /// Ends the loop's idle wait (something it waits for changed).
    pub(crate) fn notify<C: Clock>(&self, clock: &C) {
        clock.notify();
    }

    pub(crate) fn drain_into(&self, out: &mut VecDeque<T>) {
        critical_section::with(|cs| out.extend(self.queue.borrow_ref_mut(cs).drain(..)));
    }

    /// How many fibers wait in the queue (for fiber dumps).
    pub(crate) fn len(&self) -> usize {
        critical_section::with(|cs| self.queue.borrow_ref(cs).len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        critical_section::with(|cs| self.queue.borrow_ref(cs).is_empty())
    }
}

/// Asks the clock to wait until `deadline` or a notification.
pub(crate) fn idle<T, C: Clock>(remote: &Remote<T>, clock: &C, deadline: Option<Duration>) {
    if remote.is_empty() {
        clock.wait(deadline);
    }
}

/// A short lock for state any context may touch (the list of live
/// fibers): a critical section.
pub(crate) struct Lock<T> {
    inner: Mutex<RefCell<T>>,
}

impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock {
            inner: Mutex::new(RefCell::new(value)),
        }
    }

    /// Runs `f` with the value borrowed inside a critical section. `f`
    /// must not take this lock again (the `RefCell` would panic).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        critical_section::with(|cs| f(&mut self.inner.borrow_ref_mut(cs)))
    }
}
