//! The executor a network example runs on, chosen on its command line
//! (shared by `hello_http` and `line_echo` through `#[path]`).
//!
//! ```text
//! [--executor wstp|batching|tokio|single] [--workers N] [--flavor multi-thread|current-thread]
//! [--mode batching|macrotask] [--batch-size N]
//! ```
//!
//! * `--executor`: every std executor with I/O.
//!   * `wstp` (the default), the work-stealing pool, with `--workers`
//!     worker threads (default [`DEFAULT_WORKERS`]);
//!   * `batching`, the one-thread event loop, in `--mode` `batching` (the
//!     default: microtask batches of fiber starts and resumes, at most
//!     `--batch-size` each, default 64) or `macrotask` (the baseline
//!     without batching);
//!   * `tokio`, fibers as tokio tasks on a runtime the executor owns, of
//!     `--flavor` `multi-thread` (the default, with `--workers` workers,
//!     default [`DEFAULT_WORKERS`]) or `current-thread`;
//!   * `single`, exec-single on the system clock: one thread, which polls
//!     the sockets in its loop.
//! * A flag of another executor is an error (`--mode` with `wstp`, say),
//!   so that a command line never silently measures something else.
//!
//! The program runs as the main fiber of [`spindle_effect::app::run`]
//! (exit code from its outcome; SIGINT and SIGTERM cancel it; SIGUSR1
//! prints a fiber dump), with the fiber configuration from the
//! environment (`SPINDLE_TRACING`).
//!
//! # One way to run, every executor
//!
//! Every executor has the same shape, io-core's `IORuntime`, so the
//! program runs through one generic function, [`serve`], whatever the
//! executor: [`Executor::run`] only builds the executor the flags name
//! (its builder and its own settings, with the fiber configuration of the
//! environment) and hands it over. Adding an executor is one variant of
//! [`Executor`], its flags in [`ExecutorFlags::resolve`] and its builder in
//! [`Executor::run`]; the servers are written against
//! `spindle_effect::net` and need nothing else.

use std::fmt;
use std::process::ExitCode;

use spindle_effect::app::{self, MainValue};
use spindle_effect::batching::{EventLoop, Mode};
use spindle_effect::prelude::*;
use spindle_effect::single::SingleThreaded;
use spindle_effect::tokio::TokioExecutor;
use spindle_effect::{IORuntime, wstp};

/// The worker threads of `--executor wstp` and of `--executor tokio`'s
/// multi-thread runtime without `--workers`.
pub const DEFAULT_WORKERS: usize = 2;

/// The kind of tokio runtime `--executor tokio` owns (`--flavor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// A multi-thread runtime with this many workers.
    MultiThread {
        /// Worker threads.
        workers: usize,
    },
    /// A current-thread runtime, driven by one thread of its own.
    CurrentThread,
}

/// An executor and its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// exec-wstp, the work-stealing pool.
    Wstp {
        /// Worker threads.
        workers: usize,
    },
    /// exec-batching, the one-thread event loop.
    Batching {
        /// Batching or macrotask.
        mode: Mode,
        /// The microtask batch bound.
        batch_size: usize,
    },
    /// exec-tokio, on a tokio runtime it owns.
    Tokio {
        /// The runtime's flavor.
        flavor: Flavor,
    },
    /// exec-single on the system clock.
    Single,
}

/// The executor flags as given, before [`resolve`](ExecutorFlags::resolve)
/// checks that they fit the executor.
#[derive(Debug, Clone, Default)]
pub struct ExecutorFlags {
    name: Option<String>,
    workers: Option<usize>,
    flavor: Option<String>,
    mode: Option<Mode>,
    batch_size: Option<usize>,
}

fn number(text: &str, what: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "bad {what} {text:?}: expected a whole number above zero"
        )),
    }
}

impl ExecutorFlags {
    /// Takes `flag` if it is an executor flag (reading its value with
    /// `value`): `Ok(true)` if it was one, `Ok(false)` if it is not ours.
    pub fn take(
        &mut self,
        flag: &str,
        value: impl FnOnce() -> Result<String, String>,
    ) -> Result<bool, String> {
        match flag {
            "--executor" => self.name = Some(value()?),
            "--workers" => self.workers = Some(number(&value()?, "worker count")?),
            "--flavor" => self.flavor = Some(value()?),
            "--batch-size" => self.batch_size = Some(number(&value()?, "batch size")?),
            "--mode" => {
                self.mode = Some(match value()?.as_str() {
                    "batching" => Mode::Batching,
                    "macrotask" => Mode::Macrotask,
                    other => return Err(format!("unknown mode {other:?} (batching, macrotask)")),
                })
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The executor the flags name (default `wstp`), with its settings;
    /// an error for an unknown name or a flag of another executor.
    pub fn resolve(self) -> Result<Executor, String> {
        let name = self.name.as_deref().unwrap_or("wstp");
        let misplaced = |flags: &[(&str, bool)]| match flags.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(format!("{flag} does not apply to --executor {name}")),
            None => Ok(()),
        };
        let batching_flags = [
            ("--mode", self.mode.is_some()),
            ("--batch-size", self.batch_size.is_some()),
        ];
        let flavor_flag = ("--flavor", self.flavor.is_some());
        let workers_flag = ("--workers", self.workers.is_some());
        let workers = self.workers.unwrap_or(DEFAULT_WORKERS);
        match name {
            "wstp" => {
                misplaced(&batching_flags)?;
                misplaced(&[flavor_flag])?;
                Ok(Executor::Wstp { workers })
            }
            "batching" => {
                misplaced(&[workers_flag, flavor_flag])?;
                Ok(Executor::Batching {
                    mode: self.mode.unwrap_or(Mode::Batching),
                    batch_size: self
                        .batch_size
                        .unwrap_or(spindle_effect::batching::DEFAULT_BATCH_SIZE),
                })
            }
            "tokio" => {
                misplaced(&batching_flags)?;
                let flavor = match self.flavor.as_deref().unwrap_or("multi-thread") {
                    "multi-thread" => Flavor::MultiThread { workers },
                    "current-thread" => {
                        misplaced(&[workers_flag])?;
                        Flavor::CurrentThread
                    }
                    other => {
                        return Err(format!(
                            "unknown flavor {other:?} (multi-thread, current-thread)"
                        ));
                    }
                };
                Ok(Executor::Tokio { flavor })
            }
            "single" => {
                misplaced(&batching_flags)?;
                misplaced(&[workers_flag, flavor_flag])?;
                Ok(Executor::Single)
            }
            other => Err(format!(
                "unknown executor {other:?} (wstp, batching, tokio, single)"
            )),
        }
    }
}

/// Runs `main` as the main fiber of `runtime` until it ends (see the module
/// documentation); the process exit code. The one way every executor runs
/// the program: `runtime` is any `IORuntime`, as its builder returned it
/// (a build error is printed and gives exit code 1).
pub fn serve<R, A, E>(runtime: Result<R, R::BuildError>, main: IO<A, E>) -> ExitCode
where
    R: IORuntime,
    A: MainValue,
    E: fmt::Debug + Send + 'static,
{
    app::run(runtime, main)
}

impl Executor {
    /// Builds the executor with its settings and the fiber configuration
    /// of the environment, and runs `main` on it with [`serve`]; the
    /// process exit code.
    pub fn run<A, E>(self, main: IO<A, E>) -> ExitCode
    where
        A: MainValue,
        E: fmt::Debug + Send + 'static,
    {
        match self {
            Executor::Wstp { workers } => serve(
                wstp::Runtime::builder()
                    .worker_threads(workers)
                    .fiber_config_from_env()
                    .build(),
                main,
            ),
            Executor::Batching { mode, batch_size } => serve(
                EventLoop::builder()
                    .mode(mode)
                    .batch_size(batch_size)
                    .fiber_config_from_env()
                    .build(),
                main,
            ),
            Executor::Tokio { flavor } => {
                let builder = match flavor {
                    Flavor::MultiThread { workers } => {
                        TokioExecutor::builder().multi_thread(workers)
                    }
                    Flavor::CurrentThread => TokioExecutor::builder().current_thread(),
                };
                serve(builder.fiber_config_from_env().build(), main)
            }
            Executor::Single => serve(
                SingleThreaded::builder().fiber_config_from_env().build(),
                main,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: &[&str]) -> Result<Executor, String> {
        let mut flags = ExecutorFlags::default();
        let mut args = args.iter().map(|s| s.to_string());
        while let Some(flag) = args.next() {
            let taken = flags.take(&flag, || args.next().ok_or_else(|| "no value".to_owned()))?;
            assert!(taken, "{flag}");
        }
        flags.resolve()
    }

    #[test]
    fn the_default_executor_is_the_pool_with_two_workers() {
        assert_eq!(resolve(&[]), Ok(Executor::Wstp { workers: 2 }));
        assert_eq!(
            resolve(&["--executor", "wstp", "--workers", "4"]),
            Ok(Executor::Wstp { workers: 4 })
        );
    }

    #[test]
    fn the_event_loop_takes_its_mode_and_batch_size() {
        assert_eq!(
            resolve(&["--executor", "batching"]),
            Ok(Executor::Batching {
                mode: Mode::Batching,
                batch_size: 64
            })
        );
        assert_eq!(
            resolve(&[
                "--mode",
                "macrotask",
                "--executor",
                "batching",
                "--batch-size",
                "8"
            ]),
            Ok(Executor::Batching {
                mode: Mode::Macrotask,
                batch_size: 8
            })
        );
    }

    #[test]
    fn tokio_takes_its_flavor_and_single_takes_nothing() {
        assert_eq!(
            resolve(&["--executor", "tokio"]),
            Ok(Executor::Tokio {
                flavor: Flavor::MultiThread { workers: 2 }
            })
        );
        assert_eq!(
            resolve(&["--executor", "tokio", "--workers", "3"]),
            Ok(Executor::Tokio {
                flavor: Flavor::MultiThread { workers: 3 }
            })
        );
        assert_eq!(
            resolve(&["--executor", "tokio", "--flavor", "current-thread"]),
            Ok(Executor::Tokio {
                flavor: Flavor::CurrentThread
            })
        );
        assert_eq!(resolve(&["--executor", "single"]), Ok(Executor::Single));
    }

    #[test]
    fn flags_of_another_executor_unknown_names_and_zero_counts_are_errors() {
        let err = resolve(&["--mode", "macrotask"]).unwrap_err();
        assert!(
            err.contains("--mode does not apply to --executor wstp"),
            "{err}"
        );
        let err = resolve(&["--executor", "batching", "--workers", "2"]).unwrap_err();
        assert!(err.contains("--workers"), "{err}");
        let err = resolve(&["--executor", "single", "--flavor", "current-thread"]).unwrap_err();
        assert!(err.contains("--flavor"), "{err}");
        let err = resolve(&[
            "--executor",
            "tokio",
            "--flavor",
            "current-thread",
            "--workers",
            "2",
        ])
        .unwrap_err();
        assert!(err.contains("--workers"), "{err}");
        assert!(
            resolve(&["--executor", "tokio", "--flavor", "green"])
                .unwrap_err()
                .contains("unknown flavor")
        );
        assert!(
            resolve(&["--executor", "rayon"])
                .unwrap_err()
                .contains("unknown executor")
        );
        assert!(resolve(&["--workers", "0"]).is_err());
        assert!(resolve(&["--executor", "batching", "--batch-size", "x"]).is_err());
        assert!(resolve(&["--executor", "batching", "--mode", "eager"]).is_err());
    }
}
