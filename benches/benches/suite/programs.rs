//! The Spindle programs of the suite: each Cats Effect workload written
//! once as an `IO` value, which names no executor (the suite runs the same
//! value on exec-single, exec-wstp, exec-batching and exec-tokio). Shapes
//! and sizes are Cats Effect's (scaled down where a constant says so);
//! `benches/PORTS.md` explains each port and how it differs from the
//! original.

use std::convert::Infallible;
use std::hint::black_box;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::time::Duration;

use benches::{
    ASYNC_SIZE, DEFERRED_ROUNDS, DUMMY, Dummy, MUTEX_ITERATIONS, PAR_SIZE, QUEUE_SIZE,
    REF_ITERATIONS, SIZE, SLEEP_FIBERS, SLEEP_LOOP_UNTIL,
};
use spindle_core::{Deferred, Either, FiberHandle, IO, Mutex, Outcome, Queue, Ref};

type Io<A> = IO<A, Infallible>;
type Fallible<A> = IO<A, Dummy>;

// ---------------------------------------------------------------------------
// ShallowBind, DeepBind (size 10,000)
// ---------------------------------------------------------------------------

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

/// Cats Effect's `async` variant suspends with `IO.cede` at each step.
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

/// ShallowBind written as an IO block: a loop of [`SIZE`] awaits of
/// `pure(i + 1)`, each run on the fiber as one step of its run-loop.
pub fn shallow_block_pure() -> Io<i32> {
    IO::block(async {
        let mut i = 0;
        while i < SIZE {
            i = Io::pure(i + 1).value().await;
        }
        Ok(i)
    })
}

/// [`shallow_block_pure`] with `delay(|| i + 1)`.
pub fn shallow_block_delay() -> Io<i32> {
    IO::block(async {
        let mut i = 0;
        while i < SIZE {
            i = Io::delay(move || i + 1).value().await;
        }
        Ok(i)
    })
}

/// DeepBind written with IO blocks: recursion through nested blocks, each
/// level a block that awaits `pure(i)` and then the next level's block (a
/// block can await its recursive call, not return it as the bind's closure
/// does, so each level stays on the fiber's stack until the one below
/// ends: [`SIZE`] + 2 nested levels; the suite's header explains the
/// choice).
pub fn deep_block_pure() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        IO::block(async move {
            let j = Io::pure(i).value().await;
            if j > SIZE {
                Ok(j)
            } else {
                Ok(go(j + 1).value().await)
            }
        })
    }
    go(0)
}

/// [`deep_block_pure`] with `delay(|| i)`.
pub fn deep_block_delay() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        IO::block(async move {
            let j = Io::delay(move || i).value().await;
            if j > SIZE {
                Ok(j)
            } else {
                Ok(go(j + 1).value().await)
            }
        })
    }
    go(0)
}

// ---------------------------------------------------------------------------
// Attempt, HandleError, Redeem, RedeemWith (size 10,000)
// ---------------------------------------------------------------------------

pub fn attempt_happy_path() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
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

pub fn attempt_error_raised() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
        if i < SIZE {
            Fallible::<i32>::raise_error(DUMMY)
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

pub fn handle_error_happy_path() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
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

pub fn handle_error_error_raised() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
        if i < SIZE {
            Fallible::<i32>::raise_error(DUMMY)
                .flat_map(|x| IO::pure(x + 1))
                .flat_map(|x| IO::pure(x + 1))
                .handle_error_with(move |_| go(i + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// Cats Effect's `RedeemBenchmark.happyPath`:
/// `pure(i + 1).redeem(_ => 0, identity).flatMap(loop)`.
pub fn redeem_happy_path() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
        if i < SIZE {
            IO::pure(i + 1).redeem(|_| 0, |x| x).flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// `RedeemBenchmark.errorRaised`: raise, skip a `flat_map`, and
/// `redeem(_ => i + 1, identity)` back into the loop.
pub fn redeem_error_raised() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
        if i < SIZE {
            Fallible::<i32>::raise_error(DUMMY)
                .flat_map(|x| IO::pure(x + 1))
                .redeem(move |_| i + 1, |x| x)
                .flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// `RedeemWithBenchmark.happyPath`: `pure(i + 1).redeemWith(raiseError, loop)`.
pub fn redeem_with_happy_path() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
        if i < SIZE {
            IO::pure(i + 1).redeem_with(IO::raise_error, go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// `RedeemWithBenchmark.errorRaised`: raise, skip two `flat_map`s, and
/// `redeemWith(_ => loop(i + 1), pure)`.
pub fn redeem_with_error_raised() -> Fallible<i32> {
    fn go(i: i32) -> Fallible<i32> {
        if i < SIZE {
            Fallible::<i32>::raise_error(DUMMY)
                .flat_map(|x| IO::pure(x + 1))
                .flat_map(|x| IO::pure(x + 1))
                .redeem_with(move |_| go(i + 1), IO::pure)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

// ---------------------------------------------------------------------------
// MapCalls and MapStream (12,000 maps per operation)
// ---------------------------------------------------------------------------

/// One MapCalls chain: `delay(0)` then `batch` maps of `+ 1`.
pub fn map_chain(batch: usize) -> Io<i32> {
    let f = |x: i32| x + 1;
    let mut io = Io::<i32>::delay(|| 0);
    for _ in 0..batch {
        io = io.map(f);
    }
    io
}

/// Cats Effect's `MapStreamBenchmark` stream: a value and the program that
/// produces the rest.
pub struct Stream {
    value: i64,
    next: Io<Option<Stream>>,
}

fn range(from: i64, until: i64) -> Option<Stream> {
    (from < until).then(|| Stream {
        value: from,
        next: IO::delay(move || range(from + 1, until)),
    })
}

fn map_stream(f: fn(i64) -> i64, stream: Option<Stream>) -> Option<Stream> {
    stream.map(|Stream { value, next }| Stream {
        value: f(value),
        next: next.map(move |rest| map_stream(f, rest)),
    })
}

fn sum_stream(acc: i64, stream: Option<Stream>) -> Io<i64> {
    match stream {
        Some(Stream { value, next }) => next.flat_map(move |rest| sum_stream(acc + value, rest)),
        None => IO::pure(acc),
    }
}

/// `MapStreamBenchmark.test(times, batch)`: a stream of `times` elements,
/// `batch` layers of `map(_ + 1)` over it, summed by a loop that runs the
/// stream's programs one element after another.
pub fn map_stream_test(times: i64, batch: usize) -> Io<i64> {
    IO::defer(move || {
        let mut stream = range(0, times);
        for _ in 0..batch {
            stream = map_stream(|x| x + 1, stream);
        }
        sum_stream(0, stream)
    })
}

/// The sum `map_stream_test(times, batch)` computes.
pub fn map_stream_expected(times: i64, batch: usize) -> i64 {
    times * (times - 1) / 2 + times * batch as i64
}

// ---------------------------------------------------------------------------
// Async (size 100)
// ---------------------------------------------------------------------------

fn eval_async(n: i32) -> Io<i32> {
    IO::from_callback(move |cb| {
        cb.succeed(n);
        None
    })
}

fn eval_cancelable(n: i32) -> Io<i32> {
    IO::from_callback(move |cb| {
        cb.succeed(n);
        Some(IO::unit())
    })
}

/// `cede *> delay(value)`: Cats Effect 2's `IO.shift *> IO(value)`.
fn shifted(value: i32) -> Io<i32> {
    Io::<()>::cede().product_r(IO::delay(move || value))
}

fn embed_never(outcome: Outcome<i32, Infallible>) -> Io<i32> {
    match outcome {
        Outcome::Succeeded(a) => IO::pure(a),
        Outcome::Errored(e) => match e {},
        Outcome::Canceled => IO::never(),
        Outcome::Panicked(p) => panic!("racePair side panicked: {p}"),
    }
}

/// A loop of `ASYNC_SIZE` steps, each `step(i)` bound to the next.
fn async_loop(step: fn(i32) -> Io<i32>) -> Io<i32> {
    fn go(i: i32, step: fn(i32) -> Io<i32>) -> Io<i32> {
        if i < ASYNC_SIZE {
            step(i).flat_map(move |j| go(j, step))
        } else {
            IO::pure(i)
        }
    }
    IO::delay(|| 0).flat_map(move |i| go(i, step))
}

pub fn async_async() -> Io<i32> {
    async_loop(|i| eval_async(i + 1))
}

pub fn async_cancelable() -> Io<i32> {
    async_loop(|i| eval_cancelable(i + 1))
}

pub fn async_bracket() -> Io<i32> {
    async_loop(|i| {
        IO::bracket(
            IO::delay(move || i),
            |r: i32| IO::delay(move || r + 1),
            |_| IO::unit(),
        )
    })
}

pub fn async_cancel_boundary() -> Io<i32> {
    async_loop(|i| shifted(i + 1))
}

pub fn async_uncancelable() -> Io<i32> {
    async_loop(|i| IO::uncancelable(move |_| IO::delay(move || i + 1)))
}

pub fn async_start() -> Io<i32> {
    async_loop(|i| {
        shifted(i + 1)
            .start()
            .flat_map(|fiber| fiber.join_with_never())
    })
}

pub fn async_par_map2() -> Io<i32> {
    (0..ASYNC_SIZE).fold(IO::delay(|| 0), |acc, i| {
        acc.par_map2(shifted(i), |a, b| a + b)
    })
}

pub fn async_race() -> Io<i32> {
    (0..ASYNC_SIZE).fold(IO::never(), |acc, _| {
        acc.race(shifted(1)).map(|winner| match winner {
            Either::Left(i) | Either::Right(i) => i,
        })
    })
}

pub fn async_race_pair() -> Io<i32> {
    (0..ASYNC_SIZE).fold(IO::never(), |acc, _| {
        acc.race_pair(shifted(1)).flat_map(|pair| match pair {
            Either::Left((outcome, loser)) => loser.cancel().product_r(embed_never(outcome)),
            Either::Right((loser, outcome)) => loser.cancel().product_r(embed_never(outcome)),
        })
    })
}

// ---------------------------------------------------------------------------
// Both, Race (size 10,000)
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Blocking (size 10,000)
// ---------------------------------------------------------------------------

/// BlockingBenchmark's `size`.
pub const BLOCKING_SIZE: i32 = 10_000;

/// `BlockingBenchmark.fine`: `IO.blocking` around each step of a countdown.
pub fn blocking_fine() -> Io<i32> {
    fn go(n: i32) -> Io<i32> {
        IO::blocking(move || n).flat_map(|n| if n > 0 { go(n - 1) } else { IO::pure(n) })
    }
    go(BLOCKING_SIZE)
}

/// A countdown from `n`, each step opaque to the optimizer.
pub fn countdown(mut n: i32) -> i32 {
    while black_box(n) > 0 {
        n -= 1;
    }
    n
}

/// `BlockingBenchmark.coarse`: one `IO.blocking` around the whole countdown.
pub fn blocking_coarse() -> Io<i32> {
    IO::blocking(|| countdown(BLOCKING_SIZE))
}

// ---------------------------------------------------------------------------
// Deferred, Ref, Queue, Mutex
// ---------------------------------------------------------------------------

fn rounds(rounds: usize, round: impl FnMut() -> Io<usize> + Send + 'static) -> Io<usize> {
    IO::replicate(rounds, round).map(|counts| counts.into_iter().sum())
}

pub fn deferred_get(count: usize) -> Io<usize> {
    rounds(DEFERRED_ROUNDS, move || {
        IO::delay(Deferred::<()>::new).flat_map(move |d| {
            d.complete(())
                .void()
                .product_r(IO::replicate(count, move || d.get()))
                .map(|gets| gets.len())
        })
    })
}

pub fn deferred_complete(count: usize) -> Io<usize> {
    rounds(DEFERRED_ROUNDS, move || {
        IO::delay(Deferred::<()>::new).flat_map(move |d| {
            let gets = IO::par_sequence((0..count).map(|_| d.get()).collect());
            gets.both(d.complete(())).map(|(gets, _)| gets.len())
        })
    })
}

pub fn deferred_cancel(count: usize) -> Io<usize> {
    rounds(DEFERRED_ROUNDS, move || {
        IO::delay(Deferred::<()>::new).flat_map(move |d| {
            IO::replicate(count, move || d.get::<Infallible>().start())
                .flat_map(|fibers| IO::traverse(fibers, |fiber| fiber.cancel()))
                .map(|cancels| cancels.len())
        })
    })
}

pub fn ref_modify() -> Io<i64> {
    fn go(r: Ref<i64>, remaining: i64, acc: i64) -> Io<i64> {
        if remaining == 0 {
            IO::delay(move || acc)
        } else {
            r.modify(|n| {
                let before = *n;
                *n += 1;
                before
            })
            .flat_map(move |before| go(r, remaining - 1, acc + before))
        }
    }
    IO::delay(|| Ref::new(0i64)).flat_map(|r| go(r, REF_ITERATIONS, 0))
}

pub fn ref_get_and_update() -> Io<i64> {
    fn go(r: Ref<i64>, remaining: i64, acc: i64) -> Io<i64> {
        if remaining == 0 {
            IO::delay(move || acc)
        } else {
            r.get_and_update(|n| *n += 1)
                .flat_map(move |before| go(r, remaining - 1, acc + before))
        }
    }
    IO::delay(|| Ref::new(0i64)).flat_map(|r| go(r, REF_ITERATIONS, 0))
}

/// Which queue a Queue workload uses.
#[derive(Clone, Copy)]
pub enum Kind {
    Bounded(usize),
    Unbounded,
}

fn new_queue(kind: Kind) -> Io<Queue<()>> {
    IO::delay(move || match kind {
        Kind::Bounded(capacity) => Queue::bounded(capacity).expect("a capacity above 0"),
        Kind::Unbounded => Queue::unbounded(),
    })
}

fn one(q: Queue<()>, remaining: usize, done: usize) -> Io<usize> {
    if remaining > 0 {
        q.offer(())
            .product_r(q.take())
            .flat_map(move |()| one(q, remaining - 1, done + 1))
    } else {
        IO::pure(done)
    }
}

fn loop_in(q: Queue<()>, remaining: usize) -> Io<()> {
    if remaining > 0 {
        q.offer(()).flat_map(move |()| loop_in(q, remaining - 1))
    } else {
        IO::unit()
    }
}

fn loop_out(q: Queue<()>, remaining: usize, done: usize) -> Io<usize> {
    if remaining > 0 {
        q.take()
            .flat_map(move |()| loop_out(q, remaining - 1, done + 1))
    } else {
        IO::pure(done)
    }
}

type Action = Arc<dyn Fn() -> Io<()> + Send + Sync>;

fn par(action: Action, num: usize) -> Io<usize> {
    if num <= 10 {
        IO::replicate(num, move || action()).map(|done| done.len())
    } else {
        par(action.clone(), num / 2)
            .both(par(action, num / 2))
            .map(|(a, b)| a + b)
    }
}

pub fn queue_one(kind: Kind) -> Io<usize> {
    new_queue(kind).flat_map(|q| one(q, QUEUE_SIZE, 0))
}

pub fn queue_many(kind: Kind) -> Io<usize> {
    new_queue(kind)
        .flat_map(|q| loop_in(q.clone(), QUEUE_SIZE).product_r(loop_out(q, QUEUE_SIZE, 0)))
}

pub fn queue_contended(kind: Kind) -> Io<usize> {
    new_queue(kind).flat_map(|q| {
        let (offerer, taker) = (q.clone(), q);
        let offerers = par(Arc::new(move || offerer.offer(())), QUEUE_SIZE / 4);
        let takers = par(Arc::new(move || taker.take()), QUEUE_SIZE / 4);
        offerers.both(takers).map(|(_, taken)| taken)
    })
}

pub fn queue_contended_single_consumer(kind: Kind) -> Io<usize> {
    new_queue(kind).flat_map(|q| {
        let offerer = q.clone();
        let offerers = par(Arc::new(move || offerer.offer(())), QUEUE_SIZE / 4);
        let taker = IO::replicate(QUEUE_SIZE / 4, move || q.take()).map(|taken| taken.len());
        offerers.both(taker).map(|(_, taken)| taken)
    })
}

fn use_lock(m: &Mutex) -> Io<()> {
    m.lock().use_with(|_| IO::unit())
}

pub fn mutex_happy_path(fibers: usize) -> Io<usize> {
    IO::delay(Mutex::new).flat_map(move |m| {
        IO::replicate(fibers * MUTEX_ITERATIONS, move || use_lock(&m)).map(|uses| uses.len())
    })
}

pub fn mutex_high_contention(fibers: usize) -> Io<usize> {
    rounds(MUTEX_ITERATIONS, move || {
        IO::delay(Mutex::new).flat_map(move |m| {
            IO::par_sequence((0..fibers).map(|_| use_lock(&m)).collect()).map(|uses| uses.len())
        })
    })
}

pub fn mutex_cancellation(fibers: usize) -> Io<usize> {
    rounds(MUTEX_ITERATIONS, move || {
        IO::delay(Mutex::new).flat_map(move |m| {
            let lockers = m.clone();
            m.lock().use_with(move |_| {
                let cancels = (0..fibers)
                    .map(|_| {
                        use_lock(&lockers)
                            .start()
                            .flat_map(|fiber| Io::<()>::cede().product_r(fiber.cancel()))
                    })
                    .collect();
                IO::par_sequence(cancels).map(|cancels| cancels.len())
            })
        })
    })
}

// ---------------------------------------------------------------------------
// Sleep (10,000 fibers)
// ---------------------------------------------------------------------------

/// Cats Effect's `1.nanosecond`.
pub const NANO: Duration = Duration::from_nanos(1);

pub fn sleep() -> Io<i64> {
    fn nap() -> Io<()> {
        IO::sleep(NANO)
    }
    fn fiber(i: i32) -> Io<i32> {
        nap().flat_map(move |()| {
            IO::delay(move || i).flat_map(|j| {
                nap().flat_map(move |()| {
                    if j > SLEEP_LOOP_UNTIL {
                        nap().flat_map(move |()| IO::pure(j))
                    } else {
                        nap().flat_map(move |()| fiber(j + 1))
                    }
                })
            })
        })
    }
    IO::traverse((0..SLEEP_FIBERS).collect(), |i| fiber(i).start())
        .flat_map(|fibers| IO::traverse(fibers, |fiber| fiber.join_with_never()))
        .map(|results| results.into_iter().map(i64::from).sum())
}

// ---------------------------------------------------------------------------
// Parallel and WorkStealing (sizes scaled down: each constant says how)
// ---------------------------------------------------------------------------

/// JMH's `Blackhole.consumeCPU(tokens)`: a dependent chain of `tokens`
/// multiply-adds (the same recurrence), about 1.2 ns per token on the
/// development machine. Never inlined, so that every side runs the same
/// machine code (inlined, LLVM unrolls it differently inside each closure).
#[inline(never)]
pub fn consume_cpu(tokens: u64) -> u64 {
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

/// ParallelBenchmark's `cpuTokens`.
pub const CPU_TOKENS: u64 = 10_000;

/// `ParallelBenchmark.parTraverse(size)`: `size` items of
/// `IO(consumeCPU(10000))` through `par_traverse`.
pub fn par_traverse(size: usize) -> Io<usize> {
    IO::par_traverse((0..size).collect(), move |_| {
        Io::<u64>::delay(move || black_box(consume_cpu(CPU_TOKENS)))
    })
    .map(|values: Vec<u64>| values.len())
}

/// `scheduling`/`runnableScheduling`: fibers started (Cats Effect: 1,000,000).
pub const SCHED_FIBERS: i64 = 10_000;
/// The loop limit (Cats Effect: 10,000), scaled with `SCHED_FIBERS`.
pub const SCHED_LIMIT: i64 = 1_000;
/// `alloc`: fibers (Cats Effect: 2,500) and loop limit (Cats Effect: 1,000).
pub const ALLOC_FIBERS: usize = 250;
pub const ALLOC_LIMIT: usize = 100;

/// `scheduling`'s loop iterations (also `runnableScheduling`'s runnables)
/// and sum of results.
pub fn scheduling_totals() -> (u64, i64) {
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

fn start_all<A: Send + 'static>(
    n: usize,
    make: impl FnMut(usize) -> Io<A> + Send + 'static,
) -> Io<Vec<FiberHandle<A, Infallible>>> {
    let mut make = make;
    IO::traverse((0..n).collect(), move |i| make(i).start())
}

pub fn ws_scheduling() -> Io<i64> {
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
    IO::traverse((0..SCHED_FIBERS).collect(), |i| fiber(i).start())
        .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
        .map(|values| values.iter().sum::<i64>())
}

/// Cats Effect's `allocation(n)`: `max(100, min(n, 2000))` heap objects.
#[allow(
    clippy::vec_box,
    reason = "one heap object per element is the workload"
)]
pub fn allocation(n: usize) -> Vec<Box<usize>> {
    let size = n.clamp(100, 2000);
    (0..size).map(|i| Box::new(black_box(i))).collect()
}

/// Cats Effect's `sum` of identity hash codes: here, of addresses.
pub fn address_sum(objects: &[Box<usize>]) -> usize {
    objects
        .iter()
        .map(|b| &**b as *const usize as usize)
        .fold(0usize, usize::wrapping_add)
}

pub fn ws_alloc() -> Io<usize> {
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
    start_all(ALLOC_FIBERS, |_| fiber(0))
        .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
        .map(|values| values.iter().sum::<usize>())
}

/// Cats Effect's `runnableScheduling`, which submits plain `Runnable`s to
/// the compute pool (`pool.execute`): `SCHED_FIBERS` of them, each
/// resubmitting itself with `j + 1` until `j` passes `SCHED_LIMIT`, the
/// last of each chain counting a latch down. Spindle's executors run
/// fibers, not runnables, so each runnable is a fiber that starts the next
/// (`start`, never joined) and the latch is a counter plus a `Deferred`
/// the main fiber waits on. Element: one runnable (fiber).
pub fn ws_runnable_scheduling() -> Io<i64> {
    fn run(j: i64, remaining: Arc<AtomicI64>, done: Deferred<()>) -> Io<()> {
        if j > SCHED_LIMIT {
            IO::defer(move || {
                if remaining.fetch_sub(1, Relaxed) == 1 {
                    done.complete(()).void()
                } else {
                    IO::unit()
                }
            })
        } else {
            execute(j + 1, remaining, done)
        }
    }
    fn execute(j: i64, remaining: Arc<AtomicI64>, done: Deferred<()>) -> Io<()> {
        IO::defer(move || run(j, remaining, done)).start().void()
    }
    IO::defer(|| {
        let remaining = Arc::new(AtomicI64::new(SCHED_FIBERS));
        let done = Deferred::<()>::new();
        let waiter = done.clone();
        IO::traverse((0..SCHED_FIBERS).collect(), move |i| {
            execute(i, remaining.clone(), done.clone())
        })
        .product_r(waiter.get())
        .map(|()| SCHED_FIBERS)
    })
}

// ---------------------------------------------------------------------------
// tokio's runtime shapes (rt_current_thread.rs / rt_multi_threaded.rs)
// ---------------------------------------------------------------------------

/// `spawn_many`: tasks spawned per operation (tokio's `NUM_SPAWN`).
pub const NUM_SPAWN: usize = 10_000;
/// `yield_many`: tasks, and yields per task (tokio's `TASKS`, `NUM_YIELD`).
pub const YIELD_TASKS: usize = 200;
pub const NUM_YIELD: usize = 1_000;
/// `ping_pong`: rounds per operation (tokio's `NUM_PINGS`).
pub const NUM_PINGS: usize = 1_000;
/// `chained_spawn`: the length of the chain (tokio's `ITER`).
pub const CHAIN: usize = 1_000;

/// `spawn_many`: the main fiber starts 10,000 empty fibers, then joins each.
pub fn spawn_many() -> Io<usize> {
    start_all(NUM_SPAWN, |_| Io::<()>::unit())
        .flat_map(|handles| IO::traverse(handles, |h| h.join_void()))
        .map(|joined| joined.len())
}

/// `yield_many`: 200 fibers each cede 1,000 times; the main fiber joins them.
pub fn yield_many() -> Io<usize> {
    fn cedes(n: usize) -> Io<()> {
        if n == 0 {
            IO::unit()
        } else {
            Io::<()>::cede().flat_map(move |()| cedes(n - 1))
        }
    }
    start_all(YIELD_TASKS, |_| cedes(NUM_YIELD))
        .flat_map(|handles| IO::traverse(handles, |h| h.join_void()))
        .map(|joined| joined.len())
}

/// `ping_pong`: 1,000 rounds started as fibers; each starts a responder,
/// pings it and waits for its pong (two `Deferred`s); the main fiber joins
/// the rounds.
pub fn ping_pong() -> Io<usize> {
    fn round() -> Io<()> {
        IO::defer(|| {
            let (ping, pong) = (Deferred::<()>::new(), Deferred::<()>::new());
            let (ping_rx, pong_tx) = (ping.clone(), pong.clone());
            let responder = ping_rx
                .get::<Infallible>()
                .flat_map(move |()| pong_tx.complete(()).void());
            responder
                .start()
                .flat_map(move |_responder| ping.complete(()).flat_map(move |_| pong.get()))
        })
    }
    start_all(NUM_PINGS, |_| round())
        .flat_map(|handles| IO::traverse(handles, |h| h.join_void()))
        .map(|joined| joined.len())
}

/// `chained_spawn`: each fiber starts the next, 1,000 deep; the last one
/// completes a `Deferred` the main fiber waits on.
pub fn chained_spawn() -> Io<usize> {
    fn chain(done: Deferred<usize>, n: usize) -> Io<()> {
        if n == 0 {
            done.complete(CHAIN).void()
        } else {
            IO::defer(move || chain(done, n - 1)).start().void()
        }
    }
    IO::defer(|| {
        let done = Deferred::<usize>::new();
        chain(done.clone(), CHAIN).product_r(done.get())
    })
}

/// `PingPong`: round trips per operation.
pub const ROUND_TRIPS: u32 = 1_000;

/// `PingPong.queue`: two fibers pass a number back and forth through two
/// `Queue::bounded(1)`, [`ROUND_TRIPS`] times; every take waits for the
/// other fiber's offer (a wake-up each way per round trip).
pub fn ping_pong_queue() -> Io<u32> {
    IO::defer(|| {
        let bounded = || Queue::<u32>::bounded(1).expect("capacity 1");
        let (ping, pong) = (bounded(), bounded());
        let (ping_rx, pong_tx) = (ping.clone(), pong.clone());
        let responder: Io<u32> = IO::tail_rec(0, move |n| {
            if n == ROUND_TRIPS {
                return IO::pure(ControlFlow::Break(n));
            }
            let pong_tx = pong_tx.clone();
            ping_rx
                .take()
                .flat_map(move |x| pong_tx.offer(x + 1))
                .map(move |()| ControlFlow::Continue(n + 1))
        });
        responder.start().flat_map(move |responder| {
            let pinger: Io<u32> = IO::tail_rec(0, move |n| {
                if n == ROUND_TRIPS {
                    return IO::pure(ControlFlow::Break(n));
                }
                let pong = pong.clone();
                ping.offer(n)
                    .flat_map(move |()| pong.take())
                    .map(ControlFlow::Continue)
            });
            pinger.flat_map(move |n| responder.join_void().map(move |()| n))
        })
    })
}

/// `PingPong.deferred`: the same two fibers, each message through a fresh
/// `Deferred` (made up front, two per round trip).
pub fn ping_pong_deferred() -> Io<u32> {
    IO::defer(|| {
        let pings: Vec<Deferred<u32>> = (0..ROUND_TRIPS).map(|_| Deferred::new()).collect();
        let pongs: Vec<Deferred<u32>> = (0..ROUND_TRIPS).map(|_| Deferred::new()).collect();
        let (pings_rx, pongs_tx) = (Arc::new(pings.clone()), Arc::new(pongs.clone()));
        let responder: Io<u32> = IO::tail_rec(0, move |n| {
            if n == ROUND_TRIPS {
                return IO::pure(ControlFlow::Break(n));
            }
            let pongs_tx = pongs_tx.clone();
            pings_rx[n as usize]
                .get()
                .flat_map(move |x| pongs_tx[n as usize].complete(x + 1))
                .map(move |_| ControlFlow::Continue(n + 1))
        });
        let (pings, pongs) = (Arc::new(pings), Arc::new(pongs));
        responder.start().flat_map(move |responder| {
            let pinger: Io<u32> = IO::tail_rec(0, move |n| {
                if n == ROUND_TRIPS {
                    return IO::pure(ControlFlow::Break(n));
                }
                let pongs = pongs.clone();
                pings[n as usize]
                    .complete(n)
                    .flat_map(move |_| pongs[n as usize].get())
                    .map(ControlFlow::Continue)
            });
            pinger.flat_map(move |n| responder.join_void().map(move |()| n))
        })
    })
}
