//! [`TokioExecutor`]: the executor an application holds, attached to a
//! tokio runtime or owning one; its run API and its shutdown.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use spindle_core::{FiberDump, FiberHandle, FiberInfo, IO, Outcome};

use crate::builder::Builder;
use crate::error::{BuildError, RunError};
use crate::handle::Handle;
use crate::metrics::Metrics;

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
/// Dropping it shuts it down: it runs no more programs, and fibers it
/// still has are dropped (an owned runtime is shut down and waited for;
/// on an attached runtime each queued fiber is dropped when tokio next
/// polls it, and a sleeping one when its timer fires). [`Handle`]s that
/// outlive it answer [`RunError::ShutDown`].
pub struct TokioExecutor {
    handle: Handle,
    owned: Option<Owned>,
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
        TokioExecutor { handle, owned }
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

    /// An executor with the default configuration and the tracing mode
    /// named by the `SPINDLE_TRACING` environment variable
    /// ([`FiberConfig::from_env`](spindle_core::FiberConfig::from_env);
    /// unset or empty: the default mode); an unknown mode is a
    /// [`BuildError::Config`] naming the valid ones.
    pub fn from_env() -> Result<TokioExecutor, BuildError> {
        Builder::from_env().build()
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

    /// A handle usable from any thread (and cheap to clone).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `io` and blocks the calling thread until it ends. See
    /// [`Handle::block_on`] (from async code: [`run_async`](TokioExecutor::run_async)).
    pub fn block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RunError> {
        self.handle.block_on(io)
    }

    /// Like [`block_on`](TokioExecutor::block_on), with
    /// `Err(RunError::Deadlock)` when the program can provably never
    /// finish. See [`Handle::try_block_on`].
    pub fn try_block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RunError> {
        self.handle.try_block_on(io)
    }

    /// Runs `io` from async code and resolves to its outcome. See
    /// [`Handle::run_async`].
    pub fn run_async<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> impl Future<Output = Result<Outcome<A, E>, RunError>> + Send + 'static {
        self.handle.run_async(io)
    }

    /// Starts `io` as a new fiber. See [`Handle::spawn`].
    pub fn spawn<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<FiberHandle<A, E>, RunError> {
        self.handle.spawn(io)
    }

    /// A snapshot of the executor's state. See [`Metrics`].
    pub fn metrics(&self) -> Metrics {
        self.handle.metrics()
    }

    /// The live fibers. See [`Handle::live_fibers`].
    pub fn live_fibers(&self) -> Vec<FiberInfo> {
        self.handle.live_fibers()
    }

    /// A fiber dump. See [`Handle::fiber_dump`].
    pub fn fiber_dump(&self) -> FiberDump {
        self.handle.fiber_dump()
    }

    /// Shuts the executor down, giving an owned runtime at most `timeout`
    /// to stop (tokio's `shutdown_timeout`: workers finish the task they
    /// run, queued and sleeping fibers are dropped without running their
    /// finalizers, and blocking threads still busy after `timeout` are
    /// left behind). On an attached runtime it only lets go of the
    /// executor's fibers (see [`TokioExecutor`]); that runtime stays the
    /// application's.
    pub fn shutdown(mut self, timeout: Duration) {
        self.stop(Some(timeout));
    }

    fn stop(&mut self, timeout: Option<Duration>) {
        self.handle.shared.begin_shutdown();
        // Dropping a runtime (or waiting for its thread) where blocking is
        // not allowed would panic in tokio: inside a tokio context the
        // owned runtime is shut down in the background instead.
        let in_tokio = tokio::runtime::Handle::try_current().is_ok();
        match self.owned.take() {
            None => {}
            Some(Owned::MultiThread(runtime)) => match (in_tokio, timeout) {
                (true, _) => runtime.shutdown_background(),
                (false, Some(timeout)) => runtime.shutdown_timeout(timeout),
                (false, None) => drop(runtime),
            },
            Some(Owned::CurrentThread { stop, driver }) => {
                let _ = stop.send(timeout);
                // On the driver itself (a fiber dropped its executor) or in
                // a tokio context, the driver finishes on its own.
                let on_driver = driver.thread().id() == std::thread::current().id();
                if !on_driver && !in_tokio {
                    let _ = driver.join();
                }
            }
        }
    }
}

spindle_core::impl_app_runtime!(impl for TokioExecutor { handle: Handle, metrics: Metrics });

impl Drop for TokioExecutor {
    fn drop(&mut self) {
        self.stop(None);
    }
}
