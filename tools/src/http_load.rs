//! A closed-loop HTTP/1.1 load generator on std threads and blocking
//! sockets, shared by the `loadgen` and `http_compare` binaries.
//!
//! # How it measures
//!
//! Each of the N connections is a thread of its own with one keep-alive TCP
//! connection (`TCP_NODELAY` set) that sends `GET <path> HTTP/1.1` requests
//! back to back, with one request outstanding at a time: a *closed loop*, so
//! the offered load adapts to the server's speed, like `hey -c N -z D` with
//! which the Cats Effect discussion was measured.
//!
//! A request's latency is the time from just before its bytes are written to
//! the socket until the last byte of its response body has been read and
//! parsed (the status line, the headers, then `Content-Length` bytes or a
//! chunked body, split across reads anywhere; see [`response`]). Connecting
//! is not part of any request's latency; a connection is opened before its
//! first request and again after an error or a `Connection: close`.
//!
//! The run has two phases measured from one common start, once every
//! connection thread has been started: a warm-up (its requests are sent
//! but not recorded) and the measured window of `duration`. A request is
//! recorded if it was *written* inside the window; no request is started
//! after the window, but those still in flight at its end complete and are
//! recorded. The report's `total` is the time from the start of the window
//! until the last connection has finished, and requests/sec is the number
//! of successful (2xx) responses divided by `total`.
//!
//! An error (a failed connect, write or read, a read that times out, the
//! server closing the connection, a malformed response, or a status other
//! than 2xx) is counted by kind and the connection is reopened; after a
//! failed connect the thread waits 10 ms before the next attempt, so that
//! a server that is down is not hammered. Errors are counted only inside
//! the window. Nothing in a run panics on what a server sends.

pub mod cli;
pub mod compare;
pub mod hello_server;
pub mod response;
pub mod stats;
pub mod versus;

use core::fmt;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

pub use response::{ParseError, Progress, Response, ResponseParser};
pub use stats::{LatencyStats, percentile};

/// The most connections one run opens (one thread each).
pub const MAX_CONNECTIONS: usize = 10_000;

/// How long a connection waits after a failed connect before trying again.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// Where the requests go: a parsed `http://host[:port][/path]` URL, with the
/// host resolved once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// The resolved address of the host (the first one it resolves to).
    pub addr: SocketAddr,
    /// The `Host` header: the URL's authority (host and port as written).
    pub host: String,
    /// The request target: the URL's path and query (`/` if empty).
    pub path: String,
}

/// Why a URL cannot be a [`Target`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    /// The URL does not start with `http://` (`https` is not supported).
    Scheme(String),
    /// There is no host after `http://`, or it carries user information.
    Host(String),
    /// The port is not a number in 1..=65535.
    Port(String),
    /// The host did not resolve to any address.
    Resolve(String),
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Scheme(url) => write!(
                f,
                "{url:?} is not an http:// URL (only plain HTTP/1.1 is supported)"
            ),
            UrlError::Host(url) => write!(f, "{url:?} has no usable host"),
            UrlError::Port(port) => write!(f, "port {port:?} is not a number in 1..=65535"),
            UrlError::Resolve(why) => write!(f, "cannot resolve host: {why}"),
        }
    }
}

impl std::error::Error for UrlError {}

impl Target {
    /// Parses `http://host[:port][/path][?query]` (the port defaults to 80;
    /// an IPv6 host goes in brackets; a `#fragment` is dropped) and
    /// resolves the host.
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let rest = url
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
            .map(|_| &url[7..])
            .ok_or_else(|| UrlError::Scheme(url.to_owned()))?;
        let rest = rest.split('#').next().unwrap_or_default();
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.is_empty() || authority.contains('@') {
            return Err(UrlError::Host(url.to_owned()));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| UrlError::Host(url.into()))?;
        let port = match port {
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| UrlError::Port(p.to_owned()))?,
        };
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| UrlError::Resolve(format!("{host}: {e}")))?
            .next()
            .ok_or_else(|| UrlError::Resolve(format!("{host}: no addresses")))?;
        let path = match path {
            "" => "/".to_owned(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_owned(),
        };
        Ok(Target {
            url: url.to_owned(),
            addr,
            host: authority.to_owned(),
            path,
        })
    }

    /// The target of a server listening on `addr` (an unspecified address
    /// such as `0.0.0.0` is reached through the loopback interface).
    pub fn local(addr: SocketAddr) -> Target {
        let mut addr = addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        Target {
            url: format!("http://{addr}/"),
            addr,
            host: addr.to_string(),
            path: "/".to_owned(),
        }
    }

    /// The bytes of one request: `GET <path> HTTP/1.1` with a `Host`
    /// header (keep-alive is HTTP/1.1's default).
    pub fn request(&self) -> Vec<u8> {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: spindle-loadgen\r\nAccept: */*\r\n\r\n",
            self.path, self.host
        )
        .into_bytes()
    }
}

/// `host[:port]`, `[v6]` or `[v6]:port` into the host (without brackets)
/// and the port text.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        return (!host.is_empty()).then_some((host, port));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    (!host.is_empty() && !host.contains(':')).then_some((host, port))
}

/// One load run's parameters.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Where the requests go.
    pub target: Target,
    /// How many connections (threads), each with one request outstanding.
    pub connections: usize,
    /// The measured window.
    pub duration: Duration,
    /// The unrecorded warm-up before the window.
    pub warmup: Duration,
    /// The connect, read and write timeout of each socket operation; a
    /// request that waits longer is a [`ErrorKind::Timeout`].
    pub timeout: Duration,
}

impl LoadConfig {
    /// `connections` connections to `target` for `duration`, without a
    /// warm-up, with a 10 s socket timeout.
    pub fn new(target: Target, connections: usize, duration: Duration) -> LoadConfig {
        LoadConfig {
            target,
            connections,
            duration,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(10),
        }
    }
}

/// What went wrong with a request (or with opening its connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Opening the connection failed (or its thread could not start).
    Connect,
    /// Writing the request failed.
    Write,
    /// Reading the response failed.
    Read,
    /// A connect, write or read took longer than the timeout.
    Timeout,
    /// The server closed the connection before (or while) responding.
    Closed,
    /// The response is not valid HTTP/1.1, or bytes came after it.
    BadResponse,
    /// A complete response whose status is not 2xx.
    Status,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::Connect,
        ErrorKind::Write,
        ErrorKind::Read,
        ErrorKind::Timeout,
        ErrorKind::Closed,
        ErrorKind::BadResponse,
        ErrorKind::Status,
    ];

    /// The kind's name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Write => "write",
            ErrorKind::Read => "read",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::Status => "status",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Errors counted by kind, with the first message of each kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    counts: [u64; ErrorKind::ALL.len()],
    first: [Option<String>; ErrorKind::ALL.len()],
}

impl ErrorCounts {
    /// Counts one error of `kind`; `message` is kept if it is the first.
    pub fn record(&mut self, kind: ErrorKind, message: impl FnOnce() -> String) {
        let i = kind.index();
        self.counts[i] += 1;
        if self.first[i].is_none() {
            self.first[i] = Some(message());
        }
    }

    /// All errors of every kind.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The errors of one kind.
    pub fn count(&self, kind: ErrorKind) -> u64 {
        self.counts[kind.index()]
    }

    /// The first error message of one kind, if any occurred.
    pub fn first_message(&self, kind: ErrorKind) -> Option<&str> {
        self.first[kind.index()].as_deref()
    }

    /// Adds another set of counts (keeping this set's first messages).
    pub fn merge(&mut self, other: ErrorCounts) {
        for (i, message) in other.first.into_iter().enumerate() {
            self.counts[i] += other.counts[i];
            if self.first[i].is_none() {
                self.first[i] = message;
            }
        }
    }
}

/// The result of a load run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// The URL that was loaded.
    pub url: String,
    /// The connections used.
    pub connections: usize,
    /// The configured measured window.
    pub duration: Duration,
    /// The configured warm-up.
    pub warmup: Duration,
    /// From the start of the window until the last connection finished
    /// (a little over `duration`: requests in flight at its end complete).
    pub total: Duration,
    /// Successful (2xx) responses to requests written inside the window.
    pub requests: u64,
    /// Errors inside the window.
    pub errors: ErrorCounts,
    /// The latencies of the successful requests; `None` if there were none.
    pub latency: Option<LatencyStats>,
}

impl LoadReport {
    /// Successful responses per second of `total`.
    pub fn requests_per_sec(&self) -> f64 {
        let secs = self.total.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// Whether not a single request succeeded.
    pub fn all_failed(&self) -> bool {
        self.requests == 0
    }

    /// The summary as `hey` prints it (seconds), with p50, p99, the request
    /// count and the errors by kind.
    pub fn summary(&self) -> String {
        let mut out = String::from("Summary:\n");
        let secs = |d: Option<Duration>| match d {
            Some(d) => format!("{:.6} secs", d.as_secs_f64()),
            None => "n/a".to_owned(),
        };
        let l = self.latency;
        let rows = [
            ("Total:", format!("{:.4} secs", self.total.as_secs_f64())),
            ("Slowest:", secs(l.map(|l| l.slowest))),
            ("Fastest:", secs(l.map(|l| l.fastest))),
            ("Average:", secs(l.map(|l| l.average))),
            ("Requests/sec:", format!("{:.4}", self.requests_per_sec())),
            ("p50:", secs(l.map(|l| l.p50))),
            ("p99:", secs(l.map(|l| l.p99))),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "  {name:<14}{value}");
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:<14}{} ({}, {:.1} s after {:.1} s warm-up, {})",
            "Requests:",
            self.requests,
            connections_label(self.connections),
            self.duration.as_secs_f64(),
            self.warmup.as_secs_f64(),
            self.url
        );
        let _ = writeln!(out, "  {:<14}{}", "Errors:", self.errors.total());
        for kind in ErrorKind::ALL {
            let n = self.errors.count(kind);
            if n > 0 {
                let first = self.errors.first_message(kind).unwrap_or_default();
                let _ = writeln!(out, "    {:<12}{n} (first: {first})", kind.name());
            }
        }
        out
    }

    /// The report as one JSON object: durations in seconds (`null` where
    /// no request succeeded), errors by kind with their first messages.
    pub fn to_json(&self) -> String {
        let secs = |d: Option<Duration>| match d {
            Some(d) => format!("{:.9}", d.as_secs_f64()),
            None => "null".to_owned(),
        };
        let l = self.latency;
        let mut kinds = String::new();
        let mut firsts = String::new();
        for kind in ErrorKind::ALL {
            let sep = if kinds.is_empty() { "" } else { ", " };
            let _ = write!(
                kinds,
                "{sep}\"{}\": {}",
                kind.name(),
                self.errors.count(kind)
            );
            if let Some(first) = self.errors.first_message(kind) {
                let sep = if firsts.is_empty() { "" } else { ", " };
                let _ = write!(firsts, "{sep}\"{}\": {}", kind.name(), json_string(first));
            }
        }
        format!(
            "{{\"url\": {}, \"connections\": {}, \"duration_secs\": {}, \"warmup_secs\": {}, \
             \"total_secs\": {}, \"requests\": {}, \"errors\": {}, \"requests_per_sec\": {:.4}, \
             \"slowest_secs\": {}, \"fastest_secs\": {}, \"average_secs\": {}, \
             \"p50_secs\": {}, \"p99_secs\": {}, \"error_kinds\": {{{kinds}}}, \
             \"first_errors\": {{{firsts}}}}}",
            json_string(&self.url),
            self.connections,
            secs(Some(self.duration)),
            secs(Some(self.warmup)),
            secs(Some(self.total)),
            self.requests,
            self.errors.total(),
            self.requests_per_sec(),
            secs(l.map(|l| l.slowest)),
            secs(l.map(|l| l.fastest)),
            secs(l.map(|l| l.average)),
            secs(l.map(|l| l.p50)),
            secs(l.map(|l| l.p99)),
        )
    }
}

/// `1 connection`, `50 connections`.
pub(crate) fn connections_label(n: usize) -> String {
    if n == 1 {
        "1 connection".to_owned()
    } else {
        format!("{n} connections")
    }
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What one connection thread brings back.
struct ConnectionResult {
    latencies: Vec<u64>,
    errors: ErrorCounts,
    finished: Instant,
}

/// Runs the load that `config` describes and reports it; blocks for the
/// warm-up plus the window (plus the tail of the last requests).
pub fn run_load(config: &LoadConfig) -> LoadReport {
    run_load_observed(config, &mut |_| {})
}

/// The edges of a run's measured interval, as [`run_load_observed`]
/// reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowEdge {
    /// The measured window begins (the warm-up is over).
    Start,
    /// Every connection has finished: the end of the report's `total`.
    End,
}

/// [`run_load`], calling `observe` on the runner's thread at the start of
/// the measured window and once every connection has finished, so that
/// the caller can sample what it measures alongside (the server's CPU
/// time, say) over the same interval as the report's `total`.
pub fn run_load_observed(config: &LoadConfig, observe: &mut dyn FnMut(WindowEdge)) -> LoadReport {
    let request = config.target.request();
    let start: OnceLock<Instant> = OnceLock::new();
    let gate = RwLock::new(());
    let mut results = Vec::with_capacity(config.connections);
    let mut spawn_errors = ErrorCounts::default();

    std::thread::scope(|scope| {
        // Every thread waits at the gate until all have been started, so
        // that the phases begin at the same instant for all.
        let closed = gate.write().unwrap_or_else(PoisonError::into_inner);
        let mut handles = Vec::with_capacity(config.connections);
        for i in 0..config.connections {
            let (request, start, gate) = (&request, &start, &gate);
            let spawned = std::thread::Builder::new()
                .name(format!("loadgen-{i}"))
                .spawn_scoped(scope, move || {
                    drop(gate.read().unwrap_or_else(PoisonError::into_inner));
                    let t0 = *start.get().expect("the start is set before the gate opens");
                    connection(config, request, t0)
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => spawn_errors.record(ErrorKind::Connect, || {
                    format!("cannot start connection thread {i}: {e}")
                }),
            }
        }
        let _ = start.set(Instant::now());
        drop(closed);
        if let Some(&t0) = start.get() {
            std::thread::sleep((t0 + config.warmup).saturating_duration_since(Instant::now()));
        }
        observe(WindowEdge::Start);
        for handle in handles {
            match handle.join() {
                Ok(result) => results.push(result),
                Err(_) => spawn_errors.record(ErrorKind::Connect, || {
                    "a connection thread panicked".to_owned()
                }),
            }
        }
        observe(WindowEdge::End);
    });

    let t0 = start.get().copied().unwrap_or_else(Instant::now);
    let window_start = t0 + config.warmup;
    let mut latencies = Vec::with_capacity(results.iter().map(|r| r.latencies.len()).sum());
    let mut errors = spawn_errors;
    let mut last = window_start;
    for result in results {
        latencies.extend_from_slice(&result.latencies);
        errors.merge(result.errors);
        last = last.max(result.finished);
    }
    LoadReport {
        url: config.target.url.clone(),
        connections: config.connections,
        duration: config.duration,
        warmup: config.warmup,
        total: last.saturating_duration_since(window_start),
        requests: latencies.len() as u64,
        errors,
        latency: LatencyStats::from_nanos(&mut latencies),
    }
}

/// One connection's closed loop (see the module documentation).
fn connection(config: &LoadConfig, request: &[u8], t0: Instant) -> ConnectionResult {
    let window_start = t0 + config.warmup;
    let end = window_start + config.duration;
    let mut latencies = Vec::new();
    let mut errors = ErrorCounts::default();
    let mut parser = ResponseParser::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut stream: Option<TcpStream> = None;

    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let conn = match &mut stream {
            Some(conn) => conn,
            None => match connect(config) {
                Ok(conn) => stream.insert(conn),
                Err(e) => {
                    if now >= window_start {
                        errors.record(io_kind(&e, ErrorKind::Connect), || {
                            format!("connect to {}: {e}", config.target.addr)
                        });
                    }
                    std::thread::sleep(CONNECT_BACKOFF.min(end.saturating_duration_since(now)));
                    continue;
                }
            },
        };
        let sent = Instant::now();
        let outcome = exchange(conn, request, &mut parser, &mut buf);
        let done = Instant::now();
        let recorded = sent >= window_start;
        match outcome {
            Ok(response) => {
                if response.close {
                    stream = None;
                }
                if !(200..300).contains(&response.status) {
                    if recorded {
                        errors.record(ErrorKind::Status, || format!("status {}", response.status));
                    }
                } else if recorded {
                    let nanos = done.duration_since(sent).as_nanos();
                    latencies.push(u64::try_from(nanos).unwrap_or(u64::MAX));
                }
            }
            Err((kind, message)) => {
                stream = None;
                if recorded {
                    errors.record(kind, || message);
                }
            }
        }
    }
    ConnectionResult {
        latencies,
        errors,
        finished: Instant::now(),
    }
}

fn connect(config: &LoadConfig) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&config.target.addr, config.timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(config.timeout))?;
    stream.set_write_timeout(Some(config.timeout))?;
    Ok(stream)
}

/// A timeout is its own kind whatever the operation.
fn io_kind(e: &io::Error, otherwise: ErrorKind) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ErrorKind::Timeout,
        _ => otherwise,
    }
}

/// Writes one request and reads its response.
fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    parser: &mut ResponseParser,
    buf: &mut [u8],
) -> Result<Response, (ErrorKind, String)> {
    parser.reset();
    stream
        .write_all(request)
        .map_err(|e| (io_kind(&e, ErrorKind::Write), format!("write: {e}")))?;
    loop {
        let n = match stream.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err((io_kind(&e, ErrorKind::Read), format!("read: {e}"))),
        };
        if n == 0 {
            if parser.is_idle() {
                return Err((
                    ErrorKind::Closed,
                    "the server closed the connection without responding".to_owned(),
                ));
            }
            return parser.eof().map_err(|e| (ErrorKind::Closed, e.to_string()));
        }
        match parser.feed(&buf[..n]) {
            Ok(Progress::NeedMore) => {}
            Ok(Progress::Done { response, consumed }) if consumed == n => return Ok(response),
            Ok(Progress::Done { consumed, .. }) => {
                return Err((
                    ErrorKind::BadResponse,
                    format!("{} unexpected bytes after the response", n - consumed),
                ));
            }
            Err(e) => return Err((ErrorKind::BadResponse, e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hello_server::{HelloServer, ServerOptions};

    fn local(url: &str) -> Target {
        Target::parse(url).expect("valid URL")
    }

    #[test]
    fn a_url_gives_the_address_the_host_header_and_the_path() {
        let t = local("http://127.0.0.1:8080/hello?x=1#frag");
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(t.path, "/hello?x=1");
        let t = local("HTTP://127.0.0.1");
        assert_eq!((t.addr.port(), t.path.as_str()), (80, "/"));
        let t = local("http://[::1]:9000?q");
        assert_eq!(t.addr, "[::1]:9000".parse().unwrap());
        assert_eq!(t.path, "/?q");
    }

    #[test]
    fn unusable_urls_are_errors_that_say_why() {
        let kind = |url: &str| match Target::parse(url) {
            Err(UrlError::Scheme(_)) => "scheme",
            Err(UrlError::Host(_)) => "host",
            Err(UrlError::Port(_)) => "port",
            Err(UrlError::Resolve(_)) => "resolve",
            Ok(_) => "ok",
        };
        for (url, expected) in [
            ("https://127.0.0.1/", "scheme"),
            ("127.0.0.1:80", "scheme"),
            ("http:///", "host"),
            ("http://u@127.0.0.1/", "host"),
            ("http://[::1/", "host"),
            ("http://127.0.0.1:99999/", "port"),
            ("http://127.0.0.1:0/", "port"),
        ] {
            assert_eq!(kind(url), expected, "{url}");
        }
        let err = Target::parse("ftp://x/").unwrap_err().to_string();
        assert!(err.contains("http://"), "{err}");
    }

    #[test]
    fn a_server_bound_to_every_interface_is_reached_on_loopback() {
        let t = Target::local("0.0.0.0:4000".parse().unwrap());
        assert_eq!(t.addr, "127.0.0.1:4000".parse().unwrap());
        assert_eq!(t.request(), local("http://127.0.0.1:4000/").request());
    }

    #[test]
    fn the_request_is_a_keep_alive_get_with_a_host_header() {
        let req = local("http://127.0.0.1:81/a").request();
        let text = String::from_utf8(req).unwrap();
        assert!(text.starts_with("GET /a HTTP/1.1\r\nHost: 127.0.0.1:81\r\n"));
        assert!(text.ends_with("\r\n\r\n"));
        assert!(!text.to_ascii_lowercase().contains("connection: close"));
    }

    #[test]
    fn error_counts_keep_the_first_message_of_each_kind_when_merged() {
        let mut a = ErrorCounts::default();
        a.record(ErrorKind::Read, || "first".into());
        a.record(ErrorKind::Read, || "second".into());
        let mut b = ErrorCounts::default();
        b.record(ErrorKind::Read, || "other".into());
        b.record(ErrorKind::Status, || "status 500".into());
        a.merge(b);
        assert_eq!(a.count(ErrorKind::Read), 3);
        assert_eq!(a.first_message(ErrorKind::Read), Some("first"));
        assert_eq!(a.first_message(ErrorKind::Status), Some("status 500"));
        assert_eq!(a.total(), 4);
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn every_request_the_server_answers_is_counted_once() {
        let server = HelloServer::start(ServerOptions {
            max_requests: Some(40),
            ..ServerOptions::default()
        })
        .unwrap();
        let mut config =
            LoadConfig::new(Target::local(server.addr()), 2, Duration::from_millis(300));
        config.timeout = Duration::from_secs(2);
        let report = run_load(&config);
        assert_eq!(report.requests, 40, "{}", report.summary());
        assert_eq!(server.served(), 40);
        // Once the server stops answering, every further attempt fails.
        assert!(report.errors.total() >= 1, "{}", report.summary());
        let latency = report.latency.unwrap();
        assert_eq!(latency.count, 40);
        assert!(latency.fastest <= latency.p50 && latency.p50 <= latency.p99);
        assert!(latency.p99 <= latency.slowest);
        assert!(report.total >= config.duration);
    }

    #[test]
    fn a_chunked_server_is_loaded_as_well_as_a_content_length_one() {
        let server = HelloServer::start(ServerOptions {
            chunked: true,
            ..ServerOptions::default()
        })
        .unwrap();
        let report = run_load(&LoadConfig::new(
            Target::local(server.addr()),
            3,
            Duration::from_millis(150),
        ));
        assert!(report.requests > 0);
        assert_eq!(report.errors.total(), 0, "{}", report.summary());
        assert_eq!(report.requests, server.served());
    }

    #[test]
    fn the_window_is_observed_at_its_start_after_the_warm_up_and_at_its_end() {
        let server = HelloServer::start(ServerOptions::default()).unwrap();
        let mut config =
            LoadConfig::new(Target::local(server.addr()), 1, Duration::from_millis(100));
        config.warmup = Duration::from_millis(100);
        let began = Instant::now();
        let mut edges = Vec::new();
        let report = run_load_observed(&config, &mut |edge| edges.push((edge, began.elapsed())));
        assert_eq!(edges.len(), 2, "{edges:?}");
        assert_eq!(
            (edges[0].0, edges[1].0),
            (WindowEdge::Start, WindowEdge::End)
        );
        assert!(edges[0].1 >= config.warmup, "{edges:?}");
        // The end comes after the measured window has ended (the start is
        // observed once the warm-up has passed, which a sleep may overrun
        // by a little: the edges' distance itself is not the window).
        assert!(edges[1].1 >= config.warmup + config.duration, "{edges:?}");
        assert!(report.requests > 0);
    }

    #[test]
    fn requests_during_the_warm_up_are_sent_but_not_recorded() {
        let server = HelloServer::start(ServerOptions::default()).unwrap();
        let mut config =
            LoadConfig::new(Target::local(server.addr()), 1, Duration::from_millis(100));
        config.warmup = Duration::from_millis(100);
        let report = run_load(&config);
        assert!(report.requests > 0);
        assert!(
            server.served() > report.requests,
            "served {} recorded {}",
            server.served(),
            report.requests
        );
    }

    #[test]
    fn a_refused_connection_is_counted_as_a_connect_error_and_nothing_succeeds() {
        // A port that was just free: bind, read it, close.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let report = run_load(&LoadConfig::new(
            Target::local(addr),
            2,
            Duration::from_millis(60),
        ));
        assert!(report.all_failed());
        assert!(report.errors.count(ErrorKind::Connect) >= 2);
        assert_eq!(report.latency, None);
        assert!(report.to_json().contains("\"p50_secs\": null"));
    }

    #[test]
    fn non_2xx_statuses_are_errors_not_latencies() {
        let server = HelloServer::start(ServerOptions {
            status: 503,
            ..ServerOptions::default()
        })
        .unwrap();
        let report = run_load(&LoadConfig::new(
            Target::local(server.addr()),
            1,
            Duration::from_millis(50),
        ));
        assert_eq!(report.requests, 0);
        assert!(report.errors.count(ErrorKind::Status) > 0);
        assert_eq!(
            report.errors.first_message(ErrorKind::Status),
            Some("status 503")
        );
    }
}
