//! Stress: a fiber canceled at every point of nested bracket / uncancelable
//! / poll / async regions releases every resource it acquired exactly once,
//! and leaves nothing behind (no timer, no waiting fiber).
//!
//! Runs on virtual time (`TestControl`): each program is canceled at every
//! millisecond of its run, so every suspension point is hit, and the whole
//! run is deterministic. The program shapes come from a small fixed-seed
//! generator.

mod common;

use common::Counter;
use spindle_core::{Callback, IO, Outcome, UIO};
use spindle_exec_single::testkit::TestControl;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type E = String;

/// How many program shapes; each is canceled at every millisecond.
const SHAPES: u64 = if cfg!(miri) { 3 } else { 700 };

/// A tiny deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One level of nesting.
#[derive(Debug, Clone, Copy)]
struct Level {
    acquire_ms: u64,
    masked_before_ms: u64,
    masked_after_ms: u64,
    release_ms: u64,
    /// Whether the level's use waits in an `from_callback` (completed by a sibling
    /// fiber) instead of sleeping.
    use_async: bool,
}

#[derive(Clone, Default)]
struct Counts {
    acquired: Counter,
    released: Counter,
    async_finalized: Counter,
}

/// The program of `levels[0]` and, inside its poll, the rest.
fn nested(levels: &[Level], counts: &[Counts]) -> IO<u32, E> {
    let Some((level, inner_levels)) = levels.split_first() else {
        return IO::pure(0);
    };
    let (level, c) = (*level, counts[0].clone());
    let inner = nested(inner_levels, &counts[1..]);
    let (acquired, released) = (c.acquired.clone(), c.released.clone());
    let innermost: IO<u32, E> = if level.use_async {
        // An async wait completed 2 ms later by a sibling fiber; its
        // finalizer counts cancellations while suspended.
        let slot: Arc<Mutex<Option<Callback<u32, E>>>> = Arc::new(Mutex::new(None));
        let (parked, completer) = (slot.clone(), slot);
        let finalized = c.async_finalized.clone();
        let wait = IO::from_callback(move |cb| {
            *parked.lock().unwrap() = Some(cb);
            Some(finalized.incr_io())
        });
        UIO::sleep(Duration::from_millis(2))
            .product_r(IO::delay(move || {
                if let Some(cb) = completer.lock().unwrap().take() {
                    cb.succeed(1);
                }
            }))
            .start()
            .flat_map(move |sibling| wait.guarantee(sibling.cancel()))
            .flat_map(move |v| inner.map(move |w| v + w))
    } else {
        inner.map(|w| w + 1)
    };
    IO::bracket(
        IO::sleep(Duration::from_millis(level.acquire_ms))
            .product_r(IO::delay(move || acquired.incr())),
        move |_| {
            IO::uncancelable(move |poll| {
                IO::sleep(Duration::from_millis(level.masked_before_ms))
                    .product_r(poll.apply(innermost))
                    .flat_map(move |v| {
                        IO::sleep(Duration::from_millis(level.masked_after_ms)).map_to(v)
                    })
            })
        },
        move |_| {
            IO::sleep(Duration::from_millis(level.release_ms)).product_r(IO::delay(move || {
                released.incr();
            }))
        },
    )
}

fn random_levels(rng: &mut Rng) -> Vec<Level> {
    let depth = 1 + rng.below(3) as usize;
    (0..depth)
        .map(|_| Level {
            acquire_ms: rng.below(3),
            masked_before_ms: rng.below(3),
            masked_after_ms: rng.below(3),
            release_ms: rng.below(3),
            use_async: rng.below(2) == 0,
        })
        .collect()
}

#[test]
fn a_fiber_canceled_at_any_point_of_nested_regions_releases_every_acquired_resource_once() {
    let mut rng = Rng(0x5EED);
    let mut runs = 0u64;
    for _ in 0..SHAPES {
        let levels = random_levels(&mut rng);
        // Generous upper bound of the uncanceled run time.
        let horizon: u64 = levels
            .iter()
            .map(|l| l.acquire_ms + l.masked_before_ms + l.masked_after_ms + l.release_ms + 2)
            .sum::<u64>()
            + 2;
        for cancel_at in 0..=horizon {
            let counts: Vec<Counts> = levels.iter().map(|_| Counts::default()).collect();
            let child = nested(&levels, &counts);
            let program: IO<Outcome<u32, E>, E> = child.start().flat_map(move |h| {
                IO::sleep(Duration::from_millis(cancel_at))
                    .product_r(h.cancel())
                    .product_r(h.join())
            });
            let mut control = TestControl::execute(program);
            control.tick_all();
            let context = format!("{levels:?} canceled at {cancel_at} ms");
            let outcome = control
                .take_results()
                .unwrap_or_else(|| panic!("the parent never finished: {context}"));
            let outcome = outcome.succeeded().expect("the parent succeeds");
            assert!(
                outcome.is_canceled() || outcome.is_succeeded(),
                "{outcome:?}: {context}"
            );
            for (i, c) in counts.iter().enumerate() {
                assert!(c.acquired.get() <= 1, "level {i} acquired twice: {context}");
                assert_eq!(
                    c.acquired.get(),
                    c.released.get(),
                    "level {i}: every acquired resource is released exactly once: {context}"
                );
                assert!(c.async_finalized.get() <= 1, "level {i}: {context}");
            }
            if outcome.is_succeeded() {
                assert!(counts.iter().all(|c| c.acquired.get() == 1), "{context}");
            }
            assert_eq!(
                control.next_interval(),
                None,
                "no timer is left behind: {context}"
            );
            runs += 1;
        }
    }
    assert!(runs >= 10 * SHAPES, "{runs} runs");
}
