//! Concurrency combinators built on `start`, `join`, `cancel` and masking:
//! `race_pair`, `race_outcome`, `race`, `both_outcome`, `both`, `par_map2`,
//! `par_traverse`, `par_traverse_n`, `par_sequence`; and time: `timeout`,
//! `timeout_to`, `timed`.
//!
//! ```
//! use spindle_core::{Either, IO, IORuntime};
//! use spindle_core::error::TimeoutError;
//! use spindle_exec_single::SingleThreaded;
//! use std::time::Duration;
//!
//! #[derive(Debug, PartialEq)]
//! enum AppError { Timeout }
//! impl From<TimeoutError> for AppError {
//!     fn from(_: TimeoutError) -> Self { AppError::Timeout }
//! }
//!
//! let fast: IO<u32, AppError> = IO::<(), AppError>::sleep(Duration::from_millis(1)).map_to(1);
//! let slow: IO<u32, AppError> = IO::<(), AppError>::sleep(Duration::from_secs(60)).map_to(2);
//! let rt = SingleThreaded::new()?;
//! // The loser is canceled (and finalized) before `race` returns.
//! assert_eq!(rt.block_on(fast.race(slow))?.succeeded(), Some(Either::Left(1)));
//!
//! let pair: IO<(u32, &str), AppError> = IO::pure(1).both(IO::delay(|| "two"));
//! assert_eq!(rt.block_on(pair)?.succeeded(), Some((1, "two")));
//!
//! let late: IO<u32, AppError> = IO::never();
//! assert_eq!(rt.block_on(late.timeout(Duration::from_millis(1)))?.errored(), Some(AppError::Timeout));
//!
//! let doubled = IO::<u32, AppError>::par_traverse(vec![1, 2, 3], |x| IO::pure(x * 2));
//! assert_eq!(rt.block_on(doubled)?.succeeded(), Some(vec![2, 4, 6]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The shapes are Cats Effect 3's `GenSpawn`/`GenConcurrent`/`GenTemporal`
//! derivations: both sides run on fibers of their own; the parent waits
//! masked, except for the wait itself (`poll`), and cancels both children if
//! it is canceled while waiting. A loser is canceled, and its finalizers
//! have run, before the combinator returns.

use alloc::vec::Vec;
use core::fmt;
use core::num::{NonZeroU64, NonZeroUsize};
use core::time::Duration;

use crate::combinators::monad_cancel::Poll;
use crate::engine::erased::ErasedFn;
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::CompleteK;
use crate::fiber::handle::FiberHandle;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::deferred::Deferred;

/// One of two things: the result of a race.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Either<L, R> {
    /// The left side.
    Left(L),
    /// The right side.
    Right(R),
}

/// What `race_pair` gives: the winner's outcome and the loser's handle
/// (still running).
pub type RacePair<A, B, E> =
    Either<(Outcome<A, E>, FiberHandle<B, E>), (FiberHandle<A, E>, Outcome<B, E>)>;

/// What `race_outcome` gives: the outcome of the side that completed first.
pub type RaceOutcome<A, B, E> = Either<Outcome<A, E>, Outcome<B, E>>;

/// What `both_outcome` gives: the outcomes of both sides.
pub type BothOutcome<A, B, E> = (Outcome<A, E>, Outcome<B, E>);

/// A program timed out (`IO::timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutError {
    /// The time limit that passed.
    pub after: Duration,
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "timed out after {:?}", self.after)
    }
}

impl core::error::Error for TimeoutError {}

/// A timeout as an I/O error, so that [`IO::timeout`] works on programs
/// whose error type is [`std::io::Error`] (which no other crate may give
/// this conversion: the orphan rule). The error has kind
/// [`ErrorKind::TimedOut`](std::io::ErrorKind::TimedOut), and the
/// [`TimeoutError`] as its message and [source](std::error::Error::source)
/// (get it back with [`std::io::Error::downcast`] or `get_ref`).
///
/// ```
/// use spindle_core::{IO, IORuntime};
/// use spindle_core::error::TimeoutError;
/// use spindle_exec_single::SingleThreaded;
/// use std::io::ErrorKind;
/// use std::time::Duration;
///
/// let read: IO<Vec<u8>, std::io::Error> = IO::never();
/// let rt = SingleThreaded::new()?;
/// let e = rt.block_on(read.timeout(Duration::from_millis(1)))?.errored().unwrap();
/// assert_eq!(e.kind(), ErrorKind::TimedOut);
/// assert_eq!(e.to_string(), "timed out after 1ms");
/// assert!(e.get_ref().is_some_and(|inner| inner.is::<TimeoutError>()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "std")]
impl From<TimeoutError> for std::io::Error {
    fn from(e: TimeoutError) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

impl<A: Send + 'static, E: Send + 'static> Outcome<A, E> {
    /// The program with this outcome's result (Cats Effect's `embed`): a
    /// value, an error, `on_cancel` for a canceled outcome, or the panic
    /// raised again (as a panic of the fiber that runs it).
    ///
    /// ```
    /// use spindle_core::{IO, IORuntime, Outcome};
    /// use spindle_exec_single::SingleThreaded;
    ///
    /// let rt = SingleThreaded::new()?;
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

// The operations as traces name them (each records one event, at the
// user's call site; the nodes they are made of are untraced).
static EMBED: Op = Op::new("embed");
static EMBED_NEVER: Op = Op::new("embed_never");
static RACE_PAIR: Op = Op::new("race_pair");
static RACE_OUTCOME: Op = Op::new("race_outcome");
static RACE: Op = Op::new("race");
static BOTH_OUTCOME: Op = Op::new("both_outcome");
static BOTH: Op = Op::new("both");
static PAR_MAP2: Op = Op::new("par_map2");
static PAR_TRAVERSE: Op = Op::new("par_traverse");
static PAR_SEQUENCE: Op = Op::new("par_sequence");
static PAR_TRAVERSE_N: Op = Op::new("par_traverse_n");
static TIMEOUT: Op = Op::new("timeout");
static TIMEOUT_TO: Op = Op::new("timeout_to");
static TIMEOUT_AND_FORGET: Op = Op::new("timeout_and_forget");
static TIMED: Op = Op::new("timed");

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Runs `self` and `other` concurrently; returns the outcome of the first
    /// to complete and the handle of the other, which keeps running. If the
    /// caller is canceled while waiting, both are canceled.
    #[track_caller]
    pub fn race_pair<B: Send + 'static>(self, other: IO<B, E>) -> IO<RacePair<A, B, E>, E> {
        self.race_pair_untraced(other).traced_as(&RACE_PAIR)
    }

    /// [`IO::race_pair`] for io-core's own nodes (no trace event).
    pub(crate) fn race_pair_untraced<B: Send + 'static>(
        self,
        other: IO<B, E>,
    ) -> IO<RacePair<A, B, E>, E> {
        IO::uncancelable_untraced(move |poll| {
            let first: Deferred<bool> = Deferred::new();
            let (left_done, right_done) = (first.clone(), first.clone());
            let left = self.guarantee_case_untraced(move |_| {
                left_done.complete_untraced(true).void_untraced()
            });
            let right = other.guarantee_case_untraced(move |_| {
                right_done.complete_untraced(false).void_untraced()
            });
            left.start_untraced()
                .flat_map_untraced(move |fa: FiberHandle<A, E>| {
                    right
                        .start_untraced()
                        .flat_map_untraced(move |fb: FiberHandle<B, E>| {
                            let on_cancel = fa
                                .cancel_untraced()
                                .product_r_untraced(fb.cancel_untraced());
                            poll.apply_untraced(first.get_untraced())
                                .on_cancel_untraced(on_cancel)
                                .flat_map_untraced(move |left_won| {
                                    if left_won {
                                        outcome_of(&fa)
                                            .map_untraced(move |oc| Either::Left((oc, fb)))
                                    } else {
                                        outcome_of(&fb)
                                            .map_untraced(move |oc| Either::Right((fa, oc)))
                                    }
                                })
                        })
                })
        })
    }

    /// Runs both concurrently; the first to complete wins, the other is
    /// canceled (its finalizers have run when this returns).
    #[track_caller]
    pub fn race_outcome<B: Send + 'static>(self, other: IO<B, E>) -> IO<RaceOutcome<A, B, E>, E> {
        pair::race_outcome(self, other).traced_as(&RACE_OUTCOME)
    }

    /// Runs both concurrently; the first to succeed or fail wins and the
    /// other is canceled. If the first to complete was canceled, the result
    /// is the other's.
    #[track_caller]
    pub fn race<B: Send + 'static>(self, other: IO<B, E>) -> IO<Either<A, B>, E> {
        self.race_untraced(other).traced_as(&RACE)
    }

    /// [`IO::race`] for io-core's own nodes (no trace event).
    pub(crate) fn race_untraced<B: Send + 'static>(self, other: IO<B, E>) -> IO<Either<A, B>, E> {
        pair::race(self, other)
    }

    /// Runs both concurrently and waits for both outcomes. If the caller is
    /// canceled, both are canceled.
    #[track_caller]
    pub fn both_outcome<B: Send + 'static>(self, other: IO<B, E>) -> IO<BothOutcome<A, B, E>, E> {
        pair::both_outcome(self, other).traced_as(&BOTH_OUTCOME)
    }

    /// [`IO::both_outcome`] for io-core's own nodes (no trace event).
    pub(crate) fn both_outcome_untraced<B: Send + 'static>(
        self,
        other: IO<B, E>,
    ) -> IO<BothOutcome<A, B, E>, E> {
        pair::both_outcome(self, other)
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
        pair::both(self, other)
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
        // One child fiber per program, all started in one step of the
        // parent's masked region. A child's completion callback (no join
        // state, no extra frames around its program) records its outcome in
        // a shared table: the last success, or the first failure, completes
        // `done`; the last child to end, whatever its outcome, completes
        // `ended`. The parent waits for `done` unmasked (canceling the parent
        // cancels every child), then on a failure cancels the children still
        // running and waits for `ended`, so their finalizers have run. Same
        // semantics as a tree of `both` (the first failure wins at once; a
        // canceled child cancels the parent), for one fiber per program.
        IO::defer_untraced(move || {
            let n = programs.len();
            match n {
                0 => return IO::pure(Vec::new()),
                1 => {
                    let mut programs = programs;
                    let only = programs.pop().expect("one program");
                    return only.map_untraced(|a| alloc::vec![a]);
                }
                _ => {}
            }
            let table = crate::sync::Arc::new(par::Table::<A, E>::new(n));
            IO::uncancelable_untraced(move |poll| {
                let spawning = table.clone();
                let start_all = IO::<par::Children, E>::with_spawner(move |spawner| {
                    let children = programs
                        .into_iter()
                        .enumerate()
                        .map(|(index, program)| {
                            let table = spawning.clone();
                            let on_complete =
                                move |outcome: Outcome<A, E>,
                                      _: Vec<E>,
                                      trace: crate::engine::tracing::Trace,
                                      children: ChildTraces| {
                                    let traces = ChildTraces::of_failure(&outcome, trace, children);
                                    table.record(index, outcome, traces)
                                };
                            let on_complete = ErasedFn::new::<CompleteK<A, E>, _>(on_complete);
                            spawner.spawn(program.into_node(), Some(on_complete))
                        })
                        .collect();
                    par::Children(crate::sync::Arc::new(children))
                });
                start_all.flat_map_untraced(move |children| {
                    let on_cancel = par::cancel_all(children.clone(), table.ended.clone());
                    poll.apply_untraced(table.done.get_untraced())
                        .on_cancel_untraced(on_cancel)
                        .flat_map_untraced(move |()| match table.take() {
                            Ok(values) => IO::pure(values),
                            Err((failure, traces)) => {
                                par::cancel_all(children, table.ended.clone()).product_r_untraced(
                                    embed(poll, failure, traces).map_untraced(|()| Vec::new()),
                                )
                            }
                        })
                })
            })
        })
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
    /// use spindle_core::IO;
    ///
    /// let two = NonZeroUsize::new(2).expect("2 is not 0");
    /// let doubled: IO<Vec<u32>, ()> = IO::par_traverse_n(two, vec![1, 2, 3], |x| IO::pure(x * 2));
    /// # let _ = doubled;
    /// ```
    ///
    /// A plain `0` does not compile:
    ///
    /// ```compile_fail
    /// use spindle_core::IO;
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
        let permits = NonZeroU64::try_from(parallelism).unwrap_or(NonZeroU64::MAX);
        let semaphore = crate::stdlib::data::semaphore::Semaphore::with_permits(permits);
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

    /// Fails with [`TimeoutError`] if `self` has not completed after
    /// `duration`; `self` is then canceled, and the timeout waits until it
    /// has ended (its finalizers have run).
    ///
    /// As in Cats Effect 3.6, the outcome of `self` always wins when there
    /// is one: a result or an error that `self` produces after the deadline
    /// (its cancellation was not honoured: an `uncancelable` body) is the
    /// result, not the timeout; the timeout is raised only when `self` was
    /// canceled. If `self` cancels itself before the deadline, the timeout
    /// is raised at the deadline (the race is then the timer's). For a
    /// deadline that does not wait for `self` to end, see
    /// [`timeout_and_forget`](IO::timeout_and_forget).
    ///
    /// `self` runs on a fiber of its own; the deadline is a timer of the
    /// executor armed on the caller's wait, so a timeout costs one fiber
    /// start, not the two of a race.
    ///
    /// The error type takes the timeout through `From<TimeoutError>`:
    /// write it for your own error type; with `std`, io-core provides it for
    /// `std::io::Error` (kind `TimedOut`).
    #[track_caller]
    pub fn timeout(self, duration: Duration) -> IO<A, E>
    where
        E: From<TimeoutError>,
    {
        self.timeout_to_untraced(
            duration,
            IO::raise_error(E::from(TimeoutError { after: duration })),
        )
        .traced_as(&TIMEOUT)
    }

    /// Runs `fallback` if `self` has not completed after `duration`; `self`
    /// is then canceled and awaited, and `fallback` runs only if it was
    /// canceled (see [`timeout`](IO::timeout) for the rules).
    #[track_caller]
    pub fn timeout_to(self, duration: Duration, fallback: IO<A, E>) -> IO<A, E> {
        self.timeout_to_untraced(duration, fallback)
            .traced_as(&TIMEOUT_TO)
    }

    /// Fails with [`TimeoutError`] as soon as `duration` has passed if
    /// `self` has not completed by then; `self`'s cancellation is
    /// *requested* but not awaited (Cats Effect's `timeoutAndForget`): the
    /// error is raised at the deadline even if `self` is uncancelable, and
    /// `self` finishes (or finalizes) in the background.
    ///
    /// This gives up back-pressure: a body that ignores cancellation keeps
    /// running, holding what it holds, after the caller has moved on. Prefer
    /// [`timeout`](IO::timeout) unless the deadline matters more.
    #[track_caller]
    pub fn timeout_and_forget(self, duration: Duration) -> IO<A, E>
    where
        E: From<TimeoutError>,
    {
        let error = move || IO::raise_error(E::from(TimeoutError { after: duration }));
        timeout::run(self, duration, timeout::Late::Forget, error).traced_as(&TIMEOUT_AND_FORGET)
    }

    /// [`IO::timeout_to`] for io-core's own nodes (no trace event).
    fn timeout_to_untraced(self, duration: Duration, fallback: IO<A, E>) -> IO<A, E> {
        timeout::run(self, duration, timeout::Late::Await, move || fallback)
    }

    /// Measures how long `self` takes on the executor's monotonic clock.
    #[track_caller]
    pub fn timed(self) -> IO<(Duration, A), E> {
        IO::<Duration, E>::monotonic()
            .flat_map_untraced(move |start| {
                self.flat_map_untraced(move |a| {
                    IO::<Duration, E>::monotonic()
                        .map_untraced(move |end| (end.saturating_sub(start), a))
                })
            })
            .traced_as(&TIMED)
    }
}

/// The joined outcome of a fiber, without `Clone` bounds: the handle's
/// outcome is moved out by its single reader here (the combinators own the
/// only handle that reads it).
fn outcome_of<A: Send + 'static, E: Send + 'static, E2: Send + 'static>(
    fiber: &FiberHandle<A, E>,
) -> IO<Outcome<A, E>, E2> {
    fiber.take_outcome()
}

/// The shared table of [`IO::par_sequence`].
mod par {
    use alloc::vec::Vec;

    use crate::engine::tracing::ChildTraces;
    use crate::fiber::RawFiberRef;
    use crate::io::IO;
    use crate::outcome::Outcome;
    use crate::stdlib::data::deferred::Deferred;
    use crate::sync::{Arc, Mutex};

    /// The started children (shared by the cancel paths).
    #[derive(Clone)]
    pub(super) struct Children(pub(super) Arc<Vec<RawFiberRef>>);

    struct State<A, E> {
        values: Vec<Option<A>>,
        succeeded: usize,
        ended: usize,
        /// The first failure (an error, a cancellation or a panic), and
        /// the failure traces of the child it came from.
        failure: Option<(Outcome<(), E>, ChildTraces)>,
    }

    pub(super) struct Table<A, E> {
        state: Mutex<State<A, E>>,
        /// Completed by the last child to succeed, or the first to fail.
        pub(super) done: Deferred<()>,
        /// Completed by the last child to end, whatever its outcome.
        pub(super) ended: Deferred<()>,
    }

    impl<A: Send + 'static, E: Send + 'static> Table<A, E> {
        pub(super) fn new(n: usize) -> Self {
            let mut values = Vec::with_capacity(n);
            values.resize_with(n, || None);
            Table {
                state: Mutex::new(State {
                    values,
                    succeeded: 0,
                    ended: 0,
                    failure: None,
                }),
                done: Deferred::new(),
                ended: Deferred::new(),
            }
        }

        /// A child's outcome (its completion callback: exactly once per
        /// child).
        pub(super) fn record(&self, index: usize, outcome: Outcome<A, E>, traces: ChildTraces) {
            let (finished, all_ended) = {
                let mut state = self.state.lock();
                let n = state.values.len();
                let finished = match outcome {
                    Outcome::Succeeded(a) => {
                        state.values[index] = Some(a);
                        state.succeeded += 1;
                        state.succeeded == n
                    }
                    Outcome::Errored(e) => first_failure(&mut state, Outcome::Errored(e), traces),
                    Outcome::Canceled => first_failure(&mut state, Outcome::Canceled, traces),
                    Outcome::Panicked(p) => first_failure(&mut state, Outcome::Panicked(p), traces),
                };
                state.ended += 1;
                (finished, state.ended == n)
            };
            // The only completions: all successes happen once and exclude a
            // failure, only the first failure finishes, and `ended` reaches
            // `n` once.
            if finished {
                let _ = self.done.complete_now(());
            }
            if all_ended {
                let _ = self.ended.complete_now(());
            }
        }

        /// The values in order, or the first failure (with its traces).
        pub(super) fn take(&self) -> Result<Vec<A>, (Outcome<(), E>, ChildTraces)> {
            let mut state = self.state.lock();
            match state.failure.take() {
                Some(failure) => Err(failure),
                None => Ok(core::mem::take(&mut state.values)
                    .into_iter()
                    .map(|value| value.expect("every child recorded its value"))
                    .collect()),
            }
        }
    }

    /// Records `failure` if it is the first; true if it is.
    fn first_failure<A, E>(
        state: &mut State<A, E>,
        failure: Outcome<(), E>,
        traces: ChildTraces,
    ) -> bool {
        if state.failure.is_some() || state.succeeded == state.values.len() {
            return false;
        }
        state.failure = Some((failure, traces));
        true
    }

    /// Requests the cancellation of every child at once, then waits until
    /// all have ended (their finalizers have run).
    pub(super) fn cancel_all<E: Send + 'static>(
        children: Children,
        ended: Deferred<()>,
    ) -> IO<(), E> {
        IO::uncancelable_untraced(move |_| {
            IO::delay_untraced(move || {
                for child in children.0.iter() {
                    child.request_cancel();
                }
            })
            .product_r_untraced(ended.get_untraced())
        })
    }
}

/// `timeout`, `timeout_to` and `timeout_and_forget`: the body on one child
/// fiber, and the deadline as a timer on the parent's wait.
///
/// # Protocol
///
/// The parent starts the body as a child fiber whose completion callback
/// stores its outcome in a shared [`Slot`] and wakes the parent's wait, if
/// one is registered. The parent then waits, unmasked, with
/// `from_callback_until` (an `AsyncUntil` node): it resumes when the child
/// wakes it or when the executor's monotonic clock reaches the deadline,
/// and reads the slot to tell which. Registering the waker and completing
/// the slot take the slot's lock, so the wake-up cannot be missed: either
/// the child completed first (the registration sees the outcome and resumes
/// at once) or the registration came first (the completion finds the
/// waker).
///
/// * The child completed first: its outcome is the result (a value, an
///   error, a panic raised again). If it canceled itself, the deadline
///   decides, as the timer of Cats Effect's race would: the parent waits
///   until it, then runs the fallback.
/// * The deadline came first: the parent requests the child's
///   cancellation; with [`Late::Await`] it waits (masked) until the child
///   has ended, and then the child's outcome still wins if it has one (a
///   body that did not honour the cancellation, Cats Effect 3.6); the
///   fallback runs only for a canceled child. With [`Late::Forget`] it does
///   not wait: the fallback runs at once.
/// * The parent is canceled while it waits: it requests the child's
///   cancellation and waits until the child has ended (its finalizers have
///   run), as every combinator of this module does.
///
/// Compared with the race of two fibers that Cats Effect derives `timeout`
/// from, this starts one fiber instead of two, and needs no `Deferred`, no
/// fiber handles and no sleeping fiber to cancel: the timer is removed when
/// the wait ends, in O(1).
mod timeout {
    use core::time::Duration;

    use crate::Callback;
    use crate::combinators::monad_cancel::Poll;
    use crate::engine::erased::ErasedFn;
    use crate::engine::tracing::ChildTraces;
    use crate::fiber::{CompleteK, RawFiberRef};
    use crate::io::IO;
    use crate::outcome::Outcome;
    use crate::sync::{Arc, Mutex};

    /// What the parent does when the deadline comes first.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub(super) enum Late {
        /// Wait until the child has ended; its outcome wins if it has one.
        Await,
        /// Only request its cancellation; the fallback runs at once.
        Forget,
    }

    struct State<A, E> {
        /// The child's outcome, once it has ended, and its failure traces.
        outcome: Option<(Outcome<A, E>, ChildTraces)>,
        /// Whether it has ended (the outcome may have been taken since).
        ended: bool,
        /// The parent's wait, if one is registered.
        waker: Option<Callback<(), E>>,
    }

    /// The child's outcome, shared by its completion callback and the
    /// parent.
    pub(super) struct Slot<A, E> {
        state: Mutex<State<A, E>>,
    }

    impl<A: Send + 'static, E: Send + 'static> Slot<A, E> {
        fn new() -> Self {
            Slot {
                state: Mutex::new(State {
                    outcome: None,
                    ended: false,
                    waker: None,
                }),
            }
        }

        /// The child's completion callback (exactly once).
        fn complete(&self, outcome: Outcome<A, E>, traces: ChildTraces) {
            let waker = {
                let mut state = self.state.lock();
                state.outcome = Some((outcome, traces));
                state.ended = true;
                state.waker.take()
            };
            // Outside the lock: completing resumes (schedules) the parent.
            if let Some(waker) = waker {
                waker.succeed(());
            }
        }

        /// Registers `waker` unless the child has ended; true if it has.
        fn register(&self, waker: &Callback<(), E>) -> bool {
            let mut state = self.state.lock();
            if state.ended {
                return true;
            }
            state.waker = Some(waker.clone());
            false
        }

        fn take(&self) -> Option<(Outcome<A, E>, ChildTraces)> {
            self.state.lock().outcome.take()
        }
    }

    /// Waits until the child ends or `deadline` passes.
    fn wait_until<A: Send + 'static, E: Send + 'static>(
        slot: Arc<Slot<A, E>>,
        deadline: Duration,
    ) -> IO<(), E> {
        IO::from_callback_until_untraced(deadline, move |waker| {
            if slot.register(&waker) {
                waker.succeed(());
            }
            None
        })
    }

    /// Waits until the child has ended.
    fn wait_ended<A: Send + 'static, E: Send + 'static>(slot: Arc<Slot<A, E>>) -> IO<(), E> {
        IO::from_callback_untraced(move |waker: Callback<(), E>| {
            if slot.register(&waker) {
                waker.succeed(());
            }
            None
        })
    }

    /// Requests the child's cancellation and waits (masked) until it has
    /// ended.
    fn cancel_and_wait<A: Send + 'static, E: Send + 'static>(
        slot: Arc<Slot<A, E>>,
        child: RawFiberRef,
    ) -> IO<(), E> {
        IO::uncancelable_untraced(move |_| {
            IO::delay_untraced(move || child.request_cancel()).product_r_untraced(wait_ended(slot))
        })
    }

    /// The body `io` under a deadline `duration` from now; `fallback()`
    /// when it is canceled by the deadline (see the module doc).
    pub(super) fn run<A, E, F>(
        io: IO<A, E>,
        duration: Duration,
        late: Late,
        fallback: F,
    ) -> IO<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce() -> IO<A, E> + Send + 'static,
    {
        IO::<Duration, E>::monotonic().flat_map_untraced(move |now| {
            let deadline = now.saturating_add(duration);
            IO::uncancelable_untraced(move |poll| {
                let slot = Arc::new(Slot::<A, E>::new());
                let recorder = slot.clone();
                IO::<RawFiberRef, E>::with_spawner(move |spawner| {
                    let on_complete =
                        move |outcome: Outcome<A, E>,
                              _: alloc::vec::Vec<E>,
                              trace: crate::engine::tracing::Trace,
                              children: ChildTraces| {
                            let traces = ChildTraces::of_failure(&outcome, trace, children);
                            recorder.complete(outcome, traces)
                        };
                    let on_complete = ErasedFn::new::<CompleteK<A, E>, _>(on_complete);
                    spawner.spawn(io.into_node(), Some(on_complete))
                })
                .flat_map_untraced(move |child| {
                    let on_cancel = cancel_and_wait(slot.clone(), child.clone());
                    poll.apply_untraced(wait_until(slot.clone(), deadline))
                        .on_cancel_untraced(on_cancel)
                        .flat_map_untraced(move |()| {
                            decide(poll, slot, child, deadline, late, fallback)
                        })
                })
            })
        })
    }

    /// After the wait: the child's outcome, or the deadline's verdict.
    fn decide<A, E, F>(
        poll: Poll,
        slot: Arc<Slot<A, E>>,
        child: RawFiberRef,
        deadline: Duration,
        late: Late,
        fallback: F,
    ) -> IO<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce() -> IO<A, E> + Send + 'static,
    {
        match slot.take() {
            // It canceled itself before the deadline: the timer decides.
            Some((Outcome::Canceled, _)) => poll
                .apply_untraced(IO::from_callback_until_untraced(deadline, |_| None))
                .flat_map_untraced(move |()| fallback()),
            Some((outcome, traces)) => super::embed(poll, outcome, traces),
            None if late == Late::Forget => {
                child.request_cancel();
                fallback()
            }
            None => cancel_and_wait(slot.clone(), child).flat_map_untraced(move |()| {
                match slot.take() {
                    // Canceled, as asked: the deadline's verdict.
                    Some((Outcome::Canceled, _)) | None => fallback(),
                    // It ended otherwise (it did not honour the
                    // cancellation, or finished meanwhile): that stands.
                    Some((outcome, traces)) => super::embed(poll, outcome, traces),
                }
            }),
        }
    }
}

/// `race`, `race_outcome`, `both` and `both_outcome`: two children that
/// complete into one shared state, as `par_sequence`'s do.
///
/// # Protocol
///
/// Both sides start in one step of the parent's masked region, as child
/// fibers whose completion callbacks (no join state, no frames around the
/// programs) record their outcome in a [`State`] behind a lock. The parent
/// waits for a *condition* on that state (the first side to end; both
/// ended; both succeeded or one failed): it registers its callback with the
/// condition, under the lock, unless the condition holds already; a
/// completion that makes the condition hold takes the callback and resumes
/// the parent (outside the lock). So the parent is woken exactly once per
/// wait, never too early and never missed. Waiting is unmasked (`poll`): a
/// parent canceled meanwhile requests the cancellation of both sides and
/// waits, masked, until both have ended.
///
/// Then each combinator does what Cats Effect's derivation from
/// `racePair` does: a loser is canceled and awaited (its finalizers have
/// run) before the combinator returns; a side that was canceled hands the
/// decision to the other; a failure is raised, a cancellation observed as
/// the parent's own (`embed`). Only `race_pair`, which hands out the
/// loser's `FiberHandle`, keeps two joinable fibers.
mod pair {
    use crate::Callback;
    use crate::combinators::monad_cancel::Poll;
    use crate::engine::erased::ErasedFn;
    use crate::engine::tracing::ChildTraces;
    use crate::fiber::{CompleteK, RawFiberRef};
    use crate::io::IO;
    use crate::outcome::Outcome;
    use crate::sync::{Arc, Mutex};

    use super::{BothOutcome, Either, RaceOutcome, embed};

    /// The two sides' outcomes and the parent's wait.
    struct State<A, B, E> {
        left: Option<Outcome<A, E>>,
        right: Option<Outcome<B, E>>,
        /// The failure traces of each side (see `ChildTraces`).
        left_traces: ChildTraces,
        right_traces: ChildTraces,
        /// Whether the left side ended first (`None`: neither has).
        left_first: Option<bool>,
        left_ended: bool,
        right_ended: bool,
        /// The parent's callback and what it waits for.
        waiter: Option<(Callback<(), E>, Condition)>,
    }

    /// What the parent waits for.
    #[derive(Clone, Copy)]
    enum Condition {
        /// One side has ended.
        First,
        /// Both have ended.
        Both,
        /// Both have succeeded, or one has ended otherwise.
        BothOrFailure,
        /// The left side has ended.
        Left,
        /// The right side has ended.
        Right,
    }

    impl<A, B, E> State<A, B, E> {
        fn holds(&self, condition: Condition) -> bool {
            match condition {
                Condition::First => self.left_ended || self.right_ended,
                Condition::Both => self.left_ended && self.right_ended,
                Condition::BothOrFailure => {
                    let failed = |ended: bool, succeeded: bool| ended && !succeeded;
                    let left_ok = matches!(self.left, Some(Outcome::Succeeded(_)));
                    let right_ok = matches!(self.right, Some(Outcome::Succeeded(_)));
                    (self.left_ended && self.right_ended)
                        || failed(self.left_ended, left_ok)
                        || failed(self.right_ended, right_ok)
                }
                Condition::Left => self.left_ended,
                Condition::Right => self.right_ended,
            }
        }
    }

    /// The shared state of one combinator.
    pub(super) struct Pair<A, B, E> {
        state: Mutex<State<A, B, E>>,
    }

    impl<A: Send + 'static, B: Send + 'static, E: Send + 'static> Pair<A, B, E> {
        fn new() -> Self {
            Pair {
                state: Mutex::new(State {
                    left: None,
                    right: None,
                    left_traces: ChildTraces::none(),
                    right_traces: ChildTraces::none(),
                    left_first: None,
                    left_ended: false,
                    right_ended: false,
                    waiter: None,
                }),
            }
        }

        /// A side's completion (exactly once per side).
        fn record(&self, record: impl FnOnce(&mut State<A, B, E>)) {
            let waker = {
                let mut state = self.state.lock();
                record(&mut state);
                match state.waiter.take() {
                    Some((waker, condition)) if state.holds(condition) => Some(waker),
                    other => {
                        state.waiter = other;
                        None
                    }
                }
            };
            // Outside the lock: completing resumes (schedules) the parent.
            if let Some(waker) = waker {
                waker.succeed(());
            }
        }

        fn record_left(&self, outcome: Outcome<A, E>, traces: ChildTraces) {
            self.record(move |state| {
                state.left = Some(outcome);
                state.left_traces = traces;
                state.left_ended = true;
                state.left_first.get_or_insert(true);
            });
        }

        fn record_right(&self, outcome: Outcome<B, E>, traces: ChildTraces) {
            self.record(move |state| {
                state.right = Some(outcome);
                state.right_traces = traces;
                state.right_ended = true;
                state.left_first.get_or_insert(false);
            });
        }
    }

    /// Waits until `condition` holds.
    fn wait<A, B, E>(pair: Arc<Pair<A, B, E>>, condition: Condition) -> IO<(), E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        IO::from_callback_untraced(move |waker: Callback<(), E>| {
            let ready = {
                let mut state = pair.state.lock();
                if state.holds(condition) {
                    true
                } else {
                    state.waiter = Some((waker.clone(), condition));
                    false
                }
            };
            if ready {
                waker.succeed(());
            }
            None
        })
    }

    /// The two children, for cancellation.
    #[derive(Clone)]
    struct Children {
        left: Arc<RawFiberRef>,
        right: Arc<RawFiberRef>,
    }

    /// Requests the cancellation of `sides` and waits (masked) until
    /// `condition` holds (the canceled sides have ended).
    fn cancel_and_wait<A, B, E>(
        pair: Arc<Pair<A, B, E>>,
        children: Children,
        left: bool,
        right: bool,
        condition: Condition,
    ) -> IO<(), E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        IO::uncancelable_untraced(move |_| {
            IO::delay_untraced(move || {
                if left {
                    children.left.request_cancel();
                }
                if right {
                    children.right.request_cancel();
                }
            })
            .product_r_untraced(wait(pair, condition))
        })
    }

    /// Starts both sides (one step) and runs `then` with the shared state
    /// and the children, inside the parent's masked region.
    fn start_both<A, B, E, C, F>(left: IO<A, E>, right: IO<B, E>, then: F) -> IO<C, E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
        C: Send + 'static,
        F: FnOnce(Poll, Arc<Pair<A, B, E>>, Children) -> IO<C, E> + Send + 'static,
    {
        IO::uncancelable_untraced(move |poll| {
            let pair = Arc::new(Pair::<A, B, E>::new());
            let (on_left, on_right) = (pair.clone(), pair.clone());
            IO::<Children, E>::with_spawner(move |spawner| {
                let left_done = move |outcome: Outcome<A, E>,
                                      _: alloc::vec::Vec<E>,
                                      trace: crate::engine::tracing::Trace,
                                      children: ChildTraces| {
                    let traces = ChildTraces::of_failure(&outcome, trace, children);
                    on_left.record_left(outcome, traces)
                };
                let right_done = move |outcome: Outcome<B, E>,
                                       _: alloc::vec::Vec<E>,
                                       trace: crate::engine::tracing::Trace,
                                       children: ChildTraces| {
                    let traces = ChildTraces::of_failure(&outcome, trace, children);
                    on_right.record_right(outcome, traces)
                };
                let left = spawner.spawn(
                    left.into_node(),
                    Some(ErasedFn::new::<CompleteK<A, E>, _>(left_done)),
                );
                let right = spawner.spawn(
                    right.into_node(),
                    Some(ErasedFn::new::<CompleteK<B, E>, _>(right_done)),
                );
                Children {
                    left: Arc::new(left),
                    right: Arc::new(right),
                }
            })
            .flat_map_untraced(move |children| then(poll, pair, children))
        })
    }

    /// Waits (unmasked) until `condition` holds; a cancellation meanwhile
    /// cancels both sides and waits until both have ended.
    fn poll_wait<A, B, E>(
        poll: Poll,
        pair: &Arc<Pair<A, B, E>>,
        children: &Children,
        condition: Condition,
    ) -> IO<(), E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        let on_cancel =
            cancel_and_wait(pair.clone(), children.clone(), true, true, Condition::Both);
        poll.apply_untraced(wait(pair.clone(), condition))
            .on_cancel_untraced(on_cancel)
    }

    /// Takes the left side's outcome (it has ended).
    fn take_left<A, B, E>(pair: &Pair<A, B, E>) -> Outcome<A, E> {
        pair.state.lock().left.take().unwrap_or(Outcome::Canceled)
    }

    /// Takes the right side's outcome (it has ended).
    fn take_right<A, B, E>(pair: &Pair<A, B, E>) -> Outcome<B, E> {
        pair.state.lock().right.take().unwrap_or(Outcome::Canceled)
    }

    /// Takes the left side's outcome (it has ended) and its failure traces,
    /// to raise its error again.
    fn take_left_failure<A, B, E>(pair: &Pair<A, B, E>) -> (Outcome<A, E>, ChildTraces) {
        let mut state = pair.state.lock();
        let outcome = state.left.take().unwrap_or(Outcome::Canceled);
        (outcome, core::mem::take(&mut state.left_traces))
    }

    /// Takes the right side's outcome (it has ended) and its failure
    /// traces, to raise its error again.
    fn take_right_failure<A, B, E>(pair: &Pair<A, B, E>) -> (Outcome<B, E>, ChildTraces) {
        let mut state = pair.state.lock();
        let outcome = state.right.take().unwrap_or(Outcome::Canceled);
        (outcome, core::mem::take(&mut state.right_traces))
    }

    /// `IO::race`.
    pub(super) fn race<A, B, E>(left: IO<A, E>, right: IO<B, E>) -> IO<Either<A, B>, E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        start_both(left, right, |poll, pair, children| {
            poll_wait(poll, &pair, &children, Condition::First).flat_map_untraced(move |()| {
                let left_first = pair.state.lock().left_first == Some(true);
                if left_first {
                    match take_left_failure(&pair) {
                        // Canceled first: the other side decides.
                        (Outcome::Canceled, _) => {
                            poll_wait(poll, &pair, &children, Condition::Right).flat_map_untraced(
                                move |()| {
                                    let (right, traces) = take_right_failure(&pair);
                                    embed(poll, right, traces).map_untraced(Either::Right)
                                },
                            )
                        }
                        (won, traces) => {
                            cancel_and_wait(pair, children, false, true, Condition::Right)
                                .product_r_untraced(
                                    embed(poll, won, traces).map_untraced(Either::Left),
                                )
                        }
                    }
                } else {
                    match take_right_failure(&pair) {
                        (Outcome::Canceled, _) => {
                            poll_wait(poll, &pair, &children, Condition::Left).flat_map_untraced(
                                move |()| {
                                    let (left, traces) = take_left_failure(&pair);
                                    embed(poll, left, traces).map_untraced(Either::Left)
                                },
                            )
                        }
                        (won, traces) => {
                            cancel_and_wait(pair, children, true, false, Condition::Left)
                                .product_r_untraced(
                                    embed(poll, won, traces).map_untraced(Either::Right),
                                )
                        }
                    }
                }
            })
        })
    }

    /// `IO::race_outcome`.
    pub(super) fn race_outcome<A, B, E>(
        left: IO<A, E>,
        right: IO<B, E>,
    ) -> IO<RaceOutcome<A, B, E>, E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        start_both(left, right, |poll, pair, children| {
            poll_wait(poll, &pair, &children, Condition::First).flat_map_untraced(move |()| {
                let left_first = pair.state.lock().left_first == Some(true);
                let loser = if left_first {
                    Condition::Right
                } else {
                    Condition::Left
                };
                cancel_and_wait(pair.clone(), children, !left_first, left_first, loser)
                    .map_untraced(move |()| {
                        if left_first {
                            Either::Left(take_left(&pair))
                        } else {
                            Either::Right(take_right(&pair))
                        }
                    })
            })
        })
    }

    /// `IO::both`.
    pub(super) fn both<A, B, E>(left: IO<A, E>, right: IO<B, E>) -> IO<(A, B), E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        start_both(left, right, |poll, pair, children| {
            poll_wait(poll, &pair, &children, Condition::BothOrFailure).flat_map_untraced(
                move |()| {
                    let (left, right, left_first, left_traces, right_traces) = {
                        let mut state = pair.state.lock();
                        (
                            state.left.take(),
                            state.right.take(),
                            state.left_first,
                            core::mem::take(&mut state.left_traces),
                            core::mem::take(&mut state.right_traces),
                        )
                    };
                    let left_failed = left.as_ref().is_some_and(|o| !o.is_succeeded());
                    let right_failed = right.as_ref().is_some_and(|o| !o.is_succeeded());
                    // The first failure wins (both may have ended by now).
                    let left_wins = left_failed && (!right_failed || left_first == Some(true));
                    match (left, right) {
                        (Some(Outcome::Succeeded(a)), Some(Outcome::Succeeded(b))) => {
                            IO::pure((a, b))
                        }
                        // A side failed: cancel the other (awaited), then
                        // fail as it did.
                        (Some(failed), _) if left_wins => {
                            cancel_and_wait(pair, children, false, true, Condition::Right)
                                .product_r_untraced(embed(poll, as_failure(failed), left_traces))
                                .map_untraced(|()| unreachable_pair())
                        }
                        (_, Some(failed)) if right_failed => {
                            cancel_and_wait(pair, children, true, false, Condition::Left)
                                .product_r_untraced(embed(poll, as_failure(failed), right_traces))
                                .map_untraced(|()| unreachable_pair())
                        }
                        _ => unreachable!("io-core: both: woken before either side decided"),
                    }
                },
            )
        })
    }

    /// `IO::both_outcome`.
    pub(super) fn both_outcome<A, B, E>(
        left: IO<A, E>,
        right: IO<B, E>,
    ) -> IO<BothOutcome<A, B, E>, E>
    where
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
    {
        start_both(left, right, |poll, pair, children| {
            poll_wait(poll, &pair, &children, Condition::Both)
                .map_untraced(move |()| (take_left(&pair), take_right(&pair)))
        })
    }

    /// A side's outcome that is not a success, without its value type.
    fn as_failure<A, E>(outcome: Outcome<A, E>) -> Outcome<(), E> {
        match outcome {
            Outcome::Errored(e) => Outcome::Errored(e),
            Outcome::Panicked(p) => Outcome::Panicked(p),
            Outcome::Canceled | Outcome::Succeeded(_) => Outcome::Canceled,
        }
    }

    /// `both` after a failed side: the failure is raised before a pair is
    /// ever needed.
    fn unreachable_pair<A, B>() -> (A, B) {
        unreachable!("io-core: a failed side is raised before the pair is built")
    }
}
