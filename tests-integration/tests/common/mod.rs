//! Shared test harness: one test body, every executor.
//!
//! Following tokio's `rt_test!` habit, a test written once inside
//! [`rt_test!`] is stamped into one module per executor (`single::...`,
//! `wstp::...`, `batching::...`, and exec-tokio on both tokio flavours,
//! `tokio::...` and `tokio_current::...`), so that every executor is held
//! to the same behaviour. Each stamped module provides, for the body to use:
//!
//! * `Rt`: the executor's type, an [`IORuntime`] (and a [`TestRuntime`]);
//! * `run(io)`: runs `io` on a fresh executor and returns its [`Outcome`];
//! * `try_run(io)`: the same with `try_block_on`: `Err(RunError::Deadlock)`
//!   when the executor proves the program can never finish (a dropped
//!   callback, `IO::never`);
//! * `rt()` / `rt_with_config(config)`: an executor instance, to run several
//!   programs on the same one (`rt.run(io)`, or any [`IORuntime`] method:
//!   `rt.try_block_on(io)`, `Rt::from_env()`), to take fiber dumps of it
//!   (`rt.dumper()`, a function any thread or fiber may call), and to read
//!   what it counts of its sockets (`rt.io_probe()`, likewise; `None` on an
//!   executor that does not count them, [`TestRuntime::COUNTS_ITS_SOCKETS`]).
//!
//! Everything that runs a program, builds from the environment or takes a
//! dump is [`IORuntime`]'s, the one shape of every executor: the harness
//! adds only what tests need on top ([`TestRuntime`]: the test executor's
//! builder and its socket counts), implemented in a few lines per
//! executor. The socket suites (`net_*.rs`) share the helpers of [`net`].
//!
//! # Adding an executor
//!
//! Implement [`TestRuntime`] for its type (how the tests build it, and how
//! it counts its sockets) and add one line to the list in [`rt_test!`].
//!
//! Only one `rt_test!` invocation per test file: each one declares the
//! modules `single`, `wstp`, `batching`, `tokio` and `tokio_current`.

#![allow(dead_code, unused_macros, unused_imports)]

use spindle_core::executor::OnDeadlock;
use spindle_core::{Executor, FiberConfig, FiberDump, IO, IORuntime, Outcome, RuntimeBuilder};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Takes a fiber dump of one executor ([`Executor::fiber_dump`]), from any
/// thread or from inside one of its fibers.
pub type Dumper = Arc<dyn Fn() -> FiberDump + Send + Sync>;

/// The one error of every executor's `block_on`, `try_block_on`, `spawn`.
pub use spindle_core::error::RunError;

#[cfg(unix)]
pub mod net;
pub mod props;
pub mod storm;

/// What an executor counts of its sockets (spindle-net's I/O capability),
/// summed over its pollers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoCounts {
    /// Sockets registered with its pollers; `None` where the executor does
    /// not count them (exec-single counts only waiters).
    pub sources: Option<usize>,
    /// Fibers waiting for the readiness of a socket.
    pub waiters: usize,
}

/// Reads an executor's [`IoCounts`], from any thread or from inside one of
/// its fibers (as a [`Dumper`] takes a dump). An executor whose readiness is
/// not its own to count (exec-tokio: tokio's driver) reads `None`: a test
/// then synchronises by what it can observe instead.
#[derive(Clone)]
pub struct IoProbe(Arc<dyn Fn() -> Option<IoCounts> + Send + Sync>);

impl IoProbe {
    /// The counts now; `None` if the executor counts nothing.
    pub fn counts(&self) -> Option<IoCounts> {
        (self.0)()
    }

    /// Fibers waiting for a socket now; `None` if not counted.
    pub fn waiters(&self) -> Option<usize> {
        self.counts().map(|counts| counts.waiters)
    }

    /// Sockets registered now; `None` if not counted.
    pub fn sources(&self) -> Option<usize> {
        self.counts().and_then(|counts| counts.sources)
    }
}

impl fmt::Debug for IoProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IoProbe({:?})", self.counts())
    }
}

/// The worker threads of the exec-wstp test runtime (so that every shared
/// test body also runs with real parallelism and stealing).
pub const WSTP_WORKERS: usize = 2;

/// The worker threads of exec-tokio's owned multi-thread test runtime:
/// as many as exec-wstp's, for the same real parallelism.
pub const TOKIO_WORKERS: usize = 2;

/// What tests need of an executor beyond [`IORuntime`]: how the tests build
/// it, and what it counts of its sockets. The rest is written once, here,
/// over [`IORuntime`].
pub trait TestRuntime: IORuntime {
    /// Whether the executor counts its own sockets: its pollers are its
    /// own (exec-single, exec-wstp, exec-batching), not another runtime's
    /// driver (exec-tokio: tokio's). Where it does not, [`io_counts`]
    /// reads `None`, and tests synchronise by what they can observe.
    ///
    /// [`io_counts`]: TestRuntime::io_counts
    const COUNTS_ITS_SOCKETS: bool;

    /// The test executor with the given fiber configuration.
    fn with_config(config: FiberConfig) -> Self;

    /// What the executor behind `handle` counts of its sockets now (`None`
    /// unless [`COUNTS_ITS_SOCKETS`](TestRuntime::COUNTS_ITS_SOCKETS)).
    fn io_counts(handle: &Self::Handle) -> Option<IoCounts>;

    /// The test executor with the default fiber configuration.
    fn new() -> Self {
        Self::with_config(FiberConfig::default())
    }

    /// Runs `io` as the main fiber until it ends (`block_on`); a `block_on`
    /// error fails the test.
    fn run<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> Outcome<A, E> {
        self.block_on(io)
            .unwrap_or_else(|e| panic!("block_on failed: {e}"))
    }

    /// A function that takes a fiber dump of this executor, from any thread.
    fn dumper(&self) -> Dumper {
        let handle = self.handle().clone();
        Arc::new(move || handle.fiber_dump())
    }

    /// A function that reads what this executor counts of its sockets.
    fn io_probe(&self) -> IoProbe {
        let handle = self.handle().clone();
        IoProbe(Arc::new(move || Self::io_counts(&handle)))
    }

    /// Fibers waiting for a socket now (exec-wstp: over every worker's
    /// poller); `None` on an executor that does not count them.
    fn io_waiters(&self) -> Option<usize> {
        self.io_probe().waiters()
    }

    /// Sockets registered now; `None` on an executor that does not count
    /// them.
    fn io_sources(&self) -> Option<usize> {
        self.io_probe().sources()
    }
}

/// exec-single on the system clock.
pub type Single = spindle_exec_single::SingleThreaded<spindle_exec_single::StdClock>;
/// exec-wstp with [`WSTP_WORKERS`] workers.
pub type Wstp = spindle_exec_wstp::Runtime;
/// exec-batching in its default batching mode (microtask batches of 64).
/// Every shared body runs on it unchanged: the loop is single-threaded
/// like exec-single, and wake-ups from other threads go through its remote
/// queue.
pub type Batching = spindle_exec_batching::EventLoop;

/// exec-tokio owning a tokio multi-thread runtime with [`TOKIO_WORKERS`]
/// workers: fibers are tokio tasks, stolen between workers, woken through
/// tokio's LIFO slot and injection queue (the flavour most tokio
/// applications run).
pub type Tokio = spindle_exec_tokio::TokioExecutor;

impl TestRuntime for Single {
    const COUNTS_ITS_SOCKETS: bool = true;

    fn with_config(config: FiberConfig) -> Self {
        Single::builder()
            .fiber_config(config)
            .build()
            .expect("build the test executor")
    }

    fn io_counts(handle: &Self::Handle) -> Option<IoCounts> {
        Some(IoCounts {
            sources: None,
            waiters: handle.metrics().io_waiters,
        })
    }
}

impl TestRuntime for Wstp {
    const COUNTS_ITS_SOCKETS: bool = true;

    fn with_config(config: FiberConfig) -> Self {
        Wstp::builder()
            .worker_threads(WSTP_WORKERS)
            .fiber_config(config)
            .build()
            .expect("build the test executor")
    }

    fn io_counts(handle: &Self::Handle) -> Option<IoCounts> {
        let metrics = handle.metrics();
        Some(IoCounts {
            sources: Some(metrics.io_sources),
            waiters: metrics.io_waiters,
        })
    }
}

impl TestRuntime for Batching {
    const COUNTS_ITS_SOCKETS: bool = true;

    fn with_config(config: FiberConfig) -> Self {
        Batching::builder()
            .fiber_config(config)
            .build()
            .expect("build the test executor")
    }

    fn io_counts(handle: &Self::Handle) -> Option<IoCounts> {
        let metrics = handle.metrics();
        Some(IoCounts {
            sources: Some(metrics.io_sources),
            waiters: metrics.io_waiters,
        })
    }
}

impl TestRuntime for Tokio {
    const COUNTS_ITS_SOCKETS: bool = false;

    fn with_config(config: FiberConfig) -> Self {
        Tokio::builder()
            .multi_thread(TOKIO_WORKERS)
            .fiber_config(config)
            .build()
            .expect("build the test executor")
    }

    fn io_counts(_handle: &Self::Handle) -> Option<IoCounts> {
        None
    }
}

/// exec-tokio owning a tokio current-thread runtime, driven by one thread
/// of its own: every fiber on one thread, as most `#[tokio::test]`s run.
/// A distinct type, so that the macros below stamp it like any executor:
/// an [`IORuntime`] that is exec-tokio's, on that flavour (its `from_env`
/// too).
pub struct TokioCurrent(pub spindle_exec_tokio::TokioExecutor);

impl std::ops::Deref for TokioCurrent {
    type Target = spindle_exec_tokio::TokioExecutor;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// exec-tokio's [`IORuntime`], on a current-thread runtime it owns.
impl IORuntime for TokioCurrent {
    type Handle = spindle_exec_tokio::Handle;
    type Metrics = spindle_exec_tokio::Metrics;
    type BuildError = spindle_exec_tokio::BuildError;

    fn from_env() -> Result<Self, Self::BuildError> {
        Tokio::builder()
            .current_thread()
            .fiber_config_from_env()
            .build()
            .map(TokioCurrent)
    }

    fn handle(&self) -> &Self::Handle {
        self.0.handle()
    }

    fn block_on_with<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
        on_deadlock: OnDeadlock,
    ) -> Result<Outcome<A, E>, RunError> {
        self.0.block_on_with(io, on_deadlock)
    }

    fn handle_metrics(handle: &Self::Handle) -> Self::Metrics {
        Tokio::handle_metrics(handle)
    }

    fn shutdown(self, timeout: Duration) -> Result<(), spindle_core::error::ShutdownTimedOut> {
        self.0.shutdown(timeout)
    }
}

impl TestRuntime for TokioCurrent {
    const COUNTS_ITS_SOCKETS: bool = false;

    fn with_config(config: FiberConfig) -> Self {
        Tokio::builder()
            .current_thread()
            .fiber_config(config)
            .build()
            .map(TokioCurrent)
            .expect("build the test executor")
    }

    fn io_counts(_handle: &Self::Handle) -> Option<IoCounts> {
        None
    }
}

/// Stamps each test of the block into one module per executor.
///
/// ```ignore
/// rt_test! {
///     fn pure_produces_its_value() {
///         assert_eq!(run(IO::<i32, ()>::pure(1)), Outcome::Succeeded(1));
///     }
/// }
/// ```
macro_rules! rt_test {
    ($($tests:tt)*) => {
        $crate::common::stamp_rt_tests! { single, $crate::common::Single, $($tests)* }
        $crate::common::stamp_rt_tests! { wstp, $crate::common::Wstp, $($tests)* }
        $crate::common::stamp_rt_tests! { batching, $crate::common::Batching, $($tests)* }
        $crate::common::stamp_rt_tests! { tokio, $crate::common::Tokio, $($tests)* }
        $crate::common::stamp_rt_tests! { tokio_current, $crate::common::TokioCurrent, $($tests)* }
    };
}
pub(crate) use rt_test;

/// Stamps the tests into `mod $module` for the runtime `$rt`.
macro_rules! stamp_rt_tests {
    ($module:ident, $rt:ty, $( $(#[$meta:meta])* fn $name:ident() $body:block )*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use $crate::common::TestRuntime as _;
            #[allow(unused_imports)]
            use spindle_core::IORuntime as _;

            /// This module's executor.
            #[allow(dead_code)]
            type Rt = $rt;

            /// Runs `io` on a fresh executor.
            #[allow(dead_code)]
            fn run<A: Send + 'static, E: Send + 'static>(
                io: spindle_core::IO<A, E>,
            ) -> spindle_core::Outcome<A, E> {
                <Rt as $crate::common::TestRuntime>::new().run(io)
            }

            /// Runs `io` on a fresh executor (`try_block_on`); `Err` if it
            /// can never finish.
            #[allow(dead_code)]
            fn try_run<A: Send + 'static, E: Send + 'static>(
                io: spindle_core::IO<A, E>,
            ) -> Result<spindle_core::Outcome<A, E>, $crate::common::RunError> {
                <Rt as $crate::common::TestRuntime>::new().try_block_on(io)
            }

            /// A fresh executor, to run several programs on.
            #[allow(dead_code)]
            fn rt() -> Rt {
                <Rt as $crate::common::TestRuntime>::new()
            }

            /// A fresh executor with the given fiber configuration.
            #[allow(dead_code)]
            fn rt_with_config(config: spindle_core::FiberConfig) -> Rt {
                <Rt as $crate::common::TestRuntime>::with_config(config)
            }

            $(
                #[test]
                $(#[$meta])*
                fn $name() $body
            )*
        }
    };
}
pub(crate) use stamp_rt_tests;

/// The stack size of the threads that stack-safety tests run on: small
/// enough that recursion per level of a million-deep program overflows.
pub const SMALL_STACK: usize = 256 * 1024;

/// Runs `f` on a new thread with a [`SMALL_STACK`]; re-raises its panic.
pub fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let handle = std::thread::Builder::new()
        .name("small-stack".into())
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn a small-stack thread");
    match handle.join() {
        Ok(r) => r,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// A shared counter, for "ran exactly n times" assertions.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    /// A counter at zero.
    pub fn new() -> Self {
        Counter::default()
    }

    /// Adds one; returns the count before.
    pub fn incr(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst)
    }

    /// The current count.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// A program that adds one when it runs.
    pub fn incr_io<E: Send + 'static>(&self) -> IO<(), E> {
        let counter = self.clone();
        IO::delay(move || {
            counter.incr();
        })
    }
}

impl fmt::Debug for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counter({})", self.get())
    }
}

/// Counts its own drops in a [`Counter`]: put one in a closure's captures to
/// see when the closure (or the program holding it) is freed.
#[derive(Debug)]
pub struct DropCounter(pub Counter);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.incr();
    }
}

/// A shared, ordered event log.
#[derive(Clone)]
pub struct Log<T>(Arc<std::sync::Mutex<Vec<T>>>);

impl<T: Clone> Default for Log<T> {
    fn default() -> Self {
        Log::new()
    }
}

impl<T: Clone> Log<T> {
    /// An empty log.
    pub fn new() -> Self {
        Log(Arc::new(std::sync::Mutex::new(Vec::new())))
    }

    /// Appends an event.
    pub fn push(&self, event: T) {
        self.0.lock().unwrap().push(event);
    }

    /// The events so far, in order.
    pub fn events(&self) -> Vec<T> {
        self.0.lock().unwrap().clone()
    }
}

impl<T: Clone + Send + 'static> Log<T> {
    /// A program that appends `event` when it runs.
    pub fn record<E: Send + 'static>(&self, event: T) -> IO<(), E> {
        let log = self.clone();
        IO::delay(move || log.push(event))
    }
}

/// A program that cedes until `condition` holds (for a test to wait until
/// another fiber has reached a point it cannot signal with a `Deferred`, such
/// as a suspension inside `IO::from_callback`). Panics after a great many cedes, so
/// that a condition that never holds fails the test instead of hanging it.
///
/// Not for `TestControl`: a fiber that keeps ceding is always runnable, so
/// virtual time would never advance.
pub fn eventually<E: Send + 'static>(
    condition: impl Fn() -> bool + Send + Sync + 'static,
) -> IO<(), E> {
    const MAX_CEDES: usize = 1_000_000;
    let condition = Arc::new(condition);
    IO::tail_rec(0usize, move |cedes| {
        let condition = condition.clone();
        IO::cede().map(move |()| {
            if condition() {
                std::ops::ControlFlow::Break(())
            } else if cedes >= MAX_CEDES {
                panic!("eventually: the condition did not hold after {MAX_CEDES} cedes")
            } else {
                std::ops::ControlFlow::Continue(cedes + 1)
            }
        })
    })
}

/// Runs `f` on a new thread and waits at most `limit` for its result:
/// `None` if it did not finish in time (the thread is then left behind).
/// For tests whose failure mode is a hang; the limit is generous.
pub fn within<R: Send + 'static>(
    limit: std::time::Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(r)) => Some(r),
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => None,
    }
}

/// The generous limit for [`within`].
pub const HANG_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

// ----- cancellation at every step -----------------------------------------------

/// A fiber configuration where every fiber yields after each step, so
/// that another fiber's cancellation can land between any two steps.
pub fn yield_after_every_step() -> spindle_core::FiberConfig {
    spindle_core::FiberConfig::builder()
        .auto_yield_after(1)
        .build()
        .expect("a valid configuration")
}

/// `io` after `steps` steps of its own (a `defer` each: with a yield after
/// every step, one turn each).
pub fn after_steps<E: Send + 'static>(steps: usize, io: IO<(), E>) -> IO<(), E> {
    if steps == 0 {
        io
    } else {
        IO::defer(move || after_steps(steps - 1, io))
    }
}

/// Starts `holder` after `steps` steps of its own, cancels it at once and
/// joins it: as `steps` grows, the cancellation lands at each step of the
/// holder in turn.
pub fn cancel_after<E: Send + 'static>(
    steps: usize,
    holder: IO<(), E>,
) -> IO<spindle_core::Outcome<(), E>, E> {
    after_steps(steps, holder)
        .start()
        .flat_map(|h| h.cancel().product_r(h.join()))
}

/// One test at a time among the tests of a binary that share process-wide
/// state (open files, signal handlers), and a leak check: dropped at the
/// end of a passing test, it asserts that `count` is back where it was
/// when the test began.
pub struct Serial {
    count: fn() -> usize,
    what: &'static str,
    before: usize,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl Serial {
    /// Takes `lock` (a poisoned lock is taken too: the test that poisoned
    /// it failed already) and reads `count`, which names `what` it counts.
    pub fn take(
        lock: &'static std::sync::Mutex<()>,
        count: fn() -> usize,
        what: &'static str,
    ) -> Serial {
        let guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Serial {
            count,
            what,
            before: count(),
            _guard: guard,
        }
    }

    /// The count when the test began.
    pub fn before(&self) -> usize {
        self.before
    }
}

impl Drop for Serial {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_eq!(
                (self.count)(),
                self.before,
                "every {} the test made is gone",
                self.what
            );
        }
    }
}
