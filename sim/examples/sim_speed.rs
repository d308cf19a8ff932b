//! How many simulated fiber steps per second the simulator runs: a
//! program of eight fibers that update a shared `Ref`, cede and sleep,
//! over many seeds, with the uniform and the PCT strategies. Run it by
//! hand in a release build:
//!
//! ```text
//! cargo run --release -p spindle-sim --example sim_speed
//! ```
//!
//! (A timed example, not a test: the number depends on the machine.)

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use spindle_effect::prelude::*;
use spindle_effect::{Ref, TracingMode};
use spindle_sim::{Sim, Strategy};

/// Eight fibers, each 50 rounds of an update, a cede and (every tenth
/// round) a 1 ms sleep.
fn program() -> IO<u64, ()> {
    let total = Ref::new(0u64);
    let fibers: Vec<IO<(), ()>> = (0..8)
        .map(|_| {
            let t = total.clone();
            IO::tail_rec(0u32, move |i| {
                if i == 50 {
                    return IO::pure(ControlFlow::Break(()));
                }
                let pause = if i % 10 == 0 {
                    IO::sleep(Duration::from_millis(1))
                } else {
                    IO::cede()
                };
                t.update(|n| *n += 1)
                    .product_r(pause)
                    .map_to(ControlFlow::Continue(i + 1))
            })
        })
        .collect();
    IO::par_sequence(fibers).product_r(total.get())
}

fn main() {
    let seeds = 2_000;
    for (name, strategy, tracing) in [
        ("random, tracing off", Strategy::Random, TracingMode::None),
        ("pct, tracing off", Strategy::pct(), TracingMode::None),
        (
            "random, tracing cached",
            Strategy::Random,
            TracingMode::Cached,
        ),
    ] {
        let sim = Sim::builder()
            .seeds(0..seeds)
            .strategy(strategy)
            .tracing(tracing)
            .build()
            .expect("valid settings");
        let start = Instant::now();
        let summary = sim.check(|_| program()).expect("the program is correct");
        let elapsed = start.elapsed();
        println!(
            "{name}: {} seeds, {} steps in {:.2?}: {:.2} million steps/s, {:.0} seeds/s",
            summary.seeds,
            summary.steps,
            elapsed,
            summary.steps as f64 / elapsed.as_secs_f64() / 1e6,
            summary.seeds as f64 / elapsed.as_secs_f64()
        );
    }
}
