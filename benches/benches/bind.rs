//! Bind loops: ports of Cats Effect's `ShallowBindBenchmark` and
//! `DeepBindBenchmark` (JMH, `benchmarks/` in typelevel/cats-effect), same
//! shapes, size 10,000.
//!
//! * **ShallowBind** measures a tail-recursive `flat_map` loop: each step
//!   builds `pure(i + 1)` (or `delay`, or a suspension) and binds the loop
//!   to it, so the continuation stack stays one frame deep.
//! * **DeepBind** measures a non-tail-recursive loop: `pure(i)` bound to a
//!   closure that recurses inside the bind, the shape of Cats Effect issue #89.
//!
//! One operation is one complete program of `SIZE` steps, built inside the
//! timed closure (`rt.block_on(build())`) as Cats Effect builds it inside
//! its `@Benchmark` method; throughput is declared in steps, so criterion's
//! elements/s is steps per second.
//!
//! Variants, on each side:
//!
//! * `pure`, `delay`: Cats Effect's `IO.pure` / `IO(...)`. Spindle:
//!   [`IO::pure`], [`IO::delay`]. tokio: the value itself, and a plain
//!   closure call inside the `async` block.
//! * `async`: Cats Effect's current source suspends with `IO.cede` at each
//!   step (the 2017 version used `IO.shift`): a real trip through the
//!   scheduler. Spindle: [`IO::cede`]. tokio: `tokio::task::yield_now()`.
//!   Note that a nested chain of boxed futures is re-polled from the top
//!   after every `Pending`, so on tokio each yield costs time proportional
//!   to the current recursion depth: the honest price of yielding inside
//!   deep `async` recursion, not a flaw of the harness.
//! * `async_callback` (not in Cats Effect; the closest port of its `async`
//!   with a callback completed at once): Spindle's
//!   `IO::async_(|cb| { cb.succeed(x); None })`; tokio: a
//!   `tokio::sync::oneshot` channel whose value is sent before it is
//!   awaited, a suspension-capable primitive that is ready at the first poll.
//!   tokio's cooperative budget makes such a primitive return `Pending` once
//!   every 128 polls, and each of those forced yields re-polls the whole
//!   nested chain; the extra function `tokio_unconstrained` runs the same
//!   program inside `tokio::task::unconstrained` (no budget), to show how
//!   much of the tokio time that is.
//!
//! The tokio reference is the same recursion written as boxed `async`
//! recursion (`Box::pin(async move { ... })`) on a current-thread runtime,
//! run with `rt.block_on(...)`.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench bind
//! cargo bench -p benches --bench bind -- ShallowBind.pure   # one group
//! ```

use std::convert::Infallible;

use benches::{SIZE, succeeded};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::IO;

mod common;

use common::{compare, extra_tokio};
use tokio::task::unconstrained;

/// The Spindle programs.
mod spindle {
    use super::*;

    type Io<A> = IO<A, Infallible>;

    pub use benches::bind_loops::{deep_pure, shallow_pure};

    pub fn shallow_delay() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                IO::delay(move || i + 1).flat_map(go)
            } else {
                IO::delay(move || i)
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn shallow_async() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                Io::<()>::cede()
                    .flat_map(move |()| IO::pure(i + 1))
                    .flat_map(go)
            } else {
                Io::<()>::cede().flat_map(move |()| IO::pure(i))
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn shallow_async_callback() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                IO::async_(move |cb| {
                    cb.succeed(i + 1);
                    None
                })
                .flat_map(go)
            } else {
                IO::async_(move |cb| {
                    cb.succeed(i);
                    None
                })
            }
        }
        IO::delay(|| 0).flat_map(go)
    }

    pub fn deep_delay() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            IO::delay(move || i).flat_map(|j| if j > SIZE { IO::pure(j) } else { go(j + 1) })
        }
        go(0)
    }

    pub fn deep_async() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            IO::delay(move || i).flat_map(|j| {
                Io::<()>::cede().flat_map(move |()| if j > SIZE { IO::pure(j) } else { go(j + 1) })
            })
        }
        go(0)
    }

    pub fn deep_async_callback() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            IO::delay(move || i).flat_map(|j| {
                Io::<()>::async_(|cb| {
                    cb.succeed(());
                    None
                })
                .flat_map(move |()| if j > SIZE { IO::pure(j) } else { go(j + 1) })
            })
        }
        go(0)
    }
}

/// The same programs as boxed `async` recursion, for tokio.
mod tokio_ref {
    use super::SIZE;
    use crate::common::{Boxed, delay};
    use tokio::sync::oneshot;
    use tokio::task::yield_now;

    /// A value delivered through a oneshot channel that was completed before
    /// the await: tokio's counterpart of an async callback called at once.
    async fn ready_via_oneshot<T>(value: T) -> T {
        let (tx, rx) = oneshot::channel();
        if tx.send(value).is_err() {
            unreachable!("the receiver is alive");
        }
        rx.await.expect("the value was sent")
    }

    pub fn shallow_pure() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move { if i < SIZE { go(i + 1).await } else { i } })
        }
        Box::pin(async { go(0).await })
    }

    pub fn shallow_delay() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                if i < SIZE {
                    let j = delay(move || i + 1);
                    go(j).await
                } else {
                    delay(move || i)
                }
            })
        }
        Box::pin(async { go(delay(|| 0)).await })
    }

    pub fn shallow_async() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                yield_now().await;
                if i < SIZE { go(i + 1).await } else { i }
            })
        }
        Box::pin(async { go(delay(|| 0)).await })
    }

    pub fn shallow_async_callback() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                if i < SIZE {
                    let j = ready_via_oneshot(i + 1).await;
                    go(j).await
                } else {
                    ready_via_oneshot(i).await
                }
            })
        }
        Box::pin(async { go(delay(|| 0)).await })
    }

    pub fn deep_pure() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                let j = i;
                if j > SIZE { j } else { go(j + 1).await }
            })
        }
        go(0)
    }

    pub fn deep_delay() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                let j = delay(move || i);
                if j > SIZE { j } else { go(j + 1).await }
            })
        }
        go(0)
    }

    pub fn deep_async() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                let j = delay(move || i);
                yield_now().await;
                if j > SIZE { j } else { go(j + 1).await }
            })
        }
        go(0)
    }

    pub fn deep_async_callback() -> Boxed<i32> {
        fn go(i: i32) -> Boxed<i32> {
            Box::pin(async move {
                let j = delay(move || i);
                ready_via_oneshot(()).await;
                if j > SIZE { j } else { go(j + 1).await }
            })
        }
        go(0)
    }
}

fn shallow_bind(c: &mut Criterion) {
    let size = SIZE as u64;
    let expected = SIZE;
    compare(
        c,
        "ShallowBind.pure",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::shallow_pure())),
        |rt| rt.block_on(tokio_ref::shallow_pure()),
    );
    compare(
        c,
        "ShallowBind.delay",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::shallow_delay())),
        |rt| rt.block_on(tokio_ref::shallow_delay()),
    );
    compare(
        c,
        "ShallowBind.async",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::shallow_async())),
        |rt| rt.block_on(tokio_ref::shallow_async()),
    );
    compare(
        c,
        "ShallowBind.async_callback",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::shallow_async_callback())),
        |rt| rt.block_on(tokio_ref::shallow_async_callback()),
    );
    extra_tokio(
        c,
        "ShallowBind.async_callback",
        "tokio_unconstrained",
        size,
        size,
        expected,
        |rt| rt.block_on(unconstrained(tokio_ref::shallow_async_callback())),
    );
}

fn deep_bind(c: &mut Criterion) {
    let size = SIZE as u64;
    // The loop stops at the first j above SIZE.
    let expected = SIZE + 1;
    compare(
        c,
        "DeepBind.pure",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::deep_pure())),
        |rt| rt.block_on(tokio_ref::deep_pure()),
    );
    compare(
        c,
        "DeepBind.delay",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::deep_delay())),
        |rt| rt.block_on(tokio_ref::deep_delay()),
    );
    compare(
        c,
        "DeepBind.async",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::deep_async())),
        |rt| rt.block_on(tokio_ref::deep_async()),
    );
    compare(
        c,
        "DeepBind.async_callback",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::deep_async_callback())),
        |rt| rt.block_on(tokio_ref::deep_async_callback()),
    );
    extra_tokio(
        c,
        "DeepBind.async_callback",
        "tokio_unconstrained",
        size,
        size,
        expected,
        |rt| rt.block_on(unconstrained(tokio_ref::deep_async_callback())),
    );
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = shallow_bind, deep_bind
}
criterion_main!(benches);
