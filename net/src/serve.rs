//! The accept loop of a server: [`serve`], configured by [`ServeConfig`],
//! over any [`Listener`] ([`TcpListener`](crate::TcpListener),
//! [`UnixListener`](crate::UnixListener)).
//!
//! # What it does
//!
//! `serve(listener, config, shutdown, handler)` accepts connections and
//! runs `handler(stream, peer)` for each on a fiber of its own, at most
//! [`max_connections`](ServeConfigBuilder::max_connections) at once, until
//! `shutdown` completes; then it shuts down gracefully and completes with
//! a [`ServeSummary`] of what it served.
//!
//! * **The limit waits before accepting.** A permit (a `Semaphore` of
//!   `max_connections`) is taken *before* each `accept`, and given back
//!   when that connection's fiber ends, so with the limit reached the
//!   server stops accepting: new clients wait in the listener's backlog
//!   (the kernel completes their handshake, up to
//!   [`LISTEN_BACKLOG`](crate::LISTEN_BACKLOG)) and are served as soon as
//!   a connection ends, in order. This is what tokio servers built on a
//!   semaphore do (mini-redis, tower's concurrency limit), and what a
//!   client of such a server expects: a slow start, not a closed
//!   connection.
//! * **One fiber per connection, under a `Supervisor`.** A handler's
//!   failure is its own: an error or a panic is counted
//!   ([`ServeSummary::failed`], [`panicked`](ServeSummary::panicked)),
//!   reported to the [`on_error`](ServeConfigBuilder::on_error) hook, and
//!   the server keeps serving. The handler is called on the connection's
//!   fiber, so a panic while it builds its program is that connection's
//!   too. The stream is the handler's: it closes when the handler's
//!   program is done with it (a handler that fails on malformed input
//!   closes the connection and leaks nothing).
//! * **Accept errors** never stop the server, except the ones that say the
//!   listener itself is unusable. A connection that failed before it was
//!   accepted (`ECONNABORTED`, a reset, the network errors Linux hands on)
//!   is counted and the loop accepts again at once; running out of
//!   descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) is
//!   counted, and the loop sleeps [`accept_backoff`](ServeConfigBuilder::accept_backoff)
//!   before it tries again (the pending connection stays in the backlog);
//!   a listener that is not one any more (`EBADF`, `EINVAL`, `ENOTSOCK`) or
//!   an executor whose I/O is gone ends the loop: the server then shuts
//!   down as below and fails with that error.
//!
//! # Graceful shutdown
//!
//! When `shutdown` completes (a `Deferred::get`, an `IO::sleep`, any
//! program that ends when it is time to stop; `IO::never()` for a server
//! that stops only when canceled):
//!
//! 1. the accept loop is canceled: no connection is accepted after it (a
//!    connection accepted at that very moment is closed unserved), and its
//!    clone of the listener is dropped (the listener closes if it was the
//!    last handle: clients then see their connection refused);
//! 2. the connections still running get the [grace period](ServeConfigBuilder::grace_period)
//!    to finish on their own;
//! 3. the ones still running after it are canceled, and `serve` waits
//!    until every connection's fiber has ended: every finalizer has run,
//!    exactly once;
//! 4. `serve` completes with the [`ServeSummary`].
//!
//! Handlers do not see the trigger: a handler that should wind down early
//! (finish its request and close) waits for the same signal itself (hand
//! it a clone of the `Deferred` whose `get` is the trigger).
//!
//! Canceling `serve` itself is a *hard* stop: accepting stops and every
//! connection is canceled at once (their finalizers run, exactly once)
//! before the cancellation completes; there is no grace period.
//!
//! # The `Supervisor`
//!
//! `Connections` is the one place that names spindle-core's
//! `Supervisor`: the scope of the connections' fibers, which cancels and
//! awaits the ones still running when it closes.
//!
//! Design credits: the permit before `accept` is mini-redis's (tokio's
//! example server), the accept-error classes are those of hyper-util's and
//! axum's serve loops and of Linux's `accept(2)` page, the
//! grace-then-cancel shutdown is the one of http4s Ember and of
//! Kubernetes' termination grace period. No code is copied.

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spindle_core::{Either, IO, Outcome, Semaphore, Supervisor};

/// The default of [`ServeConfigBuilder::max_connections`]: 512.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// The default of [`ServeConfigBuilder::grace_period`]: 30 seconds.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// The default of [`ServeConfigBuilder::accept_backoff`]: 100 ms.
pub const DEFAULT_ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A listening socket [`serve`] accepts from:
/// [`TcpListener`](crate::TcpListener) and
/// [`UnixListener`](crate::UnixListener). Sealed: it cannot be implemented
/// outside this crate.
pub trait Listener: sealed::Sealed + Send + Sync + 'static {
    /// The stream of an accepted connection.
    type Stream: Send + 'static;
    /// The peer's address.
    type Peer: Send + 'static;

    /// Waits for a connection (the listener's own `accept`).
    fn accept(&self) -> IO<(Self::Stream, Self::Peer), io::Error>;
}

pub(crate) mod sealed {
    /// Seals [`Listener`](super::Listener).
    pub trait Sealed {}
}

impl sealed::Sealed for crate::TcpListener {}

impl Listener for crate::TcpListener {
    type Stream = crate::TcpStream;
    type Peer = std::net::SocketAddr;

    fn accept(&self) -> IO<(crate::TcpStream, std::net::SocketAddr), io::Error> {
        crate::TcpListener::accept(self)
    }
}

impl sealed::Sealed for crate::UnixListener {}

impl Listener for crate::UnixListener {
    type Stream = crate::UnixStream;
    type Peer = std::os::unix::net::SocketAddr;

    fn accept(&self) -> IO<(crate::UnixStream, std::os::unix::net::SocketAddr), io::Error> {
        crate::UnixListener::accept(self)
    }
}

/// Something that went wrong while serving, for the
/// [`on_error`](ServeConfigBuilder::on_error) hook. None of these stop the
/// server, except an accept error that [`serve`] then fails with (see
/// [the module documentation](self#what-it-does)).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum ServeFailure<'a> {
    /// `accept` failed.
    Accept(&'a io::Error),
    /// A connection's handler failed with this error.
    Handler(&'a io::Error),
    /// A connection's handler panicked, with this message.
    HandlerPanicked(&'a str),
}

impl fmt::Display for ServeFailure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeFailure::Accept(e) => write!(f, "accept failed: {e}"),
            ServeFailure::Handler(e) => write!(f, "a connection's handler failed: {e}"),
            ServeFailure::HandlerPanicked(message) => {
                write!(f, "a connection's handler panicked: {message}")
            }
        }
    }
}

/// The hook of [`ServeConfigBuilder::on_error`].
type OnError = Arc<dyn Fn(ServeFailure<'_>) + Send + Sync>;

/// How [`serve`] runs: made by [`ServeConfig::builder`] (or
/// `ServeConfig::default()`), checked when built.
///
/// ```
/// use std::time::Duration;
///
/// use spindle_effect::net::{ServeConfig, ServeConfigError};
///
/// let config = ServeConfig::builder()
///     .max_connections(64)
///     .grace_period(Duration::from_secs(5))
///     .on_error(|failure| eprintln!("server: {failure}"))
///     .build()?;
/// assert_eq!(config.max_connections(), 64);
/// assert_eq!(
///     ServeConfig::builder().max_connections(0).build().err(),
///     Some(ServeConfigError::NoConnections)
/// );
/// # Ok::<(), ServeConfigError>(())
/// ```
#[derive(Clone)]
pub struct ServeConfig {
    max_connections: usize,
    grace_period: Duration,
    accept_backoff: Duration,
    on_error: Option<OnError>,
}

impl fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeConfig")
            .field("max_connections", &self.max_connections)
            .field("grace_period", &self.grace_period)
            .field("accept_backoff", &self.accept_backoff)
            .field("on_error", &self.on_error.is_some())
            .finish()
    }
}

impl Default for ServeConfig {
    /// The defaults: [`DEFAULT_MAX_CONNECTIONS`], [`DEFAULT_GRACE_PERIOD`],
    /// [`DEFAULT_ACCEPT_BACKOFF`], no hook.
    fn default() -> ServeConfig {
        ServeConfig {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            grace_period: DEFAULT_GRACE_PERIOD,
            accept_backoff: DEFAULT_ACCEPT_BACKOFF,
            on_error: None,
        }
    }
}

impl ServeConfig {
    /// A builder with the defaults.
    pub fn builder() -> ServeConfigBuilder {
        ServeConfigBuilder {
            config: ServeConfig::default(),
        }
    }

    /// At most this many connections are handled at once.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// How long live connections get to finish after shutdown is asked.
    pub fn grace_period(&self) -> Duration {
        self.grace_period
    }

    /// The sleep after an accept that failed for lack of resources.
    pub fn accept_backoff(&self) -> Duration {
        self.accept_backoff
    }

    /// Calls the hook, if any; a panic in it is contained (the server's
    /// accounting must not depend on it).
    fn report(&self, failure: ServeFailure<'_>) {
        if let Some(hook) = &self.on_error {
            let _ = catch_unwind(AssertUnwindSafe(|| hook(failure)));
        }
    }
}

/// Builds a [`ServeConfig`]; [`build`](ServeConfigBuilder::build) checks it.
#[derive(Debug, Clone)]
pub struct ServeConfigBuilder {
    config: ServeConfig,
}

impl ServeConfigBuilder {
    /// At most `n` connections are handled at once (at least 1, at most
    /// [`Semaphore::MAX_PERMITS`]); beyond, the server waits before it
    /// accepts (see [the module documentation](self#what-it-does)).
    /// Default [`DEFAULT_MAX_CONNECTIONS`].
    pub fn max_connections(mut self, n: usize) -> ServeConfigBuilder {
        self.config.max_connections = n;
        self
    }

    /// How long the connections still running when shutdown is asked get
    /// to finish before they are canceled (zero: canceled at once).
    /// Default [`DEFAULT_GRACE_PERIOD`].
    pub fn grace_period(mut self, grace: Duration) -> ServeConfigBuilder {
        self.config.grace_period = grace;
        self
    }

    /// How long the accept loop sleeps after an accept failed for lack of
    /// descriptors or memory (not zero: the loop would spin). Default
    /// [`DEFAULT_ACCEPT_BACKOFF`].
    pub fn accept_backoff(mut self, backoff: Duration) -> ServeConfigBuilder {
        self.config.accept_backoff = backoff;
        self
    }

    /// Calls `hook` with each failure while serving (an accept error, a
    /// handler's error or panic), from the fiber where it happened: to log
    /// them. It should return quickly; a panic in it is ignored.
    pub fn on_error<F>(mut self, hook: F) -> ServeConfigBuilder
    where
        F: Fn(ServeFailure<'_>) + Send + Sync + 'static,
    {
        self.config.on_error = Some(Arc::new(hook));
        self
    }

    /// The configuration, or what is wrong with it.
    pub fn build(self) -> Result<ServeConfig, ServeConfigError> {
        let config = self.config;
        if config.max_connections == 0 {
            return Err(ServeConfigError::NoConnections);
        }
        if u64::try_from(config.max_connections).map_or(true, |n| n > Semaphore::MAX_PERMITS) {
            return Err(ServeConfigError::TooManyConnections {
                requested: config.max_connections,
                max: Semaphore::MAX_PERMITS,
            });
        }
        if config.accept_backoff.is_zero() {
            return Err(ServeConfigError::NoAcceptBackoff);
        }
        Ok(config)
    }
}

/// A [`ServeConfig`] that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServeConfigError {
    /// `max_connections(0)`: the server could serve nobody.
    NoConnections,
    /// More connections than a semaphore counts.
    TooManyConnections {
        /// What was asked for.
        requested: usize,
        /// The most there can be.
        max: u64,
    },
    /// `accept_backoff(Duration::ZERO)`: a loop out of descriptors would
    /// spin.
    NoAcceptBackoff,
}

impl fmt::Display for ServeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeConfigError::NoConnections => {
                f.write_str("spindle-net: serve needs max_connections of at least 1")
            }
            ServeConfigError::TooManyConnections { requested, max } => write!(
                f,
                "spindle-net: serve takes at most {max} connections at once, not {requested}"
            ),
            ServeConfigError::NoAcceptBackoff => {
                f.write_str("spindle-net: serve needs an accept backoff above zero")
            }
        }
    }
}

impl std::error::Error for ServeConfigError {}

/// A configuration error as an I/O error (kind `InvalidInput`), for `?`
/// in programs whose error type is `std::io::Error`.
impl From<ServeConfigError> for io::Error {
    fn from(e: ServeConfigError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// What [`serve`] did, once it has shut down. Every accepted connection is
/// counted once, by how its handler ended:
/// `accepted == completed + failed + panicked + canceled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ServeSummary {
    /// Connections accepted.
    pub accepted: u64,
    /// Handlers that succeeded.
    pub completed: u64,
    /// Handlers that failed with an error.
    pub failed: u64,
    /// Handlers that panicked.
    pub panicked: u64,
    /// Handlers canceled: still running after the grace period, or
    /// canceled by themselves.
    pub canceled: u64,
    /// Accepts that failed (and were retried).
    pub accept_errors: u64,
}

/// The counts behind [`ServeSummary`], shared by the accept loop and the
/// connections' finalizers.
#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    accept_errors: AtomicU64,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counts {
    /// Counts how a connection's handler ended, and reports a failure.
    fn record(&self, outcome: &Outcome<(), io::Error>, config: &ServeConfig) {
        match outcome {
            Outcome::Succeeded(()) => add(&self.completed),
            Outcome::Errored(e) => {
                add(&self.failed);
                config.report(ServeFailure::Handler(e));
            }
            Outcome::Panicked(p) => {
                add(&self.panicked);
                config.report(ServeFailure::HandlerPanicked(p.message()));
            }
            // Counted by difference (a connection canceled before its
            // fiber first ran never gets here).
            Outcome::Canceled => {}
        }
    }

    /// The summary, once every connection's fiber has ended.
    fn summary(&self) -> ServeSummary {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let (accepted, completed, failed, panicked) = (
            get(&self.accepted),
            get(&self.completed),
            get(&self.failed),
            get(&self.panicked),
        );
        ServeSummary {
            accepted,
            completed,
            failed,
            panicked,
            canceled: accepted.saturating_sub(completed + failed + panicked),
            accept_errors: get(&self.accept_errors),
        }
    }
}

/// The scope of the connections' fibers: a `Supervisor`, the only code of
/// this module that names its API (so that a change of it is one edit).
#[derive(Clone)]
struct Connections(Supervisor);

impl Connections {
    /// Runs `body` with a scope; when `body` ends, however it ends, the
    /// connections still running are canceled, and this waits until every
    /// one has ended.
    fn scope<B, F>(body: F) -> IO<B, io::Error>
    where
        B: Send + 'static,
        F: FnOnce(Connections) -> IO<B, io::Error> + Send + 'static,
    {
        Supervisor::scoped().use_with(move |supervisor| body(Connections(supervisor.clone())))
    }

    /// Starts a connection's fiber in the scope; `false` if the scope has
    /// closed (the program is dropped).
    fn start(&self, connection: IO<(), io::Error>) -> IO<bool, io::Error> {
        self.0
            .try_supervise(connection)
            .map(|started| started.is_ok())
    }
}

/// What an accept error means for the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AcceptError {
    /// One connection failed before it was accepted: accept again.
    Connection,
    /// Out of descriptors or memory: sleep, then accept again.
    Resources,
    /// The listener (or the executor's I/O) is unusable: stop.
    Fatal,
}

fn classify(e: &io::Error) -> AcceptError {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => AcceptError::Resources,
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT) => AcceptError::Fatal,
        Some(_) => AcceptError::Connection,
        // The driver's own errors: its table full, or it is gone.
        None if e.kind() == io::ErrorKind::OutOfMemory => AcceptError::Resources,
        None => AcceptError::Fatal,
    }
}

/// Accepts connections on `listener` and runs `handler` for each on a
/// fiber of its own, at most `config.max_connections()` at once, until
/// `shutdown` completes; then stops accepting, lets the live connections
/// finish within `config.grace_period()`, cancels the rest, and completes
/// with a [`ServeSummary`]. The protocol, the limit, the errors and the
/// shutdown are in the [module documentation](self).
///
/// A handler's error or panic never stops the server. `serve` fails only
/// when accepting cannot go on (the listener is unusable, or the executor's
/// I/O is gone), after the same graceful shutdown.
///
/// ```
/// use std::ops::ControlFlow;
/// use std::time::Duration;
///
/// use spindle_effect::net::{self, BufReader, ServeConfig, TcpListener, TcpStream};
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Deferred, wstp::Runtime};
///
/// let rt = Runtime::new()?;
/// let stop = Deferred::<()>::new();
/// let config = ServeConfig::builder()
///     .max_connections(16)
///     .grace_period(Duration::from_secs(1))
///     .build()?;
/// let program: IO<_, std::io::Error> = IO::block(async move {
///     let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).await?;
///     let addr = listener.local_addr().await?;
///     // A line-echo server, one fiber per connection.
///     let server = net::serve(listener, config, stop.get(), |stream: TcpStream, _peer| {
///         let (read, write) = stream.into_split();
///         BufReader::new(read)
///             .for_each_line(move |line| write.write_all(line).map(|()| ControlFlow::Continue(())))
///             .void()
///     })
///     .start()
///     .value()
///     .await;
///     // A client: one line and its echo.
///     let client = BufReader::new(TcpStream::connect(addr).await?);
///     client.get_ref().write_all(b"hello\n").await?;
///     let echo = client.read_line().await?;
///     drop(client);
///     // Shut the server down: it has served one connection.
///     let _ = stop.complete(()).value().await;
///     let summary = server.join().value().await.succeeded();
///     Ok((echo, summary.map(|s| (s.accepted, s.completed))))
/// });
/// let (echo, served) = rt.block_on(program)?.succeeded().unwrap();
/// assert_eq!(echo.as_deref(), Some("hello\n"));
/// assert_eq!(served, Some((1, 1)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[track_caller]
pub fn serve<L, H>(
    listener: L,
    config: ServeConfig,
    shutdown: IO<(), Infallible>,
    handler: H,
) -> IO<ServeSummary, io::Error>
where
    L: Listener,
    H: Fn(L::Stream, L::Peer) -> IO<(), io::Error> + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    IO::block(async move {
        let all = u64::try_from(config.max_connections).unwrap_or(u64::MAX);
        // Checked by `build` already; a default config is valid too.
        let permits =
            Semaphore::new(all).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let counts = Arc::new(Counts::default());
        let in_scope = counts.clone();
        let fatal = Connections::scope(move |connections| {
            IO::block(async move {
                let accepting = accept_loop(
                    listener,
                    permits.clone(),
                    connections,
                    handler,
                    in_scope,
                    config.clone(),
                );
                let stop = shutdown.map_err(|never| match never {});
                // Accept until the trigger, or until accepting cannot go on.
                let fatal = match accepting.race(stop).await? {
                    Either::Left(error) => Some(error),
                    Either::Right(()) => None,
                };
                // Every permit back: every connection has ended. At most
                // the grace period; then the scope cancels the rest.
                permits
                    .acquire_n::<io::Error>(all)
                    .timeout_to(config.grace_period, IO::unit())
                    .await?;
                Ok(fatal)
            })
        })
        .await?;
        match fatal {
            Some(error) => Err(error),
            None => Ok(counts.summary()),
        }
    })
}

/// Accepts until an error ends it (returned as its value).
fn accept_loop<L, H>(
    listener: L,
    permits: Semaphore,
    connections: Connections,
    handler: Arc<H>,
    counts: Arc<Counts>,
    config: ServeConfig,
) -> IO<io::Error, io::Error>
where
    L: Listener,
    H: Fn(L::Stream, L::Peer) -> IO<(), io::Error> + Send + Sync + 'static,
{
    IO::block(async move {
        loop {
            let accepted = accept_one(
                &listener,
                &permits,
                &connections,
                &handler,
                &counts,
                &config,
            );
            let Some(error) = accepted.await? else {
                continue;
            };
            add(&counts.accept_errors);
            config.report(ServeFailure::Accept(&error));
            match classify(&error) {
                AcceptError::Connection => {}
                AcceptError::Resources => IO::<(), io::Error>::sleep(config.accept_backoff).await?,
                AcceptError::Fatal => return Ok(error),
            }
        }
    })
}

/// One turn of the accept loop: a permit, a connection, its fiber started
/// (`None`); or the accept's error, with the permit given back. Masked
/// but where it waits (for the permit, for the connection), so that a
/// permit is never lost: canceled while it accepts, it gives the permit
/// back; once a connection is accepted, its fiber is started before
/// cancellation is seen, and the permit is that fiber's.
fn accept_one<L, H>(
    listener: &L,
    permits: &Semaphore,
    connections: &Connections,
    handler: &Arc<H>,
    counts: &Arc<Counts>,
    config: &ServeConfig,
) -> IO<Option<io::Error>, io::Error>
where
    L: Listener,
    H: Fn(L::Stream, L::Peer) -> IO<(), io::Error> + Send + Sync + 'static,
{
    let accept = listener.accept();
    let (permits, connections, handler, counts, config) = (
        permits.clone(),
        connections.clone(),
        handler.clone(),
        counts.clone(),
        config.clone(),
    );
    IO::uncancelable(move |poll| {
        let give_back = permits.clone();
        poll.apply(permits.acquire()).flat_map(move |()| {
            poll.apply(accept)
                .on_cancel(give_back.release().void())
                .attempt()
                .flat_map(move |accepted| match accepted {
                    Ok((stream, peer)) => {
                        add(&counts.accepted);
                        let on_start_failure = permits.clone();
                        let connection = connection(stream, peer, handler, permits, counts, config);
                        connections.start(connection).flat_map(move |started| {
                            if started {
                                IO::pure(None)
                            } else {
                                // Unreachable: the scope outlives the loop.
                                on_start_failure.release().map(|_| {
                                    Some(io::Error::other("spindle-net: serve's scope has closed"))
                                })
                            }
                        })
                    }
                    Err(error) => permits.release().map(move |_| Some(error)),
                })
        })
    })
}

/// A connection's program: the handler, called on the connection's own
/// fiber, then its permit given back and its end counted, whatever the
/// end (masked, exactly once).
fn connection<S, P, H>(
    stream: S,
    peer: P,
    handler: Arc<H>,
    permits: Semaphore,
    counts: Arc<Counts>,
    config: ServeConfig,
) -> IO<(), io::Error>
where
    S: Send + 'static,
    P: Send + 'static,
    H: Fn(S, P) -> IO<(), io::Error> + Send + Sync + 'static,
{
    IO::defer(move || handler(stream, peer)).guarantee_case_ref(move |outcome| {
        counts.record(outcome, &config);
        permits.release().void()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_without_connections_or_backoff_is_an_error_value() {
        assert_eq!(
            ServeConfig::builder().max_connections(0).build().err(),
            Some(ServeConfigError::NoConnections)
        );
        assert_eq!(
            ServeConfig::builder()
                .accept_backoff(Duration::ZERO)
                .build()
                .err(),
            Some(ServeConfigError::NoAcceptBackoff)
        );
        let error = io::Error::from(ServeConfigError::NoConnections);
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("max_connections"), "{error}");
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn more_connections_than_a_semaphore_counts_is_an_error_value() {
        let too_many = usize::MAX;
        assert_eq!(
            ServeConfig::builder()
                .max_connections(too_many)
                .build()
                .err(),
            Some(ServeConfigError::TooManyConnections {
                requested: too_many,
                max: Semaphore::MAX_PERMITS,
            })
        );
    }

    #[test]
    fn the_defaults_build() {
        let config = ServeConfig::builder().build().unwrap();
        assert_eq!(config.max_connections(), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(config.grace_period(), DEFAULT_GRACE_PERIOD);
        assert_eq!(config.accept_backoff(), DEFAULT_ACCEPT_BACKOFF);
    }

    #[test]
    fn accept_errors_are_told_apart_by_what_they_mean_for_the_loop() {
        let os = io::Error::from_raw_os_error;
        assert_eq!(classify(&os(libc::ECONNABORTED)), AcceptError::Connection);
        assert_eq!(classify(&os(libc::EPROTO)), AcceptError::Connection);
        assert_eq!(classify(&os(libc::EMFILE)), AcceptError::Resources);
        assert_eq!(classify(&os(libc::ENFILE)), AcceptError::Resources);
        assert_eq!(classify(&os(libc::EBADF)), AcceptError::Fatal);
        assert_eq!(classify(&os(libc::EINVAL)), AcceptError::Fatal);
        assert_eq!(
            classify(&io::Error::from(io::ErrorKind::OutOfMemory)),
            AcceptError::Resources
        );
        assert_eq!(
            classify(&io::Error::other("the reactor is closed")),
            AcceptError::Fatal
        );
    }

    #[test]
    fn the_summary_counts_every_accepted_connection_once() {
        let counts = Counts::default();
        let config = ServeConfig::default();
        for _ in 0..5 {
            add(&counts.accepted);
        }
        counts.record(&Outcome::Succeeded(()), &config);
        counts.record(&Outcome::Errored(io::Error::other("bad input")), &config);
        counts.record(&Outcome::Canceled, &config);
        let summary = counts.summary();
        assert_eq!(
            (
                summary.accepted,
                summary.completed,
                summary.failed,
                summary.panicked
            ),
            (5, 1, 1, 0)
        );
        assert_eq!(summary.canceled, 3, "canceled, or never started");
    }

    #[test]
    fn a_panicking_hook_is_contained() {
        let config = ServeConfig::builder()
            .on_error(|_| panic!("the hook fails"))
            .build()
            .unwrap();
        let counts = Counts::default();
        counts.record(&Outcome::Errored(io::Error::other("x")), &config);
        assert_eq!(counts.summary().failed, 1);
    }
}
