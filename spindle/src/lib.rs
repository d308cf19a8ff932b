//! # Spindle: Cats Effect's model in Rust
//!
//! An [`IO`] value describes a computation with typed errors, cancellation
//! and resource safety; building one runs nothing. Lightweight fibers run
//! it on the executor you pick, from a microcontroller to a server, with
//! asynchronous stack traces ("fiber tracing") that cost almost nothing.
//!
//! This crate is the one dependency an application adds:
//!
//! ```toml
//! [dependencies]
//! spindle-effect = "0.1"                                   # the work-stealing pool and the entry point
//! # spindle-effect = { version = "0.1", default-features = false, features = ["single"] }  # no_std
//! ```
//!
//! A program is a value; an executor runs it to its [`Outcome`] with
//! `block_on` (a method of [`IORuntime`], which the prelude brings into
//! scope):
//!
//! ```
//! # #[cfg(feature = "wstp")] {
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::new()?;
//! let answer: IO<u32, String> = IO::delay(|| 21)
//!     .flat_map(|x| if x > 0 { IO::pure(x * 2) } else { IO::raise_error("no answer".into()) });
//! assert_eq!(rt.block_on(answer)?, Outcome::Succeeded(42));
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! An application runs its main program with the entry point, `app::run`
//! (feature `app`, on by default; Cats Effect's `IOApp`): the exit code comes from the program's outcome,
//! and Ctrl-C cancels it, running its finalizers.
//!
//! ```no_run
//! # #[cfg(all(feature = "wstp", feature = "app"))]
//! # fn main() -> std::process::ExitCode {
//! use std::time::Duration;
//!
//! use spindle_effect::prelude::*;
//! use spindle_effect::{app, wstp::Runtime};
//!
//! let program: IO<(), String> = IO::sleep(Duration::from_millis(10))
//!     .map_to(21)
//!     .map(|x| x * 2)
//!     .flat_map(|answer| IO::delay(move || println!("{answer}")));
//! app::run(Runtime::from_env(), program)
//! # }
//! # #[cfg(not(all(feature = "wstp", feature = "app")))]
//! # fn main() {}
//! ```
//!
//! # What an application uses
//!
//! * **Programs**: [`IO`] (and [`UIO`], a program that cannot fail), its
//!   [`Outcome`] (a panic's is a [`PanicMessage`]; `outcome.into_result()`
//!   gives a `Result` whose `Err` is an [`error::Failure`]); the error
//!   types of this crate's operations are in [`error`]. [`sleep()`],
//!   [`cede()`] and [`never()`] fit any program (generic in its error type).
//!   In IO blocks (`IO::block(async { .. })`), [`select!`] races programs
//!   of different types and runs the winner's branch.
//! * **Fibers**: `io.start()` gives a [`FiberHandle`] (join it, cancel
//!   it, `.await` it: [`JoinFuture`]); [`CancelHandle`], [`FiberId`];
//!   [`Callback`] (resume a fiber from another thread or an interrupt,
//!   `IO::from_callback`); [`Poll`] (unmask inside `IO::uncancelable`);
//!   [`Memoized`] (`io.memoize()`); [`IOLocal`], a value per fiber that
//!   children start with a copy of (request-scoped context). Races and
//!   pairs end in [`Either`],
//!   [`RaceOutcome`], [`RacePair`] and [`BothOutcome`]. Futures both ways:
//!   [`future`].
//! * **Shared state**: [`Ref`], [`Deferred`], [`Signal`], [`Semaphore`],
//!   [`Mutex`], [`Queue`], [`CountDownLatch`], [`CyclicBarrier`],
//!   [`AtomicCell`], [`MapRef`] and [`KeyRef`].
//! * **Resources and scopes**: [`Resource`] ([`Allocated`], [`ExitCase`]),
//!   [`Supervisor`], [`JoinSet`]; [`Dispatcher`] ([`DispatchFuture`],
//!   [`DispatchCancel`], [`ForgottenFailure`]) runs programs from threads
//!   and callbacks that are not fibers.
//! * **Retry and repetition**: [`Schedule`], [`Jitter`], [`Delays`],
//!   [`FixedRate`] and its [`Tick`].
//! * **Services**: [`Clock`], [`Random`], and with `std` `Console`.
//! * **Running programs**: an executor (the table below), each an
//!   [`IORuntime`] (`block_on`, `try_block_on`, `spawn`, `handle`,
//!   `metrics`, `fiber_dump`, `live_fibers`, `from_env`, `shutdown`; its
//!   documentation has the table), built by a [`RuntimeBuilder`] with a
//!   [`FiberConfig`] ([`FiberConfigBuilder`],
//!   [`DEFAULT_AUTO_YIELD_AFTER`]); the entry point `app::run`.
//! * **Tracing and dumps**: [`Trace`] (a [`TraceEvent`] per operation),
//!   [`Traced`] (an error with its trace), [`TracingMode`]; fiber dumps,
//!   [`FiberDump`] with a [`FiberInfo`] per fiber ([`FiberStatus`],
//!   [`FiberState`]).
//!
//! `use spindle_effect::prelude::*;` brings [`IO`], [`UIO`], [`Outcome`],
//! [`sleep()`], [`cede()`], [`never()`] and the methods of the traits every
//! executor, builder and handle shares.
//!
//! # Executors and features
//!
//! One cargo feature per executor; a program names no executor, and the
//! same `IO` value runs on each:
//!
//! | feature | module | executor | pick it for |
//! |---|---|---|---|
//! | `wstp` (default) | `wstp` | a work-stealing pool of worker threads, a poller per worker, a blocking pool | servers and applications: the default |
//! | `single` | `single` | one thread, deterministic, builds without `std`; `single::testkit` has virtual time | tests, embedded targets, programs that want one thread |
//! | `batching` | `batching` | an event loop with timers, non-blocking I/O and batched fiber wake-ups (Cats Effect's batching executor) | network services on one thread |
//! | `tokio` | `tokio` | fibers as tokio tasks, on the tokio runtime of your application or on one it owns; `tokio::time` timers (a paused test clock drives `IO::sleep`), tokio's blocking pool | programs that live inside a tokio application or await tokio libraries |
//! | `app` (default) | `app` | not an executor: the application entry point of every std executor, `app::run(X::from_env(), main)` (Cats Effect's `IOApp`; the `spindle-app` crate) | applications, on any executor |
//! | `full` | all four, and `app` | | |
//!
//! The same entry point on another executor (feature `single`):
//!
//! ```no_run
//! # #[cfg(all(feature = "single", feature = "app"))]
//! # fn main() -> std::process::ExitCode {
//! use spindle_effect::prelude::*;
//! use spindle_effect::{app, single::SingleThreaded};
//!
//! let program: IO<(), String> = IO::delay(|| println!("one thread"));
//! app::run(SingleThreaded::from_env(), program)
//! # }
//! # #[cfg(not(all(feature = "single", feature = "app")))]
//! # fn main() {}
//! ```
//!
//! With `wstp`, `batching` or `tokio`, the module `net` is the sockets
//! (the `spindle-net` crate): TCP with `into_split`, UDP, Unix domain
//! sockets and a buffered line reader, as `IO` values written once against
//! the I/O capability every std executor provides (exec-wstp polls
//! readiness on each worker, exec-batching and exec-single once per loop
//! turn, exec-tokio through tokio's driver). A server written with
//! `spindle_effect::net` and `IO` runs unchanged on each: the crate's
//! examples `hello_http` (an HTTP/1.1 server) and `line_echo` are one
//! program each, the executor a command-line flag
//! (`cargo run --features full --example hello_http -- --executor batching`).
//!
//! Features `std` (default: panics in user code end only their fiber),
//! `tracing` (default: fiber tracing compiled in) and `tracing-full`
//! (backtraces where operations are built) are forwarded to every crate.
//!
//! # For executor and library authors
//!
//! The contract between fibers and executors (the `Executor` trait and its
//! support module) and the untraced constructors for libraries that build
//! operations of their own are in [`integration`], apart from what
//! applications use.
//!
//! The crates behind this one can be used on their own: `spindle-core` (the
//! `no_std` core), `spindle-exec-single`, `spindle-exec-wstp`,
//! `spindle-exec-batching`, `spindle-exec-tokio`, `spindle-net` (the
//! sockets), `spindle-app` (the entry point), and `spindle-trace` (the
//! tracing data).

#![no_std]
#![deny(missing_docs)]

// Programs and their outcomes.
pub use spindle_core::{IO, Outcome, PanicMessage, UIO};

// The operations that cannot fail, generic in their error type (and
// `never` in its value type) as free functions; `select!` for IO blocks.
pub use spindle_core::{cede, never, select, sleep};

// Fibers: handles, callbacks, masking, memoization, races and pairs.
pub use spindle_core::{
    BothOutcome, Callback, CancelHandle, Either, FiberHandle, FiberId, IOLocal, JoinFuture,
    Memoized, Poll, RaceOutcome, RacePair,
};

// Shared state.
pub use spindle_core::{
    AtomicCell, CountDownLatch, CyclicBarrier, Deferred, KeyRef, MapRef, Mutex, Queue, Ref,
    Semaphore, Signal,
};

// Resources and scopes for fibers.
pub use spindle_core::{Allocated, ExitCase, JoinSet, Resource, Supervisor};
pub use spindle_core::{DispatchCancel, DispatchFuture, Dispatcher, ForgottenFailure};

// Retry and repetition.
pub use spindle_core::{Delays, FixedRate, Jitter, Schedule, Tick};

// Services.
#[cfg(feature = "std")]
pub use spindle_core::Console;
pub use spindle_core::{Clock, Random};

// Running programs: the shape of every executor and of its builder, and
// the fibers' configuration.
pub use spindle_core::{
    DEFAULT_AUTO_YIELD_AFTER, FiberConfig, FiberConfigBuilder, IORuntime, RuntimeBuilder,
};

// The executor-independent counters of every executor (`handle.counters()`).
pub use spindle_core::{RuntimeCounters, WorkerCounters};

// Tracing and fiber dumps.
pub use spindle_core::{
    FiberDump, FiberInfo, FiberState, FiberStatus, Trace, TraceEvent, Traced, TracingMode,
};

// Every error type; futures and fibers, both ways.
pub use spindle_core::{error, future};

/// What a program using Spindle usually needs, in one import (as the
/// `futures` crate's prelude): `use spindle_effect::prelude::*;`.
///
/// It brings the types [`IO`], [`UIO`] and [`Outcome`], the functions
/// [`sleep()`], [`cede()`] and [`never()`] (generic in their error type, so
/// they fit any program without naming it), and the traits
/// whose methods every executor, builder and handle shares, imported as
/// `_` (their methods are in scope, their names are not taken):
/// [`IORuntime`] (`rt.block_on(io)`, `rt.spawn(io)`, `X::from_env()`,
/// ...), [`RuntimeBuilder`] (`.fiber_config(..)`, `.track_fibers(..)` on
/// every builder), [`Executor`](integration::executor::Executor)
/// (`handle.spawn(io)`, `handle.fiber_dump()` on a handle, from any
/// thread) and, with `std`, `ParkedBlockOn` (`handle.block_on(io)` on the
/// handles of exec-wstp and exec-tokio, from any other thread).
pub mod prelude {
    #[cfg(feature = "std")]
    pub use spindle_core::executor::ParkedBlockOn as _;
    pub use spindle_core::{Executor as _, IORuntime as _, RuntimeBuilder as _};
    pub use spindle_core::{IO, Outcome, UIO};
    pub use spindle_core::{cede, never, sleep};
}

/// For executor and integration authors, not for applications: here be
/// dragons.
///
/// Like embassy-executor's `raw` module, this is the machinery under the
/// executors and under libraries that extend Spindle. An application
/// never needs it: it runs programs with an executor's builder and the
/// [`IORuntime`] methods (`block_on`, `spawn`, `fiber_dump`, ...), and the
/// [`prelude`] already brings the methods of the handle's traits into
/// scope. Nothing here can make a program unsound, but used against its
/// contract it loses wake-ups or keeps fibers alive.
///
/// * [`executor`](integration::executor): the contract between fibers and
///   the executors that run them (who calls what, from which thread): the
///   [`Executor`](integration::executor::Executor) trait a handle
///   implements, [`Fiber`](integration::executor::Fiber),
///   [`TimerCallback`](integration::executor::TimerCallback),
///   [`BlockingTask`](integration::executor::BlockingTask),
///   [`OnDeadlock`](integration::executor::OnDeadlock), with `std`
///   `ParkedBlockOn` (the one `block_on` of an executor whose fibers run on
///   threads of its own), and [`support`](integration::executor::support)
///   (what every executor needs and none should write again: the
///   main-fiber slot, the fiber registry, timers, the remote queue, the
///   blocking pool). Write an executor against it and implement
///   [`IORuntime`] on it: every program, `app::run` and `net` then run on
///   it.
/// * [`untraced`](integration::untraced): constructors that record no
///   trace event, for a library whose operation takes several steps and
///   should show in its users' traces as one event.
pub mod integration {
    pub use spindle_core::executor;
    pub use spindle_core::untraced;
}

/// The single-threaded executor (feature `single`): see
/// [`spindle_exec_single`].
#[cfg(feature = "single")]
pub use spindle_exec_single as single;

/// The work-stealing pool (feature `wstp`): see [`spindle_exec_wstp`].
#[cfg(feature = "wstp")]
pub use spindle_exec_wstp as wstp;

/// The batching event loop (feature `batching`): see
/// [`spindle_exec_batching`].
#[cfg(feature = "batching")]
pub use spindle_exec_batching as batching;

/// Fibers as tokio tasks (feature `tokio`): see [`spindle_exec_tokio`].
#[cfg(feature = "tokio")]
pub use spindle_exec_tokio as tokio;

/// Streams: pull-based, chunked, resource-safe streams of values that
/// `IO` programs produce (fs2's model), their channels (`Channel`,
/// `Topic`, `SignallingRef`) and text pipes; see [`spindle_stream`].
/// Always there (`no_std` + `alloc` at its core).
pub use spindle_stream as stream;

/// The sockets (features `wstp`, `batching`, `tokio`): TCP, UDP, Unix
/// domain sockets, split halves and a buffered line reader as `IO` values;
/// see [`spindle_net`]. The same program runs on every std executor, each
/// of which provides I/O: exec-wstp, exec-batching, exec-tokio, and
/// exec-single with `std` on Unix (on the system clock). Outside an
/// executor with I/O (a virtual or custom clock, a thread that runs no
/// executor), making a socket fails with an error of kind `Unsupported`.
#[cfg(any(feature = "wstp", feature = "batching", feature = "tokio"))]
pub use spindle_net as net;

/// The `tracing` crate (feature `instrument`): `io.instrument(span)`,
/// fiber lifecycle events and fibers as tokio-console tasks, once
/// [`install`](spindle_tracing::install)ed; see [`spindle_tracing`].
#[cfg(feature = "instrument")]
pub use spindle_tracing as instrument;

/// Files and directories (feature `os`): open files as `Resource`s, whole
/// files, the directory tree, temporary files and directories, and files
/// and directories as streams, every call on the executor's blocking pool;
/// see [`spindle_os::fs`].
#[cfg(feature = "os")]
pub use spindle_os::fs;

/// Child processes (feature `os`): a command spawned as a `Resource` (the
/// child is killed and reaped when it ends), its standard streams as
/// streams, its exit status and output as `IO` values; see
/// [`spindle_os::process`].
#[cfg(feature = "os")]
pub use spindle_os::process;

/// Unix signals (feature `os`, Unix): a stream of the signals that reach
/// the process, or the next one, their handlers removed exactly once when
/// the stream ends; see [`spindle_os::signal`].
#[cfg(all(feature = "os", unix))]
pub use spindle_os::signal;

/// Standard input as a stream of bytes or lines, standard output and
/// error as pipes and whole writes (feature `os`), on the blocking pool;
/// see [`spindle_os::stdio`].
#[cfg(feature = "os")]
pub use spindle_os::stdio;

/// The application entry point of every std executor (feature `app`):
/// see [`spindle_app`].
#[cfg(feature = "app")]
pub use spindle_app as app;
