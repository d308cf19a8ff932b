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

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use spindle_core::executor::support::{Parked, Taken, TaskLink};
use spindle_core::{BlockingTask, Fiber, Ran};

use crate::handle::{Handle, Shared};
use crate::sync::{Arc, AtomicUsize, Ordering};

/// The hand-off between a fiber's resumers and its task.
pub(crate) type Link = TaskLink<Fiber<Handle>>;

/// How many times a task runs its fiber again at once, within one poll,
/// when the fiber was resumed while the task was still running it (a
/// resumption from another thread, or a wait that ended during the run),
/// before it yields to tokio's run queue (module doc, "Resumption").
const RERUNS_PER_POLL: u32 = 32;

/// exec-tokio's data in every fiber ([`Executor::FiberSlot`]): the link to
/// the one tokio task that owns the fiber, made when the fiber first waits
/// or yields inside a task (module doc). Nothing to use directly; an
/// application never sees it.
///
/// [`Executor::FiberSlot`]: spindle_core::Executor::FiberSlot
#[derive(Default)]
pub struct TaskSlot {
    link: OnceLock<Arc<Link>>,
}

impl std::fmt::Debug for TaskSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskSlot")
            .field("link", &self.link.get())
            .finish()
    }
}

impl Drop for TaskSlot {
    /// The fiber is freed (it completed, or nothing can resume it any
    /// more): its task, if it is parked, is woken to end.
    fn drop(&mut self) {
        if let Some(link) = self.link.get() {
            // Nothing can be waiting in the link: a fiber in it is alive.
            drop(link.close());
        }
    }
}

thread_local! {
    /// What the run of a fiber inside a [`FiberTask`]'s poll (or the first
    /// run of `block_on`'s main fiber) shares with the executor's calls on
    /// this thread.
    static RUN: RunContext = const {
        RunContext {
            running: Cell::new(0),
            yielded: Cell::new(None),
            link: Cell::new(None),
        }
    };
    /// Whether this thread runs a Spindle `IO::blocking` call.
    static IN_BLOCKING_CALL: Cell<bool> = const { Cell::new(false) };
}

/// See [`RUN`].
struct RunContext {
    /// The executor (its `Shared`'s address) whose fiber this thread runs;
    /// 0 outside.
    running: Cell<usize>,
    /// The fiber that rescheduled itself during that run.
    yielded: Cell<Option<Fiber<Handle>>>,
    /// The link made for the running fiber when it first waited or yielded
    /// during that run (`Executor::fiber_listed`).
    link: Cell<Option<Arc<Link>>>,
}

/// The identity of an executor for the thread-locals above.
#[inline]
pub(crate) fn key(shared: &Shared) -> usize {
    shared as *const Shared as usize
}

/// Whether this thread is running a fiber of any exec-tokio executor.
pub(crate) fn in_fiber() -> bool {
    RUN.with(|run| run.running.get()) != 0
}

/// Whether this thread runs a Spindle `IO::blocking` call.
pub(crate) fn in_blocking_call() -> bool {
    IN_BLOCKING_CALL.with(Cell::get)
}

/// One run of a fiber on this thread: sets [`RUN`] for its executor and
/// restores the previous value when it ends.
struct Running {
    previous: usize,
}

impl Running {
    fn enter(key: usize) -> Running {
        Running {
            previous: RUN.with(|run| run.running.replace(key)),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A fiber or link left behind (the run unwound) is freed here,
        // outside the thread-local's access.
        let (yielded, link) = RUN.with(|run| {
            run.running.set(self.previous);
            (run.yielded.take(), run.link.take())
        });
        drop((yielded, link));
    }
}

/// What one run of a fiber left: what became of it, the link made for it
/// during the run (its first wait or yield), and the fiber itself if it
/// yielded.
pub(crate) struct RunEnd {
    pub(crate) ran: Ran,
    pub(crate) link: Option<Arc<Link>>,
    pub(crate) yielded: Option<Fiber<Handle>>,
}

/// Runs `fiber` on this thread until it completes, waits or yields, as a
/// run of its executor (sockets on tokio's driver; a reschedule kept for
/// the caller, a link made on its first wait handed to the caller).
pub(crate) fn run_here(fiber: Fiber<Handle>) -> RunEnd {
    let running = Running::enter(key(&fiber.executor().shared));
    // Sockets the fiber makes register with tokio's driver (the `io`
    // module): a `static` driver, so that nothing is counted or allocated
    // per poll.
    #[cfg(unix)]
    let ran = crate::io::run_fiber(|| fiber.run());
    #[cfg(not(unix))]
    let ran = fiber.run();
    let (yielded, link) = RUN.with(|run| (run.yielded.take(), run.link.take()));
    drop(running);
    RunEnd { ran, link, yielded }
}

/// Keeps `fiber` in the running task for it to yield, if this thread is
/// running a fiber of the executor `key` and has not kept one yet; hands
/// it back otherwise.
pub(crate) fn keep_for_yield(key: usize, fiber: Fiber<Handle>) -> Result<(), Fiber<Handle>> {
    RUN.with(|run| {
        if run.running.get() != key {
            return Err(fiber);
        }
        match run.yielded.take() {
            None => {
                run.yielded.set(Some(fiber));
                Ok(())
            }
            Some(kept) => {
                run.yielded.set(Some(kept));
                Err(fiber)
            }
        }
    })
}

/// `Executor::fiber_listed`'s part here: the first time `fiber` waits or
/// yields inside a run of this executor (before its wait is published),
/// make the link to the task running it, keep it in the fiber's slot for
/// its resumers and hand it to the task (through [`RUN`]). Elsewhere (no
/// run of this executor on this thread: nothing here does that) the fiber
/// gets no link, and each resumption spawns it a task, as a fallback.
pub(crate) fn link_on_first_wait(shared: &Shared, fiber: &Fiber<Handle>) {
    RUN.with(|run| {
        if run.running.get() != key(shared) {
            return;
        }
        let link = Arc::new(Link::new());
        if fiber.slot().link.set(link.clone()).is_ok() {
            run.link.set(Some(link));
        }
    });
}

/// Hands a resumed `fiber` to its task, if it has one: `Err(fiber)` if it
/// has none yet (the caller spawns one), and the fiber is dropped if its
/// task is gone (only a runtime shutdown drops a task whose fiber lives).
pub(crate) fn resume_in_task(fiber: Fiber<Handle>) -> Result<(), Fiber<Handle>> {
    let Some(link) = fiber.slot().link.get() else {
        return Err(fiber);
    };
    // Our own reference: once delivered, the fiber may run, complete and
    // free its slot (and the task its own) before `deliver` returns.
    let link = link.clone();
    // SAFETY: a `Fiber` handle is unique (the executor contract): this one
    // was resumed once, so it was taken and run by its task since its last
    // delivery, and nobody else delivers it now.
    if let Err(fiber) = unsafe { link.deliver(fiber) } {
        drop(fiber);
    }
    Ok(())
}

/// The tokio task that owns a fiber for its whole life: it runs the fiber,
/// parks (`Pending`) while the fiber waits, runs it again when a resumer
/// hands it back through the link, and ends when the fiber completes, when
/// the fiber is freed (the link is closed), or at shutdown (module doc).
pub(crate) struct FiberTask {
    /// The fiber while the task holds it: before its first run, and
    /// between a yield and the next poll.
    fiber: Option<Fiber<Handle>>,
    /// The link the fiber comes back through, once it has waited.
    link: Option<Arc<Link>>,
    /// Yield once before the first run (a reschedule from outside a run).
    yield_first: bool,
}

impl FiberTask {
    /// A task that runs `fiber` when tokio first polls it.
    pub(crate) fn run(fiber: Fiber<Handle>) -> FiberTask {
        FiberTask {
            fiber: Some(fiber),
            link: None,
            yield_first: false,
        }
    }

    /// A task that goes to the back of tokio's queue before it runs `fiber`.
    pub(crate) fn after_yield(fiber: Fiber<Handle>) -> FiberTask {
        FiberTask {
            fiber: Some(fiber),
            link: None,
            yield_first: true,
        }
    }

    /// The task of a fiber whose first run happened elsewhere (`block_on`'s
    /// main fiber, run on the calling thread until it first waited or
    /// yielded): it holds `fiber` if the fiber yielded, and waits on `link`
    /// for it otherwise.
    pub(crate) fn adopt(fiber: Option<Fiber<Handle>>, link: Option<Arc<Link>>) -> FiberTask {
        FiberTask {
            fiber,
            link,
            yield_first: false,
        }
    }

    /// At the start of a poll without the fiber in hand: the fiber if it
    /// came back through the link, else `Err` with what the poll returns.
    fn from_link(&self, cx: &mut Context<'_>) -> Result<Fiber<Handle>, Poll<()>> {
        let Some(link) = &self.link else {
            return Err(Poll::Ready(()));
        };
        match link.take() {
            Taken::Item(fiber) => Ok(fiber),
            Taken::Empty => match link.park(cx.waker()) {
                Parked::Item(fiber) => Ok(fiber),
                Parked::Parked => Err(Poll::Pending),
                Parked::Closed => Err(Poll::Ready(())),
            },
            Taken::Waking => Err(Poll::Pending),
            Taken::Closed => Err(Poll::Ready(())),
        }
    }
}

impl Future for FiberTask {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if std::mem::take(&mut this.yield_first) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let mut fiber = match this.fiber.take() {
            Some(fiber) => fiber,
            None => match this.from_link(cx) {
                Ok(fiber) => fiber,
                Err(poll) => return poll,
            },
        };
        let mut reruns = RERUNS_PER_POLL;
        loop {
            if fiber.executor().shared.is_shutdown() {
                // `Drop` closes the link: later resumptions drop the fiber.
                drop(fiber);
                return Poll::Ready(());
            }
            let end = run_here(fiber);
            if let Some(link) = end.link {
                this.link = Some(link);
            }
            match (end.ran, end.yielded) {
                (Ran::Completed, _) => return Poll::Ready(()),
                (_, Some(yielded)) => {
                    // tokio reschedules a task woken during its own poll as
                    // a yield: to the back of the run queue (module doc).
                    this.fiber = Some(yielded);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                // It waits (or its yield went through its link: the same
                // from here): park until it comes back.
                (_, None) => {}
            }
            let Some(link) = &this.link else {
                // No link (not made in a run of ours): a resumption spawns
                // the fiber a new task.
                return Poll::Ready(());
            };
            match link.park(cx.waker()) {
                Parked::Parked => return Poll::Pending,
                Parked::Closed => return Poll::Ready(()),
                Parked::Item(next) if reruns > 0 => {
                    reruns -= 1;
                    fiber = next;
                }
                Parked::Item(next) => {
                    this.fiber = Some(next);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Drop for FiberTask {
    /// The task ends (its fiber completed or was freed), or tokio drops it
    /// (the runtime shuts down): later resumptions of the fiber find the
    /// link closed and drop the fiber; a fiber already waiting in the link
    /// is dropped here.
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            drop(link.close());
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
