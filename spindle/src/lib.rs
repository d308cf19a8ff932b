//! # Spindle: Cats Effect's model in Rust
//!
//! An [`IO`] value describes a computation with typed errors, cancellation
//! and resource safety; building one runs nothing. Lightweight fibers run
//! it on the executor you pick, from a microcontroller to a server, with
//! asynchronous stack traces ("fiber tracing") that cost almost nothing.
//!
//! This crate is the one dependency an application adds: it re-exports the
//! core ([`IO`], [`Outcome`], [`Resource`], [`Ref`], [`Deferred`], [`Queue`],
//! ...) and, one cargo feature each, the executors:
//!
//! | feature | module | executor | pick it for |
//! |---|---|---|---|
//! | `wstp` (default) | `wstp` | a work-stealing pool of worker threads, a poller per worker, a blocking pool | servers and applications: the default |
//! | `single` | `single` | one thread, deterministic, builds without `std`; `single::testkit` has virtual time | tests, embedded targets, programs that want one thread |
//! | `batching` | `batching` | an event loop with timers, non-blocking TCP and batched fiber wake-ups (Cats Effect's batching executor) | network services on one thread |
//! | `tokio` | `tokio` | fibers as tokio tasks, on the tokio runtime of your application or on one it owns; `tokio::time` timers (a paused test clock drives `IO::sleep`), tokio's blocking pool | programs that live inside a tokio application or await tokio libraries |
//! | `app` (default) | `app` | not an executor: the application entry point of every std executor, `app::run(X::from_env(), main)` (Cats Effect's `IOApp`; the `spindle-app` crate) | applications, on any executor |
//! | `full` | all four, and `app` | | |
//!
//! Every executor has the same surface, [`IORuntime`] (`block_on`,
//! `try_block_on`, `spawn`, `handle`, `metrics`, `fiber_dump`, `from_env`,
//! `shutdown`; its documentation has the table), and every builder the
//! setters of [`RuntimeBuilder`]: `use spindle_effect::prelude::*;` brings
//! both into scope, with [`IO`], [`UIO`] and [`Outcome`].
//!
//! With `wstp`, `batching` or `tokio`, the module `net` is the sockets
//! (the `spindle-net` crate): TCP with `into_split`, UDP, Unix domain
//! sockets and a buffered line reader, as `IO` values written once against
//! the I/O capability of the executor that runs them (exec-wstp polls
//! readiness on each worker, exec-batching once per loop turn). A server
//! written with `spindle_effect::net` and `IO` runs unchanged on each: the
//! crate's examples `hello_http` (an HTTP/1.1 server) and `line_echo` are
//! one program each, the executor a command-line flag
//! (`cargo run --features full --example hello_http -- --executor batching`).
//!
//! ```toml
//! [dependencies]
//! spindle-effect = "0.1"                                   # the work-stealing pool
//! # spindle-effect = { version = "0.1", default-features = false, features = ["single"] }  # no_std
//! ```
//!
//! An application on the default executor: the exit code comes from the
//! main program's outcome, and Ctrl-C cancels it, running its finalizers.
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
//! The same entry point on another executor (feature `single`):
//!
//! ```no_run
//! # #[cfg(all(feature = "single", feature = "app"))]
//! # fn main() -> std::process::ExitCode {
//! use spindle_effect::prelude::*;
//! use spindle_effect::single::{SingleThreaded, StdClock};
//!
//! let program: IO<(), String> = IO::delay(|| println!("one thread"));
//! spindle_effect::app::run(SingleThreaded::<StdClock>::from_env(), program)
//! # }
//! # #[cfg(not(all(feature = "single", feature = "app")))]
//! # fn main() {}
//! ```
//!
//! Without the entry point, a program runs to its outcome with
//! `block_on`:
//!
//! ```
//! # #[cfg(feature = "wstp")] {
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::builder().worker_threads(2).track_fibers(true).build()?;
//! let answer: IO<u32, ()> = IO::delay(|| 21).map(|x| x * 2);
//! assert_eq!(rt.block_on(answer)?, Outcome::Succeeded(42));
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Features `std` (default: panics in user code end only their fiber),
//! `tracing` (default: fiber tracing compiled in) and `tracing-full`
//! (backtraces where operations are built) are forwarded to every crate.
//!
//! The crates behind this one can be used on their own: `spindle-core` (the
//! `no_std` core), `spindle-exec-single`, `spindle-exec-wstp`,
//! `spindle-exec-batching`, `spindle-exec-tokio`, `spindle-net` (the
//! sockets), `spindle-app` (the entry point), and `spindle-trace` (the
//! tracing data).

#![no_std]
#![deny(missing_docs)]

pub use spindle_core::*;

/// What a program using Spindle usually needs, in one import (as the
/// `futures` crate's prelude): `use spindle_effect::prelude::*;`.
///
/// It brings the types [`IO`], [`UIO`] and [`Outcome`], and the traits
/// whose methods every executor and builder shares, imported as `_` (their
/// methods are in scope, their names are not taken): [`IORuntime`]
/// (`rt.block_on(io)`, `rt.spawn(io)`, `X::from_env()`, ...),
/// [`RuntimeBuilder`] (`.fiber_config(..)`, `.track_fibers(..)` on every
/// builder), [`Executor`] (`handle.spawn(io)`, `handle.fiber_dump()` on a
/// handle, from any thread) and, with `std`, `ParkedBlockOn`
/// (`handle.block_on(io)` on the handles of exec-wstp and exec-tokio, from
/// any other thread).
pub mod prelude {
    #[cfg(feature = "std")]
    pub use spindle_core::executor::ParkedBlockOn as _;
    pub use spindle_core::{Executor as _, IORuntime as _, RuntimeBuilder as _};
    pub use spindle_core::{IO, Outcome, UIO};
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

/// The sockets of every std executor with non-blocking I/O (features
/// `wstp`, `batching`, `tokio`): TCP, UDP, Unix domain sockets, split
/// halves and a buffered line reader as `IO` values; see [`spindle_net`].
/// The same program runs on each executor that provides I/O (exec-wstp
/// and exec-batching today); on one that does not, making a socket fails
/// with an error of kind `Unsupported`.
#[cfg(any(feature = "wstp", feature = "batching", feature = "tokio"))]
pub use spindle_net as net;

/// The application entry point of every std executor (feature `app`):
/// see [`spindle_app`].
#[cfg(feature = "app")]
pub use spindle_app as app;
