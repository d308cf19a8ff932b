//! [`Metrics`]: counters of the loop, and how it lists its live fibers.
//!
//! # Counters
//!
//! Turns, batches and fibers run are written by the loop thread alone (a
//! relaxed load and store, no read-modify-write) and may be read from any
//! thread; so are fibers completed and canceled (fibers complete where
//! they run, on the loop thread), parks (waits in the poller with nothing
//! queued), I/O events (fibers resumed by readiness) and timers fired.
//! Fibers made are counted with one relaxed atomic add per fiber (from
//! whichever thread makes it: the count numbers them), fibers freed before
//! completing with an atomic add wherever that happens. All of this is
//! always on; `Executor::counters` gives it in the executor-independent
//! shape, `RuntimeCounters`.
//!
//! # Live fibers
//!
//! While fibers trace (io-core's `tracing` feature and a mode other than
//! `none`), or with [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers),
//! the loop keeps io-core's fiber registry
//! (`spindle_core::executor::support::FiberRegistry`) of every fiber made
//! on it that has waited or yielded once, from its
//! [`Executor::fiber_listed`](spindle_core::Executor::fiber_listed) hook:
//! weak references that never keep a fiber's program alive and report
//! nothing once the fiber has completed, so no fiber is wrapped and nothing
//! is added to the scheduling path. The list drops the references of
//! finished fibers whenever it has doubled since its last clean-up, so it
//! holds at most about twice the live fibers. Tracking
//! costs a lock, a weak reference count and a vector push per fiber
//! started, which a loop that starts a fiber per request pays only while
//! it traces (then a fiber dump shows every fiber's trace) or when it asks
//! for it; with tracing mode `none` (or tracing compiled out) and no
//! [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers) nothing is kept.
//!
//! A fiber dump (`IORuntime::fiber_dump` on the loop)
//! reads the same list, each fiber's state and trace, and the queue
//! lengths: exactly on the loop thread (or between runs), and otherwise as
//! the loop published them at the end of its last turn (two relaxed
//! stores per turn).

use std::fmt;

/// A snapshot of the loop's counters (each read at a slightly different
/// moment when the loop is running on another thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Turns the loop has started (each: timers, I/O, macrotasks, with
    /// microtask checkpoints after each).
    pub turns: u64,
    /// Turns whose microtask batch ran at least one fiber (at any of the
    /// turn's checkpoints).
    pub batches: u64,
    /// Fiber runs from the microtask batch (fibers started or resumed).
    pub microtasks_run: u64,
    /// Fiber runs from the macrotask queue (cedes and auto-yields; in
    /// [`Mode::Macrotask`](crate::Mode::Macrotask) every fiber run).
    pub macrotasks_run: u64,
    /// Fibers made and not yet ended (completed, or freed before
    /// completing).
    pub live_fibers: u64,
    /// Timers set and not yet fired or cancelled.
    pub timers: usize,
    /// Sockets registered with the poller.
    pub io_sources: usize,
    /// Fibers suspended until a socket is ready.
    pub io_waiters: usize,
    /// Threads of the blocking pool (busy or idle).
    pub blocking_threads: usize,
    /// Blocking threads waiting for work.
    pub idle_blocking_threads: usize,
    /// `IO::blocking` calls waiting for a thread.
    pub blocking_queue_len: usize,
}

impl Metrics {
    /// Every fiber run, from either queue.
    pub fn fibers_run(&self) -> u64 {
        self.microtasks_run + self.macrotasks_run
    }
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "turns: {}; batches: {}; runs: {} microtask, {} macrotask; live fibers: {}; \
             timers: {}; sockets: {} ({} waiters); blocking threads: {} ({} idle), \
             queued blocking calls: {}",
            self.turns,
            self.batches,
            self.microtasks_run,
            self.macrotasks_run,
            self.live_fibers,
            self.timers,
            self.io_sources,
            self.io_waiters,
            self.blocking_threads,
            self.idle_blocking_threads,
            self.blocking_queue_len
        )
    }
}
