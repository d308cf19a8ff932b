//! # exec-wstp: a work-stealing executor for Spindle fibers
//!
//! N worker threads run fibers; each has a local FIFO queue (crossbeam-deque)
//! that idle workers steal from, and fibers scheduled from outside the pool
//! go to a global injector queue. This is the default executor for
//! applications ([`app`] runs a main `IO` as a process).
//!
//! ```
//! use exec_wstp::Runtime;
//! use io_core::{IO, Outcome};
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
//! own implementation of their shared design:
//!
//! * [`worker`](crate::worker) (private): the worker loop, with its
//!   fairness rules (global queue every `global_queue_interval` ticks, cede
//!   to the back of the local queue) and stealing;
//! * `idle`: who searches, who sleeps, who wakes whom, with the argument
//!   why no wake-up is lost (model-checked with loom);
//! * `timer`: per-worker timer heaps, O(1) cancellation;
//! * `blocking`: the pool of threads behind `IO::blocking`, and why it is
//!   a separate pool.
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
pub use io_core::FiberStatus;
