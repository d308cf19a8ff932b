//! exec-batching's fiber dumps (its fibers and the loop's queues) and the
//! builder's reading of `SPINDLE_TRACING`.

// The tests that need traces are compiled only with the `tracing` feature;
// without it, their helpers are unused.
#![cfg_attr(not(feature = "tracing"), allow(unused))]

use std::process::Command;
use std::time::Duration;

use spindle_core::{
    Executor, FiberConfig, FiberDump, FiberState, IO, IORuntime, RuntimeBuilder, TracingMode, UIO,
};
use spindle_exec_batching::{BuildError, EventLoop, Mode};

type E = ();

/// The value of one of the executor's counters in `dump`.
fn counter(dump: &FiberDump, name: &str) -> u64 {
    dump.counter(name)
        .unwrap_or_else(|| panic!("no {name:?} in {dump:?}"))
}

fn event_loop(mode: Mode) -> EventLoop {
    EventLoop::builder()
        .mode(mode)
        .fiber_config(FiberConfig::default())
        .build()
        .expect("build an event loop")
}

#[cfg(feature = "tracing")]
#[test]
fn a_dump_inside_a_fiber_shows_the_started_fiber_in_the_microtask_queue_and_the_sleeper() {
    let rt = event_loop(Mode::Batching);
    let handle = rt.handle().clone();
    // The sleeper sets its timer at the first cede; the yielder yields at
    // the second (listed, and queued again); the last fiber, started right
    // before the dump, is queued but not listed (a fiber is listed once it
    // first waits or yields).
    let program = UIO::sleep(Duration::from_secs(3600))
        .start()
        .flat_map(move |sleeper| {
            UIO::cede()
                .product_r(UIO::cede().start())
                .flat_map(move |_yielder| {
                    UIO::cede()
                        .product_r(UIO::unit().start())
                        .flat_map(move |_queued| {
                            IO::delay(move || Executor::fiber_dump(&handle))
                                .flat_map(move |d| sleeper.cancel().map_to(d))
                        })
                })
        });
    let dump = rt
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .expect("succeeds");
    assert_eq!(dump.fibers.len(), 3, "{dump}");
    assert_eq!(dump.in_state(FiberState::Sleeping).count(), 1, "{dump}");
    assert_eq!(dump.in_state(FiberState::Queued).count(), 1, "{dump}");
    // The started fiber is a microtask; the yielder, which ceded, a
    // macrotask.
    assert_eq!(counter(&dump, "microtask queue"), 1, "{dump}");
    assert_eq!(counter(&dump, "macrotask queue"), 1, "{dump}");
    assert_eq!(counter(&dump, "timers"), 1, "{dump}");
    assert!(dump.to_string().contains("microtask queue: 1"), "{dump}");
}

#[test]
fn in_macrotask_mode_a_started_fiber_waits_in_the_macrotask_queue_of_the_dump() {
    let rt = event_loop(Mode::Macrotask);
    let handle = rt.handle().clone();
    let program = UIO::unit()
        .start::<E>()
        .flat_map(move |_queued| IO::delay(move || Executor::fiber_dump(&handle)));
    let dump = rt
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .expect("succeeds");
    assert_eq!(counter(&dump, "macrotask queue"), 1, "{dump}");
    assert_eq!(counter(&dump, "microtask queue"), 0, "{dump}");
}

#[cfg(feature = "tracing")]
#[test]
fn between_runs_the_loop_dumps_the_fibers_left_sleeping_and_a_thread_sees_the_same() {
    let rt = event_loop(Mode::Batching);
    let program = UIO::sleep(Duration::from_secs(3600))
        .start()
        .flat_map(|_sleeper| UIO::cede());
    assert!(rt.block_on(program).expect("block_on").is_succeeded());
    let dump = rt.fiber_dump();
    assert_eq!(dump.fibers.len(), 1, "{dump}");
    assert_eq!(dump.fibers[0].state, FiberState::Sleeping, "{dump}");
    assert_eq!(counter(&dump, "timers"), 1, "{dump}");
    let handle = rt.handle().clone();
    let from_thread = std::thread::spawn(move || Executor::fiber_dump(&handle))
        .join()
        .expect("the dumping thread");
    assert_eq!(from_thread.fibers.len(), 1, "{from_thread}");
    assert_eq!(counter(&from_thread, "timers"), 1, "{from_thread}");
}

#[test]
fn with_tracing_mode_none_nothing_is_listed_unless_tracking_is_asked_for() {
    let untraced = FiberConfig::builder()
        .tracing(TracingMode::None)
        .build()
        .expect("valid");
    for track in [false, true] {
        let rt = EventLoop::builder()
            .fiber_config(untraced)
            .track_fibers(track)
            .build()
            .expect("build");
        let program = UIO::sleep(Duration::from_secs(3600))
            .start()
            .flat_map(|_sleeper| UIO::cede());
        assert!(rt.block_on(program).expect("block_on").is_succeeded());
        let dump = rt.fiber_dump();
        if track {
            // Listed, without states or traces (the fiber does not trace).
            assert_eq!(dump.fibers.len(), 1, "{dump}");
            assert!(dump.fibers[0].trace.is_none(), "{dump}");
        } else {
            assert!(dump.fibers.is_empty(), "{dump}");
        }
    }
}

/// Set (to the test's name) in the environment of a child run of this
/// test binary.
const CHILD: &str = "EXEC_BATCHING_FIBER_DUMP_CHILD";

#[test]
fn an_unknown_spindle_tracing_mode_is_a_from_env_error_naming_the_valid_modes() {
    const NAME: &str = "an_unknown_spindle_tracing_mode_is_a_from_env_error_naming_the_valid_modes";
    if std::env::var(CHILD).is_ok_and(|v| v == NAME) {
        // In the child, with SPINDLE_TRACING=verbose.
        match EventLoop::from_env() {
            Err(e @ BuildError::Config(_)) => eprintln!("build: {e}"),
            other => eprintln!("build: unexpected {other:?}"),
        }
        let explicit = EventLoop::builder()
            .fiber_config(FiberConfig::default())
            .build();
        eprintln!("explicit config builds: {}", explicit.is_ok());
        // The builder (and `new`) do not read the environment.
        eprintln!("builder builds: {}", EventLoop::builder().build().is_ok());
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = Command::new(exe)
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, NAME)
        .env("SPINDLE_TRACING", "verbose")
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("build: "))
        .unwrap_or_else(|| panic!("no build line in:\n{stderr}"));
    for word in [
        "exec-batching",
        "SPINDLE_TRACING",
        "verbose",
        "none",
        "cached",
        "full",
    ] {
        assert!(line.contains(word), "{word:?} in {line:?}");
    }
    assert!(stderr.contains("explicit config builds: true"), "{stderr}");
    assert!(stderr.contains("builder builds: true"), "{stderr}");
}
