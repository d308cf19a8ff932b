//! The `hello_http` server as a Spindle program: an accept loop that
//! starts a fiber per connection, and each connection's fiber raced
//! against a watchdog fiber that enforces its timeouts.
//!
//! # A connection
//!
//! The connection's fiber reads into one buffer, finds the complete
//! requests in it ([`crate::http::Scanner`]), skips their bodies (never
//! buffered: a body costs no memory beyond one read), and answers every
//! complete request with one write (pipelined requests in order). A
//! request the parser refuses is answered with its error status and
//! `Connection: close` after the answers to the requests before it; the
//! server then shuts its side down and *lingers*: it reads and discards
//! what the client still sends, for at most [`Config::linger`], so that the
//! client's unread bytes do not make the system reset the connection
//! before the error response is read. End of stream mid-request (a body
//! cut short, a partial head) closes the connection without an answer; a
//! reset ends only that connection's fiber.
//!
//! # Timeouts
//!
//! Each connection has a *deadline* on the executor's monotonic clock,
//! kept in an atomic the connection's fiber updates and a watchdog fiber
//! reads. The watchdog sleeps (`IO::sleep`, on the event loop's timers)
//! until the deadline, rechecks it, and completes once the clock passes it;
//! the connection's fiber and the watchdog run under `IO::race`, so the
//! connection is then canceled (its pending read or write is withdrawn
//! from the reactor) and its socket closed. The deadline is
//!
//! * the *idle* timeout from when the last response was started (or the
//!   connection accepted), while no request has begun; it also bounds a
//!   write the client does not read and each wait for more of a body;
//! * the *header* timeout from when the first byte of a head arrived,
//!   not moved by later bytes: a client trickling a head is closed once it
//!   runs out, however steadily it trickles.
//!
//! The watchdog never sleeps longer than the shorter of the two timeouts,
//! so a deadline moved earlier (an idle connection that starts a head) is
//! still met on time; a busy connection costs one timer per that period,
//! not one per request. A per-read `IO::timeout` would be simpler and
//! start two fibers per read.
//!
//! # Accepting
//!
//! A failed `accept` (out of descriptors, say: the pending connection stays
//! queued and the listener stays readable) backs off, sleeping from
//! [`ACCEPT_BACKOFF_MIN`] doubling up to [`ACCEPT_BACKOFF_MAX`], and is
//! logged at most once per [`ACCEPT_LOG_INTERVAL`] with the count of the
//! failures not shown. The first success resets the backoff.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spindle_effect::IO;
use spindle_effect::net::{TcpListener, TcpStream};

use crate::http::{Limits, Parse, Rejection, Request, Scanner};

/// The body of every `200 OK`.
pub const BODY: &[u8] = b"Hello, World!";
/// Bytes asked of one read while reading heads.
const READ_CHUNK: usize = 4096;
/// Bytes asked of one read while skipping a body.
const SKIP_CHUNK: usize = 64 * 1024;
/// The shortest sleep after a failed accept.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest sleep after failed accepts in a row.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// At most one log line about failed accepts per this period.
pub const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// What the server enforces. [`Config::default`] is what `hello_http`
/// runs with unless its command line says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Head and body limits.
    pub limits: Limits,
    /// How long a head may take to arrive from its first byte (`None`:
    /// no bound). Default 10 s.
    pub header_timeout: Option<Duration>,
    /// How long a connection may stay idle between requests, a response
    /// may wait for the client to read it, or a body may wait for its next
    /// bytes (`None`: no bound). Default 60 s.
    pub idle_timeout: Option<Duration>,
    /// How long to drain a client's bytes after an error response before
    /// closing. Default 2 s.
    pub linger: Duration,
    /// The bound on handling one batch of requests: a handler fiber raced
    /// against a timer, `503` when it runs out (`None`: the connection's
    /// fiber builds the responses itself). Default 30 s.
    pub request_timeout: Option<Duration>,
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

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n";
const OK_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 13\r\n\r\n";
const OK_KEEP_ALIVE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\nContent-Length: 13\r\n\r\n";

/// How to answer one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reply {
    close: bool,
    http10: bool,
    head_method: bool,
}

impl Reply {
    fn of(request: &Request) -> Reply {
        Reply {
            close: request.close,
            http10: request.http10,
            head_method: request.head_method,
        }
    }

    fn write_to(self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self.close {
            OK_CLOSE
        } else if self.http10 {
            OK_KEEP_ALIVE
        } else {
            OK
        });
        if !self.head_method {
            out.extend_from_slice(BODY);
        }
    }
}

/// The error response to a refused request (it always closes).
pub fn error_response(rejection: &Rejection) -> Vec<u8> {
    let body = format!("{}\n", rejection.reason);
    format!(
        "HTTP/1.1 {}\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        rejection.status.line(),
        body.len()
    )
    .into_bytes()
}

/// The answer to requests whose handler ran out of time.
fn unavailable(close: bool) -> Vec<u8> {
    let mut out = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n".to_vec();
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn responses(replies: &[Reply]) -> Vec<u8> {
    let mut out = Vec::with_capacity(replies.len() * (OK_KEEP_ALIVE.len() + BODY.len()));
    for reply in replies {
        reply.write_to(&mut out);
    }
    out
}

/// The responses to `replies`: built by the connection's fiber, or (with
/// a request timeout) by a handler fiber raced against a timer.
fn handle(replies: Vec<Reply>, timeout: Option<Duration>) -> IO<Vec<u8>, io::Error> {
    match timeout {
        None => IO::pure(responses(&replies)),
        Some(timeout) => {
            let close = replies.last().is_some_and(|r| r.close);
            IO::delay(move || responses(&replies))
                .timeout_to(timeout, IO::delay(move || unavailable(close)))
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A connection's deadline, in nanoseconds of the executor's monotonic
/// clock (`u64::MAX`: none).
#[derive(Clone)]
struct Deadline(Arc<AtomicU64>);

impl Deadline {
    fn set(&self, now: Duration, after: Option<Duration>) {
        let at = after.map_or(u64::MAX, |after| nanos(now).saturating_add(nanos(after)));
        self.0.store(at, Ordering::Relaxed);
    }
}

/// Completes once the clock passes `deadline`, checking at least every
/// `period`.
fn watchdog(deadline: Deadline, period: Duration) -> IO<(), io::Error> {
    IO::tail_rec((), move |()| {
        let deadline = deadline.clone();
        IO::monotonic().flat_map(move |now| {
            let at = deadline.0.load(Ordering::Relaxed);
            let now = nanos(now);
            if now >= at {
                IO::pure(ControlFlow::Break(()))
            } else {
                let left = Duration::from_nanos(at - now).min(period);
                IO::sleep(left).map_to(ControlFlow::Continue(()))
            }
        })
    })
}

/// Where a connection is between reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No request begun (the idle deadline runs).
    Idle,
    /// Part of a head buffered (the header deadline runs).
    Head,
    /// Skipping a body.
    Body,
}

/// A connection's state between steps of its loop.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    scanner: Scanner,
    /// The request whose body is being skipped, and the bytes left of it.
    pending: Option<(Reply, u64)>,
    phase: Phase,
}

/// What one look at the buffer found.
struct Step {
    replies: Vec<Reply>,
    rejection: Option<Rejection>,
    /// The last reply closes the connection.
    close: bool,
}

/// Takes the complete requests (and skipped body bytes) off the front of
/// the buffer.
fn take_requests(conn: &mut Conn, limits: &Limits) -> Step {
    let mut step = Step {
        replies: Vec::new(),
        rejection: None,
        close: false,
    };
    let mut consumed = 0usize;
    loop {
        if let Some((reply, left)) = conn.pending.as_mut() {
            let available = conn.buf.len() - consumed;
            let take = usize::try_from(*left).map_or(available, |left| left.min(available));
            consumed += take;
            *left -= take as u64;
            if *left > 0 {
                break;
            }
            let reply = *reply;
            conn.pending = None;
            step.replies.push(reply);
            if reply.close {
                step.close = true;
                break;
            }
        }
        match conn.scanner.feed(&conn.buf[consumed..], limits) {
            Parse::Partial => break,
            Parse::Rejected(rejection) => {
                step.rejection = Some(rejection);
                break;
            }
            Parse::Complete(request) => {
                conn.scanner.reset();
                consumed += request.head_len;
                conn.pending = Some((Reply::of(&request), request.body_len));
            }
        }
    }
    conn.buf.drain(..consumed);
    step
}

/// Reads and discards until end of stream, an error, or `linger` passes.
fn linger(stream: TcpStream, linger: Duration) -> IO<(), io::Error> {
    let drain = IO::tail_rec((stream, Vec::new()), |(stream, mut buf)| {
        buf.clear();
        stream.read_into(buf, SKIP_CHUNK).map(move |(buf, n)| {
            if n == 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue((stream, buf))
            }
        })
    });
    drain.attempt().void().timeout_to(linger, IO::unit())
}

/// One step of a connection: answer what is complete, or read more.
fn step(
    mut conn: Conn,
    config: Config,
    deadline: Deadline,
) -> IO<ControlFlow<(), Conn>, io::Error> {
    let found = take_requests(&mut conn, &config.limits);
    if !found.replies.is_empty() || found.rejection.is_some() {
        conn.phase = Phase::Idle;
        let Step {
            replies,
            rejection,
            close,
        } = found;
        return IO::monotonic().flat_map(move |now| {
            deadline.set(now, config.idle_timeout);
            let answers = if replies.is_empty() {
                IO::pure(Vec::new())
            } else {
                handle(replies, config.request_timeout)
            };
            answers.flat_map(move |mut bytes| {
                if let Some(rejection) = &rejection {
                    bytes.extend_from_slice(&error_response(rejection));
                }
                let written = conn.stream.write_all(bytes);
                if let Some(_rejection) = rejection {
                    let shutdown = conn.stream.shutdown(Shutdown::Write);
                    written
                        .product_r(shutdown)
                        .product_r(linger(conn.stream, config.linger))
                        .map_to(ControlFlow::Break(()))
                } else if close {
                    let shutdown = conn.stream.shutdown(Shutdown::Write);
                    written.product_r(shutdown).map_to(ControlFlow::Break(()))
                } else {
                    written.map(move |()| ControlFlow::Continue(conn))
                }
            })
        });
    }
    // Nothing to answer yet: read more, first moving the deadline if the
    // connection entered a phase.
    let (phase, max) = if conn.pending.is_some() {
        (Phase::Body, SKIP_CHUNK)
    } else if conn.buf.is_empty() {
        (Phase::Idle, READ_CHUNK)
    } else {
        (Phase::Head, READ_CHUNK)
    };
    let moved = match phase {
        // A body's every wait is bounded by the idle timeout.
        Phase::Body => Some(config.idle_timeout),
        Phase::Head if conn.phase != Phase::Head => Some(config.header_timeout),
        // Idle: set when the last response started (or at accept).
        _ => None,
    };
    conn.phase = phase;
    let read = move |conn: Conn| {
        let Conn {
            stream,
            buf,
            scanner,
            pending,
            phase,
        } = conn;
        stream.read_into(buf, max).map(move |(buf, n)| {
            if n == 0 {
                // End of stream: done, or a request cut short (closed
                // without an answer).
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(Conn {
                    stream,
                    buf,
                    scanner,
                    pending,
                    phase,
                })
            }
        })
    };
    match moved {
        None => read(conn),
        Some(after) => IO::monotonic().flat_map(move |now| {
            deadline.set(now, after);
            read(conn)
        }),
    }
}

/// Serves one connection until the peer closes it, asks to, breaks the
/// protocol or runs out of time.
pub fn connection(stream: TcpStream, config: Config) -> IO<(), io::Error> {
    let nodelay = stream.set_nodelay(true);
    let deadline = Deadline(Arc::new(AtomicU64::new(u64::MAX)));
    let conn = Conn {
        stream,
        buf: Vec::with_capacity(READ_CHUNK),
        scanner: Scanner::new(),
        pending: None,
        phase: Phase::Idle,
    };
    let serve = {
        let deadline = deadline.clone();
        IO::tail_rec(conn, move |conn| step(conn, config, deadline.clone()))
    };
    let period = match (config.header_timeout, config.idle_timeout) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let Some(period) = period else {
        return nodelay.product_r(serve);
    };
    let start = {
        let deadline = deadline.clone();
        IO::monotonic().map(move |now| deadline.set(now, config.idle_timeout))
    };
    let period = period.max(Duration::from_millis(1));
    nodelay
        .product_r(start)
        .product_r(serve.race(watchdog(deadline, period)))
        .void()
}

/// What the accept loop carries from one accept to the next.
struct Accepting {
    listener: TcpListener,
    /// The next sleep after a failure (zero after a success).
    backoff: Duration,
    /// When a failure was last logged.
    last_log: Option<Duration>,
    /// Failures since then not logged.
    suppressed: u64,
}

/// Accepts forever, starting a fiber per connection; failed accepts back
/// off and are logged at a bounded rate.
pub fn accept_loop(listener: TcpListener, config: Config) -> IO<(), io::Error> {
    let state = Accepting {
        listener,
        backoff: Duration::ZERO,
        last_log: None,
        suppressed: 0,
    };
    IO::tail_rec(state, move |mut state| {
        state
            .listener
            .accept()
            .attempt()
            .flat_map(move |accepted| match accepted {
                // A connection's error (a reset peer) ends only its fiber.
                Ok((stream, _)) => {
                    state.backoff = Duration::ZERO;
                    connection(stream, config)
                        .attempt()
                        .void()
                        .start()
                        .map_to(ControlFlow::<(), _>::Continue(state))
                }
                Err(e) => IO::monotonic().flat_map(move |now| {
                    let due = state
                        .last_log
                        .is_none_or(|last| now.saturating_sub(last) >= ACCEPT_LOG_INTERVAL);
                    if due {
                        if state.suppressed > 0 {
                            eprintln!(
                                "hello_http: accept failed: {e} ({} more failures since the last report)",
                                state.suppressed
                            );
                        } else {
                            eprintln!("hello_http: accept failed: {e}");
                        }
                        state.last_log = Some(now);
                        state.suppressed = 0;
                    } else {
                        state.suppressed = state.suppressed.saturating_add(1);
                    }
                    state.backoff = (state.backoff * 2).clamp(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
                    IO::sleep(state.backoff).map_to(ControlFlow::Continue(state))
                }),
            })
    })
}

/// Binds `addr`, calls `bound` with the address actually bound, then
/// accepts forever.
pub fn server<F>(addr: SocketAddr, config: Config, bound: F) -> IO<(), io::Error>
where
    F: FnOnce(SocketAddr) -> io::Result<()> + Send + 'static,
{
    TcpListener::bind(addr).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let announce = IO::defer(move || match bound(addr) {
                Ok(()) => IO::unit(),
                Err(e) => IO::raise_error(e),
            });
            announce.product_r(accept_loop(listener, config))
        })
    })
}
