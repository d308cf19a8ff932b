//! The programs written with IO blocks (`examples/pipeline.rs`,
//! `examples/tokio_interop.rs`, `examples/trace_failure.rs`) and their
//! combinator forms (`examples/combinator_forms/`), each included with
//! `#[path]` and run through the `run` its `main` calls: both forms of a
//! program must do the same thing.

#[allow(dead_code)]
#[path = "../examples/pipeline.rs"]
mod pipeline;
#[allow(dead_code)]
#[path = "../examples/combinator_forms/pipeline.rs"]
mod pipeline_combinators;
#[allow(dead_code)]
#[path = "../examples/tokio_interop.rs"]
mod tokio_interop;
#[allow(dead_code)]
#[path = "../examples/combinator_forms/tokio_interop.rs"]
mod tokio_interop_combinators;
#[allow(dead_code)]
#[path = "../examples/trace_failure.rs"]
mod trace_failure;
#[allow(dead_code)]
#[path = "../examples/combinator_forms/trace_failure.rs"]
mod trace_failure_combinators;

use std::time::Duration;

/// The checks of both forms of the pipeline (their types differ, their
/// behaviour must not).
macro_rules! check_pipeline {
    ($form:ident) => {{
        use $form::PipelineError;
        let [(finished, report), (late, late_report)] = $form::run().expect("the pipeline runs");
        let handled = finished.expect("with room, the pipeline finishes");
        assert_eq!(handled.len(), 3, "three workers");
        assert_eq!(handled.iter().sum::<usize>(), 8, "every job was taken once");
        let mut done: Vec<(u32, u64, u32)> = report
            .done
            .iter()
            .map(|&(job, value, attempts, _)| (job, value, attempts))
            .collect();
        done.sort();
        let expected: Vec<(u32, u64, u32)> = vec![
            (1, 10, 1),
            (2, 20, 1),
            (3, 30, 3), // two failures, two retries
            (4, 40, 1),
            (5, 50, 2), // one failure, one retry
            (6, 60, 1),
            (8, 80, 1),
        ];
        assert_eq!(done, expected);
        assert_eq!(
            report.gave_up,
            [7],
            "job 7 gave up when the schedule ran out"
        );
        assert_eq!(
            report.workers_finished, 3,
            "each worker's finalizer ran once"
        );
        assert_eq!(late, Err(PipelineError::Deadline));
        assert!(
            late_report.done.is_empty(),
            "no 5 s step finished before the 50 ms deadline"
        );
        assert_eq!(
            late_report.workers_finished, 3,
            "the deadline canceled each worker once"
        );
    }};
}

#[test]
fn the_pipeline_retries_flaky_steps_gives_up_after_the_schedule_and_cancels_at_the_deadline() {
    check_pipeline!(pipeline);
}

#[test]
fn the_pipelines_combinator_form_does_the_same() {
    check_pipeline!(pipeline_combinators);
}

macro_rules! check_tokio_interop {
    ($form:ident) => {{
        use $form::InteropError;
        let summary = $form::run().await.expect("the steps run");
        assert!(
            summary.slept >= Duration::from_millis(20),
            "{:?}",
            summary.slept
        );
        assert_eq!(summary.answer, 42);
        assert_eq!(summary.dropped_sender, Err(InteropError::Closed));
        let mut took = summary.order.clone();
        took.sort();
        assert_eq!(took, [1, 2, 3, 4]);
        assert_eq!(
            summary.deadline,
            (Err(InteropError::Timeout), true, 1),
            "the deadline dropped the receiver and ran the finalizer once"
        );
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_futures_awaited_in_blocks_run_on_the_applications_tokio_runtime() {
    check_tokio_interop!(tokio_interop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_interop_combinator_form_does_the_same() {
    check_tokio_interop!(tokio_interop_combinators);
}

macro_rules! check_trace_failure {
    ($form:ident) => {{
        let report = $form::run().expect("the orders run");
        assert_eq!(
            report.checked,
            [
                "order 2 for ada: 70 credit left",
                "order 4 for ada: 50 credit left"
            ]
        );
        assert_eq!(
            report.failure.to_string().lines().next(),
            Some("bob's credit is too low for 50")
        );
        assert_eq!(
            report.failure.child_traces.len(),
            1,
            "the error came from one child fiber"
        );
        if cfg!(feature = "tracing") {
            $form::check(&report).expect("the child's trace names the marked lines");
        }
    }};
}

#[test]
fn a_failure_in_a_child_fiber_is_read_from_its_trace_with_the_lines_of_the_awaits() {
    check_trace_failure!(trace_failure);
    if cfg!(feature = "tracing") {
        // The block form's trace names `.await`s.
        let report = trace_failure::run().unwrap();
        assert!(report.failure.origin().op_names().contains(&"await"));
    }
}

#[test]
fn the_trace_failure_combinator_form_names_the_lines_of_its_combinators() {
    check_trace_failure!(trace_failure_combinators);
}

#[test]
fn the_traced_line_markers_are_found_where_they_are() {
    let source = "a\nb // traced\n// traced\nc\n";
    assert_eq!(
        trace_failure::traced_lines("f.rs", source),
        ["f.rs:2", "f.rs:4"]
    );
    // Each example marks lines to check (a check of nothing proves nothing).
    assert_eq!(
        trace_failure::traced_lines("", include_str!("../examples/trace_failure.rs")).len(),
        4
    );
    assert_eq!(
        trace_failure::traced_lines(
            "",
            include_str!("../examples/combinator_forms/trace_failure.rs")
        )
        .len(),
        2
    );
}
