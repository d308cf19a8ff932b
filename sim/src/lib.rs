//! # spindle-sim: deterministic simulation of Spindle programs
//!
//! Runs *your* program — the same `IO` value that runs on exec-wstp in
//! production — under many seeded schedules, with virtual time and
//! injected faults, and reports the first seed that fails, with what
//! failed and the trace of the failing fiber. Rerunning that seed
//! reproduces the run exactly: every choice comes from the seed.
//!
//! It finds the bugs that hide between fibers: check-then-act races on a
//! `Ref`, lost wake-ups in a hand-written `from_callback` wait, finalizers
//! that do not run on cancellation, timeouts that misbehave when the clock
//! jumps, error paths of I/O that never fails on a developer's machine.
//! (loom, shuttle, turmoil and madsim do this for threads and futures;
//! this knows about fibers, cancellation and finalizers.)
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::Ref;
//! use spindle_sim::{FailureKind, Sim, invariant};
//!
//! // Two fibers add to a counter with a check-then-act: `get`, then
//! // `set`. Another fiber can run between the two.
//! fn racy() -> IO<(), ()> {
//!     let counter = Ref::new(0u32);
//!     let add = |counter: Ref<u32>| {
//!         let c = counter.clone();
//!         counter.get().flat_map(move |n| c.set(n + 1))
//!     };
//!     let end = counter.clone();
//!     add(counter.clone())
//!         .both(add(counter))
//!         .product_r(end.get())
//!         .flat_map(|n| invariant("both increments count", move || n == 2))
//! }
//!
//! let sim = Sim::builder().seeds(0..100).build()?;
//! let failure = sim.check(|_run| racy()).unwrap_err();
//! assert!(matches!(failure.kind, FailureKind::Invariant(_)));
//!
//! // The printed key replays it exactly.
//! let again = sim.replay(&failure.key, |_run| racy());
//! assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How a program is simulated
//!
//! [`Sim::check`] runs the program once per seed of
//! [`SimBuilder::seeds`], in order, each time on a fresh simulation
//! executor ([`SimHandle`], io-core's executor contract) on the calling
//! thread, built by your closure (so that each run starts from fresh
//! state: make your `Ref`s, `Deferred`s and books there). In a run:
//!
//! * **Scheduling.** At every step the [`Strategy`] picks one of the
//!   ready fibers: uniformly ([`Strategy::Random`]) or by PCT
//!   ([`Strategy::Pct`], Burckhardt et al., ASPLOS 2010: see
//!   [`strategy`]). A fiber runs one interpreter step and yields
//!   ([`SimBuilder::preempt_after`]), so every bind is a point where
//!   another fiber may run, as on a multi-threaded pool.
//! * **Virtual time.** `IO::sleep`, `timeout` and every timer run on a
//!   virtual clock (as with exec-single's `TestControl`) that jumps to
//!   the next timer when nothing is ready: an hour of timeouts takes no
//!   real time.
//! * **Blocking work.** `IO::blocking` work is a task the strategy picks
//!   like a fiber: other fibers may run while it "blocks". It runs on the
//!   simulator's thread.
//! * **Faults** (each off by default, each with a probability):
//!   cancellation of fibers when they suspend
//!   ([`SimBuilder::cancel_at_suspension`], for the fibers marked with
//!   [`cancelable`], or all but the main one: [`CancelScope`]); errors at
//!   the [`io_fault`] points of your I/O ([`SimBuilder::io_errors`]);
//!   errors instead of blocking I/O work (every `IO<A, io::Error>` made
//!   with `IO::blocking` or `IO::try_blocking`: files, processes, your
//!   own; [`SimBuilder::blocking_errors`]);
//!   clock jumps ([`SimBuilder::clock_jumps`]).
//! * **A simulated network** ([`net`]): the program's TCP and UDP sockets
//!   (spindle-net's, `spindle_effect::net`) run between named simulated
//!   hosts ([`Run::host`]) on virtual addresses, with no system socket:
//!   packets arrive after a seeded latency and jitter, and the network's
//!   faults ([`SimBuilder::network`], [`NetConfig`]: loss, duplication,
//!   partitions, host crashes and restarts) are drawn from the seed too
//!   (partitions and crashes are numbered faults, which shrinking may
//!   leave out), or scheduled by the program ([`Run::partition`],
//!   [`Run::crash`], [`net::partition`], [`net::crash`]).
//! * **A simulated disk** ([`disk`]): each host's files (spindle-os's
//!   `fs`, `spindle_effect::fs`) are on an in-memory disk of its own that
//!   survives the host's crashes but loses the writes not synced (fully
//!   or to a prefix drawn from the seed); injected disk errors
//!   ([`SimBuilder::disk`], [`DiskConfig`]) are numbered faults.
//!
//! A run fails ([`FailureKind`]) when the main fiber ends with an error, a
//! panic or a cancellation; when a host's program ends with an error or a
//! panic; when it can never end (a deadlock: nothing ready, no timer, no
//! packet in flight, the main fiber waiting); when an invariant is broken
//! ([`invariant`] inside the program, [`Run::check_at_end`] and
//! [`Run::finalizers`] at its end); when fibers are left alive and
//! [`SimBuilder::no_fibers_left`] is on; or after too many steps
//! ([`SimBuilder::max_steps`]).
//!
//! # Reproducing a failure
//!
//! [`Sim::check`] prints the first failure on stderr and returns it: its
//! [`ReplayKey`] (the seed, the faults that shrinking left out, and the
//! schedule's switches it kept), what
//! failed, the trace of the failing fiber, a fiber dump for a deadlock,
//! the last scheduling picks and the faults injected. [`Sim::replay`] with
//! that key and the same program (and the same `Sim` settings) runs the
//! same schedule again, step for step ([`RunReport::schedule`]). Before
//! returning, `check` shrinks the failure: it reruns the seed with each
//! fault left out in turn, keeping every omission under which the run
//! still fails the same way, so the report shows the faults that matter;
//! then it shrinks the schedule, allowing ever fewer of the run's
//! preemptions (switches away from a fiber that could have gone on:
//! delta debugging, within a budget of replays), so that the key replays
//! a run that switches fibers only where the failure needs it
//! ([`RunReport::preemptions`]). Seeds are tried in order, so the failure
//! reported is the first seed's.
//!
//! # What must hold for a run to be reproducible
//!
//! The simulator controls the fibers, their clock and their faults. A
//! program is reproducible when it takes nothing else from outside: no
//! threads of its own that complete callbacks (a callback completed from
//! another thread arrives at an unpredictable step, and a wait for it
//! looks like a deadlock), no `std::time::Instant` (use `IO::monotonic`),
//! no randomness but what a seed gives, no system sockets (TCP and UDP
//! run on the simulated network; Unix-domain sockets and `AsyncFd` are
//! refused with an `Unsupported` error). `IO::blocking` work runs on the
//! simulator's thread: it should not really block.
//!
//! # Speed
//!
//! A step costs a few uncontended lock operations and one fiber run. The
//! example `sim_speed` (eight fibers updating a `Ref`, ceding and
//! sleeping: about 2,000 steps a seed) runs 13 to 17 million simulated
//! steps per second in a release build on a 2-core development machine,
//! 6,500 to 8,500 seeds a second (tracing `cached` to `none`), so
//! thousands of seeds of a small program take well under a second. With
//! the network busy (example `sim_net_speed`: an echo server and four
//! TCP clients, latency, jitter and loss, about 2,200 steps a seed) it
//! runs 5 to 7 million steps per second, 2,400 to 3,200 seeds a second.
//!
//! # Layout
//!
//! `config.rs` ([`SimBuilder`], [`SimConfigError`], [`CancelScope`]),
//! `executor.rs` ([`SimHandle`] and the loop's protocol), `run.rs` (one
//! run, [`Run`], [`RunReport`], [`Failure`], [`ReplayKey`], shrinking),
//! `strategy.rs` ([`Strategy`], PCT), `faults.rs` (the helpers a program
//! calls: [`io_fault`], [`cancelable`], [`invariant`], [`Finalizers`];
//! [`Fault`]), `rng.rs` (the seeded generator: ChaCha8), `net/` (the
//! simulated network: [`NetConfig`], the hosts' drivers and virtual
//! sockets, and `model.rs`, its state machine).

#![deny(missing_docs)]

mod config;
pub mod disk;
pub mod executor;
mod faults;
pub mod net;
pub mod preempt;
mod rng;
mod run;
pub mod strategy;

use core::fmt;

use spindle_core::IO;

pub use config::{CancelScope, SimBuilder, SimConfigError};
pub use disk::DiskConfig;
pub use executor::SimHandle;
pub use faults::{
    Fault, Finalizers, InjectedFault, Token, cancelable, invariant, io_fault, is_simulated,
};
pub use net::{NetConfig, NetError, NetEvent};
pub use preempt::Preemption;
pub use run::{Failure, FailureKind, ParseReplayKeyError, ReplayKey, Run, RunReport};
pub use strategy::Strategy;

use config::Config;

/// A simulator: settings checked, ready to run programs. See the [crate
/// documentation](crate).
#[derive(Debug, Clone)]
pub struct Sim {
    config: Config,
}

/// What a passing [`Sim::check`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Steps run over all seeds.
    pub steps: u64,
    /// Faults injected over all seeds.
    pub faults: u64,
}

impl Sim {
    /// The settings, with their defaults (see [`SimBuilder`]).
    pub fn builder() -> SimBuilder {
        SimBuilder::default()
    }

    /// Runs the program `build` makes once per seed, in order, and stops
    /// at the first failing run: prints it on stderr (with its replay
    /// key), shrinks its faults (unless [`SimBuilder::shrink`] is off) and
    /// returns it. `Ok` with what was run if every seed passed.
    ///
    /// `build` is called once per run, inside the run (helpers such as
    /// [`invariant`] see it), to make the program and its fresh state.
    pub fn check<A, E, F>(&self, mut build: F) -> Result<Summary, Box<Failure>>
    where
        A: Send + 'static,
        E: Send + fmt::Debug + 'static,
        F: FnMut(&mut Run) -> IO<A, E>,
    {
        let mut summary = Summary {
            seeds: 0,
            steps: 0,
            faults: 0,
        };
        for seed in self.config.seeds.clone() {
            let report = run::run_once(&self.config, &ReplayKey::seed(seed), &mut build);
            summary.seeds += 1;
            summary.steps += report.steps;
            summary.faults += report.faults.len() as u64;
            if let Some(failure) = report.failure {
                let shrinks = !failure.faults.is_empty() || !failure.preemptions.is_empty();
                let failure = if self.config.shrink && shrinks {
                    run::shrink(&self.config, failure, &mut build)
                } else {
                    failure
                };
                eprintln!("{failure}");
                return Err(Box::new(failure));
            }
        }
        Ok(summary)
    }

    /// Runs the program once under `key` (a seed, and faults to leave
    /// out), with this simulator's settings: the same key, settings and
    /// program give the same [`RunReport`] (schedule, faults, outcome).
    pub fn replay<A, E, F>(&self, key: &ReplayKey, mut build: F) -> RunReport
    where
        A: Send + 'static,
        E: Send + fmt::Debug + 'static,
        F: FnMut(&mut Run) -> IO<A, E>,
    {
        run::run_once(&self.config, key, &mut build)
    }
}
