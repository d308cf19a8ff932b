//! The application entry point, in the spirit of Cats Effect's `IOApp`.
//!
//! [`run`] builds a [`Runtime`](crate::Runtime) (the default one, or one
//! from a [`Builder`] with [`run_with`]), runs the main `IO`
//! as a fiber, and turns its outcome into the process exit code:
//!
//! | outcome | exit code | printed to stderr |
//! |---|---|---|
//! | succeeded with `()` | 0 | nothing |
//! | succeeded with an [`ExitCode`] | that code | nothing |
//! | errored with `e` | 1 | `error: {e:?}` (as Rust's `main` returning `Err` does), then the trace |
//! | canceled | 130 | `canceled` |
//! | panicked | 101 (Rust's panic exit code) | `panicked: {message}`, then the trace |
//!
//! [`run`] takes the runtime's fiber configuration from the environment,
//! as [`Runtime::from_env`](crate::Runtime::from_env) does
//! ([`FiberConfig::from_env`](spindle_core::FiberConfig::from_env): the
//! tracing mode is read from `SPINDLE_TRACING`; empty means unset);
//! [`run_with`] uses the [`Builder`]'s (by default io-core's defaults). A
//! configuration error (an unknown tracing mode, say) is printed as
//! `error: ...` and gives exit code 1.
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
//!     at flat_map @ src/main.rs:13:10 (main::place_order::{{closure}})
//!     at delay @ src/main.rs:12:5 (main::place_order::{{closure}})
//! ```
//!
//! The main fiber is started with a handle (so that signals can cancel
//! it), and its outcome is read from there. It runs as
//! [`main.trace_errors()`](spindle_core::IO::trace_errors), so an error comes
//! with the trace as it was raised; a panic's message carries the trace
//! the fiber ended with ([`PanicMessage::trace`](spindle_core::PanicMessage::trace)).
//! Neither adds an event, so the printed trace never shows this file.
//!
//! # Signals (Unix)
//!
//! SIGINT and SIGTERM cancel the main fiber, so its finalizers (`bracket`
//! releases, `guarantee`s, `Resource` finalizers) run before the process
//! exits with 130 (as Cats Effect's `IOApp` does). A second SIGINT or
//! SIGTERM while those finalizers run forces the exit at once (130).
//! SIGUSR1 prints a dump to stderr without stopping the program: a line
//! `spindle runtime dump`, the runtime's [`Metrics`](crate::Metrics), then
//! its [`FiberDump`](spindle_core::FiberDump) (every live fiber with its state
//! and trace, while fibers trace or
//! [`Builder::track_fibers`] is on; see [`Runtime::fiber_dump`](crate::Runtime::fiber_dump)):
//!
//! ```text
//! fiber #7f3a2c001e40 WAITING
//!  ├ bracket @ src/main.rs:20:5
//!  ╰ never @ src/main.rs:22:19
//!
//! live fibers: 1, workers: 8, parked workers: 8, local queues: 0, ...
//! ```
//!
//! ```no_run
//! use spindle_exec_wstp::app;
//! use spindle_core::IO;
//! use std::process::ExitCode;
//! use std::time::Duration;
//!
//! fn main() -> ExitCode {
//!     let program: IO<(), String> = IO::sleep(Duration::from_millis(10))
//!         .product_r(IO::delay(|| println!("hello from a fiber")))
//!         .guarantee(IO::delay(|| println!("finalizer ran")));
//!     app::run(program)
//! }
//! ```

use crate::sync::{Arc, AtomicBool, Mutex, Ordering};
use std::fmt;
use std::process::ExitCode;

use spindle_core::raw::UntracedJoin as _;
use spindle_core::{IO, Outcome, Trace, Traced};

use crate::builder::Builder;
use crate::handle::Handle;

/// The exit code of a canceled main fiber (128 + SIGINT, the shell's
/// convention, as Cats Effect's `IOApp`).
pub const CANCELED_EXIT_CODE: u8 = 130;
/// The exit code of a main fiber that errored.
pub const ERROR_EXIT_CODE: u8 = 1;
/// The exit code of a main fiber that panicked (Rust's own).
pub const PANIC_EXIT_CODE: u8 = 101;

/// What a main program may produce: `()` (exit code 0) or an [`ExitCode`].
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

/// Runs `main` on a default [`Runtime`](crate::Runtime) with the fiber
/// configuration from the environment (`SPINDLE_TRACING`), and returns the
/// process exit code (see the [module documentation](self)).
pub fn run<A: MainValue, E: fmt::Debug + Send + 'static>(main: IO<A, E>) -> ExitCode {
    run_with(Builder::from_env(), main)
}

/// Runs `main` on a runtime built by `builder`. A configuration error is
/// printed and gives exit code 1.
pub fn run_with<A: MainValue, E: fmt::Debug + Send + 'static>(
    builder: Builder,
    main: IO<A, E>,
) -> ExitCode {
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(ERROR_EXIT_CODE);
        }
    };
    let handle = runtime.handle().clone();
    // Signal handlers first, so that a signal that comes while the main
    // fiber starts is not lost (it cancels the fiber as soon as it exists).
    let cancel = Arc::new(MainCancel::default());
    let signals = SignalWatch::start(handle.clone(), cancel.clone());
    // An error keeps the fiber's trace as it was raised; a panic's message
    // carries its trace.
    let fiber = match handle.spawn(main.trace_errors()) {
        Ok(fiber) => fiber,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(ERROR_EXIT_CODE);
        }
    };
    cancel.set({
        let handle = handle.clone();
        let fiber = fiber.cancel_handle();
        Box::new(move || {
            let _ = handle.spawn(fiber.cancel::<()>());
        })
    });
    let joined = handle.block_on(fiber.join_void_untraced::<()>());
    if let Some(signals) = signals {
        signals.stop();
    }
    let code = match joined {
        Ok(_) => match fiber.try_take_outcome() {
            Some(outcome) => exit_code_of(outcome),
            // Joined, so completed: the outcome is there.
            None => exit_code_of(Outcome::<A, Traced<E>>::Canceled),
        },
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(ERROR_EXIT_CODE)
        }
    };
    drop(runtime);
    code
}

/// The lines printed under a failure: the trace's events, most recent
/// first; empty if there are none.
fn trace_lines(trace: &Trace) -> String {
    use fmt::Write as _;
    let mut out = String::new();
    for event in trace.events().iter().rev() {
        let _ = writeln!(out, "    at {event}");
    }
    if !out.is_empty() && trace.omitted() > 0 {
        let _ = writeln!(out, "    ... {} older events omitted", trace.omitted());
    }
    out
}

/// The exit code of the main fiber's outcome (see the module table); an
/// error or a panic is printed with its trace under it.
fn exit_code_of<A: MainValue, E: fmt::Debug>(outcome: Outcome<A, Traced<E>>) -> ExitCode {
    match outcome {
        Outcome::Succeeded(a) => a.exit_code(),
        Outcome::Errored(Traced { error, trace }) => {
            // One write, so that the error and its trace stay together.
            eprint!("error: {error:?}\n{}", trace_lines(&trace));
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

/// Cancels the main fiber once it exists (a request that comes earlier is
/// kept and carried out when it does).
#[derive(Default)]
struct MainCancel {
    /// The canceler, once the fiber exists, and whether a cancellation was
    /// requested.
    state: Mutex<(Option<Canceler>, bool)>,
}

/// Cancels the main fiber.
type Canceler = Box<dyn Fn() + Send>;

impl MainCancel {
    fn set(&self, cancel: Canceler) {
        let mut state = self.state.lock();
        if state.1 {
            cancel();
        }
        state.0 = Some(cancel);
    }

    fn request(&self) {
        let mut state = self.state.lock();
        state.1 = true;
        if let Some(cancel) = &state.0 {
            cancel();
        }
    }
}

/// The signal thread: SIGINT/SIGTERM cancel the main fiber (a second one
/// exits at once); SIGUSR1 prints metrics and the fiber dump.
struct SignalWatch {
    #[cfg(unix)]
    handle: signal_hook::iterator::Handle,
    #[cfg(unix)]
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    #[cfg(unix)]
    fn start(runtime: Handle, main: Arc<MainCancel>) -> Option<SignalWatch> {
        use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1]) {
            Ok(signals) => signals,
            Err(e) => {
                eprintln!(
                    "warning: could not install signal handlers ({e}); Ctrl-C will not run finalizers"
                );
                return None;
            }
        };
        let handle = signals.handle();
        let canceling = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name(String::from("spindle-signals"))
            .spawn(move || {
                for signal in signals.forever() {
                    match signal {
                        SIGUSR1 => {
                            // One write: the dump is not interleaved with
                            // the program's own output line by line.
                            eprint!("{}", crate::metrics::dump(&runtime));
                        }
                        _ if canceling.swap(true, Ordering::SeqCst) => {
                            eprintln!("second signal: exiting without waiting for finalizers");
                            std::process::exit(i32::from(CANCELED_EXIT_CODE));
                        }
                        // Cancel the main fiber; its finalizers run on the
                        // pool, and `run_with` returns once it ends.
                        _ => main.request(),
                    }
                }
            });
        match thread {
            Ok(thread) => Some(SignalWatch { handle, thread }),
            Err(e) => {
                eprintln!("warning: could not start the signal thread ({e})");
                None
            }
        }
    }

    #[cfg(not(unix))]
    fn start(_runtime: Handle, _main: Arc<MainCancel>) -> Option<SignalWatch> {
        None
    }

    fn stop(self) {
        #[cfg(unix)]
        {
            self.handle.close();
            let _ = self.thread.join();
        }
    }
}
