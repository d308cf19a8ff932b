//! An HTTP/1.1 "hello world" server with keep-alive on exec-batching: one
//! fiber per connection, the whole server on one event-loop thread.
//!
//! ```text
//! hello_http [--mode batching|macrotask] [--addr 127.0.0.1:0] [--batch-size N]
//!            [--request-timeout-ms N] [--header-timeout-ms N] [--idle-timeout-ms N]
//!            [--max-head-bytes N] [--max-body-bytes N]
//! ```
//!
//! * `--mode`: the loop's [`Mode`] (default `batching`; `macrotask` is the
//!   baseline without microtask batching).
//! * `--addr`: where to listen (default `127.0.0.1:0`: a port the system
//!   picks).
//! * `--batch-size`: the microtask batch bound (default 64).
//! * `--request-timeout-ms`: the bound on handling one request (default
//!   30000; 0: no bound). As in any production server, a request's handler
//!   runs under a timeout; in an effect runtime that is a race between the
//!   handler's fiber and a timer's fiber (`IO::timeout_to`), so each
//!   request starts two fibers, resumes the connection's fiber and cancels
//!   the timer's: the starts and resumes that microtask batching is about.
//!   A handler that runs out of time is answered `503 Service Unavailable`.
//!   With 0 the connection's fiber builds the response itself (one resume
//!   per request, after the read).
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
//! generator in `benches/`); then it serves until killed. Try it with
//! `curl -s http://<addr>/`.
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
//! `Transfer-Encoding`, `505` for another HTTP version. The rules are in
//! the `http` module (`hello_http/http.rs`), the connection's life and its
//! timeouts in `server` (`hello_http/server.rs`); both are also compiled
//! by `tests/hello_http_parse.rs` and `tests/hello_http_robustness.rs`.

// Shared with the tests, which use items the server does not.
#[allow(dead_code)]
#[path = "hello_http/http.rs"]
mod http;
#[path = "hello_http/server.rs"]
mod server;

use std::io::{self, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use spindle_effect::Outcome;
use spindle_effect::batching::{EventLoop, Mode};

use server::Config;

const USAGE: &str = "usage: hello_http [--mode batching|macrotask] [--addr 127.0.0.1:0] \
     [--batch-size N] [--request-timeout-ms N] [--header-timeout-ms N] [--idle-timeout-ms N] \
     [--max-head-bytes N] [--max-body-bytes N]";

struct Options {
    mode: Mode,
    addr: SocketAddr,
    batch_size: usize,
    config: Config,
}

/// A duration in milliseconds; 0 is `None` (no bound).
fn millis(text: &str, what: &str) -> Result<Option<Duration>, String> {
    let ms: u64 = text
        .parse()
        .map_err(|e| format!("bad {what} {text:?}: {e}"))?;
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        mode: Mode::Batching,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        batch_size: spindle_effect::batching::DEFAULT_BATCH_SIZE,
        config: Config::default(),
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--mode" => {
                options.mode = match value()?.as_str() {
                    "batching" => Mode::Batching,
                    "macrotask" => Mode::Macrotask,
                    other => return Err(format!("unknown mode {other:?}")),
                }
            }
            "--addr" => {
                let text = value()?;
                options.addr = text
                    .parse()
                    .map_err(|e| format!("bad address {text:?}: {e}"))?;
            }
            "--batch-size" => {
                let text = value()?;
                options.batch_size = text
                    .parse()
                    .map_err(|e| format!("bad batch size {text:?}: {e}"))?;
            }
            "--request-timeout-ms" => {
                options.config.request_timeout = millis(&value()?, "request timeout")?;
            }
            "--header-timeout-ms" => {
                options.config.header_timeout = millis(&value()?, "header timeout")?;
            }
            "--idle-timeout-ms" => {
                options.config.idle_timeout = millis(&value()?, "idle timeout")?;
            }
            "--max-head-bytes" => {
                let text = value()?;
                options.config.limits.max_head = text
                    .parse()
                    .map_err(|e| format!("bad head limit {text:?}: {e}"))?;
            }
            "--max-body-bytes" => {
                let text = value()?;
                options.config.limits.max_body = text
                    .parse()
                    .map_err(|e| format!("bad body limit {text:?}: {e}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// Prints the first line of the contract, flushed at once.
fn announce(bound: SocketAddr) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {bound}").and_then(|()| out.flush())
}

fn main() -> ExitCode {
    let options = match parse_options(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("hello_http: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let built = EventLoop::builder()
        .mode(options.mode)
        .batch_size(options.batch_size)
        .build();
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hello_http: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = match rt.block_on(server::server(options.addr, options.config, announce)) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("hello_http: {e}");
            return ExitCode::FAILURE;
        }
    };
    match outcome {
        Outcome::Succeeded(()) => ExitCode::SUCCESS,
        Outcome::Errored(e) => {
            eprintln!("hello_http: {e}");
            ExitCode::FAILURE
        }
        Outcome::Canceled => ExitCode::FAILURE,
        Outcome::Panicked(p) => {
            eprintln!("hello_http: panicked: {}", p.message());
            ExitCode::from(101)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Limits, Parse, parse};

    #[test]
    fn a_keep_alive_connection_gets_an_answer_per_request_until_it_asks_to_close() {
        use std::io::Read;
        let (sender, receiver) = std::sync::mpsc::channel();
        // The server runs until the test process ends.
        std::thread::spawn(move || {
            let rt = EventLoop::new().expect("build an event loop");
            let program = server::server(
                SocketAddr::from(([127, 0, 0, 1], 0)),
                Config::default(),
                move |addr| {
                    let _ = sender.send(addr);
                    Ok(())
                },
            );
            rt.block_on(program).expect("block_on")
        });
        let addr = receiver.recv().expect("the server's address");
        let mut client = std::net::TcpStream::connect(addr).expect("connect");
        let mut received = Vec::new();
        let mut buf = [0u8; 4096];
        for _ in 0..3 {
            client
                .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            received.clear();
            while !received.ends_with(server::BODY) {
                let n = client.read(&mut buf).unwrap();
                assert!(n > 0, "the server closed a keep-alive connection");
                received.extend_from_slice(&buf[..n]);
            }
            assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
        }
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        received.clear();
        client.read_to_end(&mut received).unwrap();
        let text = String::from_utf8_lossy(&received);
        assert!(text.contains("Content-Length: 13\r\n"), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert!(text.ends_with("Hello, World!"), "{text}");
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
        let args = [
            "--mode",
            "macrotask",
            "--addr",
            "127.0.0.1:0",
            "--batch-size",
            "8",
        ];
        let options = parse_options(args.iter().map(|s| s.to_string())).unwrap();
        assert_eq!(options.mode, Mode::Macrotask);
        assert_eq!(options.addr.port(), 0);
        assert_eq!(options.batch_size, 8);
        assert_eq!(options.config, Config::default());
        let off = ["--request-timeout-ms", "0"].iter().map(|s| s.to_string());
        assert_eq!(parse_options(off).unwrap().config.request_timeout, None);
        let limits = [
            "--header-timeout-ms",
            "250",
            "--idle-timeout-ms",
            "0",
            "--max-head-bytes",
            "1024",
            "--max-body-bytes",
            "10",
        ];
        let config = parse_options(limits.iter().map(|s| s.to_string()))
            .unwrap()
            .config;
        assert_eq!(config.header_timeout, Some(Duration::from_millis(250)));
        assert_eq!(config.idle_timeout, None);
        assert_eq!(
            config.limits,
            Limits {
                max_head: 1024,
                max_body: 10
            }
        );
        assert!(parse_options(["--mode".to_string()].into_iter()).is_err());
        assert!(parse_options(["--speed".to_string()].into_iter()).is_err());
        let negative = ["--max-body-bytes", "-1"].iter().map(|s| s.to_string());
        assert!(parse_options(negative).is_err());
    }
}
