//! An HTTP/1.1 "hello world" server with keep-alive on exec-batching: one
//! fiber per connection, the whole server on one event-loop thread.
//!
//! ```text
//! hello_http [--mode batching|macrotask] [--addr 127.0.0.1:0] [--batch-size N]
//!            [--request-timeout-ms N]
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
//!
//! The first line on stdout is exactly `listening on <addr>`, with the
//! address actually bound (flushed at once, for scripts and the load
//! generator in `benches/`); then it serves until killed. Try it with
//! `curl -s http://<addr>/`.
//!
//! Each request is read up to its blank line (and its body, if it has a
//! `Content-Length`), and answered `200 OK` with the body `Hello, World!`.
//! Requests that arrive together (pipelining) are answered with one write.
//! The connection stays open until the peer closes it or sends
//! `Connection: close` (HTTP/1.0: unless it sends `Connection: keep-alive`).

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::process::ExitCode;
use std::time::Duration;

use spindle_core::{IO, Outcome};
use spindle_exec_batching::net::{TcpListener, TcpStream};
use spindle_exec_batching::{EventLoop, Mode};

const USAGE: &str = "usage: hello_http [--mode batching|macrotask] [--addr 127.0.0.1:0] \
     [--batch-size N] [--request-timeout-ms N]";

/// The default bound on handling one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

const BODY: &[u8] = b"Hello, World!";
/// The most bytes a request head may take before the connection is closed.
const MAX_HEAD: usize = 64 * 1024;
const READ_CHUNK: usize = 4096;

struct Options {
    mode: Mode,
    addr: SocketAddr,
    batch_size: usize,
    /// `None`: no per-request handler fiber.
    request_timeout: Option<Duration>,
}

fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        mode: Mode::Batching,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        batch_size: spindle_exec_batching::DEFAULT_BATCH_SIZE,
        request_timeout: Some(REQUEST_TIMEOUT),
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
                let text = value()?;
                let ms: u64 = text
                    .parse()
                    .map_err(|e| format!("bad request timeout {text:?}: {e}"))?;
                options.request_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// What the requests complete in a buffer ask for.
#[derive(Debug, PartialEq, Eq)]
struct Requests {
    /// Complete requests (each gets a response).
    complete: usize,
    /// Bytes they take.
    consumed: usize,
    /// The last one asked to close the connection.
    close: bool,
}

/// Finds the complete requests at the start of `buf`; stops after one that
/// asks to close.
fn parse_requests(buf: &[u8]) -> Requests {
    let mut requests = Requests {
        complete: 0,
        consumed: 0,
        close: false,
    };
    while let Some(end) = find(&buf[requests.consumed..], b"\r\n\r\n") {
        let head = &buf[requests.consumed..requests.consumed + end];
        let (close, body_len) = read_head(head);
        let total = end + 4 + body_len;
        if requests.consumed + total > buf.len() {
            break; // the body has not all arrived
        }
        requests.complete += 1;
        requests.consumed += total;
        if close {
            requests.close = true;
            break;
        }
    }
    requests
}

/// From a request head: whether it asks to close, and its body length.
fn read_head(head: &[u8]) -> (bool, usize) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut close = request_line.ends_with("HTTP/1.0");
    let mut body_len = 0;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            if value.eq_ignore_ascii_case("close") {
                close = true;
            } else if value.eq_ignore_ascii_case("keep-alive") {
                close = false;
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            body_len = value.parse().unwrap_or(0);
        }
    }
    (close, body_len)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The responses to `requests`, in one buffer.
fn responses(requests: &Requests) -> Vec<u8> {
    let mut out = Vec::with_capacity(requests.complete * 100);
    for index in 0..requests.complete {
        let closing = requests.close && index + 1 == requests.complete;
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n");
        if closing {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", BODY.len()).as_bytes());
        out.extend_from_slice(BODY);
    }
    out
}

/// The answer to a request whose handler ran out of time.
fn unavailable(close: bool) -> Vec<u8> {
    let mut out = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n".to_vec();
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The responses to `requests`: built by the connection's fiber, or (with
/// a request timeout) by a handler fiber raced against a timer.
fn handle(requests: Requests, timeout: Option<Duration>) -> IO<Vec<u8>, io::Error> {
    match timeout {
        None => IO::pure(responses(&requests)),
        Some(timeout) => {
            let close = requests.close;
            IO::delay(move || responses(&requests))
                .timeout_to(timeout, IO::delay(move || unavailable(close)))
        }
    }
}

/// Serves one connection until the peer closes it or asks to.
fn connection(stream: TcpStream, timeout: Option<Duration>) -> IO<(), io::Error> {
    let nodelay = stream.set_nodelay(true);
    let serve = IO::tail_rec(
        (stream, Vec::with_capacity(READ_CHUNK)),
        move |(stream, mut buf)| {
            let requests = parse_requests(&buf);
            if requests.complete > 0 {
                buf.drain(..requests.consumed);
                let close = requests.close;
                handle(requests, timeout).flat_map(move |bytes| {
                    let written = stream.write_all(bytes);
                    if close {
                        let shutdown = stream.shutdown(Shutdown::Write);
                        written.product_r(shutdown).map_to(ControlFlow::Break(()))
                    } else {
                        written.map(move |()| ControlFlow::Continue((stream, buf)))
                    }
                })
            } else if buf.len() > MAX_HEAD {
                IO::pure(ControlFlow::Break(()))
            } else {
                stream.read_into(buf, READ_CHUNK).map(move |(buf, n)| {
                    if n == 0 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue((stream, buf))
                    }
                })
            }
        },
    );
    nodelay.product_r(serve)
}

/// Accepts forever, starting a fiber per connection.
fn accept_loop(listener: TcpListener, timeout: Option<Duration>) -> IO<(), io::Error> {
    IO::forever(move || {
        listener
            .accept()
            .attempt()
            .flat_map(move |accepted| match accepted {
                // A connection's error (a reset peer) ends only its fiber.
                Ok((stream, _)) => connection(stream, timeout).attempt().void().start().void(),
                // Out of descriptors, say: report, back off, go on.
                Err(e) => {
                    eprintln!("hello_http: accept failed: {e}");
                    IO::sleep(Duration::from_millis(10))
                }
            })
    })
    .void()
}

fn server(addr: SocketAddr, timeout: Option<Duration>) -> IO<(), io::Error> {
    TcpListener::bind(addr).flat_map(move |listener| {
        listener.local_addr().flat_map(move |bound| {
            let announce = IO::defer(move || {
                let mut out = io::stdout().lock();
                match writeln!(out, "listening on {bound}").and_then(|()| out.flush()) {
                    Ok(()) => IO::unit(),
                    Err(e) => IO::raise_error(e),
                }
            });
            announce.product_r(accept_loop(listener, timeout))
        })
    })
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
    match rt
        .block_on(server(options.addr, options.request_timeout))
        .expect("block_on")
    {
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

    #[test]
    fn pipelined_requests_are_counted_up_to_the_incomplete_one() {
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\n\r\nGET / HT";
        let requests = parse_requests(buf);
        assert_eq!(requests.complete, 2);
        assert_eq!(requests.consumed, buf.len() - 8);
        assert!(!requests.close);
    }

    #[test]
    fn connection_close_stops_at_that_request_and_http_1_0_closes_by_default() {
        let buf = b"GET / HTTP/1.1\r\nconnection: Close\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        let requests = parse_requests(buf);
        assert_eq!((requests.complete, requests.close), (1, true));
        assert!(parse_requests(b"GET / HTTP/1.0\r\n\r\n").close);
        assert!(!parse_requests(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").close);
    }

    #[test]
    fn a_request_waits_for_its_whole_body() {
        let head = b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab";
        assert_eq!(parse_requests(head).complete, 0);
        let whole = b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde";
        assert_eq!(parse_requests(whole).consumed, whole.len());
    }

    #[test]
    fn a_keep_alive_connection_gets_an_answer_per_request_until_it_asks_to_close() {
        use std::io::{Read, Write};
        let (sender, receiver) = std::sync::mpsc::channel();
        // The server runs until the test process ends.
        std::thread::spawn(move || {
            let rt = EventLoop::new().expect("build an event loop");
            let program = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).flat_map(
                move |listener| {
                    let announce = listener.local_addr().map(move |addr| {
                        let _ = sender.send(addr);
                    });
                    announce.product_r(accept_loop(listener, Some(REQUEST_TIMEOUT)))
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
            while !received.ends_with(BODY) {
                let n = client.read(&mut buf).unwrap();
                assert!(n > 0, "the server closed a keep-alive connection");
                received.extend_from_slice(&buf[..n]);
            }
            assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
        }
        client
            .write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        received.clear();
        client.read_to_end(&mut received).unwrap();
        let text = String::from_utf8_lossy(&received);
        assert!(text.contains("Content-Length: 13\r\n"), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert!(text.ends_with("Hello, World!"), "{text}");
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
        assert_eq!(options.request_timeout, Some(REQUEST_TIMEOUT));
        let off = ["--request-timeout-ms", "0"].iter().map(|s| s.to_string());
        assert_eq!(parse_options(off).unwrap().request_timeout, None);
        assert!(parse_options(["--mode".to_string()].into_iter()).is_err());
        assert!(parse_options(["--speed".to_string()].into_iter()).is_err());
    }
}
