//! Timers: a port of Cats Effect's `SleepBenchmark` (JMH, `benchmarks/` in
//! typelevel/cats-effect), same shape, size 10,000.
//!
//! **Sleep.sleep** starts 10,000 fibers, then joins them in order and sums
//! their results. The fiber started with `i` runs a body of three 1 ns
//! sleeps (`sleep; j = delay(i); sleep; if j > 1000 { sleep; pure(j) } else
//! { sleep; loop(j + 1) }`), so fibers started at or below 1000 loop up to
//! 1001 and the others run the body once: 1,534,503 sleeps in all, 3,006
//! of them one after another on the longest fiber. It measures setting,
//! firing and resuming timers among many fibers. One operation is the whole
//! program; throughput is declared in sleeps (elements/s = sleeps per
//! second), the `size` is the number of fibers.
//!
//! A 1 ns sleep is due as soon as it is set. Spindle's timers are exact
//! (a deadline on the executor's monotonic clock, fired on the next turn
//! of the loop), so on Spindle nothing waits. tokio's timer wheel has a
//! resolution of 1 ms: on a real clock each of the 3,006 sequential sleeps
//! would wait for the next millisecond tick, about 3 s per operation,
//! measuring the tick and not the runtime. The tokio reference therefore
//! runs on a **paused clock** (`start_paused`, tokio's `test-util`
//! feature): when no task can run, the runtime moves the clock to the next
//! deadline at once. Its timers still go through the wheel (insert, expire,
//! wake), as on a real clock; only the waiting is gone.
//!
//! The tokio side spawns 10,000 tasks running the same body as a loop, on
//! a current-thread runtime with time enabled, and awaits their
//! `JoinHandle`s in order.
//!
//! Each operation takes a large fraction of a second, so this group takes
//! 10 samples (criterion's minimum) instead of the suite's 30.
//!
//! Run with:
//!
//! ```text
//! cargo bench -p benches --bench sleep
//! ```

use std::convert::Infallible;
use std::time::Duration;

use benches::{SLEEP_FIBERS, SLEEP_LOOP_UNTIL, sleep_totals, succeeded};
use criterion::{Criterion, criterion_group, criterion_main};
use io_core::IO;

mod common;
mod groups;

use groups::{compare_on, paused_clock_runtime};

/// Cats Effect's `1.nanosecond`.
const NANO: Duration = Duration::from_nanos(1);

/// The Spindle program.
mod spindle {
    use super::*;

    type Io<A> = IO<A, Infallible>;

    fn nap() -> Io<()> {
        IO::sleep(NANO)
    }

    fn fiber(i: i32) -> Io<i32> {
        nap().flat_map(move |()| {
            IO::delay(move || i).flat_map(|j| {
                nap().flat_map(move |()| {
                    if j > SLEEP_LOOP_UNTIL {
                        nap().flat_map(move |()| IO::pure(j))
                    } else {
                        nap().flat_map(move |()| fiber(j + 1))
                    }
                })
            })
        })
    }

    pub fn sleep() -> Io<i64> {
        IO::traverse((0..SLEEP_FIBERS).collect(), |i| fiber(i).start())
            .flat_map(|fibers| IO::traverse(fibers, |fiber| fiber.join_with_never()))
            .map(|results| results.into_iter().map(i64::from).sum())
    }
}

/// The same program in `async` Rust, for tokio.
mod tokio_ref {
    use tokio::time::sleep;

    use super::{NANO, SLEEP_FIBERS, SLEEP_LOOP_UNTIL};
    use crate::common::delay;

    async fn fiber(i: i32) -> i32 {
        let mut next = i;
        loop {
            sleep(NANO).await;
            let j = delay(move || next);
            sleep(NANO).await;
            if j > SLEEP_LOOP_UNTIL {
                sleep(NANO).await;
                return j;
            }
            sleep(NANO).await;
            next = j + 1;
        }
    }

    pub async fn sleep_benchmark() -> i64 {
        let handles: Vec<_> = (0..SLEEP_FIBERS).map(|i| tokio::spawn(fiber(i))).collect();
        let mut sum = 0;
        for handle in handles {
            sum += i64::from(handle.await.expect("the fiber ran"));
        }
        sum
    }
}

fn sleep(c: &mut Criterion) {
    let (sleeps, sum) = sleep_totals(SLEEP_FIBERS);
    compare_on(
        c,
        "Sleep.sleep",
        SLEEP_FIBERS as u64,
        sleeps,
        10,
        sum,
        |rt| succeeded(rt.block_on(spindle::sleep())),
        paused_clock_runtime(),
        |rt| rt.block_on(tokio_ref::sleep_benchmark()),
    );
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = sleep
}
criterion_main!(benches);
