//! The app entry point as a process, on every std executor: exit codes,
//! finalizers on SIGINT and SIGTERM, the forced exit on a second signal,
//! the dump on SIGUSR1.
//!
//! Each test runs itself again as a child process (this test binary,
//! filtered to the test; see `common::child`): the child runs the program
//! of a mode of `common/lifecycle.rs` (the programs of
//! `examples/app_lifecycle.rs`) through its module's executor's entry
//! point, and the parent checks its exit code and output, and sends it
//! signals. On exec-single and exec-batching the loop runs on the child's
//! main thread, inside `block_on`: the signal thread's cancel reaches it
//! through the loop's remote queue, whose push wakes the parked or polling
//! loop.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

use common::{child, every_executor, exit_with, is_child, lifecycle, program_stdout};
use spindle_core::IO;

/// The entry point of one executor.
type RunApp = fn(IO<(), String>) -> ExitCode;

/// In the child of the test `name`: runs the program of `mode` with
/// `run_app` and exits. In the parent: nothing.
fn child_runs(name: &str, mode: &str, run_app: RunApp) {
    if is_child(name) {
        let program = lifecycle::program(mode).expect("a known mode");
        exit_with(run_app(program));
    }
}

/// Runs the child of the test `name` to its end (the program of `mode`).
fn run(name: &str, mode: &str, run_app: RunApp) -> Output {
    child_runs(name, mode, run_app);
    child(name).output().expect("run the child")
}

/// Starts the child of the test `name` (the program of `mode`), its output
/// piped.
fn spawn(name: &str, mode: &str, run_app: RunApp) -> Child {
    child_runs(name, mode, run_app);
    child(name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child")
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
    let status = std::process::Command::new("kill")
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

/// Runs the child of `name` in `mode` and checks its exit code and that
/// its stderr contains `printed`.
fn exits_with(name: &str, mode: &str, run_app: RunApp, code: i32, printed: &str) {
    let output = run(name, mode, run_app);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains(printed), "stderr: {stderr}");
}

/// Starts the `wait` mode, sends `signal` once it is ready, and checks that
/// the finalizer ran and the exit code is 130.
fn a_signal_cancels_the_main_fiber_and_runs_its_finalizer(
    name: &str,
    run_app: RunApp,
    signal_name: &str,
) {
    let mut child = spawn(name, "wait", run_app);
    let mut stdout = wait_for_line(&mut child, "ready");
    signal(&child, signal_name);
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("read stdout");
    assert_eq!(rest, "finalizer ran\n");
    assert_eq!(status.code(), Some(130));
}

/// Reads one SIGUSR1 dump from `stderr`: the title line, the executor's
/// metrics, a blank line, then the fiber dump, which ends with its summary
/// line (the metrics of some executors start the same). Returns all but
/// the title.
fn read_dump(stderr: &mut BufReader<std::process::ChildStderr>) -> String {
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read stderr");
    assert_eq!(line, "spindle runtime dump\n");
    let mut dump = String::new();
    let mut past_metrics = false;
    loop {
        line.clear();
        let n = stderr.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "the dump ended early:\n{dump}");
        dump.push_str(&line);
        if past_metrics && line.starts_with("live fibers: ") {
            break;
        }
        past_metrics |= line == "\n";
    }
    // The executor's metrics come first, on their own lines.
    let metrics = dump.lines().next().unwrap_or_default();
    assert!(
        !metrics.is_empty() && !metrics.starts_with("fiber #"),
        "{dump}"
    );
    dump
}

every_executor! {
    fn a_successful_main_exits_with_code_0() {
        let output = run(TEST, "ok", run_app);
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(program_stdout(&String::from_utf8_lossy(&output.stdout)), "done\n");
    }

    fn a_main_that_errors_exits_with_code_1_and_prints_the_error() {
        exits_with(TEST, "error", run_app, 1, "error: \"the order was refused\"");
    }

    fn a_main_that_panics_exits_with_code_101_and_prints_the_message() {
        exits_with(TEST, "panic", run_app, 101, "panicked: a bug in a fiber");
    }

    fn a_main_that_cancels_itself_exits_with_code_130() {
        exits_with(TEST, "cancel", run_app, 130, "canceled");
    }

    fn sigint_cancels_the_main_fiber_runs_its_finalizers_and_exits_with_130() {
        a_signal_cancels_the_main_fiber_and_runs_its_finalizer(TEST, run_app, "INT");
    }

    fn sigterm_also_runs_the_finalizers() {
        a_signal_cancels_the_main_fiber_and_runs_its_finalizer(TEST, run_app, "TERM");
    }

    fn a_second_signal_forces_the_exit_while_finalizers_still_run() {
        let mut child = spawn(TEST, "slow-finalizer", run_app);
        let mut stdout = wait_for_line(&mut child, "ready");
        signal(&child, "INT");
        // The release starts (and would take an hour).
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read stdout");
        assert_eq!(line, "finalizing\n");
        signal(&child, "INT");
        let status = wait_with_limit(&mut child, Duration::from_secs(30));
        assert_eq!(status.code(), Some(130));
    }

    fn sigusr1_prints_a_fiber_dump_and_the_program_goes_on() {
        let mut child = spawn(TEST, "wait", run_app);
        let mut stdout = wait_for_line(&mut child, "ready");
        let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
        let traced = spindle_core::executor::support::lists_fibers(&spindle_core::FiberConfig::default());
        // "ready" is printed just before the main fiber suspends in its
        // `never`: a dump taken in between shows it running, so ask again.
        for attempt in 0.. {
            signal(&child, "USR1");
            let dump = read_dump(&mut stderr);
            if !traced {
                break;
            }
            // The main fiber waits in the `never` of its bracket, and its
            // trace shows where the program was built. A fiber is listed
            // once its first run ends (`Executor::fiber_listed`), so a
            // dump taken while that run still goes on may not show it yet.
            let Some(main) = dump
                .split("\n\n")
                .find(|block| block.contains("tests/common/lifecycle.rs"))
            else {
                assert!(attempt < 100, "no fiber traced in the program:\n{dump}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            assert!(main.starts_with("fiber #"), "{main}");
            if main.lines().next().unwrap().ends_with("WAITING") {
                assert!(main.contains("never @ "), "{main}");
                break;
            }
            assert!(attempt < 100, "the main fiber never waits:\n{main}");
            std::thread::sleep(Duration::from_millis(10));
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
}
