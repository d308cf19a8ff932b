//! [`Runtime`]: the pool itself (worker threads, queues, timers, blocking
//! pool), its run API and its shutdown. See the crate documentation for
//! the design.

use std::fmt;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spindle_core::{FiberDump, FiberHandle, FiberInfo, IO, Outcome};

use crate::builder::Builder;
use crate::error::{BuildError, RunError, ShutdownTimedOut};
use crate::handle::Handle;
use crate::metrics::Metrics;
use crate::sync::{self, Mutex};
use crate::worker;

/// A work-stealing runtime: the worker threads, their queues, timers and
/// blocking pool. Dropping it shuts it down and waits for every thread.
pub struct Runtime {
    handle: Handle,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_wstp::Runtime")
            .field("workers", &self.handle.shared.remotes.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    pub(crate) fn from_parts(handle: Handle, threads: Vec<JoinHandle<()>>) -> Runtime {
        Runtime {
            handle,
            threads: Mutex::new(threads),
        }
    }

    /// A runtime with the default configuration (one worker per CPU; the
    /// environment is not read): `Runtime::builder().build()`.
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    /// A builder to configure the runtime.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A runtime with the default configuration and the tracing mode named
    /// by the `SPINDLE_TRACING` environment variable
    /// ([`FiberConfig::from_env`](spindle_core::FiberConfig::from_env);
    /// unset or empty: the default mode); an unknown mode is a
    /// [`BuildError::Config`] naming the valid ones.
    pub fn from_env() -> Result<Runtime, BuildError> {
        Builder::from_env().build()
    }

    /// A handle usable from any thread (and cheap to clone).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `io` on the pool and blocks the calling thread until it ends.
    /// See [`Handle::block_on`].
    pub fn block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RunError> {
        self.handle.block_on(io)
    }

    /// Like [`block_on`](Runtime::block_on), with `Err(RunError::Deadlock)`
    /// when the program can provably never finish. See
    /// [`Handle::try_block_on`].
    pub fn try_block_on<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<Outcome<A, E>, RunError> {
        self.handle.try_block_on(io)
    }

    /// Starts `io` as a new fiber. See [`Handle::spawn`].
    pub fn spawn<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<FiberHandle<A, E>, RunError> {
        self.handle.spawn(io)
    }

    /// A snapshot of the scheduler's state. See [`Metrics`].
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

    /// Stops the runtime: workers finish the fiber they are running and
    /// exit, queued and sleeping fibers are dropped (their finalizers do not
    /// run: cancel fibers first for that), blocking threads exit after their
    /// current call. Waits at most `timeout` for the threads; those still
    /// running then (blocked in user code) are detached. A `timeout` too
    /// large for `Instant` (`Duration::MAX`) waits without a deadline.
    pub fn shutdown(self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        self.stop(Some(timeout))
    }

    fn stop(&self, timeout: Option<Duration>) -> Result<(), ShutdownTimedOut> {
        let shared = &*self.handle.shared;
        // A deadline past what `Instant` can hold (`Duration::MAX`) is no
        // deadline: wait as long as it takes, never panic on the addition.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        shared.begin_shutdown();
        let blocking_threads = shared.blocking.shutdown();
        let on_own_worker = worker::with_current(shared, |ctx| ctx.is_some());
        // Workers still in their loop when the deadline passed (then also
        // blocking threads that did not stop in time).
        let mut still_running = 0;
        {
            let mut running = shared.running_workers.lock();
            while *running > usize::from(on_own_worker) {
                match deadline {
                    None => running = sync::wait(&shared.workers_exited, running),
                    Some(deadline) => {
                        let now = Instant::now();
                        if now >= deadline {
                            still_running += *running - usize::from(on_own_worker);
                            break;
                        }
                        running =
                            sync::wait_timeout(&shared.workers_exited, running, deadline - now);
                    }
                }
            }
        }
        let workers = std::mem::take(&mut *self.threads.lock());
        let current = std::thread::current().id();
        for thread in workers {
            if thread.thread().id() == current {
                // `stop` runs on one of this runtime's workers (a fiber
                // dropped the runtime): it cannot join itself.
                continue;
            }
            // A worker that counted itself out of `running_workers` has left
            // its loop and has only the end of its thread to run: join it, so
            // that no worker thread outlives `stop` (joining only the ones
            // already finished left a worker that was between its count and
            // its exit running after `drop` returned). Only when some
            // workers are still in their loop at the deadline (blocked in
            // user code) are the unfinished ones detached.
            if still_running == 0 || thread.is_finished() {
                let _ = thread.join();
            }
        }
        for thread in blocking_threads {
            let can_join = match deadline {
                None => !on_own_worker,
                Some(deadline) => {
                    while !thread.is_finished() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    thread.is_finished()
                }
            };
            if can_join {
                let _ = thread.join();
            } else {
                still_running += 1;
            }
        }
        shared.drop_pending();
        if still_running == 0 {
            Ok(())
        } else {
            Err(ShutdownTimedOut {
                threads_still_running: still_running,
            })
        }
    }
}

spindle_core::impl_app_runtime!(impl for Runtime { handle: Handle, metrics: Metrics });

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.stop(None);
    }
}

#[cfg(test)]
mod tests {
    //! Small runs of the whole pool, also under Miri (the `unsafe` of the
    //! worker context, the queues, timers, the blocking pool, shutdown).

    use super::*;
    use crate::sync::{AtomicUsize, Ordering};
    use std::sync::Arc as StdArc;

    fn small() -> Runtime {
        Runtime::builder().worker_threads(2).build().unwrap()
    }

    #[test]
    fn fibers_started_on_workers_run_and_are_joined() {
        let rt = small();
        let n = if cfg!(miri) { 8 } else { 1000 };
        let program = IO::<u64, ()>::par_traverse((0..n).collect::<Vec<u64>>(), |i| {
            IO::cede().product_r(IO::delay(move || i))
        })
        .map(|v| v.iter().sum::<u64>());
        assert_eq!(
            rt.block_on(program),
            Ok(Outcome::Succeeded(n * (n - 1) / 2))
        );
        assert_eq!(rt.metrics().live_fibers, 0);
    }

    #[test]
    fn a_sleep_a_blocking_call_and_a_spawn_from_outside_complete() {
        let rt = small();
        let slept: IO<u32, ()> = IO::sleep(Duration::from_millis(1)).map_to(1);
        assert_eq!(rt.block_on(slept), Ok(Outcome::Succeeded(1)));
        let blocked: IO<u32, ()> = IO::blocking(|| 2);
        assert_eq!(rt.block_on(blocked), Ok(Outcome::Succeeded(2)));
        let spawned = rt.spawn(IO::<u32, ()>::pure(3)).unwrap();
        assert_eq!(
            rt.block_on(spawned.join::<()>()),
            Ok(Outcome::Succeeded(Outcome::Succeeded(3)))
        );
    }

    #[test]
    fn shutdown_drops_sleeping_fibers_and_their_pending_work() {
        let rt = small();
        let dropped = StdArc::new(AtomicUsize::new(0));
        struct CountDrop(StdArc<AtomicUsize>);
        impl Drop for CountDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        for _ in 0..3 {
            let guard = CountDrop(dropped.clone());
            let sleeper: IO<(), ()> =
                IO::sleep(Duration::from_secs(3600)).map(move |()| drop(guard));
            rt.spawn(sleeper).unwrap();
        }
        // Each sleeper is held by its worker's timer (or still queued).
        assert_eq!(rt.shutdown(Duration::from_secs(10)), Ok(()));
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn block_on_after_the_last_handle_outlives_the_runtime_reports_shut_down() {
        let rt = small();
        let handle = rt.handle().clone();
        drop(rt);
        assert_eq!(
            handle.block_on(IO::<(), ()>::unit()),
            Err(RunError::ShutDown)
        );
        assert!(matches!(
            handle.spawn(IO::<(), ()>::unit()),
            Err(RunError::ShutDown)
        ));
    }
}
