//! The statistics of a comparison: each side's [`Score`] over its rounds,
//! the round-to-round noise pooled per runtime ([`round_noise`]), the
//! [`verdict`] of head against base, and how far the reference rows moved
//! ([`reference_drift`]).

use std::collections::BTreeMap;

use super::rounds::{Rounds, by_id};
use crate::results::Measurement;

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
    let mut ops: Vec<f64> = rounds.iter().map(|m| m.ops_per_sec()).collect();
    ops.sort_by(f64::total_cmp);
    let (&low, &high) = (ops.first()?, ops.last()?);
    let n = ops.len();
    let score = median(&ops)?;
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

/// The median of `sorted` (in ascending order), `None` when it is empty.
fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
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
    let logs: Vec<f64> = ms.iter().map(|m| m.ops_per_sec().ln()).collect();
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

/// The noise to assume for one benchmark in [`verdict`]: the larger of its
/// runtime's pooled [`round_noise`] (`runtime`) and its own rounds' on the
/// two sides, or whichever of them is known.
pub(super) fn row_noise(
    runtime: Option<f64>,
    base: Option<&[&Measurement]>,
    head: Option<&[&Measurement]>,
) -> Option<f64> {
    let own = match (base, head) {
        (Some(bs), Some(hs)) => own_noise(bs, hs),
        _ => None,
    };
    match (runtime, own) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
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
    Some((n, median(&ratios)?, ratios[0], ratios[n - 1]))
}

#[cfg(test)]
mod tests {
    use super::super::rounds::fixtures::{measurement, rounds};
    use super::*;

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
}
