//! Callgrind harness for stream stages on exec-single (`run_workload`).
//!
//! ```text
//! cargo build --release -p benches --example stream_prof
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*stream_prof*run_workload*' \
//!     target/release/examples/stream_prof par_eval_map8
//! ```
//!
//! `stream_prof W wstp RUNS` runs the workload `RUNS` times on exec-wstp
//! with two workers instead (for `perf stat`; `WT=1` for one worker).
//!
//! Workloads (10,000 elements each, run once inside `run_workload`):
//! `par_eval_map8` and `par_eval_map8_pure` (a `cede` per element, and
//! none), `par_eval_map8_cpu` (a few microseconds of computation per
//! element), `par_eval_map_unordered8`, `eval_map`, `eval_map_chunk`,
//! `bind` (the same steps as a `tail_rec` loop), `pure` (map/filter/fold
//! over 1,000,000 elements; `pure_fold`, `pure_map` and `pure_filter`
//! for one stage at a time);
//! `tokio_buffered8`, `tokio_buffered8_pure` and `tokio_buffered8_cpu`:
//! `futures`' `buffered(8)` with a `yield_now` per element, with none, and
//! with the computation, on tokio's current-thread
//! runtime.

use std::hint::black_box;

use benches::stream_programs::{self, P, sum};
use spindle_core::{IO, IORuntime};
use spindle_exec_single::SingleThreaded;
use spindle_stream::Stream;

#[path = "support/tokio_buffered.rs"]
mod tokio_reference;

const N: u64 = 10_000;

fn program(name: &str) -> P {
    match name {
        "par_eval_map8" => stream_programs::par_eval_map8(N),
        "par_eval_map8_pure" => sum(Stream::range(0..N)
            .par_eval_map(8, |x| IO::pure(x + 1))
            .expect("8 > 0")),
        "par_eval_map8_cpu" => stream_programs::par_eval_map8_cpu(N),
        "par_eval_map_unordered8" => sum(Stream::range(0..N)
            .par_eval_map_unordered(8, |x| IO::cede().map(move |()| x + 1))
            .expect("8 > 0")),
        "eval_map" => stream_programs::eval_map(N),
        "eval_map_chunk" => stream_programs::eval_map_chunk(N),
        "bind" => stream_programs::bind::<N>(),
        "pure" => stream_programs::map_filter_fold(N * 100),
        "pure_fold" => sum(Stream::range(0..N * 100)),
        "pure_map" => sum(Stream::range(0..N * 100).map(|x| x * 3)),
        "pure_filter" => sum(Stream::range(0..N * 100).filter(|x| x % 2 == 0)),
        other => panic!("unknown workload {other}"),
    }
}

/// The tokio references, on a current-thread runtime.
fn run_tokio(name: &str) -> u64 {
    use futures::StreamExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio");
    match name {
        "tokio_buffered8" => rt.block_on(tokio_reference::buffered8(N)),
        "tokio_buffered8_cpu" => rt.block_on(tokio_reference::buffered8_cpu(N)),
        "tokio_buffered8_pure" => rt.block_on(
            futures::stream::iter(0..N)
                .map(|x| async move { x + 1 })
                .buffered(8)
                .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x))),
        ),
        other => panic!("unknown workload {other}"),
    }
}

#[inline(never)]
fn run_workload(rt: &SingleThreaded<spindle_exec_single::StdClock>, name: &str) -> u64 {
    if name.starts_with("tokio_") {
        return run_tokio(name);
    }
    let out = rt.block_on(program(name)).expect("a run");
    out.succeeded().expect("a value")
}

/// [`run_workload`]'s program on exec-wstp with 2 workers, `runs` times.
#[inline(never)]
fn run_workload_wstp(name: &str, runs: usize) -> u64 {
    let rt = spindle_exec_wstp::Runtime::builder()
        .worker_threads(
            std::env::var("WT").map_or(2, |v| v.parse().expect("WT: a number of worker threads")),
        )
        .build()
        .expect("exec-wstp");
    (0..runs)
        .map(|_| {
            let out = rt.block_on(program(name)).expect("a run");
            out.succeeded().expect("a value")
        })
        .fold(0, u64::wrapping_add)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().expect("a workload name");
    if args.next().as_deref() == Some("wstp") {
        let runs = args
            .next()
            .map_or(1, |n| n.parse().expect("a number of runs"));
        black_box(run_workload_wstp(&name, runs));
        return;
    }
    let rt = SingleThreaded::new().expect("exec-single");
    black_box(run_workload(&rt, &name));
}
