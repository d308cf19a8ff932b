//! Cancel storms: many fibers canceled at once, from several fibers, while
//! they sleep, loop, wait in uncancelable regions, or are just completing.
//! Every finalizer runs exactly once, every `cancel` returns after the
//! fiber's finalizers, and the pool is left with no fiber and no timer.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use common::{HANG_LIMIT, runtime, within};
use spindle_core::{CancelHandle, CountDownLatch, FiberHandle, IO, IORuntime, Outcome};

type E = ();

/// One counter per fiber, to check "exactly once" fiber by fiber.
fn counters(n: usize) -> Arc<Vec<AtomicU8>> {
    Arc::new((0..n).map(|_| AtomicU8::new(0)).collect())
}

fn bump(counters: &Arc<Vec<AtomicU8>>, i: usize) -> IO<(), E> {
    let counters = counters.clone();
    IO::delay(move || {
        counters[i].fetch_add(1, Ordering::SeqCst);
    })
}

fn assert_each_once(what: &str, counters: &[AtomicU8]) {
    for (i, c) in counters.iter().enumerate() {
        assert_eq!(c.load(Ordering::SeqCst), 1, "{what}: fiber {i}");
    }
}

/// Cancels every one of `handles` from two fibers of its own, all running
/// at once (cancel is idempotent), then joins them all.
fn cancel_all_from_many_fibers<A: Clone + Send + 'static>(
    handles: Vec<FiberHandle<A, E>>,
) -> IO<Vec<Outcome<A, E>>, E> {
    let n = handles.len();
    let cancelers: Arc<Vec<CancelHandle>> =
        Arc::new(handles.iter().map(FiberHandle::cancel_handle).collect());
    IO::<(), E>::par_traverse((0..2 * n).collect(), move |k| cancelers[k % n].cancel())
        .product_r(IO::traverse(handles, |handle| handle.join()))
}

/// A storm: starts `n` fibers on a fresh 2-worker pool, each running
/// `body(i)` under an `on_cancel` and a `guarantee` counter of its own;
/// once every one has begun, cancels them all from many fibers at once.
/// Checks that each ends canceled and that each finalizer ran exactly
/// once, and returns the pool for further checks.
fn cancel_storm<A, F>(what: &'static str, n: usize, body: F) -> spindle_exec_wstp::Runtime
where
    A: Clone + Send + 'static,
    F: Fn(usize) -> IO<A, E> + Send + 'static,
{
    let rt = runtime(2);
    let (on_cancel, guarantee) = (counters(n), counters(n));
    let ready = CountDownLatch::new(n as u64).expect("valid");
    let (oc, g, r) = (on_cancel.clone(), guarantee.clone(), ready.clone());
    let io = IO::<FiberHandle<A, E>, E>::traverse((0..n).collect(), move |i| {
        r.release()
            .product_r(body(i))
            .on_cancel(bump(&oc, i))
            .guarantee(bump(&g, i))
            .start()
    })
    .flat_map(move |handles| ready.wait().product_r(cancel_all_from_many_fibers(handles)));
    let (outcomes, rt) = within(what, HANG_LIMIT, move || {
        (
            rt.block_on(io)
                .expect("runs")
                .succeeded()
                .expect("succeeds"),
            rt,
        )
    });
    assert!(outcomes.iter().all(Outcome::is_canceled), "{what}");
    assert_each_once("on_cancel", &on_cancel);
    assert_each_once("guarantee", &guarantee);
    rt
}

#[test]
fn every_fiber_canceled_while_sleeping_runs_its_finalizers_exactly_once() {
    let rt = cancel_storm("cancel sleeping fibers", 20_000, |_| {
        IO::sleep(Duration::from_secs(3600))
    });
    let metrics = rt.metrics();
    assert_eq!(
        metrics.workers.iter().map(|w| w.timers).sum::<usize>(),
        0,
        "{metrics}"
    );
    assert_eq!(metrics.live_fibers, 0, "{metrics}");
}

#[test]
fn every_fiber_canceled_while_looping_runs_its_finalizers_exactly_once() {
    // Half the fibers cede in a loop, half compute in a loop (auto-yield):
    // both are always runnable, so the cancel is observed at a yield. (Each
    // round over the local queues runs every loop for a full time slice;
    // 500 loops keep a round short in debug builds.)
    let rt = cancel_storm("cancel looping fibers", 500, |i| {
        let cede = i % 2 == 0;
        IO::tail_rec(0u64, move |n| {
            let next = IO::pure(ControlFlow::<u64, u64>::Continue(n.wrapping_add(1)));
            if cede {
                IO::cede().product_r(next)
            } else {
                next
            }
        })
    });
    assert_eq!(rt.metrics().live_fibers, 0);
}

#[test]
fn cancels_racing_completions_run_each_finalizer_once_and_on_cancel_only_for_the_canceled() {
    // Each fiber sleeps 0..2 ms then ends; its cancel comes at a moment of
    // its own in the same range: some end first, some are canceled.
    const FIBERS: usize = 20_000;
    let rt = runtime(2);
    let (on_cancel, guarantee) = (counters(FIBERS), counters(FIBERS));
    let (oc, g) = (on_cancel.clone(), guarantee.clone());
    let io = IO::<FiberHandle<usize, E>, E>::traverse((0..FIBERS).collect(), move |i| {
        IO::sleep(Duration::from_micros((i as u64 * 7919) % 2_000))
            .map_to(i)
            .on_cancel(bump(&oc, i))
            .guarantee(bump(&g, i))
            .start()
    })
    .flat_map(|handles| {
        let cancelers: Arc<Vec<CancelHandle>> =
            Arc::new(handles.iter().map(FiberHandle::cancel_handle).collect());
        IO::<(), E>::par_traverse((0..FIBERS).collect(), move |i| {
            let h = cancelers.clone();
            IO::sleep(Duration::from_micros((i as u64 * 104_729) % 2_000))
                .product_r(IO::defer(move || h[i].cancel()))
        })
        .product_r(IO::traverse(handles, |handle| handle.join()))
    });
    let outcomes = within("cancels racing completions", HANG_LIMIT, move || {
        rt.block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds")
    });
    assert_each_once("guarantee", &guarantee);
    for (i, outcome) in outcomes.iter().enumerate() {
        let canceled = on_cancel[i].load(Ordering::SeqCst);
        match outcome {
            Outcome::Succeeded(v) => {
                assert_eq!(*v, i);
                assert_eq!(canceled, 0, "fiber {i} succeeded: no on_cancel");
            }
            Outcome::Canceled => assert_eq!(canceled, 1, "fiber {i} canceled: on_cancel once"),
            other => panic!("fiber {i}: unexpected {other:?}"),
        }
    }
}

#[test]
fn fibers_canceled_inside_uncancelable_regions_finish_the_region_then_finalize_once() {
    // Each region takes 200 ms; the cancels are requested as soon as every
    // fiber is inside, so nearly all land in the region. Fiber by fiber: the
    // region ran to its end, the finalizer once, and the step after the
    // region ran exactly when the fiber was not canceled.
    const FIBERS: usize = 2_000;
    let rt = runtime(2);
    let (region_done, after_region, guarantee) =
        (counters(FIBERS), counters(FIBERS), counters(FIBERS));
    let ready = CountDownLatch::new(FIBERS as u64).expect("valid");
    let (rd, a, g, r) = (
        region_done.clone(),
        after_region.clone(),
        guarantee.clone(),
        ready.clone(),
    );
    let io = IO::<FiberHandle<(), E>, E>::traverse((0..FIBERS).collect(), move |i| {
        let (rd, r) = (rd.clone(), r.clone());
        IO::<(), E>::uncancelable(move |_| {
            r.release()
                .product_r(IO::sleep(Duration::from_millis(200)))
                .product_r(bump(&rd, i))
        })
        .product_r(bump(&a, i))
        .guarantee(bump(&g, i))
        .start()
    })
    .flat_map(move |handles| ready.wait().product_r(cancel_all_from_many_fibers(handles)));
    let outcomes = within("cancel uncancelable regions", HANG_LIMIT, move || {
        rt.block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds")
    });
    assert_each_once("the uncancelable region", &region_done);
    assert_each_once("guarantee", &guarantee);
    let mut canceled = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        let after = after_region[i].load(Ordering::SeqCst);
        match outcome {
            Outcome::Canceled => {
                canceled += 1;
                assert_eq!(after, 0, "fiber {i} was canceled: nothing after the region");
            }
            Outcome::Succeeded(()) => assert_eq!(after, 1, "fiber {i} succeeded"),
            other => panic!("fiber {i}: unexpected {other:?}"),
        }
    }
    assert!(canceled > 0, "the cancels landed inside the regions");
}

#[test]
fn a_both_canceled_as_its_first_side_completes_leaves_no_side_running() {
    const ROUNDS: usize = 20_000;
    let rt = runtime(2);
    let (started, finalized) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    for round in 0..ROUNDS {
        let (s, f) = (started.clone(), finalized.clone());
        let left_done = Arc::new(AtomicBool::new(false));
        let l = left_done.clone();
        let left: IO<u32, E> = IO::cede().product_r(IO::delay(move || {
            l.store(true, Ordering::SeqCst);
            1
        }));
        let right: IO<u32, E> = IO::delay(move || {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .product_r(IO::never())
        .on_cancel(IO::delay(move || {
            f.fetch_add(1, Ordering::SeqCst);
        }));
        // Cancel the caller as soon as the left side is done.
        let io: IO<Outcome<(u32, u32), E>, E> = left.both(right).start().flat_map(move |h| {
            IO::<(), E>::tail_rec((), move |()| {
                let done = left_done.load(Ordering::SeqCst);
                IO::cede().map_to(if done {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            })
            .product_r(h.cancel())
            .product_r(h.join())
        });
        assert_eq!(
            rt.block_on(io).expect("runs"),
            Outcome::Succeeded(Outcome::Canceled)
        );
        // `cancel` returned: the right side, if it started, was finalized.
        assert_eq!(
            started.load(Ordering::SeqCst),
            finalized.load(Ordering::SeqCst),
            "round {round}: a right side is left running"
        );
    }
}

#[test]
fn a_waiter_canceled_as_its_permit_arrives_ends_canceled_only_without_the_permit() {
    const ROUNDS: usize = 20_000;
    let rt = runtime(2);
    for round in 0..ROUNDS {
        let sem = spindle_core::Semaphore::new(1).expect("valid");
        let (w, counted, releaser) = (sem.clone(), sem.clone(), sem.clone());
        let io: IO<Outcome<(), E>, E> =
            sem.acquire()
                .product_r(w.acquire().start())
                .flat_map(move |h| {
                    IO::<(), E>::tail_rec((), move |()| {
                        let waiting = counted.waiting() == 1;
                        IO::cede().map_to(if waiting {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        })
                    })
                    .product_r(releaser.release())
                    .product_r(h.cancel())
                    .product_r(h.join())
                });
        let outcome = rt
            .block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds");
        let held_by_waiter = u64::from(outcome.is_succeeded());
        assert_eq!(
            sem.available() + held_by_waiter,
            1,
            "round {round}: {outcome:?}"
        );
    }
}
