//! [`CompareError`]: everything a comparison can fail at, from git, cargo,
//! the benchmarks and criterion's files to the file system, each with a
//! message that says what to do about it.

use core::fmt;
use std::io;
use std::path::PathBuf;

use crate::results::ResultsError;

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

/// [`CompareError::Io`] for `e`, met while doing `context`.
pub(super) fn io_error(context: impl Into<String>, e: &io::Error) -> CompareError {
    CompareError::Io {
        context: context.into(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
