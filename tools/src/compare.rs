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
//! and the benchmarks' own output go to stderr.

use core::fmt;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub use crate::results::{BenchId, Measurement};
use crate::results::{ResultsError, read_results};

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

/// The usage text of `bench-compare --help`.
pub const USAGE: &str = "\
bench-compare: run the criterion benchmarks of two git revisions alternately and compare them

usage: cargo run -p spindle-tools --release --bin bench-compare -- [options]

options:
  --base REV      the baseline revision (default: `git merge-base HEAD main`, or HEAD)
  --head REV      the revision under test (default: the working tree, uncommitted changes included)
  --bench NAME    the bench target of crate `benches` (default: suite)
  --filter REGEX  criterion's filter: only benchmarks whose id matches
  --rounds N      how many times each side runs, alternating (default: 3)
  --quick         export SPINDLE_BENCH_QUICK=1 to the benchmarks
  --from-runs     build and run nothing: print the last comparison's tables again
  -h, --help      print this text

Tables go to stdout; progress and the benchmarks' own output to stderr.
Worktrees, builds and criterion's results live under target/bench-compare/.";

/// The bench target compared when `--bench` is not given.
pub const DEFAULT_BENCH: &str = "suite";

/// The rounds run when `--rounds` is not given.
pub const DEFAULT_ROUNDS: u32 = 3;

/// What `bench-compare` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `--base`: `None` means `git merge-base HEAD main` (or HEAD).
    pub base: Option<String>,
    /// `--head`: `None` means the working tree.
    pub head: Option<String>,
    /// `--bench`: the bench target's name.
    pub bench: String,
    /// `--filter`: criterion's positional filter (a regex).
    pub filter: Option<String>,
    /// `--rounds`: at least one.
    pub rounds: u32,
    /// `--quick`: export `SPINDLE_BENCH_QUICK=1`.
    pub quick: bool,
    /// `--from-runs`: build and run nothing; print the tables of the last
    /// comparison's results again (with today's statistics).
    pub from_runs: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            base: None,
            head: None,
            bench: DEFAULT_BENCH.to_owned(),
            filter: None,
            rounds: DEFAULT_ROUNDS,
            quick: false,
            from_runs: false,
        }
    }
}

pub use crate::cli::ArgError;
use crate::cli::{invalid, pairs};

/// Parses the arguments after the program name: `--flag value` or
/// `--flag=value`; a repeated flag keeps its last value.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, ArgError> {
    let with_values = ["--base", "--head", "--bench", "--filter", "--rounds"];
    let mut out = Args::default();
    for (flag, value) in pairs(args, &with_values, &["--quick", "--from-runs"])? {
        let Some(value) = value else {
            match flag {
                "--quick" => out.quick = true,
                _ => out.from_runs = true,
            }
            continue;
        };
        if value.is_empty() {
            return Err(invalid(flag, &value, "must not be empty"));
        }
        match flag {
            "--base" => out.base = Some(value),
            "--head" => out.head = Some(value),
            "--bench" => out.bench = value,
            "--filter" => out.filter = Some(value),
            _ => {
                out.rounds = match value.trim().parse::<u32>() {
                    Ok(n) if n >= 1 => n,
                    Ok(_) => return Err(invalid(flag, &value, "at least one round is needed")),
                    Err(_) => return Err(invalid(flag, &value, "expected a whole number")),
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Why a comparison could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompareError {
    /// `git` could not be started.
    GitMissing(String),
    /// `cargo` could not be started.
    CargoMissing(String),
    /// This directory is not inside a git repository.
    NotARepository(String),
    /// A revision git does not know.
    UnknownRevision {
        /// The revision as given.
        rev: String,
        /// git's message.
        message: String,
    },
    /// A git command failed.
    Git {
        /// The command line.
        command: String,
        /// git's message.
        message: String,
    },
    /// A side's revision has no bench target of that name.
    NoBenchTarget {
        /// `base` or `head`.
        side: &'static str,
        /// The side's revision, in words.
        rev: String,
        /// The missing target.
        name: String,
        /// The bench targets it does have.
        available: Vec<String>,
    },
    /// `cargo bench --no-run` failed.
    BuildFailed {
        /// `base` or `head`.
        side: &'static str,
        /// The last lines of cargo's output.
        tail: String,
    },
    /// The build succeeded but named no executable for the target.
    NoExecutable {
        /// `base` or `head`.
        side: &'static str,
        /// The bench target.
        name: String,
    },
    /// A bench executable exited with failure.
    RunFailed {
        /// `base` or `head`.
        side: &'static str,
        /// The round (from 1).
        round: u32,
        /// How it ended.
        status: String,
    },
    /// A side produced no `estimates.json` at all.
    NoResults {
        /// `base` or `head`.
        side: &'static str,
        /// Where criterion was told to write.
        dir: PathBuf,
        /// The filter, if any.
        filter: Option<String>,
    },
    /// `--from-runs` found no earlier comparison's rounds of both sides.
    NoRuns(PathBuf),
    /// A file criterion wrote could not be read.
    BadResult {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A file-system operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The error.
        message: String,
    },
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::GitMissing(e) => {
                write!(f, "cannot run git ({e}); install git and put it on PATH")
            }
            CompareError::CargoMissing(e) => write!(
                f,
                "cannot run cargo ({e}); run through `cargo run` or put cargo on PATH"
            ),
            CompareError::NotARepository(e) => {
                write!(f, "not inside a git repository: {e}")
            }
            CompareError::UnknownRevision { rev, message } => {
                write!(f, "unknown revision {rev:?}: {message}")
            }
            CompareError::Git { command, message } => write!(f, "`{command}` failed: {message}"),
            CompareError::NoBenchTarget {
                side,
                rev,
                name,
                available,
            } => {
                write!(
                    f,
                    "the {side} side, {rev}, has no bench target `{name}` in crate `benches`"
                )?;
                if available.is_empty() {
                    f.write_str(" (it has no bench targets at all)")
                } else {
                    write!(
                        f,
                        " (it has: {}); pick one of those with --bench, or another --{side} revision",
                        available.join(", ")
                    )
                }
            }
            CompareError::BuildFailed { side, tail } => {
                write!(
                    f,
                    "building the {side} side failed; cargo's last lines:\n{tail}"
                )
            }
            CompareError::NoExecutable { side, name } => write!(
                f,
                "cargo built the {side} side but named no executable for bench target `{name}`"
            ),
            CompareError::RunFailed {
                side,
                round,
                status,
            } => write!(
                f,
                "the {side} benchmarks failed in round {round} ({status}); their output is above"
            ),
            CompareError::NoResults { side, dir, filter } => {
                write!(
                    f,
                    "the {side} side wrote no criterion results under {}",
                    dir.display()
                )?;
                match filter {
                    Some(filter) => write!(f, " (does the filter {filter:?} match any benchmark?)"),
                    None => Ok(()),
                }
            }
            CompareError::NoRuns(dir) => write!(
                f,
                "no base-round<k> and head-round<k> results under {}; run a comparison \
                 without --from-runs first",
                dir.display()
            ),
            CompareError::BadResult { path, message } => {
                write!(f, "{}: {message}", path.display())
            }
            CompareError::Io { context, message } => write!(f, "{context}: {message}"),
        }
    }
}

impl std::error::Error for CompareError {}

impl From<ResultsError> for CompareError {
    fn from(e: ResultsError) -> Self {
        match e {
            ResultsError::Io { path, source } => {
                io_error(format!("reading {}", path.display()), &source)
            }
            ResultsError::Bad { path, message } => CompareError::BadResult { path, message },
        }
    }
}

fn io_error(context: impl Into<String>, e: &io::Error) -> CompareError {
    CompareError::Io {
        context: context.into(),
        message: e.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Statistics and verdicts
// ---------------------------------------------------------------------------

/// One side's score for one benchmark over the rounds, in ops/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// In how many rounds the benchmark ran.
    pub count: usize,
    /// The median of the rounds' ops/s.
    pub score: f64,
    /// Half the spread of the rounds (one round: half the width of the
    /// median's confidence interval).
    pub error: f64,
    /// The lowest ops/s of the range the error describes.
    pub low: f64,
    /// The highest.
    pub high: f64,
}

/// The score of one benchmark from its measurements in each round
/// (`None` when there are none). One iteration is one operation, so a
/// round scores `1e9 / median_ns` ops/s.
pub fn score(rounds: &[&Measurement]) -> Option<Score> {
    let mut ops: Vec<f64> = rounds.iter().map(|m| 1e9 / m.median_ns).collect();
    ops.sort_by(f64::total_cmp);
    let (&low, &high) = (ops.first()?, ops.last()?);
    let n = ops.len();
    let score = if n % 2 == 1 {
        ops[n / 2]
    } else {
        (ops[n / 2 - 1] + ops[n / 2]) / 2.0
    };
    let (low, high) = if n == 1 {
        let (lower_ns, upper_ns) = rounds[0].median_ci_ns;
        let low = if upper_ns > 0.0 { 1e9 / upper_ns } else { low };
        let high = if lower_ns > 0.0 { 1e9 / lower_ns } else { high };
        (low.min(score), high.max(score))
    } else {
        (low, high)
    };
    Some(Score {
        count: n,
        score,
        error: (high - low) / 2.0,
        low,
        high,
    })
}

/// Head against base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Head's score is higher, beyond the noise.
    Faster,
    /// Head's score is lower, beyond the noise.
    Slower,
    /// The difference is within the noise.
    Noise,
}

impl Verdict {
    /// The table cell: `faster`, `slower` or `~`.
    pub fn cell(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Noise => "~",
        }
    }
}

/// How many standard errors a difference must exceed to be a verdict.
///
/// Three: with dozens of rows per comparison, a smaller factor flags rows
/// of identical code by chance (see [`verdict`]).
pub const VERDICT_STANDARD_ERRORS: f64 = 3.0;

/// The standard error of a median of `n` rounds relative to that of their
/// mean: the median of a few normal values is about 1.25 times as variable.
const MEDIAN_EFFICIENCY: f64 = 1.25;

/// Sums of squared deviations of `ln(ops/s)` from the side's mean, and
/// their degrees of freedom (rounds − 1), for one side's rounds of one
/// benchmark; `None` with fewer than two rounds.
fn log_spread(ms: &[&Measurement]) -> Option<(f64, usize)> {
    if ms.len() < 2 {
        return None;
    }
    let logs: Vec<f64> = ms.iter().map(|m| (1e9 / m.median_ns).ln()).collect();
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let squares = logs.iter().map(|x| (x - mean).powi(2)).sum();
    Some((squares, logs.len() - 1))
}

/// The round-to-round noise of each runtime (criterion function id) in a
/// comparison: the standard deviation of `ln(ops/s)` between rounds of the
/// same side, pooled over every benchmark of that runtime and both sides
/// (so about the relative spread: 0.06 is ±6 %). A runtime none of whose
/// benchmarks ran twice on a side has no entry.
///
/// Pooled because three rounds say little about one benchmark's noise: on
/// the 2-core development machine a benchmark's rounds may agree within
/// 1 % three times and still move by 6 % in the next process. The runtimes
/// are kept apart because their noise differs (exec-wstp's two workers
/// move more than exec-single's one thread).
pub fn round_noise(rounds: &Rounds) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for side in [by_id(&rounds.base), by_id(&rounds.head)] {
        for (id, ms) in side {
            if let Some((squares, dof)) = log_spread(&ms) {
                let entry = sums.entry(id.function.clone()).or_default();
                entry.0 += squares;
                entry.1 += dof;
            }
        }
    }
    sums.into_iter()
        .filter(|(_, (_, dof))| *dof > 0)
        .map(|(function, (squares, dof))| (function, (squares / dof as f64).sqrt()))
        .collect()
}

/// One benchmark's own round-to-round noise, pooled over its two sides,
/// like [`round_noise`] for one row.
fn own_noise(base: &[&Measurement], head: &[&Measurement]) -> Option<f64> {
    let (mut squares, mut dof) = (0.0, 0);
    for (s, d) in [log_spread(base), log_spread(head)].into_iter().flatten() {
        squares += s;
        dof += d;
    }
    (dof > 0).then(|| (squares / dof as f64).sqrt())
}

/// `head.score / base.score` (above 1: head is faster) and the verdict.
///
/// `noise` is the round-to-round standard deviation of `ln(ops/s)` to
/// assume for this benchmark (the larger of its runtime's pooled
/// [`round_noise`] and its own). A difference is a verdict only when
/// both hold:
///
/// * the two sides' ranges (`low..=high`: every round, or with one round
///   criterion's confidence interval of the median) do not overlap, and
/// * with at least two rounds on each side, `|ln(ratio)|` exceeds
///   [`VERDICT_STANDARD_ERRORS`] standard errors of the difference of two
///   medians, `1.25 × noise × √(1/n_base + 1/n_head)`.
///
/// Why this strict: in an A/A comparison (one commit against itself,
/// `--quick`, 3 rounds, 74 benchmarks, 2026-11-30) the earlier rule
/// (ranges apart *or* the ratio beyond the two relative errors) gave 17
/// verdicts to identical code, some of 15 %; this one gives none.
pub fn verdict(base: &Score, head: &Score, noise: Option<f64>) -> (f64, Verdict) {
    let ratio = head.score / base.score;
    let overlap = base.low <= head.high && head.low <= base.high;
    let beyond_noise = match noise {
        Some(noise) if base.count >= 2 && head.count >= 2 => {
            let standard_error = MEDIAN_EFFICIENCY
                * noise
                * (1.0 / base.count as f64 + 1.0 / head.count as f64).sqrt();
            ratio.ln().abs() > VERDICT_STANDARD_ERRORS * standard_error
        }
        _ => true,
    };
    let verdict = if overlap || !beyond_noise || !ratio.is_finite() || ratio == 1.0 {
        Verdict::Noise
    } else if ratio > 1.0 {
        Verdict::Faster
    } else {
        Verdict::Slower
    };
    (ratio, verdict)
}

/// How the reference rows (runtimes `tokio` and `tokio_mt`) moved between
/// the two sides: (rows, median head/base, lowest, highest). Their programs
/// are the same on both sides unless the comparison changes
/// `suite/tokio_ref.rs`, so their movement is the machine's and the
/// build's, a yardstick for the Spindle rows. `None` without such rows.
pub fn reference_drift(rounds: &Rounds) -> Option<(usize, f64, f64, f64)> {
    let (base, head) = (by_id(&rounds.base), by_id(&rounds.head));
    let mut ratios: Vec<f64> = base
        .iter()
        .filter(|(id, _)| id.function.starts_with("tokio"))
        .filter_map(|(id, b)| Some(score(head.get(id)?)?.score / score(b)?.score))
        .filter(|r| r.is_finite())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => ratios[n / 2],
        _ => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
    };
    Some((n, median, ratios[0], ratios[n - 1]))
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

/// A group id's workload and the benchmark's name in the table:
/// `suite.ShallowBind.pure` is workload `ShallowBind`, name
/// `ShallowBind.pure`; `ShallowBind.pure` (the older bench files) the same;
/// a group without a dot is its own workload.
pub fn workload_of(group: &str) -> (&str, &str) {
    let name = group.strip_prefix("suite.").unwrap_or(group);
    let workload = name.split(['.', '/']).next().unwrap_or(name);
    (workload, name)
}

/// Runtimes in the order of the suite's description (`spindle` first: the
/// older bench files' name for exec-single); others after them,
/// alphabetically.
const RUNTIME_ORDER: [&str; 6] = ["spindle", "single", "wstp", "batching", "tokio", "tokio_mt"];

fn row_key(id: &BenchId) -> (String, usize, String, u64, String) {
    let (_, name) = workload_of(&id.group);
    let rank = RUNTIME_ORDER
        .iter()
        .position(|r| *r == id.function)
        .unwrap_or(RUNTIME_ORDER.len());
    let param = id.param.clone().unwrap_or_default();
    let numeric = param.parse::<u64>().unwrap_or(u64::MAX);
    (name.to_owned(), rank, id.function.clone(), numeric, param)
}

/// Both sides' measurements, one `Vec` per round.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    /// The base side.
    pub base: Vec<Vec<Measurement>>,
    /// The head side.
    pub head: Vec<Vec<Measurement>>,
}

/// How many benchmarks got each verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Head faster.
    pub faster: usize,
    /// Head slower.
    pub slower: usize,
    /// Within the noise.
    pub noise: usize,
    /// On one side only.
    pub one_sided: usize,
}

fn fmt_score(x: f64) -> String {
    format!("{x:.3}")
}

fn fmt_ratio(ratio: f64) -> String {
    if ratio >= 0.1 {
        format!("{ratio:.2}x")
    } else {
        format!("{ratio:.2e}x")
    }
}

/// Renders the tables, one per workload (sorted by name), each preceded by
/// its name and followed by a blank line, and counts the verdicts.
///
/// Each benchmark has a `base` row and a `head` row; the head row (or the
/// only row, `n/a` in the ratio, when one side lacks the benchmark) carries
/// the ratio and the verdict.
pub fn render_tables(rounds: &Rounds) -> (String, Tally) {
    let (base, head) = (by_id(&rounds.base), by_id(&rounds.head));
    let ids: BTreeSet<&BenchId> = base.keys().chain(head.keys()).collect();
    let mut workloads: BTreeMap<&str, Vec<&BenchId>> = BTreeMap::new();
    for id in ids {
        workloads
            .entry(workload_of(&id.group).0)
            .or_default()
            .push(id);
    }
    let noise_by_runtime = round_noise(rounds);
    let mut out = String::new();
    let mut tally = Tally::default();
    for (workload, mut ids) in workloads {
        ids.sort_by_key(|id| row_key(id));
        let mut rows = Vec::new();
        for id in ids {
            let (_, name) = workload_of(&id.group);
            let bench = if id.function.is_empty() {
                name.to_owned()
            } else {
                format!("{name}/{}", id.function)
            };
            let size = id
                .param
                .clone()
                .or_else(|| {
                    base.get(id)
                        .or_else(|| head.get(id))
                        .and_then(|ms| ms.first()?.elements)
                        .map(|e| e.to_string())
                })
                .unwrap_or_default();
            let b = base.get(id).and_then(|ms| score(ms));
            let h = head.get(id).and_then(|ms| score(ms));
            let (ratio, verdict) = match (&b, &h) {
                (Some(b), Some(h)) => {
                    let own = match (base.get(id), head.get(id)) {
                        (Some(bs), Some(hs)) => own_noise(bs, hs),
                        _ => None,
                    };
                    let noise = match (noise_by_runtime.get(&id.function).copied(), own) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    let (ratio, verdict) = verdict(b, h, noise);
                    match verdict {
                        Verdict::Faster => tally.faster += 1,
                        Verdict::Slower => tally.slower += 1,
                        Verdict::Noise => tally.noise += 1,
                    }
                    (fmt_ratio(ratio), verdict.cell().to_owned())
                }
                (Some(_), None) => {
                    tally.one_sided += 1;
                    ("n/a".to_owned(), "base only".to_owned())
                }
                _ => {
                    tally.one_sided += 1;
                    ("n/a".to_owned(), "head only".to_owned())
                }
            };
            let sides = [("base", b), ("head", h)];
            let present: Vec<_> = sides.iter().filter(|(_, s)| s.is_some()).collect();
            for (i, (side, s)) in present.iter().enumerate() {
                let Some(s) = s else { continue };
                let last = i + 1 == present.len();
                rows.push(Row {
                    bench: bench.clone(),
                    size: size.clone(),
                    side,
                    count: s.count.to_string(),
                    score: fmt_score(s.score),
                    error: fmt_score(s.error),
                    ratio: if last { ratio.clone() } else { String::new() },
                    verdict: if last { verdict.clone() } else { String::new() },
                });
            }
        }
        out.push_str(workload);
        out.push_str("\n\n");
        out.push_str(&render_rows(&rows));
        out.push('\n');
    }
    (out, tally)
}

/// A side's measurements grouped by benchmark, in round order.
fn by_id(side: &[Vec<Measurement>]) -> BTreeMap<BenchId, Vec<&Measurement>> {
    let mut by_id: BTreeMap<BenchId, Vec<&Measurement>> = BTreeMap::new();
    for round in side {
        for m in round {
            by_id.entry(m.id.clone()).or_default().push(m);
        }
    }
    by_id
}

/// One line of a table.
struct Row {
    bench: String,
    size: String,
    side: &'static str,
    count: String,
    score: String,
    error: String,
    ratio: String,
    verdict: String,
}

/// JMH's layout: `Benchmark` left-aligned, the numbers right-aligned,
/// `±` between Score and Error; then the side-by-side columns.
fn render_rows(rows: &[Row]) -> String {
    let width = |header: &str, cell: &dyn Fn(&Row) -> &str| {
        rows.iter()
            .map(|r| cell(r).chars().count())
            .chain([header.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let w_bench = width("Benchmark", &|r| &r.bench);
    let w_size = width("(size)", &|r| &r.size);
    let w_side = width("Side", &|r| r.side);
    let w_cnt = width("Cnt", &|r| &r.count);
    let w_score = width("Score", &|r| &r.score);
    let w_error = width("Error", &|r| &r.error);
    let w_ratio = width("head/base", &|r| &r.ratio);
    let mut out = String::new();
    let mut line = |bench: &str,
                    size: &str,
                    side: &str,
                    mode: &str,
                    cnt: &str,
                    score: &str,
                    pm: &str,
                    error: &str,
                    units: &str,
                    ratio: &str,
                    verdict: &str| {
        let text = format!(
            "{bench:<w_bench$}  {size:>w_size$}  {side:>w_side$}  {mode:>5}  {cnt:>w_cnt$}  \
             {score:>w_score$} {pm} {error:>w_error$}  {units:<5}  {ratio:>w_ratio$}  {verdict}"
        );
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(
        "Benchmark",
        "(size)",
        "Side",
        "Mode",
        "Cnt",
        "Score",
        " ",
        "Error",
        "Units",
        "head/base",
        "Verdict",
    );
    for r in rows {
        line(
            &r.bench, &r.size, r.side, "thrpt", &r.count, &r.score, "±", &r.error, "ops/s",
            &r.ratio, &r.verdict,
        );
    }
    out
}

// ---------------------------------------------------------------------------
// Cargo's output
// ---------------------------------------------------------------------------

/// The executable of bench target `name` in the JSON lines of `cargo bench
/// --no-run --message-format=json` (the last `compiler-artifact` of a
/// `bench` target of that name that names one).
pub fn bench_executable(json_lines: &str, name: &str) -> Option<PathBuf> {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg.get("reason").and_then(Value::as_str) == Some("compiler-artifact"))
        .filter(|msg| {
            let target = msg.get("target");
            target.and_then(|t| t.get("name")).and_then(Value::as_str) == Some(name)
                && target
                    .and_then(|t| t.get("kind"))
                    .and_then(Value::as_array)
                    .is_some_and(|kinds| kinds.iter().any(|k| k.as_str() == Some("bench")))
        })
        .filter_map(|msg| msg.get("executable")?.as_str().map(PathBuf::from))
        .next_back()
}

/// The rendered error messages among cargo's JSON lines (what a failed
/// build would have printed).
pub fn compiler_errors(json_lines: &str) -> Vec<String> {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg.get("reason").and_then(Value::as_str) == Some("compiler-message"))
        .filter_map(|msg| {
            let message = msg.get("message")?;
            let level = message.get("level")?.as_str()?;
            if !level.starts_with("error") {
                return None;
            }
            Some(message.get("rendered")?.as_str()?.trim_end().to_owned())
        })
        .collect()
}

/// The bench targets of package `package` in `cargo metadata --no-deps
/// --format-version 1` output, or `None` when the package is not there.
pub fn bench_targets(metadata_json: &str, package: &str) -> Option<Vec<String>> {
    let json: Value = serde_json::from_str(metadata_json).ok()?;
    let pkg = json
        .get("packages")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(package))?;
    let mut names: Vec<String> = pkg
        .get("targets")?
        .as_array()?
        .iter()
        .filter(|t| {
            t.get("kind")
                .and_then(Value::as_array)
                .is_some_and(|kinds| kinds.iter().any(|k| k.as_str() == Some("bench")))
        })
        .filter_map(|t| t.get("name")?.as_str().map(str::to_owned))
        .collect();
    names.sort();
    Some(names)
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ---------------------------------------------------------------------------
// Git and the sides
// ---------------------------------------------------------------------------

/// Runs git in `dir`; its trimmed stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<Result<String, String>, CompareError> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CompareError::GitMissing(e.to_string()))?;
    if output.status.success() {
        Ok(Ok(String::from_utf8_lossy(&output.stdout)
            .trim()
            .to_owned()))
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        Ok(Err(if stderr.is_empty() {
            output.status.to_string()
        } else {
            stderr
        }))
    }
}

/// Runs git in `dir` where a failure is an error.
fn git_ok(dir: &Path, args: &[&str]) -> Result<String, CompareError> {
    git(dir, args)?.map_err(|message| CompareError::Git {
        command: format!("git {}", args.join(" ")),
        message,
    })
}

/// The full commit id of `rev`.
fn resolve(root: &Path, rev: &str) -> Result<String, CompareError> {
    git(
        root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )?
    .map_err(|message| CompareError::UnknownRevision {
        rev: rev.to_owned(),
        message: if message.starts_with("exit status") {
            "git does not know it (a branch, tag or commit of this repository?)".to_owned()
        } else {
            message
        },
    })
}

/// Where one side is built and run.
#[derive(Debug, Clone)]
pub struct Side {
    /// `base` or `head`.
    pub name: &'static str,
    /// The revision, in words.
    pub label: String,
    /// The checkout: the repository itself for the working tree.
    pub checkout: PathBuf,
    /// Its `CARGO_TARGET_DIR`.
    pub target_dir: PathBuf,
    /// The commit, or `None` for the working tree.
    pub commit: Option<String>,
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

/// The worktrees git has registered: (path, detached).
fn worktrees(root: &Path) -> Result<Vec<(PathBuf, bool)>, CompareError> {
    let list = git_ok(root, &["worktree", "list", "--porcelain"])?;
    let mut out = Vec::new();
    for block in list.split("\n\n") {
        let mut path = None;
        let mut detached = false;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if line == "detached" {
                detached = true;
            }
        }
        if let Some(p) = path {
            out.push((p, detached));
        }
    }
    Ok(out)
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Checks `sha` out at `<dir>/<side>-<shortsha>`, reusing a clean worktree
/// already there at that commit.
fn materialise(
    root: &Path,
    dir: &Path,
    side: &'static str,
    sha: &str,
) -> Result<PathBuf, CompareError> {
    let path = dir.join(format!("{side}-{}", short(sha)));
    let path_str = path.to_string_lossy().into_owned();
    git_ok(root, &["worktree", "prune"])?;
    let registered = worktrees(root)?.iter().any(|(p, _)| same_path(p, &path));
    if registered {
        let at = git(&path, &["rev-parse", "HEAD"])?.unwrap_or_default();
        let dirty = git(&path, &["status", "--porcelain", "--untracked-files=no"])?
            .map(|s| !s.is_empty())
            .unwrap_or(true);
        if at == sha && !dirty {
            eprintln!("bench-compare: {side}: reusing worktree {path_str}");
            return Ok(path);
        }
        eprintln!("bench-compare: {side}: worktree {path_str} is stale; replacing it");
        git_ok(root, &["worktree", "remove", "--force", &path_str])?;
    } else if path.exists() {
        // A worktree whose registration git has pruned leaves a `.git` file
        // naming its old admin directory: ours to delete. Anything else
        // there was not made by this tool.
        let leftover =
            std::fs::read_to_string(path.join(".git")).is_ok_and(|s| s.starts_with("gitdir:"));
        if !leftover {
            return Err(CompareError::Io {
                context: format!("preparing the {side} worktree"),
                message: format!("{path_str} exists and is not a git worktree; remove it by hand"),
            });
        }
        std::fs::remove_dir_all(&path)
            .map_err(|e| io_error(format!("removing the stale {path_str}"), &e))?;
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| io_error(format!("creating {}", dir.display()), &e))?;
    eprintln!(
        "bench-compare: {side}: git worktree add --detach {path_str} {}",
        short(sha)
    );
    git_ok(root, &["worktree", "add", "--detach", &path_str, sha])?;
    Ok(path)
}

/// Removes the detached worktrees under `dir` named `base-*` or `head-*`
/// that this comparison does not use. A failure is only reported.
fn remove_stale_worktrees(root: &Path, dir: &Path, keep: &[&Path]) -> Result<(), CompareError> {
    for (path, detached) in worktrees(root)? {
        let ours = path.parent().is_some_and(|p| same_path(p, dir))
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("base-") || n.starts_with("head-"));
        if !ours || !detached || keep.iter().any(|k| same_path(k, &path)) {
            continue;
        }
        let path_str = path.to_string_lossy().into_owned();
        match git(root, &["worktree", "remove", "--force", &path_str])? {
            Ok(_) => eprintln!("bench-compare: removed the stale worktree {path_str}"),
            Err(e) => {
                eprintln!("bench-compare: could not remove the stale worktree {path_str}: {e}")
            }
        }
    }
    Ok(())
}

/// The side for `rev` (`None`: the working tree).
fn prepare_side(
    root: &Path,
    dir: &Path,
    name: &'static str,
    rev: Option<&str>,
    default_label: Option<String>,
) -> Result<Side, CompareError> {
    let Some(rev) = rev else {
        let head = git(root, &["rev-parse", "--short=10", "HEAD"])?.unwrap_or_default();
        let dirty = !git_ok(root, &["status", "--porcelain", "--untracked-files=no"])?.is_empty();
        let label = format!(
            "working tree at HEAD {head}{}",
            if dirty {
                " with uncommitted changes"
            } else {
                ", clean"
            }
        );
        return Ok(Side {
            name,
            label,
            checkout: root.to_path_buf(),
            target_dir: dir.join("target-work"),
            commit: None,
        });
    };
    let sha = resolve(root, rev)?;
    let checkout = materialise(root, dir, name, &sha)?;
    // Cargo.lock untracked at that commit: build against the working
    // tree's, so that both sides use the same dependency versions.
    let tracked = !git_ok(root, &["ls-tree", "--name-only", &sha, "Cargo.lock"])?.is_empty();
    let lock = root.join("Cargo.lock");
    if !tracked && lock.is_file() {
        std::fs::copy(&lock, checkout.join("Cargo.lock"))
            .map_err(|e| io_error("copying Cargo.lock into the worktree", &e))?;
    }
    Ok(Side {
        name,
        label: format!(
            "{} at {}",
            default_label.as_deref().unwrap_or(rev),
            short(&sha)
        ),
        checkout,
        target_dir: dir.join(format!("target-{name}")),
        commit: Some(sha),
    })
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Builds `bench` on `side` and returns its executable.
fn build_side(side: &Side, bench: &str) -> Result<PathBuf, CompareError> {
    let metadata = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(&side.checkout)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CompareError::CargoMissing(e.to_string()))?;
    if !metadata.status.success() {
        return Err(CompareError::BuildFailed {
            side: side.name,
            tail: tail(&String::from_utf8_lossy(&metadata.stderr), 40),
        });
    }
    let targets = bench_targets(&String::from_utf8_lossy(&metadata.stdout), "benches");
    if !targets
        .as_ref()
        .is_some_and(|t| t.iter().any(|t| t == bench))
    {
        return Err(CompareError::NoBenchTarget {
            side: side.name,
            rev: side.label.clone(),
            name: bench.to_owned(),
            available: targets.unwrap_or_default(),
        });
    }
    eprintln!(
        "bench-compare: {}: cargo bench -p benches --bench {bench} --no-run (in {}, CARGO_TARGET_DIR={})",
        side.name,
        side.checkout.display(),
        side.target_dir.display()
    );
    let mut child = cargo()
        .args(["bench", "-p", "benches", "--bench", bench, "--no-run"])
        .arg("--message-format=json")
        .current_dir(&side.checkout)
        .env("CARGO_TARGET_DIR", &side.target_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CompareError::CargoMissing(e.to_string()))?;
    // cargo's progress goes on to our stderr as it comes; the last lines
    // are kept for the error message.
    let stderr = child.stderr.take();
    let echo = std::thread::spawn(move || {
        let mut last = VecDeque::new();
        if let Some(stderr) = stderr {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if last.len() == 40 {
                    last.pop_front();
                }
                last.push_back(line);
            }
        }
        last.into_iter().collect::<Vec<_>>().join("\n")
    });
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout)
            .map_err(|e| io_error("reading cargo's output", &e))?;
    }
    let status = child
        .wait()
        .map_err(|e| io_error("waiting for cargo", &e))?;
    let stderr_tail = echo.join().unwrap_or_default();
    if !status.success() {
        let mut text = compiler_errors(&stdout).join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&stderr_tail);
        return Err(CompareError::BuildFailed {
            side: side.name,
            tail: tail(&text, 40),
        });
    }
    bench_executable(&stdout, bench).ok_or_else(|| CompareError::NoExecutable {
        side: side.name,
        name: bench.to_owned(),
    })
}

/// Runs one side's executable once with criterion writing to `home`.
fn run_once(
    side: &Side,
    exe: &Path,
    home: &Path,
    args: &Args,
    round: u32,
) -> Result<(), CompareError> {
    std::fs::create_dir_all(home)
        .map_err(|e| io_error(format!("creating {}", home.display()), &e))?;
    let mut command = Command::new(exe);
    command.args(["--bench", "--noplot"]);
    if let Some(filter) = &args.filter {
        command.arg(filter);
    }
    // As `cargo bench` does: the package's directory.
    let package_dir = side.checkout.join("benches");
    if package_dir.is_dir() {
        command.current_dir(&package_dir);
    }
    command.env("CRITERION_HOME", home);
    if args.quick {
        command.env("SPINDLE_BENCH_QUICK", "1");
    }
    // The benchmarks' report goes to stderr: stdout is the tables'.
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(io::stderr()))
        .stderr(Stdio::inherit());
    let status = command.status().map_err(|e| {
        io_error(
            format!("starting the {} benchmarks {}", side.name, exe.display()),
            &e,
        )
    })?;
    if !status.success() {
        return Err(CompareError::RunFailed {
            side: side.name,
            round,
            status: status.to_string(),
        });
    }
    Ok(())
}

/// The whole comparison: the tables (with a heading and a summary) as
/// printed on stdout.
pub fn run(args: &Args) -> Result<String, CompareError> {
    let cwd = std::env::current_dir().map_err(|e| io_error("finding this directory", &e))?;
    let root = git(&cwd, &["rev-parse", "--show-toplevel"])?
        .map(PathBuf::from)
        .map_err(CompareError::NotARepository)?;
    let dir = root.join("target").join("bench-compare");
    if args.from_runs {
        let runs = dir.join("runs");
        let rounds = read_runs(&runs)?;
        let header = format!(
            "bench-compare: the last comparison's results, {} base and {} head round(s)\n\n",
            rounds.base.len(),
            rounds.head.len()
        );
        return Ok(report(&header, &rounds, &runs));
    }

    let (base_rev, base_label) = match &args.base {
        Some(rev) => (rev.clone(), None),
        None => match git(&root, &["merge-base", "HEAD", "main"])? {
            Ok(sha) => {
                let label = "merge-base of HEAD and main".to_owned();
                (sha, Some(label))
            }
            Err(_) => (
                "HEAD".to_owned(),
                Some("HEAD (no merge-base with main)".to_owned()),
            ),
        },
    };
    let base = prepare_side(&root, &dir, "base", Some(&base_rev), base_label)?;
    let head = prepare_side(&root, &dir, "head", args.head.as_deref(), None)?;
    let keep: Vec<&Path> = [&base, &head]
        .iter()
        .filter(|s| s.commit.is_some())
        .map(|s| s.checkout.as_path())
        .collect();
    remove_stale_worktrees(&root, &dir, &keep)?;

    let base_exe = build_side(&base, &args.bench)?;
    let head_exe = build_side(&head, &args.bench)?;

    let runs = dir.join("runs");
    match std::fs::remove_dir_all(&runs) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(format!("clearing {}", runs.display()), &e)),
    }
    let mut rounds = Rounds::default();
    for round in 1..=args.rounds {
        let order = if round % 2 == 1 {
            [(&base, &base_exe), (&head, &head_exe)]
        } else {
            [(&head, &head_exe), (&base, &base_exe)]
        };
        for (side, exe) in order {
            let home = runs.join(format!("{}-round{round}", side.name));
            eprintln!(
                "bench-compare: round {round}/{}: {} ({})",
                args.rounds, side.name, side.label
            );
            run_once(side, exe, &home, args, round)?;
            let found = read_results(&home)?;
            if found.is_empty() {
                return Err(CompareError::NoResults {
                    side: side.name,
                    dir: home,
                    filter: args.filter.clone(),
                });
            }
            if side.name == "base" {
                rounds.base.push(found);
            } else {
                rounds.head.push(found);
            }
        }
    }

    let header = format!(
        "bench-compare: bench `{}`, {} round{}{}{}\n  base: {}\n  head: {}\n\n",
        args.bench,
        args.rounds,
        if args.rounds == 1 { "" } else { "s" },
        args.filter
            .as_deref()
            .map(|f| format!(", filter {f:?}"))
            .unwrap_or_default(),
        if args.quick { ", quick" } else { "" },
        base.label,
        head.label,
    );
    Ok(report(&header, &rounds, &runs))
}

/// The whole output: `header`, the tables, the tally of verdicts, the
/// noise each runtime showed between rounds, the movement of the reference
/// rows, and where criterion's results are.
pub fn report(header: &str, rounds: &Rounds, runs: &Path) -> String {
    let (tables, tally) = render_tables(rounds);
    let mut out = String::from(header);
    out.push_str(&tables);
    out.push_str(&format!(
        "head vs base: {} faster, {} slower, {} within noise (~){}\n",
        tally.faster,
        tally.slower,
        tally.noise,
        if tally.one_sided > 0 {
            format!(", {} on one side only", tally.one_sided)
        } else {
            String::new()
        },
    ));
    let noise = round_noise(rounds);
    if !noise.is_empty() {
        let mut runtimes: Vec<(&String, &f64)> = noise.iter().collect();
        runtimes.sort_by_key(|(rt, _)| {
            RUNTIME_ORDER
                .iter()
                .position(|r| r == rt)
                .unwrap_or(RUNTIME_ORDER.len())
        });
        let list: Vec<String> = runtimes
            .iter()
            .map(|(rt, sd)| format!("{rt} {:.1}%", *sd * 100.0))
            .collect();
        out.push_str(&format!(
            "round-to-round noise (standard deviation, pooled per runtime): {}; \
             a verdict needs ranges apart and a difference beyond {} standard errors\n",
            list.join(", "),
            VERDICT_STANDARD_ERRORS
        ));
    }
    if let Some((n, median, low, high)) = reference_drift(rounds) {
        out.push_str(&format!(
            "reference rows (tokio, tokio_mt: the same code on both sides unless tokio_ref.rs \
             changed): {n}, head/base median {}, from {} to {}\n",
            fmt_ratio(median),
            fmt_ratio(low),
            fmt_ratio(high)
        ));
    }
    out.push_str(&format!("criterion's results: {}\n", runs.display()));
    out
}

/// `--from-runs`: the rounds of the last comparison, read back from `runs`
/// (`base-round<k>` and `head-round<k>` directories, in round order).
pub fn read_runs(runs: &Path) -> Result<Rounds, CompareError> {
    let entries = match std::fs::read_dir(runs) {
        Ok(entries) => entries,
        Err(e) => return Err(io_error(format!("reading {}", runs.display()), &e)),
    };
    let mut dirs: Vec<(u32, &'static str, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(format!("reading {}", runs.display()), &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        for side in ["base", "head"] {
            if let Some(k) = name
                .strip_prefix(side)
                .and_then(|rest| rest.strip_prefix("-round"))
                .and_then(|k| k.parse::<u32>().ok())
            {
                dirs.push((k, side, entry.path()));
            }
        }
    }
    dirs.sort();
    let mut rounds = Rounds::default();
    for (_, side, dir) in dirs {
        let found = read_results(&dir)?;
        if side == "base" {
            rounds.base.push(found);
        } else {
            rounds.head.push(found);
        }
    }
    if rounds.base.is_empty() || rounds.head.is_empty() {
        return Err(CompareError::NoRuns(runs.to_path_buf()));
    }
    Ok(rounds)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use crate::results::fixtures::{BENCHMARK, ESTIMATES};

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    fn measurement(group: &str, function: &str, size: &str, median_ns: f64) -> Measurement {
        Measurement {
            id: BenchId {
                group: group.to_owned(),
                function: function.to_owned(),
                param: Some(size.to_owned()),
            },
            elements: Some(10_000),
            median_ns,
            median_ci_ns: (median_ns * 0.99, median_ns * 1.01),
            written: None,
        }
    }

    /// Each round: one measurement per (group, function, median ns).
    fn rounds(side: &[&[(&str, &str, f64)]]) -> Vec<Vec<Measurement>> {
        side.iter()
            .map(|round| {
                round
                    .iter()
                    .map(|(g, f, ns)| measurement(g, f, "10000", *ns))
                    .collect()
            })
            .collect()
    }

    pub(crate) fn a_fresh_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bench-compare-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn the_score_is_the_median_of_the_rounds_and_the_error_half_their_spread() {
        let ms = [
            measurement("g", "f", "1", 1e6), // 1000 ops/s
            measurement("g", "f", "1", 5e5), // 2000 ops/s
            measurement("g", "f", "1", 8e5), // 1250 ops/s
        ];
        let s = score(&ms.iter().collect::<Vec<_>>()).expect("score");
        assert_eq!(s.count, 3);
        assert!((s.score - 1250.0).abs() < 1e-9);
        assert!((s.error - 500.0).abs() < 1e-9);
        assert_eq!((s.low, s.high), (1000.0, 2000.0));
    }

    #[test]
    fn one_round_takes_its_error_from_the_confidence_interval_of_the_median() {
        let mut m = measurement("g", "f", "1", 1e6);
        m.median_ci_ns = (8e5, 1.25e6); // 1250 .. 800 ops/s
        let s = score(&[&m]).expect("score");
        assert_eq!(s.count, 1);
        assert!((s.score - 1000.0).abs() < 1e-9);
        assert!((s.low - 800.0).abs() < 1e-9);
        assert!((s.high - 1250.0).abs() < 1e-9);
        assert!((s.error - 225.0).abs() < 1e-9);
    }

    fn s(score: f64, error: f64) -> Score {
        Score {
            count: 3,
            score,
            error,
            low: score - error,
            high: score + error,
        }
    }

    #[test]
    fn a_difference_beyond_the_noise_is_faster_or_slower() {
        // 20 % apart with 1 % noise: far beyond 3 standard errors.
        assert_eq!(
            verdict(&s(100.0, 2.0), &s(120.0, 2.0), Some(0.01)).1,
            Verdict::Faster
        );
        assert_eq!(
            verdict(&s(120.0, 2.0), &s(100.0, 2.0), Some(0.01)).1,
            Verdict::Slower
        );
        let (ratio, _) = verdict(&s(100.0, 2.0), &s(120.0, 2.0), Some(0.01));
        assert!((ratio - 1.2).abs() < 1e-12);
    }

    #[test]
    fn a_difference_within_the_noise_is_no_verdict() {
        assert_eq!(
            verdict(&s(100.0, 10.0), &s(105.0, 10.0), Some(0.01)).1,
            Verdict::Noise
        );
        assert_eq!(
            verdict(&s(100.0, 0.0), &s(100.0, 0.0), None).1,
            Verdict::Noise
        );
    }

    #[test]
    fn ranges_apart_are_no_verdict_when_the_runtime_is_noisier_than_the_difference() {
        // Three rounds each that happen not to overlap, 7 % apart, on a
        // runtime whose rounds move by 6 %: 3 standard errors are
        // 3 × 1.25 × 0.06 × √(2/3) = 18 %.
        let base = Score {
            count: 3,
            score: 100.0,
            error: 1.0,
            low: 99.0,
            high: 101.0,
        };
        let head = Score {
            count: 3,
            score: 107.0,
            error: 1.0,
            low: 106.0,
            high: 108.0,
        };
        assert_eq!(verdict(&base, &head, Some(0.06)).1, Verdict::Noise);
        // The same with 1 % noise is a verdict.
        assert_eq!(verdict(&base, &head, Some(0.01)).1, Verdict::Faster);
    }

    #[test]
    fn overlapping_ranges_are_never_a_verdict() {
        let base = Score {
            count: 3,
            score: 100.0,
            error: 40.0,
            low: 60.0,
            high: 140.0,
        };
        assert_eq!(verdict(&base, &s(130.0, 1.0), Some(0.0)).1, Verdict::Noise);
    }

    #[test]
    fn with_one_round_a_side_the_confidence_intervals_decide() {
        let one = |score: f64, low: f64, high: f64| Score {
            count: 1,
            score,
            error: (high - low) / 2.0,
            low,
            high,
        };
        assert_eq!(
            verdict(
                &one(100.0, 98.0, 102.0),
                &one(110.0, 108.0, 112.0),
                Some(0.5)
            )
            .1,
            Verdict::Faster
        );
        assert_eq!(
            verdict(&one(100.0, 95.0, 105.0), &one(104.0, 99.0, 109.0), None).1,
            Verdict::Noise
        );
    }

    #[test]
    fn round_noise_is_the_spread_of_log_scores_pooled_per_runtime() {
        // single: each benchmark's rounds at e^±0.05 around their centre;
        // tokio: two rounds at the same score.
        let (lo, hi) = ((-0.05f64).exp(), 0.05f64.exp());
        let data = Rounds {
            base: rounds(&[
                &[("A.x", "single", 1e5 * lo), ("A.x", "tokio", 2e5)],
                &[("A.x", "single", 1e5 * hi), ("A.x", "tokio", 2e5)],
            ]),
            head: rounds(&[
                &[("A.x", "single", 3e5 * lo), ("B.y", "single", 7e4 * hi)],
                &[("A.x", "single", 3e5 * hi), ("B.y", "single", 7e4 * lo)],
            ]),
        };
        let noise = round_noise(&data);
        // Deviations of ±0.05 from each mean, one degree of freedom per
        // pair: sqrt(2 × 0.05² / 1) = 0.0707.
        assert!(
            (noise["single"] - 0.05 * 2f64.sqrt()).abs() < 1e-9,
            "{noise:?}"
        );
        assert!(noise["tokio"].abs() < 1e-12, "{noise:?}");
        assert_eq!(noise.len(), 2);
        // One round per side: no noise to pool.
        let one = Rounds {
            base: rounds(&[&[("A.x", "single", 1e5)]]),
            head: rounds(&[&[("A.x", "single", 1e5)]]),
        };
        assert!(round_noise(&one).is_empty());
    }

    /// Deterministic ±`amplitude` wobble for round `k` of row `r`.
    fn wobble(r: usize, k: usize, amplitude: f64) -> f64 {
        let x = ((r * 7 + k * 13) % 11) as f64 / 10.0; // 0.0 ..= 1.0
        (amplitude * (2.0 * x - 1.0)).exp()
    }

    #[test]
    fn identical_code_with_noisy_rounds_gets_no_verdict_and_a_real_change_does() {
        // 40 rows on one runtime whose rounds wobble by up to ±8 %; the head
        // side of row 0 is 40 % slower, every other row is unchanged.
        let make = |side: usize| -> Vec<Vec<Measurement>> {
            (0..3)
                .map(|k| {
                    (0..40)
                        .map(|r| {
                            let slow = if side == 1 && r == 0 { 1.4 } else { 1.0 };
                            let ns = 1e5 * slow * wobble(r, k + 3 * side, 0.08);
                            measurement(&format!("W.v{r:02}"), "single", "10000", ns)
                        })
                        .collect()
                })
                .collect()
        };
        let data = Rounds {
            base: make(0),
            head: make(1),
        };
        let (text, tally) = render_tables(&data);
        assert_eq!(tally.slower, 1, "{text}");
        assert_eq!(tally.faster, 0, "{text}");
        assert_eq!(tally.noise, 39, "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("W.v00/single") && l.ends_with("slower")),
            "{text}"
        );
    }

    #[test]
    fn the_summary_gives_the_noise_per_runtime_and_the_reference_rows_drift() {
        let data = Rounds {
            base: rounds(&[
                &[("A.x", "single", 1e5), ("A.x", "tokio", 2e5)],
                &[("A.x", "single", 1.02e5), ("A.x", "tokio", 2e5)],
            ]),
            head: rounds(&[
                &[("A.x", "single", 1e5), ("A.x", "tokio", 1e5)],
                &[("A.x", "single", 1.02e5), ("A.x", "tokio", 1e5)],
            ]),
        };
        let out = report("H\n", &data, Path::new("/runs"));
        assert!(out.starts_with("H\nA\n"), "{out}");
        assert!(
            out.contains("round-to-round noise (standard deviation, pooled per runtime): single 1.4%, tokio 0.0%;"),
            "{out}"
        );
        assert!(
            out.contains("reference rows (tokio, tokio_mt: the same code on both sides unless tokio_ref.rs changed): 1, head/base median 2.00x, from 2.00x to 2.00x"),
            "{out}"
        );
        assert!(out.ends_with("criterion's results: /runs\n"), "{out}");
        assert_eq!(reference_drift(&Rounds::default()), None);
    }

    #[test]
    fn from_runs_reads_the_rounds_back_in_round_order_and_says_when_there_are_none() {
        let runs = a_fresh_dir("from-runs");
        let write = |dir: &str, ns: f64| {
            let new = runs.join(dir).join("suite.A.x/single/10000/new");
            std::fs::create_dir_all(&new).unwrap();
            std::fs::write(
                new.join("benchmark.json"),
                BENCHMARK.replace("suite.ShallowBind.pure", "suite.A.x"),
            )
            .unwrap();
            std::fs::write(
                new.join("estimates.json"),
                ESTIMATES.replace("320000.0", &format!("{ns:.1}")),
            )
            .unwrap();
        };
        assert_eq!(
            read_runs(&runs).unwrap_err(),
            CompareError::NoRuns(runs.clone())
        );
        for (dir, ns) in [
            ("base-round2", 2e5),
            ("head-round1", 3e5),
            ("base-round1", 1e5),
            ("other", 9e5),
        ] {
            write(dir, ns);
        }
        let rounds = read_runs(&runs).expect("rounds");
        let medians = |side: &[Vec<Measurement>]| -> Vec<f64> {
            side.iter().map(|r| r[0].median_ns).collect()
        };
        assert_eq!(medians(&rounds.base), [1e5, 2e5]);
        assert_eq!(medians(&rounds.head), [3e5]);
        let missing = read_runs(&runs.join("missing")).unwrap_err().to_string();
        assert!(missing.contains("missing"), "{missing}");
        let _ = std::fs::remove_dir_all(&runs);
    }

    #[test]
    fn workloads_are_the_group_without_the_suite_prefix_and_the_variant() {
        assert_eq!(
            workload_of("suite.ShallowBind.pure"),
            ("ShallowBind", "ShallowBind.pure")
        );
        assert_eq!(
            workload_of("DeepBind.delay"),
            ("DeepBind", "DeepBind.delay")
        );
        assert_eq!(workload_of("Tracing/off"), ("Tracing", "Tracing/off"));
        assert_eq!(workload_of("plain"), ("plain", "plain"));
    }

    #[test]
    fn the_table_is_aligned_like_jmh_and_marks_only_differences_beyond_the_noise() {
        let data = Rounds {
            base: rounds(&[
                &[
                    ("suite.ShallowBind.pure", "single", 1e5),
                    ("suite.ShallowBind.pure", "tokio", 2e5),
                ],
                &[
                    ("suite.ShallowBind.pure", "single", 1.01e5),
                    ("suite.ShallowBind.pure", "tokio", 2.1e5),
                ],
            ]),
            head: rounds(&[
                &[
                    ("suite.ShallowBind.pure", "single", 5e4),
                    ("suite.ShallowBind.pure", "tokio", 2.05e5),
                ],
                &[
                    ("suite.ShallowBind.pure", "single", 5.1e4),
                    ("suite.ShallowBind.pure", "tokio", 2.02e5),
                ],
            ]),
        };
        let (text, tally) = render_tables(&data);
        assert_eq!(
            tally,
            Tally {
                faster: 1,
                slower: 0,
                noise: 1,
                one_sided: 0
            }
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ShallowBind");
        assert_eq!(lines[1], "");
        let header = lines[2];
        let rows = &lines[3..7];
        assert!(header.starts_with("Benchmark "), "{header}");
        // Positions in characters (the header is ASCII; rows hold a `±`).
        let chars = |row: &str| row.chars().collect::<Vec<char>>();
        // Right-aligned columns end where their header ends.
        for column in ["(size)", "Side", "Cnt", "Score", "Error", "head/base"] {
            let end = header.find(column).expect("column") + column.len();
            for row in rows {
                let row = chars(row);
                if column == "head/base" && row.len() < end {
                    continue; // base rows carry no ratio
                }
                assert_ne!(row[end - 1], ' ', "{column} in {row:?}\n{text}");
                assert!(
                    row.get(end).is_none_or(|c| *c == ' '),
                    "{column} in {row:?}"
                );
            }
        }
        // Units is left-aligned under its header.
        let units = header.find("Units").expect("Units");
        for row in rows {
            let unit: String = chars(row)[units..units + 5].iter().collect();
            assert_eq!(unit, "ops/s", "{row}");
        }
        assert!(rows[0].starts_with("ShallowBind.pure/single"), "{text}");
        assert!(rows[0].contains(" base  thrpt    2 "), "{text}");
        assert!(rows[1].contains(" head  thrpt    2 "), "{text}");
        // Single: head twice as fast, far beyond the noise.
        assert!(
            rows[0].ends_with("ops/s"),
            "base rows carry no ratio: {text}"
        );
        assert!(rows[1].ends_with("1.99x  faster"), "{text}");
        // tokio: 1 % apart with a 2.5 % spread on base: within the noise.
        assert!(rows[3].ends_with("  ~"), "{text}");
        assert!(rows[2].starts_with("ShallowBind.pure/tokio"), "{text}");
        // Scores with JMH's three decimals and a ± before the error.
        assert!(rows[0].contains("  9950.495 ±  49.505  "), "{text}");
    }

    #[test]
    fn a_benchmark_on_one_side_only_is_shown_with_no_ratio() {
        let data = Rounds {
            base: rounds(&[&[("Old.one", "single", 1e5)]]),
            head: rounds(&[&[("New.one", "single", 1e5)]]),
        };
        let (text, tally) = render_tables(&data);
        assert_eq!(tally.one_sided, 2);
        let new_at = text.find("New\n").expect("New table");
        let old_at = text.find("Old\n").expect("Old table");
        assert!(new_at < old_at, "workloads are sorted: {text}");
        assert!(text.contains("n/a  head only"), "{text}");
        assert!(text.contains("n/a  base only"), "{text}");
    }

    #[test]
    fn without_arguments_the_defaults_apply() {
        let args = parse_args(Vec::new()).expect("parses");
        assert_eq!(args, Args::default());
        assert_eq!(args.base, None);
        assert_eq!(args.head, None);
        assert_eq!(args.bench, "suite");
        assert_eq!(args.rounds, 3);
        assert!(!args.quick);
    }

    #[test]
    fn every_flag_is_read_in_both_forms() {
        let args = parse_args(strings(&[
            "--base",
            "HEAD~1",
            "--head=feature",
            "--bench",
            "bind",
            "--filter=ShallowBind\\.(pure|delay)",
            "--rounds",
            "5",
            "--quick",
            "--from-runs",
        ]))
        .expect("parses");
        assert_eq!(
            args,
            Args {
                base: Some("HEAD~1".to_owned()),
                head: Some("feature".to_owned()),
                bench: "bind".to_owned(),
                filter: Some("ShallowBind\\.(pure|delay)".to_owned()),
                rounds: 5,
                quick: true,
                from_runs: true,
            }
        );
    }

    #[test]
    fn an_unknown_flag_is_an_error_naming_it() {
        let e = parse_args(strings(&["--rounds", "2", "--fast"])).unwrap_err();
        assert_eq!(e, ArgError::Unknown("--fast".to_owned()));
        assert!(e.to_string().contains("--fast"));
        let e = parse_args(strings(&["stray"])).unwrap_err();
        assert!(e.to_string().contains("stray"));
    }

    #[test]
    fn bad_values_are_errors_naming_the_flag() {
        assert_eq!(
            parse_args(strings(&["--rounds"])).unwrap_err(),
            ArgError::MissingValue("--rounds")
        );
        for bad in ["0", "two", "-1"] {
            let e = parse_args(strings(&["--rounds", bad])).unwrap_err();
            assert!(e.to_string().contains("--rounds"), "{e}");
        }
        assert!(
            parse_args(strings(&["--base="]))
                .unwrap_err()
                .to_string()
                .contains("--base")
        );
        assert_eq!(parse_args(strings(&["-h"])).unwrap_err(), ArgError::Help);
    }

    #[test]
    fn cargo_json_names_the_bench_executable() {
        let lines = [
            r#"{"reason":"compiler-artifact","target":{"name":"benches","kind":["lib"]},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"suite","kind":["bench"]},"executable":"/t/release/deps/suite-abc"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            bench_executable(&lines, "suite"),
            Some(PathBuf::from("/t/release/deps/suite-abc"))
        );
        assert_eq!(bench_executable(&lines, "bind"), None);
        assert_eq!(bench_executable("garbage\n", "suite"), None);
    }

    #[test]
    fn compiler_errors_are_taken_from_cargo_json() {
        let lines = [
            r#"{"reason":"compiler-message","message":{"level":"warning","rendered":"warning: unused"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","rendered":"error[E0425]: cannot find value `x`\n"}}"#,
        ]
        .join("\n");
        assert_eq!(
            compiler_errors(&lines),
            ["error[E0425]: cannot find value `x`"]
        );
    }

    #[test]
    fn cargo_metadata_lists_the_bench_targets_of_a_package() {
        let json = r#"{"packages":[{"name":"io-core","targets":[]},{"name":"benches","targets":[
            {"name":"benches","kind":["lib"]},{"name":"bind","kind":["bench"]},
            {"name":"loadgen","kind":["bin"]},{"name":"async_ops","kind":["bench"]}]}]}"#;
        assert_eq!(
            bench_targets(json, "benches"),
            Some(vec!["async_ops".to_owned(), "bind".to_owned()])
        );
        assert_eq!(bench_targets(json, "nope"), None);
    }

    #[test]
    fn a_missing_bench_target_is_reported_by_name_with_the_ones_there_are() {
        let e = CompareError::NoBenchTarget {
            side: "base",
            rev: "HEAD~1 (253d6c7)".to_owned(),
            name: "suite".to_owned(),
            available: vec!["bind".to_owned(), "errors".to_owned()],
        };
        let text = e.to_string();
        assert!(text.contains("no bench target `suite`"), "{text}");
        assert!(text.contains("bind, errors"), "{text}");
        assert!(text.contains("HEAD~1"), "{text}");
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\nd", 2), "c\nd");
        assert_eq!(tail("a", 5), "a");
    }
}
