//! Runtime metrics and the list of live fibers.
//!
//! A [`Metrics`] snapshot reads counters the scheduler keeps anyway (queue
//! lengths, the idle word, the blocking pool's state), the pool's count of
//! fibers made (one relaxed add per fiber, which also numbers the fiber:
//! `#1`, `#2`, ... in dumps), and a count of fibers ended per worker,
//! written by that worker alone (a plain load and store, no atomic
//! read-modify-write, on a cache line of its own).
//!
//! # Counters for exporters
//!
//! [`Executor::counters`](spindle_core::Executor::counters) gives the
//! executor-independent `RuntimeCounters`: the above, and per worker its
//! steals (successful batch steals from another worker's queue), parks
//! (sleeps for want of work), the fibers that readiness resumed from its
//! polls of the poller (I/O events) and the timers it fired, each counted
//! by that worker alone where it happens (a steal, a park, a poll, a timer
//! firing: never on the path of a fiber that runs), and the fibers canceled
//! (counted, like the ended ones, by the worker that ends them).
//!
//! # Live fibers
//!
//! While fibers trace (io-core's `tracing` feature and a tracing mode other
//! than `none`), or with
//! [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers), the pool keeps
//! io-core's fiber registry (`spindle_core::executor::support::FiberRegistry`)
//! with one shard per worker, weak references to the fibers started on it
//! (they never keep a fiber's program alive, and report nothing once the
//! fiber has completed), and one shard for fibers started from outside the
//! pool. A shard's lock is taken only by its own worker when a fiber starts
//! and by a listing, never on the scheduling path; the bag drops references to finished fibers when
//! it has doubled since its last cleanup, so its size stays within twice
//! the live fibers. Without tracking nothing is recorded, at the cost of
//! one predictable branch per fiber started.
//!
//! # Fiber dumps
//!
//! [`fiber_dump`] turns the registry into io-core's `FiberDump` (each fiber's
//! state and trace, read through its trace ring's sequence lock, so a dump
//! never stops a worker) and adds the pool's state; the app entry point
//! prints it, under the [`Metrics`], on SIGUSR1.

use std::fmt;

use spindle_core::{FiberDump, RuntimeCounters, WorkerCounters};

use crate::handle::{Counters, Shared};
use crate::sync::Ordering;

/// One worker's part of a [`Metrics`] snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerMetrics {
    /// Fibers waiting in its local queue.
    pub local_queue_len: usize,
    /// Timers set on it and not yet fired or cancelled.
    pub timers: usize,
    /// Whether it sleeps.
    pub parked: bool,
}

/// A snapshot of the scheduler's state (each number read at a slightly
/// different moment: a picture of a moving system, not a transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    /// Per worker, by index.
    pub workers: Vec<WorkerMetrics>,
    /// Fibers waiting in the global queue.
    pub global_queue_len: usize,
    /// Fibers started and not yet ended (ended: completed, or freed before
    /// completing).
    pub live_fibers: u64,
    /// Workers asleep.
    pub parked_workers: usize,
    /// Workers searching for work to steal.
    pub searching_workers: usize,
    /// Threads of the blocking pool (busy or idle).
    pub blocking_threads: usize,
    /// Blocking threads waiting for work.
    pub idle_blocking_threads: usize,
    /// Sockets registered with the pool's poller.
    pub io_sources: usize,
    /// Fibers waiting for the readiness of one of those sockets.
    pub io_waiters: usize,
    /// `IO::blocking` calls waiting for a thread.
    pub blocking_queue_len: usize,
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "workers: {} ({} parked, {} searching); global queue: {}; live fibers: {}; \
             sockets {}, I/O waiters {}",
            self.workers.len(),
            self.parked_workers,
            self.searching_workers,
            self.global_queue_len,
            self.live_fibers,
            self.io_sources,
            self.io_waiters
        )?;
        for (index, worker) in self.workers.iter().enumerate() {
            writeln!(
                f,
                "  worker {index}: local queue {}, timers {}{}",
                worker.local_queue_len,
                worker.timers,
                if worker.parked { ", parked" } else { "" }
            )?;
        }
        write!(
            f,
            "blocking threads: {} ({} idle), queued blocking calls: {}",
            self.blocking_threads, self.idle_blocking_threads, self.blocking_queue_len
        )
    }
}

pub(crate) fn snapshot(shared: &Shared) -> Metrics {
    let workers = shared
        .remotes
        .iter()
        .enumerate()
        .map(|(index, remote)| WorkerMetrics {
            local_queue_len: remote.stealer.len(),
            timers: remote.timers.lock().len(),
            parked: shared.idle.is_asleep(index),
        })
        .collect();
    let (parked_workers, searching_workers) = shared.idle.counts();
    let blocking = shared.blocking.counts();
    Metrics {
        workers,
        global_queue_len: shared.injector.len(),
        live_fibers: shared.live_fibers_count(),
        parked_workers,
        searching_workers,
        blocking_threads: blocking.threads,
        idle_blocking_threads: blocking.idle,
        blocking_queue_len: blocking.queued,
        io_sources: shared.reactor.sources(),
        io_waiters: shared.reactor.waiters(),
    }
}

/// Every listed live fiber's state and trace, and the pool's state.
pub(crate) fn fiber_dump(shared: &Shared) -> FiberDump {
    let fibers = shared.fibers.live_fibers();
    let local_queues: usize = shared.remotes.iter().map(|r| r.stealer.len()).sum();
    let timers: usize = shared.remotes.iter().map(|r| r.timers.lock().len()).sum();
    let (parked, _) = shared.idle.counts();
    let blocking = shared.blocking.counts();
    let io_sources = shared.reactor.sources();
    let io_waiters = shared.reactor.waiters();
    FiberDump {
        fibers,
        executor: vec![
            ("workers", shared.remotes.len() as u64),
            ("parked workers", parked as u64),
            ("local queues", local_queues as u64),
            ("global queue", shared.injector.len() as u64),
            ("timers", timers as u64),
            ("io sources", io_sources as u64),
            ("io waiters", io_waiters as u64),
            ("blocking threads", blocking.threads as u64),
            ("queued blocking calls", blocking.queued as u64),
        ],
    }
}

/// The executor-independent counters (see the module doc).
pub(crate) fn counters(shared: &Shared) -> RuntimeCounters {
    let mut c = RuntimeCounters::new("wstp");
    let started = shared.created.load(Ordering::Relaxed);
    let ended = Counters::sum(shared, |c| &c.ended);
    c.fibers_started_total = Some(started);
    c.fibers_completed_total = Some(ended);
    c.fibers_canceled_total = Some(Counters::sum(shared, |c| &c.canceled));
    c.fibers_live = Some(started.saturating_sub(ended));
    c.global_queue_depth = Some(shared.injector.len() as u64);
    let mut timers = 0;
    c.workers = shared
        .remotes
        .iter()
        .map(|remote| {
            let mut w = WorkerCounters::new();
            let worker_timers = remote.timers.lock().len() as u64;
            timers += worker_timers;
            w.queue_depth = Some(remote.stealer.len() as u64);
            w.steals_total = Some(remote.counters.steals.load(Ordering::Relaxed));
            w.parks_total = Some(remote.counters.parks.load(Ordering::Relaxed));
            w.timers = Some(worker_timers);
            w
        })
        .collect();
    c.io_events_total = Some(Counters::sum(shared, |c| &c.io_events));
    c.io_sources = Some(shared.reactor.sources() as u64);
    c.io_waiters = Some(shared.reactor.waiters() as u64);
    c.timers = Some(timers);
    c.timers_fired_total = Some(Counters::sum(shared, |c| &c.timers_fired));
    let blocking = shared.blocking.counts();
    c.blocking_threads = Some(blocking.threads as u64);
    c.blocking_threads_idle = Some(blocking.idle as u64);
    c.blocking_queue_depth = Some(blocking.queued as u64);
    c
}
