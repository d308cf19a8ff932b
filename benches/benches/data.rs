//! Concurrent data types: ports of Cats Effect's `DeferredBenchmark`,
//! `RefBenchmark`, `QueueBenchmark` and `MutexBenchmark` (JMH,
//! `benchmarks/` in typelevel/cats-effect), same shapes and sizes.
//!
//! One operation is one whole program, built inside the timed closure (the
//! data type is created inside it too, as Cats Effect creates it inside the
//! program). Throughput is declared in the operations on the data type that
//! one run performs; each program returns a count of them, checked before
//! measuring.
//!
//! * **Deferred** (`count` = 10, 100, 1000; 1000 deferreds per run):
//!   `get`: complete, then `count` gets in sequence (elements: gets);
//!   `complete`: `count` gets started in parallel (`par_sequence`) while
//!   another fiber completes (elements: gets); `cancel`: `count` fibers
//!   started on `get` and canceled one by one (elements: cancels).
//! * **Ref** (10,000 updates): `modify(n => (n + 1, n))` and
//!   `getAndUpdate(_ + 1)` in a loop that sums the old values.
//! * **Queue** (size 32,768): `EnqueueDequeueOne` offers and takes one
//!   element at a time; `Many` offers `size` then takes `size`;
//!   `Contended` runs `size / 4` offers and `size / 4` takes, each side a
//!   binary tree of `both` down to sequential runs of at most 10, on a
//!   queue of `size / 8`; `ContendedSingleConsumer` the same with one
//!   sequential taker. Elements: elements through the queue. Cats Effect
//!   has two implementations of each queue (`Concurrent`, `Async`);
//!   Spindle has one, so its rows drop that word (`Queue.boundedOne` is
//!   `boundedConcurrentEnqueueDequeueOne` and `boundedAsync...`).
//! * **Mutex** (`fibers` = 10, 50, 100; `iterations` = 1000):
//!   `happyPath`: `lock.use_` `fibers * iterations` times in sequence;
//!   `highContention`: 1000 times, a new mutex and `fibers` parallel
//!   `lock.use_`; `cancellation`: 1000 times, hold the lock while `fibers`
//!   parallel fibers each start a `lock.use_`, cede and cancel it.
//!   Elements: lock uses (or cancels).
//!
//! The tokio reference, on a current-thread runtime (`rt.block_on`),
//! written as `async` Rust with loops where Cats Effect loops:
//!
//! * Deferred: a `tokio::sync::watch` channel of a `bool` (`send_replace`
//!   to complete, `wait_for` to get). A oneshot, the usual "set once"
//!   primitive, has a single receiver and cannot serve `count` getters.
//!   Parallel gets are spawned tasks; a cancel is `abort` then awaiting the
//!   `JoinHandle` (Cats Effect's cancel waits for the fiber's end).
//! * Ref: a `std::sync::Mutex<i64>` locked for each update: what async Rust
//!   uses for a shared cell (tokio has no `Ref`).
//! * Queue: `tokio::sync::mpsc` (bounded `channel`, `unbounded_channel`),
//!   the parallel offerers spawned tasks. mpsc has one consumer, so the
//!   multi-consumer `Contended` rows run on Spindle only (tokio has no
//!   multi-consumer queue; with a receiver behind a lock it would measure
//!   the lock). Spindle's `Queue` is multi-consumer in every row, so it
//!   does more work than mpsc for the same program.
//! * Mutex: `tokio::sync::Mutex<()>`; parallel lockers are spawned tasks,
//!   the cancellation row aborts each locker after a `yield_now` and awaits
//!   it.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench data
//! cargo bench -p benches --bench data -- Deferred   # one benchmark
//! ```

use std::convert::Infallible;

use benches::{
    DEFERRED_COUNTS, DEFERRED_ROUNDS, MUTEX_FIBERS, MUTEX_ITERATIONS, QUEUE_SIZE, REF_ITERATIONS,
    succeeded,
};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::IO;

mod common;
mod groups;

use common::compare;
use groups::spindle_only;

/// The Spindle programs.
mod spindle {
    use std::sync::Arc;

    use io_core::{Deferred, Mutex, Queue, Ref};

    use super::*;

    type Io<A> = IO<A, Infallible>;

    /// Runs the program `round` builds `rounds` times; the sum of the counts.
    fn rounds(rounds: usize, round: impl FnMut() -> Io<usize> + Send + 'static) -> Io<usize> {
        IO::replicate(rounds, round).map(|counts| counts.into_iter().sum())
    }

    // ----- Deferred ------------------------------------------------------

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

    // ----- Ref -----------------------------------------------------------

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

    // ----- Queue ---------------------------------------------------------

    /// Which queue a program runs on.
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

    /// Cats Effect's `par`: `num` runs of `action`, as a binary tree of
    /// `both` down to sequential runs of at most 10. The number of runs.
    fn par(action: Arc<dyn Fn() -> Io<()> + Send + Sync>, num: usize) -> Io<usize> {
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

    // ----- Mutex ---------------------------------------------------------

    fn use_lock(m: &Mutex) -> Io<()> {
        m.lock().use_(|_| IO::unit())
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
                m.lock().use_(move |_| {
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
}

/// The same programs in `async` Rust, for tokio.
mod tokio_ref {
    use std::sync::Arc;

    use tokio::sync::{Mutex, mpsc, watch};
    use tokio::task::yield_now;

    use super::{DEFERRED_ROUNDS, MUTEX_ITERATIONS, QUEUE_SIZE, REF_ITERATIONS};
    use crate::groups::BoxedSend;

    // ----- Deferred ------------------------------------------------------

    /// A getter on its own task: waits until the deferred is complete.
    fn spawn_get(rx: &watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        let mut rx = rx.clone();
        tokio::spawn(async move {
            rx.wait_for(|complete| *complete)
                .await
                .map(|_| ())
                .expect("the deferred is completed while the sender lives");
        })
    }

    pub async fn deferred_get(count: usize) -> usize {
        let mut gets = 0;
        for _ in 0..DEFERRED_ROUNDS {
            let (tx, mut rx) = watch::channel(false);
            tx.send_replace(true);
            for _ in 0..count {
                rx.wait_for(|complete| *complete)
                    .await
                    .map(|_| ())
                    .expect("completed");
                gets += 1;
            }
        }
        gets
    }

    pub async fn deferred_complete(count: usize) -> usize {
        let mut gets = 0;
        for _ in 0..DEFERRED_ROUNDS {
            let (tx, rx) = watch::channel(false);
            let getters = async {
                let handles: Vec<_> = (0..count).map(|_| spawn_get(&rx)).collect();
                let mut done = 0;
                for handle in handles {
                    handle.await.expect("the getter ran");
                    done += 1;
                }
                done
            };
            let complete = async {
                tx.send_replace(true);
            };
            let (done, ()) = tokio::join!(getters, complete);
            gets += done;
        }
        gets
    }

    pub async fn deferred_cancel(count: usize) -> usize {
        let mut cancels = 0;
        for _ in 0..DEFERRED_ROUNDS {
            let (tx, rx) = watch::channel(false);
            let handles: Vec<_> = (0..count).map(|_| spawn_get(&rx)).collect();
            for handle in handles {
                handle.abort();
                let _ = handle.await;
                cancels += 1;
            }
            drop(tx);
        }
        cancels
    }

    // ----- Ref -----------------------------------------------------------

    pub async fn ref_modify() -> i64 {
        let cell = std::sync::Mutex::new(0i64);
        let mut acc = 0;
        for _ in 0..REF_ITERATIONS {
            let before = {
                let mut n = cell.lock().expect("not poisoned");
                let before = *n;
                *n += 1;
                before
            };
            acc += before;
        }
        acc
    }

    /// tokio has no `Ref`: `getAndUpdate` and `modify` are the same
    /// locked increment here.
    pub async fn ref_get_and_update() -> i64 {
        ref_modify().await
    }

    // ----- Queue ---------------------------------------------------------

    pub async fn bounded_one() -> usize {
        let (tx, mut rx) = mpsc::channel::<()>(QUEUE_SIZE);
        let mut done = 0;
        for _ in 0..QUEUE_SIZE {
            tx.send(()).await.expect("the receiver lives");
            rx.recv().await.expect("an element was sent");
            done += 1;
        }
        done
    }

    pub async fn unbounded_one() -> usize {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let mut done = 0;
        for _ in 0..QUEUE_SIZE {
            tx.send(()).expect("the receiver lives");
            rx.recv().await.expect("an element was sent");
            done += 1;
        }
        done
    }

    pub async fn bounded_many() -> usize {
        let (tx, mut rx) = mpsc::channel::<()>(QUEUE_SIZE);
        for _ in 0..QUEUE_SIZE {
            tx.send(()).await.expect("the receiver lives");
        }
        let mut done = 0;
        for _ in 0..QUEUE_SIZE {
            rx.recv().await.expect("an element was sent");
            done += 1;
        }
        done
    }

    pub async fn unbounded_many() -> usize {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        for _ in 0..QUEUE_SIZE {
            tx.send(()).expect("the receiver lives");
        }
        let mut done = 0;
        for _ in 0..QUEUE_SIZE {
            rx.recv().await.expect("an element was sent");
            done += 1;
        }
        done
    }

    /// Cats Effect's `par` for offers: `num` sends as a binary tree of
    /// spawned tasks down to sequential runs of at most 10.
    fn par_send(tx: mpsc::Sender<()>, num: usize) -> BoxedSend<usize> {
        Box::pin(async move {
            if num <= 10 {
                for _ in 0..num {
                    tx.send(()).await.expect("the receiver lives");
                }
                num
            } else {
                let left = tokio::spawn(par_send(tx.clone(), num / 2));
                let right = tokio::spawn(par_send(tx, num / 2));
                left.await.expect("the task ran") + right.await.expect("the task ran")
            }
        })
    }

    pub async fn bounded_contended_single_consumer() -> usize {
        let (tx, mut rx) = mpsc::channel::<()>(QUEUE_SIZE / 8);
        let taker = async move {
            let mut done = 0;
            for _ in 0..QUEUE_SIZE / 4 {
                rx.recv().await.expect("an element was sent");
                done += 1;
            }
            done
        };
        let (_, taken) = tokio::join!(par_send(tx, QUEUE_SIZE / 4), taker);
        taken
    }

    // ----- Mutex ---------------------------------------------------------

    pub async fn mutex_happy_path(fibers: usize) -> usize {
        let m = Mutex::new(());
        let mut uses = 0;
        for _ in 0..fibers * MUTEX_ITERATIONS {
            drop(m.lock().await);
            uses += 1;
        }
        uses
    }

    pub async fn mutex_high_contention(fibers: usize) -> usize {
        let mut uses = 0;
        for _ in 0..MUTEX_ITERATIONS {
            let m = Arc::new(Mutex::new(()));
            let handles: Vec<_> = (0..fibers)
                .map(|_| {
                    let m = m.clone();
                    tokio::spawn(async move { drop(m.lock().await) })
                })
                .collect();
            for handle in handles {
                handle.await.expect("the locker ran");
                uses += 1;
            }
        }
        uses
    }

    pub async fn mutex_cancellation(fibers: usize) -> usize {
        let mut cancels = 0;
        for _ in 0..MUTEX_ITERATIONS {
            let m = Arc::new(Mutex::new(()));
            let held = m.lock().await;
            let handles: Vec<_> = (0..fibers)
                .map(|_| {
                    let m = m.clone();
                    tokio::spawn(async move {
                        let locker = tokio::spawn(async move { drop(m.lock().await) });
                        yield_now().await;
                        locker.abort();
                        let _ = locker.await;
                    })
                })
                .collect();
            for handle in handles {
                handle.await.expect("the canceler ran");
                cancels += 1;
            }
            drop(held);
        }
        cancels
    }
}

fn deferred(c: &mut Criterion) {
    for count in DEFERRED_COUNTS {
        let (size, gets) = (count as u64, (DEFERRED_ROUNDS * count) as u64);
        let expected = DEFERRED_ROUNDS * count;
        compare(
            c,
            "Deferred.get",
            size,
            gets,
            expected,
            |rt| succeeded(rt.block_on(spindle::deferred_get(count))),
            |rt| rt.block_on(tokio_ref::deferred_get(count)),
        );
        compare(
            c,
            "Deferred.complete",
            size,
            gets,
            expected,
            |rt| succeeded(rt.block_on(spindle::deferred_complete(count))),
            |rt| rt.block_on(tokio_ref::deferred_complete(count)),
        );
        compare(
            c,
            "Deferred.cancel",
            size,
            gets,
            expected,
            |rt| succeeded(rt.block_on(spindle::deferred_cancel(count))),
            |rt| rt.block_on(tokio_ref::deferred_cancel(count)),
        );
    }
}

fn ref_(c: &mut Criterion) {
    let size = REF_ITERATIONS as u64;
    // The old values 0, 1, ..., 9,999.
    let expected = (0..REF_ITERATIONS).sum::<i64>();
    compare(
        c,
        "Ref.modify",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::ref_modify())),
        |rt| rt.block_on(tokio_ref::ref_modify()),
    );
    compare(
        c,
        "Ref.getAndUpdate",
        size,
        size,
        expected,
        |rt| succeeded(rt.block_on(spindle::ref_get_and_update())),
        |rt| rt.block_on(tokio_ref::ref_get_and_update()),
    );
}

fn queue(c: &mut Criterion) {
    use spindle::Kind::{Bounded, Unbounded};
    let size = QUEUE_SIZE as u64;
    let (all, quarter) = (QUEUE_SIZE, QUEUE_SIZE / 4);
    compare(
        c,
        "Queue.boundedOne",
        size,
        all as u64,
        all,
        |rt| succeeded(rt.block_on(spindle::queue_one(Bounded(QUEUE_SIZE)))),
        |rt| rt.block_on(tokio_ref::bounded_one()),
    );
    compare(
        c,
        "Queue.boundedMany",
        size,
        all as u64,
        all,
        |rt| succeeded(rt.block_on(spindle::queue_many(Bounded(QUEUE_SIZE)))),
        |rt| rt.block_on(tokio_ref::bounded_many()),
    );
    spindle_only(
        c,
        "Queue.boundedContended",
        size,
        quarter as u64,
        quarter,
        |rt| succeeded(rt.block_on(spindle::queue_contended(Bounded(QUEUE_SIZE / 8)))),
    );
    compare(
        c,
        "Queue.boundedContendedSingleConsumer",
        size,
        quarter as u64,
        quarter,
        |rt| {
            succeeded(
                rt.block_on(spindle::queue_contended_single_consumer(Bounded(
                    QUEUE_SIZE / 8,
                ))),
            )
        },
        |rt| rt.block_on(tokio_ref::bounded_contended_single_consumer()),
    );
    compare(
        c,
        "Queue.unboundedOne",
        size,
        all as u64,
        all,
        |rt| succeeded(rt.block_on(spindle::queue_one(Unbounded))),
        |rt| rt.block_on(tokio_ref::unbounded_one()),
    );
    compare(
        c,
        "Queue.unboundedMany",
        size,
        all as u64,
        all,
        |rt| succeeded(rt.block_on(spindle::queue_many(Unbounded))),
        |rt| rt.block_on(tokio_ref::unbounded_many()),
    );
    spindle_only(
        c,
        "Queue.unboundedContended",
        size,
        quarter as u64,
        quarter,
        |rt| succeeded(rt.block_on(spindle::queue_contended(Unbounded))),
    );
}

fn mutex(c: &mut Criterion) {
    for fibers in MUTEX_FIBERS {
        let (size, uses) = (fibers as u64, (fibers * MUTEX_ITERATIONS) as u64);
        let expected = fibers * MUTEX_ITERATIONS;
        compare(
            c,
            "Mutex.happyPath",
            size,
            uses,
            expected,
            |rt| succeeded(rt.block_on(spindle::mutex_happy_path(fibers))),
            |rt| rt.block_on(tokio_ref::mutex_happy_path(fibers)),
        );
        compare(
            c,
            "Mutex.highContention",
            size,
            uses,
            expected,
            |rt| succeeded(rt.block_on(spindle::mutex_high_contention(fibers))),
            |rt| rt.block_on(tokio_ref::mutex_high_contention(fibers)),
        );
        compare(
            c,
            "Mutex.cancellation",
            size,
            uses,
            expected,
            |rt| succeeded(rt.block_on(spindle::mutex_cancellation(fibers))),
            |rt| rt.block_on(tokio_ref::mutex_cancellation(fibers)),
        );
    }
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = deferred, ref_, queue, mutex
}
criterion_main!(benches);
