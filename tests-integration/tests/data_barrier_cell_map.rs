//! `CyclicBarrier` (n fibers meet, then all go on; the barrier resets),
//! `AtomicCell` (updates that run effects, one writer at a time) and
//! `MapRef` (a shared cell per key).

mod common;

use common::{Counter, Log, eventually, rt_test, yield_after_every_step};
use spindle_core::error::InvalidParties;
use spindle_core::{AtomicCell, CyclicBarrier, IO, MapRef, Outcome, UIO};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type E = String;

/// The outcomes of two fibers.
type TwoOutcomes = (Outcome<(), E>, Outcome<(), E>);

/// Before, during, taken out, and the length afterwards.
type Seen = (Option<String>, Option<String>, Option<String>, usize);

/// Waits until `n` fibers wait at `barrier`.
fn waiting_at(barrier: &CyclicBarrier, n: usize) -> IO<(), E> {
    let barrier = barrier.clone();
    eventually(move || barrier.waiting() == n)
}

/// Whether `io` is still running after a short while (it times out).
fn still_blocked(io: IO<(), E>) -> IO<bool, E> {
    io.map(|()| false)
        .timeout_to(Duration::from_millis(30), IO::pure(true))
}

/// Adds 10 through the writer lock and reads the value back.
fn add_ten(cell: &AtomicCell<u32>) -> IO<u32, E> {
    cell.eval_update_and_get(|n| IO::pure(n + 10))
}

/// Counts programs inside a region at once, and the most ever seen.
#[derive(Clone, Default)]
struct Inside {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Inside {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

rt_test! {
    // ----- CyclicBarrier ----------------------------------------------------

    fn a_barrier_holds_every_fiber_until_the_last_party_arrives() {
        let barrier = CyclicBarrier::new(3).unwrap();
        let passed = Counter::new();
        let (b, p) = (barrier.clone(), passed.clone());
        let io: IO<usize, E> = IO::replicate(2, move || b.wait().product_r(p.incr_io()).start())
            .flat_map({
                let barrier = barrier.clone();
                let passed = passed.clone();
                move |fibers| {
                    waiting_at(&barrier, 2)
                        .map(move |()| assert_eq!(passed.get(), 0, "nobody passes before the third"))
                        .product_r(barrier.wait())
                        .product_r(IO::traverse(fibers, |f| f.join_with_never()))
                }
            })
            .map(move |_| passed.get());
        assert_eq!(run(io), Outcome::Succeeded(2));
        assert_eq!(barrier.waiting(), 0);
    }

    fn a_barrier_resets_after_each_round() {
        let barrier = CyclicBarrier::new(2).unwrap();
        let rounds = Counter::new();
        let (b, r) = (barrier.clone(), rounds.clone());
        // Two fibers meet three times.
        let party = move |b: CyclicBarrier, r: Counter| -> IO<Vec<()>, E> {
            IO::replicate(3, move || b.wait().product_r(r.incr_io()))
        };
        let other = party(b.clone(), r.clone());
        let io = other.start().flat_map(move |fiber| {
            party(b, r).product_r(fiber.join_with_never())
        });
        assert!(run(io).is_succeeded());
        assert_eq!(rounds.get(), 6);
        assert_eq!(barrier.waiting(), 0);
    }

    fn a_canceled_waiter_no_longer_counts_toward_the_round() {
        let barrier = CyclicBarrier::new(2).unwrap();
        let b = barrier.clone();
        let io: IO<(bool, Outcome<(), E>), E> = b.wait::<E>().start().flat_map({
            let barrier = barrier.clone();
            move |first| {
                waiting_at(&barrier, 1)
                    .product_r(first.cancel())
                    .product_r(first.join())
                    .flat_map(move |first_outcome| {
                        assert_eq!(barrier.waiting(), 0, "the canceled waiter left");
                        // One more arrival does not complete the round now.
                        let b2 = barrier.clone();
                        still_blocked(barrier.wait()).flat_map(move |blocked| {
                            // Two new arrivals do.
                            let b3 = b2.clone();
                            b2.wait::<E>()
                                .start()
                                .flat_map(move |f| b3.wait().product_r(f.join_with_never()))
                                .map(move |()| (blocked, first_outcome))
                        })
                    })
            }
        });
        assert_eq!(run(io), Outcome::Succeeded((true, Outcome::Canceled)));
        assert_eq!(barrier.waiting(), 0);
    }

    fn a_barrier_of_one_party_never_blocks() {
        let barrier = CyclicBarrier::new(1).unwrap();
        let b = barrier.clone();
        let io: UIO<Vec<()>> = IO::replicate(3, move || b.wait());
        assert_eq!(run(io), Outcome::Succeeded(vec![(), (), ()]));
    }

    fn a_wait_canceled_at_any_step_leaves_a_barrier_that_still_completes_its_rounds() {
        for steps in 0..30 {
            let barrier = CyclicBarrier::new(2).unwrap();
            let rt = rt_with_config(yield_after_every_step());
            // A partner that arrives concurrently, so that the cancellation
            // lands before, during and after the release of the round.
            let (b1, b2) = (barrier.clone(), barrier.clone());
            let io: IO<TwoOutcomes, E> = b1
                .wait::<E>()
                .timeout_to(Duration::from_millis(20), IO::unit())
                .start()
                .flat_map(move |partner| {
                    common::cancel_after(steps, b2.wait())
                        .flat_map(move |canceled| partner.join().map(move |p| (canceled, p)))
                });
            let (canceled, partner) = rt.run(io).succeeded().expect("the test program succeeds");
            assert!(canceled.is_succeeded() || canceled.is_canceled(), "{steps}: {canceled:?}");
            assert!(partner.is_succeeded(), "{steps}: {partner:?}");
            assert_eq!(barrier.waiting(), 0, "{steps}: a canceled or timed-out waiter left");
            // The barrier still works: a full round goes through.
            let (b3, b4) = (barrier.clone(), barrier.clone());
            let round: IO<(), E> = b3
                .wait::<E>()
                .start()
                .flat_map(move |f| b4.wait().product_r(f.join_with_never()));
            assert_eq!(rt.run(round.timeout_to(Duration::from_secs(5), IO::raise_error("stuck".into()))), Outcome::Succeeded(()), "{steps}");
        }
    }

    // ----- AtomicCell ---------------------------------------------------------

    fn eval_updates_of_an_atomic_cell_never_overlap() {
        let cell = AtomicCell::new(0u64);
        let inside = Inside::default();
        let (c, i) = (cell.clone(), inside.clone());
        let io: IO<u64, E> = IO::par_traverse((0..20).collect::<Vec<u32>>(), move |_| {
            let i = i.clone();
            c.eval_update(move |n| {
                i.enter();
                // Suspends while holding the cell: others must wait.
                IO::sleep(Duration::from_micros(200)).map(move |()| {
                    i.leave();
                    n + 1
                })
            })
        })
        .product_r(cell.get());
        assert_eq!(run(io), Outcome::Succeeded(20));
        assert_eq!(inside.peak.load(Ordering::SeqCst), 1);
    }

    fn a_failed_eval_modify_leaves_the_value_and_frees_the_cell() {
        let cell = AtomicCell::new(String::from("before"));
        let c = cell.clone();
        let io: IO<(Result<u32, E>, String), E> = cell
            .eval_modify(|_| IO::<(String, u32), E>::raise_error("boom".into()))
            .attempt()
            .flat_map(move |r| {
                c.eval_get_and_update(|s| IO::pure(s + "+after"))
                    .flat_map(move |_| c.get().map(move |s| (r, s)))
            });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Err("boom".to_string()), "before+after".to_string()))
        );
    }

    fn a_canceled_eval_update_leaves_the_value_and_frees_the_cell() {
        let cell = AtomicCell::new(1u32);
        let (c, entered) = (cell.clone(), Counter::new());
        let e = entered.clone();
        let io: IO<u32, E> = c
            .eval_update(move |n| e.incr_io::<E>().product_r(IO::never()).map(move |()| n + 100))
            .start()
            .flat_map(move |fiber| {
                let entered = entered.clone();
                eventually(move || entered.get() == 1)
                    .product_r(fiber.cancel())
                    .product_r(cell.update(|n| *n += 1))
                    .product_r(cell.get())
            });
        assert_eq!(run(io), Outcome::Succeeded(2));
    }

    fn an_eval_update_canceled_at_any_step_stores_all_or_nothing_and_frees_the_cell() {
        for steps in 0..30 {
            let cell = AtomicCell::new(0u32);
            let rt = rt_with_config(yield_after_every_step());
            let c = cell.clone();
            let update = c
                .eval_update(|n| IO::<(), E>::cede().product_r(IO::cede()).map(move |()| n + 1))
                .product_r(IO::unit());
            let outcome = rt.run(common::cancel_after(steps, update)).succeeded().expect("the canceler succeeds");
            let value = rt.run(cell.get::<E>()).succeeded().unwrap();
            match outcome {
                Outcome::Succeeded(()) => assert_eq!(value, 1, "{steps}"),
                Outcome::Canceled => assert!(value <= 1, "{steps}: {value}"),
                other => panic!("{steps}: {other:?}"),
            }
            // The cell is free: another writer gets in at once.
            let next = add_ten(&cell);
            assert_eq!(rt.run(next.timeout_to(Duration::from_secs(5), IO::raise_error("stuck".into()))), Outcome::Succeeded(value + 10), "{steps}");
        }
    }

    fn set_on_an_atomic_cell_waits_for_the_eval_update_in_progress() {
        let cell = AtomicCell::new(0u32);
        let log: Log<&'static str> = Log::new();
        let entered = Counter::new();
        let (c, l, e) = (cell.clone(), log.clone(), entered.clone());
        let io: IO<u32, E> = c
            .eval_update(move |n| {
                e.incr_io()
                    .product_r(IO::sleep(Duration::from_millis(20)))
                    .product_r(l.record("update stored"))
                    .map(move |()| n + 1)
            })
            .start()
            .flat_map({
                let (cell, log) = (cell.clone(), log.clone());
                move |fiber| {
                    let entered = entered.clone();
                    eventually(move || entered.get() == 1)
                        .product_r(cell.set(10))
                        .product_r(log.record("set"))
                        .product_r(fiber.join_with_never())
                        .product_r(cell.get())
                }
            });
        assert_eq!(run(io), Outcome::Succeeded(10), "the set came after and stays");
        assert_eq!(log.events(), ["update stored", "set"]);
    }

    fn modify_and_eval_update_and_get_produce_their_results() {
        let cell = AtomicCell::new(vec![1, 2]);
        let c = cell.clone();
        let io: IO<(usize, Vec<i32>), E> = cell
            .modify(|v| {
                v.push(3);
                v.len()
            })
            .flat_map(move |len| {
                c.eval_update_and_get(|mut v| {
                    v.reverse();
                    IO::pure(v)
                })
                .map(move |v| (len, v))
            });
        assert_eq!(run(io), Outcome::Succeeded((3, vec![3, 2, 1])));
    }

    // ----- MapRef -------------------------------------------------------------

    fn a_map_ref_key_starts_absent_and_none_removes_it() {
        let map: MapRef<u32, String> = MapRef::new();
        let (k, m) = (map.at(7), map.clone());
        let io: IO<Seen, E> = k
            .get()
            .flat_map({
                let k = k.clone();
                move |before| {
                    k.set(Some("seven".into()))
                        .product_r(k.get())
                        .map(move |during| (before, during))
                }
            })
            .flat_map(move |(before, during)| {
                k.get_and_set(None)
                    .map(move |taken| (before, during, taken, m.len()))
            });
        assert_eq!(
            run(io),
            Outcome::Succeeded((None, Some("seven".into()), Some("seven".into()), 0))
        );
        assert!(map.is_empty());
    }

    fn concurrent_updates_of_many_keys_of_a_sharded_map_ref_are_all_kept() {
        let map: MapRef<u32, u64> = MapRef::sharded(NonZeroUsize::new(4).unwrap());
        let m = map.clone();
        // 8 keys, 25 increments each, all in parallel.
        let io: IO<Vec<u32>, E> = IO::par_traverse((0..200u32).collect(), move |i| {
            m.at(i % 8).update(|n| *n = Some(n.unwrap_or(0) + 1))
        })
        .product_r(map.keys())
        .map(|mut keys| {
            keys.sort_unstable();
            keys
        });
        assert_eq!(run(io), Outcome::Succeeded((0..8).collect()));
        let m = map.clone();
        let counts: IO<Vec<Option<u64>>, E> = IO::traverse((0..8).collect(), move |k| m.at(k).get());
        assert_eq!(run(counts), Outcome::Succeeded(vec![Some(25); 8]));
        assert_eq!(map.shards(), 4);
    }

    fn modify_on_a_key_ref_produces_its_result_atomically() {
        let map: MapRef<&'static str, u32> = MapRef::new();
        let k = map.at("n");
        let io: IO<Vec<u32>, E> = IO::replicate(3, move || {
            k.modify(|n| {
                let next = n.unwrap_or(0) + 1;
                *n = Some(next);
                next
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(vec![1, 2, 3]));
    }
}

#[test]
fn a_barrier_of_zero_parties_is_refused() {
    assert_eq!(CyclicBarrier::new(0).map(|_| ()), Err(InvalidParties));
    assert!(InvalidParties.to_string().contains("at least 1"));
}
