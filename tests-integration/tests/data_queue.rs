//! `Queue` in its five kinds: bounded, unbounded, dropping, circular buffer
//! and synchronous. FIFO order; a full bounded queue makes offers wait; a
//! canceled `offer` or `take` loses no element and duplicates none; a
//! bounded queue never holds more than its capacity; a canceled offer never
//! enqueued; a closed queue refuses offers and drains what is left. Nothing
//! is set aside for a woken fiber: the fiber that runs first takes the
//! element or place, `len`, `try_take` and `try_offer` agree, and under
//! storms of short timeouts and cancellation the fibers that run keep
//! being served.

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, TestRuntime, eventually, rt_test, storm};
use spindle_core::error::InvalidCapacity;
use spindle_core::{IO, IORuntime, Outcome, Queue};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type E = String;

/// Takes everything buffered now, in order.
fn drain(q: &Queue<u32>) -> IO<Vec<u32>, E> {
    let q = q.clone();
    IO::tail_rec(Vec::new(), move |mut acc: Vec<u32>| {
        q.try_take().map(move |next| match next {
            Some(x) => {
                acc.push(x);
                std::ops::ControlFlow::Continue(acc)
            }
            None => std::ops::ControlFlow::Break(acc),
        })
    })
}

/// Takes everything buffered now, in order (of a queue of `u64`).
fn drain_u64(q: &Queue<u64>) -> IO<Vec<u64>, E> {
    let q = q.clone();
    IO::tail_rec(Vec::new(), move |mut acc: Vec<u64>| {
        q.try_take().map(move |next| match next {
            Some(x) => {
                acc.push(x);
                std::ops::ControlFlow::Continue(acc)
            }
            None => std::ops::ControlFlow::Break(acc),
        })
    })
}

/// Waits until `n` fibers wait in `take`.
/// What a storm of offers and takes left behind.
struct Stormed {
    /// The elements whose offers completed.
    offered: Vec<u64>,
    /// The elements takes completed with.
    taken: Vec<u64>,
    /// How many elements offers were started with (ids `0..attempted`).
    attempted: u64,
}

/// 400 offerers of fresh ids and 300 takers on `q`, each operation under
/// a 0-2 ms timeout, some canceled at random (`common::storm`), on `rt`;
/// fails unless at least 1,000 takes completed (the design that reserved
/// elements and places for woken fibers completed a few hundred takes a
/// second here).
fn storm_offers_and_takes<R: TestRuntime>(rt: &R, q: &Queue<u64>) -> Stormed {
    const OFFERERS: u64 = 400;
    const TAKERS: u64 = 300;
    const MIN_TAKEN: usize = 1_000;
    let offered = Arc::new(Mutex::new(Vec::new()));
    let taken = Arc::new(Mutex::new(Vec::new()));
    let ids = Arc::new(AtomicU64::new(0));
    let storm = {
        let (q, offered, taken, ids) = (q.clone(), offered.clone(), taken.clone(), ids.clone());
        storm::storm::<E, _>(OFFERERS + TAKERS, move |fiber, _| {
            let (q, offered, taken) = (q.clone(), offered.clone(), taken.clone());
            if fiber < OFFERERS {
                let x = ids.fetch_add(1, Ordering::Relaxed);
                // Recorded exactly when the offer completed: a completed
                // `poll` hands its value on.
                IO::uncancelable(move |poll| {
                    poll.apply(q.offer(x))
                        .map(move |()| offered.lock().unwrap().push(x))
                })
            } else {
                IO::uncancelable(move |poll| {
                    poll.apply(q.take())
                        .map(move |x| taken.lock().unwrap().push(x))
                })
            }
        })
    };
    assert_eq!(
        rt.block_on(storm).expect("block_on"),
        Outcome::Succeeded(())
    );
    let (offered, taken) = (
        offered.lock().unwrap().clone(),
        taken.lock().unwrap().clone(),
    );
    assert!(
        taken.len() >= MIN_TAKEN,
        "{} takes completed in {:?} ({} offers): the queue stopped serving the fibers that run",
        taken.len(),
        storm::window(),
        offered.len()
    );
    Stormed {
        offered,
        taken,
        attempted: ids.load(Ordering::Relaxed),
    }
}

fn takers_waiting(q: &Queue<u32>, n: usize) -> IO<(), E> {
    let q = q.clone();
    eventually(move || q.waiting_takers() == n)
}

/// Waits until `n` fibers wait in `offer`.
fn offerers_waiting(q: &Queue<u32>, n: usize) -> IO<(), E> {
    let q = q.clone();
    eventually(move || q.waiting_offerers() == n)
}

/// Offers each element in order.
fn offer_all(q: &Queue<u32>, elements: Vec<u32>) -> IO<Vec<()>, E> {
    let q = q.clone();
    IO::traverse(elements, move |x| q.offer(x))
}

rt_test! {
    fn a_bounded_queue_of_capacity_usize_max_takes_elements_without_reserving_room_for_them() {
        let q = Queue::<u32>::bounded(usize::MAX).expect("valid");
        let io = offer_all(&q, (0..1000).collect()).product_r(drain(&q));
        assert_eq!(run(io), Outcome::Succeeded((0..1000).collect()));
    }

    fn a_bounded_dropping_or_circular_queue_of_capacity_zero_is_invalid_capacity() {
        assert_eq!(Queue::<u32>::bounded(0).err(), Some(InvalidCapacity));
        assert_eq!(Queue::<u32>::dropping(0).err(), Some(InvalidCapacity));
        assert_eq!(Queue::<u32>::circular_buffer(0).err(), Some(InvalidCapacity));
        assert!(Queue::<u32>::bounded(1).is_ok());
    }

    fn every_kind_of_queue_hands_out_elements_in_fifo_order() {
        let queues = [
            Queue::<u32>::unbounded(),
            Queue::bounded(10).expect("valid"),
            Queue::dropping(10).expect("valid"),
            Queue::circular_buffer(10).expect("valid"),
        ];
        for q in queues {
            let io = offer_all(&q, vec![3, 1, 4, 1, 5]).product_r(drain(&q));
            assert_eq!(run(io), Outcome::Succeeded(vec![3, 1, 4, 1, 5]), "{q:?}");
            assert!(q.is_empty());
        }
    }

    fn len_counts_the_buffered_elements() {
        let q = Queue::<u32>::unbounded();
        assert!(run(offer_all(&q, vec![1, 2, 3])).is_succeeded());
        assert_eq!(q.len(), 3);
        assert_eq!(run(q.take::<E>()), Outcome::Succeeded(1));
        assert_eq!(q.len(), 2);
    }

    fn take_waits_while_the_queue_is_empty_and_gets_the_next_offer() {
        let q = Queue::<u32>::unbounded();
        let (taker, offerer) = (q.clone(), q.clone());
        let taken = Counter::new();
        let t = taken.clone();
        let io: IO<(usize, Outcome<u32, E>), E> = taker
            .take()
            .flat_map(move |x| t.incr_io().map_to(x))
            .start()
            .flat_map(move |h| {
                takers_waiting(&offerer, 1)
                    .map(move |()| taken.get())
                    .flat_map(move |before| {
                        offerer.offer(6).product_r(h.join()).map(move |o| (before, o))
                    })
            });
        assert_eq!(run(io), Outcome::Succeeded((0, Outcome::Succeeded(6))));
    }

    fn try_take_of_an_empty_queue_is_none() {
        let q = Queue::<u32>::unbounded();
        assert_eq!(run(q.try_take::<E>()), Outcome::Succeeded(None));
    }

    fn waiting_takers_are_woken_in_fifo_order() {
        // Each offer wakes one waiting taker, the one that waits longest;
        // nothing else takes, so the woken one gets the element. (Several
        // offers in a row wake several takers, which may then run, and
        // take, in any order: whoever runs first wins.)
        let q = Queue::<u32>::unbounded();
        let (offerer, tq) = (q.clone(), q.clone());
        let io: IO<Vec<Outcome<u32, E>>, E> = IO::traverse(vec![1, 2, 3], move |n| {
            // Each taker waits before the next one starts.
            let counted = tq.clone();
            tq.take().start().flat_map(move |h| takers_waiting(&counted, n).map_to(h))
        })
        .flat_map(move |handles| {
            IO::traverse(handles.into_iter().zip([10, 20, 30]).collect(), move |(h, x)| {
                offerer.offer(x).product_r(h.join())
            })
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded(vec![
                Outcome::Succeeded(10),
                Outcome::Succeeded(20),
                Outcome::Succeeded(30)
            ])
        );
    }

    fn a_bounded_offer_waits_while_the_queue_is_full_and_goes_on_after_a_take() {
        let q = Queue::<u32>::bounded(2).expect("valid");
        let (third, taker, rest) = (q.clone(), q.clone(), q.clone());
        let offered = Counter::new();
        let (o, before_take, after_take) = (offered.clone(), offered.clone(), offered.clone());
        let io: IO<(usize, u32, usize, Vec<u32>), E> = offer_all(&q, vec![1, 2]).flat_map(move |_| {
            third.offer::<E>(3).product_r(o.incr_io()).start().flat_map(move |h| {
                offerers_waiting(&taker, 1).map(move |()| before_take.get()).flat_map(move |before| {
                    taker.take().flat_map(move |first| {
                        h.join_void().map(move |()| (before, first, after_take.get()))
                    })
                })
            })
        })
        .flat_map(move |(before, first, after)| {
            drain(&rest).map(move |left| (before, first, after, left))
        });
        assert_eq!(run(io), Outcome::Succeeded((0, 1, 1, vec![2, 3])));
    }

    fn try_offer_to_a_full_bounded_queue_is_false_and_changes_nothing() {
        let q = Queue::<u32>::bounded(1).expect("valid");
        let q1 = q.clone();
        let io: IO<(bool, bool), E> = q
            .try_offer(1)
            .flat_map(move |a| q1.try_offer(2).map(move |b| (a, b)));
        assert_eq!(run(io), Outcome::Succeeded((true, false)));
        assert_eq!(run(drain(&q)), Outcome::Succeeded(vec![1]));
    }

    fn a_dropping_queue_drops_new_elements_while_full() {
        let q = Queue::<u32>::dropping(2).expect("valid");
        let q1 = q.clone();
        let io = offer_all(&q, vec![1, 2, 3]).product_r(q1.try_offer(4)).flat_map({
            let q = q.clone();
            move |accepted| drain(&q).map(move |left| (accepted, left))
        });
        assert_eq!(run(io), Outcome::Succeeded((false, vec![1, 2])));
    }

    fn a_circular_buffer_drops_the_oldest_element_while_full() {
        let q = Queue::<u32>::circular_buffer(3).expect("valid");
        let io = offer_all(&q, vec![1, 2, 3, 4, 5]).product_r(drain(&q));
        assert_eq!(run(io), Outcome::Succeeded(vec![3, 4, 5]));
    }

    fn an_unbounded_queue_never_makes_an_offer_wait() {
        let q = Queue::<u32>::unbounded();
        let io = offer_all(&q, (0..10_000).collect()).product_r(drain(&q));
        assert_eq!(run(io), Outcome::Succeeded((0..10_000).collect()));
    }

    fn a_synchronous_offer_waits_for_a_taker_and_buffers_nothing() {
        let q = Queue::<u32>::synchronous();
        let (offerer, taker) = (q.clone(), q.clone());
        let offered = Counter::new();
        let o = offered.clone();
        let io: IO<(usize, usize, u32, usize), E> = offerer
            .offer::<E>(5)
            .product_r(o.incr_io())
            .start()
            .flat_map(move |h| {
                offerers_waiting(&taker, 1).flat_map(move |()| {
                    let (before, buffered) = (offered.get(), taker.len());
                    taker.take().flat_map(move |x| {
                        h.join_void().map(move |()| (before, buffered, x, offered.get()))
                    })
                })
            });
        assert_eq!(run(io), Outcome::Succeeded((0, 0, 5, 1)));
    }

    fn a_synchronous_take_waits_for_an_offerer() {
        let q = Queue::<u32>::synchronous();
        let (taker, offerer) = (q.clone(), q.clone());
        let io: IO<Outcome<u32, E>, E> = taker.take().start().flat_map(move |h| {
            takers_waiting(&offerer, 1).product_r(offerer.offer(8)).product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(8)));
    }

    fn try_offer_to_a_synchronous_queue_without_a_taker_is_false() {
        let q = Queue::<u32>::synchronous();
        assert_eq!(run(q.try_offer::<E>(1)), Outcome::Succeeded(false));
        assert_eq!(run(q.try_take::<E>()), Outcome::Succeeded(None));
    }

    fn try_take_of_a_synchronous_queue_takes_from_a_waiting_offerer() {
        let q = Queue::<u32>::synchronous();
        let (offerer, taker) = (q.clone(), q.clone());
        let io: IO<(Option<u32>, Outcome<(), E>), E> = offerer.offer(4).start().flat_map(move |h| {
            offerers_waiting(&taker, 1)
                .product_r(taker.try_take())
                .flat_map(move |x| h.join().map(move |o| (x, o)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Some(4), Outcome::Succeeded(()))));
    }

    fn many_producers_and_consumers_exchange_every_element_exactly_once() {
        const PER_FIBER: u32 = if cfg!(miri) { 10 } else { 250 };
        for q in [
            Queue::<u32>::bounded(4).expect("valid"),
            Queue::<u32>::unbounded(),
            Queue::<u32>::synchronous(),
        ] {
            let producers = q.clone();
            let consumers = q.clone();
            let produce = IO::<(), E>::par_traverse((0..4u32).collect(), move |p| {
                let q = producers.clone();
                IO::traverse((0..PER_FIBER).collect(), move |i| {
                    q.offer(p * PER_FIBER + i).product_r(IO::cede())
                })
                .void()
            });
            let consume = IO::<Vec<u32>, E>::par_traverse((0..4u32).collect(), move |_| {
                let q = consumers.clone();
                IO::replicate(PER_FIBER as usize, move || q.take())
            });
            let io = produce.both(consume).map(|(_, taken)| taken);
            let mut taken: Vec<u32> = run(io).succeeded().expect("succeeds").into_iter().flatten().collect();
            taken.sort_unstable();
            assert_eq!(taken, (0..4 * PER_FIBER).collect::<Vec<_>>(), "{q:?}");
            assert!(q.is_empty());
        }
    }

    fn a_bounded_queue_keeps_serving_the_fibers_that_run_while_woken_ones_time_out() {
        // Offers and takes of a bounded queue, each under a 0-2 ms timeout,
        // some canceled at random (`common::storm`): the fibers that run
        // must keep getting elements and places (the design that reserved
        // them for woken fibers completed a few hundred takes a second
        // here). Every element taken was offered, and taken once; what was
        // offered and not taken is left, and `len`, `try_take` and
        // `try_offer` agree on it.
        const CAPACITY: usize = 16;
        let q = Queue::<u64>::bounded(CAPACITY).expect("valid");
        let rt = rt();
        let Stormed { offered, taken, .. } = storm_offers_and_takes(&rt, &q);
        // Quiet now: what is left is counted by `len` and taken by
        // `try_take`, and `try_offer` fills exactly the rest.
        let held = q.len();
        let left = rt.block_on(drain_u64(&q)).expect("block_on").succeeded().expect("drains");
        assert_eq!(left.len(), held, "try_take agrees with len");
        let fills: IO<Vec<bool>, E> = IO::traverse((0..=CAPACITY as u64).collect(), {
            let q = q.clone();
            move |i| q.try_offer(u64::MAX - i)
        });
        let fills = rt.block_on(fills).expect("block_on").succeeded().expect("fills");
        assert_eq!(fills.iter().filter(|ok| **ok).count(), CAPACITY, "try_offer agrees with len");
        assert!(!fills[CAPACITY], "a full queue refuses");
        assert_eq!(q.len(), CAPACITY);
        // Conservation: taken once each, and offered = taken + left.
        let taken_set: HashSet<u64> = taken.iter().copied().collect();
        assert_eq!(taken_set.len(), taken.len(), "an element was taken twice");
        let mut out: Vec<u64> = taken.into_iter().chain(left).collect();
        let mut offered = offered;
        out.sort_unstable();
        offered.sort_unstable();
        assert_eq!(out, offered, "offered elements = taken + left");
    }

    fn a_synchronous_queue_keeps_serving_the_fibers_that_run_while_woken_ones_time_out() {
        // As above, through a synchronous queue. Every element taken was
        // taken once, and every completed offer's element was taken or is
        // left (handed over to takers that were all canceled before they
        // ran); a take may also have the element of an offer that was
        // canceled after that take claimed it (`Queue::synchronous`).
        let q = Queue::<u64>::synchronous();
        let rt = rt();
        let Stormed {
            offered,
            taken,
            attempted,
        } = storm_offers_and_takes(&rt, &q);
        let held = q.len();
        let left = rt.block_on(drain_u64(&q)).expect("block_on").succeeded().expect("drains");
        assert_eq!(left.len(), held, "try_take agrees with len");
        assert_eq!(q.waiting_offerers(), 0);
        let out: Vec<u64> = taken.into_iter().chain(left).collect();
        let out_set: HashSet<u64> = out.iter().copied().collect();
        assert_eq!(out_set.len(), out.len(), "an element came out twice");
        assert!(out.iter().all(|x| *x < attempted), "an element nobody offered came out");
        let lost: Vec<u64> = offered.into_iter().filter(|x| !out_set.contains(x)).collect();
        assert!(lost.is_empty(), "completed offers whose elements were lost: {lost:?}");
    }

    fn a_take_canceled_while_waiting_takes_nothing() {
        let q = Queue::<u32>::unbounded();
        let (taker, later) = (q.clone(), q.clone());
        let io: IO<(Outcome<u32, E>, Vec<u32>), E> = taker.take().start().flat_map(move |h| {
            takers_waiting(&later, 1)
                .product_r(h.cancel())
                .product_r(h.join())
                .flat_map(move |o| {
                    offer_all(&later, vec![1, 2]).product_r(drain(&later)).map(move |left| (o, left))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, vec![1, 2])));
    }

    fn an_element_offered_to_a_waiting_taker_that_is_then_canceled_is_not_lost() {
        // The offer of 7 wakes the waiting taker; the cancel arrives
        // before the taker runs again. The element ends up either taken by
        // that taker or first in the queue, exactly once.
        let q = Queue::<u32>::unbounded();
        let (taker, offerer, rest) = (q.clone(), q.clone(), q.clone());
        let io: IO<(Outcome<u32, E>, Vec<u32>), E> = taker.take().start().flat_map(move |h| {
            takers_waiting(&offerer, 1)
                .product_r(offerer.offer(7))
                .product_r(h.cancel())
                .product_r(offerer.offer(8))
                .product_r(h.join())
                .flat_map(move |o| drain(&rest).map(move |left| (o, left)))
        });
        let (outcome, left) = run(io).succeeded().expect("succeeds");
        match outcome {
            Outcome::Succeeded(7) => assert_eq!(left, [8]),
            Outcome::Canceled => assert_eq!(left, [7, 8], "still first in line"),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn the_wake_up_of_a_canceled_woken_taker_goes_to_the_next_waiting_taker() {
        let (first, second, left) = run(offered_to_a_canceled_taker()).succeeded().expect("succeeds");
        match first {
            Outcome::Succeeded(7) => {
                assert_eq!(second, Outcome::Succeeded(0));
                assert_eq!(left, Vec::<u32>::new());
            }
            Outcome::Canceled => {
                assert_eq!(second, Outcome::Succeeded(7), "woken in its place");
                assert_eq!(left, [0]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    fn an_offer_canceled_while_waiting_offers_nothing() {
        let q = Queue::<u32>::bounded(1).expect("valid");
        let (offerer, rest) = (q.clone(), q.clone());
        let io: IO<(Outcome<(), E>, Vec<u32>), E> = q.offer(1).product_r(offerer.offer(2).start()).flat_map(move |h| {
            offerers_waiting(&rest, 1)
                .product_r(h.cancel())
                .product_r(h.join())
                .flat_map(move |o| drain(&rest).map(move |left| (o, left)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, vec![1])));
    }

    fn a_synchronous_offer_canceled_while_waiting_offers_nothing() {
        let q = Queue::<u32>::synchronous();
        let (offerer, taker) = (q.clone(), q.clone());
        let io: IO<(Outcome<(), E>, Option<u32>), E> = offerer.offer(2).start().flat_map(move |h| {
            offerers_waiting(&taker, 1)
                .product_r(h.cancel())
                .product_r(h.join())
                .flat_map(move |o| taker.try_take().map(move |x| (o, x)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, None)));
    }

    fn an_offer_canceled_after_a_take_made_room_for_it_has_enqueued_nothing() {
        // A full bounded queue [1], an offer of 2 waiting; a take makes room
        // and the offer is canceled before (or after) it runs again. Its
        // element is in the queue exactly when the offer completed.
        let q = Queue::<u32>::bounded(1).expect("valid");
        let (offerer, taker, rest) = (q.clone(), q.clone(), q.clone());
        let io: IO<(u32, Outcome<(), E>, Vec<u32>), E> = q.offer(1).product_r(offerer.offer::<E>(2).start()).flat_map(move |h| {
            offerers_waiting(&taker, 1)
                .product_r(taker.take())
                .flat_map(move |first| {
                    h.cancel()
                        .product_r(h.join())
                        .flat_map(move |o| drain(&rest).map(move |left| (first, o, left)))
                })
        });
        let (first, outcome, left) = run(io).succeeded().expect("succeeds");
        assert_eq!(first, 1);
        match outcome {
            Outcome::Canceled => assert_eq!(left, Vec::<u32>::new(), "a canceled offer enqueued its element"),
            Outcome::Succeeded(()) => assert_eq!(left, [2]),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn a_bounded_queue_never_holds_more_than_its_capacity_while_a_woken_taker_is_canceled() {
        // bounded(1): 7 is offered to a waiting taker (woken), then a
        // second element is offered without waiting, then the taker is
        // canceled. 7 is the queue's until a take has it: unless the taker
        // ran first, the second offer finds no room, and the queue never
        // holds two.
        let q = Queue::<u32>::bounded(1).expect("valid");
        let (taker, offerer, rest) = (q.clone(), q.clone(), q.clone());
        let io: IO<(Outcome<u32, E>, bool, usize, Vec<u32>), E> = taker.take().start().flat_map(move |h| {
            takers_waiting(&offerer, 1)
                .product_r(offerer.offer(7))
                .product_r(offerer.try_offer(8))
                .flat_map(move |accepted| {
                    h.cancel().product_r(h.join()).flat_map(move |o| {
                        let held = rest.len();
                        drain(&rest).map(move |left| (o, accepted, held, left))
                    })
                })
        });
        let (outcome, accepted, held, left) = run(io).succeeded().expect("succeeds");
        assert!(held <= 1, "a bounded(1) queue held {held} elements");
        let mut seen = left.clone();
        if let Outcome::Succeeded(x) = outcome {
            seen.push(x);
        }
        seen.sort_unstable();
        let expected: Vec<u32> = if accepted { vec![7, 8] } else { vec![7] };
        assert_eq!(seen, expected, "every element exactly once ({outcome:?}, left {left:?})");
    }

    fn len_never_exceeds_the_capacity_of_a_bounded_queue_under_canceled_takers() {
        const ROUNDS: u32 = if cfg!(miri) { 5 } else { 200 };
        let q = Queue::<u32>::bounded(2).expect("valid");
        let (rounds_q, rest) = (q.clone(), q.clone());
        let io: IO<(usize, Vec<u32>, Vec<u32>), E> = IO::traverse((0..ROUNDS).collect(), move |i| {
            let q = rounds_q.clone();
            let (offerer, counted) = (q.clone(), q.clone());
            // A waiting taker, an element offered to it, a cancel racing its
            // resumption, and two offers that must not overflow.
            q.take::<E>().start().flat_map(move |h| {
                takers_waiting(&counted, 1)
                    .product_r(offerer.offer(3 * i))
                    .product_r(offerer.try_offer(3 * i + 1))
                    .product_r(offerer.try_offer(3 * i + 2))
                    .product_r(h.cancel())
                    .product_r(h.join())
                    .flat_map(move |o| {
                        let held = counted.len();
                        let q = counted.clone();
                        // Empty the queue for the next round.
                        drain(&q).map(move |left| (held, o.succeeded(), left))
                    })
            })
        })
        .map(|rounds| {
            let max_held = rounds.iter().map(|(held, _, _)| *held).max().unwrap_or(0);
            let taken = rounds.iter().filter_map(|(_, taken, _)| *taken).collect();
            let left = rounds.into_iter().flat_map(|(_, _, left)| left).collect();
            (max_held, taken, left)
        })
        .flat_map(move |r| drain(&rest).map(move |_| r));
        let (max_held, taken, left) = run(io).succeeded().expect("succeeds");
        assert!(max_held <= 2, "a bounded(2) queue held {max_held} elements");
        let mut all: Vec<u32> = taken.into_iter().chain(left).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "an element came out twice");
        for i in 0..ROUNDS {
            assert!(all.contains(&(3 * i)), "element {} lost", 3 * i);
        }
    }

    fn canceled_waiting_offers_offer_nothing_and_the_others_arrive_once() {
        let q = Queue::<u32>::bounded(2).expect("valid");
        let (oq, tq, rest) = (q.clone(), q.clone(), q.clone());
        let io: IO<(Vec<u32>, Option<u32>), E> = offer_all(&q, vec![100, 101])
            .product_r(IO::traverse((0..10u32).collect(), move |i| {
                // Each offer is waiting before the next one starts.
                let counted = oq.clone();
                oq.offer::<E>(i)
                    .start()
                    .flat_map(move |h| offerers_waiting(&counted, i as usize + 1).map_to(h))
            }))
            .flat_map(move |offerers| {
                let (keep, cancel): (Vec<_>, Vec<_>) =
                    offerers.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
                IO::traverse(cancel, |(_, h)| h.cancel())
                    .product_r(IO::replicate(7, move || tq.take()))
                    .flat_map(move |taken| {
                        IO::traverse(keep, |(_, h)| h.join_void())
                            .product_r(rest.try_take())
                            .map(move |extra| (taken, extra))
                    })
            });
        // Waiting offerers are woken in arrival order, but one woken for a
        // place puts its element in when it runs: two woken at once (here
        // by two takes in a row) may complete in either order. Each offer's
        // element sits where its offer completed.
        let (mut taken, extra) = run(io).succeeded().expect("succeeds");
        assert_eq!(taken[..2], [100, 101]);
        taken[2..].sort_unstable();
        assert_eq!((taken, extra), (vec![100, 101, 0, 2, 4, 6, 8], None));
    }
}

/// The first taker's outcome, the second taker's, and what is left queued.
type TwoTakers = (Outcome<u32, E>, Outcome<u32, E>, Vec<u32>);

/// Two takers wait; 7 is offered (waking the first taker) and the first
/// taker is canceled; then 0 is offered.
fn offered_to_a_canceled_taker() -> IO<TwoTakers, E> {
    let q = Queue::<u32>::unbounded();
    let (t1, t2, offerer, rest) = (q.clone(), q.clone(), q.clone(), q);
    t1.take().start().flat_map(move |first| {
        takers_waiting(&offerer, 1)
            .product_r(t2.take().start())
            .flat_map(move |second| {
                takers_waiting(&offerer, 2)
                    .product_r(offerer.offer(7))
                    .product_r(first.cancel())
                    .product_r(first.join())
                    .flat_map(move |o1| {
                        offerer
                            .offer(0)
                            .product_r(second.join())
                            .flat_map(move |o2| drain(&rest).map(move |left| (o1, o2, left)))
                    })
            })
    })
}

#[test]
fn on_the_single_threaded_executor_a_woken_taker_canceled_before_it_runs_passes_its_wake_up_to_the_next_taker()
 {
    // Deterministic order: the offer of 7 wakes the first taker and the
    // cancel is requested before that taker runs again; the second taker,
    // woken in its place, takes 7.
    assert_eq!(
        spindle_exec_single::SingleThreaded::new()
            .expect("an executor")
            .block_on(offered_to_a_canceled_taker())
            .expect("block_on"),
        Outcome::Succeeded((Outcome::Canceled, Outcome::Succeeded(7), vec![0]))
    );
}

#[test]
fn on_the_single_threaded_executor_a_woken_taker_canceled_before_it_runs_leaves_the_element_first_in_line()
 {
    let q = Queue::<u32>::unbounded();
    let (taker, offerer, rest) = (q.clone(), q.clone(), q);
    let io: IO<(Outcome<u32, E>, Vec<u32>), E> = taker.take().start().flat_map(move |h| {
        IO::cede()
            .product_r(offerer.offer(7))
            .product_r(h.cancel())
            .product_r(offerer.offer(8))
            .product_r(h.join())
            .flat_map(move |o| drain(&rest).map(move |left| (o, left)))
    });
    assert_eq!(
        spindle_exec_single::SingleThreaded::new()
            .expect("an executor")
            .block_on(io)
            .expect("block_on"),
        Outcome::Succeeded((Outcome::Canceled, vec![7, 8]))
    );
}

/// A small deterministic generator (xorshift), one per fiber of the storm.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `io` as a fiber canceled after `cedes` turns, or joined when `cedes` is
/// `None`; `()` either way (what it did, it recorded itself).
fn attempt(io: IO<(), E>, cedes: Option<u64>) -> IO<(), E> {
    io.start().flat_map(move |h| match cedes {
        Some(n) => IO::traverse((0..n).collect(), |_| IO::cede())
            .product_r(h.cancel())
            .product_r(h.join())
            .void(),
        None => h.join().void(),
    })
}

#[test]
fn under_a_cancel_storm_a_bounded_queue_keeps_its_capacity_and_every_completed_offer_arrives_exactly_once()
 {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    const CAPACITY: usize = 8;
    const PRODUCERS: u64 = 8;
    const CONSUMERS: u64 = 8;
    const PER_PRODUCER: u64 = if cfg!(miri) { 20 } else { 400 };

    let q = Queue::<u64>::bounded(CAPACITY).expect("valid");
    let offered = Arc::new(Mutex::new(Vec::<u64>::new()));
    let taken = Arc::new(Mutex::new(Vec::<u64>::new()));
    let max_held = Arc::new(AtomicUsize::new(0));
    let producers_done = Arc::new(AtomicUsize::new(0));
    let stop_watching = Arc::new(AtomicBool::new(false));

    let observe = {
        let (q, max_held) = (q.clone(), max_held.clone());
        move || {
            max_held.fetch_max(q.len(), Ordering::Relaxed);
        }
    };

    let producers = {
        let (q, offered, observe, done) = (
            q.clone(),
            offered.clone(),
            observe.clone(),
            producers_done.clone(),
        );
        IO::<(), E>::par_traverse((0..PRODUCERS).collect(), move |p| {
            let (q, offered, observe, done) =
                (q.clone(), offered.clone(), observe.clone(), done.clone());
            let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (p + 1);
            IO::traverse((0..PER_PRODUCER).collect(), move |i| {
                let x = p * PER_PRODUCER + i;
                let r = next_random(&mut seed);
                let cancel = (r % 3 == 0).then_some((r >> 8) % 4);
                let (q, offered, observe) = (q.clone(), offered.clone(), observe.clone());
                // The record runs exactly when the offer completed: a
                // completed `poll` hands its value to the masked code.
                let offer = IO::uncancelable(move |poll| {
                    poll.apply(q.offer(x)).map(move |()| {
                        offered.lock().unwrap().push(x);
                        observe();
                    })
                });
                attempt(offer, cancel)
            })
            .map(move |_| {
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .void()
    };

    let consumers = {
        let (q, taken, observe, done) = (
            q.clone(),
            taken.clone(),
            observe.clone(),
            producers_done.clone(),
        );
        IO::<(), E>::par_traverse((0..CONSUMERS).collect(), move |c| {
            let (q, taken, observe, done) =
                (q.clone(), taken.clone(), observe.clone(), done.clone());
            let mut seed = 0xD1B5_4A32_D192_ED03 ^ (c + 1);
            IO::tail_rec((), move |()| {
                if done.load(Ordering::SeqCst) == PRODUCERS as usize && q.is_empty() {
                    return IO::pure(std::ops::ControlFlow::Break(()));
                }
                let r = next_random(&mut seed);
                // Every take is canceled after a few turns (a no-op if it
                // completed): no consumer waits forever at the end.
                let cancel = Some(r % 6);
                let (q2, taken, observe) = (q.clone(), taken.clone(), observe.clone());
                let take = IO::uncancelable(move |poll| {
                    poll.apply(q2.take()).map(move |x| {
                        taken.lock().unwrap().push(x);
                        observe();
                    })
                });
                attempt(take, cancel).map(|()| std::ops::ControlFlow::Continue(()))
            })
        })
        .void()
    };

    let watcher = {
        let (observe, stop) = (observe.clone(), stop_watching.clone());
        IO::<(), E>::tail_rec((), move |()| {
            observe();
            if stop.load(Ordering::SeqCst) {
                IO::pure(std::ops::ControlFlow::Break(()))
            } else {
                IO::cede().map(|()| std::ops::ControlFlow::Continue(()))
            }
        })
    };

    let stop = stop_watching.clone();
    let io = watcher.start().flat_map(move |w| {
        producers.both(consumers).flat_map(move |_| {
            IO::delay(move || stop.store(true, Ordering::SeqCst)).product_r(w.join_void())
        })
    });
    let rt = spindle_exec_wstp::Runtime::builder()
        .worker_threads(common::WSTP_WORKERS)
        .build()
        .expect("an executor");
    assert_eq!(rt.block_on(io).expect("block_on"), Outcome::Succeeded(()));
    let mut left = Vec::new();
    while let Some(x) = rt
        .block_on(q.try_take::<E>())
        .expect("block_on")
        .succeeded()
        .flatten()
    {
        left.push(x);
    }

    let max_held = max_held.load(Ordering::Relaxed);
    assert!(
        max_held <= CAPACITY,
        "a bounded({CAPACITY}) queue held {max_held} elements"
    );
    let offered: Vec<u64> = offered.lock().unwrap().clone();
    let mut out: Vec<u64> = taken.lock().unwrap().clone();
    out.extend(left);
    let out_set: HashSet<u64> = out.iter().copied().collect();
    assert_eq!(out_set.len(), out.len(), "an element came out twice");
    let offered_set: HashSet<u64> = offered.iter().copied().collect();
    let never_offered: Vec<u64> = out_set.difference(&offered_set).copied().collect();
    assert!(
        never_offered.is_empty(),
        "elements of canceled offers came out: {never_offered:?}"
    );
    let lost: Vec<u64> = offered_set.difference(&out_set).copied().collect();
    assert!(lost.is_empty(), "offered elements were lost: {lost:?}");
    assert!(
        offered.len() > (PRODUCERS * PER_PRODUCER / 2) as usize,
        "the storm offered too little"
    );
}

mod closing {
    use super::common::{eventually, rt_test};
    use spindle_core::error::QueueClosed;
    use spindle_core::{IO, Outcome, Queue};

    type E = String;

    rt_test! {
        fn after_close_receive_drains_what_is_left_in_order_then_sees_the_end() {
            let q = Queue::<u32>::bounded(4).expect("valid");
            let (q1, q2) = (q.clone(), q.clone());
            let io: IO<Vec<Option<u32>>, E> = IO::traverse(vec![1, 2, 3], move |x| q1.offer(x))
                .product_r(q.close())
                .product_r(IO::replicate(5, move || q2.receive()));
            assert_eq!(run(io), Outcome::Succeeded(vec![Some(1), Some(2), Some(3), None, None]));
        }

        fn an_offer_after_close_is_refused_with_its_element_given_back() {
            for q in [
                Queue::<u32>::bounded(2).expect("valid"),
                Queue::<u32>::unbounded(),
                Queue::<u32>::dropping(2).expect("valid"),
                Queue::<u32>::circular_buffer(2).expect("valid"),
                Queue::<u32>::synchronous(),
            ] {
                let (q1, q2, q3) = (q.clone(), q.clone(), q.clone());
                let io: IO<(bool, bool, Result<(), QueueClosed<u32>>, bool), E> = q.close().flat_map(move |first| {
                    q1.close().flat_map(move |second| {
                        q2.send(7).flat_map(move |sent| q3.try_offer(8).map(move |tried| (first, second, sent, tried)))
                    })
                });
                assert_eq!(run(io), Outcome::Succeeded((true, false, Err(QueueClosed(7)), false)), "{q:?}");
                assert!(q.is_closed());
                assert!(q.is_empty(), "{q:?}");
            }
        }

        fn a_receive_waiting_when_the_queue_is_closed_ends_with_none() {
            let q = Queue::<u32>::unbounded();
            let (receiver, closer) = (q.clone(), q.clone());
            let io: IO<Outcome<Option<u32>, E>, E> = receiver.receive().start().flat_map(move |h| {
                let counted = closer.clone();
                eventually(move || counted.waiting_takers() == 1)
                    .product_r(closer.close())
                    .product_r(h.join())
            });
            assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(None)));
        }

        fn a_send_waiting_for_room_when_the_queue_is_closed_gets_its_element_back() {
            let q = Queue::<u32>::bounded(1).expect("valid");
            let (sender, closer, rest) = (q.clone(), q.clone(), q.clone());
            let io: IO<(Outcome<Result<(), QueueClosed<u32>>, E>, Vec<Option<u32>>), E> =
                q.offer(1).product_r(sender.send(2).start()).flat_map(move |h| {
                    let counted = closer.clone();
                    eventually(move || counted.waiting_offerers() == 1)
                        .product_r(closer.close())
                        .product_r(h.join())
                        .flat_map(move |o| {
                            IO::replicate(2, move || rest.receive()).map(move |left| (o, left))
                        })
                });
            assert_eq!(
                run(io),
                Outcome::Succeeded((Outcome::Succeeded(Err(QueueClosed(2))), vec![Some(1), None]))
            );
        }

        fn waiting_synchronous_offers_are_what_is_left_after_close_and_are_drained() {
            let q = Queue::<u32>::synchronous();
            let (sender, closer, rest) = (q.clone(), q.clone(), q.clone());
            let io: IO<(Vec<Option<u32>>, Outcome<Result<(), QueueClosed<u32>>, E>), E> =
                sender.send(5).start().flat_map(move |h| {
                    let counted = closer.clone();
                    eventually(move || counted.waiting_offerers() == 1)
                        .product_r(closer.close())
                        .product_r(IO::replicate(2, move || rest.receive()))
                        .flat_map(move |got| h.join().map(move |o| (got, o)))
                });
            assert_eq!(
                run(io),
                Outcome::Succeeded((vec![Some(5), None], Outcome::Succeeded(Ok(()))))
            );
        }

        fn a_plain_take_still_drains_a_closed_queue() {
            let q = Queue::<u32>::unbounded();
            let (q1, q2) = (q.clone(), q.clone());
            let io: IO<(u32, Option<u32>), E> = q.offer(4).product_r(q1.close()).product_r(q1.take()).flat_map(move |x| {
                q2.try_take().map(move |rest| (x, rest))
            });
            assert_eq!(run(io), Outcome::Succeeded((4, None)));
        }
    }
}

#[test]
fn on_the_single_threaded_executor_offers_woken_one_after_another_enter_in_arrival_order() {
    // Two places freed in a row wake two waiting offers; on one thread they
    // run in the order they were woken, which is their arrival order.
    let q = Queue::<u32>::bounded(2).expect("valid");
    let (oq, tq, rest) = (q.clone(), q.clone(), q.clone());
    let io: IO<(Vec<u32>, Vec<u32>), E> = offer_all(&q, vec![100, 101])
        .product_r(IO::traverse((0..4u32).collect(), move |i| {
            let counted = oq.clone();
            oq.offer::<E>(i)
                .start()
                .flat_map(move |h| offerers_waiting(&counted, i as usize + 1).map_to(h))
        }))
        .flat_map(move |offerers| {
            IO::replicate(2, move || tq.take()).flat_map(move |first| {
                IO::replicate(4, move || rest.take()).flat_map(move |then| {
                    IO::traverse(offerers, |h| h.join_void::<E>()).map(move |_| (first, then))
                })
            })
        });
    assert_eq!(
        spindle_exec_single::SingleThreaded::new()
            .expect("an executor")
            .block_on(io)
            .expect("block_on"),
        Outcome::Succeeded((vec![100, 101], vec![0, 1, 2, 3]))
    );
}

/// A taker waits; an offer of 7 wakes it, and before it runs, the
/// offering fiber reads `len()` and takes with `try_take`: the element is
/// in the queue, for whoever runs first (nothing is set aside for the
/// woken taker). The woken taker then finds nothing, waits again, and gets
/// the next element. Gives `len()`, what `try_take` got, what the taker
/// got, and `len()` at the end.
fn a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on<R: TestRuntime>() {
    let q = Queue::<u32>::bounded(1).expect("valid");
    let (taker, offerer, counted) = (q.clone(), q.clone(), q.clone());
    let io: IO<(usize, Option<u32>, Outcome<u32, E>, usize), E> =
        taker.take().start().flat_map(move |h| {
            takers_waiting(&offerer, 1)
                .product_r(offerer.offer(7))
                .flat_map(move |()| {
                    let held = counted.len();
                    counted.try_take().flat_map(move |barged| {
                        // The woken taker runs, finds nothing and waits again.
                        takers_waiting(&counted, 1)
                            .product_r(counted.offer(8))
                            .product_r(h.join())
                            .map(move |o| (held, barged, o, counted.len()))
                    })
                })
        });
    assert_eq!(
        R::new().run(io),
        Outcome::Succeeded((1, Some(7), Outcome::Succeeded(8), 0))
    );
}

#[test]
fn a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on_single() {
    a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on::<common::Single>();
}

#[test]
fn a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on_batching() {
    a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on::<common::Batching>();
}

#[test]
fn a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on_tokio_current() {
    a_fiber_that_runs_first_takes_what_a_woken_taker_was_woken_for_on::<common::TokioCurrent>();
}

/// A full bounded(1) queue, an offer of 2 waiting; a take frees the place
/// and wakes the offerer, and before it runs, the taking fiber offers 3
/// with `try_offer`, which finds the place free (`len()` 0): nothing is set
/// aside for the woken offerer. The woken offerer then finds the queue
/// full, waits again, and puts 2 in after the next take: the elements
/// leave in the order their offers completed.
fn a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on<R: TestRuntime>() {
    let q = Queue::<u32>::bounded(1).expect("valid");
    let (offerer, taker, counted) = (q.clone(), q.clone(), q.clone());
    let io: IO<(u32, usize, bool, Vec<u32>), E> = q
        .offer(1)
        .product_r(offerer.offer::<E>(2).start())
        .flat_map(move |h| {
            offerers_waiting(&taker, 1)
                .product_r(taker.take())
                .flat_map(move |first| {
                    let held = counted.len();
                    counted.try_offer(3).flat_map(move |barged| {
                        // The woken offerer runs, finds the queue full and waits
                        // again.
                        offerers_waiting(&counted, 1)
                            .product_r(IO::replicate(2, {
                                let counted = counted.clone();
                                move || counted.take()
                            }))
                            .flat_map(move |then| {
                                h.join_void().map(move |()| (first, held, barged, then))
                            })
                    })
                })
        });
    assert_eq!(
        R::new().run(io),
        Outcome::Succeeded((1, 0, true, vec![3, 2]))
    );
}

#[test]
fn a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on_single() {
    a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on::<common::Single>();
}

#[test]
fn a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on_batching() {
    a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on::<common::Batching>();
}

#[test]
fn a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on_tokio_current() {
    a_fiber_that_runs_first_takes_the_place_a_woken_offerer_was_woken_for_on::<common::TokioCurrent>(
    );
}
