//! Combinators over any number of programs: [`IO::race_all`] (an n-way
//! `race`) and [`IO::par_sequence_n`] (`par_sequence` with a bound on how
//! many run at once).
//!
//! # `race_all`'s protocol
//!
//! As `par_sequence` (concurrent.rs) does, the parent starts one child per
//! program in one step of its masked region, each with a completion callback
//! (no join state, no frames around its program) that records the child's
//! outcome in a shared [`Table`] behind a short lock. The first outcome
//! that is not a cancellation is the *winner*. The parent waits for a
//! condition on the table (as `race`'s parent does on its pair):
//! *decided* (a winner, or every child ended, all canceled) or *all
//! ended*. It registers its callback with the condition under the lock,
//! unless the condition holds already; the completion that makes it hold
//! takes the callback and resumes the parent outside the lock: woken once
//! per wait, never early, never missed.
//!
//! The parent waits until decided, unmasked; canceled meanwhile, it
//! requests the cancellation of every child and waits (masked) until all
//! have ended. Decided, it requests the cancellation of the others and
//! waits until all have ended (so the
//! losers' finalizers have run when `race_all` returns), then embeds the
//! winner's outcome: a value, an error raised again with the child's
//! failure traces, a panic raised again. No winner: every program canceled
//! itself, and the caller observes that as its own cancellation, as `race`
//! does when both sides canceled themselves.
//!
//! These are the semantics of this crate's `race` (Cats Effect's `race`,
//! derived from `racePair`): the first program to *complete* wins, with a
//! success or an error alike; a program that canceled itself hands the
//! decision to the others.

use alloc::vec::Vec;
use core::num::{NonZeroU64, NonZeroUsize};

use crate::Callback;
use crate::combinators::concurrent::embed;
use crate::engine::erased::ErasedFn;
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::{CompleteK, RawFiberRef};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::semaphore::Semaphore;
use crate::sync::{Arc, Mutex};

static RACE_ALL: Op = Op::new("race_all");
static PAR_SEQUENCE_N: Op = Op::new("par_sequence_n");

struct State<A, E> {
    /// The first outcome that is not a cancellation, and its child's
    /// failure traces.
    winner: Option<(Outcome<A, E>, ChildTraces)>,
    /// Children that have ended.
    ended: usize,
    /// Children started.
    n: usize,
    /// The parent's callback and what it waits for.
    waiter: Option<(Callback<(), E>, Until)>,
}

/// What the parent waits for.
#[derive(Clone, Copy)]
enum Until {
    /// A winner, or every child ended (all canceled themselves).
    Decided,
    /// Every child ended.
    AllEnded,
}

impl<A, E> State<A, E> {
    fn holds(&self, until: Until) -> bool {
        match until {
            Until::Decided => self.winner.is_some() || self.ended == self.n,
            Until::AllEnded => self.ended == self.n,
        }
    }
}

/// The shared table of one `race_all`.
struct Table<A, E> {
    state: Mutex<State<A, E>>,
}

impl<A: Send + 'static, E: Send + 'static> Table<A, E> {
    /// A child's completion callback (exactly once per child).
    fn record(&self, outcome: Outcome<A, E>, traces: ChildTraces) {
        let (waker, loser) = {
            let mut state = self.state.lock();
            state.ended += 1;
            let loser = if state.winner.is_none() && !outcome.is_canceled() {
                state.winner = Some((outcome, traces));
                None
            } else {
                Some(outcome)
            };
            let waker = match state.waiter.take() {
                Some((waker, until)) if state.holds(until) => Some(waker),
                other => {
                    state.waiter = other;
                    None
                }
            };
            (waker, loser)
        };
        // A loser's value is dropped outside the lock (user code), and
        // completing the wait resumes (schedules) the parent.
        drop(loser);
        if let Some(waker) = waker {
            waker.succeed(());
        }
    }
}

/// Waits until `until` holds: registers the parent's callback under the
/// lock unless it holds already; the completion that makes it hold takes
/// the callback (so the wake-up is neither early nor missed).
fn wait<A, E>(table: Arc<Table<A, E>>, until: Until) -> IO<(), E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    IO::from_callback_untraced(move |waker: Callback<(), E>| {
        let ready = {
            let mut state = table.state.lock();
            if state.holds(until) {
                true
            } else {
                state.waiter = Some((waker.clone(), until));
                false
            }
        };
        if ready {
            waker.succeed(());
        }
        None
    })
}

/// Requests the cancellation of every child, then waits (masked) until all
/// have ended.
fn cancel_all<A, E>(table: Arc<Table<A, E>>, children: Arc<Vec<RawFiberRef>>) -> IO<(), E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    IO::uncancelable_untraced(move |_| {
        IO::delay_untraced(move || {
            for child in children.iter() {
                child.request_cancel();
            }
        })
        .product_r_untraced(wait(table, Until::AllEnded))
    })
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
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
    /// use spindle_core::{IO, IORuntime};
    /// use spindle_exec_single::SingleThreaded;
    /// use std::time::Duration;
    ///
    /// let after = |ms: u64, v: u32| IO::<(), ()>::sleep(Duration::from_millis(ms)).map_to(v);
    /// let first = IO::race_all(vec![after(50, 1), after(1, 2), IO::never()]);
    /// assert_eq!(SingleThreaded::new()?.block_on(first)?.succeeded(), Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn race_all(programs: Vec<IO<A, E>>) -> IO<A, E> {
        IO::defer_untraced(move || race_all(programs)).traced_as(&RACE_ALL)
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
    /// use spindle_core::{IO, IORuntime};
    /// use spindle_exec_single::SingleThreaded;
    ///
    /// let two = NonZeroUsize::new(2).expect("2 is not 0");
    /// let programs: Vec<IO<u32, ()>> = (1..=4).map(|x| IO::delay(move || x * 10)).collect();
    /// let all = IO::par_sequence_n(two, programs);
    /// assert_eq!(SingleThreaded::new()?.block_on(all)?.succeeded(), Some(vec![10, 20, 30, 40]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn par_sequence_n(parallelism: NonZeroUsize, programs: Vec<IO<A, E>>) -> IO<Vec<A>, E> {
        let permits = NonZeroU64::try_from(parallelism).unwrap_or(NonZeroU64::MAX);
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

/// `IO::race_all` (see the module doc).
fn race_all<A: Send + 'static, E: Send + 'static>(mut programs: Vec<IO<A, E>>) -> IO<A, E> {
    let n = programs.len();
    if n <= 1 {
        return match programs.pop() {
            Some(only) => only,
            None => IO::canceled_untraced().product_r_untraced(IO::never_untraced()),
        };
    }
    let table = Arc::new(Table::<A, E> {
        state: Mutex::new(State {
            winner: None,
            ended: 0,
            n,
            waiter: None,
        }),
    });
    IO::uncancelable_untraced(move |poll| {
        let spawning = table.clone();
        IO::<Arc<Vec<RawFiberRef>>, E>::with_spawner(move |spawner| {
            let children = programs
                .into_iter()
                .map(|program| {
                    let table = spawning.clone();
                    let on_complete =
                        move |outcome: Outcome<A, E>,
                              _: Vec<E>,
                              trace: crate::engine::tracing::Trace,
                              children: ChildTraces| {
                            let traces = ChildTraces::of_failure(&outcome, trace, children);
                            table.record(outcome, traces)
                        };
                    let on_complete = ErasedFn::new::<CompleteK<A, E>, _>(on_complete);
                    spawner.spawn(program.into_node(), Some(on_complete))
                })
                .collect();
            Arc::new(children)
        })
        .flat_map_untraced(move |children| {
            let on_cancel = cancel_all(table.clone(), children.clone());
            poll.apply_untraced(wait(table.clone(), Until::Decided))
                .on_cancel_untraced(on_cancel)
                .flat_map_untraced(move |()| {
                    let winner = table.state.lock().winner.take();
                    match winner {
                        Some((outcome, traces)) => cancel_all(table, children)
                            .product_r_untraced(embed(poll, outcome, traces)),
                        // Every child canceled itself (and all have ended).
                        None => embed(poll, Outcome::Canceled, ChildTraces::none()),
                    }
                })
        })
    })
}
