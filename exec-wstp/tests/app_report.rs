//! What the app entry point prints when the main program fails (the error,
//! then the main fiber's trace under it), and how a bad `SPINDLE_TRACING`
//! is reported.
//!
//! Each test runs its own body in a child process: this test binary again,
//! filtered to the one test, with an environment variable that tells the
//! body it is the child. The child calls `app::run` (which reads the
//! environment and prints to the process's stderr) and exits with a code
//! that says which exit code `app::run` returned; the parent checks the
//! output.

use std::process::{Command, ExitCode, Output};

use spindle_core::{FiberConfig, IO, UIO};
use spindle_exec_wstp::app::{self, ERROR_EXIT_CODE, PANIC_EXIT_CODE};
use spindle_exec_wstp::{BuildError, Runtime};

/// Set (to the test's name) in the child's environment.
const CHILD: &str = "EXEC_WSTP_APP_REPORT_CHILD";

/// Whether this process is the child of the test `name`.
fn is_child(name: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == name)
}

/// Ends the child with `code`'s number (the exit codes `app::run` uses).
fn exit_with(code: ExitCode) -> ! {
    for known in [0, ERROR_EXIT_CODE, PANIC_EXIT_CODE] {
        if code == ExitCode::from(known) {
            std::process::exit(i32::from(known));
        }
    }
    std::process::exit(99)
}

/// Runs the test `name` in a child process, with `tracing` as
/// `SPINDLE_TRACING` (unset if `None`).
fn run_child(name: &str, tracing: Option<&str>) -> Output {
    let exe = std::env::current_exe().expect("the test binary");
    let mut command = Command::new(exe);
    command
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .env("RUST_BACKTRACE", "0");
    match tracing {
        Some(mode) => command.env("SPINDLE_TRACING", mode),
        None => command.env_remove("SPINDLE_TRACING"),
    };
    command.output().expect("run the child")
}

/// The lines of `stderr` from the one that starts with `first` on.
fn lines_from<'a>(stderr: &'a str, first: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.starts_with(first))
        .unwrap_or_else(|| panic!("no line starting with {first:?} in:\n{stderr}"));
    lines[start..].to_vec()
}

/// The line of the first `delay` in [`failing_main`].
const FIRST_DELAY_LINE: u32 = line!() + 4;

/// Three traced steps, then an error.
fn failing_main() -> IO<(), String> {
    IO::delay(|| 20)
        .flat_map(|n| IO::delay(move || n + 1))
        .flat_map(|n| IO::raise_error(format!("order {n} was refused")))
}

#[test]
fn a_main_that_errors_prints_the_error_then_its_trace_most_recent_first() {
    const NAME: &str = "a_main_that_errors_prints_the_error_then_its_trace_most_recent_first";
    if is_child(NAME) {
        exit_with(app::run(failing_main()));
    }
    let output = run_child(NAME, Some("cached"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(i32::from(ERROR_EXIT_CODE)),
        "{stderr}"
    );
    let lines = lines_from(&stderr, "error: ");
    assert_eq!(lines[0], "error: \"order 21 was refused\"", "{stderr}");
    if !cfg!(feature = "tracing") {
        return;
    }
    let trace: Vec<&str> = lines[1..]
        .iter()
        .copied()
        .take_while(|line| line.starts_with("    at "))
        .collect();
    let file = file!();
    // Most recent first: the second delay, the first, then the two
    // flat_maps (evaluated before their sources ran).
    let expected = [
        ("delay", FIRST_DELAY_LINE + 1),
        ("delay", FIRST_DELAY_LINE),
        ("flat_map", FIRST_DELAY_LINE + 1),
        ("flat_map", FIRST_DELAY_LINE + 2),
    ];
    assert_eq!(trace.len(), expected.len(), "{stderr}");
    for (line, (op, at)) in trace.iter().zip(expected) {
        let prefix = format!("    at {op} @ {file}:{at}:");
        assert!(
            line.starts_with(&prefix),
            "{line:?} is not {prefix:?}:\n{stderr}"
        );
    }
    // The entry point's own plumbing is not shown.
    assert!(!stderr.contains("app.rs"), "{stderr}");
}

#[test]
fn a_main_that_panics_prints_the_message_then_its_trace() {
    const NAME: &str = "a_main_that_panics_prints_the_message_then_its_trace";
    if is_child(NAME) {
        let program: IO<(), String> =
            IO::delay(|| 1).flat_map(|_| IO::delay(|| panic!("a bug in a fiber")));
        exit_with(app::run(program));
    }
    let output = run_child(NAME, None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(i32::from(PANIC_EXIT_CODE)),
        "{stderr}"
    );
    let lines = lines_from(&stderr, "panicked: ");
    assert_eq!(lines[0], "panicked: a bug in a fiber", "{stderr}");
    if !cfg!(feature = "tracing") {
        return;
    }
    let at = format!("    at delay @ {}:", file!());
    assert!(lines.len() > 1 && lines[1].starts_with(&at), "{stderr}");
}

#[test]
fn with_tracing_mode_none_a_failing_main_prints_only_the_error() {
    const NAME: &str = "with_tracing_mode_none_a_failing_main_prints_only_the_error";
    if is_child(NAME) {
        exit_with(app::run(failing_main()));
    }
    let output = run_child(NAME, Some("none"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(i32::from(ERROR_EXIT_CODE)),
        "{stderr}"
    );
    let lines = lines_from(&stderr, "error: ");
    assert_eq!(lines, ["error: \"order 21 was refused\""], "{stderr}");
}

#[test]
fn an_unknown_spindle_tracing_mode_is_a_from_env_error_naming_the_valid_modes() {
    const NAME: &str = "an_unknown_spindle_tracing_mode_is_a_from_env_error_naming_the_valid_modes";
    if is_child(NAME) {
        match Runtime::from_env() {
            Err(BuildError::Config(e)) => eprintln!("build error: {}", BuildError::Config(e)),
            other => eprintln!("unexpected: {other:?}"),
        }
        // The builder (and `new`) do not read the environment.
        let default = Runtime::builder().worker_threads(1).build();
        eprintln!("builder builds: {}", default.is_ok());
        // A given configuration does not read the environment.
        let explicit = Runtime::builder()
            .worker_threads(1)
            .fiber_config(FiberConfig::default())
            .build();
        eprintln!("explicit config builds: {}", explicit.is_ok());
        exit_with(app::run(UIO::unit()));
    }
    let output = run_child(NAME, Some("verbose"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = lines_from(&stderr, "build error: ")[0];
    for word in ["SPINDLE_TRACING", "verbose", "none", "cached", "full"] {
        assert!(line.contains(word), "{word:?} in {line:?}");
    }
    assert!(stderr.contains("explicit config builds: true"), "{stderr}");
    assert!(stderr.contains("builder builds: true"), "{stderr}");
    // `app::run` prints the same error and exits with 1, running nothing.
    let error = lines_from(&stderr, "error: exec-wstp: ")[0];
    assert!(error.contains("verbose"), "{stderr}");
    assert_eq!(
        output.status.code(),
        Some(i32::from(ERROR_EXIT_CODE)),
        "{stderr}"
    );
}
