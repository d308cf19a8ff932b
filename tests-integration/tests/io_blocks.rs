//! IO blocks (`IO::block`): `.await` on an `IO` inside an `async` block runs
//! that `IO` on the same fiber, with the run-loop's semantics, on every
//! executor.

mod common;

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use common::{Counter, DropCounter, HANG_LIMIT, Log, on_small_stack, rt_test, within};
use spindle_core::error::TimeoutError;
use spindle_core::{Deferred, IO, IORuntime, Outcome, Ref};

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
        let (l1, l2, d) = (log.clone(), log.clone(), dropped.clone());
        let started = Deferred::<()>::new();
        let signal = started.clone();
        let program: IO<(), ()> = IO::block(async move {
            // Block state that lives across the await.
            let _state = DropCounter(d);
            signal.complete(()).await?.ok();
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
        assert_eq!(log.events(), ["awaited program's finalizer", "block's finalizer"]);
    }

    fn a_mask_and_its_poll_work_inside_a_block() {
        // Inside `uncancelable`, a cancel waits for the end of the region
        // unless the await is wrapped in `poll`.
        let finished = Counter::new();
        let f = finished.clone();
        let masked: IO<(), ()> = IO::uncancelable(move |_poll| {
            IO::block(async move {
                IO::<(), ()>::sleep(Duration::from_millis(20)).await?;
                f.incr();
                Ok(())
            })
        });
        let outcome = run(masked.start::<()>().flat_map(|fiber| {
            IO::sleep(Duration::from_millis(1))
                .product_r(fiber.cancel())
                .product_r(fiber.join())
        }));
        assert_eq!(outcome, Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(finished.get(), 1, "the masked block ran to its end");

        let polled: IO<(), ()> = IO::uncancelable(move |poll| {
            IO::block(async move {
                poll.apply(IO::<(), ()>::never()).await?;
                Ok(())
            })
        });
        let outcome = within(HANG_LIMIT, move || {
            run(polled.start::<()>().flat_map(|fiber| {
                IO::sleep(Duration::from_millis(1))
                    .product_r(fiber.cancel())
                    .product_r(fiber.join())
            }))
        });
        assert_eq!(outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
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

    fn a_block_reads_and_writes_shared_state_across_awaits_without_clone_tuples() {
        let counter = Ref::new(0u32);
        let program: IO<u32, ()> = IO::block(async move {
            for _ in 0..10 {
                counter.update(|n| *n += 1).value().await;
            }
            Ok(counter.get().value().await)
        });
        assert_eq!(run(program), Outcome::Succeeded(10));
    }

    fn two_ios_awaited_by_one_join_run_one_after_the_other_and_both_finish() {
        let program: IO<(u32, u32), ()> = IO::block(async {
            let (a, b) = futures_join(
                IO::<u32, ()>::delay(|| 1),
                IO::<(), ()>::sleep(Duration::from_millis(1)).map_to(2),
            )
            .await;
            Ok((a?, b?))
        });
        assert_eq!(run(program), Outcome::Succeeded((1, 2)));
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
