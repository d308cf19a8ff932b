//! Stack safety: programs a million levels deep run and drop in constant
//! native stack.
//!
//! Each test builds, runs or drops its program on a thread with a 256 KiB
//! stack (`common::on_small_stack`): a run-loop or a drop that recursed once
//! per level would need far more (hundreds of MiB for a million levels) and
//! the test process would die with a stack overflow.
//!
//! IO blocks too: a million awaits in one block, blocks nested
//! [`NESTED_BLOCKS`] deep (each awaiting the next, as a recursive `async
//! fn` would), run, canceled and dropped. On exec-wstp and exec-tokio the
//! fibers run on the executors' worker threads (default stacks, a few MiB),
//! which a recursion per await or per level would overflow just as well.

mod common;

use common::{Counter, DropCounter, on_small_stack, rt_test};
use spindle_core::{Deferred, IO, Outcome, Ref};

/// Depth of the deep programs (scaled down under Miri).
const DEPTH: u64 = if cfg!(miri) { 2_000 } else { 1_000_000 };

/// Depth of the nested IO blocks: each level has a driver allocation of its
/// own (about 160 bytes), so a tenth of [`DEPTH`]; a recursion per level
/// would still need tens of MiB of stack.
const NESTED_BLOCKS: u64 = DEPTH / 10;

/// Blocks nested `n` deep, each awaiting the next (a recursive `async fn`
/// as programs): the bottom one awaits `bottom`. Each level holds a
/// [`DropCounter`] across its await.
fn nested_blocks(n: u64, bottom: IO<u64, ()>, dropped: Counter) -> IO<u64, ()> {
    IO::block(async move {
        let _state = DropCounter(dropped.clone());
        if n == 0 {
            bottom.await
        } else {
            Ok(nested_blocks(n - 1, bottom, dropped).await? + 1)
        }
    })
}

/// `IO::pure(0)` followed by `DEPTH` left-nested `flat_map`s, built ahead.
fn left_nested_flat_maps() -> IO<u64, String> {
    let mut io: IO<u64, String> = IO::pure(0);
    for _ in 0..DEPTH {
        io = io.flat_map(|x| IO::pure(x + 1));
    }
    io
}

/// `DEPTH` right-nested `flat_map`s built ahead of time: each level's
/// closure owns the next level's program. Every level counts its run.
fn materialized_right_nested_flat_maps(counter: &Counter) -> IO<u64, String> {
    let mut io: IO<u64, String> = IO::pure(DEPTH);
    for _ in 0..DEPTH {
        let c = counter.clone();
        io = IO::pure(0u64).flat_map(move |_| {
            c.incr();
            io
        });
    }
    io
}

/// A right-nested chain built lazily, one level per step.
fn count_up(i: u64) -> IO<u64, String> {
    if i < DEPTH {
        IO::pure(i + 1).flat_map(count_up)
    } else {
        IO::pure(i)
    }
}

rt_test! {
    fn a_million_left_nested_flat_maps_run_in_constant_stack() {
        let outcome = on_small_stack(|| run(left_nested_flat_maps()));
        assert_eq!(outcome, Outcome::Succeeded(DEPTH));
    }

    fn a_million_right_nested_flat_maps_built_lazily_run_in_constant_stack() {
        let outcome = on_small_stack(|| run(IO::<u64, String>::pure(0).flat_map(count_up)));
        assert_eq!(outcome, Outcome::Succeeded(DEPTH));
    }

    fn a_million_right_nested_flat_maps_built_ahead_run_in_constant_stack() {
        let counter = Counter::new();
        let c = counter.clone();
        let outcome = on_small_stack(move || run(materialized_right_nested_flat_maps(&c)));
        assert_eq!(outcome, Outcome::Succeeded(DEPTH));
        assert_eq!(counter.get() as u64, DEPTH, "every level ran once");
    }

    fn a_million_nested_maps_run_in_constant_stack() {
        let outcome = on_small_stack(|| {
            let mut io: IO<u64, String> = IO::delay(|| 0);
            for _ in 0..DEPTH {
                io = io.map(|x| x + 1);
            }
            run(io)
        });
        assert_eq!(outcome, Outcome::Succeeded(DEPTH));
    }

    fn a_million_nested_error_handlers_recover_an_error_raised_at_the_bottom() {
        let outcome = on_small_stack(|| {
            let mut io: IO<u64, u64> = IO::raise_error(7);
            // The innermost handler recovers; every outer one then sees a
            // success and must be skipped without being called.
            io = io.handle_error_with(|e| IO::pure(e * 100));
            for _ in 1..DEPTH {
                io = io.handle_error_with(|_| IO::pure(u64::MAX));
            }
            run(io)
        });
        assert_eq!(outcome, Outcome::Succeeded(700));
    }

    fn a_million_nested_error_handlers_each_reraising_run_in_constant_stack() {
        let outcome = on_small_stack(|| {
            let mut io: IO<u64, u64> = IO::raise_error(0);
            for _ in 0..DEPTH {
                io = io.handle_error_with(|e| IO::raise_error(e + 1));
            }
            run(io)
        });
        assert_eq!(outcome, Outcome::Errored(DEPTH));
    }

    fn a_million_nested_error_handlers_on_the_happy_path_run_in_constant_stack() {
        let calls = Counter::new();
        let c = calls.clone();
        let outcome = on_small_stack(move || {
            let mut io: IO<u64, u64> = IO::delay(|| 42);
            for _ in 0..DEPTH {
                let c = c.clone();
                io = io.handle_error_with(move |e| {
                    c.incr();
                    IO::raise_error(e)
                });
            }
            run(io)
        });
        assert_eq!(outcome, Outcome::Succeeded(42));
        assert_eq!(calls.get(), 0, "no handler runs on the happy path");
    }

    fn a_million_awaits_of_programs_and_futures_in_one_block_run_in_constant_stack() {
        let outcome = on_small_stack(|| {
            let total = Ref::new(0u64);
            let program: IO<u64, String> = IO::block(async move {
                for i in 0..DEPTH {
                    if i % 2 == 0 {
                        total.update(|n| *n += 1).value().await;
                    } else {
                        let one = std::future::ready(1).await;
                        let n = IO::<u64, String>::delay(move || one).await?;
                        total.update(move |t| *t += n).value().await;
                    }
                }
                Ok(total.get().value().await)
            });
            run(program)
        });
        assert_eq!(outcome, Outcome::Succeeded(DEPTH));
    }

    fn blocks_nested_deep_run_and_drop_their_state_in_constant_stack() {
        let dropped = Counter::new();
        let d = dropped.clone();
        let outcome = on_small_stack(move || run(nested_blocks(NESTED_BLOCKS, IO::pure(0), d)));
        assert_eq!(outcome, Outcome::Succeeded(NESTED_BLOCKS));
        assert_eq!(dropped.get() as u64, NESTED_BLOCKS + 1, "each level's state dropped once");
    }

    fn an_error_at_the_bottom_of_nested_blocks_reaches_the_top_in_constant_stack() {
        let dropped = Counter::new();
        let d = dropped.clone();
        let outcome = on_small_stack(move || {
            run(nested_blocks(NESTED_BLOCKS, IO::raise_error(()), d))
        });
        assert_eq!(outcome, Outcome::Errored(()));
        assert_eq!(dropped.get() as u64, NESTED_BLOCKS + 1, "each level's state dropped once");
    }

    fn canceling_a_fiber_under_nested_blocks_drops_each_blocks_state_once_in_constant_stack() {
        let dropped = Counter::new();
        let d = dropped.clone();
        let outcome = on_small_stack(move || {
            let started = Deferred::<()>::new();
            let signal = started.clone();
            let bottom = signal.complete(()).product_r(IO::never());
            run(nested_blocks(NESTED_BLOCKS, bottom, d).start::<()>().flat_map(move |fiber| {
                started.get().product_r(fiber.cancel()).product_r(fiber.join())
            }))
        });
        assert_eq!(outcome, Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(dropped.get() as u64, NESTED_BLOCKS + 1, "each level's state dropped once");
    }

    fn an_error_at_the_bottom_of_a_million_maps_skips_them_in_constant_stack() {
        let outcome = on_small_stack(|| {
            let mut io: IO<u64, String> = IO::raise_error("bottom".to_string());
            for _ in 0..DEPTH {
                io = io.map(|x| x + 1).flat_map(|x| IO::pure(x + 1));
            }
            run(io.handle_error(|e| e.len() as u64))
        });
        assert_eq!(outcome, Outcome::Succeeded(6));
    }
}

// Dropping needs no executor: these run once, not per executor.

#[test]
fn dropping_an_unevaluated_million_deep_left_nested_program_does_not_overflow() {
    on_small_stack(|| drop(left_nested_flat_maps()));
}

#[test]
fn dropping_an_unevaluated_million_deep_nested_handler_and_map_program_does_not_overflow() {
    on_small_stack(|| {
        let mut io: IO<u64, u64> = IO::pure(0);
        for i in 0..DEPTH {
            io = match i % 4 {
                0 => io.map(|x| x + 1),
                1 => io.handle_error_with(IO::raise_error),
                2 => io.map_err(|e| e + 1),
                _ => io.attempt().rethrow(),
            };
        }
        drop(io);
    });
}

#[test]
fn dropping_an_unevaluated_million_deep_right_nested_program_built_ahead_does_not_overflow() {
    let counter = Counter::new();
    let c = counter.clone();
    on_small_stack(move || drop(materialized_right_nested_flat_maps(&c)));
    assert_eq!(counter.get(), 0, "dropping runs no closure");
}

#[test]
fn dropping_an_unevaluated_million_deep_finalizer_and_poll_program_does_not_overflow() {
    let counter = Counter::new();
    let c = counter.clone();
    on_small_stack(move || {
        let mut io: IO<u64, u64> = IO::pure(0);
        for i in 0..DEPTH {
            io = match i % 3 {
                0 => {
                    let c = c.clone();
                    io.guarantee(c.incr_io())
                }
                1 => {
                    let c = c.clone();
                    io.on_cancel(c.incr_io())
                }
                _ => IO::uncancelable(move |poll| poll.apply(io)),
            };
        }
        drop(io);
    });
    assert_eq!(counter.get(), 0, "dropping runs no finalizer");
}

#[test]
fn dropping_an_unevaluated_program_of_blocks_nested_deep_does_not_overflow() {
    // Each block owns the next program, unpolled: dropping one drops the
    // next from inside the future's drop.
    let dropped = Counter::new();
    let d = dropped.clone();
    on_small_stack(move || {
        let mut io: IO<u64, ()> = IO::pure(0);
        for _ in 0..NESTED_BLOCKS {
            let state = DropCounter(d.clone());
            io = IO::block(async move {
                let _state = state;
                Ok(io.await? + 1)
            });
        }
        drop(io);
    });
    assert_eq!(
        dropped.get() as u64,
        NESTED_BLOCKS,
        "each block's state dropped once"
    );
}
