//! Simulated sockets: the part of the I/O capability for a driver that
//! simulates a network instead of opening system sockets (spindle-sim).
//! **For executor authors**; applications use the socket types, which
//! work unchanged on such a driver.
//!
//! A driver whose [`IoDriver::network`](super::IoDriver::network) returns a
//! [`VirtualNetwork`] gets every TCP and UDP socket a fiber makes on it:
//! [`TcpListener::bind`](crate::TcpListener::bind),
//! [`TcpStream::connect`](crate::TcpStream::connect) (and `connect_host`,
//! whose names the network resolves) and
//! [`UdpSocket::bind`](crate::UdpSocket::bind) ask the network for a
//! virtual socket instead of the system, and no system socket is opened.
//! Unix-domain sockets and [`AsyncFd`](crate::AsyncFd) still go to
//! [`IoDriver::register`](super::IoDriver::register), which such a driver
//! may refuse.
//!
//! # The protocol is the system's
//!
//! A virtual socket behaves as a non-blocking system socket does, and is
//! its own [`Registration`]: every call either completes at once or fails
//! with `WouldBlock`; the socket operation then waits with
//! [`Registration::wait`] for the readiness the call needs, and tries
//! again (the loop of the [driver module](super)). The promises of that
//! module hold unchanged: no lost readiness, cancellation leaves nothing
//! behind, errors instead of hangs. So every operation of the socket
//! types — `read_exact`, `write_all` and its write turn, [`BufReader`](crate::BufReader)'s
//! lines, split halves, [`serve`](crate::serve()) — runs on a virtual
//! socket with the code it runs with on a system one.
//!
//! The semantics a virtual socket must have, the system's:
//!
//! * [`VirtualStream::recv`] appends at most `max` bytes in order; `Ok(0)`
//!   (with `max > 0`) is the end of the stream, after the peer shut its
//!   writing side down or closed, and every later call returns it again; a
//!   reset connection fails with `ConnectionReset`.
//! * [`VirtualStream::send`] takes some bytes (at least one when `data` is
//!   not empty) or fails with `WouldBlock` when the send buffer is full;
//!   after the peer is gone, `BrokenPipe` or `ConnectionReset`.
//! * A connection made by [`VirtualNetwork::connect_tcp`] is in progress
//!   until it is established or refused; meanwhile `peer_addr` fails with
//!   `NotConnected` and the socket is not writable. When it ends the
//!   socket becomes writable, and [`VirtualStream::take_error`] returns
//!   the refusal (once).
//! * Dropping the last reference to a virtual socket closes it (the peer
//!   reads the end of the stream, or a datagram socket's address is free
//!   again).
//!
//! # Simulated files
//!
//! A driver whose [`IoDriver::disk`](super::IoDriver::disk) returns a
//! [`VirtualDisk`] gets the file operations of the fibers it runs
//! (spindle-os's `fs`): they call the disk, synchronously, on the
//! blocking pool, instead of the system, and no system file is touched.
//! The disk is looked up by the fiber that runs the operation, and the
//! blocking call holds it: a disk outlives the calls made on it.

use std::ffi::OsString;
use std::io::{self, SeekFrom};
use std::net::{Shutdown, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use super::Registration;

/// A simulated network, as a driver offers it
/// ([`IoDriver::network`](super::IoDriver::network)).
pub trait VirtualNetwork: Send + Sync {
    /// Binds a listening TCP socket to `addr` (port 0: one the network
    /// picks). An address in use is an `AddrInUse` error, an address that
    /// is not the current host's an `AddrNotAvailable` error.
    fn bind_tcp(&self, addr: SocketAddr) -> io::Result<Arc<dyn VirtualListener>>;

    /// Starts a TCP connection to `addr`: returns at once with a stream
    /// whose connection is in progress (see the [module documentation](self)).
    fn connect_tcp(&self, addr: SocketAddr) -> io::Result<Arc<dyn VirtualStream>>;

    /// Binds a UDP socket to `addr` (port 0: one the network picks).
    fn bind_udp(&self, addr: SocketAddr) -> io::Result<Arc<dyn VirtualDatagram>>;

    /// Resolves a `"name:port"` string (as
    /// [`TcpStream::connect_host`](crate::TcpStream::connect_host) takes)
    /// to addresses: the network's host names, or literal addresses. A
    /// name it does not know is an error.
    fn resolve(&self, host: &str) -> io::Result<Vec<SocketAddr>>;
}

/// A virtual listening TCP socket: readable when a connection is waiting.
pub trait VirtualListener: Registration {
    /// This socket as its registration (`self`: the cast for callers that
    /// hold the socket's trait object).
    fn registration(self: Arc<Self>) -> Arc<dyn Registration>;

    /// Takes a waiting connection and its peer's address; `WouldBlock`
    /// when none is waiting.
    fn accept(&self) -> io::Result<(Arc<dyn VirtualStream>, SocketAddr)>;

    /// The address the socket is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A virtual TCP connection (see the [module documentation](self) for the
/// semantics of each call).
pub trait VirtualStream: Registration {
    /// This socket as its registration (`self`).
    fn registration(self: Arc<Self>) -> Arc<dyn Registration>;

    /// Appends at most `max` bytes to `buf`; how many (`0`: end of
    /// stream); `WouldBlock` when none has arrived.
    fn recv(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize>;

    /// Sends some of `data`; how many bytes were taken.
    fn send(&self, data: &[u8]) -> io::Result<usize>;

    /// Shuts down the reading side, the writing side (the peer reads the
    /// end of the stream once the bytes sent before arrived) or both.
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;

    /// The error that ended a connection attempt, once (`None`: none, or
    /// taken already).
    fn take_error(&self) -> io::Result<Option<io::Error>>;

    /// This end's address.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// The peer's address (`NotConnected` while the connection is in
    /// progress).
    fn peer_addr(&self) -> io::Result<SocketAddr>;

    /// Sets `TCP_NODELAY` (a network may ignore it).
    fn set_nodelay(&self, nodelay: bool) -> io::Result<()>;
}

/// A virtual UDP socket: one datagram per send and per receive.
pub trait VirtualDatagram: Registration {
    /// This socket as its registration (`self`).
    fn registration(self: Arc<Self>) -> Arc<dyn Registration>;

    /// Sends `data` as one datagram to `addr`; its length.
    fn send_to(&self, data: &[u8], addr: SocketAddr) -> io::Result<usize>;

    /// Takes one datagram: at most `max` bytes of it (the rest is
    /// discarded) and its sender; `WouldBlock` when none has arrived. On
    /// a connected socket, only datagrams from the peer.
    fn recv_from(&self, max: usize) -> io::Result<(Vec<u8>, SocketAddr)>;

    /// Sets the default destination (and the only accepted sender).
    fn connect(&self, addr: SocketAddr) -> io::Result<()>;

    /// The connected peer (`NotConnected` when there is none).
    fn peer_addr(&self) -> io::Result<SocketAddr>;

    /// The address the socket is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// How a file is opened on a [`VirtualDisk`]: std's `OpenOptions` as
/// plain fields. The caller has checked the combination (at least one of
/// `read`, `write`, `append`; `truncate` only with `write`; `create` and
/// `create_new` only with `write` or `append`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtualOpenOptions {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// Every write goes to the end of the file.
    pub append: bool,
    /// Cut an existing file to length 0.
    pub truncate: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Create the file, failing with `AlreadyExists` if it exists.
    pub create_new: bool,
}

/// What a [`VirtualDisk`] says of a path: a directory or a file, and the
/// file's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtualMetadata {
    /// A directory (`false`: a regular file; a simulated disk has no
    /// other kind).
    pub is_dir: bool,
    /// The file's length in bytes (0 for a directory).
    pub len: u64,
}

/// A simulated disk, as a driver offers it
/// ([`IoDriver::disk`](super::IoDriver::disk)): spindle-os's `fs`
/// functions and `File` use it instead of the system's files.
///
/// Every call is synchronous and has the semantics of its `std::fs`
/// namesake on a local Unix file system: the same error kinds
/// (`NotFound` for a missing path or parent, `AlreadyExists`,
/// `NotADirectory`, `IsADirectory`, `DirectoryNotEmpty`, ...), a rename
/// that replaces a file, files that live on while open after their last
/// name is removed. Paths are taken as they are given (a relative path
/// is relative to the disk's root); errors do not name the path (the
/// caller adds it). The whole-file calls have defaults made of
/// [`open`](VirtualDisk::open) and the file's calls.
pub trait VirtualDisk: Send + Sync {
    /// Opens the file at `path`.
    fn open(&self, path: &Path, options: VirtualOpenOptions) -> io::Result<Arc<dyn VirtualFile>>;

    /// What is at `path` (`NotFound` if nothing).
    fn metadata(&self, path: &Path) -> io::Result<VirtualMetadata>;

    /// Creates the directory `path`; its parent must exist.
    fn create_dir(&self, path: &Path) -> io::Result<()>;

    /// Creates the directory `path` and its missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Removes the file `path` (an open file lives on, nameless).
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Removes the empty directory `path`.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;

    /// Removes the directory `path` and everything below it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Renames `from` to `to`, replacing a file (or an empty directory,
    /// when `from` is one) at `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes `link` a second name of the file `original`.
    fn hard_link(&self, original: &Path, link: &Path) -> io::Result<()>;

    /// The entries of the directory `path`, in the order of their names.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, VirtualMetadata)>>;

    /// The whole contents of the file at `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let options = VirtualOpenOptions {
            read: true,
            ..VirtualOpenOptions::default()
        };
        self.open(path, options)?.read_to_end()
    }

    /// Writes `data` as the whole contents of the file at `path` (created
    /// or truncated).
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let options = VirtualOpenOptions {
            write: true,
            create: true,
            truncate: true,
            ..VirtualOpenOptions::default()
        };
        self.open(path, options)?.write_all_at(0, data)
    }

    /// Appends `data` to the file at `path` (created if missing).
    fn append(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let options = VirtualOpenOptions {
            append: true,
            create: true,
            ..VirtualOpenOptions::default()
        };
        let file = self.open(path, options)?;
        let mut rest = data;
        while !rest.is_empty() {
            let n = file.write(rest)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Copies the contents of the file `from` to `to` (created or
    /// truncated); the number of bytes.
    fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        let bytes = self.read(from)?;
        self.write(to, &bytes)?;
        Ok(bytes.len() as u64)
    }
}

/// A file open on a [`VirtualDisk`]: a cursor over the file's bytes, as an
/// open `std::fs::File` (the file lives as long as a handle does).
pub trait VirtualFile: Send + Sync {
    /// At most `max` bytes from the cursor on (fewer at the end of the
    /// file, none past it), moving the cursor.
    fn read(&self, max: usize) -> io::Result<Vec<u8>>;

    /// Everything from the cursor on, moving the cursor to the end.
    fn read_to_end(&self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        loop {
            let chunk = self.read(64 * 1024)?;
            if chunk.is_empty() {
                return Ok(bytes);
            }
            bytes.extend_from_slice(&chunk);
        }
    }

    /// At most `max` bytes from `offset` on; the cursor does not move.
    fn read_at(&self, offset: u64, max: usize) -> io::Result<Vec<u8>>;

    /// Writes `data` at the cursor (at the end in append mode): how many
    /// bytes were taken (all of them, on a simulated disk).
    fn write(&self, data: &[u8]) -> io::Result<usize>;

    /// Writes all of `data` at `offset` (extending the file with zeros
    /// past its end); the cursor does not move.
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Moves the cursor; its new offset.
    fn seek(&self, position: SeekFrom) -> io::Result<u64>;

    /// Cuts or extends (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Makes the file's contents durable (`sync_all`, `sync_data`): a
    /// crash of the disk's host no longer loses them.
    fn sync(&self) -> io::Result<()>;

    /// The file's length.
    fn metadata(&self) -> io::Result<VirtualMetadata>;
}
