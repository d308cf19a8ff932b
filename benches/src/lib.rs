//! Shared pieces of the Spindle benchmarks; the workloads live in `benches/`.
//!
//! The suites port Cats Effect's JMH microbenchmarks (ShallowBind, DeepBind,
//! Attempt, HandleError, MapCalls) with the same shapes and sizes, and run
//! each one twice side by side: on Spindle's single-threaded executor and,
//! as the same-run reference, written as boxed `async` recursion on tokio's
//! current-thread runtime. `BENCHMARKS.md` at the repository root holds the
//! latest numbers and says how to reproduce them; `benches/report.py` turns
//! criterion's estimates into its tables.
//!
//! Only what both sides share lives here: the sizes, the error value of the
//! error benchmarks, and a helper that reads a Spindle outcome. tokio and
//! criterion stay dev-dependencies of this crate.

#![deny(missing_docs)]

use core::fmt::Debug;

use io_core::Outcome;

/// The loop size of ShallowBind, DeepBind, Attempt and HandleError (Cats
/// Effect's `@Param(Array("10000"))`).
pub const SIZE: i32 = 10_000;

/// How many `map` calls one MapCalls operation runs in total (Cats Effect's
/// `12000`): `MAP_CALLS_TOTAL / batch` runs of a chain of `batch` maps.
pub const MAP_CALLS_TOTAL: usize = 12_000;

/// The error the error benchmarks raise: the counterpart of the single
/// `RuntimeException("dummy")` that Cats Effect allocates once per run and
/// raises at every step. It is a reference to static data, so raising it
/// allocates nothing, as in Cats Effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dummy(pub &'static str);

/// The one error value every error benchmark raises.
pub const DUMMY: Dummy = Dummy("dummy");

/// The value of a Spindle outcome that must have succeeded (a benchmark that
/// fails, panics or is canceled is a bug of the benchmark, not a result).
#[inline]
#[track_caller]
pub fn succeeded<A, E: Debug>(outcome: Outcome<A, E>) -> A {
    match outcome {
        Outcome::Succeeded(a) => a,
        Outcome::Errored(e) => panic!("benchmark program failed with {e:?}"),
        Outcome::Canceled => panic!("benchmark program was canceled"),
        Outcome::Panicked(p) => panic!("benchmark program panicked: {p}"),
    }
}
