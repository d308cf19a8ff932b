//! `examples/trace_demo.rs` as a process: its traces point into the
//! example's own file, most recent event first, never into Spindle's
//! files; its failure, raised in a child fiber, is printed with the child's
//! trace first (where it failed) and then its parent's; closures are named
//! by the function they were written in; its fiber dump shows the three
//! deadlocked fibers waiting in `Deferred::get`, numbered as their handles
//! show them.

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
fn the_seed_programs_trace_points_into_the_example_most_recent_event_first() {
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
    // The async boundary and the bracket are there, the one that ran last
    // first.
    let cede = ops.iter().position(|&o| o == "cede").expect("cede");
    let bracket = ops.iter().position(|&o| o == "bracket").expect("bracket");
    assert!(bracket < cede, "{out}");
    // `program2` (near the top of the file) ran inside the bracket's use:
    // after the bracket began, so it is printed above it.
    let numbers = line_numbers(&events);
    let program2 = numbers
        .iter()
        .position(|&n| n < 30)
        .expect("program2's events");
    assert!(program2 < bracket, "{out}");
    // The last step, on one line (its bind and its source), is on top.
    assert_eq!(numbers[0], numbers[1], "{out}");
    assert_eq!(ops[..2], ["delay", "flat_map"], "{out}");
}

/// The failure section, split into the child's trace (the lines under
/// `trace of a child fiber`) and the parent's (under `trace (`).
fn failure_traces(out: &str) -> (Vec<&str>, Vec<&str>) {
    let lines = section(out, "a failure deep inside a child fiber");
    let child_at = lines
        .iter()
        .position(|l| l.starts_with("trace of a child fiber ("))
        .unwrap_or_else(|| panic!("no child trace in\n{out}"));
    let parent_at = lines
        .iter()
        .position(|l| l.starts_with("trace ("))
        .unwrap_or_else(|| panic!("no parent trace in\n{out}"));
    assert!(child_at < parent_at, "{out}");
    (
        event_lines(&lines[child_at..parent_at]),
        event_lines(&lines[parent_at..]),
    )
}

#[test]
fn the_failure_in_a_child_is_printed_with_its_three_nested_calls_then_the_parents_trace() {
    let out = cached_output();
    let lines = section(out, "a failure deep inside a child fiber");
    assert!(
        lines[1].starts_with("error: card declined for 1205 cents"),
        "{out}"
    );
    let (child, parent) = failure_traces(out);
    // Most recent first: the `raise_error` at its line in `charge`, then
    // the calls that led there, back to the child's first step.
    assert!(
        child[0]
            .trim_start()
            .starts_with("raise_error @ exec-wstp/examples/trace_demo.rs:"),
        "{out}"
    );
    let closures: Vec<&str> = child[1..]
        .iter()
        .map(|e| e.rsplit('(').next().unwrap().trim_end_matches(')'))
        .collect();
    assert_eq!(
        closures,
        [
            "trace_demo::charge",
            "trace_demo::charge",
            "trace_demo::reserve",
            "trace_demo::charge",
            "trace_demo::checkout",
            "trace_demo::reserve",
        ],
        "{out}"
    );
    let numbers = line_numbers(&child);
    assert!(numbers.windows(2).all(|w| w[0] >= w[1]), "{out}");
    // The parent's trace: the `par_traverse` that raised the error again on
    // top, then the steps that led to it; none of the child's.
    let ops: Vec<&str> = parent
        .iter()
        .map(|e| e.split(" @ ").next().unwrap().trim())
        .collect();
    assert_eq!(ops, ["par_traverse", "delay", "flat_map"], "{out}");
    let parent_numbers = line_numbers(&parent);
    assert!(parent_numbers.iter().all(|n| !numbers.contains(n)), "{out}");
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
    // The first two programs' main fibers are #1 and #2, the children of
    // the second's `par_traverse` over three orders #3 to #5, the third
    // program's main fiber #6; the fibers it started are the next three,
    // and their handles say so.
    assert_eq!(
        fibers,
        ["fiber #7 WAITING", "fiber #8 WAITING", "fiber #9 WAITING"],
        "{out}"
    );
    assert!(
        lines.contains(
            &"started: [FiberHandle { fiber: #7 }, FiberHandle { fiber: #8 }, FiberHandle { fiber: #9 }]"
        ),
        "{out}"
    );
    // Each fiber's most recent event, on the line under its header, is
    // the wait.
    let gets: Vec<&str> = lines
        .windows(2)
        .filter(|w| w[0].starts_with("fiber #"))
        .map(|w| w[1])
        .filter(|l| l.contains("├ Deferred::get @ exec-wstp/examples/trace_demo.rs:"))
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
    // Operations built inside closures name the function around them (the
    // `raise_error` in `charge` first).
    assert!(!out.contains("{{closure}}"), "{out}");
    let (events, _) = failure_traces(&out);
    let functions: Vec<&str> = events
        .iter()
        .map(|e| e.split(" @ ").nth(1).unwrap().split(" (").next().unwrap())
        .collect();
    assert_eq!(
        functions,
        [
            "trace_demo::charge",
            "trace_demo::charge",
            "trace_demo::charge",
            "trace_demo::reserve",
            "trace_demo::reserve",
            "trace_demo::checkout",
            "trace_demo::checkout",
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
        section(&out, "a failure deep inside a child fiber")[1]
            == "error: card declined for 1205 cents",
        "{out}"
    );
}
