//! Fiber tracing: what a trace holds, on every executor.
//!
//! Each body reads its fiber's trace with `IO::trace()` and checks the
//! events against the lines of this file (`line!()` taken next to the call
//! whose site is expected).

#![cfg(feature = "tracing")]

mod common;

use std::time::Duration;

use common::rt_test;
use spindle_core::{Deferred, FiberConfig, IO, IOLocal, Trace, TracingMode};

fn config(mode: TracingMode) -> FiberConfig {
    FiberConfig::builder().tracing(mode).build().unwrap()
}

/// `(op name, line)` of each event.
fn ops_and_lines(trace: &Trace) -> Vec<(&'static str, u32)> {
    trace
        .events()
        .iter()
        .map(|e| (e.op().name(), e.location().line()))
        .collect()
}

fn all_in_this_file(trace: &Trace) -> bool {
    trace.events().iter().all(|e| {
        e.location().file().ends_with("tracing.rs") && e.location().file().contains("tests")
    })
}

rt_test! {
    fn a_trace_holds_the_users_call_sites_in_order_and_none_of_spindles() {
        let l1 = line!() + 1;
        let program: IO<Trace, ()> = IO::delay(|| 1)
            .map(|x| x + 1)
            .flat_map(|x| IO::pure(x * 2))
            .handle_error_with(|_| IO::pure(0))
            .attempt()
            .flat_map(|_| IO::trace());
        let trace = rt_with_config(config(TracingMode::Cached)).run(program).succeeded().unwrap();
        // Evaluation order: the outermost node first (it pushes its frame
        // and goes on with its source).
        assert_eq!(
            ops_and_lines(&trace),
            [
                ("flat_map", l1 + 5),
                ("attempt", l1 + 4),
                ("handle_error_with", l1 + 3),
                ("flat_map", l1 + 2),
                ("map", l1 + 1),
                ("delay", l1),
            ]
        );
        assert!(all_in_this_file(&trace), "{trace}");
        let text = trace.to_string();
        assert!(text.contains("delay @ "), "{text}");
        assert!(text.contains("tracing.rs"), "{text}");
    }

    fn the_closure_type_of_each_traced_call_is_named() {
        let program: IO<Trace, ()> = IO::delay(|| 1).flat_map(|_| IO::trace());
        let trace = rt().run(program).succeeded().unwrap();
        let closures: Vec<_> = trace.events().iter().map(|e| e.op().closure()).collect();
        assert_eq!(closures.len(), 2);
        for c in closures {
            let c = c.expect("a closure name");
            assert!(c.starts_with("tracing::"), "{c}");
            assert!(c.contains("{{closure}}"), "{c}");
        }
    }

    fn the_ring_keeps_only_the_last_n_events() {
        let cfg = FiberConfig::builder().tracing(TracingMode::Cached).trace_capacity(4).build().unwrap();
        assert_eq!(cfg.trace_capacity(), 4);
        let delay_line = line!() + 1;
        let program: IO<Trace, ()> = IO::traverse((0..10).collect(), |i: u32| IO::delay(move || i))
            .flat_map(|_| IO::trace());
        let trace = rt_with_config(cfg).run(program).succeeded().unwrap();
        // Recorded: flat_map, traverse, then ten delays; kept: the last four.
        assert_eq!(ops_and_lines(&trace), [("delay", delay_line); 4], "{trace}");
        assert_eq!(trace.omitted(), 8, "{trace}");
    }

    fn with_mode_none_nothing_is_recorded() {
        let program: IO<Trace, ()> = IO::delay(|| 1).map(|x| x + 1).flat_map(|_| IO::trace());
        let trace = rt_with_config(config(TracingMode::None)).run(program).succeeded().unwrap();
        assert!(trace.is_empty(), "{trace}");
    }

    fn scoped_tracing_records_only_inside_the_scope_and_across_an_async_boundary() {
        let inner_line = line!() + 3;
        let program: IO<Trace, ()> = IO::delay(|| 1)
            .flat_map(|_| {
                IO::delay(|| 2)
                    .flat_map(|x| IO::sleep(Duration::from_millis(1)).map_to(x))
                    .flat_map(|x| IO::cede().map_to(x))
                    .flat_map(|x| {
                        IO::from_callback(move |cb| {
                            std::thread::spawn(move || cb.succeed(x));
                            None
                        })
                    })
                    .flat_map(|x| IO::delay(move || x + 1))
                    .traced()
            })
            .map(|x| x * 10)
            .flat_map(|_| IO::trace());
        let trace = rt_with_config(config(TracingMode::None)).run(program).succeeded().unwrap();
        let names = trace.op_names();
        assert!(all_in_this_file(&trace), "{trace}");
        // Inside: four flat_maps, delay, sleep, as_, cede, as_, async, delay.
        for op in ["delay", "sleep", "cede", "from_callback", "flat_map", "map_to"] {
            assert!(names.contains(&op), "{op} missing in {trace}");
        }
        // Nothing from outside the scope: the first delay and the last map
        // and flat_map are not there.
        let lines: Vec<u32> = trace.events().iter().map(|e| e.location().line()).collect();
        assert!(lines.iter().all(|&l| l >= inner_line && l <= inner_line + 10), "{trace}");
        // The last event was recorded after the async boundary (the thread
        // completed the callback): the scope survived it.
        let from_callback_at = names.iter().position(|&n| n == "from_callback").unwrap();
        assert_eq!(from_callback_at, names.len() - 2, "{trace}");
        assert_eq!(ops_and_lines(&trace).last(), Some(&("delay", inner_line + 9)), "{trace}");
    }

    fn a_fiber_started_inside_a_traced_scope_traces_too() {
        let child: IO<Trace, ()> = IO::delay(|| 1).flat_map(|_| IO::trace());
        let program: IO<Trace, ()> = child
            .start()
            .flat_map(|fiber| fiber.join())
            .traced()
            .map(|outcome| outcome.succeeded().unwrap());
        let trace = rt_with_config(config(TracingMode::None)).run(program).succeeded().unwrap();
        assert_eq!(trace.op_names(), ["flat_map", "delay"], "{trace}");
    }

    fn a_traced_scope_ends_with_its_program_also_on_error() {
        let program: IO<Trace, String> = IO::delay(|| 1)
            .flat_map(|_| IO::<u32, String>::raise_error("boom".into()))
            .traced()
            .handle_error(|_| 0)
            .map(|x| x + 1)
            .flat_map(|_| IO::trace());
        let trace = rt_with_config(config(TracingMode::None)).run(program).succeeded().unwrap();
        assert_eq!(trace.op_names(), ["flat_map", "delay", "raise_error"], "{trace}");
    }

    fn a_trace_survives_a_deferred_wait_on_another_fiber() {
        let d = Deferred::<u32>::new();
        let d2 = d.clone();
        let get_line = line!() + 5;
        let program: IO<Trace, ()> = IO::sleep(Duration::from_millis(2))
            .flat_map(move |_| d2.complete::<()>(7))
            .start()
            .flat_map(move |_| {
                d.get().flat_map(|_| IO::trace())
            });
        let trace = rt_with_config(config(TracingMode::Cached)).run(program).succeeded().unwrap();
        assert!(all_in_this_file(&trace), "{trace}");
        let lines: Vec<u32> = trace.events().iter().map(|e| e.location().line()).collect();
        assert!(lines.contains(&get_line), "{trace}");
    }

    fn a_failure_carries_the_trace_at_the_point_of_failure() {
        let l = line!() + 1;
        let program: IO<u32, String> = IO::delay(|| 1)
            .flat_map(|x| IO::delay(move || x + 1))
            .flat_map(|_| IO::<u32, String>::raise_error("deep".into()))
            .map(|x| x * 2);
        let outcome = rt().run(program.trace_errors());
        let spindle_core::Outcome::Errored(failure) = outcome else {
            panic!("the program fails: {outcome:?}")
        };
        assert_eq!(failure.error, "deep");
        assert_eq!(
            ops_and_lines(&failure.trace),
            [
                ("map", l + 3),
                ("flat_map", l + 2),
                ("flat_map", l + 1),
                ("delay", l),
                ("delay", l + 1),
                ("raise_error", l + 2)
            ],
            "{}",
            failure.trace
        );
        let text = failure.to_string();
        assert!(text.starts_with("deep\ntrace (6 events"), "{text}");
    }

    fn an_iolocal_read_or_write_is_no_event_but_the_bind_over_it_and_an_update_are() {
        // As Cats Effect's `IO.Local`: `get`, `set`, `reset`,
        // `get_and_set` and `local` record nothing of their own (the bind
        // over them names the line); `update` and `modify` run the user's
        // function, so they are recorded, as a `delay` is.
        let local = IOLocal::new(0u32);
        let [a, b, c, d, e, f, g] = core::array::from_fn(|_| local.clone());
        let l = line!() + 1;
        let program: IO<Trace, ()> = a
            .set(1)
            .flat_map(move |()| b.get())
            .flat_map(move |v| c.update(move |x| x + v))
            .flat_map(move |()| d.get_and_set(5))
            .flat_map(move |_| e.local(7, IO::unit()))
            .flat_map(move |()| f.modify(|x| (x + 1, x)))
            .flat_map(move |_| g.reset())
            .flat_map(|()| IO::trace());
        let trace = rt_with_config(config(TracingMode::Cached)).run(program).succeeded().unwrap();
        assert!(all_in_this_file(&trace), "{trace}");
        let events = ops_and_lines(&trace);
        let locals: Vec<(&str, u32)> =
            events.iter().copied().filter(|(op, _)| op.starts_with("IOLocal::")).collect();
        assert_eq!(locals, [("IOLocal::update", l + 3), ("IOLocal::modify", l + 6)], "{trace}");
        for line in l + 2..=l + 8 {
            assert!(events.contains(&("flat_map", line)), "no bind at line {line}: {trace}");
        }
    }

    fn a_blocks_trace_names_the_line_of_every_await_whether_it_finished_at_once_or_not() {
        // `pure` and `delay` finish at once (run inside the block's poll);
        // `sleep` and the `map` run on the run-loop: the trace is the same.
        let l = line!() + 2;
        let program: IO<Trace, ()> = IO::block(async {
            let a = IO::<u32, ()>::pure(1).await?;
            let b = IO::<u32, ()>::delay(move || a + 1).await?;
            IO::<(), ()>::sleep(Duration::from_millis(1)).await?;
            let _c = IO::<u32, ()>::delay(move || b + 1).map(|c| c * 2).await?;
            IO::trace().await
        });
        let trace = rt().run(program).succeeded().expect("the block ends");
        assert!(all_in_this_file(&trace), "{trace}");
        let lines = ops_and_lines(&trace);
        let awaits: Vec<u32> =
            lines.iter().filter(|(op, _)| *op == "await").map(|(_, line)| *line).collect();
        assert_eq!(awaits, [l, l + 1, l + 2, l + 3, l + 4], "{trace}");
        // Each inline `delay` is recorded right after its await, as on the
        // run-loop.
        let at = lines.iter().position(|e| *e == ("await", l + 1)).expect("the second await");
        assert_eq!(lines[at + 1], ("delay", l + 1), "{trace}");
    }

    fn an_error_raised_right_under_attempt_or_a_handler_is_recorded_at_its_line() {
        // The handler takes the raised error in the raise's own step (no
        // frame): the raise is still recorded, at its line, in order.
        let l = line!() + 1;
        let program: IO<Trace, String> = IO::<u32, String>::raise_error("first".into())
            .attempt()
            .flat_map(|first| {
                assert_eq!(first, Err("first".to_string()));
                IO::<u32, String>::raise_error("second".into()).handle_error_with(|e| {
                    assert_eq!(e, "second");
                    IO::pure(0)
                })
            })
            .flat_map(|_| IO::trace());
        let trace = rt_with_config(config(TracingMode::Cached)).run(program).succeeded().unwrap();
        let raises: Vec<(&str, u32)> =
            ops_and_lines(&trace).into_iter().filter(|(op, _)| *op == "raise_error").collect();
        assert_eq!(raises, [("raise_error", l), ("raise_error", l + 4)], "{trace}");
        let attempt = ops_and_lines(&trace).iter().position(|e| *e == ("attempt", l + 1));
        let first_raise = ops_and_lines(&trace).iter().position(|e| *e == ("raise_error", l));
        assert!(attempt.is_some() && attempt < first_raise, "{trace}");
    }

    fn a_failure_trace_names_the_line_of_its_raise_error_first() {
        let raised_at = line!() + 4;
        let program: IO<u32, String> = IO::delay(|| 1)
            .flat_map(|n| {
                if n > 0 {
                    IO::raise_error(format!("{n} is too many"))
                } else {
                    IO::pure(n)
                }
            })
            .map(|n| n + 1);
        let outcome = rt().run(program.trace_errors());
        let spindle_core::Outcome::Errored(failure) = outcome else {
            panic!("the program fails: {outcome:?}")
        };
        // The most recent event, and the first line under the error.
        let last = failure.trace.events().last().expect("an event");
        assert_eq!((last.op().name(), last.location().line()), ("raise_error", raised_at));
        assert!(last.location().file().ends_with("tracing.rs"), "{}", failure.trace);
        let text = failure.to_string();
        let first = text.lines().nth(2).unwrap_or_default();
        assert!(first.trim_start().starts_with("raise_error @ "), "{text}");
        assert!(first.contains(&format!("tracing.rs:{raised_at}:")), "{text}");
    }

    fn a_raise_error_passed_as_a_function_records_no_event_of_its_own() {
        let l = line!() + 1;
        let program: IO<u32, String> = IO::delay(|| "no".to_string()).flat_map(IO::raise_error);
        let outcome = rt().run(program.trace_errors());
        let spindle_core::Outcome::Errored(failure) = outcome else {
            panic!("the program fails: {outcome:?}")
        };
        // The flat_map names the line; nothing points into the standard library.
        assert_eq!(ops_and_lines(&failure.trace), [("flat_map", l), ("delay", l)], "{}", failure.trace);
    }

    fn a_panic_carries_the_trace_at_the_point_of_the_panic() {
        let l = line!() + 1;
        let program: IO<u32, ()> = IO::delay(|| 1).flat_map(|_| -> IO<u32, ()> {
            panic!("deep panic")
        });
        let outcome = rt().run(program);
        let spindle_core::Outcome::Panicked(message) = outcome else {
            panic!("the program panics: {outcome:?}")
        };
        assert_eq!(message.message(), "deep panic");
        let trace = message.trace().expect("a trace");
        assert_eq!(ops_and_lines(trace), [("flat_map", l), ("delay", l)], "{trace}");
    }

    fn without_tracing_a_failure_has_an_empty_trace() {
        let program: IO<u32, String> = IO::delay(|| 1).flat_map(|_| IO::raise_error("x".into()));
        let outcome = rt_with_config(config(TracingMode::None)).run(program.trace_errors());
        let spindle_core::Outcome::Errored(failure) = outcome else {
            panic!("the program fails: {outcome:?}")
        };
        assert!(failure.trace.is_empty(), "{}", failure.trace);
        assert_eq!(failure.to_string(), "x");
    }
}

#[cfg(feature = "tracing-full")]
#[test]
fn full_mode_shows_the_first_user_frame_of_each_event() {
    use spindle_core::{IORuntime, RuntimeBuilder};
    fn build_in_a_named_function() -> IO<Trace, ()> {
        IO::delay(|| 1).flat_map(|_| IO::trace())
    }
    let rt = spindle_exec_single::SingleThreaded::builder()
        .fiber_config(config(TracingMode::Full))
        .build()
        .expect("an executor");
    let trace = rt
        .block_on(build_in_a_named_function())
        .expect("block_on")
        .succeeded()
        .unwrap();
    spindle_trace::set_full_capture(false);
    let first = &trace.events()[0];
    assert!(first.site().has_backtrace(), "{trace}");
    let frame = first.user_frame().expect("a user frame");
    assert!(
        frame.function.contains("build_in_a_named_function"),
        "{frame:?} in\n{trace}"
    );
    assert!(
        trace.to_string().contains("build_in_a_named_function"),
        "{trace}"
    );
}

#[cfg(not(feature = "tracing-full"))]
#[test]
fn full_mode_without_its_feature_is_a_configuration_error_naming_the_feature() {
    let err = FiberConfig::builder()
        .tracing(TracingMode::Full)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        spindle_core::error::ConfigError::FullTracingNotCompiled
    );
    assert!(err.to_string().contains("tracing-full"), "{err}");
}

#[test]
fn a_capacity_of_zero_is_a_configuration_error_and_ten_keeps_sixteen() {
    let err = FiberConfig::builder()
        .trace_capacity(0)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("capacity 0"), "{err}");
    let cfg = FiberConfig::builder().trace_capacity(10).build().unwrap();
    assert_eq!(cfg.trace_capacity(), 16);
}
