//! `redis_compare`: the Redis benchmark's runner.
//!
//! Named Redis servers, one at a time, under `redis-benchmark -t set,get`:
//! tokio's mini-redis on a multi_thread and a current_thread runtime
//! (`mini_redis_tokio`), the real Redis (`redis-server`, if installed) and
//! Spindle's mini-redis on its wstp, batching and tokio executors
//! (`mini-redis-server`, if built). It measures, at each client shape
//! (`-c`, and `-P` for pipelining), the SET and GET requests per second
//! and p50 latency that redis-benchmark reports, and the server's own CPU
//! time per request (user + system time from `/proc/PID/stat` over the
//! redis-benchmark run), and prints one markdown table of the medians
//! across rounds with a throughput ratio against a reference server (see
//! `spindle_tools::redis_compare`).
//!
//! ```text
//! cargo run --release -p spindle-tools --bin redis_compare -- --build
//! target/release/redis_compare [--servers tokio_mt,tokio_current,redis,spindle_wstp,...]
//!     [--clients 1,50,256] [--pipeline 1,16] [--requests 100000] [--rounds 1]
//!     [--reference tokio_mt] [--timeout 600] [--spindle-server PATH] [--build]
//! ```
//!
//! `--build` first runs `cargo build --release` of `mini_redis_tokio`
//! (`-p spindle-tools`) and of Spindle's `mini-redis-server` (`-p
//! spindle-mini-redis`) into this program's target directory; without it
//! the binaries already there are used, and a server whose binary is
//! missing is skipped with a message. `redis-benchmark` (Debian's
//! `redis-tools`) must be on `PATH`; `redis-server` (`redis-server`) is
//! used if it is.
//!
//! Every server and redis-benchmark is a child process owned by a guard
//! that kills and reaps it on every path out. The table goes to stdout,
//! progress to stderr; the exit status is 1 if some run gave no figures
//! (the table says which) and 2 for an unusable command line.

use std::process::ExitCode;

use spindle_tools::cli::ArgError;
use spindle_tools::redis_compare::{Programs, USAGE, build, parse_args, run};

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(ArgError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("redis_compare: {e} (see redis_compare --help)");
            return ExitCode::from(2);
        }
    };
    let mut log = |line: &str| eprintln!("redis_compare: {line}");
    if options.build {
        build(&options, &mut log);
    }
    let programs = Programs::find(options.spindle_server.as_deref());
    match run(&options, &programs, &mut log) {
        Ok(comparison) => {
            print!("{}", comparison.render());
            if comparison.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("redis_compare: {e}");
            ExitCode::FAILURE
        }
    }
}
