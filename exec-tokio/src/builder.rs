//! [`Builder`]: configures and builds a [`TokioExecutor`], with the setters
//! every Spindle executor's builder has (`fiber_config`,
//! `fiber_config_from_env`, `track_fibers`, and with std the starvation
//! watchdog's `starvation_threshold` and `on_starvation`: io-core's [`RuntimeBuilder`],
//! over the [`CommonSettings`] embedded here), `build`, and exec-tokio's
//! own: where the runtime comes from (`handle`, `multi_thread`,
//! `current_thread`) and, for a runtime the executor owns, `thread_name`
//! and `max_blocking_threads`.

use std::time::Duration;

use spindle_core::executor::support::{CommonSettings, RunSlots, Watchdog};
use spindle_core::{IORuntime, RuntimeBuilder};

use crate::error::BuildError;
use crate::executor::{Owned, TokioExecutor};
use crate::handle::{Counters, Handle, Shared};
use crate::sync::{Arc, AtomicBool, Condvar, Mutex};

/// The default name of the threads of an owned runtime.
pub const DEFAULT_THREAD_NAME: &str = "spindle-tokio";

/// Where the tokio runtime comes from.
#[derive(Debug, Clone)]
enum Source {
    /// An existing runtime, attached to.
    Attach(tokio::runtime::Handle),
    /// An owned multi-thread runtime (`None`: tokio's default, one worker
    /// per CPU).
    MultiThread(Option<usize>),
    /// An owned current-thread runtime, driven by a thread of its own.
    CurrentThread,
}

/// Configures and builds a [`TokioExecutor`].
///
/// Of [`handle`](Builder::handle), [`multi_thread`](Builder::multi_thread)
/// and [`current_thread`](Builder::current_thread), the last one called
/// says where the runtime comes from; without any, the executor owns a
/// multi-thread runtime with one worker per CPU. The setters every
/// executor's builder has come from [`RuntimeBuilder`] (import it).
#[derive(Debug, Clone)]
pub struct Builder {
    source: Source,
    common: CommonSettings,
    thread_name: Option<String>,
    max_blocking_threads: Option<usize>,
}

impl RuntimeBuilder for Builder {
    fn common_settings(&mut self) -> &mut CommonSettings {
        &mut self.common
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: an owned multi-thread runtime with one worker per CPU
    /// (tokio's default), io-core's default fiber configuration (the
    /// environment is not read: see `IORuntime::from_env`), fibers listed
    /// for dumps while they trace.
    pub fn new() -> Builder {
        Builder {
            source: Source::MultiThread(None),
            common: CommonSettings::default(),
            thread_name: None,
            max_blocking_threads: None,
        }
    }

    /// Runs fibers on an existing tokio runtime, the application's: the
    /// executor attaches to it and owns nothing. Fibers and their timers
    /// are tasks of that runtime, and `IO::blocking` uses its blocking
    /// pool. The runtime must have timers (`enable_time` or `enable_all`),
    /// else [`BuildError::TimersDisabled`].
    pub fn handle(mut self, handle: tokio::runtime::Handle) -> Builder {
        self.source = Source::Attach(handle);
        self
    }

    /// Owns a tokio multi-thread runtime with `worker_threads` workers
    /// (at least 1, else [`BuildError::ZeroWorkerThreads`]), with every
    /// driver tokio offers enabled.
    pub fn multi_thread(mut self, worker_threads: usize) -> Builder {
        self.source = Source::MultiThread(Some(worker_threads));
        self
    }

    /// Owns a tokio current-thread runtime, driven by one thread the
    /// executor starts: every fiber runs on that thread (but the first run
    /// of `block_on`'s main fiber, until it first waits, which is the
    /// caller's), and `block_on` from any other thread waits for it, as on
    /// the other executors.
    pub fn current_thread(mut self) -> Builder {
        self.source = Source::CurrentThread;
        self
    }

    /// The name of the threads of an owned runtime (workers, the driver of
    /// a current-thread runtime, blocking threads); default
    /// [`DEFAULT_THREAD_NAME`]. With [`handle`](Builder::handle), a
    /// [`BuildError::OptionOfOwnedRuntime`].
    pub fn thread_name(mut self, name: impl Into<String>) -> Builder {
        self.thread_name = Some(name.into());
        self
    }

    /// The cap on the blocking threads of an owned runtime (tokio's
    /// default: 512), at least 1. With [`handle`](Builder::handle), a
    /// [`BuildError::OptionOfOwnedRuntime`].
    pub fn max_blocking_threads(mut self, n: usize) -> Builder {
        self.max_blocking_threads = Some(n);
        self
    }

    /// Checks the configuration and attaches to the runtime, or builds and
    /// starts the owned one.
    pub fn build(self) -> Result<TokioExecutor, BuildError> {
        if self.max_blocking_threads == Some(0) {
            return Err(BuildError::ZeroBlockingThreads);
        }
        if let Source::Attach(_) = self.source {
            if self.thread_name.is_some() {
                return Err(BuildError::OptionOfOwnedRuntime("thread_name"));
            }
            if self.max_blocking_threads.is_some() {
                return Err(BuildError::OptionOfOwnedRuntime("max_blocking_threads"));
            }
        }
        if let Source::MultiThread(Some(0)) = self.source {
            return Err(BuildError::ZeroWorkerThreads);
        }
        let fiber_config = self.common.fiber_config().map_err(BuildError::Config)?;
        let starvation = self.common.starvation().map_err(BuildError::Config)?;
        let thread_name = self
            .thread_name
            .unwrap_or_else(|| String::from(DEFAULT_THREAD_NAME));
        let (tokio, owned) = match self.source {
            Source::Attach(handle) => {
                if !has_timers(&handle) {
                    return Err(BuildError::TimersDisabled);
                }
                (handle, None)
            }
            Source::MultiThread(workers) => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                if let Some(workers) = workers {
                    builder.worker_threads(workers);
                }
                let runtime = owned_runtime(builder, &thread_name, self.max_blocking_threads)?;
                (runtime.handle().clone(), Some(Owned::MultiThread(runtime)))
            }
            Source::CurrentThread => {
                let builder = tokio::runtime::Builder::new_current_thread();
                let runtime = owned_runtime(builder, &thread_name, self.max_blocking_threads)?;
                let handle = runtime.handle().clone();
                (
                    handle,
                    Some(Owned::start_current_thread(runtime, &thread_name)?),
                )
            }
        };
        let origin = {
            let _context = tokio.enter();
            tokio::time::Instant::now()
        };
        // One registry shard per worker and one more: fibers spread over
        // them by number (round robin).
        let shards = tokio.metrics().num_workers() + 1;
        let fibers = self.common.registry(&fiber_config, shards);
        let lists_fibers = fibers.is_enabled();
        let watch_slots = starvation.as_ref().map(|_| RunSlots::new());
        let shared = Arc::new(Shared {
            owns_runtime: owned.is_some(),
            tokio,
            fibers,
            config: fiber_config,
            origin,
            counters: Counters::default(),
            shutdown: AtomicBool::new(false),
            stopped: Mutex::new(false),
            stopped_changed: Condvar::new(),
            watch_slots: watch_slots.clone(),
        });
        let mut executor = TokioExecutor::from_parts(Handle { shared }, owned);
        if let (Some(starvation), Some(slots)) = (starvation, watch_slots) {
            // Dropping the executor on failure shuts it down.
            let watchdog = Watchdog::start(
                starvation,
                slots,
                executor.handle().clone(),
                lists_fibers,
                format!("{thread_name}-watchdog"),
            )
            .map_err(BuildError::Watchdog)?;
            executor.watchdog = Some(watchdog);
        }
        Ok(executor)
    }
}

/// Builds an owned runtime with every driver tokio offers.
fn owned_runtime(
    mut builder: tokio::runtime::Builder,
    thread_name: &str,
    max_blocking_threads: Option<usize>,
) -> Result<tokio::runtime::Runtime, BuildError> {
    builder.enable_all().thread_name(thread_name);
    if let Some(n) = max_blocking_threads {
        builder.max_blocking_threads(n);
    }
    builder.build().map_err(BuildError::Runtime)
}

/// Whether the runtime of `handle` has timers. tokio offers no query for
/// it; making a `Sleep` in its context panics without them, so the
/// probe catches that panic (the panic hook still prints its message,
/// once, for a runtime built without timers).
fn has_timers(handle: &tokio::runtime::Handle) -> bool {
    let _context = handle.enter();
    std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))).is_ok()
}
