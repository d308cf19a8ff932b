//! Executor metrics and fiber dumps.
//!
//! A [`Metrics`] snapshot reads the executor's own counters (fibers
//! started and ended, timers pending, blocking calls in flight: relaxed
//! atomics, one add per event) and what tokio's stable runtime metrics
//! tell of the runtime underneath (workers, alive tasks, the global
//! queue). Fibers are listed with io-core's `FiberRegistry` while they
//! trace or with [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers),
//! in shards chosen by fiber number (tokio does not tell a task which
//! worker runs it), so a fiber dump lists them like on every executor.
//!
//! # Counters for exporters
//!
//! [`Executor::counters`](spindle_core::Executor::counters) gives the
//! executor-independent `RuntimeCounters`: fibers started, completed,
//! canceled (an atomic add on the canceled path only) and live, tokio's
//! global queue depth, one entry per tokio worker (with nothing in it:
//! tokio's per-worker queue depths, steals and parks are among its
//! *unstable* metrics, behind `--cfg tokio_unstable`, so they are absent
//! here, as are I/O events, which tokio's own reactor delivers, and timers
//! fired), timers pending, and `IO::blocking` calls queued or running (as
//! the blocking queue depth; tokio's blocking threads are absent).

use std::fmt;

use spindle_core::{FiberDump, RuntimeCounters, WorkerCounters};

use crate::handle::Shared;
use crate::sync::Ordering;

/// The kind of tokio runtime the fibers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flavor {
    /// tokio's current-thread runtime: every fiber on one thread.
    CurrentThread,
    /// tokio's multi-thread (work-stealing) runtime.
    MultiThread,
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flavor::CurrentThread => "current-thread",
            Flavor::MultiThread => "multi-thread",
        })
    }
}

pub(crate) fn flavor(handle: &tokio::runtime::Handle) -> Flavor {
    match handle.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => Flavor::CurrentThread,
        _ => Flavor::MultiThread,
    }
}

/// A snapshot of the executor's state (each number read at a slightly
/// different moment: a picture of a moving system, not a transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// The tokio runtime's flavor.
    pub flavor: Flavor,
    /// Whether the executor owns its runtime (built it) or is attached to
    /// one of the application's.
    pub owns_runtime: bool,
    /// tokio's worker threads (1 for a current-thread runtime).
    pub workers: usize,
    /// Fibers started and not yet ended (ended: completed, or freed before
    /// completing).
    pub live_fibers: u64,
    /// Timers set and not yet fired or cancelled.
    pub timers: usize,
    /// `IO::blocking` calls queued or running on tokio's blocking pool.
    pub blocking_calls: usize,
    /// Tasks alive on the tokio runtime: one per started fiber that has
    /// not ended (a waiting fiber keeps its task, parked), one per pending
    /// timer, and every other task of the application.
    pub tokio_alive_tasks: usize,
    /// Tasks in the tokio runtime's global (injection) queue.
    pub tokio_global_queue_len: usize,
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tokio {} runtime ({}), workers: {}; live fibers: {}; timers: {}; blocking calls: {}; \
             tokio tasks: {} alive, {} in the global queue",
            self.flavor,
            if self.owns_runtime {
                "owned"
            } else {
                "attached"
            },
            self.workers,
            self.live_fibers,
            self.timers,
            self.blocking_calls,
            self.tokio_alive_tasks,
            self.tokio_global_queue_len
        )
    }
}

pub(crate) fn snapshot(shared: &Shared) -> Metrics {
    let tokio = shared.tokio.metrics();
    Metrics {
        flavor: flavor(&shared.tokio),
        owns_runtime: shared.owns_runtime,
        workers: tokio.num_workers(),
        live_fibers: shared.live_fibers_count(),
        timers: shared.counters.timers.load(Ordering::Relaxed),
        blocking_calls: shared.counters.blocking.load(Ordering::Relaxed),
        tokio_alive_tasks: tokio.num_alive_tasks(),
        tokio_global_queue_len: tokio.global_queue_depth(),
    }
}

/// Every listed live fiber's state and trace, and the executor's state.
pub(crate) fn fiber_dump(shared: &Shared) -> FiberDump {
    let m = snapshot(shared);
    FiberDump {
        fibers: shared.fibers.live_fibers(),
        executor: vec![
            ("workers", m.workers as u64),
            ("live fibers", m.live_fibers),
            ("timers", m.timers as u64),
            ("blocking calls", m.blocking_calls as u64),
            ("tokio tasks", m.tokio_alive_tasks as u64),
            ("tokio global queue", m.tokio_global_queue_len as u64),
        ],
    }
}

/// The executor-independent counters (see the module doc).
pub(crate) fn counters(shared: &Shared) -> RuntimeCounters {
    let tokio = shared.tokio.metrics();
    let started = shared.counters.created.load(Ordering::Relaxed);
    let ended = shared.counters.ended.load(Ordering::Relaxed);
    let mut c = RuntimeCounters::new("tokio");
    c.fibers_started_total = Some(started);
    c.fibers_completed_total = Some(ended);
    c.fibers_canceled_total = Some(shared.counters.canceled.load(Ordering::Relaxed));
    c.fibers_live = Some(started.saturating_sub(ended));
    c.global_queue_depth = Some(tokio.global_queue_depth() as u64);
    c.workers = vec![WorkerCounters::new(); tokio.num_workers()];
    let timers = shared.counters.timers.load(Ordering::Relaxed) as u64;
    c.timers = Some(timers);
    c.blocking_queue_depth = Some(shared.counters.blocking.load(Ordering::Relaxed) as u64);
    c
}
