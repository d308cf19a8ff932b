//! exec-single's fiber dumps (its fibers and its loop's state) and
//! `SingleThreaded::from_env`.

// Dumps of executors on the system clock (`std`); without it
// (`--no-default-features`) this file is empty.
#![cfg(feature = "std")]
// The tests that need traces are compiled only with the `tracing` feature;
// without it, their helpers are unused.
#![cfg_attr(not(feature = "tracing"), allow(unused))]

use std::process::Command;
use std::time::Duration;

use spindle_core::error::ConfigError;
use spindle_core::{
    Executor, FiberConfig, FiberDump, FiberState, IO, IORuntime, RuntimeBuilder, TracingMode, UIO,
};
use spindle_exec_single::{BuildError, SingleThreaded};

type E = ();

/// The value of one of the executor's counters in `dump`.
fn counter(dump: &FiberDump, name: &str) -> u64 {
    dump.counter(name)
        .unwrap_or_else(|| panic!("no {name:?} in {dump:?}"))
}

#[cfg(feature = "tracing")]
#[test]
fn a_dump_inside_a_fiber_shows_queued_and_sleeping_fibers_the_ready_queue_and_the_timers() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let dump = move || handle.fiber_dump();
    let (first, second) = (dump.clone(), dump);
    // A sleeper runs (and sets its timer) at the first cede; a yielder runs
    // at the second and yields (it is listed, and queued again); a third
    // fiber, started right before the dump, is in the ready queue but not
    // listed: a fiber is listed once it first waits or yields.
    let program = UIO::sleep(Duration::from_secs(3600))
        .start()
        .flat_map(move |sleeper| {
            UIO::cede()
                .product_r(UIO::cede().start())
                .flat_map(move |yielder| {
                    UIO::cede()
                        .product_r(UIO::unit().start())
                        .flat_map(move |queued| {
                            IO::delay(first)
                                .flat_map(move |d| sleeper.cancel().map_to((d, yielder, queued)))
                        })
                })
        })
        .map(move |(d, _yielder, _queued)| (d, second()));
    let (during, after) = rt
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .expect("succeeds");
    assert_eq!(during.fibers.len(), 3, "{during}");
    assert_eq!(during.in_state(FiberState::Sleeping).count(), 1, "{during}");
    assert_eq!(during.in_state(FiberState::Queued).count(), 1, "{during}");
    assert_eq!(counter(&during, "ready queue"), 2, "{during}");
    assert_eq!(counter(&during, "timers"), 1, "{during}");
    assert_eq!(counter(&during, "remote queue"), 0, "{during}");
    // The sleeper was canceled and its timer removed; the quick fiber ran.
    assert_eq!(after.in_state(FiberState::Sleeping).count(), 0, "{after}");
    assert_eq!(counter(&after, "timers"), 0, "{after}");
    let text = during.to_string();
    assert!(text.contains(" SLEEPING\n"), "{text}");
    assert!(text.contains("ready queue: 2"), "{text}");
}

#[cfg(feature = "tracing")]
#[test]
fn between_runs_a_dump_lists_the_fibers_left_waiting_with_the_published_counters() {
    let rt = SingleThreaded::new().expect("an executor");
    let program = UIO::sleep(Duration::from_secs(3600))
        .start()
        .flat_map(|_sleeper| UIO::cede());
    assert!(rt.block_on(program).expect("block_on").is_succeeded());
    let dump = rt.fiber_dump();
    assert_eq!(dump.fibers.len(), 1, "{dump}");
    assert_eq!(dump.fibers[0].state, FiberState::Sleeping, "{dump}");
    assert_eq!(counter(&dump, "timers"), 1, "{dump}");
}

#[test]
fn with_tracing_mode_none_nothing_is_listed() {
    let config = FiberConfig::builder()
        .tracing(TracingMode::None)
        .build()
        .expect("valid");
    let rt = SingleThreaded::builder()
        .fiber_config(config)
        .build()
        .expect("an executor");
    let handle = rt.handle().clone();
    let program = UIO::sleep(Duration::from_secs(3600))
        .start()
        .flat_map(move |sleeper| {
            UIO::cede()
                .product_r(IO::delay(move || handle.fiber_dump()))
                .flat_map(move |d| sleeper.cancel().map_to(d))
        });
    let dump = rt
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .expect("succeeds");
    assert!(dump.fibers.is_empty(), "{dump}");
    assert_eq!(counter(&dump, "timers"), 1, "{dump}");
}

/// Set (to the test's name) in the environment of a child run of this
/// test binary.
const CHILD: &str = "EXEC_SINGLE_FIBER_DUMP_CHILD";

#[test]
fn from_env_refuses_an_unknown_spindle_tracing_mode_and_new_ignores_it() {
    const NAME: &str = "from_env_refuses_an_unknown_spindle_tracing_mode_and_new_ignores_it";
    if std::env::var(CHILD).is_ok_and(|v| v == NAME) {
        // In the child, with SPINDLE_TRACING=verbose.
        match SingleThreaded::from_env() {
            Err(e @ BuildError::Config(ConfigError::Tracing(_))) => eprintln!("from_env: {e}"),
            Err(e) => eprintln!("from_env: unexpected {e:?}"),
            Ok(_) => eprintln!("from_env: accepted"),
        }
        let rt = SingleThreaded::new().expect("an executor");
        eprintln!(
            "new: {:?}",
            rt.block_on(IO::<u8, E>::pure(7)).expect("block_on")
        );
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
        .find(|l| l.starts_with("from_env: "))
        .unwrap_or_else(|| panic!("no from_env line in:\n{stderr}"));
    for word in ["SPINDLE_TRACING", "verbose", "none", "cached", "full"] {
        assert!(line.contains(word), "{word:?} in {line:?}");
    }
    assert!(stderr.contains("new: Succeeded(7)"), "{stderr}");
    // And with a valid mode it builds an executor in that mode.
    // (`from_env` reads the variable of this process: unset here unless the
    // whole test run sets it, so only an `Ok` is asserted.)
    if std::env::var("SPINDLE_TRACING").is_err() {
        let rt = SingleThreaded::from_env().expect("no variable, defaults");
        assert_eq!(rt.handle().config().tracing(), TracingMode::Cached);
    }
}
