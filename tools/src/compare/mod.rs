//! `bench-compare`: the criterion benchmarks of two git revisions, built and
//! run on this machine, printed side by side as JMH-style tables.
//!
//! ```text
//! cargo run -p spindle-tools --release --bin bench-compare -- \
//!     [--base REV] [--head REV] [--bench NAME] [--filter REGEX] [--rounds N] [--quick]
//!     [--from-runs]
//! ```
//!
//! * **Sides.** `base` defaults to `git merge-base HEAD main` (HEAD when
//!   that fails); `head` defaults to the working tree, uncommitted changes
//!   included. A revision is checked out with `git worktree add --detach`
//!   at `target/bench-compare/<side>-<shortsha>` (reused when it is already
//!   there at that commit); worktrees of earlier comparisons under
//!   `target/bench-compare/` are removed with `git worktree remove`. The
//!   working tree builds in place. Each side builds into its own
//!   `CARGO_TARGET_DIR`, `target/bench-compare/target-<side>` (the working
//!   tree: `target-work`), so neither evicts the other's build. A revision
//!   that does not track `Cargo.lock` gets the working tree's, so both
//!   sides build against the same dependency versions.
//! * **Build.** `cargo bench -p benches --bench NAME --no-run
//!   --message-format=json` names the executable. `cargo metadata` is read
//!   first, so that a revision without the bench target is reported by
//!   name (with the targets it has) instead of as a build failure.
//! * **Rounds.** The two executables run alternately, `--rounds` times
//!   (base first in even rounds, head first in odd ones, so that drift of
//!   the machine hits both), each as `EXE --bench --noplot [REGEX]` with
//!   `CRITERION_HOME` set to a fresh `target/bench-compare/runs/<side>-round<k>`
//!   and `SPINDLE_BENCH_QUICK=1` exported under `--quick`.
//! * **Table.** Every `new/estimates.json` (the median and its confidence
//!   interval, ns per iteration) and `new/benchmark.json` (ids and the
//!   declared `Elements` throughput) is read back; one iteration is one
//!   operation, so a round's score is `1e9 / median_ns` ops/s. Per
//!   workload, one table in the format of JMH's output (as in Cats
//!   Effect's "Optimize IO's encoding" discussion): `Score` is the median
//!   of the rounds' scores, `Error` half their spread (with one round: half
//!   the width of criterion's confidence interval of the median),
//!   `head/base` the ratio of the scores (above 1: head is faster) and
//!   `Verdict` says `faster` or `slower` only where the difference is
//!   beyond the noise, `~` otherwise.
//! * **Noise.** Three rounds say little about one benchmark's noise, so
//!   the noise is pooled per runtime over the whole comparison
//!   ([`round_noise`]); a verdict needs the two sides' ranges apart *and*
//!   a difference beyond three standard errors ([`verdict`] says why, with
//!   the A/A comparison that set the rule). Below the tables, the summary
//!   gives each runtime's noise and how far the reference rows (tokio,
//!   whose code is the same on both sides) moved: a yardstick for the rest.
//! * **`--from-runs`** prints the last comparison's tables again from
//!   `target/bench-compare/runs` without building or running anything.
//!
//! Everything that can fail is a [`CompareError`] (or an [`ArgError`] for
//! the command line) with a message that says what to do; nothing here
//! panics on bad input. The tables go to stdout; progress, cargo's output
//!
//! # Files
//!
//! One concept a file; the items named here are re-exported from this
//! module.
//!
//! * `args.rs`: the command line: [`USAGE`], [`Args`] and its defaults,
//!   [`parse_args`].
//! * `error.rs`: [`CompareError`], everything a comparison can fail at.
//! * `git.rs`: running git and resolving a revision to its commit.
//! * `worktree.rs`: the two [`Side`]s: the working tree, or a revision in a
//!   worktree of its own; stale worktrees removed.
//! * `cargo.rs`: building a side's bench target and reading cargo's JSON
//!   ([`bench_targets`], [`bench_executable`], [`compiler_errors`]).
//! * `rounds.rs`: [`Rounds`], both sides' measurements per round, and
//!   reading them back for `--from-runs` ([`read_runs`]).
//! * `stats.rs`: [`score`], [`round_noise`], [`verdict`] and
//!   [`reference_drift`].
//! * `render.rs`: the JMH-style tables ([`render_tables`], [`workload_of`],
//!   [`Tally`]) and the whole output with its summary ([`report`]).
//! * `run.rs`: [`run()`], the comparison from end to end: the sides, the
//!   builds and the alternating rounds.

mod args;
mod cargo;
mod error;
mod git;
mod render;
mod rounds;
mod run;
mod stats;
mod worktree;

pub use args::{Args, DEFAULT_BENCH, DEFAULT_ROUNDS, USAGE, parse_args};
pub use cargo::{bench_executable, bench_targets, compiler_errors};
pub use error::CompareError;
pub use render::{Tally, render_tables, report, workload_of};
pub use rounds::{Rounds, read_runs};
pub use run::run;
pub use stats::{
    Score, VERDICT_STANDARD_ERRORS, Verdict, reference_drift, round_noise, score, verdict,
};
pub use worktree::Side;

pub use crate::cli::ArgError;
pub use crate::results::{BenchId, Measurement};
