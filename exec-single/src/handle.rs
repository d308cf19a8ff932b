//! [`Handle`]: what fibers hold of the executor, the shared state behind
//! it, and the [`Executor`] implementation (schedule, timers, clock,
//! fiber registry).

use alloc::collections::VecDeque;
use core::fmt;
use core::time::Duration;

use spindle_core::FiberDump;
#[cfg(doc)]
use spindle_core::executor::support::RunError;
use spindle_core::executor::support::{
    FiberIds, FiberRegistry, Published, RemoteQueue, TimerHeap, TimerId, nanos,
};
use spindle_core::{Executor, Fiber, FiberConfig, FiberId, TimerCallback};

use crate::clock::Clock;
use crate::platform;
#[cfg(not(loom))]
use crate::sync::WithMut;
use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};

/// The executor handle fibers hold: cheap to clone, `Send + Sync`.
///
/// Get one with `IORuntime::handle` on the
/// [`SingleThreaded`](crate::SingleThreaded); it implements [`Executor`],
/// whose [`spawn`](Executor::spawn) starts fibers from any thread (they run
/// at the loop's next turn, from the remote queue) and whose
/// [`fiber_dump`](Executor::fiber_dump) lists them.
pub struct Handle<C: Clock> {
    pub(crate) shared: Arc<Shared<C>>,
}

impl<C: Clock> Clone for Handle<C> {
    fn clone(&self) -> Self {
        Handle {
            shared: self.shared.clone(),
        }
    }
}

impl<C: Clock> fmt::Debug for Handle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_single::Handle")
            .finish_non_exhaustive()
    }
}

/// State touched only by the thread running the loop.
pub(crate) struct Local<C: Clock> {
    pub(crate) run_queue: VecDeque<Fiber<Handle<C>>>,
    /// Deadlines in nanoseconds of the clock ([`nanos`]).
    pub(crate) timers: TimerHeap,
}

pub(crate) struct Shared<C: Clock> {
    pub(crate) clock: C,
    pub(crate) config: FiberConfig,
    pub(crate) local: UnsafeCell<Local<C>>,
    /// Fibers woken from other threads or interrupt handlers; closed when
    /// the executor is dropped.
    pub(crate) remote: RemoteQueue<Fiber<Handle<C>>>,
    /// The live fibers, for dumps: only while fibers trace or with
    /// `Builder::track_fibers` (see the crate documentation).
    pub(crate) fibers: FiberRegistry,
    /// Numbers the fibers `#1`, `#2`, ... in the order they are made.
    pub(crate) ids: FiberIds,
    /// The ready queue's length and the number of timers at the end of the
    /// last turn (for dumps taken off the loop thread).
    pub(crate) published: Published<2>,
    /// The shared half of the I/O capability (the reactor, on the system
    /// clock with `std` on Unix; nothing otherwise): wakes the loop after a
    /// push from elsewhere.
    pub(crate) io: platform::Io,
    /// Counters for `Executor::counters`.
    pub(crate) counters: Counters,
}

/// The loop's counters. All but `freed` are written by the loop thread
/// alone (fibers complete where they run, on the loop thread; parks, polls
/// and timers are the loop's): a relaxed load and store, no
/// read-modify-write, readable from any thread. `freed` (fibers freed
/// before completing) is an atomic add from wherever that happens.
/// `usize` words: native atomics on every target the loop runs on.
pub(crate) struct Counters {
    pub(crate) completed: AtomicUsize,
    pub(crate) canceled: AtomicUsize,
    pub(crate) freed: AtomicUsize,
    pub(crate) parks: AtomicUsize,
    pub(crate) io_events: AtomicUsize,
    pub(crate) timers_fired: AtomicUsize,
}

impl Counters {
    fn new() -> Counters {
        Counters {
            completed: AtomicUsize::new(0),
            canceled: AtomicUsize::new(0),
            freed: AtomicUsize::new(0),
            parks: AtomicUsize::new(0),
            io_events: AtomicUsize::new(0),
            timers_fired: AtomicUsize::new(0),
        }
    }
}

/// Adds `n` to a counter only the loop thread writes.
#[inline(always)]
pub(crate) fn add(counter: &AtomicUsize, n: usize) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Reads a counter.
fn read(counter: &AtomicUsize) -> u64 {
    counter.load(Ordering::Relaxed) as u64
}

// SAFETY: `local` is only accessed by the thread that runs the loop, which
// `platform::on_loop_thread` identifies (with `std`: a thread-local marker
// set for the duration of `block_on`; without `std` there is one context
// that runs the loop, and everything from interrupt handlers goes through
// `remote`). `remote`, `fibers`, `ids` and `published` are locks and atomics;
// `io` is a reactor handle (`Send + Sync`) or nothing. The clock is
// `Send + Sync`.
unsafe impl<C: Clock> Sync for Shared<C> {}
// SAFETY: as above; fibers and timer callbacks are `Send`.
unsafe impl<C: Clock> Send for Shared<C> {}

impl<C: Clock> Shared<C> {
    pub(crate) fn new(
        clock: C,
        config: FiberConfig,
        fibers: FiberRegistry,
        io: platform::Io,
    ) -> Self {
        Shared {
            clock,
            config,
            local: UnsafeCell::new(Local {
                run_queue: VecDeque::new(),
                timers: TimerHeap::new(),
            }),
            remote: RemoteQueue::new(),
            fibers,
            ids: FiberIds::new(),
            published: Published::new(),
            io,
            counters: Counters::new(),
        }
    }

    /// Exclusive access to the loop-thread state.
    ///
    /// # Safety
    /// * The caller runs on the loop thread, and does not hold another
    ///   reference from `local()` (no re-entrancy while it is used:
    ///   `block_on` refuses to run nested, [`RunError::Nested`]).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn local(&self) -> &mut Local<C> {
        // SAFETY: forwarded precondition: nothing else refers to the value
        // while the returned borrow lives. (Under loom the borrow outlives
        // the closure, so loom does not track it: the loop has no loom
        // model; see the sync shim.)
        self.local.with_mut(|local| unsafe { &mut *local })
    }

    /// Queues a fiber from outside the loop thread, and wakes the loop.
    pub(crate) fn push_remote(&self, fiber: Fiber<Handle<C>>) {
        match self.remote.push(fiber) {
            Ok(()) => self.io.wake(&self.clock),
            // The executor is gone: the fiber is freed here.
            Err(fiber) => drop(fiber),
        }
    }
}

impl<C: Clock> Executor for Handle<C> {
    type TimerKey = TimerId;
    type FiberSlot = ();

    #[inline]
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        if platform::on_loop_thread(self.shared_id()) {
            // SAFETY: on the loop thread; the borrow ends within the call.
            unsafe { self.shared.local() }.run_queue.push_back(fiber);
        } else {
            self.shared.push_remote(fiber);
        }
    }

    #[inline]
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        // Called by the loop thread right after running the fiber.
        self.schedule_fiber(fiber)
    }

    fn monotonic(&self) -> Duration {
        self.shared.clock.now()
    }

    fn real_time(&self) -> Duration {
        self.shared.clock.real_time()
    }

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> TimerId {
        // SAFETY: fibers run on the loop thread, and set_timer is called by
        // a running fiber (Executor contract).
        let local = unsafe { self.shared.local() };
        local.timers.insert(nanos(deadline), callback)
    }

    fn cancel_timer(&self, key: TimerId) {
        // SAFETY: as in `set_timer`.
        let local = unsafe { self.shared.local() };
        let callback = local.timers.cancel(key);
        drop(callback);
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    /// On the system clock with `std` on Unix, the executor's blocking pool
    /// (the loop keeps running; the fiber comes back through the remote
    /// queue); elsewhere the calling thread, as the contract's default.
    fn spawn_blocking(&self, task: spindle_core::BlockingTask) {
        if let Err(task) = self.shared.io.spawn_blocking(task) {
            task.run();
        }
    }

    #[inline]
    fn next_fiber_id(&self) -> FiberId {
        self.shared.ids.next()
    }

    #[inline]
    fn fiber_listed(&self, fiber: &Fiber<Self>) {
        self.shared.fibers.register(0, fiber);
    }

    /// A fiber completed: on the loop thread, where fibers run.
    #[inline]
    fn fiber_ended(&self) {
        add(&self.shared.counters.completed, 1);
    }

    #[inline]
    fn fiber_canceled(&self) {
        add(&self.shared.counters.canceled, 1);
    }

    /// Anywhere: an atomic add (rare: a shutdown, a wait nothing can end).
    #[inline]
    fn fiber_freed(&self) {
        self.shared.counters.freed.fetch_add(1, Ordering::Relaxed);
    }

    /// Fibers, the ready (per worker: the loop's) and remote (global)
    /// queues, parks, I/O events, timers and (on the system clock with
    /// `std` on Unix, where it has one) the blocking pool; no steals (one
    /// thread).
    fn counters(&self) -> spindle_core::RuntimeCounters {
        let shared = &*self.shared;
        let metrics = self.metrics();
        let c = &shared.counters;
        let started = shared.ids.made();
        let ended = read(&c.completed) + read(&c.freed);
        let mut out = spindle_core::RuntimeCounters::new("single");
        out.fibers_started_total = Some(started);
        out.fibers_completed_total = Some(ended);
        out.fibers_canceled_total = Some(read(&c.canceled));
        out.fibers_live = Some(started.saturating_sub(ended));
        out.global_queue_depth = Some(metrics.remote_queue as u64);
        let mut worker = spindle_core::WorkerCounters::new();
        worker.queue_depth = Some(metrics.ready_queue as u64);
        worker.parks_total = Some(read(&c.parks));
        worker.timers = Some(metrics.timers as u64);
        out.workers = alloc::vec![worker];
        out.io_events_total = Some(read(&c.io_events));
        out.io_sources = Some(shared.io.sources() as u64);
        out.io_waiters = Some(metrics.io_waiters as u64);
        out.timers = Some(metrics.timers as u64);
        out.timers_fired_total = Some(read(&c.timers_fired));
        if let Some([threads, idle, queued]) = shared.io.blocking_counts() {
            out.blocking_threads = Some(threads as u64);
            out.blocking_threads_idle = Some(idle as u64);
            out.blocking_queue_depth = Some(queued as u64);
        }
        out
    }

    /// Once the executor has been dropped (its remote queue is closed).
    #[inline]
    fn is_shut_down(&self) -> bool {
        self.shared.remote.is_closed()
    }

    /// This thread runs the loop now (a fiber of it is running here).
    fn refuses_blocking_here(&self) -> bool {
        platform::on_loop_thread(self.shared_id())
    }

    /// The live fibers (while they are listed; see the crate documentation)
    /// and the loop's `ready queue`, `remote queue`, `timers` and
    /// `io waiters`.
    fn fiber_dump(&self) -> FiberDump {
        let metrics = self.metrics();
        FiberDump {
            fibers: self.shared.fibers.live_fibers(),
            executor: alloc::vec![
                ("ready queue", metrics.ready_queue as u64),
                ("remote queue", metrics.remote_queue as u64),
                ("timers", metrics.timers as u64),
                ("io waiters", metrics.io_waiters as u64),
            ],
        }
    }
}

/// A snapshot of the loop's queues, timers and I/O waiters.
///
/// On the loop thread (inside a fiber, or between runs) the numbers are
/// exact; elsewhere (another thread, an interrupt handler, any caller
/// without `std`) the ready queue and the timers are as the loop published
/// them at the end of its last turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Fibers ready to run on the loop thread.
    pub ready_queue: usize,
    /// Fibers woken from elsewhere, waiting to be taken in.
    pub remote_queue: usize,
    /// Timers set and not yet fired or cancelled.
    pub timers: usize,
    /// Fibers waiting for socket readiness (always 0 on an executor without
    /// I/O: see the [crate documentation](crate#the-loop)).
    pub io_waiters: usize,
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ready queue: {}; remote queue: {}; timers: {}; io waiters: {}",
            self.ready_queue, self.remote_queue, self.timers, self.io_waiters
        )
    }
}

impl<C: Clock> Handle<C> {
    /// The address of the shared state: the executor's identity for the
    /// loop marker.
    pub(crate) fn shared_id(&self) -> usize {
        Arc::as_ptr(&self.shared) as *const () as usize
    }

    /// A snapshot of the loop's queues, timers and I/O waiters: see
    /// [`Metrics`].
    pub fn metrics(&self) -> Metrics {
        let shared = &*self.shared;
        let [ready_queue, timers] = if platform::on_loop_thread(self.shared_id()) {
            // SAFETY: on the loop thread; the borrow ends with the reads
            // (metrics are read by a running fiber or between fibers, never
            // while another borrow of `local` is live).
            let local = unsafe { shared.local() };
            [local.run_queue.len(), local.timers.len()]
        } else {
            shared.published.load()
        };
        Metrics {
            ready_queue,
            remote_queue: shared.remote.len(),
            timers,
            io_waiters: shared.io.waiters(),
        }
    }
}
