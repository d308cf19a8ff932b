//! Helpers shared by spindle-app's tests: one test body, every std
//! executor.
//!
//! A test written inside [`every_executor!`] is stamped into one module
//! per std executor (`single`, `wstp`, `batching`, `tokio`). Each module
//! provides, for the body to use:
//!
//! * `EXECUTOR`: the executor's name, as `examples/app_lifecycle.rs` takes
//!   it;
//! * `run_app(main)`: `spindle_app::run` on that executor, built from the
//!   environment (`IORuntime::from_env`);
//! * `TEST`, in each test: the test's full name, for a child process
//!   filtered to it ([`child`]).

#![allow(dead_code, unused_macros, unused_imports)]

#[allow(dead_code)]
pub mod lifecycle;

use std::process::{Command, ExitCode};

use spindle_app::MainValue;
use spindle_core::{IO, IORuntime};

/// `spindle_app::run` on the executor `R`, from the environment: the one
/// entry point of every std executor.
pub fn run_on<R: IORuntime, A: MainValue, E: std::fmt::Debug + Send + 'static>(
    main: IO<A, E>,
) -> ExitCode {
    spindle_app::run(R::from_env(), main)
}

/// Stamps the tests into one module per std executor.
macro_rules! every_executor {
    ($($tests:tt)*) => {
        $crate::common::stamp! {
            single,
            spindle_exec_single::SingleThreaded<spindle_exec_single::StdClock>,
            $($tests)*
        }
        $crate::common::stamp! { wstp, spindle_exec_wstp::Runtime, $($tests)* }
        $crate::common::stamp! { batching, spindle_exec_batching::EventLoop, $($tests)* }
        $crate::common::stamp! { tokio, spindle_exec_tokio::TokioExecutor, $($tests)* }
    };
}
pub(crate) use every_executor;

/// Stamps the tests into `mod $module`, running on the executor `$rt`.
macro_rules! stamp {
    ($module:ident, $rt:ty, $( $(#[$meta:meta])* fn $name:ident() $body:block )*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;

            /// This module's executor, as the example takes it.
            #[allow(dead_code)]
            const EXECUTOR: &str = stringify!($module);

            /// The app entry point on this module's executor.
            #[allow(dead_code)]
            fn run_app<A: spindle_app::MainValue, E: std::fmt::Debug + Send + 'static>(
                main: spindle_core::IO<A, E>,
            ) -> std::process::ExitCode {
                $crate::common::run_on::<$rt, A, E>(main)
            }

            $(
                $(#[$meta])*
                #[test]
                fn $name() {
                    /// This test's full name (as libtest filters it).
                    #[allow(dead_code)]
                    const TEST: &str = concat!(stringify!($module), "::", stringify!($name));
                    $body
                }
            )*
        }
    };
}
pub(crate) use stamp;

/// Set (to the test's full name) in a child's environment.
const CHILD: &str = "SPINDLE_APP_TEST_CHILD";

/// Whether this process is the child of the test `name` (a full name).
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == name)
}

/// Ends the child with `code`'s number (the exit codes the entry point
/// uses; 99 for another).
pub fn exit_with(code: ExitCode) -> ! {
    use spindle_app::{CANCELED_EXIT_CODE, ERROR_EXIT_CODE, PANIC_EXIT_CODE};
    for known in [0, ERROR_EXIT_CODE, PANIC_EXIT_CODE, CANCELED_EXIT_CODE] {
        if code == ExitCode::from(known) {
            std::process::exit(i32::from(known));
        }
    }
    std::process::exit(99)
}

/// The command that runs the test `name` (a full name) again, alone, in a
/// child process of this test binary that knows it is the child
/// ([`is_child`]). Terse output: before the test's own output, libtest
/// prints only `running 1 test` (see [`program_stdout`]); the child exits
/// from inside the test, so nothing comes after it.
pub fn child(name: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary");
    let mut command = Command::new(exe);
    command
        .args([name, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD, name)
        .env("RUST_BACKTRACE", "0");
    command
}

/// What the child's program printed to stdout: what follows libtest's
/// `running 1 test` line.
pub fn program_stdout(stdout: &str) -> &str {
    stdout
        .split_once("running 1 test\n")
        .map_or(stdout, |(_, rest)| rest)
}
