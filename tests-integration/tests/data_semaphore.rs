//! `Semaphore`: waiters woken in FIFO order, free permits taken by the
//! fiber that runs first; `with_permit` releases whatever the outcome;
//! cancellation while waiting gives no permit away; under storms of short
//! timeouts and cancellation the fibers that run keep getting permits.

mod common;

use common::{Counter, Log, TestRuntime, eventually, rt_test, storm, yield_after_every_step};
use spindle_core::error::{InvalidPermits, PermitOverflow};
use spindle_core::{Deferred, IO, IORuntime, Outcome, Semaphore, UIO};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type E = String;

/// [`common::after_steps`] for this file's error type.
fn after_steps(steps: usize, io: IO<(), E>) -> IO<(), E> {
    common::after_steps(steps, io)
}

/// [`common::cancel_after`] for this file's error type.
fn cancel_after(steps: usize, holder: IO<(), E>) -> IO<Outcome<(), E>, E> {
    common::cancel_after(steps, holder)
}

fn semaphore(permits: u64) -> Semaphore {
    Semaphore::new(permits).expect("a valid permit count")
}

rt_test! {
    fn acquire_n_takes_all_its_permits_at_once_or_waits_for_them_all() {
        let sem = semaphore(3);
        let (s1, s2, s3, counted) = (sem.clone(), sem.clone(), sem.clone(), sem.clone());
        // 2 of 3 held: a wait for 2 takes none of the one free permit (all
        // or nothing) and waits; the release of 2 lets it take 2 at once.
        let io: IO<(u64, u64, Outcome<(), E>), E> = s1.acquire_n(2).flat_map(move |()| {
            s2.acquire_n(2).start().flat_map(move |h| {
                eventually(move || counted.waiting() == 1).flat_map(move |()| {
                    let while_waiting = s3.available();
                    s3.release_n(2).flat_map(move |released| {
                        assert_eq!(released, Ok(()));
                        h.join().map(move |o| (while_waiting, s3.available(), o))
                    })
                })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((1, 1, Outcome::Succeeded(()))));
    }

    fn an_acquire_n_waiting_for_more_than_are_free_leaves_them_free_and_takes_none_when_canceled() {
        let sem = semaphore(2);
        let (s1, s2, counted) = (sem.clone(), sem.clone(), sem.clone());
        // One permit held; a wait for 2 leaves the other free (any fiber
        // may take it meanwhile), then is canceled.
        let io: IO<(u64, Outcome<(), E>, u64), E> = s1.acquire().flat_map(move |()| {
            s2.acquire_n(2).start().flat_map(move |h| {
                let waiting = counted.clone();
                eventually(move || waiting.waiting() == 1).flat_map(move |()| {
                    let free = counted.available();
                    h.cancel().product_r(h.join()).map(move |o| (free, o, counted.available()))
                })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((1, Outcome::Canceled, 1)));
        assert_eq!(sem.available(), 1, "the held permit is still held");
    }

    fn a_waiter_for_many_permits_is_not_overtaken_by_a_later_waiter_for_one() {
        let sem = semaphore(2);
        let log = Log::<&str>::new();
        let (s1, s2, s3, s4, counted) = (sem.clone(), sem.clone(), sem.clone(), sem.clone(), sem.clone());
        let (l1, l2, events) = (log.clone(), log.clone(), log.clone());
        let io: IO<Vec<&str>, E> = s1.acquire_n(2).flat_map(move |()| {
            s2.acquire_n::<E>(2).product_r(l1.record("two")).start().flat_map(move |big| {
                let waiting = counted.clone();
                eventually(move || waiting.waiting() == 1)
                    .product_r(s3.acquire::<E>().product_r(l2.record("one")).start())
                    .flat_map(move |small| {
                        eventually(move || counted.waiting() == 2)
                            // One permit back: the first waiter (for two)
                            // keeps it; the later waiter for one gets none.
                            .product_r(s4.release())
                            .product_r(IO::cede())
                            .product_r(IO::cede())
                            .flat_map(move |_| {
                                let so_far = events.events();
                                s4.release_n(3).flat_map(move |_| {
                                    big.join_void().product_r(small.join_void()).map(move |()| so_far)
                                })
                            })
                    })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(Vec::<&str>::new()));
        let mut all = log.events();
        all.sort_unstable();
        assert_eq!(all, ["one", "two"]);
    }

    fn acquire_n_of_zero_takes_nothing_and_never_waits() {
        let sem = semaphore(1);
        let s1 = sem.clone();
        let io: IO<u64, E> = sem.acquire().product_r(s1.acquire_n(0)).map(move |()| s1.available());
        assert_eq!(run(io), Outcome::Succeeded(0));
    }

    fn try_acquire_takes_a_free_permit_and_is_false_without_waiting_when_none_is_free() {
        let sem = semaphore(1);
        let s1 = sem.clone();
        let io: IO<(bool, bool), E> = sem.try_acquire().flat_map(move |first| s1.try_acquire().map(move |second| (first, second)));
        assert_eq!(run(io), Outcome::Succeeded((true, false)));
        assert_eq!(sem.available(), 0);
    }

    fn try_acquire_n_is_all_or_nothing() {
        let sem = semaphore(3);
        let (s1, s2) = (sem.clone(), sem.clone());
        let io: IO<(bool, u64, bool), E> = sem.try_acquire_n(4).flat_map(move |four| {
            let after = s1.available();
            s2.try_acquire_n(3).map(move |three| (four, after, three))
        });
        assert_eq!(run(io), Outcome::Succeeded((false, 3, true)));
        assert_eq!(sem.available(), 0);
        assert_eq!(run(sem.try_acquire_n::<E>(u64::MAX)), Outcome::Succeeded(false));
    }

    fn permit_is_a_resource_that_holds_one_permit_for_its_scope_whatever_the_outcome() {
        let sem = semaphore(2);
        let (inside, failing) = (sem.clone(), sem.clone());
        let io: IO<u64, E> = sem.permit().use_with(move |()| IO::pure(inside.available()));
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(sem.available(), 2);
        let failed: IO<u64, E> = failing.permit().use_with(|()| IO::raise_error("boom".to_string()));
        assert_eq!(run(failed), Outcome::Errored("boom".to_string()));
        assert_eq!(sem.available(), 2);
    }

    fn a_permit_resource_waits_cancelably_and_gives_nothing_away_when_canceled() {
        let sem = semaphore(1);
        let (holder, waiter, counted) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<(Outcome<(), E>, u64), E> = holder.acquire().flat_map(move |()| {
            waiter.permit::<E>().use_with(|()| IO::unit()).start().flat_map(move |h| {
                let waiting = counted.clone();
                eventually(move || waiting.waiting() == 1)
                    .product_r(h.cancel())
                    .product_r(h.join())
                    .flat_map(move |o| holder.release().map(move |_| (o, counted.available())))
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 1)));
    }

    fn a_semaphore_of_more_permits_than_it_can_count_is_an_error_not_a_silent_clamp() {
        assert!(Semaphore::new(u64::MAX).is_err());
        assert_eq!(
            Semaphore::new(Semaphore::MAX_PERMITS + 1).err(),
            Some(InvalidPermits::TooMany { requested: Semaphore::MAX_PERMITS + 1, max: Semaphore::MAX_PERMITS })
        );
        let sem = semaphore(Semaphore::MAX_PERMITS);
        assert_eq!(sem.available(), Semaphore::MAX_PERMITS);
    }

    fn a_release_past_the_largest_count_is_a_permit_overflow_value_and_changes_nothing() {
        let max = Semaphore::MAX_PERMITS;
        let sem = semaphore(max);
        let (s1, s2, s3) = (sem.clone(), sem.clone(), sem.clone());
        type Released = Result<(), PermitOverflow>;
        let io: IO<(Released, Released, u64), E> =
            s1.acquire().flat_map(move |()| {
                s2.release().flat_map(move |first| {
                    s3.release().map(move |second| (first, second, s3.available()))
                })
            });
        let overflow = PermitOverflow { released: 1, available: max, max };
        assert_eq!(run(io), Outcome::Succeeded((Ok(()), Err(overflow), max)));
        let many = sem.release_n::<E>(u64::MAX);
        assert!(matches!(run(many), Outcome::Succeeded(Err(PermitOverflow { .. }))));
        assert_eq!(sem.available(), max);
    }

    fn a_semaphore_of_zero_permits_is_invalid_permits() {
        assert_eq!(Semaphore::new(0).err(), Some(InvalidPermits::Zero));
        assert_eq!(semaphore(3).available(), 3);
    }

    fn acquire_takes_a_permit_and_release_returns_it() {
        let sem = semaphore(2);
        let (s1, s2, s3) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<(u64, u64), E> = sem.acquire().product_r(s1.acquire()).flat_map(move |()| {
            let held = s2.available();
            s3.release().map(move |released| { assert_eq!(released, Ok(())); (held, s3.available()) })
        });
        assert_eq!(run(io), Outcome::Succeeded((0, 1)));
        assert_eq!(sem.available(), 1);
    }

    fn release_without_a_waiter_adds_a_permit() {
        let sem = semaphore(1);
        assert_eq!(run(sem.release::<E>()), Outcome::Succeeded(Ok(())));
        assert_eq!(sem.available(), 2);
    }

    fn acquire_waits_while_no_permit_is_available_and_resumes_on_release() {
        let sem = semaphore(1);
        let acquired = Counter::new();
        let (waiter_sem, counted, releaser) = (sem.clone(), sem.clone(), sem.clone());
        let a = acquired.clone();
        let waiter = waiter_sem.acquire().product_r(a.incr_io());
        let io: IO<(usize, Outcome<(), E>), E> = sem.acquire().product_r(waiter.start()).flat_map(move |h| {
            eventually(move || counted.waiting() == 1)
                .map(move |()| acquired.get())
                .flat_map(move |before| releaser.release().void().product_r(h.join()).map(move |o| (before, o)))
        });
        assert_eq!(run(io), Outcome::Succeeded((0, Outcome::Succeeded(()))));
        assert_eq!(sem.available(), 0, "the waiter holds the released permit");
        assert_eq!(sem.waiting(), 0);
    }

    fn waiters_are_served_in_fifo_order_when_nobody_else_acquires() {
        // Waiters are woken in arrival order; with no other fiber acquiring
        // (one that found the permit free would take it first), each woken
        // waiter takes the permit.
        let sem = semaphore(1);
        let log = Log::new();
        let waiter = |i: u32| sem.acquire::<E>().product_r(log.record(i)).product_r(sem.release().void());
        let (counted, releaser) = (sem.clone(), sem.clone());
        let starts = vec![waiter(1).start(), waiter(2).start(), waiter(3).start()];
        let io: IO<(), E> = sem.acquire().product_r(IO::cede()).flat_map(move |()| {
            // Start the waiters one after the other, each queued before the next.
            // The k-th waiter is queued once k fibers wait (nobody leaves the
            // queue before the release; reading the count after the start
            // would race with the waiter on a multi-threaded executor).
            IO::traverse(starts.into_iter().zip(1usize..).collect(), move |(start, n)| {
                let counted = counted.clone();
                start.flat_map(move |h| eventually(move || counted.waiting() >= n).map_to(h))
            })
            .flat_map(move |handles| {
                releaser
                    .release()
                    .product_r(IO::traverse(handles, |h| h.join_void()))
                    .void()
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(log.events(), [1, 2, 3]);
        assert_eq!(sem.available(), 1);
    }

    fn with_permit_holds_a_permit_while_its_program_runs() {
        let sem = semaphore(2);
        let inside = sem.clone();
        let io: IO<u64, E> = sem.with_permit(IO::delay(move || inside.available()));
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(sem.available(), 2);
    }

    fn with_permit_releases_on_success_error_cancellation_and_panic() {
        let sem = semaphore(1);
        assert_eq!(run(sem.with_permit(IO::<u32, E>::pure(1))), Outcome::Succeeded(1));
        assert_eq!(sem.available(), 1, "success");
        assert_eq!(
            run(sem.with_permit(IO::<u32, E>::raise_error("boom".to_string()))),
            Outcome::Errored("boom".to_string())
        );
        assert_eq!(sem.available(), 1, "error");
        assert_eq!(run(sem.with_permit(UIO::canceled())), Outcome::Canceled);
        assert_eq!(sem.available(), 1, "self-cancel");
        assert!(run(sem.with_permit(IO::<u32, E>::delay(|| panic!("bad")))).is_panicked());
        assert_eq!(sem.available(), 1, "panic");

        let started = Deferred::<()>::new();
        let s = started.clone();
        let holder = sem.with_permit(s.complete(()).product_r(IO::never()));
        let io: IO<Outcome<(), E>, E> = holder.start().flat_map(move |h| {
            started.get().product_r(h.cancel()).product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(sem.available(), 1, "canceled by another fiber");
    }

    fn with_permit_bounds_how_many_programs_run_at_once() {
        let sem = semaphore(3);
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (r, p) = (running.clone(), peak.clone());
        let io = IO::<(), E>::par_traverse((0..12).collect(), move |_: u32| {
            let (r1, r2, p) = (r.clone(), r.clone(), p.clone());
            sem.with_permit(
                IO::delay(move || {
                    let now = r1.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                })
                .product_r(IO::sleep(Duration::from_millis(2)))
                .product_r(IO::delay(move || {
                    r2.fetch_sub(1, Ordering::SeqCst);
                })),
            )
        });
        assert!(run(io).is_succeeded());
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }

    fn a_waiter_canceled_while_queued_leaves_the_queue_and_takes_no_permit() {
        let sem = semaphore(1);
        let (w, counted, after) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<(Outcome<(), E>, usize), E> = sem.acquire().product_r(w.acquire().start()).flat_map(move |h| {
            eventually(move || counted.waiting() == 1)
                .product_r(h.cancel())
                .product_r(h.join())
                .map(move |o| (o, after.waiting()))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 0)));
        assert_eq!(sem.available(), 0, "the first acquire still holds the only permit");
        assert_eq!(run(sem.release::<E>()), Outcome::Succeeded(Ok(())));
        assert_eq!(sem.available(), 1, "the released permit was not given to the canceled waiter");
    }

    fn a_cancellation_racing_a_release_gives_no_permit_away() {
        // The canceler is started first and the release happens while the
        // cancellation is under way: whichever wins, the permit ends up
        // either with a waiter that completed its acquire, or back in the
        // semaphore, never lost.
        let sem = semaphore(1);
        let (w, counted, releaser) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<Outcome<(), E>, E> = sem.acquire().product_r(w.acquire().start()).flat_map(move |h| {
            let canceler = h.cancel_handle();
            eventually(move || counted.waiting() == 1)
                .product_r(canceler.cancel::<E>().start())
                .flat_map(move |c| {
                    IO::cede()
                        .product_r(releaser.release().void())
                        .product_r(c.join_void())
                        .product_r(h.join())
                })
        });
        let outcome = run(io).succeeded().expect("succeeds");
        let held_by_waiter = u64::from(outcome.is_succeeded());
        assert_eq!(sem.available() + held_by_waiter, 1, "{outcome:?}");
        assert_eq!(sem.waiting(), 0);
    }

    fn a_with_permit_waiter_woken_and_canceled_at_once_leaves_the_permit_in_place() {
        // As below, through `with_permit`: whatever the interleaving (the
        // woken waiter may run at once on another worker, before, during or
        // after the cancel), the permit is back once the waiter has ended.
        let sem = semaphore(1);
        let (w, counted, releaser) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<Outcome<(), E>, E> = sem
            .acquire()
            .product_r(w.with_permit(IO::unit()).start())
            .flat_map(move |h| {
                eventually(move || counted.waiting() == 1)
                    .product_r(releaser.release().void())
                    .product_r(h.cancel())
                    .product_r(h.join())
            });
        let outcome = run(io).succeeded().expect("succeeds");
        assert!(outcome.is_succeeded() || outcome.is_canceled(), "{outcome:?}");
        assert_eq!((sem.available(), sem.waiting()), (1, 0), "{outcome:?}");
    }

    fn a_with_permit_canceled_right_after_it_takes_a_free_permit_releases_it_exactly_once() {
        // Every fiber yields after each step, and the cancellation lands
        // after 0, 1, 2, ... steps of the holder: one of them between the
        // step that takes the free permit and the one that installs its
        // release (on the single-threaded executor, deterministically).
        for steps in 0..40 {
            let sem = semaphore(1);
            let outcome = rt_with_config(yield_after_every_step())
                .run(cancel_after(steps, sem.with_permit(IO::unit())))
                .succeeded()
                .expect("the canceler succeeds");
            assert!(outcome.is_succeeded() || outcome.is_canceled(), "{steps}: {outcome:?}");
            assert_eq!((sem.available(), sem.waiting()), (1, 0), "{steps}: {outcome:?}");
        }
    }

    fn a_with_permit_canceled_while_it_waits_or_right_after_it_is_woken_takes_no_permit() {
        // Through the waiting path: a holder keeps the only permit for 20 of
        // its steps, and the waiter is canceled after 0, 1, 2, ... steps of
        // the canceler: before it asks, while it starts to wait (before its
        // registration ran), while it waits, as it is woken with the
        // permit, or once it holds it.
        for steps in 0..40 {
            let sem = semaphore(1);
            let (holder, waiter) = (sem.clone(), sem.clone());
            let io: IO<Outcome<(), E>, E> = holder
                .with_permit(after_steps(20, IO::unit()))
                .start()
                .flat_map(move |h| {
                    waiter.with_permit(IO::unit()).start().flat_map(move |w| {
                        after_steps(steps, IO::unit())
                            .product_r(w.cancel())
                            .product_r(w.join())
                            .flat_map(move |outcome| h.join_void().map_to(outcome))
                    })
                });
            let outcome = rt_with_config(yield_after_every_step())
                .run(io)
                .succeeded()
                .expect("the canceler succeeds");
            assert!(outcome.is_succeeded() || outcome.is_canceled(), "{steps}: {outcome:?}");
            assert_eq!((sem.available(), sem.waiting()), (1, 0), "{steps}: {outcome:?}");
        }
    }

    fn with_permit_inside_an_uncancelable_region_releases_the_permit_when_its_use_errors() {
        let sem = semaphore(1);
        let inner = sem.clone();
        let io: IO<u32, E> =
            IO::uncancelable(move |_| inner.with_permit(IO::raise_error("boom".to_string())));
        assert_eq!(run(io), Outcome::Errored("boom".to_string()));
        assert_eq!((sem.available(), sem.waiting()), (1, 0));
    }

    fn the_use_of_with_permit_runs_with_the_cancelability_of_its_caller() {
        // Unmasked: a self-cancel in the use is observed at once, the rest
        // of the use does not run.
        let sem = semaphore(1);
        let ran = Counter::new();
        let io: IO<(), E> = sem.with_permit(IO::<(), E>::canceled().product_r(ran.incr_io()));
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!((ran.get(), sem.available()), (0, 1), "unmasked");
        // Masked: the use runs to its end, the cancellation is observed
        // when the region ends, and the permit is back either way.
        let inner = sem.clone();
        let r = ran.clone();
        let io: IO<(), E> = IO::uncancelable(move |_| {
            inner.with_permit(IO::<(), E>::canceled().product_r(r.incr_io()))
        })
        .product_r(ran.incr_io());
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!((ran.get(), sem.available()), (1, 1), "masked");
        // Masked, but polled: cancelable again.
        let inner = sem.clone();
        let r = ran.clone();
        let io: IO<(), E> = IO::uncancelable(move |poll| {
            poll.apply(inner.with_permit(IO::<(), E>::canceled().product_r(r.incr_io())))
        });
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!((ran.get(), sem.available()), (1, 1), "polled");
    }

    fn nested_with_permits_inside_a_masked_region_each_hold_a_permit_and_release_it() {
        let sem = semaphore(2);
        let (outer, inner, inside) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<u64, E> = IO::uncancelable(move |_| {
            outer.with_permit(inner.with_permit(IO::delay(move || inside.available())))
        });
        assert_eq!(run(io), Outcome::Succeeded(0));
        assert_eq!((sem.available(), sem.waiting()), (2, 0));
    }

    fn a_with_permit_waiter_whose_cancel_was_requested_before_its_grant_never_starts_its_body() {
        // The holder requests the cancellation of every waiter (a canceler
        // fiber each), then ends its use, whose release grants the first
        // waiter the permit: on the single-threaded executors the grant
        // reaches each waiter after its cancel was requested and before
        // its cleanup ran (the race of a cancel storm, made deterministic);
        // on the multi-threaded ones the release waits until the requests
        // were made. A waiter whose cancel came first never starts its
        // body, and every permit comes back.
        const WAITERS: usize = 20;
        for round in 0..5 {
            let sem = semaphore(1);
            let started = Counter::new();
            let requested = Counter::new();
            let (holder, waiters, counted) = (sem.clone(), sem.clone(), sem.clone());
            let (st, rq) = (started.clone(), requested.clone());
            let io: IO<(), E> = holder
                .acquire()
                .product_r(IO::traverse((0..WAITERS).collect(), move |_| {
                    waiters.with_permit(st.incr_io::<E>()).start()
                }))
                .flat_map(move |handles| {
                    let (rq2, hs) = (rq.clone(), handles);
                    let cancels = hs.iter().map(|h| {
                        let (h, rq) = (h.cancel_handle(), rq.clone());
                        IO::defer(move || {
                            rq.incr();
                            h.cancel::<E>()
                        })
                        .start()
                    });
                    let cancels: Vec<_> = cancels.collect();
                    eventually(move || counted.waiting() == WAITERS)
                        .product_r(IO::sequence(cancels))
                        .flat_map(move |cancelers| {
                            // Each canceler makes its request in the step
                            // after it counted itself.
                            eventually(move || rq2.get() == WAITERS)
                                .product_r(IO::sleep(Duration::from_millis(50)))
                                .product_r(holder.release().void())
                                .product_r(IO::traverse(cancelers, |c| c.join_void()))
                                .product_r(IO::traverse(hs, |h| h.join_void()))
                                .void()
                        })
                });
            assert_eq!(run(io), Outcome::Succeeded(()));
            assert_eq!(started.get(), 0, "round {round}: bodies of canceled waiters started");
            assert_eq!(requested.get(), WAITERS);
            assert_eq!((sem.available(), sem.waiting()), (1, 0), "round {round}");
        }
    }

    fn with_permit_with_lock_and_lock_conserve_every_permit_under_a_cancel_storm() {
        // Many fibers contend for 3 permits through `with_permit`, and for a
        // mutex through `with_lock`, `lock().use_with` and a composed
        // `lock()`; half of them are canceled at once, while they wait, as
        // they are woken or while they hold. Afterwards every permit is
        // back (a full acquire succeeds at once), nobody waits, and no more
        // bodies ran at once than there are permits.
        const FIBERS: usize = if cfg!(miri) { 40 } else { 2_000 };
        const PERMITS: u64 = 3;
        let sem = semaphore(PERMITS);
        let mutex = spindle_core::Mutex::new();
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let locked = Arc::new(AtomicUsize::new(0));
        let (s, m, i, mo, l) = (sem.clone(), mutex.clone(), inside.clone(), most.clone(), locked.clone());
        let io: IO<(), E> = IO::traverse((0..FIBERS).collect(), move |n| {
            let (i, mo, l) = (i.clone(), mo.clone(), l.clone());
            let body: IO<(), E> = IO::delay(move || {
                let now = i.fetch_add(1, Ordering::SeqCst) + 1;
                mo.fetch_max(now, Ordering::SeqCst);
            })
            .product_r(IO::cede())
            .guarantee(IO::delay({
                let i = inside.clone();
                move || {
                    i.fetch_sub(1, Ordering::SeqCst);
                }
            }));
            let lock_body: IO<(), E> = IO::delay(move || {
                assert_eq!(l.fetch_add(1, Ordering::SeqCst), 0, "two fibers inside the mutex");
            })
            .product_r(IO::cede())
            .guarantee(IO::delay({
                let l = locked.clone();
                move || {
                    l.fetch_sub(1, Ordering::SeqCst);
                }
            }));
            let program = match n % 4 {
                0 => s.with_permit(body),
                1 => m.with_lock(lock_body),
                2 => m.lock().use_with(move |()| lock_body),
                _ => m.lock().map(|_| ()).use_with(move |()| lock_body),
            };
            program.start()
        })
        .flat_map(|handles| {
            let cancels = handles
                .into_iter()
                .enumerate()
                .map(|(n, h)| {
                    if n % 2 == 0 {
                        IO::cede().product_r(h.cancel()).product_r(h.join_void())
                    } else {
                        h.join_void()
                    }
                })
                .collect();
            IO::par_sequence(cancels).void()
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert!(most.load(Ordering::SeqCst) <= PERMITS as usize, "{most:?}");
        assert_eq!((sem.available(), sem.waiting()), (PERMITS, 0));
        assert_eq!(mutex.waiting(), 0);
        let full: IO<bool, E> = sem.try_acquire_n(PERMITS);
        assert_eq!(run(full), Outcome::Succeeded(true), "a full acquire succeeds at once");
        let relock: IO<u32, E> = mutex.with_lock(IO::pure(1));
        assert_eq!(run(relock), Outcome::Succeeded(1), "the mutex is free");
    }

    fn a_semaphore_keeps_serving_the_fibers_that_run_while_woken_ones_time_out() {
        // Fibers take 1 permit (`with_permit`) or 2 (`acquire_n`, then
        // `release_n`), each under a 0-2 ms timeout, some canceled at
        // random (`common::storm`); one holder in 32 yields while it
        // holds, so that fibers wait and are woken. The fibers that run
        // must keep getting permits (the design that handed permits to
        // woken fibers completed a few hundred at most here), never more
        // held than there are, and at the end every permit is free and
        // nobody waits.
        const PERMITS: u64 = 4;
        const FIBERS: u64 = 200;
        const MIN_COMPLETED: usize = 1_500;
        let sem = semaphore(PERMITS);
        let (held, most, completed) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let storm = {
            let (sem, held, most, completed) = (sem.clone(), held.clone(), most.clone(), completed.clone());
            storm::storm::<E, _>(FIBERS, move |_, r| {
                let n = if r % 4 == 0 { 2 } else { 1 };
                let (enter, leave, done) = (held.clone(), held.clone(), completed.clone());
                let most = most.clone();
                // Entering is masked with the finalizer's installation, so
                // that a leave is counted exactly when an enter was (a
                // cancellation may come right after `guarantee` starts).
                let work = IO::uncancelable(move |poll| {
                    IO::delay(move || {
                        let now = enter.fetch_add(n, Ordering::SeqCst) + n;
                        most.fetch_max(now, Ordering::SeqCst);
                    })
                    .product_r(poll.apply(
                        if (r >> 8) % 32 == 0 { IO::cede() } else { IO::unit() }.product_r(IO::delay(
                            move || {
                                done.fetch_add(1, Ordering::SeqCst);
                            },
                        )),
                    ))
                    .guarantee(IO::delay(move || {
                        leave.fetch_sub(n, Ordering::SeqCst);
                    }))
                });
                if n == 1 {
                    sem.with_permit(work)
                } else {
                    let (acquirer, releaser) = (sem.clone(), sem.clone());
                    IO::uncancelable(move |poll| {
                        poll.apply(acquirer.acquire_n(2))
                            .flat_map(move |()| poll.apply(work).guarantee(releaser.release_n(2).void()))
                    })
                }
            })
        };
        assert_eq!(run(storm), Outcome::Succeeded(()));
        let completed = completed.load(Ordering::SeqCst);
        assert!(
            completed >= MIN_COMPLETED,
            "{completed} holders completed in {:?}: the semaphore stopped serving the fibers that run",
            storm::window()
        );
        let most = most.load(Ordering::SeqCst);
        assert!(most <= PERMITS as usize, "{most} permits were held at once");
        assert_eq!((sem.available(), sem.waiting()), (PERMITS, 0));
        let all: IO<bool, E> = sem.try_acquire_n(PERMITS);
        assert_eq!(run(all), Outcome::Succeeded(true), "try_acquire_n agrees with available");
    }

    fn many_canceled_waiters_leave_every_permit_in_place() {
        let sem = semaphore(2);
        let (w, counted, after) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<(), E> = sem.acquire().product_r(sem.acquire()).flat_map(move |()| {
            IO::sequence((0..20).map(|_| w.acquire::<E>().start()).collect()).flat_map(move |hs| {
                eventually(move || counted.waiting() == 20)
                    .product_r(IO::traverse(hs, |h| h.cancel()))
                    .product_r(after.release().void())
                    .product_r(after.release().void())
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!((sem.available(), sem.waiting()), (2, 0));
    }
}

#[test]
fn on_the_single_threaded_executor_a_woken_then_canceled_waiter_is_canceled_and_the_permit_stays_free()
 {
    // Deterministic ordering: the release puts the permit in the count and
    // wakes the waiter, the cancel is requested before it runs, so it
    // resumes into cancellation, drops its wake-up and takes nothing.
    let sem = semaphore(1);
    let (w, releaser) = (sem.clone(), sem.clone());
    let io: IO<Outcome<(), E>, E> =
        sem.acquire()
            .product_r(w.acquire().start())
            .flat_map(move |h| {
                IO::cede()
                    .product_r(releaser.release().void())
                    .product_r(h.cancel())
                    .product_r(h.join())
            });
    assert_eq!(
        spindle_exec_single::SingleThreaded::new()
            .expect("an executor")
            .block_on(io)
            .expect("block_on"),
        Outcome::Succeeded(Outcome::Canceled)
    );
    assert_eq!((sem.available(), sem.waiting()), (1, 0));
}

/// A waiter is woken by a release and canceled before it runs again:
/// whichever of the two its fiber sees first, the permit is not lost.
fn a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on<R: TestRuntime>() {
    // The release puts the permit in the count and wakes the waiter; the
    // cancel arrives before the waiter runs again. Whichever way the
    // executor orders them, the permit is not lost.
    let sem = semaphore(1);
    let (w, counted, releaser) = (sem.clone(), sem.clone(), sem.clone());
    let io: IO<Outcome<(), E>, E> =
        sem.acquire()
            .product_r(w.acquire().start())
            .flat_map(move |h| {
                eventually(move || counted.waiting() == 1)
                    .product_r(releaser.release().void())
                    .product_r(h.cancel())
                    .product_r(h.join())
            });
    let outcome = R::new().run(io).succeeded().expect("succeeds");
    let held_by_waiter = u64::from(outcome.is_succeeded());
    assert_eq!(sem.available() + held_by_waiter, 1, "{outcome:?}");
    assert_eq!(sem.waiting(), 0);
}

#[test]
fn a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on_single() {
    a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on::<common::Single>();
}

#[test]
fn a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on_wstp() {
    a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on::<common::Wstp>();
}

#[test]
fn a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on_tokio() {
    a_waiter_woken_and_canceled_before_it_ran_loses_no_permit_on::<common::Tokio>();
}

/// The only permit is held, a waiter waits; the release puts the permit
/// in the count and wakes the waiter, and before it runs, the releasing
/// fiber takes the permit with `try_acquire` (`available()` read 1):
/// nothing is set aside for the woken waiter. The waiter then finds no
/// permit, waits again, and gets the next one released.
fn a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on<R: TestRuntime>() {
    let sem = semaphore(1);
    let (w, counted) = (sem.clone(), sem.clone());
    let io: IO<(u64, bool, Outcome<(), E>, u64), E> = sem
        .acquire()
        .product_r(w.acquire().start())
        .flat_map(move |h| {
            let waiting = counted.clone();
            eventually(move || waiting.waiting() == 1)
                .product_r(counted.release())
                .flat_map(move |_| {
                    let free = counted.available();
                    counted.try_acquire().flat_map(move |barged| {
                        // The woken waiter runs, finds no permit and waits again.
                        let waiting = counted.clone();
                        eventually(move || waiting.waiting() == 1)
                            .product_r(counted.release())
                            .product_r(h.join())
                            .map(move |o| (free, barged, o, counted.available()))
                    })
                })
        });
    assert_eq!(
        R::new().run(io),
        Outcome::Succeeded((1, true, Outcome::Succeeded(()), 0))
    );
}

#[test]
fn a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on_single() {
    a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on::<common::Single>();
}

#[test]
fn a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on_batching() {
    a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on::<common::Batching>();
}

#[test]
fn a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on_tokio_current() {
    a_fiber_that_runs_first_takes_the_permit_a_woken_waiter_was_woken_for_on::<common::TokioCurrent>(
    );
}
