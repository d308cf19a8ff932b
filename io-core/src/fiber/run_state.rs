//! The run state: what the thread running a fiber keeps between runs.
//!
//! [`Core`] is the part of the fiber that only the thread holding the
//! unique `Fiber` handle touches (module doc of `fiber`): where the next run
//! starts ([`Next`]), the explicit continuation stack, the completion
//! callback, the mask depth, why the fiber finalizes ([`Ending`]) and the
//! rarely used rest ([`Cold`]). Also here: the erased completion callback
//! and its typed adapter. (tokio calls the same part `Core`, in `core.rs`;
//! here the file is `run_state.rs`, since a module named `core` would make
//! every `core::` path in `fiber/` ambiguous in a `no_std` crate.)

use core::marker::PhantomData;

use alloc::vec::Vec;

use crate::erased::{Adapter, ErasedFn, Value};
use crate::node::{Frame, Node};
use crate::outcome::Outcome;
use crate::tracing::Trace;

/// The run-loop state of a fiber, touched only by the thread running it.
///
/// Kept small, since every suspended fiber holds one: what is needed only
/// while a fiber finalizes after a panic, or when a finalizer's error is
/// suppressed, lives in a separate allocation made then ([`Cold`]).
pub(crate) struct Core {
    /// Where the next run starts.
    pub(super) next: Next,
    /// The explicit continuation stack. A fiber that is not running and
    /// whose stack is empty holds no buffer: it takes its thread's spare
    /// one when it runs, and leaves it when it suspends or completes with
    /// an empty stack (`pool::stacks`), so that a million fibers suspended
    /// between two programs hold no stacks.
    pub(super) stack: Vec<Frame>,
    /// Receives the outcome; taken when the fiber completes. `None` for a
    /// fiber whose outcome goes to its join state (`Header::join`).
    pub(super) on_complete: Option<Completion>,
    /// Depth of nested uncancelable regions around the current node
    /// (cancellation is observed only at depth 0).
    pub(super) masks: u32,
    /// Set once the fiber finalizes (canceled or panicked): the remaining
    /// frames are popped, running only finalizers.
    pub(super) ending: Option<Ending>,
    /// The panic message and suppressed errors, once there are any.
    pub(super) cold: Option<alloc::boxed::Box<Cold>>,
    /// Whether the fiber traces now (`tracing/fiber_on.rs`; zero-sized
    /// without the `tracing` feature).
    pub(super) tracing: crate::tracing::FiberTracing,
    /// Whether the executor was told that the fiber lives on after a run
    /// ([`Executor::fiber_listed`](crate::Executor::fiber_listed)).
    pub(super) listed: bool,
}

/// Where a fiber's next run starts.
pub(crate) enum Next {
    /// Evaluate this node (a new fiber, or one that yielded).
    Node(Node),
    /// Suspended (async without finalizer, never, blocking work): the
    /// result is in the header's slot, or there is none because
    /// cancellation ended the suspension.
    Resume,
    /// Suspended in an async registration that returned this finalizer (run
    /// if cancellation ends the suspension).
    ResumeWithFinalizer(Node),
    /// Sleeping: the key of the timer (an erased `X::TimerKey`), canceled if
    /// cancellation ends the sleep.
    Wake(Value),
    /// Suspended in an `AsyncUntil` registration: its timer's key and the
    /// registration's finalizer, one erased `(X::TimerKey, Option<Node>)`
    /// (one value, so that `Next`, and every fiber, stays as small as
    /// without it). The timer is canceled however the suspension ends (a
    /// timer that fired is not affected); the finalizer runs if
    /// cancellation ends the suspension.
    ResumeUntil(Value),
    /// The fiber started or stopped tracing in the middle of a turn: evaluate
    /// this node in the other instantiation of the run-loop, with the steps
    /// left of the turn's auto-yield budget (a switch is not a turn).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    Switch(Node, u32),
}

/// Why a fiber finalizes instead of completing normally (the panic message
/// itself is in [`Cold`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Canceled,
    Panicked,
}

/// The rarely used part of a fiber's state.
#[derive(Default)]
pub(crate) struct Cold {
    /// The message of the panic the fiber finalizes after.
    panic: Option<crate::outcome::PanicMessage>,
    /// Errors of finalizers that could not be propagated (the fiber was
    /// already failing, canceled or panicking): handed over with the outcome.
    suppressed: Vec<Value>,
}

impl Core {
    fn cold(&mut self) -> &mut Cold {
        self.cold.get_or_insert_with(Default::default)
    }

    /// Starts finalizing after a panic (unless already finalizing).
    pub(super) fn set_panicked(&mut self, message: crate::outcome::PanicMessage) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Panicked);
            self.cold().panic = Some(message);
        }
    }

    /// Keeps a finalizer error that could not be propagated.
    pub(super) fn suppress(&mut self, error: Value) {
        self.cold().suppressed.push(error);
    }

    /// Takes the suppressed errors (when the fiber completes).
    pub(super) fn take_suppressed(&mut self) -> Vec<Value> {
        self.cold
            .as_mut()
            .map(|cold| core::mem::take(&mut cold.suppressed))
            .unwrap_or_default()
    }

    /// The outcome a finalizing fiber ends with.
    pub(super) fn ending_outcome(&self) -> Outcome<Value, Value> {
        match self.ending {
            Some(Ending::Canceled) => Outcome::Canceled,
            Some(Ending::Panicked) => Outcome::Panicked(
                self.cold
                    .as_ref()
                    .and_then(|cold| cold.panic.clone())
                    .unwrap_or_else(|| crate::outcome::PanicMessage::new("")),
            ),
            None => unreachable!("io-core: unwinding without an ending"),
        }
    }
}

/// The erased completion callback of a fiber: its outcome, the errors of
/// finalizers that were suppressed on the way, and its trace at the point
/// of failure (empty on success, cancellation, or without tracing).
pub(crate) type Completion = ErasedFn<(Outcome<Value, Value>, Vec<Value>, Trace), ()>;

/// Adapter of the completion callback: erased outcome to typed outcome.
pub(crate) struct CompleteK<A, E>(PhantomData<fn(A, E)>);

impl<A: 'static, E: 'static, F: FnOnce(Outcome<A, E>, Vec<E>, Trace)>
    Adapter<(Outcome<Value, Value>, Vec<Value>, Trace), (), F> for CompleteK<A, E>
{
    unsafe fn call(f: F, (outcome, suppressed, trace): (Outcome<Value, Value>, Vec<Value>, Trace)) {
        // SAFETY: the fiber's program is an `IO<A, E>`, so its final value is
        // an `A`, and its final error and every suppressed finalizer error an
        // `E` (the typed API guarantees it).
        let outcome = unsafe { typed_outcome::<A, E>(outcome) };
        let suppressed = if suppressed.is_empty() {
            Vec::new()
        } else {
            suppressed
                .into_iter()
                // SAFETY: a suppressed error is an `E` (as above).
                .map(|e| unsafe { e.take::<E>() })
                .collect()
        };
        f(outcome, suppressed, trace)
    }
}

/// Takes the values of an erased outcome back as their types.
///
/// # Safety
/// * The outcome is that of an `IO<A, E>`.
pub(crate) unsafe fn typed_outcome<A: 'static, E: 'static>(
    outcome: Outcome<Value, Value>,
) -> Outcome<A, E> {
    match outcome {
        // SAFETY: forwarded precondition: the value of an `IO<A, E>` is an `A`.
        Outcome::Succeeded(v) => Outcome::Succeeded(unsafe { v.take::<A>() }),
        // SAFETY: forwarded precondition: its error is an `E`.
        Outcome::Errored(e) => Outcome::Errored(unsafe { e.take::<E>() }),
        Outcome::Canceled => Outcome::Canceled,
        Outcome::Panicked(p) => Outcome::Panicked(p),
    }
}
