//! # exec-wstp: a work-stealing executor for Spindle fibers
//!
//! N worker threads run fibers; each has a local FIFO queue (crossbeam-deque)
//! that idle workers steal from, and fibers scheduled from outside the pool
//! go to a global injector queue. This is the default executor for
//! applications ([`app`] runs a main `IO` as a process).
//!
//! ```
//! use spindle_exec_wstp::Runtime;
//! use spindle_core::{IO, Outcome};
//!
//! let rt = Runtime::builder().worker_threads(2).build().unwrap();
//! let work = (0..100u64).map(|i| IO::<u64, ()>::delay(move || i * i)).collect::<Vec<_>>();
//! let sum = IO::par_sequence(work).map(|squares| squares.iter().sum::<u64>());
//! assert_eq!(rt.block_on(sum).unwrap(), Outcome::Succeeded(328_350));
//! ```
//!
//! # Design
//!
//! The anchors are tokio's multi-thread scheduler and Cats Effect's
//! `WorkStealingThreadPool` (itself modelled on tokio's); this crate is our
//! own implementation of their shared design. The source modules document
//! each part in full: `worker` (the loop), `idle` (parking, with the
//! argument why no wake-up is lost), `timer`, `blocking`, `metrics`.
//!
//! ## The worker loop
//!
//! Each turn a worker takes its next fiber: every `global_queue_interval`
//! ticks (default 61) it fires due timers and looks at the global queue
//! first, so fibers scheduled from outside are never starved by local work;
//! otherwise its *next* slot, then its local queue, then a batch from the
//! global queue. Out
//! of work, it fires due timers, then, as a *searcher*, steals half of
//! another worker's queue (random victim) or takes from the global queue;
//! still nothing, it parks until woken or until its earliest timer.
//!
//! `schedule_fiber` on a worker puts the fiber in that worker's next slot
//! (tokio's LIFO slot: a woken or new fiber runs next, while its data is in
//! cache; at most 3 in a row, then the queue runs); the fiber the slot held
//! goes to the back of the local queue, and a sleeping worker is woken if
//! nobody searches. From any other thread it pushes to the global queue and
//! wakes a worker. `reschedule_fiber` (cede,
//! auto-yield) pushes to the back of the local queue and wakes nobody: with
//! an empty queue the same worker runs the fiber again at once (Cats
//! Effect's cede bypass), otherwise it runs after the fibers that waited.
//!
//! ## Parking
//!
//! One atomic word counts searching and awake workers. At most half the
//! workers search at once; whoever makes work visible wakes a sleeper only
//! if nobody searches; the last searcher to find work wakes another; the
//! last searcher to give up checks every queue again after registering as
//! asleep. Producers fence (`SeqCst`) between their push and their read of
//! the counters, parkers between their update of the counters and their
//! last look at the queues, so one of the two always sees the other (loom
//! models of this protocol run in CI).
//!
//! ## Timers and blocking work
//!
//! Timers live in per-worker heaps: set by the fiber on the worker that runs
//! it, fired by that worker, cancelled in O(1) from any worker (stale heap
//! entries are cleaned in amortized O(1)). `IO::blocking` runs on a separate
//! pool of blocking threads (tokio's `spawn_blocking` design rather than
//! Cats Effect's worker hand-off: a worker's queue, timers and parking slot
//! are tied to its thread), so compute workers never stall.
//!
//! # Invariants
//!
//! * A fiber is in at most one queue, and runs on one thread at a time
//!   (io-core's `Fiber` handle is unique; queues move it).
//! * Fibers scheduled on a worker go to its local queue; fibers scheduled
//!   from any other thread go to the global queue and wake a worker.
//! * An idle worker sleeps (no spinning), for at most the time to its
//!   earliest timer.
//! * After [`Runtime::shutdown`] (or drop), every worker and blocking
//!   thread has stopped (or, with a timeout, is told to stop and is
//!   detached), and every fiber still queued or sleeping has been dropped.

#![deny(missing_docs)]

// Under `--cfg loom` only the scheduling protocol (`idle`, through the
// `sync` shim) is built: it is what the loom models check, and the rest
// needs io-core's std-only fiber listing.
#[cfg(not(loom))]
pub mod app;
#[cfg(not(loom))]
mod blocking;
mod idle;
#[cfg(not(loom))]
mod metrics;
#[cfg(not(loom))]
mod runtime;
mod sync;
#[cfg(not(loom))]
mod timer;
#[cfg(not(loom))]
mod worker;

#[cfg(not(loom))]
pub use crate::metrics::{FiberInfo, Metrics, WorkerMetrics};
#[cfg(not(loom))]
pub use crate::runtime::*;
#[cfg(not(loom))]
pub use crate::timer::TimerKey;
#[cfg(not(loom))]
pub use spindle_core::FiberStatus;
