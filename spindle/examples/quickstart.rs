//! The README's first command: a small Spindle program run as an
//! application on the default executor (the work-stealing pool), printing
//! its result.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

use spindle_effect::prelude::*;
use spindle_effect::{app, wstp::Runtime};

/// Fetches a "price" on another thread and resumes the fiber with it.
fn fetch_price(item: &'static str) -> IO<u64, String> {
    IO::from_callback(move |callback| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            match item {
                "tea" => callback.succeed(3),
                "cake" => callback.succeed(4),
                other => callback.fail(format!("no price for {other}")),
            };
        });
        None
    })
}

fn main() -> ExitCode {
    let started = Instant::now();
    let order = vec!["tea", "cake", "scone"];
    // The prices are fetched in parallel, one fiber each; a missing price
    // is handled as an error value and counted as free.
    let program: IO<(), String> = IO::par_traverse(order, |item| {
        fetch_price(item).handle_error_with(move |e| {
            IO::delay(move || println!("  ({e}; counting {item} as free)")).map_to(0)
        })
    })
    .flat_map(|prices| IO::sleep(Duration::from_millis(10)).map_to(prices.iter().sum::<u64>()))
    .flat_map(move |total| {
        IO::delay(move || println!("total: {total} in {:?}", started.elapsed()))
    });
    // The entry point of every executor: exit code from the outcome,
    // Ctrl-C cancels the program so its finalizers run.
    app::run(Runtime::from_env(), program)
}
