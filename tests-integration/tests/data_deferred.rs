//! `Deferred`: set once, awaited by any number of fibers; a canceled `get`
//! leaves no waiter behind.

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, eventually, rt_test};
use spindle_core::error::AlreadyCompleted;
use spindle_core::{Deferred, FiberHandle, IO, Outcome};
use std::time::Duration;

type E = String;

rt_test! {
    fn take_moves_a_value_that_is_not_clone_out_once_and_later_takes_get_none() {
        // Not `Clone`: only `take` can read it.
        #[derive(Debug, PartialEq)]
        struct Token(u32);
        let d = Deferred::<Token>::new();
        let (d1, d2, d3) = (d.clone(), d.clone(), d.clone());
        let io: IO<(Option<Token>, Option<Token>, Option<Token>), E> = d.complete(Token(3)).flat_map(move |_| {
            d1.take().flat_map(move |first| {
                d2.take().flat_map(move |second| d3.try_take().map(move |third| (first, second, third)))
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Some(Token(3)), None, None)));
    }

    fn of_several_waiting_takers_exactly_one_gets_the_value() {
        let d = Deferred::<String>::new();
        let (takers, completer, counted) = (d.clone(), d.clone(), d.clone());
        let io: IO<Vec<Outcome<Option<String>, E>>, E> = IO::traverse((0..4).collect(), move |_: i32| takers.take().start())
            .flat_map(move |handles| {
                eventually(move || counted.waiters() == 4)
                    .product_r(completer.complete("once".to_string()))
                    .product_r(IO::traverse(handles, |h| h.join()))
            });
        let outcomes = run(io).succeeded().expect("succeeds");
        let got: Vec<String> = outcomes
            .into_iter()
            .filter_map(|o| o.succeeded().expect("every taker ends"))
            .collect();
        assert_eq!(got, ["once".to_string()]);
    }

    fn a_take_canceled_while_waiting_takes_nothing_and_the_value_stays_for_another() {
        let d = Deferred::<String>::new();
        let (taker, completer, later, counted) = (d.clone(), d.clone(), d.clone(), d.clone());
        let io: IO<(Outcome<Option<String>, E>, Option<String>), E> = taker.take().start().flat_map(move |h| {
            eventually(move || counted.waiters() == 1)
                .product_r(h.cancel())
                .product_r(h.join())
                .flat_map(move |o| completer.complete("kept".to_string()).product_r(later.take()).map(move |v| (o, v)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, Some("kept".to_string()))));
    }

    fn a_taker_canceled_as_the_value_arrives_either_took_it_or_left_it() {
        const ROUNDS: usize = if cfg!(miri) { 5 } else { 200 };
        for _ in 0..ROUNDS {
            let d = Deferred::<String>::new();
            let (taker, completer, later) = (d.clone(), d.clone(), d.clone());
            // The record runs exactly when the take completed.
            let taken = std::sync::Arc::new(std::sync::Mutex::new(None));
            let record = taken.clone();
            let take = IO::uncancelable(move |poll| {
                poll.apply(taker.take::<E>()).map(move |v| {
                    *record.lock().unwrap() = v;
                })
            });
            let io: IO<Option<String>, E> = take.start().flat_map(move |h| {
                completer
                    .complete("one".to_string())
                    .product_r(h.cancel())
                    .product_r(h.join())
                    .product_r(later.try_take())
            });
            let left = run(io).succeeded().expect("succeeds");
            let took = taken.lock().unwrap().take();
            let mut seen: Vec<String> = left.into_iter().chain(took).collect();
            seen.sort();
            assert_eq!(seen, ["one".to_string()], "the value exactly once");
        }
    }

    fn get_after_a_take_never_ends_and_try_get_is_none() {
        let d = Deferred::<u32>::new();
        let (d1, d2, d3) = (d.clone(), d.clone(), d.clone());
        let io: IO<(Option<u32>, Option<u32>, Option<u32>), E> = d.complete(1).product_r(d1.take()).flat_map(move |taken| {
            d2.try_get().flat_map(move |got| {
                d3.get().timeout_to(Duration::from_millis(20), IO::pure(99)).map(move |late| (taken, got, Some(late)))
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Some(1), None, Some(99))));
    }

    fn get_waits_until_complete_and_produces_the_value() {
        let d = Deferred::<u32>::new();
        let got = Counter::new();
        let g = got.clone();
        let waiter = d.get().flat_map(move |v| g.incr_io().map_to(v));
        let io: IO<(usize, Outcome<u32, E>), E> = waiter.start().flat_map(move |h| {
            let gate = d.clone();
            eventually(move || gate.waiters() == 1)
                .map(move |()| got.get())
                .flat_map(move |before| {
                    d.complete(5)
                        .product_r(h.join())
                        .map(move |o| (before, o))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((0, Outcome::Succeeded(5))));
    }

    fn complete_wakes_every_waiting_get() {
        let d = Deferred::<u32>::new();
        let waiters: Vec<IO<FiberHandle<u32, E>, E>> = (0..8).map(|_| d.get().start()).collect();
        let counted = d.clone();
        let io: IO<Vec<Outcome<u32, E>>, E> = IO::sequence(waiters).flat_map(move |handles| {
            eventually(move || counted.waiters() == 8)
                .product_r(d.complete(3))
                .product_r(IO::traverse(handles, |h| h.join()))
        });
        assert_eq!(run(io), Outcome::Succeeded(vec![Outcome::Succeeded(3); 8]));
    }

    fn get_after_complete_produces_the_value_at_once_every_time() {
        let d = Deferred::<String>::new();
        let (d1, d2) = (d.clone(), d.clone());
        let io: IO<(String, String), E> = d
            .complete("v".to_string())
            .product_r(d1.get())
            .flat_map(move |a| d2.get().map(move |b| (a, b)));
        assert_eq!(run(io), Outcome::Succeeded(("v".to_string(), "v".to_string())));
        assert_eq!(d.waiters(), 0);
    }

    fn try_get_is_none_before_complete_and_the_value_after() {
        let d = Deferred::<u32>::new();
        let (d1, d2) = (d.clone(), d.clone());
        let io: IO<(Option<u32>, Option<u32>), E> = d
            .try_get()
            .flat_map(move |before| {
                d1.complete(9)
                    .product_r(d2.try_get())
                    .map(move |after| (before, after))
            });
        assert_eq!(run(io), Outcome::Succeeded((None, Some(9))));
    }

    fn completing_twice_gives_already_completed_with_the_second_value_and_the_first_stays() {
        let d = Deferred::<u32>::new();
        let (d1, d2) = (d.clone(), d.clone());
        let io: IO<(Result<(), AlreadyCompleted<u32>>, Result<(), AlreadyCompleted<u32>>, u32), E> =
            d.complete(1).flat_map(move |first| {
                d1.complete(2).flat_map(move |second| d2.get().map(move |v| (first, second, v)))
            });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Ok(()), Err(AlreadyCompleted(2)), 1))
        );
    }

    fn of_many_fibers_completing_at_once_exactly_one_succeeds_and_its_value_stays() {
        let d = Deferred::<u32>::new();
        let completers: Vec<IO<Result<(), AlreadyCompleted<u32>>, E>> =
            (0..16u32).map(|i| IO::cede().product_r(d.complete(i))).collect();
        let io: IO<(Vec<Result<(), AlreadyCompleted<u32>>>, u32), E> =
            IO::par_sequence(completers).flat_map(move |results| d.get().map(move |v| (results, v)));
        let (results, value) = run(io).succeeded().expect("succeeds");
        let winners: Vec<u32> = (0..16u32).filter(|i| results[*i as usize].is_ok()).collect();
        assert_eq!(winners, [value], "exactly one completion wins: {results:?}");
        for (i, r) in results.iter().enumerate() {
            if i as u32 != value {
                assert_eq!(r, &Err(AlreadyCompleted(i as u32)));
            }
        }
    }

    fn a_canceled_get_leaves_no_waiter_behind_and_the_deferred_still_works() {
        let d = Deferred::<u32>::new();
        let (counted, after) = (d.clone(), d.clone());
        let io: IO<(Outcome<u32, E>, usize, u32), E> = d.get().start().flat_map(move |h| {
            eventually(move || counted.waiters() == 1)
                .product_r(h.cancel())
                .product_r(h.join())
                .flat_map(move |o| {
                    let left = after.waiters();
                    after
                        .complete(4)
                        .product_r(after.get())
                        .map(move |v| (o, left, v))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 0, 4)));
    }

    fn canceling_one_waiter_leaves_the_others_waiting_and_they_get_the_value() {
        let d = Deferred::<u32>::new();
        let (d1, d2, d3) = (d.clone(), d.clone(), d.clone());
        let io: IO<(Outcome<u32, E>, usize, Outcome<u32, E>, Outcome<u32, E>), E> =
            IO::sequence(vec![d.get().start(), d.get().start(), d.get().start()])
                .flat_map(move |handles| {
                    let [a, b, c]: [FiberHandle<u32, E>; 3] =
                        handles.try_into().expect("three handles");
                    eventually(move || d1.waiters() == 3)
                        .product_r(b.cancel())
                        .flat_map(move |()| {
                            let left = d2.waiters();
                            d3.complete(8).product_r(a.join()).flat_map(move |oa| {
                                b.join().flat_map(move |ob| {
                                    c.join().map(move |oc| (oa, left, ob, oc))
                                })
                            })
                        })
                });
        assert_eq!(
            run(io),
            Outcome::Succeeded((
                Outcome::Succeeded(8),
                2,
                Outcome::Canceled,
                Outcome::Succeeded(8)
            ))
        );
    }

    fn a_get_that_loses_a_race_leaves_no_waiter_behind() {
        let d = Deferred::<u32>::new();
        let counted = d.clone();
        let io: IO<spindle_core::Either<u32, ()>, E> =
            d.get().race(IO::sleep(Duration::from_millis(2)));
        assert_eq!(run(io), Outcome::Succeeded(spindle_core::Either::Right(())));
        assert_eq!(counted.waiters(), 0);
    }

    fn many_canceled_gets_leave_no_waiter_behind() {
        let d = Deferred::<u32>::new();
        let (counted, after) = (d.clone(), d.clone());
        let getters: Vec<IO<FiberHandle<u32, E>, E>> = (0..50).map(|_| d.get().start()).collect();
        let io: IO<usize, E> = IO::sequence(getters).flat_map(move |handles| {
            eventually(move || counted.waiters() == 50)
                .product_r(IO::traverse(handles, |h| h.cancel()))
                .map(move |_| after.waiters())
        });
        assert_eq!(run(io), Outcome::Succeeded(0));
    }
}
