//! How the app entry point ends a process, on any std executor: run with
//! the executor (`single`, `wstp`, `batching`, `tokio`) and a mode (the
//! programs of the crate's process tests, `tests/common/lifecycle.rs`):
//! `ok` (exit code 0), `error` (1), `panic` (101), `cancel` (130), `wait`
//! (prints `ready`, then waits in a `bracket` until SIGINT or SIGTERM; the
//! release prints `finalizer ran`; 130), `slow-finalizer` (a release of an
//! hour: only a second signal ends it).
//!
//! ```text
//! cargo run -p spindle-app --example app_lifecycle -- single wait   # then press Ctrl-C, or kill -USR1 first
//! ```

#[path = "../tests/common/lifecycle.rs"]
mod lifecycle;

use std::process::ExitCode;

use spindle_core::{IO, IORuntime};
use spindle_exec_batching::EventLoop;
use spindle_exec_single::{SingleThreaded, StdClock};
use spindle_exec_tokio::TokioExecutor;
use spindle_exec_wstp::Runtime;

/// The entry point on the executor `R`, built from the environment: the
/// same call for every executor.
fn run_on<R: IORuntime>(program: IO<(), String>) -> ExitCode {
    spindle_app::run(R::from_env(), program)
}

fn main() -> ExitCode {
    let executor = std::env::args().nth(1).unwrap_or_default();
    let mode = std::env::args().nth(2).unwrap_or_default();
    let Some(program) = lifecycle::program(&mode) else {
        eprintln!("unknown mode {mode:?}: {}", lifecycle::MODES);
        return ExitCode::from(2);
    };
    match executor.as_str() {
        "single" => run_on::<SingleThreaded<StdClock>>(program),
        "wstp" => run_on::<Runtime>(program),
        "batching" => run_on::<EventLoop>(program),
        "tokio" => run_on::<TokioExecutor>(program),
        other => {
            eprintln!("unknown executor {other:?}: single, wstp, batching, tokio");
            ExitCode::from(2)
        }
    }
}
