//! Concurrency combinators: `race_pair`, `race_outcome`, `race`,
//! `both_outcome`, `both`, `par_map2`, `par_traverse`, `par_sequence`,
//! `par_traverse_n` and `background` (Cats Effect 3's `GenSpawn` and
//! `GenConcurrent` derivations). A loser is canceled, and its finalizers
//! have run, before the combinator returns.

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, HANG_LIMIT, Log, TestRuntime, rt_test, within};
use spindle_core::{CountDownLatch, Deferred, Either, FiberHandle, IO, Outcome, UIO};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type E = String;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A side that never finishes on its own; its cancellation logs `name`.
/// It releases `ready` once that finalizer is in place.
///
/// A fiber canceled before it ever ran has no finalizer to run (Cats
/// Effect's semantics), and on a multi-threaded executor a side may not have
/// started yet when the other side ends the race. Tests that assert that a
/// loser's finalizer ran therefore start the winner with
/// [`once_ready`]: what they check then holds on every interleaving.
fn hanging(name: &'static str, log: &Log<String>, ready: &CountDownLatch) -> IO<u32, E> {
    ready
        .release()
        .product_r(IO::never())
        .on_cancel(log.record(format!("{name} canceled")))
}

/// `io`, once every side counted by `ready` has released it.
fn once_ready<A: Send + 'static>(ready: &CountDownLatch, io: IO<A, E>) -> IO<A, E> {
    ready.wait().product_r(io)
}

/// A latch for `n` hanging sides.
fn ready(n: u64) -> CountDownLatch {
    CountDownLatch::new(n).expect("a valid count")
}

/// A side that produces `value` after `after`.
fn after(after: Duration, value: u32) -> IO<u32, E> {
    IO::sleep(after).map_to(value)
}

/// A side that fails with `error` after `after`.
fn failing_after(after: Duration, error: &str) -> IO<u32, E> {
    IO::sleep(after).product_r(IO::raise_error(error.to_string()))
}

/// Records, around `io`, how many programs are running at once.
#[derive(Clone, Default)]
struct Concurrency {
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Concurrency {
    fn around<A: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E> {
        let (enter, leave) = (self.clone(), self.clone());
        IO::delay(move || {
            let now = enter.running.fetch_add(1, Ordering::SeqCst) + 1;
            enter.peak.fetch_max(now, Ordering::SeqCst);
        })
        .product_r(io)
        .guarantee(IO::delay(move || {
            leave.running.fetch_sub(1, Ordering::SeqCst);
        }))
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

rt_test! {
    // ----- race ------------------------------------------------------------------

    fn race_returns_the_first_to_succeed_and_cancels_the_loser_before_it_returns() {
        let (log, r) = (Log::new(), ready(1));
        let l = log.clone();
        let left_wins = once_ready(&r, after(ms(1), 1))
            .race(hanging("right", &log, &r))
            .flat_map(move |w| l.record("race returned".to_string()).map_to(w));
        assert_eq!(run(left_wins), Outcome::Succeeded(Either::Left(1)));
        assert_eq!(log.events(), ["right canceled", "race returned"]);

        let (log, r) = (Log::new(), ready(1));
        let l = log.clone();
        let right_wins = hanging("left", &log, &r)
            .race(once_ready(&r, after(ms(1), 2)))
            .flat_map(move |w| l.record("race returned".to_string()).map_to(w));
        assert_eq!(run(right_wins), Outcome::Succeeded(Either::Right(2)));
        assert_eq!(log.events(), ["left canceled", "race returned"]);
    }

    fn race_fails_when_the_first_to_finish_fails_and_cancels_the_loser() {
        let (log, r) = (Log::new(), ready(1));
        let io = once_ready(&r, failing_after(ms(1), "boom")).race(hanging("right", &log, &r));
        assert_eq!(run(io), Outcome::Errored("boom".to_string()));
        assert_eq!(log.events(), ["right canceled"]);
    }

    fn race_runs_its_sides_concurrently() {
        // The left side can only finish once the right one has started.
        let gate = Deferred::<()>::new();
        let left = gate.get().map_to(1u32);
        let right = gate.complete(()).product_r(UIO::<()>::never()).map_to(2u32);
        assert_eq!(run(left.race(right)), Outcome::Succeeded(Either::Left(1)));
    }

    fn race_waits_for_the_other_side_when_the_first_to_finish_canceled_itself() {
        let io = IO::canceled().map_to(1u32).race(after(ms(5), 2));
        assert_eq!(run(io), Outcome::Succeeded(Either::Right(2)));
        let io = after(ms(5), 1).race(IO::canceled().map_to(2u32));
        assert_eq!(run(io), Outcome::Succeeded(Either::Left(1)));
    }

    fn race_is_canceled_when_both_sides_canceled_themselves() {
        let io = UIO::canceled()
            .map_to(1u32)
            .race(IO::sleep(ms(1)).product_r(IO::canceled()).map_to(2u32));
        assert_eq!(try_run(io), Ok(Outcome::Canceled));
    }

    fn race_cancels_both_sides_when_the_caller_is_canceled() {
        let (log, started) = (Log::new(), ready(2));
        let caller = hanging("left", &log, &started).race(hanging("right", &log, &started));
        let l = log.clone();
        let io: IO<Outcome<Either<u32, u32>, E>, E> = caller.start().flat_map(move |h| {
            started
                .wait()
                .product_r(IO::sleep(ms(5)))
                .product_r(h.cancel())
                .product_r(l.record("cancel returned".to_string()))
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        let events = log.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(events.contains(&"left canceled".to_string()));
        assert!(events.contains(&"right canceled".to_string()));
        assert_eq!(events[2], "cancel returned");
    }

    // ----- race_outcome ------------------------------------------------------------

    fn race_outcome_gives_the_winners_outcome_and_cancels_the_loser() {
        let (log, r) = (Log::new(), ready(1));
        let io = once_ready(&r, failing_after(ms(1), "boom")).race_outcome(hanging("right", &log, &r));
        assert_eq!(
            run(io),
            Outcome::Succeeded(Either::Left(Outcome::Errored("boom".to_string())))
        );
        assert_eq!(log.events(), ["right canceled"]);

        let (log, r) = (Log::new(), ready(1));
        let io = hanging("left", &log, &r).race_outcome(once_ready(&r, after(ms(1), 2)));
        assert_eq!(run(io), Outcome::Succeeded(Either::Right(Outcome::Succeeded(2))));
        assert_eq!(log.events(), ["left canceled"]);
    }

    fn race_outcome_gives_a_canceled_winner_as_canceled() {
        let (log, r) = (Log::new(), ready(1));
        let io = once_ready(&r, IO::canceled().map_to(1u32)).race_outcome(hanging("right", &log, &r));
        assert_eq!(run(io), Outcome::Succeeded(Either::Left(Outcome::Canceled)));
        assert_eq!(log.events(), ["right canceled"]);
    }

    // ----- race_pair -----------------------------------------------------------------

    fn race_pair_gives_the_winners_outcome_and_the_losers_handle_still_running() {
        let gate = Deferred::<()>::new();
        let finalized = Counter::new();
        let loser = gate.get().map_to(2u32).on_cancel(finalized.incr_io());
        let io: IO<(Outcome<u32, E>, Outcome<u32, E>), E> =
            after(ms(1), 1).race_pair(loser).flat_map(move |pair| match pair {
                Either::Left((winner, loser)) => gate
                    .complete(())
                    .product_r(loser.join())
                    .map(move |o| (winner, o)),
                Either::Right(_) => panic!("the right side cannot win"),
            });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Succeeded(1), Outcome::Succeeded(2)))
        );
        assert_eq!(finalized.get(), 0, "race_pair does not cancel the loser");
    }

    fn race_pair_gives_the_right_winner_and_the_left_losers_handle() {
        let (log, r) = (Log::new(), ready(1));
        let io: IO<Outcome<u32, E>, E> =
            hanging("left", &log, &r).race_pair(once_ready(&r, after(ms(1), 2))).flat_map(|pair| match pair {
                Either::Right((loser, winner)) => loser.cancel().map_to(winner),
                Either::Left(_) => panic!("the left side cannot win"),
            });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(2)));
        assert_eq!(log.events(), ["left canceled"]);
    }

    fn race_pair_cancels_both_sides_when_the_caller_is_canceled() {
        let (log, started) = (Log::new(), ready(2));
        let caller = hanging("left", &log, &started)
            .race_pair(hanging("right", &log, &started))
            .void();
        let io: IO<Outcome<(), E>, E> = caller.start().flat_map(move |h| {
            started
                .wait()
                .product_r(IO::sleep(ms(5)))
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        let mut events = log.events();
        events.sort();
        assert_eq!(events, ["left canceled", "right canceled"]);
    }

    // ----- both, both_outcome, par_map2 ---------------------------------------------------

    fn both_produces_both_values_and_waits_for_the_slower_side() {
        assert_eq!(run(after(ms(5), 1).both(IO::pure(2))), Outcome::Succeeded((1, 2)));
        assert_eq!(run(IO::<u32, E>::pure(1).both(after(ms(5), 2))), Outcome::Succeeded((1, 2)));
    }

    fn both_runs_its_sides_concurrently() {
        let (to_left, to_right) = (Deferred::<u32>::new(), Deferred::<u32>::new());
        let left = to_right.complete(10).product_r(to_left.get());
        let right = to_left.complete::<E>(20).product_r(to_right.get());
        assert_eq!(run(left.both(right)), Outcome::Succeeded((20, 10)));
    }

    fn both_fails_with_the_first_failure_and_cancels_the_other_side() {
        let (log, r) = (Log::new(), ready(1));
        let io = hanging("left", &log, &r).both(once_ready(&r, failing_after(ms(1), "right failed")));
        assert_eq!(run(io), Outcome::Errored("right failed".to_string()));
        assert_eq!(log.events(), ["left canceled"]);

        let (log, r) = (Log::new(), ready(1));
        let io = once_ready(&r, failing_after(ms(1), "left failed")).both(hanging("right", &log, &r));
        assert_eq!(run(io), Outcome::Errored("left failed".to_string()));
        assert_eq!(log.events(), ["right canceled"]);
    }

    fn both_fails_when_the_slower_side_fails_after_the_other_succeeded() {
        let io = IO::<u32, E>::pure(1).both(failing_after(ms(5), "late"));
        assert_eq!(run(io), Outcome::Errored("late".to_string()));
    }

    fn both_is_canceled_and_cancels_the_other_side_when_one_side_canceled_itself() {
        let (log, r) = (Log::new(), ready(1));
        let io = once_ready(&r, IO::canceled().map_to(1u32)).both(hanging("right", &log, &r));
        assert_eq!(try_run(io), Ok(Outcome::Canceled));
        assert_eq!(log.events(), ["right canceled"]);
    }

    fn both_is_canceled_when_the_slower_side_cancels_itself_after_the_other_succeeded() {
        let io = IO::<u32, E>::pure(1)
            .both(IO::sleep(ms(1)).product_r(IO::canceled()).map_to(2u32));
        assert_eq!(try_run(io), Ok(Outcome::Canceled));
    }

    fn both_cancels_both_sides_when_the_caller_is_canceled() {
        let (log, started) = (Log::new(), ready(2));
        let caller = hanging("left", &log, &started).both(hanging("right", &log, &started));
        let io: IO<Outcome<(u32, u32), E>, E> = caller.start().flat_map(move |h| {
            started
                .wait()
                .product_r(IO::sleep(ms(5)))
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        let mut events = log.events();
        events.sort();
        assert_eq!(events, ["left canceled", "right canceled"]);
    }

    fn both_outcome_gives_both_outcomes_and_cancels_neither_side() {
        let finalized = Counter::new();
        let io = failing_after(ms(1), "left failed")
            .both_outcome(after(ms(10), 2).on_cancel(finalized.incr_io()));
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Errored("left failed".to_string()), Outcome::Succeeded(2)))
        );
        assert_eq!(finalized.get(), 0);

        let io = IO::canceled().map_to(1u32).both_outcome(after(ms(1), 2));
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Canceled, Outcome::Succeeded(2)))
        );
    }

    fn both_outcome_cancels_both_sides_when_the_caller_is_canceled() {
        let (log, started) = (Log::new(), ready(2));
        let caller = hanging("left", &log, &started)
            .both_outcome(hanging("right", &log, &started))
            .void();
        let io: IO<Outcome<(), E>, E> = caller.start().flat_map(move |h| {
            started
                .wait()
                .product_r(IO::sleep(ms(5)))
                .product_r(h.cancel())
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        let mut events = log.events();
        events.sort();
        assert_eq!(events, ["left canceled", "right canceled"]);
    }

    fn par_map2_combines_the_values_of_sides_run_concurrently() {
        let (to_left, to_right) = (Deferred::<u32>::new(), Deferred::<u32>::new());
        let left = to_right.complete(3).product_r(to_left.get());
        let right = to_left.complete::<E>(4).product_r(to_right.get());
        assert_eq!(run(left.par_map2(right, |a, b| a * 10 + b)), Outcome::Succeeded(43));
    }

    fn par_map2_fails_with_the_first_failure_and_cancels_the_other_side() {
        let (log, r) = (Log::new(), ready(1));
        let io = hanging("left", &log, &r).par_map2(once_ready(&r, failing_after(ms(1), "boom")), |a, b| a + b);
        assert_eq!(run(io), Outcome::Errored("boom".to_string()));
        assert_eq!(log.events(), ["left canceled"]);
    }

    // ----- par_traverse, par_sequence ---------------------------------------------------

    fn par_traverse_keeps_the_order_of_the_items_whatever_order_they_finish_in() {
        let io = IO::<u64, E>::par_traverse((0..20u64).collect(), |i| {
            IO::sleep(Duration::from_micros(100 * (20 - i))).map_to(i * 2)
        });
        assert_eq!(run(io), Outcome::Succeeded((0..20u64).map(|i| i * 2).collect()));
    }

    fn par_traverse_runs_every_item_concurrently() {
        // Every item waits for all the others to have started.
        let latch = CountDownLatch::new(10).expect("valid count");
        let io = IO::<usize, E>::par_traverse((0..10usize).collect(), move |i| {
            latch.release().product_r(latch.wait()).map_to(i)
        });
        assert_eq!(run(io), Outcome::Succeeded((0..10usize).collect()));
    }

    fn par_traverse_calls_its_function_only_when_the_program_runs() {
        let calls = Counter::new();
        let c = calls.clone();
        let io = IO::<u32, E>::par_traverse(vec![1u32, 2, 3], move |i| {
            c.incr();
            IO::pure(i)
        });
        assert_eq!(calls.get(), 0, "building runs nothing");
        assert_eq!(run(io), Outcome::Succeeded(vec![1, 2, 3]));
        assert_eq!(calls.get(), 3);
    }

    fn par_traverse_of_no_items_produces_an_empty_vec() {
        let io = IO::<u32, E>::par_traverse(Vec::<u32>::new(), IO::pure);
        assert_eq!(run(io), Outcome::Succeeded(vec![]));
    }

    fn par_traverse_fails_with_the_first_failure_and_cancels_the_rest() {
        let canceled = Counter::new();
        let c = canceled.clone();
        let r = ready(7);
        let io = IO::<u32, E>::par_traverse((0..8u32).collect(), move |i| {
            if i == 5 {
                once_ready(&r, failing_after(ms(2), "item 5 failed"))
            } else {
                r.release().product_r(IO::never()).on_cancel(c.incr_io())
            }
        });
        assert_eq!(run(io), Outcome::Errored("item 5 failed".to_string()));
        assert_eq!(canceled.get(), 7, "every other item was canceled before the result");
    }

    fn par_sequence_keeps_the_order_and_fails_with_the_first_failure() {
        let programs = vec![after(ms(3), 1), after(ms(1), 2), IO::pure(3)];
        assert_eq!(run(IO::par_sequence(programs)), Outcome::Succeeded(vec![1, 2, 3]));
        let (log, r) = (Log::new(), ready(2));
        let programs = vec![
            hanging("first", &log, &r),
            once_ready(&r, failing_after(ms(1), "second failed")),
            hanging("third", &log, &r),
        ];
        assert_eq!(run(IO::par_sequence(programs)), Outcome::Errored("second failed".to_string()));
        let mut events = log.events();
        events.sort();
        assert_eq!(events, ["first canceled", "third canceled"]);
    }

    fn par_sequence_of_a_single_program_gives_its_value() {
        assert_eq!(run(IO::par_sequence(vec![after(ms(1), 7)])), Outcome::Succeeded(vec![7]));
    }

    // ----- par_traverse_n --------------------------------------------------------------

    fn par_traverse_n_runs_at_most_n_programs_at_once_and_keeps_the_order() {
        for n in [1usize, 3, 8] {
            let concurrency = Concurrency::default();
            let c = concurrency.clone();
            // The first n items wait for each other inside, so that the peak
            // is n on every interleaving (later items find the latch open).
            let first_wave = ready(n as u64);
            let io = IO::<u64, E>::par_traverse_n(nz(n), (0..20u64).collect(), move |i| {
                let wave = first_wave.clone();
                c.around(wave.release().product_r(once_ready(&wave, IO::sleep(ms(2)))).map_to(i))
            });
            assert_eq!(run(io), Outcome::Succeeded((0..20u64).collect()), "n = {n}");
            assert_eq!(concurrency.peak(), n, "n = {n}");
        }
    }

    fn par_traverse_n_with_more_parallelism_than_items_runs_them_all_at_once() {
        let concurrency = Concurrency::default();
        let c = concurrency.clone();
        // Each item waits inside until all five are in: a parallelism below
        // 5 would never finish.
        let all_in = ready(5);
        let io = IO::<u32, E>::par_traverse_n(nz(100), (0..5u32).collect(), move |i| {
            c.around(all_in.release().product_r(once_ready(&all_in, after(ms(2), i))))
        });
        assert_eq!(run(io), Outcome::Succeeded((0..5u32).collect()));
        assert_eq!(concurrency.peak(), 5);
    }

    fn par_traverse_n_calls_its_function_only_when_the_program_runs() {
        let calls = Counter::new();
        let c = calls.clone();
        let io = IO::<u32, E>::par_traverse_n(nz(2), vec![1u32, 2, 3], move |i| {
            c.incr();
            IO::pure(i)
        });
        assert_eq!(calls.get(), 0, "building runs nothing");
        assert_eq!(run(io), Outcome::Succeeded(vec![1, 2, 3]));
        assert_eq!(calls.get(), 3);
    }

    fn par_traverse_n_starts_its_programs_in_the_order_of_the_items() {
        // With a parallelism of 1 the items run one at a time, so the order
        // they start in is the order of the list, on every executor (each
        // item's fiber may land on any worker of a pool). Many rounds, so
        // that a pool that lets a later item take the permit first shows it.
        let order = within(HANG_LIMIT, || {
            let rt = rt();
            (0..200)
                .map(|_| {
                    let log = Log::new();
                    let l = log.clone();
                    let io = IO::<u32, E>::par_traverse_n(nz(1), (0..4u32).collect(), move |i| {
                        l.record(i).product_r(IO::cede()).map_to(i)
                    });
                    assert_eq!(rt.run(io), Outcome::Succeeded(vec![0, 1, 2, 3]));
                    log.events()
                })
                .find(|order| order != &[0, 1, 2, 3])
        });
        let order = order.expect("200 rounds of par_traverse_n finish within the hang limit");
        assert_eq!(order, None, "the items started out of order");
    }

    fn par_traverse_n_runs_its_first_items_first_even_when_the_later_ones_never_end() {
        // The first item fails; the others never end. Only if the first item
        // is among the first two to take a permit does the failure end the
        // program (canceling the others): a later item taking a permit first
        // left both permits with items that never end, and the program hung.
        let outcomes = within(HANG_LIMIT, || {
            let rt = rt();
            (0..500)
                .map(|_| {
                    let io = IO::<u32, E>::par_traverse_n(nz(2), (0..3u32).collect(), |i| {
                        if i == 0 {
                            IO::cede().product_r(IO::raise_error("declined".to_string()))
                        } else {
                            IO::never()
                        }
                    });
                    rt.run(io)
                })
                .filter(|outcome| outcome != &Outcome::Errored("declined".to_string()))
                .count()
        });
        let others = outcomes.expect("500 rounds of par_traverse_n finish within the hang limit");
        assert_eq!(others, 0, "every round fails with the first item's error");
    }

    // ----- background ----------------------------------------------------------------------

    fn background_runs_the_fiber_while_the_resource_is_in_use() {
        let gate = Deferred::<u32>::new();
        let g = gate.clone();
        let io: IO<u32, E> = g
            .complete(11)
            .void()
            .background()
            .use_ref(move |_| gate.get());
        assert_eq!(run(io), Outcome::Succeeded(11));
    }

    fn background_cancels_the_fiber_and_waits_for_its_finalizers_when_released() {
        let log = Log::new();
        let (l1, l2) = (log.clone(), log.clone());
        let started = ready(1);
        let io: IO<(), E> = started
            .release()
            .product_r(IO::<(), E>::never())
            .on_cancel(IO::sleep(ms(5)).product_r(log.record("background finalized".to_string())))
            .background()
            .use_ref(move |_| {
                once_ready(&started, IO::sleep(ms(2))).product_r(l1.record("use done".to_string()))
            })
            .product_r(l2.record("after use".to_string()));
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(log.events(), ["use done", "background finalized", "after use"]);
    }

    fn background_cancels_the_fiber_when_the_use_fails() {
        let finalized = Counter::new();
        let started = Deferred::<()>::new();
        let s = started.clone();
        let io: IO<(), E> = s
            .complete(())
            .product_r(IO::<(), E>::never())
            .on_cancel(finalized.incr_io())
            .background()
            .use_ref(move |_| started.get().product_r(IO::raise_error("use failed".to_string())));
        assert_eq!(run(io), Outcome::Errored("use failed".to_string()));
        assert_eq!(finalized.get(), 1);
    }

    fn background_handle_waits_for_the_fiber_inside_the_scope() {
        let io: IO<(), E> =
            after(ms(1), 5).background().use_ref(|h: &FiberHandle<u32, E>| h.join_void());
        assert_eq!(run(io), Outcome::Succeeded(()));
    }
}

/// `par_traverse_n` with a parallelism of 2 over 10 items, item 5 failing:
/// the failure is the result, and nothing is left running.
fn par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on<R: TestRuntime>() {
    let concurrency = Concurrency::default();
    let (started, finished, canceled) = (Counter::new(), Counter::new(), Counter::new());
    let (c, s, f, x) = (
        concurrency.clone(),
        started.clone(),
        finished.clone(),
        canceled.clone(),
    );
    let io = IO::<u32, E>::par_traverse_n(nz(2), (0..10u32).collect(), move |i| {
        let body = if i == 5 {
            failing_after(ms(1), "item 5 failed")
        } else {
            after(ms(3), i)
                .product_l(f.incr_io())
                .on_cancel(x.incr_io())
        };
        c.around(s.incr_io().product_r(body))
    });
    assert_eq!(
        R::new().run(io),
        Outcome::Errored("item 5 failed".to_string())
    );
    assert!(concurrency.peak() <= 2);
    assert_eq!(
        concurrency.running.load(Ordering::SeqCst),
        0,
        "nothing is left running"
    );
    assert_eq!(
        started.get(),
        finished.get() + canceled.get() + 1,
        "every item that started finished, failed or was canceled"
    );
}

#[test]
fn par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on_single() {
    par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on::<common::Single>();
}

#[test]
fn par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on_wstp() {
    par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on::<common::Wstp>();
}

#[test]
fn par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on_tokio() {
    par_traverse_n_fails_with_the_first_failure_and_leaves_nothing_running_on::<common::Tokio>();
}

/// A parallelism for `par_traverse_n` (tests pass literals that are not 0).
fn nz(n: usize) -> core::num::NonZeroUsize {
    core::num::NonZeroUsize::new(n).expect("a parallelism of at least 1")
}
