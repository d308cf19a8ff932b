//! Failures that cross fibers: an error raised in a child fiber and raised
//! again by its parent (`join_with_never`, `both`, `race`, `par_traverse`
//! and their variants) keeps the child's trace, so `trace_errors()` in the
//! parent shows the call site where the child failed, first, and then the
//! parent's own trace, on every executor.
//!
//! Every child fails in [`fail_here`], whose last operation is at
//! [`FAIL_LINE`] of this file: that line must be the first event printed
//! under the error.

#![cfg(feature = "tracing")]

mod common;

use std::num::NonZeroUsize;
use std::time::Duration;

use common::rt_test;
use spindle_core::{FiberConfig, IO, Outcome, Trace, Traced, TracingMode};

type Io<A> = IO<A, String>;

/// The line of [`fail_here`]'s last operation.
const FAIL_LINE: u32 = line!() + 4;

/// Fails with "card declined"; its last operation is at [`FAIL_LINE`].
fn fail_here<A: Send + 'static>() -> Io<A> {
    IO::delay(|| "card declined".to_string()).flat_map(IO::raise_error)
}

/// How a parent runs a child.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `start`, then `join_with_never`.
    Join,
    /// `both`, with a side that never ends.
    Both,
    /// `race`, with a side that never ends.
    Race,
    /// `par_traverse` over three items, the second one the child.
    ParTraverse,
    /// `par_traverse_n` with a parallelism of 2.
    ParTraverseN,
    /// `par_map2`, with a side that never ends.
    ParMap2,
}

// (`timeout` is not among them: its body runs on the caller's own fiber,
// `a_timeout_body_fails_in_its_callers_own_trace_without_a_child_trace`.)
const EVERY_WAY: [Via; 6] = [
    Via::Join,
    Via::Both,
    Via::Race,
    Via::ParTraverse,
    Via::ParTraverseN,
    Via::ParMap2,
];

/// The error type of `timeout` (the error stays a `String`).
fn never<A: Send + 'static>() -> Io<A> {
    IO::never()
}

/// `child` run in a child fiber of the parent, by `via`; the parent's own
/// operations are on the lines of this function.
fn via(how: Via, child: Io<u32>) -> Io<u32> {
    match how {
        Via::Join => child.start().flat_map(|fiber| fiber.join_with_never()),
        Via::Both => child.both(never::<u32>()).map(|(a, _)| a),
        Via::Race => child.race(never::<u32>()).map(|_| 0),
        Via::ParTraverse => {
            let mut child = Some(child);
            IO::par_traverse(vec![1, 2, 3], move |i| match child.take_if(|_| i == 2) {
                Some(child) => child,
                None => never(),
            })
            .map(|values| values.len() as u32)
        }
        Via::ParTraverseN => {
            let mut child = Some(child);
            let two = NonZeroUsize::new(2).expect("2 is not 0");
            IO::par_traverse_n(two, vec![1, 2, 3], move |i| {
                match child.take_if(|_| i == 1) {
                    Some(child) => child,
                    None => never(),
                }
            })
            .map(|values| values.len() as u32)
        }
        Via::ParMap2 => never::<u32>().par_map2(child, |a, b| a + b),
    }
}

/// The name the parent's trace gives `how`'s operation.
fn op_name(how: Via) -> &'static str {
    match how {
        Via::Join => "join_with_never",
        Via::Both => "both",
        Via::Race => "race",
        Via::ParTraverse => "par_traverse",
        Via::ParTraverseN => "par_traverse_n",
        Via::ParMap2 => "par_map2",
    }
}

/// A child whose first operation is a `cede` (so that its parent is
/// waiting when it fails), then [`fail_here`].
fn failing_child() -> Io<u32> {
    IO::cede().flat_map(|_| fail_here())
}

fn cached() -> FiberConfig {
    FiberConfig::builder()
        .tracing(TracingMode::Cached)
        .build()
        .expect("a tracing configuration")
}

/// The failure of `program.trace_errors()` on `rt`. It is read as a value
/// (`attempt`), so that the fiber's own error type stays `String`: the
/// type of the errors its finalizers suppress, which the executor hands
/// back typed as the fiber's.
fn failure_in<R: common::TestRuntime>(rt: &R, program: Io<u32>) -> Traced<String> {
    let program = program.trace_errors().attempt().map_err(|t| t.error);
    match rt.run(program) {
        Outcome::Succeeded(Err(failure)) => failure,
        other => panic!("the program should fail: {other:?}"),
    }
}

/// The `file:line:` of this file at `line`, as traces print it.
fn site(line: u32) -> String {
    format!("{}:{line}:", file!())
}

/// Whether `trace` has an event of `op` in this file.
fn has_op(trace: &Trace, op: &str) -> bool {
    trace
        .events()
        .iter()
        .any(|e| e.op().name() == op && e.location().file() == file!())
}

/// Checks that `failure`'s innermost trace ends where [`fail_here`]
/// failed, and that its rendering shows that site on the first line under
/// the error, before the parent's own trace.
fn assert_fails_at_the_childs_call_site(failure: &Traced<String>, how: Via) {
    let text = failure.to_string();
    assert_eq!(failure.error, "card declined", "{how:?}: {text}");
    let last = failure
        .origin()
        .events()
        .last()
        .unwrap_or_else(|| panic!("{how:?}: the child's trace is empty: {text}"));
    assert_eq!(
        (
            last.op().name(),
            last.location().file(),
            last.location().line()
        ),
        ("delay", file!(), FAIL_LINE),
        "{how:?}: {text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "card declined", "{how:?}: {text}");
    assert!(
        lines[1].starts_with("trace of a child fiber ("),
        "{how:?}: {text}"
    );
    assert!(
        lines[2].starts_with(&format!("  delay @ {}", site(FAIL_LINE))),
        "{how:?}: {text}"
    );
    // Then the parent's trace, with the operation that raised the error
    // again.
    let parent = text
        .find("\ntrace (")
        .unwrap_or_else(|| panic!("{how:?}: no parent trace in {text}"));
    assert!(
        text.find(&site(FAIL_LINE)).is_some_and(|at| at < parent),
        "{how:?}: {text}"
    );
    assert!(has_op(&failure.trace, op_name(how)), "{how:?}: {text}");
}

rt_test! {
    fn a_timeout_body_fails_in_its_callers_own_trace_without_a_child_trace() {
        // The body of `timeout_to` runs in a deadline region of the
        // caller's fiber, not on a child: its events are the caller's own.
        let rt = rt_with_config(cached());
        let program = failing_child().timeout_to(Duration::from_secs(3600), IO::pure(0));
        let failure = failure_in(&rt, program);
        let text = failure.to_string();
        assert_eq!(failure.error, "card declined", "{text}");
        assert!(failure.child_traces.is_empty(), "{text}");
        let last = failure.trace.events().last().expect("the fiber traced");
        assert_eq!(
            (last.op().name(), last.location().file(), last.location().line()),
            ("delay", file!(), FAIL_LINE),
            "{text}"
        );
        assert!(has_op(&failure.trace, "timeout_to"), "{text}");
        assert!(has_op(&failure.trace, "cede"), "{text}");
    }

    fn an_error_raised_again_by_the_parent_shows_the_childs_failing_call_site_first() {
        let rt = rt_with_config(cached());
        for how in EVERY_WAY {
            let failure = failure_in(&rt, via(how, failing_child()));
            assert_fails_at_the_childs_call_site(&failure, how);
            assert_eq!(failure.child_traces.len(), 1, "{how:?}: {failure}");
        }
    }

    fn the_parents_trace_follows_the_childs_and_ends_where_the_parent_raised_the_error_again() {
        let rt = rt_with_config(cached());
        let parent_line = line!() + 1;
        let program = IO::delay(|| 1).flat_map(|_| failing_child().both(never::<u32>()));
        let failure = failure_in(&rt, program.map(|(a, _)| a));
        // The parent's events: its own steps, up to the `both` that raised
        // the child's error again; none of the child's.
        let parent: Vec<(&str, u32)> = failure
            .trace
            .events()
            .iter()
            .map(|e| (e.op().name(), e.location().line()))
            .collect();
        assert!(parent.contains(&("both", parent_line)), "{failure}");
        assert!(parent.contains(&("delay", parent_line)), "{failure}");
        assert!(!parent.iter().any(|&(_, line)| line == FAIL_LINE), "{failure}");
        // The child's events: its own, none of the parent's.
        let child = failure.origin();
        assert!(has_op(child, "cede"), "{failure}");
        assert!(!has_op(child, "both"), "{failure}");
        let fibers: Vec<usize> = failure.fibers().map(|(depth, _)| depth).collect();
        assert_eq!(fibers, [1, 0], "{failure}");
    }

    fn a_handled_child_error_leaves_no_cause_on_a_later_unrelated_error() {
        let rt = rt_with_config(cached());
        for how in EVERY_WAY {
            let handlers: [fn(Io<u32>) -> Io<u32>; 4] = [
                |io| io.handle_error_with(|_| IO::pure(0)),
                |io| io.attempt().map(|_| 0),
                |io| io.redeem_with(|_| IO::pure(0), IO::pure),
                |io| io.handle_error(|_| 0),
            ];
            for (h, handle) in handlers.into_iter().enumerate() {
                let raise_line = line!() + 2;
                let program = handle(via(how, failing_child()))
                    .flat_map(|_| IO::delay(|| "parent failed".to_string()).flat_map(IO::raise_error));
                let failure = failure_in(&rt, program);
                let text = failure.to_string();
                assert_eq!(failure.error, "parent failed", "{how:?}, handler {h}: {text}");
                assert!(failure.child_traces.is_empty(), "{how:?}, handler {h}: {text}");
                assert!(!text.contains(&site(FAIL_LINE)), "{how:?}, handler {h}: {text}");
                assert!(text.starts_with("parent failed\ntrace ("), "{how:?}, handler {h}: {text}");
                // The parent's own trace ends where it failed.
                let last = failure.trace.events().last().expect("the parent traced");
                assert_eq!(last.location().line(), raise_line, "{how:?}, handler {h}: {text}");
            }
        }
    }

    fn a_handled_child_error_is_not_the_cause_of_an_error_traced_right_where_it_is_raised() {
        let rt = rt_with_config(cached());
        for how in EVERY_WAY {
            let program = via(how, failing_child())
                .handle_error_with(|_| IO::pure(0))
                .flat_map(|_| {
                    IO::<u32, String>::raise_error("later".into())
                        .trace_errors()
                        .attempt()
                        .map_err(|t| t.error)
                });
            match rt.run(program) {
                Outcome::Succeeded(Err(failure)) => {
                    assert_eq!(failure.error, "later", "{how:?}");
                    assert!(failure.child_traces.is_empty(), "{how:?}: {failure}");
                }
                other => panic!("{how:?}: the traced error should be a value: {other:?}"),
            }
        }
    }

    fn a_child_error_handled_inside_trace_errors_is_not_its_cause_either() {
        // The handler itself fails with a new error: a new error of the
        // parent, without the child's trace.
        let rt = rt_with_config(cached());
        let program = via(Via::Both, failing_child())
            .handle_error_with(|e| IO::raise_error(format!("handled {e}, then failed")));
        let failure = failure_in(&rt, program);
        assert_eq!(failure.error, "handled card declined, then failed");
        assert!(failure.child_traces.is_empty(), "{failure}");
    }

    fn map_err_and_finalizers_keep_the_childs_trace() {
        let rt = rt_with_config(cached());
        let finalizer_ran = common::Counter::new();
        let ran = finalizer_ran.clone();
        // The finalizer handles an error of its own, and another one fails
        // (suppressed): the child's error keeps its trace through both.
        let program = via(Via::Race, failing_child())
            .guarantee(
                IO::<u32, String>::raise_error("inner".into())
                    .attempt()
                    .flat_map(move |_| {
                        ran.incr();
                        IO::unit()
                    }),
            )
            .guarantee(IO::raise_error("finalizer failed".into()))
            .map_err(|e| format!("checkout: {e}"));
        let failure = failure_in(&rt, program.map(|_| 0));
        assert_eq!(failure.error, "checkout: card declined", "{failure}");
        assert_eq!(finalizer_ran.get(), 1);
        let last = failure.origin().events().last().expect("the child's trace");
        assert_eq!(last.location().line(), FAIL_LINE, "{failure}");
        assert_eq!(failure.child_traces.len(), 1, "{failure}");
    }

    fn a_finalizer_whose_own_child_fails_does_not_lend_its_trace_to_the_error_it_runs_for() {
        let rt = rt_with_config(cached());
        // The first error is the parent's own; the finalizer's child fails
        // (its error is suppressed): the parent's error has no child trace.
        let finalizer_child: Io<()> = IO::cede().flat_map(|_| fail_here());
        let program = IO::<u32, String>::raise_error("parent failed".into())
            .guarantee(finalizer_child.start().flat_map(|f| f.join_with_never()));
        let failure = failure_in(&rt, program);
        assert_eq!(failure.error, "parent failed", "{failure}");
        assert!(failure.child_traces.is_empty(), "{failure}");
        assert!(!failure.to_string().contains(&site(FAIL_LINE)), "{failure}");
    }

    fn a_grandchilds_failure_is_shown_first_then_its_parent_then_the_grandparent() {
        let rt = rt_with_config(cached());
        let nested = [(Via::Join, Via::Both), (Via::ParTraverse, Via::Race), (Via::Both, Via::Join)];
        for (inner, outer) in nested {
            let program = via(outer, via(inner, failing_child()));
            let failure = failure_in(&rt, program);
            let text = failure.to_string();
            assert_eq!(failure.child_traces.len(), 2, "{inner:?} in {outer:?}: {text}");
            let last = failure.origin().events().last().expect("the grandchild's trace");
            assert_eq!(last.location().line(), FAIL_LINE, "{inner:?} in {outer:?}: {text}");
            // The child raised the grandchild's error again; the parent
            // raised the child's.
            assert!(has_op(&failure.child_traces[1], op_name(inner)), "{inner:?} in {outer:?}: {text}");
            assert!(has_op(&failure.trace, op_name(outer)), "{inner:?} in {outer:?}: {text}");
            let grandchild = text.find("\ntrace of a grandchild fiber (").expect(&text);
            let child = text.find("\ntrace of a child fiber (").expect(&text);
            let parent = text.find("\ntrace (").expect(&text);
            assert!(grandchild < child && child < parent, "{inner:?} in {outer:?}: {text}");
            assert!(text[grandchild..child].contains(&site(FAIL_LINE)), "{text}");
        }
    }

    fn a_child_that_traces_while_its_parent_does_not_still_shows_where_it_failed() {
        // Mode none: only the traced scope records, and the child, started
        // inside it, traces too.
        let rt = rt_with_config(FiberConfig::builder().tracing(TracingMode::None).build().unwrap());
        let program = via(Via::Join, failing_child()).traced();
        let failure = failure_in(&rt, program);
        assert_fails_at_the_childs_call_site(&failure, Via::Join);
    }

    fn with_mode_none_a_childs_error_has_no_traces() {
        let rt = rt_with_config(FiberConfig::builder().tracing(TracingMode::None).build().unwrap());
        for how in EVERY_WAY {
            let failure = failure_in(&rt, via(how, failing_child()));
            assert_eq!(failure.error, "card declined");
            assert!(failure.child_traces.is_empty(), "{how:?}: {failure}");
            assert!(failure.trace.is_empty(), "{how:?}: {failure}");
            assert_eq!(failure.to_string(), "card declined");
        }
    }

    fn a_joined_outcome_is_a_value_and_its_error_raised_by_hand_has_no_child_trace() {
        let rt = rt_with_config(cached());
        let program = failing_child()
            .start()
            .flat_map(|fiber| fiber.join())
            .flat_map(|outcome| outcome.embed_never());
        let failure = failure_in(&rt, program);
        assert_eq!(failure.error, "card declined");
        assert!(failure.child_traces.is_empty(), "{failure}");
    }
}
