//! The two ways a wake-up of `Queue` and `Semaphore` can miss its waiter,
//! on the run-loop's minimal executor (deterministic, one queue of fibers):
//! the waiter's cancellation claimed its suspension first (the wake-up
//! comes back to the waker, which takes it apart and wakes the next
//! waiter), or the wake-up reached it and the fiber, canceled before it
//! ran, drops it (its `Drop` wakes the next waiter). Both run the
//! wake-ups' `unsafe` code, under Miri in CI.

use alloc::vec::Vec;

use crate::fiber::tests::run::rt;
use crate::stdlib::data::queue::Queue;
use crate::stdlib::data::semaphore::Semaphore;
use crate::{FiberHandle, IO, Outcome};

type E = ();

/// Two fibers' outcomes.
type Two<A> = (Outcome<A, E>, Outcome<A, E>);

/// Cedes until `condition` holds.
fn until(condition: impl Fn() -> bool + Send + Sync + 'static) -> IO<(), E> {
    let condition = alloc::sync::Arc::new(condition);
    IO::tail_rec((), move |()| {
        let condition = condition.clone();
        IO::cede().map(move |()| {
            if condition() {
                core::ops::ControlFlow::Break(())
            } else {
                core::ops::ControlFlow::Continue(())
            }
        })
    })
}

/// Two takers wait on an unbounded queue; `between(queue, first)` offers
/// 7 and cancels the first taker, in some order; then the first taker
/// must end canceled, the second must take the 7, and the queue must be
/// empty.
fn the_second_taker_gets_the_element_when(
    between: impl FnOnce(&Queue<u32>, &FiberHandle<u32, E>) -> IO<(), E> + Send + 'static,
) {
    let q = Queue::<u32>::unbounded();
    let (t1, t2, offerer, counted) = (q.clone(), q.clone(), q.clone(), q.clone());
    let io: IO<Two<u32>, E> = t1.take().start().flat_map(move |h1| {
        t2.take().start().flat_map(move |h2| {
            let waiting = counted.clone();
            until(move || waiting.waiting_takers() == 2)
                .product_r(between(&offerer, &h1))
                .product_r(h1.join())
                .flat_map(move |o1| h2.join().map(move |o2| (o1, o2)))
        })
    });
    assert_eq!(
        rt().run(io),
        Some(Outcome::Succeeded((
            Outcome::Canceled,
            Outcome::Succeeded(7)
        )))
    );
    assert!(q.is_empty());
}

#[test]
fn a_wake_up_that_a_canceled_taker_gives_back_goes_to_the_next_taker() {
    the_second_taker_gets_the_element_when(|offerer, first| {
        // The canceler claims the first taker's suspension (it is still
        // listed: its cleanup has not run) before the offer.
        first
            .cancel::<E>()
            .start()
            .product_r(IO::cede())
            .product_r(offerer.offer(7))
    });
}

#[test]
fn a_wake_up_that_a_taker_canceled_before_it_runs_drops_goes_to_the_next_taker() {
    the_second_taker_gets_the_element_when(|offerer, first| {
        // The offer reaches the first taker; its cancel is requested
        // before it runs, so it resumes into cancellation and drops the
        // wake-up.
        offerer.offer(7).product_r(first.cancel())
    });
}

#[test]
fn a_wake_up_that_an_offerer_canceled_before_it_runs_drops_goes_to_the_next_offerer() {
    let q = Queue::<u32>::bounded(1).expect("valid");
    let (o1, o2, taker, counted) = (q.clone(), q.clone(), q.clone(), q.clone());
    let io: IO<(Two<()>, u32), E> = q.offer(1).flat_map(move |()| {
        o1.offer(2).start().flat_map(move |h1| {
            o2.offer(3).start().flat_map(move |h2| {
                let waiting = counted.clone();
                until(move || waiting.waiting_offerers() == 2)
                    .product_r(taker.take())
                    .flat_map(move |first| {
                        h1.cancel()
                            .product_r(h1.join())
                            .flat_map(move |r1| h2.join().map(move |r2| ((r1, r2), first)))
                    })
            })
        })
    });
    assert_eq!(
        rt().run(io),
        Some(Outcome::Succeeded((
            (Outcome::Canceled, Outcome::Succeeded(())),
            1
        )))
    );
    assert_eq!(
        rt().run(drain(&q)),
        Some(Outcome::Succeeded(alloc::vec![3]))
    );
}

/// Takes everything buffered now, in order.
fn drain(q: &Queue<u32>) -> IO<Vec<u32>, E> {
    let q = q.clone();
    IO::tail_rec(Vec::new(), move |mut acc: Vec<u32>| {
        q.try_take().map(move |next| match next {
            Some(x) => {
                acc.push(x);
                core::ops::ControlFlow::Continue(acc)
            }
            None => core::ops::ControlFlow::Break(acc),
        })
    })
}

#[test]
fn a_wake_up_that_a_canceled_waiter_gives_back_or_drops_goes_to_the_next_waiter_of_a_semaphore() {
    // First round: the canceler claims the first waiter before the release
    // (the wake-up comes back); second: the release reaches it and its
    // cancel comes before it runs (it drops the wake-up).
    for claimed_first in [true, false] {
        let sem = Semaphore::new(1).expect("1 permit");
        let (w1, w2, counted, releaser) = (sem.clone(), sem.clone(), sem.clone(), sem.clone());
        let io: IO<Two<()>, E> = sem.acquire().flat_map(move |()| {
            w1.acquire::<E>().start().flat_map(move |h1| {
                w2.acquire::<E>().start().flat_map(move |h2| {
                    let waiting = counted.clone();
                    let canceler = h1.cancel::<E>();
                    let cancel = if claimed_first {
                        canceler
                            .start()
                            .product_r(IO::cede())
                            .product_r(releaser.release())
                    } else {
                        releaser
                            .release()
                            .flat_map(move |r| canceler.map(move |()| r))
                    };
                    until(move || waiting.waiting() == 2)
                        .product_r(cancel)
                        .flat_map(move |released| {
                            assert_eq!(released, Ok(()));
                            h1.join()
                                .flat_map(move |o1| h2.join().map(move |o2| (o1, o2)))
                        })
                })
            })
        });
        assert_eq!(
            rt().run(io),
            Some(Outcome::Succeeded((
                Outcome::Canceled,
                Outcome::Succeeded(())
            )))
        );
        assert_eq!(
            (sem.available(), sem.waiting()),
            (0, 0),
            "the second waiter holds it"
        );
    }
}
