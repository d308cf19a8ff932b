//! Fiber tracing, shown on the program of Cats Effect's "Fiber tracing"
//! design discussion, then on a failure deep inside a child fiber (raised
//! again by its parent: the child's trace comes first, then the parent's),
//! then in a fiber dump of three fibers deadlocked on `Deferred`s. Every
//! trace is printed most recent event first.
//!
//! ```sh
//! cargo run --release -p spindle-exec-wstp --example trace_demo
//! SPINDLE_TRACING=full cargo run --release -p spindle-exec-wstp --features tracing-full --example trace_demo
//! ```
//!
//! Tracing mode `cached` (the default) records each operation's name, the
//! place in this file that built it and the closure's type; `full` also
//! names the function that built it (from a backtrace captured then).
//!
//! The programs are written as nested `flat_map`s, the shape of a Scala
//! `for` comprehension, so each step's events follow the lines of the file.

use spindle_core::RuntimeBuilder;
use spindle_core::{Deferred, FiberConfig, FiberHandle, IO, IORuntime, Outcome, Trace};
use spindle_exec_wstp::Runtime;
use std::time::Duration;

type Io<A> = IO<A, String>;

/// The seed's `program2`: two printing steps.
fn program2() -> Io<()> {
    IO::delay(|| println!("7")).flat_map(|_| {
        IO::delay(|| println!("8")) //
    })
}

/// The seed's `program`: two steps, an async boundary (`cede`, the seed's
/// `IO.shift`), a bracket whose use runs `program2`, two more steps.
fn program() -> Io<()> {
    IO::delay(|| println!("1")).flat_map(|_| {
        IO::delay(|| println!("2")).flat_map(|_| {
            IO::cede().flat_map(|_| {
                IO::bracket(
                    IO::unit(),
                    |_| IO::delay(|| println!("3")).flat_map(|_| program2()),
                    |_| IO::unit(),
                )
                .flat_map(|_| {
                    IO::delay(|| println!("4")).flat_map(|_| {
                        IO::delay(|| println!("5")) //
                    })
                })
            })
        })
    })
}

/// The seed's `run`: the program, one more step, then the trace.
fn traced_run() -> Io<Trace> {
    IO::defer(program).flat_map(|_| {
        IO::delay(|| "10").flat_map(|_| {
            IO::trace() //
        })
    })
}

/// Three orders checked out in parallel, one child fiber each; the second
/// one fails three calls deep, in its own fiber.
fn checkout_all(orders: Vec<u32>) -> Io<Vec<u32>> {
    IO::delay(move || orders).flat_map(|orders| {
        IO::par_traverse(orders, checkout) //
    })
}

/// A failure three calls deep: `checkout` → `reserve` → `charge`.
fn checkout(order: u32) -> Io<u32> {
    IO::delay(move || order * 100).flat_map(reserve)
}

fn reserve(cents: u32) -> Io<u32> {
    IO::delay(move || cents + 5).flat_map(charge)
}

fn charge(cents: u32) -> Io<u32> {
    IO::delay(move || cents).flat_map(|cents| {
        if cents > 1_000 {
            IO::raise_error(format!("card declined for {cents} cents"))
        } else {
            IO::pure(cents)
        }
    })
}

/// Three fibers, each waiting for the next one's `Deferred` before
/// completing its own: none can ever go on.
fn deadlock() -> Io<Vec<FiberHandle<(), String>>> {
    let (a, b, c) = (
        Deferred::<()>::new(),
        Deferred::<()>::new(),
        Deferred::<()>::new(),
    );
    let (a2, b2, c2) = (a.clone(), b.clone(), c.clone());
    let first = IO::unit().flat_map(move |_| b.get().flat_map(move |_| a.complete(()).void()));
    let second = IO::unit().flat_map(move |_| c.get().flat_map(move |_| b2.complete(()).void()));
    let third = IO::unit().flat_map(move |_| a2.get().flat_map(move |_| c2.complete(()).void()));
    first.start().flat_map(|f1| {
        second.start().flat_map(|f2| {
            third.start().map(|f3| vec![f1, f2, f3]) //
        })
    })
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trace_demo: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    // 32 events per fiber, so that the whole first program fits (the
    // default is 16); the mode comes from SPINDLE_TRACING (default cached).
    let config = FiberConfig::builder().trace_capacity(32).build()?;
    let rt = Runtime::builder()
        .worker_threads(2)
        .fiber_config(config)
        .build()?;

    println!("== the seed's program, then its trace ==");
    match rt.block_on(traced_run())? {
        Outcome::Succeeded(trace) => println!("{trace}"),
        other => return Err(format!("the traced program did not succeed: {other:?}").into()),
    }

    println!("\n== a failure deep inside a child fiber, with its trace and its parent's ==");
    match rt.block_on(checkout_all(vec![3, 12, 5]).trace_errors())? {
        Outcome::Errored(failure) => println!("error: {failure}"),
        other => return Err(format!("the checkout should fail: {other:?}").into()),
    }

    println!("\n== a fiber dump of three fibers deadlocked on Deferreds ==");
    let fibers = match rt.block_on(deadlock())? {
        Outcome::Succeeded(fibers) => fibers,
        other => return Err(format!("starting the fibers failed: {other:?}").into()),
    };
    // Let the three fibers reach their waits.
    std::thread::sleep(Duration::from_millis(50));
    // Their handles show the numbers the dump shows (the runtime numbers
    // its fibers #1, #2, ... in the order it makes them).
    println!("started: {fibers:?}");
    println!("{}", rt.fiber_dump());

    // Cancel them, so that the runtime shuts down cleanly.
    for fiber in fibers {
        rt.block_on(fiber.cancel::<String>())?;
    }
    Ok(())
}
