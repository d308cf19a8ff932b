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
//! Run: `cargo bench -p benches --bench futures -- --quick`.

use core::convert::Infallible;
use core::future::{Future, IntoFuture};
use core::pin::Pin;
use core::task::{Context, Poll};

use benches::{SIZE, succeeded};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use spindle_core::IO;
use spindle_exec_single::SingleThreaded;

type Io<A> = IO<A, Infallible>;

/// A row: its name and one step of the chain.
type Step = (&'static str, fn(i32) -> Io<i32>);

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
    let mut group = c.benchmark_group("Futures/ready");
    group.throughput(Throughput::Elements(SIZE as u64));
    for (name, step) in ready {
        group.bench_function(name, |b| {
            assert_eq!(
                succeeded(rt.block_on(chain(step, SIZE)).expect("block_on")),
                SIZE
            );
            b.iter(|| succeeded(rt.block_on(chain(step, SIZE)).expect("block_on")))
        });
    }
    group.finish();

    let pending: [Step; 2] = [
        ("from_callback", |i| {
            IO::from_callback(move |cb| {
                cb.succeed(i + 1);
                None
            })
        }),
        ("from_future", |i| IO::from_future(PendingOnce(i, false))),
    ];
    let mut group = c.benchmark_group("Futures/pending_once");
    group.throughput(Throughput::Elements(SIZE as u64));
    for (name, step) in pending {
        group.bench_function(name, |b| {
            assert_eq!(
                succeeded(rt.block_on(chain(step, SIZE)).expect("block_on")),
                SIZE
            );
            b.iter(|| succeeded(rt.block_on(chain(step, SIZE)).expect("block_on")))
        });
    }
    group.finish();

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
    let mut group = c.benchmark_group("Futures/round_trip");
    group.throughput(Throughput::Elements(ROUND_TRIPS as u64));
    for (name, step) in round_trip {
        group.bench_function(name, |b| {
            let ok = succeeded(rt.block_on(chain(step, ROUND_TRIPS)).expect("block_on"));
            assert_eq!(ok, ROUND_TRIPS);
            b.iter(|| succeeded(rt.block_on(chain(step, ROUND_TRIPS)).expect("block_on")))
        });
    }
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
