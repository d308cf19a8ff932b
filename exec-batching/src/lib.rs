//! # exec-batching: an event-loop executor with microtask batching
//!
//! An executor for network services on one thread: an application has it
//! as `spindle_effect::batching::EventLoop` (the entry crate's feature
//! `batching`). One thread runs an event loop: timers, non-blocking
//! sockets on a poller (spindle-net's mio reactor: epoll, kqueue), and
//! every fiber. Fibers that are started or resumed run as *microtasks*, in
//! a bounded batch within the current turn; fibers that cede go through
//! the *macrotask* queue, so a cede really lets timers and I/O run. This is Cats Effect's
//! `BatchingMacrotaskExecutor` (designed for Scala.js by Arman Bilge and
//! Daniel Spiewak) on the event-loop model of Node.js and the browsers,
//! written anew for Spindle's [`Executor`](spindle_core::Executor) trait; no code
//! is copied.
//!
//! ```
//! use std::time::Duration;
//!
//! use spindle_effect::batching::EventLoop;
//! use spindle_effect::prelude::*;
//!
//! let rt = EventLoop::new()?;
//! let children = (0..10u64).map(|i| IO::<u64, ()>::delay(move || i * i)).collect::<Vec<_>>();
//! let program = IO::sleep(Duration::from_millis(1))
//!     .product_r(IO::par_sequence(children))
//!     .map(|squares| squares.iter().sum::<u64>());
//! assert_eq!(rt.block_on(program)?, Outcome::Succeeded(285));
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
//! [`EventLoop`] (whose `block_on` runs the loop on the calling thread, and
//! whose `shutdown` frees everything at once, as dropping it does: always
//! `Ok`), [`EventLoop::new`], [`EventLoop::builder`], and this executor's
//! own setters: [`max_blocking_threads`](Builder::max_blocking_threads)
//! and [`blocking_keep_alive`](Builder::blocking_keep_alive) (as
//! exec-wstp's), [`batch_size`](Builder::batch_size) and
//! [`mode`](Builder::mode); [`Handle`] (an `Executor`, with
//! [`Handle::current`], [`Handle::mode`] and [`Handle::batch_size`]),
//! [`Metrics`] and [`BuildError`].
//!
//! [`RunError`], [`ShutdownTimedOut`] and [`FiberInfo`] are io-core's,
//! re-exported: one type for every executor. `EventLoop` is `Send` but not `Sync`: one thread at a
//! time runs it, and fibers hold [`Handle`]s, never the loop.
//!
//! # The turn
//!
//! `block_on` runs turns until the main fiber ends. A turn has
//! a *microtask batch* of at most `batch_size` fiber runs (default 64),
//! spent at *microtask checkpoints*: a checkpoint runs fibers from the
//! microtask queue, in order, until the queue is empty or the batch is
//! spent; fibers started or resumed meanwhile join the queue and run in
//! the same checkpoint. Each turn, in this order:
//!
//! 1. **Timers**: fires every timer whose deadline has passed (deadline
//!    order, ties in the order they were set); their fibers join the
//!    microtask queue. Then a **checkpoint**: a fiber a timer woke runs
//!    before any macrotask.
//! 2. **I/O**: asks the poller which sockets are ready and resumes the
//!    fibers waiting for them; takes in fibers scheduled from other
//!    threads. If any fiber is queued the poller is only *looked at*
//!    (timeout 0, and skipped when no fiber waits for I/O); otherwise the
//!    thread *waits* in the poller until the next timer's deadline, a
//!    socket is ready, or another thread wakes it (`Poller::notify`). Then
//!    a **checkpoint**.
//! 3. **Macrotasks**: runs the fibers that were in the macrotask queue
//!    when the turn ran its first fiber, in order, with a **checkpoint**
//!    after each one: a fiber a macrotask starts or resumes runs before the
//!    next macrotask. A fiber that cedes during the turn waits for the next
//!    turn.
//!
//! Microtasks the batch had no room for stay queued and run at the next
//! turn's first checkpoint, after its timers.
//!
//! This is the order of JavaScript's event loop, where the microtask queue
//! (promise callbacks) is drained after every macrotask (a timer callback,
//! an I/O callback, a `setImmediate` callback) before the next one runs;
//! and of Cats Effect's `BatchingMacrotaskExecutor`, which runs its batch
//! of fibers as a JavaScript microtask and sends a batch that overflowed to
//! the macrotask queue. So a fiber a due timer woke runs before a fiber
//! that ceded, even if the cede came first; and a fiber that cedes once
//! gives way to everything that became ready meanwhile.
//!
//! # Microtasks and macrotasks
//!
//! | call | made on | queue (`Mode::Batching`) | queue (`Mode::Macrotask`) |
//! |---|---|---|---|
//! | `schedule_fiber` | start, `race`/`both` children, resumption after `from_callback`, a timer, I/O, a cancel with finalizers | microtask batch | macrotask queue |
//! | `reschedule_fiber` | `IO::cede`, auto-yield | macrotask queue | macrotask queue |
//!
//! Microtask semantics means a fiber started from an I/O callback (a
//! connection handler started by the fiber that accepted) runs within the
//! same turn, at the next checkpoint, instead of after a whole round of
//! timers and I/O: in Cats
//! Effect's measurements a single-connection HTTP server served 60% more
//! requests per second, and fairness under many connections was unchanged,
//! because reacting to an event usually starts or resumes a few short
//! fibers. Ceding stays a macrotask, so a fiber that cedes (or is made to
//! by auto-yield) really lets timers and I/O in.
//!
//! [`Mode::Macrotask`] is the baseline without batching, like Cats Effect's
//! plain `MacrotaskExecutor` (Node's `setImmediate`): every started or
//! resumed fiber waits for the macrotask step (the checkpoints find the
//! microtask queue empty); one started by a running fiber therefore waits a
//! full turn.
//!
//! ## The bound and its invariants
//!
//! * A turn runs at most `batch_size` microtasks, over all of its
//!   checkpoints, however many fibers are started or resumed meanwhile; so
//!   the time between two looks at timers and I/O is bounded by
//!   `batch_size` fiber runs plus the macrotasks queued when the turn ran
//!   its first fiber, each fiber run itself bounded by the fiber's
//!   auto-yield budget ([`FiberConfig`](spindle_core::FiberConfig)). A
//!   loop of fibers that start fibers cannot starve timers or I/O.
//! * Macrotasks queued during a turn run in a later turn, never the same:
//!   a cede always passes through timers and I/O.
//! * While the batch lasts, no macrotask runs while a microtask is queued:
//!   every fiber run is followed by a checkpoint (microtasks run before the
//!   next macrotask).
//! * Within each queue, fibers run in FIFO order; a fiber is in at most one
//!   queue and runs on the loop thread only (io-core's `Fiber` handle is
//!   unique; queues move it).
//! * `batch_size` is at least 1 ([`BuildError::ZeroBatchSize`]).
//!
//! # Threads
//!
//! Every fiber runs on the thread that calls `block_on`. [`Handle`] is
//! `Send + Sync`: a callback completed on another thread (a blocking call,
//! a test thread) schedules its fiber into a locked *remote* queue and
//! wakes the loop through its reactor (`Reactor::notify`: a system call
//! only when the loop sleeps in its poller).
//!
//! # Blocking work
//!
//! `IO::blocking` never runs on the loop thread: the loop hands it to a
//! bounded pool of blocking threads (io-core's
//! `executor::support::BlockingPool`, the same pool as exec-wstp's), so
//! that it keeps serving timers, I/O and other fibers; the thunk's value
//! or error resumes the fiber on the loop through the remote queue.
//!
//! * At most [`Builder::max_blocking_threads`] thunks run at once (default
//!   [`DEFAULT_MAX_BLOCKING_THREADS`]); further calls wait in a FIFO queue.
//!   Threads start on demand and exit after [`Builder::blocking_keep_alive`]
//!   idle (default [`DEFAULT_BLOCKING_KEEP_ALIVE`]).
//! * `max_blocking_threads(0)` is refused by `build` with
//!   [`BuildError::ZeroBlockingThreads`].
//! * If the operating system refuses to start a thread, the call is not
//!   run on the loop thread and not lost: it waits in the queue for a
//!   running blocking thread, or, if none runs, for the next call that
//!   manages to start one (as on exec-wstp; [`Metrics::blocking_queue_len`]
//!   shows it waiting).
//! * Dropping the loop stops the pool: idle threads exit, busy ones after
//!   their current call, queued calls are dropped with their fibers.
//!
//! # I/O
//!
//! [`net`] (spindle-net, re-exported) has TCP listeners and streams, UDP
//! sockets, Unix domain listeners and streams and a buffered line reader,
//! whose operations are `IO<_, std::io::Error>` values: non-blocking calls
//! first, then a wait for readiness that a cancellation undoes. The loop
//! provides spindle-net's I/O capability with a mio reactor of its own: a
//! socket made by one of its fibers registers there (the loop runs its
//! fibers inside `spindle_net::driver::with_driver`), and the loop looks at
//! the poller once per turn, or sleeps in it when it has nothing to run. A
//! wait on one of its sockets while the loop is not running (between two
//! `block_on`s) fails with an error instead of hanging. See
//! `spindle_net::driver` for the protocol.
//!
//! # Observability
//!
//! `metrics` ([`Metrics`]) counts turns, batches, fibers run from each queue,
//! live fibers, timers and sockets (always on, a few relaxed atomics).
//! While fibers trace (io-core's `tracing` feature and a tracing mode other
//! than `none`), or with the builder's `track_fibers`, the loop lists every
//! live fiber that has waited or yielded once (io-core's `fiber_listed`
//! hook; a fiber still in its first run is not listed) with weak fiber
//! references, without wrapping fibers: `fiber_dump` on the loop (or
//! [`Executor::fiber_dump`](spindle_core::Executor::fiber_dump) on a [`Handle`],
//! from any thread) gives each fiber's state and trace with the loop's
//! queue lengths, timers and I/O waiters, and `live_fibers` their ids and
//! statuses. With tracing off and no tracking, nothing is
//! kept per fiber.
//!
//! The fiber configuration comes from the builder's `fiber_config`, or is
//! the default; `from_env` takes it from
//! [`FiberConfig::from_env`](spindle_core::FiberConfig::from_env) (the tracing
//! mode named by `SPINDLE_TRACING`); an invalid one is
//! [`BuildError::Config`].
//!
//! # Deadlocks
//!
//! `try_block_on` returns [`RunError::Deadlock`] when the main fiber has
//! been freed without finishing and no fiber, timer, I/O interest or
//! wake-up from another thread remains, as exec-single does.

//!
//! # Layout
//!
//! `builder.rs` ([`Builder`], [`Mode`]), `error.rs` ([`BuildError`],
//! [`RunError`]), `handle.rs` ([`Handle`], the shared state and the
//! `Executor` implementation), `event_loop.rs` ([`EventLoop`] and its turn),
//! `metrics.rs` ([`Metrics`]), `sync.rs`
//! (the sync shim). What every executor shares (the main-fiber slot, the
//! remote queue, the fiber registry, the timer heap, the blocking pool) is
//! io-core's `executor::support`.
//!
//! # Loom builds
//!
//! This crate has no loom models of its own (its one thread owns every
//! queue; the cross-thread parts are a mutex and the poller's notify).
//! Under `--cfg loom` (io-core's model checks build their dev-dependencies
//! with it) it is the same crate with the same API, on io-core's loom
//! build: no variant of its own, so that its tests build there too.

#![deny(missing_docs)]

mod builder;
mod error;
mod event_loop;
mod handle;
mod metrics;
mod sync;

/// The sockets: spindle-net, re-exported (every std executor runs them;
/// this loop polls their readiness once per turn).
pub use spindle_net as net;

pub use crate::builder::{
    Builder, DEFAULT_BATCH_SIZE, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS, Mode,
};
pub use crate::error::{BuildError, RunError, ShutdownTimedOut};
pub use crate::event_loop::EventLoop;
pub use crate::handle::Handle;
pub use crate::metrics::Metrics;
/// Identifies a timer set on an [`EventLoop`], to cancel it (io-core's
/// timer heap: O(1) cancellation, ties fire in the order they were set).
pub type TimerKey = spindle_core::executor::support::TimerId;
pub use spindle_core::{FiberInfo, FiberStatus};
