//! Non-blocking sockets whose operations are `IO<_, std::io::Error>` values:
//! TCP ([`TcpListener`], [`TcpStream`]), UDP ([`UdpSocket`]), Unix domain
//! stream sockets on Unix ([`UnixListener`], [`UnixStream`]), and a
//! buffered line reader over a stream ([`BufReader`]).
//!
//! # How an operation reaches the reactor
//!
//! A socket is made by a fiber running on an [`EventLoop`](crate::EventLoop)
//! ([`TcpListener::bind`], [`TcpListener::accept`], [`TcpStream::connect`],
//! [`UdpSocket::bind`], [`UnixListener::bind`], [`UnixStream::connect`], …).
//! The loop that runs on the current thread is found through a thread-local
//! set while [`EventLoop::block_on`](crate::EventLoop::block_on) runs
//! ([`Handle::current`]): a fiber always runs on its loop's thread. The new
//! socket is added to that loop's poller and keeps the loop's [`Handle`];
//! every later operation uses that handle. Outside any loop, making a
//! socket fails with an `io::Error` (kind `Other`), never a panic; so does
//! an operation on a socket from a fiber of another loop (its readiness
//! would be reported to a loop that may not be running).
//!
//! # One operation
//!
//! Each operation first tries the non-blocking call. On `WouldBlock` it
//! registers the fiber as a waiter of the socket and suspends it with
//! `IO::from_callback`; the loop resumes it when the poller reports the socket,
//! and the call is tried again (`Interrupted` is retried at once). Any other
//! error is the operation's error value. If the fiber is canceled while it
//! waits (a `timeout`, a lost `race`), the finalizer of its `from_callback`
//! removes its waiter and narrows the socket's interest: the loop is left
//! as if the operation had never started.
//!
//! Every socket type is written against the same three helpers of this
//! module (a registered socket, `Source`; `retry`, which tries a call and
//! waits with `ready` on `WouldBlock`; `immediate`, for calls that never
//! wait), never against the loop's internals. The byte streams share one
//! implementation of `read`, `read_into`, `write`, `write_all` and
//! `shutdown` (a private `stream` module over a private `StreamIo` trait
//! that std's `TcpStream` and `UnixStream` implement), so TCP and Unix
//! streams have the same semantics by construction.
//!
//! # Names
//!
//! [`TcpStream::connect_host`] resolves a `"name:port"` string with the
//! system resolver through `IO::blocking`, which exec-batching runs on a
//! thread of its own (the loop goes on serving its other fibers), then
//! tries each address in order.
//!
//! # Closing
//!
//! Every socket type shares its socket with the `IO` values built from it
//! (a reference count): the socket is removed from the poller and closed
//! when the last of them is dropped, on any thread. Dropping a socket
//! whose operations have all finished closes it at once. A [`BufReader`]
//! owns its stream: dropping the reader (and its `IO` values) closes it,
//! with any bytes still buffered. A Unix listener's socket file stays
//! behind when it closes (remove it before binding the path again).
//!
//! # Cancellation
//!
//! A canceled operation leaves no waiter and no interest behind (above).
//! What it had done before it waited stays done: a `write_all` canceled
//! midway has written a prefix of its data; a read canceled while it
//! waits has read nothing. [`BufReader`] moves bytes into its buffer
//! inside the call that reads them, so a line read canceled midway keeps
//! the part of the line it had read, and the next read returns the line
//! whole.
//!
//! # End of stream and errors
//!
//! A stream read returns 0 bytes when the peer has closed its side in
//! order (end of stream), and every later read does too. A peer that
//! resets the connection (closing with unread data, or with `SO_LINGER` 0)
//! makes reads and writes fail with `ConnectionReset` (or `BrokenPipe` for
//! writes). A write of a zero-length buffer writes nothing and returns 0.
//! UDP has no streams and no end: an empty datagram is just empty, and a
//! receive into a buffer smaller than its datagram truncates it
//! ([`UdpSocket`]'s documentation).

use crate::sync::Arc;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;

use spindle_core::raw::Untraced as _;
use spindle_core::{Callback, IO};

use crate::handle::Handle;
use crate::reactor::{Direction, Sys};

mod buffered;
mod udp;
#[cfg(unix)]
mod unix;

pub use buffered::{BufReader, DEFAULT_LINE_LIMIT, ReadStream};
pub use udp::UdpSocket;
#[cfg(unix)]
pub use unix::{UnixListener, UnixStream};

/// A socket registered with a loop's poller.
struct Source<T: Sys> {
    io: T,
    key: usize,
    handle: Handle,
}

impl<T: Sys> Source<T> {
    /// Adds `io` (already non-blocking) to the poller of the loop running
    /// on this thread.
    fn register(io: T) -> io::Result<Arc<Source<T>>> {
        let handle = Handle::current().ok_or_else(outside_loop)?;
        let key = handle.shared.reactor.register(&io)?;
        Ok(Arc::new(Source { io, key, handle }))
    }

    /// Whether the caller runs on this socket's loop.
    fn check_loop(&self) -> io::Result<()> {
        if self.handle.is_current() {
            Ok(())
        } else {
            Err(io::Error::other(
                "exec-batching: this socket belongs to an event loop that is not running \
                 on this thread (used from a fiber of another loop, or outside any)",
            ))
        }
    }
}

impl<T: Sys> Drop for Source<T> {
    fn drop(&mut self) {
        // Deleted from the poller before `io` closes (the contract of
        // `Poller::add`, see reactor.rs); waiters are dropped after the
        // reactor's lock is released.
        let waiters = self.handle.shared.reactor.deregister(self.key, &self.io);
        drop(waiters);
    }
}

fn outside_loop() -> io::Error {
    io::Error::other(
        "exec-batching: sockets are made by fibers running on an exec-batching EventLoop \
         (this ran outside one)",
    )
}

/// A program that waits until `source` is ready for `direction`; if the
/// fiber is canceled meanwhile, its interest is removed.
fn ready<T>(source: &Arc<Source<T>>, direction: Direction) -> IO<(), io::Error>
where
    T: Sys + Send + Sync + 'static,
{
    let source = source.clone();
    IO::from_callback_untraced(move |wake: Callback<(), io::Error>| {
        let reactor = &source.handle.shared.reactor;
        match reactor.add_waiter(source.key, &source.io, direction, wake.clone()) {
            Ok(token) => Some(IO::delay_untraced(move || {
                let waiter = source
                    .handle
                    .shared
                    .reactor
                    .remove_waiter(source.key, &source.io, token);
                drop(waiter);
            })),
            Err(e) => {
                wake.fail(e);
                None
            }
        }
    })
}

/// Tries `attempt` until it does not return `WouldBlock`, waiting for
/// `direction` between tries. The state travels through the tries (a
/// buffer, an offset) and comes back with the error. Built with io-core's
/// untraced nodes: a trace shows the operation, never this loop.
fn retry<T, S, A, F>(
    source: &Arc<Source<T>>,
    direction: Direction,
    state: S,
    mut attempt: F,
) -> IO<A, io::Error>
where
    T: Sys + Send + Sync + 'static,
    S: Send + 'static,
    A: Send + 'static,
    F: FnMut(&T, S) -> Result<A, (S, io::Error)> + Send + 'static,
{
    let source = source.clone();
    IO::tail_rec_untraced(state, move |state| {
        if let Err(e) = source.check_loop() {
            return IO::raise_error(e);
        }
        match attempt(&source.io, state) {
            Ok(a) => IO::pure(ControlFlow::Break(a)),
            Err((state, e)) => match e.kind() {
                io::ErrorKind::WouldBlock => {
                    ready(&source, direction).map_untraced(move |()| ControlFlow::Continue(state))
                }
                io::ErrorKind::Interrupted => IO::pure(ControlFlow::Continue(state)),
                _ => IO::raise_error(e),
            },
        }
    })
}

/// A program of a call that never waits.
fn immediate<A, F>(call: F) -> IO<A, io::Error>
where
    A: Send + 'static,
    F: FnOnce() -> io::Result<A> + Send + 'static,
{
    IO::defer_untraced(move || match call() {
        Ok(a) => IO::pure(a),
        Err(e) => IO::raise_error(e),
    })
}

/// A connected byte stream (TCP, Unix domain): the calls the shared stream
/// operations of [`stream`] make on it, all non-blocking.
trait StreamIo: Sys + Send + Sync + 'static {
    fn read_some(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn write_some(&self, buf: &[u8]) -> io::Result<usize>;
    fn shutdown_io(&self, how: Shutdown) -> io::Result<()>;
}

impl StreamIo for std::net::TcpStream {
    fn read_some(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
    fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }
    fn shutdown_io(&self, how: Shutdown) -> io::Result<()> {
        self.shutdown(how)
    }
}

#[cfg(unix)]
impl StreamIo for std::os::unix::net::UnixStream {
    fn read_some(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
    fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }
    fn shutdown_io(&self, how: Shutdown) -> io::Result<()> {
        self.shutdown(how)
    }
}

/// The operations [`TcpStream`] and [`UnixStream`] share, written once over
/// [`StreamIo`] with [`retry`] and [`immediate`] (the public methods add
/// their trace event).
mod stream {
    use super::{Direction, Source, StreamIo, immediate, retry};
    use crate::sync::{Arc, Mutex, lock};
    use spindle_core::IO;
    use std::io;
    use std::net::Shutdown;

    /// Appends at most `max` bytes to `buf` (see `TcpStream::read_into`).
    pub(super) fn read_into<T: StreamIo>(
        source: &Arc<Source<T>>,
        buf: Vec<u8>,
        max: usize,
    ) -> IO<(Vec<u8>, usize), io::Error> {
        retry(source, Direction::Read, buf, move |socket, mut buf| {
            let start = buf.len();
            buf.resize(start + max, 0);
            match socket.read_some(&mut buf[start..]) {
                Ok(n) => {
                    buf.truncate(start + n);
                    Ok((buf, n))
                }
                Err(e) => {
                    buf.truncate(start);
                    Err((buf, e))
                }
            }
        })
    }

    /// Appends at most `max` bytes to the shared buffer `shared`, inside
    /// the call that reads them: bytes are either still in the kernel or in
    /// `shared`, whenever the fiber is canceled (the guarantee of
    /// `BufReader`). Returns the number read (0: end of stream).
    pub(super) fn read_shared<T: StreamIo>(
        source: &Arc<Source<T>>,
        shared: Arc<Mutex<Vec<u8>>>,
        max: usize,
    ) -> IO<usize, io::Error> {
        retry(source, Direction::Read, (), move |socket, ()| {
            let mut buf = lock(&shared);
            let start = buf.len();
            buf.resize(start + max, 0);
            let read = socket.read_some(&mut buf[start..]);
            buf.truncate(start + *read.as_ref().unwrap_or(&0));
            read.map_err(|e| ((), e))
        })
    }

    /// Writes some of `data` (see `TcpStream::write`).
    pub(super) fn write<T, B>(source: &Arc<Source<T>>, data: B) -> IO<usize, io::Error>
    where
        T: StreamIo,
        B: AsRef<[u8]> + Send + 'static,
    {
        retry(source, Direction::Write, data, |socket, data| {
            socket.write_some(data.as_ref()).map_err(|e| (data, e))
        })
    }

    /// Writes all of `data` (see `TcpStream::write_all`).
    pub(super) fn write_all<T, B>(source: &Arc<Source<T>>, data: B) -> IO<(), io::Error>
    where
        T: StreamIo,
        B: AsRef<[u8]> + Send + 'static,
    {
        retry(
            source,
            Direction::Write,
            (data, 0usize),
            |socket, (data, mut written)| loop {
                let rest = &data.as_ref()[written..];
                if rest.is_empty() {
                    return Ok(());
                }
                match socket.write_some(rest) {
                    Ok(0) => {
                        let e = io::Error::new(
                            io::ErrorKind::WriteZero,
                            "exec-batching: the socket accepted no more bytes",
                        );
                        return Err(((data, written), e));
                    }
                    Ok(n) => written += n,
                    Err(e) => return Err(((data, written), e)),
                }
            },
        )
    }

    /// Shuts down one side or both (see `TcpStream::shutdown`).
    pub(super) fn shutdown<T: StreamIo>(
        source: &Arc<Source<T>>,
        how: Shutdown,
    ) -> IO<(), io::Error> {
        let source = source.clone();
        immediate(move || source.io.shutdown_io(how))
    }
}

/// The operations as traces name them: each public operation records one
/// event, at its caller's site.
mod ops {
    use spindle_core::raw::Op;

    pub(super) static BIND: Op = Op::new("TcpListener::bind");
    pub(super) static ACCEPT: Op = Op::new("TcpListener::accept");
    pub(super) static LISTENER_LOCAL_ADDR: Op = Op::new("TcpListener::local_addr");
    pub(super) static CONNECT: Op = Op::new("TcpStream::connect");
    pub(super) static CONNECT_HOST: Op = Op::new("TcpStream::connect_host");
    pub(super) static READ: Op = Op::new("TcpStream::read");
    pub(super) static READ_INTO: Op = Op::new("TcpStream::read_into");
    pub(super) static WRITE: Op = Op::new("TcpStream::write");
    pub(super) static WRITE_ALL: Op = Op::new("TcpStream::write_all");
    pub(super) static SHUTDOWN: Op = Op::new("TcpStream::shutdown");
    pub(super) static PEER_ADDR: Op = Op::new("TcpStream::peer_addr");
    pub(super) static LOCAL_ADDR: Op = Op::new("TcpStream::local_addr");
    pub(super) static SET_NODELAY: Op = Op::new("TcpStream::set_nodelay");
}

/// The length of a listener's queue of connections not yet accepted (the
/// system may cap it: `net.core.somaxconn` on Linux).
pub const LISTEN_BACKLOG: i32 = 1024;

/// A TCP socket listening for connections, on an exec-batching loop.
///
/// ```
/// use spindle_exec_batching::{EventLoop, net::{TcpListener, TcpStream}};
/// use spindle_core::IO;
///
/// let rt = EventLoop::new()?;
/// let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(|listener| {
///     listener.local_addr().flat_map(move |addr| {
///         let server = listener
///             .accept()
///             .flat_map(|(stream, _)| stream.write_all(b"hi").product_r(IO::pure(stream)));
///         let client = TcpStream::connect(addr).flat_map(|stream| stream.read(16));
///         server.both(client).map(|(_stream, bytes)| bytes)
///     })
/// });
/// assert_eq!(rt.block_on(program)?.succeeded(), Some(b"hi".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TcpListener {
    source: Arc<Source<std::net::TcpListener>>,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("addr", &self.source.io.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl TcpListener {
    /// Binds a listening socket to `addr` (port 0: one the system picks;
    /// read it with [`local_addr`](TcpListener::local_addr)). An address in
    /// use, a permission error, or running outside a loop is an error value.
    ///
    /// The socket reuses addresses in `TIME_WAIT` (as std's `bind` does on
    /// Unix) and queues up to [`LISTEN_BACKLOG`] connections not yet
    /// accepted.
    #[track_caller]
    pub fn bind(addr: SocketAddr) -> IO<TcpListener, io::Error> {
        use socket2::{Domain, Protocol, Socket, Type};
        immediate(move || {
            // Check first, so that no socket is bound outside a loop.
            Handle::current().ok_or_else(outside_loop)?;
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            #[cfg(unix)]
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            socket.listen(LISTEN_BACKLOG)?;
            socket.set_nonblocking(true)?;
            Ok(TcpListener {
                source: Source::register(std::net::TcpListener::from(socket))?,
            })
        })
        .traced_as(&ops::BIND)
    }

    /// Waits for a connection; returns its stream (registered with this
    /// loop, non-blocking) and the peer's address.
    #[track_caller]
    pub fn accept(&self) -> IO<(TcpStream, SocketAddr), io::Error> {
        retry(&self.source, Direction::Read, (), |listener, ()| {
            let accepted = listener
                .accept()
                .and_then(|(stream, peer)| Ok((TcpStream::adopt(stream)?, peer)));
            accepted.map_err(|e| ((), e))
        })
        .traced_as(&ops::ACCEPT)
    }

    /// The address the socket is bound to.
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        let source = self.source.clone();
        immediate(move || source.io.local_addr()).traced_as(&ops::LISTENER_LOCAL_ADDR)
    }
}

/// A TCP connection on an exec-batching loop.
///
/// Reads and writes take owned buffers (an `IO` value is `'static`):
/// [`read`](TcpStream::read) returns a new vector,
/// [`read_into`](TcpStream::read_into) appends to one it is given and gives
/// it back, so a connection can reuse one buffer.
pub struct TcpStream {
    source: Arc<Source<std::net::TcpStream>>,
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.source.io.local_addr().ok())
            .field("peer", &self.source.io.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

/// Whether a non-blocking `connect` reported that it goes on in the
/// background (the stable `io::ErrorKind` has no name for it yet).
fn connect_in_progress(e: &io::Error) -> bool {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        return true;
    }
    e.kind() == io::ErrorKind::WouldBlock
}

/// After the socket of a background `connect` is writable: whether it
/// connected (`WouldBlock`: not yet, a spurious wake-up).
fn finish_connect(stream: &std::net::TcpStream) -> io::Result<()> {
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    match stream.peer_addr() {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => {
            Err(io::Error::from(io::ErrorKind::WouldBlock))
        }
        Err(e) => Err(e),
    }
}

/// Connects to the first of `addrs` (not empty) that accepts; the error of
/// the last one if none does.
fn connect_first(addrs: Vec<SocketAddr>) -> IO<TcpStream, io::Error> {
    let mut addrs = addrs.into_iter();
    let first = addrs.next();
    IO::tail_rec_untraced((first, addrs), |(addr, mut rest)| {
        let Some(addr) = addr else {
            // Unreachable from `connect_host` (it checks that there is one).
            return IO::raise_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "exec-batching: no address to connect to",
            ));
        };
        TcpStream::connect_untraced(addr)
            .attempt()
            .flat_map_untraced(move |connected| match (connected, rest.next()) {
                (Ok(stream), _) => IO::pure(ControlFlow::Break(stream)),
                (Err(_), Some(next)) => IO::pure(ControlFlow::Continue((Some(next), rest))),
                (Err(e), None) => IO::raise_error(e),
            })
    })
}

impl TcpStream {
    /// Registers an accepted or connected socket with the current loop.
    fn adopt(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream {
            source: Source::register(stream)?,
        })
    }

    /// Connects to `addr` without blocking the loop: the connection is
    /// started, and the fiber waits until it is established or refused
    /// (a refusal, an unreachable network, or running outside a loop is an
    /// error value).
    #[track_caller]
    pub fn connect(addr: SocketAddr) -> IO<TcpStream, io::Error> {
        TcpStream::connect_untraced(addr).traced_as(&ops::CONNECT)
    }

    /// [`TcpStream::connect`] without its trace event (for `connect_host`).
    fn connect_untraced(addr: SocketAddr) -> IO<TcpStream, io::Error> {
        use socket2::{Domain, Protocol, Socket, Type};
        IO::defer_untraced(move || {
            let started = (|| {
                Handle::current().ok_or_else(outside_loop)?;
                let socket =
                    Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
                socket.set_nonblocking(true)?;
                match socket.connect(&addr.into()) {
                    Ok(()) => {}
                    Err(e) if connect_in_progress(&e) => {}
                    Err(e) => return Err(e),
                }
                TcpStream::adopt(std::net::TcpStream::from(socket))
            })();
            match started {
                Ok(stream) => retry(&stream.source, Direction::Write, (), |socket, ()| {
                    finish_connect(socket).map_err(|e| ((), e))
                })
                .map_untraced(move |()| stream),
                Err(e) => IO::raise_error(e),
            }
        })
    }

    /// Connects to `host`, a `"name:port"` string (`"example.com:80"`,
    /// `"localhost:8080"`, `"[::1]:80"`, `"127.0.0.1:80"`): resolves it with
    /// [`std::net::ToSocketAddrs`], then tries each address in the order the
    /// resolver gave them, as [`connect`](TcpStream::connect) does, and
    /// returns the first connection made; if every address fails, the error
    /// of the last one.
    ///
    /// Resolution is a blocking call of the system resolver, run with
    /// `IO::blocking`, which exec-batching runs on a thread of its own: the
    /// loop keeps serving its other fibers meanwhile, and a fiber canceled
    /// while it resolves waits for the resolver to return (it cannot be
    /// interrupted), then finalizes.
    ///
    /// A string without a port, or with one that does not parse, is an
    /// error of kind `InvalidInput`; a name the resolver does not know is
    /// the resolver's error (its kind depends on the system); a name that
    /// resolves to no address is an error of kind `InvalidInput`. Never a
    /// panic.
    #[track_caller]
    pub fn connect_host(host: impl Into<String>) -> IO<TcpStream, io::Error> {
        let host: String = host.into();
        IO::<Vec<SocketAddr>, io::Error>::try_blocking(move || {
            use std::net::ToSocketAddrs as _;
            let addrs = host.as_str().to_socket_addrs()?.collect::<Vec<_>>();
            if addrs.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("exec-batching: {host:?} resolves to no address"),
                ));
            }
            Ok(addrs)
        })
        .flat_map_untraced(connect_first)
        .traced_as(&ops::CONNECT_HOST)
    }

    /// Reads at most `max` bytes, waiting until some are available; an
    /// empty vector means end of stream (the peer closed its side).
    #[track_caller]
    pub fn read(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        self.read_into_untraced(Vec::new(), max)
            .map_untraced(|(buf, _)| buf)
            .traced_as(&ops::READ)
    }

    /// Appends at most `max` bytes to `buf`, waiting until some are
    /// available; returns the buffer and the number of bytes read (0: end
    /// of stream, or `max` was 0).
    #[track_caller]
    pub fn read_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        self.read_into_untraced(buf, max).traced_as(&ops::READ_INTO)
    }

    /// [`TcpStream::read_into`] without its trace event (for `read`).
    fn read_into_untraced(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        stream::read_into(&self.source, buf, max)
    }

    /// Writes some of `data`, waiting until the socket accepts any;
    /// returns how many bytes were written.
    #[track_caller]
    pub fn write<B>(&self, data: B) -> IO<usize, io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        stream::write(&self.source, data).traced_as(&ops::WRITE)
    }

    /// Writes all of `data`, waiting as often as the socket needs.
    #[track_caller]
    pub fn write_all<B>(&self, data: B) -> IO<(), io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        stream::write_all(&self.source, data).traced_as(&ops::WRITE_ALL)
    }

    /// Shuts down the read side, the write side (the peer then reads end of
    /// stream) or both. The socket stays registered until dropped.
    #[track_caller]
    pub fn shutdown(&self, how: Shutdown) -> IO<(), io::Error> {
        stream::shutdown(&self.source, how).traced_as(&ops::SHUTDOWN)
    }

    /// The peer's address.
    #[track_caller]
    pub fn peer_addr(&self) -> IO<SocketAddr, io::Error> {
        let source = self.source.clone();
        immediate(move || source.io.peer_addr()).traced_as(&ops::PEER_ADDR)
    }

    /// This end's address.
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        let source = self.source.clone();
        immediate(move || source.io.local_addr()).traced_as(&ops::LOCAL_ADDR)
    }

    /// Sets `TCP_NODELAY` (off by default: small writes may then wait for
    /// the acknowledgement of earlier ones, Nagle's algorithm).
    #[track_caller]
    pub fn set_nodelay(&self, nodelay: bool) -> IO<(), io::Error> {
        let source = self.source.clone();
        immediate(move || source.io.set_nodelay(nodelay)).traced_as(&ops::SET_NODELAY)
    }
}

impl buffered::sealed::Sealed for TcpStream {
    fn read_shared(
        &self,
        shared: Arc<crate::sync::Mutex<Vec<u8>>>,
        max: usize,
    ) -> IO<usize, io::Error> {
        stream::read_shared(&self.source, shared, max)
    }
}

impl ReadStream for TcpStream {}
