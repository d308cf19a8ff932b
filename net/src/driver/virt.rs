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

use std::io;
use std::net::{Shutdown, SocketAddr};
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
