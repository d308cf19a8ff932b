//! An HTTP/1.1 "hello world" server with keep-alive, one program on every
//! executor with I/O: one fiber per connection, on the work-stealing pool,
//! the one-thread event loop, tokio, or exec-single.
//!
//! ```text
//! hello_http [--executor wstp|batching|tokio|single] [--workers N]
//!            [--flavor multi-thread|current-thread] [--mode batching|macrotask]
//!            [--batch-size N] [--addr 127.0.0.1:0] [--fan-out N]
//!            [--request-timeout-ms N] [--header-timeout-ms N] [--idle-timeout-ms N]
//!            [--max-head-bytes N] [--max-body-bytes N]
//! ```
//!
//! Build and run it with the entry crate's features (`full` has them all):
//! `cargo run --release -p spindle-effect --features full --example
//! hello_http -- --executor batching`.
//!
//! * `--executor`: `wstp` (default) with `--workers` threads (default 2);
//!   `batching`, the event loop, in `--mode` `batching` (default) or
//!   `macrotask` (the baseline without microtask batching) with microtask
//!   batches of at most `--batch-size` (default 64); `tokio` on a runtime
//!   of `--flavor` `multi-thread` (default, `--workers` workers) or
//!   `current-thread`; `single`, exec-single. See
//!   `examples/support/executor.rs`.
//! * `--addr`: where to listen (default `127.0.0.1:0`: a port the system
//!   picks).
//! * `--fan-out`: fibers the handler starts per request and joins before
//!   answering (`IO::par_traverse`; default 0, none): the workload where
//!   batching fiber starts matters (`http_compare --versus`, the fan-out
//!   pair).
//! * `--request-timeout-ms`: the bound on handling one request (default
//!   30000; 0: no bound). As in any production server, a request's handler
//!   runs under a timeout (`IO::timeout_to`): a deadline region on the
//!   connection's fiber, which starts no fiber and sets no timer for a
//!   handler that answers at once (Cats Effect derives `timeout` from a
//!   race of two fibers instead). A handler that runs out of time is
//!   answered `503 Service Unavailable`. With 0 (and no fan-out) the
//!   connection's fiber builds the response without a timeout.
//! * `--header-timeout-ms`: how long a request head may take to arrive
//!   from its first byte (default 10000; 0: no bound). A client trickling
//!   a head is closed when it runs out.
//! * `--idle-timeout-ms`: how long a keep-alive connection may stay idle
//!   between requests, a response may wait to be read, or a body may wait
//!   for its next bytes (default 60000; 0: no bound).
//! * `--max-head-bytes`: the longest request head, its final empty line
//!   included (default 65536); longer is `431`.
//! * `--max-body-bytes`: the largest `Content-Length` (default 1048576);
//!   larger is `413`. Bodies are skipped as they arrive, never buffered.
//!
//! The first line on stdout is exactly `listening on <addr>`, with the
//! address actually bound (flushed at once, for scripts and the load
//! generator of `spindle-tools`' `http_compare`); then it serves until
//! killed (SIGINT or SIGTERM end it through the entry point,
//! `spindle_effect::app::run`). Try it with `curl -s http://<addr>/`.
//!
//! Each request is read up to its blank line (and its body, if it has a
//! `Content-Length`), and answered `200 OK` with the body `Hello, World!`
//! (no body for `HEAD`). Requests that arrive together (pipelining) are
//! answered in order with one write. The connection stays open until the
//! peer closes it or sends `Connection: close` (HTTP/1.0: unless it sends
//! `Connection: keep-alive`).
//!
//! Bad input gets a clear error response and a close: `400` for a
//! malformed request line, header or `Content-Length`, `413` for a body
//! over the limit, `431` for a head over it, `501` for a
//! `Transfer-Encoding`, `505` for another HTTP version. The rules and the
//! response bytes are in the `http` module (`hello_http/http.rs`, shared
//! with the tokio reference server `tools/src/bin/hello_tokio.rs`), the
//! connection's life and its timeouts in `server` (`hello_http/server.rs`,
//! which names no executor). `tests/hello_http_parse.rs` checks the
//! parser; `tests/hello_http_robustness.rs` runs this program (its
//! [`run`]) in a child process on each executor against bad, slow,
//! resetting and descriptor-starved clients.

// Shared with the tests, which use items the server does not.
#[path = "support/executor.rs"]
pub(crate) mod executor;
#[allow(dead_code)]
#[path = "hello_http/http.rs"]
pub(crate) mod http;
#[path = "hello_http/server.rs"]
pub(crate) mod server;

use std::io::{self, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use executor::{Executor, ExecutorFlags};
use server::Config;

const USAGE: &str = "usage: hello_http [--executor wstp|batching|tokio|single] [--workers N] \
     [--flavor multi-thread|current-thread] [--mode batching|macrotask] [--batch-size N] \
     [--addr 127.0.0.1:0] [--fan-out N] \
     [--request-timeout-ms N] [--header-timeout-ms N] [--idle-timeout-ms N] \
     [--max-head-bytes N] [--max-body-bytes N]";

/// The command line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// The executor to serve on.
    pub(crate) executor: Executor,
    /// Where to listen.
    pub(crate) addr: SocketAddr,
    /// The server's limits, timeouts and fan-out.
    pub(crate) config: Config,
}

/// A duration in milliseconds; 0 is `None` (no bound).
fn millis(text: &str, what: &str) -> Result<Option<Duration>, String> {
    let ms: u64 = text
        .parse()
        .map_err(|e| format!("bad {what} {text:?}: {e}"))?;
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

/// Parses the arguments after the program name; `Err("")` for `--help`.
pub(crate) fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut executor = ExecutorFlags::default();
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut config = Config::default();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        if executor.take(&flag, &mut value)? {
            continue;
        }
        match flag.as_str() {
            "--addr" => {
                let text = value()?;
                addr = text
                    .parse()
                    .map_err(|e| format!("bad address {text:?}: {e}"))?;
            }
            "--fan-out" => {
                let text = value()?;
                config.fan_out = text
                    .parse()
                    .map_err(|e| format!("bad fan-out {text:?}: {e}"))?;
            }
            "--request-timeout-ms" => {
                config.request_timeout = millis(&value()?, "request timeout")?;
            }
            "--header-timeout-ms" => {
                config.header_timeout = millis(&value()?, "header timeout")?;
            }
            "--idle-timeout-ms" => {
                config.idle_timeout = millis(&value()?, "idle timeout")?;
            }
            "--max-head-bytes" => {
                let text = value()?;
                config.limits.max_head = text
                    .parse()
                    .map_err(|e| format!("bad head limit {text:?}: {e}"))?;
            }
            "--max-body-bytes" => {
                let text = value()?;
                config.limits.max_body = text
                    .parse()
                    .map_err(|e| format!("bad body limit {text:?}: {e}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        executor: executor.resolve()?,
        addr,
        config,
    })
}

/// Prints the first line of the contract, flushed at once.
fn announce(bound: SocketAddr) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {bound}").and_then(|()| out.flush())
}

/// The program for a command line (without the program name): parses it
/// and serves on the executor it names until the process ends; exit code
/// 2 for an unusable command line.
pub(crate) fn run(args: impl Iterator<Item = String>) -> ExitCode {
    let options = match parse_options(args) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("hello_http: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let program = server::server(options.addr, options.config, announce);
    options.executor.run(program)
}

fn main() -> ExitCode {
    run(std::env::args().skip(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Limits, Parse, parse};
    use spindle_effect::batching::Mode;

    fn options(args: &[&str]) -> Result<Options, String> {
        parse_options(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn the_example_parses_the_requests_the_load_generator_sends() {
        let request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: spindle-loadgen\r\nAccept: */*\r\n\r\n";
        match parse(request, &Limits::default()) {
            Parse::Complete(r) => assert_eq!((r.head_len, r.close), (request.len(), false)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_options_follow_the_command_line_contract() {
        let parsed = options(&[
            "--executor",
            "batching",
            "--mode",
            "macrotask",
            "--addr",
            "127.0.0.1:0",
            "--batch-size",
            "8",
        ])
        .unwrap();
        assert_eq!(
            parsed.executor,
            Executor::Batching {
                mode: Mode::Macrotask,
                batch_size: 8
            }
        );
        assert_eq!(parsed.addr.port(), 0);
        assert_eq!(parsed.config, Config::default());
        assert_eq!(
            options(&[]).unwrap().executor,
            Executor::Wstp { workers: 2 },
            "the pool with two workers by default"
        );
        let off = options(&["--request-timeout-ms", "0"]).unwrap();
        assert_eq!(off.config.request_timeout, None);
        let config = options(&[
            "--header-timeout-ms",
            "250",
            "--idle-timeout-ms",
            "0",
            "--max-head-bytes",
            "1024",
            "--max-body-bytes",
            "10",
            "--fan-out",
            "8",
        ])
        .unwrap()
        .config;
        assert_eq!(config.header_timeout, Some(Duration::from_millis(250)));
        assert_eq!(config.idle_timeout, None);
        assert_eq!(config.fan_out, 8);
        assert_eq!(
            config.limits,
            Limits {
                max_head: 1024,
                max_body: 10
            }
        );
    }

    #[test]
    fn unusable_command_lines_are_errors() {
        for args in [
            &["--mode"][..],
            &["--speed", "1"],
            &["--max-body-bytes", "-1"],
            &["--fan-out", "many"],
            // The event loop's flags on the pool.
            &["--mode", "macrotask"],
            &["--executor", "batching", "--workers", "2"],
        ] {
            assert!(options(args).is_err(), "{args:?}");
        }
        assert_eq!(options(&["--help"]), Err(String::new()));
    }
}
