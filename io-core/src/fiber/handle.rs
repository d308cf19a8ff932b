//! Fiber handles: what `IO::start` returns.
//!
//! A [`FiberHandle`] shares a join state with its fiber's completion
//! callback, and holds a reference to the fiber itself to request its
//! cancellation.
//!
//! # Join protocol
//!
//! The join state holds the outcome once the fiber has completed, the
//! errors its finalizers suppressed, and the joiners waiting until then.
//! Completion stores the outcome and wakes every waiter, under the lock,
//! exactly once. A joiner that is canceled while waiting removes its waiter
//! (the async finalizer of `join`), so nothing is left behind. Every joiner
//! gets its own clone of the outcome, which is why `join` asks for `A: Clone`
//! and `E: Clone`; [`FiberHandle::join_void`] waits without reading it.
//!
//! # Cancel
//!
//! `cancel` is uncancelable: it requests cancellation (an atomic flag the
//! fiber reads at its cancellation points; a fiber suspended unmasked is
//! resumed at once), then waits until the fiber has completed, so its
//! finalizers have run when `cancel` returns. Canceling twice, or canceling
//! a fiber that has completed, only waits for (or finds) the completion.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use super::RawFiberRef;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::{Arc, Mutex};

type Waiter<A, E> = Box<dyn FnOnce(&Outcome<A, E>) + Send>;

struct JoinInner<A, E> {
    outcome: Option<Outcome<A, E>>,
    suppressed: Vec<E>,
    waiters: Vec<(u64, Waiter<A, E>)>,
    next_waiter: u64,
}

/// The state a fiber's completion shares with its handles.
pub(crate) struct JoinState<A, E> {
    inner: Mutex<JoinInner<A, E>>,
}

impl<A, E> JoinState<A, E> {
    pub(crate) fn new() -> Self {
        JoinState {
            inner: Mutex::new(JoinInner {
                outcome: None,
                suppressed: Vec::new(),
                waiters: Vec::new(),
                next_waiter: 0,
            }),
        }
    }

    /// Stores the outcome and wakes every joiner (the fiber's completion).
    pub(crate) fn complete(&self, outcome: Outcome<A, E>, suppressed: Vec<E>) {
        let waiters = {
            let mut inner = self.inner.lock();
            inner.suppressed = suppressed;
            inner.outcome = Some(outcome);
            core::mem::take(&mut inner.waiters)
        };
        // Wake outside the lock: a waiter schedules its fiber.
        let inner = self.inner.lock();
        let outcome = inner.outcome.as_ref().expect("stored just above");
        for (_, waiter) in waiters {
            waiter(outcome);
        }
    }

    /// Calls `f` with the outcome now if there is one, or registers it;
    /// returns the waiter's id if it was registered.
    fn on_outcome(&self, f: Waiter<A, E>) -> Option<u64> {
        let mut inner = self.inner.lock();
        match &inner.outcome {
            Some(outcome) => {
                f(outcome);
                None
            }
            None => {
                let id = inner.next_waiter;
                inner.next_waiter += 1;
                inner.waiters.push((id, f));
                Some(id)
            }
        }
    }

    fn remove_waiter(&self, id: u64) {
        let removed = {
            let mut inner = self.inner.lock();
            let position = inner.waiters.iter().position(|(w, _)| *w == id);
            position.map(|p| inner.waiters.swap_remove(p))
        };
        drop(removed);
    }
}

/// A started fiber: join it, cancel it.
///
/// Cloning a handle gives another handle to the same fiber. Dropping every
/// handle does not cancel the fiber (as in Cats Effect: a started fiber runs
/// on its own; use `background` to tie its life to a scope).
pub struct FiberHandle<A, E> {
    state: Arc<JoinState<A, E>>,
    fiber: RawFiberRef,
}

impl<A, E> Clone for FiberHandle<A, E> {
    fn clone(&self) -> Self {
        FiberHandle {
            state: self.state.clone(),
            fiber: self.fiber.clone(),
        }
    }
}

impl<A, E> fmt::Debug for FiberHandle<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiberHandle")
            .field("fiber", &self.fiber.id())
            .finish()
    }
}

impl<A: Send + 'static, E: Send + 'static> FiberHandle<A, E> {
    pub(crate) fn new(state: Arc<JoinState<A, E>>, fiber: RawFiberRef) -> Self {
        FiberHandle { state, fiber }
    }

    /// Waits for the fiber to complete, without reading its outcome.
    pub fn join_void<E2: Send + 'static>(&self) -> IO<(), E2> {
        let state = self.state.clone();
        IO::async_(move |cb| {
            let id = state.on_outcome(Box::new(move |_| {
                cb.succeed(());
            }));
            id.map(|id| IO::delay(move || state.remove_waiter(id)))
        })
    }

    /// Requests the fiber's cancellation and waits until it has completed
    /// (its finalizers have run). Uncancelable, idempotent; does nothing
    /// more than wait on a fiber that has already completed.
    pub fn cancel<E2: Send + 'static>(&self) -> IO<(), E2> {
        let fiber = self.fiber.clone();
        let wait = self.join_void();
        IO::uncancelable(move |_| IO::delay(move || fiber.request_cancel()).product_r(wait))
    }

    /// The errors the fiber's finalizers suppressed (ran while the fiber was
    /// already failing, canceled or panicking), once it has completed.
    pub fn suppressed_errors(&self) -> Vec<E>
    where
        E: Clone,
    {
        self.state.inner.lock().suppressed.clone()
    }
}

impl<A, E> FiberHandle<A, E>
where
    A: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    /// Waits for the fiber to complete and returns its outcome. Any number
    /// of fibers may join, any number of times: each gets the outcome.
    pub fn join<E2: Send + 'static>(&self) -> IO<Outcome<A, E>, E2> {
        let state = self.state.clone();
        IO::async_(move |cb| {
            let id = state.on_outcome(Box::new(move |outcome| {
                cb.succeed(outcome.clone());
            }));
            id.map(|id| IO::delay(move || state.remove_waiter(id)))
        })
    }

    /// Like [`join`](FiberHandle::join), but a canceled fiber makes the
    /// joiner wait forever (Cats Effect's `joinWithNever`), and an error is
    /// raised in the joiner; a panic is raised as well (as a panic).
    pub fn join_with_never(&self) -> IO<A, E> {
        self.join::<E>().flat_map(|outcome| match outcome {
            Outcome::Succeeded(a) => IO::pure(a),
            Outcome::Errored(e) => IO::raise_error(e),
            Outcome::Canceled => IO::never(),
            Outcome::Panicked(p) => IO::delay(move || -> A { panic!("{}", p.message()) }),
        })
    }
}
