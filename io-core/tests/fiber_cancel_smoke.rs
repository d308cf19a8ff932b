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
