//! Unix domain stream sockets: [`UnixListener`] and [`UnixStream`].

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::buffered::{ReadStream, sealed::Sealed as ReadShared};
use crate::driver::Direction;
use crate::source::{Source, check_driver, connect_in_progress, immediate, on, retry};
use crate::stream::{self, ReadHalf, Split, WriteHalf};

mod ops {
    use spindle_core::untraced::Op;

    pub(super) static BIND: Op = Op::new("UnixListener::bind");
    pub(super) static ACCEPT: Op = Op::new("UnixListener::accept");
    pub(super) static LISTENER_LOCAL_ADDR: Op = Op::new("UnixListener::local_addr");
    pub(super) static CONNECT: Op = Op::new("UnixStream::connect");
    pub(super) static READ: Op = Op::new("UnixStream::read");
    pub(super) static READ_INTO: Op = Op::new("UnixStream::read_into");
    pub(super) static READ_EXACT: Op = Op::new("UnixStream::read_exact");
    pub(super) static WRITE: Op = Op::new("UnixStream::write");
    pub(super) static WRITE_ALL: Op = Op::new("UnixStream::write_all");
    pub(super) static SHUTDOWN: Op = Op::new("UnixStream::shutdown");
    pub(super) static LOCAL_ADDR: Op = Op::new("UnixStream::local_addr");
    pub(super) static PEER_ADDR: Op = Op::new("UnixStream::peer_addr");
}

/// A Unix domain stream socket listening for connections.
///
/// Binding creates the socket file at the path; it is not removed when the
/// listener closes (as with std's listener): remove it yourself before
/// binding the same path again, or binding fails with `AddrInUse`.
///
/// ```
/// use spindle_effect::net::{UnixListener, UnixStream};
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let dir = std::env::temp_dir().join(format!("spindle-doc-unix-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("sock");
/// let _ = std::fs::remove_file(&path);
/// let rt = Runtime::new()?;
/// let client_path = path.clone();
/// let program = UnixListener::bind(&path).flat_map(move |listener| {
///     let server = listener
///         .accept()
///         .flat_map(|(stream, _)| stream.write_all(b"hi").product_r(IO::pure(stream)));
///     let client = UnixStream::connect(client_path).flat_map(|stream| stream.read(16));
///     server.both(client).map(|(_stream, bytes)| bytes)
/// });
/// assert_eq!(rt.block_on(program)?.succeeded(), Some(b"hi".to_vec()));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A cheap handle (`Clone`), as [`TcpListener`](crate::TcpListener) is:
/// clones accept from the same socket, which closes when the last clone
/// is dropped. [`serve`](crate::serve()) runs an accept loop over one.
#[derive(Clone)]
pub struct UnixListener {
    source: Arc<Source<std::os::unix::net::UnixListener>>,
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("addr", &self.source.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl UnixListener {
    /// Binds a listening socket to the file `path` (created; it must not
    /// exist). A path in use, a missing directory, a permission error, or
    /// running outside an executor with I/O is an error value. The system's default
    /// backlog applies (std's, 128 on Linux).
    #[track_caller]
    pub fn bind(path: impl AsRef<Path>) -> IO<UnixListener, io::Error> {
        let path: PathBuf = path.as_ref().to_path_buf();
        immediate(move || {
            // Check first, so that no socket file is made for nothing.
            check_driver()?;
            let listener = std::os::unix::net::UnixListener::bind(&path)?;
            listener.set_nonblocking(true)?;
            Ok(UnixListener {
                source: Source::register(listener)?,
            })
        })
        .traced_as(&ops::BIND)
    }

    /// Waits for a connection; returns its stream (registered with the
    /// driver of the thread that accepted it) and the peer's address (usually unnamed: a
    /// client socket seldom binds a path).
    #[track_caller]
    pub fn accept(&self) -> IO<(UnixStream, SocketAddr), io::Error> {
        retry(&self.source, Direction::Read, (), |listener, ()| {
            let accepted = listener
                .accept()
                .and_then(|(stream, peer)| Ok((UnixStream::adopt(stream)?, peer)));
            accepted.map_err(|e| ((), e))
        })
        .traced_as(&ops::ACCEPT)
    }

    /// The address the socket is bound to (its path).
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |listener| listener.local_addr()).traced_as(&ops::LISTENER_LOCAL_ADDR)
    }
}

/// A Unix domain stream connection.
///
/// Its operations mean what [`TcpStream`](crate::TcpStream)'s do (the same
/// code runs them): reads take and return owned buffers, an empty read is
/// end of stream, a canceled operation leaves no interest behind, and the
/// socket closes when the stream and every `IO` value built from it are
/// dropped. It is a cheap handle (`Clone`) with the same
/// [sharing](crate#sharing) rules: clones use one connection, writes
/// through them are each whole, and the connection closes with the last
/// of them.
#[derive(Clone)]
pub struct UnixStream {
    source: Arc<Source<std::os::unix::net::UnixStream>>,
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("local", &self.source.local_addr().ok())
            .field("peer", &self.source.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

/// After the socket of a background `connect` is writable: whether it
/// connected (`WouldBlock`: not yet, a spurious wake-up).
fn finish_connect(stream: &std::os::unix::net::UnixStream) -> io::Result<()> {
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

impl UnixStream {
    /// Registers an accepted or connected socket with the current driver.
    fn adopt(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        Ok(UnixStream {
            source: Source::register(stream)?,
        })
    }

    /// Connects to the listener at `path` without blocking a thread. A
    /// path with no socket (`NotFound`), one nobody listens on
    /// (`ConnectionRefused`), or running outside an executor with I/O is an
    /// error value.
    ///
    /// On Linux a connection to a listener whose queue of connections not
    /// yet accepted is full fails at once with an error of kind
    /// `WouldBlock` (the system does not finish such a connect in the
    /// background); elsewhere the fiber waits until the connect finishes.
    #[track_caller]
    pub fn connect(path: impl AsRef<Path>) -> IO<UnixStream, io::Error> {
        use socket2::{Domain, SockAddr, Socket, Type};
        let path: PathBuf = path.as_ref().to_path_buf();
        IO::defer_untraced(move || {
            let started = (|| {
                check_driver()?;
                let addr = SockAddr::unix(&path)?;
                let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
                socket.set_nonblocking(true)?;
                match socket.connect(&addr) {
                    Ok(()) => {}
                    // EINPROGRESS only: on Linux EAGAIN is a full backlog,
                    // not a connect that goes on.
                    Err(e) if connect_in_progress(&e) && e.kind() != io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                UnixStream::adopt(std::os::unix::net::UnixStream::from(
                    std::os::fd::OwnedFd::from(socket),
                ))
            })();
            match started {
                Ok(stream) => retry(&stream.source, Direction::Write, (), |socket, ()| {
                    finish_connect(socket).map_err(|e| ((), e))
                })
                .map_untraced(move |()| stream),
                Err(e) => IO::raise_error_untraced(e),
            }
        })
        .traced_as(&ops::CONNECT)
    }

    /// Reads at most `max` bytes, waiting until some are available; an
    /// empty vector means end of stream (the peer closed its side).
    #[track_caller]
    pub fn read(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        stream::read_into(&self.source, Vec::new(), max)
            .map_untraced(|(buf, _)| buf)
            .traced_as(&ops::READ)
    }

    /// Appends at most `max` bytes to `buf`, waiting until some are
    /// available; returns the buffer and the number of bytes read (0: end
    /// of stream, or `max` was 0).
    #[track_caller]
    pub fn read_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        stream::read_into(&self.source, buf, max).traced_as(&ops::READ_INTO)
    }

    /// Reads exactly `len` bytes (see [`TcpStream::read_exact`](crate::TcpStream::read_exact)).
    #[track_caller]
    pub fn read_exact(&self, len: usize) -> IO<Vec<u8>, io::Error> {
        stream::read_exact(&self.source, len).traced_as(&ops::READ_EXACT)
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

    /// Writes all of `data`, waiting as often as the socket needs; whole,
    /// as [`TcpStream::write_all`](crate::TcpStream::write_all) writes.
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

    /// This end's address (usually unnamed for a connecting client).
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |socket| socket.local_addr()).traced_as(&ops::LOCAL_ADDR)
    }

    /// The peer's address (the listener's path, for a client).
    #[track_caller]
    pub fn peer_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |socket| socket.peer_addr()).traced_as(&ops::PEER_ADDR)
    }
}

impl UnixStream {
    /// Splits the stream into a reading and a writing half, to be owned by
    /// two fibers. Dropping the [`WriteHalf`] (its last clone) shuts the
    /// write side down; [`ReadHalf::reunite`] gives the stream back.
    pub fn into_split(self) -> (ReadHalf<UnixStream>, WriteHalf<UnixStream>) {
        stream::split(self)
    }
}

impl stream::sealed::Split for UnixStream {
    type Io = std::os::unix::net::UnixStream;

    fn source(&self) -> &Arc<Source<std::os::unix::net::UnixStream>> {
        &self.source
    }

    fn from_source(source: Arc<Source<std::os::unix::net::UnixStream>>) -> UnixStream {
        UnixStream { source }
    }
}

impl Split for UnixStream {}

impl ReadShared for UnixStream {
    fn read_shared(&self, shared: Arc<Mutex<Vec<u8>>>, max: usize) -> IO<usize, io::Error> {
        stream::read_shared(&self.source, shared, max)
    }
}

impl ReadStream for UnixStream {}
