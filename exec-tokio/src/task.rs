//! Fibers as tokio tasks: what `schedule_fiber` and `reschedule_fiber`
//! become.
//!
//! # One tokio task per fiber, for its whole life
//!
//! A fiber is started by `schedule_fiber` as one [`FiberTask`] spawned on
//! the runtime (on a worker, tokio's `spawn` takes that worker's LIFO slot:
//! "run what was just made next", as exec-wstp's next slot; from any other
//! thread, the injection queue). That task keeps the fiber until it ends:
//!
//! * **Start.** The task's first poll runs the fiber. A fiber that ends
//!   within that run (most short ones) ends its task with it, and costs
//!   nothing more than the spawn.
//! * **Wait.** The first time the fiber waits (or yields), io-core calls
//!   `Executor::fiber_listed` on the running thread *before* the wait is
//!   published; there [`link_on_first_wait`] makes the fiber's link (io-core's
//!   `support::TaskLink`, one small allocation for the fiber's life), keeps
//!   it in the fiber's slot ([`TaskSlot`], the executor's
//!   `Executor::FiberSlot`) and hands it to the task through the
//!   thread-local [`RUN`]. When `Fiber::run` returns `Ran::Suspended`, the
//!   task leaves a clone of its `Waker` in the link and returns `Pending`:
//!   it parks, holding only the link, never the fiber.
//! * **Resumption.** Whoever ends the wait (a callback, a timer, a blocking
//!   call, a cancel, on any thread) holds the unique `Fiber` and calls
//!   `schedule_fiber`, which finds the link in the fiber's slot and
//!   delivers the fiber into it ([`resume_in_task`]): the task is woken
//!   through its `Waker` (by value: the clone it left is the one consumed,
//!   so a wake costs tokio no more than a `wake_by_ref`), and its next poll
//!   takes the fiber and runs it. Woken from a worker, tokio puts the task
//!   in that worker's LIFO slot, as the spawn of the former design did; no
//!   task is spawned, no allocation made.
//! * **Resumed while still running.** The fiber may be resumed on another
//!   thread between its suspension and the end of the task's poll. The
//!   task then finds it in the link when it goes to park, and runs it again
//!   at once, in the same poll, up to [`RERUNS_PER_POLL`] times in a row,
//!   then yields to tokio's run queue (the fiber waiting in the task) so
//!   that a ping-pong between threads does not starve the worker's other
//!   tasks.
//! * **End.** The task ends when `Fiber::run` returns `Ran::Completed`.
//!   A fiber freed while it waits (every waker gone: io-core's "waits
//!   nobody can end") drops its slot, which closes the link and wakes the
//!   parked task, which ends. A runtime that shuts down drops the task:
//!   its drop closes the link, and a later resumption finds it closed and
//!   drops the fiber (which a shut-down executor does anyway).
//!
//! Nothing keeps the fiber alive through its task: the link holds the
//! fiber only between a delivery and the task's next poll, so the
//! contract's "a fiber whose wakers are all gone is freed" holds as on
//! every executor, and its task goes with it. The link's own protocol
//! (who owns the fiber and waker cells in which state) is io-core's
//! (`executor/support/task_link.rs`, loom-checked); here only its use.
//!
//! A fiber that waits without a link (one whose first wait was not in a
//! run of this executor: nothing here does that) is started again in a
//! new task by each resumption, as a fallback.
//!
//! # `block_on`: the first run on the calling thread
//!
//! `block_on`'s main fiber is run on the calling thread first (io-core's
//! `ParkedBlockOn::start_main`, as exec-wstp does), inside the runtime's
//! context and as a run of this executor ([`run_here`]: sockets,
//! nested-`block_on` detection, reschedules and links as in a task). A
//! program that never waits is done there: no task, no hop to a worker
//! or to the current-thread runtime's driver thread, no wake-up of the
//! caller. A fiber that waits or yields gets its task then
//! ([`FiberTask::adopt`], with its link or its yielded self), which it
//! keeps from then on; the caller parks until the fiber ends. So the main
//! fiber's first steps (up to its first wait) run beside the runtime's
//! threads, not on them, also on a current-thread runtime.
//!
//! # Reschedule: tokio's yield path, not `spawn`
//!
//! `reschedule_fiber` (a cede, an auto-yield) must put the fiber *behind*
//! the work already waiting. `spawn` from a worker would not: on the
//! multi-thread runtime it takes the LIFO slot, so the fiber would run
//! again next, ahead of everything queued. Instead the fiber stays in the
//! task that ran it: the task runs it with `Fiber::run_with`, so a fiber
//! that yields is handed straight back to the task's run (no clone of the
//! executor's handle per yield); a `reschedule_fiber` called by the thread
//! running the fiber, inside that task's `poll`, leaves the fiber in a
//! thread-local slot ([`RUN`]) instead. Either way, when the run returns,
//! the task takes the fiber back, wakes its own waker and returns
//! `Pending` (the fiber stays in the task: its link is not involved). A task woken
//! during its own poll is rescheduled by tokio as a *yield*: to the back
//! of the worker's local run queue (multi-thread) or of the run queue
//! (current-thread), never to the LIFO slot. That is exactly "behind the
//! work already waiting", at no allocation (no new task per cede). A
//! reschedule outside such a poll (which the contract rules out, but which
//! costs nothing to survive) goes back to the fiber's task through its
//! link, or, for a fiber without one, to a new task that yields once
//! before it runs the fiber: the same yield path.
//!
//! # Sockets
//!
//! Each run of a fiber is wrapped in spindle-net's `with_driver` with
//! this crate's driver (the `io` module), so that the sockets a fiber
//! makes register with tokio's I/O driver. The main fiber of `run_async`
//! runs in such a task too, and the first run of `block_on`'s main fiber
//! is wrapped the same way.
//!
//! # Shutdown
//!
//! A shutdown does not interrupt a run: a fiber running when it begins
//! runs on until it next waits or yields (a callback completed before the
//! fiber's wait was published is part of that run, as on every executor).
//! A task finds the executor shut down before it runs its fiber: it drops
//! the fiber instead, freeing its program and continuations, and ends
//! (closing the link: later resumptions drop the fiber). A resumption
//! after the shutdown drops the fiber in `schedule_fiber`; if that frees
//! it, its slot closes the link and the parked task ends. This is how an
//! executor attached to a runtime it does not own lets go of its fibers
//! without stopping that runtime. (A fiber that waits forever keeps its
//! parked task for as long as it is itself kept: a task is no longer
//! than the fiber's life.)
//!
//! # Blocking calls
//!
//! `IO::blocking` runs on tokio's blocking pool (`spawn_blocking`); the
//! thread is marked as running a Spindle blocking call while it does, so
//! that a `block_on` there is allowed (blocking such a thread is what it
//! is for), where one on a worker thread is [`RunError::Nested`].
//!
//! Design credits: tokio's own task and waker design (a task that parks
//! by returning `Pending` and is found again through its `Waker`, wakes
//! by value that consume the waker's reference, the yield path of a task
//! that wakes itself, the LIFO slot of a wake from a worker); no code is
//! copied.
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
/// before it yields to tokio's run queue (module doc, "Resumed while
/// still running").
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

/// Restores [`RUN`] if a run of a fiber unwinds (a run ends normally in
/// [`run_here`], which forgets this guard).
struct Unwinding {
    previous: usize,
}

impl Drop for Unwinding {
    fn drop(&mut self) {
        // A fiber or link left behind is freed here, outside the
        // thread-local's access.
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
    let key = key(&fiber.executor().shared);
    let previous = RUN.with(|run| run.running.replace(key));
    let unwinding = Unwinding { previous };
    // Sockets the fiber makes register with tokio's driver (the `io`
    // module): a `static` driver, so that nothing is counted or allocated
    // per poll.
    #[cfg(unix)]
    let (ran, requeued) = crate::io::run_fiber(|| run_watched(fiber));
    #[cfg(not(unix))]
    let (ran, requeued) = run_watched(fiber);
    std::mem::forget(unwinding);
    let (kept, link) = RUN.with(|run| {
        run.running.set(previous);
        (run.yielded.take(), run.link.take())
    });
    RunEnd {
        ran,
        link,
        yielded: requeued.or(kept),
    }
}

/// Runs `fiber`, marked in this thread's slot of the starvation watchdog
/// when it is on (one branch when off). A fiber that yields comes back
/// here (`Fiber::run_with`), not through `reschedule_fiber`: no clone of
/// the executor's handle per yield.
#[inline(always)]
fn run_watched(fiber: Fiber<Handle>) -> (Ran, Option<Fiber<Handle>>) {
    let mut requeued = None;
    let requeue = |fiber| requeued = Some(fiber);
    let ran = match fiber.executor().shared.watch_slots.as_ref() {
        None => fiber.run_with(requeue),
        Some(slots) => slots.this_thread().run_with(fiber, requeue),
    };
    (ran, requeued)
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
    // Our own reference: once delivered, the fiber may run, complete and
    // free its slot (and the task its own) before `deliver` returns.
    let Some(link) = fiber.slot().link.get().cloned() else {
        return Err(fiber);
    };
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
}

impl FiberTask {
    /// A task that runs `fiber` when tokio first polls it.
    pub(crate) fn run(fiber: Fiber<Handle>) -> FiberTask {
        FiberTask {
            fiber: Some(fiber),
            link: None,
        }
    }

    /// A task that goes to the back of tokio's queue before it runs `fiber`
    /// (a reschedule from outside a run: rare, so a future of its own, and
    /// every fiber's task stays two words).
    pub(crate) fn after_yield(fiber: Fiber<Handle>) -> AfterYield {
        AfterYield {
            yielded: false,
            task: FiberTask::run(fiber),
        }
    }

    /// The task of a fiber whose first run happened elsewhere (`block_on`'s
    /// main fiber, run on the calling thread until it first waited or
    /// yielded): it holds `fiber` if the fiber yielded, and waits on `link`
    /// for it otherwise.
    pub(crate) fn adopt(fiber: Option<Fiber<Handle>>, link: Option<Arc<Link>>) -> FiberTask {
        FiberTask { fiber, link }
    }

    /// At the start of a poll without the fiber in hand: the fiber if it
    /// came back through the link, else `Err` with what the poll returns.
    fn next_from_link(&self, cx: &mut Context<'_>) -> Result<Fiber<Handle>, Poll<()>> {
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
        let mut fiber = match this.fiber.take() {
            Some(fiber) => fiber,
            None => match this.next_from_link(cx) {
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

/// [`FiberTask::after_yield`]: yields once to tokio's run queue, then is
/// the fiber's task.
pub(crate) struct AfterYield {
    yielded: bool,
    task: FiberTask,
}

impl Future for AfterYield {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !std::mem::replace(&mut self.yielded, true) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Pin::new(&mut self.task).poll(cx)
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
