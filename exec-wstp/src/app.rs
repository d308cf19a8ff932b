//! The application entry point on the work-stealing pool, in the spirit of
//! Cats Effect's `IOApp`: [`run`] and [`run_with`].
//!
//! Both are the one entry point of every std executor,
//! [`spindle_app::run`], on a [`Runtime`](crate::Runtime): the exit code
//! from the main program's outcome (0 / an [`ExitCode`] / 1 on an error,
//! with its trace / 130 canceled / 101 panicked), SIGINT and SIGTERM
//! cancel the main fiber so that its finalizers run, SIGUSR1 prints the
//! runtime's [`Metrics`](crate::Metrics) and fiber dump. See the
//! [`spindle_app`] documentation for the table, the traces and the
//! signals; this module only picks the runtime.
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

use std::fmt;
use std::process::ExitCode;

use spindle_core::IO;

use crate::builder::Builder;

pub use spindle_app::{CANCELED_EXIT_CODE, ERROR_EXIT_CODE, MainValue, PANIC_EXIT_CODE};

/// Runs `main` on a default [`Runtime`](crate::Runtime) with the fiber
/// configuration from the environment (`SPINDLE_TRACING`), and returns the
/// process exit code: `spindle_app::run(Runtime::from_env(), main)`.
pub fn run<A: MainValue, E: fmt::Debug + Send + 'static>(main: IO<A, E>) -> ExitCode {
    run_with(Builder::from_env(), main)
}

/// Runs `main` on a runtime built by `builder`. A configuration error is
/// printed and gives exit code 1: `spindle_app::run(builder.build(), main)`.
pub fn run_with<A: MainValue, E: fmt::Debug + Send + 'static>(
    builder: Builder,
    main: IO<A, E>,
) -> ExitCode {
    spindle_app::run(builder.build(), main)
}
