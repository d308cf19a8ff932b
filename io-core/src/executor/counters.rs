//! [`RuntimeCounters`]: the executor-independent counters (see its documentation).

use alloc::vec::Vec;

/// One worker thread's part of [`RuntimeCounters`] (an executor with one
/// loop thread reports one worker).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerCounters {
    /// Fibers waiting in the worker's own run queue (gauge, fibers).
    pub queue_depth: Option<u64>,
    /// Successful steals by this worker: batches of fibers it took from
    /// another worker's queue (counter, steal operations).
    pub steals_total: Option<u64>,
    /// Times this worker went to sleep for want of work (counter, parks).
    pub parks_total: Option<u64>,
    /// Timers set on this worker and not yet fired or cancelled (gauge,
    /// timers).
    pub timers: Option<u64>,
}

impl WorkerCounters {
    /// A worker that reports nothing (every field absent); set the fields
    /// the executor knows.
    pub fn new() -> WorkerCounters {
        WorkerCounters::default()
    }
}

/// The executor-independent counters of one executor: what absent
/// (`None`) means and which fields are counters and which gauges are
/// below.
///
/// [`RuntimeCounters`]: the counters every executor can be asked for, in
/// one executor-independent shape, so that one exporter (the
/// `spindle-metrics` crate's, for the `metrics` facade) serves every
/// executor.
///
/// Each executor keeps its own, richer `Metrics` snapshot
/// ([`IORuntime::handle_metrics`](super::IORuntime::handle_metrics));
/// [`Executor::counters`](super::Executor::counters) maps what it knows
/// into this struct and leaves the rest `None`. `None` means *absent*
/// (the executor does not count it, for instance the steals of exec-tokio,
/// which are tokio's own business), never zero: an exporter skips it
/// rather than report a made-up value.
///
/// # Kinds
///
/// A field ending in `_total` is a monotonic counter since the executor was
/// built (it never goes down; exporters report it as an absolute counter).
/// Every other field is a gauge: a level read at the moment of the snapshot.
/// Each number is read at a slightly different moment (a picture of a
/// moving system, not a transaction), so `fibers_live` may differ by a few
/// from `fibers_started_total - fibers_completed_total` read a moment
/// apart.
///
/// # How executors count, cheaply
///
/// Counters on the paths every fiber takes are written by one thread each
/// (a worker's own counter, on its own cache line: a relaxed load and a
/// relaxed store, no read-modify-write) and summed when read; counters on
/// rare paths (a park, a steal, a poll of the poller, a timer firing, a
/// canceled fiber) are counted where they happen.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{IO, wstp::Runtime};
///
/// let rt = Runtime::new()?;
/// rt.block_on(IO::<i32, ()>::pure(1).start::<()>().flat_map(|fiber| fiber.join().map(|_| ())))?;
/// let counters = rt.handle().counters();
/// assert_eq!(counters.executor, "wstp");
/// assert!(counters.fibers_started_total.unwrap() >= 2); // main and child
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeCounters {
    /// A short name of the executor (`"single"`, `"wstp"`, `"batching"`,
    /// `"tokio"`; empty for an executor that does not say), for a label.
    pub executor: &'static str,
    /// Fibers made on the executor (counter, fibers).
    pub fibers_started_total: Option<u64>,
    /// Fibers that ended: ran to an outcome (succeeded, errored, canceled
    /// or panicked), or were freed without one (a shut-down executor, a
    /// wait nothing can end) (counter, fibers).
    pub fibers_completed_total: Option<u64>,
    /// Of the completed fibers, those whose outcome was `Canceled`
    /// (counter, fibers).
    pub fibers_canceled_total: Option<u64>,
    /// Fibers started and not yet ended (gauge, fibers).
    pub fibers_live: Option<u64>,
    /// Fibers waiting in the executor's shared queue: the global
    /// (injection) queue of a pool, the remote queue of a loop (gauge,
    /// fibers).
    pub global_queue_depth: Option<u64>,
    /// Per worker thread, by index.
    pub workers: Vec<WorkerCounters>,
    /// Wake-ups delivered by the I/O poller: fibers resumed because a
    /// socket became ready (counter, events).
    pub io_events_total: Option<u64>,
    /// Sockets registered with the poller (gauge, sockets).
    pub io_sources: Option<u64>,
    /// Fibers waiting for a socket to become ready (gauge, fibers).
    pub io_waiters: Option<u64>,
    /// Timers set and not yet fired or cancelled, over all workers (gauge,
    /// timers).
    pub timers: Option<u64>,
    /// Timers that fired (counter, timers).
    pub timers_fired_total: Option<u64>,
    /// Threads of the blocking pool, busy or idle (gauge, threads).
    pub blocking_threads: Option<u64>,
    /// Blocking threads waiting for work (gauge, threads).
    pub blocking_threads_idle: Option<u64>,
    /// `IO::blocking` calls waiting for a thread, or (where the executor
    /// cannot tell queued from running) queued or running (gauge, calls).
    pub blocking_queue_depth: Option<u64>,
}

impl RuntimeCounters {
    /// Counters of the executor `executor` with every value absent; set
    /// the fields the executor knows.
    pub fn new(executor: &'static str) -> RuntimeCounters {
        RuntimeCounters {
            executor,
            ..RuntimeCounters::default()
        }
    }
}

/// `serde::Serialize` (feature `serde`): every field by its name, an
/// absent value as `null` (`"workers"` a list of objects the same way).
#[cfg(feature = "serde")]
mod serialize {
    use serde::ser::{Serialize, SerializeStruct, Serializer};

    use super::{RuntimeCounters, WorkerCounters};

    impl Serialize for WorkerCounters {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut w = serializer.serialize_struct("WorkerCounters", 4)?;
            w.serialize_field("queue_depth", &self.queue_depth)?;
            w.serialize_field("steals_total", &self.steals_total)?;
            w.serialize_field("parks_total", &self.parks_total)?;
            w.serialize_field("timers", &self.timers)?;
            w.end()
        }
    }

    impl Serialize for RuntimeCounters {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut c = serializer.serialize_struct("RuntimeCounters", 16)?;
            c.serialize_field("executor", self.executor)?;
            c.serialize_field("fibers_started_total", &self.fibers_started_total)?;
            c.serialize_field("fibers_completed_total", &self.fibers_completed_total)?;
            c.serialize_field("fibers_canceled_total", &self.fibers_canceled_total)?;
            c.serialize_field("fibers_live", &self.fibers_live)?;
            c.serialize_field("global_queue_depth", &self.global_queue_depth)?;
            c.serialize_field("workers", self.workers.as_slice())?;
            c.serialize_field("io_events_total", &self.io_events_total)?;
            c.serialize_field("io_sources", &self.io_sources)?;
            c.serialize_field("io_waiters", &self.io_waiters)?;
            c.serialize_field("timers", &self.timers)?;
            c.serialize_field("timers_fired_total", &self.timers_fired_total)?;
            c.serialize_field("blocking_threads", &self.blocking_threads)?;
            c.serialize_field("blocking_threads_idle", &self.blocking_threads_idle)?;
            c.serialize_field("blocking_queue_depth", &self.blocking_queue_depth)?;
            c.end()
        }
    }
}
