//! `IO::from_callback` and `IO::never`: the suspension protocol seen from user code.
//!
//! A callback may be called during registration (synchronously), later from
//! another thread, more than once (only the first call counts), through a
//! clone, or never (the fiber can then never finish, which `try_run`
//! reports). A finalizer returned by registration is for cancellation only.

mod common;

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::{Counter, DropCounter, HANG_LIMIT, Log, RunError, rt_test, within};
use spindle_core::{Callback, IO, Outcome, UIO};

/// A slot where a registration can leave its callback for the test.
type Slot<A, E> = Arc<Mutex<Option<Callback<A, E>>>>;

rt_test! {
    fn registration_runs_when_the_program_runs_not_when_it_is_built() {
        let registrations = Counter::new();
        let r = registrations.clone();
        let io: IO<u8, ()> = IO::from_callback(move |cb| {
            r.incr();
            cb.succeed(1);
            None
        });
        assert_eq!(registrations.get(), 0);
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(registrations.get(), 1);
    }

    fn a_callback_called_before_registration_returns_resumes_the_fiber() {
        let accepted: Log<bool> = Log::new();
        let a = accepted.clone();
        let io: IO<u32, String> = IO::from_callback(move |cb| {
            a.push(cb.succeed(7));
            None
        })
        .map(|x| x * 6);
        assert_eq!(run(io), Outcome::Succeeded(42));
        assert_eq!(accepted.events(), [true]);
    }

    fn a_callback_can_fail_the_fiber_with_an_error() {
        let io: IO<u32, String> = IO::from_callback(|cb| {
            cb.fail("refused".to_string());
            None
        });
        assert_eq!(run(io), Outcome::Errored("refused".to_string()));
        let handled: IO<u32, String> = IO::from_callback(|cb: Callback<u32, String>| {
            cb.complete(Err("late".to_string()));
            None
        })
        .handle_error(|e| e.len() as u32);
        assert_eq!(run(handled), Outcome::Succeeded(4));
    }

    fn a_fiber_suspended_and_resumed_a_thousand_times_from_another_thread_ends_with_the_right_result() {
        // One helper thread completes every callback the fiber registers,
        // with the number of callbacks it has completed so far.
        let (callbacks, inbox) = std::sync::mpsc::channel::<Callback<u64, ()>>();
        let helper = thread::spawn(move || {
            let mut completed = 0u64;
            for cb in inbox {
                completed += 1;
                assert!(cb.succeed(completed), "each callback is called once");
            }
            completed
        });
        let rounds = IO::tail_rec((0u64, 0u64), move |(round, sum)| {
            if round == 1_000 {
                return IO::pure(std::ops::ControlFlow::Break(sum));
            }
            let callbacks = callbacks.clone();
            IO::from_callback(move |cb| {
                callbacks.send(cb).expect("the helper thread waits");
                None
            })
            .map(move |n| std::ops::ControlFlow::Continue((round + 1, sum + n)))
        });
        let outcome = within(HANG_LIMIT, move || run(rounds)).expect("the fiber hung");
        assert_eq!(outcome, Outcome::Succeeded(500_500));
        // The program (and with it the last sender) is gone with the fiber.
        assert_eq!(helper.join().unwrap(), 1_000);
    }

    fn a_callback_called_later_from_another_thread_resumes_the_fiber() {
        let io: IO<u32, String> = IO::from_callback(|cb| {
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                cb.succeed(5);
            });
            None
        })
        .flat_map(|x| IO::delay(move || x + 1));
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded(6)));
    }

    fn an_error_from_another_thread_reaches_the_handler() {
        let io: IO<u32, String> = IO::from_callback(|cb| {
            thread::spawn(move || cb.complete(Err("remote".to_string())));
            None
        })
        .map(|x: u32| x + 1)
        .handle_error(|e| e.len() as u32 * 100);
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded(600)));
    }

    fn a_callback_called_twice_during_registration_keeps_the_first_value() {
        let accepted: Log<bool> = Log::new();
        let a = accepted.clone();
        let io: IO<&str, ()> = IO::from_callback(move |cb| {
            a.push(cb.succeed("first"));
            a.push(cb.succeed("second"));
            a.push(cb.complete(Err(())));
            None
        });
        assert_eq!(run(io), Outcome::Succeeded("first"));
        assert_eq!(accepted.events(), [true, false, false]);
    }

    fn a_callback_called_twice_from_another_thread_keeps_the_first_value() {
        let accepted: Log<bool> = Log::new();
        let a = accepted.clone();
        let io: IO<&str, &str> = IO::from_callback(move |cb| {
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                a.push(cb.succeed("first"));
                a.push(cb.fail("second"));
            });
            None
        });
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded("first")));
        // The second call may come after the fiber finished; wait for it.
        let deadline = std::time::Instant::now() + HANG_LIMIT;
        while accepted.events().len() < 2 && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(accepted.events(), [true, false]);
    }

    fn a_clone_of_the_callback_called_from_a_second_thread_resumes_the_fiber() {
        let io: IO<u32, ()> = IO::from_callback(|cb| {
            let clone = cb.clone();
            drop(cb);
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                clone.succeed(11);
            });
            None
        });
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded(11)));
    }

    fn racing_clones_resume_the_fiber_exactly_once_with_the_winners_value() {
        for _ in 0..100 {
            let accepted: Log<u32> = Log::new();
            let a = accepted.clone();
            let io: IO<u32, ()> = IO::from_callback(move |cb| {
                let start = Arc::new(Barrier::new(2));
                for id in 0..2u32 {
                    let (cb, a, start) = (cb.clone(), a.clone(), start.clone());
                    thread::spawn(move || {
                        start.wait();
                        if cb.succeed(id) {
                            a.push(id);
                        }
                    });
                }
                None
            });
            let outcome = within(HANG_LIMIT, move || run(io)).expect("the fiber was resumed");
            // Both threads are done once a second push cannot come: wait for
            // the winner's push, which happens right after its call returned.
            let deadline = std::time::Instant::now() + HANG_LIMIT;
            while accepted.events().is_empty() && std::time::Instant::now() < deadline {
                thread::yield_now();
            }
            let winners = accepted.events();
            assert_eq!(winners.len(), 1, "exactly one call was accepted: {winners:?}");
            assert_eq!(outcome, Outcome::Succeeded(winners[0]));
        }
    }

    fn a_stale_callback_of_an_earlier_suspension_is_ignored() {
        let stale: Slot<u32, ()> = Arc::new(Mutex::new(None));
        let accepted: Log<bool> = Log::new();
        let (s1, s2, a) = (stale.clone(), stale.clone(), accepted.clone());
        let io: IO<(u32, u32), ()> = IO::from_callback(move |cb: Callback<u32, ()>| {
            *s1.lock().unwrap() = Some(cb.clone());
            cb.succeed(1);
            None
        })
        .flat_map(move |first| {
            IO::from_callback(move |cb: Callback<u32, ()>| {
                let old = s2.lock().unwrap().take().expect("first callback kept");
                a.push(old.succeed(99));
                thread::spawn(move || cb.succeed(2));
                None
            })
            .map(move |second| (first, second))
        });
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded((1, 2))));
        assert_eq!(accepted.events(), [false], "the stale callback was refused");
    }

    fn a_callback_called_after_the_fiber_finished_returns_false() {
        let kept: Slot<u32, ()> = Arc::new(Mutex::new(None));
        let k = kept.clone();
        let io: IO<u32, ()> = IO::from_callback(move |cb: Callback<u32, ()>| {
            *k.lock().unwrap() = Some(cb.clone());
            cb.succeed(1);
            None
        });
        assert_eq!(run(io), Outcome::Succeeded(1));
        let late = kept.lock().unwrap().take().expect("callback kept");
        assert!(!late.succeed(2));
    }

    fn many_suspensions_in_a_row_each_resume_once() {
        let io: IO<u64, ()> = IO::tail_rec(0u64, |i| {
            IO::from_callback(move |cb| {
                if i % 2 == 0 {
                    cb.succeed(i + 1);
                } else {
                    thread::spawn(move || cb.succeed(i + 1));
                }
                None
            })
            .map(|n| if n == 200 { std::ops::ControlFlow::Break(n) } else { std::ops::ControlFlow::Continue(n) })
        });
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded(200)));
    }

    fn a_finalizer_is_not_run_when_the_callback_completes_during_registration() {
        let finalized = Counter::new();
        let dropped = Counter::new();
        let (f, guard) = (finalized.clone(), DropCounter(dropped.clone()));
        let io: IO<u8, ()> = IO::from_callback(move |cb| {
            cb.succeed(3);
            Some(IO::delay(move || {
                let _keep = &guard;
                f.incr();
            }))
        });
        assert_eq!(run(io), Outcome::Succeeded(3));
        assert_eq!(finalized.get(), 0, "the finalizer did not run");
        assert_eq!(dropped.get(), 1, "the finalizer was dropped exactly once");
    }

    fn a_finalizer_is_not_run_when_the_callback_completes_from_another_thread() {
        let finalized = Counter::new();
        let dropped = Counter::new();
        let (f, guard) = (finalized.clone(), DropCounter(dropped.clone()));
        let io: IO<u8, ()> = IO::from_callback(move |cb| {
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10));
                cb.succeed(4);
            });
            Some(IO::delay(move || {
                let _keep = &guard;
                f.incr();
            }))
        });
        assert_eq!(within(HANG_LIMIT, move || run(io)), Some(Outcome::Succeeded(4)));
        assert_eq!(finalized.get(), 0, "the finalizer did not run");
        assert_eq!(dropped.get(), 1, "the finalizer was dropped exactly once");
    }

    fn a_callback_dropped_during_registration_means_the_program_never_finishes() {
        let io: IO<u8, ()> = IO::from_callback(|cb| {
            drop(cb);
            None
        });
        assert_eq!(within(HANG_LIMIT, move || try_run(io)), Some(Err(RunError::Deadlock)));
    }

    fn a_callback_dropped_later_on_another_thread_means_the_program_never_finishes() {
        let io: IO<u8, ()> = IO::from_callback(|cb| {
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                drop(cb);
            });
            None
        });
        assert_eq!(within(HANG_LIMIT, move || try_run(io)), Some(Err(RunError::Deadlock)));
    }

    fn dropping_an_uncalled_callback_frees_the_suspended_fiber() {
        let dropped = Counter::new();
        let guard = DropCounter(dropped.clone());
        let io: IO<u8, ()> = IO::from_callback(|cb: Callback<u8, ()>| {
            drop(cb);
            None
        })
        .map(move |x| {
            let _keep = &guard;
            x
        });
        assert_eq!(within(HANG_LIMIT, move || try_run(io)), Some(Err(RunError::Deadlock)));
        assert_eq!(dropped.get(), 1, "the pending continuation was dropped exactly once");
    }

    fn never_never_finishes() {
        assert_eq!(within(HANG_LIMIT, || try_run(UIO::<u8>::never())), Some(Err(RunError::Deadlock)));
        let after_never: IO<u8, ()> = IO::unit().product_r(IO::never()).map(|x: u8| x + 1);
        assert_eq!(within(HANG_LIMIT, move || try_run(after_never)), Some(Err(RunError::Deadlock)));
    }

    fn try_run_reports_a_program_that_finishes_normally() {
        assert_eq!(try_run(IO::<u8, ()>::pure(1)), Ok(Outcome::Succeeded(1)));
        let io: IO<u8, ()> = IO::from_callback(|cb| {
            thread::spawn(move || cb.succeed(2));
            None
        });
        assert_eq!(within(HANG_LIMIT, move || try_run(io)), Some(Ok(Outcome::Succeeded(2))));
    }
}
