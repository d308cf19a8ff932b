//! `IO::blocking` on the work-stealing pool: blocking calls run on the
//! blocking threads, never on a worker, so compute fibers keep running on
//! time; a panic in a call ends only its fiber; calls beyond the thread cap
//! wait their turn; a fiber canceled during a call waits for it, then
//! finalizes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{HANG_LIMIT, runtime, within};
use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_wstp::Runtime;

type E = String;

/// Counts the calls running at once, and the most seen.
#[derive(Clone, Default)]
struct Running {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Running {
    /// A blocking call that sleeps `pause` on its thread.
    fn sleeping_call(&self, pause: Duration) -> IO<usize, E> {
        let running = self.clone();
        IO::blocking(move || {
            let n = running.now.fetch_add(1, Ordering::SeqCst) + 1;
            running.peak.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(pause);
            running.now.fetch_sub(1, Ordering::SeqCst);
            1
        })
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

#[test]
fn a_thousand_sleeping_blocking_calls_do_not_keep_a_ticking_fiber_from_its_ticks() {
    const CALLS: usize = 1_000;
    const TICK: Duration = Duration::from_millis(10);
    let rt = runtime(2);
    let running = Running::default();
    let done = Arc::new(AtomicBool::new(false));
    // The ticker sleeps 10 ms at a time until the calls are done, and keeps
    // the longest time between two of its ticks.
    let d = done.clone();
    let ticker: IO<(Duration, usize), E> = IO::tail_rec(
        (Instant::now(), Duration::ZERO, 0usize),
        move |(last, max_gap, ticks)| {
            let d = d.clone();
            IO::sleep(TICK).map(move |()| {
                let now = Instant::now();
                let max_gap = max_gap.max(now - last);
                if d.load(Ordering::SeqCst) {
                    std::ops::ControlFlow::Break((max_gap, ticks + 1))
                } else {
                    std::ops::ControlFlow::Continue((now, max_gap, ticks + 1))
                }
            })
        },
    );
    let r = running.clone();
    let calls = IO::<usize, E>::par_traverse((0..CALLS).collect(), move |_| r.sleeping_call(TICK))
        .map(|ones| ones.into_iter().sum::<usize>())
        .guarantee(IO::delay(move || done.store(true, Ordering::SeqCst)));
    let ((max_gap, ticks), finished) =
        within("blocking calls and a ticker", HANG_LIMIT, move || {
            rt.block_on(ticker.both(calls))
                .expect("runs")
                .succeeded()
                .expect("succeeds")
        });
    assert_eq!(finished, CALLS, "every blocking call finished");
    assert!(ticks >= 1);
    // On the two workers, 1,000 calls of 10 ms would stall them for about
    // 5 s; on the blocking threads they never stop the ticker for long.
    assert!(
        max_gap < Duration::from_millis(200),
        "the ticker stalled for {max_gap:?} ({ticks} ticks)"
    );
    assert!(
        running.peak() > 2,
        "the calls ran side by side beyond the two workers (peak {})",
        running.peak()
    );
}

#[test]
fn a_panic_inside_blocking_ends_its_fiber_with_panicked_and_the_pool_stays_usable() {
    let rt = runtime(2);
    let outcome = rt
        .block_on(IO::<u32, E>::blocking(|| panic!("boom in a blocking call")))
        .expect("runs");
    match outcome {
        Outcome::Panicked(p) => assert!(p.message().contains("boom in a blocking call"), "{p:?}"),
        other => panic!("expected Panicked, got {other:?}"),
    }
    // The blocking pool and the workers still run programs.
    assert_eq!(
        rt.block_on(IO::<u32, E>::blocking(|| 7)).expect("runs"),
        Outcome::Succeeded(7)
    );
    let both = IO::<u32, E>::blocking(|| 1).both(IO::delay(|| 2));
    assert_eq!(rt.block_on(both).expect("runs"), Outcome::Succeeded((1, 2)));
    // A panic in one of many calls fails the traversal and nothing else.
    let many = IO::<u32, E>::par_traverse((0..20u32).collect(), |i| {
        IO::blocking(move || if i == 13 { panic!("call 13") } else { i })
    });
    assert!(rt.block_on(many).expect("runs").is_panicked());
    assert_eq!(
        rt.block_on(IO::<u32, E>::blocking(|| 8)).expect("runs"),
        Outcome::Succeeded(8)
    );
}

#[test]
fn try_blocking_raises_the_error_of_its_call() {
    let rt = runtime(2);
    let failing = IO::<u32, E>::try_blocking(|| Err("disk on fire".to_string()));
    assert_eq!(
        rt.block_on(failing.attempt()).expect("runs"),
        Outcome::Succeeded(Err("disk on fire".to_string()))
    );
    assert_eq!(
        rt.block_on(IO::<u32, E>::try_blocking(|| Ok(3)))
            .expect("runs"),
        Outcome::Succeeded(3)
    );
}

#[test]
fn blocking_calls_beyond_the_thread_cap_wait_their_turn_and_all_finish() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .max_blocking_threads(3)
        .build()
        .expect("build");
    let running = Running::default();
    let r = running.clone();
    let io = IO::<usize, E>::par_traverse((0..30).collect(), move |_| {
        r.sleeping_call(Duration::from_millis(2))
    })
    .map(|ones| ones.into_iter().sum::<usize>());
    let finished = within("capped blocking calls", HANG_LIMIT, move || {
        let finished = rt.block_on(io).expect("runs");
        let metrics = rt.metrics();
        assert!(metrics.blocking_threads <= 3, "{metrics}");
        assert_eq!(metrics.blocking_queue_len, 0, "{metrics}");
        finished
    });
    assert_eq!(finished, Outcome::Succeeded(30));
    assert!(
        running.peak() <= 3,
        "at most 3 calls at once, saw {}",
        running.peak()
    );
}

#[test]
fn a_fiber_canceled_during_a_blocking_call_waits_for_the_call_then_finalizes() {
    let rt = runtime(2);
    let (entered, returned) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let finalized_after_return = Arc::new(AtomicUsize::new(0));
    let (e, r, r2, f) = (
        entered.clone(),
        returned.clone(),
        returned.clone(),
        finalized_after_return.clone(),
    );
    let call = IO::<(), E>::blocking(move || {
        e.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        r.store(true, Ordering::SeqCst);
    })
    .on_cancel(IO::delay(move || {
        if r2.load(Ordering::SeqCst) {
            f.fetch_add(1, Ordering::SeqCst);
        }
    }));
    let io: IO<(Outcome<(), E>, bool), E> = call.start().flat_map(move |h| {
        let entered = entered.clone();
        // Wait (ceding) until the call runs on its blocking thread.
        IO::<(), E>::tail_rec((), move |()| {
            let inside = entered.load(Ordering::SeqCst);
            IO::cede().map_to(if inside {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            })
        })
        .product_r(h.cancel())
        .map(move |()| returned.load(Ordering::SeqCst))
        .flat_map(move |returned_before_cancel_returned| {
            h.join().map(move |o| (o, returned_before_cancel_returned))
        })
    });
    let (outcome, returned_first) = within("cancel during blocking", HANG_LIMIT, move || {
        rt.block_on(io)
            .expect("runs")
            .succeeded()
            .expect("succeeds")
    });
    assert_eq!(outcome, Outcome::Canceled);
    assert!(
        returned_first,
        "cancel returned only after the call had returned"
    );
    assert_eq!(
        finalized_after_return.load(Ordering::SeqCst),
        1,
        "finalized once, after the call"
    );
}
