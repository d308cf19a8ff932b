//! Fiber dumps (`Executor::fiber_dump`) on every executor: which fibers a
//! dump lists, in which state, with which trace, and that nothing is listed
//! or recorded with tracing off.
//!
//! Each body takes its dumps from inside its main fiber (`IO::delay` calling
//! the executor's dump), so that the other fibers are where the program put
//! them: waiting, sleeping, or gone.

// The tests that need traces are compiled only with the `tracing` feature;
// without it, their helpers are unused.
#![cfg_attr(not(feature = "tracing"), allow(unused))]

mod common;

use std::time::Duration;

use common::{Dumper, TestRuntime, eventually, rt_test};
use spindle_core::{
    Deferred, FiberConfig, FiberDump, FiberHandle, FiberId, FiberInfo, FiberState, IO, Outcome,
    Trace, TracingMode, UIO,
};

type E = ();

/// A program that takes a dump when it runs.
fn take_dump(dump: &Dumper) -> IO<FiberDump, E> {
    let dump = dump.clone();
    IO::delay(move || dump())
}

/// A fiber's program: wait for `wait`, then complete `then`. Returns the
/// program and the line of its `get` call in this file.
fn wait_then_complete(wait: Deferred<()>, then: Deferred<()>) -> (IO<(), E>, u32) {
    let get_line = line!() + 1;
    let get = wait.get();
    (get.flat_map(move |()| then.complete(()).void()), get_line)
}

/// The line of the `sleep` call in [`sleeper`].
const SLEEP_LINE: u32 = line!() + 4;

/// A fiber's program that sleeps for an hour.
fn sleeper() -> IO<(), E> {
    IO::sleep(Duration::from_secs(3600))
}

/// The last event of a fiber's trace (panics, naming the dump, if none).
fn last_event<'a>(fiber: &'a FiberInfo, dump: &FiberDump) -> &'a spindle_core::TraceEvent {
    let trace: &Trace = fiber
        .trace
        .as_ref()
        .unwrap_or_else(|| panic!("fiber {} has no trace:\n{dump}", fiber.id));
    trace
        .events()
        .last()
        .unwrap_or_else(|| panic!("fiber {} has an empty trace:\n{dump}", fiber.id))
}

/// Cancels every fiber of `handles` (their finalizers have run after).
fn cancel_all(handles: Vec<FiberHandle<(), E>>) -> IO<(), E> {
    IO::traverse(handles, |h| h.cancel()).void()
}

rt_test! {
    #[cfg(feature = "tracing")]
    fn the_fiber_dump_lists_every_live_fiber_with_its_state() {
        let rt = rt();
        let dump = rt.dumper();
        // Three fibers deadlocked on one another's deferreds, and one asleep.
        let (a, b, c) = (Deferred::new(), Deferred::new(), Deferred::new());
        let (wait_a, get_line) = wait_then_complete(a.clone(), b.clone());
        let (wait_b, _) = wait_then_complete(b.clone(), c.clone());
        let (wait_c, _) = wait_then_complete(c.clone(), a.clone());
        let starts = vec![
            wait_a.start(),
            wait_b.start(),
            wait_c.start(),
            sleeper().start(),
        ];
        let settled = {
            let dump = dump.clone();
            move || {
                let d = dump();
                d.in_state(FiberState::Waiting).count() == 3
                    && d.in_state(FiberState::Sleeping).count() == 1
            }
        };
        let dump_in_fiber = dump.clone();
        let program = IO::sequence(starts).flat_map(move |handles| {
            eventually::<E>(settled)
                .product_r(take_dump(&dump_in_fiber))
                .flat_map(move |dump| cancel_all(handles).map_to(dump))
        });
        let dump = rt.run(program).succeeded().expect("the program succeeds");

        // The main fiber (taking the dump), three waiting, one sleeping.
        assert_eq!(dump.fibers.len(), 5, "{dump}");
        assert_eq!(dump.in_state(FiberState::Running).count(), 1, "{dump}");
        let waiting: Vec<&FiberInfo> = dump.in_state(FiberState::Waiting).collect();
        assert_eq!(waiting.len(), 3, "{dump}");
        for fiber in &waiting {
            // The wait's op is `async` or `Deferred::get`: its site is what
            // the user wrote.
            let event = last_event(fiber, &dump);
            assert_eq!(event.location().file(), file!(), "{event}\n{dump}");
            assert_eq!(event.location().line(), get_line, "{event}\n{dump}");
        }
        let sleeping: Vec<&FiberInfo> = dump.in_state(FiberState::Sleeping).collect();
        assert_eq!(sleeping.len(), 1, "{dump}");
        let event = last_event(sleeping[0], &dump);
        assert_eq!(event.op().name(), "sleep", "{dump}");
        assert_eq!(event.location().file(), file!(), "{dump}");
        assert_eq!(event.location().line(), SLEEP_LINE, "{dump}");

        // Distinct fibers, each named in the text with its state.
        let mut ids: Vec<FiberId> = dump.fibers.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 5, "{dump}");
        let text = dump.to_string();
        for fiber in &dump.fibers {
            let header = format!("fiber {} {}", fiber.id, fiber.state.name());
            assert!(text.contains(&header), "{header:?} in:\n{text}");
        }
        let get_site = format!("{}:{get_line}:", file!());
        assert_eq!(text.matches(&get_site).count(), 3, "{get_site:?} in:\n{text}");
        assert!(text.contains("live fibers: 5"), "{text}");
        // The executor's own state follows (queue lengths and the like).
        assert!(!dump.executor.is_empty(), "{dump:?}");
    }

    #[cfg(feature = "tracing")]
    fn a_dump_marks_the_trace_of_the_fiber_running_it_in_motion_and_no_waiting_fibers_trace() {
        let rt = rt();
        let dump = rt.dumper();
        let gate = Deferred::<()>::new();
        let (open, counted) = (gate.clone(), gate.clone());
        // A waiting fiber, then a dump taken by the main fiber while it
        // runs (after a first wait, so that it has a ring of its own).
        // A fiber is listed once its first run has ended (a moment after
        // its wait is registered): wait for both.
        let listing = dump.clone();
        let program = gate.get::<E>().start::<E>().flat_map(move |waiter| {
            eventually::<E>(move || {
                counted.waiters() == 1 && listing().in_state(FiberState::Waiting).count() == 1
            })
                .product_r(IO::cede())
                .product_r(take_dump(&dump))
                .flat_map(move |listed| {
                    open.complete(())
                        .product_r(waiter.join_void())
                        .map_to(listed)
                })
        });
        let listed = rt.run(program).succeeded().expect("the program succeeds");
        assert_eq!(listed.fibers.len(), 2, "{listed}");
        let waiting = listed
            .in_state(FiberState::Waiting)
            .next()
            .unwrap_or_else(|| panic!("a waiting fiber:\n{listed}"));
        let waiting_trace = waiting.trace.as_ref().expect("the waiter traced");
        assert!(!waiting_trace.in_motion(), "{listed}");
        assert!(!waiting_trace.is_empty(), "{listed}");
        let main = listed
            .fibers
            .iter()
            .find(|f| f.id != waiting.id)
            .expect("the main fiber is listed");
        let main_trace = main.trace.as_ref().expect("the main fiber traced");
        assert!(main_trace.in_motion(), "{listed}");
        assert!(listed.to_string().contains("in motion"), "{listed}");
    }

    #[cfg(feature = "tracing")]
    fn fibers_that_have_completed_are_not_listed() {
        let rt = rt();
        let dump = rt.dumper();
        let gate = Deferred::<()>::new();
        let (done, counted) = (gate.clone(), gate.clone());
        let (before, after) = (dump.clone(), dump.clone());
        // Two fibers: one that ends at once, one that waits for the gate.
        // A fiber is listed once its first run has ended (a moment after
        // its wait is registered): wait for both.
        let listing = dump.clone();
        let program = UIO::unit().start().flat_map(move |quick| {
            gate.get::<E>().start::<E>().flat_map(move |waiter| {
                eventually::<E>(move || {
                    counted.waiters() == 1
                        && listing().in_state(FiberState::Waiting).count() == 1
                })
                    .product_r(quick.join_void())
                    .product_r(take_dump(&before))
                    .flat_map(move |listed| {
                        done.complete(())
                            .product_r(waiter.join_void())
                            .product_r(take_dump(&after))
                            // The quick fiber's handle is still held here.
                            .map(move |after| (listed, after, quick))
                    })
            })
        });
        let (listed, after, _quick) = rt.run(program).succeeded().expect("the program succeeds");
        // While the waiter waited: the main fiber and the waiter (the quick
        // fiber had completed, though its handle was still held).
        assert_eq!(listed.fibers.len(), 2, "{listed}");
        assert_eq!(listed.in_state(FiberState::Waiting).count(), 1, "{listed}");
        let main = listed
            .fibers
            .iter()
            .find(|f| f.state != FiberState::Waiting)
            .expect("the main fiber is listed");
        // After both completed: only the main fiber. (Its state is not
        // asserted: io-core shows a fiber resumed from a wait as QUEUED
        // until its next wait, also while it runs.)
        assert_eq!(after.fibers.len(), 1, "{after}");
        assert_eq!(after.fibers[0].id, main.id, "{after}");
        assert!(after.to_string().contains("live fibers: 1"), "{after}");
    }

    fn with_tracing_mode_none_the_dump_lists_no_fibers_and_records_no_traces() {
        let config = FiberConfig::builder()
            .tracing(TracingMode::None)
            .build()
            .expect("valid");
        let rt = rt_with_config(config);
        let dump = rt.dumper();
        let in_fiber = dump.clone();
        let program = sleeper().start().flat_map(move |sleeping| {
            IO::cede()
                .product_r(IO::<Trace, E>::trace())
                .flat_map(move |trace| {
                    take_dump(&in_fiber)
                        .flat_map(move |dump| sleeping.cancel().map_to((trace, dump)))
                })
        });
        let (trace, during) = rt.run(program).succeeded().expect("the program succeeds");
        assert!(trace.is_empty(), "{trace}");
        assert!(during.fibers.is_empty(), "{during}");
        assert!(during.to_string().starts_with("live fibers: 0"), "{during}");
        // The executor's state is still there.
        assert!(!during.executor.is_empty(), "{during:?}");
        let after = dump();
        assert!(after.fibers.is_empty(), "{after}");
    }

    #[cfg(feature = "tracing")]
    fn a_dump_from_another_thread_sees_the_fibers_of_a_running_program() {
        let rt = rt();
        let dump = rt.dumper();
        let gate = Deferred::<()>::new();
        let (seen, release) = (gate.clone(), gate.clone());
        let dumper = dump.clone();
        // A thread outside the executor dumps until it sees the main fiber
        // waiting, then lets it go on.
        let watcher = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                let d = dumper();
                if seen.waiters() == 1 && d.in_state(FiberState::Waiting).count() == 1 {
                    let completer = spindle_exec_single::SingleThreaded::new().expect("an executor");
                    let completed = completer
                        .block_on(release.complete::<E>(()))
                        .expect("block_on");
                    assert_eq!(completed, Outcome::Succeeded(Ok(())));
                    return d;
                }
                assert!(std::time::Instant::now() < deadline, "never saw it:\n{d}");
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        assert_eq!(rt.run(gate.get::<E>()), Outcome::Succeeded(()));
        let seen = watcher.join().expect("the watcher");
        assert_eq!(seen.fibers.len(), 1, "{seen}");
        assert!(seen.to_string().contains("WAITING"), "{seen}");
    }
}
