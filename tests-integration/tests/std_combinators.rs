//! The standard library's combinators over several programs and scopes:
//! `race_all`, `par_sequence_n`, `Resource::par_zip`, `IO::memoize` and
//! `IO::cancelable`. Losers and canceled parts are finalized exactly once,
//! before the combinator returns.

// Tests spell out the nested outcome types they expect.
#![allow(clippy::type_complexity)]

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::{CountDownLatch, Deferred, IO, Outcome, UIO};
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
        let (started, canceled) = (Counter::new(), Counter::new());
        let mut programs: Vec<IO<u32, E>> = (0..6)
            .map(|_| {
                started
                    .incr_io()
                    .product_r(IO::never())
                    .on_cancel(canceled.incr_io())
            })
            .collect();
        programs.insert(0, IO::sleep(ms(2)).product_r(IO::raise_error("boom".to_string())));
        let io = IO::par_sequence_n(nz(3), programs);
        assert_eq!(run(io), Outcome::Errored("boom".to_string()));
        // Each program that started (took a permit, possibly one given back
        // by the failure or by a canceled sibling) was canceled once.
        assert_eq!(canceled.get(), started.get());
    }

    fn par_sequence_n_of_no_programs_produces_an_empty_vec() {
        assert_eq!(run(IO::<u32, E>::par_sequence_n(nz(2), Vec::new())), Outcome::Succeeded(vec![]));
    }
}
