//! The standard library's combinators over several programs and scopes:
//! `race_all`, `par_sequence_n`, `Resource::par_zip`, `IO::memoize` and
//! `IO::cancelable`. Losers and canceled parts are finalized exactly once,
//! before the combinator returns.

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{CountDownLatch, Deferred, ExitCase, IO, Outcome, Resource, UIO};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type E = String;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn nz(n: usize) -> core::num::NonZeroUsize {
    core::num::NonZeroUsize::new(n).expect("not 0")
}

/// A latch for `n` programs.
fn ready(n: u64) -> CountDownLatch {
    CountDownLatch::new(n).expect("a valid count")
}

/// A program that never finishes on its own; its cancellation counts on
/// `canceled`. It releases `ready` once that finalizer is in place (a fiber
/// canceled before it ever ran has no finalizer to run, so the tests that
/// count finalizers let the winner finish only once the losers are ready).
fn hanging(ready: &CountDownLatch, canceled: &Counter) -> IO<u32, E> {
    ready
        .release()
        .product_r(IO::never())
        .on_cancel(canceled.incr_io())
}

/// `io`, once every program counted by `ready` has released it.
fn once_ready<A: Send + 'static>(ready: &CountDownLatch, io: IO<A, E>) -> IO<A, E> {
    ready.wait().product_r(io)
}

/// A program that produces `value` after `after`.
fn after(after: Duration, value: u32) -> IO<u32, E> {
    IO::sleep(after).map_to(value)
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

/// A resource whose acquisition is `acquire` and whose release counts on
/// `released` (and logs the exit case).
fn counted(acquire: IO<u32, E>, released: &Counter, exits: &Log<ExitCase>) -> Resource<u32, E> {
    let (r, x) = (released.clone(), exits.clone());
    Resource::make_case(acquire, move |_, exit| {
        x.record(exit).product_r(r.incr_io())
    })
}

rt_test! {
    // ----- race_all ------------------------------------------------------------

    fn race_all_returns_the_first_to_succeed_and_cancels_every_loser_before_it_returns() {
        let (r, canceled, log) = (ready(2), Counter::new(), Log::new());
        let (c, l) = (canceled.clone(), log.clone());
        let io = IO::race_all(vec![
            hanging(&r, &canceled),
            once_ready(&r, after(ms(1), 7)),
            hanging(&r, &canceled),
        ])
        .flat_map(move |w| {
            // Both losers are finalized when `race_all` returns.
            l.record(format!("returned with {} canceled", c.get())).map_to(w)
        });
        assert_eq!(run(io), Outcome::Succeeded(7));
        assert_eq!(canceled.get(), 2);
        assert_eq!(log.events(), ["returned with 2 canceled"]);
    }

    fn race_all_fails_when_the_first_to_complete_fails_and_cancels_the_others() {
        let (r, canceled) = (ready(2), Counter::new());
        let failing = once_ready(&r, IO::sleep(ms(1)).product_r(IO::raise_error("boom".to_string())));
        let io = IO::race_all(vec![hanging(&r, &canceled), failing, hanging(&r, &canceled)]);
        assert_eq!(run(io), Outcome::Errored("boom".to_string()));
        assert_eq!(canceled.get(), 2);
    }

    fn race_all_raises_the_winners_panic_again_and_cancels_the_others() {
        let (r, canceled) = (ready(1), Counter::new());
        let panicking = once_ready(&r, IO::delay(|| -> u32 { panic!("winner panics") }));
        let io = IO::race_all(vec![panicking, hanging(&r, &canceled)]);
        assert!(run(io).is_panicked());
        assert_eq!(canceled.get(), 1);
    }

    fn race_all_passes_the_decision_on_when_the_first_to_complete_canceled_itself() {
        let io = IO::race_all(vec![
            IO::canceled().map_to(1u32),
            after(ms(5), 2),
            IO::canceled().map_to(3u32),
        ]);
        assert_eq!(run(io), Outcome::Succeeded(2));
    }

    fn race_all_is_canceled_when_every_program_canceled_itself() {
        let io = IO::race_all(vec![
            UIO::canceled().map_to(1u32),
            IO::sleep(ms(1)).product_r(IO::canceled()).map_to(2u32),
            IO::canceled().map_to(3u32),
        ]);
        assert_eq!(try_run(io), Ok(Outcome::Canceled));
    }

    fn race_all_of_no_programs_cancels_the_caller() {
        assert_eq!(try_run(IO::<u32, E>::race_all(Vec::new())), Ok(Outcome::Canceled));
    }

    fn race_all_of_one_program_is_that_program() {
        assert_eq!(run(IO::race_all(vec![after(ms(1), 4)])), Outcome::Succeeded(4));
    }

    fn race_all_runs_its_programs_concurrently() {
        // The first can only finish once the last has started.
        let gate = Deferred::<()>::new();
        let first = gate.get().map_to(1u32);
        let last = gate.complete(()).product_r(UIO::<()>::never()).map_to(3u32);
        let io = IO::race_all(vec![first, IO::never(), last]);
        assert_eq!(run(io), Outcome::Succeeded(1));
    }

    fn race_all_cancels_every_program_when_the_caller_is_canceled() {
        let (started, canceled) = (ready(3), Counter::new());
        let caller = IO::race_all(vec![
            hanging(&started, &canceled),
            hanging(&started, &canceled),
            hanging(&started, &canceled),
        ]);
        let c = canceled.clone();
        let io: IO<(Outcome<u32, E>, usize), E> = caller.start().flat_map(move |h| {
            started
                .wait()
                .product_r(h.cancel())
                .product_r(IO::delay(move || c.get()))
                .flat_map(move |seen| h.join().map(move |o| (o, seen)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 3)));
        assert_eq!(canceled.get(), 3);
    }

    // ----- par_sequence_n --------------------------------------------------------

    fn par_sequence_n_runs_at_most_n_programs_at_once_and_keeps_the_order() {
        for n in [1usize, 3, 8] {
            let concurrency = Concurrency::default();
            // The first n wait for each other inside, so that the peak is n
            // on every interleaving (later ones find the latch open).
            let first_wave = ready(n as u64);
            let programs = (0..20u64)
                .map(|i| {
                    let wave = first_wave.clone();
                    concurrency.around(
                        wave.release().product_r(once_ready(&wave, IO::sleep(ms(2)))).map_to(i),
                    )
                })
                .collect();
            let io = IO::par_sequence_n(nz(n), programs);
            assert_eq!(run(io), Outcome::Succeeded((0..20u64).collect()), "n = {n}");
            assert_eq!(concurrency.peak(), n, "n = {n}");
        }
    }

    fn par_sequence_n_fails_with_the_first_failure_and_finalizes_every_started_program_once() {
        // The others take a while (so that permits cycle whatever order the
        // programs take them in) and are canceled by the failure.
        let (started, completed, canceled) = (Counter::new(), Counter::new(), Counter::new());
        let mut programs: Vec<IO<u32, E>> = (0..6)
            .map(|_| {
                let (s, d, c) = (started.clone(), completed.clone(), canceled.clone());
                // Masked, so that a program that counts as started also
                // counts how it ended.
                IO::uncancelable(move |poll| {
                    s.incr_io().product_r(poll.apply(IO::sleep(ms(20))).guarantee_case(
                        move |outcome| match outcome {
                            Outcome::Canceled => c.incr_io(),
                            _ => d.incr_io(),
                        },
                    ))
                })
                .map_to(0)
            })
            .collect();
        programs.insert(3, IO::sleep(ms(2)).product_r(IO::raise_error("boom".to_string())));
        let io = IO::par_sequence_n(nz(3), programs);
        assert_eq!(run(io), Outcome::Errored("boom".to_string()));
        // Each program that started (took a permit) either completed or was
        // canceled, once; nothing runs after `par_sequence_n` returned.
        let (s, d, c) = (started.get(), completed.get(), canceled.get());
        assert_eq!(s, d + c, "started {s}, completed {d}, canceled {c}");
        std::thread::sleep(ms(30));
        assert_eq!((started.get(), completed.get(), canceled.get()), (s, d, c));
    }

    fn par_sequence_n_of_no_programs_produces_an_empty_vec() {
        assert_eq!(run(IO::<u32, E>::par_sequence_n(nz(2), Vec::new())), Outcome::Succeeded(vec![]));
    }

    // ----- Resource::par_zip -----------------------------------------------------

    fn par_zip_acquires_both_resources_concurrently_and_releases_each_once() {
        // The left acquisition can only finish once the right one has
        // started: sequential acquisition would never finish.
        let gate = Deferred::<()>::new();
        let (released, exits) = (Counter::new(), Log::new());
        let left = counted(gate.get().map_to(1), &released, &exits);
        let right = counted(gate.complete(()).map_to(2), &released, &exits);
        let seen = released.clone();
        let io = left
            .par_zip(right)
            .use_with(move |(a, b)| {
                // Nothing is released while the pair is in use.
                let during = seen.get();
                IO::pure((a, b, during))
            });
        assert_eq!(run(io), Outcome::Succeeded((1, 2, 0)));
        assert_eq!(released.get(), 2);
        assert_eq!(exits.events(), [ExitCase::Succeeded, ExitCase::Succeeded]);
    }

    fn par_zip_releases_the_acquired_part_when_the_other_acquisition_fails() {
        // The right acquisition fails once the left one has started (a
        // fiber canceled before it ever ran acquires nothing).
        let (released, exits, started) = (Counter::new(), Log::new(), ready(1));
        let left = counted(started.release().product_r(IO::sleep(ms(5))).map_to(1), &released, &exits);
        let right = counted(
            once_ready(&started, IO::raise_error("no".to_string())),
            &released,
            &exits,
        );
        let used = Counter::new();
        let u = used.clone();
        let io = left.par_zip(right).use_with(move |_| u.incr_io());
        assert_eq!(run(io), Outcome::Errored("no".to_string()));
        assert_eq!(used.get(), 0);
        assert_eq!(released.get(), 1);
        assert_eq!(exits.events(), [ExitCase::Errored]);
    }

    fn par_zip_releases_the_acquired_part_when_the_other_acquisition_panics() {
        let (released, exits, started) = (Counter::new(), Log::new(), ready(1));
        let left = counted(started.release().product_r(IO::sleep(ms(5))).map_to(1), &released, &exits);
        let panics = once_ready(&started, IO::delay(|| -> u32 { panic!("acquire panics") }));
        let right = counted(panics, &released, &exits);
        let io = left.par_zip(right).use_with(|_| IO::unit());
        assert!(run(io).is_panicked());
        assert_eq!(released.get(), 1);
        assert_eq!(exits.events(), [ExitCase::Panicked]);
    }

    fn par_zip_releases_every_acquired_part_when_the_user_is_canceled_while_acquiring() {
        // The left part is acquired at once; the right acquisition waits,
        // cancelably (it polls), and is never acquired.
        let (released, exits, left_in) = (Counter::new(), Log::new(), ready(1));
        let left = counted(left_in.release().map_to(1), &released, &exits);
        let r = released.clone();
        let right: Resource<u32, E> = Resource::make_full(
            |poll| poll.apply(IO::never()),
            move |_, _| r.incr_io(),
        );
        let user: IO<(), E> = left.par_zip(right).use_with(|_| IO::unit());
        let seen = released.clone();
        let io: IO<(Outcome<(), E>, usize), E> = user.start().flat_map(move |h| {
            left_in
                .wait()
                .product_r(IO::sleep(ms(2)))
                .product_r(h.cancel())
                .product_r(IO::delay(move || seen.get()))
                .flat_map(move |n| h.join().map(move |o| (o, n)))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 1)));
        assert_eq!(released.get(), 1);
        assert_eq!(exits.events(), [ExitCase::Canceled]);
    }

    fn par_zip_releases_both_parts_when_the_user_is_canceled_during_masked_acquisitions() {
        // Both acquisitions are masked: canceling the user waits for them,
        // then releases both.
        let (released, exits, started) = (Counter::new(), Log::new(), ready(2));
        let left = counted(started.release().product_r(IO::sleep(ms(10))).map_to(1), &released, &exits);
        let right = counted(started.release().product_r(IO::sleep(ms(10))).map_to(2), &released, &exits);
        let used = Counter::new();
        let u = used.clone();
        let user: IO<(), E> = left.par_zip(right).use_with(move |_| u.incr_io());
        let io: IO<Outcome<(), E>, E> = user
            .start()
            .flat_map(move |h| started.wait().product_r(h.cancel()).product_r(h.join()));
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(used.get(), 0);
        assert_eq!(released.get(), 2);
        assert_eq!(exits.events(), [ExitCase::Canceled, ExitCase::Canceled]);
    }

    fn par_zip_releases_both_parts_concurrently_and_both_even_when_one_release_fails() {
        // The left release can only finish once the right one has started.
        let gate = Deferred::<()>::new();
        let (g1, g2) = (gate.clone(), gate);
        let released = Counter::new();
        let (r1, r2) = (released.clone(), released.clone());
        let left: Resource<u32, E> = Resource::make(IO::pure(1), move |_| {
            g1.get().product_r(r1.incr_io()).product_r(IO::raise_error("left release".to_string()))
        });
        let right: Resource<u32, E> =
            Resource::make(IO::pure(2), move |_| g2.complete(()).product_r(r2.incr_io()));
        let io = left.par_zip(right).use_with(|(a, b)| IO::pure(a + b));
        assert_eq!(run(io), Outcome::Errored("left release".to_string()));
        assert_eq!(released.get(), 2);
    }

    // ----- memoize ---------------------------------------------------------------

    fn memoize_runs_the_program_once_and_shares_its_value_with_every_caller() {
        let runs = Counter::new();
        let r = runs.clone();
        let expensive: IO<u32, E> = IO::sleep(ms(2)).product_r(IO::delay(move || {
            r.incr();
            42
        }));
        let io = expensive.memoize().flat_map(|memo| {
            let callers = (0..8).map(|_| memo.get()).collect();
            IO::par_sequence(callers).flat_map(move |first| memo.get().map(move |late| (first, late)))
        });
        assert_eq!(run(io), Outcome::Succeeded((vec![42; 8], 42)));
        assert_eq!(runs.get(), 1);
    }

    fn memoize_shares_an_error_with_every_caller_without_running_again() {
        let runs = Counter::new();
        let r = runs.clone();
        let failing: IO<u32, E> = r.incr_io().product_r(IO::raise_error("once".to_string()));
        let io = failing.memoize().flat_map(|memo| {
            let again = memo.clone();
            memo.get().attempt().flat_map(move |a| again.get().attempt().map(move |b| (a, b)))
        });
        let once = Err("once".to_string());
        assert_eq!(run(io), Outcome::Succeeded((once.clone(), once)));
        assert_eq!(runs.get(), 1);
    }

    fn memoize_runs_nothing_until_the_first_get() {
        let runs = Counter::new();
        let io = runs.incr_io::<E>().memoize::<E>().void();
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(runs.get(), 0);
    }

    fn memoize_keeps_evaluating_when_the_first_caller_is_canceled_and_serves_the_next() {
        let (started, gate, runs) = (ready(1), Deferred::<()>::new(), Counter::new());
        let (s, g, r) = (started.clone(), gate.clone(), runs.clone());
        let program: IO<u32, E> = s.release().product_r(g.get()).product_r(r.incr_io()).map_to(7);
        let io: IO<(Outcome<u32, E>, u32), E> = program.memoize().flat_map(move |memo| {
            let later = memo.clone();
            memo.get().start().flat_map(move |first| {
                started
                    .wait()
                    .product_r(first.cancel())
                    .product_r(gate.complete(()))
                    .product_r(later.get())
                    .flat_map(move |v| first.join().map(move |o| (o, v)))
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 7)));
        assert_eq!(runs.get(), 1);
    }

    fn memoize_of_a_program_that_cancels_itself_cancels_every_caller() {
        let io = IO::<(), E>::canceled().map_to(1u32).memoize().flat_map(|memo| memo.get());
        assert_eq!(try_run(io), Ok(Outcome::Canceled));
    }

    fn memoize_with_shares_the_first_value_without_calling_the_factory_again() {
        let calls = Counter::new();
        let c = calls.clone();
        let io = IO::<u32, E>::memoize_with(move || {
            c.incr();
            IO::sleep(ms(1)).map_to(5)
        })
        .flat_map(|memo| IO::par_sequence((0..4).map(|_| memo.get()).collect()));
        assert_eq!(run(io), Outcome::Succeeded(vec![5; 4]));
        assert_eq!(calls.get(), 1);
    }

    fn memoize_with_evaluates_again_when_the_first_evaluation_was_canceled() {
        // The first evaluation hangs until canceled; the second produces 9.
        let (started, calls, canceled) = (ready(1), Counter::new(), Counter::new());
        let (s, c, k) = (started.clone(), calls.clone(), canceled.clone());
        let io: IO<(Outcome<u32, E>, u32), E> = IO::memoize_with(move || {
            if c.incr() == 0 {
                s.release().product_r(IO::never()).on_cancel(k.incr_io())
            } else {
                IO::pure(9)
            }
        })
        .flat_map(move |memo| {
            let later = memo.clone();
            memo.get().start().flat_map(move |first| {
                started
                    .wait()
                    .product_r(first.cancel())
                    .product_r(later.get())
                    .flat_map(move |v| first.join().map(move |o| (o, v)))
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 9)));
        assert_eq!(calls.get(), 2);
        assert_eq!(canceled.get(), 1);
    }

    fn memoize_with_keeps_evaluating_for_the_waiters_when_the_first_caller_is_canceled() {
        // Cats Effect 3.6: the evaluation goes on while a caller waits for
        // it; its side effects run once and the waiter gets its value.
        let (started, calls, effects) = (ready(1), Counter::new(), Counter::new());
        let (s, c, e) = (started.clone(), calls.clone(), effects.clone());
        let io: IO<(Outcome<u32, E>, u32), E> = IO::memoize_with(move || {
            c.incr();
            let e = e.clone();
            s.release().product_r(IO::sleep(ms(5))).product_r(IO::delay(move || {
                e.incr();
                3
            }))
        })
        .flat_map(move |memo| {
            let (waiter, watched) = (memo.clone(), memo.clone());
            memo.get().start().flat_map(move |first| {
                started.wait().product_r(waiter.get().start()).flat_map(move |waiting| {
                    waiting_callers(watched, 2)
                        .product_r(first.cancel())
                        .product_r(first.join())
                        .flat_map(move |o| waiting.join_with_never().map(move |v| (o, v)))
                })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 3)));
        assert_eq!((calls.get(), effects.get()), (1, 1), "one evaluation, its effect once");
    }

    fn memoize_with_cancels_the_evaluation_when_its_last_caller_is_canceled_and_waits_for_it() {
        // Two callers, both canceled: the evaluation is canceled with the
        // last one, whose cancellation returns after the evaluation's
        // finalizer ran; the next caller evaluates anew.
        let (started, calls, finalized) = (ready(1), Counter::new(), Counter::new());
        let (s, c, f) = (started.clone(), calls.clone(), finalized.clone());
        let io: IO<(usize, u32), E> = IO::memoize_with(move || {
            if c.incr() == 0 {
                s.release().product_r(IO::never()).on_cancel(f.incr_io())
            } else {
                IO::pure(4)
            }
        })
        .flat_map(move |memo| {
            let (second, later, watched) = (memo.clone(), memo.clone(), memo.clone());
            let seen = finalized.clone();
            memo.get().start().flat_map(move |first| {
                started.wait().product_r(second.get().start()).flat_map(move |other| {
                    waiting_callers(watched, 2)
                        .product_r(first.cancel())
                        .product_r(other.cancel())
                        .product_r(IO::delay(move || seen.get()))
                        .flat_map(move |after_cancel| later.get().map(move |v| (after_cancel, v)))
                })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((1, 4)));
        assert_eq!(calls.get(), 2);
    }

    // ----- cancelable ------------------------------------------------------------

    fn cancelable_runs_its_finalizer_on_cancel_and_waits_until_the_program_has_ended() {
        // The program cannot be canceled; only `stop` ends it.
        let (started, stop, log) = (ready(1), Deferred::<()>::new(), Log::new());
        let (s, st, l) = (started.clone(), stop.clone(), log.clone());
        let stubborn: IO<u32, E> = IO::uncancelable(move |_| {
            s.release()
                .product_r(st.get())
                .product_r(l.record("program ends".to_string()))
                .map_to(1)
        });
        let fin = log.record("fin".to_string()).product_r(stop.complete(()).void());
        let l2 = log.clone();
        let io: IO<Outcome<u32, E>, E> = stubborn.cancelable(fin).start().flat_map(move |h| {
            started
                .wait()
                .product_r(h.cancel())
                .product_r(l2.record("cancel returned".to_string()))
                .product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["fin", "program ends", "cancel returned"]);
    }

    fn cancelable_cancels_a_cancelable_program_after_its_finalizer() {
        let (started, log) = (ready(1), Log::new());
        let program: IO<u32, E> = started
            .release()
            .product_r(IO::never())
            .on_cancel(log.record("program canceled".to_string()));
        let io: IO<Outcome<u32, E>, E> = program
            .cancelable(log.record("fin".to_string()))
            .start()
            .flat_map(move |h| started.wait().product_r(h.cancel()).product_r(h.join()));
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["fin", "program canceled"]);
    }

    fn cancelable_gives_the_programs_value_or_error_and_runs_no_finalizer_without_cancel() {
        let fins = Counter::new();
        assert_eq!(run(after(ms(1), 3).cancelable(fins.incr_io())), Outcome::Succeeded(3));
        let failing = IO::<u32, E>::raise_error("no".to_string()).cancelable(fins.incr_io());
        assert_eq!(run(failing), Outcome::Errored("no".to_string()));
        assert_eq!(fins.get(), 0);
    }

    fn cancelable_cancels_the_program_even_when_the_finalizer_fails() {
        let (started, canceled) = (ready(1), Counter::new());
        let program = hanging(&started, &canceled);
        let io: IO<Outcome<u32, E>, E> = program
            .cancelable(IO::raise_error("fin fails".to_string()))
            .start()
            .flat_map(move |h| started.wait().product_r(h.cancel()).product_r(h.join()));
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(canceled.get(), 1);
    }
}

/// Waits (ceding) until `memo`'s evaluation has `n` callers waiting for it.
fn waiting_callers(memo: spindle_core::Memoized<u32, E>, n: usize) -> IO<(), E> {
    IO::tail_rec((), move |()| {
        let there = memo.waiting() == n;
        IO::cede().map_to(if there {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        })
    })
}
