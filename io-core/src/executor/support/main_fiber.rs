//! The main fiber of `block_on`: where its outcome lands, and how the
//! waiter learns that it will never land.

use crate::executor::{Executor, Fiber};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::Arc;

use crate::sync::Lock;

/// Wakes whoever waits for the main fiber (a parked loop, a blocked
/// thread) when it completes or is abandoned. Called at most once per main
/// fiber, from any thread.
pub trait WakeWaiter: Send + Sync + 'static {
    /// Ends the waiter's sleep, or makes its next one return at once.
    fn wake(&self);
}

/// A thread blocked in [`MainFiber::park_until_ended`] (exec-wstp's
/// `block_on`): unparked.
#[cfg(feature = "std")]
impl WakeWaiter for std::thread::Thread {
    fn wake(&self) {
        self.unpark();
    }
}

/// The slot's states.
enum MainState<A, E> {
    Running,
    Done(Outcome<A, E>),
    Taken,
    /// The completion callback was dropped without being called.
    Abandoned,
}

/// The waiting side of a `block_on`'s main fiber: its outcome once it has
/// one, or the news that it never will.
///
/// # Protocol
///
/// [`MainFiber::new`] makes the fiber and a slot shared with its completion
/// callback (a `MainCompletion`, captured by the fiber). The slot goes
/// `Running -> Done(outcome) -> Taken`, or `Running -> Abandoned` when the
/// fiber is freed without completing: its completion callback is then
/// dropped uncalled, on whichever thread drops the last thing that could
/// resume the fiber. Both transitions happen under the slot's lock and are
/// followed by [`WakeWaiter::wake`], *after* the lock is released: a waiter
/// that checked the slot and then sleeps is woken, one that is about to
/// check sees the new state. A loop that finds the slot `Abandoned` with
/// no work left knows the main fiber can never finish: a
/// [`RunError::Deadlock`](super::RunError::Deadlock) for `try_block_on`.
pub struct MainFiber<A, E> {
    slot: Arc<Lock<MainState<A, E>>>,
}

impl<A, E> core::fmt::Debug for MainFiber<A, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MainFiber")
            .field("done", &self.is_done())
            .field("abandoned", &self.is_abandoned())
            .finish()
    }
}

/// Completes the slot, or marks it abandoned when dropped uncalled; wakes
/// the waiter either way.
struct MainCompletion<A, E, W: WakeWaiter> {
    slot: Arc<Lock<MainState<A, E>>>,
    waiter: W,
}

impl<A: Send + 'static, E: Send + 'static> MainFiber<A, E> {
    /// Makes the main fiber of `io` on `executor` (not yet scheduled: the
    /// caller queues it) and the slot its outcome lands in; `waiter` is
    /// woken when the fiber completes or is abandoned.
    pub fn new<X: Executor, W: WakeWaiter>(
        io: IO<A, E>,
        executor: X,
        waiter: W,
    ) -> (MainFiber<A, E>, Fiber<X>) {
        let slot = Arc::new(Lock::new(MainState::Running));
        let completion = MainCompletion {
            slot: slot.clone(),
            waiter,
        };
        let fiber = Fiber::new(io, executor, move |outcome| completion.complete(outcome));
        (MainFiber { slot }, fiber)
    }
}

impl<A, E> MainFiber<A, E> {
    /// Takes the outcome out, once the fiber has completed (`None` before,
    /// and after it was taken).
    pub fn take(&self) -> Option<Outcome<A, E>> {
        self.slot
            .with(|state| match core::mem::replace(state, MainState::Taken) {
                MainState::Done(outcome) => Some(outcome),
                other => {
                    *state = other;
                    None
                }
            })
    }

    /// Whether the fiber has completed and its outcome waits to be taken.
    pub fn is_done(&self) -> bool {
        self.slot.with(|state| matches!(state, MainState::Done(_)))
    }

    /// Whether the fiber was freed without completing: it never will.
    pub fn is_abandoned(&self) -> bool {
        self.slot
            .with(|state| matches!(state, MainState::Abandoned))
    }

    /// Parks the calling thread until the fiber has completed or been
    /// abandoned (the waiter given to [`new`](MainFiber::new) must be this
    /// thread, `std::thread::current()`). Spurious unparks are absorbed.
    #[cfg(feature = "std")]
    pub fn park_until_ended(&self) {
        while self.slot.with(|state| matches!(state, MainState::Running)) {
            // An unpark between the check and the park makes `park` return
            // at once: no wake-up is lost.
            std::thread::park();
        }
    }
}

impl<A, E, W: WakeWaiter> MainCompletion<A, E, W> {
    fn complete(self, outcome: Outcome<A, E>) {
        // A `Running` slot only: the state moves once.
        self.slot.with(|state| *state = MainState::Done(outcome));
        // `Drop` wakes the waiter (and leaves `Done` alone).
    }
}

impl<A, E, W: WakeWaiter> Drop for MainCompletion<A, E, W> {
    fn drop(&mut self) {
        self.slot.with(|state| {
            if let MainState::Running = state {
                *state = MainState::Abandoned;
            }
        });
        self.waiter.wake();
    }
}
