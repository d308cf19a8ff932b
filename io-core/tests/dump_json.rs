//! A fiber dump rendered as JSON (feature `serde`): fibers with their
//! number, status, state and trace (each event's operation and source
//! location), and the executor's counters by name.
#![cfg(all(feature = "serde", feature = "tracing"))]

use std::time::Duration;

use serde_json::{Value, json};
use spindle_effect::prelude::*;
use spindle_effect::{
    Deferred, FiberConfig, FiberDump, FiberId, FiberInfo, FiberState, FiberStatus, Trace,
    TracingMode, wstp::Runtime,
};

#[test]
fn a_hand_made_dump_renders_as_the_documented_json() {
    let dump = FiberDump {
        fibers: vec![FiberInfo {
            id: FiberId::nth(7),
            status: FiberStatus::SuspendedMasked,
            state: FiberState::Blocked,
            trace: None,
        }],
        executor: vec![("timers", 3), ("ready queue", 0)],
    };
    let value = serde_json::to_value(&dump).expect("serializes");
    assert_eq!(
        value,
        json!({
            "fibers": [
                { "id": 7, "status": "suspended_masked", "state": "BLOCKED", "trace": null }
            ],
            "executor": { "timers": 3, "ready queue": 0 }
        })
    );
    let empty = FiberInfo {
        trace: Some(Trace::empty()),
        ..dump.fibers[0].clone()
    };
    assert_eq!(
        serde_json::to_value(&empty).expect("serializes")["trace"],
        json!({ "events": [], "omitted": 0, "in_motion": false })
    );
}

#[test]
fn a_waiting_fibers_trace_renders_with_its_operation_and_call_site() {
    let config = FiberConfig::builder()
        .tracing(TracingMode::Cached)
        .build()
        .expect("a configuration");
    let rt = Runtime::builder()
        .fiber_config(config)
        .build()
        .expect("a pool");
    let handle = rt.handle().clone();
    let gate = Deferred::<()>::new();
    let get_line = line!() + 1;
    let waiter = gate.get::<()>();
    let program = waiter.start::<()>().flat_map(move |fiber| {
        // Until the dump shows the fiber waiting (it may not have run yet).
        IO::<FiberDump, ()>::iterate_until(
            move || {
                let handle = handle.clone();
                IO::sleep(Duration::from_millis(1)).map(move |()| handle.fiber_dump())
            },
            |dump| dump.in_state(FiberState::Waiting).next().is_some(),
        )
        .flat_tap(move |_| fiber.cancel())
    });
    let dump = rt
        .block_on(program)
        .expect("runs")
        .succeeded()
        .expect("a dump");
    let json = serde_json::to_string(&dump).expect("serializes");
    let value: Value = serde_json::from_str(&json).expect("valid JSON");
    let fibers = value["fibers"].as_array().expect("a list of fibers");
    let waiting = fibers
        .iter()
        .find(|f| f["state"] == "WAITING")
        .unwrap_or_else(|| panic!("a waiting fiber in {json}"));
    assert_eq!(waiting["status"], "suspended");
    assert!(waiting["id"].as_u64().expect("a number") >= 1);
    let last = waiting["trace"]["events"]
        .as_array()
        .and_then(|events| events.last())
        .unwrap_or_else(|| panic!("a trace event in {json}"));
    assert_eq!(last["op"], "Deferred::get");
    assert_eq!(last["file"], file!());
    assert_eq!(last["line"], get_line);
    assert!(last["column"].as_u64().is_some());
    assert_eq!(
        value["executor"]["workers"].as_u64(),
        dump.counter("workers"),
        "the executor's counters by name"
    );
}
