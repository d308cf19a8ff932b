//! `select!` in IO blocks, on every executor: programs of different value
//! types race, the losers are canceled (their finalizers run once, before
//! the winner's body), the winner's body runs inline with its value, and
//! the winner's error leaves the block as `?` would.

mod common;

use std::time::Duration;

use common::{Counter, Log, rt_test};
use spindle_effect::{CountDownLatch, Deferred, IO, Outcome, Queue, never, select, sleep};

/// The error of the raced programs.
#[derive(Debug, Clone, PartialEq)]
struct Refused(u32);

/// The block's error type: converts from the programs'.
#[derive(Debug, Clone, PartialEq)]
enum AppError {
    Refused(u32),
    Idle,
}

impl From<Refused> for AppError {
    fn from(e: Refused) -> Self {
        AppError::Refused(e.0)
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn latch(n: u64) -> CountDownLatch {
    CountDownLatch::new(n).expect("a valid count")
}

/// A program that never ends on its own; once its finalizer is in place it
/// releases `ready` (so a winner that waits for `ready` cannot win before
/// it could be finalized); its cancellation counts on `canceled` and is
/// logged.
fn hanging<A: Send + 'static>(
    ready: &CountDownLatch,
    canceled: &Counter,
    log: &Log<String>,
    name: &str,
) -> IO<A, Refused> {
    let (c, l) = (canceled.clone(), log.clone());
    let name = name.to_string();
    ready
        .release()
        .product_r(never())
        .on_cancel(IO::delay(move || {
            c.incr();
            l.push(format!("{name} canceled"));
        }))
}

rt_test! {
    fn the_winners_body_runs_with_its_value() {
        let program: IO<String, AppError> = IO::block(async {
            let text = select! {
                n = sleep::<Refused>(ms(1)).map_to(21u32) => format!("number {}", n * 2),
                s = sleep(Duration::from_secs(60)).map_to("slow") => format!("text {s}"),
            };
            Ok(text)
        });
        assert_eq!(run(program), Outcome::Succeeded("number 42".to_string()));
    }

    fn the_loser_is_canceled_once_and_its_finalizer_runs_before_the_body() {
        let (ready, canceled, log) = (latch(1), Counter::new(), Log::new());
        let (c, l) = (canceled.clone(), log.clone());
        let seen = canceled.clone();
        let program: IO<u32, AppError> = IO::block(async move {
            let loser = hanging::<String>(&ready, &c, &l, "loser");
            let n = select! {
                s = loser => s.len() as u32,
                n = ready.wait().product_r(IO::<u32, Refused>::pure(7)) => {
                    l.push(format!("body sees {} cancellation", seen.get()));
                    n
                }
            };
            Ok(n)
        });
        assert_eq!(run(program), Outcome::Succeeded(7));
        assert_eq!(canceled.get(), 1, "the loser was canceled exactly once");
        assert_eq!(log.events(), ["loser canceled", "body sees 1 cancellation"]);
    }

    fn an_error_of_the_winner_leaves_the_block_converted_as_by_the_question_mark() {
        let (ready, canceled, log) = (latch(1), Counter::new(), Log::new());
        let (c, l) = (canceled.clone(), log.clone());
        let after = Counter::new();
        let a = after.clone();
        let program: IO<u32, AppError> = IO::block(async move {
            let n = select! {
                n = ready.wait().product_r(IO::<u32, Refused>::raise_error(Refused(3))) => n,
                _ = hanging::<()>(&ready, &c, &l, "loser") => 0,
            };
            a.incr();
            Ok(n)
        });
        assert_eq!(run(program), Outcome::Errored(AppError::Refused(3)));
        assert_eq!(after.get(), 0, "nothing after the select ran");
        assert_eq!(canceled.get(), 1, "the loser was canceled once");
    }

    fn three_branches_run_the_winners_body_and_cancel_both_losers_once() {
        let (ready, canceled, log) = (latch(2), Counter::new(), Log::new());
        let (c, l) = (canceled.clone(), log.clone());
        let program: IO<&'static str, AppError> = IO::block(async move {
            let which = select! {
                _ = hanging::<u8>(&ready, &c, &l, "first") => "first",
                v = ready.wait().map_to(vec![1u8, 2]) => if v.len() == 2 { "second" } else { "wrong" },
                _ = hanging::<String>(&ready, &c, &l, "third") => "third",
            };
            Ok(which)
        });
        assert_eq!(run(program), Outcome::Succeeded("second"));
        assert_eq!(canceled.get(), 2);
        let mut events = log.events();
        events.sort();
        assert_eq!(events, ["first canceled", "third canceled"]);
    }

    fn four_branches_run_the_winners_body_and_cancel_the_three_losers_once() {
        let (ready, canceled, log) = (latch(3), Counter::new(), Log::new());
        let (c, l) = (canceled.clone(), log.clone());
        let queue = Queue::<char>::unbounded();
        let producer = queue.clone();
        let program: IO<String, AppError> = IO::block(async move {
            let r = ready.clone();
            let got = select! {
                _ = hanging::<u8>(&ready, &c, &l, "a") => String::from("a"),
                _ = hanging::<u16>(&ready, &c, &l, "b") => String::from("b"),
                _ = hanging::<u32>(&ready, &c, &l, "c") => String::from("c"),
                // The element is offered once every loser can be finalized.
                ch = r.wait().product_r(producer.offer('z')).product_r(queue.take()) => format!("took {ch}"),
            };
            Ok(got)
        });
        assert_eq!(run(program), Outcome::Succeeded("took z".to_string()));
        assert_eq!(canceled.get(), 3);
        let mut events = log.events();
        events.sort();
        assert_eq!(events, ["a canceled", "b canceled", "c canceled"]);
    }

    fn a_body_may_await_use_the_question_mark_and_return_from_the_block() {
        let gate = Deferred::<u32>::new();
        let g = gate.clone();
        let program: IO<u32, AppError> = IO::block(async move {
            g.complete(5).value().await.ok();
            // Neither branch can fail: one names the error type.
            let n = select! {
                n = g.get::<Refused>() => {
                    // Awaits and `?` in the body run on the block's fiber.
                    let doubled = IO::<u32, Refused>::delay(move || n * 2).await?;
                    sleep(ms(1)).value().await;
                    doubled
                },
                _ = sleep(Duration::from_secs(60)) => return Err(AppError::Idle),
            };
            if n == 10 {
                return Ok(100);
            }
            Ok(n)
        });
        assert_eq!(run(program), Outcome::Succeeded(100));

        // The other branch wins: its body returns from the block.
        let idle: IO<u32, AppError> = IO::block(async move {
            let n = select! {
                n = gate.get::<Refused>().delay_by(Duration::from_secs(60)) => n,
                _ = sleep(ms(1)) => return Err(AppError::Idle),
            };
            Ok(n)
        });
        assert_eq!(run(idle), Outcome::Errored(AppError::Idle));
    }

    fn a_body_that_fails_with_the_question_mark_fails_the_block() {
        let program: IO<u32, AppError> = IO::block(async {
            let n = select! {
                n = IO::<u32, Refused>::pure(4) => IO::<u32, Refused>::raise_error(Refused(n)).await?,
                _ = never::<(), Refused>() => 0,
            };
            Ok(n)
        });
        assert_eq!(run(program), Outcome::Errored(AppError::Refused(4)));
    }

    fn a_branch_that_cancels_itself_does_not_win() {
        let program: IO<&'static str, AppError> = IO::block(async {
            let which = select! {
                _ = IO::<(), Refused>::canceled() => "canceled",
                _ = sleep(ms(2)) => "slept",
            };
            Ok(which)
        });
        assert_eq!(run(program), Outcome::Succeeded("slept"));
    }

    fn a_canceled_block_cancels_every_branch_once() {
        let (ready, canceled, log) = (latch(2), Counter::new(), Log::new());
        let (c, l) = (canceled.clone(), log.clone());
        let r = ready.clone();
        let program: IO<u32, AppError> = IO::block(async move {
            let n = select! {
                n = hanging::<u32>(&r, &c, &l, "a") => n,
                n = hanging::<u32>(&r, &c, &l, "b") => n,
            };
            Ok(n)
        });
        let outcome = run(program.start::<AppError>().flat_map(move |fiber| {
            ready.wait().product_r(fiber.cancel()).product_r(fiber.join())
        }));
        assert_eq!(outcome, Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(canceled.get(), 2);
    }
}

#[cfg(feature = "tracing")]
#[test]
fn a_select_is_one_trace_event_at_its_line() {
    use spindle_effect::IORuntime as _;
    use spindle_effect::Trace;
    let line = line!() + 2;
    let program: IO<Trace, AppError> = IO::block(async {
        let _ = select! {
            n = IO::<u32, Refused>::pure(1) => n,
            _ = never::<(), Refused>() => 0,
        };
        Ok(IO::<Trace, Refused>::trace().await?)
    });
    let rt = spindle_effect::single::SingleThreaded::new().expect("an executor");
    let trace = rt
        .block_on(program)
        .expect("block_on")
        .ok()
        .expect("a trace");
    let selects: Vec<u32> = trace
        .events()
        .iter()
        .filter(|e| e.op().name() == "select")
        .map(|e| e.location().line())
        .collect();
    assert_eq!(selects, [line], "{trace}");
    assert!(
        trace.events().iter().all(|e| e.op().name() != "map"),
        "the branches' mapping is not traced: {trace}"
    );
}
