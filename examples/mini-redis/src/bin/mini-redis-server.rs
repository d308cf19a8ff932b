//! `mini-redis-server`: the server on the executor of its command line.
//!
//! ```text
//! mini-redis-server [--port 6379] [--max-connections 250] [--grace-ms 5000]
//!                   [--max-bulk BYTES] [--subscriber-queue N]
//!                   [--executor wstp|batching|tokio|single] [--workers N]
//!                   [--flavor multi-thread|current-thread] [--mode batching|macrotask]
//! ```
//!
//! It listens on 127.0.0.1 (`--port 0`: a port the system picks) and
//! prints `listening on <addr>` as its first line. SIGINT or SIGTERM
//! starts the graceful shutdown (the crate's `server` module): it stops
//! accepting, lets the connections finish their commands for at most
//! `--grace-ms`, prints what it served, and exits with code 0; a second
//! signal exits at once (130).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spindle_effect::Deferred;
use spindle_effect::net::TcpListener;
use spindle_effect::prelude::*;
use spindle_mini_redis::server::{self, Config};

#[path = "../../../../spindle/examples/support/executor.rs"]
mod executor;
use executor::{Executor, ExecutorFlags};

/// The command line, parsed.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    executor: Executor,
    port: u16,
    config: Config,
}

const USAGE: &str = "usage: mini-redis-server [--port N] [--max-connections N] [--grace-ms N] \
[--max-bulk BYTES] [--subscriber-queue N] [--executor wstp|batching|tokio|single] [--workers N] \
[--flavor multi-thread|current-thread] [--mode batching|macrotask]";

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{flag} {text:?}: not a number in range"))
}

/// Parses the arguments after the program name; `Err("")` for `--help`.
fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut executor = ExecutorFlags::default();
    let mut port = 6379;
    let mut config = Config::default();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        if executor.take(&flag, &mut value)? {
            continue;
        }
        match flag.as_str() {
            "--port" => port = number(&flag, &value()?)?,
            "--max-connections" => config.max_connections = number(&flag, &value()?)?,
            "--grace-ms" => config.grace = Duration::from_millis(number(&flag, &value()?)?),
            "--max-bulk" => config.limits.max_bulk = number(&flag, &value()?)?,
            "--subscriber-queue" => config.subscriber_queue = number(&flag, &value()?)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    config.check().map_err(|e| e.to_string())?;
    Ok(Options {
        executor: executor.resolve()?,
        port,
        config,
    })
}

/// Serves until the main fiber is canceled (SIGINT, SIGTERM), then shuts
/// down gracefully and sets `drained`.
fn main_fiber(options: Options, drained: Arc<AtomicBool>) -> IO<(), io::Error> {
    IO::block(async move {
        let addr = SocketAddr::from(([127, 0, 0, 1], options.port));
        let listener = TcpListener::bind(addr).await?;
        println!("listening on {}", listener.local_addr().await?);
        let stop = Deferred::<()>::new();
        let serving = server::serve(listener, options.config, stop.get());
        let stopped = IO::block(async move {
            let summary = serving.await?;
            println!(
                "stopped after {} connection(s): {} finalized, {} canceled after the grace period",
                summary.serve.accepted, summary.finalized, summary.serve.canceled
            );
            drained.store(true, Ordering::SeqCst);
            Ok::<(), io::Error>(())
        });
        let server = stopped.start().value().await;
        // A signal cancels this fiber while it waits here; the finalizer
        // starts the shutdown and waits for it (finalizers are not
        // canceled).
        let shutdown = stop
            .complete::<Infallible>(())
            .product_r(server.join_void());
        server.join_void().on_cancel(shutdown).value().await;
        server.join_with_never().await
    })
}

fn main() -> ExitCode {
    let options = match parse_options(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(why) if why.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("mini-redis-server: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let drained = Arc::new(AtomicBool::new(false));
    let code = options.executor.run(main_fiber(options, drained.clone()));
    if drained.load(Ordering::SeqCst) {
        ExitCode::SUCCESS
    } else {
        code
    }
}
