//! Masking: `uncancelable` and its `Poll`, nested regions, and `canceled`
//! (self-cancellation), with Cats Effect 3's `MonadCancel` semantics.
//!
//! Most tests start a child that signals a `Deferred` once it has reached
//! the point of interest, cancel it from the parent, and read an ordered
//! log of what the child did.

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{Deferred, IO, Outcome, Poll};
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

    // A `Poll` belongs to the fiber and the region that made it (Cats
    // Effect: a poll unmasks only on its own fiber, at its own depth);
    // anywhere else it runs its program as it is.

    fn a_parent_poll_applied_inside_a_child_region_leaves_a_self_cancel_masked() {
        let log = Log::new();
        let (l1, l2) = (log.clone(), log.clone());
        let io: IO<Outcome<(), E>, E> = IO::uncancelable(move |parent_poll| {
            IO::uncancelable(move |_| {
                parent_poll
                    .apply(IO::canceled())
                    .product_r(l1.record("rest of the child's region"))
            })
            .product_r(l2.record("after the child's region"))
            .start()
            .flat_map(|child| child.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["rest of the child's region"]);
    }

    fn a_parent_poll_applied_inside_a_child_region_does_not_let_the_child_be_canceled_there() {
        let fin = Counter::new();
        let log = Log::new();
        let started = Deferred::new();
        let gate = Deferred::<()>::new();
        let (s, g, f, l1, l2) = (started.clone(), gate.clone(), fin.clone(), log.clone(), log.clone());
        let io: IO<Outcome<(), E>, E> = IO::uncancelable(move |parent_poll| {
            let child = IO::uncancelable(move |_| {
                parent_poll
                    .apply(s.complete::<E>(()).product_r(g.get::<E>()))
                    .on_cancel(f.incr_io())
                    .product_r(l1.record("end of the child's region"))
            })
            .product_r(l2.record("after the child's region"));
            child.start().flat_map(move |h| {
                started
                    .get()
                    .product_r(h.cancel_handle().cancel::<E>().start())
                    .flat_map(move |canceler| {
                        // The cancel waits for the region to end: give it
                        // time to (wrongly) interrupt the wait first.
                        pause()
                            .product_r(gate.complete(()))
                            .product_r(canceler.join_void())
                            .product_r(h.join())
                    })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(fin.get(), 0, "the on_cancel inside the masked region ran");
        assert_eq!(log.events(), ["end of the child's region"]);
    }

    fn a_poll_handed_to_another_fiber_does_not_unmask_that_fibers_region() {
        let fin = Counter::new();
        let log = Log::new();
        let polls = Deferred::<Poll>::new();
        let owner_done = Deferred::<()>::new();
        let started = Deferred::new();
        let gate = Deferred::<()>::new();
        let (p, od) = (polls.clone(), owner_done.clone());
        // The owner stays inside its region (so it is alive) until the end.
        let owner: IO<(), E> = IO::uncancelable(move |poll| {
            p.complete::<E>(poll).product_r(od.get())
        });
        let (s, g, f, l1, l2) = (started.clone(), gate.clone(), fin.clone(), log.clone(), log.clone());
        let victim: IO<(), E> = polls.get().flat_map(move |foreign| {
            IO::uncancelable(move |_| {
                foreign
                    .apply(s.complete::<E>(()).product_r(g.get::<E>()))
                    .on_cancel(f.incr_io())
                    .product_r(l1.record("end of the victim's region"))
            })
            .product_r(l2.record("after the victim's region"))
        });
        let io: IO<Outcome<(), E>, E> = owner.start().flat_map(move |o| {
            victim.start().flat_map(move |v| {
                started
                    .get()
                    .product_r(v.cancel_handle().cancel::<E>().start())
                    .flat_map(move |canceler| {
                        pause()
                            .product_r(gate.complete(()))
                            .product_r(canceler.join_void())
                            .product_r(v.join())
                            .flat_map(move |outcome| {
                                owner_done.complete(()).product_r(o.join_void()).map_to(outcome)
                            })
                    })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(fin.get(), 0, "the foreign poll unmasked the victim");
        assert_eq!(log.events(), ["end of the victim's region"]);
    }

    fn a_poll_whose_fiber_has_ended_does_nothing_in_a_later_fiber() {
        // The later fibers may well be allocated where the first one was:
        // a poll must not take them for its own.
        let log = Log::new();
        let l = log.clone();
        let io: IO<Vec<Outcome<(), E>>, E> = IO::uncancelable(IO::pure)
            .start()
            .flat_map(|h| h.join_with_never())
            .flat_map(move |stale: Poll| {
                let runs: Vec<IO<Outcome<(), E>, E>> = (0..8)
                    .map(|_| {
                        let l = l.clone();
                        IO::uncancelable(move |_| {
                            stale.apply(IO::canceled()).product_r(l.record("rest of region"))
                        })
                        .product_r(IO::unit())
                        .start()
                        .flat_map(|h| h.join())
                    })
                    .collect();
                IO::sequence(runs)
            });
        let outcomes = run(io);
        assert_eq!(outcomes, Outcome::Succeeded(vec![Outcome::Canceled; 8]));
        assert_eq!(log.events().len(), 8, "a stale poll unmasked a later fiber");
    }

    fn a_parent_poll_of_the_same_depth_does_not_unmask_a_childs_nested_region() {
        // The child is two regions deep, like the parent's inner poll: the
        // depths match, the fibers do not. Inside the parent's poll, the
        // child's own outer poll is at the wrong depth, and does nothing.
        let log = Log::new();
        let (l1, l2) = (log.clone(), log.clone());
        let io: IO<Outcome<(), E>, E> = IO::uncancelable(move |_| {
            IO::uncancelable(move |parent_inner| {
                IO::uncancelable(move |child_outer| {
                    IO::uncancelable(move |_| {
                        parent_inner
                            .apply(child_outer.apply(IO::canceled()))
                            .product_r(l1.record("rest of the child's inner region"))
                    })
                })
                .product_r(l2.record("after the child's regions"))
                .start()
                .flat_map(|child| child.join())
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["rest of the child's inner region"]);
    }

    fn an_outer_poll_applied_inside_an_inner_region_leaves_a_self_cancel_masked() {
        let log = Log::new();
        let (l1, l2) = (log.clone(), log.clone());
        let io: IO<(), E> = IO::uncancelable(move |outer| {
            IO::uncancelable(move |_inner| {
                outer.apply(IO::canceled()).product_r(l1.record("rest of the inner region"))
            })
            .product_r(l2.record("rest of the outer region"))
        })
        .product_r(log.record("after the regions"));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(log.events(), ["rest of the inner region", "rest of the outer region"]);
    }

    // A region that has ended is over: a cancellation requested inside it
    // is observed after it, where the next program would start, and an
    // `on_cancel` its result has already passed does not run (Cats
    // Effect's "not finalize after uncancelable with suppressed
    // cancelation"). Finalizers still on the stack run, once.

    fn the_on_cancel_of_a_region_that_ended_after_a_self_cancel_does_not_run() {
        let fin = Counter::new();
        let mapped = Counter::new();
        let continued = Counter::new();
        let (m, c) = (mapped.clone(), continued.clone());
        let io: IO<u32, E> = IO::uncancelable(|_| IO::canceled().product_r(IO::pure(42u32)))
            .on_cancel(fin.incr_io())
            .map(move |x| {
                m.incr();
                x + 1
            })
            .flat_map(move |x| {
                c.incr();
                IO::pure(x)
            });
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(fin.get(), 0, "the on_cancel the region's value had passed ran");
        assert_eq!(continued.get(), 0, "the program after the region ran");
        assert!(mapped.get() <= 1);
    }

    fn the_on_cancel_of_a_region_that_failed_after_a_self_cancel_does_not_run() {
        let fin = Counter::new();
        let handled = Counter::new();
        let h = handled.clone();
        let io: IO<u32, E> = IO::uncancelable(|_| {
            IO::canceled().product_r(IO::<u32, E>::raise_error("boom".to_string()))
        })
        .on_cancel(fin.incr_io())
        .map(|x| x + 1)
        .flat_map(IO::pure)
        .handle_error_with(move |_| {
            h.incr();
            IO::pure(0)
        })
        .flat_map(IO::pure);
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(fin.get(), 0, "the on_cancel the region's error had passed ran");
        assert_eq!(handled.get(), 0, "the handler after the region ran");
    }

    fn finalizers_outside_a_region_that_ended_after_a_self_cancel_run_once() {
        let fin = Counter::new();
        let released = Log::new();
        let guaranteed = Log::new();
        let outer_on_cancel = Counter::new();
        let (r, g) = (released.clone(), guaranteed.clone());
        let inner: IO<u32, E> = IO::uncancelable(|_| IO::canceled().product_r(IO::pure(42u32)))
            .on_cancel(fin.incr_io())
            .map(|x| x + 1)
            .flat_map(IO::pure);
        let io: IO<u32, E> = IO::bracket_case(IO::unit(), move |_| inner, move |(), o: Outcome<u32, E>| {
            r.record(if o.is_canceled() { "canceled" } else { "not canceled" })
        })
        .on_cancel(outer_on_cancel.incr_io())
        .guarantee_case(move |o: Outcome<u32, E>| {
            g.record(if o.is_canceled() { "canceled" } else { "not canceled" })
        });
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(fin.get(), 0, "the on_cancel the region's value had passed ran");
        assert_eq!(released.events(), ["canceled"]);
        assert_eq!(outer_on_cancel.get(), 1);
        assert_eq!(guaranteed.events(), ["canceled"]);
    }

    fn finalizers_outside_a_region_that_failed_after_a_self_cancel_run_once() {
        // The error passes the region's on_cancel and the bracket's end
        // (whose release sees it), and the cancellation is observed where
        // the handler would start: the finalizers around that run, once.
        let fin = Counter::new();
        let released = Log::new();
        let guaranteed = Log::new();
        let outer_on_cancel = Counter::new();
        let handled = Counter::new();
        let (r, g, h) = (released.clone(), guaranteed.clone(), handled.clone());
        let inner: IO<u32, E> = IO::uncancelable(|_| {
            IO::canceled().product_r(IO::<u32, E>::raise_error("boom".to_string()))
        })
        .on_cancel(fin.incr_io())
        .map(|x| x + 1)
        .flat_map(IO::pure);
        let io: IO<u32, E> = IO::bracket_case(IO::unit(), move |_| inner, move |(), o: Outcome<u32, E>| {
            r.record(if o.is_errored() { "errored" } else { "not errored" })
        })
        .handle_error_with(move |e| {
            h.incr();
            IO::raise_error(e)
        })
        .flat_map(IO::pure)
        .on_cancel(outer_on_cancel.incr_io())
        .guarantee_case(move |o: Outcome<u32, E>| {
            g.record(if o.is_canceled() { "canceled" } else { "not canceled" })
        });
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(fin.get(), 0, "the on_cancel the region's error had passed ran");
        assert_eq!(handled.get(), 0, "the handler after the region ran");
        assert_eq!(released.events(), ["errored"]);
        assert_eq!(outer_on_cancel.get(), 1);
        assert_eq!(guaranteed.events(), ["canceled"]);
    }
}
