//! `both` and `race` of two values: ports of Cats Effect's `BothBenchmark`
//! and `RaceBenchmark` (JMH, `benchmarks/` in typelevel/cats-effect), same
//! shapes, size 10,000.
//!
//! * **Both.happyPath**: each step is `both(pure(i + 1), pure(i + 1))`,
//!   bound to the loop with the first value.
//! * **Race.happyPath**: each step is `race(pure(i + 1), pure(i + 1))`,
//!   bound to the loop with the winner's value; the loser is canceled.
//!
//! Both sides of every step run on fibers of their own, so a step costs two
//! fiber starts, their completion, a join (and for `race` a cancel):
//! these rows measure the fiber machinery, not the values. One operation
//! is one whole loop of 10,000 steps, built inside the timed closure;
//! throughput is declared in steps.
//!
//! The tokio reference, on a current-thread runtime (`rt.block_on`), has
//! two functions per group:
//!
//! * `tokio`: what a Rust programmer writes for "both"/"first of two":
//!   `tokio::join!` and `tokio::select!` (`biased`, left first) of two
//!   `async` blocks, in a `while` loop. Both sides are polled inside the
//!   loop's own task and are ready at once, so the compiler reduces a step
//!   to little more than the addition: a floor, not a like-for-like.
//! * `tokio_spawn`: the shape of Cats Effect's `both`/`race`, each side a
//!   task of its own: `tokio::spawn` both, await the `JoinHandle`s (for the
//!   race: `select!` on them, abort the loser and await it, as Cats
//!   Effect's race waits for the loser's cancellation).
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench concurrency
//! cargo bench -p benches --bench concurrency -- Race   # one benchmark
//! ```

use std::convert::Infallible;

use benches::{PAR_SIZE, succeeded};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::{Either, IO};

mod common;
mod groups;

use common::{compare, extra_tokio};

/// The Spindle programs.
mod spindle {
    use super::*;

    type Io<A> = IO<A, Infallible>;

    pub fn both() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < PAR_SIZE {
                IO::pure(i + 1)
                    .both(IO::pure(i + 1))
                    .flat_map(|(a, _)| go(a))
            } else {
                IO::pure(i)
            }
        }
        go(0)
    }

    pub fn race() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < PAR_SIZE {
                IO::pure(i + 1)
                    .race(IO::pure(i + 1))
                    .flat_map(|winner| match winner {
                        Either::Left(j) | Either::Right(j) => go(j),
                    })
            } else {
                IO::pure(i)
            }
        }
        go(0)
    }
}

/// The same loops in `async` Rust, for tokio.
mod tokio_ref {
    use super::PAR_SIZE;
    use crate::groups::AbortOnDrop;

    pub async fn both() -> i32 {
        let mut i = 0;
        while i < PAR_SIZE {
            let (a, _) = tokio::join!(async { i + 1 }, async { i + 1 });
            i = a;
        }
        i
    }

    pub async fn race() -> i32 {
        let mut i = 0;
        while i < PAR_SIZE {
            i = tokio::select! {
                biased;
                j = async { i + 1 } => j,
                j = async { i + 1 } => j,
            };
        }
        i
    }

    pub async fn both_spawn() -> i32 {
        let mut i = 0;
        while i < PAR_SIZE {
            let left = tokio::spawn(async move { i + 1 });
            let right = tokio::spawn(async move { i + 1 });
            let a = left.await.expect("the left task ran");
            let _ = right.await.expect("the right task ran");
            i = a;
        }
        i
    }

    pub async fn race_spawn() -> i32 {
        let mut i = 0;
        while i < PAR_SIZE {
            let mut left = AbortOnDrop(tokio::spawn(async move { i + 1 }));
            let mut right = AbortOnDrop(tokio::spawn(async move { i + 1 }));
            i = tokio::select! {
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
            };
        }
        i
    }
}

fn both(c: &mut Criterion) {
    let size = PAR_SIZE as u64;
    compare(
        c,
        "Both.happyPath",
        size,
        size,
        PAR_SIZE,
        |rt| succeeded(rt.block_on(spindle::both())),
        |rt| rt.block_on(tokio_ref::both()),
    );
    extra_tokio(
        c,
        "Both.happyPath",
        "tokio_spawn",
        size,
        size,
        PAR_SIZE,
        |rt| rt.block_on(tokio_ref::both_spawn()),
    );
}

fn race(c: &mut Criterion) {
    let size = PAR_SIZE as u64;
    compare(
        c,
        "Race.happyPath",
        size,
        size,
        PAR_SIZE,
        |rt| succeeded(rt.block_on(spindle::race())),
        |rt| rt.block_on(tokio_ref::race()),
    );
    extra_tokio(
        c,
        "Race.happyPath",
        "tokio_spawn",
        size,
        size,
        PAR_SIZE,
        |rt| rt.block_on(tokio_ref::race_spawn()),
    );
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = both, race
}
criterion_main!(benches);
