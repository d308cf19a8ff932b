//! Continuations by role: the erased closures that nodes and frames hold,
//! each in a type that says what it may be given, so that the run-loop
//! calls them with safe methods.
//!
//! # Why the calls are sound
//!
//! An [`ErasedFn<I, O>`] is called through its adapter, which reads the
//! typed argument its closure wants out of the erased input: that is why
//! [`ErasedFn::call`] is `unsafe` ("the input has the type the adapter of
//! this closure expects"). Two kinds of input meet that condition by
//! construction, and each has its own argument here:
//!
//! * **Inputs that erase nothing** ([`Plain`]): `()`, a [`RawCallback`],
//!   a [`Poll`], a [`Spawner`], a region's [`Expired`](super::Expired). The adapter converts them into its
//!   closure's argument without reading an erased value, so any input of
//!   the type will do. (A raw callback carries no type either: what the
//!   typed callback made from it writes into the fiber's result slot is
//!   decided by the closure that was registered, which belongs to the
//!   node the fiber is suspended in.)
//! * **The result of the continuation's own source** ([`OnSuccess`],
//!   [`OnError`], [`OnResult`], [`OnOutcome`]). `IO`'s typed API makes a
//!   node with a source only from a source `IO<A, E>` and a closure whose
//!   adapter reads an `A` (`map`, `flat_map`), an `E` (`handle_error_with`,
//!   `map_err`), a `Result<A, E>` (`attempt`, `redeem`) or an
//!   `Outcome<A, E>` (`guarantee_case`). The run-loop gives such a
//!   continuation only the result of that source: at once, in the node's
//!   own step, when the source is already a value or an error; otherwise
//!   it pushes the continuation as a frame and evaluates the source, and
//!   the first result that pops the frame is the source's (every frame
//!   pushed while the source runs is above it and popped first, and the
//!   source's own continuations turn each intermediate result into one of
//!   the source's types: `map_err` into its `E`, a handler into its `A`).
//!   An error passes the frames that do not take errors (`map`,
//!   `flat_map`), unchanged and of the type they would have passed on.
//!   Finalizers (`on_cancel`, a guarantee's) are given the ending of the
//!   fiber, the erased outcome of the program they were attached to.
//!
//! Debug builds check every erased read against its `TypeId`
//! (`Value::take`), so a broken invariant fails loudly in the test suites.
//! These types are `repr(transparent)`: every `Bind<K>` keeps the one block
//! layout (`bind.rs`), and a frame is still its closure's two words.

use core::ops::Deref;

use super::{GuaranteeK, Node, Res};
use crate::combinators::monad_cancel::Poll;
use crate::engine::erased::{ErasedFn, Value};
use crate::fiber::{FiberLocals, RawCallback, Spawner};
use crate::outcome::Outcome;

/// An input that carries no erased value: an adapter turns it into its
/// closure's argument without reading anything of an erased type (module
/// doc), so an [`ErasedFn`] taking one is called safely with
/// [`ErasedFn::invoke`].
pub(crate) trait Plain {}

impl Plain for () {}
impl Plain for RawCallback {}
impl Plain for Poll {}
impl Plain for Spawner {}
impl Plain for FiberLocals {}
impl Plain for super::Expired {}

impl<I: Plain + 'static, O: 'static> ErasedFn<I, O> {
    /// Calls the closure with an input that erases nothing.
    #[inline(always)]
    pub(crate) fn invoke(self, input: I) -> O {
        // SAFETY: `I` is `Plain`: its adapter reads no erased value out of
        // it, so every `I` is what the adapter expects (module doc).
        unsafe { self.call(input) }
    }
}

/// What `map` (`O` = `Value`) or `flat_map` (`O` = `Node`) does with its
/// source's value.
#[repr(transparent)]
pub(crate) struct OnSuccess<O: 'static>(pub(super) ErasedFn<Value, O>);

impl<O: 'static> OnSuccess<O> {
    /// Applies the continuation to the value its source succeeded with.
    #[inline(always)]
    pub(crate) fn apply(self, input: Value) -> O {
        // SAFETY: the input is the value this continuation's source
        // succeeded with (module doc), an `A` of the source's `IO<A, E>`:
        // what a `map` or `flat_map` adapter reads.
        unsafe { self.0.call(input) }
    }
}

impl<O: 'static> Deref for OnSuccess<O> {
    type Target = ErasedFn<Value, O>;

    #[inline(always)]
    fn deref(&self) -> &ErasedFn<Value, O> {
        &self.0
    }
}

/// What `map_err` (`O` = `Value`) or `handle_error_with` (`O` = `Node`)
/// does with its source's error.
#[repr(transparent)]
pub(crate) struct OnError<O: 'static>(pub(super) ErasedFn<Value, O>);

impl<O: 'static> OnError<O> {
    /// Applies the continuation to the error its source failed with.
    #[inline(always)]
    pub(crate) fn apply(self, input: Value) -> O {
        // SAFETY: the input is the error this continuation's source failed
        // with (module doc), an `E` of the source's `IO<A, E>`: what a
        // `map_err` or `handle_error_with` adapter reads.
        unsafe { self.0.call(input) }
    }
}

impl<O: 'static> Deref for OnError<O> {
    type Target = ErasedFn<Value, O>;

    #[inline(always)]
    fn deref(&self) -> &ErasedFn<Value, O> {
        &self.0
    }
}

/// What a fold (`attempt`, `redeem`: `O` = `Res`; `redeem_with`: `O` =
/// `Node`) does with its source's result, either side.
#[repr(transparent)]
pub(crate) struct OnResult<O: 'static>(pub(super) ErasedFn<Res, O>);

impl<O: 'static> OnResult<O> {
    /// Applies the continuation to its source's result.
    #[inline(always)]
    pub(crate) fn apply(self, input: Res) -> O {
        // SAFETY: the input is its source's result (module doc): `Ok` an
        // `A`, `Err` an `E` of the source's `IO<A, E>`, what a fold
        // adapter reads.
        unsafe { self.0.call(input) }
    }
}

impl<O: 'static> Deref for OnResult<O> {
    type Target = ErasedFn<Res, O>;

    #[inline(always)]
    fn deref(&self) -> &ErasedFn<Res, O> {
        &self.0
    }
}

/// A `guarantee_case` finalizer: given its source's outcome, builds the
/// finalizer program and hands the outcome back, to be restored once the
/// finalizer has run.
#[repr(transparent)]
pub(crate) struct OnOutcome(pub(super) GuaranteeK);

impl OnOutcome {
    /// Builds the finalizer for the outcome its source ended with (or the
    /// fiber's ending, while it finalizes).
    #[inline(always)]
    pub(crate) fn apply(self, outcome: Outcome<Value, Value>) -> (Node, Outcome<Value, Value>) {
        // SAFETY: the outcome is its source's, or the fiber's ending while
        // the source ran (module doc): a value is an `A`, an error an `E`
        // of the source's `IO<A, E>`, which is what the adapter reads.
        unsafe { self.0.call(outcome) }
    }
}

impl Deref for OnOutcome {
    type Target = GuaranteeK;

    #[inline(always)]
    fn deref(&self) -> &GuaranteeK {
        &self.0
    }
}

/// What an `Acquire` node's closure returns: the program to run next, and
/// the closure that gives back what it took, if it took it at once (the
/// run-loop pushes it as a `Release` frame); without one, the program
/// waits for it and guards its source itself.
pub(crate) type Acquired = (Node, Option<ErasedFn<(), ()>>);

/// An `Acquire` node's closure (`Node::acquire`), erased.
pub(crate) type AcquireK = ErasedFn<Node, Acquired>;

/// An `Acquire` node's closure: given the node's own source, the program
/// that runs it holding what it acquires.
#[repr(transparent)]
pub(crate) struct OnBody(pub(super) AcquireK);

impl OnBody {
    /// Calls the closure with `body`, the source of its own node.
    #[inline(always)]
    pub(crate) fn apply(self, body: Node) -> Acquired {
        // SAFETY: the input is this closure's own source (module doc): the
        // `IO<A, E>` the typed constructor (`IO::acquire_at`) was given
        // with it, which is what the adapter types it as.
        unsafe { self.0.call(body) }
    }
}

impl Deref for OnBody {
    type Target = AcquireK;

    #[inline(always)]
    fn deref(&self) -> &AcquireK {
        &self.0
    }
}
