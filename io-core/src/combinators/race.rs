//! Races: [`IO::race_pair`], [`IO::race_outcome`], [`IO::race`] and
//! [`IO::race_all`] (its n-way form). The first program to *complete*
//! wins, with a value or an error alike; the others are canceled, and
//! their finalizers have run when the race returns.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::{Either, wstp::Runtime};
//! use std::time::Duration;
//!
//! let after = |ms: u64, v: u32| IO::<(), ()>::sleep(Duration::from_millis(ms)).map_to(v);
//! let rt = Runtime::new()?;
//! // The loser is canceled (and finalized) before `race` returns.
//! assert_eq!(rt.block_on(after(1, 1).race(after(60_000, 2)))?.succeeded(), Some(Either::Left(1)));
//! let first = IO::race_all(vec![after(500, 1), after(1, 2), IO::never()]);
//! assert_eq!(rt.block_on(first)?.succeeded(), Some(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Protocol
//!
//! `race`, `race_outcome` and `race_all` run their programs as the children
//! of one outcome table (`outcomes.rs`: how the children record their
//! outcomes, how the parent waits, why no wake-up is lost):
//!
//! * `race` and `race_all` keep only the *winner*, the first outcome that
//!   is not a cancellation (a loser's outcome is dropped by its own
//!   callback), and wait until the race is *decided*: a winner, or every
//!   child ended, each canceled. The others are then canceled and awaited,
//!   and the winner's outcome is the parent's: a value, an error raised
//!   again with the child's failure traces, a panic raised again. No
//!   winner: the parent observes that as its own cancellation. A program
//!   that canceled itself hands the decision to the others.
//! * `race_outcome` keeps the outcome of the first child to end, whatever
//!   it is, waits for it, then cancels and awaits the other.
//! * The parent waits unmasked; canceled meanwhile, it cancels every child
//!   and waits until all have ended.
//!
//! `race`'s two children are the pair instance of the table (two fibers in
//! an array, one slot, no heap `Vec`); `race_all`'s are `n`, in an
//! `Arc<Vec<_>>`, with the same slot, callbacks and decision.
//!
//! Only `race_pair`, which hands out the loser's [`FiberHandle`], keeps two
//! joinable fibers and a `Deferred` for the first to finish.
//!
//! Design credit: the semantics are Cats Effect 3's `racePair`, and its
//! `race` and `raceOutcome` derived from it (`GenSpawn`). No code is
//! copied.

use alloc::vec::Vec;

use crate::combinators::embed::embed;
use crate::combinators::monad_cancel::Poll;
use crate::combinators::outcomes::{
    Arrival, Children, Decided, FirstEnded, Outcomes, Table, cancel_and_wait, poll_wait, spawn,
    start,
};
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::RawFiberRef;
use crate::fiber::handle::FiberHandle;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::deferred::Deferred;
use crate::sync::Arc;

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

// The operations as traces name them (one event each, at the user's call
// site; the nodes they are made of are untraced).
static RACE_PAIR: Op = Op::new("race_pair");
static RACE_OUTCOME: Op = Op::new("race_outcome");
static RACE: Op = Op::new("race");
static RACE_ALL: Op = Op::new("race_all");

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
        race_outcome(self, other).traced_as(&RACE_OUTCOME)
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
        start(
            || Table::new(2, None),
            move |spawner, table| {
                [
                    spawn(
                        table.clone(),
                        spawner,
                        self,
                        |slot, outcome: Outcome<A, E>, traces, arrival| {
                            keep_winner(slot, outcome.map(Either::Left), traces, arrival)
                        },
                    ),
                    spawn(
                        table,
                        spawner,
                        other,
                        |slot, outcome: Outcome<B, E>, traces, arrival| {
                            keep_winner(slot, outcome.map(Either::Right), traces, arrival)
                        },
                    ),
                ]
            },
            decide,
        )
    }

    /// Runs the programs concurrently; the first to complete wins, with its
    /// value or its error, and the others are canceled: their finalizers
    /// have run when `race_all` returns. A program that cancels itself
    /// does not win: the decision passes to the others, and if every
    /// program cancels itself, the caller is canceled (as with
    /// [`race`](IO::race), of which this is the n-way form; a panic wins as
    /// an error does, and is raised again).
    ///
    /// Of no programs, the caller is canceled too (none completed); of one,
    /// that program runs on the caller's fiber.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    /// use std::time::Duration;
    ///
    /// let after = |ms: u64, v: u32| IO::<(), ()>::sleep(Duration::from_millis(ms)).map_to(v);
    /// let first = IO::race_all(vec![after(500, 1), after(1, 2), IO::never()]);
    /// assert_eq!(Runtime::new()?.block_on(first)?.succeeded(), Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn race_all(programs: Vec<IO<A, E>>) -> IO<A, E> {
        IO::defer_untraced(move || race_all(programs)).traced_as(&RACE_ALL)
    }
}

/// What `race` and `race_all` keep: the winner's outcome, as the race's
/// result, and its failure traces.
type Winner<X, E> = Option<(Outcome<X, E>, ChildTraces)>;

/// A child's record in a race: the winner's outcome is kept, a loser's is
/// handed back, to be dropped outside the lock.
#[inline]
fn keep_winner<X, E>(
    slot: &mut Winner<X, E>,
    outcome: Outcome<X, E>,
    traces: ChildTraces,
    arrival: Arrival,
) -> Option<Outcome<X, E>> {
    if arrival.winner {
        *slot = Some((outcome, traces));
        None
    } else {
        Some(outcome)
    }
}

/// The parent of `race` and `race_all`, once its children have started:
/// waits until decided, cancels and awaits the others, and takes on the
/// winner's outcome (module doc).
fn decide<X, E, C>(poll: Poll, table: Arc<Outcomes<Winner<X, E>, E>>, children: C) -> IO<X, E>
where
    X: Send + 'static,
    E: Send + 'static,
    C: Children,
{
    poll_wait(poll, &table, &children, Decided).flat_map_untraced(move |()| {
        match table.slots(Option::take) {
            Some((winner, traces)) => {
                cancel_and_wait(table, children).product_r_untraced(embed(poll, winner, traces))
            }
            // Every child canceled itself (and all have ended).
            None => embed(poll, Outcome::Canceled, ChildTraces::none()),
        }
    })
}

/// `IO::race_all` (see the module doc); also the race of `select!`.
pub(crate) fn race_all<A: Send + 'static, E: Send + 'static>(
    mut programs: Vec<IO<A, E>>,
) -> IO<A, E> {
    let n = programs.len();
    if n <= 1 {
        return match programs.pop() {
            Some(only) => only,
            None => IO::canceled_untraced().product_r_untraced(IO::never_untraced()),
        };
    }
    start(
        move || Table::new(n, None),
        move |spawner, table| {
            let children: Vec<RawFiberRef> = programs
                .into_iter()
                .map(|program| spawn(table.clone(), spawner, program, keep_winner))
                .collect();
            Arc::new(children)
        },
        decide,
    )
}

/// `IO::race_outcome`: the first child to end is kept, whatever its
/// outcome; the other is canceled and awaited.
fn race_outcome<A, B, E>(left: IO<A, E>, right: IO<B, E>) -> IO<RaceOutcome<A, B, E>, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
{
    fn keep_first<T>(slot: &mut Option<T>, outcome: T, arrival: Arrival) -> Option<T> {
        if arrival.first {
            *slot = Some(outcome);
            None
        } else {
            Some(outcome)
        }
    }
    start(
        || Table::new(2, None),
        move |spawner, table| {
            [
                spawn(table.clone(), spawner, left, |slot, outcome, _, arrival| {
                    keep_first(slot, Either::Left(outcome), arrival)
                }),
                spawn(table, spawner, right, |slot, outcome, _, arrival| {
                    keep_first(slot, Either::Right(outcome), arrival)
                }),
            ]
        },
        |poll, table, children| {
            poll_wait(poll, &table, &children, FirstEnded).flat_map_untraced(move |()| {
                cancel_and_wait(table.clone(), children).map_untraced(move |()| {
                    table
                        .slots(Option::take)
                        .expect("io-core: race_outcome: the first to end recorded its outcome")
                })
            })
        },
    )
}

/// The joined outcome of a fiber, without `Clone` bounds: the handle's
/// outcome is moved out by its single reader here (the combinators own the
/// only handle that reads it).
fn outcome_of<A: Send + 'static, E: Send + 'static, E2: Send + 'static>(
    fiber: &FiberHandle<A, E>,
) -> IO<Outcome<A, E>, E2> {
    fiber.take_outcome()
}
