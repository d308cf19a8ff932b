//! Programs run side by side, all of whose values are needed:
//! [`IO::both_outcome`], [`IO::both`], [`IO::par_map2`], and the parallel
//! traversals [`IO::par_traverse`], [`IO::par_traverse_n`],
//! [`IO::par_sequence`] and [`IO::par_sequence_n`]. The first failure
//! cancels the others and is the result.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::new()?;
//! let pair: IO<(u32, &str), ()> = IO::pure(1).both(IO::delay(|| "two"));
//! assert_eq!(rt.block_on(pair)?.succeeded(), Some((1, "two")));
//! let doubled = IO::<u32, ()>::par_traverse(vec![1, 2, 3], |x| IO::pure(x * 2));
//! assert_eq!(rt.block_on(doubled)?.succeeded(), Some(vec![2, 4, 6]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Protocol
//!
//! `both`, `both_outcome` and `par_sequence` (which every traversal here
//! ends in) run their programs as the children of one outcome table
//! (`outcomes.rs`: how the children record their outcomes, how the parent
//! waits, why no wake-up is lost):
//!
//! * `both` and `par_sequence` keep each child's value in its place, and
//!   the first failure (an error, a cancellation or a panic) with its
//!   child's failure traces ([`Values`]). The parent waits until the
//!   table is *settled*: every child succeeded (the values are the result)
//!   or one failed; then it cancels the children still running, waits
//!   until all have ended (their finalizers have run), and fails as the
//!   child did: an error raised again with the child's traces, a panic
//!   raised again, a canceled child observed as the parent's own
//!   cancellation. So the first failure wins at once, as in a tree of
//!   `both`, with one fiber per program.
//! * `both_outcome` keeps both outcomes and waits until both have ended.
//! * The parent waits unmasked; canceled meanwhile, it cancels every child
//!   and waits until all have ended.
//!
//! `both`'s two children are the pair instance of the table (two fibers in
//! an array, two value slots, no heap `Vec`); `par_sequence`'s are `n`,
//! with the same failure slot and the same decision.
//!
//! Design credit: the semantics are Cats Effect 3's `both`, `bothOutcome`
//! (`GenSpawn`), `parTraverse` and `parTraverseN` (`GenConcurrent`). No
//! code is copied.

use alloc::vec::Vec;
use core::convert::Infallible;
use core::num::{NonZeroU64, NonZeroUsize};

use crate::combinators::embed::embed;
use crate::combinators::monad_cancel::Poll;
use crate::combinators::outcomes::{
    AllEnded, Arrival, Children, Outcomes, Settled, Table, cancel_and_wait, poll_wait, spawn, start,
};
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::RawFiberRef;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::deferred::Deferred;
use crate::stdlib::data::semaphore::Semaphore;
use crate::sync::Arc;

/// What `both_outcome` gives: the outcomes of both sides.
pub type BothOutcome<A, B, E> = (Outcome<A, E>, Outcome<B, E>);

// The operations as traces name them (one event each, at the user's call
// site; the nodes they are made of are untraced).
static BOTH_OUTCOME: Op = Op::new("both_outcome");
static BOTH: Op = Op::new("both");
static PAR_MAP2: Op = Op::new("par_map2");
static PAR_TRAVERSE: Op = Op::new("par_traverse");
static PAR_SEQUENCE: Op = Op::new("par_sequence");
static PAR_TRAVERSE_N: Op = Op::new("par_traverse_n");
static PAR_SEQUENCE_N: Op = Op::new("par_sequence_n");

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Runs both concurrently and waits for both outcomes. If the caller is
    /// canceled, both are canceled.
    #[track_caller]
    pub fn both_outcome<B: Send + 'static>(self, other: IO<B, E>) -> IO<BothOutcome<A, B, E>, E> {
        self.both_outcome_untraced(other).traced_as(&BOTH_OUTCOME)
    }

    /// [`IO::both_outcome`] for io-core's own nodes (no trace event).
    pub(crate) fn both_outcome_untraced<B: Send + 'static>(
        self,
        other: IO<B, E>,
    ) -> IO<BothOutcome<A, B, E>, E> {
        start(
            || Table::new(2, (None, None)),
            move |spawner, table| {
                [
                    spawn(table.clone(), spawner, self, |slots, outcome, _, _| {
                        slots.0 = Some(outcome)
                    }),
                    spawn(table, spawner, other, |slots, outcome, _, _| {
                        slots.1 = Some(outcome)
                    }),
                ]
            },
            |poll, table, children| {
                poll_wait(poll, &table, &children, AllEnded).map_untraced(move |()| {
                    table.slots(|(left, right)| {
                        let ended = "io-core: both_outcome: both sides recorded their outcomes";
                        (left.take().expect(ended), right.take().expect(ended))
                    })
                })
            },
        )
    }

    /// Runs both concurrently and produces both values. If one fails (or is
    /// canceled, or panics), the other is canceled and the failure is the
    /// result.
    #[track_caller]
    pub fn both<B: Send + 'static>(self, other: IO<B, E>) -> IO<(A, B), E> {
        self.both_untraced(other).traced_as(&BOTH)
    }

    /// [`IO::both`] for io-core's own nodes (no trace event).
    pub(crate) fn both_untraced<B: Send + 'static>(self, other: IO<B, E>) -> IO<(A, B), E> {
        start(
            || Table::new(2, Values::new((None, None))),
            move |spawner, table| {
                [
                    spawn(
                        table.clone(),
                        spawner,
                        self,
                        |slots, outcome, traces, arrival| {
                            slots.keep(outcome, traces, arrival, |values, a| values.0 = Some(a))
                        },
                    ),
                    spawn(table, spawner, other, |slots, outcome, traces, arrival| {
                        slots.keep(outcome, traces, arrival, |values, b| values.1 = Some(b))
                    }),
                ]
            },
            |poll, table, children| {
                settle(poll, table, children, |values| match values {
                    (Some(a), Some(b)) => (a, b),
                    _ => unreachable!(
                        "io-core: both: settled without a failure, yet a value is missing"
                    ),
                })
            },
        )
    }

    /// Runs both concurrently and combines their values with `f`.
    #[track_caller]
    pub fn par_map2<B, C, F>(self, other: IO<B, E>, f: F) -> IO<C, E>
    where
        B: Send + 'static,
        C: Send + 'static,
        F: FnOnce(A, B) -> C + Send + 'static,
    {
        self.both_untraced(other)
            .map_untraced(move |(a, b)| f(a, b))
            .traced_as(&PAR_MAP2)
    }

    /// Runs `f` on every item concurrently, collecting the values in order.
    /// The first failure cancels the others and is the result.
    #[track_caller]
    pub fn par_traverse<T, F>(items: Vec<T>, f: F) -> IO<Vec<A>, E>
    where
        T: Send + 'static,
        F: FnMut(T) -> IO<A, E> + Send + 'static,
    {
        // `f` runs when the program runs, not when it is built.
        IO::defer_untraced(move || {
            let programs: Vec<IO<A, E>> = items.into_iter().map(f).collect();
            IO::par_sequence_untraced(programs)
        })
        .traced_as(&PAR_TRAVERSE)
    }

    /// Runs the programs concurrently, collecting the values in order. The
    /// first failure cancels the others and is the result.
    #[track_caller]
    pub fn par_sequence(programs: Vec<IO<A, E>>) -> IO<Vec<A>, E> {
        IO::par_sequence_untraced(programs).traced_as(&PAR_SEQUENCE)
    }

    /// [`IO::par_sequence`] for io-core's own nodes (no trace event).
    pub(crate) fn par_sequence_untraced(programs: Vec<IO<A, E>>) -> IO<Vec<A>, E> {
        IO::defer_untraced(move || par_sequence(programs))
    }

    /// Like [`par_traverse`](IO::par_traverse), with at most `parallelism`
    /// programs running at once. They start in the order of `items`: the
    /// first `parallelism` at once, then the next one each time one ends
    /// (whichever worker their fibers land on). The parallelism is a [`NonZeroUsize`]
    /// (what [`std::thread::available_parallelism`] returns), so that a
    /// program that could never make progress cannot be written:
    ///
    /// ```
    /// use core::num::NonZeroUsize;
    /// use spindle_effect::IO;
    ///
    /// let two = NonZeroUsize::new(2).expect("2 is not 0");
    /// let doubled: IO<Vec<u32>, ()> = IO::par_traverse_n(two, vec![1, 2, 3], |x| IO::pure(x * 2));
    /// # let _ = doubled;
    /// ```
    ///
    /// A plain `0` does not compile:
    ///
    /// ```compile_fail
    /// use spindle_effect::IO;
    ///
    /// let never: IO<Vec<u32>, ()> = IO::par_traverse_n(0, vec![1, 2, 3], IO::pure);
    /// ```
    ///
    /// [`std::thread::available_parallelism`]: https://doc.rust-lang.org/std/thread/fn.available_parallelism.html
    #[track_caller]
    pub fn par_traverse_n<T, F>(parallelism: NonZeroUsize, items: Vec<T>, f: F) -> IO<Vec<A>, E>
    where
        T: Send + 'static,
        F: FnMut(T) -> IO<A, E> + Send + 'static,
    {
        let semaphore = Semaphore::with_permits(permits(parallelism));
        let mut f = f;
        let program = IO::defer_untraced(move || {
            // The programs take their permits in the order of `items`: each
            // child waits until the one before it holds a permit (its
            // `turn`), then waits for one itself. Without that, a child
            // started later on another worker could take a permit first,
            // and a program whose first item must run for the others to end
            // (an item that fails while later ones never end) would wait
            // forever on a multi-threaded executor.
            let mut previous: Option<Deferred<()>> = None;
            let programs = items
                .into_iter()
                .map(|item| {
                    let turn: Deferred<()> = Deferred::new();
                    let took = turn.clone();
                    let body = f(item);
                    let holding = IO::delay_untraced(move || {
                        let _ = took.complete_now(());
                    })
                    .product_r_untraced(body);
                    let in_turn = semaphore.with_permit_untraced(holding);
                    match previous.replace(turn) {
                        Some(before) => before.get_untraced().product_r_untraced(in_turn),
                        None => in_turn,
                    }
                })
                .collect();
            IO::par_sequence_untraced(programs)
        });
        program.traced_as(&PAR_TRAVERSE_N)
    }

    /// Runs the programs concurrently, at most `parallelism` at once,
    /// collecting the values in order; the first failure cancels the others
    /// and is the result (the sequence form of
    /// [`par_traverse_n`](IO::par_traverse_n), Cats Effect's
    /// `parSequenceN`). Every program has a fiber from the start; those
    /// beyond the bound wait for a permit (cancelably) before they run.
    ///
    /// ```
    /// use core::num::NonZeroUsize;
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let two = NonZeroUsize::new(2).expect("2 is not 0");
    /// let programs: Vec<IO<u32, ()>> = (1..=4).map(|x| IO::delay(move || x * 10)).collect();
    /// let all = IO::par_sequence_n(two, programs);
    /// assert_eq!(Runtime::new()?.block_on(all)?.succeeded(), Some(vec![10, 20, 30, 40]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn par_sequence_n(parallelism: NonZeroUsize, programs: Vec<IO<A, E>>) -> IO<Vec<A>, E> {
        let permits = permits(parallelism);
        IO::defer_untraced(move || {
            // One semaphore per run of the program.
            let semaphore = Semaphore::with_permits(permits);
            let bounded = programs
                .into_iter()
                .map(|program| semaphore.with_permit_untraced(program))
                .collect();
            IO::par_sequence_untraced(bounded)
        })
        .traced_as(&PAR_SEQUENCE_N)
    }
}

/// `IO::par_sequence` (see the module doc).
fn par_sequence<A: Send + 'static, E: Send + 'static>(
    mut programs: Vec<IO<A, E>>,
) -> IO<Vec<A>, E> {
    let n = programs.len();
    if n <= 1 {
        return match programs.pop() {
            Some(only) => only.map_untraced(|a| alloc::vec![a]),
            None => IO::pure(Vec::new()),
        };
    }
    start(
        move || {
            let mut values = Vec::with_capacity(n);
            values.resize_with(n, || None);
            Table::new(n, Values::new(values))
        },
        move |spawner, table| {
            let children: Vec<RawFiberRef> = programs
                .into_iter()
                .enumerate()
                .map(|(index, program)| {
                    let keep =
                        move |slots: &mut Values<Vec<Option<A>>, E>, outcome, traces, arrival| {
                            slots.keep(outcome, traces, arrival, |values, a| {
                                values[index] = Some(a)
                            })
                        };
                    spawn(table.clone(), spawner, program, keep)
                })
                .collect();
            Arc::new(children)
        },
        |poll, table, children| {
            settle(poll, table, children, |values| {
                let recorded =
                    "io-core: par_sequence: settled without a failure, yet a value is missing";
                values
                    .into_iter()
                    .map(|value| value.expect(recorded))
                    .collect()
            })
        },
    )
}

/// A parallelism as a semaphore's permits.
fn permits(parallelism: NonZeroUsize) -> NonZeroU64 {
    NonZeroU64::try_from(parallelism).unwrap_or(NonZeroU64::MAX)
}

/// What `both` and `par_sequence` keep: each child's value in its place
/// (`V`: two fields, or a `Vec` by position), and the first failure with
/// its child's failure traces.
struct Values<V, E> {
    values: V,
    /// An outcome that is not a success (`Infallible`: it has no value).
    failure: Option<(Outcome<Infallible, E>, ChildTraces)>,
}

impl<V: Default, E> Values<V, E> {
    fn new(values: V) -> Self {
        Values {
            values,
            failure: None,
        }
    }

    /// A child's record: its value goes in its place through `put`; the
    /// first failure is kept, a later one is handed back (to be dropped
    /// outside the lock).
    #[inline]
    fn keep<A>(
        &mut self,
        outcome: Outcome<A, E>,
        traces: ChildTraces,
        arrival: Arrival,
        put: impl FnOnce(&mut V, A),
    ) -> Option<Outcome<Infallible, E>> {
        let failure = match outcome {
            Outcome::Succeeded(a) => {
                put(&mut self.values, a);
                return None;
            }
            Outcome::Errored(e) => Outcome::Errored(e),
            Outcome::Canceled => Outcome::Canceled,
            Outcome::Panicked(p) => Outcome::Panicked(p),
        };
        if arrival.failure {
            self.failure = Some((failure, traces));
            None
        } else {
            Some(failure)
        }
    }

    /// The values (every child succeeded), or the first failure.
    fn take(&mut self) -> Result<V, (Outcome<Infallible, E>, ChildTraces)> {
        match self.failure.take() {
            Some(failure) => Err(failure),
            None => Ok(core::mem::take(&mut self.values)),
        }
    }
}

/// The parent of `both` and `par_sequence`, once its children have
/// started: waits until settled; the values, through `finish`, or the
/// first failure once every child has ended (module doc).
fn settle<V, X, E, C, F>(
    poll: Poll,
    table: Arc<Outcomes<Values<V, E>, E>>,
    children: C,
    finish: F,
) -> IO<X, E>
where
    V: Default + Send + 'static,
    X: Send + 'static,
    E: Send + 'static,
    C: Children,
    F: FnOnce(V) -> X + Send + 'static,
{
    poll_wait(poll, &table, &children, Settled).flat_map_untraced(move |()| {
        match table.slots(Values::take) {
            Ok(values) => IO::pure(finish(values)),
            Err((failure, traces)) => cancel_and_wait(table, children).product_r_untraced(embed(
                poll,
                without_value(failure),
                traces,
            )),
        }
    })
}

/// A failure as the outcome of any value type.
fn without_value<X, E>(failure: Outcome<Infallible, E>) -> Outcome<X, E> {
    match failure {
        Outcome::Succeeded(never) => match never {},
        Outcome::Errored(e) => Outcome::Errored(e),
        Outcome::Canceled => Outcome::Canceled,
        Outcome::Panicked(p) => Outcome::Panicked(p),
    }
}
