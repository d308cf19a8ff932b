//! Futures inside `IO` and fibers awaited as futures, on exec-single (one
//! thread, so the numbers are the run-loop's and the bridge's own).
//!
//! Each operation is one program of [`SIZE`] (or [`ROUND_TRIPS`]) steps,
//! built inside the timed closure, as in the suite's bind workloads:
//!
//! * `Futures/ready/delay`: `IO::delay(..).flat_map(go)` per step (the
//!   reference: one `delay` step and one bind).
//! * `Futures/ready/from_future`: `IO::from_future(<ready future>)` per
//!   step, same bind (the goal: at most twice the `delay` row).
//! * `Futures/ready/from_future_zst`: the same with a zero-sized future
//!   (pinned nowhere: no pool block), plus a `map` to use its output.
//! * `Futures/ready/from_future_with`: the lazy form.
//! * `Futures/pending_once/from_future`: a future that clones its waker,
//!   wakes the clone and returns `Pending` once (the shared wake cell is
//!   allocated; the wake during the poll makes the fiber cede and poll
//!   again, through `reschedule_fiber`), against
//!   `Futures/pending_once/from_callback` (a callback completed during
//!   registration: a suspension that ends at once).
//! * `Futures/round_trip/*`: start a fiber and wait for its outcome,
//!   [`ROUND_TRIPS`] times: `from_future(fiber.into_future())` (IO → Future
//!   → IO) against `fiber.join()`.
//!
//! * `Futures/oneshot_ping_pong/*`: two concurrent tasks pass a number back
//!   and forth [`PING_PONGS`] times through `tokio::sync::oneshot`
//!   channels, on a tokio multi-thread runtime with 2 workers:
//!   `spindle_tokio` runs two fibers on exec-tokio that await each
//!   receiver with `IO::from_future`; `tokio` runs two tokio tasks that
//!   `.await` it (the same channels, no Spindle).
//!
//! Run: `cargo bench -p benches --bench futures -- --quick`.

use core::convert::Infallible;
use core::future::{Future, IntoFuture};
use core::ops::ControlFlow;
use core::pin::Pin;
use core::task::{Context, Poll};

use benches::{SIZE, succeeded};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use spindle_core::{IO, IORuntime};
use spindle_exec_single::SingleThreaded;
use spindle_exec_tokio::TokioExecutor;
use tokio::sync::oneshot;

type Io<A> = IO<A, Infallible>;

/// A row: its name and one step of the chain.
type Step = (&'static str, fn(i32) -> Io<i32>);

/// Round trips per ping-pong operation.
const PING_PONGS: u32 = 1_000;

type Oneshots = (Vec<oneshot::Sender<u32>>, Vec<oneshot::Receiver<u32>>);

fn oneshots() -> Oneshots {
    (0..PING_PONGS).map(|_| oneshot::channel()).unzip()
}

/// Sends `n` on each channel of `to`, then awaits the answer on the same
/// round's channel of `from`: one side of the ping-pong as a fiber.
fn ping_fiber(to: Vec<oneshot::Sender<u32>>, from: Vec<oneshot::Receiver<u32>>) -> Io<u32> {
    let rounds = to.into_iter().zip(from).collect::<Vec<_>>().into_iter();
    IO::tail_rec((rounds, 0u32), |(mut rounds, n)| match rounds.next() {
        None => IO::pure(ControlFlow::Break(n)),
        Some((tx, rx)) => IO::delay(move || {
            let _ = tx.send(n);
        })
        .flat_map(move |()| IO::from_future(rx))
        .map(move |answer| ControlFlow::Continue((rounds, answer.unwrap_or(0)))),
    })
}

/// Awaits each channel of `from` and answers `n + 1` on `to`.
fn pong_fiber(from: Vec<oneshot::Receiver<u32>>, to: Vec<oneshot::Sender<u32>>) -> Io<u32> {
    let rounds = from.into_iter().zip(to).collect::<Vec<_>>().into_iter();
    IO::tail_rec((rounds, 0u32), |(mut rounds, last)| match rounds.next() {
        None => IO::pure(ControlFlow::Break(last)),
        Some((rx, tx)) => IO::from_future(rx).map(move |n| {
            let n = n.unwrap_or(0) + 1;
            let _ = tx.send(n);
            ControlFlow::Continue((rounds, n))
        }),
    })
}

/// Fibers started per round-trip operation.
const ROUND_TRIPS: i32 = 1_000;

/// Ready with `i + 1` at the first poll (not zero-sized).
struct ReadyNext(i32);

impl Future for ReadyNext {
    type Output = i32;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<i32> {
        Poll::Ready(self.0 + 1)
    }
}

/// Ready with 1 at the first poll (zero-sized).
struct ReadyOne;

impl Future for ReadyOne {
    type Output = i32;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<i32> {
        Poll::Ready(1)
    }
}

/// Pending once (cloned waker woken at once), then ready with `i + 1`.
struct PendingOnce(i32, bool);

impl Future for PendingOnce {
    type Output = i32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<i32> {
        if self.1 {
            return Poll::Ready(self.0 + 1);
        }
        self.1 = true;
        // A clone (not `wake_by_ref`): the path that allocates the cell.
        let waker = cx.waker().clone();
        waker.wake();
        Poll::Pending
    }
}

fn chain(step: fn(i32) -> Io<i32>, size: i32) -> Io<i32> {
    fn go(i: i32, step: fn(i32) -> Io<i32>, size: i32) -> Io<i32> {
        if i < size {
            step(i).flat_map(move |i| go(i, step, size))
        } else {
            IO::pure(i)
        }
    }
    go(0, step, size)
}

/// One group of chain rows: each row runs `chain(step, size)` on `rt`,
/// checked once to give `size`, then timed.
fn bench_chains<R: IORuntime>(c: &mut Criterion, rt: &R, group: &str, rows: &[Step], size: i32) {
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(size as u64));
    for &(name, step) in rows {
        group.bench_function(name, |b| {
            assert_eq!(
                succeeded(rt.block_on(chain(step, size)).expect("block_on")),
                size
            );
            b.iter(|| succeeded(rt.block_on(chain(step, size)).expect("block_on")))
        });
    }
    group.finish();
}

fn futures(c: &mut Criterion) {
    let rt = SingleThreaded::new().expect("an executor");
    let ready: [Step; 4] = [
        ("delay", |i| IO::delay(move || i + 1)),
        ("from_future", |i| IO::from_future(ReadyNext(i))),
        ("from_future_zst", |i| {
            IO::from_future(ReadyOne).map(move |one| i + one)
        }),
        ("from_future_with", |i| {
            IO::from_future_with(move || ReadyNext(i))
        }),
    ];
    bench_chains(c, &rt, "Futures/ready", &ready, SIZE);

    let pending: [Step; 2] = [
        ("from_callback", |i| {
            IO::from_callback(move |cb| {
                cb.succeed(i + 1);
                None
            })
        }),
        ("from_future", |i| IO::from_future(PendingOnce(i, false))),
    ];
    bench_chains(c, &rt, "Futures/pending_once", &pending, SIZE);

    let round_trip: [Step; 2] = [
        ("join", |i| {
            Io::delay(move || i + 1)
                .start()
                .flat_map(|fiber| fiber.join())
                .map(succeeded)
        }),
        ("from_future_into_future", |i| {
            Io::delay(move || i + 1)
                .start()
                .flat_map(|fiber| IO::from_future(fiber.into_future()))
                .map(succeeded)
        }),
    ];
    bench_chains(c, &rt, "Futures/round_trip", &round_trip, ROUND_TRIPS);

    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let spindle_rt = TokioExecutor::builder()
        .multi_thread(2)
        .build()
        .expect("an exec-tokio executor");
    let spindle_ping_pong = || {
        let (ping_tx, ping_rx) = oneshots();
        let (pong_tx, pong_rx) = oneshots();
        let both = ping_fiber(ping_tx, pong_rx).both(pong_fiber(ping_rx, pong_tx));
        succeeded(spindle_rt.block_on(both).expect("block_on"))
    };
    let tokio_ping_pong = || {
        let (ping_tx, ping_rx) = oneshots();
        let (pong_tx, pong_rx) = oneshots();
        tokio_rt.block_on(async move {
            let ping = tokio::spawn(async move {
                let mut n = 0;
                for (tx, rx) in ping_tx.into_iter().zip(pong_rx) {
                    let _ = tx.send(n);
                    n = rx.await.unwrap_or(0);
                }
                n
            });
            let pong = tokio::spawn(async move {
                let mut last = 0;
                for (rx, tx) in ping_rx.into_iter().zip(pong_tx) {
                    last = rx.await.unwrap_or(0) + 1;
                    let _ = tx.send(last);
                }
                last
            });
            (ping.await.expect("ping"), pong.await.expect("pong"))
        })
    };
    assert_eq!(spindle_ping_pong(), (PING_PONGS, PING_PONGS));
    assert_eq!(tokio_ping_pong(), (PING_PONGS, PING_PONGS));
    let mut group = c.benchmark_group("Futures/oneshot_ping_pong");
    group.throughput(Throughput::Elements(u64::from(PING_PONGS)));
    group.bench_function("spindle_tokio", |b| b.iter(spindle_ping_pong));
    group.bench_function("tokio", |b| b.iter(tokio_ping_pong));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = futures
}
criterion_main!(benches);
