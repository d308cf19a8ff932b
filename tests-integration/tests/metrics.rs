//! Every executor's counters in the executor-independent shape
//! (`Executor::counters`, `RuntimeCounters`), and their recording into the
//! `metrics` facade (`spindle_metrics::record`): fibers started, completed,
//! canceled and live are exact once a program has ended; timers fired and
//! parks are counted where the executor provides them, and absent (never
//! zero) where it does not.

mod common;

use std::time::Duration;

use common::rt_test;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use spindle_core::{Executor, FiberHandle, IO, Outcome, RuntimeCounters};

type E = String;

/// A recorded series: name, labels, value.
type Recorded = (String, Vec<(String, String)>, DebugValue);

/// The counters of an executor's handle.
fn counters_of<X: Executor>(handle: &X) -> RuntimeCounters {
    handle.counters()
}

/// `after - before` of a counter both report.
fn delta(before: Option<u64>, after: Option<u64>) -> u64 {
    after.expect("reported") - before.expect("reported")
}

/// Ten fibers that succeed and one canceled while it waits forever, all
/// joined: twelve fibers with the main one, one of them canceled.
fn ten_joined_and_one_canceled() -> IO<(), E> {
    IO::<FiberHandle<u32, E>, E>::traverse((0..10).collect(), |i| {
        IO::<u32, E>::delay(move || i + 1).start::<E>()
    })
    .flat_map(|fibers| IO::traverse(fibers, |fiber| fiber.join::<E>()))
    .flat_map(|_| IO::<(), E>::never().start::<E>())
    .flat_map(|fiber| fiber.cancel::<E>().flat_map(move |()| fiber.join::<E>()))
    .void()
}

rt_test! {
    fn a_finished_program_counts_its_fibers_started_completed_and_canceled_exactly() {
        let rt = rt();
        let before = counters_of(rt.handle());
        assert_eq!(run_on(&rt, ten_joined_and_one_canceled()), Outcome::Succeeded(()));
        let after = counters_of(rt.handle());
        let started = delta(before.fibers_started_total, after.fibers_started_total);
        // The ten, the canceled one, the main one.
        assert_eq!(started, 12);
        assert_eq!(
            delta(before.fibers_completed_total, after.fibers_completed_total),
            started,
            "every fiber of the finished program ended"
        );
        assert_eq!(delta(before.fibers_canceled_total, after.fibers_canceled_total), 1);
        assert_eq!(after.fibers_live, before.fibers_live);
    }

    fn timers_fired_and_parks_are_counted_where_the_executor_provides_them() {
        let rt = rt();
        let before = counters_of(rt.handle());
        let program = spindle_core::sleep::<E>(Duration::from_millis(5))
            .flat_map(|()| spindle_core::sleep(Duration::from_millis(5)));
        assert_eq!(run_on(&rt, program), Outcome::Succeeded(()));
        let after = counters_of(rt.handle());
        assert!(!after.workers.is_empty(), "at least one worker");
        match after.executor {
            "tokio" => {
                assert_eq!(after.timers_fired_total, None, "tokio's to tell");
                assert!(after.workers.iter().all(|w| w.parks_total.is_none()));
                assert!(after.workers.iter().all(|w| w.steals_total.is_none()));
                assert_eq!(after.io_events_total, None);
            }
            executor => {
                assert!(
                    ["single", "wstp", "batching"].contains(&executor),
                    "an executor of this workspace: {executor}"
                );
                assert_eq!(delta(before.timers_fired_total, after.timers_fired_total), 2);
                let parks = |c: &RuntimeCounters| -> u64 {
                    c.workers.iter().map(|w| w.parks_total.expect("parks")).sum()
                };
                assert!(parks(&after) > parks(&before), "the sleeping program parked a worker");
                assert_eq!(after.timers, Some(0));
                assert!(after.io_events_total.is_some());
                let steals = after.workers.iter().map(|w| w.steals_total.is_some());
                assert!(steals.clone().all(|s| s == (executor == "wstp")), "steals: wstp's only");
            }
        }
    }

    fn recording_puts_every_reported_counter_into_the_facade_and_nothing_absent() {
        let rt = rt();
        assert_eq!(run_on(&rt, ten_joined_and_one_canceled()), Outcome::Succeeded(()));
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let counters = counters_of(rt.handle());
        metrics::with_local_recorder(&recorder, || spindle_metrics::record_counters(&counters));
        let recorded: Vec<Recorded> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let key = key.key().clone();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (key.name().to_owned(), labels, value)
            })
            .collect();
        let value = |name: &str| {
            recorded
                .iter()
                .find(|(n, labels, _)| n == name && labels.is_empty())
                .map(|(_, _, v)| v)
        };
        assert_eq!(
            value(spindle_metrics::FIBERS_STARTED),
            Some(&DebugValue::Counter(counters.fibers_started_total.unwrap()))
        );
        assert_eq!(
            value(spindle_metrics::FIBERS_CANCELED),
            Some(&DebugValue::Counter(1))
        );
        assert!(matches!(value(spindle_metrics::FIBERS_LIVE), Some(&DebugValue::Gauge(_))));
        let steals = recorded
            .iter()
            .filter(|(n, _, _)| n == spindle_metrics::WORKER_STEALS)
            .count();
        let expected = counters.workers.iter().filter(|w| w.steals_total.is_some()).count();
        assert_eq!(steals, expected, "one series per worker that counts steals");
        assert_eq!(
            value(spindle_metrics::TIMERS_FIRED).is_some(),
            counters.timers_fired_total.is_some(),
            "absent counters are not recorded"
        );
    }
}

/// Runs `io` on `rt`.
fn run_on<R: spindle_core::IORuntime, A: Send + 'static>(rt: &R, io: IO<A, E>) -> Outcome<A, E> {
    rt.block_on(io).expect("runs")
}
