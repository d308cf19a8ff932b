//! The quick-start program on the single-threaded executor, run with
//! `block_on`, printing its outcome.
//!
//! ```text
//! cargo run --release --example single_thread
//! ```

use std::time::Duration;

use exec_single::SingleThreaded;
use io_core::IO;

/// Fetches a "price" on another thread and resumes the fiber with it.
fn fetch_price(item: &'static str) -> IO<u64, String> {
    IO::async_(move |callback| {
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

fn main() {
    let order = vec!["tea", "cake", "scone"];
    let program: IO<String, String> = IO::traverse(order, |item| {
        fetch_price(item).handle_error_with(move |e| {
            IO::delay(move || println!("  ({e}; counting {item} as free)")).as_(0)
        })
    })
    .flat_map(|prices| IO::sleep(Duration::from_millis(10)).as_(prices.iter().sum::<u64>()))
    .map(|total| format!("total: {total}"));

    let started = std::time::Instant::now();
    let outcome = SingleThreaded::new().block_on(program);
    println!("{outcome} in {:?}", started.elapsed());
}
