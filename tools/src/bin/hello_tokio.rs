//! `hello_tokio`: the tokio reference of the HTTP benchmark, `hello_http`'s
//! HTTP on tokio.
//!
//! ```text
//! hello_tokio [--flavor current|multi] [--workers N] [--addr 127.0.0.1:0]
//!             [--request-timeout-ms N] [--header-timeout-ms N] [--idle-timeout-ms N]
//!             [--max-head-bytes N] [--max-body-bytes N]
//! ```
//!
//! * `--flavor`: the tokio runtime, `multi` (default: `multi_thread` with
//!   `--workers` worker threads, default 2) or `current` (`current_thread`:
//!   the whole server on the thread that runs `block_on`).
//! * The other flags are `hello_http`'s, with its defaults and meaning.
//!
//! The first line on stdout is exactly `listening on <addr>` (flushed at
//! once); then it serves until killed. `http_compare --versus` runs it
//! beside `hello_http` (see `spindle_tools::http_load::versus`).
//!
//! # The same server, written the tokio way
//!
//! The protocol is not a copy: this binary compiles hello_http's own
//! `http.rs` (`spindle/examples/hello_http/http.rs`, through `#[path]`), so
//! requests are parsed by the same code, framed by the same
//! `http::Framer` (pipelined requests answered in order with one
//! write, bodies skipped as they arrive, keep-alive and `Connection: close`
//! alike) and answered with the same bytes; `tests/hello_tokio.rs` checks
//! that a set of requests gets byte-identical answers from both servers.
//!
//! What is tokio's own is how the connection waits, as a tokio user would
//! write it:
//!
//! * a tokio task per connection (`tokio::spawn`), an async loop that
//!   reads into the framer's buffer and writes each batch's answers with
//!   `write_all`;
//! * the header and idle timeouts are the same deadlines as hello_http's
//!   (idle from when the last response started, header from the first
//!   byte of a head, the idle timeout again for each wait of a body or a
//!   write), applied with `tokio::time::timeout_at` to each read and write,
//!   where hello_http races a watchdog fiber against the connection's;
//! * the request timeout wraps the handler in `tokio::time::timeout`, a
//!   future combinator that polls the handler first and registers a timer
//!   only if it is not ready, where hello_http races a handler fiber
//!   against a timer fiber (`IO::timeout_to`). That is the cost each
//!   runtime charges for the same guarantee; `--request-timeout-ms 0`
//!   removes it from both servers.
//!
//! A failed accept backs off and logs as hello_http's does.

// The protocol module is shared; this server uses most, not all, of it.
#[allow(dead_code)]
#[path = "../../../spindle/examples/hello_http/http.rs"]
mod http;

use spindle_tools::cli::Flavor;
use std::future::Future;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use bytes::BufMut as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use http::{Batch, Framer, Limits, Reply, Wait, error_response, responses, unavailable};

/// Bytes asked of one read while reading heads (as hello_http).
const READ_CHUNK: usize = 4096;
/// Bytes asked of one read while skipping a body (as hello_http).
const SKIP_CHUNK: usize = 64 * 1024;
/// The shortest sleep after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest sleep after failed accepts in a row.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// At most one log line about failed accepts per this period.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(1);

const USAGE: &str = "usage: hello_tokio [--flavor current|multi] [--workers N] \
     [--addr 127.0.0.1:0] [--request-timeout-ms N] [--header-timeout-ms N] \
     [--idle-timeout-ms N] [--max-head-bytes N] [--max-body-bytes N]";

/// hello_http's limits and timeouts (its `server::Config`, without the
/// fan-out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Config {
    limits: Limits,
    header_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    linger: Duration,
    request_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            limits: Limits::default(),
            header_timeout: Some(Duration::from_secs(10)),
            idle_timeout: Some(Duration::from_secs(60)),
            linger: Duration::from_secs(2),
            request_timeout: Some(Duration::from_secs(30)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Options {
    flavor: Flavor,
    addr: SocketAddr,
    config: Config,
}

fn millis(text: &str, what: &str) -> Result<Option<Duration>, String> {
    let ms: u64 = text
        .parse()
        .map_err(|e| format!("bad {what} {text:?}: {e}"))?;
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut flavor = None;
    let mut workers = None;
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut config = Config::default();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--flavor" => {
                flavor = Some(match value()?.as_str() {
                    "current" => "current",
                    "multi" => "multi",
                    other => return Err(format!("unknown flavor {other:?} (current, multi)")),
                })
            }
            "--workers" => {
                let text = value()?;
                workers = Some(
                    text.parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("bad worker count {text:?}"))?,
                );
            }
            "--addr" => {
                let text = value()?;
                addr = text
                    .parse()
                    .map_err(|e| format!("bad address {text:?}: {e}"))?;
            }
            "--request-timeout-ms" => {
                config.request_timeout = millis(&value()?, "request timeout")?;
            }
            "--header-timeout-ms" => {
                config.header_timeout = millis(&value()?, "header timeout")?;
            }
            "--idle-timeout-ms" => config.idle_timeout = millis(&value()?, "idle timeout")?,
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
    let flavor = match (flavor.unwrap_or("multi"), workers) {
        ("current", Some(_)) => return Err("--workers does not apply to --flavor current".into()),
        ("current", None) => Flavor::Current,
        (_, workers) => Flavor::Multi(workers.unwrap_or(2)),
    };
    Ok(Options {
        flavor,
        addr,
        config,
    })
}

/// `after` from `now`; `None` (no deadline) without a timeout.
fn deadline(now: Instant, after: Option<Duration>) -> Option<Instant> {
    after.map(|after| now + after)
}

/// `work`, unless `deadline` passes first (`None`).
async fn bounded<F: Future>(deadline: Option<Instant>, work: F) -> Option<F::Output> {
    match deadline {
        None => Some(work.await),
        Some(at) => tokio::time::timeout_at(at, work).await.ok(),
    }
}

/// The responses to `replies`, under the request timeout if there is one.
async fn handle(replies: Vec<Reply>, timeout: Option<Duration>) -> Vec<u8> {
    match timeout {
        None => responses(&replies),
        Some(timeout) => {
            let close = replies.last().is_some_and(|r| r.close);
            tokio::time::timeout(timeout, async { responses(&replies) })
                .await
                .unwrap_or_else(|_| unavailable(close))
        }
    }
}

/// Reads and discards until end of stream, an error, or `linger` passes.
async fn linger(stream: &mut TcpStream, linger: Duration) {
    let mut sink = vec![0u8; SKIP_CHUNK];
    let drain = async { while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(linger, drain).await;
}

/// Serves one connection until the peer closes it, asks to, breaks the
/// protocol or runs out of time (hello_http's `server::connection`).
async fn connection(mut stream: TcpStream, config: Config) {
    let _ = stream.set_nodelay(true);
    let mut framer = Framer::with_capacity(READ_CHUNK);
    let mut waited = Wait::Idle;
    let mut due = deadline(Instant::now(), config.idle_timeout);
    loop {
        let batch = framer.take(&config.limits);
        if !batch.is_empty() {
            waited = Wait::Idle;
            due = deadline(Instant::now(), config.idle_timeout);
            let Batch {
                replies,
                rejection,
                close,
            } = batch;
            let mut bytes = if replies.is_empty() {
                Vec::new()
            } else {
                handle(replies, config.request_timeout).await
            };
            if let Some(rejection) = &rejection {
                bytes.extend_from_slice(&error_response(rejection));
            }
            if !matches!(bounded(due, stream.write_all(&bytes)).await, Some(Ok(()))) {
                return;
            }
            if rejection.is_some() {
                let _ = stream.shutdown().await;
                linger(&mut stream, config.linger).await;
                return;
            }
            if close {
                let _ = stream.shutdown().await;
                return;
            }
            continue;
        }
        // Nothing to answer yet: read more, first moving the deadline if
        // the connection started waiting for something else.
        let wait = framer.waiting_for();
        match wait {
            // A body's every wait is bounded by the idle timeout.
            Wait::Body => due = deadline(Instant::now(), config.idle_timeout),
            Wait::Head if waited != Wait::Head => {
                due = deadline(Instant::now(), config.header_timeout);
            }
            // Idle: set when the last response started (or at accept).
            _ => {}
        }
        waited = wait;
        let max = if wait == Wait::Body {
            SKIP_CHUNK
        } else {
            READ_CHUNK
        };
        // Into the buffer's spare capacity, not zeroed first (tokio's
        // `read_buf`; hello_http reads the same way).
        let buf = framer.buffer();
        buf.reserve(max);
        let read = bounded(due, stream.read_buf(&mut (&mut *buf).limit(max))).await;
        match read {
            Some(Ok(n)) if n > 0 => {}
            // End of stream (done, or a request cut short: closed without
            // an answer), an error (a reset) or a timeout.
            _ => return,
        }
    }
}

/// Accepts forever, a task per connection; failed accepts back off and
/// are logged at a bounded rate.
async fn accept_loop(listener: TcpListener, config: Config) {
    let mut backoff = Duration::ZERO;
    let mut last_log: Option<Instant> = None;
    let mut suppressed = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                backoff = Duration::ZERO;
                tokio::spawn(connection(stream, config));
            }
            Err(e) => {
                let now = Instant::now();
                if last_log.is_none_or(|last| now - last >= ACCEPT_LOG_INTERVAL) {
                    if suppressed > 0 {
                        eprintln!(
                            "hello_tokio: accept failed: {e} ({suppressed} more failures since the last report)"
                        );
                    } else {
                        eprintln!("hello_tokio: accept failed: {e}");
                    }
                    last_log = Some(now);
                    suppressed = 0;
                } else {
                    suppressed = suppressed.saturating_add(1);
                }
                backoff = (backoff * 2).clamp(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

fn main() -> ExitCode {
    let options = match parse_options(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("hello_tokio: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match options.flavor.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("hello_tokio: cannot build the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served: io::Result<()> = runtime.block_on(async {
        let listener = TcpListener::bind(options.addr).await?;
        let bound = listener.local_addr()?;
        let mut out = io::stdout().lock();
        writeln!(out, "listening on {bound}")?;
        out.flush()?;
        drop(out);
        accept_loop(listener, options.config).await;
        Ok(())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hello_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Result<Options, String> {
        parse_options(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn the_flavor_defaults_to_multi_thread_with_two_workers() {
        assert_eq!(options(&[]).unwrap().flavor, Flavor::Multi(2));
        let parsed = options(&["--flavor", "multi", "--workers", "4"]).unwrap();
        assert_eq!(parsed.flavor, Flavor::Multi(4));
        assert_eq!(
            options(&["--flavor", "current"]).unwrap().flavor,
            Flavor::Current
        );
    }

    #[test]
    fn hello_http_s_flags_mean_the_same_here() {
        let parsed = options(&[
            "--addr",
            "127.0.0.1:0",
            "--request-timeout-ms",
            "0",
            "--header-timeout-ms",
            "250",
            "--idle-timeout-ms",
            "0",
            "--max-head-bytes",
            "1024",
            "--max-body-bytes",
            "10",
        ])
        .unwrap();
        assert_eq!(parsed.config.request_timeout, None);
        assert_eq!(
            parsed.config.header_timeout,
            Some(Duration::from_millis(250))
        );
        assert_eq!(parsed.config.idle_timeout, None);
        assert_eq!(
            parsed.config.limits,
            Limits {
                max_head: 1024,
                max_body: 10
            }
        );
        assert_eq!(options(&[]).unwrap().config, Config::default());
    }

    #[test]
    fn unusable_command_lines_are_errors() {
        for args in [
            &["--flavor", "threadpool"][..],
            &["--flavor", "current", "--workers", "2"],
            &["--workers", "0"],
            &["--fan-out", "8"],
            &["--addr"],
        ] {
            assert!(options(args).is_err(), "{args:?}");
        }
    }
}
