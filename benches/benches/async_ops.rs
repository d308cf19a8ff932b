//! Async boundaries, fibers and masking: a port of Cats Effect's
//! `AsyncBenchmark` (JMH, `benchmarks/` in typelevel/cats-effect), size 100.
//!
//! The nine workloads are those of the 2.x series' version, the last one
//! with all nine (`async`, `bracket`, `cancelBoundary`, `cancelable`,
//! `parMap2`, `race`, `racePair`, `start`, `uncancelable`); the 3.x version
//! dropped `cancelBoundary` and left `parMap2` as a TODO. Each is a loop or
//! a fold of 100 steps; one operation is one whole program, built inside
//! the timed closure; throughput is declared in steps (elements/s = steps
//! per second).
//!
//! * **async**: `async_` whose callback is called during registration
//!   (`IO::async_(|cb| { cb.succeed(n); None })`), bound to the loop.
//! * **cancelable**: the same with a cancel finalizer
//!   (`Some(IO::unit())`), Cats Effect's `IO.cancelable` (3.x: `IO.async`
//!   returning `Some(IO.unit)`).
//! * **bracket**: `bracket(delay(i), i => delay(i + 1), _ => unit)` per
//!   step: a masked region, a `poll`, a `guarantee_case` frame.
//! * **cancelBoundary**: Cats Effect 2's `IO.cancelBoundary *> IO(i + 1)`.
//!   Spindle has no such operation; its counterpart is `IO::cede()` (the
//!   replacement Cats Effect 3's migration guide gives), which checks for
//!   cancellation *and* goes through the run queue. So this row measures a
//!   cede per step, not a bare cancellation check.
//! * **uncancelable**: `uncancelable(_ => delay(i + 1))` per step.
//! * **start**: `(cede *> delay(i + 1)).start`, then `join_with_never`:
//!   a fiber started and joined per step (Cats Effect 2's `IO.shift` is
//!   `IO::cede()` here, as in `bind.rs`).
//! * **parMap2**: a left fold of 100 `par_map2(acc, cede *> delay(i))`:
//!   nested, each level starts two fibers.
//! * **race**: a left fold of 100 `race(acc, cede *> delay(1))` starting
//!   from `IO::never()`: nested races whose losers are canceled.
//! * **racePair**: the same with `race_pair`, the winner's outcome embedded
//!   (a canceled one as `never`) after canceling the loser.
//!
//! The tokio reference, on a current-thread runtime (`rt.block_on`):
//!
//! * Tail-recursive loops (`...flatMap(loop)`) are a `while` loop in one
//!   `async` block: what a Rust programmer writes. (Nested boxed futures, as
//!   in `bind.rs`, would make every yield re-poll the whole chain; see
//!   BENCHMARKS.md.)
//! * async: a `tokio::sync::oneshot` whose value is sent before it is
//!   awaited (as `async_callback` in `bind.rs`). cancelable: the same plus
//!   a drop guard armed while waiting (a tokio future is canceled by being
//!   dropped, so a cancel finalizer is a `Drop`).
//! * cancelBoundary: `tokio::task::yield_now()`, the counterpart of the
//!   cede Spindle runs (tokio has no cancellation check: a future is
//!   canceled by dropping it at any `.await`).
//! * start: `tokio::spawn` of `yield_now` then `i + 1`, awaiting its
//!   `JoinHandle`.
//! * parMap2: nested boxed futures, each level a `tokio::join!` of the
//!   previous level and `yield_now` then `i` (both polled in one task: no
//!   task spawned, unlike Spindle's two fibers per level).
//! * race: nested `tokio::select!` (`biased`, left first, as Cats Effect
//!   starts the left fiber first) from `std::future::pending()`; the loser
//!   is dropped.
//! * racePair: each level spawns both sides as tasks, selects on their
//!   `JoinHandle`s, aborts the loser and awaits it (Cats Effect's
//!   `fiber.cancel` waits for the loser's end); an aborted level aborts its
//!   own children (`groups::AbortOnDrop`), as a canceled Spindle
//!   `race_pair` cancels both of its fibers.
//! * **bracket and uncancelable run on Spindle only.** tokio has no masking:
//!   any future can be dropped at any `.await`, so `uncancelable` has no
//!   counterpart; and Rust's bracket is a drop guard, which the compiler
//!   reduces to nothing around a synchronous use, so the tokio row would be
//!   an empty loop.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench async_ops
//! cargo bench -p benches --bench async_ops -- Async.racePair   # one group
//! ```

use std::convert::Infallible;

use benches::{ASYNC_SIZE, succeeded};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::{Either, IO, Outcome};

mod common;
mod groups;

use common::compare;
use groups::spindle_only;

/// The Spindle programs.
mod spindle {
    use super::*;

    type Io<A> = IO<A, Infallible>;

    const SIZE: i32 = ASYNC_SIZE;

    fn eval_async(n: i32) -> Io<i32> {
        IO::async_(move |cb| {
            cb.succeed(n);
            None
        })
    }

    fn eval_cancelable(n: i32) -> Io<i32> {
        IO::async_(move |cb| {
            cb.succeed(n);
            Some(IO::unit())
        })
    }

    /// `cede *> delay(value)`: Cats Effect 2's `IO.shift *> IO(value)`.
    fn shifted(value: i32) -> Io<i32> {
        Io::<()>::cede().product_r(IO::delay(move || value))
    }

    /// Cats Effect's `Outcome#embedNever`.
    fn embed_never(outcome: Outcome<i32, Infallible>) -> Io<i32> {
        match outcome {
            Outcome::Succeeded(a) => IO::pure(a),
            Outcome::Errored(e) => match e {},
            Outcome::Canceled => IO::never(),
            Outcome::Panicked(p) => panic!("racePair side panicked: {p}"),
        }
    }

    pub fn async_() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                eval_async(i + 1).flat_map(go)
            } else {
                eval_async(i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn cancelable() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                eval_cancelable(i + 1).flat_map(go)
            } else {
                eval_cancelable(i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn bracket() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                IO::bracket(
                    IO::delay(move || i),
                    |&r: &i32| IO::delay(move || r + 1),
                    |_| IO::unit(),
                )
                .flat_map(go)
            } else {
                IO::pure(i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn cancel_boundary() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                shifted(i + 1).flat_map(go)
            } else {
                IO::pure(i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn uncancelable() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                IO::uncancelable(move |_| IO::delay(move || i + 1)).flat_map(go)
            } else {
                IO::pure(i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn start() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                shifted(i + 1)
                    .start()
                    .flat_map(|fiber| fiber.join_with_never())
                    .flat_map(go)
            } else {
                IO::pure(i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn par_map2() -> Io<i32> {
        (0..SIZE).fold(IO::delay(|| 0), |acc, i| {
            acc.par_map2(shifted(i), |a, b| a + b)
        })
    }

    pub fn race() -> Io<i32> {
        (0..SIZE).fold(IO::never(), |acc, _| {
            acc.race(shifted(1)).map(|winner| match winner {
                Either::Left(i) | Either::Right(i) => i,
            })
        })
    }

    pub fn race_pair() -> Io<i32> {
        (0..SIZE).fold(IO::never(), |acc, _| {
            acc.race_pair(shifted(1)).flat_map(|pair| match pair {
                Either::Left((outcome, loser)) => loser.cancel().product_r(embed_never(outcome)),
                Either::Right((loser, outcome)) => loser.cancel().product_r(embed_never(outcome)),
            })
        })
    }
}

/// The same programs in `async` Rust, for tokio.
mod tokio_ref {
    use std::future::pending;

    use tokio::sync::oneshot;
    use tokio::task::yield_now;

    use super::ASYNC_SIZE as SIZE;
    use crate::common::delay;
    use crate::groups::{AbortOnDrop, BoxedSend};

    /// A value delivered through a oneshot channel that was completed before
    /// the await (as in `bind.rs`).
    async fn ready_via_oneshot<T>(value: T) -> T {
        let (tx, rx) = oneshot::channel();
        if tx.send(value).is_err() {
            unreachable!("the receiver is alive");
        }
        rx.await.expect("the value was sent")
    }

    /// Runs its finalizer if dropped while armed: a cancel finalizer.
    struct OnCancel<F: FnMut()> {
        armed: bool,
        finalizer: F,
    }

    impl<F: FnMut()> Drop for OnCancel<F> {
        fn drop(&mut self) {
            if self.armed {
                (self.finalizer)();
            }
        }
    }

    /// `ready_via_oneshot` with a cancel finalizer armed while it waits.
    async fn ready_cancelable<T>(value: T) -> T {
        let mut guard = OnCancel {
            armed: true,
            finalizer: || {},
        };
        let value = ready_via_oneshot(value).await;
        guard.armed = false;
        value
    }

    /// `yield_now` then `value`: the counterpart of `cede *> delay(value)`.
    async fn shifted(value: i32) -> i32 {
        yield_now().await;
        delay(move || value)
    }

    pub async fn async_() -> i32 {
        let mut i = delay(|| 0);
        while i < SIZE {
            i = ready_via_oneshot(i + 1).await;
        }
        ready_via_oneshot(i).await
    }

    pub async fn cancelable() -> i32 {
        let mut i = delay(|| 0);
        while i < SIZE {
            i = ready_cancelable(i + 1).await;
        }
        ready_cancelable(i).await
    }

    pub async fn cancel_boundary() -> i32 {
        let mut i = delay(|| 0);
        while i < SIZE {
            i = shifted(i + 1).await;
        }
        i
    }

    pub async fn start() -> i32 {
        let mut i = delay(|| 0);
        while i < SIZE {
            i = tokio::spawn(shifted(i + 1)).await.expect("the task ran");
        }
        i
    }

    pub fn par_map2() -> BoxedSend<i32> {
        (0..SIZE).fold(Box::pin(async { delay(|| 0) }), |acc, i| {
            Box::pin(async move {
                let (a, b) = tokio::join!(acc, shifted(i));
                a + b
            })
        })
    }

    pub fn race() -> BoxedSend<i32> {
        (0..SIZE).fold(Box::pin(pending()), |acc, _| {
            Box::pin(async move {
                tokio::select! {
                    biased;
                    i = acc => i,
                    i = shifted(1) => i,
                }
            })
        })
    }

    pub fn race_pair() -> BoxedSend<i32> {
        (0..SIZE).fold(Box::pin(pending()), |acc, _| {
            Box::pin(async move {
                let mut left = AbortOnDrop(tokio::spawn(acc));
                let mut right = AbortOnDrop(tokio::spawn(shifted(1)));
                tokio::select! {
                    biased;
                    won = &mut left.0 => {
                        right.0.abort();
                        let _ = (&mut right.0).await;
                        won.expect("the left task ran")
                    }
                    won = &mut right.0 => {
                        left.0.abort();
                        let _ = (&mut left.0).await;
                        won.expect("the right task ran")
                    }
                }
            })
        })
    }
}

fn async_benchmark(c: &mut Criterion) {
    let size = ASYNC_SIZE as u64;
    compare(
        c,
        "Async.async",
        size,
        size,
        ASYNC_SIZE,
        |rt| succeeded(rt.block_on(spindle::async_())),
        |rt| rt.block_on(tokio_ref::async_()),
    );
    spindle_only(c, "Async.bracket", size, size, ASYNC_SIZE, |rt| {
        succeeded(rt.block_on(spindle::bracket()))
    });
    compare(
        c,
        "Async.cancelBoundary",
        size,
        size,
        ASYNC_SIZE,
        |rt| succeeded(rt.block_on(spindle::cancel_boundary())),
        |rt| rt.block_on(tokio_ref::cancel_boundary()),
    );
    compare(
        c,
        "Async.cancelable",
        size,
        size,
        ASYNC_SIZE,
        |rt| succeeded(rt.block_on(spindle::cancelable())),
        |rt| rt.block_on(tokio_ref::cancelable()),
    );
    // 0 + 0 + 1 + ... + 99.
    let sum = (0..ASYNC_SIZE).sum::<i32>();
    compare(
        c,
        "Async.parMap2",
        size,
        size,
        sum,
        |rt| succeeded(rt.block_on(spindle::par_map2())),
        |rt| rt.block_on(tokio_ref::par_map2()),
    );
    compare(
        c,
        "Async.race",
        size,
        size,
        1,
        |rt| succeeded(rt.block_on(spindle::race())),
        |rt| rt.block_on(tokio_ref::race()),
    );
    compare(
        c,
        "Async.racePair",
        size,
        size,
        1,
        |rt| succeeded(rt.block_on(spindle::race_pair())),
        |rt| rt.block_on(tokio_ref::race_pair()),
    );
    compare(
        c,
        "Async.start",
        size,
        size,
        ASYNC_SIZE,
        |rt| succeeded(rt.block_on(spindle::start())),
        |rt| rt.block_on(tokio_ref::start()),
    );
    spindle_only(c, "Async.uncancelable", size, size, ASYNC_SIZE, |rt| {
        succeeded(rt.block_on(spindle::uncancelable()))
    });
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = async_benchmark
}
criterion_main!(benches);
