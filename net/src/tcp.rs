//! TCP: [`TcpListener`] and [`TcpStream`].

use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::buffered::{ReadStream, sealed::Sealed as ReadShared};
use crate::driver::{Direction, VirtualListener, VirtualStream, with_network};
use crate::source::{Source, connect_in_progress, immediate, on, retry};
use crate::stream::{self, ReadHalf, Split, StreamIo, WriteHalf};

/// A listening socket: the system's, or a simulated network's
/// ([`driver::virt`](crate::driver::virt)).
pub(crate) enum ListenerIo {
    /// A system socket (a view of the descriptor its registration owns).
    System(std::net::TcpListener),
    /// A virtual socket.
    Virtual(Arc<dyn VirtualListener>),
}

impl ListenerIo {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            ListenerIo::System(listener) => listener.local_addr(),
            ListenerIo::Virtual(listener) => listener.local_addr(),
        }
    }

    /// One non-blocking accept; the stream is registered with the driver
    /// of this thread (a virtual one needs none).
    fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        match self {
            ListenerIo::System(listener) => listener
                .accept()
                .and_then(|(stream, peer)| Ok((TcpStream::adopt(stream)?, peer))),
            ListenerIo::Virtual(listener) => listener
                .accept()
                .map(|(stream, peer)| (TcpStream::virtual_stream(stream), peer)),
        }
    }
}

/// A connection's socket: the system's, or a simulated network's. Public in
/// a private module (a `Split` type names it): unreachable from outside.
pub enum StreamSocket {
    /// A system socket (a view of the descriptor its registration owns).
    System(std::net::TcpStream),
    /// A virtual socket.
    Virtual(Arc<dyn VirtualStream>),
}

impl StreamSocket {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            StreamSocket::System(socket) => socket.local_addr(),
            StreamSocket::Virtual(socket) => socket.local_addr(),
        }
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            StreamSocket::System(socket) => socket.peer_addr(),
            StreamSocket::Virtual(socket) => socket.peer_addr(),
        }
    }

    fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        match self {
            StreamSocket::System(socket) => socket.set_nodelay(nodelay),
            StreamSocket::Virtual(socket) => socket.set_nodelay(nodelay),
        }
    }

    fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            StreamSocket::System(socket) => socket.take_error(),
            StreamSocket::Virtual(socket) => socket.take_error(),
        }
    }
}

impl StreamIo for StreamSocket {
    fn append(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        match self {
            StreamSocket::System(socket) => stream::append_from(socket, buf, max),
            StreamSocket::Virtual(socket) => socket.recv(buf, max),
        }
    }

    fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            StreamSocket::System(socket) => {
                use std::io::Write as _;
                (&*socket).write(buf)
            }
            StreamSocket::Virtual(socket) => socket.send(buf),
        }
    }

    fn shutdown_io(&self, how: Shutdown) -> io::Result<()> {
        match self {
            StreamSocket::System(socket) => socket.shutdown(how),
            StreamSocket::Virtual(socket) => socket.shutdown(how),
        }
    }
}

/// The operations as traces name them: each public operation records one
/// event, at its caller's site.
mod ops {
    use spindle_core::untraced::Op;

    pub(super) static BIND: Op = Op::new("TcpListener::bind");
    pub(super) static ACCEPT: Op = Op::new("TcpListener::accept");
    pub(super) static LISTENER_LOCAL_ADDR: Op = Op::new("TcpListener::local_addr");
    pub(super) static CONNECT: Op = Op::new("TcpStream::connect");
    pub(super) static CONNECT_HOST: Op = Op::new("TcpStream::connect_host");
    pub(super) static READ: Op = Op::new("TcpStream::read");
    pub(super) static READ_INTO: Op = Op::new("TcpStream::read_into");
    pub(super) static READ_EXACT: Op = Op::new("TcpStream::read_exact");
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

/// A TCP socket listening for connections.
///
/// ```
/// use spindle_effect::net::{TcpListener, TcpStream};
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let rt = Runtime::new()?;
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
///
/// A cheap handle (`Clone`): clones accept from the same socket (each
/// connection goes to one of the fibers waiting in `accept`), and the
/// socket closes when the last clone (and every `IO` value built from
/// them) is dropped. [`serve`](crate::serve()) runs an accept loop over one.
#[derive(Clone)]
pub struct TcpListener {
    source: Arc<Source<ListenerIo>>,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("addr", &self.source.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl TcpListener {
    /// Binds a listening socket to `addr` (port 0: one the system picks;
    /// read it with [`local_addr`](TcpListener::local_addr)). An address in
    /// use, a permission error, or running outside an executor with I/O is
    /// an error value.
    ///
    /// The socket reuses addresses in `TIME_WAIT` (as std's `bind` does on
    /// Unix) and queues up to [`LISTEN_BACKLOG`] connections not yet
    /// accepted.
    #[track_caller]
    pub fn bind(addr: SocketAddr) -> IO<TcpListener, io::Error> {
        use socket2::{Domain, Protocol, Socket, Type};
        immediate(move || {
            // Find the driver first, so that no socket is bound for nothing.
            if let Some(listener) = with_network(|net| net.map(|net| net.bind_tcp(addr)))? {
                let listener = listener?;
                let registration = listener.clone().registration();
                return Ok(TcpListener {
                    source: Source::virtual_socket(ListenerIo::Virtual(listener), registration),
                });
            }
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            #[cfg(unix)]
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            socket.listen(LISTEN_BACKLOG)?;
            socket.set_nonblocking(true)?;
            Ok(TcpListener {
                source: Source::register_as(
                    std::net::TcpListener::from(socket),
                    ListenerIo::System,
                )?,
            })
        })
        .traced_as(&ops::BIND)
    }

    /// Waits for a connection; returns its stream (registered with the
    /// driver of the thread that accepted it) and the peer's address.
    #[track_caller]
    pub fn accept(&self) -> IO<(TcpStream, SocketAddr), io::Error> {
        retry(&self.source, Direction::Read, (), |listener, ()| {
            listener.accept().map_err(|e| ((), e))
        })
        .traced_as(&ops::ACCEPT)
    }

    /// The address the socket is bound to.
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |listener| listener.local_addr()).traced_as(&ops::LISTENER_LOCAL_ADDR)
    }
}

/// A TCP connection.
///
/// Reads and writes take owned buffers (an `IO` value is `'static`):
/// [`read`](TcpStream::read) returns a new vector,
/// [`read_into`](TcpStream::read_into) appends to one it is given and gives
/// it back, so a connection can reuse one buffer.
///
/// A cheap handle (`Clone`): clones use the same connection from any
/// fibers, and writes through them are each whole (see
/// [Sharing](crate#sharing)). The connection closes when the last clone,
/// split half and `IO` value built from them is dropped;
/// [`shutdown`](TcpStream::shutdown) acts on the connection, so on every
/// clone at once.
#[derive(Clone)]
pub struct TcpStream {
    source: Arc<Source<StreamSocket>>,
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.source.local_addr().ok())
            .field("peer", &self.source.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

/// After the socket of a background `connect` is writable: whether it
/// connected (`WouldBlock`: not yet, a spurious wake-up).
fn finish_connect(stream: &StreamSocket) -> io::Result<()> {
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

/// `addrs`, unless it is empty (an `InvalidInput` error naming `host`).
fn some_address(host: &str, addrs: Vec<SocketAddr>) -> io::Result<Vec<SocketAddr>> {
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("spindle-net: {host:?} resolves to no address"),
        ));
    }
    Ok(addrs)
}

/// Connects to the first of `addrs` (not empty) that accepts; the error of
/// the last one if none does.
fn connect_first(addrs: Vec<SocketAddr>) -> IO<TcpStream, io::Error> {
    let mut addrs = addrs.into_iter();
    let first = addrs.next();
    IO::tail_rec_untraced((first, addrs), |(addr, mut rest)| {
        let Some(addr) = addr else {
            // Unreachable from `connect_host` (it checks that there is one).
            return IO::raise_error_untraced(io::Error::new(
                io::ErrorKind::InvalidInput,
                "spindle-net: no address to connect to",
            ));
        };
        TcpStream::connect_untraced(addr)
            .attempt()
            .flat_map_untraced(move |connected| match (connected, rest.next()) {
                (Ok(stream), _) => IO::pure(ControlFlow::Break(stream)),
                (Err(_), Some(next)) => IO::pure(ControlFlow::Continue((Some(next), rest))),
                (Err(e), None) => IO::raise_error_untraced(e),
            })
    })
}

impl TcpStream {
    /// Registers an accepted or connected socket with the current driver.
    fn adopt(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream {
            source: Source::register_as(stream, StreamSocket::System)?,
        })
    }

    /// A stream on a virtual socket of a simulated network.
    fn virtual_stream(socket: Arc<dyn VirtualStream>) -> TcpStream {
        let registration = socket.clone().registration();
        TcpStream {
            source: Source::virtual_socket(StreamSocket::Virtual(socket), registration),
        }
    }

    /// Connects to `addr` without blocking a thread: the connection is
    /// started, and the fiber waits until it is established or refused
    /// (a refusal, an unreachable network, or running outside an executor
    /// with I/O is an error value).
    #[track_caller]
    pub fn connect(addr: SocketAddr) -> IO<TcpStream, io::Error> {
        TcpStream::connect_untraced(addr).traced_as(&ops::CONNECT)
    }

    /// [`TcpStream::connect`] without its trace event (for `connect_host`).
    fn connect_untraced(addr: SocketAddr) -> IO<TcpStream, io::Error> {
        use socket2::{Domain, Protocol, Socket, Type};
        IO::defer_untraced(move || {
            let started = (|| {
                if let Some(socket) = with_network(|net| net.map(|net| net.connect_tcp(addr)))? {
                    return Ok(TcpStream::virtual_stream(socket?));
                }
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
                Err(e) => IO::raise_error_untraced(e),
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
    /// `IO::blocking` (the executor's blocking pool): the executor keeps
    /// serving its other fibers meanwhile, and a fiber canceled while it
    /// resolves waits for the resolver to return (it cannot be
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
        IO::defer_untraced(move || {
            // A simulated network resolves its own host names (no system
            // resolver, no blocking call).
            // Outside every driver the connection fails after resolving,
            // as it does on a driver without a simulated network.
            if let Ok(Some(resolved)) = with_network(|net| net.map(|net| net.resolve(&host))) {
                return match resolved.and_then(|addrs| some_address(&host, addrs)) {
                    Ok(addrs) => IO::pure(addrs),
                    Err(e) => IO::raise_error_untraced(e),
                };
            }
            IO::<Vec<SocketAddr>, io::Error>::try_blocking(move || {
                use std::net::ToSocketAddrs as _;
                let addrs = host.as_str().to_socket_addrs()?.collect::<Vec<_>>();
                some_address(&host, addrs)
            })
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

    /// Reads exactly `len` bytes, waiting as often as needed; end of
    /// stream before them is an error of kind `UnexpectedEof`. Canceled
    /// midway, the bytes it had read are lost (a [`BufReader`](crate::BufReader)'s
    /// `read_exact` keeps them).
    #[track_caller]
    pub fn read_exact(&self, len: usize) -> IO<Vec<u8>, io::Error> {
        stream::read_exact(&self.source, len).traced_as(&ops::READ_EXACT)
    }

    /// [`TcpStream::read_into`] without its trace event (for `read`).
    fn read_into_untraced(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        stream::read_into(&self.source, buf, max)
    }

    /// Writes some of `data`, waiting until the socket accepts any;
    /// returns how many bytes were written (one system call's worth, taken
    /// while no other write of the connection is in progress).
    #[track_caller]
    pub fn write<B>(&self, data: B) -> IO<usize, io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        stream::write(&self.source, data).traced_as(&ops::WRITE)
    }

    /// Writes all of `data`, waiting as often as the socket needs. The
    /// bytes go out whole: writes from other fibers (through clones or the
    /// write half) wait until this one is done (see
    /// [Sharing](crate#sharing)).
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
        on(&self.source, |socket| socket.peer_addr()).traced_as(&ops::PEER_ADDR)
    }

    /// This end's address.
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |socket| socket.local_addr()).traced_as(&ops::LOCAL_ADDR)
    }

    /// Sets `TCP_NODELAY` (off by default: small writes may then wait for
    /// the acknowledgement of earlier ones, Nagle's algorithm).
    #[track_caller]
    pub fn set_nodelay(&self, nodelay: bool) -> IO<(), io::Error> {
        on(&self.source, move |socket| socket.set_nodelay(nodelay)).traced_as(&ops::SET_NODELAY)
    }
}

impl TcpStream {
    /// Splits the stream into a reading and a writing half, to be owned by
    /// two fibers (one reads while the other writes). Dropping the
    /// [`WriteHalf`] (its last clone) shuts the write side down;
    /// [`ReadHalf::reunite`] gives the stream back. Other clones of the
    /// stream keep the connection open and usable, and see that shutdown
    /// too (it is the connection's).
    pub fn into_split(self) -> (ReadHalf<TcpStream>, WriteHalf<TcpStream>) {
        stream::split(self)
    }
}

impl stream::sealed::Split for TcpStream {
    type Io = StreamSocket;

    fn source(&self) -> &Arc<Source<StreamSocket>> {
        &self.source
    }

    fn from_source(source: Arc<Source<StreamSocket>>) -> TcpStream {
        TcpStream { source }
    }
}

impl Split for TcpStream {}

impl ReadShared for TcpStream {
    fn read_shared(&self, shared: Arc<Mutex<Vec<u8>>>, max: usize) -> IO<usize, io::Error> {
        stream::read_shared(&self.source, shared, max)
    }
}

impl ReadStream for TcpStream {}
