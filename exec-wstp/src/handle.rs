//! [`Handle`]: what fibers and other threads hold of the pool, the state
//! the workers share, and the [`Executor`] implementation.

use std::fmt;
use std::time::Duration;

use crossbeam_deque::{Injector, Stealer};
use crossbeam_utils::CachePadded;
use spindle_core::executor::ParkedBlockOn;
use spindle_core::executor::support::{
    BlockingPool, FiberRegistry, Origin, RunSlot, TimerHeap, nanos, wall_clock,
};
use spindle_core::{BlockingTask, Executor, Fiber, FiberConfig, FiberDump, FiberId, TimerCallback};
use spindle_net::driver::{Poller, Reactor};

use crate::idle::Idle;
use crate::metrics::{self, Metrics};
use crate::park;
use crate::sync::{self, Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering, fence};
use crate::timer::TimerKey;
use crate::worker;

/// Fiber counters of one worker (written by that worker only) or of the
/// threads outside the pool (written with atomic adds). (Fibers made are
/// counted once for the pool, `Shared::created`, which numbers them.)
///
/// Besides the fibers ended and canceled (the latter also a subset of the
/// former), a worker counts its steals, parks, the fibers readiness
/// resumed from its polls of the poller, and the timers it fired: all off
/// the per-fiber path but for `ended`, which was already there, and
/// `ran`, the fibers this worker ran, which a searcher reads to tell
/// whether the owner keeps up with its queue (`worker.rs`, stealing).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) ended: AtomicU64,
    pub(crate) ran: AtomicU64,
    pub(crate) canceled: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) io_events: AtomicU64,
    pub(crate) timers_fired: AtomicU64,
}

impl Counters {
    /// The sum of one counter over the workers and the outside threads.
    pub(crate) fn sum(shared: &Shared, counter: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        let mut total = counter(&shared.external).load(Ordering::Relaxed);
        for remote in shared.remotes.iter() {
            total += counter(&remote.counters).load(Ordering::Relaxed);
        }
        total
    }
}

/// What other threads may touch of a worker.
pub(crate) struct Remote {
    pub(crate) stealer: Stealer<Fiber<Handle>>,
    pub(crate) timers: Mutex<TimerHeap>,
    /// A hint that the shard may hold timers (skips the lock when idle).
    pub(crate) has_timers: AtomicBool,
    pub(crate) counters: CachePadded<Counters>,
}

/// The pool's poller, as `park.rs` sleeps in it.
pub(crate) struct IoPoller(pub(crate) Poller);

impl park::Poll for IoPoller {
    fn poll(&mut self, timeout: Option<Duration>) -> usize {
        match self.0.poll(timeout) {
            Ok(resumed) => resumed,
            Err(_) => {
                // A broken poller: sleep a little instead of spinning;
                // timers and queues are checked again on return.
                let nap = Duration::from_millis(1);
                std::thread::sleep(timeout.map_or(nap, |t| t.min(nap)));
                0
            }
        }
    }
}

impl park::Notify for Reactor {
    fn notify(&self) {
        Reactor::notify(self);
    }
}

/// The state shared by the workers and every [`Handle`].
pub(crate) struct Shared {
    pub(crate) injector: Injector<Fiber<Handle>>,
    pub(crate) remotes: Box<[Remote]>,
    /// The pool's I/O reactor: where every socket of the pool registers.
    pub(crate) reactor: Reactor,
    /// Its poller, and where the workers sleep (`park.rs`).
    pub(crate) driver: park::Driver<IoPoller, Reactor>,
    pub(crate) idle: Idle,
    pub(crate) config: FiberConfig,
    pub(crate) global_queue_interval: u32,
    pub(crate) shutdown: AtomicBool,
    /// A `std` `Arc`, as io-core's pool takes it (under loom the shim's
    /// `Arc` is loom's; the pool is not modelled).
    pub(crate) blocking: std::sync::Arc<BlockingPool>,
    pub(crate) origin: Origin,
    /// The live fibers, while they are listed (`Builder::track_fibers`, or
    /// they trace): shard `i` for worker `i`, the last for other threads.
    pub(crate) fibers: FiberRegistry,
    /// Fibers made, on any thread: one relaxed add per fiber, in
    /// `next_fiber_id`, which numbers the fiber from it (`#1`, `#2`, ... in
    /// the order the pool made them).
    pub(crate) created: CachePadded<AtomicU64>,
    pub(crate) external: CachePadded<Counters>,
    pub(crate) running_workers: Mutex<usize>,
    pub(crate) workers_exited: Condvar,
    /// The starvation watchdog's slots, one per worker (`None`: the
    /// watchdog is off; io-core's `support::watchdog`).
    pub(crate) watch_slots: Option<Box<[std::sync::Arc<RunSlot>]>>,
}

impl Shared {
    #[inline]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.origin.elapsed_nanos()
    }

    /// Wakes a sleeping worker if nobody searches (idle.rs, rule 2). The
    /// caller made work visible just before.
    #[inline]
    pub(crate) fn notify_one(&self) {
        if let Some(worker) = self.idle.worker_to_notify() {
            self.driver.unpark(worker);
        }
    }

    /// After a push: the fence of the module doc of `idle`, then rule 2.
    #[inline]
    pub(crate) fn notify_after_push(&self) {
        fence(Ordering::SeqCst);
        self.notify_one();
    }

    /// Work another worker could take: the global queue or a local queue.
    pub(crate) fn has_visible_work(&self) -> bool {
        !self.injector.is_empty() || self.remotes.iter().any(|r| !r.stealer.is_empty())
    }

    pub(crate) fn inject(&self, fiber: Fiber<Handle>) {
        self.injector.push(fiber);
        self.notify_after_push();
    }

    pub(crate) fn worker_exited(&self) {
        let mut running = self.running_workers.lock();
        *running -= 1;
        if *running == 0 {
            // Nothing polls the reactor any more.
            self.reactor.set_driven(false);
            self.workers_exited.notify_all();
        }
    }

    /// Sets the shutdown flag and wakes every thread.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        for worker in 0..self.remotes.len() {
            self.driver.unpark(worker);
        }
    }

    /// Drops every fiber still reachable from the shared state (queued
    /// globally, or held by a timer): they hold handles to this state, so
    /// this also breaks the reference cycles.
    pub(crate) fn drop_pending(&self) {
        loop {
            match self.injector.steal() {
                crossbeam_deque::Steal::Success(fiber) => drop(fiber),
                crossbeam_deque::Steal::Retry => continue,
                crossbeam_deque::Steal::Empty => break,
            }
        }
        for remote in self.remotes.iter() {
            let callbacks = remote.timers.lock().drain();
            drop(callbacks);
        }
        // Fibers waiting for I/O; later waits on the pool's sockets fail
        // (the reactor is closed).
        let waiters = self.reactor.close();
        drop(waiters);
        self.fibers.clear();
    }

    pub(crate) fn live_fibers_count(&self) -> u64 {
        let created = self.created.load(Ordering::Relaxed);
        let mut ended = self.external.ended.load(Ordering::Relaxed);
        for remote in self.remotes.iter() {
            ended += remote.counters.ended.load(Ordering::Relaxed);
        }
        created.saturating_sub(ended)
    }
}

/// The thread that runs a `block_on`'s main fiber before the workers take
/// it over (see `ParkedBlockOn::start_main` below): marked, so that a `block_on` from inside
/// that fiber is refused as nested (it would wait on the very thread the
/// fiber needs).
///
/// A main fiber that yields (`cede`, or its auto-yield budget) while it runs
/// here is kept here and run again at once, as tokio's `block_on` polls its
/// future again on the calling thread: the other fibers run on the workers
/// meanwhile, so nothing waits for it, and a program that only computes and
/// yields never pays a hand-off. Only a wait (a suspension) hands it to the
/// workers: whatever resumes it schedules it there.
mod inline {
    use std::cell::{Cell, RefCell};

    use super::{Fiber, Handle, Shared};

    thread_local! {
        /// The pool (its shared state's address) whose main fiber this
        /// thread runs now; 0 when none.
        static RUNS: Cell<usize> = const { Cell::new(0) };
        /// The main fiber, when it yielded during the inline run.
        static YIELDED: RefCell<Option<Fiber<Handle>>> = const { RefCell::new(None) };
    }

    /// Keeps the yielding main fiber for the inline run to run again.
    pub(super) fn keep(fiber: Fiber<Handle>) {
        YIELDED.with(|yielded| *yielded.borrow_mut() = Some(fiber));
    }

    /// The main fiber, if it yielded since the last call.
    pub(super) fn take_yielded() -> Option<Fiber<Handle>> {
        YIELDED.with(|yielded| yielded.borrow_mut().take())
    }

    /// Whether this thread runs a main fiber of `shared` now.
    pub(super) fn runs(shared: &Shared) -> bool {
        RUNS.try_with(|runs| runs.get() == shared as *const Shared as usize)
            .unwrap_or(false)
    }

    /// Marks the thread for the duration of the inline run (restored when
    /// dropped, also when unwinding).
    pub(super) struct Enter {
        previous: usize,
    }

    impl Enter {
        pub(super) fn new(shared: &Shared) -> Enter {
            let key = shared as *const Shared as usize;
            Enter {
                previous: RUNS.with(|runs| runs.replace(key)),
            }
        }
    }

    impl Drop for Enter {
        fn drop(&mut self) {
            let _ = RUNS.try_with(|runs| runs.set(self.previous));
        }
    }
}

/// The executor handle fibers hold: cheap to clone, usable from any
/// thread; implements [`Executor`] (whose [`spawn`](Executor::spawn) and
/// [`fiber_dump`](Executor::fiber_dump) work from any thread) and
/// [`ParkedBlockOn`] (`block_on` and `try_block_on` from any thread that
/// is not one of the pool's).
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spindle_exec_wstp::Handle")
            .field("workers", &self.shared.remotes.len())
            .finish_non_exhaustive()
    }
}

/// Adds one to a counter that only this thread writes.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// Adds `n` to a counter that only this thread writes.
#[inline(always)]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

impl Executor for Handle {
    type TimerKey = TimerKey;
    type FiberSlot = ();

    #[inline]
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => ctx.schedule_next(fiber),
            None => shared.inject(fiber),
        })
    }

    #[inline]
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        let shared = &*self.shared;
        if shared.is_shutdown() {
            drop(fiber);
            return;
        }
        worker::with_current(shared, |ctx| match ctx {
            // Behind the local work, without waking anyone: if the queue is
            // empty (and so is the global one) this worker runs the fiber
            // again at once.
            Some(ctx) => ctx.yield_fiber(fiber),
            // The main fiber, yielding while `block_on` runs it on the
            // calling thread: run again there (see `inline`).
            None if inline::runs(shared) => inline::keep(fiber),
            None => shared.inject(fiber),
        })
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
        let (shard, on_owner) = worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => (ctx.index, true),
            None => (0, false),
        });
        let remote = &shared.remotes[shard];
        let key = TimerKey {
            shard: shard as u32,
            id: remote.timers.lock().insert(deadline_ns, callback),
        };
        remote.has_timers.store(true, Ordering::Relaxed);
        if !on_owner {
            // Set from outside the pool: the owner may sleep past this
            // deadline; wake it so that it recomputes its timeout.
            shared.driver.unpark(shard);
        }
        if shared.is_shutdown() {
            drop(remote.timers.lock().drain());
        }
        key
    }

    fn cancel_timer(&self, key: TimerKey) {
        if let Some(remote) = self.shared.remotes.get(key.shard as usize) {
            let callback = remote.timers.lock().cancel(key.id);
            drop(callback);
        }
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    fn spawn_blocking(&self, task: BlockingTask) {
        BlockingPool::spawn(&self.shared.blocking, task);
    }

    /// The pool's count of fibers made, which this bumps (one relaxed
    /// add, the only read-modify-write of a fiber start shared by the
    /// workers), is also where the numbers come from.
    #[inline]
    fn next_fiber_id(&self) -> FiberId {
        let made = self.shared.created.fetch_add(1, Ordering::Relaxed);
        FiberId::nth(made.wrapping_add(1))
    }

    #[inline]
    fn fiber_listed(&self, fiber: &Fiber<Self>) {
        let shared = &*self.shared;
        if shared.fibers.is_enabled() {
            // The shard of the worker that ran the fiber, or the shared
            // one for a thread outside the pool (an inline `block_on`).
            let shard = worker::with_current(shared, |ctx| {
                ctx.map_or(shared.remotes.len(), |ctx| ctx.index)
            });
            shared.fibers.register(shard, fiber);
        }
    }

    /// Every live fiber (while fibers are listed: see
    /// [`track_fibers`](spindle_core::RuntimeBuilder::track_fibers)) and the pool's `workers`, `local queues`
    /// (summed over the workers), `global queue`, `timers`,
    /// `blocking threads` and `parked workers`.
    fn fiber_dump(&self) -> FiberDump {
        metrics::fiber_dump(&self.shared)
    }

    #[inline]
    fn fiber_ended(&self) {
        let shared = &*self.shared;
        worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => bump(&shared.remotes[ctx.index].counters.ended),
            None => {
                shared.external.ended.fetch_add(1, Ordering::Relaxed);
            }
        })
    }

    #[inline]
    fn fiber_canceled(&self) {
        let shared = &*self.shared;
        worker::with_current(shared, |ctx| match ctx {
            Some(ctx) => bump(&shared.remotes[ctx.index].counters.canceled),
            None => {
                shared.external.canceled.fetch_add(1, Ordering::Relaxed);
            }
        })
    }

    /// Everything but the per-worker queue depth of fibers in a worker's
    /// `next` slot (not stealable, not counted).
    fn counters(&self) -> spindle_core::RuntimeCounters {
        metrics::counters(&self.shared)
    }

    /// From the start of the runtime's shutdown (or drop) on.
    #[inline]
    fn is_shut_down(&self) -> bool {
        self.shared.is_shutdown()
    }

    /// As a nested `block_on`: on one of the pool's workers, or in the
    /// inline run of its `block_on`'s main fiber.
    fn refuses_blocking_here(&self) -> bool {
        ParkedBlockOn::refuses_block_on_here(self)
    }
}

/// `block_on` through the handle, from any thread that is not one of the
/// pool's (io-core's [`ParkedBlockOn`]; the runtime's `IORuntime::block_on`
/// is the same call). The main fiber runs on the calling thread until its
/// first wait (see `start_main`); a `block_on` of a program that can never
/// finish waits for the workers to exit, then returns
/// `Err(RunError::ShutDown)`.
impl ParkedBlockOn for Handle {
    /// On one of this runtime's own worker threads (inside a fiber) a
    /// `block_on` would wait on the very pool that has to run the program:
    /// refused (`Err(RunError::Nested)`; start and join the program
    /// instead), as it is from inside the part of a main fiber that runs on
    /// the calling thread.
    fn refuses_block_on_here(&self) -> bool {
        let shared = &*self.shared;
        worker::with_current(shared, |ctx| ctx.is_some()) || inline::runs(shared)
    }

    /// The main fiber runs here first, on the calling thread, until it
    /// first waits or ends (tokio's `block_on` runs its future on the
    /// calling thread): a program that never waits costs no hand-off to a
    /// worker and back, two thread wake-ups; a yield runs it again here.
    /// Whatever resumes it after a wait schedules it on the workers as
    /// usual. Sockets it makes meanwhile register with the pool's poller.
    fn start_main(&self, fiber: Fiber<Handle>) {
        let shared = &*self.shared;
        let _inline = inline::Enter::new(shared);
        spindle_net::driver::with_driver(&shared.reactor, || {
            let mut fiber = fiber;
            loop {
                fiber.run();
                match inline::take_yielded() {
                    Some(yielded) => fiber = yielded,
                    None => break,
                }
            }
        });
    }

    /// Workers leave their loops only on shutdown, and the last one to
    /// leave notifies `workers_exited` (under `running_workers`, so that no
    /// wake-up is lost between the check and the wait).
    fn wait_until_shut_down(&self) {
        let shared = &*self.shared;
        let mut running = shared.running_workers.lock();
        while *running > 0 {
            running = sync::wait(&shared.workers_exited, running);
        }
    }
}

impl Handle {
    /// A snapshot of the scheduler's state.
    pub fn metrics(&self) -> Metrics {
        metrics::snapshot(&self.shared)
    }

    /// The number of worker threads.
    pub fn worker_threads(&self) -> usize {
        self.shared.remotes.len()
    }
}
