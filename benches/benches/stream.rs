//! Streams against async Rust's `futures::stream` on tokio (the same
//! pipeline, the same runtime shape) and, for the pure pipeline, a plain
//! iterator:
//!
//! * `Stream/map_filter_fold/*`: `map`, `filter` and `fold` over
//!   [`PURE_LEN`] `u64`s: `spindle` (exec-single; chunks of the default
//!   size), `futures_tokio` (`futures::stream::iter` on tokio
//!   current_thread), `iterator` (`Iterator::map/filter/fold`).
//! * `Stream/eval_map/*`: a trivial program per element over
//!   [`EVAL_LEN`] elements: `eval_map` (one element per step),
//!   `eval_map_chunk` (a chunk per step), against `bind` (a loop of the
//!   same number of `delay` steps bound one after the other: the bind
//!   rows' shape).
//! * `Stream/par_eval_map8/*`: [`PAR_LEN`] elements through a
//!   `yield`-once program, eight at once, in order: `spindle_wstp`
//!   (exec-wstp, 2 workers), `spindle_single`, and `tokio_buffered`
//!   (`futures::StreamExt::buffered(8)` on tokio multi_thread(2)).
//!
//! Run: `cargo bench -p benches --bench stream -- --quick`.

use core::convert::Infallible;
use core::ops::ControlFlow;
use std::hint::black_box;

use benches::succeeded;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use spindle_core::{IO, IORuntime};
use spindle_exec_single::SingleThreaded;
use spindle_stream::Stream;

/// Elements of the pure pipeline.
const PURE_LEN: u64 = 10_000_000;
/// Elements of the effect-per-element rows.
const EVAL_LEN: u64 = 100_000;
/// Elements of the concurrent rows.
const PAR_LEN: u64 = 100_000;

fn pure_pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("Stream/map_filter_fold");
    group.throughput(Throughput::Elements(PURE_LEN));
    group.sample_size(10);
    let single = SingleThreaded::new().expect("exec-single");
    group.bench_function("spindle", |b| {
        b.iter(|| {
            let program: IO<u64, Infallible> = Stream::range(0..black_box(PURE_LEN))
                .map(|x| x * 3)
                .filter(|x| x % 2 == 0)
                .compile()
                .fold(0u64, |acc, x| acc.wrapping_add(x));
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio");
    group.bench_function("futures_tokio", |b| {
        b.iter(|| {
            tokio.block_on(
                futures::stream::iter(0..black_box(PURE_LEN))
                    .map(|x| x * 3)
                    .filter(|x| core::future::ready(x % 2 == 0))
                    .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x))),
            )
        })
    });
    group.bench_function("iterator", |b| {
        b.iter(|| {
            (0..black_box(PURE_LEN))
                .map(|x| x * 3)
                .filter(|x| x % 2 == 0)
                .fold(0u64, |acc, x| acc.wrapping_add(x))
        })
    });
    group.finish();
}

fn eval_map(c: &mut Criterion) {
    let mut group = c.benchmark_group("Stream/eval_map");
    group.throughput(Throughput::Elements(EVAL_LEN));
    let single = SingleThreaded::new().expect("exec-single");
    group.bench_function("eval_map", |b| {
        b.iter(|| {
            let program: IO<u64, Infallible> = Stream::range(0..EVAL_LEN)
                .eval_map(|x| IO::delay(move || x + 1))
                .compile()
                .fold(0u64, |acc, x| acc.wrapping_add(x));
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    group.bench_function("eval_map_chunk", |b| {
        b.iter(|| {
            let program: IO<u64, Infallible> = Stream::range(0..EVAL_LEN)
                .eval_map_chunk(|x| IO::delay(move || x + 1))
                .compile()
                .fold(0u64, |acc, x| acc.wrapping_add(x));
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    group.bench_function("bind", |b| {
        b.iter(|| {
            let program: IO<u64, Infallible> = IO::tail_rec((0u64, 0u64), |(i, acc)| {
                if i == EVAL_LEN {
                    IO::pure(ControlFlow::Break(acc))
                } else {
                    IO::delay(move || i + 1)
                        .map(move |x| ControlFlow::Continue((i + 1, acc.wrapping_add(x))))
                }
            });
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    group.finish();
}

fn par_eval_map(c: &mut Criterion) {
    let mut group = c.benchmark_group("Stream/par_eval_map8");
    group.throughput(Throughput::Elements(PAR_LEN));
    group.sample_size(10);
    let program = || -> IO<u64, Infallible> {
        Stream::range(0..PAR_LEN)
            .par_eval_map(8, |x| IO::cede().map(move |()| x + 1))
            .expect("8 > 0")
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x))
    };
    let wstp = spindle_exec_wstp::Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("exec-wstp");
    group.bench_function("spindle_wstp", |b| {
        b.iter(|| succeeded(wstp.block_on(program()).expect("a run")))
    });
    let single = SingleThreaded::new().expect("exec-single");
    group.bench_function("spindle_single", |b| {
        b.iter(|| succeeded(single.block_on(program()).expect("a run")))
    });
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio");
    group.bench_function("tokio_buffered", |b| {
        b.iter(|| {
            tokio.block_on(async {
                futures::stream::iter(0..PAR_LEN)
                    .map(|x| async move {
                        tokio::task::yield_now().await;
                        x + 1
                    })
                    .buffered(8)
                    .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x)))
                    .await
            })
        })
    });
    group.finish();
}

criterion_group!(benches, pure_pipeline, eval_map, par_eval_map);
criterion_main!(benches);
