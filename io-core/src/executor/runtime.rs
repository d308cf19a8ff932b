//! [`IORuntime`]: the one shape of every executor, as an application sees
//! it (Cats Effect calls the thing that runs `IO` an `IORuntime`), and
//! [`RuntimeBuilder`], the settings every executor's builder has.
//!
//! The [`Executor`] trait is what a *fiber* needs of the executor that
//! runs it; this module is what an *application* (a `main`, a test, the
//! entry point of the `spindle-app` crate, a benchmark) needs of one: build
//! it, run a program to its outcome, start fibers, observe it, shut it
//! down. Each executor crate implements both: `Executor` on its `Handle`,
//! `IORuntime` on its executor type. Code written against `IORuntime`
//! runs on every executor; switching is a change of type.
//!
//! # Protocol
//!
//! * The executor value (`X: IORuntime`) is owned by one thread at a time
//!   (the single-threaded loops are `Send` but not `Sync`), which runs
//!   programs with [`block_on`](IORuntime::block_on) and shuts the
//!   executor down by value ([`shutdown`](IORuntime::shutdown), or drop).
//! * Everything other threads and fibers do goes through the
//!   [`handle`](IORuntime::handle), an [`Executor`] (`Clone + Send +
//!   Sync`): [`Executor::spawn`], [`Executor::fiber_dump`],
//!   [`Executor::live_fibers`], and [`IORuntime::handle_metrics`]. A
//!   handle outlives the executor safely: once the executor is shut down
//!   it answers [`RunError::ShutDown`].
//! * `block_on` never runs on the executor's own threads: called from one
//!   of its fibers (or, on a pool, its worker threads) it returns
//!   [`RunError::Nested`] without running anything.
//!
//! Generic code takes `R: IORuntime` and needs nothing else:
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::{IORuntime, error::RunError, wstp::Runtime};
//!
//! /// The same program on whatever executor the caller picked.
//! fn answer<R: IORuntime>(rt: &R) -> Result<Outcome<u32, ()>, RunError> {
//!     let started = rt.spawn(IO::<u32, ()>::delay(|| 40))?;
//!     rt.block_on(started.join().map(|outcome| outcome.succeeded().unwrap_or(0) + 2))
//! }
//!
//! let rt = Runtime::new()?;
//! assert_eq!(answer(&rt)?, Outcome::Succeeded(42));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;
use core::time::Duration;

use alloc::vec::Vec;

use crate::config::FiberConfig;
use crate::executor::Executor;
use crate::executor::support::{CommonSettings, ConfigSource, RunError};
use crate::fiber::handle::FiberHandle;
use crate::fiber::{FiberDump, FiberInfo};
use crate::io::IO;
use crate::outcome::Outcome;

/// An executor as an application uses it: build it, run programs on it,
/// observe it, shut it down. Every Spindle executor implements it, with one
/// signature per method; import the trait to call them
/// (`use spindle_effect::IORuntime;`, or `use spindle_effect::prelude::*;`).
///
/// # The public surface of every executor
///
/// This table is the contract each executor crate points to; what an
/// executor adds is its own (its builder's own setters, exec-tokio's
/// `run_async` and `current`, exec-wstp's `worker_threads`, ...).
///
/// | item | what every executor `X` has |
/// |---|---|
/// | `X::builder()` | a `Builder` with the setters of [`RuntimeBuilder`] (`fiber_config`, `fiber_config_from_env`, `track_fibers`; import the trait) and the executor's own; its `build()` checks them and returns `Result<X, X::BuildError>` |
/// | `X::new()` | `X::builder().build()`: the defaults, reading no environment |
/// | [`X::from_env()`](IORuntime::from_env) | the defaults with the fiber configuration of the environment (the tracing mode of `SPINDLE_TRACING`; empty means unset): what an application starts from |
/// | [`block_on`](IORuntime::block_on), [`try_block_on`](IORuntime::try_block_on), [`block_on_with`](IORuntime::block_on_with) | run a program as the main fiber to its `Result<Outcome<A, E>, RunError>`: `block_on` keeps waiting on a program that can never finish, `try_block_on` returns [`RunError::Deadlock`]; both return [`RunError::Nested`] from inside the executor and [`RunError::ShutDown`] once it is gone |
/// | [`spawn`](IORuntime::spawn) | starts a fiber, `Result<FiberHandle<A, E>, RunError>` (also [`Executor::spawn`] on the handle, from any thread) |
/// | [`handle`](IORuntime::handle) | `&X::Handle`: the [`Executor`] fibers and other threads hold |
/// | [`metrics`](IORuntime::metrics), [`handle_metrics`](IORuntime::handle_metrics) | a snapshot of the executor's state, `X::Metrics` (`Display` prints one line) |
/// | [`fiber_dump`](IORuntime::fiber_dump), [`live_fibers`](IORuntime::live_fibers) | every live fiber's state and trace, and the executor's queues (fibers are listed while they trace, or with `track_fibers(true)`) |
/// | [`shutdown`](IORuntime::shutdown) | stops the executor within a timeout, `Result<(), ShutdownTimedOut>`; dropping it shuts it down too, waiting as long as it takes |
///
/// The executors of this workspace:
///
/// | executor | crate | `Handle` | `block_on` runs the loop | `shutdown` |
/// |---|---|---|---|---|
/// | `SingleThreaded<C>` | spindle-exec-single | `Handle<C>` | on the calling thread | frees everything at once: always `Ok` |
/// | `Runtime` | spindle-exec-wstp | `Handle` | on the worker threads (the main fiber runs on the caller until its first wait) | waits for the worker and blocking threads; reports those still running |
/// | `EventLoop` | spindle-exec-batching | `Handle` | on the calling thread | frees everything at once: always `Ok` (busy blocking threads finish on their own, as when dropped) |
/// | `TokioExecutor` | spindle-exec-tokio | `Handle` | on tokio's workers (an owned current-thread runtime: a thread of its own) | an owned runtime: tokio's `shutdown_timeout`; reports the `IO::blocking` calls still running, not tokio's threads (tokio does not tell) |
///
/// # Why this shape
///
/// * **`block_on_with` is the one required way to run**: `block_on` and
///   `try_block_on` differ only in what a provable deadlock does
///   ([`OnDeadlock`]), so they are provided once here and their
///   documentation is written once.
/// * **Metrics are read from a handle** ([`handle_metrics`](IORuntime::handle_metrics)):
///   the entry point's signal thread holds only a handle (the executor
///   itself is borrowed by `block_on` on the main thread, and the
///   single-threaded loops are not `Sync`), and prints the metrics on
///   SIGUSR1. [`metrics`](IORuntime::metrics) reads them through the
///   executor's own handle.
/// * **`from_env` needs nothing but the type**. exec-single therefore
///   implements this trait for a clock `C: Clock + Default` (its
///   `from_env` makes the clock with `C::default()`): the system clock,
///   the test kit's virtual clock, a zero-sized clock over a hardware
///   counter. Without `std` there is no environment: `from_env` is then
///   the default configuration. (exec-single's implementation is generic
///   over the clock; an inherent `SingleThreaded::from_env()` on the
///   system clock lets the common call name none.)
/// * **`shutdown` takes the executor by value** and has one result on
///   every executor, [`ShutdownTimedOut`] when something it runs did not
///   stop in time (left running, detached). An executor that frees
///   everything at once when dropped (the single-threaded loops) keeps the
///   provided method, which drops it and returns `Ok`.
/// * **Associated types**, not trait objects: a program is generic over
///   its values, so the run methods are generic methods; the trait is for
///   static dispatch (`R: IORuntime`), as [`Executor`] is.
///
/// # Implementing it
///
/// Required: the associated types, [`from_env`](IORuntime::from_env),
/// [`handle`](IORuntime::handle), [`block_on_with`](IORuntime::block_on_with)
/// and [`handle_metrics`](IORuntime::handle_metrics). The rest is provided
/// on top of them and of the handle's [`Executor`] methods (`spawn` needs
/// the handle's [`Executor::is_shut_down`]); override
/// [`fiber_dump`](IORuntime::fiber_dump) when the owner reads more than a
/// handle can (exec-batching's exact queue lengths between runs), and
/// [`shutdown`](IORuntime::shutdown) when the executor has threads to wait
/// for. [`support`](super::support) has the pieces the implementations
/// share (the main-fiber slot, the builders' common settings), and
/// `ParkedBlockOn` (std) is the `block_on` of executors with threads of
/// their own.
pub trait IORuntime: Sized {
    /// What fibers and other threads hold of the executor: its
    /// [`Executor`] (`Clone + Send + Sync`), to schedule fibers, spawn, take
    /// dumps and read metrics from any thread.
    type Handle: Executor;
    /// A snapshot of the executor's state (queues, timers, threads), one
    /// line with `Display`.
    type Metrics: fmt::Display + fmt::Debug;
    /// Why the executor could not be built (each executor's `BuildError`:
    /// an invalid setting, an invalid environment, a thread or poller the
    /// system refused).
    type BuildError: core::error::Error + Send + Sync + 'static;

    /// An executor with the default settings and the fiber configuration
    /// read from the environment: the tracing mode named by
    /// `SPINDLE_TRACING` (unset or empty: the default mode; an unknown
    /// mode is a build error naming the valid ones), and with `std` the
    /// starvation watchdog's threshold named by `SPINDLE_STARVATION_MS`
    /// (see [`RuntimeBuilder::fiber_config_from_env`]). What an application
    /// starts from (`spindle_effect::app::run(X::from_env(), main)`);
    /// `X::new()` reads no environment. Without `std` there is no environment, and
    /// this is the default configuration.
    fn from_env() -> Result<Self, Self::BuildError>;

    /// The executor's handle: cheap to clone, usable from any thread.
    fn handle(&self) -> &Self::Handle;

    /// Runs `io` as the main fiber, with every fiber it starts, until the
    /// main fiber ends, and returns its outcome; what happens when the
    /// main fiber can provably never finish is `on_deadlock`'s to say.
    /// [`block_on`](IORuntime::block_on) and
    /// [`try_block_on`](IORuntime::try_block_on) are this, with
    /// [`OnDeadlock::Wait`] and [`OnDeadlock::Report`].
    ///
    /// `Err(RunError::Nested)`, running nothing, when called where waiting
    /// would stop the executor that has to run the program: from one of
    /// its fibers, or one of its own threads. `Err(RunError::ShutDown)`
    /// when the executor is shut down (a pool's `block_on` on a handle
    /// that outlived it, or one shut down while the program waits).
    fn block_on_with<A, E>(
        &self,
        io: IO<A, E>,
        on_deadlock: OnDeadlock,
    ) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static;

    /// Runs `io` as the main fiber until it ends; returns its outcome.
    ///
    /// If the main fiber can never finish, this keeps waiting (as Cats
    /// Effect's `unsafeRunSync` does on `IO.never`), on a pool until it is
    /// shut down; use [`try_block_on`](IORuntime::try_block_on) to get
    /// [`RunError::Deadlock`] instead. See
    /// [`block_on_with`](IORuntime::block_on_with) for the other errors.
    fn block_on<A, E>(&self, io: IO<A, E>) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.block_on_with(io, OnDeadlock::Wait)
    }

    /// Like [`block_on`](IORuntime::block_on), but returns
    /// `Err(RunError::Deadlock)` when the main fiber can provably never
    /// finish: it was freed while suspended with nothing left that could
    /// resume it (`IO::never()`, an async callback dropped without being
    /// called, a wait on a data type nothing else references), and, on a
    /// loop that runs on the calling thread, no fiber, timer, socket or
    /// wake-up from elsewhere remains.
    fn try_block_on<A, E>(&self, io: IO<A, E>) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.block_on_with(io, OnDeadlock::Report)
    }

    /// Starts `io` as a new fiber; join or cancel it through the returned
    /// handle. On a loop that runs on the calling thread the fiber runs
    /// from the next `block_on`. [`Executor::spawn`] on the handle is the
    /// same, from any thread.
    fn spawn<A, E>(&self, io: IO<A, E>) -> Result<FiberHandle<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.handle().spawn(io)
    }

    /// A snapshot of the state of the executor behind `handle`, from any
    /// thread (what the entry point's signal thread prints on SIGUSR1).
    fn handle_metrics(handle: &Self::Handle) -> Self::Metrics;

    /// A snapshot of the executor's state (see each executor's `Metrics`).
    fn metrics(&self) -> Self::Metrics {
        Self::handle_metrics(self.handle())
    }

    /// A fiber dump: every live fiber with its state and trace, and the
    /// executor's queues; see [`Executor::fiber_dump`] (the handle's, from
    /// any thread).
    fn fiber_dump(&self) -> FiberDump {
        self.handle().fiber_dump()
    }

    /// The live fibers of the [`fiber_dump`](IORuntime::fiber_dump):
    /// number, status, state and trace of each (empty while fibers are not
    /// listed: they trace, or the builder's `track_fibers(true)`).
    fn live_fibers(&self) -> Vec<FiberInfo> {
        self.fiber_dump().fibers
    }

    /// Stops the executor, waiting at most `timeout` for what it runs.
    ///
    /// Fibers still queued, sleeping or waiting are dropped, their
    /// finalizers not run (cancel fibers first for that); a fiber running
    /// now finishes its current run; a handle that outlives the executor
    /// answers [`RunError::ShutDown`]. `Err(ShutdownTimedOut)` says what was
    /// still running when `timeout` passed (a thread blocked in user code):
    /// it was told to stop and left behind. A `timeout` too large to be a
    /// deadline (`Duration::MAX`) waits as long as it takes, as dropping
    /// the executor does.
    ///
    /// The default drops the executor and returns `Ok(())`: right for an
    /// executor whose drop frees everything at once without waiting for
    /// anything (exec-single, exec-batching).
    fn shutdown(self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        let _ = timeout;
        drop(self);
        Ok(())
    }
}

/// What [`IORuntime::block_on_with`] does when the main fiber can provably
/// never finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDeadlock {
    /// Keep waiting, as Cats Effect's `unsafeRunSync` does on `IO.never`:
    /// [`IORuntime::block_on`]. (On a pool something may still come: a
    /// shutdown ends the wait with [`RunError::ShutDown`].)
    Wait,
    /// Return [`RunError::Deadlock`]: [`IORuntime::try_block_on`].
    Report,
}

impl OnDeadlock {
    /// Whether a provable deadlock is reported ([`OnDeadlock::Report`]).
    #[inline]
    pub fn reports(self) -> bool {
        matches!(self, OnDeadlock::Report)
    }
}

/// Not everything an executor runs stopped within the timeout given to
/// [`IORuntime::shutdown`]: what was still running (blocked in user code,
/// typically an `IO::blocking` call) was told to stop and left behind,
/// detached; the executor itself is shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownTimedOut {
    /// Threads of the executor still running (exec-wstp: worker and
    /// blocking threads); `None` where the executor does not own or cannot
    /// count its threads (exec-tokio: tokio's `shutdown_timeout` does not
    /// say which of its threads it left behind).
    pub threads_still_running: Option<usize>,
    /// `IO::blocking` calls that had not returned (on exec-wstp, each holds
    /// one of the blocking threads counted above).
    pub blocking_calls_still_running: usize,
}

impl ShutdownTimedOut {
    /// What was still running: `threads` (`None`: not counted) and
    /// `blocking_calls`.
    pub fn new(threads: Option<usize>, blocking_calls: usize) -> ShutdownTimedOut {
        ShutdownTimedOut {
            threads_still_running: threads,
            blocking_calls_still_running: blocking_calls,
        }
    }
}

impl fmt::Display for ShutdownTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the executor did not stop within the shutdown timeout: ")?;
        if let Some(threads) = self.threads_still_running {
            write!(f, "{threads} thread(s), ")?;
        }
        write!(
            f,
            "{} blocking call(s) still running (detached)",
            self.blocking_calls_still_running
        )
    }
}

impl core::error::Error for ShutdownTimedOut {}

/// The setters every executor's builder has, written once: import the
/// trait to call them (`use spindle_effect::RuntimeBuilder;`, or
/// `use spindle_effect::prelude::*;`). The executor's own setters (worker threads, batch
/// size, clock, ...) and `build` are inherent to its `Builder`.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{FiberConfig, wstp::Runtime};
///
/// let config = FiberConfig::builder().auto_yield_after(256).build()?;
/// let rt = Runtime::builder().fiber_config(config).track_fibers(true).build()?;
/// # let _ = rt;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// An executor author embeds one [`CommonSettings`] in the builder,
/// returns it from [`common_settings`](RuntimeBuilder::common_settings), and
/// reads it in `build` ([`CommonSettings::fiber_config`],
/// [`CommonSettings::registry`], and with std `CommonSettings::starvation`:
/// when it is `Some`, the executor marks each fiber run in a slot per
/// thread and starts a `Watchdog`, both from `support::watchdog`).
pub trait RuntimeBuilder: Sized {
    /// The builder's [`CommonSettings`], which the setters below change
    /// (for executor authors; applications call the setters).
    fn common_settings(&mut self) -> &mut CommonSettings;

    /// The run-loop configuration of every fiber (auto-yield budget,
    /// tracing mode, trace capacity). Without this call (or
    /// [`fiber_config_from_env`](RuntimeBuilder::fiber_config_from_env)):
    /// [`FiberConfig::default`].
    fn fiber_config(mut self, config: FiberConfig) -> Self {
        self.common_settings().fiber_config = ConfigSource::Explicit(config);
        self
    }

    /// The fiber configuration of the environment, read when the executor
    /// is built: [`FiberConfig::from_env`] (the tracing mode of
    /// `SPINDLE_TRACING`; empty means unset); an invalid one makes `build`
    /// fail with the executor's `BuildError::Config`. `X::from_env()` is
    /// `X::builder().fiber_config_from_env().build()`.
    ///
    /// With `std`, the environment may also turn on the starvation watchdog:
    /// `SPINDLE_STARVATION_MS` (a threshold in whole milliseconds, at least
    /// 1; unset or empty: off) when the builder is given no
    /// [`starvation_threshold`](RuntimeBuilder::starvation_threshold).
    fn fiber_config_from_env(mut self) -> Self {
        let settings = self.common_settings();
        settings.fiber_config = ConfigSource::Environment;
        #[cfg(feature = "std")]
        {
            settings.starvation.from_env = true;
        }
        self
    }

    /// Keeps a weak reference to every fiber that lives on after a run, so
    /// that fiber dumps and `live_fibers` list them also when fibers do not
    /// trace. Fibers are listed anyway while they trace (io-core's
    /// `tracing` feature and a tracing mode other than `none`); with
    /// tracing off and this option off (the default) nothing is kept per
    /// fiber. Listing costs a short lock and a push per fiber that waits or
    /// yields for the first time.
    fn track_fibers(mut self, on: bool) -> Self {
        self.common_settings().track_fibers = on;
        self
    }

    /// Turns on the starvation watchdog: a fiber that keeps one of the
    /// executor's threads busy without yielding for longer than `threshold`
    /// (a blocking call, or a long computation, outside `IO::blocking`) is
    /// reported once per such run, with its number, the thread, how long
    /// so far and its trace (Cats Effect's starvation checker, tokio's
    /// blocking warnings). Reports go to
    /// [`on_starvation`](RuntimeBuilder::on_starvation)'s handler, by
    /// default a warning on stderr.
    ///
    /// Off by default (and then free: no thread, one predictable branch
    /// per fiber run). On, the executor keeps one more thread, which wakes
    /// every half threshold, and each fiber run costs two stores to a cache
    /// line of its thread. A run is reported once it has lasted between
    /// the threshold and about one and a half thresholds; the reported
    /// duration is a lower bound. Tens of milliseconds are a sensible
    /// threshold: much less, and a thread the system preempts during an
    /// ordinary run is reported too. Zero makes `build` fail with the
    /// executor's `BuildError::Config`
    /// ([`ConfigError::StarvationThresholdZero`](crate::error::ConfigError::StarvationThresholdZero)).
    /// Without this call, `SPINDLE_STARVATION_MS` turns it on for an
    /// executor built from the environment
    /// ([`fiber_config_from_env`](RuntimeBuilder::fiber_config_from_env)).
    ///
    /// Watched: the threads that run fibers (exec-wstp's workers, the
    /// single-threaded loops' thread, the threads of tokio that run
    /// exec-tokio's fibers), not `IO::blocking`'s threads, which are
    /// there to block, nor exec-wstp's inline start of a main fiber on
    /// the caller's thread, which starves no worker. The module
    /// `executor::support::watchdog` explains the protocol.
    ///
    /// ```
    /// use std::time::Duration;
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let rt = Runtime::builder()
    ///     .starvation_threshold(Duration::from_millis(100))
    ///     .on_starvation(|report| eprintln!("{report}"))
    ///     .build()?;
    /// # let _ = rt;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    fn starvation_threshold(mut self, threshold: Duration) -> Self {
        self.common_settings().starvation.threshold = Some(threshold);
        self
    }

    /// Where the starvation watchdog's reports go (see
    /// [`starvation_threshold`](RuntimeBuilder::starvation_threshold), which
    /// turns it on): `handler` is called on the watchdog's thread with
    /// each [`StarvationReport`](crate::executor::support::StarvationReport)
    /// (a slow handler delays only later reports, never a fiber). The
    /// default prints the report's `Display` on stderr. Alone, this turns
    /// nothing on.
    #[cfg(feature = "std")]
    fn on_starvation<F>(mut self, handler: F) -> Self
    where
        F: Fn(&crate::executor::support::StarvationReport) + Send + Sync + 'static,
    {
        self.common_settings().starvation.handler = Some(std::sync::Arc::new(handler));
        self
    }
}
