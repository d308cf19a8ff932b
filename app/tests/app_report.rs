//! What the app entry point prints when the main program fails (the error,
//! then the main fiber's trace under it), and how a bad `SPINDLE_TRACING`
//! is reported, on every std executor.
//!
//! Each test runs its own body in a child process: this test binary again,
//! filtered to the one test, with an environment variable that tells the
//! body it is the child (`common::child`). The child calls the entry point (which reads the
//! environment and prints to the process's stderr) and exits with a code
//! that says which exit code it returned; the parent checks the output.

mod common;

use std::process::Output;

use common::{child, every_executor, exit_with, is_child};
use spindle_app::{ERROR_EXIT_CODE, PANIC_EXIT_CODE};
use spindle_core::{FiberConfig, IO, UIO};

/// Whether traces are recorded by default (io-core built with `tracing`).
fn traces() -> bool {
    spindle_core::executor::support::lists_fibers(&FiberConfig::default())
}

/// Runs the test `name` in a child process, with `tracing` as
/// `SPINDLE_TRACING` (unset if `None`).
fn run_child(name: &str, tracing: Option<&str>) -> Output {
    let mut command = child(name);
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

/// The line of the main fiber's `both` in [`main_failing_in_a_child`].
const BOTH_LINE: u32 = line!() + 7;

/// A main fiber that runs [`failing_main`] in a child fiber (`both`, with
/// a side that never ends): the child's error is raised again in the main
/// fiber.
fn main_failing_in_a_child() -> IO<(), String> {
    IO::delay(|| 1)
        .flat_map(|_| failing_main().both(IO::<(), String>::never()))
        .map(|_| ())
}

/// Checks that the child exited with `code`, and returns its stderr.
fn stderr_with_code(output: &Output, code: u8) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(i32::from(code)), "{stderr}");
    stderr
}

/// The parent's checks of [`failing_main`] run with tracing mode `cached`.
fn check_error_and_trace(output: &Output) {
    let stderr = stderr_with_code(output, ERROR_EXIT_CODE);
    let lines = lines_from(&stderr, "error: ");
    assert_eq!(lines[0], "error: \"order 21 was refused\"", "{stderr}");
    if !traces() {
        return;
    }
    let trace: Vec<&str> = lines[1..]
        .iter()
        .copied()
        .take_while(|line| line.starts_with("    at "))
        .collect();
    let file = file!();
    // Most recent first: the raise_error (the line that raised the error),
    // the second delay, the first, then the two flat_maps (evaluated before
    // their sources ran).
    let expected = [
        ("raise_error", FIRST_DELAY_LINE + 2),
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
    assert!(
        !stderr.contains("spindle-app") && !stderr.contains("app/src"),
        "{stderr}"
    );
}

every_executor! {
    fn a_main_that_errors_prints_the_error_then_its_trace_most_recent_first() {
        if is_child(TEST) {
            exit_with(run_app(failing_main()));
        }
        check_error_and_trace(&run_child(TEST, Some("cached")));
    }

    fn a_main_whose_child_fiber_errors_prints_the_childs_trace_then_the_main_fibers() {
        if is_child(TEST) {
            exit_with(run_app(main_failing_in_a_child()));
        }
        let output = run_child(TEST, Some("cached"));
        // The child's trace first: where the error was raised.
        check_error_and_trace(&output);
        if !traces() {
            return;
        }
        let stderr = stderr_with_code(&output, ERROR_EXIT_CODE);
        let lines = lines_from(&stderr, "    at ");
        let joined = lines
            .iter()
            .position(|line| *line == "  in the fiber that joined it:")
            .unwrap_or_else(|| panic!("no line between the two traces in:\n{stderr}"));
        assert_eq!(joined, 5, "{stderr}");
        // Then the main fiber's, from the `both` that raised it again.
        let both = format!("    at both @ {}:{BOTH_LINE}:", file!());
        assert!(lines[joined + 1].starts_with(&both), "{stderr}");
        assert!(lines[joined + 1..].iter().all(|l| l.starts_with("    at ")), "{stderr}");
    }

    fn a_main_that_panics_prints_the_message_then_its_trace() {
        if is_child(TEST) {
            let program: IO<(), String> =
                IO::delay(|| 1).flat_map(|_| IO::delay(|| panic!("a bug in a fiber")));
            exit_with(run_app(program));
        }
        let output = run_child(TEST, None);
        let stderr = stderr_with_code(&output, PANIC_EXIT_CODE);
        let lines = lines_from(&stderr, "panicked: ");
        assert_eq!(lines[0], "panicked: a bug in a fiber", "{stderr}");
        if traces() {
            let at = format!("    at delay @ {}:", file!());
            assert!(lines.len() > 1 && lines[1].starts_with(&at), "{stderr}");
        }
    }

    fn with_tracing_mode_none_a_failing_main_prints_only_the_error() {
        if is_child(TEST) {
            exit_with(run_app(failing_main()));
        }
        let output = run_child(TEST, Some("none"));
        let stderr = stderr_with_code(&output, ERROR_EXIT_CODE);
        let lines = lines_from(&stderr, "error: ");
        assert_eq!(lines, ["error: \"order 21 was refused\""], "{stderr}");
    }

    fn an_unknown_spindle_tracing_mode_is_printed_and_exits_with_1_running_nothing() {
        if is_child(TEST) {
            exit_with(run_app(UIO::delay(|| eprintln!("the main program ran"))));
        }
        let output = run_child(TEST, Some("verbose"));
        let stderr = stderr_with_code(&output, ERROR_EXIT_CODE);
        let line = lines_from(&stderr, "error: ")[0];
        for word in ["SPINDLE_TRACING", "verbose", "none", "cached", "full"] {
            assert!(line.contains(word), "{word:?} in {line:?}");
        }
        assert!(!stderr.contains("the main program ran"), "{stderr}");
    }
}
