//! Spindle's fibers in tokio-console.
//!
//! ```text
//! RUSTFLAGS="--cfg tokio_unstable" cargo run -p spindle-tracing --features console --example console -- 60
//! tokio-console            # in another terminal: http://127.0.0.1:6669
//! ```
//!
//! `console_subscriber::init()` is all a program that already uses
//! tokio-console runs; `spindle_tracing::install()` makes Spindle's
//! fibers its tasks: two ticking workers that sleep and wake (every 100 ms
//! and every second, each in a `worker` span), and a fiber that yields a
//! million times (console's self-wakes). The argument
//! is how many seconds to run (default 30). `console-subscriber` insists
//! on tokio's `tokio_unstable` configuration (an assertion of its own;
//! Spindle does not need it), hence the `RUSTFLAGS`.

use std::ops::ControlFlow;
use std::time::Duration;

use spindle_core::{IO, IORuntime, cede, sleep};
use spindle_tracing::Instrument;

type E = String;

/// A worker that wakes every `period` for `ticks` ticks.
fn ticker(name: &'static str, period: Duration, ticks: u32) -> IO<(), E> {
    IO::tail_rec(0u32, move |tick| {
        sleep(period).map(move |()| {
            tracing::info!(worker = name, tick, "tick");
            if tick + 1 >= ticks {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(tick + 1)
            }
        })
    })
    .instrument(tracing::info_span!("worker", name))
}

fn main() {
    console_subscriber::init();
    spindle_tracing::install().expect("no other fiber observer");
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let ticks = u32::try_from(seconds * 10).unwrap_or(u32::MAX);
    let rt = spindle_exec_wstp::Runtime::new().expect("the pool starts");
    let program = ticker("fast", Duration::from_millis(100), ticks)
        .start::<E>()
        .flat_map(move |fast| {
            ticker("slow", Duration::from_secs(1), ticks / 10)
                .start::<E>()
                .map(move |slow| (fast, slow))
        })
        .flat_map(move |(fast, slow)| {
            // A fiber that yields: console's self-wakes.
            let yielder = IO::tail_rec(0u64, |n| {
                cede::<E>().map(move |()| {
                    if n == 1_000_000 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(n + 1)
                    }
                })
            });
            yielder.start::<E>().flat_map(move |y| {
                fast.join()
                    .product_r(slow.join())
                    .product_r(y.join())
                    .map(|_| ())
            })
        });
    match rt.block_on(program) {
        Ok(outcome) => println!("done: {outcome:?}"),
        Err(e) => eprintln!("could not run: {e}"),
    }
}
