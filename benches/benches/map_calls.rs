//! Chains of `map`: a port of Cats Effect's `MapCallsBenchmark` (JMH,
//! `benchmarks/` in typelevel/cats-effect), same sizes.
//!
//! One operation runs 12,000 maps in total: `one` runs a chain of 1 map
//! 12,000 times, `batch30` a chain of 30 maps 400 times, `batch120` a chain
//! of 120 maps 100 times, summing the results. Small batches measure the
//! cost of starting and finishing a run; large ones the cost of a `map`
//! step. Throughput is declared in maps (elements/s = maps per second).
//!
//! Difference from Cats Effect: there, the program is built once and run
//! `12000 / batch` times, since a Cats Effect `IO` can be re-run. A Spindle
//! `IO` (like a Rust future) is consumed by running it, so each run builds
//! its chain again: `delay(|| 0)` and `batch` maps. Building is part of
//! every run here, on both sides.
//!
//! The tokio reference builds the same chain as nested boxed futures (each
//! map a `Box::pin(async move { inner.await + 1 })` around the previous
//! one, the first a plain call of the thunk, `common::delay`) and runs each chain with
//! `rt.block_on(...)` on a current-thread runtime.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench map_calls
//! cargo bench -p benches --bench map_calls -- MapCalls.one   # one group
//! ```

use std::convert::Infallible;

use benches::{MAP_CALLS_TOTAL, succeeded};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::IO;

mod common;

use common::{Boxed, Spindle, compare, delay};
use tokio::runtime::Runtime;

/// Runs `total / batch` Spindle chains of `batch` maps; the sum of results.
fn spindle_test(rt: &mut Spindle, iterations: usize, batch: usize) -> i64 {
    let f = |x: i32| x + 1;
    let mut sum = 0i64;
    for _ in 0..iterations {
        let mut io = IO::<i32, Infallible>::delay(|| 0);
        for _ in 0..batch {
            io = io.map(f);
        }
        sum += i64::from(succeeded(rt.block_on(io)));
    }
    sum
}

/// The same with tokio: chains of nested boxed futures.
fn tokio_test(rt: &Runtime, iterations: usize, batch: usize) -> i64 {
    let f = |x: i32| x + 1;
    let mut sum = 0i64;
    for _ in 0..iterations {
        let mut fut: Boxed<i32> = Box::pin(async { delay(|| 0) });
        for _ in 0..batch {
            let inner = fut;
            fut = Box::pin(async move { f(inner.await) });
        }
        sum += i64::from(rt.block_on(fut));
    }
    sum
}

fn map_calls(c: &mut Criterion) {
    let total = MAP_CALLS_TOTAL;
    for (name, batch) in [
        ("MapCalls.one", 1),
        ("MapCalls.batch30", 30),
        ("MapCalls.batch120", 120),
    ] {
        let iterations = total / batch;
        // Every chain produces `batch`; the sum is the total number of maps.
        compare(
            c,
            name,
            total as u64,
            total as u64,
            total as i64,
            |rt| spindle_test(rt, iterations, batch),
            |rt| tokio_test(rt, iterations, batch),
        );
    }
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = map_calls
}
criterion_main!(benches);
