//! Fibers: `start`, the joins of `FiberHandle`, `cancel`, and the errors
//! finalizers suppressed (Cats Effect 3's `GenSpawn` semantics).

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{Deferred, FiberHandle, IO, IORuntime, Outcome, PanicMessage, UIO};
use spindle_exec_single::SingleThreaded;
use spindle_exec_single::testkit::TestControl;
use std::time::Duration;

type E = String;

fn boom() -> E {
    "boom".to_string()
}

/// A child that signals `started`, then waits forever; its cancellation
/// finalizers log `"on_cancel"` and then, after a real wait (so that
/// `cancel` has something to wait for), `"guarantee"`.
fn blocked_child(started: &Deferred<()>, log: &Log<&'static str>) -> IO<u32, E> {
    let guarantee_log = log.clone();
    started
        .complete(())
        .product_r(IO::never())
        .on_cancel(log.record("on_cancel"))
        .guarantee(
            IO::sleep(Duration::from_millis(10)).product_r(guarantee_log.record("guarantee")),
        )
}

/// A value that cannot be cloned (a socket, a file): a fiber that produces
/// one can still be joined, since `join` moves the outcome out.
struct NotClone(u32);

rt_test! {
    fn a_fiber_whose_value_is_not_clone_and_whose_error_is_an_io_error_is_joined_and_yields_its_value() {
        let io: IO<Outcome<NotClone, std::io::Error>, E> =
            IO::<NotClone, std::io::Error>::delay(|| NotClone(7)).start().flat_map(|h| h.join());
        assert!(matches!(run(io), Outcome::Succeeded(Outcome::Succeeded(NotClone(7)))));
    }

    fn a_fiber_failing_with_an_io_error_is_joined_and_yields_the_error() {
        let io: IO<Outcome<NotClone, std::io::Error>, E> =
            IO::<NotClone, std::io::Error>::raise_error(std::io::Error::other("disk on fire"))
                .start()
                .flat_map(|h| h.join());
        match run(io) {
            Outcome::Succeeded(Outcome::Errored(e)) => assert_eq!(e.to_string(), "disk on fire"),
            _ => panic!("the joiner gets the fiber's io::Error"),
        }
    }

    fn joining_after_cancel_yields_canceled() {
        let log = Log::new();
        let started = Deferred::new();
        let child = blocked_child(&started, &log);
        let io: IO<Outcome<u32, E>, E> = child
            .start()
            .flat_map(move |h| started.get().product_r(h.cancel()).product_r(h.join()));
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["on_cancel", "guarantee"]);
    }

    fn joining_a_canceled_fiber_whose_types_are_not_clone_yields_canceled() {
        let started = Deferred::<()>::new();
        let child: IO<NotClone, std::io::Error> = started
            .complete(())
            .product_r(IO::never());
        let io: IO<Outcome<NotClone, std::io::Error>, E> = child
            .start()
            .flat_map(move |h| started.get().product_r(h.cancel()).product_r(h.join()));
        assert!(matches!(run(io), Outcome::Succeeded(Outcome::Canceled)));
    }

    fn a_cancel_handle_cancels_while_the_owner_joins() {
        let log = Log::new();
        let started = Deferred::new();
        let child = blocked_child(&started, &log);
        let io: IO<Outcome<u32, E>, E> = child.start().flat_map(move |h| {
            let canceler = h.cancel_handle();
            started
                .get()
                .product_r(canceler.clone().cancel::<E>().start())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["on_cancel", "guarantee"]);
    }

    fn join_returns_the_value_of_a_fiber_that_succeeded() {
        let io: IO<Outcome<u32, E>, E> = IO::<u32, E>::pure(7).start().flat_map(|h| h.join());
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(7)));
    }

    fn join_returns_the_error_of_a_fiber_that_failed() {
        let io: IO<Outcome<u32, E>, E> =
            IO::<u32, E>::raise_error(boom()).start().flat_map(|h| h.join());
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Errored(boom())));
    }

    fn join_returns_canceled_for_a_fiber_that_canceled_itself() {
        let io: IO<Outcome<u32, E>, E> =
            IO::canceled().map_to(1u32).start().flat_map(|h| h.join());
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
    }

    fn join_returns_panicked_for_a_fiber_that_panicked_and_the_joiner_goes_on() {
        let io: IO<Outcome<u32, E>, E> = IO::<u32, E>::delay(|| panic!("child panicked"))
            .start()
            .flat_map(|h| h.join());
        assert_eq!(
            run(io),
            Outcome::Succeeded(Outcome::Panicked(PanicMessage::new("child panicked")))
        );
    }

    fn join_void_and_cancel_borrow_the_handle_and_the_join_after_them_gives_the_outcome() {
        let io: IO<Outcome<u32, E>, E> = IO::sleep(Duration::from_millis(1))
            .map_to(3u32)
            .start()
            .flat_map(|h| h.join_void().product_r(h.join_void()).product_r(h.join()));
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(3)));
    }

    fn joining_a_fiber_that_completed_long_ago_gives_its_outcome_at_once() {
        let io: IO<Outcome<u32, E>, E> = IO::<u32, E>::pure(9).start().flat_map(|h| {
            IO::sleep(Duration::from_millis(5)).product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(9)));
    }

    fn several_fibers_waiting_on_one_fiber_all_resume_and_its_owner_joins_its_outcome() {
        let gate = Deferred::<u32>::new();
        let child = gate.get();
        let io: IO<(Vec<Outcome<(), E>>, Outcome<u32, E>), E> = child.start().flat_map(move |target| {
            let waiters: Vec<IO<FiberHandle<(), E>, E>> =
                (0..5).map(|_| target.cancel_handle().join_void().start()).collect();
            IO::sequence(waiters).flat_map(move |handles| {
                gate.complete(42)
                    .product_r(IO::traverse(handles, |h| h.join()))
                    .flat_map(move |waited| target.join().map(move |joined| (waited, joined)))
            })
        });
        let (waited, joined) = run(io).succeeded().expect("the parent succeeds");
        assert_eq!(waited, vec![Outcome::Succeeded(()); 5]);
        assert_eq!(joined, Outcome::Succeeded(42));
    }

    fn join_void_waits_for_the_fiber_to_complete() {
        let done = Counter::new();
        let child = UIO::sleep(Duration::from_millis(5)).product_r(done.incr_io());
        let d = done.clone();
        let io: IO<usize, E> = child
            .start()
            .flat_map(|h| h.join_void())
            .flat_map(move |()| IO::delay(move || d.get()));
        assert_eq!(run(io), Outcome::Succeeded(1));
    }

    fn join_void_waits_for_a_canceled_fiber_too() {
        let log = Log::new();
        let started = Deferred::new();
        let child = blocked_child(&started, &log);
        let io: IO<(), E> = child.start().flat_map(move |h| {
            let canceler = h.cancel_handle();
            started
                .get()
                .product_r(canceler.cancel::<E>().start())
                .product_r(h.join_void())
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(log.events(), ["on_cancel", "guarantee"]);
    }

    fn join_with_never_produces_the_value_of_a_fiber_that_succeeded() {
        let io: IO<u32, E> = IO::<u32, E>::pure(5).start().flat_map(|h| h.join_with_never());
        assert_eq!(run(io), Outcome::Succeeded(5));
    }

    fn join_with_never_raises_the_error_of_a_fiber_that_failed() {
        let io: IO<u32, E> =
            IO::<u32, E>::raise_error(boom()).start().flat_map(|h| h.join_with_never());
        assert_eq!(run(io), Outcome::Errored(boom()));
    }

    fn join_with_never_panics_in_the_joiner_when_the_fiber_panicked() {
        let io: IO<u32, E> = IO::<u32, E>::delay(|| panic!("child panicked"))
            .start()
            .flat_map(|h| h.join_with_never());
        assert_eq!(run(io), Outcome::Panicked(PanicMessage::new("child panicked")));
    }

    fn join_with_never_on_a_canceled_fiber_never_completes() {
        let io: IO<u32, E> = IO::never()
            .start()
            .flat_map(|h| h.cancel().product_r(h.join_with_never()));
        assert!(try_run(io).is_err(), "the joiner must wait forever");
    }

    fn cancel_waits_until_the_targets_finalizers_have_run() {
        let log = Log::new();
        let started = Deferred::new();
        let child = blocked_child(&started, &log);
        let after = log.clone();
        let io: IO<Outcome<u32, E>, E> = child.start().flat_map(move |h| {
            started
                .get()
                .product_r(h.cancel())
                .product_r(after.record("cancel returned"))
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["on_cancel", "guarantee", "cancel returned"]);
    }

    fn canceling_twice_runs_the_finalizers_once() {
        let finalized = Counter::new();
        let started = Deferred::new();
        let child = started
            .complete(())
            .product_r(IO::never())
            .guarantee(finalized.incr_io());
        let io: IO<Outcome<u32, E>, E> = child.start().flat_map(move |h| {
            started
                .get()
                .product_r(h.cancel())
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(finalized.get(), 1);
    }

    fn two_fibers_canceling_one_fiber_both_wait_for_its_finalizers() {
        let log = Log::new();
        let started = Deferred::new();
        let child = blocked_child(&started, &log);
        let (l1, l2) = (log.clone(), log.clone());
        let io: IO<(), E> = child.start().flat_map(move |h| {
            let first = h.cancel::<E>().product_r(l1.record("first cancel returned"));
            let second = h.cancel::<E>().product_r(l2.record("second cancel returned"));
            started.get().product_r(first.start()).flat_map(move |f1| {
                second
                    .start()
                    .flat_map(move |f2| f1.join_void().product_r(f2.join_void()))
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        let events = log.events();
        assert_eq!(&events[..2], ["on_cancel", "guarantee"], "finalizers first, once: {events:?}");
        assert_eq!(events.len(), 4, "{events:?}");
        assert!(events.contains(&"first cancel returned"));
        assert!(events.contains(&"second cancel returned"));
    }

    fn canceling_a_completed_fiber_does_nothing_and_its_outcome_stays() {
        let log = Log::new();
        let l = log.clone();
        let child = IO::<u32, E>::pure(5)
            .on_cancel(log.record("on_cancel"))
            .guarantee_case(move |o| l.record(if o.is_succeeded() { "succeeded" } else { "other" }));
        let io: IO<Outcome<u32, E>, E> = child
            .start()
            .flat_map(|h| h.join_void().product_r(h.cancel()).product_r(h.join()));
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(5)));
        assert_eq!(log.events(), ["succeeded"]);
    }

    fn canceling_a_failed_fiber_keeps_its_error() {
        let io: IO<Outcome<u32, E>, E> = IO::<u32, E>::raise_error(boom()).start().flat_map(|h| {
            h.join_void()
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Errored(boom())));
    }

    fn cancel_is_uncancelable_so_a_canceler_canceled_mid_cancel_still_waits_for_the_target() {
        // `target` finalizes slowly; `canceler` cancels it and is itself
        // canceled while waiting in that cancel. The canceler's cancel runs
        // to its end (the target's finalizers have run), then the canceler
        // ends as canceled without running what follows its cancel.
        let log = Log::new();
        let finalizing = Deferred::<()>::new();
        let target_started = Deferred::<()>::new();
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let f = finalizing.clone();
        let target = target_started
            .complete(())
            .product_r(UIO::<()>::never())
            .on_cancel(
                f.complete(())
                    .product_r(IO::sleep(Duration::from_millis(20)))
                    .product_r(l1.record("target finalized")),
            );
        let io: IO<Outcome<(), E>, E> = target.start().flat_map(move |t| {
            let canceler = target_started
                .get()
                .product_r(t.cancel())
                .product_r(l2.record("canceler went on after cancel"));
            canceler.start().flat_map(move |c| {
                finalizing
                    .get()
                    .product_r(c.cancel())
                    .product_r(l3.record("canceler canceled"))
                    .product_r(c.join())
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["target finalized", "canceler canceled"]);
    }

    fn suppressed_errors_holds_a_finalizer_error_raised_during_cancellation() {
        let started = Deferred::new();
        let child = started
            .complete(())
            .product_r(IO::never())
            .guarantee(IO::raise_error("finalizer failed".to_string()));
        let io: IO<(Outcome<u32, E>, Vec<E>), E> = child.start().flat_map(move |h| {
            started.get().product_r(h.cancel()).product_r(h.join_void()).map(move |()| {
                (h.try_take_outcome().expect("joined"), h.suppressed_errors())
            })
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Canceled, vec!["finalizer failed".to_string()]))
        );
    }

    fn suppressed_errors_holds_a_finalizer_error_raised_after_a_failure_which_stays() {
        let child = IO::<u32, E>::raise_error("first".to_string())
            .guarantee(IO::raise_error("finalizer failed".to_string()));
        let io: IO<(Outcome<u32, E>, Vec<E>), E> = child.start().flat_map(|h| {
            h.join_void().map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((
                Outcome::Errored("first".to_string()),
                vec!["finalizer failed".to_string()]
            ))
        );
    }

    fn a_finalizer_error_suppressed_under_map_err_is_left_out_and_the_others_stay() {
        // The inner scope's errors are `usize`s; the fiber's are `String`s.
        let inner = IO::<u32, usize>::raise_error(7)
            .guarantee(IO::raise_error(8))
            .map_err(|n| format!("inner {n}"));
        let child = inner.guarantee(IO::raise_error("outer finalizer".to_string()));
        let io: IO<(Outcome<u32, E>, Vec<E>), E> = child.start().flat_map(|h| {
            h.join_void().map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((
                Outcome::Errored("inner 7".to_string()),
                vec!["outer finalizer".to_string()]
            ))
        );
    }

    fn a_main_fiber_whose_finalizer_error_was_suppressed_under_map_err_ends_with_its_error() {
        let inner = IO::<u32, usize>::raise_error(7)
            .guarantee(IO::raise_error(8))
            .map_err(|n| format!("inner {n}"));
        assert_eq!(run(inner), Outcome::Errored("inner 7".to_string()));
    }

    fn suppressed_errors_holds_a_finalizer_error_raised_after_a_panic() {
        let child = IO::<u32, E>::delay(|| panic!("child panicked"))
            .guarantee(IO::raise_error("finalizer failed".to_string()));
        let io: IO<(Outcome<u32, E>, Vec<E>), E> = child.start().flat_map(|h| {
            h.join_void().map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((
                Outcome::Panicked(PanicMessage::new("child panicked")),
                vec!["finalizer failed".to_string()]
            ))
        );
    }

    fn a_finalizer_error_after_a_success_is_the_outcome_and_nothing_is_suppressed() {
        let child =
            IO::<u32, E>::pure(1).guarantee(IO::raise_error("finalizer failed".to_string()));
        let io: IO<(Outcome<u32, E>, Vec<E>), E> = child.start().flat_map(|h| {
            h.join_void().map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Errored("finalizer failed".to_string()), vec![]))
        );
    }

    fn suppressed_errors_keeps_every_suppressed_error_in_the_order_the_finalizers_ran() {
        let child = IO::<u32, E>::raise_error("first".to_string())
            .guarantee(IO::raise_error("inner finalizer".to_string()))
            .guarantee(IO::unit())
            .guarantee(IO::raise_error("outer finalizer".to_string()));
        let io: IO<(Outcome<u32, E>, Vec<E>), E> = child.start().flat_map(|h| {
            h.join_void().map(move |()| (h.try_take_outcome().expect("joined"), h.suppressed_errors()))
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((
                Outcome::Errored("first".to_string()),
                vec!["inner finalizer".to_string(), "outer finalizer".to_string()]
            ))
        );
    }

    fn suppressed_errors_is_empty_while_the_fiber_runs_and_when_nothing_failed() {
        let gate = Deferred::<()>::new();
        let child = gate.get().map_to(1u32);
        let io: IO<(Vec<E>, Vec<E>), E> = child.start().flat_map(move |h| {
            let running = h.suppressed_errors();
            gate.complete(())
                .product_r(h.join_void())
                .map(move |()| (running, h.suppressed_errors()))
        });
        assert_eq!(run(io), Outcome::Succeeded((vec![], vec![])));
    }

    fn dropping_every_handle_does_not_cancel_the_fiber() {
        let done = Counter::new();
        let gate = Deferred::<()>::new();
        let child = gate.get().product_r(done.incr_io());
        let d = done.clone();
        let io: IO<usize, E> = child
            .start()
            .flat_map(|h: FiberHandle<(), E>| IO::delay(move || drop(h)))
            .product_r(gate.complete(()))
            .product_r(IO::sleep(Duration::from_millis(5)))
            .flat_map(move |_| IO::delay(move || d.get()));
        assert_eq!(run(io), Outcome::Succeeded(1));
    }
}

// ----- exec-single specific: deterministic scheduling and virtual time -----

#[test]
fn a_fiber_canceled_before_it_ever_ran_runs_none_of_its_steps() {
    // On the single-threaded executor a started fiber is only queued: the
    // parent's cancel reaches it before its first step.
    let steps = Counter::new();
    let child = steps.incr_io::<E>().product_r(steps.incr_io());
    let io: IO<Outcome<(), E>, E> = child.start().flat_map(|h| h.cancel().product_r(h.join()));
    assert_eq!(
        SingleThreaded::new()
            .expect("an executor")
            .block_on(io)
            .expect("block_on"),
        Outcome::Succeeded(Outcome::Canceled)
    );
    assert_eq!(steps.get(), 0);
}

#[test]
fn join_with_never_on_a_canceled_fiber_leaves_test_control_deadlocked() {
    let io: IO<u32, E> = IO::sleep(Duration::from_secs(60))
        .map_to(1u32)
        .start()
        .flat_map(|h| h.cancel().product_r(h.join_with_never()));
    let mut control = TestControl::execute(io);
    control.tick_all();
    assert_eq!(control.results(), None);
    assert!(control.is_deadlocked());
}

#[test]
fn cancel_waits_for_a_finalizer_that_sleeps_in_virtual_time() {
    let started = Deferred::<()>::new();
    let child = started
        .complete(())
        .product_r(UIO::<()>::never())
        .on_cancel(IO::sleep(Duration::from_secs(30)));
    let io: IO<Duration, E> = child.start().flat_map(move |h| {
        started
            .get()
            .product_r(h.cancel())
            .product_r(IO::monotonic())
    });
    assert_eq!(
        TestControl::run(io).expect("completes"),
        Outcome::Succeeded(Duration::from_secs(30))
    );
}
