//! [`NetConfig`]: the simulated network's delays and faults.

use std::time::Duration;

use crate::rng::threshold;

/// The simulated network's settings ([`SimBuilder::network`](crate::SimBuilder::network)):
/// delays, and faults that are all off by default. Checked when the
/// simulator is built.
///
/// ```
/// use std::time::Duration;
/// use spindle_sim::{NetConfig, Sim};
///
/// let sim = Sim::builder()
///     .network(
///         NetConfig::default()
///             .latency(Duration::from_millis(1), Duration::from_millis(5))
///             .jitter(Duration::from_millis(2))
///             .loss(0.05)
///             .partitions(0.01)
///             .crashes(0.01),
///     )
///     .build()?;
/// # let _ = sim;
/// # Ok::<(), spindle_sim::SimConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    pub(crate) latency: (Duration, Duration),
    pub(crate) jitter: Duration,
    pub(crate) loss: f64,
    pub(crate) duplicate: f64,
    pub(crate) partitions: f64,
    pub(crate) partition_length: (Duration, Duration),
    pub(crate) crashes: f64,
    pub(crate) restart_after: (Duration, Duration),
    pub(crate) retransmit: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) tcp_timeout: Duration,
    pub(crate) send_buffer: usize,
    pub(crate) backlog: usize,
    pub(crate) udp_queue: usize,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency: (Duration::from_millis(1), Duration::from_millis(1)),
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            partitions: 0.0,
            partition_length: (Duration::from_millis(100), Duration::from_secs(2)),
            crashes: 0.0,
            restart_after: (Duration::from_millis(100), Duration::from_secs(1)),
            retransmit: Duration::from_millis(200),
            connect_timeout: Duration::from_secs(3),
            tcp_timeout: Duration::from_secs(30),
            send_buffer: 64 * 1024,
            backlog: 128,
            udp_queue: 256,
        }
    }
}

impl NetConfig {
    /// One-way delay of every packet, drawn uniformly in `min..=max`
    /// (default 1 ms).
    pub fn latency(mut self, min: Duration, max: Duration) -> Self {
        self.latency = (min, max);
        self
    }

    /// Extra delay drawn uniformly in `0..=jitter` for each packet
    /// (default 0). UDP datagrams overtake each other by it; TCP segments
    /// stay in order (a later segment never arrives before an earlier one).
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// Probability that a packet is lost (default 0): a UDP datagram is
    /// dropped; a TCP segment is retransmitted, arriving one
    /// [`retransmit`](NetConfig::retransmit) later (per loss).
    pub fn loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }

    /// Probability that a UDP datagram is delivered twice (default 0).
    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = p;
        self
    }

    /// Probability, per packet sent between two different hosts, that a
    /// partition between them starts (default 0); it heals after a time
    /// drawn in [`partition_length`](NetConfig::partition_length).
    pub fn partitions(mut self, p: f64) -> Self {
        self.partitions = p;
        self
    }

    /// How long a random partition lasts: `min..=max` (default 100 ms to 2 s).
    pub fn partition_length(mut self, min: Duration, max: Duration) -> Self {
        self.partition_length = (min, max);
        self
    }

    /// Probability, per packet arriving at a host started with
    /// [`Run::host`](crate::Run::host), that the host crashes instead of
    /// receiving it (default 0). The main program's host never crashes.
    /// It restarts after a time drawn in
    /// [`restart_after`](NetConfig::restart_after).
    pub fn crashes(mut self, p: f64) -> Self {
        self.crashes = p;
        self
    }

    /// How long a crashed host stays down: `min..=max` (default 100 ms to 1 s).
    pub fn restart_after(mut self, min: Duration, max: Duration) -> Self {
        self.restart_after = (min, max);
        self
    }

    /// TCP's retransmission delay (default 200 ms): a lost segment arrives
    /// this much later; a segment held by a partition is tried again after it.
    pub fn retransmit(mut self, delay: Duration) -> Self {
        self.retransmit = delay;
        self
    }

    /// How long a TCP connection attempt waits for an unreachable host
    /// (partitioned or down) before it fails with `TimedOut` (default 3 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a TCP segment may wait behind a partition before its
    /// connection fails with `TimedOut` at both ends (default 30 s).
    pub fn tcp_timeout(mut self, timeout: Duration) -> Self {
        self.tcp_timeout = timeout;
        self
    }

    /// Bytes a TCP sender may have in flight or unread by its peer before
    /// `send` is refused with `WouldBlock` (default 64 KiB). At least 1.
    pub fn send_buffer(mut self, bytes: usize) -> Self {
        self.send_buffer = bytes;
        self
    }

    /// Connections a listener holds until they are accepted (default 128);
    /// more are refused. At least 1.
    pub fn backlog(mut self, connections: usize) -> Self {
        self.backlog = connections;
        self
    }

    /// Datagrams a UDP socket holds unread (default 256); more are dropped.
    /// At least 1.
    pub fn udp_queue(mut self, datagrams: usize) -> Self {
        self.udp_queue = datagrams;
        self
    }

    /// Checks the settings: the name of the first wrong one and why.
    pub(crate) fn check(&self) -> Result<NetParams, String> {
        for (name, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("partitions", self.partitions),
            ("crashes", self.crashes),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!(
                    "`{name}` must be a probability in 0.0..=1.0, not {p}"
                ));
            }
        }
        for (name, (min, max)) in [
            ("latency", self.latency),
            ("partition_length", self.partition_length),
            ("restart_after", self.restart_after),
        ] {
            if min > max {
                return Err(format!("`{name}`: min {min:?} is above max {max:?}"));
            }
        }
        for (name, d) in [
            ("retransmit", self.retransmit),
            ("connect_timeout", self.connect_timeout),
            ("tcp_timeout", self.tcp_timeout),
        ] {
            if d.is_zero() {
                return Err(format!("`{name}` must be longer than zero"));
            }
        }
        for (name, n) in [
            ("send_buffer", self.send_buffer),
            ("backlog", self.backlog),
            ("udp_queue", self.udp_queue),
        ] {
            if n == 0 {
                return Err(format!("`{name}` must be at least 1"));
            }
        }
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Ok(NetParams {
            latency: (ns(self.latency.0), ns(self.latency.1)),
            jitter: ns(self.jitter),
            loss: threshold(self.loss),
            duplicate: threshold(self.duplicate),
            partitions: threshold(self.partitions),
            partition_length: (ns(self.partition_length.0), ns(self.partition_length.1)),
            crashes: threshold(self.crashes),
            restart_after: (ns(self.restart_after.0), ns(self.restart_after.1)),
            retransmit: ns(self.retransmit),
            connect_timeout: ns(self.connect_timeout),
            tcp_timeout: ns(self.tcp_timeout),
            send_buffer: self.send_buffer,
            backlog: self.backlog,
            udp_queue: self.udp_queue,
        })
    }
}

/// The checked settings, in nanoseconds and thresholds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NetParams {
    pub(crate) latency: (u64, u64),
    pub(crate) jitter: u64,
    pub(crate) loss: u64,
    pub(crate) duplicate: u64,
    pub(crate) partitions: u64,
    pub(crate) partition_length: (u64, u64),
    pub(crate) crashes: u64,
    pub(crate) restart_after: (u64, u64),
    pub(crate) retransmit: u64,
    pub(crate) connect_timeout: u64,
    pub(crate) tcp_timeout: u64,
    pub(crate) send_buffer: usize,
    pub(crate) backlog: usize,
    pub(crate) udp_queue: usize,
}
