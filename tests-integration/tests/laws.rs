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
//! IO blocks are part of the AST ([`Prog::Block`], [`Prog::BlockBind`],
//! [`Prog::BlockHandle`], [`Prog::BlockLoop`]: `.await`, `?`, `match` and
//! `for` written in `async` blocks), so every law also holds of programs
//! with blocks anywhere inside; the laws at the end state that blocks are
//! the monad: an awaited program is the program, `?` is `flat_map`, a
//! `match` on an awaited error is `handle_error_with`, `Ok` is `pure`, `Err`
//! is `raise_error`, a loop of awaits is a chain of binds.
//!
//! Every law runs on every executor (`common::rt_test!`); 256 cases each.

mod common;

use std::thread;
use std::time::Duration;

use common::{HANG_LIMIT, rt_test, within};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
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
    /// `IO::block(async move { p.await })`.
    Block(Box<Prog>),
    /// `IO::block(async move { let x = p.await?; f(x).await })`: `flat_map`.
    BlockBind(Box<Prog>, BindFn),
    /// `IO::block(async move { match p.await { Ok(x) => Ok(x), Err(e) =>
    /// h(e).await } })`: `handle_error_with`.
    BlockHandle(Box<Prog>, HandlerFn),
    /// `IO::block(async move { let mut x = p.await?; for f in fs { x =
    /// f(x).await?; } Ok(x) })`: a chain of `flat_map`s.
    BlockLoop(Box<Prog>, Vec<BindFn>),
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
        Prog::Block(p) => eval(p),
        Prog::BlockBind(p, f) => eval(p).and_then(|x| eval_bind(f, x)),
        Prog::BlockHandle(p, h) => eval(p).or_else(|e| eval_handler(h, e)),
        Prog::BlockLoop(p, fs) => fs.iter().try_fold(eval(p)?, |x, f| eval_bind(f, x)),
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
        Prog::Block(p) => {
            let p = build(*p);
            IO::block(async move { p.await })
        }
        Prog::BlockBind(p, f) => block_bind(build(*p), f),
        Prog::BlockHandle(p, h) => block_handle(build(*p), h),
        Prog::BlockLoop(p, fs) => block_loop(build(*p), fs),
    }
}

/// `fa.flat_map(f)` written as an IO block.
fn block_bind(fa: IO<i64, u8>, f: BindFn) -> IO<i64, u8> {
    IO::block(async move {
        let x = fa.await?;
        bind(f, x).await
    })
}

/// `fa.handle_error_with(h)` written as an IO block.
fn block_handle(fa: IO<i64, u8>, h: HandlerFn) -> IO<i64, u8> {
    IO::block(async move {
        match fa.await {
            Ok(x) => Ok(x),
            Err(e) => handler(h, e).await,
        }
    })
}

/// `fa.flat_map(f1).flat_map(f2)...` written as a loop in an IO block.
fn block_loop(fa: IO<i64, u8>, fs: Vec<BindFn>) -> IO<i64, u8> {
    IO::block(async move {
        let mut x = fa.await?;
        for f in fs {
            x = bind(f, x).await?;
        }
        Ok(x)
    })
}

/// `p` with every `flat_map` and `handle_error_with` written as an IO
/// block, and every other node wrapped in a block awaiting it.
fn in_blocks(p: Prog) -> Prog {
    let b = |p: Box<Prog>| Box::new(in_blocks(*p));
    let bf = |f: BindFn| match f {
        BindFn::Then(p) => BindFn::Then(b(p)),
        f => f,
    };
    let hf = |h: HandlerFn| match h {
        HandlerFn::Then(p) => HandlerFn::Then(b(p)),
        h => h,
    };
    let inner = match p {
        leaf @ (Prog::Pure(_)
        | Prog::Raise(_)
        | Prog::Delay(_)
        | Prog::AsyncNow(_)
        | Prog::AsyncThread(_)) => leaf,
        Prog::FlatMap(p, f) => return Prog::BlockBind(b(p), bf(f)),
        Prog::HandleErrorWith(p, h) => return Prog::BlockHandle(b(p), hf(h)),
        Prog::Defer(p) => Prog::Defer(b(p)),
        Prog::Cede(p) => Prog::Cede(b(p)),
        Prog::SleepZero(p) => Prog::SleepZero(b(p)),
        Prog::Map(p, f) => Prog::Map(b(p), f),
        Prog::HandleError(p, k) => Prog::HandleError(b(p), k),
        Prog::Attempt(p) => Prog::Attempt(b(p)),
        Prog::MapError(p, m) => Prog::MapError(b(p), m),
        Prog::Redeem(p, f) => Prog::Redeem(b(p), f),
        Prog::RedeemWith(p, h, f) => Prog::RedeemWith(b(p), hf(h), bf(f)),
        Prog::OnError(p, side) => Prog::OnError(b(p), b(side)),
        Prog::ProductR(p, q) => Prog::ProductR(b(p), b(q)),
        Prog::ProductL(p, q) => Prog::ProductL(b(p), b(q)),
        Prog::Block(p) => return Prog::Block(b(p)),
        Prog::BlockBind(p, f) => return Prog::BlockBind(b(p), bf(f)),
        Prog::BlockHandle(p, h) => return Prog::BlockHandle(b(p), hf(h)),
        Prog::BlockLoop(p, fs) => return Prog::BlockLoop(b(p), fs.into_iter().map(bf).collect()),
    };
    Prog::Block(Box::new(inner))
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
            (inner.clone(), inner.clone()).prop_map(move |(p, q)| Prog::ProductL(b(p), b(q))),
            inner.clone().prop_map(move |p| Prog::Block(b(p))),
            (inner.clone(), bind_fn_with(inner.clone()))
                .prop_map(move |(p, f)| Prog::BlockBind(b(p), f)),
            (inner.clone(), handler_fn_with(inner.clone()))
                .prop_map(move |(p, h)| Prog::BlockHandle(b(p), h)),
            (
                inner.clone(),
                proptest::collection::vec(bind_fn_with(inner), 0..4)
            )
                .prop_map(move |(p, fs)| Prog::BlockLoop(b(p), fs)),
        ]
    })
}

fn bind_fn() -> impl Strategy<Value = BindFn> {
    bind_fn_with(prog())
}

fn handler_fn() -> impl Strategy<Value = HandlerFn> {
    handler_fn_with(prog())
}

/// Checks `test` on 256 generated cases (see `common::props`).
fn check<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    common::props::check_cases(256, strategy, test);
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

    // ----- IO blocks are the monad -----------------------------------------

    fn a_block_awaiting_a_program_is_the_program() {
        check(prog(), |p| {
            let fa = build(p.clone());
            prop_assert_eq!(run(IO::block(async move { fa.await })), run(build(p)));
            Ok(())
        });
    }

    fn a_block_binding_with_the_question_mark_is_flat_map() {
        check((prog(), bind_fn()), |(p, f)| {
            let f2 = f.clone();
            let lhs = IO::block({
                let fa = build(p.clone());
                async move {
                    let a = fa.await?;
                    bind(f, a).await
                }
            });
            let rhs = build(p).flat_map(move |x| bind(f2, x));
            prop_assert_eq!(run(lhs), run(rhs));
            Ok(())
        });
    }

    fn a_block_returning_ok_is_pure() {
        check((small(), bind_fn()), |(a, f)| {
            let block: IO<i64, u8> = IO::block(async move { Ok(a) });
            prop_assert_eq!(run(block), run(IO::pure(a)));
            // Left identity through a block.
            let f2 = f.clone();
            let block: IO<i64, u8> = IO::block(async move { Ok(a) });
            prop_assert_eq!(run(block.flat_map(move |x| bind(f2, x))), run(bind(f, a)));
            Ok(())
        });
    }

    fn an_error_raised_in_a_block_is_raise_error() {
        check((any::<u8>(), handler_fn(), bind_fn()), |(e, h, f)| {
            // Returned as `Err`, and raised by an awaited program through `?`.
            let returned = || -> IO<i64, u8> { IO::block(async move { Err(e) }) };
            let raised = || -> IO<i64, u8> {
                IO::block(async move {
                    let x: i64 = IO::raise_error(e).await?;
                    Ok(x.wrapping_add(1))
                })
            };
            let blocks: [&dyn Fn() -> IO<i64, u8>; 2] = [&returned, &raised];
            for block in blocks {
                prop_assert_eq!(run(block()), run(IO::<i64, u8>::raise_error(e)));
                // It skips binds and reaches handlers as `raise_error` does.
                let f = f.clone();
                prop_assert_eq!(run(block().flat_map(move |x| bind(f, x))), Outcome::Errored(e));
                let (h1, h2) = (h.clone(), h.clone());
                prop_assert_eq!(
                    run(block().handle_error_with(move |e| handler(h1, e))),
                    run(handler(h2, e))
                );
            }
            Ok(())
        });
    }

    fn handling_an_awaited_error_in_a_block_is_handle_error_with() {
        check((prog(), handler_fn()), |(p, h)| {
            let h2 = h.clone();
            let lhs = block_handle(build(p.clone()), h);
            let rhs = build(p).handle_error_with(move |e| handler(h2, e));
            prop_assert_eq!(run(lhs), run(rhs));
            Ok(())
        });
    }

    fn a_loop_of_awaits_in_a_block_is_a_chain_of_flat_maps() {
        check((prog(), proptest::collection::vec(bind_fn(), 0..24)), |(p, fs)| {
            let mut rhs = build(p.clone());
            for f in fs.clone() {
                rhs = rhs.flat_map(move |x| bind(f, x));
            }
            prop_assert_eq!(run(block_loop(build(p), fs)), run(rhs));
            Ok(())
        });
    }

    fn writing_a_program_with_blocks_everywhere_changes_nothing() {
        check(prog(), |p| {
            let blocks = in_blocks(p.clone());
            prop_assert_eq!(run(build(blocks)), run(build(p)));
            Ok(())
        });
    }
}
