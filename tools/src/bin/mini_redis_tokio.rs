//! `mini_redis_tokio`: the tokio reference of the Redis benchmark, tokio's
//! own mini-redis application on a tokio runtime.
//!
//! ```text
//! mini_redis_tokio [--port 0] [--flavor multi|current] [--workers N] [--nodelay]
//! ```
//!
//! * `--port`: the TCP port on 127.0.0.1 (default 0: the system picks a
//!   free one).
//! * `--flavor`: the tokio runtime, `multi` (default: `multi_thread` with
//!   `--workers` worker threads, default 2) or `current` (`current_thread`:
//!   the whole server on the thread that runs `block_on`).
//! * `--nodelay`: `TCP_NODELAY` on the listening socket, which Linux
//!   copies to every socket it accepts (mini-redis sets no socket option
//!   itself; see below).
//!
//! The first line on stdout is exactly `listening on 127.0.0.1:PORT`
//! (flushed at once); then it serves until it gets SIGTERM or SIGINT
//! (Ctrl-C elsewhere than Unix), when it stops accepting, tells every
//! connection to finish and exits with status 0 once they have. Standard
//! input is not read: closing it does not stop the server.
//! `redis_compare` runs it beside redis-server and Spindle's
//! `mini-redis-server` (see `spindle_tools::redis_compare`):
//!
//! ```text
//! cargo run --release -p spindle-tools --bin redis_compare -- --build
//! ```
//!
//! # The server is tokio's, not a copy
//!
//! Everything behind the socket is the `mini-redis` crate, tokio's
//! example of an idiomatic tokio application (by Carl Lerche and the tokio
//! authors, MIT), used as a library: `mini_redis::server::run` accepts
//! on the listener this binary binds, a tokio task per connection (at
//! most 250 at once, its own limit), and answers GET, SET, PUBLISH,
//! SUBSCRIBE and UNSUBSCRIBE from a shared `Mutex<HashMap>`, with an
//! error for any other command (redis-benchmark's `CONFIG GET` at start
//! among them, which it survives). None of its code is copied here; this
//! file only chooses the runtime, binds and waits for the signal. Its
//! `tracing` events are left without a subscriber, as a benchmark would
//! run it: they cost a disabled callsite's check each.
//!
//! # Why `--nodelay`
//!
//! mini-redis answers each command with a write of its own (it flushes
//! after every reply frame) and leaves Nagle's algorithm on. A client that
//! pipelines then gets the first reply of a batch at once and the rest
//! only when that one is acknowledged, which a Linux client delays by up
//! to 40 ms (delayed ACK): `redis-benchmark -c 1 -P 16` measures about
//! 400 requests per second, the delayed-ACK timer and not the runtime.
//! redis-server sets `TCP_NODELAY` on every connection, as does this
//! crate's `hello_tokio`; `redis_compare` runs this server with
//! `--nodelay` so that its rows compare the runtimes. Without pipelining
//! (one command in flight per connection) the flag changes nothing.

use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;

use spindle_tools::cli::{ArgError, Flavor, invalid, pairs};
use tokio::net::TcpSocket;

const USAGE: &str = "\
usage: mini_redis_tokio [--port 0] [--flavor multi|current] [--workers N] [--nodelay]

tokio's mini-redis (the mini-redis crate's server) on 127.0.0.1:PORT (0: any
free port); prints `listening on 127.0.0.1:PORT` first; SIGTERM or SIGINT
stops it. --flavor multi (default) runs a multi_thread runtime of --workers
threads (default 2), --flavor current a current_thread runtime. --nodelay sets
TCP_NODELAY on the listening socket (on Linux: on every accepted connection).";

/// The command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Options {
    port: u16,
    flavor: Flavor,
    nodelay: bool,
}

fn parse_options(args: impl IntoIterator<Item = String>) -> Result<Options, ArgError> {
    let mut port = 0u16;
    let mut flavor = "multi";
    let mut workers = None;
    let mut nodelay = false;
    for (flag, value) in pairs(args, &["--port", "--flavor", "--workers"], &["--nodelay"])? {
        let value = value.unwrap_or_default();
        match flag {
            "--nodelay" => nodelay = true,
            "--port" => {
                port = value
                    .parse()
                    .map_err(|e| invalid("--port", &value, format!("{e}")))?;
            }
            "--flavor" => {
                flavor = match value.as_str() {
                    "multi" => "multi",
                    "current" => "current",
                    _ => return Err(invalid("--flavor", &value, "expected multi or current")),
                };
            }
            _ => {
                workers = Some(
                    value
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| invalid("--workers", &value, "expected a count >= 1"))?,
                );
            }
        }
    }
    let flavor = match (flavor, workers) {
        ("current", Some(n)) => {
            return Err(invalid(
                "--workers",
                &n.to_string(),
                "does not apply to --flavor current",
            ));
        }
        ("current", None) => Flavor::Current,
        (_, workers) => Flavor::Multi(workers.unwrap_or(2)),
    };
    Ok(Options {
        port,
        flavor,
        nodelay,
    })
}

/// Completes at the first SIGTERM or SIGINT (registered when called, so
/// before the `listening on` line: a signal right after it is not lost).
#[cfg(unix)]
fn stop_signal() -> io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Completes at the first Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> io::Result<impl Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Binds (as `TcpListener::bind` does: `SO_REUSEADDR`, a backlog of
/// 1024), announces the address, serves until the stop signal.
async fn serve(port: u16, nodelay: bool) -> mini_redis::Result<()> {
    let stop = stop_signal()?;
    let socket = TcpSocket::new_v4()?;
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    if nodelay {
        socket.set_nodelay(true)?;
    }
    socket.bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    let listener = socket.listen(1024)?;
    let bound = listener.local_addr()?;
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {bound}")?;
    out.flush()?;
    drop(out);
    mini_redis::server::run(listener, stop).await
}

fn main() -> ExitCode {
    let options = match parse_options(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(ArgError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("mini_redis_tokio: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match options.flavor.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mini_redis_tokio: cannot build the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(options.port, options.nodelay)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mini_redis_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Result<Options, ArgError> {
        parse_options(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn by_default_it_takes_any_port_on_a_multi_thread_runtime_of_two_workers() {
        assert_eq!(
            options(&[]).unwrap(),
            Options {
                port: 0,
                flavor: Flavor::Multi(2),
                nodelay: false
            }
        );
        let parsed = options(&[
            "--port",
            "6380",
            "--flavor",
            "multi",
            "--workers=4",
            "--nodelay",
        ])
        .unwrap();
        assert_eq!(
            parsed,
            Options {
                port: 6380,
                flavor: Flavor::Multi(4),
                nodelay: true
            }
        );
        assert_eq!(
            options(&["--flavor", "current"]).unwrap().flavor,
            Flavor::Current
        );
    }

    #[test]
    fn unusable_command_lines_are_errors_and_help_is_asked_for() {
        for args in [
            &["--flavor", "threadpool"][..],
            &["--flavor", "current", "--workers", "2"],
            &["--workers", "0"],
            &["--port", "70000"],
            &["--port"],
            &["--addr", "127.0.0.1:0"],
            &["--nodelay=yes"],
        ] {
            assert!(options(args).is_err(), "{args:?}");
        }
        assert_eq!(options(&["--help"]), Err(ArgError::Help));
    }
}
