//! `select!`: a race of programs of different value types, written in an
//! IO block, whose winner's branch runs inline.
//!
//! # Expansion
//!
//! `select! { p0 = io0 => body0, p1 = io1 => body1 }` becomes, inside a
//! block of its own:
//!
//! 1. a hidden local enum with one variant per branch
//!    (`__SpindleSelect::B0(T0)`, `B1(T1)`, ...), generic in the branches'
//!    value types;
//! 2. each program mapped into its variant ([`branch`], untraced: the race
//!    is the one event of the select), all of them raced by [`race`]
//!    (`IO::race_all`'s machinery, recorded as the operation `select` at
//!    the macro's call site);
//! 3. the race awaited and taken apart with `?`, so a winner's error
//!    converts with `From` into the block's error type and returns from
//!    the block, as `?` does;
//! 4. a `match` on the winner's variant, whose arm binds the branch's
//!    pattern and evaluates its body in the block itself: a body may
//!    `.await`, use `?`, `return` or `break` as any code of the block.
//!
//! The race is `race_all`'s: the first program to complete wins (with a
//! value or an error); the others are canceled, and their finalizers have
//! run, before the await returns, so before the body runs. A program that
//! cancels itself does not win; if all do, the block is canceled.
//!
//! Design credit: tokio's `select!` (branches as `pattern = future =>
//! handler`, the handler run in the caller's scope), over Cats Effect's
//! `race`, whose cancellation of the losers it keeps. No code is copied.

use alloc::vec::Vec;

use crate::engine::tracing::Op;
use crate::io::IO;

static SELECT: Op = Op::new("select");

/// A branch's program, mapped into its variant of the select's hidden
/// enum (no trace event: the select is one).
#[doc(hidden)]
#[inline]
pub fn branch<A, X, E>(io: IO<A, E>, variant: fn(A) -> X) -> IO<X, E>
where
    A: Send + 'static,
    X: Send + 'static,
    E: Send + 'static,
{
    io.map_untraced(variant)
}

/// The race of a select's branches (`IO::race_all`), recorded as the
/// operation `select` at the macro's call site.
#[doc(hidden)]
#[track_caller]
pub fn race<X, E, const N: usize>(branches: [IO<X, E>; N]) -> IO<X, E>
where
    X: Send + 'static,
    E: Send + 'static,
{
    let programs: Vec<IO<X, E>> = branches.into_iter().collect();
    IO::defer_untraced(move || crate::combinators::race::race_all(programs)).traced_as(&SELECT)
}

/// Races programs of different value types in an IO block and runs the
/// branch of the first to complete: `select! { pattern = program =>
/// body, ... }`, with 2 to 4 branches.
///
/// Each `program` is an `IO<_, E>`, all with one error type `E`, and each
/// value type its own. They run concurrently, each on a fiber of its own
/// (as [`IO::race_all`]); the first to complete wins, and the others are
/// canceled: their finalizers have run before the winner's body starts.
/// Then the winner's value is matched against its branch's `pattern`
/// (irrefutable: a name, a tuple, `_`), and its `body` runs inline, in the
/// block: it may `.await`, use `?`, `return` from the block. The `select!`
/// is an expression whose value is the body's (every body has one type).
///
/// If the winner failed, its error `e` leaves the block as `?` would, as
/// `Err(From::from(e))`: a select of `IO<_, std::io::Error>` programs works
/// in a block whose error type converts from `std::io::Error`. A panic of
/// the winner is raised again; a program that cancels itself does not win,
/// and if every program does, the block is canceled.
///
/// The operations that cannot fail (`sleep`, `Queue::take`,
/// `Deferred::get`, ...) take their error type from the other branches;
/// if no branch fixes it, name it on one of them (`sleep::<MyError>(d)`).
///
/// ```
/// use std::time::Duration;
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Queue, select, single::SingleThreaded};
///
/// #[derive(Debug, PartialEq)]
/// enum AppError { Io(String), Idle }
///
/// let lines = Queue::<String>::unbounded();
/// let producer = lines.clone();
/// let program: IO<String, AppError> = IO::block(async move {
///     producer.offer::<AppError>("hello".to_string()).await?;
///     let greeting = select! {
///         line = lines.take::<AppError>() => line.to_uppercase(),
///         _ = sleep(Duration::from_secs(5)) => return Err(AppError::Idle),
///     };
///     Ok(greeting)
/// });
/// assert_eq!(SingleThreaded::new()?.block_on(program)?.ok(), Some("HELLO".to_string()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The branches' programs are evaluated (built) in order before the race;
/// a body is an expression followed by a comma, or a block (`=> { .. }`)
/// whose comma may be left out.
#[macro_export]
macro_rules! select {
    // Branches parsed one by one into `[pattern] [program] [body]` groups.
    (@parse [$($done:tt)*] $p:pat = $io:expr => $body:block , $($rest:tt)*) => {
        $crate::select!(@parse [$($done)* [$p] [$io] [$body]] $($rest)*)
    };
    (@parse [$($done:tt)*] $p:pat = $io:expr => $body:block $($rest:tt)+) => {
        $crate::select!(@parse [$($done)* [$p] [$io] [$body]] $($rest)+)
    };
    (@parse [$($done:tt)*] $p:pat = $io:expr => $body:expr , $($rest:tt)*) => {
        $crate::select!(@parse [$($done)* [$p] [$io] [$body]] $($rest)*)
    };
    (@parse [$($done:tt)*] $p:pat = $io:expr => $body:expr) => {
        $crate::select!(@parse [$($done)* [$p] [$io] [$body]])
    };
    (@parse [$($done:tt)*]) => {
        $crate::select!(@emit $($done)*)
    };
    (@emit [$p0:pat] [$io0:expr] [$b0:expr] [$p1:pat] [$io1:expr] [$b1:expr]) => {{
        enum __SpindleSelect<T0, T1> { B0(T0), B1(T1) }
        match $crate::__private::select::race([
            $crate::__private::select::branch($io0, __SpindleSelect::B0),
            $crate::__private::select::branch($io1, __SpindleSelect::B1),
        ])
        .await?
        {
            __SpindleSelect::B0($p0) => $b0,
            __SpindleSelect::B1($p1) => $b1,
        }
    }};
    (@emit [$p0:pat] [$io0:expr] [$b0:expr] [$p1:pat] [$io1:expr] [$b1:expr]
        [$p2:pat] [$io2:expr] [$b2:expr]) => {{
        enum __SpindleSelect<T0, T1, T2> { B0(T0), B1(T1), B2(T2) }
        match $crate::__private::select::race([
            $crate::__private::select::branch($io0, __SpindleSelect::B0),
            $crate::__private::select::branch($io1, __SpindleSelect::B1),
            $crate::__private::select::branch($io2, __SpindleSelect::B2),
        ])
        .await?
        {
            __SpindleSelect::B0($p0) => $b0,
            __SpindleSelect::B1($p1) => $b1,
            __SpindleSelect::B2($p2) => $b2,
        }
    }};
    (@emit [$p0:pat] [$io0:expr] [$b0:expr] [$p1:pat] [$io1:expr] [$b1:expr]
        [$p2:pat] [$io2:expr] [$b2:expr] [$p3:pat] [$io3:expr] [$b3:expr]) => {{
        enum __SpindleSelect<T0, T1, T2, T3> { B0(T0), B1(T1), B2(T2), B3(T3) }
        match $crate::__private::select::race([
            $crate::__private::select::branch($io0, __SpindleSelect::B0),
            $crate::__private::select::branch($io1, __SpindleSelect::B1),
            $crate::__private::select::branch($io2, __SpindleSelect::B2),
            $crate::__private::select::branch($io3, __SpindleSelect::B3),
        ])
        .await?
        {
            __SpindleSelect::B0($p0) => $b0,
            __SpindleSelect::B1($p1) => $b1,
            __SpindleSelect::B2($p2) => $b2,
            __SpindleSelect::B3($p3) => $b3,
        }
    }};
    (@emit $($other:tt)*) => {
        ::core::compile_error!("select! takes 2 to 4 branches: `pattern = program => body,`")
    };
    ($($branches:tt)+) => {
        $crate::select!(@parse [] $($branches)+)
    };
}
