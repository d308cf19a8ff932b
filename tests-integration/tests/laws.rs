//! Laws on random programs (proptest).
//!
//! Programs are generated from a small AST ([`Prog`]) whose functions come
//! from fixed tables of pure functions ([`MapFn`], [`BindFn`],
//! [`HandlerFn`]). Each program is interpreted twice: into an
//! `IO<i64, u8>` run by the executor, and by a plain reference evaluator
//! returning `Result<i64, u8>`. The run-loop must agree with the reference,
//! and the monad and error laws must hold: both sides of each law, run on
//! the executor, give the same outcome.
//!
//! Every law runs on every executor (`common::rt_test!`); 256 cases each.

mod common;

use std::thread;
use std::time::Duration;

use common::{HANG_LIMIT, rt_test, within};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use spindle_core::{IO, Outcome};

// ---------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------

/// A random program.
#[derive(Clone, Debug)]
enum Prog {
    Pure(i64),
    Raise(u8),
    Delay(i64),
    /// `IO::from_callback` whose callback is called during registration.
    AsyncNow(Result<i64, u8>),
    /// `IO::from_callback` whose callback is called from another thread.
    AsyncThread(Result<i64, u8>),
    Defer(Box<Prog>),
    /// `IO::cede()` then the program.
    Cede(Box<Prog>),
    /// `IO::sleep(0)` then the program.
    SleepZero(Box<Prog>),
    Map(Box<Prog>, MapFn),
    FlatMap(Box<Prog>, BindFn),
    HandleErrorWith(Box<Prog>, HandlerFn),
    /// `handle_error(|e| e as i64 * k)`.
    HandleError(Box<Prog>, i64),
    /// `attempt()`, its result encoded back into an `i64`.
    Attempt(Box<Prog>),
    /// `map_err(|e| e ^ mask)`.
    MapError(Box<Prog>, u8),
    /// `redeem(|e| -(e as i64), f)`.
    Redeem(Box<Prog>, MapFn),
    RedeemWith(Box<Prog>, HandlerFn, BindFn),
    /// `on_error(|_| side.void())`.
    OnError(Box<Prog>, Box<Prog>),
    ProductR(Box<Prog>, Box<Prog>),
    ProductL(Box<Prog>, Box<Prog>),
}

/// Pure functions for `map`.
#[derive(Clone, Copy, Debug)]
enum MapFn {
    Add(i64),
    Mul(i64),
    Neg,
    Square,
}

/// Functions for `flat_map`.
#[derive(Clone, Debug)]
enum BindFn {
    /// `|x| pure(x + k)`
    PureAdd(i64),
    /// `|x| if x is odd { raise(e) } else { pure(x / 2) }`
    RaiseIfOdd(u8),
    /// `|x| prog.map(|y| x + y)`
    Then(Box<Prog>),
}

/// Functions for `handle_error_with`.
#[derive(Clone, Debug)]
enum HandlerFn {
    /// `|e| pure(e as i64 + k)`
    Recover(i64),
    /// `|e| raise(e + k)`
    Reraise(u8),
    /// `|e| prog.map(|y| y + e as i64)`
    Then(Box<Prog>),
}

/// How `Attempt` encodes its result into an `i64`.
fn encode(r: Result<i64, u8>) -> i64 {
    match r {
        Ok(a) => a,
        Err(e) => -1000 - i64::from(e),
    }
}

impl MapFn {
    fn apply(self, x: i64) -> i64 {
        match self {
            MapFn::Add(k) => x.wrapping_add(k),
            MapFn::Mul(k) => x.wrapping_mul(k),
            MapFn::Neg => x.wrapping_neg(),
            MapFn::Square => x.wrapping_mul(x),
        }
    }
}

// ----- the reference evaluator ----------------------------------------------

fn eval(p: &Prog) -> Result<i64, u8> {
    match p {
        Prog::Pure(a) | Prog::Delay(a) => Ok(*a),
        Prog::Raise(e) => Err(*e),
        Prog::AsyncNow(r) | Prog::AsyncThread(r) => *r,
        Prog::Defer(p) | Prog::Cede(p) | Prog::SleepZero(p) => eval(p),
        Prog::Map(p, f) => eval(p).map(|x| f.apply(x)),
        Prog::FlatMap(p, f) => eval(p).and_then(|x| eval_bind(f, x)),
        Prog::HandleErrorWith(p, h) => eval(p).or_else(|e| eval_handler(h, e)),
        Prog::HandleError(p, k) => Ok(eval(p).unwrap_or_else(|e| i64::from(e).wrapping_mul(*k))),
        Prog::Attempt(p) => Ok(encode(eval(p))),
        Prog::MapError(p, mask) => eval(p).map_err(|e| e ^ mask),
        Prog::Redeem(p, f) => Ok(match eval(p) {
            Ok(a) => f.apply(a),
            Err(e) => -i64::from(e),
        }),
        Prog::RedeemWith(p, h, f) => match eval(p) {
            Ok(a) => eval_bind(f, a),
            Err(e) => eval_handler(h, e),
        },
        Prog::OnError(p, _side) => eval(p),
        Prog::ProductR(p, q) => eval(p).and_then(|_| eval(q)),
        Prog::ProductL(p, q) => eval(p).and_then(|a| eval(q).map(|_| a)),
    }
}

fn eval_bind(f: &BindFn, x: i64) -> Result<i64, u8> {
    match f {
        BindFn::PureAdd(k) => Ok(x.wrapping_add(*k)),
        BindFn::RaiseIfOdd(e) => {
            if x % 2 != 0 {
                Err(*e)
            } else {
                Ok(x / 2)
            }
        }
        BindFn::Then(p) => eval(p).map(|y| x.wrapping_add(y)),
    }
}

fn eval_handler(h: &HandlerFn, e: u8) -> Result<i64, u8> {
    match h {
        HandlerFn::Recover(k) => Ok(i64::from(e).wrapping_add(*k)),
        HandlerFn::Reraise(k) => Err(e.wrapping_add(*k)),
        HandlerFn::Then(p) => eval(p).map(|y| y.wrapping_add(i64::from(e))),
    }
}

// ----- the interpretation into IO -------------------------------------------

fn build(p: Prog) -> IO<i64, u8> {
    match p {
        Prog::Pure(a) => IO::pure(a),
        Prog::Raise(e) => IO::raise_error(e),
        Prog::Delay(a) => IO::delay(move || a),
        Prog::AsyncNow(r) => IO::from_callback(move |cb| {
            cb.complete(r);
            None
        }),
        Prog::AsyncThread(r) => IO::from_callback(move |cb| {
            thread::spawn(move || cb.complete(r));
            None
        }),
        Prog::Defer(p) => IO::defer(move || build(*p)),
        Prog::Cede(p) => IO::cede().product_r(build(*p)),
        Prog::SleepZero(p) => IO::sleep(Duration::ZERO).product_r(build(*p)),
        Prog::Map(p, f) => build(*p).map(move |x| f.apply(x)),
        Prog::FlatMap(p, f) => build(*p).flat_map(move |x| bind(f, x)),
        Prog::HandleErrorWith(p, h) => build(*p).handle_error_with(move |e| handler(h, e)),
        Prog::HandleError(p, k) => build(*p).handle_error(move |e| i64::from(e).wrapping_mul(k)),
        Prog::Attempt(p) => build(*p).attempt().map(encode),
        Prog::MapError(p, mask) => build(*p).map_err(move |e| e ^ mask),
        Prog::Redeem(p, f) => build(*p).redeem(|e| -i64::from(e), move |a| f.apply(a)),
        Prog::RedeemWith(p, h, f) => {
            build(*p).redeem_with(move |e| handler(h, e), move |a| bind(f, a))
        }
        Prog::OnError(p, side) => build(*p).on_error(move |_| build(*side).void()),
        Prog::ProductR(p, q) => build(*p).product_r(build(*q)),
        Prog::ProductL(p, q) => build(*p).product_l(build(*q)),
    }
}

fn bind(f: BindFn, x: i64) -> IO<i64, u8> {
    match f {
        BindFn::PureAdd(k) => IO::pure(x.wrapping_add(k)),
        BindFn::RaiseIfOdd(e) => {
            if x % 2 != 0 {
                IO::raise_error(e)
            } else {
                IO::pure(x / 2)
            }
        }
        BindFn::Then(p) => build(*p).map(move |y| x.wrapping_add(y)),
    }
}

fn handler(h: HandlerFn, e: u8) -> IO<i64, u8> {
    match h {
        HandlerFn::Recover(k) => IO::pure(i64::from(e).wrapping_add(k)),
        HandlerFn::Reraise(k) => IO::raise_error(e.wrapping_add(k)),
        HandlerFn::Then(p) => build(*p).map(move |y| y.wrapping_add(i64::from(e))),
    }
}

fn to_outcome(r: Result<i64, u8>) -> Outcome<i64, u8> {
    match r {
        Ok(a) => Outcome::Succeeded(a),
        Err(e) => Outcome::Errored(e),
    }
}

// ----- strategies -----------------------------------------------------------

fn small() -> impl Strategy<Value = i64> {
    -50i64..50
}

fn result() -> impl Strategy<Value = Result<i64, u8>> {
    prop_oneof![small().prop_map(Ok), any::<u8>().prop_map(Err)]
}

fn map_fn() -> impl Strategy<Value = MapFn> {
    prop_oneof![
        small().prop_map(MapFn::Add),
        small().prop_map(MapFn::Mul),
        Just(MapFn::Neg),
        Just(MapFn::Square),
    ]
}

fn bind_fn_with(prog: impl Strategy<Value = Prog>) -> impl Strategy<Value = BindFn> {
    prop_oneof![
        small().prop_map(BindFn::PureAdd),
        any::<u8>().prop_map(BindFn::RaiseIfOdd),
        prog.prop_map(|p| BindFn::Then(Box::new(p))),
    ]
}

fn handler_fn_with(prog: impl Strategy<Value = Prog>) -> impl Strategy<Value = HandlerFn> {
    prop_oneof![
        small().prop_map(HandlerFn::Recover),
        any::<u8>().prop_map(HandlerFn::Reraise),
        prog.prop_map(|p| HandlerFn::Then(Box::new(p))),
    ]
}

fn prog() -> impl Strategy<Value = Prog> {
    let leaf = prop_oneof![
        4 => small().prop_map(Prog::Pure),
        3 => any::<u8>().prop_map(Prog::Raise),
        2 => small().prop_map(Prog::Delay),
        1 => result().prop_map(Prog::AsyncNow),
        1 => result().prop_map(Prog::AsyncThread),
    ];
    leaf.prop_recursive(5, 48, 3, |inner| {
        let b = |p: Prog| Box::new(p);
        prop_oneof![
            inner.clone().prop_map(move |p| Prog::Defer(b(p))),
            inner.clone().prop_map(move |p| Prog::Cede(b(p))),
            inner.clone().prop_map(move |p| Prog::SleepZero(b(p))),
            (inner.clone(), map_fn()).prop_map(move |(p, f)| Prog::Map(b(p), f)),
            (inner.clone(), bind_fn_with(inner.clone()))
                .prop_map(move |(p, f)| Prog::FlatMap(b(p), f)),
            (inner.clone(), handler_fn_with(inner.clone()))
                .prop_map(move |(p, h)| Prog::HandleErrorWith(b(p), h)),
            (inner.clone(), small()).prop_map(move |(p, k)| Prog::HandleError(b(p), k)),
            inner.clone().prop_map(move |p| Prog::Attempt(b(p))),
            (inner.clone(), any::<u8>()).prop_map(move |(p, m)| Prog::MapError(b(p), m)),
            (inner.clone(), map_fn()).prop_map(move |(p, f)| Prog::Redeem(b(p), f)),
            (
                inner.clone(),
                handler_fn_with(inner.clone()),
                bind_fn_with(inner.clone())
            )
                .prop_map(move |(p, h, f)| Prog::RedeemWith(b(p), h, f)),
            (inner.clone(), inner.clone()).prop_map(move |(p, s)| Prog::OnError(b(p), b(s))),
            (inner.clone(), inner.clone()).prop_map(move |(p, q)| Prog::ProductR(b(p), b(q))),
            (inner.clone(), inner).prop_map(move |(p, q)| Prog::ProductL(b(p), b(q))),
        ]
    })
}

fn bind_fn() -> impl Strategy<Value = BindFn> {
    bind_fn_with(prog())
}

fn handler_fn() -> impl Strategy<Value = HandlerFn> {
    handler_fn_with(prog())
}

/// Checks `test` on 256 generated cases (or `PROPTEST_CASES`, as proptest
/// reads it: the instrumented run of `.ci/asan` checks fewer); panics with
/// the shrunk counterexample on failure. Nothing is written to disk.
fn check<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(256);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

rt_test! {
    fn the_run_loop_agrees_with_the_reference_evaluator() {
        check(prog(), |p| {
            let expected = to_outcome(eval(&p));
            prop_assert_eq!(run(build(p)), expected);
            Ok(())
        });
    }

    fn the_run_loop_agrees_with_the_reference_evaluator_on_deep_programs() {
        // Chains of 1..200 binds, handlers and maps over random programs.
        let layer = prop_oneof![
            bind_fn().prop_map(|f| (0u8, Some(f), None, MapFn::Neg)),
            handler_fn().prop_map(|h| (1u8, None, Some(h), MapFn::Neg)),
            map_fn().prop_map(|m| (2u8, None, None, m)),
        ];
        check((prog(), proptest::collection::vec(layer, 1..200)), |(p, layers)| {
            let mut program = p;
            for (kind, f, h, m) in layers {
                let inner = Box::new(program);
                program = match kind {
                    0 => Prog::FlatMap(inner, f.unwrap()),
                    1 => Prog::HandleErrorWith(inner, h.unwrap()),
                    _ => Prog::Map(inner, m),
                };
            }
            let expected = to_outcome(eval(&program));
            prop_assert_eq!(within(HANG_LIMIT, move || run(build(program))), Some(expected));
            Ok(())
        });
    }

    fn left_identity_pure_then_flat_map_is_the_function_applied() {
        check((small(), bind_fn()), |(a, f)| {
            let lhs = IO::pure(a).flat_map({
                let f = f.clone();
                move |x| bind(f, x)
            });
            prop_assert_eq!(run(lhs), run(bind(f, a)));
            Ok(())
        });
    }

    fn right_identity_flat_map_of_pure_changes_nothing() {
        check(prog(), |p| {
            prop_assert_eq!(run(build(p.clone()).flat_map(IO::pure)), run(build(p)));
            Ok(())
        });
    }

    fn associativity_of_flat_map() {
        check((prog(), bind_fn(), bind_fn()), |(p, f, g)| {
            let (f2, g2) = (f.clone(), g.clone());
            let lhs = build(p.clone()).flat_map(move |x| bind(f, x)).flat_map(move |y| bind(g, y));
            let rhs = build(p).flat_map(move |x| bind(f2, x).flat_map(move |y| bind(g2, y)));
            prop_assert_eq!(run(lhs), run(rhs));
            Ok(())
        });
    }

    fn map_identity_changes_nothing() {
        check(prog(), |p| {
            prop_assert_eq!(run(build(p.clone()).map(|x| x)), run(build(p)));
            Ok(())
        });
    }

    fn map_composition_equals_mapping_the_composed_function() {
        check((prog(), map_fn(), map_fn()), |(p, f, g)| {
            let lhs = build(p.clone()).map(move |x| f.apply(x)).map(move |y| g.apply(y));
            let rhs = build(p).map(move |x| g.apply(f.apply(x)));
            prop_assert_eq!(run(lhs), run(rhs));
            Ok(())
        });
    }

    fn handle_error_with_over_raise_error_is_the_handler_applied() {
        check((any::<u8>(), handler_fn()), |(e, h)| {
            let lhs = IO::raise_error(e).handle_error_with({
                let h = h.clone();
                move |e| handler(h, e)
            });
            prop_assert_eq!(run(lhs), run(handler(h, e)));
            Ok(())
        });
    }

    fn handle_error_with_over_pure_is_pure() {
        check((small(), handler_fn()), |(a, h)| {
            let lhs = IO::pure(a).handle_error_with(move |e| handler(h, e));
            prop_assert_eq!(run(lhs), Outcome::Succeeded(a));
            Ok(())
        });
    }

    fn raise_error_then_flat_map_is_raise_error() {
        check((any::<u8>(), bind_fn()), |(e, f)| {
            let lhs = IO::raise_error(e).flat_map(move |x| bind(f, x));
            prop_assert_eq!(run(lhs), Outcome::Errored(e));
            Ok(())
        });
    }

    fn map_error_over_raise_error_is_raise_error_of_the_mapped_error() {
        check((any::<u8>(), any::<u8>()), |(e, mask)| {
            let lhs: IO<i64, u8> = IO::raise_error(e).map_err(move |e| e ^ mask);
            prop_assert_eq!(run(lhs), Outcome::Errored(e ^ mask));
            Ok(())
        });
    }

    fn attempt_then_rethrow_changes_nothing() {
        check(prog(), |p| {
            prop_assert_eq!(run(build(p.clone()).attempt().rethrow()), run(build(p)));
            Ok(())
        });
    }

    fn attempt_never_fails_and_exposes_the_outcome() {
        check(prog(), |p| {
            let expected = eval(&p);
            prop_assert_eq!(run(build(p).attempt()), Outcome::Succeeded(expected));
            Ok(())
        });
    }

    fn pure_then_attempt_is_pure_ok() {
        check(small(), |a| {
            prop_assert_eq!(run(IO::<i64, u8>::pure(a).attempt()), run(IO::pure(Ok(a))));
            Ok(())
        });
    }

    fn raise_error_then_attempt_is_pure_err() {
        check(any::<u8>(), |e| {
            prop_assert_eq!(run(IO::<i64, u8>::raise_error(e).attempt()), run(IO::pure(Err(e))));
            Ok(())
        });
    }

    fn redeem_with_is_attempt_then_flat_map_of_the_matching_side() {
        check((prog(), handler_fn(), bind_fn()), |(p, h, f)| {
            let (h2, f2) = (h.clone(), f.clone());
            let lhs = build(p.clone()).redeem_with(move |e| handler(h, e), move |a| bind(f, a));
            let rhs = build(p).attempt().flat_map(move |r| match r {
                Ok(a) => bind(f2, a),
                Err(e) => handler(h2, e),
            });
            prop_assert_eq!(run(lhs), run(rhs));
            Ok(())
        });
    }

    fn on_error_keeps_the_outcome_whatever_its_program_does() {
        check((prog(), prog()), |(p, side)| {
            let lhs = build(p.clone()).on_error(move |_| build(side).void());
            prop_assert_eq!(run(lhs), run(build(p)));
            Ok(())
        });
    }
}
