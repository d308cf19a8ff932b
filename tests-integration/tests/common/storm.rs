//! Storms of short timeouts and cancellations, for the progress tests of
//! the data types (`data_queue.rs`, `data_semaphore.rs`,
//! `data_mutex_latch.rs`).
//!
//! Many fibers each run an operation again and again until a window of
//! real time has passed. Each run is under a random timeout of 0 to
//! [`TIMEOUT_MICROS`] (`IO::timeout_option`: on 64-bit hosts the operation
//! runs in a deadline region of the fiber's own, ended at the deadline
//! wherever it is cancelable, its finalizers run), and one run in eight is started as a
//! fiber of its own and canceled after 0 to 3 cedes. With enough fibers, a
//! fiber that a data type wakes is often canceled before it runs: the
//! situation in which a data type that reserves an element, a place or a
//! permit for the fiber it wakes stops serving the fibers that do run (a
//! queue completed a few hundred operations a second there, against tens
//! of thousands now). The tests count what completed and assert a minimum
//! that the old crawl stays far below, and that a loaded machine running
//! a debug build still passes many times over.
//!
//! The timeouts and the window are real time, so a build that runs
//! everything several times slower (AddressSanitizer's) would see most
//! runs time out before the operation itself is done, and count a crawl
//! that says nothing about the data type. Such a build sets
//! `SPINDLE_TEST_TIME_SCALE` (an integer from 1 to 100; `.ci/asan` sets
//! it): both the timeouts and the window are stretched by it, so the same
//! minimum counts are asked of the same storm, slowed down as a whole.

use spindle_core::IO;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The longest timeout of a run of the operation, in microseconds, before
/// [`time_scale`] stretches it.
pub const TIMEOUT_MICROS: u64 = 2_000;

/// How many times slower this build runs the storms' operations:
/// `SPINDLE_TEST_TIME_SCALE`, 1 when unset (module doc).
///
/// # Panics
///
/// If the variable is set but not an integer from 1 to 100 (a test
/// harness's configuration error).
pub fn time_scale() -> u32 {
    match std::env::var("SPINDLE_TEST_TIME_SCALE") {
        Err(_) => 1,
        Ok(text) => match text.parse::<u32>() {
            Ok(scale @ 1..=100) => scale,
            _ => panic!("SPINDLE_TEST_TIME_SCALE must be an integer from 1 to 100, not {text:?}"),
        },
    }
}

/// The real time a storm lasts: a second, stretched by [`time_scale`]
/// (then each fiber ends after its current run, within a few
/// milliseconds).
pub fn window() -> Duration {
    Duration::from_millis(1_000) * time_scale()
}

/// A small deterministic generator (xorshift64), one per fiber.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of fiber `n` (any `n`).
    pub fn new(n: u64) -> Self {
        Rng(0x9E37_79B9_7F4A_7C15 ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1)
    }

    /// The next random word.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `fibers` fibers, each running `op(fiber, random)` again and again, each
/// run under a random timeout and one in eight canceled at random (module
/// doc), until [`window`] has passed; ends once every fiber has ended.
/// What a run did, it records itself (inside its own program, so that a
/// record is made exactly when the operation completed).
pub fn storm<E, F>(fibers: u64, op: F) -> IO<(), E>
where
    E: Send + 'static,
    F: Fn(u64, u64) -> IO<(), E> + Send + Sync + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let op = Arc::new(op);
    let longest = TIMEOUT_MICROS * u64::from(time_scale());
    let workers = {
        let stop = stop.clone();
        IO::par_traverse((0..fibers).collect(), move |fiber| {
            let (stop, op) = (stop.clone(), op.clone());
            let mut rng = Rng::new(fiber);
            IO::tail_rec((), move |()| {
                if stop.load(Ordering::Relaxed) {
                    return IO::pure(ControlFlow::Break(()));
                }
                let r = rng.next();
                let timeout = Duration::from_micros(r % (longest + 1));
                let run = op(fiber, rng.next()).timeout_option(timeout).void();
                let run = match (r >> 20) % 8 {
                    0 => canceled_after((r >> 24) % 4, run),
                    _ => run,
                };
                run.map(|()| ControlFlow::Continue(()))
            })
        })
    };
    let timer = IO::<(), E>::sleep(window())
        .product_r(IO::delay(move || stop.store(true, Ordering::Relaxed)));
    timer
        .start()
        .flat_map(move |timer| workers.product_r(timer.join_void()))
}

/// `io` as a fiber of its own, canceled after `cedes` turns of its starter
/// (a no-op if it completed by then), and joined.
fn canceled_after<E: Send + 'static>(cedes: u64, io: IO<(), E>) -> IO<(), E> {
    io.start().flat_map(move |h| {
        IO::traverse((0..cedes).collect(), |_| IO::cede())
            .product_r(h.cancel())
            .product_r(h.join_void())
    })
}
