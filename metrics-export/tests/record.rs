//! `record_every`: records at once and again after each interval until its
//! fiber is canceled; a zero interval is refused.

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_single::SingleThreaded;

type E = String;

/// The recorded value of the unlabeled counter `name`.
fn counter(snapshotter: &Snapshotter, name: &str) -> Option<u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| match value {
            DebugValue::Counter(v) if key.key().name() == name => Some(v),
            _ => None,
        })
}

#[test]
fn the_periodic_recorder_records_fibers_started_after_it_and_stops_when_canceled() {
    let rt = SingleThreaded::new().expect("a loop");
    let handle = rt.handle().clone();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let every = spindle_metrics::record_every::<_, E>(handle.clone(), Duration::from_millis(1))
        .expect("a positive interval");
    let started_now = move || {
        use spindle_core::Executor;
        handle.counters().fibers_started_total.expect("counted")
    };
    let watch = snapshotter.clone();
    // The loop runs on this thread: a local recorder sees what its fibers record.
    let outcome = metrics::with_local_recorder(&recorder, || {
        let program = every.start::<E>().flat_map(move |recorder_fiber| {
            // Five more fibers, started after the recorder's first record.
            IO::<u32, E>::traverse((0..5).collect(), |i| {
                IO::<u32, E>::pure(i)
                    .start::<E>()
                    .flat_map(|f| f.join_with_never())
            })
            .flat_map(move |_| {
                let target = started_now();
                // Until a later record shows them (each wait one interval).
                IO::<bool, E>::iterate_until(
                    move || {
                        spindle_core::sleep::<E>(Duration::from_millis(1)).map({
                            let watch = watch.clone();
                            move |()| {
                                counter(&watch, spindle_metrics::FIBERS_STARTED) == Some(target)
                            }
                        })
                    },
                    |seen| *seen,
                )
            })
            .flat_map(move |_| {
                recorder_fiber
                    .cancel::<E>()
                    .flat_map(move |()| recorder_fiber.join::<E>())
            })
        });
        rt.block_on(program).expect("runs")
    });
    assert_eq!(outcome, Outcome::Succeeded(Outcome::Canceled));
    assert!(
        snapshotter
            .snapshot()
            .into_hashmap()
            .keys()
            .any(|key| key.key().name() == spindle_metrics::TIMERS_FIRED),
        "exec-single reports the timers fired"
    );
}

#[test]
fn a_zero_interval_is_refused_with_an_error_that_says_so() {
    let rt = SingleThreaded::new().expect("a loop");
    let error = spindle_metrics::record_every::<_, E>(rt.handle().clone(), Duration::ZERO)
        .expect_err("zero");
    assert_eq!(error, spindle_metrics::ZeroInterval);
    assert!(error.to_string().contains("interval is zero"));
}
