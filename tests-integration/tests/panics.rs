//! Panics in user closures: contained to their fiber, reported as
//! `Outcome::Panicked` with the panic's message, never handled as errors;
//! the executor goes on running other programs.
//!
//! (The default panic hook prints each caught panic to stderr; that output
//! is expected.)

mod common;

use std::ops::ControlFlow;
use std::thread;

use common::{Counter, DropCounter, HANG_LIMIT, rt_test, within};
use spindle_core::{IO, Outcome, PanicMessage};

/// The message of a `Panicked` outcome; fails the test on any other outcome.
fn panic_message<A: std::fmt::Debug, E: std::fmt::Debug>(outcome: Outcome<A, E>) -> String {
    match outcome {
        Outcome::Panicked(p) => p.message().to_string(),
        other => panic!("expected a panicked outcome, got {other:?}"),
    }
}

/// Each program panics with a message naming where.
fn panicking_programs() -> Vec<(&'static str, IO<u32, String>)> {
    vec![
        ("delay", IO::delay(|| panic!("in delay"))),
        ("defer", IO::defer(|| panic!("in defer"))),
        ("map", IO::pure(1).map(|_| panic!("in map"))),
        (
            "map after delay",
            IO::delay(|| 1).map(|_| panic!("in map after delay")),
        ),
        ("flat_map", IO::pure(1).flat_map(|_| panic!("in flat_map"))),
        (
            "flat_map after delay",
            IO::delay(|| 1).flat_map(|_| panic!("in flat_map after delay")),
        ),
        (
            "handle_error_with",
            IO::raise_error("e".into()).handle_error_with(|_| panic!("in handle_error_with")),
        ),
        (
            "handle_error",
            IO::raise_error("e".into()).handle_error(|_| panic!("in handle_error")),
        ),
        (
            "map_err",
            IO::raise_error("e".into()).map_err(|_: String| -> String { panic!("in map_err") }),
        ),
        ("redeem", IO::pure(1).redeem(|_| 0, |_| panic!("in redeem"))),
        (
            "redeem_with",
            IO::raise_error("e".into()).redeem_with(|_| panic!("in redeem_with"), IO::pure),
        ),
        (
            "on_error",
            IO::raise_error("e".into()).on_error(|_| panic!("in on_error")),
        ),
        (
            "async registration",
            IO::from_callback(|_cb| panic!("in async registration")),
        ),
        (
            "tail_rec step",
            IO::tail_rec(0u32, |i| {
                if i < 10 {
                    IO::pure(ControlFlow::Continue(i + 1))
                } else {
                    panic!("in tail_rec step")
                }
            }),
        ),
    ]
}

rt_test! {
    fn a_panic_in_any_closure_ends_the_fiber_with_its_message() {
        for (place, io) in panicking_programs() {
            let message = panic_message(run(io));
            assert_eq!(message, format!("in {place}"), "panic in {place}");
        }
    }

    fn a_panic_with_a_formatted_message_reports_the_formatted_text() {
        let io: IO<u32, ()> = IO::delay(|| panic!("code {} at {}", 7, "step"));
        assert_eq!(panic_message(run(io)), "code 7 at step");
    }

    fn a_panic_with_a_payload_that_is_not_a_string_still_ends_the_fiber() {
        let io: IO<u32, ()> = IO::delay(|| std::panic::panic_any(42u64));
        assert!(!panic_message(run(io)).is_empty());
    }

    fn a_panic_is_not_an_error_value_and_handlers_do_not_see_it() {
        let handled = Counter::new();
        let (h1, h2) = (handled.clone(), handled.clone());
        let io: IO<u32, String> = IO::delay(|| -> u32 { panic!("not an error") })
            .handle_error_with(move |_| {
                h1.incr();
                IO::pure(0)
            })
            .attempt()
            .map(move |r| {
                h2.incr();
                r.unwrap_or(0)
            });
        assert_eq!(panic_message(run(io)), "not an error");
        assert_eq!(handled.get(), 0, "neither handler nor later frames ran");
    }

    fn the_frames_above_a_panic_are_dropped_exactly_once_and_not_run() {
        let dropped = Counter::new();
        let ran = Counter::new();
        let mut io: IO<u32, ()> = IO::delay(|| -> u32 { panic!("bottom") });
        for _ in 0..10 {
            let (guard, r) = (DropCounter(dropped.clone()), ran.clone());
            io = io.map(move |x| {
                let _keep = &guard;
                r.incr();
                x
            });
        }
        assert_eq!(panic_message(run(io)), "bottom");
        assert_eq!(ran.get(), 0);
        assert_eq!(dropped.get(), 10);
    }

    fn a_panic_after_resuming_from_another_thread_ends_the_fiber() {
        let io: IO<u32, ()> = IO::from_callback(|cb| {
            thread::spawn(move || cb.succeed(1));
            None
        })
        .map(|_| panic!("after resume"));
        let outcome = within(HANG_LIMIT, move || run(io)).expect("the fiber finished");
        assert_eq!(panic_message(outcome), "after resume");
    }

    fn the_same_executor_runs_other_programs_after_a_panic() {
        let rt = rt();
        for (place, io) in panicking_programs() {
            assert!(rt.run(io).is_panicked(), "panic in {place}");
            let next: IO<u32, String> = IO::delay(|| 20).flat_map(|x| IO::pure(x + 1)).map(|x| x * 2);
            assert_eq!(rt.run(next), Outcome::Succeeded(42), "after a panic in {place}");
        }
        let failing: IO<u32, String> = IO::raise_error("still typed".into());
        assert_eq!(rt.run(failing), Outcome::Errored("still typed".into()));
    }

    fn a_panic_while_dropping_the_frames_of_a_panicked_fiber_is_contained_too() {
        struct PanicOnDrop;
        impl Drop for PanicOnDrop {
            fn drop(&mut self) {
                if !thread::panicking() {
                    panic!("in drop");
                }
            }
        }
        let dropped = Counter::new();
        let (outer_guard, inner_guard) = (DropCounter(dropped.clone()), PanicOnDrop);
        let io: IO<u32, ()> = IO::delay(|| -> u32 { panic!("first") })
            .map(move |x| {
                let _keep = &inner_guard;
                x
            })
            .map(move |x| {
                let _keep = &outer_guard;
                x
            });
        let rt = rt();
        assert!(rt.run(io).is_panicked());
        assert_eq!(dropped.get(), 1, "the frames past the panicking drop were dropped too");
        assert_eq!(rt.run(IO::<u32, ()>::pure(3)), Outcome::Succeeded(3));
    }
}

#[test]
fn panic_message_reads_str_and_string_payloads() {
    let from_str: Box<dyn std::any::Any + Send> = Box::new("static text");
    assert_eq!(
        PanicMessage::from_payload(&*from_str).message(),
        "static text"
    );
    let from_string: Box<dyn std::any::Any + Send> = Box::new(String::from("owned text"));
    assert_eq!(
        PanicMessage::from_payload(&*from_string).to_string(),
        "owned text"
    );
    let other: Box<dyn std::any::Any + Send> = Box::new(5u8);
    assert!(!PanicMessage::from_payload(&*other).message().is_empty());
}
