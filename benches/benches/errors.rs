//! Error handling: ports of Cats Effect's `AttemptBenchmark` and
//! `HandleErrorBenchmark` (JMH, `benchmarks/` in typelevel/cats-effect),
//! same shapes, size 10,000.
//!
//! * **Attempt.happyPath**: each step is `pure(i + 1).attempt()` folded back
//!   (`Err` re-raised, `Ok` continues the loop): the cost of an `attempt`
//!   frame that sees no error.
//! * **Attempt.errorRaised**: each step raises the error, skips a `flat_map`
//!   frame, and `attempt` turns the error into a value that continues the
//!   loop: the cost of unwinding to a handler.
//! * **HandleError.happyPath**: `pure(i + 1).handle_error_with(raise_error)`
//!   bound to the loop: an error-handler frame popped without work.
//! * **HandleError.errorRaised**: raise, skip two `flat_map` frames, and
//!   recover in `handle_error_with`, which continues the loop.
//!
//! One operation is one complete program of `SIZE` steps, built inside the
//! timed closure as Cats Effect builds it inside its `@Benchmark` method;
//! throughput is declared in steps (elements/s = steps per second). The
//! error is one preallocated value (`benches::DUMMY`), as Cats Effect raises
//! one preallocated exception.
//!
//! The tokio reference is the same recursion written as boxed `async`
//! recursion on a current-thread runtime: errors are `Result<_, Dummy>`
//! values, raised with `?` and recovered with `match`. The optimizer sees
//! through much of that plumbing (a raised error that is matched two lines
//! later costs next to nothing), so on tokio these workloads mostly measure
//! the boxed recursion; that is the cost an `async` Rust programmer pays.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench errors
//! cargo bench -p benches --bench errors -- Attempt   # one benchmark
//! ```

use benches::{DUMMY, Dummy, SIZE, succeeded};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::IO;

mod common;

use common::compare;

/// The Spindle programs.
mod spindle {
    use super::*;

    type Io<A> = IO<A, Dummy>;

    pub fn attempt_happy_path() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                IO::pure(i + 1).attempt().flat_map(|r| match r {
                    Ok(j) => go(j),
                    Err(e) => IO::raise_error(e),
                })
            } else {
                IO::pure(i)
            }
        }
        go(0)
    }

    pub fn attempt_error_raised() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                Io::<i32>::raise_error(DUMMY)
                    .flat_map(|x| IO::pure(x + 1))
                    .attempt()
                    .flat_map(move |r| match r {
                        Err(_) => go(i + 1),
                        Ok(x) => IO::pure(x),
                    })
            } else {
                IO::pure(i)
            }
        }
        go(0)
    }

    pub fn handle_error_happy_path() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                IO::pure(i + 1)
                    .handle_error_with(IO::raise_error)
                    .flat_map(go)
            } else {
                IO::pure(i)
            }
        }
        go(0)
    }

    pub fn handle_error_error_raised() -> Io<i32> {
        fn go(i: i32) -> Io<i32> {
            if i < SIZE {
                Io::<i32>::raise_error(DUMMY)
                    .flat_map(|x| IO::pure(x + 1))
                    .flat_map(|x| IO::pure(x + 1))
                    .handle_error_with(move |_| go(i + 1))
            } else {
                IO::pure(i)
            }
        }
        go(0)
    }
}

/// The same programs as boxed `async` recursion, for tokio.
mod tokio_ref {
    use super::{DUMMY, Dummy, SIZE};
    use crate::common::Boxed;

    type Fut = Boxed<Result<i32, Dummy>>;

    fn raise<T>(e: Dummy) -> Result<T, Dummy> {
        Err(e)
    }

    pub fn attempt_happy_path() -> Fut {
        fn go(i: i32) -> Fut {
            Box::pin(async move {
                if i < SIZE {
                    let attempted: Result<i32, Dummy> = Ok(i + 1);
                    match attempted {
                        Ok(j) => go(j).await,
                        Err(e) => Err(e),
                    }
                } else {
                    Ok(i)
                }
            })
        }
        go(0)
    }

    pub fn attempt_error_raised() -> Fut {
        fn go(i: i32) -> Fut {
            Box::pin(async move {
                if i < SIZE {
                    let attempted = async {
                        let x: i32 = raise(DUMMY)?;
                        Ok::<i32, Dummy>(x + 1)
                    }
                    .await;
                    match attempted {
                        Err(_) => go(i + 1).await,
                        Ok(x) => Ok(x),
                    }
                } else {
                    Ok(i)
                }
            })
        }
        go(0)
    }

    pub fn handle_error_happy_path() -> Fut {
        fn go(i: i32) -> Fut {
            Box::pin(async move {
                if i < SIZE {
                    let handled: Result<i32, Dummy> = match Ok(i + 1) {
                        Ok(j) => Ok(j),
                        Err(e) => raise(e),
                    };
                    go(handled?).await
                } else {
                    Ok(i)
                }
            })
        }
        go(0)
    }

    pub fn handle_error_error_raised() -> Fut {
        fn go(i: i32) -> Fut {
            Box::pin(async move {
                if i < SIZE {
                    let attempted = async {
                        let x: i32 = raise(DUMMY)?;
                        let x = x + 1;
                        Ok::<i32, Dummy>(x + 1)
                    }
                    .await;
                    match attempted {
                        Ok(x) => Ok(x),
                        Err(_) => go(i + 1).await,
                    }
                } else {
                    Ok(i)
                }
            })
        }
        go(0)
    }
}

fn attempt(c: &mut Criterion) {
    let size = SIZE as u64;
    compare(
        c,
        "Attempt.happyPath",
        size,
        size,
        Ok(SIZE),
        |rt| Ok(succeeded(rt.block_on(spindle::attempt_happy_path()))),
        |rt| rt.block_on(tokio_ref::attempt_happy_path()),
    );
    compare(
        c,
        "Attempt.errorRaised",
        size,
        size,
        Ok(SIZE),
        |rt| Ok(succeeded(rt.block_on(spindle::attempt_error_raised()))),
        |rt| rt.block_on(tokio_ref::attempt_error_raised()),
    );
}

fn handle_error(c: &mut Criterion) {
    let size = SIZE as u64;
    compare(
        c,
        "HandleError.happyPath",
        size,
        size,
        Ok(SIZE),
        |rt| Ok(succeeded(rt.block_on(spindle::handle_error_happy_path()))),
        |rt| rt.block_on(tokio_ref::handle_error_happy_path()),
    );
    compare(
        c,
        "HandleError.errorRaised",
        size,
        size,
        Ok(SIZE),
        |rt| Ok(succeeded(rt.block_on(spindle::handle_error_error_raised()))),
        |rt| rt.block_on(tokio_ref::handle_error_error_raised()),
    );
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = attempt, handle_error
}
criterion_main!(benches);
