//! Masking: `uncancelable` and its `Poll`, nested regions, and `canceled`
//! (self-cancellation), with Cats Effect 3's `MonadCancel` semantics.
//!
//! Most tests start a child that signals a `Deferred` once it has reached
//! the point of interest, cancel it from the parent, and read an ordered
//! log of what the child did.

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{Deferred, IO, Outcome};
use std::time::Duration;

type E = String;

/// A short real wait: long enough that the parent's cancel arrives while
/// the child waits in it.
fn pause() -> IO<(), E> {
    IO::sleep(Duration::from_millis(20))
}

/// Starts `child`, waits for `started`, cancels the child, and produces its
/// outcome once the cancel has returned.
fn cancel_when_started(child: IO<(), E>, started: Deferred<()>) -> IO<Outcome<(), E>, E> {
    child
        .start()
        .flat_map(move |h| started.get().product_r(h.cancel()).product_r(h.join()))
}

rt_test! {
    fn an_uncancelable_region_runs_to_its_end_when_canceled_inside_and_what_follows_does_not_run() {
        let log = Log::new();
        let started = Deferred::new();
        let (s, l) = (started.clone(), log.clone());
        let child = IO::uncancelable(move |_| {
            s.complete(())
                .product_r(pause())
                .product_r(l.record("end of region"))
        })
        .product_r(log.record("after region"));
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["end of region"]);
    }

    fn poll_makes_its_program_cancelable_inside_an_uncancelable_region() {
        let log = Log::new();
        let started = Deferred::new();
        let (s, l1, l2, l3) = (started.clone(), log.clone(), log.clone(), log.clone());
        let child = IO::uncancelable(move |poll| {
            l1.record("before poll")
                .product_r(
                    poll.apply(s.complete::<E>(()).product_r(IO::<(), E>::never()))
                        .on_cancel(l2.record("canceled in poll")),
                )
                .product_r(l3.record("after poll"))
        });
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["before poll", "canceled in poll"]);
    }

    fn poll_changes_nothing_when_no_cancellation_was_requested() {
        let io: IO<u32, E> = IO::uncancelable(|poll| poll.apply(IO::pure(3))).map(|x| x + 1);
        assert_eq!(run(io), Outcome::Succeeded(4));
        let failing: IO<u32, E> = IO::uncancelable(|poll| poll.apply(IO::raise_error("e".into())));
        assert_eq!(run(failing), Outcome::Errored("e".to_string()));
    }

    fn uncancelable_changes_nothing_for_a_program_that_is_not_canceled() {
        let io: IO<u32, E> = IO::uncancelable(|_| IO::pure(1).map(|x| x + 1));
        assert_eq!(run(io), Outcome::Succeeded(2));
        let failing: IO<u32, E> = IO::uncancelable(|_| IO::raise_error("e".into()));
        assert_eq!(run(failing), Outcome::Errored("e".to_string()));
    }

    fn a_cancellation_requested_while_masked_is_observed_at_the_next_poll() {
        let log = Log::new();
        let started = Deferred::new();
        let (s, l1, l2, l3) = (started.clone(), log.clone(), log.clone(), log.clone());
        let child = IO::uncancelable(move |poll| {
            s.complete(())
                .product_r(pause())
                .product_r(l1.record("masked work done"))
                .product_r(poll.apply(l2.record("inside poll")))
                .product_r(l3.record("after poll"))
        });
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["masked work done"]);
    }

    fn a_masked_wait_is_not_interrupted_and_its_value_arrives_before_cancellation_is_observed() {
        let log = Log::new();
        let started = Deferred::<()>::new();
        let gate = Deferred::<u32>::new();
        let (s, g, l) = (started.clone(), gate.clone(), log.clone());
        let child = IO::uncancelable(move |_| {
            s.complete(())
                .product_r(g.get())
                .flat_map(move |v| l.record(format!("got {v}")))
        })
        .product_r(log.record("after region".to_string()));
        let io: IO<Outcome<(), E>, E> = child.start().flat_map(move |h| {
            let canceler = h.cancel_handle();
            started
                .get()
                .product_r(canceler.cancel::<E>().start())
                .flat_map(move |c| {
                    IO::sleep(Duration::from_millis(10))
                        .product_r(gate.complete(7))
                        .product_r(c.join_void())
                        .product_r(h.join())
                })
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["got 7"]);
    }

    fn an_inner_poll_does_not_unmask_the_outer_region() {
        let log = Log::new();
        let started = Deferred::new();
        let (s, l1, l2) = (started.clone(), log.clone(), log.clone());
        let child = IO::uncancelable(move |_outer| {
            IO::uncancelable(move |inner| {
                inner.apply(
                    s.complete(())
                        .product_r(pause())
                        .product_r(l1.record("inner poll body done")),
                )
            })
            .product_r(l2.record("after inner region"))
        })
        .product_r(log.record("after outer region"));
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["inner poll body done", "after inner region"]);
    }

    fn an_outer_poll_used_inside_an_inner_region_does_nothing() {
        let log = Log::new();
        let started = Deferred::new();
        let (s, l1, l2) = (started.clone(), log.clone(), log.clone());
        let child = IO::uncancelable(move |outer| {
            IO::uncancelable(move |_inner| {
                outer.apply(
                    s.complete(())
                        .product_r(pause())
                        .product_r(l1.record("outer poll body done")),
                )
            })
            .product_r(l2.record("after inner region"))
        })
        .product_r(log.record("after outer region"));
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["outer poll body done", "after inner region"]);
    }

    fn the_outer_poll_unmasks_again_once_the_inner_region_has_ended() {
        let log = Log::new();
        let started = Deferred::new();
        let (s, l1, l2) = (started.clone(), log.clone(), log.clone());
        let child = IO::uncancelable(move |outer| {
            IO::uncancelable(move |_inner| s.complete(()).product_r(pause()))
                .product_r(l1.record("after inner region"))
                .product_r(outer.apply(l2.record("in outer poll")))
        });
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["after inner region"]);
    }

    fn an_inner_poll_inside_an_outer_poll_is_cancelable() {
        let fin = Counter::new();
        let started = Deferred::new();
        let (s, f) = (started.clone(), fin.clone());
        let child = IO::uncancelable(move |outer| {
            outer.apply(IO::uncancelable(move |inner| {
                inner.apply(s.complete(()).product_r(IO::never()).on_cancel(f.incr_io()))
            }))
        });
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(fin.get(), 1);
    }

    fn canceled_inside_uncancelable_is_observed_at_the_region_end() {
        let log = Log::new();
        let l = log.clone();
        let io: IO<(), E> = IO::uncancelable(move |_| {
            IO::canceled().product_r(l.record("rest of region"))
        })
        .product_r(log.record("after region"));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["rest of region"]);
    }

    fn canceled_inside_uncancelable_is_observed_at_the_next_poll() {
        let log = Log::new();
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let io: IO<(), E> = IO::uncancelable(move |poll| {
            IO::canceled()
                .product_r(l1.record("a"))
                .product_r(poll.apply(l2.record("b")))
                .product_r(l3.record("c"))
        });
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["a"]);
    }

    fn canceled_outside_uncancelable_stops_what_follows() {
        let log = Log::new();
        let io: IO<(), E> = log
            .record("before")
            .product_r(IO::canceled())
            .product_r(log.record("after"));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["before"]);
    }

    fn canceled_does_not_run_error_handlers() {
        let handled = Counter::new();
        let h = handled.clone();
        let io: IO<u32, E> = IO::canceled()
            .map_to(1u32)
            .handle_error_with(move |_| h.incr_io().map_to(0));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(handled.get(), 0);
    }

    fn canceled_runs_the_finalizers_of_the_enclosing_program_innermost_first() {
        let log = Log::new();
        let l = log.clone();
        let io: IO<(), E> = IO::canceled()
            .product_r(log.record("after"))
            .on_cancel(log.record("on_cancel"))
            .guarantee_case(move |o| {
                l.record(if o.is_canceled() { "guarantee: canceled" } else { "guarantee: other" })
            });
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["on_cancel", "guarantee: canceled"]);
    }

    fn on_cancel_inside_a_region_whose_cancellation_is_observed_later_does_not_run() {
        // Cats Effect's law: uncancelable eliminates on_cancel. The request
        // is observed where the next program starts, after the region.
        let log = Log::new();
        let started = Deferred::new();
        let (s, l) = (started.clone(), log.clone());
        let child = IO::uncancelable(move |_| {
            s.complete(())
                .product_r(pause())
                .on_cancel(l.record("inner on_cancel"))
        })
        .product_r(log.record("after the region"))
        .on_cancel(log.record("outer on_cancel"));
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["outer on_cancel"]);
    }

    fn a_fiber_canceled_in_its_last_region_completes_with_the_regions_result() {
        // Cats Effect 3.5+: nothing is left to start after the region, so
        // the request is never observed and what the region produced (an
        // acquired permit, a dequeued element) is not lost.
        let log = Log::new();
        let started = Deferred::new();
        let (s, l) = (started.clone(), log.clone());
        let child = IO::uncancelable(move |_| s.complete(()).product_r(pause()))
            .on_cancel(l.record("outer on_cancel"));
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Succeeded(())));
        assert!(log.events().is_empty(), "{:?}", log.events());
    }

    fn a_self_cancel_inside_a_child_region_does_not_cancel_the_parent() {
        let log = Log::new();
        let l = log.clone();
        let io: IO<(Outcome<(), E>, u32), E> = IO::uncancelable(|_| IO::canceled())
            .product_r(l.record("after the region"))
            .start()
            .flat_map(|h| h.join())
            .map(|o| (o, 5));
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 5)));
        assert!(log.events().is_empty(), "{:?}", log.events());
    }

    fn finalizers_run_masked_so_a_pending_cancellation_does_not_interrupt_them() {
        let log = Log::new();
        let started = Deferred::new();
        let child = started
            .complete(())
            .product_r(IO::never())
            .on_cancel(pause().product_r(log.record("finalizer finished")));
        assert_eq!(run(cancel_when_started(child, started)), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["finalizer finished"]);
    }
}
