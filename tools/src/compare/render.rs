//! What `bench-compare` prints: one JMH-style table per workload
//! ([`render_tables`]), its rows in the suite's runtime order, and the
//! whole output around them ([`report`]): the heading, the tally of
//! verdicts, the noise per runtime, the reference rows' drift and where
//! criterion's results are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::rounds::{Rounds, by_id};
use super::stats::{
    VERDICT_STANDARD_ERRORS, Verdict, reference_drift, round_noise, row_noise, score, verdict,
};
use crate::results::BenchId;

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

/// A runtime's place in [`RUNTIME_ORDER`] (after them for the others).
fn runtime_rank(runtime: &str) -> usize {
    RUNTIME_ORDER
        .iter()
        .position(|r| *r == runtime)
        .unwrap_or(RUNTIME_ORDER.len())
}

/// A row's place in its table: by name, runtime, then size (numeric
/// sizes in numeric order).
fn row_key(id: &BenchId) -> (String, usize, String, u64, String) {
    let (_, name) = workload_of(&id.group);
    let rank = runtime_rank(&id.function);
    let param = id.param.clone().unwrap_or_default();
    let numeric = param.parse::<u64>().unwrap_or(u64::MAX);
    (name.to_owned(), rank, id.function.clone(), numeric, param)
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
                    let noise = row_noise(
                        noise_by_runtime.get(&id.function).copied(),
                        base.get(id).map(Vec::as_slice),
                        head.get(id).map(Vec::as_slice),
                    );
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
        runtimes.sort_by_key(|(rt, _)| runtime_rank(rt));
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

#[cfg(test)]
mod tests {
    use super::super::rounds::fixtures::{measurement, rounds};
    use super::*;
    use crate::results::Measurement;

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
}
