//! The `bench-report` binary's logic: reads criterion's saved results of the
//! `suite.*` groups (benches/benches/suite.rs), renders BENCHMARKS.md's
//! suite section and draws the summary chart.
//!
//! ```text
//! cargo run -p spindle-tools --release --bin bench-report -- \
//!     [--criterion DIR] [--out BENCHMARKS.md] [--svg benches/suite.svg] [--command TEXT]
//! ```
//!
//! * [`read_results`] walks `DIR` (default `target/criterion`, or
//!   `$CARGO_TARGET_DIR/criterion`) for every
//!   `<group>/<function>/<param>/new/{benchmark,estimates}.json` and keeps the
//!   groups named `suite.<Workload>.<variant>`; the function id is the
//!   runtime (one of [`RUNTIMES`]), the parameter the size.
//! * [`render_section`] writes the section: the machine, the date, the
//!   command, one markdown table per workload (ops/s and elements/s per
//!   runtime, and the [`RATIOS`] of each Spindle runtime over its tokio
//!   reference) and a link to the chart.
//! * [`replace_section`] puts it between [`BEGIN_MARKER`] and [`END_MARKER`],
//!   leaving every byte outside the markers as it was (or appends a
//!   `## Suite` section with the markers when the file has none).
//! * [`render_svg`] (`report/svg.rs`, the one file that draws) makes the
//!   chart with `plotters`' SVG backend: one panel per workload, a group of
//!   bars (ops/s, log scale) per variant and size, one bar per runtime.
//!   Text is left to the SVG viewer's fonts, so no font library is needed
//!   to build or run it.
//!
//! Every failure is a [`ReportError`] with the path it concerns.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::results::ResultsError;

mod svg;

pub use svg::render_svg;

/// The line after which the generated section starts.
pub const BEGIN_MARKER: &str = "<!-- suite:begin -->";
/// The line before which the generated section ends.
pub const END_MARKER: &str = "<!-- suite:end -->";
/// Only criterion groups whose id starts with this go into the report.
pub const GROUP_PREFIX: &str = "suite.";
/// The runtimes (criterion function ids) in column order: Spindle's four
/// executors (`spindle_tokio` is exec-tokio), then the tokio references.
/// The chart draws these, each in its color (`report/svg.rs`).
pub const RUNTIMES: [&str; 6] = [
    "single",
    "wstp",
    "batching",
    "spindle_tokio",
    "tokio",
    "tokio_mt",
];
/// The ratio columns: each Spindle runtime over its tokio reference (ops/s
/// over ops/s, so above 1.00x Spindle is faster).
pub const RATIOS: [(&str, &str); 4] = [
    ("single", "tokio"),
    ("wstp", "tokio_mt"),
    ("batching", "tokio"),
    ("spindle_tokio", "tokio_mt"),
];
/// What the section says produced the results, unless `--command` says
/// otherwise.
pub const DEFAULT_COMMAND: &str = "cargo bench -p benches --bench suite";
/// This binary's own command line, quoted in the section.
pub const REPORT_COMMAND: &str = "cargo run -p spindle-tools --release --bin bench-report";

/// Workloads in table order (the order `benches/benches/suite.rs`
/// registers them); others follow alphabetically.
const WORKLOAD_ORDER: &[&str] = &[
    "ShallowBind",
    "DeepBind",
    "Attempt",
    "HandleError",
    "Redeem",
    "RedeemWith",
    "MapCalls",
    "MapStream",
    "Async",
    "Both",
    "Race",
    "Blocking",
    "Deferred",
    "Ref",
    "Queue",
    "Mutex",
    "Sleep",
    "Parallel",
    "WorkStealing",
    "Rt",
];

/// Variants in row order (as the suite registers them); others follow
/// alphabetically.
const VARIANT_ORDER: &[&str] = &[
    "pure",
    "delay",
    "async",
    "happyPath",
    "errorRaised",
    "one",
    "batch30",
    "batch120",
    "bracket",
    "cancelBoundary",
    "cancelable",
    "parMap2",
    "race",
    "racePair",
    "start",
    "uncancelable",
    "fine",
    "coarse",
    "get",
    "complete",
    "cancel",
    "modify",
    "getAndUpdate",
    "boundedOne",
    "boundedMany",
    "boundedContended",
    "boundedContendedSingleConsumer",
    "unboundedOne",
    "unboundedMany",
    "unboundedContended",
    "unboundedContendedSingleConsumer",
    "highContention",
    "cancellation",
    "sleep",
    "parTraverse",
    "scheduling",
    "alloc",
    "runnableScheduling",
    "spawn_many",
    "yield_many",
    "ping_pong",
    "chained_spawn",
];

// ---------------------------------------------------------------------------
// Errors

/// Why a report could not be made.
#[derive(Debug)]
pub enum ReportError {
    /// A bad command line; the message says which argument.
    Usage(String),
    /// No `suite.*` result under the criterion directory.
    NoResults {
        /// The criterion directory that was searched.
        dir: PathBuf,
        /// How many results of other groups were found (and skipped).
        other_groups: usize,
    },
    /// A file or directory could not be read or written.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done: "read", "write", ...
        action: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// A criterion JSON file without the expected fields.
    Json {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The output file's markers are not one begin marker followed by one
    /// end marker.
    Markers {
        /// The output file.
        path: PathBuf,
        /// Which way they are wrong.
        error: MarkerError,
    },
    /// plotters failed to draw the chart.
    Chart(String),
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Usage(message) => write!(f, "{message} (see --help)"),
            ReportError::NoResults { dir, other_groups } => write!(
                f,
                "no `{GROUP_PREFIX}*` benchmark results under {} ({other_groups} result(s) of \
                 other groups skipped); run `{DEFAULT_COMMAND}` first, or pass --criterion DIR",
                dir.display()
            ),
            ReportError::Io {
                path,
                action,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
            ReportError::Json { path, message } => write!(f, "{}: {message}", path.display()),
            ReportError::Markers { path, error } => write!(
                f,
                "{}: {error}; fix the markers by hand (nothing was written)",
                path.display()
            ),
            ReportError::Chart(message) => write!(f, "cannot draw the chart: {message}"),
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportError::Io { source, .. } => Some(source),
            ReportError::Markers { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// How the markers of the output file are wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerError {
    /// A begin marker without an end marker.
    MissingEnd,
    /// An end marker without a begin marker.
    MissingBegin,
    /// The end marker comes before the begin marker.
    EndBeforeBegin,
    /// A marker occurs more than once (which one is given).
    Repeated(&'static str),
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkerError::MissingEnd => write!(f, "`{BEGIN_MARKER}` without `{END_MARKER}`"),
            MarkerError::MissingBegin => write!(f, "`{END_MARKER}` without `{BEGIN_MARKER}`"),
            MarkerError::EndBeforeBegin => {
                write!(f, "`{END_MARKER}` comes before `{BEGIN_MARKER}`")
            }
            MarkerError::Repeated(marker) => write!(f, "`{marker}` occurs more than once"),
        }
    }
}

impl std::error::Error for MarkerError {}

fn io_error(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> ReportError {
    let path = path.to_path_buf();
    move |source| ReportError::Io {
        path,
        action,
        source,
    }
}

// ---------------------------------------------------------------------------
// Reading criterion's results

/// One saved criterion result of a `suite.*` group.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// `ShallowBind` of `suite.ShallowBind.pure`.
    pub workload: String,
    /// `pure` of `suite.ShallowBind.pure` (empty if the group has no variant).
    pub variant: String,
    /// The criterion function id: `single`, `wstp`, `batching`, `tokio`,
    /// `tokio_mt`.
    pub runtime: String,
    /// The benchmark's parameter (`value_str`; empty if it has none).
    pub size: String,
    /// criterion's median estimate, ns per iteration (one op).
    pub median_ns: f64,
    /// Lower bound of the median's confidence interval, ns.
    pub median_lower_ns: f64,
    /// Upper bound of the median's confidence interval, ns.
    pub median_upper_ns: f64,
    /// The declared `Throughput::Elements` per iteration, if any.
    pub elements: Option<u64>,
    /// When `estimates.json` was written, seconds since the Unix epoch.
    pub written: Option<u64>,
}

impl Measurement {
    /// Whole programs per second: `1e9 / median_ns`.
    pub fn ops_per_sec(&self) -> f64 {
        1e9 / self.median_ns
    }

    /// Elements per second: `elements * 1e9 / median_ns`.
    pub fn elements_per_sec(&self) -> Option<f64> {
        self.elements.map(|n| n as f64 * 1e9 / self.median_ns)
    }

    /// Half the width of the median's confidence interval, in % of the
    /// median (the larger side).
    pub fn ci_percent(&self) -> f64 {
        let below = self.median_ns - self.median_lower_ns;
        let above = self.median_upper_ns - self.median_ns;
        below.max(above).max(0.0) / self.median_ns * 100.0
    }
}

/// Every `suite.*` result under `dir` (criterion's output directory, read
/// by [`crate::results::read_results`]), or [`ReportError::NoResults`] if
/// there is none.
pub fn read_results(dir: &Path) -> Result<Vec<Measurement>, ReportError> {
    if !dir.is_dir() {
        return Err(ReportError::Io {
            path: dir.to_path_buf(),
            action: "read the criterion directory",
            source: io::Error::new(io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let all = crate::results::read_results(dir).map_err(|e| match e {
        ResultsError::Io { path, source } => ReportError::Io {
            path,
            action: "read",
            source,
        },
        ResultsError::Bad { path, message } => ReportError::Json { path, message },
    })?;
    let total = all.len();
    let found: Vec<Measurement> = all
        .into_iter()
        .filter_map(|m| {
            let rest = m.id.group.strip_prefix(GROUP_PREFIX)?;
            let (workload, variant) = rest.split_once('.').unwrap_or((rest, ""));
            Some(Measurement {
                workload: workload.to_string(),
                variant: variant.to_string(),
                runtime: m.id.function.clone(),
                size: m.id.param.clone().unwrap_or_default(),
                median_ns: m.median_ns,
                median_lower_ns: m.median_ci_ns.0,
                median_upper_ns: m.median_ci_ns.1,
                elements: m.elements,
                written: m.written,
            })
        })
        .collect();
    if found.is_empty() {
        return Err(ReportError::NoResults {
            dir: dir.to_path_buf(),
            other_groups: total,
        });
    }
    Ok(found)
}

// ---------------------------------------------------------------------------
// Grouping

/// A table row: one variant and size of a workload, by runtime.
#[derive(Debug)]
pub struct Row<'a> {
    /// The variant (`pure`).
    pub variant: &'a str,
    /// The size (`10000`).
    pub size: &'a str,
    /// The results of this row, by runtime.
    pub by_runtime: BTreeMap<&'a str, &'a Measurement>,
}

/// A workload's rows and the runtimes that appear in it (in column order).
#[derive(Debug)]
pub struct Workload<'a> {
    /// The workload (`ShallowBind`).
    pub name: &'a str,
    /// Its rows, in `VARIANT_ORDER` then size order.
    pub rows: Vec<Row<'a>>,
    /// The runtimes present in any row, [`RUNTIMES`] first, then the others
    /// alphabetically.
    pub runtimes: Vec<&'a str>,
}

fn rank(order: &[&str], name: &str) -> usize {
    order.iter().position(|o| *o == name).unwrap_or(order.len())
}

fn size_key(size: &str) -> (u8, u128, &str) {
    match size.parse::<u128>() {
        Ok(n) => (0, n, size),
        Err(_) => (1, 0, size),
    }
}

/// The results grouped into workloads and rows, in table order.
pub fn group(results: &[Measurement]) -> Vec<Workload<'_>> {
    let mut workloads: BTreeMap<(usize, &str), BTreeMap<_, Row<'_>>> = BTreeMap::new();
    for m in results {
        let rows = workloads
            .entry((rank(WORKLOAD_ORDER, &m.workload), &m.workload))
            .or_default();
        let key = (
            rank(VARIANT_ORDER, &m.variant),
            m.variant.as_str(),
            size_key(&m.size),
        );
        rows.entry(key)
            .or_insert_with(|| Row {
                variant: &m.variant,
                size: &m.size,
                by_runtime: BTreeMap::new(),
            })
            .by_runtime
            .insert(&m.runtime, m);
    }
    workloads
        .into_iter()
        .map(|((_, name), rows)| {
            let rows: Vec<Row<'_>> = rows.into_values().collect();
            let present: BTreeSet<&str> = rows
                .iter()
                .flat_map(|r| r.by_runtime.keys().copied())
                .collect();
            let mut runtimes: Vec<&str> = RUNTIMES
                .iter()
                .copied()
                .filter(|r| present.contains(r))
                .collect();
            runtimes.extend(present.iter().filter(|r| !RUNTIMES.contains(r)));
            Workload {
                name,
                rows,
                runtimes,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The machine and the date

/// What the section says about the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Logical cores (`/proc/cpuinfo`, or `available_parallelism`).
    pub cores: usize,
    /// OS (`/etc/os-release`'s `PRETTY_NAME`) and kernel.
    pub os: String,
    /// `rustc -V`.
    pub rustc: String,
}

impl Machine {
    /// The machine this runs on; "unknown" for what cannot be found.
    pub fn detect() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cores = match cpu_count(&cpuinfo) {
            0 => std::thread::available_parallelism().map_or(0, |n| n.get()),
            n => n,
        };
        let distro = fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|text| os_pretty_name(&text));
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|k| k.trim().to_string());
        let os = match (distro, kernel) {
            (Some(d), Some(k)) => format!("{d}, kernel {k}"),
            (Some(d), None) => d,
            (None, Some(k)) => format!("{} {k}", std::env::consts::OS),
            (None, None) => std::env::consts::OS.to_string(),
        };
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let rustc = Command::new(rustc)
            .arg("-V")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown (`rustc -V` failed)".to_string());
        Machine {
            cpu: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown CPU".to_string()),
            cores,
            os,
            rustc,
        }
    }
}

/// The CPU model of a `/proc/cpuinfo` text (x86's `model name`, or the
/// fields other architectures use).
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware", "cpu model", "cpu"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// The number of `processor` entries of a `/proc/cpuinfo` text.
pub fn cpu_count(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter(|line| {
            line.split_once(':')
                .is_some_and(|(k, _)| k.trim() == "processor")
        })
        .count()
}

/// `PRETTY_NAME` (or `NAME`) of an `/etc/os-release` text, unquoted.
pub fn os_pretty_name(os_release: &str) -> Option<String> {
    let field = |name: &str| {
        os_release.lines().find_map(|line| {
            let value = line.strip_prefix(name)?.strip_prefix('=')?;
            let value = value.trim().trim_matches('"').trim_matches('\'');
            (!value.is_empty()).then(|| value.to_string())
        })
    };
    field("PRETTY_NAME").or_else(|| field("NAME"))
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the Unix epoch.
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Now, as [`format_utc`] writes it.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

// ---------------------------------------------------------------------------
// The section

/// Everything the section says besides the tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The machine.
    pub machine: Machine,
    /// When the report was generated ([`utc_now`]).
    pub generated: String,
    /// The command that produced the results.
    pub command: String,
    /// The criterion directory the results were read from, as given.
    pub criterion_dir: String,
    /// The chart's path relative to the output file.
    pub svg_link: String,
}

/// `1,234,567` (no decimals from 100 up, two below).
pub fn format_count(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_string();
    }
    if value < 100.0 {
        return format!("{value:.2}");
    }
    let digits = format!("{:.0}", value);
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `12.3 M`: three significant digits and an SI prefix (k, M, G, T).
pub fn format_si(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_string();
    }
    let (scaled, prefix) = [(1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")]
        .iter()
        .find(|(scale, _)| value >= *scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, *prefix));
    let decimals = if scaled >= 100.0 {
        0
    } else if scaled >= 10.0 {
        1
    } else {
        2
    };
    format!("{scaled:.decimals$}{prefix}")
}

/// The generated section (without the markers): the run's description,
/// the chart link and one table per workload.
pub fn render_section(results: &[Measurement], meta: &Meta) -> String {
    use std::fmt::Write as _;

    let workloads = group(results);
    let newest = results.iter().filter_map(|m| m.written).max();
    let machine = &meta.machine;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Generated by `{REPORT_COMMAND}` from the latest results; do not edit between the \
         suite markers, rerun it instead."
    );
    s.push('\n');
    s.push_str("| | |\n|---|---|\n");
    let _ = write!(s, "| Date | report {}", meta.generated);
    if let Some(newest) = newest {
        let _ = write!(s, "; newest result written {}", format_utc(newest));
    }
    s.push_str(" |\n");
    let _ = writeln!(
        s,
        "| Machine | {}, {} logical cores; {} |",
        machine.cpu, machine.cores, machine.os
    );
    let _ = writeln!(s, "| Toolchain | {} |", machine.rustc);
    let _ = writeln!(
        s,
        "| Command | `{}`, then `{REPORT_COMMAND}` |",
        meta.command
    );
    let _ = writeln!(
        s,
        "| Results | {} benchmarks in {} workloads, from `{}` |",
        results.len(),
        workloads.len(),
        meta.criterion_dir
    );
    s.push('\n');
    let _ = writeln!(
        s,
        "Columns: an *op* is one whole program (one criterion iteration); \
         `ops/s = 1e9 / median ns per op` (± half the median's 95% confidence \
         interval); `elements/s = ops/s × elements per op` (the declared \
         `Throughput::Elements`). \
         A ratio is a Spindle runtime's ops/s over its tokio reference's \
         (`single` and `batching` over `tokio`, `wstp` over `tokio_mt`): above \
         1.00x Spindle is faster; n/a where either side did not run."
    );
    s.push('\n');
    let _ = writeln!(
        s,
        "![Suite: ops/s per workload, log scale]({})",
        meta.svg_link
    );
    for workload in &workloads {
        s.push('\n');
        render_table(&mut s, workload);
    }
    s
}

fn render_table(s: &mut String, workload: &Workload<'_>) {
    use std::fmt::Write as _;

    let ratios: Vec<(&str, &str)> = RATIOS
        .iter()
        .copied()
        .filter(|(spindle, _)| workload.runtimes.contains(spindle))
        .collect();
    let _ = writeln!(s, "### {}\n", workload.name);
    s.push_str("| variant | size |");
    for runtime in &workload.runtimes {
        let _ = write!(s, " {runtime} ops/s | {runtime} elements/s |");
    }
    for (spindle, reference) in &ratios {
        let _ = write!(s, " {spindle}/{reference} |");
    }
    s.push_str("\n|---|---:|");
    for _ in 0..workload.runtimes.len() * 2 + ratios.len() {
        s.push_str("---:|");
    }
    s.push('\n');
    let dash = |text: &str| {
        if text.is_empty() {
            "-".to_string()
        } else {
            text.to_string()
        }
    };
    for row in &workload.rows {
        let _ = write!(s, "| {} | {} |", dash(row.variant), dash(row.size));
        for runtime in &workload.runtimes {
            match row.by_runtime.get(runtime) {
                Some(m) => {
                    let elements = m.elements_per_sec().map_or("n/a".to_string(), format_si);
                    let _ = write!(
                        s,
                        " {} ±{:.1}% | {elements} |",
                        format_count(m.ops_per_sec()),
                        m.ci_percent()
                    );
                }
                None => s.push_str(" n/a | n/a |"),
            }
        }
        for (spindle, reference) in &ratios {
            match (row.by_runtime.get(spindle), row.by_runtime.get(reference)) {
                (Some(a), Some(b)) => {
                    let _ = write!(s, " {:.2}x |", a.ops_per_sec() / b.ops_per_sec());
                }
                _ => s.push_str(" n/a |"),
            }
        }
        s.push('\n');
    }
}

/// `doc` with `section` between its markers (every byte outside them
/// unchanged), or with a `## Suite` section holding the markers and
/// `section` appended if `doc` has neither marker.
pub fn replace_section(doc: &str, section: &str) -> Result<String, MarkerError> {
    let body = format!("\n\n{}\n\n", section.trim_end_matches('\n'));
    let begin = doc.find(BEGIN_MARKER);
    let end = doc.find(END_MARKER);
    for (found, marker) in [(begin, BEGIN_MARKER), (end, END_MARKER)] {
        if found.is_some_and(|at| doc[at + marker.len()..].contains(marker)) {
            return Err(MarkerError::Repeated(marker));
        }
    }
    match (begin, end) {
        (None, None) => {
            let mut out = doc.to_string();
            if !out.is_empty() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str("## Suite\n\n");
            out.push_str(BEGIN_MARKER);
            out.push_str(&body);
            out.push_str(END_MARKER);
            out.push('\n');
            Ok(out)
        }
        (Some(_), None) => Err(MarkerError::MissingEnd),
        (None, Some(_)) => Err(MarkerError::MissingBegin),
        (Some(begin), Some(end)) if end < begin => Err(MarkerError::EndBeforeBegin),
        (Some(begin), Some(end)) => {
            let inner_start = begin + BEGIN_MARKER.len();
            let mut out = String::with_capacity(doc.len() + body.len());
            out.push_str(&doc[..inner_start]);
            out.push_str(&body);
            out.push_str(&doc[end..]);
            Ok(out)
        }
    }
}

// ---------------------------------------------------------------------------
// The command line

/// The command line's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// criterion's output directory.
    pub criterion: PathBuf,
    /// The markdown file whose suite section is regenerated.
    pub out: PathBuf,
    /// Where the chart is written.
    pub svg: PathBuf,
    /// The command the section says produced the results.
    pub command: String,
}

impl Default for Options {
    fn default() -> Self {
        let criterion = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| PathBuf::from("target"), PathBuf::from)
            .join("criterion");
        Options {
            criterion,
            out: PathBuf::from("BENCHMARKS.md"),
            svg: PathBuf::from("benches/suite.svg"),
            command: DEFAULT_COMMAND.to_string(),
        }
    }
}

/// The usage text of `--help`.
pub const USAGE: &str = "\
Regenerates BENCHMARKS.md's suite section and chart from criterion's results.

Usage: cargo run -p spindle-tools --release --bin bench-report -- [OPTIONS]

Options:
  --criterion DIR   criterion's output (default: target/criterion, or $CARGO_TARGET_DIR/criterion)
  --out FILE        markdown file to update between <!-- suite:begin --> and <!-- suite:end -->
                    (default: BENCHMARKS.md; a `## Suite` section is appended if it has no markers)
  --svg FILE        chart to write (default: benches/suite.svg)
  --command TEXT    the command that produced the results, quoted in the section
                    (default: cargo bench -p benches --bench suite)
  -h, --help        this text
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Print [`USAGE`].
    Help,
    /// Make the report.
    Run(Options),
}

/// Parses the arguments after the program name (`--flag value` or
/// `--flag=value`).
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Invocation, ReportError> {
    let flags = ["--criterion", "--out", "--svg", "--command"];
    let pairs = match crate::cli::pairs(args, &flags, &[]) {
        Ok(pairs) => pairs,
        Err(crate::cli::ArgError::Help) => return Ok(Invocation::Help),
        Err(e) => return Err(ReportError::Usage(e.to_string())),
    };
    let mut options = Options::default();
    for (flag, value) in pairs {
        let value = value
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ReportError::Usage(format!("{flag} needs a value")))?;
        match flag {
            "--criterion" => options.criterion = value.into(),
            "--out" => options.out = value.into(),
            "--svg" => options.svg = value.into(),
            _ => options.command = value,
        }
    }
    Ok(Invocation::Run(options))
}

/// `to` relative to the directory `from_dir`, with `/` separators (for a
/// markdown link); both are made absolute against the current directory.
pub fn relative_link(from_dir: &Path, to: &Path) -> String {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let normal = |p: PathBuf| -> Vec<String> {
        let mut parts: Vec<String> = Vec::new();
        for c in p.components() {
            match c {
                Component::ParentDir => {
                    parts.pop();
                }
                Component::CurDir => {}
                other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
            }
        }
        parts
    };
    let from = normal(absolute(from_dir));
    let to = normal(absolute(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(to[common..].iter().map(String::as_str));
    parts.join("/")
}

/// What [`run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Results reported.
    pub results: usize,
    /// Workloads (tables).
    pub workloads: usize,
    /// Whether the output file had no markers and got a new section.
    pub appended: bool,
    /// Whether the output file changed.
    pub changed: bool,
}

/// Reads the results, regenerates the section of `options.out` and writes
/// the chart. Nothing is written unless the results, the output file and
/// its markers are all fine.
pub fn run(options: &Options) -> Result<Summary, ReportError> {
    let results = read_results(&options.criterion)?;
    let doc = fs::read_to_string(&options.out).map_err(io_error(&options.out, "read"))?;
    let out_dir = match options.out.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let meta = Meta {
        machine: Machine::detect(),
        generated: utc_now(),
        command: options.command.clone(),
        criterion_dir: options.criterion.display().to_string(),
        svg_link: relative_link(&out_dir, &options.svg),
    };
    let section = render_section(&results, &meta);
    let appended = !doc.contains(BEGIN_MARKER) && !doc.contains(END_MARKER);
    let updated = replace_section(&doc, &section).map_err(|error| ReportError::Markers {
        path: options.out.clone(),
        error,
    })?;
    let svg = render_svg(&results)?;

    if let Some(dir) = options.svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(io_error(dir, "create directory"))?;
    }
    fs::write(&options.svg, svg).map_err(io_error(&options.svg, "write"))?;
    let changed = updated != doc;
    if changed {
        fs::write(&options.out, &updated).map_err(io_error(&options.out, "write"))?;
    }
    Ok(Summary {
        results: results.len(),
        workloads: group(&results).len(),
        appended,
        changed,
    })
}
