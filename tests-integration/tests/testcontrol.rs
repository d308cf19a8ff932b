//! `TestControl` (exec-single's testkit): a program on virtual time, run
//! step by step. `tick` runs what can run now, `advance` moves the clock
//! without running, `next_interval` is the time to the next timer,
//! `tick_all` and `run` go to the end, `results` is the main fiber's
//! outcome, `is_deadlocked` says that it will never have one.

mod common;

use common::{Counter, Log};
use spindle_core::error::RunError::{self, Deadlock};
use spindle_core::{Deferred, IO, Outcome, UIO};
use spindle_exec_single::testkit::TestControl;
use std::time::{Duration, Instant};

type E = String;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `a`, a one-second sleep, `b`, a two-second sleep, `c`; produces 42.
fn stepped(log: &Log<&'static str>) -> IO<u32, E> {
    log.record("a")
        .product_r(IO::sleep(secs(1)))
        .product_r(log.record("b"))
        .product_r(IO::sleep(secs(2)))
        .product_r(log.record("c"))
        .map_to(42)
}

#[test]
fn nothing_runs_before_the_first_tick() {
    let ran = Counter::new();
    let control = TestControl::execute(ran.incr_io::<E>());
    assert_eq!(ran.get(), 0);
    assert_eq!(control.results(), None);
    assert_eq!(control.now(), Duration::ZERO);
    assert!(!control.is_deadlocked(), "the main fiber is runnable");
}

#[test]
fn tick_runs_everything_that_can_run_now_and_stops_at_a_timer() {
    let log = Log::new();
    let mut control = TestControl::execute(stepped(&log));
    control.tick();
    assert_eq!(log.events(), ["a"]);
    assert_eq!(control.results(), None);
    assert_eq!(
        control.now(),
        Duration::ZERO,
        "tick does not move the clock"
    );
    assert_eq!(control.next_interval(), Some(secs(1)));
    control.tick();
    assert_eq!(log.events(), ["a"], "nothing is due yet");
}

#[test]
fn advance_moves_the_clock_without_running_anything() {
    let log = Log::new();
    let mut control = TestControl::execute(stepped(&log));
    control.tick();
    control.advance(secs(1));
    assert_eq!(control.now(), secs(1));
    assert_eq!(log.events(), ["a"], "advance runs nothing");
    assert_eq!(
        control.next_interval(),
        Some(Duration::ZERO),
        "the timer is due"
    );
    control.tick();
    assert_eq!(log.events(), ["a", "b"]);
    assert_eq!(control.next_interval(), Some(secs(2)));
}

#[test]
fn advance_and_tick_fires_only_the_timers_that_are_due() {
    let log = Log::new();
    let mut control = TestControl::execute(stepped(&log));
    control.tick();
    control.advance_and_tick(Duration::from_millis(999));
    assert_eq!(log.events(), ["a"]);
    assert_eq!(control.next_interval(), Some(Duration::from_millis(1)));
    control.advance_and_tick(Duration::from_millis(1));
    assert_eq!(log.events(), ["a", "b"]);
    control.advance_and_tick(secs(2));
    assert_eq!(log.events(), ["a", "b", "c"]);
    assert_eq!(control.results(), Some(&Outcome::Succeeded(42)));
    assert_eq!(control.now(), secs(3));
}

#[test]
fn advancing_past_several_deadlines_fires_them_all_in_deadline_order() {
    let log = Log::new();
    let sleeper = |n: u64, name: &'static str| UIO::sleep(secs(n)).product_r(log.record(name));
    let program = sleeper(3, "three")
        .start::<E>()
        .product_r(sleeper(1, "one").start())
        .product_r(sleeper(2, "two").start())
        .product_r(IO::sleep(secs(10)));
    let mut control = TestControl::execute(program);
    control.tick();
    control.advance_and_tick(secs(5));
    assert_eq!(log.events(), ["one", "two", "three"]);
    assert_eq!(control.next_interval(), Some(secs(5)));
}

#[test]
fn next_interval_is_none_without_a_timer() {
    let mut control = TestControl::execute(IO::<u32, E>::pure(1));
    assert_eq!(control.next_interval(), None);
    control.tick();
    assert_eq!(control.next_interval(), None);
    assert_eq!(control.results(), Some(&Outcome::Succeeded(1)));
}

#[test]
fn results_gives_the_outcome_of_the_main_fiber_whatever_it_is() {
    let mut errored = TestControl::execute(IO::<u32, E>::raise_error("boom".to_string()));
    errored.tick();
    assert_eq!(
        errored.results(),
        Some(&Outcome::Errored("boom".to_string()))
    );

    let mut canceled = TestControl::execute(UIO::canceled());
    canceled.tick();
    assert_eq!(canceled.results(), Some(&Outcome::Canceled));

    let mut panicked = TestControl::execute(IO::<u32, E>::delay(|| panic!("bad")));
    panicked.tick();
    assert!(panicked.results().expect("completed").is_panicked());
}

#[test]
fn take_results_moves_the_outcome_out() {
    let mut control = TestControl::execute(IO::<String, E>::pure("v".to_string()));
    control.tick();
    assert_eq!(
        control.take_results(),
        Some(Outcome::Succeeded("v".to_string()))
    );
    assert_eq!(control.take_results(), None);
}

#[test]
fn tick_all_runs_to_the_end_through_every_timer() {
    let log = Log::new();
    let mut control = TestControl::execute(stepped(&log));
    control.tick_all();
    assert_eq!(log.events(), ["a", "b", "c"]);
    assert_eq!(control.results(), Some(&Outcome::Succeeded(42)));
    assert_eq!(control.now(), secs(3));
}

#[test]
fn tick_all_stops_when_the_main_fiber_completes_even_if_other_timers_remain() {
    let program: UIO<u32> = UIO::sleep(secs(3600))
        .start()
        .product_r(IO::sleep(secs(1)))
        .map_to(1u32);
    let mut control = TestControl::execute(program);
    control.tick_all();
    assert_eq!(control.results(), Some(&Outcome::Succeeded(1)));
    assert_eq!(control.now(), secs(1));
    assert_eq!(control.next_interval(), Some(secs(3599)));
}

#[test]
fn run_gives_the_outcome_of_a_program_that_sleeps_for_a_day_at_once() {
    let wall = Instant::now();
    let day = secs(86_400);
    let program = UIO::sleep(day).product_r(IO::monotonic());
    assert_eq!(TestControl::run(program), Ok(Outcome::Succeeded(day)));
    assert!(wall.elapsed() < secs(5), "{:?}", wall.elapsed());
}

#[test]
fn run_reports_a_deadlock_for_a_program_that_can_never_finish() {
    assert_eq!(TestControl::run(UIO::<u32>::never()), Err(Deadlock));
    let waiting = Deferred::<u32>::new().get::<E>();
    assert_eq!(TestControl::run(waiting), Err(Deadlock));
}

#[test]
fn is_deadlocked_when_the_main_fiber_waits_for_something_nobody_will_do() {
    let gate = Deferred::<u32>::new();
    let mut control = TestControl::execute(gate.get::<E>());
    control.tick();
    assert!(control.is_deadlocked());
    assert_eq!(control.results(), None);
}

#[test]
fn is_deadlocked_is_false_while_a_timer_is_set_and_after_completion() {
    let mut control = TestControl::execute(UIO::sleep(secs(5)));
    control.tick();
    assert!(!control.is_deadlocked(), "a timer will wake the main fiber");
    control.tick_all();
    assert_eq!(control.results(), Some(&Outcome::Succeeded(())));
    assert!(!control.is_deadlocked(), "completed, not deadlocked");
}

#[test]
fn is_deadlocked_is_false_while_another_fiber_can_still_wake_the_main_one() {
    let gate = Deferred::<u32>::new();
    let g = gate.clone();
    let program = IO::sleep(secs(2))
        .product_r(g.complete::<E>(9))
        .start::<E>()
        .product_r(gate.get());
    let mut control = TestControl::execute(program);
    control.tick();
    assert!(!control.is_deadlocked());
    assert_eq!(control.next_interval(), Some(secs(2)));
    control.advance_and_tick(secs(2));
    assert_eq!(control.results(), Some(&Outcome::Succeeded(9)));
}

#[test]
fn the_same_program_steps_through_the_same_states_every_run() {
    fn program(log: &Log<String>) -> IO<Vec<u32>, E> {
        let log = log.clone();
        IO::par_traverse((0..6u32).collect(), move |i| {
            let log = log.clone();
            IO::sleep(Duration::from_millis(u64::from(7 * i % 5)))
                .product_r(IO::cede())
                .product_r(IO::monotonic())
                .flat_map(move |t| log.record(format!("{i} at {t:?}")).map_to(i))
        })
    }
    type Run = (Result<Outcome<Vec<u32>, E>, RunError>, Vec<String>);
    let runs: Vec<Run> = (0..3)
        .map(|_| {
            let log = Log::new();
            (TestControl::run(program(&log)), log.events())
        })
        .collect();
    assert_eq!(runs[0].0, Ok(Outcome::Succeeded((0..6).collect())));
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[1], runs[2]);
}
