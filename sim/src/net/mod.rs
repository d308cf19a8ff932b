//! The simulated network: named hosts on virtual addresses, TCP and UDP
//! between them, delays and faults drawn from the run's seed. No system
//! socket is opened.
//!
//! # Hosts
//!
//! The main program runs on the host `"main"` (10.0.0.1). [`Run::host`]
//! adds a host with a program: `run.host("server", || server())` returns
//! its address (10.0.0.2, 10.0.0.3, ... in the order they are added); the
//! factory is called when the run starts and again each time the host
//! restarts after a crash. Every fiber belongs to the host of the fiber
//! that started it, and runs with that host's view of the network as its
//! I/O driver (`spindle_net::driver::with_driver`): so
//! `TcpListener::bind("0.0.0.0:6379")` (or `127.0.0.1`, or the host's own
//! address) binds on that host, `TcpStream::connect` connects from it, and
//! `connect_host("server:6379")` resolves the host name (`localhost`
//! is the host itself). A socket's local address is its host's address
//! and port, whichever of these it was bound to. Unix-domain
//! sockets and `AsyncFd` are refused (`Unsupported`): a simulated host has
//! no file descriptors.
//!
//! # The model
//!
//! Everything the network does is an event in virtual time (an ordered
//! queue, next to the executor's timers): a packet sent now arrives after
//! a delay drawn in [`NetConfig::latency`] plus [`NetConfig::jitter`].
//! When no fiber is ready, the simulator jumps virtual time to the
//! earlier of the next timer and the next network event; a run with only
//! packets in flight is not deadlocked, and one with neither is.
//!
//! * **TCP.** A connection attempt reaches the destination one delay
//!   later: no listener there (or a full backlog) refuses it
//!   (`ConnectionRefused`, one more delay later); an unreachable host
//!   (partitioned, or down) is tried again every
//!   [`NetConfig::retransmit`] until [`NetConfig::connect_timeout`]
//!   (`TimedOut`). Accepted, it waits in the listener's backlog and the
//!   client becomes writable one more delay later. Bytes flow in order in
//!   each direction, never lost or reordered: a loss (probability
//!   [`NetConfig::loss`]) delays a segment by one retransmission, a
//!   partition holds it (and those after it) until it heals, or fails the
//!   connection with `TimedOut` at both ends after
//!   [`NetConfig::tcp_timeout`]. A sender may have at most
//!   [`NetConfig::send_buffer`] bytes in flight or unread by its peer
//!   (`WouldBlock` beyond: the peer's reads make room). Shutting down the
//!   writing side, or dropping the last handle, sends the end of the
//!   stream after the bytes before it; bytes that arrive for a closed
//!   socket reset the sender's connection (`ConnectionReset`).
//! * **UDP.** Each datagram is lost with probability [`NetConfig::loss`],
//!   delivered twice with probability [`NetConfig::duplicate`], each copy
//!   after its own delay (so datagrams overtake each other by up to the
//!   jitter); a datagram for a port nobody binds, or beyond
//!   [`NetConfig::udp_queue`] unread ones, is dropped. A connected socket
//!   only receives from its peer.
//! * **Partitions.** Between two hosts, both ways: random ones (each packet
//!   between two hosts starts one with probability
//!   [`NetConfig::partitions`], healing after
//!   [`NetConfig::partition_length`]), and the program's own: scheduled
//!   when it is built ([`Run::partition`]) or made while it runs
//!   ([`partition`], [`heal`]).
//! * **Crashes.** A host started with [`Run::host`] crashes when a packet
//!   reaches it, with probability [`NetConfig::crashes`], when the
//!   program calls [`crash`], or at the time given to [`Run::crash`]. A
//!   crash is abrupt: the host's fibers are stopped where they are and
//!   freed, **without running their finalizers**
//!   (a process that dies does not run its `finally` blocks; state the
//!   program kept outside the host's fibers, such as a `Ref` standing for
//!   its disk, survives). Its sockets are gone: their peers' next read or
//!   write fails with `ConnectionReset`, its ports are free. It restarts
//!   after [`NetConfig::restart_after`] by calling its factory again. The
//!   main program's host never crashes.
//!
//! # Invariants
//!
//! * Every draw (delays, losses, duplicates, partitions, crashes) comes
//!   from a generator seeded by the run's seed (a stream of its own, so
//!   that network settings do not change the scheduler's picks), and
//!   events at the same instant are processed in the order they were
//!   made: a seed replays the network exactly, and its record of
//!   partitions, heals, crashes and restarts
//!   ([`RunReport::network`](crate::RunReport::network)) with it.
//! * Random partitions and crashes are faults of the run
//!   ([`Fault::Partition`](crate::Fault::Partition),
//!   [`Fault::Crash`](crate::Fault::Crash)), numbered with the others: a
//!   failure's report lists them, and shrinking leaves out those the
//!   failure does not need (the replay key names them). Delays, losses
//!   and duplicates are not recorded one by one (there is one per packet).
//! * A socket's readiness changes only under the network's lock, where a
//!   fiber's wait also checks it before it registers: no wake-up is lost.
//!   A waiting fiber is resumed through its callback, i.e. the executor's
//!   ordinary scheduling, after the lock is released; canceling the wait
//!   removes the waiter. A socket is ready for a direction exactly when
//!   its call for that direction would not fail with `WouldBlock`, so a
//!   woken operation never spins without time passing.
//! * A fiber of a crashed host is never run again: it is taken out of the
//!   ready set at the crash, and dropped when anything schedules it later.
//!
//! The design borrows from turmoil's hosts and madsim's network (the idea
//! of named hosts on one seeded clock); the code is this crate's own.
//!
//! [`Run::host`]: crate::Run::host
//! [`Run::partition`]: crate::Run::partition
//! [`Run::crash`]: crate::Run::crash

mod config;
mod model;

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use spindle_core::{Callback, IO};
use spindle_net::driver::{
    Direction, IoDriver, Readiness, Registration, VirtualDatagram, VirtualListener, VirtualNetwork,
    VirtualStream,
};

pub use config::NetConfig;
pub(crate) use config::NetParams;
pub(crate) use model::Net;

/// One thing the network did that a run's report records: a partition, a
/// heal, a crash, a restart, a connection timed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetEvent {
    /// Virtual time.
    pub at: Duration,
    /// What happened.
    pub what: String,
}

impl core::fmt::Display for NetEvent {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}: {}", self.at, self.what)
    }
}

/// The network of one run, shared by the hosts' drivers and sockets.
pub(crate) struct Network {
    net: Mutex<Net>,
    /// Virtual time (nanoseconds), as the run loop last set it: the
    /// network's clock for packets sent by fibers.
    now: AtomicU64,
    /// When the next event is due (`u64::MAX`: none), read by the run
    /// loop without the lock.
    next_at: AtomicU64,
}

impl Network {
    pub(crate) fn new(params: NetParams, seed: u64) -> Arc<Network> {
        Arc::new(Network {
            net: Mutex::new(Net::new(params, seed)),
            now: AtomicU64::new(0),
            next_at: AtomicU64::new(u64::MAX),
        })
    }

    /// Virtual time moved to `now` (the run loop, before each step).
    #[inline]
    pub(crate) fn set_now(&self, now: u64) {
        self.now.store(now, Ordering::Relaxed);
    }

    /// When the next event is due, if any.
    #[inline]
    pub(crate) fn next_event(&self) -> Option<u64> {
        let at = self.next_at.load(Ordering::Relaxed);
        (at != u64::MAX).then_some(at)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Net> {
        self.net.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the network, then (without the lock) resumes the fibers
    /// it woke and drops the callbacks it let go of.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Net) -> R) -> R {
        let (r, wakes, garbage) = {
            let mut net = self.lock();
            net.now = net.now.max(self.now.load(Ordering::Relaxed));
            let r = f(&mut net);
            self.next_at
                .store(net.next_event().unwrap_or(u64::MAX), Ordering::Relaxed);
            (
                r,
                core::mem::take(&mut net.wakes),
                core::mem::take(&mut net.garbage),
            )
        };
        for wake in wakes {
            wake.succeed(());
        }
        drop(garbage);
        r
    }
}

/// A waiting fiber's interest in a socket.
fn wait_on(network: Arc<Network>, id: usize, direction: Direction) -> IO<(), io::Error> {
    IO::from_callback(move |callback: Callback<(), io::Error>| {
        let token = {
            let mut net = network.lock();
            if net.shut || net.ready(id, direction) {
                None
            } else {
                Some(net.add_waiter(id, direction, callback.clone()))
            }
        };
        match token {
            None => {
                callback.succeed(());
                None
            }
            Some(token) => Some(IO::delay(move || {
                network.with(|net| net.remove_waiter(id, token));
            })),
        }
    })
}

/// A socket's handle: the network and the socket's number. Dropping the
/// last one closes the socket.
struct Handle {
    network: Arc<Network>,
    id: usize,
}

impl Handle {
    /// Runs a socket call on the network (an error once the run has ended
    /// and the network is emptied: no fiber runs then, but a drop might).
    fn op<R>(&self, f: impl FnOnce(&mut Net, usize) -> io::Result<R>) -> io::Result<R> {
        self.network.with(|net| {
            if net.shut {
                return Err(io::Error::other("spindle-sim: the simulation has ended"));
            }
            f(net, self.id)
        })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.network.with(|net| net.close(self.id));
    }
}

macro_rules! registration {
    ($t:ty) => {
        impl Registration for $t {
            fn readiness(&self) -> Readiness {
                Readiness::UNKNOWN
            }

            fn wait(self: Arc<Self>, direction: Direction, _seen: Readiness) -> IO<(), io::Error> {
                wait_on(self.0.network.clone(), self.0.id, direction)
            }
        }
    };
}

struct SimListener(Handle);
struct SimStream(Handle);
struct SimDatagram(Handle);

registration!(SimListener);
registration!(SimStream);
registration!(SimDatagram);

impl VirtualListener for SimListener {
    fn registration(self: Arc<Self>) -> Arc<dyn Registration> {
        self
    }

    fn accept(&self) -> io::Result<(Arc<dyn VirtualStream>, SocketAddr)> {
        let (id, peer) = self.0.op(|net, id| net.accept(id))?;
        let stream: Arc<dyn VirtualStream> = Arc::new(SimStream(Handle {
            network: self.0.network.clone(),
            id,
        }));
        Ok((stream, peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.op(|net, id| Ok(net.listener_addr(id)))
    }
}

impl VirtualStream for SimStream {
    fn registration(self: Arc<Self>) -> Arc<dyn Registration> {
        self
    }

    fn recv(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        self.0.op(|net, id| net.recv(id, buf, max))
    }

    fn send(&self, data: &[u8]) -> io::Result<usize> {
        self.0.op(|net, id| net.send(id, data))
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.0.op(|net, id| net.shutdown(id, how))
    }

    fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.0.op(|net, id| Ok(net.take_error(id)))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.op(|net, id| Ok(net.stream_addrs(id).0))
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.op(|net, id| {
            net.stream_addrs(id)
                .1
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
        })
    }

    fn set_nodelay(&self, _nodelay: bool) -> io::Result<()> {
        Ok(())
    }
}

impl VirtualDatagram for SimDatagram {
    fn registration(self: Arc<Self>) -> Arc<dyn Registration> {
        self
    }

    fn send_to(&self, data: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.0
            .network
            .with(|net| net.send_to(self.0.id, data, addr))
    }

    fn recv_from(&self, max: usize) -> io::Result<(Vec<u8>, SocketAddr)> {
        self.0.op(|net, id| net.recv_from(id, max))
    }

    fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        self.0.op(|net, id| net.udp_connect(id, addr))
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.op(|net, id| {
            net.udp_addrs(id)
                .1
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.op(|net, id| Ok(net.udp_addrs(id).0))
    }
}

/// One host's I/O driver: the network as the host sees it.
pub(crate) struct HostDriver {
    pub(crate) network: Arc<Network>,
    pub(crate) host: usize,
    /// The host's disk (see [`crate::disk`]).
    pub(crate) disk: Arc<crate::disk::SimDisk>,
}

impl HostDriver {
    fn handle(&self, id: usize) -> Handle {
        Handle {
            network: self.network.clone(),
            id,
        }
    }
}

impl IoDriver for HostDriver {
    fn register(&self, socket: std::os::fd::OwnedFd) -> io::Result<Arc<dyn Registration>> {
        drop(socket);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "spindle-sim: a simulated host has no system sockets (TCP and UDP run on the \
             simulated network; Unix-domain sockets and AsyncFd are not simulated)",
        ))
    }

    fn network(&self) -> Option<&dyn VirtualNetwork> {
        Some(self)
    }

    fn disk(&self) -> Option<Arc<dyn spindle_net::driver::VirtualDisk>> {
        Some(self.disk.clone())
    }
}

impl VirtualNetwork for HostDriver {
    fn bind_tcp(&self, addr: SocketAddr) -> io::Result<Arc<dyn VirtualListener>> {
        let id = self.network.with(|net| net.bind_tcp(self.host, addr))?;
        Ok(Arc::new(SimListener(self.handle(id))))
    }

    fn connect_tcp(&self, addr: SocketAddr) -> io::Result<Arc<dyn VirtualStream>> {
        let id = self.network.with(|net| net.connect_tcp(self.host, addr))?;
        Ok(Arc::new(SimStream(self.handle(id))))
    }

    fn bind_udp(&self, addr: SocketAddr) -> io::Result<Arc<dyn VirtualDatagram>> {
        let id = self.network.with(|net| net.bind_udp(self.host, addr))?;
        Ok(Arc::new(SimDatagram(self.handle(id))))
    }

    fn resolve(&self, host: &str) -> io::Result<Vec<SocketAddr>> {
        self.network.lock().resolve(self.host, host)
    }
}

/// What a program asked of the simulated network that could not be done.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetError {
    /// The program does not run in a simulation.
    NotSimulated,
    /// No host has this name.
    UnknownHost(String),
    /// The main program's host cannot crash.
    MainHost,
}

impl core::fmt::Display for NetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NetError::NotSimulated => f.write_str("spindle-sim: not in a simulation"),
            NetError::UnknownHost(name) => write!(f, "spindle-sim: no host is named {name:?}"),
            NetError::MainHost => f.write_str("spindle-sim: the main host cannot crash"),
        }
    }
}

impl std::error::Error for NetError {}

fn with_network<R>(
    f: impl FnOnce(&crate::executor::SimHandle, &mut Net) -> Result<R, NetError>,
) -> Result<R, NetError> {
    crate::faults::with_current(|handle| {
        let network = handle.shared.network.clone();
        let result = network.with(|net| f(handle, net));
        handle.apply_crashes();
        result
    })
    .unwrap_or(Err(NetError::NotSimulated))
}

fn two_hosts(net: &Net, a: &str, b: &str) -> Result<(usize, usize), NetError> {
    let find = |name: &str| {
        net.host_named(name)
            .ok_or_else(|| NetError::UnknownHost(name.to_string()))
    };
    Ok((find(a)?, find(b)?))
}

/// Cuts the network between hosts `a` and `b` (both ways) until [`heal`]:
/// packets between them are held (TCP) or lost (UDP). A program that
/// tests its behaviour under a partition calls it; random partitions are
/// [`NetConfig::partitions`]. Fails outside a simulation or for an
/// unknown host name.
pub fn partition(a: &str, b: &str) -> IO<(), NetError> {
    let (a, b) = (a.to_string(), b.to_string());
    IO::delay(move || {
        with_network(|_, net| {
            let (a, b) = two_hosts(net, &a, &b)?;
            net.partition(a, b, None);
            Ok(())
        })
    })
    .flat_map(IO::from_result)
}

/// Ends a partition between `a` and `b` (made by [`partition`], or a
/// random one).
pub fn heal(a: &str, b: &str) -> IO<(), NetError> {
    let (a, b) = (a.to_string(), b.to_string());
    IO::delay(move || {
        with_network(|_, net| {
            let (a, b) = two_hosts(net, &a, &b)?;
            net.heal(a, b);
            Ok(())
        })
    })
    .flat_map(IO::from_result)
}

/// Crashes `host` now (see the [module documentation](self)): it restarts
/// after `restart_after`, or never (`None`). Crashing a host that is down
/// does nothing; the main host cannot crash.
pub fn crash(host: &str, restart_after: Option<Duration>) -> IO<(), NetError> {
    let host = host.to_string();
    IO::delay(move || {
        with_network(|_, net| {
            let h = net
                .host_named(&host)
                .ok_or_else(|| NetError::UnknownHost(host.clone()))?;
            if h == 0 {
                return Err(NetError::MainHost);
            }
            let after = restart_after.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            net.crash(h, after);
            Ok(())
        })
    })
    .flat_map(IO::from_result)
}
