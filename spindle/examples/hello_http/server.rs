//! The `hello_http` server as a Spindle program: an accept loop that
//! starts a fiber per connection, and each connection's fiber raced
//! against a watchdog fiber that enforces its timeouts.
//!
//! It names no executor: it is written against `spindle-core` (`IO`, its
//! timers `IO::sleep` and clock `IO::monotonic`, which every executor
//! provides through the executor contract) and `spindle-net` (the sockets,
//! on the I/O capability of the executor that runs it), both through the
//! entry crate (`spindle_effect::IO`, `spindle_effect::net`). The same
//! program runs on every std executor (`hello_http --executor`).
//!
//! # A connection
//!
//! The connection's fiber reads into one buffer, finds the complete
//! requests in it ([`super::http::Framer`]), skips their bodies (never
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
//! reads. The watchdog sleeps (`IO::sleep`, on the executor's timers)
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
//! set a timer on every read that waits.
//!
//! # Handling
//!
//! With a request timeout ([`Config::request_timeout`], the default) the
//! responses to a batch of requests are built by a handler under
//! `IO::timeout_to`: a deadline region of the connection's fiber (no fiber
//! start; a timer only if the handler waits). With a fan-out
//! ([`Config::fan_out`], `hello_http --fan-out N`) the handler also starts
//! N fibers per request with `IO::par_traverse` and joins them before it
//! answers, the shape of a handler that asks N backends at once (each
//! fiber's work is trivial: what is measured is starting, scheduling and
//! joining them).
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

use super::http::{Batch, Framer, Limits, Reply, Wait, error_response, responses, unavailable};

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
    /// The bound on handling one batch of requests: the handler under
    /// `IO::timeout_to`, `503` when it runs out (`None`: the responses are
    /// built without a timeout).
    /// Default 30 s.
    pub request_timeout: Option<Duration>,
    /// Fibers the handler starts per request and joins before answering
    /// (`IO::par_traverse`); 0, the default: none.
    pub fan_out: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            limits: Limits::default(),
            header_timeout: Some(Duration::from_secs(10)),
            idle_timeout: Some(Duration::from_secs(60)),
            linger: Duration::from_secs(2),
            request_timeout: Some(Duration::from_secs(30)),
            fan_out: 0,
        }
    }
}

/// The responses to `replies`: built by the connection's fiber, at once,
/// or (with a request timeout or a fan-out) by a handler under a timeout.
fn handle(replies: Vec<Reply>, config: &Config) -> IO<Vec<u8>, io::Error> {
    let close = replies.last().is_some_and(|r| r.close);
    let handler = match config.fan_out {
        0 if config.request_timeout.is_none() => return IO::pure(responses(&replies)),
        0 => IO::delay(move || responses(&replies)),
        fan_out => {
            let parts: Vec<usize> = (0..replies.len() * fan_out).collect();
            IO::par_traverse(parts, |part| IO::delay(move || part)).map(move |parts| {
                debug_assert_eq!(parts.len(), replies.len() * fan_out);
                responses(&replies)
            })
        }
    };
    match config.request_timeout {
        None => handler,
        Some(timeout) => handler.timeout_to(timeout, IO::delay(move || unavailable(close))),
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

/// A connection's state between steps of its loop.
struct Conn {
    stream: TcpStream,
    framer: Framer,
    /// What the connection waited for at its last read (a head's timeout
    /// starts when it starts waiting for one).
    waited: Wait,
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
    config: Arc<Config>,
    deadline: Deadline,
) -> IO<ControlFlow<(), Conn>, io::Error> {
    let batch = conn.framer.take(&config.limits);
    if !batch.is_empty() {
        conn.waited = Wait::Idle;
        let Batch {
            replies,
            rejection,
            close,
        } = batch;
        return IO::monotonic().flat_map(move |now| {
            deadline.set(now, config.idle_timeout);
            let answers = if replies.is_empty() {
                IO::pure(Vec::new())
            } else {
                handle(replies, &config)
            };
            answers.flat_map(move |mut bytes| {
                if let Some(rejection) = &rejection {
                    bytes.extend_from_slice(&error_response(rejection));
                }
                let written = conn.stream.write_all(bytes);
                if rejection.is_some() {
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
    // connection started waiting for something else.
    let wait = conn.framer.waiting_for();
    let max = if wait == Wait::Body {
        SKIP_CHUNK
    } else {
        READ_CHUNK
    };
    let moved = match wait {
        // A body's every wait is bounded by the idle timeout.
        Wait::Body => Some(config.idle_timeout),
        Wait::Head if conn.waited != Wait::Head => Some(config.header_timeout),
        // Idle: set when the last response started (or at accept).
        _ => None,
    };
    conn.waited = wait;
    let read = move |mut conn: Conn| {
        let buf = std::mem::take(conn.framer.buffer());
        conn.stream.read_into(buf, max).map(move |(buf, n)| {
            if n == 0 {
                // End of stream: done, or a request cut short (closed
                // without an answer).
                ControlFlow::Break(())
            } else {
                *conn.framer.buffer() = buf;
                ControlFlow::Continue(conn)
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
    // Shared by the connection's steps: the continuations capture a
    // pointer, not the whole configuration (a closure of more than eight
    // words is a heap allocation per step).
    let shared = Arc::new(config);
    let nodelay = stream.set_nodelay(true);
    let deadline = Deadline(Arc::new(AtomicU64::new(u64::MAX)));
    let conn = Conn {
        stream,
        framer: Framer::with_capacity(READ_CHUNK),
        waited: Wait::Idle,
    };
    let serve = {
        let deadline = deadline.clone();
        IO::tail_rec(conn, move |conn| {
            step(conn, shared.clone(), deadline.clone())
        })
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
