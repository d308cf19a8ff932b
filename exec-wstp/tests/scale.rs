//! Many fibers at once: a million started and joined, a million sleeping
//! together, a hundred thousand started from several threads outside the
//! pool, and message passing between two fibers on a pool of four workers.
//!
//! Sizes: a million fibers started and joined, and a million sleepers, take
//! a few seconds each in a debug build on two cores, so they run at full
//! size everywhere. `par_traverse` makes about three fibers per item (a
//! tree of `both`), so its test runs a million items in release builds and
//! 100,000 in debug builds.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use common::{HANG_LIMIT, runtime, wait_until, within};
use spindle_core::executor::ParkedBlockOn;
use spindle_core::{Deferred, Executor, FiberHandle, IO, IORuntime, Outcome, Queue};

type E = ();

const MILLION: usize = 1_000_000;

#[test]
fn a_million_fibers_started_from_a_fiber_all_run_once_and_are_joined() {
    let rt = runtime(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let io: IO<Vec<Outcome<u64, E>>, E> = IO::traverse((0..MILLION as u64).collect(), move |i| {
        let r = r.clone();
        IO::<u64, E>::delay(move || {
            r.fetch_add(1, Ordering::Relaxed);
            i * 2
        })
        .start()
    })
    .flat_map(|handles: Vec<FiberHandle<u64, E>>| IO::traverse(handles, |h| h.join()));
    let outcomes = within("a million fibers", HANG_LIMIT, move || {
        let outcomes = rt
            .block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds");
        (outcomes, rt)
    });
    let (outcomes, rt) = outcomes;
    assert_eq!(outcomes.len(), MILLION);
    for (i, outcome) in outcomes.into_iter().enumerate() {
        assert_eq!(outcome, Outcome::Succeeded(i as u64 * 2), "fiber {i}");
    }
    assert_eq!(runs.load(Ordering::Relaxed), MILLION, "each fiber ran once");
    assert_eq!(rt.metrics().live_fibers, 0);
}

#[test]
fn par_traverse_of_many_items_gives_every_value_in_order() {
    let items: u64 = if cfg!(debug_assertions) {
        100_000
    } else {
        MILLION as u64
    };
    let rt = runtime(2);
    let io = IO::<u64, E>::par_traverse((0..items).collect(), |i| IO::delay(move || i + 1));
    let values = within("par_traverse", HANG_LIMIT, move || {
        rt.block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds")
    });
    assert_eq!(values, (1..=items).collect::<Vec<_>>());
}

#[test]
fn fibers_spawned_from_several_outside_threads_all_run_and_are_joined() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 25_000;
    let rt = runtime(2);
    let sum = Arc::new(AtomicU64::new(0));
    let handle = rt.handle().clone();
    let s = sum.clone();
    within("spawns from outside", HANG_LIMIT, move || {
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (handle, s) = (handle.clone(), s.clone());
                scope.spawn(move || {
                    let fibers: Vec<FiberHandle<u64, E>> = (0..PER_THREAD)
                        .map(|i| {
                            let s = s.clone();
                            let n = t * PER_THREAD + i;
                            handle
                                .spawn(IO::delay(move || {
                                    s.fetch_add(n, Ordering::Relaxed);
                                    n
                                }))
                                .expect("the runtime runs")
                        })
                        .collect();
                    let joined = handle
                        .block_on(IO::<Outcome<u64, E>, E>::traverse(fibers, |h| h.join()))
                        .expect("runs")
                        .succeeded()
                        .expect("succeeds");
                    for (i, outcome) in joined.into_iter().enumerate() {
                        assert_eq!(outcome, Outcome::Succeeded(t * PER_THREAD + i as u64));
                    }
                });
            }
        });
    });
    let n = THREADS * PER_THREAD;
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
    assert_eq!(rt.metrics().live_fibers, 0);
}

#[test]
fn a_million_concurrent_sleepers_all_wake_and_the_pool_ends_idle_without_timers() {
    let rt = runtime(2);
    let woken = Arc::new(AtomicUsize::new(0));
    let w = woken.clone();
    // Deadlines spread over 50..150 ms: the sleepers overlap, and timers
    // fire in many batches, not one.
    let io: IO<usize, E> = IO::traverse((0..MILLION as u64).collect(), move |i| {
        let w = w.clone();
        IO::sleep(Duration::from_millis(50 + i % 100))
            .product_r(IO::delay(move || {
                w.fetch_add(1, Ordering::Relaxed);
            }))
            .start()
    })
    .flat_map(|handles: Vec<FiberHandle<(), E>>| {
        let n = handles.len();
        IO::traverse(handles, |h| h.join_void()).map(move |_| n)
    });
    let rt = within("a million sleepers", HANG_LIMIT, move || {
        assert_eq!(rt.block_on(io).expect("runs"), Outcome::Succeeded(MILLION));
        rt
    });
    assert_eq!(
        woken.load(Ordering::Relaxed),
        MILLION,
        "every sleeper woke once"
    );
    let metrics = rt.metrics();
    let timers: usize = metrics.workers.iter().map(|w| w.timers).sum();
    assert_eq!(timers, 0, "no timer is left: {metrics}");
    assert_eq!(metrics.live_fibers, 0, "{metrics}");
    wait_until("every worker parks", Duration::from_secs(10), || {
        rt.metrics().parked_workers == 2
    });
}

/// Two fibers pass a counter back and forth `rounds` times: `ping` sends
/// `n`, `pong` answers `n + 1`, `ping` checks the answer and sends it on.
/// Gives the last answer and every value `pong` saw.
fn ping_pong_through_queues(rounds: u64) -> IO<(u64, Vec<u64>), E> {
    let (to_pong, to_ping) = (
        Queue::<u64>::bounded(1).expect("valid"),
        Queue::<u64>::synchronous(),
    );
    let (ping_out, ping_in) = (to_pong.clone(), to_ping.clone());
    let ping = IO::tail_rec((0u64, 0u64), move |(round, n)| {
        let (out, inbox) = (ping_out.clone(), ping_in.clone());
        if round == rounds {
            return IO::pure(std::ops::ControlFlow::Break(n));
        }
        out.offer(n).product_r(inbox.take()).map(move |answer| {
            assert_eq!(answer, n + 1, "round {round}: the answer to {n}");
            std::ops::ControlFlow::Continue((round + 1, answer))
        })
    });
    let pong = IO::replicate(rounds as usize, move || {
        let answers = to_ping.clone();
        to_pong
            .take()
            .flat_map(move |n| answers.offer(n + 1).map_to(n))
    });
    ping.both(pong)
}

#[test]
fn ping_pong_through_queues_on_four_workers_keeps_every_round_in_order() {
    const ROUNDS: u64 = 1_000;
    let rt = runtime(4);
    let (last, seen) = within("ping-pong through queues", HANG_LIMIT, move || {
        rt.block_on(ping_pong_through_queues(ROUNDS))
            .expect("runs")
            .succeeded()
            .expect("succeeds")
    });
    assert_eq!(last, ROUNDS);
    assert_eq!(seen, (0..ROUNDS).collect::<Vec<_>>());
}

#[test]
fn ping_pong_through_deferreds_on_four_workers_keeps_every_round_in_order() {
    const ROUNDS: usize = 1_000;
    let rt = runtime(4);
    let pings: Arc<Vec<Deferred<usize>>> = Arc::new((0..ROUNDS).map(|_| Deferred::new()).collect());
    let pongs: Arc<Vec<Deferred<usize>>> = Arc::new((0..ROUNDS).map(|_| Deferred::new()).collect());
    let (ping_out, ping_in) = (pings.clone(), pongs.clone());
    // Started as two fibers from outside the pool, joined from outside.
    let ping = IO::<usize, E>::traverse((0..ROUNDS).collect(), move |round| {
        let answer = ping_in[round].clone();
        ping_out[round].complete(round * 2).product_r(answer.get())
    });
    let pong = IO::<usize, E>::traverse((0..ROUNDS).collect(), move |round| {
        let answer = pongs[round].clone();
        pings[round]
            .get()
            .flat_map(move |n| answer.complete(n + 1).map_to(n))
    });
    let (answers, seen) = within("ping-pong through deferreds", HANG_LIMIT, move || {
        let (ping, pong) = (rt.spawn(ping).expect("runs"), rt.spawn(pong).expect("runs"));
        let io: IO<_, E> = ping.join().both(pong.join());
        rt.block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds")
    });
    let answers = answers.succeeded().expect("ping succeeds");
    let seen = seen.succeeded().expect("pong succeeds");
    assert_eq!(answers, (0..ROUNDS).map(|r| r * 2 + 1).collect::<Vec<_>>());
    assert_eq!(seen, (0..ROUNDS).map(|r| r * 2).collect::<Vec<_>>());
}
