//! The network's state machine: hosts, sockets, packets in flight, and
//! the events of virtual time (see the [module documentation](super)).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use spindle_core::Callback;
use spindle_net::driver::Direction;

use std::sync::Weak;

use super::NetEvent;
use super::config::NetParams;
use crate::Fault;
use crate::executor::Shared;
use crate::rng::SimRng;

pub(crate) type Waker = Callback<(), io::Error>;

/// A host: a name, an address, and whether it runs.
pub(crate) struct Host {
    pub(crate) name: String,
    pub(crate) ip: Ipv4Addr,
    pub(crate) up: bool,
    /// Whether it has a program to restart (every host but the main one).
    pub(crate) restartable: bool,
    next_port: u16,
}

/// Waiting fibers of one socket, by direction.
#[derive(Default)]
struct Waiters {
    read: Vec<(u64, Waker)>,
    write: Vec<(u64, Waker)>,
}

enum SegKind {
    SynAck,
    Data(Vec<u8>),
    Fin,
}

struct Seg {
    at: u64,
    born: u64,
    kind: SegKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Conn {
    Connecting,
    Established,
    Failed,
}

struct Stream {
    local: SocketAddr,
    peer_addr: SocketAddr,
    peer: Option<usize>,
    conn: Conn,
    /// The error of a failed attempt, until `take_error` takes it.
    pending: Option<io::ErrorKind>,
    /// The error every call returns (attempt failed, reset, timed out).
    error: Option<io::ErrorKind>,
    recv: VecDeque<u8>,
    eof: bool,
    rd_shut: bool,
    wr_shut: bool,
    /// Bytes sent and not yet read by the peer.
    unacked: usize,
    out: VecDeque<Seg>,
    out_scheduled: bool,
    last_at: u64,
    /// The last handle was dropped.
    closed: bool,
}

struct Listener {
    port: u16,
    backlog: VecDeque<(usize, SocketAddr)>,
    closed: bool,
}

struct Udp {
    local: SocketAddr,
    queue: VecDeque<(Vec<u8>, SocketAddr)>,
    connected: Option<SocketAddr>,
    closed: bool,
}

enum Kind {
    Listener(Listener),
    Stream(Stream),
    Udp(Udp),
}

struct Sock {
    host: usize,
    /// The host crashed since the socket was made.
    dead: bool,
    kind: Kind,
    waiters: Waiters,
}

enum Ev {
    /// The head of a stream's outgoing segments is due.
    Pipe(usize),
    /// A connection attempt reaches its destination (first sent at `born`).
    Syn {
        client: usize,
        dst: usize,
        born: u64,
    },
    /// A refusal reaches the client.
    Refused(usize),
    Datagram {
        dst: usize,
        port: u16,
        from: SocketAddr,
        data: Vec<u8>,
    },
    Restart(usize),
    /// A partition the program scheduled ([`crate::Run::partition`]).
    Partition {
        a: usize,
        b: usize,
        until: Option<u64>,
    },
    /// A crash the program scheduled ([`crate::Run::crash`]).
    Crash {
        host: usize,
        restart_after: Option<u64>,
    },
}

/// The whole network of one run.
pub(crate) struct Net {
    p: NetParams,
    rng: SimRng,
    pub(crate) now: u64,
    pub(crate) hosts: Vec<Host>,
    socks: Vec<Sock>,
    tcp_ports: BTreeMap<(usize, u16), usize>,
    udp_ports: BTreeMap<(usize, u16), usize>,
    events: BTreeMap<(u64, u64), Ev>,
    seq: u64,
    /// Partitions by host pair (lower first): until when (`None`: healed
    /// by the program).
    partitions: BTreeMap<(usize, usize), Option<u64>>,
    next_token: u64,
    pub(crate) log: Vec<NetEvent>,
    /// Fibers to resume once the lock is released.
    pub(crate) wakes: Vec<Waker>,
    /// Callbacks to drop once the lock is released.
    pub(crate) garbage: Vec<Waker>,
    /// Hosts that crashed (the executor stops their fibers) and hosts to
    /// restart (the run calls their factories), for the run loop.
    pub(crate) crashed: Vec<usize>,
    pub(crate) restarts: Vec<usize>,
    /// The run ended: handles dropped from now on find nothing.
    pub(crate) shut: bool,
    /// The executor, whose record of faults numbers the network's
    /// partitions and crashes (and says which shrinking left out).
    pub(crate) executor: Weak<Shared>,
    /// The hosts' disks, which a crash reaches (see [`crate::disk`]).
    pub(crate) disks: Option<std::sync::Arc<crate::disk::Disks>>,
}

fn err(kind: io::ErrorKind, what: &str) -> io::Error {
    io::Error::new(kind, format!("spindle-sim network: {what}"))
}

fn would_block() -> io::Error {
    io::Error::from(io::ErrorKind::WouldBlock)
}

/// The first ephemeral port.
const EPHEMERAL: u16 = 49152;
/// Largest UDP payload.
const MAX_DATAGRAM: usize = 65507;

impl Net {
    pub(crate) fn new(p: NetParams, seed: u64) -> Net {
        let mut net = Net {
            p,
            // Its own stream (not the scheduler's): turning the network's
            // faults on or off does not change the schedules of a seed.
            rng: SimRng::new(seed ^ 0x6e65_7477_6f72_6b21),
            now: 0,
            hosts: Vec::new(),
            socks: Vec::new(),
            tcp_ports: BTreeMap::new(),
            udp_ports: BTreeMap::new(),
            events: BTreeMap::new(),
            seq: 0,
            partitions: BTreeMap::new(),
            next_token: 0,
            log: Vec::new(),
            wakes: Vec::new(),
            garbage: Vec::new(),
            crashed: Vec::new(),
            restarts: Vec::new(),
            shut: false,
            executor: Weak::new(),
            disks: None,
        };
        net.add_host("main", false);
        net
    }

    /// Adds a host: its number (its address is 10.0.0.<number + 1>).
    pub(crate) fn add_host(&mut self, name: &str, restartable: bool) -> usize {
        let n = self.hosts.len();
        let ip = Ipv4Addr::new(10, 0, (((n + 1) >> 8) & 0xff) as u8, ((n + 1) & 0xff) as u8);
        self.hosts.push(Host {
            name: name.to_string(),
            ip,
            up: true,
            restartable,
            next_port: EPHEMERAL,
        });
        n
    }

    pub(crate) fn host_named(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    fn note(&mut self, what: String) {
        self.log.push(NetEvent {
            at: Duration::from_nanos(self.now),
            what,
        });
    }

    fn draw(&mut self, (min, max): (u64, u64)) -> u64 {
        if max <= min {
            min
        } else {
            min + self.rng.below(max - min + 1)
        }
    }

    fn delay(&mut self) -> u64 {
        let base = self.draw(self.p.latency);
        let jitter = if self.p.jitter == 0 {
            0
        } else {
            self.rng.below(self.p.jitter + 1)
        };
        base + jitter
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.insert((at, self.seq), ev);
    }

    /// When the next event is due.
    pub(crate) fn next_event(&self) -> Option<u64> {
        self.events.first_key_value().map(|(&(at, _), _)| at)
    }

    // ----- addresses -----

    /// The host an address names, seen from `from` (loopback and the
    /// unspecified address: `from` itself).
    fn host_of_ip(&self, ip: IpAddr, from: usize) -> Option<usize> {
        match ip {
            IpAddr::V4(v4) if v4.is_loopback() || v4.is_unspecified() => Some(from),
            IpAddr::V6(v6) if v6.is_loopback() || v6.is_unspecified() => Some(from),
            IpAddr::V4(v4) => self.hosts.iter().position(|h| h.ip == v4),
            IpAddr::V6(_) => None,
        }
    }

    fn addr(&self, host: usize, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.hosts[host].ip), port)
    }

    fn ephemeral(&mut self, host: usize, udp: bool) -> io::Result<u16> {
        for _ in 0..=(u16::MAX - EPHEMERAL) {
            let h = &mut self.hosts[host];
            let port = h.next_port;
            h.next_port = if port == u16::MAX {
                EPHEMERAL
            } else {
                port + 1
            };
            let taken = if udp {
                self.udp_ports.contains_key(&(host, port))
            } else {
                self.tcp_ports.contains_key(&(host, port))
            };
            if !taken {
                return Ok(port);
            }
        }
        Err(err(io::ErrorKind::AddrInUse, "no free port left"))
    }

    fn bind_port(&mut self, host: usize, addr: SocketAddr, udp: bool) -> io::Result<u16> {
        if self.host_of_ip(addr.ip(), host) != Some(host) {
            return Err(err(
                io::ErrorKind::AddrNotAvailable,
                &format!(
                    "{addr} is not an address of host {:?}",
                    self.hosts[host].name
                ),
            ));
        }
        if addr.port() == 0 {
            return self.ephemeral(host, udp);
        }
        let taken = if udp {
            self.udp_ports.contains_key(&(host, addr.port()))
        } else {
            self.tcp_ports.contains_key(&(host, addr.port()))
        };
        if taken {
            return Err(err(io::ErrorKind::AddrInUse, &format!("{addr} is in use")));
        }
        Ok(addr.port())
    }

    pub(crate) fn resolve(&self, host: usize, target: &str) -> io::Result<Vec<SocketAddr>> {
        if let Ok(addr) = target.parse::<SocketAddr>() {
            return Ok(vec![addr]);
        }
        let (name, port) = target
            .rsplit_once(':')
            .and_then(|(n, p)| Some((n, p.parse::<u16>().ok()?)))
            .ok_or_else(|| {
                err(
                    io::ErrorKind::InvalidInput,
                    &format!("{target:?} is not NAME:PORT"),
                )
            })?;
        if name == "localhost" {
            return Ok(vec![self.addr(host, port)]);
        }
        match self.host_named(name) {
            Some(h) => Ok(vec![self.addr(h, port)]),
            None => Err(err(
                io::ErrorKind::NotFound,
                &format!("no simulated host is named {name:?}"),
            )),
        }
    }

    // ----- partitions -----

    fn pair(a: usize, b: usize) -> (usize, usize) {
        (a.min(b), a.max(b))
    }

    pub(crate) fn partitioned(&self, a: usize, b: usize) -> bool {
        a != b
            && match self.partitions.get(&Net::pair(a, b)) {
                Some(None) => true,
                Some(Some(until)) => *until > self.now,
                None => false,
            }
    }

    pub(crate) fn partition(&mut self, a: usize, b: usize, until: Option<u64>) {
        if a == b {
            return;
        }
        self.partitions.insert(Net::pair(a, b), until);
        let (na, nb) = (self.hosts[a].name.clone(), self.hosts[b].name.clone());
        match until {
            Some(until) => self.note(format!(
                "partition {na} | {nb} until {:?}",
                Duration::from_nanos(until)
            )),
            None => self.note(format!("partition {na} | {nb}")),
        }
    }

    /// Schedules a partition from `from` until `until` (nanoseconds).
    pub(crate) fn schedule_partition(&mut self, a: usize, b: usize, from: u64, until: Option<u64>) {
        self.schedule(from, Ev::Partition { a, b, until });
    }

    /// Schedules a crash of `host` at `at`.
    pub(crate) fn schedule_crash(&mut self, host: usize, at: u64, restart_after: Option<u64>) {
        self.schedule(
            at,
            Ev::Crash {
                host,
                restart_after,
            },
        );
    }

    pub(crate) fn heal(&mut self, a: usize, b: usize) {
        if self.partitions.remove(&Net::pair(a, b)).is_some() {
            let (na, nb) = (self.hosts[a].name.clone(), self.hosts[b].name.clone());
            self.note(format!("healed {na} | {nb}"));
        }
    }

    /// A fault came out of the network's generator: numbered in the run's
    /// record of faults, and injected unless shrinking left it out.
    fn decide(&mut self, fault: impl FnOnce(u32) -> Fault) -> bool {
        let Some(shared) = self.executor.upgrade() else {
            return true;
        };
        let mut state = shared.state();
        let (number, inject) = state.faults.decide();
        if inject {
            state.faults.injected.push(fault(number));
        }
        inject
    }

    /// A packet leaves `a` for `b`: maybe a random partition starts.
    fn maybe_partition(&mut self, a: usize, b: usize) {
        if a == b || self.p.partitions == 0 || !self.rng.chance(self.p.partitions) {
            return;
        }
        let length = self.draw(self.p.partition_length);
        if self.partitioned(a, b) {
            return;
        }
        let (na, nb, at) = (
            self.hosts[a].name.clone(),
            self.hosts[b].name.clone(),
            Duration::from_nanos(self.now),
        );
        let inject = self.decide(|number| Fault::Partition {
            number,
            a: na,
            b: nb,
            at,
            length: Duration::from_nanos(length),
        });
        if inject {
            self.partition(a, b, Some(self.now + length));
        }
    }

    /// A packet arrives at `host`: maybe it crashes instead.
    fn maybe_crash(&mut self, host: usize) -> bool {
        if self.p.crashes == 0 || !self.rng.chance(self.p.crashes) {
            return false;
        }
        let after = self.draw(self.p.restart_after);
        if !self.hosts[host].restartable || !self.hosts[host].up {
            return false;
        }
        let (name, at) = (
            self.hosts[host].name.clone(),
            Duration::from_nanos(self.now),
        );
        let inject = self.decide(|number| Fault::Crash {
            number,
            host: name,
            at,
            restart_after: Duration::from_nanos(after),
        });
        if inject {
            self.crash(host, Some(after));
        }
        inject
    }

    // ----- waiters -----

    fn wake(&mut self, id: usize, direction: Direction) {
        let waiters = &mut self.socks[id].waiters;
        let list = match direction {
            Direction::Read => &mut waiters.read,
            Direction::Write => &mut waiters.write,
        };
        self.wakes.extend(list.drain(..).map(|(_, w)| w));
    }

    fn wake_both(&mut self, id: usize) {
        self.wake(id, Direction::Read);
        self.wake(id, Direction::Write);
    }

    /// Whether a call for `direction` would not fail with `WouldBlock`
    /// (it completes, or fails otherwise). This must agree with the calls
    /// exactly: a socket ready by this test whose call blocks would make
    /// its fiber retry forever without time passing.
    pub(crate) fn ready(&self, id: usize, direction: Direction) -> bool {
        let sock = &self.socks[id];
        if sock.dead {
            return true;
        }
        match (&sock.kind, direction) {
            (Kind::Listener(l), Direction::Read) => !l.backlog.is_empty() || l.closed,
            (Kind::Listener(_), Direction::Write) => false,
            (Kind::Stream(s), Direction::Read) => {
                !s.recv.is_empty() || s.eof || s.rd_shut || s.error.is_some() || s.pending.is_some()
            }
            (Kind::Stream(s), Direction::Write) => {
                s.error.is_some()
                    || s.pending.is_some()
                    || s.wr_shut
                    || (s.conn == Conn::Established && s.unacked < self.p.send_buffer)
            }
            (Kind::Udp(u), Direction::Read) => !u.queue.is_empty() || u.closed,
            (Kind::Udp(_), Direction::Write) => true,
        }
    }

    /// Adds a waiter: its token.
    pub(crate) fn add_waiter(&mut self, id: usize, direction: Direction, waker: Waker) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        let waiters = &mut self.socks[id].waiters;
        match direction {
            Direction::Read => waiters.read.push((token, waker)),
            Direction::Write => waiters.write.push((token, waker)),
        }
        token
    }

    pub(crate) fn remove_waiter(&mut self, id: usize, token: u64) {
        let Some(sock) = self.socks.get_mut(id) else {
            return;
        };
        for list in [&mut sock.waiters.read, &mut sock.waiters.write] {
            if let Some(i) = list.iter().position(|(t, _)| *t == token) {
                let (_, waker) = list.remove(i);
                self.garbage.push(waker);
                return;
            }
        }
    }

    // ----- TCP -----

    fn stream(&mut self, id: usize) -> &mut Stream {
        match &mut self.socks[id].kind {
            Kind::Stream(s) => s,
            _ => unreachable!("socket {id} is a stream"),
        }
    }

    fn new_sock(&mut self, host: usize, kind: Kind) -> usize {
        self.socks.push(Sock {
            host,
            dead: false,
            kind,
            waiters: Waiters::default(),
        });
        self.socks.len() - 1
    }

    fn new_stream(&mut self, host: usize, local: SocketAddr, peer_addr: SocketAddr) -> usize {
        self.new_sock(
            host,
            Kind::Stream(Stream {
                local,
                peer_addr,
                peer: None,
                conn: Conn::Connecting,
                pending: None,
                error: None,
                recv: VecDeque::new(),
                eof: false,
                rd_shut: false,
                wr_shut: false,
                unacked: 0,
                out: VecDeque::new(),
                out_scheduled: false,
                last_at: 0,
                closed: false,
            }),
        )
    }

    pub(crate) fn bind_tcp(&mut self, host: usize, addr: SocketAddr) -> io::Result<usize> {
        let port = self.bind_port(host, addr, false)?;
        let id = self.new_sock(
            host,
            Kind::Listener(Listener {
                port,
                backlog: VecDeque::new(),
                closed: false,
            }),
        );
        self.tcp_ports.insert((host, port), id);
        Ok(id)
    }

    pub(crate) fn listener_addr(&self, id: usize) -> SocketAddr {
        match &self.socks[id].kind {
            Kind::Listener(l) => self.addr(self.socks[id].host, l.port),
            _ => unreachable!("socket {id} is a listener"),
        }
    }

    pub(crate) fn accept(&mut self, id: usize) -> io::Result<(usize, SocketAddr)> {
        if self.socks[id].dead {
            return Err(err(io::ErrorKind::ConnectionAborted, "the host crashed"));
        }
        let Kind::Listener(l) = &mut self.socks[id].kind else {
            unreachable!("socket {id} is a listener")
        };
        if l.closed {
            return Err(err(io::ErrorKind::NotConnected, "the listener is closed"));
        }
        l.backlog.pop_front().ok_or_else(would_block)
    }

    pub(crate) fn connect_tcp(&mut self, host: usize, addr: SocketAddr) -> io::Result<usize> {
        let Some(dst) = self.host_of_ip(addr.ip(), host) else {
            return Err(err(
                io::ErrorKind::HostUnreachable,
                &format!("no simulated host has the address {}", addr.ip()),
            ));
        };
        let port = self.ephemeral(host, false)?;
        let local = self.addr(host, port);
        let peer_addr = self.addr(dst, addr.port());
        let id = self.new_stream(host, local, peer_addr);
        self.maybe_partition(host, dst);
        let at = self.now + self.delay();
        self.schedule(
            at,
            Ev::Syn {
                client: id,
                dst,
                born: self.now,
            },
        );
        Ok(id)
    }

    fn fail_attempt(&mut self, client: usize, kind: io::ErrorKind) {
        let s = self.stream(client);
        if s.conn != Conn::Connecting {
            return;
        }
        s.conn = Conn::Failed;
        s.pending = Some(kind);
        s.error = Some(io::ErrorKind::NotConnected);
        self.wake_both(client);
    }

    fn on_syn(&mut self, client: usize, dst: usize, born: u64) {
        let src = self.socks[client].host;
        if self.socks[client].dead || self.stream(client).conn != Conn::Connecting {
            return;
        }
        if self.partitioned(src, dst) || !self.hosts[dst].up {
            if self.now.saturating_sub(born) >= self.p.connect_timeout {
                let name = self.hosts[dst].name.clone();
                self.note(format!("connection to {name} timed out"));
                self.fail_attempt(client, io::ErrorKind::TimedOut);
            } else {
                let at = self.now + self.p.retransmit;
                self.schedule(at, Ev::Syn { client, dst, born });
            }
            return;
        }
        if self.maybe_crash(dst) {
            let at = self.now + self.p.retransmit;
            self.schedule(at, Ev::Syn { client, dst, born });
            return;
        }
        let port = self.stream(client).peer_addr.port();
        let listener = self.tcp_ports.get(&(dst, port)).copied();
        let backlog_full = |net: &Net, l: usize| match &net.socks[l].kind {
            Kind::Listener(l) => l.backlog.len() >= net.p.backlog,
            _ => true,
        };
        let Some(listener) = listener.filter(|&l| !backlog_full(self, l)) else {
            let at = self.now + self.delay();
            self.schedule(at, Ev::Refused(client));
            return;
        };
        let client_addr = self.stream(client).local;
        let local = self.addr(dst, port);
        let server = self.new_stream(dst, local, client_addr);
        {
            let s = self.stream(server);
            s.peer = Some(client);
            s.conn = Conn::Established;
        }
        self.stream(client).peer = Some(server);
        if let Kind::Listener(l) = &mut self.socks[listener].kind {
            l.backlog.push_back((server, client_addr));
        }
        self.wake(listener, Direction::Read);
        self.enqueue(server, SegKind::SynAck);
    }

    /// Puts a segment on `id`'s way to its peer, after the ones before it.
    fn enqueue(&mut self, id: usize, kind: SegKind) {
        let src = self.socks[id].host;
        if let Some(peer) = self.stream(id).peer {
            let dst = self.socks[peer].host;
            self.maybe_partition(src, dst);
        }
        let mut at = self.now + self.delay();
        // A lost segment arrives one retransmission later, per loss.
        let mut losses = 0;
        while self.p.loss > 0 && losses < 8 && self.rng.chance(self.p.loss) {
            at += self.p.retransmit;
            losses += 1;
        }
        let now = self.now;
        let s = self.stream(id);
        let at = at.max(s.last_at);
        s.last_at = at;
        s.out.push_back(Seg {
            at,
            born: now,
            kind,
        });
        if !s.out_scheduled {
            s.out_scheduled = true;
            self.schedule(at, Ev::Pipe(id));
        }
    }

    /// Ends one end of a connection with `kind`: every later call fails
    /// with it, and an attempt still in progress ends with it
    /// (`take_error`), so that a connect waiting for the end sees it.
    fn end(&mut self, id: usize, kind: io::ErrorKind) -> Option<usize> {
        let s = self.stream(id);
        if s.conn == Conn::Connecting {
            s.conn = Conn::Failed;
            s.pending = Some(kind);
        }
        if s.error.is_none() {
            s.error = Some(kind);
        }
        s.out.clear();
        let peer = s.peer.take();
        self.wake_both(id);
        peer
    }

    /// Ends a connection at `id` with `kind` (and its peer with
    /// `peer_kind`: `ConnectionReset`, or `TimedOut` when both ends time
    /// out; `None`: the peer does not learn of it).
    fn reset(&mut self, id: usize, kind: io::ErrorKind, peer_kind: Option<io::ErrorKind>) {
        let peer = self.end(id, kind);
        if let (Some(peer), Some(peer_kind)) = (peer, peer_kind) {
            self.end(peer, peer_kind);
        }
    }

    fn on_pipe(&mut self, id: usize) {
        self.stream(id).out_scheduled = false;
        loop {
            let (at, born) = match self.stream(id).out.front() {
                Some(seg) => (seg.at, seg.born),
                None => return,
            };
            if at > self.now {
                self.stream(id).out_scheduled = true;
                self.schedule(at, Ev::Pipe(id));
                return;
            }
            let Some(peer) = self.stream(id).peer else {
                self.stream(id).out.clear();
                return;
            };
            let (src, dst) = (self.socks[id].host, self.socks[peer].host);
            if self.partitioned(src, dst) {
                if self.now.saturating_sub(born) >= self.p.tcp_timeout {
                    let (a, b) = (self.hosts[src].name.clone(), self.hosts[dst].name.clone());
                    self.note(format!("connection {a} -> {b} timed out"));
                    self.reset(id, io::ErrorKind::TimedOut, Some(io::ErrorKind::TimedOut));
                    return;
                }
                let retry = self.now + self.p.retransmit;
                let s = self.stream(id);
                if let Some(seg) = s.out.front_mut() {
                    seg.at = retry;
                }
                s.last_at = s.last_at.max(retry);
                s.out_scheduled = true;
                self.schedule(retry, Ev::Pipe(id));
                return;
            }
            let data = matches!(
                self.stream(id).out.front(),
                Some(Seg {
                    kind: SegKind::Data(_),
                    ..
                })
            );
            if data && self.maybe_crash(dst) {
                return;
            }
            let Some(seg) = self.stream(id).out.pop_front() else {
                return;
            };
            match seg.kind {
                SegKind::SynAck => {
                    let p = self.stream(peer);
                    if p.closed {
                        self.reset(id, io::ErrorKind::ConnectionReset, None);
                        return;
                    }
                    p.conn = Conn::Established;
                    self.wake_both(peer);
                }
                SegKind::Data(bytes) => {
                    let p = self.stream(peer);
                    if p.closed || p.rd_shut {
                        // Bytes for a socket nobody reads: a reset back.
                        self.reset(id, io::ErrorKind::ConnectionReset, None);
                        return;
                    }
                    p.recv.extend(bytes);
                    self.wake(peer, Direction::Read);
                }
                SegKind::Fin => {
                    self.stream(peer).eof = true;
                    self.wake(peer, Direction::Read);
                }
            }
        }
    }

    pub(crate) fn recv(&mut self, id: usize, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        if self.socks[id].dead {
            return Err(err(io::ErrorKind::ConnectionReset, "the host crashed"));
        }
        let s = self.stream(id);
        if let Some(kind) = s.error {
            return Err(err(kind, "connection ended"));
        }
        if max == 0 {
            return Ok(0);
        }
        if s.rd_shut {
            return Ok(0);
        }
        if s.recv.is_empty() {
            return if s.eof { Ok(0) } else { Err(would_block()) };
        }
        let n = max.min(s.recv.len());
        buf.extend(s.recv.drain(..n));
        let peer = s.peer;
        if let Some(peer) = peer {
            let p = self.stream(peer);
            p.unacked = p.unacked.saturating_sub(n);
            self.wake(peer, Direction::Write);
        }
        Ok(n)
    }

    pub(crate) fn send(&mut self, id: usize, data: &[u8]) -> io::Result<usize> {
        if self.socks[id].dead {
            return Err(err(io::ErrorKind::ConnectionReset, "the host crashed"));
        }
        let cap = self.p.send_buffer;
        let s = self.stream(id);
        if let Some(kind) = s.error {
            return Err(err(kind, "connection ended"));
        }
        if s.wr_shut {
            return Err(err(
                io::ErrorKind::BrokenPipe,
                "the writing side is shut down",
            ));
        }
        if s.conn != Conn::Established || s.unacked >= cap {
            return Err(would_block());
        }
        if data.is_empty() {
            return Ok(0);
        }
        let n = data.len().min(cap - s.unacked);
        s.unacked += n;
        self.enqueue(id, SegKind::Data(data[..n].to_vec()));
        Ok(n)
    }

    pub(crate) fn shutdown(&mut self, id: usize, how: std::net::Shutdown) -> io::Result<()> {
        if self.socks[id].dead {
            return Err(err(io::ErrorKind::ConnectionReset, "the host crashed"));
        }
        let s = self.stream(id);
        if s.conn != Conn::Established {
            return Err(err(io::ErrorKind::NotConnected, "not connected"));
        }
        let (read, write) = match how {
            std::net::Shutdown::Read => (true, false),
            std::net::Shutdown::Write => (false, true),
            std::net::Shutdown::Both => (true, true),
        };
        if read {
            s.rd_shut = true;
        }
        let fin = write && !s.wr_shut && s.error.is_none();
        if write {
            s.wr_shut = true;
        }
        if fin {
            self.enqueue(id, SegKind::Fin);
        }
        self.wake_both(id);
        Ok(())
    }

    pub(crate) fn take_error(&mut self, id: usize) -> Option<io::Error> {
        self.stream(id)
            .pending
            .take()
            .map(|kind| err(kind, "the connection attempt failed"))
    }

    pub(crate) fn stream_addrs(&mut self, id: usize) -> (SocketAddr, Option<SocketAddr>) {
        let s = self.stream(id);
        let peer = (s.conn == Conn::Established).then_some(s.peer_addr);
        (s.local, peer)
    }

    // ----- UDP -----

    fn udp(&mut self, id: usize) -> &mut Udp {
        match &mut self.socks[id].kind {
            Kind::Udp(u) => u,
            _ => unreachable!("socket {id} is a datagram socket"),
        }
    }

    pub(crate) fn bind_udp(&mut self, host: usize, addr: SocketAddr) -> io::Result<usize> {
        let port = self.bind_port(host, addr, true)?;
        let local = self.addr(host, port);
        let id = self.new_sock(
            host,
            Kind::Udp(Udp {
                local,
                queue: VecDeque::new(),
                connected: None,
                closed: false,
            }),
        );
        self.udp_ports.insert((host, port), id);
        Ok(id)
    }

    /// `addr` as the address a datagram from it carries.
    fn canonical(&self, host: usize, addr: SocketAddr) -> Option<SocketAddr> {
        let h = self.host_of_ip(addr.ip(), host)?;
        Some(self.addr(h, addr.port()))
    }

    pub(crate) fn send_to(&mut self, id: usize, data: &[u8], to: SocketAddr) -> io::Result<usize> {
        if self.socks[id].dead {
            return Err(err(io::ErrorKind::NotConnected, "the host crashed"));
        }
        if data.len() > MAX_DATAGRAM {
            return Err(err(io::ErrorKind::InvalidInput, "datagram too large"));
        }
        let host = self.socks[id].host;
        let from = self.udp(id).local;
        // A datagram to an address no host has is lost, as on a network.
        let Some(dst) = self.host_of_ip(to.ip(), host) else {
            return Ok(data.len());
        };
        self.maybe_partition(host, dst);
        let copies = if self.p.duplicate > 0 && self.rng.chance(self.p.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            if self.p.loss > 0 && self.rng.chance(self.p.loss) {
                continue;
            }
            let at = self.now + self.delay();
            self.schedule(
                at,
                Ev::Datagram {
                    dst,
                    port: to.port(),
                    from,
                    data: data.to_vec(),
                },
            );
        }
        Ok(data.len())
    }

    fn on_datagram(&mut self, dst: usize, port: u16, from: SocketAddr, data: Vec<u8>) {
        let src = self.host_of_ip(from.ip(), dst).unwrap_or(dst);
        if self.partitioned(src, dst) || !self.hosts[dst].up {
            return;
        }
        if self.maybe_crash(dst) {
            return;
        }
        let Some(&id) = self.udp_ports.get(&(dst, port)) else {
            return;
        };
        let limit = self.p.udp_queue;
        let u = self.udp(id);
        if u.connected.is_some_and(|c| c != from) || u.queue.len() >= limit {
            return;
        }
        u.queue.push_back((data, from));
        self.wake(id, Direction::Read);
    }

    pub(crate) fn recv_from(&mut self, id: usize, max: usize) -> io::Result<(Vec<u8>, SocketAddr)> {
        if self.socks[id].dead {
            return Err(err(io::ErrorKind::NotConnected, "the host crashed"));
        }
        let u = self.udp(id);
        if u.closed {
            return Err(err(io::ErrorKind::NotConnected, "the socket is closed"));
        }
        while let Some((mut data, from)) = u.queue.pop_front() {
            if u.connected.is_some_and(|c| c != from) {
                continue;
            }
            data.truncate(max);
            return Ok((data, from));
        }
        Err(would_block())
    }

    pub(crate) fn udp_connect(&mut self, id: usize, addr: SocketAddr) -> io::Result<()> {
        let host = self.socks[id].host;
        let canonical = self.canonical(host, addr).ok_or_else(|| {
            err(
                io::ErrorKind::HostUnreachable,
                &format!("no simulated host has the address {}", addr.ip()),
            )
        })?;
        self.udp(id).connected = Some(canonical);
        Ok(())
    }

    pub(crate) fn udp_addrs(&mut self, id: usize) -> (SocketAddr, Option<SocketAddr>) {
        let u = self.udp(id);
        (u.local, u.connected)
    }

    // ----- closing, crashes, restarts -----

    /// The last handle of `id` was dropped.
    pub(crate) fn close(&mut self, id: usize) {
        if self.shut || id >= self.socks.len() {
            return;
        }
        let host = self.socks[id].host;
        let dead = self.socks[id].dead;
        let waiters = core::mem::take(&mut self.socks[id].waiters);
        self.garbage.extend(
            waiters
                .read
                .into_iter()
                .chain(waiters.write)
                .map(|(_, w)| w),
        );
        match &mut self.socks[id].kind {
            Kind::Listener(l) => {
                l.closed = true;
                let port = l.port;
                let pending: Vec<usize> = l.backlog.drain(..).map(|(s, _)| s).collect();
                if !dead && self.tcp_ports.get(&(host, port)) == Some(&id) {
                    self.tcp_ports.remove(&(host, port));
                }
                for s in pending {
                    self.stream(s).closed = true;
                    self.reset(
                        s,
                        io::ErrorKind::ConnectionReset,
                        Some(io::ErrorKind::ConnectionReset),
                    );
                }
            }
            Kind::Udp(u) => {
                u.closed = true;
                let port = u.local.port();
                if !dead && self.udp_ports.get(&(host, port)) == Some(&id) {
                    self.udp_ports.remove(&(host, port));
                }
            }
            Kind::Stream(s) => {
                s.closed = true;
                let fin = !dead && s.error.is_none() && !s.wr_shut && s.conn == Conn::Established;
                s.wr_shut = true;
                s.recv.clear();
                if fin {
                    self.enqueue(id, SegKind::Fin);
                }
            }
        }
    }

    /// Crashes `host`: every socket of it is gone (its peers reset), its
    /// ports free; it restarts `restart_after` nanoseconds from now.
    pub(crate) fn crash(&mut self, host: usize, restart_after: Option<u64>) {
        if !self.hosts[host].up {
            return;
        }
        self.hosts[host].up = false;
        let name = self.hosts[host].name.clone();
        let lost = self.disks.as_ref().and_then(|disks| disks.crash(host));
        match restart_after {
            Some(after) => {
                self.note(format!(
                    "{name} crashed (restarts in {:?})",
                    Duration::from_nanos(after)
                ));
                let at = self.now + after;
                self.schedule(at, Ev::Restart(host));
            }
            None => self.note(format!("{name} crashed")),
        }
        for id in 0..self.socks.len() {
            if self.socks[id].host != host || self.socks[id].dead {
                continue;
            }
            if let Kind::Stream(_) = self.socks[id].kind {
                self.reset(
                    id,
                    io::ErrorKind::ConnectionReset,
                    Some(io::ErrorKind::ConnectionReset),
                );
            }
            self.socks[id].dead = true;
            self.wake_both(id);
        }
        if let Some(lost) = lost {
            self.note(lost);
        }
        self.tcp_ports.retain(|(h, _), _| *h != host);
        self.udp_ports.retain(|(h, _), _| *h != host);
        self.crashed.push(host);
    }

    fn restart(&mut self, host: usize) {
        if self.hosts[host].up {
            return;
        }
        self.hosts[host].up = true;
        let name = self.hosts[host].name.clone();
        self.note(format!("{name} restarted"));
        self.restarts.push(host);
    }

    /// Processes every event due at `now` (virtual time, nanoseconds).
    pub(crate) fn process_due(&mut self, now: u64) {
        self.now = self.now.max(now);
        while let Some(entry) = self.events.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            match entry.remove() {
                Ev::Pipe(id) => self.on_pipe(id),
                Ev::Syn { client, dst, born } => self.on_syn(client, dst, born),
                Ev::Refused(client) => {
                    if !self.socks[client].dead {
                        self.fail_attempt(client, io::ErrorKind::ConnectionRefused);
                    }
                }
                Ev::Datagram {
                    dst,
                    port,
                    from,
                    data,
                } => self.on_datagram(dst, port, from, data),
                Ev::Restart(host) => self.restart(host),
                Ev::Partition { a, b, until } => self.partition(a, b, until),
                Ev::Crash {
                    host,
                    restart_after,
                } => self.crash(host, restart_after),
            }
        }
    }

    /// Empties the network at the end of a run: the callbacks and packets
    /// it holds, to drop outside the lock.
    pub(crate) fn shut_down(&mut self) -> Vec<Waker> {
        self.shut = true;
        let mut out = core::mem::take(&mut self.garbage);
        out.append(&mut self.wakes);
        for sock in self.socks.drain(..) {
            out.extend(
                sock.waiters
                    .read
                    .into_iter()
                    .chain(sock.waiters.write)
                    .map(|(_, w)| w),
            );
        }
        self.events.clear();
        out
    }
}
