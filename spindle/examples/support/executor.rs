//! The executor a network example runs on, chosen on its command line
//! (shared by `hello_http` and `line_echo` through `#[path]`).
//!
//! ```text
//! [--executor wstp|batching] [--workers N] [--mode batching|macrotask] [--batch-size N]
//! ```
//!
//! * `--executor`: `wstp` (the default), the work-stealing pool, with
//!   `--workers` worker threads (default [`DEFAULT_WORKERS`]); or
//!   `batching`, the one-thread event loop, in `--mode` `batching` (the
//!   default: microtask batches of fiber starts and resumes, at most
//!   `--batch-size` each, default 64) or `macrotask` (the baseline without
//!   batching).
//! * A flag of another executor is an error (`--mode` with `wstp`, say),
//!   so that a command line never silently measures something else.
//!
//! The program runs as the main fiber of [`spindle_effect::app::run`]
//! (exit code from its outcome; SIGINT and SIGTERM cancel it; SIGUSR1
//! prints a fiber dump), with the fiber configuration from the
//! environment (`SPINDLE_TRACING`).
//!
//! # Adding an executor
//!
//! Every std executor has the same shape (a builder, `build()`, and
//! io-core's `AppRuntime` for the entry point), so an executor is one
//! variant of [`Executor`], one arm in [`ExecutorFlags::resolve`] (its
//! name and flags) and one arm in [`Executor::run`] (its builder). exec-tokio
//! (`--executor tokio`, `--flavor`) and exec-single (`--executor single`)
//! come in that way once they provide the I/O capability: the servers are
//! written against `spindle_effect::net` and need nothing else.

use std::fmt;
use std::process::ExitCode;

use spindle_effect::app::{self, MainValue};
use spindle_effect::batching::{EventLoop, Mode};
use spindle_effect::{FiberConfig, IO, wstp};

/// The worker threads of `--executor wstp` without `--workers`.
pub const DEFAULT_WORKERS: usize = 2;

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
}

/// The executor flags as given, before [`resolve`](ExecutorFlags::resolve)
/// checks that they fit the executor.
#[derive(Debug, Clone, Default)]
pub struct ExecutorFlags {
    name: Option<String>,
    workers: Option<usize>,
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
        match name {
            "wstp" => {
                misplaced(&[
                    ("--mode", self.mode.is_some()),
                    ("--batch-size", self.batch_size.is_some()),
                ])?;
                Ok(Executor::Wstp {
                    workers: self.workers.unwrap_or(DEFAULT_WORKERS),
                })
            }
            "batching" => {
                misplaced(&[("--workers", self.workers.is_some())])?;
                Ok(Executor::Batching {
                    mode: self.mode.unwrap_or(Mode::Batching),
                    batch_size: self
                        .batch_size
                        .unwrap_or(spindle_effect::batching::DEFAULT_BATCH_SIZE),
                })
            }
            other => Err(format!("unknown executor {other:?} (wstp, batching)")),
        }
    }
}

/// A builder's result with the fiber configuration from the environment,
/// its error as text.
fn built<R, E: fmt::Display>(build: impl FnOnce(FiberConfig) -> Result<R, E>) -> Result<R, String> {
    let config = FiberConfig::from_env().map_err(|e| e.to_string())?;
    build(config).map_err(|e| e.to_string())
}

impl Executor {
    /// Runs `main` as the main fiber on this executor until it ends (see
    /// the module documentation); the process exit code.
    pub fn run<A, E>(self, main: IO<A, E>) -> ExitCode
    where
        A: MainValue,
        E: fmt::Debug + Send + 'static,
    {
        match self {
            Executor::Wstp { workers } => app::run(
                built(|config| {
                    wstp::Runtime::builder()
                        .worker_threads(workers)
                        .fiber_config(config)
                        .build()
                }),
                main,
            ),
            Executor::Batching { mode, batch_size } => app::run(
                built(|config| {
                    EventLoop::builder()
                        .mode(mode)
                        .batch_size(batch_size)
                        .fiber_config(config)
                        .build()
                }),
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
    fn flags_of_another_executor_unknown_names_and_zero_counts_are_errors() {
        let err = resolve(&["--mode", "macrotask"]).unwrap_err();
        assert!(
            err.contains("--mode does not apply to --executor wstp"),
            "{err}"
        );
        let err = resolve(&["--executor", "batching", "--workers", "2"]).unwrap_err();
        assert!(err.contains("--workers"), "{err}");
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
