//! A child's outcome turned back into a program: [`Outcome::embed`] and
//! [`Outcome::embed_never`] for users, and [`embed`] for the combinators of
//! this folder, whose parent takes on the outcome of the child it waited
//! for (`race`, `both`, `par_sequence`, `timeout`, `cancelable`).
//!
//! The parent observes a child's result as its own: a value is returned,
//! an error is raised again with the child's failure traces (so that the
//! parent's failure shows where the child failed), and a panic is raised
//! again as a panic of the parent's fiber. A child that was canceled
//! cancels the parent (Cats Effect's `poll(canceled) *> never`), unmasked,
//! so that it is observed at once and not at the end of the parent's
//! masked region.
//!
//! Design credit: Cats Effect's `Outcome.embed` and `embedNever`, and the
//! `poll(canceled) *> never` of its `GenSpawn` derivations. No code is
//! copied.

use crate::combinators::monad_cancel::Poll;
use crate::engine::tracing::{ChildTraces, Op};
use crate::io::IO;
use crate::outcome::Outcome;

// The operations as traces name them (one event each, at the user's call
// site; the nodes they are made of are untraced).
static EMBED: Op = Op::new("embed");
static EMBED_NEVER: Op = Op::new("embed_never");

impl<A: Send + 'static, E: Send + 'static> Outcome<A, E> {
    /// The program with this outcome's result (Cats Effect's `embed`): a
    /// value, an error, `on_cancel` for a canceled outcome, or the panic
    /// raised again (as a panic of the fiber that runs it).
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let rt = Runtime::new()?;
    /// let ok: Outcome<u8, ()> = Outcome::Succeeded(1);
    /// assert_eq!(rt.block_on(ok.embed(IO::pure(0)))?.succeeded(), Some(1));
    /// let canceled: Outcome<u8, ()> = Outcome::Canceled;
    /// assert_eq!(rt.block_on(canceled.embed(IO::pure(0)))?.succeeded(), Some(0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn embed(self, on_cancel: IO<A, E>) -> IO<A, E> {
        self.embed_untraced(on_cancel).traced_as(&EMBED)
    }

    /// [`Outcome::embed`] for io-core's own nodes (no trace event).
    pub(crate) fn embed_untraced(self, on_cancel: IO<A, E>) -> IO<A, E> {
        self.embed_or(ChildTraces::none(), move || on_cancel)
    }

    /// The program of this outcome, with `on_cancel()` for a canceled one
    /// (built only then). An error is raised with `traces`, the traces of
    /// the child fiber it came from (see `ChildTraces`).
    fn embed_or(self, traces: ChildTraces, on_cancel: impl FnOnce() -> IO<A, E>) -> IO<A, E> {
        match self {
            Outcome::Succeeded(a) => IO::pure(a),
            Outcome::Errored(e) => traces.raise(e),
            Outcome::Canceled => on_cancel(),
            Outcome::Panicked(p) => IO::delay_untraced(move || -> A { panic!("{}", p.message()) }),
        }
    }

    /// Like [`embed`](Outcome::embed); a canceled outcome never completes
    /// (Cats Effect's `embedNever`).
    #[track_caller]
    pub fn embed_never(self) -> IO<A, E> {
        self.embed_never_untraced().traced_as(&EMBED_NEVER)
    }

    /// [`Outcome::embed_never`] for io-core's own nodes (no trace event).
    pub(crate) fn embed_never_untraced(self) -> IO<A, E> {
        self.embed_never_from_child(ChildTraces::none())
    }

    /// [`Outcome::embed_never_untraced`] of a child fiber's outcome: an
    /// error is raised with the traces it came from.
    pub(crate) fn embed_never_from_child(self, traces: ChildTraces) -> IO<A, E> {
        // The `never` is built only when needed (a node built and dropped
        // on every join would be wasted work).
        self.embed_or(traces, IO::never_untraced)
    }
}

/// Turns a child's outcome back into a program with the same result, inside
/// the uncancelable region that `poll` belongs to; an error is raised with
/// `traces`, the child's failure traces (so that the parent's failure shows
/// where the child failed).
pub(crate) fn embed<A: Send + 'static, E: Send + 'static>(
    poll: Poll,
    outcome: Outcome<A, E>,
    traces: ChildTraces,
) -> IO<A, E> {
    match outcome {
        // The parent observes a canceled child as its own cancellation (Cats
        // Effect's `poll(canceled) *> never`): unmasked, so that it is
        // observed at once, not at the end of the region.
        Outcome::Canceled => poll
            .apply_untraced(IO::canceled_untraced())
            .product_r_untraced(IO::never_untraced()),
        other => other.embed_never_from_child(traces),
    }
}
