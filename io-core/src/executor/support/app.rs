//! [`AppRuntime`]: what the application entry point needs of an executor.

use core::fmt;

use crate::executor::Executor;
use crate::io::IO;
use crate::outcome::Outcome;

use super::RunError;

/// An executor that can run an application's main program: what the
/// application entry point (the `spindle-app` crate's `run`, Cats Effect's
/// `IOApp`) needs of one, so that the entry point is written once for every
/// std executor.
///
/// # The protocol
///
/// The entry point, on the thread that called it (the process's main
/// thread):
///
/// 1. takes [`handle`](AppRuntime::handle) and clones it for a signal
///    thread;
/// 2. starts the main program as a fiber with
///    [`FiberHandle::spawn`](crate::FiberHandle::spawn) on that handle (so
///    that it has a [`CancelHandle`](crate::CancelHandle)), scheduled from
///    outside the executor;
/// 3. calls [`block_on`](AppRuntime::block_on) with a program that joins the
///    main fiber, and returns when it ends.
///
/// Meanwhile the signal thread, another thread, uses only its clone of the
/// handle (an [`Executor`]: `Send + Sync`): it cancels the main fiber by
/// spawning the fiber's cancel program on it (a schedule from outside the
/// loop: a remote push that must wake `block_on` however it waits), and
/// prints [`handle_metrics`](AppRuntime::handle_metrics) and
/// [`Executor::fiber_dump`] for a dump (a dump that lists no fiber while
/// [`lists_fibers`](super::lists_fibers) says fibers do not trace is
/// empty by design, which the entry point says). An executor whose `block_on` runs
/// its loop on the calling thread (exec-single, exec-batching) takes in
/// both through its remote queue while it blocks.
///
/// # Implementing it
///
/// Each method is a call of the executor's inherent API: `handle` and
/// `block_on` are the executor's own of those names, and `handle_metrics`
/// its handle's `metrics()`. For an executor of that shape,
/// [`impl_app_runtime!`](crate::impl_app_runtime) writes the impl in one
/// line, as every executor of this workspace does.
pub trait AppRuntime: Sized {
    /// The handle fibers hold, which other threads use to schedule work
    /// and take dumps.
    type Handle: Executor;
    /// A snapshot of the executor's state, printed at the top of a dump.
    type Metrics: fmt::Display;

    /// The executor's handle.
    fn handle(&self) -> &Self::Handle;

    /// Runs `io` as a fiber and blocks the calling thread until it ends:
    /// the executor's `block_on` (which keeps waiting on a program that
    /// can never finish, as Cats Effect's `unsafeRunSync` does).
    fn block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RunError>;

    /// A snapshot of the state of the executor behind `handle` (its
    /// `metrics()`), callable from any thread.
    fn handle_metrics(handle: &Self::Handle) -> Self::Metrics;
}

/// Implements [`AppRuntime`](crate::executor::support::AppRuntime) for an
/// executor type of the usual shape: a `handle` field holding its handle, an
/// inherent `block_on` with the trait's signature, and a handle with an
/// inherent `metrics()`. What every executor of this workspace has; write
/// the impl by hand for another shape.
///
/// ```text
/// spindle_core::impl_app_runtime!(impl for Runtime { handle: Handle, metrics: Metrics });
/// spindle_core::impl_app_runtime!(impl<C: Clock> for SingleThreaded<C> { handle: Handle<C>, metrics: Metrics });
/// ```
#[macro_export]
macro_rules! impl_app_runtime {
    (impl $(<$($g:ident: $bound:path),*>)? for $rt:ty { handle: $handle:ty, metrics: $metrics:ty $(,)? }) => {
        /// The application entry point's view of this executor (see
        /// `AppRuntime`): its handle, its `block_on`, its metrics.
        impl $(<$($g: $bound),*>)? $crate::executor::support::AppRuntime for $rt {
            type Handle = $handle;
            type Metrics = $metrics;

            fn handle(&self) -> &$handle {
                &self.handle
            }

            fn block_on<A: Send + 'static, E: Send + 'static>(
                &self,
                io: $crate::IO<A, E>,
            ) -> Result<$crate::Outcome<A, E>, $crate::executor::support::RunError> {
                <$rt>::block_on(self, io)
            }

            fn handle_metrics(handle: &$handle) -> $metrics {
                handle.metrics()
            }
        }
    };
}
