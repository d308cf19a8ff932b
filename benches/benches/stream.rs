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
//! * `Stream/par_eval_map8_cpu/*`: the same shapes with a few
//!   microseconds of computation per element instead of the yield
//!   ([`CPU_LEN`] elements, `stream_programs::cpu_work`): where running
//!   the eight programs on both workers pays, and `buffered(8)`, which
//!   polls them in one task, cannot.
//! * `Stream/socket_lines_100MiB/*`: [`LINES_BYTES`] (100 MiB) of 80-byte
//!   lines read from one loopback connection, counted with their lengths.
//!   The writer is a plain std thread (`benches::socket_lines`) writing
//!   80 KiB blocks as fast as the socket takes them, the same for every
//!   row; one connection per operation (its connect is timed too, on both
//!   sides). Spindle: `reads(64 KiB)`, `text::utf8_decode`,
//!   `text::lines(1024)`, `compile().fold`: `spindle_single`
//!   (exec-single), `spindle_batching` (exec-batching), `spindle_wstp`
//!   (exec-wstp, 2 workers). tokio: `BufReader::new(stream).lines()` and
//!   `next_line` in a loop: `tokio_current` (current_thread, the default
//!   8 KiB buffer, as a user writes it), `tokio_current_64KiB`
//!   (`BufReader::with_capacity(64 KiB)`: Spindle's read size), `tokio_mt`
//!   (multi_thread(2), 8 KiB). Before any timing each row reads one
//!   connection and checks the number of lines and of bytes.
//!
//! Run: `cargo bench -p benches --bench stream -- --quick` (the socket
//! rows alone: `-- socket_lines`).

use std::hint::black_box;

use benches::socket_lines::{LINE, READ, lines_in, spindle_lines, start_writer};
use benches::stream_programs::{self, P};
use benches::succeeded;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use spindle_core::IORuntime;
use spindle_exec_single::SingleThreaded;

#[path = "../examples/support/tokio_lines.rs"]
mod tokio_reference;
use tokio_reference::tokio_lines;
#[path = "../examples/support/tokio_buffered.rs"]
mod tokio_buffered;
use tokio_buffered::{buffered8, buffered8_cpu};

/// Elements of the pure pipeline.
const PURE_LEN: u64 = 10_000_000;
/// Elements of the effect-per-element rows.
const EVAL_LEN: u64 = 100_000;
/// Elements of the concurrent rows.
const PAR_LEN: u64 = 100_000;
/// Elements of the computation-per-element rows.
const CPU_LEN: u64 = 10_000;
/// Bytes of one connection of the socket-lines rows.
const LINES_BYTES: usize = 100 * 1024 * 1024;

fn pure_pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("Stream/map_filter_fold");
    group.throughput(Throughput::Elements(PURE_LEN));
    group.sample_size(10);
    let single = SingleThreaded::new().expect("exec-single");
    group.bench_function("spindle", |b| {
        b.iter(|| {
            let program = stream_programs::map_filter_fold(black_box(PURE_LEN));
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
            let program = stream_programs::eval_map(EVAL_LEN);
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    group.bench_function("eval_map_chunk", |b| {
        b.iter(|| {
            let program = stream_programs::eval_map_chunk(EVAL_LEN);
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    group.bench_function("bind", |b| {
        b.iter(|| {
            let program = stream_programs::bind::<EVAL_LEN>();
            succeeded(single.block_on(program).expect("a run"))
        })
    });
    group.finish();
}

/// One `par_eval_map(8)` group: `program` on exec-wstp (2 workers) and
/// exec-single, and `reference` (tokio's `buffered(8)`) on tokio
/// multi_thread(2), over `len` elements.
fn par_group<F, Fut>(c: &mut Criterion, name: &str, len: u64, program: fn(u64) -> P, reference: F)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(len));
    group.sample_size(10);
    let wstp = spindle_exec_wstp::Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("exec-wstp");
    group.bench_function("spindle_wstp", |b| {
        b.iter(|| succeeded(wstp.block_on(program(len)).expect("a run")))
    });
    let single = SingleThreaded::new().expect("exec-single");
    group.bench_function("spindle_single", |b| {
        b.iter(|| succeeded(single.block_on(program(len)).expect("a run")))
    });
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio");
    group.bench_function("tokio_buffered", |b| {
        b.iter(|| tokio.block_on(reference(len)))
    });
    group.finish();
}

fn par_eval_map(c: &mut Criterion) {
    par_group(
        c,
        "Stream/par_eval_map8",
        PAR_LEN,
        stream_programs::par_eval_map8,
        buffered8,
    );
}

fn par_eval_map_cpu(c: &mut Criterion) {
    par_group(
        c,
        "Stream/par_eval_map8_cpu",
        CPU_LEN,
        stream_programs::par_eval_map8_cpu,
        buffered8_cpu,
    );
}

fn socket_lines(c: &mut Criterion) {
    let addr = start_writer(LINES_BYTES);
    let expected = (
        lines_in(LINES_BYTES),
        lines_in(LINES_BYTES) * (LINE as u64 - 1),
    );
    assert_eq!(
        expected.0 * LINE as u64,
        LINES_BYTES as u64,
        "whole blocks of lines"
    );
    let mut group = c.benchmark_group("Stream/socket_lines_100MiB");
    group.throughput(Throughput::Bytes(LINES_BYTES as u64));
    group.sample_size(10);
    // 55 operations of about 150 ms (criterion's linear sampling of 10).
    group.measurement_time(std::time::Duration::from_secs(10));
    fn spindle_row<R: IORuntime>(
        group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        name: &str,
        rt: &R,
        addr: std::net::SocketAddr,
        expected: (u64, u64),
    ) {
        let run = || succeeded(rt.block_on(spindle_lines(addr)).expect("a run"));
        assert_eq!(run(), expected, "{name}: lines and bytes read");
        group.bench_function(name, |b| b.iter(run));
    }
    let single = SingleThreaded::new().expect("exec-single");
    spindle_row(&mut group, "spindle_single", &single, addr, expected);
    drop(single);
    let batching = spindle_exec_batching::EventLoop::new().expect("exec-batching");
    spindle_row(&mut group, "spindle_batching", &batching, addr, expected);
    drop(batching);
    let wstp = spindle_exec_wstp::Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("exec-wstp");
    spindle_row(&mut group, "spindle_wstp", &wstp, addr, expected);
    drop(wstp);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio current_thread");
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio multi_thread");
    let rows = [
        ("tokio_current", &current, 8 * 1024),
        ("tokio_current_64KiB", &current, READ),
        ("tokio_mt", &multi, 8 * 1024),
    ];
    for (name, rt, capacity) in rows {
        let run = || {
            rt.block_on(tokio_lines(addr, capacity))
                .expect("tokio lines")
        };
        assert_eq!(run(), expected, "{name}: lines and bytes read");
        group.bench_function(name, |b| b.iter(run));
    }
    group.finish();
}

criterion_group!(
    benches,
    pure_pipeline,
    eval_map,
    par_eval_map,
    par_eval_map_cpu,
    socket_lines
);
criterion_main!(benches);
