//! `examples/trace_demo.rs` as a process: its traces point into the
//! example's own file, in the order the program ran, never into Spindle's
//! files; its failure is printed with its trace; its fiber dump shows the
//! three deadlocked fibers waiting in `Deferred::get`, numbered as their
//! handles show them.

#![cfg(feature = "tracing")]

mod common;

use std::path::PathBuf;
use std::process::Command;

fn example() -> PathBuf {
    // Once per test binary.
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| common::example("trace_demo")).clone()
}

/// The example's stdout with the given tracing mode.
fn run(mode: &str) -> String {
    let output = run_output(mode);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// The example's stdout in mode `cached`, run once for the tests that
/// read different parts of it.
fn cached_output() -> &'static str {
    static OUT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OUT.get_or_init(|| run("cached"))
}

fn run_output(mode: &str) -> std::process::Output {
    Command::new(example())
        .env("SPINDLE_TRACING", mode)
        .output()
        .expect("run the example")
}

#[cfg(not(feature = "tracing-full"))]
#[test]
fn full_mode_without_its_feature_stops_the_example_with_an_error_naming_the_feature() {
    let output = run_output("full");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("tracing-full"), "{stderr}");
}

/// The lines of the section that starts with `== {title}`.
fn section<'a>(out: &'a str, title: &str) -> Vec<&'a str> {
    out.split("\n== ")
        .find(|s| s.trim_start_matches("== ").starts_with(title))
        .unwrap_or_else(|| panic!("no section {title:?} in\n{out}"))
        .lines()
        .collect()
}

fn event_lines<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .copied()
        .filter(|l| l.contains(" @ "))
        .collect()
}

/// The line number of each event (`... trace_demo.rs:LINE:COL`).
fn line_numbers(events: &[&str]) -> Vec<u32> {
    events
        .iter()
        .map(|e| {
            let at =
                e.find("trace_demo.rs:").expect("a site in the example") + "trace_demo.rs:".len();
            e[at..].split(':').next().unwrap().parse().unwrap()
        })
        .collect()
}

#[test]
fn the_seed_programs_trace_points_into_the_example_in_the_order_it_ran() {
    let out = cached_output();
    let lines = section(out, "the seed's program");
    let printed: Vec<&str> = lines.iter().copied().filter(|l| l.len() == 1).collect();
    assert_eq!(printed, ["1", "2", "3", "7", "8", "4", "5"], "{out}");
    let events = event_lines(&lines);
    assert_eq!(events.len(), 20, "{out}");
    for event in &events {
        assert!(
            event.contains("exec-wstp/examples/trace_demo.rs:"),
            "{event}"
        );
        assert!(!event.contains("/src/"), "{event}");
    }
    let ops: Vec<&str> = events
        .iter()
        .map(|e| e.split(" @ ").next().unwrap().trim())
        .collect();
    // The async boundary and the bracket are there, in the order they ran.
    let cede = ops.iter().position(|&o| o == "cede").expect("cede");
    let bracket = ops.iter().position(|&o| o == "bracket").expect("bracket");
    assert!(cede < bracket, "{out}");
    // `program2` (near the top of the file) ran inside the bracket's use:
    // between the bracket and the steps after it.
    let numbers = line_numbers(&events);
    let program2 = numbers
        .iter()
        .position(|&n| n < 30)
        .expect("program2's events");
    assert!(bracket < program2, "{out}");
    assert_eq!(
        *numbers.last().unwrap(),
        numbers[numbers.len() - 2],
        "{out}"
    );
}

#[test]
fn the_failure_is_printed_with_the_trace_of_the_three_nested_calls() {
    let out = cached_output();
    let lines = section(out, "a failure deep inside");
    assert!(
        lines[1].starts_with("error: card declined for 1205 cents"),
        "{out}"
    );
    let events = event_lines(&lines);
    let closures: Vec<&str> = events
        .iter()
        .map(|e| e.rsplit('(').next().unwrap().trim_end_matches(')'))
        .collect();
    assert_eq!(
        closures,
        [
            "trace_demo::reserve",
            "trace_demo::checkout",
            "trace_demo::charge",
            "trace_demo::reserve",
            "trace_demo::charge",
            "trace_demo::charge",
        ],
        "{out}"
    );
    let numbers = line_numbers(&events);
    assert!(numbers.windows(2).all(|w| w[0] <= w[1]), "{out}");
}

#[test]
fn closures_are_named_by_the_function_they_were_written_in() {
    let out = cached_output();
    assert!(!out.contains("{{closure}}"), "{out}");
    let lines = section(out, "the seed's program");
    let mut functions: Vec<&str> = event_lines(&lines)
        .iter()
        .filter(|e| e.ends_with(')'))
        .map(|e| e.rsplit('(').next().unwrap().trim_end_matches(')'))
        .collect();
    functions.sort_unstable();
    functions.dedup();
    // `program`'s closures are nested four deep: each event names `program`.
    assert_eq!(
        functions,
        [
            "trace_demo::program",
            "trace_demo::program2",
            "trace_demo::traced_run"
        ],
        "{out}"
    );
}

#[test]
fn the_fiber_dump_shows_three_fibers_waiting_in_deferred_get() {
    let out = cached_output();
    let lines = section(out, "a fiber dump");
    let fibers: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("fiber #"))
        .collect();
    // The three programs' main fibers were #1 to #3; the fibers the third
    // started are the next three, and their handles say so.
    assert_eq!(
        fibers,
        ["fiber #4 WAITING", "fiber #5 WAITING", "fiber #6 WAITING"],
        "{out}"
    );
    assert!(
        lines.contains(
            &"started: [FiberHandle { fiber: #4 }, FiberHandle { fiber: #5 }, FiberHandle { fiber: #6 }]"
        ),
        "{out}"
    );
    let gets: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("╰ Deferred::get @ exec-wstp/examples/trace_demo.rs:"))
        .collect();
    assert_eq!(gets.len(), 3, "{out}");
    let mut numbers = line_numbers(&gets);
    numbers.sort();
    numbers.dedup();
    assert_eq!(numbers.len(), 3, "each fiber waits at its own line: {out}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("live fibers: 3, workers: 2")),
        "{out}"
    );
}

#[cfg(feature = "tracing-full")]
#[test]
fn full_mode_names_the_function_that_built_each_operation() {
    let out = run("full");
    // Operations built inside closures name the function around them.
    assert!(!out.contains("{{closure}}"), "{out}");
    let lines = section(&out, "a failure deep inside");
    let events = event_lines(&lines);
    let functions: Vec<&str> = events
        .iter()
        .map(|e| e.split(" @ ").nth(1).unwrap().split(" (").next().unwrap())
        .collect();
    assert_eq!(
        functions,
        [
            "trace_demo::checkout",
            "trace_demo::checkout",
            "trace_demo::reserve",
            "trace_demo::reserve",
            "trace_demo::charge",
            "trace_demo::charge",
        ],
        "{out}"
    );
}

#[test]
fn mode_none_prints_empty_traces() {
    let out = run("none");
    assert!(
        event_lines(&section(&out, "the seed's program")).is_empty(),
        "{out}"
    );
    assert!(
        section(&out, "a failure deep inside")[1] == "error: card declined for 1205 cents",
        "{out}"
    );
}
