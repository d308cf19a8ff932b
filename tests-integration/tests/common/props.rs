//! Property checks for the suites that generate their input (proptest).

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Checks `test` on `cases` generated cases (or `PROPTEST_CASES`, as
/// proptest reads it: the instrumented run of `.ci/asan` checks fewer);
/// panics with the shrunk counterexample on failure. Nothing is written to
/// disk.
pub fn check_cases<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(cases);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    if let Err(e) = TestRunner::new(config).run(&strategy, test) {
        panic!("{e}");
    }
}
