//! The error path of the run-loop: an error skips `map` and `flat_map`
//! frames until the nearest handler, and handler frames do nothing on the
//! happy path. Closures count their calls, so "skipped" means "never ran".

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{IO, Outcome};

/// `io.map(..)` whose closure counts its calls.
fn counted_map(io: IO<u32, String>, calls: &Counter) -> IO<u32, String> {
    let c = calls.clone();
    io.map(move |x| {
        c.incr();
        x + 1
    })
}

/// `io.flat_map(..)` whose closure counts its calls.
fn counted_flat_map(io: IO<u32, String>, calls: &Counter) -> IO<u32, String> {
    let c = calls.clone();
    io.flat_map(move |x| {
        c.incr();
        IO::pure(x + 1)
    })
}

rt_test! {
    fn an_error_skips_map_and_flat_map_frames_until_the_nearest_handler() {
        let skipped = Counter::new();
        let mut io: IO<u32, String> = IO::delay(|| 0).flat_map(|_| IO::raise_error("bottom".to_string()));
        for _ in 0..50 {
            io = counted_flat_map(counted_map(io, &skipped), &skipped);
        }
        let handled = Counter::new();
        let h = handled.clone();
        let io = io.handle_error_with(move |e| {
            h.incr();
            IO::pure(e.len() as u32)
        });
        let after = Counter::new();
        let io = counted_map(io, &after);
        assert_eq!(run(io), Outcome::Succeeded(7));
        assert_eq!(skipped.get(), 0, "no skipped closure ran");
        assert_eq!(handled.get(), 1);
        assert_eq!(after.get(), 1, "frames after the handler run on its value");
    }

    fn an_error_with_no_handler_skips_every_frame_and_ends_the_fiber() {
        let skipped = Counter::new();
        let mut io: IO<u32, String> = IO::raise_error("unhandled".to_string());
        for _ in 0..10 {
            io = counted_flat_map(counted_map(io, &skipped), &skipped);
        }
        assert_eq!(run(io), Outcome::Errored("unhandled".to_string()));
        assert_eq!(skipped.get(), 0);
    }

    fn an_error_is_caught_by_the_nearest_handler_only() {
        let log: Log<&'static str> = Log::new();
        let (inner, outer) = (log.clone(), log.clone());
        let io: IO<u32, String> = IO::raise_error("e".to_string())
            .map(|x: u32| x + 100)
            .handle_error_with(move |e| {
                inner.push("inner");
                IO::pure(e.len() as u32)
            })
            .map(|x| x + 10)
            .handle_error_with(move |_| {
                outer.push("outer");
                IO::pure(0)
            });
        assert_eq!(run(io), Outcome::Succeeded(11));
        assert_eq!(log.events(), ["inner"]);
    }

    fn an_error_raised_by_a_handler_skips_frames_until_the_next_outer_handler() {
        let skipped = Counter::new();
        let io: IO<u32, String> = IO::raise_error("first".to_string())
            .handle_error_with(|e| IO::raise_error(format!("{e}, then second")));
        let io = counted_flat_map(counted_map(io, &skipped), &skipped);
        let io = io.handle_error(|e| e.len() as u32);
        assert_eq!(run(io), Outcome::Succeeded("first, then second".len() as u32));
        assert_eq!(skipped.get(), 0);
    }

    fn a_handler_does_not_catch_errors_raised_after_it() {
        let handled = Counter::new();
        let h = handled.clone();
        let io: IO<u32, String> = IO::pure(1)
            .handle_error_with(move |_| {
                h.incr();
                IO::pure(0)
            })
            .flat_map(|_| IO::raise_error("later".to_string()));
        assert_eq!(run(io), Outcome::Errored("later".to_string()));
        assert_eq!(handled.get(), 0);
    }

    fn an_error_passes_through_map_error_frames_and_is_transformed_by_each() {
        let skipped = Counter::new();
        let io: IO<u32, String> = IO::raise_error("e".to_string());
        let io = counted_map(io, &skipped).map_err(|e| format!("{e}1"));
        let io = counted_flat_map(io, &skipped).map_err(|e| format!("{e}2"));
        assert_eq!(run(io), Outcome::Errored("e12".to_string()));
        assert_eq!(skipped.get(), 0);
    }

    fn attempt_and_redeem_stop_the_error_and_later_frames_run() {
        let after = Counter::new();
        let io: IO<u32, String> = IO::raise_error("e".to_string());
        let io = counted_map(io, &Counter::new()).attempt().map(|r| r.unwrap_or(40));
        let io = counted_map(io, &after);
        assert_eq!(run(io), Outcome::Succeeded(41));
        let io: IO<u32, String> = IO::<u32, String>::raise_error("e".to_string()).redeem(|_| 50, |x| x);
        let io = counted_map(io, &after);
        assert_eq!(run(io), Outcome::Succeeded(51));
        assert_eq!(after.get(), 2);
    }

    fn handler_frames_do_nothing_on_the_happy_path() {
        let handlers = Counter::new();
        let mut io: IO<u32, String> = IO::delay(|| 0);
        for _ in 0..100 {
            let (h1, h2, h3) = (handlers.clone(), handlers.clone(), handlers.clone());
            io = io
                .handle_error_with(move |e| {
                    h1.incr();
                    IO::raise_error(e)
                })
                .map_err(move |e| {
                    h2.incr();
                    e
                })
                .on_error(move |_| {
                    h3.incr();
                    IO::unit()
                })
                .map(|x| x + 1);
        }
        assert_eq!(run(io), Outcome::Succeeded(100));
        assert_eq!(handlers.get(), 0, "no handler closure ran");
    }

    fn a_handler_whose_source_is_already_a_value_is_skipped() {
        let handled = Counter::new();
        let h = handled.clone();
        let io: IO<u32, String> = IO::pure(5).handle_error_with(move |_| {
            h.incr();
            IO::pure(0)
        });
        assert_eq!(run(io), Outcome::Succeeded(5));
        assert_eq!(handled.get(), 0);
    }

    fn skipped_closures_are_dropped_when_the_error_passes_them() {
        let dropped = Counter::new();
        let guard = common::DropCounter(dropped.clone());
        let io: IO<u32, String> = IO::raise_error("e".to_string())
            .map(move |x: u32| {
                let _keep = &guard;
                x
            })
            .handle_error(|_| 3);
        assert_eq!(run(io), Outcome::Succeeded(3));
        assert_eq!(dropped.get(), 1, "the skipped closure was dropped exactly once");
    }
}
