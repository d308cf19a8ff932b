//! The simulator's own behaviour: determinism, virtual time, blocking
//! work, each fault, shrinking, the failure kinds and configuration
//! errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use spindle_effect::prelude::*;
use spindle_effect::{Deferred, Ref};
use spindle_sim::{
    CancelScope, FailureKind, Fault, Preemption, ReplayKey, Sim, SimConfigError, Strategy,
    cancelable, io_fault,
};

/// Several fibers that sleep, cede, block and update shared state, with
/// every fault on: enough choices for schedules to differ between seeds.
fn busy_program() -> IO<u32, String> {
    let total = Ref::new(0u32);
    let workers: Vec<IO<(), String>> = (0..4u32)
        .map(|i| {
            let t = total.clone();
            let step = IO::<(), String>::sleep(Duration::from_millis(u64::from(i) + 1))
                .product_r(IO::cede())
                .product_r(IO::try_blocking(move || {
                    io_fault().map_err(|e| e.to_string())?;
                    Ok(i)
                }))
                .attempt()
                .flat_map(move |r| t.update(move |n| *n += r.unwrap_or(100)));
            cancelable(step).start().flat_map(|h| h.join()).void()
        })
        .collect();
    IO::par_sequence(workers).product_r(total.get())
}

fn faulty_sim(seeds: std::ops::Range<u64>, strategy: Strategy) -> Sim {
    Sim::builder()
        .seeds(seeds)
        .strategy(strategy)
        .cancel_at_suspension(0.1)
        .io_errors(0.2)
        .clock_jumps(0.05)
        .max_clock_jump(Duration::from_millis(3))
        .build()
        .unwrap()
}

#[test]
fn the_same_seed_gives_the_same_schedule_faults_and_outcome() {
    for strategy in [Strategy::Random, Strategy::pct()] {
        let sim = faulty_sim(0..1, strategy);
        let mut kinds = [false; 3];
        for seed in 0..20 {
            let key = ReplayKey::seed(seed);
            let a = sim.replay(&key, |_| busy_program());
            let b = sim.replay(&key, |_| busy_program());
            for fault in &a.faults {
                match fault {
                    Fault::Canceled { .. } => kinds[0] = true,
                    Fault::IoError { .. } => kinds[1] = true,
                    Fault::ClockJump { .. } => kinds[2] = true,
                    _ => {}
                }
            }
            assert_eq!(a.schedule, b.schedule, "seed {seed}");
            assert_eq!(a.faults, b.faults, "seed {seed}");
            assert_eq!(a.virtual_time, b.virtual_time, "seed {seed}");
            assert_eq!(
                a.failure.map(|f| f.kind),
                b.failure.map(|f| f.kind),
                "seed {seed}"
            );
        }
        assert_eq!(kinds, [true; 3], "every kind of fault was exercised");
    }
}

#[test]
fn different_seeds_explore_different_schedules() {
    let sim = faulty_sim(0..1, Strategy::Random);
    let schedules: std::collections::BTreeSet<Vec<u32>> = (0..20)
        .map(|seed| {
            sim.replay(&ReplayKey::seed(seed), |_| busy_program())
                .schedule
        })
        .collect();
    assert!(schedules.len() > 10, "only {} schedules", schedules.len());
}

#[test]
fn virtual_time_jumps_to_the_next_timer_without_waiting() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let report = sim.replay(&ReplayKey::seed(0), |_| {
        IO::<(), ()>::sleep(Duration::from_secs(3600)).product_r(IO::monotonic())
    });
    assert!(report.failure.is_none());
    assert_eq!(report.virtual_time, Duration::from_secs(3600));
}

#[test]
fn other_fibers_run_while_a_blocking_call_is_in_progress() {
    // The blocking work is a task of its own: in some schedule the other
    // fiber writes between the call and its end.
    let sim = Sim::builder().seeds(0..50).build().unwrap();
    let failure = sim
        .check(|_| {
            let seen = Ref::new(0u32);
            let s = seen.clone();
            let blocking: IO<u32, ()> = IO::blocking(|| 1).product_r(s.get());
            blocking
                .both(seen.set(7))
                .flat_map(|(v, ())| spindle_sim::invariant("blocking ran alone", move || v == 0))
        })
        .unwrap_err();
    assert!(
        failure.schedule_tail.contains(&0),
        "no blocking task picked"
    );
}

#[test]
fn an_io_error_that_is_not_handled_fails_the_run_with_its_error_and_trace() {
    let sim = Sim::builder().seeds(0..20).io_errors(0.5).build().unwrap();
    let failure = sim
        .check(|_| {
            IO::<u32, std::io::Error>::try_blocking(|| {
                io_fault()?;
                Ok(1)
            })
        })
        .unwrap_err();
    assert!(matches!(&failure.kind, FailureKind::Errored(e) if e.contains("InjectedFault")));
    // In the blocking work of the main fiber, #1.
    assert!(
        matches!(failure.faults[..], [Fault::IoError { fiber, .. }] if fiber.get() == 1),
        "{:?}",
        failure.faults
    );
    let trace = failure.trace.as_deref().unwrap_or("");
    assert!(
        trace.contains("blocking @ sim/tests/simulator.rs"),
        "{trace}"
    );
}

#[test]
fn shrinking_keeps_only_the_fault_that_makes_the_run_fail() {
    // Nine handled errors and one that is not: with every point failing,
    // the shrunk report keeps the last one only.
    let sim = Sim::builder().seeds(0..1).io_errors(1.0).build().unwrap();
    let program = || {
        let handled: Vec<IO<(), String>> = (0..9)
            .map(|_| {
                IO::delay(|| io_fault().map_err(|e| e.to_string()))
                    .rethrow()
                    .attempt()
                    .void()
            })
            .collect();
        IO::sequence(handled)
            .product_r(IO::delay(|| io_fault().map_err(|e| e.to_string())).rethrow())
    };
    let failure = sim.check(|_| program()).unwrap_err();
    assert_eq!(failure.faults_before_shrinking, 10);
    assert_eq!(failure.faults.len(), 1);
    assert_eq!(failure.key.suppressed, (0..9).collect::<Vec<u32>>());
    // The shrunk key replays the shrunk run.
    let key: ReplayKey = failure.key.to_string().parse().unwrap();
    let again = sim.replay(&key, |_| program());
    assert_eq!(again.faults, failure.faults);
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn a_clock_jump_makes_a_timeout_fire_before_the_work_is_done() {
    let sim = Sim::builder()
        .seeds(0..200)
        .clock_jumps(0.2)
        .max_clock_jump(Duration::from_secs(10))
        .build()
        .unwrap();
    let program = || {
        IO::<(), ()>::cede()
            .product_r(IO::cede())
            .product_r(IO::cede())
            .timeout_option(Duration::from_secs(1))
            .map(|r| r.is_some())
            .flat_map(|finished| {
                spindle_sim::invariant("the work beat its timeout", move || finished)
            })
    };
    let failure = sim.check(|_| program()).unwrap_err();
    assert!(
        failure
            .faults
            .iter()
            .any(|f| matches!(f, Fault::ClockJump { .. }))
    );
    // Without jumps the timeout never fires.
    let calm = Sim::builder().seeds(0..200).build().unwrap();
    calm.check(|_| program()).unwrap();
}

#[test]
fn only_fibers_marked_cancelable_are_canceled_by_default() {
    let canceled = Arc::new(AtomicU32::new(0));
    let sim = Sim::builder()
        .seeds(0..50)
        .cancel_at_suspension(1.0)
        .build()
        .unwrap();
    let c = canceled.clone();
    sim.check(move |_| {
        let c = c.clone();
        let unmarked: IO<(), ()> =
            IO::sleep(Duration::from_millis(1)).on_cancel(IO::delay(move || {
                c.fetch_add(1, Ordering::Relaxed);
            }));
        unmarked.start().flat_map(|h| h.join_with_never())
    })
    .unwrap();
    assert_eq!(canceled.load(Ordering::Relaxed), 0);
}

#[test]
fn every_fiber_but_the_main_one_may_be_canceled_in_the_wider_scope() {
    let sim = Sim::builder()
        .seeds(0..50)
        .cancel_at_suspension(1.0)
        .cancel_scope(CancelScope::AllButMain)
        .build()
        .unwrap();
    let failure = sim
        .check(|_| {
            let child: IO<(), ()> = IO::sleep(Duration::from_millis(1));
            child.start::<()>().flat_map(|h| h.join()).flat_map(|o| {
                spindle_sim::invariant("the child finished", move || o.is_succeeded())
            })
        })
        .unwrap_err();
    assert_eq!(failure.key.seed, 0);
    assert!(matches!(failure.faults[..], [Fault::Canceled { .. }]));
}

#[test]
fn a_wait_nothing_can_end_is_a_deadlock_with_a_dump_of_the_waiting_fiber() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let failure = sim
        .check(|run| {
            let never: Deferred<u32> = Deferred::new();
            let kept = never.clone();
            run.check_at_end("keeps the deferred alive", move || {
                drop(kept);
                Ok(())
            });
            never.get::<()>()
        })
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Deadlock);
    assert!(
        failure
            .dump
            .as_deref()
            .unwrap_or("")
            .contains("Deferred::get")
    );
}

#[test]
fn fibers_left_alive_fail_the_run_when_asked() {
    let program = || {
        let d: Deferred<()> = Deferred::new();
        let waiter = d.get::<()>();
        let keep = d.clone();
        waiter.start::<()>().map(move |h| drop((h, keep)))
    };
    let strict = Sim::builder()
        .seeds(0..5)
        .no_fibers_left(true)
        .build()
        .unwrap();
    let failure = strict.check(|_| program()).unwrap_err();
    assert_eq!(failure.kind, FailureKind::FibersLeft(1));
    let lenient = Sim::builder().seeds(0..5).build().unwrap();
    lenient.check(|_| program()).unwrap();
}

#[test]
fn a_program_that_never_ends_stops_at_the_step_limit() {
    let sim = Sim::builder().seeds(0..1).max_steps(500).build().unwrap();
    let failure = sim
        .check(|_| IO::<(), ()>::forever(IO::cede).void())
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::StepLimit(500));
}

#[test]
fn a_panic_in_the_main_fiber_is_a_failure_with_its_message() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let failure = sim
        .check(|_| IO::<(), ()>::delay(|| panic!("boom")))
        .unwrap_err();
    assert!(matches!(&failure.kind, FailureKind::Panicked(m) if m.contains("boom")));
}

#[test]
fn helpers_do_nothing_outside_a_simulation() {
    assert!(!spindle_sim::is_simulated());
    assert!(io_fault().is_ok());
    let rt = spindle_effect::single::SingleThreaded::new().unwrap();
    let io: IO<u32, ()> =
        cancelable(IO::pure(1)).flat_tap(|_| spindle_sim::invariant("never checked", || false));
    assert_eq!(rt.block_on(io).unwrap(), Outcome::Succeeded(1));
}

#[test]
fn bad_settings_are_refused_with_the_setting_named() {
    assert_eq!(
        Sim::builder().seeds(3..3).build().unwrap_err(),
        SimConfigError::NoSeeds
    );
    assert_eq!(
        Sim::builder().io_errors(1.5).build().unwrap_err(),
        SimConfigError::Probability("io_errors", 1.5)
    );
    assert!(matches!(
        Sim::builder()
            .cancel_at_suspension(f64::NAN)
            .build()
            .unwrap_err(),
        SimConfigError::Probability("cancel_at_suspension", _)
    ));
    assert_eq!(
        Sim::builder().preempt_after(0).build().unwrap_err(),
        SimConfigError::PreemptAfterZero
    );
    assert_eq!(
        Sim::builder().max_steps(0).build().unwrap_err(),
        SimConfigError::MaxStepsZero
    );
    assert_eq!(
        Sim::builder()
            .strategy(Strategy::Pct {
                depth: 0,
                expected_steps: 10
            })
            .build()
            .unwrap_err(),
        SimConfigError::PctZero
    );
    assert_eq!(
        Sim::builder()
            .clock_jumps(0.1)
            .max_clock_jump(Duration::ZERO)
            .build()
            .unwrap_err(),
        SimConfigError::MaxClockJumpZero
    );
}

#[test]
fn a_replay_key_reads_back_what_it_prints() {
    let key = ReplayKey {
        seed: 17,
        suppressed: vec![0, 3],
        preemptions: None,
    };
    assert_eq!(key.to_string(), "17/-0,3");
    assert_eq!("17/-0,3".parse::<ReplayKey>().unwrap(), key);
    assert_eq!("42".parse::<ReplayKey>().unwrap(), ReplayKey::seed(42));
    let with_schedule = ReplayKey {
        preemptions: Some(vec![
            Preemption {
                fiber: 2,
                yields: 3,
                to: 4,
            },
            Preemption {
                fiber: 4,
                yields: 1,
                to: 2,
            },
        ]),
        ..key.clone()
    };
    assert_eq!(with_schedule.to_string(), "17/-0,3/p2.3>4,4.1>2");
    assert_eq!(
        "17/-0,3/p2.3>4,4.1>2".parse::<ReplayKey>().unwrap(),
        with_schedule
    );
    let none_allowed = ReplayKey {
        preemptions: Some(Vec::new()),
        ..ReplayKey::seed(5)
    };
    assert_eq!(none_allowed.to_string(), "5/p");
    assert_eq!("5/p".parse::<ReplayKey>().unwrap(), none_allowed);
    for bad in [
        "x/-1",
        "1/-",
        "1/p1.1/p2.1",
        "1/p1.1/-2",
        "1/q3",
        "1/p1.x",
        "1/p3",
    ] {
        assert!(bad.parse::<ReplayKey>().is_err(), "{bad}");
    }
}

// ----- shrinking a schedule's preemptions -----

/// Two fibers add to a counter with a check-then-act (`get`, then `set`),
/// each after a few steps of its own: the race needs one fiber preempted
/// between its `get` and its `set`.
fn racy_counter() -> IO<(), String> {
    let counter = Ref::new(0u32);
    let add = |counter: Ref<u32>| {
        let c = counter.clone();
        IO::<(), String>::cede()
            .product_r(IO::cede())
            .product_r(IO::cede())
            .product_r(counter.get())
            .flat_map(move |n| c.set(n + 1))
    };
    let end = counter.clone();
    add(counter.clone())
        .both(add(counter))
        .product_r(end.get())
        .flat_map(|n| spindle_sim::invariant("both increments count", move || n == 2))
}

#[test]
fn a_failing_schedule_is_shrunk_to_the_preemptions_the_race_needs_and_replays() {
    let sim = Sim::builder().seeds(0..50).build().unwrap();
    let failure = sim.check(|_| racy_counter()).unwrap_err();
    assert!(
        matches!(failure.kind, FailureKind::Invariant(_)),
        "{failure}"
    );
    assert!(
        failure.preemptions_before_shrinking > failure.preemptions.len(),
        "nothing was shrunk: {failure}"
    );
    assert!(
        (1..=2).contains(&failure.preemptions.len()),
        "the race needs one or two switches, kept {:?}: {failure}",
        failure.preemptions
    );
    assert_eq!(
        failure.key.preemptions.as_deref(),
        Some(&failure.preemptions[..])
    );
    assert!(
        failure.to_string().contains("preemption(s) kept of"),
        "{failure}"
    );
    let again = sim.replay(&failure.key, |_| racy_counter());
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
    assert_eq!(again.preemptions, failure.preemptions);
}

#[test]
fn a_key_that_allows_no_preemption_runs_each_fiber_until_it_waits() {
    let sim = Sim::builder().seeds(0..50).build().unwrap();
    for seed in 0..50 {
        let key = ReplayKey {
            preemptions: Some(Vec::new()),
            ..ReplayKey::seed(seed)
        };
        let report = sim.replay(&key, |_| racy_counter());
        assert!(
            report.preemptions.is_empty(),
            "seed {seed}: {:?}",
            report.preemptions
        );
        // Without a switch between a get and its set, no increment is lost.
        assert!(
            report.failure.is_none(),
            "seed {seed}: {:?}",
            report.failure
        );
    }
}

// ----- injected errors of blocking I/O work -----

/// A config loader with a planted bug: a failed read (a transient I/O
/// error) is taken as an empty config, which then counts as the config.
fn load_config_buggy() -> IO<String, std::io::Error> {
    IO::<String, std::io::Error>::try_blocking(|| Ok(String::from("port = 8080")))
        .handle_error(|_| String::new())
}

/// The fixed loader: a failed read is tried again (up to five times),
/// and an error after that is the program's error, never an empty config.
fn load_config_fixed() -> IO<String, std::io::Error> {
    IO::retry(&spindle_effect::Schedule::immediate().limit(5), || {
        IO::<String, std::io::Error>::try_blocking(|| Ok(String::from("port = 8080")))
    })
}

fn config_program(load: fn() -> IO<String, std::io::Error>) -> IO<(), std::io::Error> {
    load().flat_map(|config| {
        spindle_sim::invariant("the loaded config is the file's", move || {
            config == "port = 8080"
        })
    })
}

#[test]
fn blocking_io_work_fails_with_an_injected_error_the_program_can_recognise() {
    let sim = Sim::builder()
        .seeds(0..50)
        .blocking_errors(0.5)
        .build()
        .unwrap();
    let program = || {
        IO::<u32, std::io::Error>::try_blocking(|| Ok(7))
            .attempt()
            .map(|r| match r {
                Ok(n) => Ok(n),
                Err(e) => Err((
                    e.kind(),
                    e.get_ref()
                        .is_some_and(|e| e.is::<spindle_sim::InjectedFault>()),
                )),
            })
    };
    let (mut ran, mut failed) = (0, 0);
    for seed in 0..50 {
        let report = sim.replay(&ReplayKey::seed(seed), |_| {
            program().flat_map(|r| match r {
                Ok(7) => IO::pure(0),
                Err((std::io::ErrorKind::Other, true)) => IO::pure(1),
                other => IO::raise_error(std::io::Error::other(format!("unexpected {other:?}"))),
            })
        });
        assert!(
            report.failure.is_none(),
            "seed {seed}: {:?}",
            report.failure
        );
        let blocking_faults = report
            .faults
            .iter()
            .filter(|f| matches!(f, Fault::BlockingError { .. }))
            .count();
        match blocking_faults {
            0 => ran += 1,
            1 => failed += 1,
            n => panic!("seed {seed}: {n} faults for one blocking call"),
        }
    }
    assert!(ran > 0 && failed > 0, "ran {ran}, failed {failed}");
}

#[test]
fn blocking_work_whose_error_type_is_not_io_error_always_runs() {
    let sim = Sim::builder()
        .seeds(0..20)
        .blocking_errors(1.0)
        .build()
        .unwrap();
    let summary = sim
        .check(|_| {
            IO::<u32, String>::try_blocking(|| Ok(7))
                .flat_map(|n| spindle_sim::invariant("the work ran", move || n == 7))
        })
        .unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(summary.seeds, 20);
}

#[test]
fn a_loader_that_takes_a_failed_read_for_an_empty_config_is_found_and_replayed() {
    let sim = Sim::builder()
        .seeds(0..100)
        .blocking_errors(0.1)
        .build()
        .unwrap();
    let failure = sim
        .check(|_| config_program(load_config_buggy))
        .unwrap_err();
    assert!(
        failure.key.seed < 40,
        "found only at seed {}",
        failure.key.seed
    );
    assert!(
        matches!(failure.kind, FailureKind::Invariant(_)),
        "{failure}"
    );
    assert!(
        failure
            .faults
            .iter()
            .any(|f| matches!(f, Fault::BlockingError { .. })),
        "{failure}"
    );
    let again = sim.replay(&failure.key, |_| config_program(load_config_buggy));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
    // The fixed loader passes over the same seeds.
    sim.check(|_| config_program(load_config_fixed))
        .unwrap_or_else(|f| panic!("{f}"));
}
