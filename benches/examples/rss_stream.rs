//! Constant memory of a long stream: `N` `u64`s through `map`, `filter`
//! and `par_eval_map(8)` (a trivial program per element), folded, on one
//! executor; prints the process's peak resident set (`VmHWM`) after the
//! run. The peak of a stream that runs in constant memory does not grow
//! with `N`: compare two lengths.
//!
//! ```text
//! cargo run --release -p benches --example rss_stream -- SIDE N
//! cargo run --release -p benches --example rss_stream -- single 1000000
//! cargo run --release -p benches --example rss_stream -- wstp 10000000
//! ```
//!
//! Sides: `single` (exec-single), `wstp` (exec-wstp, 2 workers). One run
//! per process, so that each peak starts from a fresh heap. Printed:
//! `VmHWM` and `VmRSS` before the run (after the runtime has started and
//! run one small program) and after it, and the fold's result (checked
//! against the sum computed directly).

use core::convert::Infallible;

use benches::succeeded;
use spindle_core::{IO, IORuntime};
use spindle_stream::Stream;

/// `VmHWM` and `VmRSS` from `/proc/self/status`, in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The pipeline: `x * 3`, the even ones, `+ 1` through a program each
/// (eight at once, in order), summed.
fn pipeline(n: u64) -> IO<u64, Infallible> {
    Stream::range(0..n)
        .map(|x| x * 3)
        .filter(|x| x % 2 == 0)
        .par_eval_map(8, |x| IO::delay(move || x + 1))
        .expect("8 > 0")
        .compile()
        .fold(0u64, |acc, x| acc.wrapping_add(x))
}

/// What the pipeline must give.
fn expected(n: u64) -> u64 {
    (0..n)
        .map(|x| x * 3)
        .filter(|x| x % 2 == 0)
        .fold(0u64, |acc, x| acc.wrapping_add(x + 1))
}

fn run<R: IORuntime>(side: &str, rt: R, n: u64) {
    // Warm up: threads, thread-locals, the first blocks.
    assert_eq!(
        succeeded(rt.block_on(pipeline(1000)).expect("a run")),
        expected(1000)
    );
    let (hwm_before, rss_before) = memory();
    let sum = succeeded(rt.block_on(pipeline(n)).expect("a run"));
    let (hwm_after, rss_after) = memory();
    assert_eq!(sum, expected(n), "the pipeline's sum");
    println!(
        "{side} n={n}: VmHWM {hwm_before} -> {hwm_after} KiB, VmRSS {rss_before} -> {rss_after} KiB"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [side, n] = args.as_slice() else {
        panic!("usage: rss_stream single|wstp N");
    };
    let n: u64 = n.replace('_', "").parse().expect("N, a number");
    match side.as_str() {
        "single" => run(
            side,
            spindle_exec_single::SingleThreaded::new().expect("exec-single"),
            n,
        ),
        "wstp" => run(
            side,
            spindle_exec_wstp::Runtime::builder()
                .worker_threads(2)
                .build()
                .expect("exec-wstp"),
            n,
        ),
        other => panic!("unknown side {other}"),
    }
}
