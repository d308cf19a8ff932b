//! Criterion's saved results, as `bench-compare` and `bench-report` read
//! them: each benchmark's `new/benchmark.json` (its id and declared
//! `Elements` throughput) and `new/estimates.json` (the median time of one
//! iteration and its confidence interval).

use core::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::Value;

/// One benchmark's result in one round, from criterion's `new/` files.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The id: group, function and parameter.
    pub id: BenchId,
    /// The declared `Throughput::Elements` per iteration, if any.
    pub elements: Option<u64>,
    /// The median time of one iteration, ns.
    pub median_ns: f64,
    /// The 95 % confidence interval of that median, ns.
    pub median_ci_ns: (f64, f64),
    /// When `estimates.json` was written, seconds since the Unix epoch.
    pub written: Option<u64>,
}

impl Measurement {
    /// Whole operations (criterion iterations) per second.
    pub fn ops_per_sec(&self) -> f64 {
        1e9 / self.median_ns
    }
}

/// A criterion benchmark id, `<group>/<function>/<param>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BenchId {
    /// The group, e.g. `suite.ShallowBind.pure`.
    pub group: String,
    /// The function, e.g. `single` or `tokio`.
    pub function: String,
    /// The parameter, e.g. `10000`.
    pub param: Option<String>,
}

/// The median and its confidence interval from an `estimates.json`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianEstimate {
    /// The point estimate, ns per iteration.
    pub point_ns: f64,
    /// The confidence interval's lower bound, ns.
    pub lower_ns: f64,
    /// The confidence interval's upper bound, ns.
    pub upper_ns: f64,
}

/// Reads the median of criterion's `estimates.json`.
pub fn parse_estimates(text: &str) -> Result<MedianEstimate, String> {
    let json: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let median = json
        .get("median")
        .ok_or("no \"median\" estimate (is this criterion's estimates.json?)")?;
    let number = |v: Option<&Value>, what: &str| {
        v.and_then(Value::as_f64)
            .filter(|n| n.is_finite())
            .ok_or_else(|| format!("no number `median.{what}`"))
    };
    let point_ns = number(median.get("point_estimate"), "point_estimate")?;
    let ci = median.get("confidence_interval");
    let lower_ns = number(ci.and_then(|c| c.get("lower_bound")), "lower_bound")?;
    let upper_ns = number(ci.and_then(|c| c.get("upper_bound")), "upper_bound")?;
    if point_ns <= 0.0 {
        return Err(format!("median: point_estimate {point_ns} is not positive"));
    }
    Ok(MedianEstimate {
        point_ns,
        lower_ns,
        upper_ns,
    })
}

/// Reads the id and the declared `Elements` throughput of criterion's
/// `benchmark.json`.
pub fn parse_benchmark(text: &str) -> Result<(BenchId, Option<u64>), String> {
    let json: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let group = json
        .get("group_id")
        .and_then(Value::as_str)
        .ok_or("no \"group_id\" (is this criterion's benchmark.json?)")?
        .to_owned();
    let function = json
        .get("function_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let param = json
        .get("value_str")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let elements = json
        .get("throughput")
        .and_then(|t| t.get("Elements"))
        .and_then(Value::as_u64);
    Ok((
        BenchId {
            group,
            function,
            param,
        },
        elements,
    ))
}

/// Why criterion's results could not be read.
#[derive(Debug)]
pub enum ResultsError {
    /// A directory or file could not be read.
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A `benchmark.json` or `estimates.json` without the expected fields.
    Bad {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl fmt::Display for ResultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultsError::Io { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            ResultsError::Bad { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

impl std::error::Error for ResultsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResultsError::Io { source, .. } => Some(source),
            ResultsError::Bad { .. } => None,
        }
    }
}

/// Every benchmark criterion saved under `dir` (its output directory or a
/// `CRITERION_HOME`): each `new/` directory that holds both
/// `benchmark.json` and `estimates.json`, sorted by id. An absent or empty
/// directory gives none.
pub fn read_results(dir: &Path) -> Result<Vec<Measurement>, ResultsError> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        let io = |source| ResultsError::Io {
            path: here.clone(),
            source,
        };
        let entries = match fs::read_dir(&here) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(e)),
        };
        for entry in entries {
            let path = entry.map_err(io)?.path();
            if !path.is_dir() {
                continue;
            }
            let (bench, estimates) = (path.join("benchmark.json"), path.join("estimates.json"));
            if path.file_name().is_some_and(|n| n == "new")
                && bench.is_file()
                && estimates.is_file()
            {
                let read = |p: &Path| {
                    fs::read_to_string(p).map_err(|source| ResultsError::Io {
                        path: p.to_path_buf(),
                        source,
                    })
                };
                let bad = |p: &Path, message: String| ResultsError::Bad {
                    path: p.to_path_buf(),
                    message,
                };
                let (id, elements) = parse_benchmark(&read(&bench)?).map_err(|m| bad(&bench, m))?;
                let median = parse_estimates(&read(&estimates)?).map_err(|m| bad(&estimates, m))?;
                let written = fs::metadata(&estimates)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_secs());
                found.push(Measurement {
                    id,
                    elements,
                    median_ns: median.point_ns,
                    median_ci_ns: (median.lower_ns, median.upper_ns),
                    written,
                });
            } else {
                pending.push(path);
            }
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// Criterion's files and a scratch directory for the tests of the tools
/// that read them.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::path::PathBuf;

    /// A fresh, empty directory under the system's temporary directory,
    /// unique to this process and `name`.
    pub(crate) fn a_fresh_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bench-compare-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    pub(crate) const ESTIMATES: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":270204.9,"upper_bound":273793.9},"point_estimate":271840.8,"standard_error":922.3},"median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":250000.0,"upper_bound":400000.0},"point_estimate":320000.0,"standard_error":748.9},"median_abs_dev":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1334.0,"upper_bound":3999.7},"point_estimate":2776.8,"standard_error":732.9},"slope":null,"std_dev":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1835.2,"upper_bound":5801.3},"point_estimate":4240.9,"standard_error":1050.2}}"#;

    pub(crate) const BENCHMARK: &str = r#"{"group_id":"suite.ShallowBind.pure","function_id":"single","value_str":"10000","throughput":{"Elements":10000},"full_id":"suite.ShallowBind.pure/single/10000","directory_name":"suite.ShallowBind.pure/single/10000","title":"suite.ShallowBind.pure/single/10000"}"#;
}

#[cfg(test)]
mod tests {
    use super::fixtures::{BENCHMARK, ESTIMATES, a_fresh_dir};
    use super::*;

    #[test]
    fn estimates_give_the_median_and_its_confidence_interval() {
        let m = parse_estimates(ESTIMATES).expect("parses");
        assert_eq!(m.point_ns, 320000.0);
        assert_eq!((m.lower_ns, m.upper_ns), (250000.0, 400000.0));
    }

    #[test]
    fn estimates_without_a_median_are_an_error_that_says_so() {
        let e = parse_estimates(r#"{"mean":{}}"#).unwrap_err();
        assert!(e.contains("median"), "{e}");
        assert!(
            parse_estimates("not json")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn benchmark_json_gives_the_id_and_the_elements_per_iteration() {
        let (id, elements) = parse_benchmark(BENCHMARK).expect("parses");
        assert_eq!(id.group, "suite.ShallowBind.pure");
        assert_eq!(id.function, "single");
        assert_eq!(id.param.as_deref(), Some("10000"));
        assert_eq!(elements, Some(10_000));
    }

    #[test]
    fn benchmark_json_without_throughput_has_no_elements() {
        let (id, elements) = parse_benchmark(
            r#"{"group_id":"g","function_id":null,"value_str":null,"throughput":null}"#,
        )
        .expect("parses");
        assert_eq!(id.function, "");
        assert_eq!(id.param, None);
        assert_eq!(elements, None);
        assert!(parse_benchmark("{}").unwrap_err().contains("group_id"));
    }

    #[test]
    fn results_are_read_from_every_new_directory_under_criterion_home() {
        let home = a_fresh_dir("results");
        for (function, median) in [("single", 320000.0), ("tokio", 640000.0)] {
            let new = home
                .join("suite.ShallowBind.pure")
                .join(function)
                .join("10000")
                .join("new");
            std::fs::create_dir_all(&new).expect("dirs");
            let bench = BENCHMARK.replace("\"single\"", &format!("\"{function}\""));
            std::fs::write(new.join("benchmark.json"), bench).expect("write");
            let est = ESTIMATES.replace("320000.0", &format!("{median:.1}"));
            std::fs::write(new.join("estimates.json"), est).expect("write");
            // criterion's other directories are ignored.
            std::fs::create_dir_all(new.parent().expect("parent").join("base")).expect("dirs");
        }
        std::fs::create_dir_all(home.join("report")).expect("dirs");
        let found = read_results(&home).expect("reads");
        let summary: Vec<_> = found
            .iter()
            .map(|m| (m.id.function.as_str(), m.median_ns, m.elements))
            .collect();
        assert_eq!(
            summary,
            [
                ("single", 320000.0, Some(10_000)),
                ("tokio", 640000.0, Some(10_000))
            ]
        );
        assert_eq!(found[0].median_ci_ns, (250000.0, 400000.0));
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_missing_results_directory_holds_no_measurements() {
        let found = read_results(Path::new("/nonexistent/bench-compare")).expect("no error");
        assert!(found.is_empty());
    }

    #[test]
    fn a_broken_estimates_file_is_an_error_naming_the_file() {
        let home = a_fresh_dir("broken");
        let new = home.join("g").join("f").join("new");
        std::fs::create_dir_all(&new).expect("dirs");
        std::fs::write(new.join("benchmark.json"), BENCHMARK).expect("write");
        std::fs::write(new.join("estimates.json"), "{").expect("write");
        let e = read_results(&home).unwrap_err().to_string();
        assert!(e.contains("estimates.json"), "{e}");
        let _ = std::fs::remove_dir_all(&home);
    }
}
