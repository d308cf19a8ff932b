//! Callgrind harness for stream stages on exec-single (`run_workload`).
//!
//! ```text
//! cargo build --release -p benches --example stream_prof
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*stream_prof*run_workload*' \
//!     target/release/examples/stream_prof par_eval_map8
//! ```
//!
//! `stream_prof W wstp RUNS` runs the workload `RUNS` times on exec-wstp
//! with two workers instead (for `perf stat`).
//!
//! Workloads (10,000 elements each, run once inside `run_workload`):
//! `par_eval_map8` and `par_eval_map8_pure` (a `cede` per element, and
//! none), `par_eval_map_unordered8`, `eval_map`, `eval_map_chunk`,
//! `bind` (the same steps as a `tail_rec` loop), `pure` (map/filter/fold
//! over 1,000,000 elements; `pure_fold`, `pure_map` and `pure_filter`
//! for one stage at a time);
//! `tokio_buffered8` and `tokio_buffered8_pure`: `futures`' `buffered(8)`
//! with and without a `yield_now` per element, on tokio's current-thread
//! runtime.

use core::convert::Infallible;
use core::ops::ControlFlow;
use std::hint::black_box;

use spindle_core::{IO, IORuntime};
use spindle_exec_single::SingleThreaded;
use spindle_stream::Stream;

const N: u64 = 10_000;

type P = IO<u64, Infallible>;

fn program(name: &str) -> P {
    match name {
        "par_eval_map8" => Stream::range(0..N)
            .par_eval_map(8, |x| IO::cede().map(move |()| x + 1))
            .expect("8 > 0")
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "par_eval_map8_pure" => Stream::range(0..N)
            .par_eval_map(8, |x| IO::pure(x + 1))
            .expect("8 > 0")
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "par_eval_map_unordered8" => Stream::range(0..N)
            .par_eval_map_unordered(8, |x| IO::cede().map(move |()| x + 1))
            .expect("8 > 0")
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "eval_map" => Stream::range(0..N)
            .eval_map(|x| IO::delay(move || x + 1))
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "eval_map_chunk" => Stream::range(0..N)
            .eval_map_chunk(|x| IO::delay(move || x + 1))
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "bind" => IO::tail_rec((0u64, 0u64), |(i, acc)| {
            if i == N {
                IO::pure(ControlFlow::Break(acc))
            } else {
                IO::delay(move || i + 1)
                    .map(move |x| ControlFlow::Continue((i + 1, acc.wrapping_add(x))))
            }
        }),
        "pure" => Stream::range(0..N * 100)
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "pure_fold" => Stream::range(0..N * 100)
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "pure_map" => Stream::range(0..N * 100)
            .map(|x| x * 3)
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        "pure_filter" => Stream::range(0..N * 100)
            .filter(|x| x % 2 == 0)
            .compile()
            .fold(0u64, |acc, x| acc.wrapping_add(x)),
        other => panic!("unknown workload {other}"),
    }
}

/// The tokio references, on a current-thread runtime.
fn run_tokio(name: &str) -> u64 {
    use futures::StreamExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let items = futures::stream::iter(0..N);
        match name {
            "tokio_buffered8" => {
                items
                    .map(|x| async move {
                        tokio::task::yield_now().await;
                        x + 1
                    })
                    .buffered(8)
                    .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x)))
                    .await
            }
            "tokio_buffered8_pure" => {
                items
                    .map(|x| async move { x + 1 })
                    .buffered(8)
                    .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x)))
                    .await
            }
            other => panic!("unknown workload {other}"),
        }
    })
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
        .worker_threads(2)
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
