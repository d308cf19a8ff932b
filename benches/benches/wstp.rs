//! exec-wstp, Spindle's work-stealing executor, side by side with tokio's
//! multi-thread runtime, both with **2 worker threads**, in the same run.
//!
//! Three families of workloads, each a criterion group with a `spindle` and
//! a `tokio` function; throughput is declared in elements (what an element
//! is, each group's doc says):
//!
//! * **RtMulti**: the shapes of tokio's own scheduler suite
//!   (`benches/rt_multi_threaded.rs` in tokio-rs/tokio): `spawn_many_local`,
//!   `spawn_many_remote_idle`, `yield_many`, `ping_pong`, `chained_spawn`.
//! * **WorkStealing** and **Parallel**: ports of Cats Effect's
//!   `WorkStealingBenchmark` (`scheduling`, `alloc`) and `ParallelBenchmark`
//!   (`parTraverse`), with sizes scaled down so one run takes seconds, not
//!   minutes (each function says how).
//! * **WstpShallowBind**, **WstpDeepBind**: the `pure` bind loops of
//!   `bind.rs`, run as one fiber (one task) on the pool.
//!
//! How the two sides are driven: each runtime is built once per group,
//! outside the measured loop (the Spindle one is dropped before the tokio
//! one is built, so that no idle pool shares the 2 cores with the one being
//! measured). Where a workload runs "inside" the pool, Spindle's
//! `rt.block_on(io)` runs `io` as a fiber on a worker and the calling thread
//! waits; the tokio side does the same with `rt.block_on(rt.spawn(fut))`, so
//! that its program runs on a worker too (tokio's `block_on` alone would
//! poll it on the calling thread, outside the pool). Where tokio's suite
//! signals completion through a `std::sync::mpsc` channel, both sides do.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench wstp
//! cargo bench -p benches --bench wstp -- RtMulti.ping_pong   # one group
//! ```

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

use benches::{SIZE, succeeded};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use io_core::{Deferred, FiberHandle, IO};

/// Worker threads on both sides (the machine of the recorded run has 2 cores).
const WORKERS: usize = 2;

type Io<A> = IO<A, Infallible>;
type Spindle = exec_wstp::Runtime;
type Tokio = tokio::runtime::Runtime;

/// A boxed future that may move between workers.
type BoxedSend<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn spindle_rt() -> Spindle {
    exec_wstp::Runtime::builder()
        .worker_threads(WORKERS)
        .build()
        .expect("exec-wstp runtime")
}

fn tokio_rt() -> Tokio {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .expect("tokio multi-thread runtime")
}

/// Criterion settings for this suite: a few seconds per function.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

/// Registers the criterion group `name` with `spindle/<size>` and
/// `tokio/<size>`, each declaring `elements` per operation. Each side's
/// runtime is built before its function and dropped after it; each side
/// runs once first and must produce `expected`.
#[allow(clippy::too_many_arguments, reason = "mirrors common::compare")]
fn compare<T: PartialEq + Debug>(
    c: &mut Criterion,
    name: &str,
    size: u64,
    elements: u64,
    samples: usize,
    expected: T,
    mut spindle: impl FnMut(&Spindle) -> T,
    mut tokio: impl FnMut(&Tokio) -> T,
) {
    let mut group = c.benchmark_group(name);
    group.sample_size(samples);
    group.throughput(Throughput::Elements(elements));
    {
        let rt = spindle_rt();
        assert_eq!(spindle(&rt), expected, "{name}: spindle result");
        group.bench_function(BenchmarkId::new("spindle", size), |b| {
            b.iter(|| black_box(spindle(&rt)))
        });
    }
    {
        let rt = tokio_rt();
        assert_eq!(tokio(&rt), expected, "{name}: tokio result");
        group.bench_function(BenchmarkId::new("tokio", size), |b| {
            b.iter(|| black_box(tokio(&rt)))
        });
    }
    group.finish();
}

/// Runs `fut` as a task on one of tokio's workers and waits for it.
fn tokio_on_worker<T: Send + 'static>(
    rt: &Tokio,
    fut: impl Future<Output = T> + Send + 'static,
) -> T {
    rt.block_on(rt.spawn(fut)).expect("tokio task")
}

/// Sequential `start` of `n` programs from `make`, then a join of each:
/// the fan-out/fan-in of Cats Effect's `traverse(_.start)` and
/// `traverse(_.join)`.
fn start_all<A: Send + 'static>(
    n: usize,
    make: impl FnMut(usize) -> Io<A> + Send + 'static,
) -> Io<Vec<FiberHandle<A, Infallible>>> {
    let mut make = make;
    IO::traverse((0..n).collect(), move |i| make(i).start())
}

// ---------------------------------------------------------------------------
// tokio's scheduler suite (rt_multi_threaded.rs)
// ---------------------------------------------------------------------------

/// Tasks spawned per operation in `spawn_many_*` (tokio's `NUM_SPAWN`).
const NUM_SPAWN: usize = 10_000;
/// `yield_many`: tasks, and yields per task (tokio's `TASKS`, `NUM_YIELD`).
const YIELD_TASKS: usize = 200;
const NUM_YIELD: usize = 1_000;
/// `ping_pong`: rounds per operation (tokio's `NUM_PINGS`).
const NUM_PINGS: usize = 1_000;
/// `chained_spawn`: the length of the chain (tokio's `ITER`).
const CHAIN: usize = 1_000;

/// `spawn_many_local`: one fiber (task) on a worker spawns 10,000 empty
/// fibers, then joins each. Element: one spawned fiber.
///
/// tokio's own `spawn_many_local` spawns from `block_on`'s future, which on
/// the multi-thread runtime runs on the calling thread (so its spawns are
/// remote), and counts completions with an atomic; here both sides spawn
/// from a worker and join the handles, which is what "local" means and
/// what `start`/`join` measures.
fn spawn_many_local(c: &mut Criterion) {
    let n = NUM_SPAWN as u64;
    compare(
        c,
        "RtMulti.spawn_many_local",
        n,
        n,
        20,
        NUM_SPAWN,
        |rt| {
            let io = start_all(NUM_SPAWN, |_| Io::<()>::unit())
                .flat_map(|handles| IO::traverse(handles, |h| h.join_void::<Infallible>()))
                .map(|joined| joined.len());
            succeeded(rt.block_on(io).expect("exec-wstp"))
        },
        |rt| {
            tokio_on_worker(rt, async {
                let handles: Vec<_> = (0..NUM_SPAWN).map(|_| tokio::spawn(async {})).collect();
                let mut joined = 0;
                for handle in handles {
                    handle.await.expect("task");
                    joined += 1;
                }
                joined
            })
        },
    );
}

/// `spawn_many_remote_idle`: the calling thread (outside the pool) spawns
/// 10,000 empty fibers (`rt.spawn`), then one fiber (task) joins each.
/// Element: one spawned fiber. tokio's shape exactly.
fn spawn_many_remote_idle(c: &mut Criterion) {
    let n = NUM_SPAWN as u64;
    compare(
        c,
        "RtMulti.spawn_many_remote_idle",
        n,
        n,
        20,
        NUM_SPAWN,
        |rt| {
            let handles: Vec<_> = (0..NUM_SPAWN)
                .map(|_| rt.spawn(Io::<()>::unit()).expect("exec-wstp"))
                .collect();
            let io = IO::traverse(handles, |h| h.join_void::<Infallible>()).map(|j| j.len());
            succeeded(rt.block_on(io).expect("exec-wstp"))
        },
        |rt| {
            let handles: Vec<_> = (0..NUM_SPAWN).map(|_| rt.spawn(async {})).collect();
            rt.block_on(async {
                let mut joined = 0;
                for handle in handles {
                    handle.await.expect("task");
                    joined += 1;
                }
                joined
            })
        },
    );
}

/// `yield_many`: the calling thread spawns 200 fibers (tasks), each cedes
/// (`yield_now`) 1,000 times then sends on a `std::sync::mpsc` channel; the
/// calling thread receives the 200 messages. Element: one cede. tokio's
/// shape exactly.
fn yield_many(c: &mut Criterion) {
    fn cedes(n: usize) -> Io<()> {
        if n == 0 {
            IO::unit()
        } else {
            Io::<()>::cede().flat_map(move |()| cedes(n - 1))
        }
    }
    let (tx, rx) = mpsc::sync_channel::<()>(YIELD_TASKS);
    let (ttx, trx) = mpsc::sync_channel::<()>(YIELD_TASKS);
    compare(
        c,
        "RtMulti.yield_many",
        YIELD_TASKS as u64,
        (YIELD_TASKS * NUM_YIELD) as u64,
        20,
        YIELD_TASKS,
        |rt| {
            for _ in 0..YIELD_TASKS {
                let tx = tx.clone();
                let fiber = cedes(NUM_YIELD)
                    .flat_map(move |()| IO::delay(move || tx.send(()).expect("receiver alive")));
                drop(rt.spawn(fiber).expect("exec-wstp"));
            }
            (0..YIELD_TASKS).map(|_| rx.recv().expect("sender")).count()
        },
        |rt| {
            for _ in 0..YIELD_TASKS {
                let tx = ttx.clone();
                rt.spawn(async move {
                    for _ in 0..NUM_YIELD {
                        tokio::task::yield_now().await;
                    }
                    tx.send(()).expect("receiver alive");
                });
            }
            (0..YIELD_TASKS)
                .map(|_| trx.recv().expect("sender"))
                .count()
        },
    );
}

/// `ping_pong`: the calling thread spawns one fiber that spawns 1,000
/// rounds; each round spawns a responder, pings it and waits for its pong
/// (Spindle: two `Deferred`s per round; tokio: two `oneshot` channels, as in
/// tokio's bench); the last round to finish signals the calling thread
/// through a `std::sync::mpsc` channel. Element: one round (3 fibers, 2
/// messages). tokio's shape, except that the outer task is spawned with
/// `rt.spawn` and the calling thread blocks in `recv` (tokio's bench blocks
/// in `recv` inside `block_on`).
fn ping_pong(c: &mut Criterion) {
    fn round(rem: Arc<AtomicUsize>, done: mpsc::SyncSender<()>) -> Io<()> {
        IO::defer(move || {
            let (ping, pong) = (Deferred::<()>::new(), Deferred::<()>::new());
            let (ping_rx, pong_tx) = (ping.clone(), pong.clone());
            let responder = ping_rx
                .get::<Infallible>()
                .flat_map(move |()| pong_tx.complete(()).void());
            responder.start::<Infallible>().flat_map(move |_responder| {
                ping.complete(())
                    .flat_map(move |_| pong.get())
                    .flat_map(move |()| {
                        IO::delay(move || {
                            if rem.fetch_sub(1, Relaxed) == 1 {
                                done.send(()).expect("receiver alive");
                            }
                        })
                    })
            })
        })
    }
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let (ttx, trx) = mpsc::sync_channel::<()>(1);
    let rem = Arc::new(AtomicUsize::new(0));
    let trem = Arc::new(AtomicUsize::new(0));
    let n = NUM_PINGS as u64;
    compare(
        c,
        "RtMulti.ping_pong",
        n,
        n,
        20,
        (),
        |rt| {
            rem.store(NUM_PINGS, Relaxed);
            let (rem, tx) = (rem.clone(), tx.clone());
            let outer = IO::traverse((0..NUM_PINGS).collect(), move |_| {
                round(rem.clone(), tx.clone()).start::<Infallible>().void()
            });
            drop(rt.spawn(outer).expect("exec-wstp"));
            rx.recv().expect("sender")
        },
        |rt| {
            trem.store(NUM_PINGS, Relaxed);
            let (rem, done_tx) = (trem.clone(), ttx.clone());
            rt.spawn(async move {
                for _ in 0..NUM_PINGS {
                    let rem = rem.clone();
                    let done_tx = done_tx.clone();
                    tokio::spawn(async move {
                        let (tx1, rx1) = tokio::sync::oneshot::channel::<()>();
                        let (tx2, rx2) = tokio::sync::oneshot::channel::<()>();
                        tokio::spawn(async move {
                            rx1.await.expect("ping");
                            tx2.send(()).expect("pong receiver");
                        });
                        tx1.send(()).expect("ping receiver");
                        rx2.await.expect("pong");
                        if rem.fetch_sub(1, Relaxed) == 1 {
                            done_tx.send(()).expect("receiver alive");
                        }
                    });
                }
            });
            trx.recv().expect("sender")
        },
    );
}

/// `chained_spawn`: each fiber spawns the next, 1,000 deep; the last one
/// signals the calling thread through a `std::sync::mpsc` channel.
/// Element: one fiber of the chain. tokio's shape, the first task spawned
/// with `rt.spawn` (tokio's bench spawns it from `block_on`'s future).
fn chained_spawn(c: &mut Criterion) {
    fn chain(done: mpsc::SyncSender<()>, n: usize) -> Io<()> {
        if n == 0 {
            IO::delay(move || done.send(()).expect("receiver alive"))
        } else {
            IO::defer(move || chain(done, n - 1))
                .start::<Infallible>()
                .void()
        }
    }
    fn tokio_chain(done: mpsc::SyncSender<()>, n: usize) {
        if n == 0 {
            done.send(()).expect("receiver alive");
        } else {
            tokio::spawn(async move { tokio_chain(done, n - 1) });
        }
    }
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let (ttx, trx) = mpsc::sync_channel::<()>(1);
    let n = CHAIN as u64;
    compare(
        c,
        "RtMulti.chained_spawn",
        n,
        n,
        20,
        (),
        |rt| {
            drop(rt.spawn(chain(tx.clone(), CHAIN)).expect("exec-wstp"));
            rx.recv().expect("sender")
        },
        |rt| {
            let done = ttx.clone();
            rt.spawn(async move { tokio_chain(done, CHAIN) });
            trx.recv().expect("sender")
        },
    );
}

// ---------------------------------------------------------------------------
// Cats Effect's WorkStealingBenchmark and ParallelBenchmark
// ---------------------------------------------------------------------------

/// `scheduling`: fibers started (Cats Effect: `@Param size` = 1,000,000).
const SCHED_FIBERS: i64 = 10_000;
/// `scheduling`: a fiber started with `i` loops until its counter passes
/// this (Cats Effect: `j > 10000`). Scaled with `SCHED_FIBERS` so that the
/// loop iterations per fiber stay at Cats Effect's ~51.
const SCHED_LIMIT: i64 = 1_000;
/// `alloc`: fibers (Cats Effect: 2,500) and loop limit (Cats Effect:
/// `i > 1000`), both scaled by 1/10; each iteration allocates
/// `max(100, min(i, 2000))` = 100 objects, as in Cats Effect for `i <= 100`.
const ALLOC_FIBERS: usize = 250;
const ALLOC_LIMIT: usize = 100;

/// `scheduling`'s loop iterations and sum of results.
fn scheduling_totals() -> (u64, i64) {
    let (mut iterations, mut sum) = (0u64, 0i64);
    for i in 0..SCHED_FIBERS {
        if i <= SCHED_LIMIT {
            iterations += (SCHED_LIMIT + 2 - i) as u64;
            sum += SCHED_LIMIT + 1;
        } else {
            iterations += 1;
            sum += i;
        }
    }
    (iterations, sum)
}

/// Cats Effect's `scheduling`: the main fiber starts 10,000 fibers one by
/// one; fiber `i` loops (4 cedes and one `delay` per iteration) until its
/// counter passes 1,000; the main fiber joins each and sums. Element: one
/// loop iteration (511,502 per op; 4 cedes each).
fn ws_scheduling(c: &mut Criterion) {
    fn fiber(i: i64) -> Io<i64> {
        Io::<()>::cede().flat_map(move |()| {
            IO::delay(move || i).flat_map(|j| {
                Io::<()>::cede().flat_map(move |()| {
                    if j > SCHED_LIMIT {
                        Io::<()>::cede().flat_map(move |()| IO::pure(j))
                    } else {
                        Io::<()>::cede().flat_map(move |()| fiber(j + 1))
                    }
                })
            })
        })
    }
    async fn task(mut i: i64) -> i64 {
        use tokio::task::yield_now;
        loop {
            yield_now().await;
            let j = black_box(i);
            yield_now().await;
            if j > SCHED_LIMIT {
                yield_now().await;
                return j;
            }
            yield_now().await;
            i = j + 1;
        }
    }
    let (iterations, sum) = scheduling_totals();
    compare(
        c,
        "WorkStealing.scheduling",
        SCHED_FIBERS as u64,
        iterations,
        10,
        sum,
        |rt| {
            let io = IO::traverse((0..SCHED_FIBERS).collect(), |i| fiber(i).start())
                .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
                .map(|values| values.iter().sum::<i64>());
            succeeded(rt.block_on(io).expect("exec-wstp"))
        },
        |rt| {
            tokio_on_worker(rt, async {
                let handles: Vec<_> = (0..SCHED_FIBERS).map(|i| tokio::spawn(task(i))).collect();
                let mut sum = 0;
                for handle in handles {
                    sum += handle.await.expect("task");
                }
                sum
            })
        },
    );
}

/// Cats Effect's `allocation(n)`: `max(100, min(n, 2000))` fresh heap
/// objects (`new AnyRef()`; here a `Box<usize>` each).
#[allow(
    clippy::vec_box,
    reason = "one heap object per element is the workload"
)]
fn allocation(n: usize) -> Vec<Box<usize>> {
    let size = n.clamp(100, 2000);
    (0..size).map(|i| Box::new(black_box(i))).collect()
}

/// Cats Effect's `sum` (of the objects' identity hash codes; here of the
/// objects' addresses).
fn address_sum(objects: &[Box<usize>]) -> usize {
    objects
        .iter()
        .map(|b| &**b as *const usize as usize)
        .fold(0usize, usize::wrapping_add)
}

/// Cats Effect's `alloc`: 250 fibers started one by one; each loops 102
/// times (3 cedes, an allocation of 100 objects and their sum per
/// iteration); the main fiber joins each and sums their results. Element:
/// one loop iteration (25,500 per op, 2.55 M objects allocated).
fn ws_alloc(c: &mut Criterion) {
    fn fiber(i: usize) -> Io<usize> {
        Io::<()>::cede().flat_map(move |()| {
            IO::delay(move || allocation(i)).flat_map(move |objects| {
                Io::<()>::cede()
                    .flat_map(move |()| IO::delay(move || black_box(address_sum(&objects))))
                    .flat_map(move |_| {
                        if i > ALLOC_LIMIT {
                            Io::<()>::cede().flat_map(move |()| IO::pure(i))
                        } else {
                            Io::<()>::cede().flat_map(move |()| fiber(i + 1))
                        }
                    })
            })
        })
    }
    async fn task(mut i: usize) -> usize {
        use tokio::task::yield_now;
        loop {
            yield_now().await;
            let objects = allocation(i);
            yield_now().await;
            black_box(address_sum(&objects));
            drop(objects);
            if i > ALLOC_LIMIT {
                yield_now().await;
                return i;
            }
            yield_now().await;
            i += 1;
        }
    }
    let iterations = (ALLOC_FIBERS * (ALLOC_LIMIT + 2)) as u64;
    let expected = ALLOC_FIBERS * (ALLOC_LIMIT + 1);
    compare(
        c,
        "WorkStealing.alloc",
        ALLOC_FIBERS as u64,
        iterations,
        10,
        expected,
        |rt| {
            let io = start_all(ALLOC_FIBERS, |_| fiber(0))
                .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
                .map(|values| values.iter().sum::<usize>());
            succeeded(rt.block_on(io).expect("exec-wstp"))
        },
        |rt| {
            tokio_on_worker(rt, async {
                let handles: Vec<_> = (0..ALLOC_FIBERS).map(|_| tokio::spawn(task(0))).collect();
                let mut sum = 0;
                for handle in handles {
                    sum += handle.await.expect("task");
                }
                sum
            })
        },
    );
}

/// JMH's `Blackhole.consumeCPU(tokens)`: a dependent chain of `tokens`
/// multiply-adds (the same recurrence), about 1.2 ns per token here.
/// Never inlined, so that both sides run the same machine code (inlined,
/// LLVM unrolls it differently inside each side's closure).
#[inline(never)]
fn consume_cpu(tokens: u64) -> u64 {
    let mut t = black_box(0x2545_F491_4F6C_DD1Du64);
    let mut i = black_box(tokens);
    while i > 0 {
        t = t.wrapping_add(
            t.wrapping_mul(0x5_DEEC_E66D)
                .wrapping_add(0xB)
                .wrapping_add(i)
                & 0xFFFF_FFFF_FFFF,
        );
        i -= 1;
    }
    t
}

/// Cats Effect's `ParallelBenchmark.parTraverse`: `size` items, each an
/// `IO(consumeCPU(tokens))`, run with `par_traverse` (Spindle: a balanced
/// tree of `both`, two fibers per node). tokio: one task per item
/// (`tokio::spawn`), then a join of each handle, the usual idiom for the
/// same fan-out. Element: one item. Cats Effect's parameters are size 1,000
/// and 10,000 tokens; also run: size 100, and 100 tokens per item, where
/// the scheduling cost dominates.
fn parallel(c: &mut Criterion) {
    for (name, tokens) in [
        ("Parallel.parTraverse", 10_000u64),
        ("Parallel.parTraverse_cpu100", 100u64),
    ] {
        for size in [100usize, 1000] {
            compare(
                c,
                name,
                size as u64,
                size as u64,
                20,
                size,
                |rt| {
                    let io = IO::par_traverse((0..size).collect(), move |_| {
                        Io::<u64>::delay(move || black_box(consume_cpu(tokens)))
                    })
                    .map(|values: Vec<u64>| values.len());
                    succeeded(rt.block_on(io).expect("exec-wstp"))
                },
                |rt| {
                    tokio_on_worker(rt, async move {
                        let handles: Vec<_> = (0..size)
                            .map(|_| tokio::spawn(async move { black_box(consume_cpu(tokens)) }))
                            .collect();
                        let mut values = Vec::with_capacity(size);
                        for handle in handles {
                            values.push(handle.await.expect("task"));
                        }
                        values.len()
                    })
                },
            );
        }
    }
}

// ---------------------------------------------------------------------------
// The io-core bind loops on the pool
// ---------------------------------------------------------------------------

/// `bind.rs`'s `ShallowBind.pure` and `DeepBind.pure` (size 10,000), run as
/// one fiber on a worker (`rt.block_on`); tokio: the same boxed `async`
/// recursion (with `Send`), as one task on a worker. Element: one step.
fn bind(c: &mut Criterion) {
    use benches::bind_loops::{deep_pure, shallow_pure};
    fn tokio_shallow_pure() -> BoxedSend<i32> {
        fn go(i: i32) -> BoxedSend<i32> {
            Box::pin(async move { if i < SIZE { go(i + 1).await } else { i } })
        }
        Box::pin(async { go(0).await })
    }
    fn tokio_deep_pure() -> BoxedSend<i32> {
        fn go(i: i32) -> BoxedSend<i32> {
            Box::pin(async move {
                let j = i;
                if j > SIZE { j } else { go(j + 1).await }
            })
        }
        go(0)
    }
    let size = SIZE as u64;
    compare(
        c,
        "WstpShallowBind.pure",
        size,
        size,
        20,
        SIZE,
        |rt| succeeded(rt.block_on(shallow_pure()).expect("exec-wstp")),
        |rt| tokio_on_worker(rt, tokio_shallow_pure()),
    );
    compare(
        c,
        "WstpDeepBind.pure",
        size,
        size,
        20,
        SIZE + 1,
        |rt| succeeded(rt.block_on(deep_pure()).expect("exec-wstp")),
        |rt| tokio_on_worker(rt, tokio_deep_pure()),
    );
}

criterion_group! {
    name = rt_multi;
    config = config();
    targets = spawn_many_local, spawn_many_remote_idle, yield_many, ping_pong, chained_spawn
}
criterion_group! {
    name = cats_effect;
    config = config();
    targets = ws_scheduling, ws_alloc, parallel, bind
}
criterion_main!(rt_multi, cats_effect);
