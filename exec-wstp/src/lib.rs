//! # exec-wstp: a work-stealing executor for Spindle fibers
//!
//! The default executor, for applications and servers: an application has
//! it as `spindle_effect::wstp::Runtime` (the entry crate's feature `wstp`,
//! on by default), and `spindle_effect::app::run(Runtime::from_env(), main)`
//! runs a main `IO` on it as a process. N worker threads run fibers; each
//! has a local FIFO queue (crossbeam-deque) that idle workers steal from,
//! and fibers scheduled from outside the pool go to a global injector
//! queue. The pool polls one I/O poller, in which an idle worker sleeps, so
//! [`net`]'s sockets run on the pool.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::builder().worker_threads(2).build()?;
//! let work = (0..100u64).map(|i| IO::<u64, ()>::delay(move || i * i)).collect::<Vec<_>>();
//! let sum = IO::par_sequence(work).map(|squares| squares.iter().sum::<u64>());
//! assert_eq!(rt.block_on(sum)?, Outcome::Succeeded(328_350));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The public surface
//!
//! Every Spindle executor has the same surface: io-core's
//! [`IORuntime`](spindle_core::IORuntime) (its documentation has the
//! table: `block_on`, `try_block_on`, `spawn`, `handle`, `metrics`,
//! `fiber_dump`, `from_env`, `shutdown`; import the trait) and
//! [`RuntimeBuilder`](spindle_core::RuntimeBuilder) (the builder setters
//! `fiber_config`, `fiber_config_from_env`, `track_fibers`). Here:
//! [`Runtime`] (whose `block_on` parks the calling thread while the pool
//! runs the program, and whose `shutdown(timeout)` waits for the worker
//! and blocking threads and reports those still running),
//! [`Runtime::new`], [`Runtime::builder`], and this executor's own setters
//! [`worker_threads`](Builder::worker_threads),
//! [`global_queue_interval`](Builder::global_queue_interval),
//! [`max_blocking_threads`](Builder::max_blocking_threads),
//! [`blocking_keep_alive`](Builder::blocking_keep_alive) and
//! [`thread_name`](Builder::thread_name); [`Handle`] (an `Executor`, and io-core's
//! `ParkedBlockOn`: `block_on` and `try_block_on` for other threads; with
//! [`Handle::worker_threads`]), [`Metrics`] and [`BuildError`].
//!
//! [`RunError`], [`ShutdownTimedOut`] and [`FiberInfo`] are io-core's,
//! re-exported: one type for every executor. Layout: `builder.rs`, `error.rs`, `handle.rs` (the
//! shared state and the `Executor` implementation), `runtime.rs` (the pool
//! and its shutdown), `worker.rs` (the loop), `idle.rs` (who sleeps and
//! who wakes whom), `park.rs` (where a worker sleeps: the poller),
//! `timer.rs`, `metrics.rs`, `sync.rs` (the sync shim).
//! What every executor shares (the main-fiber slot, the fiber registry,
//! the timer heap, the clocks, the blocking pool) is io-core's
//! `executor::support`.
//!
//! # Design
//!
//! The anchors are tokio's multi-thread scheduler and Cats Effect's
//! `WorkStealingThreadPool` (itself modelled on tokio's); this crate is our
//! own implementation of their shared design. The source modules document
//! each part in full: `worker` (the loop), `idle` (parking, with the
//! argument why no wake-up is lost), `timer`, `metrics`; the blocking pool
//! is io-core's `executor::support::BlockingPool`.
//!
//! ## The worker loop
//!
//! Each turn a worker takes its next fiber: every `global_queue_interval`
//! ticks (default 61) it fires due timers and looks at the global queue
//! first, so fibers scheduled from outside are never starved by local work;
//! otherwise its *next* slot, then its local queue, then a batch from the
//! global queue. Out
//! of work, it fires due timers, looks at the pool's I/O poller, then, as a
//! *searcher*, steals half of another worker's queue (random victim) or
//! takes from the global queue; still nothing, it parks (in the poller if
//! no other worker sleeps there) until woken, until a socket is ready, or
//! until its earliest timer. A searcher leaves the fibers it finds in a
//! busy worker's queue to their owner for 3 µs before it takes them (Go's
//! scheduler's back-off), so the children of a `both` or a `race` stay on
//! the worker of their parent unless that worker is kept busy, and it
//! keeps searching for 50 µs after it last saw work before it parks, so a
//! stream of such operations costs no wake-up each. Kept busy means
//! behind in two back-offs in a row: turns of 1 µs or more on average, or
//! more queued than the owner runs in 3 µs. A shorter queue of short
//! turns stays with its owner: fibers that cede after a few hundred
//! nanoseconds each (the workers of a stream's `par_eval_map`) refill a
//! queue as fast as it empties, and ran slower on two cores than on one.
//!
//! ## I/O
//!
//! The pool has one mio poller (spindle-net's reactor) for every socket its
//! fibers make. An idle worker that finds it free sleeps in it; the other
//! idle workers sleep on condition variables, and a worker that lets go of
//! the poller to run a fiber wakes one of them to take it over (tokio's
//! driver is taken by whichever worker parks first in the same way; the
//! hand-off is ours): no idle worker sleeps while readiness waits for a
//! busy one. Busy workers look at the poller every `global_queue_interval`
//! ticks (only while a fiber waits for I/O, and only if no other worker
//! holds it) and when they run out of work. A fiber resumed by readiness
//! runs next on the worker that polled (locality). Wake-ups from other
//! threads go through the poller's waker or the worker's condition
//! variable, whichever it sleeps on; the poller's costs a system call only
//! when a worker really sleeps in it.
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
//! last look at the queues, so one of the two always sees the other. A
//! worker sleeps in the pool's poller or on its condition variable; its
//! parking state keeps a wake-up that comes before the sleep (loom models
//! of this protocol, readiness and the poller's hand-off included, run in
//! CI).
//!
//! ## Timers and blocking work
//!
//! Timers live in per-worker heaps: set by the fiber on the worker that runs
//! it, fired by that worker, cancelled in O(1) from any worker (stale heap
//! entries are cleaned in amortized O(1)). `IO::blocking` runs on a separate
//! pool of blocking threads (tokio's `spawn_blocking` design rather than
//! Cats Effect's worker hand-off: a worker's queue, timers and parking slot
//! are tied to its thread), so compute workers never stall. The pool is
//! io-core's `executor::support::BlockingPool`, shared with exec-batching:
//! at most `max_blocking_threads` threads, each exiting after
//! `blocking_keep_alive` idle, calls beyond the bound queued; a call the
//! operating system refuses a thread for waits for a running blocking
//! thread (or the next call that starts one).
//!
//! # Invariants
//!
//! * A fiber is in at most one queue, and runs on one thread at a time
//!   (io-core's `Fiber` handle is unique; queues move it).
//! * Fibers scheduled on a worker go to its local queue; fibers scheduled
//!   from any other thread go to the global queue and wake a worker.
//! * An idle worker sleeps (no spinning), for at most the time to its
//!   earliest timer (rounded up to the millisecond, as mio's and tokio's
//!   timeouts are).
//! * After `shutdown` (or drop), every worker and blocking
//!   thread has stopped (or, with a timeout, is told to stop and is
//!   detached), and every fiber still queued, sleeping or waiting for I/O
//!   has been dropped; a later wait on a socket of the pool fails.

#![deny(missing_docs)]

// The whole crate builds under `--cfg loom` too, with the same API (the
// `sync` shim takes loom's types there; the blocking pool keeps io-core's
// `std` locks): what the loom models check is the scheduling protocol,
// `idle`, and the rest compiles against the same io-core.
mod builder;
mod error;
mod handle;
mod idle;
mod metrics;
mod park;
mod runtime;
mod sync;
mod timer;
mod worker;

pub use crate::builder::{
    Builder, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_GLOBAL_QUEUE_INTERVAL,
    DEFAULT_MAX_BLOCKING_THREADS,
};
pub use crate::error::{BuildError, RunError, ShutdownTimedOut};
pub use crate::handle::Handle;
pub use crate::metrics::{Metrics, WorkerMetrics};
pub use crate::runtime::Runtime;
pub use crate::timer::TimerKey;

pub use spindle_core::{FiberInfo, FiberStatus};
/// The sockets: spindle-net, re-exported (each worker polls their
/// readiness; see the crate documentation, "I/O").
pub use spindle_net as net;
