//! Fibers as tokio tasks: what `schedule_fiber` and `reschedule_fiber`
//! become.
//!
//! # One tokio task per run, not per fiber
//!
//! io-core hands an executor a unique [`Fiber`] each time the fiber is
//! ready; the fiber carries no slot for the executor's own data, so there
//! is no tokio task to "wake" for a fiber that was suspended. Each
//! `schedule_fiber` (a start, or a resumption by a callback, a timer, a
//! blocking call or a cancel) therefore spawns one [`FiberTask`] on the
//! runtime: a future that owns the fiber and runs it, then ends when the
//! fiber completes or suspends (whoever will resume it holds it then).
//! tokio's own `spawn` is the queue: on a worker it goes to that worker's
//! LIFO slot (tokio's "run what was just woken next", as exec-wstp's next
//! slot), from any other thread to the injection queue.
//!
//! # Reschedule: tokio's yield path, not `spawn`
//!
//! `reschedule_fiber` (a cede, an auto-yield) must put the fiber *behind*
//! the work already waiting. `spawn` from a worker would not: on the
//! multi-thread runtime it takes the LIFO slot, so the fiber would run
//! again next, ahead of everything queued. Instead the fiber stays in the
//! task that ran it: `reschedule_fiber` is called by the thread that was
//! running the fiber, inside that task's `poll`, and leaves the fiber in a
//! thread-local slot ([`Running`]); when `Fiber::run` returns, the task
//! takes it back, wakes its own waker and returns `Pending`. A task woken
//! during its own poll is rescheduled by tokio as a *yield*: to the back
//! of the worker's local run queue (multi-thread) or of the run queue
//! (current-thread), never to the LIFO slot. That is exactly "behind the
//! work already waiting", at no allocation (no new task per cede). A
//! reschedule outside such a poll (which the contract rules out, but which
//! costs nothing to survive) spawns a task that yields once before it runs
//! the fiber: the same yield path.
//!
//! # Sockets
//!
//! Each run of a fiber is wrapped in spindle-net's `with_driver` with
//! this crate's driver (the `io` module), so that the sockets a fiber
//! makes register with tokio's I/O driver. The main fiber of `block_on`
//! and `run_async` runs in such a task too.
//!
//! # Shutdown
//!
//! A task finds the executor shut down before it runs its fiber: it drops
//! the fiber instead, freeing its program and continuations. This is how
//! an executor attached to a runtime it does not own lets go of its fibers
//! without stopping that runtime.
//!
//! # Blocking calls
//!
//! `IO::blocking` runs on tokio's blocking pool (`spawn_blocking`); the
//! thread is marked as running a Spindle blocking call while it does, so
//! that a `block_on` there is allowed (blocking such a thread is what it
//! is for), where one on a worker thread is [`RunError::Nested`].
//!
//! [`RunError::Nested`]: crate::RunError::Nested

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use spindle_core::{BlockingTask, Fiber};

use crate::handle::{Handle, Shared};
use crate::sync::{AtomicUsize, Ordering};

thread_local! {
    /// The executor (its `Shared`'s address) whose fiber this thread is
    /// running inside a [`FiberTask`]'s poll; 0 outside.
    static RUNNING: Cell<usize> = const { Cell::new(0) };
    /// The fiber that rescheduled itself during that run.
    static YIELDED: RefCell<Option<Fiber<Handle>>> = const { RefCell::new(None) };
    /// Whether this thread runs a Spindle `IO::blocking` call.
    static IN_BLOCKING_CALL: Cell<bool> = const { Cell::new(false) };
}

/// The identity of an executor for the thread-locals above.
#[inline]
pub(crate) fn key(shared: &Shared) -> usize {
    shared as *const Shared as usize
}

/// Whether this thread is running a fiber of any exec-tokio executor.
pub(crate) fn in_fiber() -> bool {
    RUNNING.with(Cell::get) != 0
}

/// Whether this thread runs a Spindle `IO::blocking` call.
pub(crate) fn in_blocking_call() -> bool {
    IN_BLOCKING_CALL.with(Cell::get)
}

/// The context of one run of a fiber inside a [`FiberTask`]'s poll: sets
/// [`RUNNING`] for its executor and restores the previous value when it
/// ends, taking back a fiber that rescheduled itself.
struct Running {
    previous: usize,
}

impl Running {
    fn enter(key: usize) -> Running {
        Running {
            previous: RUNNING.with(|running| running.replace(key)),
        }
    }

    /// Ends the run: the fiber if it rescheduled itself.
    fn exit(self) -> Option<Fiber<Handle>> {
        YIELDED.with(|slot| slot.borrow_mut().take())
        // `Drop` restores `RUNNING`.
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|running| running.set(self.previous));
        // A fiber left behind (the run unwound) is freed here, outside the
        // slot's borrow.
        let left = YIELDED.with(|slot| slot.borrow_mut().take());
        drop(left);
    }
}

/// Keeps `fiber` in the running task for it to yield, if this thread is
/// running a fiber of the executor `key` and has not kept one yet; hands
/// it back otherwise.
pub(crate) fn keep_for_yield(key: usize, fiber: Fiber<Handle>) -> Result<(), Fiber<Handle>> {
    if RUNNING.with(Cell::get) != key {
        return Err(fiber);
    }
    YIELDED.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_some() {
            return Err(fiber);
        }
        *slot = Some(fiber);
        Ok(())
    })
}

/// The tokio task that runs a fiber until it completes or suspends,
/// yielding to tokio's run queue each time the fiber reschedules itself.
pub(crate) struct FiberTask {
    fiber: Option<Fiber<Handle>>,
    /// Yield once before the first run (a reschedule from outside a run).
    yield_first: bool,
}

impl FiberTask {
    /// A task that runs `fiber` when tokio first polls it.
    pub(crate) fn run(fiber: Fiber<Handle>) -> FiberTask {
        FiberTask {
            fiber: Some(fiber),
            yield_first: false,
        }
    }

    /// A task that goes to the back of tokio's queue before it runs `fiber`.
    pub(crate) fn after_yield(fiber: Fiber<Handle>) -> FiberTask {
        FiberTask {
            fiber: Some(fiber),
            yield_first: true,
        }
    }
}

impl Future for FiberTask {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::take(&mut self.yield_first) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let Some(fiber) = self.fiber.take() else {
            return Poll::Ready(());
        };
        let shared = &fiber.executor().shared;
        if shared.is_shutdown() {
            drop(fiber);
            return Poll::Ready(());
        }
        let running = Running::enter(key(shared));
        // Sockets the fiber makes register with tokio's driver (the `io`
        // module): a `static` driver, so that nothing is counted or
        // allocated per poll.
        #[cfg(unix)]
        crate::io::run_fiber(|| fiber.run());
        #[cfg(not(unix))]
        fiber.run();
        match running.exit() {
            Some(fiber) => {
                // tokio reschedules a task woken during its own poll as a
                // yield: to the back of the run queue (module doc).
                self.fiber = Some(fiber);
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Ready(()),
        }
    }
}

/// Counts one blocking call while it is queued or runs.
pub(crate) struct InFlight(crate::sync::Arc<AtomicUsize>);

impl InFlight {
    pub(crate) fn new(counter: &crate::sync::Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::Relaxed);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `task` on tokio's blocking pool, the thread marked as running a
/// Spindle blocking call. If the runtime is shut down, tokio drops the
/// closure and with it the task (its fiber can then never resume and is
/// freed).
pub(crate) fn spawn_blocking(shared: &Shared, task: BlockingTask) {
    let in_flight = InFlight::new(&shared.counters.blocking);
    drop(shared.tokio.spawn_blocking(move || {
        let _in_flight = in_flight;
        let previous = IN_BLOCKING_CALL.with(|mark| mark.replace(true));
        task.run();
        IN_BLOCKING_CALL.with(|mark| mark.set(previous));
    }));
}
