//! Latency statistics over every recorded request of a run.

use std::time::Duration;

/// Summary statistics of a set of request latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyStats {
    /// How many latencies were summarized.
    pub count: u64,
    /// The longest latency.
    pub slowest: Duration,
    /// The shortest latency.
    pub fastest: Duration,
    /// The arithmetic mean (rounded down to the nanosecond).
    pub average: Duration,
    /// The median, by the nearest-rank method ([`percentile`]).
    pub p50: Duration,
    /// The 99th percentile, by the nearest-rank method ([`percentile`]).
    pub p99: Duration,
}

impl LatencyStats {
    /// Sorts `nanos` (latencies in nanoseconds) in place and summarizes
    /// them; `None` when there are none.
    pub fn from_nanos(nanos: &mut [u64]) -> Option<LatencyStats> {
        if nanos.is_empty() {
            return None;
        }
        nanos.sort_unstable();
        let sum: u128 = nanos.iter().map(|&n| u128::from(n)).sum();
        let count = nanos.len() as u64;
        let average = u64::try_from(sum / u128::from(count)).unwrap_or(u64::MAX);
        Some(LatencyStats {
            count,
            slowest: Duration::from_nanos(nanos[nanos.len() - 1]),
            fastest: Duration::from_nanos(nanos[0]),
            average: Duration::from_nanos(average),
            p50: Duration::from_nanos(percentile(nanos, 50.0)?),
            p99: Duration::from_nanos(percentile(nanos, 99.0)?),
        })
    }
}

/// The `p`-th percentile (0 < p <= 100) of ascending `sorted` values by the
/// nearest-rank method: the smallest value such that at least `p` percent
/// of the values are less than or equal to it, i.e. the value at 1-based
/// rank `ceil(p / 100 * n)`. It is always one of the values (never an
/// interpolation). `None` for no values; `p` outside (0, 100] is clamped.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // Computed in integers where possible so that 50% of 100 is rank 50,
    // not 50.000000000000007 rounded up to 51.
    let hundredths = (p.clamp(0.0, 100.0) * 100.0).round() as u128;
    let rank = (hundredths * n as u128).div_ceil(10_000) as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_a_hundred_are_the_ranks_themselves() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), Some(50));
        assert_eq!(percentile(&values, 99.0), Some(99));
        assert_eq!(percentile(&values, 100.0), Some(100));
        assert_eq!(percentile(&values, 1.0), Some(1));
    }

    #[test]
    fn a_percentile_is_never_interpolated_between_two_values() {
        let values = [10, 20, 30, 40];
        // rank ceil(0.5 * 4) = 2, ceil(0.99 * 4) = 4.
        assert_eq!(percentile(&values, 50.0), Some(20));
        assert_eq!(percentile(&values, 99.0), Some(40));
        // One value above the median rank: ceil(0.5 * 5) = 3.
        assert_eq!(percentile(&[1, 2, 3, 4, 5], 50.0), Some(3));
    }

    #[test]
    fn p99_of_a_thousand_values_ignores_only_the_ten_largest() {
        let mut values: Vec<u64> = vec![1_000; 990];
        values.extend([5_000_000; 10]);
        assert_eq!(percentile(&values, 99.0), Some(1_000));
        values.push(5_000_000);
        assert_eq!(percentile(&values, 99.0), Some(5_000_000));
    }

    #[test]
    fn percentiles_of_nothing_are_none_and_of_one_value_are_that_value() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 0.0), Some(7));
        assert_eq!(percentile(&[7], 99.0), Some(7));
    }

    #[test]
    fn stats_of_unsorted_latencies_give_extremes_mean_and_percentiles() {
        let mut nanos: Vec<u64> = (1..=100).rev().map(|ms| ms * 1_000_000).collect();
        let stats = LatencyStats::from_nanos(&mut nanos).unwrap();
        assert_eq!(stats.count, 100);
        assert_eq!(stats.fastest, Duration::from_millis(1));
        assert_eq!(stats.slowest, Duration::from_millis(100));
        assert_eq!(stats.average, Duration::from_micros(50_500));
        assert_eq!(stats.p50, Duration::from_millis(50));
        assert_eq!(stats.p99, Duration::from_millis(99));
        assert_eq!(LatencyStats::from_nanos(&mut []), None);
    }
}
