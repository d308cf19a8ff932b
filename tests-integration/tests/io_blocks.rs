//! IO blocks (`IO::block`): `.await` on an `IO` inside an `async` block runs
//! that `IO` on the same fiber, with the run-loop's semantics, on every
//! executor.

mod common;

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use common::{Counter, HANG_LIMIT, Log, on_small_stack, rt_test, within};
use spindle_core::error::TimeoutError;
use spindle_core::{Deferred, Either, IO, IORuntime, Outcome, Ref};
use spindle_exec_tokio::TokioExecutor;

#[derive(Debug, PartialEq)]
enum AppError {
    NotFound(u32),
    Timeout,
}

impl From<TimeoutError> for AppError {
    fn from(_: TimeoutError) -> Self {
        AppError::Timeout
    }
}

/// Pushes its event to a [`Log`] and counts itself in a [`Counter`] when
/// dropped: block state whose drop is ordered among finalizers.
struct LogOnDrop(Log<&'static str>, &'static str, Counter);

impl Drop for LogOnDrop {
    fn drop(&mut self) {
        self.0.push(self.1);
        self.2.incr();
    }
}

rt_test! {
    fn a_block_produces_the_values_of_its_awaits_combined_by_plain_code() {
        let program: IO<u64, ()> = IO::block(async {
            let a = IO::<u64, ()>::pure(20).await?;
            let b = IO::<u64, ()>::delay(|| 1).await?;
            let mut total = a + b;
            for i in 0..3u64 {
                total += IO::<u64, ()>::delay(move || i).await?;
            }
            Ok(total * 2 - 6)
        });
        assert_eq!(run(program), Outcome::Succeeded(42));
    }

    fn an_awaited_error_is_returned_by_the_await_and_propagated_by_the_question_mark() {
        let lookup = |id: u32| -> IO<String, AppError> {
            if id == 7 { IO::pure("seven".into()) } else { IO::raise_error(AppError::NotFound(id)) }
        };
        let found: IO<String, AppError> = IO::block(async move { lookup(7).await });
        assert_eq!(run(found), Outcome::Succeeded("seven".to_string()));
        let reached = Counter::new();
        let after = reached.clone();
        let missing: IO<String, AppError> = IO::block(async move {
            let name = lookup(8).await?;
            after.incr();
            Ok(name)
        });
        assert_eq!(run(missing), Outcome::Errored(AppError::NotFound(8)));
        assert_eq!(reached.get(), 0, "the code after a failed `?` never ran");
    }

    fn an_awaited_error_can_be_handled_in_the_block() {
        let program: IO<u32, AppError> = IO::block(async {
            match IO::<u32, AppError>::raise_error(AppError::NotFound(1)).await {
                Ok(n) => Ok(n),
                Err(AppError::NotFound(_)) => Ok(0),
                Err(other) => Err(other),
            }
        });
        assert_eq!(run(program), Outcome::Succeeded(0));
    }

    fn errors_convert_with_from_through_the_question_mark() {
        let program: IO<u32, AppError> = IO::block(async {
            IO::<u32, TimeoutError>::never()
                .timeout(Duration::from_millis(1))
                .await?;
            Ok(1)
        });
        assert_eq!(run(program), Outcome::Errored(AppError::Timeout));
    }

    fn a_million_awaits_in_a_loop_run_in_constant_native_stack() {
        let outcome = on_small_stack(|| {
            let program: IO<u64, ()> = IO::block(async {
                let mut n = 0u64;
                while n < 1_000_000 {
                    n = IO::<u64, ()>::pure(n + 1).await?;
                }
                Ok(n)
            });
            run(program)
        });
        assert_eq!(outcome, Outcome::Succeeded(1_000_000));
    }

    fn a_loop_of_awaits_that_finish_at_once_still_lets_other_fibers_run() {
        // Awaits of values and `delay`s run inside the block's poll, on the
        // run-loop's budget: the fiber still yields as often as the same
        // loop of `flat_map`s, so a fiber started before the loop runs on
        // one thread too, long before the loop would end.
        let flag = Arc::new(AtomicBool::new(false));
        let (set, seen) = (flag.clone(), flag);
        let program: IO<Option<u32>, ()> = IO::block(async move {
            let _child = IO::<(), ()>::delay(move || set.store(true, Ordering::SeqCst))
                .start()
                .await?;
            for i in 0..1_000_000u32 {
                let now = seen.clone();
                if IO::<bool, ()>::delay(move || now.load(Ordering::SeqCst)).await? {
                    return Ok(Some(i));
                }
                IO::<u32, ()>::pure(i).await?;
            }
            Ok(None)
        });
        let outcome = within(HANG_LIMIT, move || run(program));
        assert!(
            matches!(outcome, Some(Outcome::Succeeded(Some(_)))),
            "the child ran before the loop ended: {outcome:?}"
        );
    }

    fn a_block_looping_forever_over_awaits_that_finish_at_once_can_be_canceled() {
        // Canceled once it is surely looping (a fiber canceled before its
        // first run never makes the block's state at all).
        let (state, started) = (Counter::new(), Deferred::<()>::new());
        let (dropped, looping) = (state.clone(), started.clone());
        let spinning: IO<(), ()> = IO::block(async move {
            let _state = LogOnDrop(Log::new(), "state", dropped);
            let _first = looping.complete::<()>(()).await?;
            let mut n = 0u64;
            loop {
                n = IO::<u64, ()>::pure(n.wrapping_add(1)).await?;
            }
        });
        let outcome = within(HANG_LIMIT, move || {
            run(spinning.start::<()>().flat_map(move |fiber| {
                started
                    .get()
                    .product_r(fiber.cancel())
                    .product_r(fiber.join())
            }))
        });
        assert_eq!(outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
        assert_eq!(state.get(), 1, "the block's state was dropped once");
    }

    fn other_futures_are_awaited_on_the_fiber_as_from_future_awaits_them() {
        let program: IO<u32, ()> = IO::block(async {
            let ready = std::future::ready(40).await;
            // A future woken from another thread after it returned pending.
            let mut started = false;
            let woken = Arc::new(AtomicBool::new(false));
            let late = poll_fn(move |cx| {
                if woken.load(Ordering::SeqCst) {
                    return Poll::Ready(2);
                }
                if !started {
                    started = true;
                    let waker = cx.waker().clone();
                    let woken = woken.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(5));
                        woken.store(true, Ordering::SeqCst);
                        waker.wake();
                    });
                }
                Poll::Pending
            })
            .await;
            Ok(ready + late)
        });
        assert_eq!(run(program), Outcome::Succeeded(42));
    }

    fn blocks_nest_and_an_inner_blocks_error_reaches_the_outer_question_mark() {
        let inner = |fail: bool| -> IO<u32, AppError> {
            IO::block(async move {
                let n = IO::<u32, AppError>::pure(20).await?;
                if fail { Err(AppError::NotFound(n)) } else { Ok(n + 1) }
            })
        };
        let program: IO<u32, AppError> = IO::block(async move {
            let a = inner(false).await?;
            let b = inner(false).await?;
            Ok(a + b)
        });
        assert_eq!(run(program), Outcome::Succeeded(42));
        let failing: IO<u32, AppError> = IO::block(async move { inner(true).await });
        assert_eq!(run(failing), Outcome::Errored(AppError::NotFound(20)));
    }

    fn canceling_a_block_drops_its_state_once_after_the_awaited_programs_finalizer() {
        let log: Log<&'static str> = Log::new();
        let dropped = Counter::new();
        let (l1, l2, l3, d) = (log.clone(), log.clone(), log.clone(), dropped.clone());
        let started = Deferred::<()>::new();
        let signal = started.clone();
        let program: IO<(), ()> = IO::block(async move {
            // Block state that lives across the await.
            let _state = LogOnDrop(l3, "block's state dropped", d);
            signal
                .complete(())
                .value()
                .await
                .expect("the block completes the signal first");
            IO::<(), ()>::never()
                .guarantee(l1.record("awaited program's finalizer"))
                .await?;
            Ok(())
        })
        .guarantee(l2.record("block's finalizer"));
        let outcome = run(program.start::<()>().flat_map(move |fiber| {
            started.get().product_r(fiber.cancel()).product_r(fiber.join())
        }));
        assert_eq!(outcome, Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(dropped.get(), 1, "the block's state was dropped once");
        assert_eq!(
            log.events(),
            ["awaited program's finalizer", "block's state dropped", "block's finalizer"]
        );
    }

    fn a_block_losing_a_race_is_canceled_and_its_state_dropped_once() {
        let log: Log<&'static str> = Log::new();
        let dropped = Counter::new();
        let (l1, l2, l3, l4, d) = (log.clone(), log.clone(), log.clone(), log.clone(), dropped.clone());
        let started = Deferred::<()>::new();
        let signal = started.clone();
        let loser: IO<u32, AppError> = IO::block(async move {
            let _state = LogOnDrop(l3, "block's state dropped", d);
            signal.complete(()).value().await.expect("the first completion");
            IO::<(), AppError>::never()
                .guarantee(l1.record("awaited program's finalizer"))
                .await?;
            l4.push("the losing block went on");
            Ok(1)
        })
        .guarantee(l2.record("block's finalizer"));
        // The winner finishes once the block is waiting, so that the block
        // is canceled in the middle of its await.
        let winner: IO<&'static str, AppError> = started.get().map_to("winner");
        assert_eq!(run(loser.race(winner)), Outcome::Succeeded(Either::Right("winner")));
        assert_eq!(dropped.get(), 1, "the block's state was dropped once");
        assert_eq!(
            log.events(),
            ["awaited program's finalizer", "block's state dropped", "block's finalizer"]
        );
    }

    fn a_block_awaits_the_join_of_a_child_it_started() {
        let program: IO<u32, AppError> = IO::block(async {
            // The child waits for the block: it runs on a fiber of its own.
            let gate = Deferred::<u32>::new();
            let child_gate = gate.clone();
            let child: IO<u32, AppError> = IO::block(async move {
                let n = child_gate.get().value().await;
                Ok(n + 1)
            });
            let fiber = child.start().value().await;
            gate.complete(40).value().await.expect("the first completion");
            let value = match fiber.join().value().await {
                Outcome::Succeeded(n) => n,
                other => panic!("the child succeeds, got {other:?}"),
            };

            let failing = IO::<u32, AppError>::raise_error(AppError::NotFound(3)).start().value().await;
            assert_eq!(failing.join().value().await, Outcome::Errored(AppError::NotFound(3)));

            let stuck = IO::<u32, AppError>::never().start().value().await;
            stuck.cancel().value().await;
            assert_eq!(stuck.join().value().await, Outcome::Canceled);
            Ok(value + 1)
        });
        assert_eq!(run(program), Outcome::Succeeded(42));
    }

    fn a_mask_and_its_poll_work_inside_a_block() {
        // Inside `uncancelable`, a cancel waits for the end of the region
        // (the block runs to its end, what follows the region does not run)
        // unless the await is wrapped in `poll`.
        let log: Log<&'static str> = Log::new();
        let started = Deferred::<()>::new();
        let (s, l1, l2) = (started.clone(), log.clone(), log.clone());
        let masked: IO<(), ()> = IO::uncancelable(move |_poll| {
            IO::block(async move {
                s.complete(()).value().await.expect("the first completion");
                IO::<(), ()>::sleep(Duration::from_millis(20)).await?;
                l1.push("end of the masked block");
                Ok(())
            })
        })
        .product_r(l2.record("after the region"));
        let outcome = run(masked.start::<()>().flat_map(move |fiber| {
            started.get().product_r(fiber.cancel()).product_r(fiber.join())
        }));
        assert_eq!(outcome, Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(log.events(), ["end of the masked block"]);

        let log: Log<&'static str> = Log::new();
        let started = Deferred::<()>::new();
        let (s, l1, l2) = (started.clone(), log.clone(), log.clone());
        let polled: IO<(), ()> = IO::uncancelable(move |poll| {
            IO::block(async move {
                s.complete(()).value().await.expect("the first completion");
                poll.apply(IO::<(), ()>::never())
                    .on_cancel(l1.record("canceled in poll"))
                    .await?;
                l2.push("after the poll");
                Ok(())
            })
        });
        let outcome = within(HANG_LIMIT, move || {
            run(polled.start::<()>().flat_map(move |fiber| {
                started.get().product_r(fiber.cancel()).product_r(fiber.join())
            }))
        });
        assert_eq!(outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
        assert_eq!(log.events(), ["canceled in poll"]);
    }

    fn a_self_cancel_in_a_mask_is_observed_at_a_blocks_next_await_not_at_its_end() {
        // A request made in a masked region is observed where the next
        // program starts (as in Cats Effect 3.5+): a block that ends with the
        // awaited result starts none and ends as the program alone does.
        let masked = || IO::<u32, ()>::uncancelable(|_| IO::canceled().map_to(1));
        assert_eq!(run(masked()), Outcome::Succeeded(1));
        assert_eq!(run(IO::block(async move { masked().await })), Outcome::Succeeded(1));
        let mapped: IO<u32, ()> = IO::block(async move { Ok(masked().await? + 1) });
        assert_eq!(run(mapped), Outcome::Succeeded(2));
        // A next await is a next program: canceled before it starts.
        let next = Counter::new();
        let n = next.clone();
        let program: IO<u32, ()> = IO::block(async move {
            let x = masked().await?;
            n.incr_io::<()>().await?;
            Ok(x)
        });
        assert_eq!(run(program), Outcome::Canceled);
        assert_eq!(next.get(), 0, "the next awaited program did not start");
    }

    fn a_panic_in_a_block_ends_its_fiber_as_panicked_and_its_finalizers_run() {
        let finalized = Counter::new();
        let program: IO<u32, ()> = IO::block(async {
            let n = IO::<u32, ()>::pure(1).await?;
            if n == 1 {
                panic!("the block gave up");
            }
            Ok(n)
        })
        .guarantee(finalized.incr_io());
        match run(program) {
            Outcome::Panicked(message) => assert!(message.message().contains("the block gave up")),
            other => panic!("expected a panic, got {other:?}"),
        }
        assert_eq!(finalized.get(), 1);
    }

    fn a_panic_in_an_awaited_delay_ends_the_fiber_as_panicked_and_drops_the_block_once() {
        // The `delay` runs inside the block's poll (it finishes at once):
        // its panic ends the fiber as the same panic on the run-loop does.
        let (finalized, state) = (Counter::new(), Counter::new());
        let dropped = state.clone();
        let program: IO<u32, ()> = IO::block(async move {
            let _state = LogOnDrop(Log::new(), "state", dropped);
            let n = IO::<u32, ()>::pure(1).await?;
            IO::<u32, ()>::delay(move || if n == 1 { panic!("the delay gave up") } else { n })
                .await
        })
        .guarantee(finalized.incr_io());
        match run(program) {
            Outcome::Panicked(message) => assert!(message.message().contains("the delay gave up")),
            other => panic!("expected a panic, got {other:?}"),
        }
        assert_eq!((finalized.get(), state.get()), (1, 1), "finalizer and state, once each");
    }

    fn a_block_reads_and_writes_shared_state_across_awaits_without_clone_tuples() {
        let counter = Ref::new(0u32);
        let program: IO<u32, ()> = IO::block(async move {
            for _ in 0..10 {
                counter.update(|n| *n += 1).value().await;
                // Plain code between two awaits sees the last write.
                let seen = counter.get().value().await;
                IO::<(), ()>::cede().await?;
                assert_eq!(counter.get().value().await, seen);
            }
            Ok(counter.get().value().await)
        });
        assert_eq!(run(program), Outcome::Succeeded(10));
    }

    fn two_ios_awaited_by_one_join_run_one_after_the_other_and_both_finish() {
        let log: Log<&'static str> = Log::new();
        let (l1, l2) = (log.clone(), log.clone());
        let program: IO<(u32, u32), ()> = IO::block(async move {
            let (a, b) = futures_join(
                IO::<(), ()>::sleep(Duration::from_millis(5))
                    .product_r(l1.record("first ended"))
                    .map_to(1),
                l2.record("second started").map_to(2),
            )
            .await;
            Ok((a?, b?))
        });
        assert_eq!(run(program), Outcome::Succeeded((1, 2)));
        assert_eq!(
            log.events(),
            ["first ended", "second started"],
            "the fiber runs one awaited program at a time"
        );
    }
}

/// A minimal `join` of two futures that polls both with the same context
/// (as `futures::join!` does), so that both awaits ask the same block.
async fn futures_join<A, B>(a: A, b: B) -> (A::Output, B::Output)
where
    A: std::future::IntoFuture,
    B: std::future::IntoFuture,
{
    let mut a = Box::pin(a.into_future());
    let mut b = Box::pin(b.into_future());
    let (mut ra, mut rb) = (None, None);
    poll_fn(move |cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            Poll::Ready((ra.take().unwrap(), rb.take().unwrap()))
        } else {
            Poll::Pending
        }
    })
    .await
}

#[test]
fn an_io_awaited_outside_a_block_panics_with_a_message_that_says_so() {
    let result = std::panic::catch_unwind(|| {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = Box::pin(std::future::IntoFuture::into_future(IO::<u32, ()>::pure(1)));
        let _ = fut.as_mut().poll(&mut cx);
    });
    let payload = result.expect_err("polling an IO's await outside a block panics");
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(message.contains("outside an IO block"), "{message}");
}

/// A block on the application's own tokio runtime (exec-tokio attached with
/// `TokioExecutor::current`), on both flavours: it awaits tokio's own
/// futures (a timer and a channel fed by a tokio task, which need tokio's
/// context: the fiber is a tokio task) beside programs, with `?`.
#[test]
fn a_block_on_an_applications_tokio_runtime_awaits_tokio_futures_and_programs() {
    let flavours = [
        ::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        ::tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    ];
    for runtime in flavours {
        let runtime = runtime.expect("a tokio runtime");
        let outcome = runtime.block_on(async {
            let executor = TokioExecutor::current().expect("attach to the runtime");
            let (tx, rx) = ::tokio::sync::oneshot::channel::<u32>();
            ::tokio::spawn(async move {
                ::tokio::time::sleep(Duration::from_millis(2)).await;
                let _ = tx.send(30);
            });
            let program: IO<u32, AppError> = IO::block(async move {
                ::tokio::time::sleep(Duration::from_millis(1)).await;
                let sent = rx.await.expect("the task sends");
                let more = IO::<u32, AppError>::delay(|| 10).await?;
                IO::<(), AppError>::sleep(Duration::from_millis(1)).await?;
                ::tokio::task::yield_now().await;
                Ok(sent + more + 2)
            });
            executor.run_async(program).await.expect("run the program")
        });
        assert_eq!(outcome, Outcome::Succeeded(42));
    }
}

/// The panic message of an `IO` awaited in a tokio task (no fiber drives
/// it): the same message as outside any executor.
#[test]
fn an_io_awaited_in_a_tokio_task_panics_with_a_message_that_says_so() {
    let runtime = ::tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let joined =
        runtime.block_on(async { ::tokio::spawn(async { IO::<u32, ()>::pure(1).await }).await });
    let payload = joined.expect_err("the task panics").into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(message.contains("outside an IO block"), "{message}");
}
