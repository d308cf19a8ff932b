//! # spindle-app: the application entry point, in the spirit of Cats Effect's `IOApp`
//!
//! [`run`] runs the main `IO` of a program as a fiber on any std executor
//! (exec-single, exec-wstp, exec-batching, exec-tokio), and turns its
//! outcome into the process exit code. An application reaches it as
//! `spindle_effect::app::run` (the entry crate's feature `app`, on by
//! default).
//!
//! | outcome | exit code | printed to stderr |
//! |---|---|---|
//! | succeeded with `()` | 0 | nothing |
//! | succeeded with an [`ExitCode`] (or a `u8`) | that code | nothing |
//! | errored with `e` | 1 | `error: {e:?}` (as Rust's `main` returning `Err` does), then the trace |
//! | canceled | 130 | `canceled` |
//! | panicked | 101 (Rust's panic exit code) | `panicked: {message}`, then the trace |
//!
//! It takes the executor as its builder gives it, a `Result`:
//! `X::from_env()` reads the fiber configuration from the environment
//! ([`FiberConfig::from_env`](spindle_core::FiberConfig::from_env): the
//! tracing mode from `SPINDLE_TRACING`; empty means unset), a builder's
//! `build()` uses the builder's. An `Err` (an unknown tracing mode, say) is
//! printed as `error: ...` and gives exit code 1, running nothing.
//!
//! ```no_run
//! use std::process::ExitCode;
//! use std::time::Duration;
//!
//! use spindle_effect::prelude::*;
//! use spindle_effect::{app, wstp::Runtime};
//!
//! fn main() -> ExitCode {
//!     let program: IO<(), String> = IO::sleep(Duration::from_millis(10))
//!         .product_r(IO::delay(|| println!("hello from a fiber")))
//!         .guarantee(IO::delay(|| println!("finalizer ran")));
//!     app::run(Runtime::from_env(), program)
//! }
//! ```
//!
//! The same line runs it on exec-single's loop
//! (`single::SingleThreaded::from_env()`), on exec-batching's event loop
//! (`batching::EventLoop::from_env()`) or on a tokio runtime it owns
//! (`tokio::TokioExecutor::from_env()`), each behind the entry crate's
//! feature of that name: `from_env` is [`IORuntime::from_env`], and so is
//! every method of the executor this crate calls. A builder's `build()`
//! works as well (the builder's `fiber_config_from_env()` reads the
//! environment too).
//!
//! # Traces of failures
//!
//! When the main fiber ends with an error or a panic, the line of the
//! error is followed by the main fiber's trace at that point (while it
//! traces: tracing mode `cached` or `full`), most recent operation first,
//! one `at` line per event, like Cats Effect's enhanced exceptions:
//!
//! ```text
//! error: "the order was refused"
//!     at raise_error @ src/main.rs:14:9
//!     at flat_map @ src/main.rs:13:10 (main::place_order)
//!     at delay @ src/main.rs:12:5 (main::place_order)
//! ```
//!
//! An error that a child fiber raised and the main fiber raised again
//! (`race`, `both`, `par_traverse`, `join_with_never`, ...) is printed with
//! the child's trace first, where it failed, then, after a line `in the
//! fiber that joined it:`, the main fiber's (and so on for a grandchild):
//!
//! ```text
//! error: "card declined"
//!     at flat_map @ src/main.rs:31:10 (main::charge)
//!     at delay @ src/main.rs:30:5 (main::charge)
//!   in the fiber that joined it:
//!     at par_traverse @ src/main.rs:14:9
//!     at delay @ src/main.rs:13:5 (main::main)
//! ```
//!
//! The main fiber runs as
//! [`main.trace_errors()`](spindle_core::IO::trace_errors), so an error comes
//! with the traces as it was raised ([`Traced`]); a panic's message carries
//! the trace the fiber ended with ([`PanicMessage::trace`](spindle_core::PanicMessage::trace)).
//! Neither adds an event, so the printed trace never shows this crate.
//!
//! # Signals (Unix)
//!
//! SIGINT and SIGTERM cancel the main fiber, so its finalizers (`bracket`
//! releases, `guarantee`s, `Resource` finalizers) run before the process
//! exits with 130 (as Cats Effect's `IOApp` does). A second SIGINT or
//! SIGTERM while those finalizers run forces the exit at once (130).
//! SIGUSR1 prints a dump to stderr without stopping the program: a line
//! `spindle runtime dump`, the executor's metrics, then its
//! [`FiberDump`](spindle_core::FiberDump) (every live fiber with its state
//! and trace, while fibers trace or the builder's `track_fibers` is on):
//!
//! ```text
//! spindle runtime dump
//! live fibers: 1, workers: 8, parked workers: 8, ...
//!
//! fiber #1 WAITING
//!  ├ never @ src/main.rs:22:19
//!  ╰ bracket @ src/main.rs:20:5
//!
//! live fibers: 1, workers: 8, parked workers: 8, local queues: 0, ...
//! ```
//!
//! # The dump socket (Unix, off by default)
//!
//! With the environment variable `SPINDLE_DUMP_SOCKET` set to a path
//! ([`DUMP_SOCKET_ENV`]; unset or empty: off), or with
//! [`Settings::dump_socket`] and [`run_with`], the entry point also listens
//! on a Unix domain socket at that path and answers every connection with
//! the executor's state as one JSON document, then closes it: the
//! executor's metrics (their one-line text), its executor-independent
//! counters (io-core's `RuntimeCounters`) and its fiber dump (io-core's
//! `FiberDump`, as structured data). Any client that can connect reads it:
//!
//! ```text
//! $ SPINDLE_DUMP_SOCKET=/run/user/1000/app.dump ./app &
//! $ socat - UNIX-CONNECT:/run/user/1000/app.dump
//! {"counters":{"executor":"wstp","fibers_live":3,...},"dump":{"fibers":[...],...},"metrics":"..."}
//! ```
//!
//! The socket is made before the main fiber starts, readable and writable
//! by the process's user only (`0600`), and removed when the main fiber
//! has ended. A path that is taken already (a socket an earlier run left
//! behind, any file) or in a directory that does not exist is an error
//! naming the path: it is printed as `error: ...` and the program does not
//! run (exit code 1). Off Unix the setting is an error likewise.
//!
//! # The protocol with the executor
//!
//! Any executor takes part: [`run`] takes an [`IORuntime`], the one shape
//! every executor implements (its handle, its `block_on`, its metrics read
//! from a handle). [`run`], on the calling thread:
//!
//! 1. installs the signal handlers and starts the signal thread, with a
//!    clone of the executor's handle, *before* the main fiber exists (a
//!    signal that comes while it starts is kept, and cancels it as soon as
//!    it exists);
//! 2. starts the main fiber with
//!    [`FiberHandle::spawn`](spindle_core::FiberHandle::spawn) on the
//!    handle, so that there is a [`CancelHandle`](spindle_core::CancelHandle)
//!    for the signal thread;
//! 3. blocks in the executor's `block_on` on a program that joins the main
//!    fiber, then reads its outcome from the fiber handle.
//!
//! The signal thread cancels by spawning the fiber's cancel program on the
//! handle: a schedule from another thread, which every executor takes in
//! while its `block_on` waits (exec-wstp's and exec-tokio's workers;
//! exec-single's and exec-batching's loops, which run on the thread that
//! called `run`, through their remote queue, whose push wakes the parked
//! or polling loop). The cancellation then runs on the executor like any
//! fiber's, finalizers included, and `block_on` returns once the main
//! fiber has ended.
//!
//! The handlers are spindle-os's signal registration
//! ([`spindle_os::signal::BlockingSignals`]), the mechanism of the signal
//! streams a program reads (`spindle_os::signal::signals`): each signal
//! sets a pending flag and writes a byte to a socket pair, and the signal
//! thread blocks reading that socket, not a fiber, so that it acts while
//! the main fiber (or every thread of the executor) is busy. `run`
//! unregisters them, exactly once, when the main fiber has ended (the
//! thread then reads the end of the socket and stops). Two SIGINTs that
//! come before the thread reads the first are one, as the kernel and
//! every self-pipe handler coalesce them. A program's own stream of
//! SIGINT receives it too (every registration of a signal does), next to
//! the cancellation.
//!
//! # Why a crate of its own
//!
//! The entry point needs OS signals (`spindle-os`, on `signal-hook`), and
//! io-core is `no_std`: an optional `signal-hook` feature there would put an OS
//! dependency in the core's manifest and feature matrix, which embedded
//! users build. So the one contract executors implement, [`IORuntime`],
//! is in io-core (no new dependency: every executor already depends on
//! io-core), and the one implementation of the entry point is here. No
//! executor depends on this crate: users add `spindle-app` (or the entry
//! crate's `app` feature, on by default) when they want an entry point,
//! and only then pull in `spindle-os` and `signal-hook`. One generic function also keeps
//! the call site the same on every executor: the executor is an argument,
//! not a module path.

#![deny(missing_docs)]

#[cfg(unix)]
mod dump_socket;
mod signals;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use spindle_core::untraced::UntracedJoin as _;
use spindle_core::{FiberHandle, IO, IORuntime, Outcome, Trace, Traced};

use crate::signals::{MainCancel, SignalWatch};

/// The exit code of a canceled main fiber (128 + SIGINT, the shell's
/// convention, as Cats Effect's `IOApp`).
pub const CANCELED_EXIT_CODE: u8 = 130;
/// The exit code of a main fiber that errored, or of an executor that
/// could not be built.
pub const ERROR_EXIT_CODE: u8 = 1;
/// The exit code of a main fiber that panicked (Rust's own).
pub const PANIC_EXIT_CODE: u8 = 101;

/// The environment variable that turns the [dump socket](crate#the-dump-socket-unix-off-by-default)
/// on: the path of the socket (unset or empty: off). Read by [`run`]
/// ([`Settings::from_env`]).
pub const DUMP_SOCKET_ENV: &str = "SPINDLE_DUMP_SOCKET";

/// What the entry point serves besides the program: the
/// [dump socket](crate#the-dump-socket-unix-off-by-default), off by
/// default. [`run`] takes them from the environment
/// ([`Settings::from_env`]); [`run_with`] takes them as given.
///
/// ```no_run
/// use spindle_effect::prelude::*;
/// use spindle_effect::{app, wstp::Runtime};
///
/// fn main() -> std::process::ExitCode {
///     let program: IO<(), String> = IO::never();
///     let settings = app::Settings::new().dump_socket("/run/user/1000/my-app.dump");
///     app::run_with(Runtime::from_env(), program, settings)
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    dump_socket: Option<PathBuf>,
}

impl Settings {
    /// Nothing served besides the program (no dump socket).
    pub fn new() -> Settings {
        Settings::default()
    }

    /// The settings of the environment: the dump socket at the path of
    /// [`DUMP_SOCKET_ENV`] (`SPINDLE_DUMP_SOCKET`), if it is set and not
    /// empty.
    pub fn from_env() -> Settings {
        Settings::from_env_value(std::env::var_os(DUMP_SOCKET_ENV))
    }

    /// [`Settings::from_env`] for the variable's value.
    fn from_env_value(value: Option<OsString>) -> Settings {
        Settings {
            dump_socket: value.filter(|v| !v.is_empty()).map(PathBuf::from),
        }
    }

    /// Serves the dump socket at `path` (see the
    /// [crate documentation](crate#the-dump-socket-unix-off-by-default)).
    pub fn dump_socket(mut self, path: impl Into<PathBuf>) -> Settings {
        self.dump_socket = Some(path.into());
        self
    }

    /// No dump socket (also when the environment names one).
    pub fn no_dump_socket(mut self) -> Settings {
        self.dump_socket = None;
        self
    }

    /// The dump socket's path, if it is on.
    pub fn dump_socket_path(&self) -> Option<&Path> {
        self.dump_socket.as_deref()
    }
}

/// What a main program may produce: `()` (exit code 0), an [`ExitCode`] or
/// a `u8` (that code).
pub trait MainValue: Send + 'static {
    /// The process exit code for this value.
    fn exit_code(self) -> ExitCode;
}

impl MainValue for () {
    fn exit_code(self) -> ExitCode {
        ExitCode::SUCCESS
    }
}

impl MainValue for ExitCode {
    fn exit_code(self) -> ExitCode {
        self
    }
}

impl MainValue for u8 {
    fn exit_code(self) -> ExitCode {
        ExitCode::from(self)
    }
}

/// Runs `main` as the main fiber of `runtime` (as its builder or
/// `from_env` returned it) until it ends, and returns the process exit
/// code (see the [crate documentation](crate)). An `Err` runtime is
/// printed as `error: {e}` and gives exit code 1.
///
/// Call it from `main` (the thread the process exits from): it blocks the
/// calling thread in the executor's `block_on`, and a second SIGINT or
/// SIGTERM exits the process. When `main` has ended the executor is
/// dropped, which shuts it down (a pool joins its threads) before the
/// process exits.
///
/// The [dump socket](crate#the-dump-socket-unix-off-by-default) is served
/// if the environment asks for it ([`Settings::from_env`]); [`run_with`]
/// takes the settings as an argument.
pub fn run<R, B, A, E>(runtime: Result<R, B>, main: IO<A, E>) -> ExitCode
where
    R: IORuntime,
    B: fmt::Display,
    A: MainValue,
    E: fmt::Debug + Send + 'static,
{
    run_with(runtime, main, Settings::from_env())
}

/// [`run`] with the given [`Settings`] instead of the environment's: an
/// `Err` runtime, or a dump socket that cannot be served, is printed as
/// `error: ...` and gives exit code 1, running nothing.
pub fn run_with<R, B, A, E>(runtime: Result<R, B>, main: IO<A, E>, settings: Settings) -> ExitCode
where
    R: IORuntime,
    B: fmt::Display,
    A: MainValue,
    E: fmt::Debug + Send + 'static,
{
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(ERROR_EXIT_CODE);
        }
    };
    let dump_socket = match start_dump_socket::<R>(&settings, runtime.handle()) {
        Ok(socket) => socket,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(ERROR_EXIT_CODE);
        }
    };
    let code = run_main(&runtime, main);
    #[cfg(unix)]
    if let Some(socket) = dump_socket {
        socket.stop();
    }
    #[cfg(not(unix))]
    let _ = dump_socket;
    // The executor shuts down (and, for a pool, joins its threads) before
    // the process exits.
    drop(runtime);
    code
}

/// The dump socket of `settings`, started; `Ok(None)` if it is off.
#[cfg(unix)]
fn start_dump_socket<R: IORuntime>(
    settings: &Settings,
    handle: &R::Handle,
) -> Result<Option<dump_socket::DumpSocket>, String> {
    match settings.dump_socket_path() {
        None => Ok(None),
        Some(path) => dump_socket::DumpSocket::start::<R>(path, handle.clone())
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}

/// Off Unix there is no dump socket: asking for one is an error.
#[cfg(not(unix))]
fn start_dump_socket<R: IORuntime>(
    settings: &Settings,
    _handle: &R::Handle,
) -> Result<Option<()>, String> {
    match settings.dump_socket_path() {
        None => Ok(None),
        Some(path) => Err(format!(
            "cannot serve the dump socket at {} ({DUMP_SOCKET_ENV}): Unix domain sockets only",
            path.display()
        )),
    }
}

/// The JSON document the dump socket serves, for `handle`'s executor
/// (see the [crate documentation](crate#the-dump-socket-unix-off-by-default)):
/// `metrics`, `counters` and `dump`. Any thread; what each connection to
/// the socket reads, for a program that serves it some other way.
pub fn dump_document<R: IORuntime>(handle: &R::Handle) -> String {
    document_value::<R>(handle).to_string()
}

/// [`dump_document`] as a JSON value.
fn document_value<R: IORuntime>(handle: &R::Handle) -> serde_json::Value {
    use spindle_core::Executor as _;
    serde_json::json!({
        "metrics": R::handle_metrics(handle).to_string(),
        "counters": handle.counters(),
        "dump": handle.fiber_dump(),
    })
}

/// [`run`] on a built executor.
fn run_main<R, A, E>(runtime: &R, main: IO<A, E>) -> ExitCode
where
    R: IORuntime,
    A: MainValue,
    E: fmt::Debug + Send + 'static,
{
    let handle = runtime.handle().clone();
    // Signal handlers first, so that a signal that comes while the main
    // fiber starts is not lost (it cancels the fiber as soon as it exists).
    let cancel = std::sync::Arc::new(MainCancel::default());
    let signals = SignalWatch::start::<R>(handle.clone(), cancel.clone());
    // An error keeps the fiber's trace as it was raised; a panic's message
    // carries its trace.
    let fiber = FiberHandle::spawn(main.trace_errors(), &handle);
    cancel.set({
        let fiber = fiber.cancel_handle();
        Box::new(move || {
            let _ = FiberHandle::spawn(fiber.cancel::<()>(), &handle);
        })
    });
    let joined = runtime.block_on(fiber.join_void_untraced::<()>());
    if let Some(signals) = signals {
        signals.stop();
    }
    match joined {
        Ok(_) => match fiber.try_take_outcome() {
            Some(outcome) => exit_code_of(outcome),
            // Joined, so completed: the outcome is there.
            None => exit_code_of(Outcome::<A, Traced<E>>::Canceled),
        },
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(ERROR_EXIT_CODE)
        }
    }
}

/// The lines printed under a failure: the trace's events, most recent
/// first; empty if there are none.
fn trace_lines(trace: &Trace) -> String {
    let mut out = String::new();
    write_trace_lines(&mut out, trace);
    out
}

/// Appends [`trace_lines`] to `out`.
fn write_trace_lines(out: &mut String, trace: &Trace) {
    use fmt::Write as _;
    for event in trace.events().iter().rev() {
        let _ = writeln!(out, "    at {event}");
    }
    if !trace.is_empty() && trace.omitted() > 0 {
        let _ = writeln!(out, "    ... {} older events omitted", trace.omitted());
    }
}

/// The lines printed under an error: the traces of the child fibers it
/// came from, innermost first, then the main fiber's, each most recent
/// event first, with a line between two fibers' traces; empty if no fiber
/// recorded an event.
fn failure_lines<E>(failure: &Traced<E>) -> String {
    let mut out = String::new();
    for (_, trace) in failure.fibers().filter(|(_, trace)| !trace.is_empty()) {
        if !out.is_empty() {
            out.push_str("  in the fiber that joined it:\n");
        }
        write_trace_lines(&mut out, trace);
    }
    out
}

/// The exit code of the main fiber's outcome (see the crate table); an
/// error or a panic is printed with its trace under it.
fn exit_code_of<A: MainValue, E: fmt::Debug>(outcome: Outcome<A, Traced<E>>) -> ExitCode {
    match outcome {
        Outcome::Succeeded(a) => a.exit_code(),
        Outcome::Errored(failure) => {
            // One write, so that the error and its traces stay together.
            eprint!("error: {:?}\n{}", failure.error, failure_lines(&failure));
            ExitCode::from(ERROR_EXIT_CODE)
        }
        Outcome::Canceled => {
            eprintln!("canceled");
            ExitCode::from(CANCELED_EXIT_CODE)
        }
        Outcome::Panicked(message) => {
            let trace = message.trace().map(trace_lines).unwrap_or_default();
            eprint!("panicked: {}\n{trace}", message.message());
            ExitCode::from(PANIC_EXIT_CODE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Settings;

    #[test]
    fn the_dump_socket_is_off_unless_the_environment_names_a_path() {
        assert_eq!(Settings::from_env_value(None), Settings::new());
        assert_eq!(Settings::from_env_value(Some("".into())), Settings::new());
        assert_eq!(
            Settings::from_env_value(Some("/tmp/x.dump".into())).dump_socket_path(),
            Some(std::path::Path::new("/tmp/x.dump"))
        );
        assert_eq!(
            Settings::new().dump_socket("/a").no_dump_socket(),
            Settings::new()
        );
    }
}
