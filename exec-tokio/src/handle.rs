//! [`Handle`]: what fibers and other threads hold of the executor, the
//! state they share, and the [`Executor`] implementation.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use spindle_core::executor::ParkedBlockOn;
use spindle_core::executor::support::{FiberRegistry, MainFiber, RunError, WakeWaiter, wall_clock};
use spindle_core::{
    BlockingTask, Executor, Fiber, FiberConfig, FiberDump, FiberId, IO, Outcome, Ran, TimerCallback,
};

use crate::metrics::{self, Metrics};
use crate::sync::{self, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};
use crate::task::{self, FiberTask, TaskSlot};
use crate::timer::{self, TimerKey};

/// Counters for metrics and dumps (relaxed; a picture of a moving system).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Fibers made (bumped by `next_fiber_id`, which numbers them from it).
    pub(crate) created: AtomicU64,
    pub(crate) ended: AtomicU64,
    /// Fibers whose outcome was `Canceled` (an atomic add on that path
    /// only).
    pub(crate) canceled: AtomicU64,
    /// Timer tasks not yet fired or cancelled.
    pub(crate) timers: Arc<AtomicUsize>,
    /// `IO::blocking` calls queued or running on tokio's blocking pool.
    pub(crate) blocking: Arc<AtomicUsize>,
}

/// The state every [`Handle`] shares.
pub(crate) struct Shared {
    /// The runtime fibers run on (attached or owned).
    pub(crate) tokio: tokio::runtime::Handle,
    pub(crate) owns_runtime: bool,
    pub(crate) config: FiberConfig,
    /// The origin of [`Executor::monotonic`], on tokio's clock.
    pub(crate) origin: tokio::time::Instant,
    /// The live fibers, while they are listed (`Builder::track_fibers`, or
    /// they trace), in shards chosen by fiber number.
    pub(crate) fibers: FiberRegistry,
    pub(crate) counters: Counters,
    pub(crate) shutdown: AtomicBool,
    /// `true` once shut down, under the lock `block_on` waits with.
    pub(crate) stopped: Mutex<bool>,
    pub(crate) stopped_changed: Condvar,
    /// The starvation watchdog's slots, one per tokio thread that has run
    /// a fiber (`None`: off; io-core's `support::watchdog`).
    pub(crate) watch_slots: Option<spindle_core::executor::support::RunSlots>,
}

impl Shared {
    #[inline]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Refuses new work, wakes every `block_on` waiting for a shutdown, and
    /// forgets the listed fibers. (Fibers queued in tokio are dropped when
    /// tokio next polls them, or when an owned runtime is dropped.)
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        *self.stopped.lock() = true;
        self.stopped_changed.notify_all();
        self.fibers.clear();
    }

    pub(crate) fn live_fibers_count(&self) -> u64 {
        let created = self.counters.created.load(Ordering::Relaxed);
        let ended = self.counters.ended.load(Ordering::Relaxed);
        created.saturating_sub(ended)
    }
}

/// The executor handle fibers hold: cheap to clone, usable from any
/// thread (also from async code and from other executors' fibers);
/// implements [`Executor`] (whose [`spawn`](Executor::spawn) and
/// [`fiber_dump`](Executor::fiber_dump) work from any thread) and
/// [`ParkedBlockOn`] (`block_on` and `try_block_on` for threads outside
/// tokio), with [`run_async`](Handle::run_async) for async code.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_tokio::Handle")
            .field("flavor", &metrics::flavor(&self.shared.tokio))
            .field("owns_runtime", &self.shared.owns_runtime)
            .finish_non_exhaustive()
    }
}

/// Wakes a `Handle::run_async` future waiting for its main fiber. `notify_one`
/// keeps a permit when nobody waits yet, so a wake-up between the check
/// and the wait is not lost.
struct NotifyWaiter(Arc<tokio::sync::Notify>);

impl WakeWaiter for NotifyWaiter {
    fn wake(&self) {
        self.0.notify_one();
    }
}

/// The registry shard of a fiber: its number (the registry takes it modulo
/// its shards), so that fibers made one after the other list in different
/// shards.
#[inline]
fn shard_of<X: Executor>(fiber: &Fiber<X>) -> usize {
    fiber.id().get() as usize
}

impl Executor for Handle {
    type TimerKey = TimerKey;
    /// The link to the fiber's own tokio task (see the `task` module).
    type FiberSlot = TaskSlot;

    /// A resumed fiber goes back to its own task, woken through its
    /// `Waker`; a new fiber (or one that never waited in a task) gets a
    /// task spawned for it (see the `task` module).
    #[inline]
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        if let Err(fiber) = task::resume_in_task(fiber) {
            drop(shared.tokio.spawn(FiberTask::run(fiber)));
        }
    }

    /// Leaves the fiber with the tokio task running it, which yields to
    /// the back of tokio's run queue (see the `task` module).
    #[inline]
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        if let Err(fiber) = task::keep_for_yield(task::key(shared), fiber) {
            // Outside a run of its task (the contract rules this out): its
            // task takes it back, or a new one yields before running it.
            if let Err(fiber) = task::resume_in_task(fiber) {
                drop(shared.tokio.spawn(FiberTask::after_yield(fiber)));
            }
        }
    }

    fn monotonic(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.shared.origin)
    }

    fn real_time(&self) -> Duration {
        wall_clock()
    }

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> TimerKey {
        timer::set(&self.shared, deadline, callback)
    }

    fn cancel_timer(&self, key: TimerKey) {
        timer::cancel(key);
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    fn spawn_blocking(&self, task: BlockingTask) {
        task::spawn_blocking(&self.shared, task);
    }

    /// The count of fibers made, which this bumps (one relaxed add), is
    /// also where the numbers come from.
    #[inline]
    fn next_fiber_id(&self) -> FiberId {
        let made = self.shared.counters.created.fetch_add(1, Ordering::Relaxed);
        FiberId::nth(made.wrapping_add(1))
    }

    /// Lists the fiber for dumps, and makes the link to the task running
    /// it (its first wait or yield: see the `task` module).
    #[inline]
    fn fiber_listed(&self, fiber: &Fiber<Self>) {
        self.shared.fibers.register(shard_of(fiber), fiber);
        task::link_on_first_wait(&self.shared, fiber);
    }

    #[inline]
    fn fiber_ended(&self) {
        self.shared.counters.ended.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    fn fiber_canceled(&self) {
        self.shared
            .counters
            .canceled
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Fibers, tokio's global queue and workers, timers pending and
    /// blocking calls; steals, parks, per-worker queue depths and I/O
    /// events are tokio's and absent (see the `metrics` module).
    fn counters(&self) -> spindle_core::RuntimeCounters {
        metrics::counters(&self.shared)
    }

    /// Every live fiber (while fibers are listed: see
    /// [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers)) and the
    /// executor's `workers`, `live fibers`, `timers`, `blocking calls`,
    /// `tokio tasks` (alive on the runtime, fibers' and others') and
    /// `tokio global queue`.
    fn fiber_dump(&self) -> FiberDump {
        metrics::fiber_dump(&self.shared)
    }

    /// From the start of the executor's shutdown (or drop) on.
    #[inline]
    fn is_shut_down(&self) -> bool {
        self.shared.is_shutdown()
    }

    /// As a nested `block_on`: inside a fiber, or on a thread of a tokio
    /// runtime (outside `spawn_blocking`).
    fn refuses_blocking_here(&self) -> bool {
        blocking_would_stall_tokio()
    }
}

/// `block_on` through the handle, from a thread outside tokio (io-core's
/// [`ParkedBlockOn`]; the executor's `IORuntime::block_on` is the same
/// call): the main fiber runs on the calling thread until it first waits,
/// then in a tokio task of its own while the caller parks; a `block_on`
/// of a program that can never finish waits for the shutdown, then
/// returns `Err(RunError::ShutDown)`.
impl ParkedBlockOn for Handle {
    /// Where blocking would stall tokio, a `block_on` returns
    /// `Err(RunError::Nested)` without running anything: inside a fiber of
    /// any exec-tokio executor, and on any thread inside a tokio runtime's
    /// context (a worker thread, async code, a `Runtime::enter` guard, a
    /// thread of tokio's blocking pool started by
    /// `tokio::task::spawn_blocking`, which tokio does not tell apart from a
    /// worker). From async code, await [`run_async`](Handle::run_async)
    /// instead. Inside `IO::blocking` (a thread of the blocking pool running
    /// a Spindle blocking call) blocking is what the thread is for, and
    /// `block_on` works.
    fn refuses_block_on_here(&self) -> bool {
        blocking_would_stall_tokio()
    }

    /// Runs the main fiber on the calling thread (inside the runtime's
    /// context, as a run of this executor) until it first waits or yields:
    /// a program that never waits costs no task, no thread hop and no
    /// wake-up. A fiber that waits or yields then gets its tokio task,
    /// which it keeps for the rest of its life (see the `task` module).
    fn start_main(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        let _context = shared.tokio.enter();
        let end = task::run_here(fiber);
        if end.ran == Ran::Completed || (end.yielded.is_none() && end.link.is_none()) {
            // Completed; or it waits without a link (not made here), and
            // its resumption spawns it a task.
            return;
        }
        drop(shared.tokio.spawn(FiberTask::adopt(end.yielded, end.link)));
    }

    /// The flag is set under `stopped`, so no wake-up is lost between the
    /// check and the wait.
    fn wait_until_shut_down(&self) {
        let shared = &*self.shared;
        let mut stopped = shared.stopped.lock();
        while !*stopped {
            stopped = sync::wait(&shared.stopped_changed, stopped);
        }
    }
}

impl Handle {
    /// Runs `io` as a new fiber and resolves to its outcome: the way in
    /// from async code (a tokio task, `#[tokio::main]`), where `block_on`
    /// is [`RunError::Nested`].
    ///
    /// The future is lazy: the fiber starts when it is first polled. It
    /// resolves to `Err(RunError::Deadlock)` when the fiber can provably
    /// never finish (as `try_block_on`) and to
    /// `Err(RunError::ShutDown)` when the executor is shut down. Dropping
    /// the future does not cancel the fiber: it runs on, detached, as a
    /// tokio task whose `JoinHandle` was dropped; to cancel,
    /// [`spawn`](Executor::spawn) and cancel through the `FiberHandle`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::tokio::TokioExecutor;
    ///
    /// let executor = TokioExecutor::current()?;
    /// let answer = IO::<u32, ()>::delay(|| 21).map(|x| x * 2);
    /// assert_eq!(executor.handle().run_async(answer).await?, Outcome::Succeeded(42));
    /// # Ok(()) }
    /// ```
    pub fn run_async<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> impl Future<Output = Result<Outcome<A, E>, RunError>> + Send + 'static {
        let handle = self.clone();
        async move {
            if handle.shared.is_shutdown() {
                return Err(RunError::ShutDown);
            }
            let notify = Arc::new(tokio::sync::Notify::new());
            let (main, fiber) = MainFiber::new(io, handle.clone(), NotifyWaiter(notify.clone()));
            handle.schedule_fiber(fiber);
            loop {
                if let Some(outcome) = main.take() {
                    return Ok(outcome);
                }
                if main.is_abandoned() {
                    return Err(if handle.shared.is_shutdown() {
                        RunError::ShutDown
                    } else {
                        RunError::Deadlock
                    });
                }
                notify.notified().await;
            }
        }
    }

    /// A snapshot of the executor's state. See [`Metrics`].
    pub fn metrics(&self) -> Metrics {
        metrics::snapshot(&self.shared)
    }

    /// The tokio runtime the fibers run on, to spawn tokio tasks next to
    /// them or to enter its context.
    pub fn tokio_handle(&self) -> &tokio::runtime::Handle {
        &self.shared.tokio
    }
}

/// Whether blocking this thread could stall tokio (see
/// `ParkedBlockOn::refuses_block_on_here` above): inside a fiber, or in a tokio context outside a
/// Spindle blocking call.
fn blocking_would_stall_tokio() -> bool {
    if task::in_fiber() {
        return true;
    }
    !task::in_blocking_call() && tokio::runtime::Handle::try_current().is_ok()
}
