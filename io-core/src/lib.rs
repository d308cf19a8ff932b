//! # spindle-core: Spindle's effect type, no_std
//!
//! An [`IO<A, E>`](IO) is a *description* of a computation that produces an
//! `A` or fails with an error of your own type `E`; building one runs
//! nothing. A fiber runs it when you hand it to an executor, and fibers are
//! cheap: start thousands, race them, cancel them, and every finalizer runs
//! exactly once. This is Cats Effect's model (3.6's semantics), in Rust.
//!
//! ```
//! use spindle_core::{IO, Outcome};
//! use spindle_exec_single::SingleThreaded;
//!
//! let program: IO<u64, String> = IO::delay(|| 6)
//!     .flat_map(|x| if x > 5 { IO::pure(x * 7) } else { IO::raise_error("small".into()) })
//!     .handle_error(|_| 0);
//! assert_eq!(SingleThreaded::new()?.block_on(program)?, Outcome::Succeeded(42));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What you use, by task:
//!
//! * **Build programs**: [`IO::pure`], [`IO::delay`], [`IO::from_callback`]
//!   (resume from another thread or an interrupt), [`IO::blocking`];
//!   sequence with [`IO::flat_map`], [`IO::map`], [`IO::product_r`].
//! * **Errors** are values: [`IO::raise_error`], [`IO::handle_error_with`],
//!   [`IO::attempt`], [`IO::map_err`]; a panic in your code ends only its
//!   fiber, as [`Outcome::Panicked`] (with `std`).
//! * **Fibers and cancellation**: [`IO::start`] gives a [`FiberHandle`]
//!   (join it, cancel it); [`IO::uncancelable`], [`IO::on_cancel`],
//!   [`IO::guarantee`], [`IO::bracket`], [`Resource`].
//! * **Concurrency and time**: [`IO::race`], [`IO::race_all`], [`IO::both`],
//!   [`IO::par_traverse`], [`IO::par_sequence_n`], [`IO::timeout`],
//!   [`IO::sleep`], [`IO::cede`]; [`IO::cancelable`] (cancel a program
//!   that ignores cancellation by telling it to stop); [`IO::memoize`].
//! * **Scopes for fibers**: [`Supervisor`] (children canceled, or awaited,
//!   when the scope ends) and [`JoinSet`] (children's outcomes in order of
//!   completion), both [`Resource`]s; [`Resource::par_zip`].
//! * **Shared state**: [`Ref`], [`Deferred`], [`Semaphore`], [`Queue`],
//!   [`Mutex`], [`CountDownLatch`], [`CyclicBarrier`], [`AtomicCell`]
//!   (updates that run effects), [`MapRef`] (a cell per key), [`Signal`]
//!   (a value an interrupt handler hands to a waiting fiber, in a `static`).
//! * **Retry and repetition**: [`Schedule`] (fixed, exponential backoff,
//!   cap, [`Jitter`], limit), [`IO::retry`], [`IO::retry_if`],
//!   [`IO::repeat`], [`FixedRate`] (runs on a grid without drift).
//! * **Services**: [`Clock`], [`Random`] (seeded SplitMix64), and with
//!   `std` [`Console`].
//! * **Futures**: [`IO::from_future`] and [`IO::from_try_future`] (and
//!   their lazy `_with` forms) await a `Future` on a fiber; a
//!   [`FiberHandle`] can be `.await`ed ([`JoinFuture`]), and
//!   [`IO::into_future_on`] runs a program as a future on any executor
//!   (module [`future`]).
//! * **Tracing**: [`IO::trace`], traces of failed fibers, fiber dumps
//!   ([`FiberDump`]), [`TracingMode`].
//!
//! Run programs with an executor: `spindle-exec-single` (one thread, also
//! without `std`), `spindle-exec-wstp` (the work-stealing pool and
//! `app::run`), `spindle-exec-batching` (an event loop), `spindle-exec-tokio`
//! (fibers as tokio tasks), or all of them through the entry crate
//! `spindle-effect`; `spindle-app` is the application entry point of every
//! std executor. This crate is `#![no_std]`
//! with `alloc`; the `std` feature (on by default) contains panics in user
//! code to their own fiber and reads `SPINDLE_TRACING`.
//!
//! ## Map of the crate (for maintainers)
//!
//! * [`IO`]: constructors and combinators (`io.rs`).
//! * The run-loop and the suspension protocol (`fiber/`): a fiber interprets
//!   one untyped node enum with an explicit continuation stack, so binds and
//!   error handlers of any depth run in constant native stack.
//! * [`executor`]: the [`Executor`] trait and its contract, and the [`Fiber`]
//!   handles executors run; [`executor::support`] is for executor authors
//!   (the main-fiber slot, the fiber registry, [`RunError`], timers).
//! * [`Outcome`], [`FiberConfig`] (auto-yield), [`Callback`].
//! * Fibers and cancellation (`cancel.rs`): [`IO::start`] and
//!   [`FiberHandle`], [`IO::uncancelable`] and [`Poll`], [`IO::on_cancel`],
//!   [`IO::guarantee_case`], the bracket family.
//! * Concurrency and time (`concurrent.rs`): races, `both`, parallel
//!   traversals, timeouts.
//! * More combinators: `many.rs` (`race_all`, `par_sequence_n`),
//!   `cancelable.rs`, `memoize.rs`; fiber scopes (`supervisor.rs`).
//! * [`future`]: futures as steps of an `IO` (the waker and its wake
//!   cell), and fibers as futures ([`JoinFuture`]).
//! * Data types (`data/`): [`Ref`], [`Deferred`], [`Semaphore`], [`Queue`], [`Mutex`],
//!   [`CountDownLatch`], [`CyclicBarrier`], [`AtomicCell`], [`MapRef`], [`Resource`],
//!   [`Signal`].
//! * Schedules, retry, repeat and fixed rates (`retry.rs`); the services
//!   [`Clock`] (`clock.rs`), [`Random`] (`random.rs`), [`Console`]
//!   (`console.rs`, `std`).
//!
//! Design credits: the run-loop follows the shape of Cats Effect's `IOFiber`
//! (continuation stack, error frames skipped on success, auto-yield); the
//! executor split between `schedule_fiber` and `reschedule_fiber` follows
//! Cats Effect's batching executor discussion. No code is copied.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod cancel;
mod cancelable;
mod clock;
mod concurrent;
mod config;
#[cfg(feature = "std")]
mod console;
mod data;
mod erased;
pub mod executor;
mod fiber;
pub mod future;
mod io;
mod many;
mod memoize;
mod node;
mod outcome;
mod pool;
mod random;
pub mod raw;
mod retry;
mod supervisor;
mod sync;
/// The timer heap, under its old crate path (crate-visible only; executors
/// reach it through [`executor::support`]).
#[allow(unused_imports)]
pub(crate) use executor::timers;
mod tracing;

pub use cancel::Poll;
pub use clock::Clock;
pub use concurrent::{BothOutcome, Either, RaceOutcome, RacePair, TimeoutError};
pub use config::{ConfigError, DEFAULT_AUTO_YIELD_AFTER, FiberConfig, FiberConfigBuilder};
#[cfg(feature = "std")]
pub use console::Console;
pub use data::atomic_cell::AtomicCell;
pub use data::barrier::{CyclicBarrier, InvalidParties};
pub use data::deferred::{AlreadyCompleted, Deferred};
pub use data::latch::{CountDownLatch, InvalidCount};
pub use data::map_ref::{KeyRef, MapRef};
pub use data::mutex::Mutex;
pub use data::queue::{InvalidCapacity, Queue, QueueClosed};
pub use data::reference::Ref;
pub use data::resource::{Allocated, ExitCase, Resource};
pub use data::semaphore::{InvalidPermits, PermitOverflow, Semaphore};
pub use data::signal::Signal;
pub use executor::support::RunError;
pub use executor::{BlockingTask, Executor, Fiber, TimerCallback};
pub use fiber::Callback;
pub use fiber::handle::{CancelHandle, FiberHandle};
#[cfg(not(loom))]
pub use fiber::{FiberDump, FiberInfo, FiberStatus};
pub use fiber::{FiberId, FiberState};
pub use future::JoinFuture;
pub use io::{IO, UIO};
pub use memoize::Memoized;
pub use outcome::{Outcome, PanicMessage};
pub use random::{EmptyRange, Random};
pub use retry::{Delays, FixedRate, InvalidSchedule, Jitter, Schedule, Tick};
pub use spindle_trace::Event as TraceEvent;
pub use supervisor::{JoinSet, Supervisor, SupervisorClosed};
pub use tracing::{Trace, Traced, TracingMode};
