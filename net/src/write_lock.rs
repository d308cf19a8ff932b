//! The write turn of a shared stream: what keeps every write whole when
//! clones of one stream (or of its write half) write from several fibers.
//!
//! # Protocol
//!
//! A stream's socket has one [`WriteLock`] (in its [`Source`]). A write
//! takes the lock for the whole operation, so that no other write's bytes
//! land between the bytes of one `write_all`, however many system calls
//! and readiness waits it takes:
//!
//! * **Free** (the usual case): `try_lock` takes it under a short lock of
//!   the std mutex, the write is tried at once, and, if it completes
//!   without waiting, `unlock` gives it back in the same step. No node, no
//!   allocation: a write that does not wait costs two uncontended mutex
//!   acquisitions more than before.
//! * **Held**: the writer queues a waiter (its fiber's callback and a
//!   [`TurnState`] shared with the queue) and suspends; writers are served
//!   in arrival order. `unlock` hands the lock to the first waiter (it
//!   stays held: nobody can overtake it) and resumes it, outside the mutex.
//! * **A writer owns a [`Turn`]** from the moment it may hold the lock
//!   until its operation ends: the `Turn` is captured by the continuation
//!   that runs after the wait (or after the write's own readiness wait),
//!   and dropping it *leaves*: a queued turn is removed from the queue, a
//!   granted one unlocks (handing the lock on). The run-loop drops a
//!   continuation exactly once, whether it runs (the write ended with a
//!   value), is skipped by an error, or is popped by a cancellation, and a
//!   fiber that is freed without running (nothing could wake it) drops its
//!   continuations too. So every way a write ends gives the turn back,
//!   exactly once, without a masked region or a finalizer node; a writer
//!   canceled after the lock was handed to it but before it resumed hands
//!   it on the same way.
//!
//! * **Teardown.** A turn given back outside every executor's fiber (no
//!   I/O driver is current on the thread: an executor being dropped frees
//!   the fibers that waited for readiness, and with them a writer that
//!   held the turn) wakes nobody: a writer resumed then could never run,
//!   and would stay in the dying executor's queue (a cycle between the
//!   executor and its fibers). The waiting writers' callbacks are dropped
//!   instead, as the reactor's close drops its waiters', which frees those
//!   fibers too. Inside an executor (an error or a cancellation unwinding
//!   a writer) the turn is always handed on.
//!
//! Every change of a turn's state happens under the mutex; no user code
//! runs under it. Design credit: the FIFO hand-over is the one of
//! io-core's `Semaphore` (and of tokio's `Mutex`), written anew over a
//! fiber callback; no code is copied.
//!
//! [`Source`]: crate::source::Source

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use spindle_core::Callback;

use crate::sync::lock;

/// Not queued yet (the wait has not registered).
const NEW: u8 = 0;
/// In the queue.
const QUEUED: u8 = 1;
/// Holds the lock.
const GRANTED: u8 = 2;
/// Gave the lock back, or left the queue.
const DONE: u8 = 3;

/// The state of one writer's turn, shared by the writer and the queue
/// (changed only under the lock's mutex).
#[derive(Debug)]
pub(crate) struct TurnState(AtomicU8);

impl TurnState {
    fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, state: u8) {
        self.0.store(state, Ordering::Relaxed);
    }
}

/// A queued writer.
struct Waiter {
    turn: Arc<TurnState>,
    wake: Callback<(), io::Error>,
}

#[derive(Default)]
struct Inner {
    held: bool,
    waiters: VecDeque<Waiter>,
}

/// The lock of one socket's writes (module documentation).
#[derive(Default)]
pub(crate) struct WriteLock {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for WriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("WriteLock")
            .field("held", &inner.held)
            .field("waiting", &inner.waiters.len())
            .finish()
    }
}

impl WriteLock {
    /// Takes the lock if nobody holds it.
    pub(crate) fn try_lock(&self) -> bool {
        let mut inner = lock(&self.inner);
        if inner.held {
            false
        } else {
            inner.held = true;
            true
        }
    }

    /// Gives the lock back: to the first waiter (resumed outside the
    /// mutex), or free. Outside every executor's fiber, frees the waiters
    /// instead (module documentation, "Teardown").
    pub(crate) fn unlock(&self) {
        if !crate::driver::has_current() {
            let waiters = {
                let mut inner = lock(&self.inner);
                inner.held = false;
                for waiter in &inner.waiters {
                    waiter.turn.set(DONE);
                }
                std::mem::take(&mut inner.waiters)
            };
            // Outside the mutex: dropping a callback may free its fiber,
            // whose own turn then leaves (and finds itself done).
            drop(waiters);
            return;
        }
        let next = {
            let mut inner = lock(&self.inner);
            match inner.waiters.pop_front() {
                Some(waiter) => {
                    waiter.turn.set(GRANTED);
                    Some(waiter.wake)
                }
                None => {
                    inner.held = false;
                    None
                }
            }
        };
        if let Some(wake) = next {
            // `false`: the waiter was canceled first; its turn, granted now,
            // unlocks when its continuation is dropped (module doc).
            let _ = wake.succeed(());
        }
    }

    /// A waiting writer's registration: takes the lock at once if it is
    /// free (and resumes `wake` at once), else queues the turn.
    pub(crate) fn enqueue(&self, turn: &Arc<TurnState>, wake: Callback<(), io::Error>) {
        let mut inner = lock(&self.inner);
        if turn.get() != NEW {
            // Left already (cannot happen: the turn is dropped after its
            // registration). Resume it: it then finds its turn done.
            drop(inner);
            let _ = wake.succeed(());
            return;
        }
        if inner.held {
            turn.set(QUEUED);
            inner.waiters.push_back(Waiter {
                turn: turn.clone(),
                wake,
            });
        } else {
            inner.held = true;
            turn.set(GRANTED);
            drop(inner);
            let _ = wake.succeed(());
        }
    }

    /// A writer's turn ends: out of the queue if it waits there, the lock
    /// handed on if it holds it; nothing otherwise. Idempotent.
    pub(crate) fn leave(&self, turn: &Arc<TurnState>) {
        let mut inner = lock(&self.inner);
        match turn.get() {
            QUEUED => {
                turn.set(DONE);
                if let Some(at) = inner
                    .waiters
                    .iter()
                    .position(|w| Arc::ptr_eq(&w.turn, turn))
                {
                    let waiter = inner.waiters.remove(at);
                    drop(inner);
                    // The callback (a reference to the fiber) is dropped
                    // outside the mutex.
                    drop(waiter);
                }
            }
            GRANTED => {
                turn.set(DONE);
                drop(inner);
                self.unlock();
            }
            _ => turn.set(DONE),
        }
    }

    /// Writers waiting now (for tests and `Debug`).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.inner).waiters.len()
    }

    /// Whether the lock is held now (for tests).
    #[cfg(test)]
    pub(crate) fn is_held(&self) -> bool {
        lock(&self.inner).held
    }
}

/// What holds a [`WriteLock`] (a socket's source, shared).
pub(crate) trait LockOwner {
    /// The lock.
    fn write_lock(&self) -> &WriteLock;
}

/// One writer's turn: gives it back (leaves the queue, or unlocks) when
/// dropped. Holds what owns the lock (`L`: the socket's source).
pub(crate) struct Turn<L: LockOwner> {
    owner: L,
    state: Arc<TurnState>,
}

impl<L: LockOwner> Turn<L> {
    /// A turn that holds the lock already (taken with `try_lock`).
    pub(crate) fn held(owner: L) -> Turn<L> {
        Turn {
            owner,
            state: Arc::new(TurnState(AtomicU8::new(GRANTED))),
        }
    }

    /// A turn that has yet to wait for the lock.
    pub(crate) fn waiting(owner: L) -> Turn<L> {
        Turn {
            owner,
            state: Arc::new(TurnState(AtomicU8::new(NEW))),
        }
    }

    /// The state the queue shares (for `enqueue`).
    pub(crate) fn state(&self) -> &Arc<TurnState> {
        &self.state
    }

    /// What owns the lock.
    pub(crate) fn owner(&self) -> &L {
        &self.owner
    }
}

impl<L: LockOwner> Drop for Turn<L> {
    fn drop(&mut self) {
        self.owner.write_lock().leave(&self.state);
    }
}

#[cfg(test)]
mod tests {
    //! The lock's states without fibers: callbacks are not needed for the
    //! paths that never queue; the queued paths run in the integration
    //! tests (`net_tcp.rs`: two fibers writing through clones).

    use super::*;

    struct Owner(Arc<WriteLock>);

    impl LockOwner for Owner {
        fn write_lock(&self) -> &WriteLock {
            &self.0
        }
    }

    #[test]
    fn a_free_lock_is_taken_once_and_given_back_by_unlock() {
        let lock = WriteLock::default();
        assert!(lock.try_lock());
        assert!(!lock.try_lock(), "held");
        lock.unlock();
        assert!(!lock.is_held());
        assert!(lock.try_lock());
    }

    #[test]
    fn a_held_turn_unlocks_when_dropped_and_only_once() {
        let lock = Arc::new(WriteLock::default());
        assert!(lock.try_lock());
        let turn = Turn::held(Owner(lock.clone()));
        let state = turn.state().clone();
        drop(turn);
        assert!(!lock.is_held());
        assert!(lock.try_lock(), "given back");
        // Leaving again changes nothing: the lock stays with its new holder.
        lock.leave(&state);
        assert!(lock.is_held());
        assert_eq!(lock.waiting(), 0);
    }

    #[test]
    fn a_turn_that_never_registered_gives_nothing_back() {
        let lock = Arc::new(WriteLock::default());
        assert!(lock.try_lock());
        drop(Turn::waiting(Owner(lock.clone())));
        assert!(lock.is_held(), "the holder keeps the lock");
    }
}
