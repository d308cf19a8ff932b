//! What the fiber and data-type benches (`async_ops`, `concurrency`, `data`,
//! `sleep`) need beyond `common`: groups where Spindle runs alone (tokio has
//! no counterpart), groups with their own sample count and tokio runtime
//! (SleepBenchmark needs tokio's timer), and the pieces of the tokio
//! programs that spawn tasks.
//!
//! (A folder with `mod.rs`, like `common`, so that cargo does not take it
//! for a bench target.)

#![allow(dead_code, reason = "each bench file uses a subset of these helpers")]

use std::fmt::Debug;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;

use criterion::{BenchmarkId, Criterion, Throughput};
use exec_single::SingleThreaded;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::common::Spindle;

/// A boxed future that may move to a spawned task (`tokio::spawn` needs
/// `Send`): the tokio side's unit of nesting where Cats Effect folds
/// programs into programs (nested races, nested `parMapN`).
pub type BoxedSend<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A tokio task that is aborted when this handle is dropped.
///
/// A plain `JoinHandle` detaches its task on drop, so a task that is
/// aborted while it waits on its own children would leave them running.
/// A Spindle fiber canceled inside `race_pair` cancels both of its
/// children; this is the tokio counterpart.
pub struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Registers the criterion group `name` with one function, `spindle/<size>`,
/// for a workload tokio has no counterpart of (the bench file's header says
/// why). Like `common::compare`, it checks the result first.
pub fn spindle_only<T: PartialEq + Debug>(
    c: &mut Criterion,
    name: &str,
    size: u64,
    steps: u64,
    expected: T,
    mut spindle: impl FnMut(&mut Spindle) -> T,
) {
    let mut spindle_rt = SingleThreaded::new();
    assert_eq!(spindle(&mut spindle_rt), expected, "{name}: spindle result");

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(steps));
    group.bench_function(BenchmarkId::new("spindle", size), |b| {
        b.iter(|| black_box(spindle(&mut spindle_rt)))
    });
    group.finish();
}

/// `common::compare` for workloads whose operation takes a large fraction
/// of a second: `samples` samples instead of the suite's 30 (criterion
/// takes at least 10), and the tokio side on the runtime `tokio_rt` that
/// the caller built (for instance with its timer enabled).
#[allow(clippy::too_many_arguments, reason = "mirrors common::compare")]
pub fn compare_on<T: PartialEq + Debug>(
    c: &mut Criterion,
    name: &str,
    size: u64,
    steps: u64,
    samples: usize,
    expected: T,
    mut spindle: impl FnMut(&mut Spindle) -> T,
    tokio_rt: Runtime,
    mut tokio: impl FnMut(&Runtime) -> T,
) {
    let mut spindle_rt = SingleThreaded::new();
    assert_eq!(spindle(&mut spindle_rt), expected, "{name}: spindle result");
    assert_eq!(tokio(&tokio_rt), expected, "{name}: tokio result");

    let mut group = c.benchmark_group(name);
    group.sample_size(samples);
    group.throughput(Throughput::Elements(steps));
    group.bench_function(BenchmarkId::new("spindle", size), |b| {
        b.iter(|| black_box(spindle(&mut spindle_rt)))
    });
    group.bench_function(BenchmarkId::new("tokio", size), |b| {
        b.iter(|| black_box(tokio(&tokio_rt)))
    });
    group.finish();
}

/// A current-thread tokio runtime with its timer on a *paused* clock:
/// when no task can run, the runtime moves the clock to the next timer's
/// deadline at once instead of sleeping (tokio's `start_paused`, from its
/// `test-util` feature). See `sleep.rs` for why.
pub fn paused_clock_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("tokio current-thread runtime with a paused clock")
}
