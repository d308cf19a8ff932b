//! [`Runtime`]: the pool itself (worker threads, queues, timers, blocking
//! pool), its [`IORuntime`] implementation and its shutdown. See the crate
//! documentation for the design.

use std::fmt;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spindle_core::executor::support::Watchdog;
use spindle_core::executor::{OnDeadlock, ParkedBlockOn};
use spindle_core::{IO, IORuntime, Outcome, RuntimeBuilder};

use crate::builder::Builder;
use crate::error::{BuildError, RunError, ShutdownTimedOut};
use crate::handle::Handle;
use crate::metrics::Metrics;
use crate::sync::{self, Mutex};
use crate::worker;

/// A work-stealing runtime: the worker threads, their queues, timers and
/// blocking pool. Programs run through [`IORuntime`] (`block_on`,
/// `try_block_on`, `spawn`, `metrics`, `fiber_dump`, `from_env`,
/// `shutdown`: import the trait). Dropping it shuts it down and waits for
/// every thread.
pub struct Runtime {
    handle: Handle,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The starvation watchdog's thread, when on: stopped first by
    /// `stop`.
    watchdog: Mutex<Option<Watchdog>>,
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
            watchdog: Mutex::new(None),
        }
    }

    /// Keeps the starvation watchdog's thread, for `stop` to end.
    pub(crate) fn set_watchdog(&self, watchdog: Watchdog) {
        *self.watchdog.lock() = Some(watchdog);
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

    /// Stops the pool (the body of `IORuntime::shutdown` and of `Drop`,
    /// which waits without a deadline): workers finish the fiber they are
    /// running and exit, queued and sleeping fibers are dropped, blocking
    /// threads exit after their current call; those still running at the
    /// deadline (blocked in user code) are detached and reported.
    fn stop(&self, timeout: Option<Duration>) -> Result<(), ShutdownTimedOut> {
        let shared = &*self.handle.shared;
        // A deadline past what `Instant` can hold (`Duration::MAX`) is no
        // deadline: wait as long as it takes, never panic on the addition.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        // The watchdog first (it holds a handle, and watches the workers
        // that are about to stop): joined, never left behind.
        let watchdog = self.watchdog.lock().take();
        drop(watchdog);
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
        // Blocking threads still in a call at the deadline.
        let mut blocking_still_running = 0;
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
                blocking_still_running += 1;
            }
        }
        shared.drop_pending();
        if still_running == 0 {
            Ok(())
        } else {
            Err(ShutdownTimedOut::new(
                Some(still_running),
                blocking_still_running,
            ))
        }
    }
}

/// exec-wstp's side of the surface every executor shares (see
/// [`IORuntime`]'s table). `block_on_with` parks the calling thread while
/// the pool runs the main fiber (io-core's [`ParkedBlockOn`], as the
/// handle's `block_on`); `shutdown` waits at most its
/// timeout for the worker and blocking threads and reports those still
/// running (`threads_still_running`, and `blocking_calls_still_running`:
/// the blocking threads among them).
impl IORuntime for Runtime {
    type Handle = Handle;
    type Metrics = Metrics;
    type BuildError = BuildError;

    fn from_env() -> Result<Runtime, BuildError> {
        Builder::new().fiber_config_from_env().build()
    }

    fn handle(&self) -> &Handle {
        &self.handle
    }

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

    /// The scheduler's state ([`Handle::metrics`]).
    fn handle_metrics(handle: &Handle) -> Metrics {
        handle.metrics()
    }

    fn shutdown(self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        self.stop(Some(timeout))
    }
}

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
    use spindle_core::Executor;
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
