//! Helpers shared by exec-wstp's integration tests.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use spindle_exec_wstp::Runtime;

/// The generous limit for tests whose failure mode is a hang (a lost
/// wake-up, a starved fiber): far above what the work needs on a loaded
/// two-core machine in a debug build.
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

/// A runtime with `workers` worker threads and the other defaults.
pub fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("build a runtime")
}

/// Runs `f` on a new thread and waits at most `limit` for its result; panics
/// (naming `what`) if it did not finish in time, so that a hang fails the
/// test instead of hanging the test run. The thread is then left behind.
pub fn within<R: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(r)) => r,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => panic!("{what}: did not finish within {limit:?}"),
    }
}

/// Polls `condition` until it holds; panics (naming `what`) after `limit`.
/// For states the runtime reaches on its own shortly after an event (a
/// worker going to sleep once it is out of work).
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "{what}: still not the case after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The path of an example of this crate, built with the tests' profile (and
/// the `tracing-full` feature when the tests have it) if it is not up to
/// date: cargo usually builds examples with the tests, but not when a
/// single test target is asked for.
///
/// The example is built the way this test binary was: into the same target
/// directory, and for the same target triple when the tests were built
/// with `--target` (their binary then sits in `<target-dir>/<triple>/`, as
/// under the CI's AddressSanitizer step). The rest comes through the
/// environment cargo ran the tests in: `RUSTFLAGS`, the toolchain
/// (`RUSTUP_TOOLCHAIN`, `CARGO`) and unstable settings given as
/// `CARGO_UNSTABLE_*` (the sanitizer step's `CARGO_UNSTABLE_BUILD_STD`).
pub fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // `<profile dir>/deps/<test binary>`.
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let parent = dir.parent().expect("target dir");
    // Built with `--target`: the profile directory sits in a directory
    // named for the triple (`x86_64-unknown-linux-gnu`), inside the target
    // directory; otherwise directly in the target directory.
    let triple = parent
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| {
            name.starts_with(&format!("{}-", std::env::consts::ARCH))
                && name.contains(std::env::consts::OS)
        });
    let target_dir = match (triple, parent.parent()) {
        (Some(_), Some(root)) => root,
        _ => parent,
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| String::from("cargo"));
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "-q", "-p", "spindle-exec-wstp", "--example", name]);
    build.arg("--target-dir").arg(target_dir);
    if let Some(triple) = triple {
        build.args(["--target", triple]);
    }
    if cfg!(feature = "tracing-full") {
        build.args(["--features", "tracing-full"]);
    }
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().expect("cargo build of the example");
    assert!(status.success(), "building examples/{name} failed");
    dir.join("examples").join(name)
}
