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
//!   Effect's semantics: the first caller evaluates the program on its own
//!   fiber, cancelable as any program it runs; the other callers wait
//!   (cancelably) for that evaluation. If the evaluation is canceled (the
//!   first caller was), the memo goes back to unevaluated and wakes the
//!   waiters; the next caller to look (a waiter, or a later caller) builds
//!   the program again and evaluates it. A success, an error or a panic is
//!   final: every later caller gets a clone of the value or of the error, or
//!   panics with the same message.
//! * [`IO::memoize`] memoizes the program itself, which can run only once.
//!   So that a canceled caller cannot spoil the result for the others, the
//!   first caller starts the evaluation on a fiber of its own, and every
//!   caller, the first included, waits for it cancelably: canceling a
//!   caller never cancels the evaluation (which then completes in the
//!   background, and its result serves the next caller). A program that
//!   cancels itself leaves a canceled result: every caller observes it as
//!   its own cancellation.
//!
//! # Protocol
//!
//! The state is a short lock of the sync shim: `Unevaluated`,
//! `Evaluating(latch)` or `Done(outcome)`. A caller decides, in one masked
//! step under the lock, what it does: take a clone of a `Done` outcome; wait
//! for the latch of an `Evaluating` one (unmasked, then look again); or move
//! `Unevaluated` to `Evaluating` and become the evaluator. The evaluator of
//! `memoize_with` installs the finalizer that records the outcome (or goes
//! back to `Unevaluated` on cancellation) and completes the latch, in the
//! same masked region, before it polls the program: no cancellation can
//! leave the state `Evaluating` with nobody evaluating. `memoize` spawns its
//! evaluation in the deciding step itself (spawning never runs a fiber
//! inline, so doing it under the lock cannot re-enter it), with a
//! completion callback that records the outcome and completes the latch.
//!
//! Design credit: Cats Effect's `GenConcurrent.memoize` (the states and
//! the re-evaluation after a canceled evaluation). No code is copied.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use crate::engine::erased::ErasedFn;
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::CompleteK;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::deferred::Deferred;
use crate::sync::{Arc, Mutex};

static MEMOIZE: Op = Op::new("memoize");
static MEMOIZE_WITH: Op = Op::new("memoize_with");
static MEMOIZED_GET: Op = Op::new("Memoized::get");

enum State<A, E> {
    Unevaluated,
    /// Completed when the evaluation ends (with a result, or canceled).
    Evaluating(Deferred<()>),
    Done(Outcome<A, E>),
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
}

/// What a caller does after deciding.
enum Step<A, E> {
    /// Take this outcome.
    Finished(Outcome<A, E>),
    /// Wait for the evaluation to end, then look again.
    Wait(Deferred<()>),
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
        let state = match self.memo.lock().state {
            State::Unevaluated => "unevaluated",
            State::Evaluating(_) => "evaluating",
            State::Done(_) => "done",
        };
        f.debug_struct("Memoized").field("state", &state).finish()
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

    /// Memoizes the program that `make` builds, with Cats Effect's
    /// semantics: the first caller of [`get`](Memoized::get) evaluates it on
    /// its own fiber, the others wait for that evaluation and share its
    /// value or error; if the evaluation is canceled, the next caller calls
    /// `make` again and evaluates the new program. `make` runs once per
    /// evaluation, so at most once unless an evaluation was canceled.
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
            let again = memo.clone();
            let decided = if once {
                IO::with_spawner(move |spawner| memo.decide_once(spawner))
            } else {
                memo.decide_with()
            };
            decided.flat_map_untraced(move |step| match step {
                Step::Finished(outcome) => finish(outcome),
                Step::Wait(latch) => latch
                    .get_untraced()
                    .flat_map_untraced(move |()| again.get_untraced()),
            })
        })
    }

    /// `memoize`: decides in one step (the spawner's), starting the
    /// evaluation on its own fiber if nobody has.
    fn decide_once(&self, spawner: crate::fiber::Spawner) -> Step<A, E> {
        let mut memo = self.memo.lock();
        match &memo.state {
            State::Done(outcome) => return Step::Finished(outcome.clone()),
            State::Evaluating(latch) => return Step::Wait(latch.clone()),
            State::Unevaluated => {}
        }
        let program = match &mut memo.source {
            Source::Once(program) => program.take(),
            Source::Make(make) => Some(make()),
        };
        let Some(program) = program else {
            // Unevaluated with the program gone cannot happen (`memoize`
            // never goes back to unevaluated); the honest answer would be
            // a canceled result.
            memo.state = State::Done(Outcome::Canceled);
            return Step::Finished(Outcome::Canceled);
        };
        let latch = Deferred::new();
        memo.state = State::Evaluating(latch.clone());
        let recorder = self.clone();
        let on_complete =
            move |outcome: Outcome<A, E>,
                  _: Vec<E>,
                  _: crate::engine::tracing::Trace,
                  _: ChildTraces| { recorder.record(outcome, true) };
        // Under the lock: spawning never runs the child inline, and its
        // completion waits for the lock (module doc).
        let _ = spawner.spawn(
            program.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
        );
        Step::Wait(latch)
    }

    /// `memoize_with`: decides masked; the evaluator runs the program on
    /// the caller's fiber, polled, with the finalizer that records its
    /// outcome installed first.
    fn decide_with(&self) -> IO<Step<A, E>, E> {
        let memo = self.clone();
        IO::uncancelable_untraced(move |poll| {
            IO::defer_untraced(move || {
                let program = {
                    let mut state = memo.memo.lock();
                    match &state.state {
                        State::Done(outcome) => return IO::pure(Step::Finished(outcome.clone())),
                        State::Evaluating(latch) => return IO::pure(Step::Wait(latch.clone())),
                        State::Unevaluated => {}
                    }
                    // The waiters' latch; `record` completes it.
                    state.state = State::Evaluating(Deferred::new());
                    // `make` is called when the evaluation runs, outside
                    // the lock (it is user code).
                    let memo = memo.clone();
                    IO::defer_untraced(move || memo.make())
                };
                let recorder = memo.clone();
                poll.apply_untraced(program)
                    .guarantee_case_untraced(move |outcome| {
                        let outcome = clone_outcome(outcome);
                        IO::delay_untraced(move || recorder.record(outcome, false))
                    })
                    .map_untraced(|a| Step::Finished(Outcome::Succeeded(a)))
            })
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

    /// Ends the evaluation with `outcome`: a cancellation of a
    /// `memoize_with` evaluation goes back to unevaluated (unless `final_`),
    /// anything else is the result; wakes the waiters.
    fn record(&self, outcome: Outcome<A, E>, final_: bool) {
        let (latch, dropped) = {
            let mut memo = self.memo.lock();
            let next = if outcome.is_canceled() && !final_ {
                State::Unevaluated
            } else {
                State::Done(outcome)
            };
            match core::mem::replace(&mut memo.state, next) {
                State::Evaluating(latch) => (Some(latch), None),
                other => (None, Some(other)),
            }
        };
        drop(dropped);
        if let Some(latch) = latch {
            let _ = latch.complete_now(());
        }
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

/// A clone of an outcome seen by reference (a finalizer's view).
fn clone_outcome<A: Clone, E: Clone>(outcome: &Outcome<A, E>) -> Outcome<A, E> {
    outcome.clone()
}

/// What the factory slot holds while the factory runs (never called: only
/// one evaluation runs at a time): a canceled program, not a panic.
fn missing_factory<A: Send + 'static, E: Send + 'static>() -> IO<A, E> {
    IO::canceled_untraced().product_r_untraced(IO::never_untraced())
}
