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
//! that is not a cancellation is the *winner* and completes `decided`; if
//! every child ends canceled, the last one completes `decided` with no
//! winner. The last child to end, whatever its outcome, completes `ended`.
//!
//! The parent waits for `decided` unmasked; canceled meanwhile, it requests
//! the cancellation of every child and waits (masked) for `ended`. Decided,
//! it requests the cancellation of the others and waits for `ended` (so the
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

use crate::concurrent::embed;
use crate::data::deferred::Deferred;
use crate::data::semaphore::Semaphore;
use crate::erased::ErasedFn;
use crate::fiber::{CompleteK, RawFiberRef};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::{Arc, Mutex};
use crate::tracing::{ChildTraces, Op};

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
}

/// The shared table of one `race_all`.
struct Table<A, E> {
    state: Mutex<State<A, E>>,
    /// Completed by the winner, or by the last child if all were canceled.
    decided: Deferred<()>,
    /// Completed by the last child to end.
    ended: Deferred<()>,
}

impl<A: Send + 'static, E: Send + 'static> Table<A, E> {
    /// A child's completion callback (exactly once per child).
    fn record(&self, outcome: Outcome<A, E>, traces: ChildTraces) {
        let (decided, all_ended, loser) = {
            let mut state = self.state.lock();
            state.ended += 1;
            let all_ended = state.ended == state.n;
            if state.winner.is_none() && !outcome.is_canceled() {
                state.winner = Some((outcome, traces));
                (true, all_ended, None)
            } else {
                // No winner by the last end: all were canceled.
                let decided = all_ended && state.winner.is_none();
                (decided, all_ended, Some(outcome))
            }
        };
        // A loser's value is dropped outside the lock (user code).
        drop(loser);
        if decided {
            let _ = self.decided.complete_now(());
        }
        if all_ended {
            let _ = self.ended.complete_now(());
        }
    }
}

/// Requests the cancellation of every child, then waits (masked) until all
/// have ended.
fn cancel_all<E: Send + 'static>(children: Arc<Vec<RawFiberRef>>, ended: Deferred<()>) -> IO<(), E> {
    IO::uncancelable_untraced(move |_| {
        IO::delay_untraced(move || {
            for child in children.iter() {
                child.request_cancel();
            }
        })
        .product_r_untraced(ended.get_untraced())
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
    /// use spindle_core::IO;
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
    /// use spindle_core::IO;
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
        }),
        decided: Deferred::new(),
        ended: Deferred::new(),
    });
    IO::uncancelable_untraced(move |poll| {
        let spawning = table.clone();
        IO::<Arc<Vec<RawFiberRef>>, E>::with_spawner(move |spawner| {
            let children = programs
                .into_iter()
                .map(|program| {
                    let table = spawning.clone();
                    let on_complete = move |outcome: Outcome<A, E>,
                                            _: Vec<E>,
                                            trace: crate::tracing::Trace,
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
            let on_cancel = cancel_all(children.clone(), table.ended.clone());
            poll.apply_untraced(table.decided.get_untraced())
                .on_cancel_untraced(on_cancel)
                .flat_map_untraced(move |()| {
                    let winner = table.state.lock().winner.take();
                    match winner {
                        Some((outcome, traces)) => cancel_all(children, table.ended.clone())
                            .product_r_untraced(embed(poll, outcome, traces)),
                        // Every child canceled itself (and all have ended).
                        None => embed(poll, Outcome::Canceled, ChildTraces::none()),
                    }
                })
        })
    })
}
