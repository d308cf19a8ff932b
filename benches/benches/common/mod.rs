//! What every bench file shares: the criterion settings, the two runtimes,
//! and `compare`, which registers one workload as a criterion group with a
//! `spindle` and a `tokio` function side by side.
//!
//! (This is `common/mod.rs`, not `common.rs`, so that cargo does not take it
//! for a bench target of its own.)

#![allow(dead_code, reason = "each bench file uses a subset of these helpers")]

use std::fmt::Debug;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use exec_single::{SingleThreaded, StdClock};
use tokio::runtime::Runtime;

/// A boxed future: the tokio side's unit of recursion (what an `async fn`
/// that calls itself has to return).
pub type Boxed<T> = Pin<Box<dyn Future<Output = T>>>;

/// The tokio side's counterpart of `IO::delay`: a plain call of the thunk,
/// right where the `async` block runs (a side effect needs no suspension).
#[inline]
pub fn delay<T>(thunk: impl FnOnce() -> T) -> T {
    thunk()
}

/// Spindle's runtime as the benchmarks use it.
pub type Spindle = SingleThreaded<StdClock>;

/// Criterion settings sized for a small, noisy machine: the whole suite runs
/// in a few minutes. Raise `measurement_time` on a quiet machine.
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

/// Registers the criterion group `name` with two functions, `spindle/<size>`
/// and `tokio/<size>`, each declaring `steps` elements per operation so the
/// reports read in elements (steps) per second.
///
/// Each side runs once before it is measured and must produce `expected`:
/// a benchmark that computes something else measures nothing.
pub fn compare<T: PartialEq + Debug>(
    c: &mut Criterion,
    name: &str,
    size: u64,
    steps: u64,
    expected: T,
    mut spindle: impl FnMut(&mut Spindle) -> T,
    mut tokio: impl FnMut(&Runtime) -> T,
) {
    let mut spindle_rt = SingleThreaded::new();
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current-thread runtime");
    assert_eq!(spindle(&mut spindle_rt), expected, "{name}: spindle result");
    assert_eq!(tokio(&tokio_rt), expected, "{name}: tokio result");

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(steps));
    group.bench_function(BenchmarkId::new("spindle", size), |b| {
        b.iter(|| black_box(spindle(&mut spindle_rt)))
    });
    group.bench_function(BenchmarkId::new("tokio", size), |b| {
        b.iter(|| black_box(tokio(&tokio_rt)))
    });
    group.finish();
}

/// Adds one more function, `<function>/<size>`, to the criterion group
/// `name` (registered before by [`compare`]): a variant of the tokio side
/// that explains a number of the main pair. It must produce `expected` too.
pub fn extra_tokio<T: PartialEq + Debug>(
    c: &mut Criterion,
    name: &str,
    function: &str,
    size: u64,
    steps: u64,
    expected: T,
    mut tokio: impl FnMut(&Runtime) -> T,
) {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current-thread runtime");
    assert_eq!(tokio(&tokio_rt), expected, "{name}: {function} result");

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(steps));
    group.bench_function(BenchmarkId::new(function, size), |b| {
        b.iter(|| black_box(tokio(&tokio_rt)))
    });
    group.finish();
}
