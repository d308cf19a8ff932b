//! What one `block_on` of a trivial program costs on each executor (exec-tokio
//! on owned runtimes of both flavours), and tokio's `block_on` of a ready
//! future, measured as medians of batches.
//!
//! ```text
//! cargo run --release -p benches --example block_on_cost
//! ```

use std::convert::Infallible;
use std::time::Instant;

use spindle_core::{IO, IORuntime};

fn median_ns(mut run: impl FnMut()) -> f64 {
    const BATCH: u32 = 2_000;
    let mut batches: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                run();
            }
            start.elapsed().as_nanos() as f64 / f64::from(BATCH)
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

fn main() {
    let single = spindle_exec_single::SingleThreaded::new().expect("exec-single");
    let wstp = spindle_exec_wstp::Runtime::new().expect("exec-wstp");
    let batching = spindle_exec_batching::EventLoop::new().expect("exec-batching");
    let tokio_ct = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current_thread");
    let tokio_mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio multi_thread");
    let exec_tokio_mt = spindle_exec_tokio::TokioExecutor::builder()
        .multi_thread(2)
        .build()
        .expect("exec-tokio multi_thread");
    let exec_tokio_ct = spindle_exec_tokio::TokioExecutor::builder()
        .current_thread()
        .build()
        .expect("exec-tokio current_thread");
    let trivial = || IO::<u32, Infallible>::pure(1).map(|x| x + 1);
    let rows: [(&str, f64); 9] = [
        (
            "exec-single",
            median_ns(|| assert!(single.block_on(trivial()).is_ok())),
        ),
        (
            "exec-wstp",
            median_ns(|| assert!(wstp.block_on(trivial()).is_ok())),
        ),
        (
            "exec-batching",
            median_ns(|| assert!(batching.block_on(trivial()).is_ok())),
        ),
        (
            "exec-wstp, one cede",
            median_ns(|| assert!(wstp.block_on(IO::<(), Infallible>::cede()).is_ok())),
        ),
        (
            "exec-tokio multi_thread",
            median_ns(|| assert!(exec_tokio_mt.block_on(trivial()).is_ok())),
        ),
        (
            "exec-tokio current_thread",
            median_ns(|| assert!(exec_tokio_ct.block_on(trivial()).is_ok())),
        ),
        (
            "exec-tokio, pure(1)",
            median_ns(|| {
                assert!(
                    exec_tokio_mt
                        .block_on(IO::<u32, Infallible>::pure(1))
                        .is_ok()
                )
            }),
        ),
        (
            "tokio current_thread",
            median_ns(|| assert_eq!(tokio_ct.block_on(async { 2 }), 2)),
        ),
        (
            "tokio multi_thread",
            median_ns(|| assert_eq!(tokio_mt.block_on(async { 2 }), 2)),
        ),
    ];
    for (name, ns) in rows {
        println!("{name:<24} {ns:>9.0} ns per block_on");
    }
}
