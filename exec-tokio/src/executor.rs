//! [`TokioExecutor`]: the executor an application holds, attached to a
//! tokio runtime or owning one; its [`IORuntime`] implementation and its
//! shutdown.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use spindle_core::executor::support::Watchdog;
use spindle_core::executor::{OnDeadlock, ParkedBlockOn};
use spindle_core::{IO, IORuntime, Outcome, RuntimeBuilder};

use crate::builder::Builder;
use crate::error::{BuildError, RunError, ShutdownTimedOut};
use crate::handle::Handle;
use crate::metrics::Metrics;
use crate::sync::Ordering;

/// The runtime an executor owns.
pub(crate) enum Owned {
    /// A multi-thread runtime (its workers drive it).
    MultiThread(tokio::runtime::Runtime),
    /// A current-thread runtime, driven by `driver` inside `block_on`
    /// until `stop` says how long to give its shutdown (`None`: wait for
    /// blocking calls to end).
    CurrentThread {
        stop: tokio::sync::oneshot::Sender<Option<Duration>>,
        driver: std::thread::JoinHandle<()>,
    },
}

impl Owned {
    /// Starts the thread that drives a current-thread runtime.
    pub(crate) fn start_current_thread(
        runtime: tokio::runtime::Runtime,
        thread_name: &str,
    ) -> Result<Owned, BuildError> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<Option<Duration>>();
        let driver = std::thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || {
                // A dropped sender (the executor went away without a word)
                // is a stop without a timeout.
                let timeout = runtime.block_on(async move { stopped.await.ok().flatten() });
                match timeout {
                    Some(timeout) => runtime.shutdown_timeout(timeout),
                    None => drop(runtime),
                }
            })
            .map_err(BuildError::Runtime)?;
        Ok(Owned::CurrentThread { stop, driver })
    }
}

/// Spindle's tokio executor: fibers run as tokio tasks, on a runtime of
/// the application ([`current`](TokioExecutor::current),
/// [`Builder::handle`]) or on one it owns ([`Builder::multi_thread`],
/// [`Builder::current_thread`]).
///
/// Programs run through [`IORuntime`] (`block_on`, `try_block_on`,
/// `spawn`, `metrics`, `fiber_dump`, `from_env`, `shutdown`: import the
/// trait); from async code, [`run_async`](TokioExecutor::run_async).
///
/// Dropping it shuts it down: it runs no more programs, and fibers it
/// still has are dropped (an owned runtime is shut down and waited for;
/// on an attached runtime each queued fiber is dropped when tokio next
/// polls it, and a sleeping one when its timer fires). [`Handle`]s that
/// outlive it answer [`RunError::ShutDown`].
pub struct TokioExecutor {
    handle: Handle,
    owned: Option<Owned>,
    /// The starvation watchdog's thread, when on: stopped first by `stop`.
    pub(crate) watchdog: Option<Watchdog>,
}

impl fmt::Debug for TokioExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_tokio::TokioExecutor")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

impl TokioExecutor {
    pub(crate) fn from_parts(handle: Handle, owned: Option<Owned>) -> TokioExecutor {
        TokioExecutor {
            handle,
            owned,
            watchdog: None,
        }
    }

    /// An executor with the default configuration (an owned multi-thread
    /// runtime, one worker per CPU; the environment is not read):
    /// `TokioExecutor::builder().build()`.
    pub fn new() -> Result<TokioExecutor, BuildError> {
        Builder::new().build()
    }

    /// A builder to configure the executor.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// An executor attached to the tokio runtime of the calling code
    /// (`tokio::runtime::Handle::try_current`): from async code, or inside
    /// a `Runtime::enter` guard. Elsewhere [`BuildError::NoCurrentRuntime`];
    /// on a runtime without timers [`BuildError::TimersDisabled`].
    pub fn current() -> Result<TokioExecutor, BuildError> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => Builder::new().handle(handle).build(),
            Err(_) => Err(BuildError::NoCurrentRuntime),
        }
    }

    /// Runs `io` from async code and resolves to its outcome. See
    /// [`Handle::run_async`].
    pub fn run_async<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> impl Future<Output = Result<Outcome<A, E>, RunError>> + Send + 'static {
        self.handle.run_async(io)
    }

    /// Shuts the executor down (the body of `IORuntime::shutdown` and, with
    /// no timeout, of `Drop`) and says what an owned runtime left running:
    /// see the `IORuntime` implementation below.
    fn stop(&mut self, timeout: Option<Duration>) -> Result<(), ShutdownTimedOut> {
        // The watchdog thread first (it holds a handle): joined, never left
        // behind.
        drop(self.watchdog.take());
        self.handle.shared.begin_shutdown();
        // Dropping a runtime (or waiting for its thread) where blocking is
        // not allowed would panic in tokio: inside a tokio context the
        // owned runtime is shut down in the background instead.
        let in_tokio = tokio::runtime::Handle::try_current().is_ok();
        // Whether the owned runtime's shutdown was waited for.
        let waited = match self.owned.take() {
            None => false,
            Some(Owned::MultiThread(runtime)) => match (in_tokio, timeout) {
                (true, _) => {
                    runtime.shutdown_background();
                    false
                }
                (false, Some(timeout)) => {
                    runtime.shutdown_timeout(timeout);
                    true
                }
                (false, None) => {
                    drop(runtime);
                    true
                }
            },
            Some(Owned::CurrentThread { stop, driver }) => {
                let _ = stop.send(timeout);
                // On the driver itself (a fiber dropped its executor) or in
                // a tokio context, the driver finishes on its own.
                let on_driver = driver.thread().id() == std::thread::current().id();
                let join = !on_driver && !in_tokio;
                if join {
                    let _ = driver.join();
                }
                join
            }
        };
        // tokio drops the blocking calls still queued when its runtime
        // shuts down (each call's count goes with it) and leaves the ones
        // running after the timeout: those are what is still counted.
        let blocking = self.handle.shared.counters.blocking.load(Ordering::Relaxed);
        if waited && blocking > 0 {
            Err(ShutdownTimedOut::new(None, blocking))
        } else {
            Ok(())
        }
    }
}

/// exec-tokio's side of the surface every executor shares (see
/// [`IORuntime`]'s table). `block_on_with` parks the calling thread while
/// tokio runs the main fiber (io-core's [`ParkedBlockOn`], as the handle's
/// `block_on`).
///
/// `shutdown` gives an owned runtime at most `timeout` to stop (tokio's
/// `shutdown_timeout`: workers finish the task they run, queued and
/// sleeping fibers are dropped without running their finalizers, and
/// blocking threads still busy after `timeout` are left behind), then
/// reports the `IO::blocking` calls still running
/// (`blocking_calls_still_running`; exec-tokio counts its own). What tokio
/// does not tell is not reported: `threads_still_running` is `None`
/// (`shutdown_timeout` does not say which of its threads it left behind),
/// and `spawn_blocking` work of other code on an owned runtime is not
/// counted. On an attached runtime it only lets go of the executor's
/// fibers (see [`TokioExecutor`]) and waits for nothing, as it does inside
/// a tokio context, where the owned runtime shuts down in the background:
/// `Ok(())` then says only that the shutdown has begun.
impl IORuntime for TokioExecutor {
    type Handle = Handle;
    type Metrics = Metrics;
    type BuildError = BuildError;

    /// An owned multi-thread runtime (one worker per CPU) with the fiber
    /// configuration of the environment.
    fn from_env() -> Result<TokioExecutor, BuildError> {
        Builder::new().fiber_config_from_env().build()
    }

    fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Returns `Err(RunError::Nested)` where blocking would stall tokio
    /// (see the handle's `ParkedBlockOn::refuses_block_on_here`; from
    /// async code: [`run_async`](TokioExecutor::run_async)).
    fn block_on_with<A, E>(
        &self,
        io: IO<A, E>,
        on_deadlock: OnDeadlock,
    ) -> Result<Outcome<A, E>, RunError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        ParkedBlockOn::block_on_with(&self.handle, io, on_deadlock)
    }

    /// The executor's counters and what tokio's stable metrics tell
    /// ([`Handle::metrics`]).
    fn handle_metrics(handle: &Handle) -> Metrics {
        handle.metrics()
    }

    fn shutdown(mut self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        self.stop(Some(timeout))
    }
}

impl Drop for TokioExecutor {
    fn drop(&mut self) {
        let _ = self.stop(None);
    }
}
