//! What every executor needs and none should write again: a module for
//! **executor authors**.
//!
//! # Warning: not for applications
//!
//! Like embassy-executor's `raw` module, this is the machinery under the
//! executors, not an API to run programs with (the entry crate shows it
//! only under `spindle_effect::integration`). An application picks one of
//! the executors (exec-single, exec-wstp, exec-batching, exec-tokio:
//! `spindle_effect::single`, `wstp`, `batching`, `tokio`) and uses its
//! `Builder` and the [`IORuntime`](crate::IORuntime) methods (`block_on`,
//! `spawn`, `fiber_dump`, ...); nothing here makes a program run. These types assume the callers keep the
//! [Executor contract](super#who-calls-what) (who calls what, from which
//! thread); misused, they lose wake-ups or keep fibers alive, though they
//! are never unsound.
//!
//! # What it offers
//!
//! | piece | what it does | used by |
//! |---|---|---|
//! | [`MainFiber`] | the slot where `block_on`'s main fiber leaves its outcome, and the completion guard that marks it *abandoned* when the fiber is freed without finishing, waking the waiter either way | every executor's `block_on_with` |
//! | `ParkedBlockOn` (std; in [`executor`](super), for the applications that call it too) | the one `block_on` of an executor whose fibers run on threads of its own: refuse when nested or shut down, park the caller until the main fiber ends, tell a shutdown from a deadlock | exec-wstp's and exec-tokio's executors and handles |
//! | [`RunError`] | the one error of `block_on`, `try_block_on` and `spawn`: [`Deadlock`](RunError::Deadlock), [`ShutDown`](RunError::ShutDown), [`Nested`](RunError::Nested) | every executor |
//! | [`CommonSettings`] | the settings every builder has (behind the setters of [`RuntimeBuilder`](crate::RuntimeBuilder)): where the fiber configuration comes from, `track_fibers`; what `build` makes of them | every `Builder` |
//! | [`ConfigSource`] | "explicit config or the environment": the builder's [`FiberConfig`], the defaults, or [`FiberConfig::from_env`] | [`CommonSettings`] |
//! | [`FiberIds`] | the counter that numbers an executor's fibers `#1`, `#2`, ... in the order they are made (one relaxed atomic add per fiber) | [`Executor::next_fiber_id`](super::Executor::next_fiber_id) of an executor that does not count its fibers already |
//! | [`FiberRegistry`] | the list of live fibers behind fiber dumps and `live_fibers()` (weak references, in shards), kept only while fibers trace or when asked | every executor's `fiber_listed` and `fiber_dump` |
//! | [`RemoteQueue`], [`Published`] | fibers scheduled from outside the loop thread, with a `pending` hint that keeps the lock off the loop's fast path; queue lengths the loop publishes for dumps taken off its thread | the single-threaded loops |
//! | [`TimerHeap`], [`TimerId`] | deadlines over a slab of callbacks, O(1) cancellation | every executor's `set_timer` |
//! | [`nanos`], [`wall_clock`], [`Origin`] | duration conversions without 128-bit division; the wall clock; a monotonic origin | every executor's clock |
//! | `BlockingPool` (std) | the bounded pool of threads behind `IO::blocking` (`BlockingCounts` for metrics, the defaults `DEFAULT_MAX_BLOCKING_THREADS` and `DEFAULT_BLOCKING_KEEP_ALIVE`): threads on demand up to a bound, an idle keep-alive, a FIFO queue beyond the bound, never the caller's thread | exec-wstp and exec-batching's `spawn_blocking` |
//! | [`watchdog`] (std): [`Watchdog`], [`RunSlots`], [`run_fiber`], [`run_fiber_with`], [`StarvationReport`] | the starvation watchdog: a slot per thread that runs fibers, marked at the start and end of each run (nothing when off: [`run_fiber`] is `fiber.run()` behind one branch), and a thread per executor that reports a run longer than the threshold, once, with the fiber's number and trace | every std executor's worker loop and `build` |
//! | [`TaskLink`] ([`Taken`], [`Parked`]) | the hand-off between the completers that resume a fiber and the one task of an async runtime that owns the fiber for its whole life: the fiber goes in, the task's waker is woken, either side can close it; kept in the fiber's [`Executor::FiberSlot`](super::Executor::FiberSlot) | exec-tokio |
//! | [`adopt_config`], [`lists_fibers`], [`WeakFiber`], [`WeakFibers`] | the tracing decisions an executor makes once, and the weak fiber references a registry holds | [`FiberRegistry`]; custom registries |
//!
//! # Breaking the executor/fiber cycle
//!
//! Queued fibers and timer callbacks hold handles to the executor's shared
//! state, which holds them: dropping the executor must take them out and
//! drop them, or the cycle keeps everything alive. Every piece here that
//! holds fibers can hand them back for that: [`RemoteQueue::close`] (which
//! also refuses later pushes, so a fiber scheduled after the drop is freed
//! at once), [`TimerHeap::drain`] and [`FiberRegistry::clear`]. Drop what
//! they return *after* releasing every lock: a fiber's program may own a
//! resource whose drop takes another lock of the executor.
//!
//! Design credits: embassy-executor's `raw` module (one place for executor
//! authors, with a warning) and tokio's one `Builder` and one runtime
//! error shape; no code is copied.

#[cfg(feature = "std")]
mod blocking;
#[cfg(feature = "std")]
mod clock_std;
mod main_fiber;
mod registry;
mod remote;
mod settings;
mod task_link;
#[cfg(feature = "std")]
pub mod watchdog;

use core::fmt;
use core::time::Duration;

use crate::config::{ConfigError, FiberConfig};

#[cfg(feature = "std")]
pub use blocking::{
    BlockingCounts, BlockingPool, BlockingWork, DEFAULT_BLOCKING_KEEP_ALIVE,
    DEFAULT_MAX_BLOCKING_THREADS,
};
#[cfg(feature = "std")]
pub use clock_std::{Origin, wall_clock};
pub use main_fiber::{MainFiber, WakeWaiter};
pub use registry::FiberRegistry;
pub use remote::{Published, RemoteQueue};
pub use settings::CommonSettings;
#[cfg(feature = "std")]
pub use settings::StarvationSettings;
pub use task_link::{Parked, Taken, TaskLink};
#[cfg(feature = "std")]
pub use watchdog::{
    NoTrace, RunSlot, RunSlots, STARVATION_ENV_VAR, StarvationConfig, StarvationHandler,
    StarvationReport, Watchdog, print_starvation_report, run_fiber, run_fiber_with,
};

pub use super::timers::{TimerHeap, TimerId};
pub use crate::fiber::{FiberIds, WeakFiber, WeakFibers};

/// Why `block_on`, `try_block_on` or `spawn` could not run a program: the
/// one error type of every executor's run API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunError {
    /// `try_block_on`: the main fiber can never finish. It was freed while
    /// suspended, with nothing left that could resume it (for instance
    /// `IO::never()`, an async callback dropped without being called, or a
    /// wait on a `Deferred`, `Queue`, `Semaphore`, `Mutex` or
    /// `CountDownLatch` that nothing else references, or on the join of a
    /// fiber that nothing else references: see `wait/cell.rs`, "Waits
    /// nobody can end", for what cannot be known).
    /// (`block_on` keeps waiting instead, as Cats Effect's `unsafeRunSync`
    /// does on `IO.never`.)
    Deadlock,
    /// The executor has been shut down (or dropped, for a handle that
    /// outlived it): it runs nothing any more.
    ShutDown,
    /// `block_on` or `try_block_on` was called from inside the executor
    /// itself: from one of its fibers, or (on a multi-threaded executor)
    /// on one of its worker threads. Waiting there would stop the very
    /// loop that has to run the program; start the program with
    /// `IO::start` and join it instead.
    Nested,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunError::Deadlock => {
                "deadlock: the main fiber is suspended and nothing can resume it \
                 (no runnable fiber, no timer, and every callback that could wake it was dropped)"
            }
            RunError::ShutDown => "the executor has been shut down: it runs no more programs",
            RunError::Nested => {
                "block_on called from inside the executor (one of its fibers or worker threads), \
                 which would stop the loop that has to run the program; start and join it instead"
            }
        })
    }
}

impl core::error::Error for RunError {}

/// Where an executor's [`FiberConfig`] comes from: what a `Builder` keeps
/// until `build` ("explicit config or the environment"), in its
/// [`CommonSettings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfigSource {
    /// [`FiberConfig::default`]: what `X::new()` and a builder without
    /// `fiber_config` use. Reads no environment.
    #[default]
    Default,
    /// The configuration given to the builder's `fiber_config`.
    Explicit(FiberConfig),
    /// [`FiberConfig::from_env`]: the defaults with the tracing mode of
    /// `SPINDLE_TRACING` (unset or empty: the default mode). What
    /// `X::from_env()` uses (the builder's `fiber_config_from_env`).
    Environment,
}

impl ConfigSource {
    /// The configuration; an invalid environment is a [`ConfigError`]
    /// (each executor wraps it in its `BuildError::Config`).
    pub fn resolve(self) -> Result<FiberConfig, ConfigError> {
        match self {
            ConfigSource::Default => Ok(FiberConfig::default()),
            ConfigSource::Explicit(config) => Ok(config),
            ConfigSource::Environment => FiberConfig::from_env(),
        }
    }
}

/// A clock reading or deadline in nanoseconds, saturating at `u64::MAX`
/// (584 years): the unit of [`TimerHeap`]. No 128-bit or 64-bit division,
/// which small cores do in software.
#[inline]
pub fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// Whether fibers on an executor built with `config` record traces: io-core
/// is built with its `tracing` feature and the configuration's
/// [`tracing`](FiberConfig::tracing) mode records (`cached` or `full`).
///
/// Executors decide with it whether they keep a list of their live fibers
/// for [`Executor::fiber_dump`](super::Executor::fiber_dump): with tracing
/// off (mode `none`, or the feature compiled out) they keep nothing per
/// fiber, and fiber dumps cost nothing. An executor being built calls
/// [`adopt_config`] (or [`FiberRegistry::new`], which does) instead.
#[inline]
pub fn lists_fibers(config: &FiberConfig) -> bool {
    cfg!(feature = "tracing") && config.tracing().records()
}

/// What an executor does once, when it is built with `config`: returns
/// [`lists_fibers`]`(config)`, and when that is true makes programs built
/// from then on keep every call site (`spindle_trace::keep_call_sites`), since the
/// leaves of the programs it will run need their sites.
#[inline]
pub fn adopt_config(config: &FiberConfig) -> bool {
    let records = lists_fibers(config);
    if records {
        spindle_trace::keep_call_sites();
    }
    records
}

#[cfg(test)]
mod tests;
