//! The app entry point as a process: exit codes, and finalizers on SIGINT.
//!
//! Each test runs `examples/app_lifecycle.rs` as a child process (cargo
//! builds examples along with the tests; the path is found next to this
//! test binary, and built on demand if missing) and checks its exit code
//! and output.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn example() -> PathBuf {
    // Once per test binary.
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| common::example("app_lifecycle"))
        .clone()
}

fn run(mode: &str) -> Output {
    Command::new(example())
        .arg(mode)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the example")
}

fn spawn(mode: &str) -> Child {
    Command::new(example())
        .arg(mode)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example")
}

/// Reads stdout lines until `line` appears.
fn wait_for_line(child: &mut Child, line: &str) -> BufReader<std::process::ChildStdout> {
    let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut buffer = String::new();
    loop {
        buffer.clear();
        let n = reader.read_line(&mut buffer).expect("read stdout");
        assert!(n > 0, "the child closed stdout before printing {line:?}");
        if buffer.trim_end() == line {
            return reader;
        }
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} failed");
}

/// Waits for the child, killing it if it takes longer than `limit`.
fn wait_with_limit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the child did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_successful_main_exits_with_code_0() {
    let output = run("ok");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "done\n");
}

#[test]
fn a_main_that_errors_exits_with_code_1_and_prints_the_error() {
    let output = run("error");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("error: \"the order was refused\""),
        "stderr: {stderr}"
    );
}

#[test]
fn a_main_that_panics_exits_with_code_101_and_prints_the_message() {
    let output = run("panic");
    assert_eq!(output.status.code(), Some(101));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("panicked: a bug in a fiber"),
        "stderr: {stderr}"
    );
}

#[test]
fn a_main_that_cancels_itself_exits_with_code_130() {
    let output = run("cancel");
    assert_eq!(output.status.code(), Some(130));
}

/// Starts the `wait` mode, sends `signal` once it is ready, and checks that
/// the finalizer ran and the exit code is 130.
fn a_signal_cancels_the_main_fiber_and_runs_its_finalizer(signal_name: &str) {
    let mut child = spawn("wait");
    let mut stdout = wait_for_line(&mut child, "ready");
    signal(&child, signal_name);
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("read stdout");
    assert_eq!(rest, "finalizer ran\n");
    assert_eq!(status.code(), Some(130));
}

#[test]
fn sigint_cancels_the_main_fiber_runs_its_finalizers_and_exits_with_130() {
    a_signal_cancels_the_main_fiber_and_runs_its_finalizer("INT");
}

#[test]
fn sigterm_also_runs_the_finalizers() {
    a_signal_cancels_the_main_fiber_and_runs_its_finalizer("TERM");
}

#[test]
fn a_second_signal_forces_the_exit_while_finalizers_still_run() {
    let mut child = spawn("slow-finalizer");
    let stdout = wait_for_line(&mut child, "ready");
    signal(&child, "INT");
    // The release starts (and would take an hour).
    let mut stdout = stdout;
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read stdout");
    assert_eq!(line, "finalizing\n");
    signal(&child, "INT");
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130));
}

#[test]
fn sigusr1_prints_a_fiber_dump_and_the_program_goes_on() {
    let mut child = spawn("wait");
    let mut stdout = wait_for_line(&mut child, "ready");
    signal(&child, "USR1");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read stderr");
    assert_eq!(line, "spindle runtime dump\n");
    // The metrics, then the fiber dump, which ends with its summary line.
    let mut dump = String::new();
    loop {
        line.clear();
        let n = stderr.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "the dump ended early:\n{dump}");
        dump.push_str(&line);
        if line.starts_with("live fibers: ") && line.contains("workers: ") {
            break;
        }
    }
    assert!(dump.contains("global queue: "), "{dump}");
    if spindle_core::executor::support::lists_fibers(&spindle_core::FiberConfig::default()) {
        // The main fiber waits in the `never` of its bracket, and its
        // trace shows where the example built it.
        let main = dump
            .split("\n\n")
            .find(|block| block.contains("examples/app_lifecycle.rs"))
            .unwrap_or_else(|| panic!("no fiber traced in the example:\n{dump}"));
        assert!(main.starts_with("fiber #"), "{main}");
        assert!(main.lines().next().unwrap().ends_with("WAITING"), "{main}");
        assert!(main.contains("never @ "), "{main}");
    }
    // Still running: SIGINT then ends it normally, with its finalizer.
    assert!(child.try_wait().expect("try_wait").is_none());
    signal(&child, "INT");
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("read stdout");
    assert_eq!(rest, "finalizer ran\n");
    assert_eq!(status.code(), Some(130));
}
