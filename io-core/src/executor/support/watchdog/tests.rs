//! The watchdog's pieces without an executor: the slot's word, the slots of
//! threads, the settings and the report. Its runs on every executor are
//! tested in `tests-integration/tests/starvation.rs`.

use std::string::ToString;
use std::vec::Vec;

use super::*;
use crate::executor::support::{CommonSettings, StarvationSettings};

#[test]
fn a_slot_marks_a_run_from_its_start_until_the_guard_drops_and_tells_runs_apart() {
    let slot = RunSlot::default();
    assert_eq!(slot.read() & RUNNING, 0, "a new slot runs nothing");
    let first = {
        let _run = slot.begin(FiberId::nth(7));
        let word = slot.read();
        assert_ne!(word & RUNNING, 0);
        assert_eq!(word as u32, 7, "the low half is the fiber's number");
        word
    };
    assert_eq!(slot.read() & RUNNING, 0, "the guard's drop ends the run");
    let _run = slot.begin(FiberId::nth(7));
    assert_ne!(
        slot.read(),
        first,
        "a second run of the same fiber is another run"
    );
}

#[test]
fn a_run_that_unwinds_still_ends_in_its_slot() {
    let slot = RunSlot::default();
    let unwound = std::panic::catch_unwind(|| {
        let _run = slot.begin(FiberId::nth(3));
        panic!("a run that unwinds");
    });
    assert!(unwound.is_err());
    assert_eq!(slot.read() & RUNNING, 0);
}

#[test]
fn each_thread_gets_one_slot_of_its_own_per_executor() {
    let slots = RunSlots::new();
    let worker = slots.add();
    let here = slots.this_thread();
    assert!(Arc::ptr_eq(&here, &slots.this_thread()), "kept per thread");
    assert!(!Arc::ptr_eq(&here, &worker));
    let other_executor = RunSlots::new();
    assert!(!Arc::ptr_eq(&here, &other_executor.this_thread()));
    let slots_for_thread = slots.clone();
    let there = std::thread::spawn(move || slots_for_thread.this_thread())
        .join()
        .unwrap();
    assert!(!Arc::ptr_eq(&here, &there));
    let mut words = Vec::new();
    slots.read_all(&mut words);
    assert_eq!(
        words.len(),
        3,
        "the worker's, this thread's and the other's"
    );
}

#[test]
fn the_watchdog_is_off_unless_given_a_threshold() {
    let off = CommonSettings::default();
    assert!(matches!(off.starvation(), Ok(None)));
    let handler_only = CommonSettings {
        starvation: StarvationSettings {
            handler: Some(Arc::new(|_: &StarvationReport| {})),
            ..StarvationSettings::default()
        },
        ..CommonSettings::default()
    };
    assert!(matches!(handler_only.starvation(), Ok(None)));
    let on = CommonSettings {
        starvation: StarvationSettings {
            threshold: Some(Duration::from_millis(50)),
            ..StarvationSettings::default()
        },
        ..CommonSettings::default()
    };
    match on.starvation() {
        Ok(Some(config)) => assert_eq!(config.threshold, Duration::from_millis(50)),
        other => panic!("expected the watchdog on, got {other:?}"),
    }
}

#[test]
fn a_zero_threshold_is_a_configuration_error_naming_the_setting() {
    let zero = CommonSettings {
        starvation: StarvationSettings {
            threshold: Some(Duration::ZERO),
            ..StarvationSettings::default()
        },
        ..CommonSettings::default()
    };
    let error = zero.starvation().unwrap_err();
    assert_eq!(error, ConfigError::StarvationThresholdZero);
    assert!(
        error.to_string().contains("starvation_threshold"),
        "{error}"
    );
}

#[test]
fn the_environment_names_a_threshold_in_whole_milliseconds_of_at_least_one() {
    assert_eq!(parse_threshold(""), Ok(None), "empty means unset");
    assert_eq!(parse_threshold("250"), Ok(Some(Duration::from_millis(250))));
    for bad in ["0", "abc", "-5", "1.5", "10ms"] {
        let error = parse_threshold(bad).unwrap_err();
        assert_eq!(error, ConfigError::StarvationEnv(Box::from(bad)));
        assert!(error.to_string().contains(STARVATION_ENV_VAR), "{error}");
    }
}

#[test]
fn a_report_names_the_fiber_the_worker_the_time_and_why_it_has_no_trace() {
    let report = StarvationReport {
        fiber: FiberId::nth(12),
        worker: 1,
        running_for: Duration::from_millis(75),
        threshold: Duration::from_millis(50),
        trace: Err(NoTrace::NotYetListed),
    };
    let text = report.to_string();
    for part in [
        "fiber #12",
        "worker 1",
        "at least 75 ms",
        "threshold 50 ms",
        "IO::blocking",
        "not listed yet",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
}
