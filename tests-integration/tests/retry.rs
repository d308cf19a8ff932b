//! Retry and repetition driven by a `Schedule`, and `FixedRate` runs on a
//! grid without drift. The shared bodies run on every executor with real
//! timers and assert lower bounds and order only (a loaded machine makes
//! timers late, never early); the exact delays are checked on
//! `TestControl`'s virtual time.

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::error::InvalidSchedule;
use spindle_core::{FixedRate, IO, Jitter, Outcome, Schedule, Tick, UIO};
use spindle_exec_single::testkit::TestControl;
use std::num::NonZeroU64;
use std::time::Duration;

type E = String;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A program that fails with "fail #n" on its first `failures` runs (n
/// counted from 1) and then produces the attempt number; every run records
/// the monotonic time it started at in `starts`.
fn flaky(attempts: &Counter, starts: &Log<Duration>, failures: usize) -> IO<usize, E> {
    let attempts = attempts.clone();
    let starts = starts.clone();
    IO::monotonic().flat_map(move |now| {
        starts.push(now);
        let n = attempts.incr() + 1;
        if n <= failures {
            IO::raise_error(format!("fail #{n}"))
        } else {
            IO::pure(n)
        }
    })
}

/// The gaps between consecutive times.
fn gaps(times: &[Duration]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

fn n(x: u64) -> NonZeroU64 {
    NonZeroU64::new(x).expect("non-zero")
}

rt_test! {
    fn retry_runs_a_new_program_after_each_failure_until_one_succeeds() {
        let attempts = Counter::new();
        let starts = Log::new();
        let (a, s) = (attempts.clone(), starts.clone());
        let io = IO::retry(&Schedule::fixed(ms(5)).limit(10), move || flaky(&a, &s, 2));
        assert_eq!(run(io), Outcome::Succeeded(3));
        assert_eq!(attempts.get(), 3);
    }

    fn retry_raises_the_last_error_when_the_schedule_runs_out() {
        let attempts = Counter::new();
        let starts = Log::new();
        let (a, s) = (attempts.clone(), starts.clone());
        let io = IO::retry(&Schedule::immediate().limit(2), move || flaky(&a, &s, 100));
        assert_eq!(run(io), Outcome::Errored("fail #3".to_string()));
        assert_eq!(attempts.get(), 3, "the first attempt and two retries");
    }

    fn retry_if_raises_an_error_the_predicate_refuses_without_retrying() {
        let attempts = Counter::new();
        let starts = Log::new();
        let (a, s) = (attempts.clone(), starts.clone());
        let io = IO::retry_if(
            &Schedule::immediate(),
            move || flaky(&a, &s, 100),
            |e: &E| e != "fail #2",
        );
        assert_eq!(run(io), Outcome::Errored("fail #2".to_string()));
        assert_eq!(attempts.get(), 2);
    }

    fn retry_sleeps_at_least_each_delay_of_the_schedule_between_attempts() {
        let schedule = Schedule::exponential(ms(4), 2)
            .unwrap()
            .cap(ms(20))
            .jitter(Jitter::new(50, 99).unwrap())
            .limit(4);
        let expected: Vec<Duration> = schedule.delays().collect();
        let attempts = Counter::new();
        let starts = Log::new();
        let (a, s) = (attempts.clone(), starts.clone());
        let io = IO::retry(&schedule, move || flaky(&a, &s, 4));
        assert_eq!(run(io), Outcome::Succeeded(5));
        let gaps = gaps(&starts.events());
        assert_eq!(gaps.len(), expected.len());
        for (gap, delay) in gaps.iter().zip(&expected) {
            assert!(gap >= delay, "slept {gap:?}, less than the delay {delay:?}");
        }
    }

    fn a_canceled_retry_makes_no_further_attempt() {
        let attempts = Counter::new();
        let starts = Log::new();
        let (a, s) = (attempts.clone(), starts.clone());
        let first_done = attempts.clone();
        let io: IO<Outcome<usize, E>, E> = IO::retry(&Schedule::fixed(Duration::from_secs(3600)), move || {
            flaky(&a, &s, usize::MAX)
        })
        .start()
        .flat_map(move |fiber| {
            common::eventually(move || first_done.get() == 1)
                .product_r(fiber.cancel())
                .product_r(fiber.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(attempts.get(), 1, "one attempt, then canceled in the hour-long sleep");
    }

    fn repeat_runs_once_more_than_its_limit_and_produces_the_last_value() {
        let runs = Counter::new();
        let r = runs.clone();
        let io: IO<usize, E> = IO::repeat(&Schedule::fixed(ms(2)).limit(3), move || {
            let r = r.clone();
            IO::delay(move || r.incr() + 1)
        });
        assert_eq!(run(io), Outcome::Succeeded(4));
        assert_eq!(runs.get(), 4);
    }

    fn repeat_stops_at_the_first_failure() {
        let attempts = Counter::new();
        let starts = Log::new();
        // Succeeds on the first run only: `flaky` with 0 failures, then a
        // program that fails from the second run on.
        let (a, s) = (attempts.clone(), starts.clone());
        let io = IO::repeat(&Schedule::immediate(), move || {
            flaky(&a, &s, 0).flat_map(|n| {
                if n >= 2 { IO::raise_error(format!("run {n} failed")) } else { IO::pure(n) }
            })
        });
        assert_eq!(run(io), Outcome::Errored("run 2 failed".to_string()));
        assert_eq!(attempts.get(), 2);
    }

    fn fixed_rate_starts_every_run_at_or_after_its_slot_on_an_undrifting_grid() {
        let period = ms(15);
        let ticks: Log<(Tick, Duration)> = Log::new();
        let t = ticks.clone();
        let io: IO<u64, E> = FixedRate::new(period).unwrap().limit(n(4)).run(move |tick| {
            let t = t.clone();
            // Each run takes a third of the period.
            IO::monotonic()
                .flat_map(move |now| {
                    t.push((tick, now));
                    IO::sleep(ms(5))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded(4));
        let ticks = ticks.events();
        assert_eq!(ticks.len(), 4);
        let origin = ticks[0].0.scheduled;
        let mut last_slot = None;
        for (k, (tick, started)) in ticks.iter().enumerate() {
            assert_eq!(tick.run, k as u64);
            assert!(last_slot < Some(tick.slot), "slots increase: {ticks:?}");
            last_slot = Some(tick.slot);
            // The grid: every slot's time is origin + slot * period exactly,
            // whatever the runs took (no drift).
            assert_eq!(tick.scheduled, origin + period * tick.slot as u32);
            assert!(*started >= tick.scheduled, "started {started:?} before its slot {tick:?}");
        }
    }
}

// ----- exact delays on virtual time ----------------------------------------------

#[test]
fn retry_waits_exactly_the_jittered_backoff_delays_of_its_schedule() {
    let schedule = Schedule::exponential(ms(100), 3)
        .unwrap()
        .cap(ms(1000))
        .jitter(Jitter::new(30, 2024).unwrap())
        .limit(5);
    let expected: Vec<Duration> = schedule.delays().collect();
    assert_eq!(expected.len(), 5);
    let attempts = Counter::new();
    let starts = Log::new();
    let (a, s) = (attempts.clone(), starts.clone());
    let io = IO::retry(&schedule, move || flaky(&a, &s, 5));
    assert_eq!(TestControl::run(io), Ok(Outcome::Succeeded(6)));
    assert_eq!(gaps(&starts.events()), expected);
    // The unjittered delays are 100, 300, 900, 1000 (capped), 1000; the
    // jitter takes at most 30% off each.
    let plain = [100, 300, 900, 1000, 1000].map(ms);
    for (d, p) in expected.iter().zip(plain) {
        assert!(
            *d <= p && *d >= p * 7 / 10,
            "{d:?} is not within 30% below {p:?}"
        );
    }
}

#[test]
fn a_schedule_gives_the_same_jittered_delays_every_time_and_a_different_seed_others() {
    let base = Schedule::fixed(ms(1000)).limit(8);
    let one = base.jitter(Jitter::new(100, 1).unwrap());
    let two = base.jitter(Jitter::new(100, 2).unwrap());
    let first: Vec<_> = one.delays().collect();
    assert_eq!(first, one.delays().collect::<Vec<_>>());
    assert_ne!(first, two.delays().collect::<Vec<_>>());
    assert!(first.iter().all(|d| *d <= ms(1000)));
}

#[test]
fn repeat_measures_each_delay_from_the_end_of_the_previous_run() {
    let starts = Log::new();
    let s = starts.clone();
    let io: IO<(), E> = IO::repeat(&Schedule::fixed(ms(10)).limit(2), move || {
        let s = s.clone();
        IO::monotonic().flat_map(move |now| {
            s.push(now);
            IO::sleep(ms(3))
        })
    });
    assert_eq!(TestControl::run(io), Ok(Outcome::Succeeded(())));
    assert_eq!(
        starts.events(),
        [ms(0), ms(13), ms(26)],
        "the runs drift by their length"
    );
}

#[test]
fn fixed_rate_keeps_its_grid_when_each_run_takes_part_of_the_period() {
    let starts = Log::new();
    let s = starts.clone();
    let io: IO<u64, E> = FixedRate::new(ms(10))
        .unwrap()
        .limit(n(4))
        .run(move |tick| {
            let s = s.clone();
            IO::monotonic().flat_map(move |now| {
                s.push((now, tick.slot, tick.skipped));
                IO::sleep(ms(3))
            })
        });
    assert_eq!(TestControl::run(io), Ok(Outcome::Succeeded(4)));
    assert_eq!(
        starts.events(),
        [
            (ms(0), 0, 0),
            (ms(10), 1, 0),
            (ms(20), 2, 0),
            (ms(30), 3, 0)
        ]
    );
}

#[test]
fn fixed_rate_starts_a_late_run_at_once_and_skips_the_slots_it_missed() {
    let starts = Log::new();
    let s = starts.clone();
    // Period 10: the first run takes 25, so slot 1 (10) and slot 2 (20)
    // are past when it ends; the second run starts at once (25) as slot 2,
    // slot 1 skipped; the third is back on the grid at 30.
    let io: IO<u64, E> = FixedRate::new(ms(10))
        .unwrap()
        .limit(n(4))
        .run(move |tick: Tick| {
            let s = s.clone();
            IO::monotonic().flat_map(move |now| {
                s.push((now, tick.slot, tick.skipped, tick.scheduled));
                IO::sleep(if tick.run == 0 { ms(25) } else { ms(1) })
            })
        });
    assert_eq!(TestControl::run(io), Ok(Outcome::Succeeded(4)));
    assert_eq!(
        starts.events(),
        [
            (ms(0), 0, 0, ms(0)),
            (ms(25), 2, 1, ms(20)),
            (ms(30), 3, 0, ms(30)),
            (ms(40), 4, 0, ms(40)),
        ]
    );
}

#[test]
fn an_unlimited_fixed_rate_ends_with_the_error_of_a_failing_run() {
    let io: IO<u64, E> = FixedRate::new(ms(10)).unwrap().run(|tick: Tick| {
        if tick.slot == 3 {
            IO::raise_error(format!("slot {}", tick.slot))
        } else {
            IO::unit()
        }
    });
    assert_eq!(
        TestControl::run(io),
        Ok(Outcome::Errored("slot 3".to_string()))
    );
}

#[test]
fn meaningless_schedules_are_refused_when_built() {
    assert_eq!(
        Schedule::exponential(Duration::ZERO, 2),
        Err(InvalidSchedule::ZeroBase)
    );
    assert_eq!(
        Schedule::exponential(ms(1), 1),
        Err(InvalidSchedule::FactorBelowTwo(1))
    );
    assert_eq!(Jitter::new(0, 1), Err(InvalidSchedule::JitterPercent(0)));
    assert_eq!(
        Jitter::new(101, 1),
        Err(InvalidSchedule::JitterPercent(101))
    );
    assert_eq!(
        FixedRate::new(Duration::ZERO),
        Err(InvalidSchedule::ZeroPeriod)
    );
    assert!(
        InvalidSchedule::ZeroPeriod
            .to_string()
            .contains("period above zero")
    );
}

#[test]
fn a_retry_without_failures_runs_once_and_never_sleeps() {
    let io: UIO<u32> = IO::retry(&Schedule::fixed(Duration::from_secs(3600)), || IO::pure(7));
    let mut control = TestControl::execute(io);
    control.tick();
    assert_eq!(control.results(), Some(&Outcome::Succeeded(7)));
    assert_eq!(control.now(), Duration::ZERO);
}
