//! Spindle's executor counters through the [`metrics`] facade: one exporter
//! for every executor.
//!
//! Every executor fills io-core's executor-independent
//! [`RuntimeCounters`] ([`Executor::counters`], from any thread, on its
//! handle); this crate records them into whatever recorder the application
//! installed in the `metrics` facade (Prometheus, StatsD, a test's
//! debugging recorder), under the names below. Two ways:
//!
//! * [`record`] records once, now: call it where the numbers are read, for
//!   instance in the handler of a Prometheus scrape (the crate's example
//!   `prometheus` does, on spindle-net's TCP, with
//!   `metrics-exporter-prometheus` rendering the text format).
//! * [`record_every`] is a program that records every `interval` until its
//!   fiber is canceled: start it beside the application's main program, for
//!   a recorder that pushes (StatsD) or keeps the last value.
//!
//! [`describe`] gives the recorder each name's description and unit (call
//! it once, after installing the recorder; [`record_every`] calls it when it
//! starts).
//!
//! ```
//! use std::time::Duration;
//! use spindle_effect::prelude::*;
//! use spindle_effect::{IO, wstp::Runtime};
//!
//! let rt = Runtime::new()?;
//! let handle = rt.handle().clone();
//! // A recorder would be installed here (metrics::set_global_recorder);
//! // without one, recording does nothing.
//! spindle_metrics::describe();
//! spindle_metrics::record(&handle);
//! // Or: record every second, beside the main program, until it ends.
//! let every = spindle_metrics::record_every::<_, ()>(handle, Duration::from_secs(1))?;
//! let program = every.start::<()>().flat_map(|recorder| {
//!     IO::pure(42).flat_tap(move |_| recorder.cancel())
//! });
//! assert_eq!(rt.block_on(program)?.succeeded(), Some(42));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Names
//!
//! Every value is a count (`metrics::Unit::Count`); the unit column says of
//! what. Counters (`_total`) are recorded as absolute values (the executor
//! keeps the running total; `Counter::absolute`), gauges with
//! `Gauge::set`. Per-worker series carry the label `worker` (the worker's
//! index, `"0"`, `"1"`, ...; a loop on one thread is worker `"0"`). A value
//! an executor does not count is not recorded at all (never as a made-up
//! zero): the last column says who provides it.
//!
//! | name | kind | unit | executors |
//! |---|---|---|---|
//! | `spindle_fibers_started_total` | counter | fibers made | all |
//! | `spindle_fibers_completed_total` | counter | fibers ended: ran to an outcome, or freed without one | all |
//! | `spindle_fibers_canceled_total` | counter | fibers whose outcome was `Canceled` (a subset of completed) | all |
//! | `spindle_fibers_live` | gauge | fibers started and not ended | all |
//! | `spindle_global_queue_depth` | gauge | fibers in the shared queue (a pool's global queue, a loop's remote queue, tokio's injection queue) | all |
//! | `spindle_worker_queue_depth{worker}` | gauge | fibers in the worker's own queue | single, wstp, batching |
//! | `spindle_worker_steals_total{worker}` | counter | successful steals (batches taken from another worker) | wstp |
//! | `spindle_worker_parks_total{worker}` | counter | sleeps for want of work | single, wstp, batching |
//! | `spindle_worker_timers{worker}` | gauge | timers pending on the worker | single, wstp, batching |
//! | `spindle_io_events_total` | counter | fibers resumed by socket readiness the poller delivered | single (system clock), wstp, batching |
//! | `spindle_io_sources` | gauge | sockets registered with the poller | single, wstp, batching |
//! | `spindle_io_waiters` | gauge | fibers waiting for socket readiness | single, wstp, batching |
//! | `spindle_timers` | gauge | timers pending | all |
//! | `spindle_timers_fired_total` | counter | timers fired | single, wstp, batching |
//! | `spindle_blocking_threads` | gauge | blocking-pool threads, busy or idle | single (system clock), wstp, batching |
//! | `spindle_blocking_threads_idle` | gauge | blocking-pool threads waiting for work | single (system clock), wstp, batching |
//! | `spindle_blocking_queue_depth` | gauge | `IO::blocking` calls waiting for a thread (tokio: queued or running) | single (system clock), wstp, batching, tokio |
//!
//! exec-tokio's steals, parks, per-worker queue depths and I/O events are
//! tokio's (its unstable metrics) and absent; read them from tokio.
//!
//! # Cost
//!
//! Recording reads the counters (a relaxed load each, a short lock per
//! worker's timers on exec-wstp) and hands ~20 values to the recorder:
//! paid per scrape or per interval, never per fiber. What the executors
//! pay to keep the counters is described in io-core's `RuntimeCounters`
//! and each executor's `metrics` module: one-thread counters (a load and a
//! store) on paths that are not per fiber, but for the fibers ended and
//! canceled.
//!
//! Several executors in one process: their series have the same names;
//! record one of them, or give each its own recorder (`metrics::with_local_recorder`).

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};
pub use spindle_core::{Executor, RuntimeCounters, WorkerCounters};
use spindle_core::{IO, sleep};

/// `spindle_fibers_started_total`: fibers made (counter).
pub const FIBERS_STARTED: &str = "spindle_fibers_started_total";
/// `spindle_fibers_completed_total`: fibers ended (counter).
pub const FIBERS_COMPLETED: &str = "spindle_fibers_completed_total";
/// `spindle_fibers_canceled_total`: fibers whose outcome was `Canceled`
/// (counter).
pub const FIBERS_CANCELED: &str = "spindle_fibers_canceled_total";
/// `spindle_fibers_live`: fibers started and not ended (gauge).
pub const FIBERS_LIVE: &str = "spindle_fibers_live";
/// `spindle_global_queue_depth`: fibers in the shared queue (gauge).
pub const GLOBAL_QUEUE_DEPTH: &str = "spindle_global_queue_depth";
/// `spindle_worker_queue_depth{worker}`: fibers in a worker's queue (gauge).
pub const WORKER_QUEUE_DEPTH: &str = "spindle_worker_queue_depth";
/// `spindle_worker_steals_total{worker}`: a worker's steals (counter).
pub const WORKER_STEALS: &str = "spindle_worker_steals_total";
/// `spindle_worker_parks_total{worker}`: a worker's sleeps (counter).
pub const WORKER_PARKS: &str = "spindle_worker_parks_total";
/// `spindle_worker_timers{worker}`: timers pending on a worker (gauge).
pub const WORKER_TIMERS: &str = "spindle_worker_timers";
/// `spindle_io_events_total`: fibers resumed by readiness (counter).
pub const IO_EVENTS: &str = "spindle_io_events_total";
/// `spindle_io_sources`: sockets registered (gauge).
pub const IO_SOURCES: &str = "spindle_io_sources";
/// `spindle_io_waiters`: fibers waiting for readiness (gauge).
pub const IO_WAITERS: &str = "spindle_io_waiters";
/// `spindle_timers`: timers pending (gauge).
pub const TIMERS: &str = "spindle_timers";
/// `spindle_timers_fired_total`: timers fired (counter).
pub const TIMERS_FIRED: &str = "spindle_timers_fired_total";
/// `spindle_blocking_threads`: blocking-pool threads (gauge).
pub const BLOCKING_THREADS: &str = "spindle_blocking_threads";
/// `spindle_blocking_threads_idle`: idle blocking-pool threads (gauge).
pub const BLOCKING_THREADS_IDLE: &str = "spindle_blocking_threads_idle";
/// `spindle_blocking_queue_depth`: `IO::blocking` calls waiting (gauge).
pub const BLOCKING_QUEUE_DEPTH: &str = "spindle_blocking_queue_depth";

/// The label of the per-worker series: the worker's index.
pub const WORKER_LABEL: &str = "worker";

/// Every counter's name and description (kind: counter).
const COUNTERS: [(&str, &str); 7] = [
    (FIBERS_STARTED, "Fibers made on the executor."),
    (
        FIBERS_COMPLETED,
        "Fibers ended: ran to an outcome, or freed without one.",
    ),
    (FIBERS_CANCELED, "Fibers whose outcome was Canceled."),
    (
        WORKER_STEALS,
        "Successful steals: batches of fibers a worker took from another's queue.",
    ),
    (WORKER_PARKS, "Times a worker slept for want of work."),
    (
        IO_EVENTS,
        "Fibers resumed by socket readiness the poller delivered.",
    ),
    (TIMERS_FIRED, "Timers fired."),
];

/// Every gauge's name and description (kind: gauge).
const GAUGES: [(&str, &str); 10] = [
    (FIBERS_LIVE, "Fibers started and not yet ended."),
    (
        GLOBAL_QUEUE_DEPTH,
        "Fibers waiting in the executor's shared (global or remote) queue.",
    ),
    (
        WORKER_QUEUE_DEPTH,
        "Fibers waiting in a worker's own queue.",
    ),
    (WORKER_TIMERS, "Timers pending on a worker."),
    (IO_SOURCES, "Sockets registered with the poller."),
    (IO_WAITERS, "Fibers waiting for socket readiness."),
    (TIMERS, "Timers set and not yet fired or cancelled."),
    (BLOCKING_THREADS, "Blocking-pool threads, busy or idle."),
    (
        BLOCKING_THREADS_IDLE,
        "Blocking-pool threads waiting for work.",
    ),
    (
        BLOCKING_QUEUE_DEPTH,
        "IO::blocking calls waiting for a thread (exec-tokio: queued or running).",
    ),
];

/// Every name this crate records, with its kind (`"counter"` or
/// `"gauge"`), in the order of the [crate documentation](crate#names)'s
/// table (counters first).
pub fn names() -> impl Iterator<Item = (&'static str, &'static str)> {
    COUNTERS
        .iter()
        .map(|(name, _)| (*name, "counter"))
        .chain(GAUGES.iter().map(|(name, _)| (*name, "gauge")))
}

/// Gives the installed recorder the description and unit
/// ([`Unit::Count`]) of every name. Call it once after installing the
/// recorder (a recorder installed later does not see it).
pub fn describe() {
    for (name, help) in COUNTERS {
        describe_counter!(name, Unit::Count, help);
    }
    for (name, help) in GAUGES {
        describe_gauge!(name, Unit::Count, help);
    }
}

/// Records the counters of the executor behind `handle` into the installed
/// recorder, now (see the [crate documentation](crate#names) for the
/// names). Any thread, also inside a fiber.
pub fn record<X: Executor>(handle: &X) {
    record_counters(&handle.counters());
}

/// Records `counters` (an executor's [`Executor::counters`]) into the
/// installed recorder. Absent values are not recorded.
pub fn record_counters(counters: &RuntimeCounters) {
    let c = counters;
    total(FIBERS_STARTED, c.fibers_started_total);
    total(FIBERS_COMPLETED, c.fibers_completed_total);
    total(FIBERS_CANCELED, c.fibers_canceled_total);
    level(FIBERS_LIVE, c.fibers_live);
    level(GLOBAL_QUEUE_DEPTH, c.global_queue_depth);
    for (index, worker) in c.workers.iter().enumerate() {
        let label = || index.to_string();
        if let Some(v) = worker.queue_depth {
            gauge!(WORKER_QUEUE_DEPTH, WORKER_LABEL => label()).set(v as f64);
        }
        if let Some(v) = worker.steals_total {
            counter!(WORKER_STEALS, WORKER_LABEL => label()).absolute(v);
        }
        if let Some(v) = worker.parks_total {
            counter!(WORKER_PARKS, WORKER_LABEL => label()).absolute(v);
        }
        if let Some(v) = worker.timers {
            gauge!(WORKER_TIMERS, WORKER_LABEL => label()).set(v as f64);
        }
    }
    total(IO_EVENTS, c.io_events_total);
    level(IO_SOURCES, c.io_sources);
    level(IO_WAITERS, c.io_waiters);
    level(TIMERS, c.timers);
    total(TIMERS_FIRED, c.timers_fired_total);
    level(BLOCKING_THREADS, c.blocking_threads);
    level(BLOCKING_THREADS_IDLE, c.blocking_threads_idle);
    level(BLOCKING_QUEUE_DEPTH, c.blocking_queue_depth);
}

fn total(name: &'static str, value: Option<u64>) {
    if let Some(v) = value {
        counter!(name).absolute(v);
    }
}

fn level(name: &'static str, value: Option<u64>) {
    if let Some(v) = value {
        gauge!(name).set(v as f64);
    }
}

/// A program that [`describe`]s the names, then [`record`]s the counters of
/// the executor behind `handle` at once and after every `interval`, until
/// its fiber is canceled (it never completes on its own: start it as a
/// fiber beside the application's program and cancel it, or race it).
/// Its error type is free: it never fails.
///
/// `Err(ZeroInterval)` for an interval of zero (it would record without
/// pause, taking a thread for nothing).
pub fn record_every<X, E>(handle: X, interval: Duration) -> Result<IO<Infallible, E>, ZeroInterval>
where
    X: Executor,
    E: Send + 'static,
{
    if interval.is_zero() {
        return Err(ZeroInterval);
    }
    let start = IO::<(), E>::delay(describe);
    Ok(start.flat_map(move |()| {
        IO::forever(move || {
            let handle = handle.clone();
            IO::<(), E>::delay(move || record(&handle)).product_r(sleep(interval))
        })
    }))
}

/// [`record_every`] was given an interval of zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroInterval;

impl fmt::Display for ZeroInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the metrics recording interval is zero: give it a positive duration")
    }
}

impl std::error::Error for ZeroInterval {}
