//! Finalizers: `on_cancel`, `guarantee`, `guarantee_case`, the bracket
//! family and the cancellation finalizer of `IO::from_callback`. Each runs exactly
//! once (counted), masked, in reverse order of installation, whatever the
//! outcome: success, error, cancellation (self-cancel or by another fiber)
//! and panic (where io-core documents a panic to run it). A finalizer's own
//! error replaces a success, is suppressed otherwise, and never stops the
//! other finalizers.

mod common;

use common::{Counter, Log, eventually, rt_test};
use spindle_core::{Callback, Deferred, FiberConfig, IO, Outcome, PanicMessage};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type E = String;

/// How a program under test ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Success,
    Error,
    SelfCancel,
    Panic,
}

const CASES: [Case; 4] = [Case::Success, Case::Error, Case::SelfCancel, Case::Panic];

/// A program that ends as `case` says, after a real suspension.
fn ending(case: Case) -> IO<u32, E> {
    let after = IO::sleep(Duration::from_millis(1));
    match case {
        Case::Success => after.map_to(5),
        Case::Error => after.product_r(IO::raise_error("boom".to_string())),
        Case::SelfCancel => after.product_r(IO::canceled()).map_to(0),
        Case::Panic => after.flat_map(|()| IO::delay(|| -> u32 { panic!("bad") })),
    }
}

/// Asserts that `outcome` is what `ending(case)` (possibly after a
/// finalizer that succeeded) gives.
fn assert_ended_as(case: Case, outcome: &Outcome<u32, E>) {
    match case {
        Case::Success => assert_eq!(outcome, &Outcome::Succeeded(5)),
        Case::Error => assert_eq!(outcome, &Outcome::Errored("boom".to_string())),
        Case::SelfCancel => assert_eq!(outcome, &Outcome::Canceled),
        Case::Panic => assert_eq!(outcome, &Outcome::Panicked(PanicMessage::new("bad"))),
    }
}

fn describe(outcome: &Outcome<u32, E>) -> String {
    match outcome {
        Outcome::Succeeded(v) => format!("succeeded {v}"),
        Outcome::Errored(e) => format!("errored {e}"),
        Outcome::Canceled => "canceled".to_string(),
        Outcome::Panicked(p) => format!("panicked {p}"),
    }
}

/// Starts `child`, waits for `started`, cancels it and joins it; produces
/// its outcome and suppressed errors.
fn cancel_when_started<A: Clone + Send + 'static>(
    child: IO<A, E>,
    started: Deferred<()>,
) -> IO<(Outcome<A, E>, Vec<E>), E> {
    child.start().flat_map(move |h| {
        started
            .get()
            .product_r(h.cancel())
            .product_r(h.join_void())
            .map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
    })
}

/// Runs `io` on a fiber and produces its outcome and suppressed errors.
fn outcome_and_suppressed<A: Clone + Send + 'static>(
    io: IO<A, E>,
) -> IO<(Outcome<A, E>, Vec<E>), E> {
    io.start().flat_map(|h| {
        h.join_void()
            .map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
    })
}

/// A slot where an `from_callback` registration leaves its callback.
type CallbackSlot = Arc<Mutex<Option<Callback<u32, E>>>>;

/// An `from_callback` that parks its callback in `slot` and installs a finalizer
/// that counts in `finalized`.
fn parked_async(slot: &CallbackSlot, finalized: &Counter) -> IO<u32, E> {
    let (slot, finalized) = (slot.clone(), finalized.clone());
    IO::from_callback(move |cb| {
        *slot.lock().unwrap() = Some(cb);
        Some(finalized.incr_io())
    })
}

rt_test! {
    // ----- on_cancel --------------------------------------------------------

    fn on_cancel_does_not_run_on_success_error_or_panic() {
        for case in [Case::Success, Case::Error, Case::Panic] {
            let fin = Counter::new();
            let outcome = run(ending(case).on_cancel(fin.incr_io()));
            assert_ended_as(case, &outcome);
            assert_eq!(fin.get(), 0, "{case:?}");
        }
    }

    fn on_cancel_runs_once_on_self_cancel() {
        let fin = Counter::new();
        assert_eq!(run(ending(Case::SelfCancel).on_cancel(fin.incr_io())), Outcome::Canceled);
        assert_eq!(fin.get(), 1);
    }

    fn on_cancel_runs_once_when_another_fiber_cancels() {
        let fin = Counter::new();
        let started = Deferred::new();
        let child = started
            .complete(())
            .product_r(IO::<u32, E>::never())
            .on_cancel(fin.incr_io());
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(fin.get(), 1);
    }

    fn on_cancel_finalizers_run_innermost_first() {
        let log = Log::new();
        let io: IO<u32, E> = ending(Case::SelfCancel)
            .on_cancel(log.record("inner"))
            .on_cancel(log.record("middle"))
            .on_cancel(log.record("outer"));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["inner", "middle", "outer"]);
    }

    fn on_cancel_does_not_run_for_a_cancellation_after_its_program_completed() {
        let fin = Counter::new();
        let io: IO<u32, E> = IO::<u32, E>::pure(1)
            .on_cancel(fin.incr_io())
            .flat_map(|x| IO::canceled().map_to(x));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(fin.get(), 0);
    }

    // ----- guarantee, guarantee_case -----------------------------------------

    fn guarantee_runs_its_finalizer_exactly_once_whatever_the_outcome() {
        for case in CASES {
            let fin = Counter::new();
            let outcome = run(ending(case).guarantee(fin.incr_io()));
            assert_ended_as(case, &outcome);
            assert_eq!(fin.get(), 1, "{case:?}");
        }
    }

    fn guarantee_runs_once_when_another_fiber_cancels() {
        let fin = Counter::new();
        let started = Deferred::new();
        let child = started
            .complete(())
            .product_r(IO::<u32, E>::never())
            .guarantee(fin.incr_io());
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(fin.get(), 1);
    }

    fn a_guarantee_a_defer_returns_is_in_place_before_the_fiber_can_be_canceled() {
        // A `defer` takes something (counted) and returns a program guarded
        // by its release: every fiber yields after each step, and the
        // fiber is canceled after 0, 1, 2, ... steps of its own, so one
        // cancellation lands right after the `defer`. Whatever was taken is
        // released, exactly once.
        fn after_steps(steps: usize, io: IO<(), E>) -> IO<(), E> {
            if steps == 0 {
                io
            } else {
                IO::defer(move || after_steps(steps - 1, io))
            }
        }
        let config = FiberConfig::builder().auto_yield_after(1).build().expect("a valid configuration");
        for steps in 0..10 {
            let (taken, released) = (Counter::new(), Counter::new());
            let (t, r) = (taken.clone(), released.clone());
            let take = IO::defer(move || {
                t.incr();
                IO::<(), E>::unit().guarantee(r.incr_io())
            });
            let io: IO<Outcome<(), E>, E> = after_steps(steps, take)
                .start()
                .flat_map(|h| h.cancel().product_r(h.join()));
            let outcome = rt_with_config(config).run(io).succeeded().expect("succeeds");
            assert_eq!(taken.get(), released.get(), "{steps}: {outcome:?}");
        }
    }

    fn guarantee_case_gives_its_finalizer_the_outcome() {
        for case in CASES {
            let log = Log::new();
            let l = log.clone();
            let outcome = run(ending(case).guarantee_case(move |o| l.record(describe(&o))));
            assert_ended_as(case, &outcome);
            let expected = match case {
                Case::Success => "succeeded 5",
                Case::Error => "errored boom",
                Case::SelfCancel => "canceled",
                Case::Panic => "panicked bad",
            };
            assert_eq!(log.events(), [expected], "{case:?}");
        }
    }

    fn nested_finalizers_run_in_reverse_order_of_installation_whatever_the_outcome() {
        for case in CASES {
            let log = Log::new();
            let io = ending(case)
                .guarantee(log.record("first installed"))
                .guarantee_case({
                    let l = log.clone();
                    move |_| l.record("second installed")
                })
                .guarantee(log.record("third installed"));
            assert_ended_as(case, &run(io));
            assert_eq!(
                log.events(),
                ["first installed", "second installed", "third installed"],
                "{case:?}"
            );
        }
    }

    fn on_cancel_and_guarantee_interleave_in_reverse_order_of_installation() {
        let log = Log::new();
        let io: IO<u32, E> = ending(Case::SelfCancel)
            .on_cancel(log.record("on_cancel 1"))
            .guarantee(log.record("guarantee 2"))
            .on_cancel(log.record("on_cancel 3"))
            .guarantee(log.record("guarantee 4"));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["on_cancel 1", "guarantee 2", "on_cancel 3", "guarantee 4"]);
    }

    fn a_finalizer_error_replaces_a_success() {
        let io: IO<u32, E> = IO::<u32, E>::pure(1).guarantee(IO::raise_error("fin".to_string()));
        assert_eq!(
            run(outcome_and_suppressed(io)),
            Outcome::Succeeded((Outcome::Errored("fin".to_string()), vec![]))
        );
    }

    fn a_finalizer_error_after_an_error_is_suppressed_and_the_first_error_stays() {
        let io = ending(Case::Error).guarantee(IO::raise_error("fin".to_string()));
        assert_eq!(
            run(outcome_and_suppressed(io)),
            Outcome::Succeeded((Outcome::Errored("boom".to_string()), vec!["fin".to_string()]))
        );
    }

    fn a_finalizer_error_after_a_cancellation_is_suppressed() {
        let io = ending(Case::SelfCancel).guarantee(IO::raise_error("fin".to_string()));
        assert_eq!(
            run(outcome_and_suppressed(io)),
            Outcome::Succeeded((Outcome::Canceled, vec!["fin".to_string()]))
        );
        let on_cancel = ending(Case::SelfCancel).on_cancel(IO::raise_error("fin".to_string()));
        assert_eq!(
            run(outcome_and_suppressed(on_cancel)),
            Outcome::Succeeded((Outcome::Canceled, vec!["fin".to_string()]))
        );
    }

    fn a_failing_finalizer_never_stops_the_other_finalizers() {
        for case in CASES {
            let ran = Counter::new();
            let io = ending(case)
                .guarantee(ran.incr_io())
                .guarantee(ran.incr_io().product_r(IO::raise_error("fin".to_string())))
                .guarantee(ran.incr_io());
            let (outcome, suppressed) = run(outcome_and_suppressed(io))
                .succeeded()
                .expect("the parent succeeds");
            assert_eq!(ran.get(), 3, "{case:?}");
            match case {
                Case::Success => {
                    assert_eq!(outcome, Outcome::Errored("fin".to_string()));
                    assert!(suppressed.is_empty());
                }
                _ => {
                    assert_ended_as(case, &outcome);
                    assert_eq!(suppressed, ["fin".to_string()], "{case:?}");
                }
            }
        }
    }

    fn a_panicking_finalizer_does_not_stop_the_other_finalizers() {
        for case in CASES {
            let ran = Counter::new();
            let io = ending(case)
                .guarantee(ran.incr_io())
                .guarantee(IO::delay(|| panic!("finalizer panicked")))
                .guarantee(ran.incr_io());
            let outcome = run(io);
            assert_eq!(ran.get(), 2, "{case:?}");
            match case {
                Case::Success => assert_eq!(
                    outcome,
                    Outcome::Panicked(PanicMessage::new("finalizer panicked"))
                ),
                Case::SelfCancel => assert_eq!(outcome, Outcome::Canceled),
                Case::Error | Case::Panic => assert!(outcome.is_panicked(), "{outcome:?}"),
            }
        }
    }

    fn the_first_finalizer_error_replaces_a_success_and_later_ones_are_suppressed() {
        let io: IO<u32, E> = IO::<u32, E>::pure(1)
            .guarantee(IO::raise_error("inner fin".to_string()))
            .guarantee(IO::raise_error("outer fin".to_string()));
        assert_eq!(
            run(outcome_and_suppressed(io)),
            Outcome::Succeeded((
                Outcome::Errored("inner fin".to_string()),
                vec!["outer fin".to_string()]
            ))
        );
    }

    fn a_guarantee_case_finalizer_sees_the_error_an_inner_finalizer_raised() {
        let log = Log::new();
        let l = log.clone();
        let io: IO<u32, E> = IO::<u32, E>::pure(1)
            .guarantee(IO::raise_error("inner fin".to_string()))
            .guarantee_case(move |o| l.record(describe(&o)));
        assert_eq!(run(io), Outcome::Errored("inner fin".to_string()));
        assert_eq!(log.events(), ["errored inner fin"]);
    }

    // ----- bracket family ------------------------------------------------------

    fn bracket_releases_exactly_once_whatever_the_outcome_of_the_use() {
        for case in CASES {
            let log = Log::new();
            let (acq, use_log, rel) = (log.clone(), log.clone(), log.clone());
            let io: IO<u32, E> = IO::bracket(
                acq.record("acquire".to_string()).map_to(10u32),
                move |r: u32| {
                    assert_eq!(r, 10);
                    use_log.record("use".to_string()).product_r(ending(case))
                },
                move |r| rel.record(format!("release {r}")),
            );
            assert_ended_as(case, &run(io));
            assert_eq!(
                log.events(),
                ["acquire".to_string(), "use".to_string(), "release 10".to_string()],
                "{case:?}"
            );
        }
    }

    fn bracket_case_gives_its_release_the_outcome_of_the_use() {
        for case in CASES {
            let log = Log::new();
            let l = log.clone();
            let io: IO<u32, E> = IO::bracket_case(
                IO::pure(1u32),
                move |_: u32| ending(case),
                move |_, o| l.record(describe(&o)),
            );
            assert_ended_as(case, &run(io));
            let expected = match case {
                Case::Success => "succeeded 5",
                Case::Error => "errored boom",
                Case::SelfCancel => "canceled",
                Case::Panic => "panicked bad",
            };
            assert_eq!(log.events(), [expected], "{case:?}");
        }
    }

    fn nested_brackets_release_in_reverse_order_of_acquisition_whatever_the_outcome() {
        for case in CASES {
            let log = Log::new();
            let (a1, a2, r1, r2) = (log.clone(), log.clone(), log.clone(), log.clone());
            let io: IO<u32, E> = IO::bracket(
                a1.record("acquire a".to_string()).map_to("a"),
                move |_: &str| {
                    IO::bracket(
                        a2.record("acquire b".to_string()).map_to("b"),
                        move |_: &str| ending(case),
                        move |r| r2.record(format!("release {r}")),
                    )
                },
                move |r| r1.record(format!("release {r}")),
            );
            assert_ended_as(case, &run(io));
            assert_eq!(
                log.events(),
                ["acquire a", "acquire b", "release b", "release a"],
                "{case:?}"
            );
        }
    }

    fn bracket_releases_once_when_another_fiber_cancels_the_use() {
        let released = Counter::new();
        let started = Deferred::<()>::new();
        let s = started.clone();
        let child: IO<u32, E> = IO::bracket(
            IO::pure(()),
            move |_: ()| s.complete(()).product_r(IO::never()),
            {
                let r = released.clone();
                move |()| r.incr_io()
            },
        );
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(released.get(), 1);
    }

    fn bracket_runs_neither_use_nor_release_when_the_acquisition_fails() {
        let (used, released) = (Counter::new(), Counter::new());
        let (u, r) = (used.clone(), released.clone());
        let io: IO<u32, E> = IO::bracket(
            IO::<u32, E>::raise_error("acquire failed".to_string()),
            move |_: u32| u.incr_io().map_to(1),
            move |_| r.incr_io(),
        );
        assert_eq!(run(io), Outcome::Errored("acquire failed".to_string()));
        assert_eq!((used.get(), released.get()), (0, 0));
    }

    fn bracket_acquisition_is_uncancelable_and_a_completed_acquisition_is_released() {
        // Canceled during the acquisition: the acquisition finishes, the use
        // does not start, the release runs (Cats Effect's bracket law).
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (s, acq, u, rel) = (started.clone(), log.clone(), log.clone(), log.clone());
        let child: IO<u32, E> = IO::bracket_case(
            s.complete(())
                .product_r(IO::sleep(Duration::from_millis(20)))
                .product_r(acq.record("acquired".to_string())),
            move |_: ()| u.record("use".to_string()).map_to(1),
            move |(), o| rel.record(format!("release {}", describe(&o))),
        );
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(log.events(), ["acquired", "release canceled"]);
    }

    fn bracket_release_runs_to_its_end_despite_a_pending_cancellation() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (s, rel) = (started.clone(), log.clone());
        let child: IO<u32, E> = IO::bracket(
            IO::pure(()),
            move |_: ()| s.complete(()).product_r(IO::never()),
            move |()| {
                IO::sleep(Duration::from_millis(20)).product_r(rel.record("release finished"))
            },
        );
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(log.events(), ["release finished"]);
    }

    fn bracket_full_acquisition_can_be_canceled_through_its_poll_and_nothing_is_released() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (s, acq, u, rel) = (started.clone(), log.clone(), log.clone(), log.clone());
        let child: IO<u32, E> = IO::bracket_full(
            move |poll| {
                poll.apply(s.complete(()).product_r(IO::never()))
                    .on_cancel(acq.record("acquisition canceled"))
            },
            move |_: ()| u.record("use").map_to(1),
            move |(), _| rel.record("release"),
        );
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(log.events(), ["acquisition canceled"]);
    }

    fn bracket_full_without_poll_keeps_the_acquisition_masked() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (s, acq, u, rel) = (started.clone(), log.clone(), log.clone(), log.clone());
        let child: IO<u32, E> = IO::bracket_full(
            move |_poll| {
                s.complete(())
                    .product_r(IO::sleep(Duration::from_millis(20)))
                    .product_r(acq.record("acquired"))
            },
            move |_: ()| u.record("use").map_to(1),
            move |(), _| rel.record("release"),
        );
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded((Outcome::Canceled, vec![]))
        );
        assert_eq!(log.events(), ["acquired", "release"]);
    }

    fn a_bracket_release_error_replaces_a_success_and_is_suppressed_after_an_error() {
        let ok: IO<u32, E> = IO::bracket(
            IO::pure(()),
            |_: ()| IO::pure(1),
            |()| IO::raise_error("release failed".to_string()),
        );
        assert_eq!(
            run(outcome_and_suppressed(ok)),
            Outcome::Succeeded((Outcome::Errored("release failed".to_string()), vec![]))
        );
        let failing: IO<u32, E> = IO::bracket(
            IO::pure(()),
            |_: ()| IO::raise_error("use failed".to_string()),
            |()| IO::raise_error("release failed".to_string()),
        );
        assert_eq!(
            run(outcome_and_suppressed(failing)),
            Outcome::Succeeded((
                Outcome::Errored("use failed".to_string()),
                vec!["release failed".to_string()]
            ))
        );
    }

    fn a_failing_inner_release_does_not_stop_the_outer_release() {
        let released = Counter::new();
        let (r1, r2) = (released.clone(), released.clone());
        let io: IO<u32, E> = IO::bracket(
            IO::pure(()),
            move |_: ()| {
                IO::bracket(
                    IO::pure(()),
                    |_: ()| IO::pure(1),
                    move |()| r2.incr_io().product_r(IO::raise_error("inner release".to_string())),
                )
            },
            move |()| r1.incr_io(),
        );
        assert_eq!(run(io), Outcome::Errored("inner release".to_string()));
        assert_eq!(released.get(), 2);
    }

    // ----- async_ with a cancellation finalizer ---------------------------------

    fn canceling_a_fiber_suspended_in_async_runs_its_finalizer_once() {
        let slot: CallbackSlot = Arc::new(Mutex::new(None));
        let finalized = Counter::new();
        let child = parked_async(&slot, &finalized);
        let parked = slot.clone();
        let io: IO<Outcome<u32, E>, E> = child.start().flat_map(move |h| {
            eventually(move || parked.lock().unwrap().is_some())
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(finalized.get(), 1);
    }

    fn a_callback_arriving_after_cancellation_returns_false_and_changes_nothing() {
        let slot: CallbackSlot = Arc::new(Mutex::new(None));
        let (finalized, continued) = (Counter::new(), Counter::new());
        let c = continued.clone();
        let child = parked_async(&slot, &finalized).flat_map(move |v| c.incr_io().map_to(v));
        let (parked, late) = (slot.clone(), slot.clone());
        let io: IO<(bool, Outcome<u32, E>), E> = child.start().flat_map(move |h| {
            eventually(move || parked.lock().unwrap().is_some())
                .product_r(h.cancel())
                .product_r(IO::delay(move || {
                    late.lock().unwrap().as_ref().expect("parked").succeed(99)
                }))
                .flat_map(move |accepted| {
                    IO::sleep(Duration::from_millis(5))
                        .product_r(h.join())
                        .map(move |o| (accepted, o))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((false, Outcome::Canceled)));
        assert_eq!(finalized.get(), 1);
        assert_eq!(continued.get(), 0);
    }

    fn the_async_finalizer_does_not_run_when_the_callback_won_before_the_cancel() {
        let slot: CallbackSlot = Arc::new(Mutex::new(None));
        let finalized = Counter::new();
        let child = parked_async(&slot, &finalized);
        let (parked, cb) = (slot.clone(), slot.clone());
        let io: IO<(bool, Outcome<u32, E>), E> = child.start().flat_map(move |h| {
            eventually(move || parked.lock().unwrap().is_some())
                .product_r(IO::delay(move || cb.lock().unwrap().as_ref().expect("parked").succeed(4)))
                .flat_map(move |accepted| {
                    h.join_void()
                        .product_r(h.cancel())
                        .product_r(h.join())
                        .map(move |o| (accepted, o))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((true, Outcome::Succeeded(4))));
        assert_eq!(finalized.get(), 0);
    }

    fn a_masked_async_is_not_interrupted_and_its_finalizer_does_not_run() {
        let slot: CallbackSlot = Arc::new(Mutex::new(None));
        let (finalized, got) = (Counter::new(), Counter::new());
        let (s, f, g) = (slot.clone(), finalized.clone(), got.clone());
        let child: IO<u32, E> = IO::uncancelable(move |_| {
            parked_async(&s, &f).flat_map(move |v| g.incr_io().map_to(v))
        });
        let (parked, cb) = (slot.clone(), slot.clone());
        let io: IO<(bool, Outcome<u32, E>), E> = child.start().flat_map(move |h| {
            let canceler = h.cancel_handle();
            eventually(move || parked.lock().unwrap().is_some())
                .product_r(canceler.cancel::<E>().start())
                .flat_map(move |c| {
                    IO::sleep(Duration::from_millis(5))
                        .product_r(IO::delay(move || {
                            cb.lock().unwrap().as_ref().expect("parked").succeed(8)
                        }))
                        .flat_map(move |accepted| {
                            c.join_void().product_r(h.join()).map(move |o| (accepted, o))
                        })
                })
        });
        // The whole program was masked: it runs to its end and the fiber
        // completes with its value (as in Cats Effect 3.5+: cancellation is
        // observed before a new program runs, and none is left to run).
        assert_eq!(run(io), Outcome::Succeeded((true, Outcome::Succeeded(8))));
        assert_eq!(finalized.get(), 0);
        assert_eq!(got.get(), 1, "the masked region ran to its end");
    }

    fn an_async_finalizer_runs_before_the_enclosing_finalizers() {
        let log = Log::new();
        let slot: CallbackSlot = Arc::new(Mutex::new(None));
        let (s, l) = (slot.clone(), log.clone());
        let child: IO<u32, E> = IO::from_callback(move |cb| {
            *s.lock().unwrap() = Some(cb);
            Some(l.record("async finalizer"))
        })
        .on_cancel(log.record("on_cancel"))
        .guarantee(log.record("guarantee"));
        let parked = slot.clone();
        let io: IO<Outcome<u32, E>, E> = child.start().flat_map(move |h| {
            eventually(move || parked.lock().unwrap().is_some())
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["async finalizer", "on_cancel", "guarantee"]);
    }
}
