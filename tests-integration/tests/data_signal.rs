//! `Signal`: a value that an "interrupt handler" (here a plain thread)
//! hands to a waiting fiber; fired before the wait, twice, after a
//! canceled wait, during the wait, racing a cancellation; several waiters.
//! Each test has its own `static` signal (a fresh one per executor: the
//! macro stamps a separate function per executor).

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{eventually, rt_test, within};
use spindle_core::{IO, Outcome, Signal};

type E = String;

/// Runs `f` on a new thread, as an interrupt handler would run, and waits
/// for it.
fn from_handler(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f)
        .join()
        .expect("the handler thread ends");
}

/// A program that calls `f` on a new thread (not waiting for it).
fn handler_io(f: impl FnOnce() + Send + 'static) -> IO<(), E> {
    IO::delay(move || {
        std::thread::spawn(f);
    })
}

rt_test! {
    fn a_value_signaled_before_any_wait_is_kept_and_the_next_wait_takes_it_at_once() {
        static SIG: Signal<u32> = Signal::new();
        from_handler(|| SIG.signal(5));
        assert!(SIG.is_signaled());
        assert_eq!(run(SIG.wait::<E>()), Outcome::Succeeded(5));
        assert!(!SIG.is_signaled(), "taken");
        assert_eq!((SIG.overwritten(), SIG.signaled(), SIG.waiters()), (0, 1, 0));
    }

    fn signals_fired_twice_before_a_wait_leave_the_latest_value_and_count_the_replaced_one() {
        static SIG: Signal<u32> = Signal::new();
        from_handler(|| {
            SIG.signal(1);
            SIG.signal(2);
        });
        assert_eq!(run(SIG.wait::<E>()), Outcome::Succeeded(2));
        assert_eq!((SIG.overwritten(), SIG.signaled()), (1, 2));
        assert_eq!(SIG.try_take(), None, "the replaced value is gone, counted");
    }

    fn a_signal_from_another_thread_during_the_wait_resumes_the_fiber_with_its_value() {
        static SIG: Signal<u32> = Signal::new();
        let io: IO<u32, E> = SIG.wait().start().flat_map(|waiter| {
            eventually(|| SIG.waiters() == 1)
                .product_r(handler_io(|| SIG.signal(9)))
                .product_r(waiter.join_with_never())
        });
        assert_eq!(run(io), Outcome::Succeeded(9));
        assert_eq!((SIG.waiters(), SIG.overwritten()), (0, 0));
    }

    fn a_signal_after_the_waiting_fiber_was_canceled_stays_for_the_next_wait() {
        static SIG: Signal<u32> = Signal::new();
        let io: IO<(Outcome<u32, E>, usize), E> = SIG.wait().start().flat_map(|waiter| {
            eventually(|| SIG.waiters() == 1)
                .product_r(waiter.cancel())
                .product_r(waiter.join())
                .map(|outcome| (outcome, SIG.waiters()))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 0)));
        from_handler(|| SIG.signal(4));
        assert!(SIG.is_signaled(), "kept: the canceled wait took nothing");
        assert_eq!(run(SIG.wait::<E>()), Outcome::Succeeded(4));
        assert_eq!(SIG.overwritten(), 0);
    }

    fn two_waiting_fibers_are_woken_one_per_value_oldest_first() {
        static SIG: Signal<u32> = Signal::new();
        let io: IO<(u32, u32), E> = SIG.wait().start().flat_map(|first| {
            eventually(|| SIG.waiters() == 1)
                .product_r(SIG.wait().start())
                .flat_map(move |second| {
                    eventually(|| SIG.waiters() == 2)
                        .product_r(handler_io(|| SIG.signal(1)))
                        .product_r(first.join_with_never())
                        .flat_map(move |a| {
                            // The second is still waiting: one wake-up per value.
                            IO::delay(|| SIG.waiters())
                                .flat_map(move |left| {
                                    assert_eq!(left, 1);
                                    handler_io(|| SIG.signal(2))
                                })
                                .product_r(second.join_with_never())
                                .map(move |b| (a, b))
                        })
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((1, 2)));
        assert_eq!(SIG.overwritten(), 0);
    }

    fn values_signaled_in_a_burst_reach_the_waiting_fiber_in_order_or_are_counted() {
        const N: u32 = 2_000;
        static SIG: Signal<u32> = Signal::new();
        // The fiber waits until it has the last value, recording each.
        fn collect(mut got: Vec<u32>) -> IO<Vec<u32>, E> {
            SIG.wait().flat_map(move |v| {
                got.push(v);
                if v == N { IO::pure(got) } else { collect(got) }
            })
        }
        let io = handler_io(|| {
            for v in 1..=N {
                SIG.signal(v);
                if v % 64 == 0 {
                    std::thread::yield_now();
                }
            }
        })
        .product_r(collect(Vec::new()));
        let got = run(io).succeeded().expect("succeeds");
        assert!(got.windows(2).all(|w| w[0] < w[1]), "in signal order");
        assert_eq!(got.last(), Some(&N), "the latest value is never lost");
        assert_eq!(
            got.len() as u64 + SIG.overwritten(),
            u64::from(N),
            "every value taken or counted as overwritten"
        );
        assert_eq!((SIG.signaled(), SIG.waiters()), (u64::from(N), 0));
        assert!(!SIG.is_signaled());
    }

    fn a_wait_canceled_as_the_signal_arrives_either_took_the_value_or_left_it() {
        const ROUNDS: usize = 200;
        static SIG: Signal<u32> = Signal::new();
        for round in 0..ROUNDS as u32 {
            let taken = std::sync::Arc::new(std::sync::Mutex::new(None));
            let record = taken.clone();
            // The record runs exactly when the wait returned a value.
            let wait = IO::uncancelable(move |poll| {
                poll.apply(SIG.wait::<E>()).map(move |v| {
                    *record.lock().unwrap() = Some(v);
                })
            });
            let io: IO<Option<u32>, E> = wait.start().flat_map(move |waiter| {
                handler_io(move || SIG.signal(round))
                    .product_r(waiter.cancel())
                    .product_r(waiter.join())
                    .map(|_| SIG.try_take())
            });
            let left = run(io).succeeded().expect("succeeds");
            let took = taken.lock().unwrap().take();
            // The handler thread may still be on its way: wait for it.
            let left = left.or_else(|| {
                if took.is_some() {
                    return None;
                }
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    if let Some(v) = SIG.try_take() {
                        return Some(v);
                    }
                    assert!(std::time::Instant::now() < deadline, "the signal never came");
                    std::thread::yield_now();
                }
            });
            assert_eq!(
                took.is_some() as u32 + left.is_some() as u32,
                1,
                "round {round}: taken by the wait or left for the next, exactly once ({took:?}, {left:?})"
            );
            assert_eq!(took.or(left), Some(round));
            assert_eq!(SIG.waiters(), 0, "no waiter left behind");
        }
        assert_eq!(SIG.overwritten(), 0);
    }

    fn a_woken_waiter_canceled_before_it_takes_the_value_passes_it_to_the_next_waiter() {
        const ROUNDS: usize = 100;
        static SIG: Signal<u32> = Signal::new();
        for round in 0..ROUNDS as u32 {
            let io: IO<(Outcome<u32, E>, u32), E> = SIG.wait().start().flat_map(move |first| {
                eventually(|| SIG.waiters() == 1)
                    .product_r(SIG.wait().start())
                    .flat_map(move |second| {
                        eventually(|| SIG.waiters() == 2)
                            // Signal from the fiber itself, then cancel the
                            // first waiter before (or as) it runs.
                            .product_r(IO::delay(move || SIG.signal(round)))
                            .product_r(first.cancel())
                            .product_r(first.join())
                            .flat_map(move |a| {
                                let release = match a {
                                    // The first took the value: the second
                                    // needs one of its own.
                                    Outcome::Succeeded(_) => handler_io(|| SIG.signal(u32::MAX)),
                                    _ => IO::unit(),
                                };
                                release.product_r(second.join_with_never()).map(move |b| (a, b))
                            })
                    })
            });
            let (a, b) = within(std::time::Duration::from_secs(30), move || run(io))
                .expect("the second waiter is woken (no hang)")
                .succeeded()
                .expect("succeeds");
            match a {
                Outcome::Succeeded(v) => assert_eq!((v, b), (round, u32::MAX)),
                Outcome::Canceled => assert_eq!(b, round, "the wake-up went on"),
                other => panic!("unexpected outcome {other:?}"),
            }
            assert_eq!((SIG.waiters(), SIG.is_signaled()), (0, false));
        }
        assert_eq!(SIG.overwritten(), 0);
    }
}
