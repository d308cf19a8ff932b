//! The behaviour of every constructor and combinator of `IO`, on every
//! executor (`common::rt_test!`).

mod common;

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Counter, Log, rt_test};
use spindle_core::{IO, Outcome, UIO};

/// A program that records `event` in `log` when it runs, then produces `value`.
fn record<A: Send + 'static, E: Send + 'static>(
    log: &Log<&'static str>,
    event: &'static str,
    value: A,
) -> IO<A, E> {
    let log = log.clone();
    IO::delay(move || {
        log.push(event);
        value
    })
}

/// A program that records `event` in `log` when it runs, then fails with `error`.
fn record_error<A: Send + 'static, E: Send + 'static>(
    log: &Log<&'static str>,
    event: &'static str,
    error: E,
) -> IO<A, E> {
    let log = log.clone();
    IO::delay(move || log.push(event)).flat_map(move |()| IO::raise_error(error))
}

rt_test! {
    // ----- constructors ----------------------------------------------------

    fn pure_produces_its_value() {
        assert_eq!(run(IO::<_, ()>::pure(42)), Outcome::Succeeded(42));
        assert_eq!(run(IO::<_, ()>::pure("text".to_string())), Outcome::Succeeded("text".to_string()));
        // Larger than the inline storage of small values.
        assert_eq!(run(IO::<_, ()>::pure([7u64; 16])), Outcome::Succeeded([7u64; 16]));
    }

    fn unit_produces_unit() {
        assert_eq!(run(UIO::unit()), Outcome::Succeeded(()));
    }

    fn delay_runs_nothing_when_built_and_its_thunk_once_when_run() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<usize, ()> = IO::delay(move || c.incr() + 10);
        assert_eq!(calls.get(), 0, "building a delay runs nothing");
        assert_eq!(run(io), Outcome::Succeeded(10));
        assert_eq!(calls.get(), 1);
    }

    fn a_delay_that_is_dropped_unrun_never_runs_its_thunk() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<(), ()> = IO::delay(move || {
            c.incr();
        });
        drop(io);
        assert_eq!(calls.get(), 0);
    }

    fn defer_builds_its_program_only_when_run() {
        let built = Counter::new();
        let ran = Counter::new();
        let (b, r) = (built.clone(), ran.clone());
        let io: IO<usize, ()> = IO::defer(move || {
            b.incr();
            IO::delay(move || r.incr() + 5)
        });
        assert_eq!((built.get(), ran.get()), (0, 0), "building a defer runs nothing");
        assert_eq!(run(io), Outcome::Succeeded(5));
        assert_eq!((built.get(), ran.get()), (1, 1));
    }

    fn defer_can_produce_a_failing_program() {
        let io: IO<u8, &str> = IO::defer(|| IO::raise_error("deferred"));
        assert_eq!(run(io), Outcome::Errored("deferred"));
    }

    fn raise_error_fails_with_its_error() {
        assert_eq!(run(IO::<u8, _>::raise_error("boom".to_string())), Outcome::Errored("boom".to_string()));
    }

    fn from_result_succeeds_on_ok_and_fails_on_err() {
        assert_eq!(run(IO::<u8, &str>::from_result(Ok(3))), Outcome::Succeeded(3));
        assert_eq!(run(IO::<u8, &str>::from_result(Err("no"))), Outcome::Errored("no"));
    }

    // ----- sequencing ------------------------------------------------------

    fn flat_map_feeds_the_value_to_the_program_it_builds() {
        let io: IO<String, ()> = IO::pure(20).flat_map(|x| IO::delay(move || format!("{}", x + 1)));
        assert_eq!(run(io), Outcome::Succeeded("21".to_string()));
    }

    fn flat_map_fails_when_the_program_it_builds_fails() {
        let io: IO<u8, &str> = IO::pure(1).flat_map(|_| IO::raise_error("second"));
        assert_eq!(run(io), Outcome::Errored("second"));
    }

    fn map_transforms_the_value() {
        let io: IO<String, ()> = IO::delay(|| 6).map(|x| x * 7).map(|x: i32| x.to_string());
        assert_eq!(run(io), Outcome::Succeeded("42".to_string()));
    }

    fn product_r_runs_both_in_order_and_keeps_the_second_value() {
        let log = Log::new();
        let io: IO<&str, ()> = record(&log, "first", 1).product_r(record(&log, "second", "b"));
        assert!(log.events().is_empty(), "building runs nothing");
        assert_eq!(run(io), Outcome::Succeeded("b"));
        assert_eq!(log.events(), ["first", "second"]);
    }

    fn product_l_runs_both_in_order_and_keeps_the_first_value() {
        let log = Log::new();
        let io: IO<i32, ()> = record(&log, "first", 1).product_l(record(&log, "second", "b"));
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(log.events(), ["first", "second"]);
    }

    fn product_r_and_product_l_do_not_run_the_second_program_after_the_first_fails() {
        let log = Log::new();
        let io: IO<u8, &str> = record_error::<u8, _>(&log, "first", "e1").product_r(record(&log, "second", 2));
        assert_eq!(run(io), Outcome::Errored("e1"));
        let io: IO<u8, &str> = record_error(&log, "third", "e2").product_l(record(&log, "fourth", 4));
        assert_eq!(run(io), Outcome::Errored("e2"));
        assert_eq!(log.events(), ["first", "third"]);
    }

    fn product_l_fails_with_the_error_of_the_second_program() {
        let io: IO<u8, &str> = IO::pure(1).product_l(IO::<(), _>::raise_error("second"));
        assert_eq!(run(io), Outcome::Errored("second"));
    }

    fn flat_tap_runs_the_side_program_on_the_value_and_keeps_the_value() {
        let log: Log<String> = Log::new();
        let l = log.clone();
        let io: IO<String, ()> = IO::pure("v".to_string()).flat_tap(move |v: &String| {
            let seen = v.clone();
            IO::delay(move || l.push(format!("saw {seen}")))
        });
        assert_eq!(run(io), Outcome::Succeeded("v".to_string()));
        assert_eq!(log.events(), ["saw v"]);
    }

    fn flat_tap_fails_when_the_side_program_fails() {
        let io: IO<u8, &str> = IO::pure(1).flat_tap(|_| IO::<(), _>::raise_error("tap"));
        assert_eq!(run(io), Outcome::Errored("tap"));
    }

    fn as_replaces_the_value_after_running_the_program() {
        let log = Log::new();
        let io: IO<&str, ()> = record(&log, "ran", 1).map_to("replaced");
        assert_eq!(run(io), Outcome::Succeeded("replaced"));
        assert_eq!(log.events(), ["ran"]);
        assert_eq!(run(IO::<u8, &str>::raise_error("e").map_to(2)), Outcome::Errored("e"));
    }

    fn void_discards_the_value_after_running_the_program() {
        let log = Log::new();
        let io: IO<(), ()> = record(&log, "ran", 1).void();
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(log.events(), ["ran"]);
        assert_eq!(run(IO::<u8, &str>::raise_error("e").void()), Outcome::Errored("e"));
    }

    fn flatten_runs_the_program_the_program_produces() {
        let log = Log::new();
        let inner = record(&log, "inner", 9);
        let io: IO<IO<i32, ()>, ()> = record(&log, "outer", inner);
        assert_eq!(run(io.flatten()), Outcome::Succeeded(9));
        assert_eq!(log.events(), ["outer", "inner"]);
        let failing: IO<IO<u8, &str>, &str> = IO::pure(IO::raise_error("inner"));
        assert_eq!(run(failing.flatten()), Outcome::Errored("inner"));
    }

    // ----- errors ----------------------------------------------------------

    fn attempt_exposes_a_success_as_ok_and_an_error_as_err() {
        assert_eq!(run(IO::<u8, &str>::pure(1).attempt()), Outcome::Succeeded(Ok(1)));
        assert_eq!(run(IO::<u8, &str>::raise_error("e").attempt()), Outcome::Succeeded(Err("e")));
    }

    fn attempt_catches_an_error_raised_behind_map_frames() {
        let io: IO<u8, &str> = IO::pure(1).flat_map(|_| IO::raise_error("deep")).map(|x: u8| x + 1);
        assert_eq!(run(io.attempt()), Outcome::Succeeded(Err("deep")));
    }

    fn handle_error_recovers_from_an_error_with_a_value() {
        let io: IO<usize, String> = IO::raise_error("four".to_string()).handle_error(|e: String| e.len());
        assert_eq!(run(io), Outcome::Succeeded(4));
    }

    fn handle_error_is_not_called_on_success() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<u8, &str> = IO::pure(7).handle_error(move |_| {
            c.incr();
            0
        });
        assert_eq!(run(io), Outcome::Succeeded(7));
        assert_eq!(calls.get(), 0);
    }

    fn handle_error_with_recovers_from_an_error_with_a_program() {
        let log = Log::new();
        let l = log.clone();
        let io: IO<u8, &str> = IO::raise_error("e").handle_error_with(move |e| record(&l, e, 5));
        assert_eq!(run(io), Outcome::Succeeded(5));
        assert_eq!(log.events(), ["e"]);
    }

    fn handle_error_with_fails_with_the_error_of_its_handler_program() {
        let io: IO<u8, String> =
            IO::raise_error("first".to_string()).handle_error_with(|e| IO::raise_error(format!("{e} then second")));
        assert_eq!(run(io), Outcome::Errored("first then second".to_string()));
    }

    fn redeem_folds_a_success_with_map_and_an_error_with_recover() {
        let ok: IO<String, &str> = IO::pure(3).redeem(|e: &str| format!("err {e}"), |a: i32| format!("ok {a}"));
        assert_eq!(run(ok), Outcome::Succeeded("ok 3".to_string()));
        let err: IO<String, &str> = IO::<i32, &str>::raise_error("x").redeem(|e| format!("err {e}"), |a| format!("ok {a}"));
        assert_eq!(run(err), Outcome::Succeeded("err x".to_string()));
    }

    fn redeem_with_folds_into_the_program_of_the_matching_side() {
        let ok: IO<String, &str> = IO::pure(3).redeem_with(
            |e: &str| IO::raise_error(e),
            |a: i32| IO::delay(move || format!("ok {a}")),
        );
        assert_eq!(run(ok), Outcome::Succeeded("ok 3".to_string()));
        let err: IO<String, &str> = IO::<i32, &str>::raise_error("x")
            .redeem_with(|e| IO::raise_error(if e == "x" { "recovered into an error" } else { "?" }), |a| IO::pure(a.to_string()));
        assert_eq!(run(err), Outcome::Errored("recovered into an error"));
        let recovered: IO<String, &str> =
            IO::<i32, &str>::raise_error("x").redeem_with(|e| IO::pure(format!("err {e}")), |a| IO::raise_error(if a > 0 { "pos" } else { "neg" }));
        assert_eq!(run(recovered), Outcome::Succeeded("err x".to_string()));
    }

    fn on_error_runs_its_program_and_keeps_the_original_error() {
        let log: Log<String> = Log::new();
        let l = log.clone();
        let io: IO<u8, String> = IO::raise_error("original".to_string()).on_error(move |e: &String| {
            let seen = e.clone();
            IO::delay(move || l.push(format!("saw {seen}")))
        });
        assert_eq!(run(io), Outcome::Errored("original".to_string()));
        assert_eq!(log.events(), ["saw original"]);
    }

    fn on_error_keeps_the_original_error_when_its_program_fails() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<u8, &str> = IO::raise_error("original").on_error(move |_| {
            c.incr();
            IO::raise_error("from on_error")
        });
        assert_eq!(run(io), Outcome::Errored("original"));
        assert_eq!(calls.get(), 1);
    }

    fn on_error_does_not_run_its_program_on_success() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<u8, &str> = IO::pure(1).on_error(move |_| {
            c.incr();
            IO::unit()
        });
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(calls.get(), 0);
    }

    fn map_error_transforms_the_error_and_its_type() {
        let io: IO<u8, usize> = IO::<u8, &str>::raise_error("four").map_err(|e| e.len());
        assert_eq!(run(io), Outcome::Errored(4));
        let adapted: IO<u8, String> = IO::<u8, u32>::raise_error(7).map_err(|e| format!("code {e}"));
        assert_eq!(run(adapted), Outcome::Errored("code 7".to_string()));
    }

    fn map_error_and_adapt_error_are_not_called_on_success() {
        let calls = Counter::new();
        let (c1, c2) = (calls.clone(), calls.clone());
        let io: IO<u8, String> = IO::<u8, u32>::pure(1)
            .map_err(move |e| {
                c1.incr();
                e as u64
            })
            .map_err(move |e| {
                c2.incr();
                e.to_string()
            });
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(calls.get(), 0);
    }

    fn rethrow_turns_err_into_a_failure_and_ok_into_a_value() {
        assert_eq!(run(IO::<Result<u8, &str>, &str>::pure(Ok(1)).rethrow()), Outcome::Succeeded(1));
        assert_eq!(run(IO::<Result<u8, &str>, &str>::pure(Err("e")).rethrow()), Outcome::Errored("e"));
        assert_eq!(run(IO::<Result<u8, &str>, &str>::raise_error("outer").rethrow()), Outcome::Errored("outer"));
    }

    // ----- collections and repetition -------------------------------------

    fn traverse_runs_each_item_in_order_and_collects_the_values_in_order() {
        let log: Log<u32> = Log::new();
        let l = log.clone();
        let io: IO<Vec<u32>, ()> = IO::traverse(vec![3, 1, 2], move |x| {
            let l = l.clone();
            IO::delay(move || {
                l.push(x);
                x * 10
            })
        });
        assert!(log.events().is_empty(), "building runs nothing");
        assert_eq!(run(io), Outcome::Succeeded(vec![30, 10, 20]));
        assert_eq!(log.events(), [3, 1, 2]);
    }

    fn traverse_of_no_items_produces_an_empty_vec() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<Vec<u8>, ()> = IO::traverse(Vec::<u8>::new(), move |x| {
            c.incr();
            IO::pure(x)
        });
        assert_eq!(run(io), Outcome::Succeeded(vec![]));
        assert_eq!(calls.get(), 0);
    }

    fn traverse_stops_at_the_first_error_and_runs_no_later_item() {
        let log: Log<u32> = Log::new();
        let built = Counter::new();
        let (l, b) = (log.clone(), built.clone());
        let io: IO<Vec<u32>, String> = IO::traverse(vec![1, 2, 3, 4], move |x| {
            b.incr();
            let l = l.clone();
            IO::delay(move || l.push(x)).flat_map(move |()| {
                if x == 2 { IO::raise_error(format!("item {x}")) } else { IO::pure(x) }
            })
        });
        assert_eq!(run(io), Outcome::Errored("item 2".to_string()));
        assert_eq!(log.events(), [1, 2], "no effect of a later item ran");
        assert_eq!(built.get(), 2, "no program was built for a later item");
    }

    fn sequence_runs_the_programs_in_order_and_collects_their_values() {
        let log = Log::new();
        let ios: Vec<IO<u8, ()>> = vec![record(&log, "a", 1), record(&log, "b", 2), record(&log, "c", 3)];
        assert_eq!(run(IO::sequence(ios)), Outcome::Succeeded(vec![1, 2, 3]));
        assert_eq!(log.events(), ["a", "b", "c"]);
    }

    fn sequence_stops_at_the_first_error_and_runs_no_later_program() {
        let log = Log::new();
        let ios: Vec<IO<u8, &str>> =
            vec![record(&log, "a", 1), record_error(&log, "b", "failed at b"), record(&log, "c", 3)];
        assert_eq!(run(IO::sequence(ios)), Outcome::Errored("failed at b"));
        assert_eq!(log.events(), ["a", "b"]);
    }

    fn replicate_runs_the_program_n_times_and_collects_the_values() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<Vec<usize>, ()> = IO::replicate(5, move || {
            let c = c.clone();
            IO::delay(move || c.incr())
        });
        assert_eq!(calls.get(), 0, "building runs nothing");
        assert_eq!(run(io), Outcome::Succeeded(vec![0, 1, 2, 3, 4]));
        assert_eq!(calls.get(), 5);
    }

    fn replicate_zero_times_runs_nothing_and_produces_an_empty_vec() {
        let made = Counter::new();
        let m = made.clone();
        let io: IO<Vec<u8>, ()> = IO::replicate(0, move || {
            m.incr();
            IO::pure(1)
        });
        assert_eq!(run(io), Outcome::Succeeded(vec![]));
        assert_eq!(made.get(), 0);
    }

    fn replicate_stops_at_the_first_error() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<Vec<usize>, usize> = IO::replicate(10, move || {
            let n = c.incr();
            if n == 3 { IO::raise_error(n) } else { IO::pure(n) }
        });
        assert_eq!(run(io), Outcome::Errored(3));
        assert_eq!(calls.get(), 4);
    }

    fn forever_repeats_until_the_first_error() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<Infallible, String> = IO::forever(move || {
            let c = c.clone();
            IO::defer(move || {
                let n = c.incr();
                if n == 999 { IO::raise_error(format!("stopped after {}", n + 1)) } else { IO::unit() }
            })
        });
        assert_eq!(run(io), Outcome::Errored("stopped after 1000".to_string()));
        assert_eq!(calls.get(), 1000);
    }

    fn tail_rec_loops_until_break_in_constant_stack() {
        let io: IO<u64, ()> = IO::tail_rec((0u64, 0u64), |(acc, i)| {
            IO::delay(move || if i == 100_000 { ControlFlow::Break(acc) } else { ControlFlow::Continue((acc + i, i + 1)) })
        });
        assert_eq!(run(io), Outcome::Succeeded((0..100_000u64).sum()));
    }

    fn tail_rec_stops_when_a_step_fails() {
        let steps = Counter::new();
        let s = steps.clone();
        let io: IO<u32, String> = IO::tail_rec(0u32, move |i| {
            s.incr();
            if i == 5 { IO::raise_error(format!("step {i}")) } else { IO::pure(ControlFlow::Continue(i + 1)) }
        });
        assert_eq!(run(io), Outcome::Errored("step 5".to_string()));
        assert_eq!(steps.get(), 6);
    }

    fn tail_rec_runs_no_step_when_built() {
        let steps = Counter::new();
        let s = steps.clone();
        let io: IO<u8, ()> = IO::tail_rec((), move |()| {
            s.incr();
            IO::pure(ControlFlow::Break(1))
        });
        assert_eq!(steps.get(), 0);
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(steps.get(), 1);
    }

    fn iterate_while_repeats_while_the_predicate_holds_and_produces_the_first_value_that_fails_it() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<usize, ()> = IO::iterate_while(
            move || {
                let c = c.clone();
                IO::delay(move || c.incr())
            },
            |n| *n < 7,
        );
        assert_eq!(run(io), Outcome::Succeeded(7));
        assert_eq!(calls.get(), 8);
    }

    fn iterate_until_repeats_until_the_predicate_holds_and_produces_that_value() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<usize, ()> = IO::iterate_until(
            move || {
                let c = c.clone();
                IO::delay(move || c.incr())
            },
            |n| *n == 4,
        );
        assert_eq!(run(io), Outcome::Succeeded(4));
        assert_eq!(calls.get(), 5);
    }

    fn iterate_while_runs_the_program_once_when_the_predicate_fails_at_once() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<usize, ()> = IO::iterate_while(
            move || {
                let c = c.clone();
                IO::delay(move || c.incr())
            },
            |_| false,
        );
        assert_eq!(run(io), Outcome::Succeeded(0));
        assert_eq!(calls.get(), 1);
    }

    fn iterate_while_stops_at_the_first_error() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<usize, usize> = IO::iterate_while(
            move || {
                let n = c.incr();
                if n == 2 { IO::raise_error(n) } else { IO::pure(n) }
            },
            |_| true,
        );
        assert_eq!(run(io), Outcome::Errored(2));
        assert_eq!(calls.get(), 3);
    }

    // ----- time and scheduling --------------------------------------------

    fn sleep_takes_at_least_its_duration() {
        let duration = Duration::from_millis(30);
        let start = Instant::now();
        assert_eq!(run(UIO::sleep(duration)), Outcome::Succeeded(()));
        let elapsed = start.elapsed();
        assert!(elapsed >= duration, "slept {elapsed:?}, asked for {duration:?}");
        assert!(elapsed < Duration::from_secs(5), "slept {elapsed:?}");
    }

    fn sleep_of_zero_completes() {
        assert_eq!(run(UIO::sleep(Duration::ZERO).map_to(1)), Outcome::Succeeded(1));
    }

    fn consecutive_sleeps_add_up() {
        let start = Instant::now();
        let io: IO<(), ()> = IO::replicate(3, || IO::sleep(Duration::from_millis(10))).void();
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert!(start.elapsed() >= Duration::from_millis(30), "slept {:?}", start.elapsed());
    }

    fn delay_by_runs_the_program_after_at_least_the_duration() {
        let duration = Duration::from_millis(30);
        let start = Instant::now();
        let io: IO<Duration, ()> = IO::delay(move || start.elapsed()).delay_by(duration);
        let Outcome::Succeeded(ran_at) = run(io) else { panic!("delay_by failed") };
        assert!(ran_at >= duration, "ran after {ran_at:?}, asked for {duration:?}");
        assert!(ran_at < Duration::from_secs(5), "ran after {ran_at:?}");
    }

    fn delay_by_runs_nothing_when_built() {
        let calls = Counter::new();
        let c = calls.clone();
        let io: IO<usize, ()> = IO::delay(move || c.incr()).delay_by(Duration::from_millis(1));
        assert_eq!(calls.get(), 0);
        assert_eq!(run(io), Outcome::Succeeded(0));
        assert_eq!(calls.get(), 1);
    }

    fn monotonic_never_goes_backwards() {
        let io: IO<Vec<Duration>, ()> =
            IO::replicate(200, || IO::monotonic().flat_tap(|_| IO::cede()));
        let Outcome::Succeeded(readings) = run(io) else { panic!("monotonic failed") };
        assert_eq!(readings.len(), 200);
        for pair in readings.windows(2) {
            assert!(pair[0] <= pair[1], "monotonic went backwards: {pair:?}");
        }
    }

    fn monotonic_advances_by_at_least_the_time_slept() {
        let duration = Duration::from_millis(20);
        let io: IO<(Duration, Duration), ()> = IO::monotonic()
            .flat_map(move |before| IO::sleep(duration).product_r(IO::monotonic()).map(move |after| (before, after)));
        let Outcome::Succeeded((before, after)) = run(io) else { panic!("monotonic failed") };
        assert!(after >= before + duration, "before {before:?}, after {after:?}");
    }

    fn real_time_is_close_to_the_system_clock() {
        let Outcome::Succeeded(real) = run(UIO::real_time()) else { panic!("real_time failed") };
        let system = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970");
        let diff = real.abs_diff(system);
        assert!(diff < Duration::from_secs(5), "real_time {real:?} vs system {system:?}");
    }

    fn cede_produces_unit_and_the_program_goes_on() {
        let log = Log::new();
        let io: IO<u8, ()> = record(&log, "before", ()).product_r(IO::cede()).product_r(record(&log, "after", 3));
        assert_eq!(run(io), Outcome::Succeeded(3));
        assert_eq!(log.events(), ["before", "after"]);
    }

    fn many_cedes_in_a_row_complete() {
        let io: IO<Vec<()>, ()> = IO::replicate(10_000, IO::cede);
        assert_eq!(run(io).map(|v| v.len()), Outcome::Succeeded(10_000));
    }
}
