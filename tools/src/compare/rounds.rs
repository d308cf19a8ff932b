//! The measurements of a comparison: [`Rounds`] holds both sides'
//! criterion results, one set per round, as the rounds ran or as
//! [`read_runs`] reads them back from `target/bench-compare/runs`
//! (`--from-runs`), where each round's results lie in a directory of its
//! own ([`round_dir`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::{CompareError, io_error};
use crate::results::{BenchId, Measurement, read_results};

/// Both sides' measurements, one `Vec` per round.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    /// The base side.
    pub base: Vec<Vec<Measurement>>,
    /// The head side.
    pub head: Vec<Vec<Measurement>>,
}

impl Rounds {
    /// Adds the next round of side `side` (`base` or `head`).
    pub(super) fn push(&mut self, side: &str, round: Vec<Measurement>) {
        if side == "base" {
            self.base.push(round);
        } else {
            self.head.push(round);
        }
    }
}

/// Where criterion writes side `side`'s results of round `round` (from 1)
/// under `runs`: `<side>-round<round>`, as [`read_runs`] finds them.
pub(super) fn round_dir(runs: &Path, side: &str, round: u32) -> PathBuf {
    runs.join(format!("{side}-round{round}"))
}

/// A side's measurements grouped by benchmark, in round order.
pub(super) fn by_id(side: &[Vec<Measurement>]) -> BTreeMap<BenchId, Vec<&Measurement>> {
    let mut by_id: BTreeMap<BenchId, Vec<&Measurement>> = BTreeMap::new();
    for round in side {
        for m in round {
            by_id.entry(m.id.clone()).or_default().push(m);
        }
    }
    by_id
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
        rounds.push(side, found);
    }
    if rounds.base.is_empty() || rounds.head.is_empty() {
        return Err(CompareError::NoRuns(runs.to_path_buf()));
    }
    Ok(rounds)
}

/// Builders of measurements and rounds for the tests of the comparison's
/// files.
#[cfg(test)]
pub(super) mod fixtures {
    use crate::results::{BenchId, Measurement};

    pub(crate) fn measurement(
        group: &str,
        function: &str,
        size: &str,
        median_ns: f64,
    ) -> Measurement {
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
    pub(crate) fn rounds(side: &[&[(&str, &str, f64)]]) -> Vec<Vec<Measurement>> {
        side.iter()
            .map(|round| {
                round
                    .iter()
                    .map(|(g, f, ns)| measurement(g, f, "10000", *ns))
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::results::fixtures::{BENCHMARK, ESTIMATES, a_fresh_dir};

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
}
