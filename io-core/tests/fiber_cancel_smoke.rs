//! Smoke tests of start/join/cancel, masking and finalizers (exec-single).
use exec_single::SingleThreaded;
use io_core::{IO, Outcome};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn log() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}
fn push(l: &Arc<Mutex<Vec<String>>>, s: &str) -> IO<(), String> {
    let l = l.clone();
    let s = s.to_string();
    IO::delay(move || l.lock().unwrap().push(s))
}

#[test]
fn start_then_join_returns_the_childs_outcome() {
    let io: IO<Outcome<u32, String>, String> =
        IO::<u32, String>::pure(7).start().flat_map(|h| h.join());
    assert_eq!(
        SingleThreaded::new().block_on(io),
        Outcome::Succeeded(Outcome::Succeeded(7))
    );
}

#[test]
fn canceling_a_sleeping_fiber_runs_its_finalizers_in_reverse_order_before_cancel_returns() {
    let l = log();
    let child = IO::<(), String>::sleep(Duration::from_secs(3600))
        .on_cancel(push(&l, "inner"))
        .guarantee_case({
            let l = l.clone();
            move |o| {
                push(
                    &l,
                    &format!(
                        "guarantee {}",
                        if o.is_canceled() { "canceled" } else { "other" }
                    ),
                )
            }
        });
    let l2 = l.clone();
    let io: IO<Outcome<(), String>, String> = child.start().flat_map(move |h| {
        IO::<(), String>::sleep(Duration::from_millis(5))
            .product_r(h.cancel())
            .product_r(push(&l2, "after cancel"))
            .product_r(h.join())
    });
    let out = SingleThreaded::new().block_on(io);
    assert_eq!(out, Outcome::Succeeded(Outcome::Canceled));
    assert_eq!(
        *l.lock().unwrap(),
        ["inner", "guarantee canceled", "after cancel"]
    );
}

#[test]
fn uncancelable_masks_until_poll() {
    let l = log();
    let l2 = l.clone();
    let body = IO::<(), String>::uncancelable(move |poll| {
        IO::<(), String>::sleep(Duration::from_millis(20))
            .product_r(push(&l2, "masked sleep done"))
            .product_r(poll.apply(IO::<(), String>::sleep(Duration::from_secs(3600))))
            .product_r(push(&l2, "never"))
    });
    let io: IO<Outcome<(), String>, String> = body.start().flat_map(|h| {
        IO::<(), String>::sleep(Duration::from_millis(1))
            .product_r(h.cancel())
            .product_r(h.join())
    });
    assert_eq!(
        SingleThreaded::new().block_on(io),
        Outcome::Succeeded(Outcome::Canceled)
    );
    assert_eq!(*l.lock().unwrap(), ["masked sleep done"]);
}

#[test]
fn bracket_releases_on_success_error_cancel_and_panic() {
    for case in 0..4 {
        let l = log();
        let (la, lr) = (l.clone(), l.clone());
        let io: IO<u32, String> = IO::bracket(
            push(&la, "acquire").as_(1u32),
            move |_r: &u32| match case {
                0 => IO::pure(5),
                1 => IO::raise_error("boom".to_string()),
                2 => IO::canceled().as_(0),
                _ => IO::delay(|| -> u32 { panic!("bad") }),
            },
            move |_r| push(&lr, "release"),
        );
        let out = SingleThreaded::new().block_on(io);
        match case {
            0 => assert_eq!(out, Outcome::Succeeded(5)),
            1 => assert_eq!(out, Outcome::Errored("boom".into())),
            2 => assert!(out.is_canceled()),
            _ => assert!(out.is_panicked()),
        }
        assert_eq!(*l.lock().unwrap(), ["acquire", "release"], "case {case}");
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Err2 {
    Timeout,
    Boom,
}
impl From<io_core::TimeoutError> for Err2 {
    fn from(_: io_core::TimeoutError) -> Self {
        Err2::Timeout
    }
}

#[test]
fn race_cancels_the_loser_and_runs_its_finalizers_before_returning() {
    let l = Arc::new(Mutex::new(Vec::<String>::new()));
    let l1 = l.clone();
    let slow = IO::<(), Err2>::sleep(Duration::from_secs(3600))
        .as_(1)
        .on_cancel(IO::delay(move || {
            l1.lock().unwrap().push("slow finalized".into())
        }));
    let fast = IO::<(), Err2>::sleep(Duration::from_millis(1)).as_(2);
    let l2 = l.clone();
    let io = slow.race(fast).flat_map(move |w| {
        IO::delay(move || {
            l2.lock().unwrap().push("race returned".into());
            w
        })
    });
    assert_eq!(
        SingleThreaded::new().block_on(io),
        Outcome::Succeeded(io_core::Either::Right(2))
    );
    assert_eq!(*l.lock().unwrap(), ["slow finalized", "race returned"]);
}

#[test]
fn both_fails_fast_and_cancels_the_other_side() {
    let l = Arc::new(Mutex::new(Vec::<String>::new()));
    let l1 = l.clone();
    let slow = IO::<(), Err2>::sleep(Duration::from_secs(3600))
        .as_(1)
        .on_cancel(IO::delay(move || {
            l1.lock().unwrap().push("canceled".into())
        }));
    let failing = IO::<(), Err2>::sleep(Duration::from_millis(1))
        .product_r(IO::<u32, Err2>::raise_error(Err2::Boom));
    let out = SingleThreaded::new().block_on(slow.both(failing));
    assert_eq!(out, Outcome::Errored(Err2::Boom));
    assert_eq!(*l.lock().unwrap(), ["canceled"]);
    let ok = IO::<u32, Err2>::pure(1).both(IO::<(), Err2>::sleep(Duration::from_millis(2)).as_(2));
    assert_eq!(
        SingleThreaded::new().block_on(ok),
        Outcome::Succeeded((1, 2))
    );
}

#[test]
fn timeout_errors_and_cancels_the_timed_out_program() {
    let l = Arc::new(Mutex::new(Vec::<String>::new()));
    let l1 = l.clone();
    let io = IO::<u32, Err2>::never()
        .on_cancel(IO::delay(move || {
            l1.lock().unwrap().push("finalized".into())
        }))
        .timeout(Duration::from_millis(5));
    assert_eq!(
        SingleThreaded::new().block_on(io),
        Outcome::Errored(Err2::Timeout)
    );
    assert_eq!(*l.lock().unwrap(), ["finalized"]);
}

#[test]
fn par_traverse_keeps_order_and_par_traverse_n_bounds_concurrency() {
    let io = IO::<u64, Err2>::par_traverse((0..50u64).collect(), |i| {
        IO::<(), Err2>::sleep(Duration::from_micros(50 - i)).as_(i * 2)
    });
    assert_eq!(
        SingleThreaded::new().block_on(io).succeeded(),
        Some((0..50u64).map(|i| i * 2).collect())
    );
    assert!(IO::<u64, Err2>::par_traverse_n(0, vec![1u64], IO::pure).is_err());
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let io = IO::<(), Err2>::par_traverse_n(3, (0..20u64).collect(), move |_| {
        let (r1, r2, p) = (r.clone(), r.clone(), p.clone());
        IO::delay(move || {
            let now = r1.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            p.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
        })
        .product_r(IO::sleep(Duration::from_micros(200)))
        .product_r(IO::delay(move || {
            r2.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }))
    })
    .unwrap();
    assert!(SingleThreaded::new().block_on(io).is_succeeded());
    assert_eq!(peak.load(std::sync::atomic::Ordering::SeqCst), 3);
}
