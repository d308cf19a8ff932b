//! Time: `sleep`, `timeout`, `timeout_to`, `delay_by`, `timed`,
//! `monotonic` and `real_time`.
//!
//! Exact times come from `TestControl` (virtual time: a program that sleeps
//! for a day finishes at once, at exactly one day); the `rt_test!` block
//! runs the same operations on each real executor, with generous bounds.

mod common;

use common::{Counter, Log, rt_test};
use spindle_core::error::TimeoutError;
use spindle_core::{Either, IO, IORuntime, Outcome, UIO};

type E2 = ();
use spindle_exec_single::testkit::TestControl;
use std::time::{Duration, Instant};

/// An error type that a timeout can produce (through `From`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Error {
    TimedOut(Duration),
    Failed(&'static str),
}

impl From<TimeoutError> for Error {
    fn from(e: TimeoutError) -> Self {
        Error::TimedOut(e.after)
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const DAY: Duration = Duration::from_secs(86_400);

/// Runs `io` on virtual time to its outcome; panics on a deadlock.
fn virtual_run<A: Send + 'static>(io: IO<A, Error>) -> Outcome<A, Error> {
    TestControl::run(io).expect("the program completes")
}

/// The virtual time at which `io` ends, with its outcome.
fn ends_at<A: Send + 'static>(io: IO<A, Error>) -> Outcome<(A, Duration), Error> {
    virtual_run(io.flat_map(|a| IO::monotonic().map(move |t| (a, t))))
}

rt_test! {
    fn a_sleep_of_duration_max_never_ends_and_neither_panics_nor_wraps() {
        let io: IO<Either<(), &str>, E2> = IO::sleep(Duration::MAX).race(IO::sleep(Duration::from_millis(5)).map_to("short"));
        assert_eq!(run(io), Outcome::Succeeded(Either::Right("short")));
    }

    fn a_timeout_of_duration_max_lets_the_program_finish() {
        let io: IO<u32, TimeoutError> = IO::sleep(Duration::from_millis(1)).map_to(3).timeout(Duration::MAX);
        assert_eq!(run(io), Outcome::Succeeded(3));
    }

    fn sleep_suspends_for_at_least_its_duration() {
        let started = Instant::now();
        assert_eq!(run(UIO::sleep(ms(20))), Outcome::Succeeded(()));
        let took = started.elapsed();
        assert!(took >= ms(20), "{took:?}");
        assert!(took < secs(5), "{took:?}");
    }

    fn timeout_fails_with_the_timeout_error_when_the_program_is_too_slow() {
        let io = IO::sleep(secs(3600)).map_to(1u32).timeout(ms(10));
        assert_eq!(run(io), Outcome::Errored(Error::TimedOut(ms(10))));
    }

    fn timeout_gives_the_value_of_a_program_that_finishes_in_time() {
        let io: IO<u32, Error> = IO::sleep(ms(1)).map_to(7u32).timeout(secs(10));
        assert_eq!(run(io), Outcome::Succeeded(7));
    }

    fn timeout_gives_the_error_of_a_program_that_fails_in_time() {
        let io = IO::<u32, Error>::raise_error(Error::Failed("boom")).timeout(secs(10));
        assert_eq!(run(io), Outcome::Errored(Error::Failed("boom")));
    }

    fn timeout_cancels_and_finalizes_the_timed_out_program_before_it_fails() {
        let log = Log::new();
        let l = log.clone();
        let io = IO::<u32, Error>::never()
            .on_cancel(IO::sleep(ms(5)).product_r(log.record("finalized")))
            .timeout(ms(10))
            .attempt()
            .flat_map(move |r| l.record("timeout returned").map_to(r));
        assert_eq!(run(io), Outcome::Succeeded(Err(Error::TimedOut(ms(10)))));
        assert_eq!(log.events(), ["finalized", "timeout returned"]);
    }

    fn timeout_to_runs_the_fallback_after_canceling_the_program() {
        let log = Log::new();
        let io = UIO::<u32>::never()
            .on_cancel(log.record("canceled"))
            .timeout_to(ms(10), log.record("fallback").map_to(2));
        assert_eq!(run(io), Outcome::Succeeded(2));
        assert_eq!(log.events(), ["canceled", "fallback"]);
    }

    fn timeout_to_does_not_run_the_fallback_when_the_program_finishes_in_time() {
        let fallback = Counter::new();
        let io = UIO::sleep(ms(1))
            .map_to(1u32)
            .timeout_to(secs(10), fallback.incr_io().map_to(2));
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(fallback.get(), 0);
    }

    fn delay_by_runs_the_program_after_at_least_the_delay() {
        let io: IO<(Duration, Duration), Error> = IO::monotonic().flat_map(|start| {
            IO::monotonic().delay_by(ms(20)).map(move |end| (start, end))
        });
        let (start, end) = run(io).succeeded().expect("succeeds");
        assert!(end - start >= ms(20), "{:?}", end - start);
        assert!(end - start < secs(5), "{:?}", end - start);
    }

    fn timed_measures_at_least_the_time_the_program_took() {
        let io = UIO::sleep(ms(20)).map_to('x').timed();
        let (took, value) = run(io).succeeded().expect("succeeds");
        assert_eq!(value, 'x');
        assert!(took >= ms(20), "{took:?}");
        assert!(took < secs(5), "{took:?}");
    }

    fn monotonic_never_goes_backwards_across_sleeps_and_fibers() {
        let io: IO<Vec<Duration>, Error> = IO::replicate(20, || {
            IO::sleep(Duration::from_micros(50)).product_r(IO::monotonic())
        });
        let times = run(io).succeeded().expect("succeeds");
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    fn real_time_is_the_time_since_the_unix_epoch() {
        let io = UIO::real_time();
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch");
        let t = run(io).succeeded().expect("succeeds");
        let after = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch");
        assert!(before <= t && t <= after, "{before:?} <= {t:?} <= {after:?}");
    }

    // ----- deadline regions: the body runs on the caller's fiber -----

    fn the_finalizers_of_a_timed_out_body_run_exactly_once() {
        let on_cancel = Counter::new();
        let guarantee = Counter::new();
        let outcomes = Log::new();
        let o = outcomes.clone();
        let body = IO::<u32, Error>::never()
            .on_cancel(on_cancel.incr_io())
            .guarantee(guarantee.incr_io())
            .guarantee_case(move |outcome| o.record(outcome.is_canceled()));
        assert_eq!(run(body.timeout(ms(5))), Outcome::Errored(Error::TimedOut(ms(5))));
        assert_eq!(on_cancel.get(), 1);
        assert_eq!(guarantee.get(), 1);
        assert_eq!(outcomes.events(), [true], "the finalizer sees a canceled body");
    }

    fn a_masked_part_of_a_timed_out_body_finishes_before_the_deadline_takes_effect() {
        let log = Log::new();
        let (l1, l2) = (log.clone(), log.clone());
        let body = IO::<(), Error>::uncancelable(move |_| {
            IO::sleep(ms(30)).product_r(l1.record("masked part done"))
        })
        .product_r(l2.record("after the mask"))
        .product_r(IO::<u32, Error>::never());
        let io = body.timeout_to(ms(5), log.record("fallback").map_to(0));
        assert_eq!(run(io), Outcome::Succeeded(0));
        assert_eq!(log.events(), ["masked part done", "fallback"]);
    }

    fn a_timeout_inside_an_uncancelable_region_still_ends_its_body_at_the_deadline() {
        // As the child fiber of Cats Effect's timeout would be, the body is
        // cancelable by its deadline whatever masks its caller.
        let io = IO::<u32, Error>::uncancelable(|_| IO::never().timeout_to(ms(5), IO::pure(1)));
        assert_eq!(run(io), Outcome::Succeeded(1));
    }

    fn an_inner_timeout_that_expires_does_not_cancel_the_outer_region() {
        let outer_canceled = Counter::new();
        let inner = IO::<u32, Error>::never().timeout_to(ms(5), IO::pure(1));
        let outer = inner
            .flat_map(|v| IO::sleep(ms(1)).map_to(v + 1))
            .on_cancel(outer_canceled.incr_io())
            .timeout_to(secs(3600), IO::pure(100));
        assert_eq!(run(outer), Outcome::Succeeded(2));
        assert_eq!(outer_canceled.get(), 0);
    }

    fn an_outer_deadline_expiring_while_an_inner_region_runs_unwinds_both_and_runs_the_outer_fallback() {
        let log = Log::new();
        let inner = IO::<u32, Error>::never()
            .on_cancel(log.record("inner body finalized"))
            .timeout_to(secs(3600), log.record("inner fallback").map_to(1));
        let outer = inner
            .on_cancel(log.record("outer body finalized"))
            .timeout_to(ms(5), log.record("outer fallback").map_to(2));
        assert_eq!(run(outer), Outcome::Succeeded(2));
        assert_eq!(
            log.events(),
            ["inner body finalized", "outer body finalized", "outer fallback"]
        );
    }

    fn canceling_the_fiber_during_a_region_cancels_the_fiber_not_just_the_region() {
        let log = Log::new();
        let waiting = spindle_core::Deferred::<()>::new();
        let w = waiting.clone();
        let (l1, l2) = (log.clone(), log.clone());
        let body = w
            .complete::<Error>(())
            .product_r(IO::<u32, Error>::never())
            .on_cancel(log.record("body finalized"))
            .timeout_to(secs(3600), l1.record("fallback").map_to(0))
            .flat_map(move |v| l2.record("after the timeout").map_to(v));
        let program = body.start().flat_map(move |fiber| {
            waiting
                .get::<Error>()
                .product_r(fiber.cancel())
                .product_r(fiber.join())
        });
        let outcome = common::within(common::HANG_LIMIT, move || run(program)).expect("no hang");
        assert!(matches!(outcome, Outcome::Succeeded(Outcome::Canceled)), "{outcome:?}");
        assert_eq!(log.events(), ["body finalized"]);
    }

    fn a_panic_in_a_timed_body_ends_the_fiber_as_panicked_after_its_finalizers() {
        let finalized = Counter::new();
        let io = IO::<u32, Error>::delay(|| panic!("the body panicked"))
            .guarantee(finalized.incr_io())
            .timeout(secs(3600));
        assert!(run(io).is_panicked());
        assert_eq!(finalized.get(), 1);
    }

    fn a_body_that_cancels_itself_while_masked_is_canceled_when_the_mask_ends() {
        let log = Log::new();
        let l = log.clone();
        let body = IO::<(), Error>::uncancelable(move |_| {
            IO::canceled().product_r(l.record("rest of the masked part"))
        })
        .product_r(log.record("after the mask"))
        .map_to(1u32);
        let io = body.timeout_to(ms(5), log.record("fallback").map_to(0));
        assert_eq!(run(io), Outcome::Succeeded(0));
        assert_eq!(log.events(), ["rest of the masked part", "fallback"]);
    }

    fn a_body_that_never_waits_is_ended_by_its_deadline_where_it_yields() {
        // No wait arms the deadline's timer: the fiber reads the clock
        // where it yields (auto-yield), and ends the region there.
        let busy = IO::<u32, Error>::tail_rec(0u64, |i| {
            IO::delay(move || std::ops::ControlFlow::<u32, u64>::Continue(i + 1))
        });
        let io = busy.timeout_to(ms(10), IO::pure(2));
        let outcome = common::within(common::HANG_LIMIT, move || run(io)).expect("no hang");
        assert_eq!(outcome, Outcome::Succeeded(2));
    }

    // The dump lists fibers only with tracing compiled in.
    #[cfg(feature = "tracing")]
    fn a_timeout_runs_its_body_on_the_callers_fiber_without_a_child() {
        // With tracing on, every fiber that outlives a run is listed: a
        // body on a child fiber would be a second one.
        let config = spindle_core::FiberConfig::builder()
            .tracing(spindle_core::TracingMode::Cached)
            .build()
            .expect("a tracing configuration");
        let rt = rt_with_config(config);
        let dumper = rt.dumper();
        let body = IO::sleep(ms(1)).product_r(IO::delay(move || dumper().fibers.len()));
        let io: IO<usize, Error> = body.timeout(secs(3600));
        assert_eq!(rt.run(io), Outcome::Succeeded(1));
    }
}

// ----- virtual time (TestControl) -----------------------------------------------

#[test]
fn a_program_that_sleeps_for_a_day_ends_at_exactly_one_day_in_virtual_time_at_once() {
    let wall = Instant::now();
    assert_eq!(ends_at(IO::sleep(DAY)), Outcome::Succeeded(((), DAY)));
    assert!(wall.elapsed() < secs(5), "{:?}", wall.elapsed());
}

#[test]
fn consecutive_sleeps_add_up_and_concurrent_sleeps_overlap() {
    let sequential = IO::sleep(secs(3)).product_r(IO::sleep(secs(4)));
    assert_eq!(ends_at(sequential), Outcome::Succeeded(((), secs(7))));
    let concurrent = IO::sleep(secs(3)).both(IO::sleep(secs(4)));
    assert_eq!(ends_at(concurrent), Outcome::Succeeded((((), ()), secs(4))));
}

#[test]
fn timeout_fires_at_exactly_the_limit() {
    let io = IO::<u32, Error>::never().timeout(secs(5)).attempt();
    assert_eq!(
        ends_at(io),
        Outcome::Succeeded((Err(Error::TimedOut(secs(5))), secs(5)))
    );
}

#[test]
fn a_body_that_ends_before_the_deadline_leaves_no_timer_on_the_executor() {
    use spindle_exec_single::StdClock;
    let rt = spindle_exec_single::SingleThreaded::<StdClock>::builder()
        .build()
        .expect("an executor");
    let waits: IO<u32, Error> = IO::sleep(ms(1)).map_to(1u32).timeout(secs(3600));
    let ends_at_once: IO<u32, Error> = IO::delay(|| 2u32).timeout(secs(3600));
    let io = waits.flat_map(move |a| ends_at_once.map(move |b| a + b));
    assert_eq!(rt.block_on(io).expect("runs"), Outcome::Succeeded(3));
    assert_eq!(rt.metrics().timers, 0);
}

#[test]
fn timeout_returns_when_the_program_finishes_and_leaves_no_timer_behind() {
    let io: IO<u32, Error> = IO::sleep(secs(4)).map_to(1u32).timeout(secs(5));
    let mut control = TestControl::execute(io.flat_map(|v| IO::monotonic().map(move |t| (v, t))));
    control.tick_all();
    assert_eq!(control.results(), Some(&Outcome::Succeeded((1, secs(4)))));
    assert_eq!(
        control.next_interval(),
        None,
        "the timeout's timer was canceled with its fiber"
    );
}

#[test]
fn timeout_of_a_program_that_finishes_exactly_at_the_limit_is_one_or_the_other() {
    // Either side may win a tie; the result must be one of the two, never
    // both or neither.
    let io = IO::sleep(secs(5)).map_to(1u32).timeout(secs(5));
    match virtual_run(io) {
        Outcome::Succeeded(1) | Outcome::Errored(Error::TimedOut(_)) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn timeout_waits_for_the_finalizers_of_the_timed_out_program_in_virtual_time() {
    let io = IO::<u32, Error>::never()
        .on_cancel(IO::sleep(secs(2)))
        .timeout(secs(5))
        .attempt();
    assert_eq!(
        ends_at(io),
        Outcome::Succeeded((Err(Error::TimedOut(secs(5))), secs(7)))
    );
}

#[test]
fn timeout_to_switches_to_the_fallback_at_exactly_the_limit() {
    let io = IO::never().timeout_to(secs(3), IO::monotonic());
    assert_eq!(virtual_run(io), Outcome::Succeeded(secs(3)));
}

#[test]
fn timeout_of_an_uncancelable_body_gives_the_value_it_returns_after_the_deadline() {
    // Cats Effect 3.6: the body's outcome wins when its cancellation was
    // not honoured; the timeout is raised only for a canceled body.
    let body: IO<u32, Error> = IO::uncancelable(|_| IO::sleep(secs(5)).map_to(7u32));
    assert_eq!(
        ends_at(body.timeout(secs(1))),
        Outcome::Succeeded((7, secs(5)))
    );
}

#[test]
fn timeout_of_an_uncancelable_body_that_fails_after_the_deadline_gives_its_error() {
    let body: IO<u32, Error> =
        IO::uncancelable(|_| IO::sleep(secs(5)).product_r(IO::raise_error(Error::Failed("late"))));
    let io = body.timeout(secs(1)).attempt();
    assert_eq!(
        ends_at(io),
        Outcome::Succeeded((Err(Error::Failed("late")), secs(5)))
    );
}

#[test]
fn timeout_to_of_an_uncancelable_body_does_not_run_the_fallback() {
    let fallback = Counter::new();
    let body: IO<u32, Error> = IO::uncancelable(|_| IO::sleep(secs(5)).map_to(7u32));
    let io = body.timeout_to(secs(1), fallback.incr_io().map_to(0));
    assert_eq!(ends_at(io), Outcome::Succeeded((7, secs(5))));
    assert_eq!(fallback.get(), 0);
}

#[test]
fn timeout_of_a_body_that_cancels_itself_raises_the_timeout_at_the_deadline() {
    // The race is then the timer's (Cats Effect issue 3396's behaviour).
    let io = IO::<(), Error>::canceled()
        .map_to(1u32)
        .timeout(secs(3))
        .attempt();
    assert_eq!(
        ends_at(io),
        Outcome::Succeeded((Err(Error::TimedOut(secs(3))), secs(3)))
    );
}

#[test]
fn timeout_and_forget_raises_at_the_deadline_while_an_uncancelable_body_finishes_in_the_background()
{
    let finished = Counter::new();
    let f = finished.clone();
    let body: IO<u32, Error> =
        IO::uncancelable(move |_| IO::sleep(secs(5)).product_r(f.incr_io()).map_to(7u32));
    let timed_out = body.timeout_and_forget(secs(1)).attempt();
    // The caller goes on at the deadline; the body ends 4 s later.
    let program = timed_out
        .flat_map(|r| IO::monotonic().map(move |t| (r, t)))
        .flat_map(|first| IO::sleep(secs(10)).map_to(first));
    assert_eq!(
        virtual_run(program),
        Outcome::Succeeded((Err(Error::TimedOut(secs(1))), secs(1)))
    );
    assert_eq!(finished.get(), 1, "the body finished in the background");
}

#[test]
fn timeout_and_forget_gives_the_value_of_a_body_that_finishes_in_time() {
    let io: IO<u32, Error> = IO::sleep(secs(2)).map_to(3u32).timeout_and_forget(secs(5));
    assert_eq!(ends_at(io), Outcome::Succeeded((3, secs(2))));
}

#[test]
fn canceling_a_timeout_cancels_its_body_and_waits_for_its_finalizers() {
    let log = Log::new();
    let body = IO::<u32, Error>::never()
        .on_cancel(IO::sleep(secs(2)).product_r(log.record("body finalized")))
        .timeout(secs(60));
    let l = log.clone();
    let program = body.start().flat_map(move |fiber| {
        IO::sleep(secs(1))
            .product_r(fiber.cancel())
            .product_r(l.record("cancel returned"))
            .product_r(IO::monotonic())
    });
    assert_eq!(virtual_run(program), Outcome::Succeeded(secs(3)));
    assert_eq!(log.events(), ["body finalized", "cancel returned"]);
}

#[test]
fn delay_by_runs_the_program_at_exactly_the_delay() {
    let io = IO::monotonic().delay_by(secs(7));
    assert_eq!(virtual_run(io), Outcome::Succeeded(secs(7)));
}

#[test]
fn timed_measures_the_virtual_duration_exactly() {
    let io = IO::sleep(Duration::from_secs(90 * 60))
        .product_r(IO::sleep(ms(250)))
        .map_to("done")
        .timed();
    assert_eq!(
        virtual_run(io),
        Outcome::Succeeded((Duration::from_secs(90 * 60) + ms(250), "done"))
    );
}

#[test]
fn timed_of_a_program_that_does_not_sleep_is_zero() {
    assert_eq!(
        virtual_run(IO::<u32, Error>::pure(1).timed()),
        Outcome::Succeeded((Duration::ZERO, 1))
    );
}

#[test]
fn monotonic_reads_the_virtual_clock() {
    let io = IO::monotonic()
        .flat_map(|a| IO::sleep(secs(10)).product_r(IO::monotonic().map(move |b| (a, b))));
    assert_eq!(
        virtual_run(io),
        Outcome::Succeeded((Duration::ZERO, secs(10)))
    );
}

#[test]
fn real_time_moves_with_virtual_time() {
    let io = IO::real_time()
        .flat_map(|a| IO::sleep(DAY).product_r(IO::real_time().map(move |b| b.saturating_sub(a))));
    assert_eq!(virtual_run(io), Outcome::Succeeded(DAY));
}

#[test]
fn a_race_of_two_sleeps_ends_at_the_shorter_one() {
    let io = IO::sleep(secs(3))
        .map_to(3u32)
        .race(IO::sleep(secs(1)).map_to(1u32));
    assert_eq!(
        ends_at(io),
        Outcome::Succeeded((spindle_core::Either::Right(1), secs(1)))
    );
}

#[test]
fn par_traverse_n_takes_one_round_of_sleep_per_batch_of_n_items() {
    // 10 items of one second each, at most 3 at once: 4 rounds.
    let io = IO::<u32, Error>::par_traverse_n(nz(3), (0..10u32).collect(), |i| {
        IO::sleep(secs(1)).map_to(i)
    });
    assert_eq!(
        ends_at(io),
        Outcome::Succeeded(((0..10u32).collect(), secs(4)))
    );
}

#[test]
fn a_sleep_canceled_by_its_fiber_never_fires_and_leaves_no_timer() {
    let fired = Counter::new();
    let f = fired.clone();
    let io = UIO::sleep(DAY)
        .product_r(f.incr_io())
        .start::<Error>()
        .flat_map(|h| IO::sleep(secs(1)).product_r(h.cancel()));
    let mut control = TestControl::execute(io);
    control.tick_all();
    assert_eq!(control.results(), Some(&Outcome::Succeeded(())));
    assert_eq!(control.now(), secs(1));
    assert_eq!(control.next_interval(), None);
    assert_eq!(fired.get(), 0);
}

/// A parallelism for `par_traverse_n` (tests pass literals that are not 0).
fn nz(n: usize) -> core::num::NonZeroUsize {
    core::num::NonZeroUsize::new(n).expect("a parallelism of at least 1")
}

#[test]
fn a_wstp_shutdown_with_a_timeout_of_duration_max_waits_without_panicking() {
    let rt = spindle_exec_wstp::Runtime::builder()
        .worker_threads(common::WSTP_WORKERS)
        .build()
        .expect("an executor");
    assert_eq!(
        rt.block_on(IO::<u32, ()>::pure(1)).expect("block_on"),
        Outcome::Succeeded(1)
    );
    assert!(rt.shutdown(Duration::MAX).is_ok());
}
