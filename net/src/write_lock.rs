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
//! * **Held**: the writer lists a waiter (its fiber's callback and a
//!   [`TurnState`] shared with the list) and suspends. `unlock` frees the
//!   lock and *wakes* the first waiter (outside the mutex): the waiter is
//!   taken off the list and resumed to take the lock when it runs
//!   ([`WriteLock::retake`]). Nothing is reserved for it: a writer that
//!   runs first while the lock is free takes it (the rule of io-core's
//!   `Queue`, `Semaphore` and `Mutex`, Cats Effect 3.6's), and a woken
//!   writer that finds it held lists itself again, at the back.
//! * **A writer owns a [`Turn`]** from the moment it may hold the lock or
//!   be woken until its operation ends: the `Turn` is captured by the
//!   continuation that runs after the wait (or after the write's own
//!   readiness wait), and dropping it *leaves*: a listed turn is removed
//!   from the list, a held one unlocks (waking the next waiter), a woken
//!   one passes its wake-up on to the next waiter. The run-loop drops a
//!   continuation exactly once, whether it runs (the write ended with a
//!   value), is skipped by an error, or is popped by a cancellation, and a
//!   fiber that is freed without running (nothing could wake it) drops its
//!   continuations too. So every way a write ends gives the turn back,
//!   exactly once, without a masked region or a finalizer node.
//! * **No lost wake-up, and progress.** At most one waiter is woken at a
//!   time (`woken`), and whenever the mutex is free with the lock free and
//!   waiters listed, one is woken and on its way: `unlock` wakes one when
//!   none is, and a woken turn that ends (it took the lock, found it held
//!   while a holder will unlock, or left) wakes the next one when the lock
//!   is free. A lock never waits for a fiber that has not run: a writer
//!   canceled between its wake-up and its run (the usual fate of the
//!   oldest waiter under short timeouts) holds nothing, so the writers
//!   that do run keep writing. Waiters are woken in arrival order; a
//!   writer that arrives while the lock is free takes it.
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
//! runs under it. Design credit: wake-and-retry is Cats Effect 3.6's rule
//! for its queues, as io-core's `Semaphore` has it, written anew over a
//! fiber callback; no code is copied.
//!
//! [`Source`]: crate::source::Source

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use spindle_core::Callback;

use crate::sync::lock;

/// Not listed (the wait has not registered yet, or registers again).
const NEW: u8 = 0;
/// In the list.
const QUEUED: u8 = 1;
/// Holds the lock.
const GRANTED: u8 = 2;
/// Gave the lock back, or left the list, or was freed at teardown.
const DONE: u8 = 3;
/// Taken off the list and resumed, to take the lock when it runs.
const WOKEN: u8 = 4;

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
    /// Whether a woken turn is on its way (at most one: module doc).
    woken: bool,
    waiters: VecDeque<Waiter>,
}

impl Inner {
    /// While the lock is free, nobody is on the way to it and waiters are
    /// listed: takes the first off the list, marked woken, for the caller
    /// to resume outside the mutex.
    fn wake_one(&mut self) -> Option<Callback<(), io::Error>> {
        if self.held || self.woken {
            return None;
        }
        let waiter = self.waiters.pop_front()?;
        waiter.turn.set(WOKEN);
        self.woken = true;
        Some(waiter.wake)
    }
}

/// What a woken writer finds when it runs ([`WriteLock::retake`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retake {
    /// It holds the lock now.
    Taken,
    /// Another writer ran first and holds it: wait again.
    Held,
    /// The lock was torn down while it waited (module doc, "Teardown").
    TornDown,
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
            .field("woken", &inner.woken)
            .field("waiting", &inner.waiters.len())
            .finish()
    }
}

/// Resumes a woken waiter. `false` means its fiber was canceled first:
/// its turn, woken now, passes the wake-up on when its continuation is
/// dropped (module doc).
fn resume(wake: Option<Callback<(), io::Error>>) {
    if let Some(wake) = wake {
        let _ = wake.succeed(());
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

    /// Gives the lock back and wakes the first waiter (resumed outside the
    /// mutex) unless one is on its way already. Outside every executor's
    /// fiber, frees the waiters instead (module documentation,
    /// "Teardown").
    pub(crate) fn unlock(&self) {
        if !crate::driver::has_current() {
            lock(&self.inner).held = false;
            self.tear_down();
            return;
        }
        let wake = {
            let mut inner = lock(&self.inner);
            inner.held = false;
            inner.wake_one()
        };
        resume(wake);
    }

    /// Drops every listed waiter's callback (module doc, "Teardown").
    fn tear_down(&self) {
        let waiters = {
            let mut inner = lock(&self.inner);
            for waiter in &inner.waiters {
                waiter.turn.set(DONE);
            }
            std::mem::take(&mut inner.waiters)
        };
        // Outside the mutex: dropping a callback may free its fiber,
        // whose own turn then leaves (and finds itself done).
        drop(waiters);
    }

    /// A waiting writer's registration: takes the lock at once if it is
    /// free (and resumes `wake` at once), else lists the turn at the back.
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

    /// A writer resumed after its registration: it holds the lock if
    /// `enqueue` gave it at once; a woken one takes it if it is free (or
    /// finds it held, and its turn is new again, to register anew).
    pub(crate) fn retake(&self, turn: &Arc<TurnState>) -> Retake {
        let mut inner = lock(&self.inner);
        match turn.get() {
            GRANTED => Retake::Taken,
            WOKEN => {
                inner.woken = false;
                if inner.held {
                    // The holder wakes the next waiter when it unlocks.
                    turn.set(NEW);
                    Retake::Held
                } else {
                    inner.held = true;
                    turn.set(GRANTED);
                    Retake::Taken
                }
            }
            _ => Retake::TornDown,
        }
    }

    /// A writer's turn ends: out of the list if it waits there, the lock
    /// given back if it holds it, its wake-up passed on if it was woken;
    /// nothing otherwise. Idempotent.
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
            WOKEN => {
                // Canceled between its wake-up and its run: the next
                // waiter goes instead.
                turn.set(DONE);
                inner.woken = false;
                if !crate::driver::has_current() {
                    drop(inner);
                    self.tear_down();
                    return;
                }
                let wake = inner.wake_one();
                drop(inner);
                resume(wake);
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
