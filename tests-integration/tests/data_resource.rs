//! `Resource`: acquisition and release as a value. Releases run in reverse
//! order of acquisition, exactly once, whatever the outcome of the use
//! (success, error, cancellation, panic) and when a later acquisition
//! fails.

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{Deferred, ExitCase, IO, Outcome, Resource};
use spindle_exec_single::testkit::TestControl;
use std::time::Duration;

type E = String;

/// How a use ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Success,
    Error,
    SelfCancel,
    Panic,
}

const CASES: [Case; 4] = [Case::Success, Case::Error, Case::SelfCancel, Case::Panic];

fn ending(case: Case) -> IO<u32, E> {
    let after = IO::sleep(Duration::from_millis(1));
    match case {
        Case::Success => after.map_to(5),
        Case::Error => after.product_r(IO::raise_error("boom".to_string())),
        Case::SelfCancel => after.product_r(IO::canceled()).map_to(0),
        Case::Panic => after.flat_map(|()| IO::delay(|| -> u32 { panic!("bad") })),
    }
}

fn exit_of(case: Case) -> ExitCase {
    match case {
        Case::Success => ExitCase::Succeeded,
        Case::Error => ExitCase::Errored,
        Case::SelfCancel => ExitCase::Canceled,
        Case::Panic => ExitCase::Panicked,
    }
}

fn assert_ended_as(case: Case, outcome: &Outcome<u32, E>) {
    match case {
        Case::Success => assert_eq!(outcome, &Outcome::Succeeded(5)),
        Case::Error => assert_eq!(outcome, &Outcome::Errored("boom".to_string())),
        Case::SelfCancel => assert_eq!(outcome, &Outcome::Canceled),
        Case::Panic => assert!(outcome.is_panicked(), "{outcome:?}"),
    }
}

/// A resource named `name` whose acquisition and release (with the exit
/// case) are logged.
fn logged(name: &'static str, log: &Log<String>) -> Resource<&'static str, E> {
    let (acquired, released) = (log.clone(), log.clone());
    Resource::make_case(
        acquired.record(format!("acquire {name}")).map_to(name),
        move |value, exit| released.record(format!("release {value} {exit:?}")),
    )
}

/// Starts `child`, waits for `started`, cancels it; produces its outcome.
fn cancel_when_started<A: Clone + Send + 'static>(
    child: IO<A, E>,
    started: Deferred<()>,
) -> IO<Outcome<A, E>, E> {
    child
        .start()
        .flat_map(move |h| started.get().product_r(h.cancel()).product_r(h.join()))
}

rt_test! {
    fn use_acquires_then_runs_the_program_then_releases_the_value() {
        let log = Log::new();
        let l = log.clone();
        let io = logged("a", &log).use_with(move |v| {
            assert_eq!(v, "a");
            l.record("use a".to_string()).map_to(1u32)
        });
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(log.events(), ["acquire a", "use a", "release a Succeeded"]);
    }

    fn building_a_resource_acquires_nothing() {
        let acquired = Counter::new();
        let resource = Resource::<(), E>::make(acquired.incr_io(), |()| IO::unit());
        assert_eq!(acquired.get(), 0);
        drop(resource);
        assert_eq!(acquired.get(), 0);
    }

    fn make_releases_exactly_once_whatever_the_outcome_of_the_use() {
        for case in CASES {
            let released = Counter::new();
            let r = released.clone();
            let io = Resource::<u32, E>::make(IO::pure(1), move |_| r.incr_io())
                .use_with(move |_| ending(case));
            assert_ended_as(case, &run(io));
            assert_eq!(released.get(), 1, "{case:?}");
        }
    }

    fn make_case_gives_the_release_the_exit_case_of_the_use() {
        for case in CASES {
            let log = Log::new();
            let io = logged("a", &log).use_with(move |_| ending(case));
            assert_ended_as(case, &run(io));
            assert_eq!(
                log.events(),
                ["acquire a".to_string(), format!("release a {:?}", exit_of(case))],
                "{case:?}"
            );
        }
    }

    fn flat_map_releases_in_reverse_order_of_acquisition_whatever_the_outcome() {
        for case in CASES {
            let log = Log::new();
            let (l2, l3) = (log.clone(), log.clone());
            let resource = logged("a", &log)
                .flat_map(move |_| logged("b", &l2))
                .flat_map(move |_| logged("c", &l3));
            assert_ended_as(case, &run(resource.use_with(move |_| ending(case))));
            let exit = exit_of(case);
            assert_eq!(
                log.events(),
                [
                    "acquire a".to_string(),
                    "acquire b".to_string(),
                    "acquire c".to_string(),
                    format!("release c {exit:?}"),
                    format!("release b {exit:?}"),
                    format!("release a {exit:?}"),
                ],
                "{case:?}"
            );
        }
    }

    fn flat_map_gives_the_next_resource_the_value_of_the_previous() {
        let resource = Resource::<u32, E>::pure(20)
            .flat_map(|a| Resource::eval(IO::delay(move || a + 1)));
        assert_eq!(run(resource.use_with(IO::pure)), Outcome::Succeeded(21));
    }

    fn when_a_later_acquisition_fails_the_earlier_resources_are_released_and_nothing_is_used() {
        let log = Log::new();
        let (l2, l3) = (log.clone(), log.clone());
        let used = Counter::new();
        let u = used.clone();
        let resource = logged("a", &log)
            .flat_map(move |_| logged("b", &l2))
            .flat_map(move |_| {
                Resource::<&'static str, E>::make(
                    l3.record("acquire c".to_string())
                        .product_r(IO::raise_error("c failed".to_string())),
                    |_| panic!("never acquired, never released"),
                )
            });
        let io = resource.use_with(move |_| u.incr_io().map_to(1u32));
        assert_eq!(run(io), Outcome::Errored("c failed".to_string()));
        assert_eq!(used.get(), 0);
        assert_eq!(
            log.events(),
            [
                "acquire a",
                "acquire b",
                "acquire c",
                "release b Errored",
                "release a Errored"
            ]
        );
    }

    fn map_transforms_the_value_and_the_release_still_gets_the_original() {
        let log = Log::new();
        let resource = logged("a", &log).map(|v| v.len() as u32 * 10);
        assert_eq!(run(resource.use_with(IO::pure)), Outcome::Succeeded(10));
        assert_eq!(log.events(), ["acquire a", "release a Succeeded"]);
    }

    fn eval_and_pure_give_a_value_without_release() {
        let ran = Counter::new();
        let r = ran.clone();
        let io = Resource::<u32, E>::eval(r.incr_io().map_to(3))
            .flat_map(|a| Resource::pure(a + 1))
            .use_with(IO::pure);
        assert_eq!(run(io), Outcome::Succeeded(4));
        assert_eq!(ran.get(), 1);
        let failing = Resource::<u32, E>::eval(IO::raise_error("eval failed".to_string()))
            .use_with(IO::pure);
        assert_eq!(run(failing), Outcome::Errored("eval failed".to_string()));
    }

    fn both_acquires_left_then_right_and_releases_right_then_left() {
        let log = Log::new();
        let io = logged("left", &log)
            .both(logged("right", &log))
            .use_with(|(l, r)| IO::pure(format!("{l}+{r}")));
        assert_eq!(run(io), Outcome::Succeeded("left+right".to_string()));
        assert_eq!(
            log.events(),
            ["acquire left", "acquire right", "release right Succeeded", "release left Succeeded"]
        );
    }

    fn both_releases_the_left_resource_when_the_right_acquisition_fails() {
        let log = Log::new();
        let failing = Resource::<&'static str, E>::make(
            IO::raise_error("right failed".to_string()),
            |_| panic!("never acquired, never released"),
        );
        let io = logged("left", &log).both(failing).use_with(|_| IO::pure(1u32));
        assert_eq!(run(io), Outcome::Errored("right failed".to_string()));
        assert_eq!(log.events(), ["acquire left", "release left Errored"]);
    }

    fn both_releases_each_resource_once_whatever_the_outcome() {
        for case in CASES {
            let log = Log::new();
            let io = logged("left", &log)
                .both(logged("right", &log))
                .use_with(move |_| ending(case));
            assert_ended_as(case, &run(io));
            let exit = exit_of(case);
            assert_eq!(
                log.events(),
                [
                    "acquire left".to_string(),
                    "acquire right".to_string(),
                    format!("release right {exit:?}"),
                    format!("release left {exit:?}"),
                ],
                "{case:?}"
            );
        }
    }

    fn allocated_gives_the_value_and_releases_only_when_asked() {
        let log = Log::new();
        let l = log.clone();
        let io: IO<(&'static str, Vec<String>), E> = logged("a", &log)
            .allocated()
            .flat_map(move |allocated| {
                let value = *allocated.value();
                let before = l.events();
                allocated.release().map_to((value, before))
            });
        assert_eq!(run(io), Outcome::Succeeded(("a", vec!["acquire a".to_string()])));
        assert_eq!(log.events(), ["acquire a", "release a Succeeded"]);
    }

    fn allocated_release_case_passes_the_exit_case_through_every_layer() {
        let log = Log::new();
        let l2 = log.clone();
        let io: IO<(), E> = logged("a", &log)
            .flat_map(move |_| logged("b", &l2))
            .allocated()
            .flat_map(|allocated| allocated.release_case(ExitCase::Errored));
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(
            log.events(),
            ["acquire a", "acquire b", "release b Errored", "release a Errored"]
        );
    }

    fn a_failing_release_does_not_stop_the_releases_after_it() {
        let log = Log::new();
        let (l2, l3) = (log.clone(), log.clone());
        let failing_b = move |_: &'static str| {
            let l = l2.clone();
            Resource::<&'static str, E>::make(l.record("acquire b".to_string()).map_to("b"), move |_| {
                l.record("release b".to_string())
                    .product_r(IO::raise_error("release b failed".to_string()))
            })
        };
        let resource = logged("a", &log)
            .flat_map(failing_b)
            .flat_map(move |_| logged("c", &l3));
        let io = resource.use_with(|_| IO::pure(1u32));
        assert_eq!(run(io), Outcome::Errored("release b failed".to_string()));
        assert_eq!(
            log.events(),
            [
                "acquire a",
                "acquire b",
                "acquire c",
                "release c Succeeded",
                "release b",
                "release a Succeeded"
            ]
        );
    }

    fn a_failing_release_after_a_failed_use_is_suppressed_and_the_use_error_stays() {
        let resource = Resource::<(), E>::make(IO::unit(), |()| {
            IO::raise_error("release failed".to_string())
        });
        let io = resource
            .use_with(|_| IO::<u32, E>::raise_error("use failed".to_string()))
            .start::<E>()
            .flat_map(|h| {
                h.join_void()
                    .map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
            });
        assert_eq!(
            run(io),
            Outcome::Succeeded((
                Outcome::Errored("use failed".to_string()),
                vec!["release failed".to_string()]
            ))
        );
    }

    fn canceling_the_use_releases_every_resource_once_in_reverse_order() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (l2, s) = (log.clone(), started.clone());
        let child = logged("a", &log)
            .flat_map(move |_| logged("b", &l2))
            .use_with(move |_| s.complete::<E>(()).product_r(IO::<u32, E>::never()));
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded(Outcome::Canceled)
        );
        assert_eq!(
            log.events(),
            ["acquire a", "acquire b", "release b Canceled", "release a Canceled"]
        );
    }

    fn acquisition_is_uncancelable_and_a_completed_acquisition_is_released() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (s, acq, rel, u) = (started.clone(), log.clone(), log.clone(), log.clone());
        let child = Resource::<(), E>::make_case(
            s.complete(())
                .product_r(IO::sleep(Duration::from_millis(20)))
                .product_r(acq.record("acquired".to_string())),
            move |(), exit| rel.record(format!("release {exit:?}")),
        )
        .use_with(move |_| u.record("use".to_string()).map_to(1u32));
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded(Outcome::Canceled)
        );
        assert_eq!(log.events(), ["acquired", "release Canceled"]);
    }

    fn the_release_runs_to_its_end_despite_a_pending_cancellation() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let (s, rel) = (started.clone(), log.clone());
        let child = Resource::<(), E>::make(IO::unit(), move |()| {
            IO::sleep(Duration::from_millis(20)).product_r(rel.record("release finished"))
        })
        .use_with(move |_| s.complete::<E>(()).product_r(IO::<u32, E>::never()));
        assert_eq!(
            run(cancel_when_started(child, started)),
            Outcome::Succeeded(Outcome::Canceled)
        );
        assert_eq!(log.events(), ["release finished"]);
    }

    fn make_full_acquisition_that_completes_is_released() {
        let log = Log::new();
        let (acq, rel) = (log.clone(), log.clone());
        let io = Resource::<u32, E>::make_full(
            move |poll| poll.apply(acq.record("acquired".to_string()).map_to(4)),
            move |v, exit| rel.record(format!("release {v} {exit:?}")),
        )
        .use_with(|v| IO::pure(v * 2));
        assert_eq!(run(io), Outcome::Succeeded(8));
        assert_eq!(log.events(), ["acquired", "release 4 Succeeded"]);
    }
}

/// A `make_full` resource whose acquisition waits forever (in its poll);
/// the fiber using it is canceled after a second of virtual time.
/// Produces the fiber's outcome and the log.
fn cancel_a_waiting_make_full_acquisition() -> (
    Result<Outcome<Outcome<u32, E>, E>, spindle_core::error::RunError>,
    Vec<String>,
) {
    let log = Log::new();
    let (acq, rel, u) = (log.clone(), log.clone(), log.clone());
    let child = Resource::<(), E>::make_full(
        move |poll| {
            poll.apply(IO::never())
                .on_cancel(acq.record("acquisition canceled".to_string()))
        },
        move |(), _| rel.record("release".to_string()),
    )
    .use_with(move |_| u.record("use".to_string()).map_to(1u32));
    let io = child.start().flat_map(|h| {
        IO::sleep(Duration::from_secs(1))
            .product_r(h.cancel())
            .product_r(h.join())
    });
    (TestControl::run(io), log.events())
}

#[test]
fn make_full_acquisition_can_be_canceled_through_its_poll_and_nothing_is_released() {
    let (outcome, log) = cancel_a_waiting_make_full_acquisition();
    assert_eq!(outcome, Ok(Outcome::Succeeded(Outcome::Canceled)));
    assert_eq!(log, ["acquisition canceled"]);
}
