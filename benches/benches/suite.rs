//! The whole suite: every Cats Effect benchmark workload that has a meaning
//! in Spindle, written once, generic over the executor, and run on each of
//! Spindle's executors, with tokio as the reference where it has an
//! equivalent.
//!
//! # Runtimes
//!
//! A workload is a [`Workload`] (most are a [`Program`]: a function that
//! builds one `IO` value, which names no executor); `rt::BenchRt` is the
//! seam, implemented for `spindle_exec_single::SingleThreaded`, `spindle_exec_wstp::Runtime`
//! (2 workers), `spindle_exec_batching::EventLoop` and
//! `spindle_exec_tokio::TokioExecutor` (an owned tokio multi-thread runtime
//! with 2 workers: Spindle's fibers as tokio tasks, `spindle_tokio`), and
//! `Group::spindle_all` registers the same workload on the four, monomorphized for each
//! (static dispatch; nothing in the measured loop knows which executor it
//! is on). The tokio references (`suite/tokio_ref.rs`) are written with
//! `Send` futures so that one program runs on tokio's
//! current-thread runtime (`tokio`, `rt.block_on`) and, as a task on a
//! worker, on its multi-thread runtime with 2 workers (`tokio_mt`).
//! `benches/PORTS.md` explains each port: what the Spindle program and its
//! tokio reference do, and where either differs from Cats Effect's.
//!
//! # Naming (parsed by tools: keep it exactly)
//!
//! Group `suite.<Workload>.<variant>`, function `<runtime>/<size>`, with
//! `<runtime>` one of `single`, `wstp`, `batching`, `spindle_tokio`, `tokio`, `tokio_mt` and
//! `<size>` Cats Effect's size parameter. Each group declares
//! `Throughput::Elements(steps)` per operation (reports read in elements/s;
//! what an element is, each registration function says). Each function
//! builds its runtime when criterion first calls it, runs the operation
//! once and checks its result before measuring, and drops the runtime when
//! done (a filtered-out benchmark builds and runs nothing).
//!
//! # Workloads × runtimes (377 benchmarks)
//!
//! | Group (`suite.` omitted)                     | sizes            | single wstp batching spindle_tokio | tokio | tokio_mt | count |
//! |----------------------------------------------|------------------|:---:|:---:|:---:|---:|
//! | ShallowBind, DeepBind `.pure/.delay/.async`  | 10,000           | ✓ | ✓ | – | 30 |
//! | ShallowBind, DeepBind `.blockPure/.blockDelay` (IO blocks) | 10,000 | ✓ | – (the `.pure/.delay` rows') | – | 16 |
//! | Attempt, HandleError, Redeem, RedeemWith `.happyPath/.errorRaised` | 10,000 | ✓ | ✓ | – | 40 |
//! | MapCalls `.one/.batch30/.batch120`           | 12,000 maps      | ✓ | ✓ | – | 15 |
//! | MapStream `.one/.batch30/.batch120`          | 12,000 maps      | ✓ | – | – | 12 |
//! | Async `.async/.cancelBoundary/.cancelable/.parMap2/.race/.racePair/.start` | 100 | ✓ | ✓ | – | 35 |
//! | Async `.bracket/.uncancelable`               | 100              | ✓ | – | – | 8 |
//! | Both, Race `.happyPath`                      | 10,000           | ✓ | ✓ (spawned tasks) | ✓ | 12 |
//! | Blocking `.fine/.coarse`                     | 10,000           | ✓ | ✓ (`spawn_blocking`) | – | 10 |
//! | Deferred `.get/.complete/.cancel`            | 10, 100, 1000    | ✓ | ✓ | – | 45 |
//! | Ref `.modify/.getAndUpdate`                  | 10,000           | ✓ | ✓ | – | 10 |
//! | Queue `.{bounded,unbounded}{One,Many}`, `.boundedContendedSingleConsumer` | 32,768 | ✓ | ✓ (mpsc) | – | 25 |
//! | Queue `.{bounded,unbounded}Contended`, `.unboundedContendedSingleConsumer` | 32,768 | ✓ | – | – | 12 |
//! | Mutex `.happyPath/.highContention/.cancellation` | 10, 50, 100 fibers | ✓ | ✓ | – | 45 |
//! | Sleep `.sleep`                               | 10,000 fibers    | ✓ | ✓ (paused clock) | – | 5 |
//! | Parallel `.parTraverse`                      | 100, 1000        | ✓ | ✓ | ✓ | 12 |
//! | WorkStealing `.scheduling/.alloc/.runnableScheduling` | 10,000 / 250 / 10,000 | wstp, spindle_tokio | – | ✓ | 9 |
//! | Rt `.spawn_many/.yield_many/.ping_pong/.chained_spawn` | 10,000 / 200 / 1,000 / 1,000 | ✓ | ✓ | ✓ | 24 |
//! | PingPong `.queue/.deferred` (two fibers, a wake-up each way per round trip) | 1,000 round trips | ✓ | ✓ (`mpsc`/`oneshot`) | ✓ | 12 |
//!
//! Notes on a few rows (`benches/PORTS.md` has all of them):
//!
//! * **ShallowBind / DeepBind `.blockPure/.blockDelay`**: the bind loops
//!   written as IO blocks (`IO::block`), beside their `flat_map` forms:
//!   what an `.await` costs against a `flat_map`. ShallowBind: one block,
//!   a `while` loop of 10,000 awaits of `pure(i + 1)` (`delay(|| i + 1)`),
//!   each `.value().await` one step of the fiber's run-loop. DeepBind:
//!   recursion through nested blocks, each level a block that awaits
//!   `pure(i)` (`delay(|| i)`) and then the next level's block, the shape
//!   of a recursive `async fn`. Chosen because DeepBind differs from
//!   ShallowBind only in where the recursion is (inside the bind's
//!   closure), and a block keeps that only by awaiting its recursive call:
//!   a loop in one block would be ShallowBind again. The price is depth:
//!   the closure of the `flat_map` form (and of Cats Effect's
//!   `DeepBindBenchmark`) returns the recursive program as a tail call and
//!   stays one frame deep, while each level's block waits on the fiber's
//!   stack, one driver allocation each, until the level below ends (10,002
//!   levels). The tokio reference is the `tokio` row of the `.pure/.delay`
//!   groups (the same loops; no row of its own).
//! * **Redeem / RedeemWith**: Cats Effect's `RedeemBenchmark` and
//!   `RedeemWithBenchmark` (`happyPath`: `pure(i + 1).redeem(_ => 0, id)`,
//!   `.redeemWith(raiseError, loop)`; `errorRaised`: raise, skip one or two
//!   `flatMap`s, and redeem into the loop). tokio: the `match` on a
//!   `Result` that Attempt and HandleError use.
//! * **MapStream**: `MapStreamBenchmark`'s stream (a value and the `IO`
//!   that produces the rest), `12000 / batch` elements, `batch` layers of
//!   `map(_ + 1)`, summed by a loop through the stream's programs. The
//!   `filter` of Cats Effect's source is left out (only the maps are
//!   measured). No tokio row: tokio has no stream of effects without the
//!   `futures` crate, and a `Stream` impl would measure something else.
//! * **Blocking**: `BlockingBenchmark`'s `fine` (`IO::blocking` around
//!   each step of a countdown from 10,000) and `coarse` (one `blocking`
//!   around the whole countdown). exec-single runs blocking work inline,
//!   exec-wstp on its blocking pool, exec-batching on a thread per task
//!   (so `fine` on `batching` is 10,000 thread starts per operation).
//! * **WorkStealing.runnableScheduling**: Cats Effect submits plain
//!   runnables to the compute pool; Spindle's executors run fibers, so each
//!   runnable is a fiber that starts the next (never joined), and the latch
//!   a counter plus a `Deferred`. tokio: spawned tasks and a `Notify`.
//!   `scheduling`, `alloc`: Cats Effect's, with sizes scaled down.
//!   These three run only where fibers run on several threads.
//! * **Rt**: tokio's scheduler shapes, as a program of the main fiber
//!   (spawn 10,000 empty fibers and join them; 200 fibers ceding 1,000
//!   times each, joined; 1,000 ping-pong rounds of 3 fibers and 2
//!   `Deferred`s, joined; a chain of 1,000 fibers each starting the next,
//!   the last completing a `Deferred`), so that they run on the
//!   single-threaded executors too. On tokio the same shapes with
//!   `tokio::spawn`, `yield_now`, `oneshot`.
//!
//! # Left out
//!
//! * The extra rows of the per-family bench targets this suite replaced
//!   (up to commit `b390b8a`): the bind loops' `async_callback` variant and
//!   its `tokio_unconstrained` function, the `join!`/`select!` floor of
//!   Both and Race (here their tokio row spawns a task per side,
//!   like-for-like with Spindle's fibers), and exec-wstp's
//!   `spawn_many_remote_idle` and `parTraverse_cpu100`. They were
//!   diagnostics of earlier issues, not Cats Effect workloads.
//! * The other `BlockingBenchmark` variants (nested blocking, blocking then
//!   cede, ...) and the Cats Effect benchmarks of its own internals
//!   (`Dispatcher`, `ScalQueue`, the thread-blocking variants of
//!   `WorkStealingBenchmark`): no Spindle counterpart.
//! * tokio rows where tokio has no equivalent: Async `bracket`,
//!   `uncancelable` (no masking in tokio), the multi-consumer Queue rows
//!   (mpsc has one consumer), MapStream (see above).
//!
//! # Time budget
//!
//! Normal config: 15 samples, 0.5 s warm-up, 1.5 s measurement, with
//! criterion's HTML plots. Measured: **1,409 s (23.5 min) for the 276
//! benchmarks** (before the `spindle_tokio` column; with its 71 rows,
//! 347 now, expect about a quarter more, close to the 30-minute budget:
//! filter with `-- '/wstp/'`-style ids when that matters) on the 2-core development machine, otherwise idle
//! (BENCHMARKS.md, "Suite"), inside the 30-minute budget. That is 5.1 s per
//! benchmark on average: 2 s of warm-up and measurement, the check run,
//! criterion's analysis and plots, and the long operations, which criterion
//! stretches to fit their samples (`Blocking.fine` on `batching`, ~1.8 s
//! per op; the four `Sleep` rows, ~0.2 s per op; tokio's
//! `ShallowBind.async` and `DeepBind.async`, ~0.35 s per op; the
//! WorkStealing rows).
//!
//! Quick config (`SPINDLE_BENCH_QUICK=1`): 10 samples, 0.1 s warm-up,
//! 0.35 s measurement, no plots: 276 × ~0.6 s ≈ 3 min plus the long
//! operations (about 1.5 min). With 0.2 s and 0.5 s it ran in 346 s on the
//! 2-core development machine while other builds shared it (load average
//! ~4); the shorter settings bring it under 5 minutes (BENCHMARKS.md has
//! the measured time of the run it reports).
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench suite                          # ~24 min
//! SPINDLE_BENCH_QUICK=1 cargo bench -p benches --bench suite    # ~4 min
//! SPINDLE_BENCH_QUICK=1 cargo bench -p benches --bench suite -- suite.ShallowBind
//! cargo bench -p benches --bench suite -- '/wstp/'              # one runtime
//! ```

use std::time::Duration;

use benches::{
    ASYNC_SIZE, DEFERRED_COUNTS, DEFERRED_ROUNDS, MAP_CALLS_TOTAL, MUTEX_FIBERS, MUTEX_ITERATIONS,
    PAR_SIZE, QUEUE_SIZE, REF_ITERATIONS, SIZE, SLEEP_FIBERS, sleep_totals,
};
use criterion::{Criterion, criterion_group, criterion_main};
use spindle_core::IO;

#[path = "suite/programs.rs"]
mod programs;
#[path = "suite/rt.rs"]
mod rt;
#[path = "suite/tokio_ref.rs"]
mod tokio_ref;

use programs as p;
use rt::{BenchRt, Group, Program, Workload, tokio_paused_clock};
use tokio_ref as t;

/// Criterion settings: the normal ones, or with `SPINDLE_BENCH_QUICK=1` the
/// quick ones (see the header for the budget of each).
fn config() -> Criterion {
    let quick = std::env::var("SPINDLE_BENCH_QUICK").is_ok_and(|v| v == "1");
    if quick {
        Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_millis(350))
            .without_plots()
    } else {
        Criterion::default()
            .sample_size(15)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_millis(1500))
    }
}

/// `ShallowBind` and `DeepBind`, `pure`/`delay`/`async`, size 10,000, and
/// `blockPure`/`blockDelay`: the same loops written as IO blocks.
fn bind(c: &mut Criterion) {
    let size = SIZE as u64;
    Group::new(c, "ShallowBind", "pure", size, size)
        .spindle_all(Program(p::shallow_pure), SIZE)
        .tokio(SIZE, t::shallow_pure);
    Group::new(c, "ShallowBind", "delay", size, size)
        .spindle_all(Program(p::shallow_delay), SIZE)
        .tokio(SIZE, t::shallow_delay);
    Group::new(c, "ShallowBind", "async", size, size)
        .spindle_all(Program(p::shallow_async), SIZE)
        .tokio(SIZE, t::shallow_async);
    // The loop stops at the first j above SIZE.
    Group::new(c, "DeepBind", "pure", size, size)
        .spindle_all(Program(p::deep_pure), SIZE + 1)
        .tokio(SIZE + 1, t::deep_pure);
    Group::new(c, "DeepBind", "delay", size, size)
        .spindle_all(Program(p::deep_delay), SIZE + 1)
        .tokio(SIZE + 1, t::deep_delay);
    Group::new(c, "DeepBind", "async", size, size)
        .spindle_all(Program(p::deep_async), SIZE + 1)
        .tokio(SIZE + 1, t::deep_async);
    // The same loops written as IO blocks (the header's notes); their tokio
    // reference is the `pure`/`delay` groups' `tokio` row.
    Group::new(c, "ShallowBind", "blockPure", size, size)
        .spindle_all(Program(p::shallow_block_pure), SIZE);
    Group::new(c, "ShallowBind", "blockDelay", size, size)
        .spindle_all(Program(p::shallow_block_delay), SIZE);
    Group::new(c, "DeepBind", "blockPure", size, size)
        .spindle_all(Program(p::deep_block_pure), SIZE + 1);
    Group::new(c, "DeepBind", "blockDelay", size, size)
        .spindle_all(Program(p::deep_block_delay), SIZE + 1);
}

/// `Attempt`, `HandleError`, `Redeem`, `RedeemWith`: `happyPath` and
/// `errorRaised`, size 10,000.
fn errors(c: &mut Criterion) {
    let size = SIZE as u64;
    Group::new(c, "Attempt", "happyPath", size, size)
        .spindle_all(Program(p::attempt_happy_path), SIZE)
        .tokio(Ok(SIZE), t::attempt_happy_path);
    Group::new(c, "Attempt", "errorRaised", size, size)
        .spindle_all(Program(p::attempt_error_raised), SIZE)
        .tokio(Ok(SIZE), t::attempt_error_raised);
    Group::new(c, "HandleError", "happyPath", size, size)
        .spindle_all(Program(p::handle_error_happy_path), SIZE)
        .tokio(Ok(SIZE), t::handle_error_happy_path);
    Group::new(c, "HandleError", "errorRaised", size, size)
        .spindle_all(Program(p::handle_error_error_raised), SIZE)
        .tokio(Ok(SIZE), t::handle_error_error_raised);
    Group::new(c, "Redeem", "happyPath", size, size)
        .spindle_all(Program(p::redeem_happy_path), SIZE)
        .tokio(Ok(SIZE), t::handle_error_happy_path);
    Group::new(c, "Redeem", "errorRaised", size, size)
        .spindle_all(Program(p::redeem_error_raised), SIZE)
        .tokio(Ok(SIZE), t::redeem_error_raised);
    Group::new(c, "RedeemWith", "happyPath", size, size)
        .spindle_all(Program(p::redeem_with_happy_path), SIZE)
        .tokio(Ok(SIZE), t::handle_error_happy_path);
    Group::new(c, "RedeemWith", "errorRaised", size, size)
        .spindle_all(Program(p::redeem_with_error_raised), SIZE)
        .tokio(Ok(SIZE), t::attempt_error_raised);
}

/// One MapCalls operation: `12000 / batch` programs, each a chain of
/// `batch` maps run to its end (many `block_on`s per operation, so this is
/// a workload of its own rather than a [`Program`]).
struct MapCalls {
    batch: usize,
}

impl Workload for MapCalls {
    type Out = i64;
    fn run<R: BenchRt>(&self, rt: &mut R) -> i64 {
        let mut sum = 0i64;
        for _ in 0..MAP_CALLS_TOTAL / self.batch {
            sum += i64::from(rt.run(p::map_chain(self.batch)));
        }
        sum
    }
}

/// `MapCalls` and `MapStream`: `one`, `batch30`, `batch120` (12,000 maps
/// per operation; elements: maps).
fn maps(c: &mut Criterion) {
    let total = MAP_CALLS_TOTAL as u64;
    for (variant, batch) in [("one", 1usize), ("batch30", 30), ("batch120", 120)] {
        // Every chain produces `batch`; the sum is the total number of maps.
        Group::new(c, "MapCalls", variant, total, total)
            .spindle_all(MapCalls { batch }, total as i64)
            .tokio_on("tokio", rt::tokio_current, total as i64, |rt| {
                t::map_calls(rt, batch)
            });
        let times = (MAP_CALLS_TOTAL / batch) as i64;
        Group::new(c, "MapStream", variant, total, total).spindle_all(
            Program(move || p::map_stream_test(times, batch)),
            p::map_stream_expected(times, batch),
        );
    }
}

/// Cats Effect's `AsyncBenchmark`, size 100: nine workloads; `bracket` and
/// `uncancelable` have no tokio counterpart (no masking in tokio).
fn async_ops(c: &mut Criterion) {
    let size = ASYNC_SIZE as u64;
    let sum = (0..ASYNC_SIZE).sum::<i32>();
    Group::new(c, "Async", "async", size, size)
        .spindle_all(Program(p::async_async), ASYNC_SIZE)
        .tokio(ASYNC_SIZE, t::async_async);
    Group::new(c, "Async", "bracket", size, size)
        .spindle_all(Program(p::async_bracket), ASYNC_SIZE);
    Group::new(c, "Async", "cancelBoundary", size, size)
        .spindle_all(Program(p::async_cancel_boundary), ASYNC_SIZE)
        .tokio(ASYNC_SIZE, t::async_cancel_boundary);
    Group::new(c, "Async", "cancelable", size, size)
        .spindle_all(Program(p::async_cancelable), ASYNC_SIZE)
        .tokio(ASYNC_SIZE, t::async_cancelable);
    Group::new(c, "Async", "parMap2", size, size)
        .spindle_all(Program(p::async_par_map2), sum)
        .tokio(sum, t::async_par_map2);
    Group::new(c, "Async", "race", size, size)
        .spindle_all(Program(p::async_race), 1)
        .tokio(1, t::async_race);
    Group::new(c, "Async", "racePair", size, size)
        .spindle_all(Program(p::async_race_pair), 1)
        .tokio(1, t::async_race_pair);
    Group::new(c, "Async", "start", size, size)
        .spindle_all(Program(p::async_start), ASYNC_SIZE)
        .tokio(ASYNC_SIZE, t::async_start);
    Group::new(c, "Async", "uncancelable", size, size)
        .spindle_all(Program(p::async_uncancelable), ASYNC_SIZE);
}

/// `Both` and `Race` (`happyPath`, size 10,000), and `Blocking` (`fine`,
/// `coarse`, size 10,000).
fn fibers(c: &mut Criterion) {
    let size = PAR_SIZE as u64;
    Group::new(c, "Both", "happyPath", size, size)
        .spindle_all(Program(p::both), PAR_SIZE)
        .tokio(PAR_SIZE, t::both)
        .tokio_mt(PAR_SIZE, t::both);
    Group::new(c, "Race", "happyPath", size, size)
        .spindle_all(Program(p::race), PAR_SIZE)
        .tokio(PAR_SIZE, t::race)
        .tokio_mt(PAR_SIZE, t::race);
    let size = p::BLOCKING_SIZE as u64;
    Group::new(c, "Blocking", "fine", size, size)
        .long()
        .spindle_all(Program(p::blocking_fine), 0)
        .tokio(0, t::blocking_fine);
    Group::new(c, "Blocking", "coarse", size, size)
        .spindle_all(Program(p::blocking_coarse), 0)
        .tokio(0, t::blocking_coarse);
}

/// `Deferred`, `Ref`, `Queue`, `Mutex` with Cats Effect's parameters.
fn data(c: &mut Criterion) {
    for count in DEFERRED_COUNTS {
        let (size, gets) = (count as u64, (DEFERRED_ROUNDS * count) as u64);
        let expected = DEFERRED_ROUNDS * count;
        Group::new(c, "Deferred", "get", size, gets)
            .spindle_all(Program(move || p::deferred_get(count)), expected)
            .tokio(expected, move || t::deferred_get(count));
        Group::new(c, "Deferred", "complete", size, gets)
            .spindle_all(Program(move || p::deferred_complete(count)), expected)
            .tokio(expected, move || t::deferred_complete(count));
        Group::new(c, "Deferred", "cancel", size, gets)
            .spindle_all(Program(move || p::deferred_cancel(count)), expected)
            .tokio(expected, move || t::deferred_cancel(count));
    }

    let size = REF_ITERATIONS as u64;
    let expected = (0..REF_ITERATIONS).sum::<i64>();
    Group::new(c, "Ref", "modify", size, size)
        .spindle_all(Program(p::ref_modify), expected)
        .tokio(expected, t::ref_update);
    Group::new(c, "Ref", "getAndUpdate", size, size)
        .spindle_all(Program(p::ref_get_and_update), expected)
        .tokio(expected, t::ref_update);

    use p::Kind::{Bounded, Unbounded};
    let size = QUEUE_SIZE as u64;
    let (all, quarter) = (QUEUE_SIZE, QUEUE_SIZE / 4);
    Group::new(c, "Queue", "boundedOne", size, all as u64)
        .spindle_all(Program(|| p::queue_one(Bounded(QUEUE_SIZE))), all)
        .tokio(all, t::bounded_one);
    Group::new(c, "Queue", "boundedMany", size, all as u64)
        .spindle_all(Program(|| p::queue_many(Bounded(QUEUE_SIZE))), all)
        .tokio(all, t::bounded_many);
    Group::new(c, "Queue", "boundedContended", size, quarter as u64).spindle_all(
        Program(|| p::queue_contended(Bounded(QUEUE_SIZE / 8))),
        quarter,
    );
    Group::new(
        c,
        "Queue",
        "boundedContendedSingleConsumer",
        size,
        quarter as u64,
    )
    .spindle_all(
        Program(|| p::queue_contended_single_consumer(Bounded(QUEUE_SIZE / 8))),
        quarter,
    )
    .tokio(quarter, t::bounded_contended_single_consumer);
    Group::new(c, "Queue", "unboundedOne", size, all as u64)
        .spindle_all(Program(|| p::queue_one(Unbounded)), all)
        .tokio(all, t::unbounded_one);
    Group::new(c, "Queue", "unboundedMany", size, all as u64)
        .spindle_all(Program(|| p::queue_many(Unbounded)), all)
        .tokio(all, t::unbounded_many);
    Group::new(c, "Queue", "unboundedContended", size, quarter as u64)
        .spindle_all(Program(|| p::queue_contended(Unbounded)), quarter);
    Group::new(
        c,
        "Queue",
        "unboundedContendedSingleConsumer",
        size,
        quarter as u64,
    )
    .spindle_all(
        Program(|| p::queue_contended_single_consumer(Unbounded)),
        quarter,
    );

    for fibers in MUTEX_FIBERS {
        let (size, uses) = (fibers as u64, (fibers * MUTEX_ITERATIONS) as u64);
        let expected = fibers * MUTEX_ITERATIONS;
        Group::new(c, "Mutex", "happyPath", size, uses)
            .spindle_all(Program(move || p::mutex_happy_path(fibers)), expected)
            .tokio(expected, move || t::mutex_happy_path(fibers));
        Group::new(c, "Mutex", "highContention", size, uses)
            .spindle_all(Program(move || p::mutex_high_contention(fibers)), expected)
            .tokio(expected, move || t::mutex_high_contention(fibers));
        Group::new(c, "Mutex", "cancellation", size, uses)
            .spindle_all(Program(move || p::mutex_cancellation(fibers)), expected)
            .tokio(expected, move || t::mutex_cancellation(fibers));
    }
}

/// `Sleep` (10,000 fibers; elements: sleeps). tokio on a paused clock.
fn sleep(c: &mut Criterion) {
    let (sleeps, sum) = sleep_totals(SLEEP_FIBERS);
    Group::new(c, "Sleep", "sleep", SLEEP_FIBERS as u64, sleeps)
        .long()
        .spindle_all(Program(p::sleep), sum)
        .tokio_on("tokio", tokio_paused_clock, sum, |rt| {
            rt.block_on(t::sleep())
        });
}

/// `Parallel.parTraverse`, size 100 and 1,000, 10,000 CPU tokens per item:
/// every executor, and both tokio runtimes.
fn parallel(c: &mut Criterion) {
    for size in [100usize, 1000] {
        Group::new(c, "Parallel", "parTraverse", size as u64, size as u64)
            .spindle_all(Program(move || p::par_traverse(size)), size)
            .tokio(size, move || t::par_traverse(size))
            .tokio_mt(size, move || t::par_traverse(size));
    }
}

/// Registers `program` on the multi-threaded executors, exec-wstp and
/// exec-tokio.
fn multi_threaded<A, F>(group: &mut Group<'_>, program: F, expected: A)
where
    F: Fn() -> IO<A, std::convert::Infallible>,
    A: PartialEq + std::fmt::Debug + Send + 'static,
{
    const { assert!(<spindle_exec_wstp::Runtime as BenchRt>::MULTI_THREADED) };
    const { assert!(<spindle_exec_tokio::TokioExecutor as BenchRt>::MULTI_THREADED) };
    let program = Program(program);
    group.spindle::<spindle_exec_wstp::Runtime, _>(&program, &expected);
    group.spindle::<spindle_exec_tokio::TokioExecutor, _>(&program, &expected);
}

/// `WorkStealing`: `scheduling`, `alloc`, `runnableScheduling`, on the
/// multi-threaded executors only (exec-wstp, exec-tokio and `tokio_mt`).
fn work_stealing(c: &mut Criterion) {
    let (iterations, sum) = p::scheduling_totals();
    let sched = p::SCHED_FIBERS as u64;
    let mut g = Group::new(c, "WorkStealing", "scheduling", sched, iterations).long();
    multi_threaded(&mut g, p::ws_scheduling, sum);
    g.tokio_mt(sum, t::ws_scheduling);
    drop(g);

    let alloc_iterations = (p::ALLOC_FIBERS * (p::ALLOC_LIMIT + 2)) as u64;
    let alloc_sum = p::ALLOC_FIBERS * (p::ALLOC_LIMIT + 1);
    let mut g = Group::new(
        c,
        "WorkStealing",
        "alloc",
        p::ALLOC_FIBERS as u64,
        alloc_iterations,
    );
    multi_threaded(&mut g, p::ws_alloc, alloc_sum);
    g.tokio_mt(alloc_sum, t::ws_alloc);
    drop(g);

    let mut g = Group::new(c, "WorkStealing", "runnableScheduling", sched, iterations);
    multi_threaded(&mut g, p::ws_runnable_scheduling, p::SCHED_FIBERS);
    g.tokio_mt(p::SCHED_FIBERS, t::ws_runnable_scheduling);
}

/// tokio's runtime shapes (`rt_current_thread.rs`, `rt_multi_threaded.rs`):
/// every executor, and both tokio runtimes.
fn rt_shapes(c: &mut Criterion) {
    let n = p::NUM_SPAWN as u64;
    Group::new(c, "Rt", "spawn_many", n, n)
        .spindle_all(Program(p::spawn_many), p::NUM_SPAWN)
        .tokio(p::NUM_SPAWN, t::spawn_many)
        .tokio_mt(p::NUM_SPAWN, t::spawn_many);
    let (tasks, yields) = (
        p::YIELD_TASKS as u64,
        (p::YIELD_TASKS * p::NUM_YIELD) as u64,
    );
    Group::new(c, "Rt", "yield_many", tasks, yields)
        .spindle_all(Program(p::yield_many), p::YIELD_TASKS)
        .tokio(p::YIELD_TASKS, t::yield_many)
        .tokio_mt(p::YIELD_TASKS, t::yield_many);
    let n = p::NUM_PINGS as u64;
    Group::new(c, "Rt", "ping_pong", n, n)
        .spindle_all(Program(p::ping_pong), p::NUM_PINGS)
        .tokio(p::NUM_PINGS, t::ping_pong)
        .tokio_mt(p::NUM_PINGS, t::ping_pong);
    let n = u64::from(p::ROUND_TRIPS);
    Group::new(c, "PingPong", "queue", n, n)
        .spindle_all(Program(p::ping_pong_queue), p::ROUND_TRIPS)
        .tokio(p::ROUND_TRIPS, t::ping_pong_queue)
        .tokio_mt(p::ROUND_TRIPS, t::ping_pong_queue);
    Group::new(c, "PingPong", "deferred", n, n)
        .spindle_all(Program(p::ping_pong_deferred), p::ROUND_TRIPS)
        .tokio(p::ROUND_TRIPS, t::ping_pong_deferred)
        .tokio_mt(p::ROUND_TRIPS, t::ping_pong_deferred);
    let n = p::CHAIN as u64;
    Group::new(c, "Rt", "chained_spawn", n, n)
        .spindle_all(Program(p::chained_spawn), p::CHAIN)
        .tokio(p::CHAIN, t::chained_spawn)
        .tokio_mt(p::CHAIN, t::chained_spawn);
}

criterion_group! {
    name = suite;
    config = config();
    targets = bind, errors, maps, async_ops, fibers, data, sleep, parallel, work_stealing, rt_shapes
}
criterion_main!(suite);
