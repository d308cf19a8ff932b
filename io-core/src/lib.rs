//! # spindle-core: Spindle's effect type, no_std
//!
//! An [`IO<A, E>`](IO) is a *description* of a computation that produces an
//! `A` or fails with an error of your own type `E`; building one runs
//! nothing. A fiber runs it when you hand it to an executor, and fibers are
//! cheap: start thousands, race them, cancel them, and every finalizer runs
//! exactly once. This is Cats Effect's model (3.6's semantics), in Rust.
//!
//! An application uses this crate through the entry crate,
//! `spindle-effect`, which re-exports what applications need and adds the
//! executors; the examples are written with its names
//! (`spindle_effect::IO`, `spindle_effect::wstp::Runtime`, ...).
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let program: IO<u64, String> = IO::delay(|| 6)
//!     .flat_map(|x| if x > 5 { IO::pure(x * 7) } else { IO::raise_error("small".into()) })
//!     .handle_error(|_| 0);
//! assert_eq!(Runtime::new()?.block_on(program)?, Outcome::Succeeded(42));
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
//!   fiber, as [`Outcome::Panicked`] (with `std`). An [`Outcome`] becomes a
//!   `Result` with [`Outcome::into_result`] (its `Err` an
//!   [`error::Failure`]), for `?`.
//! * **Fibers and cancellation**: [`IO::start`] gives a [`FiberHandle`]
//!   (join it, cancel it); [`IO::uncancelable`], [`IO::on_cancel`],
//!   [`IO::guarantee`], [`IO::bracket`], [`Resource`].
//! * **Concurrency and time**: [`IO::race`], [`IO::race_all`], [`IO::both`],
//!   [`IO::par_traverse`], [`IO::par_sequence_n`], [`IO::timeout`],
//!   [`IO::timeout_option`], [`sleep()`], [`cede()`], [`never()`] (free
//!   functions, generic in their error type: they fit any program);
//!   [`IO::cancelable`] (cancel a program that ignores cancellation by
//!   telling it to stop); [`IO::memoize`]; in IO blocks, [`select!`]
//!   (the winner's branch of a race of programs of different types).
//! * **Ownership**: a closure that builds a program gets owned values, so
//!   the `'static` program it builds may keep them: [`Resource::use_with`]
//!   hands a clone of the value, [`IO::guarantee_case`] a clone of the
//!   outcome; their `_ref` forms ([`Resource::use_ref`],
//!   [`IO::guarantee_case_ref`]) lend them, for values that are not
//!   `Clone`.
//! * **Scopes for fibers**: [`Supervisor`] (children canceled, or awaited,
//!   when the scope ends) and [`JoinSet`] (children's outcomes in order of
//!   completion), both [`Resource`]s; [`Resource::par_zip`].
//! * **Foreign code**: [`Dispatcher`] runs programs from threads and
//!   callbacks that are not fibers (run and forget, to a future, blocking).
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
//! without `std`), `spindle-exec-wstp` (the work-stealing pool),
//! `spindle-exec-batching` (an event loop), `spindle-exec-tokio` (fibers as
//! tokio tasks), or all of them through the entry crate `spindle-effect`.
//! Each implements [`IORuntime`], the one shape of every executor
//! (`block_on`, `spawn`, `metrics`, `fiber_dump`, `from_env`, `shutdown`:
//! import the trait to call them); `spindle-app` is the application entry
//! point of every std executor. This crate is `#![no_std]`
//! with `alloc`; the `std` feature (on by default) contains panics in user
//! code to their own fiber and reads `SPINDLE_TRACING`.
//!
//! ## Map of the crate (for maintainers)
//!
//! The folders are the layers, each using only the ones above it in this
//! list (the repository's `ARCHITECTURE.md` has the whole picture):
//!
//! * `engine/`: what the run-loop interprets: nodes and frames (two
//!   words, tagged), erased values and closures, the block allocator,
//!   fiber tracing. Knows no user type.
//! * `fiber/`: a fiber (one allocation), its state word and suspension
//!   protocol, the run-loop (`run_loop.rs`), join state, handles, dumps.
//! * `wait/`: the waiter list and the join cell every wait goes through
//!   (a fiber's join, `Deferred`, `Queue`, `Semaphore`, ...).
//! * [`executor`]: the [`Executor`] trait (what a fiber needs of the
//!   executor that runs it) and its contract, [`IORuntime`] and
//!   [`RuntimeBuilder`] (what an application needs of one), and
//!   [`executor::support`] for executor authors (the main-fiber slot, the
//!   fiber registry, timers).
//! * `io.rs`, `combinators/`: the typed API that builds nodes: [`IO`] and
//!   its basic combinators; `MonadCancel` and `start`, races, `both`,
//!   parallel traversals, timeouts, `cancelable`, `memoize`.
//! * [`future`]: futures as steps of an `IO`, and fibers as futures.
//! * `stdlib/`: the standard library: data types, [`Resource`],
//!   [`Supervisor`], schedules and retries, [`Random`], [`Clock`],
//!   [`Console`].
//! * [`error`]: every error type; [`untraced`]: untraced constructors for
//!   crates that build operations of their own.
//! * `sync.rs`: the sync shim (loom in model checks), used by every layer.
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

mod combinators;
mod config;
mod engine;
pub mod error;
pub mod executor;
mod fiber;
pub mod future;
mod io;
#[cfg(feature = "observe")]
pub mod observe;
mod outcome;
mod stdlib;
mod sync;
pub mod untraced;
mod wait;

pub use combinators::local::IOLocal;
pub use combinators::memoize::Memoized;
pub use combinators::monad_cancel::Poll;
pub use combinators::par::BothOutcome;
pub use combinators::race::{Either, RaceOutcome, RacePair};
pub use config::{DEFAULT_AUTO_YIELD_AFTER, FiberConfig, FiberConfigBuilder};
pub use engine::tracing::{Trace, Traced, TracingMode};
pub use executor::{
    BlockingTask, Executor, Fiber, IORuntime, Ran, RuntimeBuilder, RuntimeCounters, TimerCallback,
    WorkerCounters,
};
pub use fiber::Callback;
pub use fiber::handle::{CancelHandle, FiberHandle};
pub use fiber::{FiberDump, FiberId, FiberInfo, FiberState, FiberStatus};
pub use future::JoinFuture;
pub use io::{IO, UIO};
pub use io::{cede, never, sleep};
pub use outcome::{Outcome, PanicMessage};
pub use spindle_trace::Event as TraceEvent;
pub use stdlib::clock::Clock;
#[cfg(feature = "std")]
pub use stdlib::console::Console;
pub use stdlib::data::atomic_cell::AtomicCell;
pub use stdlib::data::barrier::CyclicBarrier;
pub use stdlib::data::deferred::Deferred;
pub use stdlib::data::latch::CountDownLatch;
pub use stdlib::data::map_ref::{KeyRef, MapRef};
pub use stdlib::data::mutex::Mutex;
pub use stdlib::data::queue::Queue;
pub use stdlib::data::reference::Ref;
pub use stdlib::data::semaphore::Semaphore;
pub use stdlib::data::signal::Signal;
pub use stdlib::dispatcher::{DispatchCancel, DispatchFuture, Dispatcher, ForgottenFailure};
pub use stdlib::random::Random;
pub use stdlib::resource::{Allocated, ExitCase, Resource};
pub use stdlib::retry::{Delays, FixedRate, Jitter, Schedule, Tick};
pub use stdlib::supervisor::{JoinSet, Supervisor};

/// What the crate's macros expand to; not an API.
#[doc(hidden)]
pub mod __private {
    /// `select!`'s helpers.
    pub mod select {
        pub use crate::combinators::select::{branch, race};
    }
}
