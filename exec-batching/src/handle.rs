//! [`Handle`]: what fibers hold of the loop, the state shared with it, and
//! the [`Executor`] implementation (microtask / macrotask scheduling,
//! timers, blocking work, the fiber registry).

use std::fmt;
use std::time::Duration;

use spindle_core::executor::support::{
    BlockingPool, FiberRegistry, Origin, Published, RemoteQueue, TimerHeap, nanos, wall_clock,
};
use spindle_core::{BlockingTask, Executor, Fiber, FiberConfig, FiberDump, FiberId, TimerCallback};

use crate::TimerKey;
use crate::builder::Mode;
use crate::event_loop::{CURRENT, Local, add, with_local};
use crate::metrics::Metrics;
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering, lock};
use spindle_net::driver::Reactor;

/// The state shared by the loop and every [`Handle`].
pub(crate) struct Shared {
    pub(crate) config: FiberConfig,
    pub(crate) batch_size: usize,
    pub(crate) mode: Mode,
    pub(crate) origin: Origin,
    pub(crate) reactor: Reactor,
    pub(crate) timers: Mutex<TimerHeap>,
    /// Fibers scheduled from other threads (closed when the loop is
    /// dropped: fibers scheduled then are freed at once).
    pub(crate) remote: RemoteQueue<Fiber<Handle>>,
    /// The [`EventLoop`](crate::EventLoop) was dropped: timers set now are
    /// dropped.
    pub(crate) closed: AtomicBool,
    /// The live fibers, while they are listed.
    pub(crate) fibers: FiberRegistry,
    /// Fibers made (bumped by `next_fiber_id`, which numbers them from it).
    pub(crate) created: AtomicU64,
    /// Fibers completed (they complete where they run: on the loop
    /// thread, which alone writes this, canceled too).
    pub(crate) ended: AtomicU64,
    pub(crate) canceled: AtomicU64,
    /// Fibers freed before completing (anywhere: atomic adds).
    pub(crate) freed: AtomicU64,
    /// Waits in the poller with nothing queued, fibers resumed by
    /// readiness, timers fired (the loop thread's).
    pub(crate) parks: AtomicU64,
    pub(crate) io_events: AtomicU64,
    pub(crate) timers_fired: AtomicU64,
    pub(crate) turns: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) microtasks_run: AtomicU64,
    pub(crate) macrotasks_run: AtomicU64,
    /// The microtask and macrotask queue lengths at the end of the last
    /// turn, for dumps taken off the loop thread.
    pub(crate) published: Published<2>,
    /// The threads of `IO::blocking` (shut down when the loop is dropped).
    pub(crate) blocking: Arc<BlockingPool>,
    /// The loop thread's slot of the starvation watchdog (`None`: off;
    /// io-core's `support::watchdog`).
    pub(crate) watch_slot: Option<std::sync::Arc<spindle_core::executor::support::RunSlot>>,
}

impl Shared {
    /// Queues a fiber from a thread that does not run the loop now, and
    /// wakes the loop.
    pub(crate) fn push_remote(&self, fiber: Fiber<Handle>) {
        match self.remote.push(fiber) {
            Ok(()) => self.wake_loop(),
            // The loop is gone: the fiber is freed (outside the lock).
            Err(fiber) => drop(fiber),
        }
    }

    /// Ends the loop's wait in its poller, or makes the next one only look.
    pub(crate) fn wake_loop(&self) {
        self.reactor.notify();
    }
}

/// The executor handle fibers hold: cheap to clone, `Send + Sync`, usable
/// from any thread; implements [`Executor`], whose
/// [`spawn`](Executor::spawn) starts fibers from any thread (from outside
/// the loop they wait in the remote queue until the loop runs) and whose
/// [`fiber_dump`](Executor::fiber_dump) lists them.
///
/// Get one with `IORuntime::handle` on the
/// [`EventLoop`](crate::EventLoop), or inside a running fiber with
/// [`Handle::current`].
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_batching::Handle")
            .field("mode", &self.shared.mode)
            .field("batch_size", &self.shared.batch_size)
            .finish_non_exhaustive()
    }
}

impl Executor for Handle {
    type TimerKey = TimerKey;
    type FiberSlot = ();

    #[inline]
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        let mut fiber = Some(fiber);
        let mode = self.shared.mode;
        with_local(&self.shared, |local| {
            if let Some(fiber) = fiber.take() {
                match mode {
                    Mode::Batching => local.microtasks.push_back(fiber),
                    Mode::Macrotask => local.macrotasks.push_back(fiber),
                }
            }
        });
        if let Some(fiber) = fiber {
            self.shared.push_remote(fiber);
        }
    }

    #[inline]
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        self.shared.requeue(fiber);
    }

    fn monotonic(&self) -> Duration {
        self.shared.origin.elapsed()
    }

    fn real_time(&self) -> Duration {
        wall_clock()
    }

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> TimerKey {
        let shared = &*self.shared;
        let deadline_ns = nanos(deadline);
        let (key, refused) = {
            let mut timers = lock(&shared.timers);
            let key = timers.insert(deadline_ns, callback);
            // Dropped with the loop: take back what was just set (and
            // anything else), to drop outside the lock.
            let refused = if shared.closed.load(Ordering::Relaxed) {
                timers.drain()
            } else {
                Vec::new()
            };
            (key, refused)
        };
        drop(refused);
        if with_local(shared, |_| ()).is_none() {
            // Set from outside the loop: it may be waiting past this
            // deadline; wake it so that it computes its timeout again.
            shared.wake_loop();
        }
        key
    }

    fn cancel_timer(&self, key: TimerKey) {
        let callback = lock(&self.shared.timers).cancel(key);
        drop(callback);
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    /// Hands the blocking work to the loop's blocking pool (io-core's
    /// `BlockingPool`: at most `max_blocking_threads` threads, further
    /// calls queued), never to the loop thread, so that the loop keeps
    /// serving timers and I/O; the fiber resumes on the loop through the
    /// remote queue. See the [crate documentation](crate#blocking-work).
    fn spawn_blocking(&self, task: BlockingTask) {
        BlockingPool::spawn(&self.shared.blocking, task);
    }

    /// The count of fibers made, which this bumps (one relaxed add), is
    /// also where the numbers come from.
    #[inline]
    fn next_fiber_id(&self) -> FiberId {
        let made = self.shared.created.fetch_add(1, Ordering::Relaxed);
        FiberId::nth(made.wrapping_add(1))
    }

    #[inline]
    fn fiber_listed(&self, fiber: &Fiber<Self>) {
        self.shared.fibers.register(0, fiber);
    }

    /// A fiber completed, on the loop thread (where fibers run): a
    /// relaxed load and store.
    #[inline]
    fn fiber_ended(&self) {
        add(&self.shared.ended, 1);
    }

    #[inline]
    fn fiber_canceled(&self) {
        add(&self.shared.canceled, 1);
    }

    /// Anywhere: an atomic add (rare: a shutdown, a wait nothing can end).
    #[inline]
    fn fiber_freed(&self) {
        self.shared.freed.fetch_add(1, Ordering::Relaxed);
    }

    /// Fibers, the remote (global) queue, the loop's queues, parks (waits
    /// in the poller with nothing queued), I/O events, timers and blocking
    /// threads; no steals (one thread). On the loop thread the queue
    /// lengths are exact; elsewhere those at the end of the last turn.
    fn counters(&self) -> spindle_core::RuntimeCounters {
        let shared = &*self.shared;
        shared.counters(with_local(shared, Local::lengths))
    }

    /// Once the [`EventLoop`](crate::EventLoop) has been dropped.
    #[inline]
    fn is_shut_down(&self) -> bool {
        self.shared.closed.load(Ordering::Relaxed)
    }

    /// This thread runs the loop now (a fiber of it is running here).
    fn refuses_blocking_here(&self) -> bool {
        self.is_current()
    }

    /// Every live fiber (while fibers are listed: see
    /// [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers)) and the loop's `microtask queue`,
    /// `macrotask queue`, `remote queue`, `timers`, `io waiters`,
    /// `blocking threads` and `queued blocking calls`. On
    /// the loop thread the queue lengths are exact; elsewhere they are
    /// those at the end of the last turn.
    fn fiber_dump(&self) -> FiberDump {
        let shared = &*self.shared;
        shared.fiber_dump(with_local(shared, Local::lengths))
    }
}

impl Handle {
    /// The handle of the loop running on this thread now (inside a fiber,
    /// or anything a fiber calls); `None` outside an exec-batching loop.
    pub fn current() -> Option<Handle> {
        CURRENT
            .try_with(|cell| {
                let current = cell.try_borrow().ok()?;
                current.as_ref().map(|current| current.handle.clone())
            })
            .ok()
            .flatten()
    }

    /// Whether this thread runs this handle's loop now.
    pub(crate) fn is_current(&self) -> bool {
        with_local(&self.shared, |_| ()).is_some()
    }

    /// A snapshot of the loop's counters.
    pub fn metrics(&self) -> Metrics {
        self.shared.metrics()
    }

    /// The loop's mode.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// The loop's microtask batch bound.
    pub fn batch_size(&self) -> usize {
        self.shared.batch_size
    }
}
