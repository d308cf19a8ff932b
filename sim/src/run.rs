//! One run of a program under one seed ([`run_once`]: the loop of the
//! [executor module](crate::executor)), what it reports ([`RunReport`],
//! [`Failure`]), the key that replays it ([`ReplayKey`]), and the context
//! the program is built with ([`Run`]).

use core::fmt;
use core::str::FromStr;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_core::executor::support::TimerHeap;
use spindle_core::executor::support::WeakFibers;
use spindle_core::{Executor, Fiber, FiberDump, FiberId, FiberInfo, IO, Outcome, Ran, Trace};
use spindle_net::driver::with_driver;

use crate::config::Config;
use crate::disk::{Disks, SimDisk};
use crate::executor::{Faults, SimHandle, State, Task};
use crate::faults::{Current, Fault, Finalizers};
use crate::net::{HostDriver, NetEvent, Network};
use crate::preempt::Preemption;
use crate::rng::SimRng;
use crate::strategy::Picker;

/// What replays a run exactly: its seed, the faults that shrinking
/// suppressed (by number), and, when shrinking cut the schedule's
/// switches, the opportunities still allowed to preempt (see the
/// notes on [`RunReport::preemptions`]). Printed as `17`, `17/-0,3`
/// with faults 0 and 3 suppressed, and `17/-0,3/p2.3>4,4.1>2` (or
/// `17/p2.3>4,4.1>2`) when only fiber 2 after its 3rd yield (to fiber 4)
/// and fiber 4 after its 1st (to fiber 2) may be preempted (`/p` alone:
/// no fiber may); [`FromStr`] reads that back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayKey {
    /// The run's seed.
    pub seed: u64,
    /// The numbers of the faults not injected.
    pub suppressed: Vec<u32>,
    /// The opportunities allowed to preempt a fiber that could go on
    /// (`None`: every one, as the strategy picks).
    pub preemptions: Option<Vec<Preemption>>,
}

impl ReplayKey {
    /// The key of a seed, with every fault and every preemption.
    pub fn seed(seed: u64) -> ReplayKey {
        ReplayKey {
            seed,
            suppressed: Vec::new(),
            preemptions: None,
        }
    }
}

impl fmt::Display for ReplayKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.seed)?;
        if !self.suppressed.is_empty() {
            f.write_str("/-")?;
            for (i, n) in self.suppressed.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{n}")?;
            }
        }
        if let Some(allowed) = &self.preemptions {
            f.write_str("/p")?;
            for (i, n) in allowed.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{n}")?;
            }
        }
        Ok(())
    }
}

/// A [`ReplayKey`] that could not be read: the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseReplayKeyError(pub String);

impl fmt::Display for ParseReplayKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not a spindle-sim replay key (SEED, SEED/-N,N,..., SEED/pF.Y>T,... or SEED/-N,.../pF.Y>T,...): {:?}",
            self.0
        )
    }
}

impl std::error::Error for ParseReplayKeyError {}

impl FromStr for ReplayKey {
    type Err = ParseReplayKeyError;

    fn from_str(s: &str) -> Result<ReplayKey, ParseReplayKeyError> {
        let bad = || ParseReplayKeyError(s.to_string());
        let numbers = |list: &str| -> Result<Vec<u32>, ParseReplayKeyError> {
            list.split(',')
                .map(|n| n.trim().parse().map_err(|_| bad()))
                .collect()
        };
        let opportunities = |list: &str| -> Result<Vec<Preemption>, ParseReplayKeyError> {
            if list.trim().is_empty() {
                return Ok(Vec::new());
            }
            list.split(',')
                .map(|p| {
                    let (fiber, rest) = p.trim().split_once('.').ok_or_else(bad)?;
                    let (yields, to) = rest.split_once('>').ok_or_else(bad)?;
                    Ok(Preemption {
                        fiber: fiber.parse().map_err(|_| bad())?,
                        yields: yields.parse().map_err(|_| bad())?,
                        to: to.parse().map_err(|_| bad())?,
                    })
                })
                .collect()
        };
        let mut parts = s.split('/');
        let seed = parts
            .next()
            .unwrap_or_default()
            .trim()
            .parse()
            .map_err(|_| bad())?;
        let mut key = ReplayKey::seed(seed);
        let (mut faults_seen, mut preemptions_seen) = (false, false);
        for part in parts {
            if let Some(list) = part.strip_prefix('-') {
                if faults_seen || preemptions_seen || list.trim().is_empty() {
                    return Err(bad());
                }
                faults_seen = true;
                key.suppressed = numbers(list)?;
            } else if let Some(list) = part.strip_prefix('p') {
                if preemptions_seen {
                    return Err(bad());
                }
                preemptions_seen = true;
                key.preemptions = Some(opportunities(list)?);
            } else {
                return Err(bad());
            }
        }
        Ok(key)
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// The main fiber ended with an error (its `Debug`).
    Errored(String),
    /// The main fiber was canceled.
    Canceled,
    /// A closure of the main fiber panicked (the message).
    Panicked(String),
    /// Nothing could run, no timer was set, and the main fiber had not
    /// ended: it never can (a lost wake-up, a wait nobody completes).
    Deadlock,
    /// The main fiber succeeded, but this many other fibers were still
    /// alive ([`SimBuilder::no_fibers_left`](crate::SimBuilder::no_fibers_left)).
    FibersLeft(usize),
    /// An invariant did not hold (its name and what was wrong): from
    /// [`invariant`](crate::invariant), a [`Finalizers`] book, or a check
    /// given to [`Run::check_at_end`].
    Invariant(String),
    /// The run took more steps than
    /// [`SimBuilder::max_steps`](crate::SimBuilder::max_steps).
    StepLimit(u64),
    /// The program was built wrong (e.g. two hosts with the same name):
    /// what was wrong. Nothing ran.
    Setup(String),
    /// The program of a host added with [`Run::host`] ended with an error
    /// or a panic: the host's name and what it ended with.
    HostFailed(String),
}

impl FailureKind {
    fn same_kind(&self, other: &FailureKind) -> bool {
        core::mem::discriminant(self) == core::mem::discriminant(other)
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureKind::Errored(e) => write!(f, "the main fiber failed with {e}"),
            FailureKind::Canceled => f.write_str("the main fiber was canceled"),
            FailureKind::Panicked(m) => write!(f, "the main fiber panicked: {m}"),
            FailureKind::Deadlock => f.write_str(
                "deadlock: no fiber can run, no timer is set, and the main fiber has not ended",
            ),
            FailureKind::FibersLeft(n) => {
                write!(f, "{n} fiber(s) still alive when the main fiber ended")
            }
            FailureKind::Invariant(m) => write!(f, "invariant violated: {m}"),
            FailureKind::StepLimit(n) => write!(f, "no end after {n} steps (step limit)"),
            FailureKind::Setup(m) => write!(f, "the program was built wrong: {m}"),
            FailureKind::HostFailed(m) => write!(f, "a host's program failed: {m}"),
        }
    }
}

/// A failing run: what failed, how to replay it, and what was seen.
/// `Display` (and `Debug`) print the whole report: the replay key first.
#[derive(Clone, PartialEq, Eq)]
pub struct Failure {
    /// Replays this run exactly ([`Sim::replay`](crate::Sim::replay)).
    pub key: ReplayKey,
    /// What failed.
    pub kind: FailureKind,
    /// Steps run.
    pub steps: u64,
    /// Virtual time at the end.
    pub virtual_time: Duration,
    /// The failing fiber's trace: the main fiber's at the point of failure
    /// (an error or a panic), or the fiber's that saw an invariant broken.
    pub trace: Option<String>,
    /// A fiber dump at the end (each live fiber's state and trace), for a
    /// deadlock, fibers left, or a step limit.
    pub dump: Option<String>,
    /// What the simulated network did: partitions, heals, crashes,
    /// restarts, connections timed out (see [`crate::net`]).
    pub network: Vec<NetEvent>,
    /// The last picks of the schedule (fiber numbers; 0 is the work of an
    /// `IO::blocking` call), oldest first.
    pub schedule_tail: Vec<u32>,
    /// The faults injected.
    pub faults: Vec<Fault>,
    /// Faults injected before shrinking (equal to `faults.len()` when
    /// nothing was shrunk).
    pub faults_before_shrinking: usize,
    /// Where the run preempted a fiber that could have gone on
    /// ([`RunReport::preemptions`]).
    pub preemptions: Vec<Preemption>,
    /// Preemptions before shrinking (equal to `preemptions.len()` when
    /// nothing was shrunk).
    pub preemptions_before_shrinking: usize,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "spindle-sim: seed {} failed (replay key {}) after {} steps, at virtual time {:?}",
            self.key.seed, self.key, self.steps, self.virtual_time
        )?;
        writeln!(f, "  {}", self.kind)?;
        if self.faults.is_empty() {
            writeln!(f, "  no fault injected")?;
        } else {
            writeln!(
                f,
                "  faults ({} kept of {} injected):",
                self.faults.len(),
                self.faults_before_shrinking
            )?;
            for fault in &self.faults {
                writeln!(f, "    {fault}")?;
            }
        }
        if self.preemptions.len() < self.preemptions_before_shrinking {
            writeln!(
                f,
                "  schedule: {} preemption(s) kept of {} (the switches the failure needs)",
                self.preemptions.len(),
                self.preemptions_before_shrinking
            )?;
        }
        write!(f, "  last picks (fiber numbers, oldest first):")?;
        for id in &self.schedule_tail {
            write!(f, " #{id}")?;
        }
        writeln!(f)?;
        if !self.network.is_empty() {
            writeln!(
                f,
                "  network (last {} events):",
                self.network.len().min(TAIL)
            )?;
            let from = self.network.len().saturating_sub(TAIL);
            for event in &self.network[from..] {
                writeln!(f, "    {event}")?;
            }
        }
        if let Some(trace) = &self.trace {
            writeln!(f, "  trace of the failing fiber:\n{trace}")?;
        }
        if let Some(dump) = &self.dump {
            writeln!(f, "  fiber dump:\n{dump}")?;
        }
        write!(
            f,
            "  replay: sim.replay(&\"{}\".parse()?, build), or seeds({}..{})",
            self.key,
            self.key.seed,
            self.key.seed.saturating_add(1)
        )
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Failure {}

/// What one run did: every pick, every fault, and the failure if it
/// failed. Two runs of the same key and program report the same schedule
/// and faults.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The key of the run.
    pub key: ReplayKey,
    /// Steps run (picks).
    pub steps: u64,
    /// Every pick, in order: the number of the fiber that ran (0: the
    /// work of an `IO::blocking` call).
    pub schedule: Vec<u32>,
    /// The faults injected.
    pub faults: Vec<Fault>,
    /// Where the run preempted a fiber that could have gone on. An
    /// opportunity is a pick right after a fiber yielded (it is ready to
    /// go on) while another fiber is ready too, named by that fiber and
    /// its count of yields ([`Preemption`]); a [`ReplayKey::preemptions`]
    /// list allows only some of them to preempt (shrinking finds the few
    /// a failure needs).
    pub preemptions: Vec<Preemption>,
    /// Virtual time at the end.
    pub virtual_time: Duration,
    /// What the simulated network did (see [`Failure::network`]).
    pub network: Vec<NetEvent>,
    /// `None` if the run passed.
    pub failure: Option<Failure>,
}

type EndCheck = Box<dyn FnOnce() -> Result<(), String>>;
type Factory = Box<dyn FnMut() -> IO<(), String>>;

/// A host's program.
struct HostProgram {
    host: usize,
    name: String,
    factory: Factory,
}

/// The context a program is built in, once per run: the seed, the
/// checks to make when the main fiber has succeeded, and the simulated
/// hosts ([`Run::host`]).
pub struct Run {
    seed: u64,
    checks: Vec<(String, EndCheck)>,
    network: Arc<Network>,
    hosts: Vec<HostProgram>,
    setup_error: Option<String>,
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("seed", &self.seed)
            .field("checks", &self.checks.len())
            .field("hosts", &self.hosts.len())
            .finish()
    }
}

impl Run {
    /// The seed of this run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Checks `check` once the main fiber has succeeded: an `Err` fails
    /// the run as [`FailureKind::Invariant`] (`name: message`). For
    /// properties of the program's final state.
    pub fn check_at_end(
        &mut self,
        name: impl Into<String>,
        check: impl FnOnce() -> Result<(), String> + 'static,
    ) {
        self.checks.push((name.into(), Box::new(check)));
    }

    /// A [`Finalizers`] book checked at the end of the run (every resource
    /// acquired was released exactly once).
    pub fn finalizers(&mut self) -> Finalizers {
        let book = Finalizers::new();
        let checked = book.clone();
        self.check_at_end("every finalizer ran once", move || checked.check());
        book
    }

    /// Adds a simulated host named `name`, which runs the program
    /// `factory` makes: called when the run starts, and again each time
    /// the host restarts after a crash. Returns its address (10.0.0.2 for
    /// the first host added, then .3, ...; the main program's host,
    /// `"main"`, is 10.0.0.1). Its fibers' sockets are on the simulated
    /// network (see [`crate::net`]); other hosts reach it by address or
    /// by name (`TcpStream::connect_host("server:6379")`).
    ///
    /// A host program that ends with an error or a panic fails the run
    /// ([`FailureKind::HostFailed`], naming the host); one that succeeds
    /// just ends (the host stays up, with the fibers it started). A
    /// crashed host's program ends with no outcome. A name used twice (or
    /// `"main"`) fails the run as [`FailureKind::Setup`]. The hosts'
    /// fibers are fibers of the run: a server's accept loop still waiting
    /// at the end counts for
    /// [`SimBuilder::no_fibers_left`](crate::SimBuilder::no_fibers_left).
    pub fn host<A, E, F>(&mut self, name: impl Into<String>, mut factory: F) -> IpAddr
    where
        A: Send + 'static,
        E: Send + fmt::Debug + 'static,
        F: FnMut() -> IO<A, E> + 'static,
    {
        let name = name.into();
        let mut net = self.network.lock();
        if let Some(existing) = net.host_named(&name) {
            self.setup_error
                .get_or_insert_with(|| format!("two hosts are named {name:?}"));
            return IpAddr::V4(net.hosts[existing].ip);
        }
        let host = net.add_host(&name, true);
        let ip = IpAddr::V4(net.hosts[host].ip);
        drop(net);
        self.hosts.push(HostProgram {
            host,
            name,
            factory: Box::new(move || factory().void().map_err(|e| format!("{e:?}"))),
        });
        ip
    }

    /// The number of the host named `name`, or a setup error.
    fn host_number(&mut self, name: &str) -> Option<usize> {
        let found = self.network.lock().host_named(name);
        if found.is_none() {
            self.setup_error.get_or_insert_with(|| {
                format!("no host is named {name:?} (add it with `Run::host` first)")
            });
        }
        found
    }

    /// Schedules a partition between the hosts `a` and `b` (both ways)
    /// from virtual time `from` until `until` (`None`: until the program
    /// heals it with [`net::heal`](crate::net::heal)). The hosts must be
    /// added first; an unknown name fails the run as
    /// [`FailureKind::Setup`]. For partitions at random, see
    /// [`NetConfig::partitions`](crate::NetConfig::partitions).
    pub fn partition(&mut self, a: &str, b: &str, from: Duration, until: Option<Duration>) {
        let (Some(a), Some(b)) = (self.host_number(a), self.host_number(b)) else {
            return;
        };
        let from = nanos(from);
        // `with`: the run loop sees the event (its next time) at once.
        self.network
            .with(|net| net.schedule_partition(a, b, from, until.map(nanos)));
    }

    /// Schedules a crash of `host` at virtual time `at`; it restarts
    /// `restart_after` later (`None`: never). See [`crate::net`] for what
    /// a crash does. The main host cannot crash, and an unknown name
    /// fails the run: [`FailureKind::Setup`].
    pub fn crash(&mut self, host: &str, at: Duration, restart_after: Option<Duration>) {
        let Some(h) = self.host_number(host) else {
            return;
        };
        if h == 0 {
            self.setup_error
                .get_or_insert_with(|| "the main host cannot crash".to_string());
            return;
        }
        self.network
            .with(|net| net.schedule_crash(h, nanos(at), restart_after.map(nanos)));
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Starts (or restarts) a host's program: its root fiber belongs to it.
fn start_host(handle: &SimHandle, program: &mut HostProgram) {
    let io = (program.factory)();
    let name = program.name.clone();
    let shared = handle.shared.clone();
    handle.shared.state().starting_host = Some(program.host as u32);
    let fiber = Fiber::with_report(io, handle.clone(), move |outcome, _suppressed, _trace| {
        let failure = match outcome {
            Outcome::Errored(e) => Some(FailureKind::HostFailed(format!("{name}: error {e}"))),
            Outcome::Panicked(m) => Some(FailureKind::HostFailed(format!("{name}: panic {m}"))),
            Outcome::Succeeded(()) | Outcome::Canceled => None,
        };
        if let Some(failure) = failure {
            shared.state().host_failures.push(failure);
        }
    });
    handle.shared.state().starting_host = None;
    handle.schedule_fiber(fiber);
}

/// Whether the blocking work being run fails instead (probability
/// `threshold`): an injected error, recorded as a fault, unless the
/// replay key suppresses it.
fn blocking_fault(shared: &crate::executor::Shared, threshold: u64) -> Option<std::io::Error> {
    let mut state = shared.state();
    let state = &mut *state;
    if !state.rng.chance(threshold) {
        return None;
    }
    let (number, inject) = state.faults.decide();
    if !inject {
        return None;
    }
    state.faults.injected.push(Fault::BlockingError {
        number,
        fiber: FiberId::nth(u64::from(state.running)),
        step: state.step,
    });
    Some(std::io::Error::from(crate::InjectedFault))
}

/// Picks kept in a failure report.
const TAIL: usize = 32;

/// Runs the program `build` makes under `key`.
pub(crate) fn run_once<A, E, F>(config: &Config, key: &ReplayKey, build: &mut F) -> RunReport
where
    A: Send + 'static,
    E: Send + fmt::Debug + 'static,
    F: FnMut(&mut Run) -> IO<A, E>,
{
    let mut rng = SimRng::new(key.seed);
    let picker = Picker::new(config.strategy, &mut rng);
    let network = Network::new(config.network, key.seed);
    let handle = SimHandle::new(
        config.fiber_config,
        State {
            ready: Vec::new(),
            timers: TimerHeap::new(),
            rng,
            picker,
            priorities: Vec::new(),
            cancelable: Vec::new(),
            fibers: WeakFibers::default(),
            running: 0,
            step: 0,
            faults: Faults {
                drawn: 0,
                suppressed: key.suppressed.clone(),
                injected: Vec::new(),
            },
            violations: Vec::new(),
            io_error_threshold: config.io_errors,
            cancel_threshold: config.cancel,
            cancel_scope: config.cancel_scope,
            host_of: Vec::new(),
            host_epoch: Vec::new(),
            starting_host: None,
            host_failures: Vec::new(),
            preemptions: crate::preempt::Preemptions::new(key.preemptions.as_deref()),
        },
        network.clone(),
    );
    network.lock().executor = Arc::downgrade(&handle.shared);
    let current = Current::enter(handle.clone());
    let mut run = Run {
        seed: key.seed,
        checks: Vec::new(),
        network: network.clone(),
        hosts: Vec::new(),
        setup_error: None,
    };
    let program = build(&mut run);
    let names: Vec<String> = network
        .lock()
        .hosts
        .iter()
        .map(|h| h.name.clone())
        .collect();
    let disks = Disks::new(config.disk, key.seed, names.clone());
    disks.set_executor(Arc::downgrade(&handle.shared));
    network.lock().disks = Some(disks.clone());
    let drivers: Vec<HostDriver> = (0..names.len())
        .map(|host| HostDriver {
            network: network.clone(),
            host,
            disk: Arc::new(SimDisk {
                disks: disks.clone(),
                host,
            }),
        })
        .collect();
    let mut hosts = core::mem::take(&mut run.hosts);
    let setup_error = run.setup_error.take();

    type Slot<A, E> = Arc<Mutex<Option<(Outcome<A, E>, Trace)>>>;
    let slot: Slot<A, E> = Arc::new(Mutex::new(None));
    let done = Arc::new(AtomicBool::new(false));
    let main = {
        let slot = slot.clone();
        let done = done.clone();
        Fiber::with_report(
            program,
            handle.clone(),
            move |outcome, _suppressed, trace| {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some((outcome, trace));
                done.store(true, Ordering::Relaxed);
            },
        )
    };
    let main_id = main.id().get();
    handle.schedule_fiber(main);
    if setup_error.is_none() {
        for program in &mut hosts {
            start_host(&handle, program);
        }
    }

    let shared = &*handle.shared;
    let mut schedule: Vec<u32> = Vec::new();
    let mut due = Vec::new();
    let mut steps: u64 = 0;
    // Each fiber's last wait (state and trace), until it completes.
    let mut waits: BTreeMap<u32, FiberInfo> = BTreeMap::new();
    // Tasks run with their host's view of the network as their I/O
    // driver: the main host's around the whole loop, another host's
    // around each of its tasks.
    let main_driver = &drivers[0];
    let stopped = with_driver(main_driver, || {
        loop {
            if let Some(error) = &setup_error {
                break Some(FailureKind::Setup(error.clone()));
            }
            {
                let mut state = shared.state();
                let state = &mut *state;
                // Before the main fiber's end: its last step may have broken
                // an invariant.
                if !state.violations.is_empty() {
                    break Some(FailureKind::Invariant(String::new()));
                }
                if !state.host_failures.is_empty() {
                    break Some(state.host_failures.swap_remove(0));
                }
                if done.load(Ordering::Relaxed) {
                    break None;
                }
                if steps >= config.max_steps {
                    break Some(FailureKind::StepLimit(steps));
                }
                if config.clock_jumps > 0 && state.rng.chance(config.clock_jumps) {
                    let by = 1 + state.rng.below(config.max_clock_jump_ns);
                    let (number, inject) = state.faults.decide();
                    if inject {
                        let now = shared.now.load(Ordering::Relaxed);
                        shared.now.store(now.saturating_add(by), Ordering::Relaxed);
                        state.faults.injected.push(Fault::ClockJump {
                            number,
                            by: Duration::from_nanos(by),
                            step: steps + 1,
                        });
                    }
                }
                let now = shared.now.load(Ordering::Relaxed);
                while let Some(callback) = state.timers.pop_due(now) {
                    due.push(callback);
                }
            }
            // Fired outside the lock: a callback schedules its fiber.
            for callback in due.drain(..) {
                callback.fire();
            }
            // The network's events due now: packets arrive (resuming the
            // fibers that wait for them), hosts crash and restart.
            let now = shared.now.load(Ordering::Relaxed);
            network.set_now(now);
            if network.next_event().is_some_and(|at| at <= now) {
                let restarts = network.with(|net| {
                    net.process_due(now);
                    core::mem::take(&mut net.restarts)
                });
                handle.apply_crashes();
                for host in restarts {
                    if let Some(program) = hosts.iter_mut().find(|p| p.host == host) {
                        start_host(&handle, program);
                    }
                }
            }
            let picked = {
                let mut state = shared.state();
                let state = &mut *state;
                if state.ready.is_empty() {
                    None
                } else {
                    let ready = &state.ready;
                    let i = state
                        .picker
                        .pick(&mut state.rng, ready.len(), |i| ready[i].priority);
                    let i = state.preemptions.decide(i, &state.ready);
                    let entry = state.ready.swap_remove(i);
                    steps += 1;
                    state.step = steps;
                    state.running = entry.owner;
                    Some(entry)
                }
            };
            let Some(entry) = picked else {
                let timer = shared.state().timers.next_deadline();
                let packet = network.next_event();
                let next = match (timer, packet) {
                    (Some(t), Some(p)) => Some(t.min(p)),
                    (t, p) => t.or(p),
                };
                match next {
                    Some(deadline) => {
                        let now = shared.now.load(Ordering::Relaxed);
                        shared.now.store(now.max(deadline), Ordering::Relaxed);
                        continue;
                    }
                    None => break Some(FailureKind::Deadlock),
                }
            };
            schedule.push(entry.id);
            let id = entry.id;
            let host = entry.host as usize;
            match entry.task {
                Task::Blocking(task) => {
                    let run = || {
                        if config.blocking_errors == 0 {
                            task.run();
                        } else {
                            let (shared, threshold) =
                                (handle.shared.clone(), config.blocking_errors);
                            task.run_with_fault(move || blocking_fault(&shared, threshold));
                        }
                    };
                    match drivers.get(host).filter(|_| host != 0) {
                        Some(driver) => with_driver(driver, run),
                        None => run(),
                    }
                    let mut state = shared.state();
                    state.running = 0;
                    state.preemptions.ran(0, false);
                }
                Task::Fiber(fiber) => {
                    let weak = fiber.downgrade();
                    let ran = match drivers.get(host).filter(|_| host != 0) {
                        Some(driver) => with_driver(driver, || fiber.run()),
                        None => fiber.run(),
                    };
                    match ran {
                        // Its last wait, for the report of a deadlock (where
                        // fibers nothing can resume are freed).
                        Ran::Suspended => {
                            if let Some(info) = weak.info() {
                                waits.insert(id, info);
                            }
                        }
                        Ran::Completed => {
                            waits.remove(&id);
                        }
                        Ran::Yielded => {}
                    }
                    let cancel = {
                        let mut state = shared.state();
                        let state = &mut *state;
                        state.running = 0;
                        state.preemptions.ran(id, ran == Ran::Yielded);
                        if let Some(priority) = state.picker.change_after(steps)
                            && let Some(p) = state.priorities.get_mut(id as usize)
                        {
                            // A change point: the fiber that ran drops, also
                            // where it is queued already (it yielded).
                            *p = priority;
                            for entry in state.ready.iter_mut().filter(|e| e.id == id) {
                                entry.priority = priority;
                            }
                        }
                        // Eligibility is read after the run, which may have
                        // marked the fiber (`cancelable`) before it suspended.
                        let may_cancel = config.cancel > 0
                            && ran == Ran::Suspended
                            && state.may_cancel(id, main_id);
                        match may_cancel {
                            true if state.rng.chance(state.cancel_threshold) => {
                                let (number, inject) = state.faults.decide();
                                if inject {
                                    state.faults.injected.push(Fault::Canceled {
                                        number,
                                        fiber: FiberId::nth(u64::from(id)),
                                        step: steps,
                                    });
                                }
                                inject
                            }
                            _ => false,
                        }
                    };
                    if cancel {
                        // Outside the lock: a fiber waiting interruptibly is
                        // scheduled from here.
                        weak.request_cancel();
                    }
                }
            }
        }
    });

    let virtual_time = handle.now();
    let mut trace = None;
    let mut dump = None;
    let kind = match stopped {
        Some(FailureKind::Invariant(_)) => {
            let (name, at) = shared.state().violations.swap_remove(0);
            trace = at.filter(|t| !t.is_empty()).map(|t| t.to_string());
            Some(FailureKind::Invariant(name))
        }
        Some(kind @ (FailureKind::Deadlock | FailureKind::StepLimit(_))) => {
            dump = Some(render_dump(handle.fiber_dump(), &waits));
            Some(kind)
        }
        Some(kind) => Some(kind),
        None => {
            let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            match taken {
                Some((Outcome::Succeeded(_), _)) => end_checks(
                    &handle,
                    run.checks,
                    config.no_fibers_left,
                    &mut dump,
                    &waits,
                ),
                Some((Outcome::Errored(e), t)) => {
                    trace = Some(t).filter(|t| !t.is_empty()).map(|t| t.to_string());
                    Some(FailureKind::Errored(format!("{e:?}")))
                }
                Some((Outcome::Canceled, _)) => Some(FailureKind::Canceled),
                Some((Outcome::Panicked(m), t)) => {
                    trace = Some(t).filter(|t| !t.is_empty()).map(|t| t.to_string());
                    Some(FailureKind::Panicked(m.to_string()))
                }
                // `done` is set after the slot is filled.
                None => Some(FailureKind::Deadlock),
            }
        }
    };
    let faults = core::mem::take(&mut shared.state().faults.injected);
    let preemptions = core::mem::take(&mut shared.state().preemptions.taken);
    let network_log = core::mem::take(&mut network.lock().log);
    handle.close();
    let garbage = network.lock().shut_down();
    drop(garbage);
    drop(hosts);
    drop(current);
    let tail_from = schedule.len().saturating_sub(TAIL);
    let failure = kind.map(|kind| Failure {
        key: key.clone(),
        kind,
        steps,
        virtual_time,
        trace,
        dump,
        network: network_log.clone(),
        schedule_tail: schedule[tail_from..].to_vec(),
        faults: faults.clone(),
        faults_before_shrinking: faults.len(),
        preemptions: preemptions.clone(),
        preemptions_before_shrinking: preemptions.len(),
    });
    RunReport {
        key: key.clone(),
        steps,
        schedule,
        faults,
        preemptions,
        virtual_time,
        network: network_log,
        failure,
    }
}

/// The checks after a main fiber that succeeded.
fn end_checks(
    handle: &SimHandle,
    checks: Vec<(String, EndCheck)>,
    no_fibers_left: bool,
    dump: &mut Option<String>,
    waits: &BTreeMap<u32, FiberInfo>,
) -> Option<FailureKind> {
    for (name, check) in checks {
        if let Err(message) = check() {
            return Some(FailureKind::Invariant(format!("{name}: {message}")));
        }
    }
    if no_fibers_left {
        let fibers = handle.fiber_dump();
        if !fibers.fibers.is_empty() {
            let n = fibers.fibers.len();
            *dump = Some(render_dump(fibers, waits));
            return Some(FailureKind::FibersLeft(n));
        }
    }
    None
}

/// The dump, and the last wait of each fiber that was freed while it
/// waited (nothing could resume it: a lost wake-up's victims).
fn render_dump(dump: FiberDump, waits: &BTreeMap<u32, FiberInfo>) -> String {
    use core::fmt::Write;
    let mut out = dump.to_string();
    let live: Vec<u32> = dump.fibers.iter().map(|f| f.id.get()).collect();
    let freed: Vec<&FiberInfo> = waits
        .iter()
        .filter(|(id, _)| !live.contains(id))
        .map(|(_, info)| info)
        .collect();
    if !freed.is_empty() {
        let _ = write!(
            out,
            "\n\nfreed while waiting (nothing could resume them), as they last suspended:"
        );
        for info in freed {
            let _ = write!(
                out,
                "\n\n{}",
                FiberDump {
                    fibers: vec![info.clone()],
                    executor: Vec::new(),
                }
            );
        }
    }
    out
}

/// Runs `key` again with more faults suppressed, one at a time, keeping
/// each suppression under which the run still fails the same way
/// (a greedy, one-pass minimisation of the injected faults).
pub(crate) fn shrink<A, E, F>(config: &Config, first: Failure, build: &mut F) -> Failure
where
    A: Send + 'static,
    E: Send + fmt::Debug + 'static,
    F: FnMut(&mut Run) -> IO<A, E>,
{
    let before = first.faults.len();
    let mut best = first;
    let mut i = 0;
    // At most one retry per fault of the original run.
    while i < best.faults.len() {
        let number = best.faults[i].number();
        let mut key = best.key.clone();
        key.suppressed.push(number);
        key.suppressed.sort_unstable();
        let report = run_once(config, &key, build);
        match report.failure {
            Some(failure) if failure.kind.same_kind(&best.kind) => {
                best = failure;
                // The faults were renumbered by the new run: start over,
                // past the ones already tried (at most `before` runs).
                i = 0;
                if best.key.suppressed.len() >= before {
                    break;
                }
            }
            _ => i += 1,
        }
    }
    best.faults_before_shrinking = before;
    shrink_preemptions(config, best, build)
}

/// Shrinks `first`'s preemptions to a few the failure needs (the
/// `preempt` module of this crate: delta debugging over the
/// opportunities allowed to preempt), within [`SHRINK_RUNS`] replays.
///
/// [`SHRINK_RUNS`]: crate::preempt::SHRINK_RUNS
fn shrink_preemptions<A, E, F>(config: &Config, first: Failure, build: &mut F) -> Failure
where
    A: Send + 'static,
    E: Send + fmt::Debug + 'static,
    F: FnMut(&mut Run) -> IO<A, E>,
{
    use crate::preempt::{SHRINK_RUNS, without};
    let before = first.preemptions.len();
    let faults_before = first.faults_before_shrinking;
    let mut best = first;
    let mut runs = 0;
    let mut chunk = before.div_ceil(2);
    while chunk > 0 && runs < SHRINK_RUNS && !best.preemptions.is_empty() {
        let mut start = 0;
        let mut shrunk = false;
        while start < best.preemptions.len() && runs < SHRINK_RUNS {
            let mut key = best.key.clone();
            key.preemptions = Some(without(&best.preemptions, start, chunk));
            runs += 1;
            match run_once(config, &key, build).failure {
                Some(failure) if failure.kind.same_kind(&best.kind) => {
                    best = failure;
                    shrunk = true;
                }
                _ => start += chunk,
            }
        }
        if !shrunk {
            chunk /= 2;
        }
        chunk = chunk.min(best.preemptions.len());
    }
    // What is left, tried one preemption alone, then each pair alone.
    let left = best.preemptions.clone();
    let singles = left.iter().map(|p| vec![*p]);
    let pairs = left
        .iter()
        .enumerate()
        .flat_map(|(i, a)| left[i + 1..].iter().map(move |b| vec![*a, *b]));
    for candidate in singles.chain(pairs) {
        if runs >= SHRINK_RUNS || candidate.len() >= best.preemptions.len() {
            break;
        }
        let mut key = best.key.clone();
        key.preemptions = Some(candidate);
        runs += 1;
        if let Some(failure) = run_once(config, &key, build).failure
            && failure.kind.same_kind(&best.kind)
        {
            best = failure;
            break;
        }
    }
    if best.key.preemptions.is_some() {
        // The opportunities allowed but not taken change nothing (the
        // fiber went on there anyway): the key names the switches made.
        best.key.preemptions = Some(best.preemptions.clone());
    }
    best.preemptions_before_shrinking = before;
    best.faults_before_shrinking = faults_before;
    best
}
