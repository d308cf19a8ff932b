//! With `std`: a thread-local marks the loop thread; the remote queue and
//! the fiber list are mutexes; idle waiting parks the thread until the next
//! deadline or a remote wake-up (never a busy spin).

use alloc::collections::VecDeque;
use core::cell::Cell;
use core::time::Duration;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, Thread};

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

/// Marks this thread as the loop thread of `id` until the guard drops.
pub(crate) fn enter_loop<T>(id: usize, remote: &Remote<T>) -> LoopGuard {
    let previous = LOOP.with(|l| l.replace(id));
    remote
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .waiter = Some(thread::current());
    LoopGuard { previous }
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

struct RemoteState<T> {
    queue: VecDeque<T>,
    waiter: Option<Thread>,
}

/// Fibers woken from other threads.
///
/// `pending` is set (SeqCst) by every push and notification *before* the
/// waiter is read; the loop registers itself as the waiter *before* it
/// reads `pending` to decide whether to park. So either the loop sees the
/// flag, or the waker sees the loop registered and unparks it: no wake-up
/// is lost, and the loop registers only when it is about to park.
pub(crate) struct Remote<T> {
    state: Mutex<RemoteState<T>>,
    pending: AtomicBool,
}

impl<T> Remote<T> {
    pub(crate) fn new() -> Self {
        Remote {
            state: Mutex::new(RemoteState {
                queue: VecDeque::new(),
                waiter: None,
            }),
            pending: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RemoteState<T>> {
        // A panic while holding this lock cannot leave the queue half-updated
        // (push/pop are atomic with respect to panics), so poisoning is moot.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn push<C: Clock>(&self, item: T, _clock: &C) {
        let waiter = {
            let mut state = self.lock();
            state.queue.push_back(item);
            self.pending.store(true, Ordering::SeqCst);
            state.waiter.clone()
        };
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }

    /// Wakes the loop thread if it is parked (something it waits for changed).
    pub(crate) fn notify<C: Clock>(&self, _clock: &C) {
        self.pending.store(true, Ordering::SeqCst);
        let waiter = self.lock().waiter.clone();
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }

    pub(crate) fn drain_into(&self, out: &mut VecDeque<T>) {
        // The common case on the loop thread: nothing came from elsewhere,
        // and no lock is taken.
        if !self.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut state = self.lock();
        out.extend(state.queue.drain(..));
    }

    /// How many fibers wait in the queue (for fiber dumps).
    pub(crate) fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().queue.is_empty()
    }
}

/// Parks until `deadline` (by `clock`) or an unpark from a remote push or
/// notification.
pub(crate) fn idle<T, C: Clock>(remote: &Remote<T>, clock: &C, deadline: Option<Duration>) {
    remote.lock().waiter = Some(thread::current());
    if remote.pending.load(Ordering::SeqCst) {
        return;
    }
    // A push between the check and the park unparks us first, and
    // `park` then returns at once: no wake-up is lost.
    match deadline {
        None => thread::park(),
        Some(deadline) => {
            let now = clock.now();
            if deadline > now {
                thread::park_timeout(deadline - now);
            }
        }
    }
}

/// A short lock for state any thread may touch (the list of live fibers).
pub(crate) struct Lock<T> {
    inner: Mutex<T>,
}

impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock {
            inner: Mutex::new(value),
        }
    }

    /// Runs `f` with the value locked. A panic in `f` cannot leave the
    /// value half-updated for our uses (a push, a read), so poisoning is
    /// ignored.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
