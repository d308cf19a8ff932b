//! `Supervisor` and `JoinSet`: fibers scoped to a resource. Children still
//! running when the scope ends are canceled (or, awaiting, waited for), and
//! the release returns only once each child's finalizers have run, exactly
//! once; a child's failure is its own; a child started after the scope has
//! closed is refused: canceled before it runs (`supervise`, `spawn`), or an
//! error value (`try_supervise`, `try_spawn`).

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::error::SupervisorClosed;
use spindle_core::{CountDownLatch, Deferred, FiberHandle, IO, JoinSet, Outcome, Supervisor};
use std::time::Duration;

/// The tests' error type (it needs no conversion from `SupervisorClosed`:
/// `supervise` and `spawn` cannot fail).
#[derive(Debug, Clone, PartialEq)]
enum E {
    Boom(&'static str),
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn latch(n: u64) -> CountDownLatch {
    CountDownLatch::new(n).expect("a valid count")
}

/// A child that never ends on its own; once its finalizer is in place it
/// releases `ready`, and its cancellation counts on `canceled`.
fn hanging(ready: &CountDownLatch, canceled: &Counter) -> IO<u32, E> {
    ready
        .release()
        .product_r(IO::never())
        .on_cancel(canceled.incr_io())
}

rt_test! {
    // ----- Supervisor ------------------------------------------------------------

    fn supervisor_cancels_the_children_still_running_when_the_scope_ends_and_finalizes_each_once() {
        let (ready, canceled, log) = (latch(3), Counter::new(), Log::new());
        let (r, c, l) = (ready.clone(), canceled.clone(), log.clone());
        let io: IO<(), E> = Supervisor::scoped()
            .use_with(move |supervisor| {
                let s = supervisor.clone();
                IO::traverse(vec![0, 1, 2], move |_| s.supervise(hanging(&r, &c)))
                    .product_r(ready.wait())
                    .product_r(l.record("use ends".to_string()))
            })
            .product_r(log.record("after the scope".to_string()));
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(canceled.get(), 3);
        assert_eq!(log.events(), ["use ends", "after the scope"]);
    }

    fn supervisor_release_waits_until_the_childrens_finalizers_have_finished() {
        let (ready, finalized) = (latch(1), Counter::new());
        let (r, f) = (ready.clone(), finalized.clone());
        let seen = finalized.clone();
        let io: IO<usize, E> = Supervisor::scoped()
            .use_with(move |supervisor| {
                // A slow finalizer: the release must wait for it.
                let child = r.release().product_r(IO::<u32, E>::never()).on_cancel(
                    IO::sleep(ms(20)).product_r(f.incr_io()),
                );
                supervisor.supervise(child).product_r(ready.wait())
            })
            .product_r(IO::delay(move || seen.get()));
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(finalized.get(), 1);
    }

    fn supervisor_leaves_children_that_completed_alone_and_their_handles_join_them() {
        let io: IO<Outcome<u32, E>, E> = Supervisor::scoped().use_with(|supervisor| {
            supervisor.supervise(IO::sleep(ms(1)).map_to(5u32)).flat_map(|child| child.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(5)));
    }

    fn awaiting_supervisor_waits_for_its_children_to_complete_when_the_scope_succeeds() {
        let (completed, canceled) = (Counter::new(), Counter::new());
        let (done, c) = (completed.clone(), canceled.clone());
        let seen = completed.clone();
        let io: IO<usize, E> = Supervisor::scoped_awaiting()
            .use_with(move |supervisor| {
                let child = IO::<(), E>::sleep(ms(20))
                    .product_r(done.incr_io())
                    .on_cancel(c.incr_io());
                supervisor.supervise(child).void()
            })
            .product_r(IO::delay(move || seen.get()));
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(canceled.get(), 0);
    }

    fn awaiting_supervisor_cancels_its_children_when_the_scope_fails() {
        let (ready, canceled) = (latch(1), Counter::new());
        let (r, c) = (ready.clone(), canceled.clone());
        let io: IO<(), E> = Supervisor::scoped_awaiting().use_with(move |supervisor| {
            supervisor
                .supervise(hanging(&r, &c))
                .product_r(ready.wait())
                .product_r(IO::raise_error(E::Boom("use")))
        });
        assert_eq!(run(io), Outcome::Errored(E::Boom("use")));
        assert_eq!(canceled.get(), 1);
    }

    fn supervisor_cancels_its_children_when_the_scopes_owner_is_canceled() {
        let (ready, canceled) = (latch(2), Counter::new());
        let (r, c) = (ready.clone(), canceled.clone());
        let owner: IO<(), E> = Supervisor::scoped().use_with(move |supervisor| {
            let s = supervisor.clone();
            s.supervise(hanging(&r, &c))
                .product_r(supervisor.supervise(hanging(&r, &c)))
                .product_r(IO::never())
        });
        let c2 = canceled.clone();
        let io: IO<(Outcome<(), E>, usize), E> = owner.start().flat_map(move |h| {
            ready
                .wait()
                .product_r(h.cancel())
                // Both children have been finalized when the cancel returns.
                .product_r(IO::delay(move || c2.get()))
                .flat_map(move |seen| h.join().map(move |o| (o, seen)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 2)));
        assert_eq!(canceled.get(), 2);
    }

    fn a_child_that_fails_or_panics_touches_neither_the_scope_nor_its_siblings() {
        let (ready, canceled) = (latch(1), Counter::new());
        let (r, c) = (ready.clone(), canceled.clone());
        let io: IO<(Outcome<u32, E>, bool), E> = Supervisor::scoped().use_with(move |supervisor| {
            let s = supervisor.clone();
            let failing = IO::<u32, E>::raise_error(E::Boom("child"));
            let panicking = IO::<u32, E>::delay(|| panic!("child panics"));
            s.supervise(hanging(&r, &c))
                .product_r(ready.wait())
                .product_r(supervisor.supervise(panicking))
                .flat_map(move |p: FiberHandle<u32, E>| {
                    s.supervise(failing).flat_map(move |f| {
                        f.join().flat_map(move |failed| {
                            p.join().map(move |panicked| (failed, panicked.is_panicked()))
                        })
                    })
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Errored(E::Boom("child")), true)));
        // The sibling ran until the scope ended, then was canceled once.
        assert_eq!(canceled.get(), 1);
    }

    fn supervise_after_the_scope_has_closed_cancels_the_child_before_it_runs() {
        let ran = Counter::new();
        let (r1, r2) = (ran.clone(), ran.clone());
        let io: IO<(bool, Outcome<(), E>), E> = Supervisor::scoped()
            .use_with(IO::pure)
            .flat_map(move |escaped: Supervisor| {
                let e2 = escaped.clone();
                escaped
                    .try_supervise::<(), E, E>(r1.incr_io())
                    .flat_map(move |tried| {
                        e2.supervise(r2.incr_io())
                            .flat_map(|refused| refused.join())
                            .map(move |joined| (tried.err() == Some(SupervisorClosed), joined))
                    })
            });
        assert_eq!(run(io), Outcome::Succeeded((true, Outcome::Canceled)));
        assert_eq!(ran.get(), 0);
    }

    fn supervisor_forgets_the_children_that_have_completed() {
        let io: IO<usize, E> = Supervisor::scoped().use_with(|supervisor| {
            let s = supervisor.clone();
            let counted = supervisor.clone();
            IO::traverse((0..100).collect(), move |i: u32| {
                s.supervise(IO::<u32, E>::pure(i)).flat_map(|child| child.join())
            })
            .map(move |_| counted.children())
        });
        let recorded = run(io).succeeded().expect("the scope succeeds");
        assert!(recorded <= 16, "{recorded} children recorded");
    }

    // ----- JoinSet ---------------------------------------------------------------

    fn join_next_gives_outcomes_in_order_of_completion_then_none() {
        let gates: Vec<Deferred<()>> = (0..3).map(|_| Deferred::new()).collect();
        let io: IO<Vec<Option<u32>>, E> = JoinSet::<u32, E>::scoped().use_with(move |set| {
            let (spawner, joiner) = (set.clone(), set.clone());
            let g = gates.clone();
            IO::traverse(vec![0u32, 1, 2], move |i| {
                spawner.spawn::<E>(g[i as usize].get().map_to(i))
            })
            // Lets child `i` complete, then joins the next outcome; the
            // fourth join finds the set empty.
            .product_r(IO::traverse(vec![2usize, 0, 1, 3], move |i| {
                let open = match gates.get(i) {
                    Some(gate) => gate.complete(()).void(),
                    None => IO::unit(),
                };
                open.product_r(joiner.join_next())
            }))
            .map(|joined| joined.into_iter().map(|o| o.and_then(Outcome::succeeded)).collect())
        });
        assert_eq!(run(io), Outcome::Succeeded(vec![Some(2), Some(0), Some(1), None]));
    }

    fn join_set_cancels_the_children_still_running_when_its_scope_ends() {
        let (ready, canceled, log) = (latch(2), Counter::new(), Log::new());
        let (r, c, l) = (ready.clone(), canceled.clone(), log.clone());
        let io: IO<Option<Outcome<u32, E>>, E> = JoinSet::<u32, E>::scoped()
            .use_with(move |set| {
                let s = set.clone();
                set.spawn::<E>(hanging(&r, &c))
                    .product_r(set.spawn::<E>(hanging(&r, &c)))
                    .product_r(set.spawn::<E>(IO::pure(9)))
                    .product_r(ready.wait())
                    .product_r(s.join_next())
                    .flat_tap(move |_| l.record("use ends".to_string()))
            })
            .flat_tap({
                let log = log.clone();
                move |_| log.record("after the scope".to_string())
            });
        assert_eq!(run(io), Outcome::Succeeded(Some(Outcome::Succeeded(9))));
        assert_eq!(canceled.get(), 2);
        assert_eq!(log.events(), ["use ends", "after the scope"]);
    }

    fn join_next_gives_errors_cancellations_and_panics_as_outcomes() {
        let io: IO<Vec<&'static str>, E> = JoinSet::<u32, E>::scoped().use_with(|set| {
            let s = set.clone();
            set.spawn::<E>(IO::raise_error(E::Boom("child")))
                .product_r(set.spawn::<E>(IO::canceled().map_to(1)))
                .product_r(set.spawn::<E>(IO::delay(|| panic!("child panics"))))
                .product_r(set.spawn::<E>(IO::pure(4)))
                .product_r(IO::replicate(5, move || s.join_next()))
                .map(|outcomes| {
                    let mut kinds: Vec<&'static str> = outcomes
                        .into_iter()
                        .map(|o| match o {
                            None => "none",
                            Some(Outcome::Succeeded(_)) => "succeeded",
                            Some(Outcome::Errored(_)) => "errored",
                            Some(Outcome::Canceled) => "canceled",
                            Some(Outcome::Panicked(_)) => "panicked",
                        })
                        .collect();
                    // The last is `None`; the others in completion order.
                    let last = kinds.pop();
                    kinds.sort_unstable();
                    kinds.extend(last);
                    kinds
                })
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded(vec!["canceled", "errored", "panicked", "succeeded", "none"])
        );
    }

    fn join_set_cancels_its_children_when_its_owner_is_canceled_while_joining() {
        let (ready, canceled) = (latch(2), Counter::new());
        let (r, c) = (ready.clone(), canceled.clone());
        let owner: IO<Option<Outcome<u32, E>>, E> = JoinSet::<u32, E>::scoped().use_with(move |set| {
            let s = set.clone();
            set.spawn::<E>(hanging(&r, &c))
                .product_r(set.spawn::<E>(hanging(&r, &c)))
                .product_r(s.join_next())
        });
        let io: IO<Outcome<Option<Outcome<u32, E>>, E>, E> = owner.start().flat_map(move |h| {
            ready.wait().product_r(IO::sleep(ms(2))).product_r(h.cancel()).product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(canceled.get(), 2);
    }

    fn concurrent_join_next_calls_each_take_a_different_outcome() {
        let gate = Deferred::<()>::new();
        let io: IO<Vec<u32>, E> = JoinSet::<u32, E>::scoped().use_with(move |set| {
            let (spawner, a, b) = (set.clone(), set.clone(), set.clone());
            let g = gate.clone();
            IO::traverse(vec![1u32, 2], move |i| spawner.spawn::<E>(g.get().map_to(i)))
                // Both joiners wait before either child completes.
                .product_r(a.join_next().start())
                .flat_map(move |first| {
                    b.join_next().start().flat_map(move |second| {
                        IO::sleep(ms(2))
                            .product_r(gate.complete(()))
                            .product_r(first.join_with_never())
                            .flat_map(move |x| second.join_with_never().map(move |y| (x, y)))
                    })
                })
                .map(|(x, y)| {
                    let mut got: Vec<u32> =
                        [x, y].into_iter().flatten().filter_map(Outcome::succeeded).collect();
                    got.sort_unstable();
                    got
                })
        });
        assert_eq!(run(io), Outcome::Succeeded(vec![1, 2]));
    }

    fn join_set_spawn_after_its_scope_has_closed_refuses_the_child_and_runs_nothing() {
        let ran = Counter::new();
        let (r1, r2) = (ran.clone(), ran.clone());
        let io: IO<(bool, Option<Outcome<(), E>>, usize), E> = JoinSet::<(), E>::scoped()
            .use_with(IO::pure)
            .flat_map(move |escaped: JoinSet<(), E>| {
                let e2 = escaped.clone();
                escaped.try_spawn::<E>(r1.incr_io()).flat_map(move |tried| {
                    e2.spawn::<E>(r2.incr_io()).flat_map(move |_refused| {
                        // The refused child is not the set's: nothing to join.
                        e2.join_next()
                            .map(move |joined| (tried.is_err(), joined, e2.len()))
                    })
                })
            });
        assert_eq!(run(io), Outcome::Succeeded((true, None, 0)));
        assert_eq!(ran.get(), 0);
    }
}
