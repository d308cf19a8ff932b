//! The planted bugs of the simulator's proof: each is found within a
//! stated number of seeds, reproduced exactly from the key it printed, and
//! its correct version passes for every seed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_effect::prelude::*;
use spindle_effect::{Callback, Ref};
use spindle_sim::{Failure, FailureKind, Finalizers, Run, Sim, Strategy, cancelable, invariant};

/// Seeds every search below gets; each bug must show up well within them.
const SEEDS: u64 = 200;

/// A simulator over `SEEDS` seeds with `strategy`.
fn sim_with(strategy: Strategy) -> Sim {
    Sim::builder()
        .seeds(0..SEEDS)
        .strategy(strategy)
        .build()
        .unwrap()
}

/// A simulator over `SEEDS` seeds (random strategy) that cancels a fiber
/// at half of its suspensions.
fn sim_canceling() -> Sim {
    Sim::builder()
        .seeds(0..SEEDS)
        .cancel_at_suspension(0.5)
        .build()
        .unwrap()
}

/// Checks `build` over `SEEDS` seeds with `sim`, and returns the failure.
fn find<A, E, F>(sim: &Sim, build: F) -> Failure
where
    A: Send + 'static,
    E: Send + std::fmt::Debug + 'static,
    F: FnMut(&mut Run) -> IO<A, E>,
{
    *sim.check(build).expect_err("the planted bug was not found")
}

/// Fails unless `failure` was found at a seed below `seeds`.
fn assert_found_within(failure: &Failure, seeds: u64) {
    assert!(
        failure.key.seed < seeds,
        "found only at seed {}",
        failure.key.seed
    );
}

// --- 1. A check-then-act race on a `Ref` -------------------------------

/// Two fibers each add one to a counter; the main fiber checks the sum.
fn counter_program(racy: bool) -> IO<(), ()> {
    let counter = Ref::new(0u32);
    let add = move |counter: Ref<u32>| -> IO<(), ()> {
        if racy {
            // Check, then act: another fiber may run between the two.
            let c = counter.clone();
            counter.get().flat_map(move |n| c.set(n + 1))
        } else {
            counter.update(|n| *n += 1)
        }
    };
    let end = counter.clone();
    add(counter.clone())
        .both(add(counter))
        .product_r(end.get())
        .flat_map(|n| invariant("both increments are counted", move || n == 2))
}

#[test]
fn a_check_then_act_race_on_a_ref_is_found_by_the_random_strategy_within_20_seeds() {
    let sim = sim_with(Strategy::Random);
    let failure = find(&sim, |_| counter_program(true));
    assert_found_within(&failure, 20);
    assert_eq!(
        failure.kind,
        FailureKind::Invariant("both increments are counted".into())
    );
    // The trace of the fiber that saw the broken invariant.
    assert!(failure.trace.as_deref().unwrap_or("").contains("flat_map"));
    // Its key reproduces it, schedule and all.
    let first = sim.replay(&failure.key, |_| counter_program(true));
    let second = sim.replay(&failure.key, |_| counter_program(true));
    assert_eq!(first.failure.as_ref().map(|f| &f.kind), Some(&failure.kind));
    assert_eq!(first.schedule, second.schedule);
    assert_eq!(first.steps, failure.steps);
}

#[test]
fn a_check_then_act_race_on_a_ref_is_found_by_pct_within_60_seeds() {
    // Depth 2 (one ordering constraint: the other fiber's write between
    // the read and the write), over runs of about 16 steps: PCT's bound
    // is 1 / (3 fibers · 16 steps) per seed; measured, 7% of seeds.
    let sim = sim_with(Strategy::Pct {
        depth: 2,
        expected_steps: 16,
    });
    let failure = find(&sim, |_| counter_program(true));
    assert_found_within(&failure, 60);
    let again = sim.replay(&failure.key, |_| counter_program(true));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn atomic_updates_of_a_ref_pass_for_every_seed_and_strategy() {
    for strategy in [Strategy::Random, Strategy::pct()] {
        let summary = sim_with(strategy)
            .check(|_| counter_program(false))
            .unwrap();
        assert_eq!(summary.seeds, SEEDS);
    }
}

// --- 2. A lost wake-up in a hand-written `from_callback` wait ----------

/// A one-shot flag with a hand-written wait: the waiter's callback is
/// kept in the flag's state until `raise`.
#[derive(Clone, Default)]
struct Flag {
    state: Arc<Mutex<FlagState>>,
}

/// Raised yet, and the waiter's callback.
type FlagState = (bool, Option<Callback<(), ()>>);

impl Flag {
    /// Buggy: checks the flag in one step and registers in another, so a
    /// `raise` in between finds no waiter and the wait never ends.
    fn wait_racy(&self) -> IO<(), ()> {
        let check = self.state.clone();
        let state = self.state.clone();
        IO::delay(move || check.lock().unwrap().0).flat_map(move |raised| {
            if raised {
                IO::unit()
            } else {
                IO::from_callback(move |cb| {
                    state.lock().unwrap().1 = Some(cb);
                    None
                })
            }
        })
    }

    /// Correct: checks and registers under one lock.
    fn wait(&self) -> IO<(), ()> {
        let state = self.state.clone();
        IO::from_callback(move |cb| {
            let mut state = state.lock().unwrap();
            if state.0 {
                cb.succeed(());
            } else {
                state.1 = Some(cb);
            }
            None
        })
    }

    fn raise(&self) -> IO<(), ()> {
        let state = self.state.clone();
        IO::delay(move || {
            let waiter = {
                let mut state = state.lock().unwrap();
                state.0 = true;
                state.1.take()
            };
            if let Some(cb) = waiter {
                cb.succeed(());
            }
        })
    }
}

fn flag_program(racy: bool) -> IO<(), ()> {
    let flag = Flag::default();
    let wait = if racy { flag.wait_racy() } else { flag.wait() };
    wait.both(flag.raise()).void()
}

#[test]
fn a_lost_wake_up_in_a_hand_written_wait_is_found_as_a_deadlock_within_20_seeds() {
    let sim = sim_with(Strategy::Random);
    let failure = find(&sim, |_| flag_program(true));
    assert_eq!(failure.kind, FailureKind::Deadlock);
    assert_found_within(&failure, 20);
    // The dump shows where the waiter is stuck.
    let dump = failure.dump.as_deref().unwrap_or("");
    assert!(dump.contains("from_callback"), "{dump}");
    assert!(dump.contains("wait_racy"), "{dump}");
    let again = sim.replay(&failure.key, |_| flag_program(true));
    assert_eq!(again.failure.map(|f| f.kind), Some(FailureKind::Deadlock));
    assert_eq!(again.steps, failure.steps);
}

#[test]
fn a_wait_that_checks_and_registers_at_once_never_loses_its_wake_up() {
    for strategy in [Strategy::Random, Strategy::pct()] {
        sim_with(strategy).check(|_| flag_program(false)).unwrap();
    }
}

// --- 3. A finalizer that does not run on cancellation ------------------

/// A worker holds a connection across a wait; the main fiber joins it.
/// `leaky`: the release is sequenced after the work, not a finalizer.
fn worker_program(fin: Finalizers, leaky: bool) -> IO<(), ()> {
    let work = IO::sleep(Duration::from_millis(10));
    let worker: IO<(), ()> = if leaky {
        let f = fin.clone();
        fin.acquired("connection")
            .flat_map(move |token| work.product_r(f.released(token)))
    } else {
        let f = fin.clone();
        IO::bracket(
            fin.acquired("connection"),
            move |_| work,
            move |token| f.released(token),
        )
    };
    cancelable(worker)
        .start()
        .flat_map(|handle| handle.join())
        .void()
}

#[test]
fn a_release_that_is_not_a_finalizer_is_found_leaking_under_cancellation_within_20_seeds() {
    let sim = sim_canceling();
    let failure = find(&sim, |run| worker_program(run.finalizers(), true));
    assert_found_within(&failure, 20);
    match &failure.kind {
        FailureKind::Invariant(message) => {
            assert!(message.contains("connection"), "{message}");
        }
        other => panic!("unexpected failure {other:?}"),
    }
    assert_eq!(failure.faults.len(), 1, "the cancellation that matters");
    let again = sim.replay(&failure.key, |run| worker_program(run.finalizers(), true));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
    assert_eq!(again.faults, failure.faults);
}

#[test]
fn a_bracket_releases_its_resource_whenever_the_worker_is_canceled() {
    let summary = sim_canceling()
        .check(|run| worker_program(run.finalizers(), false))
        .unwrap();
    assert!(summary.faults > 0, "no cancellation was injected");
}
