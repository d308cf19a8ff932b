//! [`IO::memoize`] and [`IO::memoize_with`]: a program evaluated at most
//! once, its result shared by every caller (Cats Effect's `memoize`).
//!
//! Both give a [`Memoized`] handle (`Clone`) whose [`get`](Memoized::get)
//! builds the program that reads the result: an `IO` is a single-use value
//! in Spindle, so where Cats Effect's `memoize` gives an `F[F[A]]` whose
//! inner `F[A]` can be run any number of times, Spindle gives an
//! `IO<Memoized<A, E>, _>` whose handle makes such programs.
//!
//! # What happens on cancellation
//!
//! The two forms differ exactly there, because only one of them can run
//! its program a second time:
//!
//! * [`IO::memoize_with`] takes a *factory* of the program and has Cats
//!   Effect 3.6's semantics: the first caller starts the evaluation on a
//!   fiber of its own, and every caller (the first included) subscribes to
//!   it and waits, cancelably. A canceled caller unsubscribes; the
//!   evaluation goes on as long as one caller is left. When the last one
//!   is canceled, the evaluation is canceled too (the caller's
//!   cancellation waits for it to end) and the memo goes back to
//!   unevaluated: the next caller builds the program again and evaluates
//!   it. A success, an error or a panic is final: every later caller gets
//!   a clone of the value or of the error, or panics with the same
//!   message.
//! * [`IO::memoize`] memoizes the program itself, which can run only once.
//!   So that a canceled caller cannot spoil the result for the others, the
//!   first caller starts the evaluation on a fiber of its own, and every
//!   caller, the first included, waits for it cancelably: canceling a
//!   caller never cancels the evaluation (which then completes in the
//!   background, and its result serves the next caller).
//!
//! In both, a program that cancels itself leaves a canceled result: every
//! caller observes it as its own cancellation.
//!
//! # Protocol
//!
//! The state is a short lock of the sync shim: `Unevaluated`,
//! `Evaluating` (the evaluation's latch, its number, its fiber and, for
//! `memoize_with`, how many callers are subscribed) or `Done(outcome)`. A
//! caller decides in one step under the lock: take a clone of a `Done`
//! outcome; subscribe to an `Evaluating` one and wait for its latch; or
//! move `Unevaluated` to `Evaluating` and start the evaluation's fiber in
//! that same step (spawning never runs a fiber inline, so doing it under
//! the lock cannot re-enter it), with a completion callback that records
//! the outcome if the evaluation is still the current one (its number)
//! and completes its latch in any case.
//!
//! For `memoize_with` the decision, the wait and its cancellation handler
//! are one masked region in which only the wait is polled: a caller
//! canceled while it waits always unsubscribes, and one that is not
//! canceled finds the outcome after the latch. Unsubscribing the last
//! caller of the current evaluation moves the state back to `Unevaluated`
//! (so the canceled evaluation's outcome is not recorded), requests the
//! evaluation's cancellation, and waits for its latch: its finalizers have
//! run when the caller's cancellation completes. A caller whose wait ended
//! (the outcome is there) has nothing to unsubscribe.
//!
//! Design credit: Cats Effect 3.6's `GenConcurrent.memoize` (the states,
//! the subscriber count, the cancellation of an evaluation nobody waits
//! for, and the re-evaluation after it). No code is copied.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use crate::engine::erased::ErasedFn;
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::{CompleteK, RawFiberRef, Spawner};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::deferred::Deferred;
use crate::sync::{Arc, Mutex};

static MEMOIZE: Op = Op::new("memoize");
static MEMOIZE_WITH: Op = Op::new("memoize_with");
static MEMOIZED_GET: Op = Op::new("Memoized::get");

enum State<A, E> {
    Unevaluated,
    Evaluating(Evaluation),
    Done(Outcome<A, E>),
}

/// An evaluation under way.
struct Evaluation {
    /// Completed when the evaluation's fiber ends (with a result, or
    /// canceled), whether or not it is still the current one.
    latch: Deferred<()>,
    /// Which evaluation this is (`Memo::evaluations` when it started).
    number: u64,
    /// The callers waiting for it (`memoize_with`; `memoize` never cancels
    /// its evaluation and does not count).
    subscribers: usize,
    /// The evaluation's fiber, to cancel when its last caller is canceled.
    fiber: RawFiberRef,
}

/// Where the program comes from.
enum Source<A, E> {
    /// The program itself (`memoize`): taken by the one evaluation.
    Once(Option<IO<A, E>>),
    /// A factory (`memoize_with`): called by each evaluation.
    Make(Box<dyn FnMut() -> IO<A, E> + Send>),
}

struct Memo<A, E> {
    state: State<A, E>,
    source: Source<A, E>,
    /// How many evaluations were started.
    evaluations: u64,
}

/// What a caller does after deciding.
enum Step<A, E> {
    /// Take this outcome.
    Finished(Outcome<A, E>),
    /// Wait for the evaluation number `.1` to end, then look again.
    Wait(Deferred<()>, u64),
}

/// The result of a program evaluated at most once, shared by every caller:
/// made by [`IO::memoize`] and [`IO::memoize_with`] (module doc for the
/// semantics on cancellation). A cheap handle (`Clone`).
pub struct Memoized<A, E> {
    memo: Arc<Mutex<Memo<A, E>>>,
}

impl<A, E> Clone for Memoized<A, E> {
    fn clone(&self) -> Self {
        Memoized {
            memo: self.memo.clone(),
        }
    }
}

impl<A, E> fmt::Debug for Memoized<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (state, callers) = match &self.memo.lock().state {
            State::Unevaluated => ("unevaluated", 0),
            State::Evaluating(evaluation) => ("evaluating", evaluation.subscribers),
            State::Done(_) => ("done", 0),
        };
        f.debug_struct("Memoized")
            .field("state", &state)
            .field("waiting", &callers)
            .finish()
    }
}

impl<A, E> IO<A, E>
where
    A: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    /// Memoizes `self`: the handle's [`get`](Memoized::get) runs `self` the
    /// first time it runs, at most once, and gives every caller a clone of
    /// its value or of its error (Cats Effect's `memoize`).
    ///
    /// `self` runs on a fiber of its own, started by the first caller;
    /// canceling a caller never cancels it (`self` can run only once, and
    /// the other callers still want its result). For Cats Effect's rule,
    /// where canceling the evaluating caller cancels the evaluation and a
    /// later caller runs the program again, use
    /// [`memoize_with`](IO::memoize_with). Module doc: `memoize.rs`.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let runs = Arc::new(AtomicUsize::new(0));
    /// let r = runs.clone();
    /// let expensive: IO<u32, ()> = IO::delay(move || { r.fetch_add(1, Ordering::SeqCst); 42 });
    /// let io = expensive.memoize().flat_map(|memo| {
    ///     let again = memo.clone();
    ///     memo.get().flat_map(move |a| again.get().map(move |b| a + b))
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(84));
    /// assert_eq!(runs.load(Ordering::SeqCst), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn memoize<E2: Send + 'static>(self) -> IO<Memoized<A, E>, E2> {
        IO::delay_untraced(move || Memoized::new(Source::Once(Some(self)))).traced_as(&MEMOIZE)
    }

    /// Memoizes the program that `make` builds, with Cats Effect 3.6's
    /// semantics: the first caller of [`get`](Memoized::get) starts its
    /// evaluation on a fiber of its own, and every caller waits for that
    /// evaluation and shares its value or error. Canceling a caller leaves
    /// the evaluation running for the others; canceling the last caller
    /// cancels the evaluation (and waits for it to end), and the next
    /// caller calls `make` again and evaluates the new program. `make` runs
    /// once per evaluation, so at most once unless an evaluation lost all
    /// its callers.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let io = IO::<u32, String>::memoize_with(|| IO::raise_error("once".to_string()))
    ///     .flat_map(|memo| {
    ///         let again = memo.clone();
    ///         memo.get().attempt().flat_map(move |first| again.get().attempt().map(move |second| (first, second)))
    ///     });
    /// let (first, second) = Runtime::new()?.block_on(io)?.succeeded().unwrap();
    /// assert_eq!(first, Err("once".to_string()));
    /// assert_eq!(second, first);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn memoize_with<F, E2>(make: F) -> IO<Memoized<A, E>, E2>
    where
        F: FnMut() -> IO<A, E> + Send + 'static,
        E2: Send + 'static,
    {
        IO::delay_untraced(move || Memoized::new(Source::Make(Box::new(make))))
            .traced_as(&MEMOIZE_WITH)
    }
}

impl<A, E> Memoized<A, E>
where
    A: Clone + Send + 'static,
    E: Clone + Send + 'static,
{
    fn new(source: Source<A, E>) -> Self {
        Memoized {
            memo: Arc::new(Mutex::new(Memo {
                state: State::Unevaluated,
                source,
                evaluations: 0,
            })),
        }
    }

    /// The memoized program's result: evaluates it if nobody has yet (or
    /// the last evaluation was canceled, for `memoize_with`), waits for the
    /// evaluation under way otherwise, and then gives a clone of its value
    /// or raises a clone of its error (a panic is raised again, with its
    /// message). Waiting is cancelable.
    #[track_caller]
    pub fn get(&self) -> IO<A, E> {
        self.get_untraced().traced_as(&MEMOIZED_GET)
    }

    /// How many callers of [`get`](Memoized::get) wait for the evaluation
    /// under way now (0 when nothing is being evaluated). A snapshot: it
    /// can change as soon as it is read.
    pub fn waiting(&self) -> usize {
        match &self.memo.lock().state {
            State::Evaluating(evaluation) => evaluation.subscribers,
            State::Unevaluated | State::Done(_) => 0,
        }
    }

    fn get_untraced(&self) -> IO<A, E> {
        let memo = self.clone();
        IO::defer_untraced(move || {
            let once = {
                let state = memo.memo.lock();
                // The common case, a result already there: one lock, no
                // decision step.
                if let State::Done(outcome) = &state.state {
                    return finish(outcome.clone());
                }
                matches!(state.source, Source::Once(_))
            };
            if once {
                memo.get_once()
            } else {
                memo.get_with()
            }
        })
    }

    /// `memoize`: decides in one step, then waits (canceling the wait never
    /// cancels the evaluation).
    fn get_once(self) -> IO<A, E> {
        let again = self.clone();
        IO::with_spawner(move |spawner| self.decide(spawner, false)).flat_map_untraced(
            move |step| match step {
                Step::Finished(outcome) => finish(outcome),
                Step::Wait(latch, _) => latch
                    .get_untraced()
                    .flat_map_untraced(move |()| again.get_untraced()),
            },
        )
    }

    /// `memoize_with`: decides, subscribes and waits in one masked region
    /// in which only the wait is polled, its cancellation unsubscribing
    /// (module doc).
    fn get_with(self) -> IO<A, E> {
        IO::uncancelable_untraced(move |poll| {
            let (again, leaving) = (self.clone(), self.clone());
            IO::with_spawner(move |spawner| self.decide(spawner, true))
                .flat_map_untraced(move |step| match step {
                    Step::Finished(outcome) => IO::pure(Ok(outcome)),
                    Step::Wait(latch, number) => poll
                        .apply_untraced(latch.get_untraced())
                        .on_cancel_untraced(leaving.unsubscribe(number, latch))
                        .map_untraced(|()| Err(())),
                })
                .flat_map_untraced(move |decided| match decided {
                    Ok(outcome) => finish(outcome),
                    // The evaluation ended: look again (unmasked).
                    Err(()) => poll.apply_untraced(again.get_untraced()),
                })
        })
    }

    /// Decides in one step (the spawner's): the outcome if there is one;
    /// else the evaluation under way, subscribed to if `count`; else a new
    /// evaluation, started on its own fiber.
    fn decide(&self, spawner: Spawner, count: bool) -> Step<A, E> {
        let mut memo = self.memo.lock();
        match &mut memo.state {
            State::Done(outcome) => return Step::Finished(outcome.clone()),
            State::Evaluating(evaluation) => {
                if count {
                    evaluation.subscribers += 1;
                }
                return Step::Wait(evaluation.latch.clone(), evaluation.number);
            }
            State::Unevaluated => {}
        }
        let program = match &mut memo.source {
            Source::Once(program) => match program.take() {
                Some(program) => program,
                None => {
                    // Unevaluated with the program gone cannot happen
                    // (`memoize` never goes back to unevaluated); the
                    // honest answer would be a canceled result.
                    memo.state = State::Done(Outcome::Canceled);
                    return Step::Finished(Outcome::Canceled);
                }
            },
            // `make` is called when the evaluation runs, outside the lock
            // (it is user code).
            Source::Make(_) => {
                let memo = self.clone();
                IO::defer_untraced(move || memo.make())
            }
        };
        memo.evaluations += 1;
        let number = memo.evaluations;
        let latch = Deferred::new();
        let (recorder, done) = (self.clone(), latch.clone());
        let on_complete =
            move |outcome: Outcome<A, E>,
                  _: Vec<E>,
                  _: crate::engine::tracing::Trace,
                  _: ChildTraces| { recorder.record(outcome, number, &done) };
        // Under the lock: spawning never runs the child inline, and its
        // completion waits for the lock (module doc).
        let fiber = spawner.spawn(
            program.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
        );
        memo.state = State::Evaluating(Evaluation {
            latch: latch.clone(),
            number,
            subscribers: 1,
            fiber,
        });
        Step::Wait(latch, number)
    }

    /// A caller of evaluation `number` was canceled while it waited: the
    /// last one cancels the evaluation and waits for it to end (`latch`).
    fn unsubscribe(&self, number: u64, latch: Deferred<()>) -> IO<(), E> {
        let memo = self.clone();
        IO::defer_untraced(move || {
            let cancel = {
                let mut memo = memo.memo.lock();
                let last = match &mut memo.state {
                    State::Evaluating(evaluation) if evaluation.number == number => {
                        evaluation.subscribers -= 1;
                        evaluation.subscribers == 0
                    }
                    // Ended, or a later evaluation: nothing to leave.
                    _ => false,
                };
                if last {
                    match core::mem::replace(&mut memo.state, State::Unevaluated) {
                        State::Evaluating(evaluation) => Some(evaluation.fiber),
                        _ => None,
                    }
                } else {
                    None
                }
            };
            match cancel {
                Some(fiber) => {
                    fiber.request_cancel();
                    latch.get_untraced()
                }
                None => IO::pure(()),
            }
        })
    }

    /// Builds the program with the factory (`memoize_with`).
    fn make(&self) -> IO<A, E> {
        // The factory is taken out for the call, so that user code never
        // runs under the lock; an evaluation is the only caller meanwhile.
        let taken = match &mut self.memo.lock().source {
            Source::Make(make) => Some(core::mem::replace(make, Box::new(missing_factory))),
            Source::Once(_) => None,
        };
        let Some(mut make) = taken else {
            return missing_factory();
        };
        let program = make();
        if let Source::Make(slot) = &mut self.memo.lock().source {
            *slot = make;
        }
        program
    }

    /// Evaluation `number` ended with `outcome`: it is the result if that
    /// evaluation is still the current one (one that lost all its callers
    /// was replaced by `Unevaluated`, and its outcome is dropped); its
    /// latch is completed either way.
    fn record(&self, outcome: Outcome<A, E>, number: u64, latch: &Deferred<()>) {
        let dropped = {
            let mut memo = self.memo.lock();
            match &memo.state {
                State::Evaluating(evaluation) if evaluation.number == number => {
                    Some(core::mem::replace(&mut memo.state, State::Done(outcome)))
                }
                _ => None,
            }
        };
        drop(dropped);
        let _ = latch.complete_now(());
    }
}

/// The program of a memoized outcome: its value, its error, its panic
/// raised again, or the caller's cancellation.
fn finish<A: Send + 'static, E: Send + 'static>(outcome: Outcome<A, E>) -> IO<A, E> {
    match outcome {
        Outcome::Succeeded(a) => IO::pure(a),
        other => {
            other.embed_untraced(IO::canceled_untraced().product_r_untraced(IO::never_untraced()))
        }
    }
}

/// What the factory slot holds while the factory runs (never called: only
/// one evaluation runs at a time): a canceled program, not a panic.
fn missing_factory<A: Send + 'static, E: Send + 'static>() -> IO<A, E> {
    IO::canceled_untraced().product_r_untraced(IO::never_untraced())
}
