//! UDP sockets: [`UdpSocket`].

use std::fmt;
use std::io;
use std::net::SocketAddr;

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use std::sync::Arc;

use crate::driver::{Direction, VirtualDatagram, with_network};
use crate::source::{Source, immediate, on, retry};

/// A UDP socket: the system's, or a simulated network's
/// ([`driver::virt`](crate::driver::virt)).
pub(crate) enum DatagramSocket {
    /// A system socket (a view of the descriptor its registration owns).
    System(std::net::UdpSocket),
    /// A virtual socket.
    Virtual(Arc<dyn VirtualDatagram>),
}

impl DatagramSocket {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            DatagramSocket::System(socket) => socket.local_addr(),
            DatagramSocket::Virtual(socket) => socket.local_addr(),
        }
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            DatagramSocket::System(socket) => socket.peer_addr(),
            DatagramSocket::Virtual(socket) => socket.peer_addr(),
        }
    }

    fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        match self {
            DatagramSocket::System(socket) => socket.connect(addr),
            DatagramSocket::Virtual(socket) => socket.connect(addr),
        }
    }

    fn send_to(&self, data: &[u8], addr: SocketAddr) -> io::Result<usize> {
        match self {
            DatagramSocket::System(socket) => socket.send_to(data, addr),
            DatagramSocket::Virtual(socket) => socket.send_to(data, addr),
        }
    }

    fn send(&self, data: &[u8]) -> io::Result<usize> {
        match self {
            DatagramSocket::System(socket) => socket.send(data),
            DatagramSocket::Virtual(socket) => socket.send_to(data, socket.peer_addr()?),
        }
    }

    fn recv_from(&self, max: usize) -> io::Result<(Vec<u8>, SocketAddr)> {
        match self {
            DatagramSocket::System(socket) => {
                let mut buf = Vec::with_capacity(max);
                let spare = &mut buf.spare_capacity_mut()[..max];
                let (n, from) = socket2::SockRef::from(socket).recv_from(spare)?;
                // SAFETY: `recv_from` initialised the first `n` bytes of
                // the capacity (socket2's contract, `n <= max`).
                unsafe { buf.set_len(n) };
                match from.as_socket() {
                    Some(from) => Ok((buf, from)),
                    None => Err(io::Error::other(
                        "spindle-net: a datagram from an address that is not IP",
                    )),
                }
            }
            DatagramSocket::Virtual(socket) => socket.recv_from(max),
        }
    }

    fn recv(&self, max: usize) -> io::Result<Vec<u8>> {
        match self {
            DatagramSocket::System(socket) => {
                let mut buf = Vec::with_capacity(max);
                crate::stream::append_from(socket, &mut buf, max)?;
                Ok(buf)
            }
            DatagramSocket::Virtual(socket) => {
                // Unconnected: `NotConnected`, as the system's `recv` on
                // Linux would wait instead; a virtual socket says so.
                socket.peer_addr()?;
                socket.recv_from(max).map(|(buf, _)| buf)
            }
        }
    }
}

mod ops {
    use spindle_core::untraced::Op;

    pub(super) static BIND: Op = Op::new("UdpSocket::bind");
    pub(super) static LOCAL_ADDR: Op = Op::new("UdpSocket::local_addr");
    pub(super) static PEER_ADDR: Op = Op::new("UdpSocket::peer_addr");
    pub(super) static CONNECT: Op = Op::new("UdpSocket::connect");
    pub(super) static SEND_TO: Op = Op::new("UdpSocket::send_to");
    pub(super) static RECV_FROM: Op = Op::new("UdpSocket::recv_from");
    pub(super) static SEND: Op = Op::new("UdpSocket::send");
    pub(super) static RECV: Op = Op::new("UdpSocket::recv");
}

/// A UDP socket.
///
/// # Datagrams
///
/// Every send is one datagram, sent whole or not at all (a datagram larger
/// than the system accepts is an error value, kind depending on the system:
/// `EMSGSIZE` on Linux); every receive returns one datagram. A receive with
/// a `max` smaller than the datagram returns its first `max` bytes and the
/// rest is discarded, as the system does (on Windows the system reports
/// that as an error instead, which is then the operation's error). A
/// datagram of 0 bytes is received as an empty vector: unlike a stream's,
/// an empty receive is not an end of anything.
///
/// UDP does not tell the sender whether a datagram arrived; on a
/// [`connect`](UdpSocket::connect)ed socket some systems report an ICMP
/// "port unreachable" for an earlier send as a `ConnectionRefused` error of
/// a later send or receive.
///
/// ```
/// use spindle_effect::net::UdpSocket;
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let rt = Runtime::new()?;
/// let localhost = "127.0.0.1:0".parse().unwrap();
/// let program = UdpSocket::bind(localhost).flat_map(move |a| {
///     UdpSocket::bind(localhost).flat_map(move |b| {
///         b.local_addr().flat_map(move |to| {
///             a.send_to(b"ping", to).product_r(b.recv_from(64))
///         })
///     })
/// });
/// let (datagram, _from) = rt.block_on(program)?.succeeded().unwrap();
/// assert_eq!(datagram, b"ping".to_vec());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Closing is as for the TCP types (the [crate documentation](crate#closing)):
/// the socket closes when it and every `IO` value built from it are
/// dropped.
///
/// A cheap handle (`Clone`): clones send and receive on the same socket
/// from any fibers. Each send is one datagram, so sends from several
/// fibers never mix; each receive takes one datagram, which goes to
/// exactly one of the fibers receiving at the time. The socket closes
/// when the last clone is dropped.
#[derive(Clone)]
pub struct UdpSocket {
    source: Arc<Source<DatagramSocket>>,
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local", &self.source.local_addr().ok())
            .field("peer", &self.source.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl UdpSocket {
    /// Binds a UDP socket to `addr` (port 0: one the system picks; read it
    /// with [`local_addr`](UdpSocket::local_addr)). An address in use, a
    /// permission error, or running outside an executor with I/O is an
    /// error value.
    #[track_caller]
    pub fn bind(addr: SocketAddr) -> IO<UdpSocket, io::Error> {
        immediate(move || {
            // Find the driver first, so that no socket is bound for nothing.
            if let Some(socket) = with_network(|net| net.map(|net| net.bind_udp(addr)))? {
                let socket = socket?;
                let registration = socket.clone().registration();
                return Ok(UdpSocket {
                    source: Source::virtual_socket(DatagramSocket::Virtual(socket), registration),
                });
            }
            let socket = std::net::UdpSocket::bind(addr)?;
            socket.set_nonblocking(true)?;
            Ok(UdpSocket {
                source: Source::register_as(socket, DatagramSocket::System)?,
            })
        })
        .traced_as(&ops::BIND)
    }

    /// The address the socket is bound to.
    #[track_caller]
    pub fn local_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |socket| socket.local_addr()).traced_as(&ops::LOCAL_ADDR)
    }

    /// The address the socket is [`connect`](UdpSocket::connect)ed to (an
    /// error of kind `NotConnected` if it is not).
    #[track_caller]
    pub fn peer_addr(&self) -> IO<SocketAddr, io::Error> {
        on(&self.source, |socket| socket.peer_addr()).traced_as(&ops::PEER_ADDR)
    }

    /// Sets the socket's default destination to `addr`: [`send`](UdpSocket::send)
    /// sends there, and [`recv`](UdpSocket::recv) (and `recv_from`) receive
    /// only datagrams from there. Nothing is sent: it never waits. Calling
    /// it again changes the peer.
    #[track_caller]
    pub fn connect(&self, addr: SocketAddr) -> IO<(), io::Error> {
        on(&self.source, move |socket| socket.connect(addr)).traced_as(&ops::CONNECT)
    }

    /// Sends `data` as one datagram to `addr`, waiting until the socket
    /// accepts it; returns its length.
    #[track_caller]
    pub fn send_to<B>(&self, data: B, addr: SocketAddr) -> IO<usize, io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        retry(&self.source, Direction::Write, data, move |socket, data| {
            socket.send_to(data.as_ref(), addr).map_err(|e| (data, e))
        })
        .traced_as(&ops::SEND_TO)
    }

    /// Waits for a datagram; returns at most `max` bytes of it (the rest is
    /// discarded, see [Datagrams](UdpSocket#datagrams)) and its sender.
    #[track_caller]
    pub fn recv_from(&self, max: usize) -> IO<(Vec<u8>, SocketAddr), io::Error> {
        retry(&self.source, Direction::Read, (), move |socket, ()| {
            socket.recv_from(max).map_err(|e| ((), e))
        })
        .traced_as(&ops::RECV_FROM)
    }

    /// Sends `data` as one datagram to the [`connect`](UdpSocket::connect)ed
    /// peer (an error if there is none); returns its length.
    #[track_caller]
    pub fn send<B>(&self, data: B) -> IO<usize, io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        retry(&self.source, Direction::Write, data, |socket, data| {
            socket.send(data.as_ref()).map_err(|e| (data, e))
        })
        .traced_as(&ops::SEND)
    }

    /// Waits for a datagram from the [`connect`](UdpSocket::connect)ed peer;
    /// returns at most `max` bytes of it (the rest is discarded, see
    /// [Datagrams](UdpSocket#datagrams)).
    #[track_caller]
    pub fn recv(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        retry(&self.source, Direction::Read, (), move |socket, ()| {
            socket.recv(max).map_err(|e| ((), e))
        })
        .traced_as(&ops::RECV)
    }
}
