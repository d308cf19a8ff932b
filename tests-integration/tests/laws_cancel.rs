//! MonadCancel, spawn and race laws on random programs, run on virtual time
//! (`spindle_exec_single::testkit::TestControl`), as Cats Effect checks them.
//!
//! Programs come from a small AST ([`Prog`]) with sleeps, cedes, async
//! completions (during registration, or later by a sibling fiber),
//! errors, self-cancellation, `on_cancel`, `guarantee`, `guarantee_case`,
//! `bracket`, nested `uncancelable` regions and polls of any enclosing
//! region. Every finalizer writes to a log, so a run is compared on three
//! things: the outcome (or a deadlock), the ordered log of effects, and the
//! virtual time at which the main fiber ended.
//!
//! Besides the laws (both sides of each law give the same run), a reference
//! model ([`Model`]) gives the run that Cats Effect's semantics prescribe:
//! masks counted per region, a cancellation request made in a region
//! observed at depth 0 where the next program starts (not while a result
//! travels through `map`, `attempt` and skipped handlers to an enclosing
//! mask or to the end of the fiber, as in Cats Effect 3.5+), a poll
//! unmasking only its own region, finalizers run
//! masked, a finalizer's error replacing a success and suppressed otherwise.
//!
//! IO blocks are part of the AST ([`Prog::Block`], [`Prog::BlockBind`],
//! [`Prog::BlockHandle`]), with the semantics of the programs they stand
//! for in the model (an awaited program, `flat_map`, `handle_error_with`);
//! and every law over generated programs runs half its cases on the
//! program written with blocks everywhere ([`in_blocks`], through
//! [`prog_or_blocks`]): the cancellation laws hold with a block in place of
//! a program. The laws at the end compare blocks with what they stand for,
//! run for run (outcome, log and virtual time).
//!
//! Each property runs [`CASES`] generated cases; nothing is written to disk.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use spindle_core::{Callback, Either, IO, Outcome, Poll, UIO};
use spindle_exec_single::testkit::TestControl;

const CASES: u32 = 192;

// ---------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------

/// A random program of type `IO<i64, u8>`.
#[derive(Clone, Debug)]
enum Prog {
    Pure(i64),
    Raise(u8),
    /// Logs `log{n}` and produces `n`.
    Log(u8),
    /// `IO::from_callback` completed during its registration.
    AsyncNow(Result<i64, u8>),
    /// `IO::from_callback` completed after `ms` virtual milliseconds by a sibling
    /// fiber started just before; its cancel finalizer logs `async-fin`.
    AsyncLater(u8, Result<i64, u8>),
    /// `IO::canceled()`, producing 0 where it is masked.
    Canceled,
    /// `IO::sleep(ms)` then the program.
    Sleep(u8, Box<Prog>),
    /// `IO::cede()` then the program.
    Cede(Box<Prog>),
    /// `map(|x| x + k)`.
    Map(Box<Prog>, i64),
    /// `flat_map(|x| q.map(|y| x + y))`.
    FlatMap(Box<Prog>, Box<Prog>),
    /// `handle_error_with(|e| q.map(|y| y + e))`.
    HandleErrorWith(Box<Prog>, Box<Prog>),
    /// `attempt()`, encoded back into an `i64`.
    Attempt(Box<Prog>),
    /// `on_cancel(log "on_cancel" *> fin)`.
    OnCancel(Box<Prog>, Box<Prog>),
    /// `guarantee(log "guarantee" *> fin)`.
    Guarantee(Box<Prog>, Box<Prog>),
    /// `guarantee_case(|oc| log "case:{oc}" *> fin)`.
    GuaranteeCase(Box<Prog>, Box<Prog>),
    /// `uncancelable(|poll| body)`: the body may use `poll` (and those of
    /// enclosing regions) through [`Prog::Poll`].
    Uncancelable(Box<Prog>),
    /// The poll of the `n`-th enclosing region (0: the innermost) applied
    /// to the program; the program alone where there is no such region.
    Poll(u8, Box<Prog>),
    /// `bracket_case(acquire, |r| use.map(|y| r + y), |r, oc| log
    /// "release{r}:{oc}" *> release)`.
    Bracket(Box<Prog>, Box<Prog>, Box<Prog>),
    /// `IO::block(async move { p.await })`.
    Block(Box<Prog>),
    /// `IO::block(async move { let x = p.await?; let y = q.await?; Ok(x +
    /// y) })`: `FlatMap` as a block.
    BlockBind(Box<Prog>, Box<Prog>),
    /// `IO::block(async move { match p.await { Ok(x) => Ok(x), Err(e) =>
    /// Ok(q.await? + e) } })`: `HandleErrorWith` as a block.
    BlockHandle(Box<Prog>, Box<Prog>),
}

fn encode(r: Result<i64, u8>) -> i64 {
    match r {
        Ok(a) => a,
        Err(e) => -1000 - i64::from(e),
    }
}

fn show<A: std::fmt::Display>(outcome: &Outcome<A, u8>) -> String {
    match outcome {
        Outcome::Succeeded(a) => format!("S({a})"),
        Outcome::Errored(e) => format!("E({e})"),
        Outcome::Canceled => "C".to_string(),
        Outcome::Panicked(p) => format!("P({})", p.message()),
    }
}

/// Replaces every self-cancel by `Pure(0)`.
fn without_cancel(p: Prog) -> Prog {
    let b = |p: Box<Prog>| Box::new(without_cancel(*p));
    match p {
        Prog::Canceled => Prog::Pure(0),
        leaf @ (Prog::Pure(_)
        | Prog::Raise(_)
        | Prog::Log(_)
        | Prog::AsyncNow(_)
        | Prog::AsyncLater(..)) => leaf,
        Prog::Sleep(ms, p) => Prog::Sleep(ms, b(p)),
        Prog::Cede(p) => Prog::Cede(b(p)),
        Prog::Map(p, k) => Prog::Map(b(p), k),
        Prog::FlatMap(p, q) => Prog::FlatMap(b(p), b(q)),
        Prog::HandleErrorWith(p, q) => Prog::HandleErrorWith(b(p), b(q)),
        Prog::Attempt(p) => Prog::Attempt(b(p)),
        Prog::OnCancel(p, q) => Prog::OnCancel(b(p), b(q)),
        Prog::Guarantee(p, q) => Prog::Guarantee(b(p), b(q)),
        Prog::GuaranteeCase(p, q) => Prog::GuaranteeCase(b(p), b(q)),
        Prog::Uncancelable(p) => Prog::Uncancelable(b(p)),
        Prog::Poll(n, p) => Prog::Poll(n, b(p)),
        Prog::Bracket(a, u, r) => Prog::Bracket(b(a), b(u), b(r)),
        Prog::Block(p) => Prog::Block(b(p)),
        Prog::BlockBind(p, q) => Prog::BlockBind(b(p), b(q)),
        Prog::BlockHandle(p, q) => Prog::BlockHandle(b(p), b(q)),
    }
}

/// `p` written with IO blocks everywhere: every `flat_map` and
/// `handle_error_with` as a block, every other node wrapped in a block that
/// awaits it.
fn in_blocks(p: Prog) -> Prog {
    let b = |p: Box<Prog>| Box::new(in_blocks(*p));
    let inner = match p {
        leaf @ (Prog::Pure(_)
        | Prog::Raise(_)
        | Prog::Log(_)
        | Prog::AsyncNow(_)
        | Prog::AsyncLater(..)
        | Prog::Canceled) => leaf,
        Prog::FlatMap(p, q) | Prog::BlockBind(p, q) => return Prog::BlockBind(b(p), b(q)),
        Prog::HandleErrorWith(p, q) | Prog::BlockHandle(p, q) => {
            return Prog::BlockHandle(b(p), b(q));
        }
        Prog::Block(p) => return Prog::Block(b(p)),
        Prog::Sleep(ms, p) => Prog::Sleep(ms, b(p)),
        Prog::Cede(p) => Prog::Cede(b(p)),
        Prog::Map(p, k) => Prog::Map(b(p), k),
        Prog::Attempt(p) => Prog::Attempt(b(p)),
        Prog::OnCancel(p, q) => Prog::OnCancel(b(p), b(q)),
        Prog::Guarantee(p, q) => Prog::Guarantee(b(p), b(q)),
        Prog::GuaranteeCase(p, q) => Prog::GuaranteeCase(b(p), b(q)),
        Prog::Uncancelable(p) => Prog::Uncancelable(b(p)),
        Prog::Poll(n, p) => Prog::Poll(n, b(p)),
        Prog::Bracket(a, u, r) => Prog::Bracket(b(a), b(u), b(r)),
    };
    Prog::Block(Box::new(inner))
}

// ---------------------------------------------------------------------------
// The interpretation into IO
// ---------------------------------------------------------------------------

/// The effects of one run, in order.
type Log = Arc<Mutex<Vec<String>>>;

fn log_io(log: &Log, entry: String) -> IO<(), u8> {
    let log = log.clone();
    IO::delay(move || log.lock().unwrap().push(entry))
}

fn ms(n: u8) -> Duration {
    Duration::from_millis(u64::from(n))
}

/// Builds `p`; `polls` are the polls of the enclosing regions, innermost
/// last.
fn build(p: Prog, log: &Log, polls: &[Poll]) -> IO<i64, u8> {
    match p {
        Prog::Pure(a) => IO::pure(a),
        Prog::Raise(e) => IO::raise_error(e),
        Prog::Log(n) => log_io(log, format!("log{n}")).map_to(i64::from(n)),
        Prog::AsyncNow(r) => IO::from_callback(move |cb| {
            cb.complete(r);
            None
        }),
        Prog::AsyncLater(n, r) => {
            let slot: Arc<Mutex<Option<Callback<i64, u8>>>> = Arc::default();
            let taken = slot.clone();
            let completer = UIO::sleep(ms(n)).product_r(IO::delay(move || {
                if let Some(cb) = taken.lock().unwrap().take() {
                    cb.complete(r);
                }
            }));
            let fin = log_io(log, "async-fin".to_string());
            completer.start().flat_map(move |_sibling| {
                IO::from_callback(move |cb| {
                    *slot.lock().unwrap() = Some(cb);
                    Some(fin)
                })
            })
        }
        Prog::Canceled => IO::canceled().map_to(0),
        Prog::Sleep(n, p) => IO::sleep(ms(n)).product_r(build(*p, log, polls)),
        Prog::Cede(p) => IO::cede().product_r(build(*p, log, polls)),
        Prog::Map(p, k) => build(*p, log, polls).map(move |x| x.wrapping_add(k)),
        Prog::FlatMap(p, q) => {
            let (log2, polls2) = (log.clone(), polls.to_vec());
            build(*p, log, polls)
                .flat_map(move |x| build(*q, &log2, &polls2).map(move |y| x.wrapping_add(y)))
        }
        Prog::HandleErrorWith(p, q) => {
            let (log2, polls2) = (log.clone(), polls.to_vec());
            build(*p, log, polls).handle_error_with(move |e| {
                build(*q, &log2, &polls2).map(move |y| y.wrapping_add(i64::from(e)))
            })
        }
        Prog::Attempt(p) => build(*p, log, polls).attempt().map(encode),
        Prog::OnCancel(p, f) => {
            let fin = log_io(log, "on_cancel".to_string()).product_r(build(*f, log, polls).void());
            build(*p, log, polls).on_cancel(fin)
        }
        Prog::Guarantee(p, f) => {
            let fin = log_io(log, "guarantee".to_string()).product_r(build(*f, log, polls).void());
            build(*p, log, polls).guarantee(fin)
        }
        Prog::GuaranteeCase(p, f) => {
            let (log2, polls2) = (log.clone(), polls.to_vec());
            build(*p, log, polls).guarantee_case(move |oc| {
                log_io(&log2, format!("case:{}", show(&oc)))
                    .product_r(build(*f, &log2, &polls2).void())
            })
        }
        Prog::Uncancelable(body) => {
            let (log, polls) = (log.clone(), polls.to_vec());
            IO::uncancelable(move |poll| {
                let mut polls = polls;
                polls.push(poll);
                build(*body, &log, &polls)
            })
        }
        Prog::Poll(n, p) => match polls.len().checked_sub(1 + usize::from(n)) {
            Some(i) => polls[i].apply(build(*p, log, polls)),
            None => build(*p, log, polls),
        },
        Prog::Bracket(a, u, r) => {
            let (log_u, polls_u) = (log.clone(), polls.to_vec());
            let (log_r, polls_r) = (log.clone(), polls.to_vec());
            IO::bracket_case(
                build(*a, log, polls),
                move |x: i64| build(*u, &log_u, &polls_u).map(move |y| x.wrapping_add(y)),
                move |x, oc| {
                    log_io(&log_r, format!("release{x}:{}", show(&oc)))
                        .product_r(build(*r, &log_r, &polls_r).void())
                },
            )
        }
        Prog::Block(p) => {
            let fa = build(*p, log, polls);
            IO::block(async move { fa.await })
        }
        Prog::BlockBind(p, q) => {
            let fa = build(*p, log, polls);
            let (log, polls) = (log.clone(), polls.to_vec());
            IO::block(async move {
                let x = fa.await?;
                let y = build(*q, &log, &polls).await?;
                Ok(x.wrapping_add(y))
            })
        }
        Prog::BlockHandle(p, q) => {
            let fa = build(*p, log, polls);
            let (log, polls) = (log.clone(), polls.to_vec());
            IO::block(async move {
                match fa.await {
                    Ok(x) => Ok(x),
                    Err(e) => Ok(build(*q, &log, &polls).await?.wrapping_add(i64::from(e))),
                }
            })
        }
    }
}

/// What one run shows: the outcome (`None`: it can never complete), the
/// log, and the virtual time when the main fiber ended.
#[derive(Debug, PartialEq)]
struct Run<A> {
    outcome: Option<Outcome<A, u8>>,
    log: Vec<String>,
    millis: u128,
}

/// Runs the program `make` builds (with a fresh log) on virtual time.
fn run<A: Send + 'static>(make: impl FnOnce(&Log) -> IO<A, u8>) -> Run<A> {
    let log = Log::default();
    let mut control = TestControl::execute(make(&log));
    control.tick_all();
    let outcome = control.take_results();
    if outcome.is_none() {
        assert!(
            control.is_deadlocked(),
            "tick_all returned without an outcome, yet the program can go on"
        );
    }
    let millis = control.now().as_millis();
    drop(control);
    let log = std::mem::take(&mut *log.lock().unwrap());
    Run {
        outcome,
        log,
        millis,
    }
}

/// Runs a program of the AST.
fn run_prog(p: Prog) -> Run<i64> {
    run(|log| build(p, log, &[]))
}

// ---------------------------------------------------------------------------
// The reference model (Cats Effect's semantics)
// ---------------------------------------------------------------------------

/// What a program ends with in the model.
#[derive(Clone, Copy, Debug, PartialEq)]
enum R {
    Ok(i64),
    Err(u8),
    Canceled,
}

impl R {
    fn from_result(r: Result<i64, u8>) -> R {
        match r {
            Ok(a) => R::Ok(a),
            Err(e) => R::Err(e),
        }
    }

    fn show(self) -> String {
        match self {
            R::Ok(a) => format!("S({a})"),
            R::Err(e) => format!("E({e})"),
            R::Canceled => "C".to_string(),
        }
    }

    fn outcome(self) -> Outcome<i64, u8> {
        match self {
            R::Ok(a) => Outcome::Succeeded(a),
            R::Err(e) => Outcome::Errored(e),
            R::Canceled => Outcome::Canceled,
        }
    }
}

/// A fiber of the model: no external canceler, so cancellation comes only
/// from `Canceled`.
#[derive(Default)]
struct Model {
    log: Vec<String>,
    millis: u128,
    /// Cancellation was requested.
    requested: bool,
    /// Depth of the uncancelable regions (finalizers included) around the
    /// current node.
    masks: u32,
    /// The fiber observed the request and is finalizing: polls no longer
    /// unmask, and nothing but finalizers runs.
    ending: bool,
}

impl Model {
    fn run(p: &Prog) -> Run<i64> {
        let mut model = Model::default();
        let r = model.eval(p, &mut Vec::new());
        Run {
            outcome: Some(r.outcome()),
            log: model.log,
            millis: model.millis,
        }
    }

    /// A cancellation point: true if the fiber starts finalizing here.
    fn observe(&mut self) -> bool {
        if self.masks == 0 && self.requested && !self.ending {
            self.ending = true;
        }
        self.masks == 0 && self.ending
    }

    /// The end of an uncancelable region (finalizers included). A request
    /// made inside is not observed here: the result goes on, and the next
    /// program that starts unmasked observes it ([`Model::next_program`]).
    fn end_region(&mut self, r: R) -> R {
        self.masks -= 1;
        r
    }

    /// A continuation is about to start a new program (`flat_map`,
    /// `handle_error_with`): a cancellation point.
    fn next_program(&mut self) -> bool {
        self.observe()
    }

    /// Runs a finalizer program masked; `r` is the outcome it finalizes.
    fn finalize(&mut self, r: R, entry: String, fin: &Prog, polls: &mut Vec<u32>) -> R {
        self.masks += 1;
        self.log.push(entry);
        let fr = self.eval(fin, polls);
        match (r, fr) {
            // Finalizing a cancellation: the finalizer's result is dropped.
            (R::Canceled, _) => {
                self.masks -= 1;
                R::Canceled
            }
            // A poll let the finalizer itself be canceled.
            (_, R::Canceled) => {
                self.masks -= 1;
                R::Canceled
            }
            (R::Ok(_), R::Err(e)) => self.end_region(R::Err(e)),
            (r, _) => self.end_region(r),
        }
    }

    fn eval(&mut self, p: &Prog, polls: &mut Vec<u32>) -> R {
        match p {
            Prog::Pure(a) => R::Ok(*a),
            Prog::Raise(e) => R::Err(*e),
            Prog::Log(n) => {
                self.log.push(format!("log{n}"));
                R::Ok(i64::from(*n))
            }
            Prog::AsyncNow(r) => {
                if self.observe() {
                    return R::Canceled;
                }
                R::from_result(*r)
            }
            Prog::AsyncLater(n, r) => {
                if self.observe() {
                    return R::Canceled;
                }
                self.millis += u128::from(*n);
                R::from_result(*r)
            }
            Prog::Canceled => {
                self.requested = true;
                if self.observe() {
                    R::Canceled
                } else {
                    R::Ok(0)
                }
            }
            Prog::Sleep(n, p) => {
                if self.observe() {
                    return R::Canceled;
                }
                self.millis += u128::from(*n);
                self.eval(p, polls)
            }
            Prog::Cede(p) => {
                if self.observe() {
                    return R::Canceled;
                }
                self.eval(p, polls)
            }
            Prog::Map(p, k) => match self.eval(p, polls) {
                R::Ok(x) => R::Ok(x.wrapping_add(*k)),
                r => r,
            },
            Prog::Block(p) => self.eval(p, polls),
            Prog::FlatMap(p, q) | Prog::BlockBind(p, q) => match self.eval(p, polls) {
                R::Ok(_) if self.next_program() => R::Canceled,
                R::Ok(x) => match self.eval(q, polls) {
                    R::Ok(y) => R::Ok(x.wrapping_add(y)),
                    r => r,
                },
                r => r,
            },
            Prog::HandleErrorWith(p, q) | Prog::BlockHandle(p, q) => match self.eval(p, polls) {
                R::Err(_) if self.next_program() => R::Canceled,
                R::Err(e) => match self.eval(q, polls) {
                    R::Ok(y) => R::Ok(y.wrapping_add(i64::from(e))),
                    r => r,
                },
                r => r,
            },
            Prog::Attempt(p) => match self.eval(p, polls) {
                R::Ok(a) => R::Ok(encode(Ok(a))),
                R::Err(e) => R::Ok(encode(Err(e))),
                R::Canceled => R::Canceled,
            },
            Prog::OnCancel(p, f) => match self.eval(p, polls) {
                R::Canceled => self.finalize(R::Canceled, "on_cancel".to_string(), f, polls),
                r => r,
            },
            Prog::Guarantee(p, f) => {
                let r = self.eval(p, polls);
                self.finalize(r, "guarantee".to_string(), f, polls)
            }
            Prog::GuaranteeCase(p, f) => {
                let r = self.eval(p, polls);
                self.finalize(r, format!("case:{}", r.show()), f, polls)
            }
            Prog::Uncancelable(body) => {
                self.masks += 1;
                polls.push(self.masks);
                let r = self.eval(body, polls);
                polls.pop();
                self.end_region(r)
            }
            Prog::Poll(n, p) => {
                let region = polls
                    .len()
                    .checked_sub(1 + usize::from(*n))
                    .map(|i| polls[i]);
                if region == Some(self.masks) && !self.ending {
                    self.masks -= 1;
                    let r = if self.observe() {
                        R::Canceled
                    } else {
                        self.eval(p, polls)
                    };
                    self.masks += 1;
                    r
                } else {
                    self.eval(p, polls)
                }
            }
            Prog::Bracket(a, u, rel) => {
                // uncancelable(|poll| acquire.flat_map(|x| poll(use(x)).guarantee_case(release)))
                self.masks += 1;
                let r = match self.eval(a, polls) {
                    R::Ok(x) => {
                        self.masks -= 1;
                        let used = if self.observe() {
                            R::Canceled
                        } else {
                            match self.eval(u, polls) {
                                R::Ok(y) => R::Ok(x.wrapping_add(y)),
                                r => r,
                            }
                        };
                        self.masks += 1;
                        self.finalize(used, format!("release{x}:{}", used.show()), rel, polls)
                    }
                    r => r,
                };
                self.end_region(r)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

fn small() -> impl Strategy<Value = i64> {
    -50i64..50
}

fn error() -> impl Strategy<Value = u8> {
    0u8..20
}

fn result() -> impl Strategy<Value = Result<i64, u8>> {
    prop_oneof![small().prop_map(Ok), error().prop_map(Err)]
}

/// Any program of the AST.
fn prog() -> impl Strategy<Value = Prog> {
    let leaf = prop_oneof![
        3 => small().prop_map(Prog::Pure),
        2 => error().prop_map(Prog::Raise),
        3 => (0u8..20).prop_map(Prog::Log),
        1 => result().prop_map(Prog::AsyncNow),
        2 => (0u8..5, result()).prop_map(|(n, r)| Prog::AsyncLater(n, r)),
        1 => Just(Prog::Canceled),
    ];
    leaf.prop_recursive(5, 40, 3, |inner| {
        let b = |p: Prog| Box::new(p);
        prop_oneof![
            1 => (0u8..5, inner.clone()).prop_map(move |(n, p)| Prog::Sleep(n, b(p))),
            1 => inner.clone().prop_map(move |p| Prog::Cede(b(p))),
            1 => (inner.clone(), small()).prop_map(move |(p, k)| Prog::Map(b(p), k)),
            1 => (inner.clone(), inner.clone()).prop_map(move |(p, q)| Prog::FlatMap(b(p), b(q))),
            1 => (inner.clone(), inner.clone())
                .prop_map(move |(p, q)| Prog::HandleErrorWith(b(p), b(q))),
            1 => inner.clone().prop_map(move |p| Prog::Attempt(b(p))),
            1 => (inner.clone(), inner.clone()).prop_map(move |(p, f)| Prog::OnCancel(b(p), b(f))),
            1 => (inner.clone(), inner.clone()).prop_map(move |(p, f)| Prog::Guarantee(b(p), b(f))),
            1 => (inner.clone(), inner.clone())
                .prop_map(move |(p, f)| Prog::GuaranteeCase(b(p), b(f))),
            2 => inner.clone().prop_map(move |p| Prog::Uncancelable(b(p))),
            2 => (0u8..3, inner.clone()).prop_map(move |(n, p)| Prog::Poll(n, b(p))),
            1 => (inner.clone(), inner.clone(), inner.clone())
                .prop_map(move |(a, u, r)| Prog::Bracket(b(a), b(u), b(r))),
            1 => inner.clone().prop_map(move |p| Prog::Block(b(p))),
            1 => (inner.clone(), inner.clone()).prop_map(move |(p, q)| Prog::BlockBind(b(p), b(q))),
            1 => (inner.clone(), inner).prop_map(move |(p, q)| Prog::BlockHandle(b(p), b(q))),
        ]
    })
}

/// Any program of the AST, half of the time written with blocks
/// everywhere ([`in_blocks`]): the laws' programs.
fn prog_or_blocks() -> impl Strategy<Value = Prog> {
    prop_oneof![prog(), prog().prop_map(in_blocks)]
}

/// Programs that never cancel themselves (half of the time written with
/// blocks everywhere).
fn prog_without_cancel() -> impl Strategy<Value = Prog> {
    prog_or_blocks().prop_map(without_cancel)
}

/// Checks `test` on [`CASES`] generated cases; panics with the shrunk
/// counterexample on failure. Nothing is written to disk.
fn check<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// `fa <* fb` that ignores `fa`'s error: Cats Effect's `forceR`
/// (`fa.attempt *> fb`).
fn force_r<A: Send + 'static, B: Send + 'static>(fa: IO<A, u8>, fb: IO<B, u8>) -> IO<B, u8> {
    fa.attempt().product_r(fb)
}

// ---------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------

#[test]
fn programs_agree_with_the_reference_model() {
    check(prog(), |p| {
        prop_assert_eq!(run_prog(p.clone()), Model::run(&p));
        Ok(())
    });
}

#[test]
fn a_self_cancel_inside_a_guarantee_finalizer_is_observed_where_the_next_program_starts() {
    // Cats Effect 3.5+: `IO.pure(1).guarantee(IO.canceled) <* after` is
    // canceled before `after` starts: the finalizer runs masked, and the
    // request is observed where the next program starts.
    let after_success = run(|log| {
        let after = log_io(log, "after".to_string());
        IO::pure(1i64).guarantee(IO::canceled()).product_l(after)
    });
    assert_eq!(after_success.outcome, Some(Outcome::Canceled));
    assert!(after_success.log.is_empty(), "{:?}", after_success.log);

    let after_error = run(|log| {
        let handler = log_io(log, "handler".to_string());
        IO::<i64, u8>::raise_error(3)
            .guarantee(IO::canceled())
            .handle_error_with(move |_| handler.map_to(0))
    });
    assert_eq!(after_error.outcome, Some(Outcome::Canceled));
    assert!(after_error.log.is_empty(), "{:?}", after_error.log);

    // With nothing left to start, the fiber ends with its result (the
    // guarantee's program is complete; no effect was skipped).
    let at_the_end = run(|_| IO::<i64, u8>::raise_error(3).guarantee(IO::canceled()));
    assert_eq!(at_the_end.outcome, Some(Outcome::Errored(3)));
}

#[test]
fn a_self_cancel_in_a_guarantee_finalizer_of_an_error_that_attempt_catches_is_observed_at_the_next_program()
 {
    // `attempt` turns the error into a value without starting a program, so
    // (as in Cats Effect) a handler after it is skipped and the value reaches
    // the end of the fiber...
    let at_the_end = run(|_| {
        IO::<i64, u8>::raise_error(3)
            .guarantee(IO::canceled())
            .attempt()
            .map(|r| r.unwrap_or(-1))
            .handle_error_with(|_| IO::pure(-2))
    });
    assert_eq!(at_the_end.outcome, Some(Outcome::Succeeded(-1)));
    // ...and a bind after it starts the next program: there the request is
    // observed, and the bind does not run.
    let before_a_bind = run(|log| {
        let after = log_io(log, "after".to_string());
        IO::<i64, u8>::raise_error(3)
            .guarantee(IO::canceled())
            .attempt()
            .flat_map(move |_| after.map_to(0))
    });
    assert_eq!(before_a_bind.outcome, Some(Outcome::Canceled));
    assert!(before_a_bind.log.is_empty(), "{:?}", before_a_bind.log);
    // `redeem` is a fold too.
    let redeemed = run(|_| {
        IO::<i64, u8>::raise_error(3)
            .guarantee(IO::canceled())
            .redeem(i64::from, |v| v)
            .handle_error_with(|_| IO::pure(-2))
    });
    assert_eq!(redeemed.outcome, Some(Outcome::Succeeded(3)));
}

#[test]
fn an_on_cancel_the_result_has_passed_does_not_run_when_a_self_cancel_is_observed_after_it() {
    // `fa.on_cancel(fin)` is over once `fa` has a result; a cancellation that
    // `fa`'s own masked finalizer requested is observed at the next program
    // (the bind), after the result passed the `on_cancel`: `fin` does not run.
    for release_cancels in [false, true] {
        let ran = run(|log| {
            let fin = log_io(log, "on_cancel".to_string());
            let after = log_io(log, "after".to_string());
            let fa: IO<i64, u8> = if release_cancels {
                IO::bracket(IO::pure(1), |_| IO::pure(2), |_| IO::canceled())
            } else {
                IO::pure(1).guarantee(IO::canceled())
            };
            fa.attempt()
                .on_cancel(fin)
                .flat_map(move |_| after.map_to(0i64))
        });
        assert_eq!(
            ran.outcome,
            Some(Outcome::Canceled),
            "release_cancels: {release_cancels}"
        );
        assert!(
            ran.log.is_empty(),
            "release_cancels: {release_cancels}: {:?}",
            ran.log
        );
    }
}

#[test]
fn a_cancel_requested_while_a_guarantee_finalizer_runs_is_observed_when_it_ends() {
    // The canceler asks at 5 ms, while the finalizer sleeps (masked) from 0
    // to 10 ms; nothing after the guarantee may run.
    let ran = run(|log| {
        let after = log_io(log, "after".to_string());
        let target = IO::unit().guarantee(IO::sleep(ms(10))).product_r(after);
        target.start().flat_map(|fiber| {
            IO::sleep(ms(5))
                .product_r(fiber.cancel())
                .product_r(fiber.join())
        })
    });
    assert_eq!(ran.outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
    assert!(ran.log.is_empty(), "{:?}", ran.log);
}

#[test]
fn a_self_cancel_inside_an_uncancelable_region_is_observed_before_the_next_program() {
    let ran = run(|log| {
        let inside = log_io(log, "inside".to_string());
        let after = log_io(log, "after".to_string());
        IO::uncancelable(move |_| IO::canceled().product_r(inside))
            .product_r(after)
            .map_to(1i64)
    });
    assert_eq!(ran.outcome, Some(Outcome::Canceled));
    assert_eq!(ran.log, ["inside"]);
}

// ---------------------------------------------------------------------------
// MonadCancel laws
// ---------------------------------------------------------------------------

#[test]
fn guarantee_is_guarantee_case_ignoring_the_outcome() {
    check((prog_or_blocks(), prog_or_blocks()), |(fa, fin)| {
        let (fa2, fin2) = (fa.clone(), fin.clone());
        let lhs = run(|log| build(fa, log, &[]).guarantee(build(fin, log, &[]).void()));
        let rhs = run(|log| {
            let log2 = log.clone();
            build(fa2, log, &[]).guarantee_case(move |_| build(fin2, &log2, &[]).void())
        });
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

/// Cats Effect's derivation of `guaranteeCase` from the primitives:
/// `uncancelable(poll => poll(fa).onCancel(fin(Canceled))
/// .onError(e => fin(Errored(e)).attempt.void).flatTap(a => fin(Succeeded(a))))`.
fn derived_guarantee_case(fa: Prog, fin: Prog, log: &Log) -> IO<i64, u8> {
    let fin_io = {
        let log = log.clone();
        move |oc: Outcome<i64, u8>| {
            log_io(&log, format!("case:{}", show(&oc)))
                .product_r(build(fin.clone(), &log, &[]).void())
        }
    };
    let fa = build(fa, log, &[]);
    IO::uncancelable(move |poll| {
        let (on_cancel, on_error, on_success) = (fin_io.clone(), fin_io.clone(), fin_io);
        poll.apply(fa)
            .on_cancel(on_cancel(Outcome::Canceled))
            .handle_error_with(move |e| {
                on_error(Outcome::Errored(e))
                    .attempt()
                    .product_r(IO::raise_error(e))
            })
            .flat_tap(move |a| on_success(Outcome::Succeeded(*a)))
    })
}

#[test]
fn guarantee_case_agrees_with_its_derivation_from_uncancelable_and_on_cancel() {
    check((prog_or_blocks(), prog_or_blocks()), |(fa, fin)| {
        let (fa2, fin2) = (fa.clone(), fin.clone());
        let lhs = run(|log| {
            let log2 = log.clone();
            build(fa, log, &[]).guarantee_case(move |oc| {
                log_io(&log2, format!("case:{}", show(&oc)))
                    .product_r(build(fin, &log2, &[]).void())
            })
        });
        let rhs = run(|log| derived_guarantee_case(fa2, fin2, log));
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

#[test]
fn uncancelable_with_its_poll_applied_is_identity() {
    check(prog_or_blocks(), |fa| {
        let lhs = run(|log| {
            let (log, fa) = (log.clone(), fa.clone());
            IO::uncancelable(move |poll| poll.apply(build(fa, &log, &[])))
        });
        prop_assert_eq!(lhs, run_prog(fa));
        Ok(())
    });
}

#[test]
fn uncancelable_is_identity_for_programs_that_do_not_cancel() {
    check(prog_without_cancel(), |fa| {
        let lhs = run(|log| {
            let log = log.clone();
            let fa = fa.clone();
            IO::uncancelable(move |_| build(fa, &log, &[]))
        });
        prop_assert_eq!(lhs, run_prog(fa));
        Ok(())
    });
}

#[test]
fn uncancelable_eliminates_on_cancel() {
    check((prog_or_blocks(), prog_or_blocks()), |(fa, fin)| {
        let fa2 = fa.clone();
        let lhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |_| {
                build(fa, &log, &[]).on_cancel(
                    log_io(&log, "fin".to_string()).product_r(build(fin, &log, &[]).void()),
                )
            })
        });
        let rhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |_| build(fa2, &log, &[]))
        });
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

#[test]
fn an_ignored_outer_poll_eliminates_nested_uncancelable() {
    check(prog_or_blocks(), |fa| {
        let fa2 = fa.clone();
        let lhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |_| {
                IO::uncancelable(move |inner| inner.apply(build(fa, &log, &[])))
            })
        });
        let rhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |_| build(fa2, &log, &[]))
        });
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

#[test]
fn an_outer_poll_around_an_inner_poll_stays_uncancelable() {
    check(prog_or_blocks(), |fa| {
        let fa2 = fa.clone();
        let lhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |outer| {
                IO::uncancelable(move |inner| outer.apply(inner.apply(build(fa, &log, &[]))))
            })
        });
        let rhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |_| build(fa2, &log, &[]))
        });
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

#[test]
fn on_cancel_associates_over_the_uncancelable_boundary() {
    // Outcomes only: on the right, the finalizer runs when the region's
    // end observes a self-cancel of `fa`; on the left it never runs.
    check((prog_or_blocks(), prog_or_blocks()), |(fa, fin)| {
        let (fa2, fin2) = (fa.clone(), fin.clone());
        let lhs = run(|log| {
            let log = log.clone();
            IO::uncancelable(move |_| build(fa, &log, &[]).on_cancel(build(fin, &log, &[]).void()))
        });
        let rhs = run(|log| {
            let log2 = log.clone();
            IO::uncancelable(move |_| build(fa2, &log2, &[]))
                .on_cancel(build(fin2, log, &[]).void())
        });
        prop_assert_eq!(lhs.outcome, rhs.outcome);
        Ok(())
    });
}

#[test]
fn canceled_runs_on_cancel_finalizers_innermost_first() {
    let ran = run(|log| {
        IO::canceled()
            .map_to(0i64)
            .on_cancel(log_io(log, "f1".to_string()))
            .on_cancel(log_io(log, "f2".to_string()))
    });
    assert_eq!(ran.outcome, Some(Outcome::Canceled));
    assert_eq!(ran.log, ["f1", "f2"]);
}

#[test]
fn canceled_sequences_on_cancel_finalizers_in_order() {
    // canceled.onCancel(fin1).onCancel(fin2)
    //   <-> uncancelable(_ => fin1 forceR fin2) forceR canceled
    check((prog_or_blocks(), prog_or_blocks()), |(f1, f2)| {
        let (g1, g2) = (f1.clone(), f2.clone());
        let lhs = run(|log| {
            IO::canceled()
                .on_cancel(log_io(log, "f1".to_string()).product_r(build(f1, log, &[]).void()))
                .on_cancel(log_io(log, "f2".to_string()).product_r(build(f2, log, &[]).void()))
        });
        let rhs = run(|log| {
            let log2 = log.clone();
            force_r(
                IO::uncancelable(move |_| {
                    force_r(
                        log_io(&log2, "f1".to_string()).product_r(build(g1, &log2, &[])),
                        log_io(&log2, "f2".to_string()).product_r(build(g2, &log2, &[])),
                    )
                }),
                IO::canceled(),
            )
        });
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

// ----- forceR ---------------------------------------------------------------

#[test]
fn pure_force_r_is_the_second_program() {
    check((small(), prog_or_blocks()), |(a, fb)| {
        let lhs = run(|log| force_r(IO::pure(a), build(fb.clone(), log, &[])));
        prop_assert_eq!(lhs, run_prog(fb));
        Ok(())
    });
}

#[test]
fn raise_error_force_r_is_the_second_program() {
    check((error(), prog_or_blocks()), |(e, fb)| {
        let lhs = run(|log| force_r(IO::<i64, u8>::raise_error(e), build(fb.clone(), log, &[])));
        prop_assert_eq!(lhs, run_prog(fb));
        Ok(())
    });
}

#[test]
fn canceled_force_r_short_circuits_like_canceled_product_r() {
    check(prog_or_blocks(), |fb| {
        let fb2 = fb.clone();
        let lhs = run(|log| force_r(IO::canceled(), build(fb, log, &[])));
        let rhs = run(|log| IO::canceled().product_r(build(fb2, log, &[])));
        prop_assert_eq!(&lhs, &rhs);
        prop_assert_eq!(lhs.outcome, Some(Outcome::Canceled));
        Ok(())
    });
}

#[test]
fn force_r_is_associative() {
    check(
        (prog_or_blocks(), prog_or_blocks(), prog_or_blocks()),
        |(fa, fb, fc)| {
            let (fa2, fb2, fc2) = (fa.clone(), fb.clone(), fc.clone());
            let lhs = run(|log| {
                force_r(
                    force_r(build(fa, log, &[]), build(fb, log, &[])),
                    build(fc, log, &[]),
                )
            });
            let rhs = run(|log| {
                force_r(
                    build(fa2, log, &[]),
                    force_r(build(fb2, log, &[]), build(fc2, log, &[])),
                )
            });
            prop_assert_eq!(lhs, rhs);
            Ok(())
        },
    );
}

#[test]
fn never_force_r_never_completes() {
    check(prog_or_blocks(), |fa| {
        let ran = run(|log| force_r(IO::<i64, u8>::never(), build(fa, log, &[])));
        prop_assert_eq!(ran.outcome, None);
        prop_assert!(ran.log.is_empty());
        Ok(())
    });
}

// ---------------------------------------------------------------------------
// Spawn and race laws
// ---------------------------------------------------------------------------

#[test]
fn joining_a_started_pure_program_gives_its_value() {
    check(small(), |a| {
        let ran = run(|_| IO::<i64, u8>::pure(a).start().flat_map(|f| f.join()));
        prop_assert_eq!(ran.outcome, Some(Outcome::Succeeded(Outcome::Succeeded(a))));
        Ok(())
    });
}

#[test]
fn joining_a_started_failing_program_gives_its_error() {
    check(error(), |e| {
        let ran = run(|_| IO::<i64, u8>::raise_error(e).start().flat_map(|f| f.join()));
        prop_assert_eq!(ran.outcome, Some(Outcome::Succeeded(Outcome::Errored(e))));
        Ok(())
    });
}

#[test]
fn joining_a_started_program_gives_the_outcome_of_running_it_alone() {
    check(prog_or_blocks(), |fa| {
        let alone = run_prog(fa.clone());
        let joined = run(|log| build(fa, log, &[]).start().flat_map(|f| f.join()));
        prop_assert_eq!(joined.outcome, alone.outcome.map(Outcome::Succeeded));
        prop_assert_eq!(joined.log, alone.log);
        prop_assert_eq!(joined.millis, alone.millis);
        Ok(())
    });
}

#[test]
fn canceling_a_never_ending_fiber_terminates_after_its_finalizers() {
    let ran = run(|log| {
        let after = log_io(log, "cancel returned".to_string());
        IO::<(), u8>::never()
            .on_cancel(log_io(log, "fin".to_string()))
            .start()
            .flat_map(move |f| {
                // Let the fiber start and suspend first.
                IO::sleep(ms(1))
                    .product_r(f.cancel())
                    .product_r(after)
                    .product_r(f.join())
            })
    });
    assert_eq!(ran.outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
    assert_eq!(ran.log, ["fin", "cancel returned"]);
}

#[test]
fn a_fiber_canceled_before_it_starts_runs_nothing() {
    // As in Cats Effect: the request is seen before the first step.
    let ran = run(|log| {
        log_io(log, "started".to_string())
            .product_r(IO::<(), u8>::never())
            .on_cancel(log_io(log, "fin".to_string()))
            .start()
            .flat_map(|f| f.cancel().product_r(f.join()))
    });
    assert_eq!(ran.outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
    assert!(ran.log.is_empty(), "{:?}", ran.log);
}

#[test]
fn canceling_a_started_program_ends_it_canceled_or_as_it_would_alone() {
    // Canceled after a random virtual delay: the target either completed
    // before (its own outcome, its whole log) or was canceled.
    check((prog_or_blocks(), 0u8..12), |(fa, delay)| {
        let alone = run_prog(fa.clone());
        let ran = run(|log| {
            build(fa, log, &[]).start().flat_map(move |f| {
                IO::sleep(ms(delay))
                    .product_r(f.cancel())
                    .product_r(f.join())
            })
        });
        let joined = ran.outcome.expect("cancel and join always complete");
        match joined {
            Outcome::Succeeded(Outcome::Canceled) => {}
            other => {
                prop_assert_eq!(Some(other), alone.outcome.map(Outcome::Succeeded));
                prop_assert_eq!(ran.log, alone.log);
            }
        }
        Ok(())
    });
}

#[test]
fn race_with_never_on_the_right_is_the_left_program() {
    check(prog_without_cancel(), |fa| {
        let fa2 = fa.clone();
        let lhs = run(|log| build(fa, log, &[]).race(IO::never()));
        let rhs = run(|log| build(fa2, log, &[]).map(Either::<i64, ()>::Left));
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

#[test]
fn race_with_never_on_the_left_is_the_right_program() {
    check(prog_without_cancel(), |fb| {
        let fb2 = fb.clone();
        let lhs = run(|log| IO::never().race(build(fb, log, &[])));
        let rhs = run(|log| build(fb2, log, &[]).map(Either::<(), i64>::Right));
        prop_assert_eq!(lhs, rhs);
        Ok(())
    });
}

#[test]
fn the_loser_of_a_race_is_finalized_before_the_race_returns() {
    check(prog_without_cancel(), |fa| {
        let alone = run_prog(fa.clone());
        let ran = run(|log| {
            let loser = IO::<(), u8>::never().on_cancel(log_io(log, "loser".to_string()));
            let after = log_io(log, "returned".to_string());
            build(fa, log, &[]).race(loser).guarantee(after)
        });
        let mut expected = alone.log;
        expected.extend(["loser".to_string(), "returned".to_string()]);
        prop_assert_eq!(ran.outcome, alone.outcome.map(|oc| oc.map(Either::Left)));
        prop_assert_eq!(ran.log, expected);
        Ok(())
    });
}

#[test]
fn both_of_pure_values_is_the_pure_pair() {
    check((small(), small()), |(a, b)| {
        let ran = run(|_| IO::<i64, u8>::pure(a).both(IO::pure(b)));
        prop_assert_eq!(ran.outcome, Some(Outcome::Succeeded((a, b))));
        Ok(())
    });
}

#[test]
fn both_of_programs_pairs_their_values_or_fails_with_one_of_their_errors() {
    check(
        (prog_without_cancel(), prog_without_cancel()),
        |(fa, fb)| {
            let (alone_a, alone_b) = (run_prog(fa.clone()), run_prog(fb.clone()));
            let ran = run(|log| build(fa, log, &[]).both(build(fb, log, &[])));
            match (alone_a.outcome.unwrap(), alone_b.outcome.unwrap()) {
                (Outcome::Succeeded(a), Outcome::Succeeded(b)) => {
                    prop_assert_eq!(ran.outcome, Some(Outcome::Succeeded((a, b))));
                    // Interleaved, but every effect of each side, once.
                    let mut expected = [alone_a.log, alone_b.log].concat();
                    let mut log = ran.log;
                    expected.sort();
                    log.sort();
                    prop_assert_eq!(log, expected);
                    prop_assert_eq!(ran.millis, alone_a.millis.max(alone_b.millis));
                }
                (oa, ob) => {
                    let errors: Vec<u8> =
                        [oa, ob].into_iter().filter_map(Outcome::errored).collect();
                    match ran.outcome {
                        Some(Outcome::Errored(e)) => prop_assert!(errors.contains(&e)),
                        other => {
                            prop_assert!(false, "expected one of {:?}, got {:?}", errors, other)
                        }
                    }
                }
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// IO blocks: what they stand for, run for run
// ---------------------------------------------------------------------------

#[test]
fn a_block_awaiting_a_program_is_the_program() {
    check(prog(), |fa| {
        prop_assert_eq!(run_prog(Prog::Block(Box::new(fa.clone()))), run_prog(fa));
        Ok(())
    });
}

#[test]
fn a_block_binding_with_the_question_mark_is_flat_map() {
    check((prog(), prog()), |(fa, fb)| {
        let (a, b) = (Box::new(fa), Box::new(fb));
        prop_assert_eq!(
            run_prog(Prog::BlockBind(a.clone(), b.clone())),
            run_prog(Prog::FlatMap(a, b))
        );
        Ok(())
    });
}

#[test]
fn a_block_matching_an_awaited_error_is_handle_error_with() {
    check((prog(), prog()), |(fa, fb)| {
        let (a, b) = (Box::new(fa), Box::new(fb));
        prop_assert_eq!(
            run_prog(Prog::BlockHandle(a.clone(), b.clone())),
            run_prog(Prog::HandleErrorWith(a, b))
        );
        Ok(())
    });
}

#[test]
fn writing_a_program_with_blocks_everywhere_changes_nothing() {
    check(prog(), |p| {
        prop_assert_eq!(run_prog(in_blocks(p.clone())), run_prog(p));
        Ok(())
    });
}

#[test]
fn ok_and_err_returned_by_a_block_are_pure_and_raise_error() {
    check((small(), error(), prog()), |(a, e, fb)| {
        let fb2 = fb.clone();
        let ok = run(|log| {
            let log = log.clone();
            IO::block(async move { Ok(a) })
                .flat_map(move |x| build(fb, &log, &[]).map(move |y: i64| y.wrapping_add(x)))
        });
        prop_assert_eq!(
            ok,
            run_prog(Prog::FlatMap(Box::new(Prog::Pure(a)), Box::new(fb2)))
        );
        let err = run(|_| {
            IO::<i64, u8>::block(async move { Err(e) })
                .attempt()
                .map(encode)
        });
        prop_assert_eq!(err, run_prog(Prog::Attempt(Box::new(Prog::Raise(e)))));
        Ok(())
    });
}

#[test]
fn a_self_cancel_in_a_mask_is_observed_where_a_blocks_next_await_starts_not_where_the_block_ends() {
    // As `fa.map(..)`: a request made in a region is observed where the
    // next program starts; a block that ends with the awaited result starts
    // none, so the fiber ends with the result (as with `fa` alone)...
    let masked = || IO::<i64, u8>::uncancelable(|_| IO::canceled().map_to(1));
    let alone = run(|_| masked());
    assert_eq!(alone.outcome, Some(Outcome::Succeeded(1)));
    let awaited = run(|_| IO::block(async move { masked().await }));
    assert_eq!(
        awaited, alone,
        "a block awaiting the program is the program"
    );
    let mapped = run(|_| IO::block(async move { Ok(masked().await? + 1) }));
    assert_eq!(
        mapped,
        run(|_| masked().map(|x| x + 1)),
        "plain code after the await is `map`"
    );
    let finalized =
        run(|_| IO::block(async move { IO::pure(1i64).guarantee(IO::canceled()).await }));
    assert_eq!(
        finalized.outcome,
        Some(Outcome::Succeeded(1)),
        "a self-cancel in a finalizer"
    );
    // ...and a block whose next await starts a program observes it there:
    // that program does not run.
    let next = run(|log| {
        let log = log.clone();
        IO::block(async move {
            let x = masked().await?;
            log_io(&log, "next".to_string()).await?;
            Ok(x)
        })
    });
    assert_eq!(next.outcome, Some(Outcome::Canceled));
    assert!(next.log.is_empty(), "{:?}", next.log);
}

#[test]
fn uncancelable_with_its_poll_applied_inside_a_block_is_identity() {
    check(prog(), |fa| {
        let lhs = run(|log| {
            let (log, fa) = (log.clone(), fa.clone());
            IO::uncancelable(move |poll| {
                IO::block(async move { poll.apply(build(fa, &log, &[])).await })
            })
        });
        prop_assert_eq!(lhs, run_prog(fa));
        Ok(())
    });
}

#[test]
fn a_self_cancel_awaited_in_a_block_ends_it_after_its_on_cancel_finalizers() {
    let ran = run(|log| {
        let (l1, l2) = (log.clone(), log.clone());
        IO::block(async move {
            IO::<(), u8>::canceled()
                .on_cancel(log_io(&l1, "inner fin".to_string()))
                .await?;
            log_io(&l2, "after".to_string()).await?;
            Ok(1i64)
        })
        .on_cancel(log_io(log, "outer fin".to_string()))
    });
    assert_eq!(ran.outcome, Some(Outcome::Canceled));
    assert_eq!(ran.log, ["inner fin", "outer fin"]);
}

#[test]
fn a_block_losing_a_race_is_finalized_before_the_race_returns() {
    check(prog_without_cancel(), |fa| {
        let alone = run_prog(fa.clone());
        let ran = run(|log| {
            let (l1, l2) = (log.clone(), log.clone());
            let loser: IO<(), u8> = IO::block(async move {
                IO::<(), u8>::never()
                    .on_cancel(log_io(&l1, "awaited".to_string()))
                    .await?;
                log_io(&l2, "the loser went on".to_string()).await
            })
            .on_cancel(log_io(log, "loser".to_string()));
            let after = log_io(log, "returned".to_string());
            build(fa, log, &[]).race(loser).guarantee(after)
        });
        let mut expected = alone.log;
        expected.extend(["awaited", "loser", "returned"].map(String::from));
        prop_assert_eq!(ran.outcome, alone.outcome.map(|oc| oc.map(Either::Left)));
        prop_assert_eq!(ran.log, expected);
        Ok(())
    });
}
