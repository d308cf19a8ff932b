//! The contract between fibers and the executors that run them.
//!
//! A *fiber* interprets one `IO` program. It is generic over its executor
//! `X: Executor`, so every call below is statically dispatched: no `dyn`, no
//! type test, no branch on which executor is running the fiber.
//!
//! # Who calls what
//!
//! | call | made by | from which thread |
//! |---|---|---|
//! | [`Executor::schedule_fiber`] | a new fiber's spawner; the completer of an async callback or a timer that resumes a suspended fiber | **any** thread, and (on exec-single without std) interrupt handlers |
//! | [`Executor::reschedule_fiber`] | the fiber itself, on `IO::cede` and on auto-yield | the thread that was running the fiber, right after it stopped running it |
//! | [`Fiber::run`] | the executor | one of the executor's threads; it returns what became of the fiber ([`Ran`]: completed, waits, yielded) |
//! | [`Fiber::slot`] (the executor's [`Executor::FiberSlot`]) | the executor: whoever holds the fiber (its runner, `schedule_fiber`, `fiber_listed`) | any thread; the slot is made with the fiber and dropped with it, where its last reference goes |
//! | [`Executor::set_timer`] / [`Executor::cancel_timer`] | the fiber, inside `run` | the thread running the fiber |
//! | [`Executor::monotonic`] / [`Executor::real_time`] | the fiber, inside `run` | the thread running the fiber |
//! | [`TimerCallback::fire`] | the executor, once the deadline has passed | any thread |
//! | [`Executor::spawn_blocking`] | the fiber, on `IO::blocking` | the thread running the fiber |
//! | [`BlockingTask::run`] | the executor (once) | any thread that may block |
//! | [`Executor::next_fiber_id`] | io-core, once per fiber, just before `fiber_created` | the thread making the fiber |
//! | [`Executor::fiber_created`] / [`Executor::fiber_ended`] | io-core, once per fiber each | the thread making the fiber / the thread completing it (or freeing it, through the default [`Executor::fiber_freed`]) |
//! | [`Executor::fiber_canceled`] | io-core, once per fiber whose outcome is `Canceled`, before its `fiber_ended` | the thread completing it |
//! | [`Executor::fiber_freed`] | io-core, once per fiber freed before it completed | wherever its last reference goes |
//! | [`Executor::counters`] | an exporter (`spindle-metrics`), the entry point's dump socket, a test | any thread |
//! | [`Executor::fiber_listed`] | io-core, once per fiber that lives on after a run (it waits or yields), never for a fiber that ends within its first run | the thread that ran it, before it can run elsewhere |
//! | [`Executor::fiber_dump`] | whoever wants a fiber dump: an entry point on a signal, a test, a fiber | any thread |
//! | [`IORuntime::block_on`] / [`IORuntime::try_block_on`] (each executor's [`IORuntime::block_on_with`], on a [`support::MainFiber`]) | the application | a thread that is **not** one of the executor's own (else [`RunError::Nested`](support::RunError::Nested)) |
//! | the main fiber's completion ([`support::WakeWaiter::wake`]) | io-core, when the main fiber completes or is freed without completing | any thread |
//! | [`Executor::spawn`] (and [`IORuntime::spawn`], through the handle) | the application, a fiber | any thread ([`RunError::ShutDown`](support::RunError::ShutDown) once [`Executor::is_shut_down`]) |
//! | [`Executor::is_shut_down`] | `spawn`, a parked `block_on` (`ParkedBlockOn`, std) | any thread |
//! | [`Executor::refuses_blocking_here`] | `Dispatcher::run_blocking` | any thread |
//! | I/O readiness (std executors): `spindle_net::driver::IoDriver::register`, `Registration::wait` | a socket operation of spindle-net, inside a fiber | the thread running the fiber; the executor runs its fibers inside `spindle_net::driver::with_driver` |
//!
//! # Guarantees to executors
//!
//! * A [`Fiber`] handle is unique: the same fiber is never scheduled twice
//!   at once and never scheduled while it runs. An executor may therefore
//!   keep handles in plain queues and run each exactly once.
//! * [`Fiber::run`] returns when the fiber completes, suspends (it is then
//!   held by whoever will resume it), or yields (it has then already handed
//!   itself to `reschedule_fiber`). It never blocks the thread, unless user
//!   code in a `delay` does.
//! * Everything a fiber did before it was handed to `schedule_fiber` or
//!   `reschedule_fiber` *happens before* the next `run` of that fiber
//!   (`Release`/`Acquire` through the fiber's state or the executor's queue).
//! * [`Executor::fiber_listed`] runs before the fiber's first wait is
//!   published: whatever it writes into the fiber's slot is seen by the
//!   `schedule_fiber` that ends that wait, and every later one.
//!
//! # Executor data in the fiber
//!
//! Each fiber carries one [`Executor::FiberSlot`] (`()` for most
//! executors: no byte, no code), reachable through [`Fiber::slot`] by
//! whoever holds the fiber. It is how an executor that runs each fiber in
//! a task of its own finds that task again: exec-tokio makes a link
//! ([`support::TaskLink`]) when a fiber first waits (in `fiber_listed`),
//! keeps it in the slot, and `schedule_fiber` hands the fiber back to its
//! task through it. The slot must not keep the fiber alive (no strong
//! reference to it): a fiber whose wakers are all gone is still freed, and
//! its slot dropped with it, which is when such an executor learns that
//! the task has nothing left to run.
//!
//! # Promises executors make
//!
//! * `schedule_fiber` and `reschedule_fiber` never run the fiber inline
//!   (that would recurse); they queue it. A fiber is eventually run after
//!   either call, unless the executor is shut down (it then drops the handle,
//!   which frees the fiber and its pending continuations).
//! * `reschedule_fiber` puts the fiber *behind* work that is already waiting,
//!   so that a cede or an auto-yield really lets others run. A batching
//!   executor may run `schedule_fiber` with microtask semantics (before the
//!   next turn) and `reschedule_fiber` through its macrotask queue.
//! * `monotonic` never goes backwards. `set_timer` fires the callback once,
//!   on or after the deadline, unless `cancel_timer` removed it first;
//!   cancelling a timer that already fired does nothing.
//! * `block_on` waits while the main fiber runs; if the main fiber provably
//!   can never finish it keeps waiting, and `try_block_on` returns
//!   [`RunError::Deadlock`](support::RunError::Deadlock) instead. Both
//!   return an error, never panic and never misbehave, when called from
//!   inside the executor ([`Nested`](support::RunError::Nested)) or after it
//!   was shut down ([`ShutDown`](support::RunError::ShutDown)).
//! * An executor with non-blocking I/O (every std executor of Spindle)
//!   provides the I/O capability of the net layer, `spindle_net::driver`,
//!   which lives beside this contract because it is `std` (io-core is
//!   `no_std`): it runs its fibers inside `with_driver`, so that a socket
//!   made by one of them registers with its driver; a wait for readiness
//!   never loses a readiness that came after its snapshot, a canceled wait
//!   leaves no interest behind, the driver stops watching a descriptor
//!   before it closes it, and a wait the driver cannot serve (shut down,
//!   not polled) fails instead of hanging. The resumed fiber goes through
//!   `schedule_fiber`, from the thread that saw the readiness.
//! * Dropping (or shutting down) an executor frees every fiber and timer
//!   callback it still holds (they hold handles to it: see
//!   [`support`](support#breaking-the-executorfiber-cycle)). A fiber that
//!   waits on a data type or a join is held by what it waits on, not by
//!   the executor: it is freed (and counted by `fiber_ended`) when the
//!   last reference to that goes, which no longer waits for the fiber
//!   itself to go (io-core's `wait/cell.rs`, "Waits nobody can end").
//!
//! # What applications see: [`IORuntime`]
//!
//! This trait is the fibers' side. The application's side of an executor
//! (build it, `block_on`, `spawn`, metrics, dumps, shutdown) is one trait
//! too, [`IORuntime`], implemented by each executor type with the same
//! signatures; its documentation has the table of the public surface
//! every executor shares, and [`RuntimeBuilder`] has the setters every
//! builder shares. A handle (the `Executor`) is what other threads hold:
//! the provided methods [`spawn`](Executor::spawn),
//! [`fiber_dump`](Executor::fiber_dump) and
//! [`live_fibers`](Executor::live_fibers) are written once here for every
//! executor, on top of [`is_shut_down`](Executor::is_shut_down); on an
//! executor whose fibers run on threads of its own, `ParkedBlockOn` (std)
//! gives the handle `block_on` and `try_block_on` for other threads.
//!
//! # Writing an executor
//!
//! [`support`] holds what every executor needs (the main-fiber slot, the
//! fiber registry, the error type, the timer heap, the remote queue, config
//! from the environment, the builders' common settings); an executor adds
//! its queues and its loop, implements this trait on its handle and
//! [`IORuntime`] on itself (and, if its fibers run on threads of its own,
//! `ParkedBlockOn` on its handle: the one parked `block_on`).

use core::time::Duration;

use alloc::vec::Vec;

use crate::config::FiberConfig;
use crate::fiber::handle::FiberHandle;
pub use crate::fiber::{BlockingTask, Fiber, FiberId, Ran, TimerCallback};
use crate::io::IO;

mod counters;
#[cfg(feature = "std")]
mod parked;
mod runtime;
pub mod support;
pub(crate) mod timers;

pub use counters::{RuntimeCounters, WorkerCounters};
#[cfg(feature = "std")]
pub use parked::ParkedBlockOn;
pub use runtime::{IORuntime, OnDeadlock, RuntimeBuilder, ShutdownTimedOut};

/// An executor of fibers: a run queue, timers and a clock.
///
/// See the [module documentation](self) for the contract: who may call
/// what, from which thread, and what ordering is promised.
pub trait Executor: Clone + Send + Sync + Sized + 'static {
    /// Identifies a timer set with [`set_timer`](Executor::set_timer), to
    /// cancel it.
    type TimerKey: Send + 'static;

    /// The executor's own data in every fiber ([`Fiber::slot`]): made with
    /// `Default` when the fiber is made, reachable from any thread that
    /// holds the fiber, dropped with the fiber (on the thread that drops
    /// its last reference). `()` for an executor that needs none (it
    /// costs no byte). exec-tokio keeps there the link to the one tokio
    /// task that owns the fiber for its whole life, so that a resumption
    /// wakes that task instead of spawning one (see the module doc,
    /// "Executor data in the fiber").
    type FiberSlot: Default + Send + Sync + 'static;

    /// Queues a fiber that is ready to run: a new fiber, or one resumed by an
    /// async callback or a timer. May be called from any thread.
    fn schedule_fiber(&self, fiber: Fiber<Self>);

    /// Queues a fiber that gave up its thread on purpose (`IO::cede`,
    /// auto-yield), behind the work already waiting. Called by the thread
    /// that was running the fiber.
    fn reschedule_fiber(&self, fiber: Fiber<Self>);

    /// The monotonic clock: time since an arbitrary, fixed origin.
    fn monotonic(&self) -> Duration;

    /// The wall clock: time since the Unix epoch. Executors without a wall
    /// clock (bare-metal targets) may return their monotonic time; they say
    /// so in their documentation.
    fn real_time(&self) -> Duration {
        self.monotonic()
    }

    /// Arranges for `callback` to be fired once the monotonic clock reaches
    /// `deadline`.
    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> Self::TimerKey;

    /// Removes a timer that has not fired yet (its callback is dropped
    /// without firing); does nothing for a timer that has already fired.
    fn cancel_timer(&self, key: Self::TimerKey);

    /// The run-loop configuration of fibers on this executor.
    fn config(&self) -> &FiberConfig;

    /// Runs `task` (the work of `IO::blocking`) where blocking a thread does
    /// not stall other fibers, for instance on a pool of blocking threads;
    /// the task resumes its fiber when it is done.
    ///
    /// Called by the fiber, on the thread running it. The default runs the
    /// task at once, on the calling thread: right for a single-threaded
    /// executor, where there is no other thread to hand the work to.
    #[inline]
    fn spawn_blocking(&self, task: BlockingTask) {
        task.run()
    }

    /// The number of a fiber being made on this executor ([`FiberId`]), as
    /// dumps and `Debug` show it: called once for every fiber made on this
    /// executor, before its allocation is made and before
    /// [`fiber_created`](Executor::fiber_created), on the thread that
    /// makes it (any thread).
    ///
    /// Number fibers `#1`, `#2`, ... in the order they are made, with one
    /// counter for the whole executor (shared by all its handles): a
    /// [`support::FiberIds`] (one relaxed atomic add), or, for an executor
    /// that counts the fibers it makes anyway, [`FiberId::nth`] of that
    /// count (then counting here, not in `fiber_created`, costs nothing
    /// more). Keep it cheap and lock-free: every fiber start calls it. The
    /// default numbers nothing: every fiber is [`FiberId::UNNUMBERED`]
    /// (`#0`).
    #[inline(always)]
    fn next_fiber_id(&self) -> FiberId {
        FiberId::UNNUMBERED
    }

    /// Called once for every fiber made on this executor, before it is
    /// first scheduled, on the thread that makes it (to count fibers;
    /// listing them for dumps is [`fiber_listed`](Executor::fiber_listed)).
    /// The default does nothing, at no cost.
    #[inline(always)]
    fn fiber_created(&self, fiber: &Fiber<Self>) {
        let _ = fiber;
    }

    /// Called once for a fiber that lives on after one of its runs (it
    /// waits or yields for the first time), on the thread that ran it,
    /// before it can run anywhere else. An executor that lists its live
    /// fibers for dumps keeps a [`WeakFiber`](support::WeakFiber) of it
    /// here (`fiber.downgrade()`, in a [`support::FiberRegistry`]). A
    /// fiber that ends within its first run (most short fibers) is never
    /// listed: spawning many of them costs no listing at all. The default
    /// does nothing, at no cost.
    #[inline(always)]
    fn fiber_listed(&self, fiber: &Fiber<Self>) {
        let _ = fiber;
    }

    /// Called once for every fiber made on this executor when it ends: on
    /// the thread that ran it to completion, or (through
    /// [`fiber_freed`](Executor::fiber_freed), unless the executor
    /// overrides that) wherever it is freed if it never completes (dropped
    /// by a shut-down executor, or suspended with nothing left that could
    /// resume it). With [`fiber_created`](Executor::fiber_created)
    /// it counts live fibers. The default does nothing, at no cost.
    #[inline(always)]
    fn fiber_ended(&self) {}

    /// Called for a fiber whose outcome is `Canceled`, just before its
    /// [`fiber_ended`](Executor::fiber_ended), on the thread that ran it to
    /// that outcome (to count canceled fibers; never called on the path of
    /// a fiber that succeeds or fails). The default does nothing, at no
    /// cost.
    #[inline(always)]
    fn fiber_canceled(&self) {}

    /// Called instead of [`fiber_ended`](Executor::fiber_ended) for a
    /// fiber freed before it completed (dropped by a shut-down executor,
    /// or suspended with nothing left that could resume it), wherever it
    /// is freed (any thread). So `fiber_ended` is left with the fibers that
    /// complete, on the thread that ran them, which an executor whose
    /// fibers all run on one thread can count with a plain load and store.
    /// The default calls `fiber_ended`.
    #[inline(always)]
    fn fiber_freed(&self) {
        self.fiber_ended()
    }

    /// The executor's counters in the executor-independent shape of
    /// [`RuntimeCounters`] (fibers started, completed, canceled and live,
    /// queue depths, steals, parks, I/O events, timers, blocking threads),
    /// for an exporter that serves every executor. Any thread. The default
    /// reports every counter absent.
    fn counters(&self) -> RuntimeCounters {
        RuntimeCounters::default()
    }

    /// A snapshot of this executor's live fibers (state and trace of each)
    /// and of its own state (queue lengths, threads, timers), for a fiber
    /// dump: what Cats Effect prints on `SIGUSR1`. Its
    /// [`Display`](core::fmt::Display) prints one block per fiber.
    ///
    /// May be called from any thread, also from inside a fiber of this
    /// executor. Each number is read at a slightly different moment: a
    /// picture of a moving system, not a transaction.
    ///
    /// Executors list their fibers from [`fiber_listed`](Executor::fiber_listed)
    /// (a [`WeakFibers`](support::WeakFibers) list) only when
    /// [`support::lists_fibers`] holds for their configuration, or when asked to
    /// explicitly (a [`support::FiberRegistry`] does both), so that dumps cost nothing when tracing is off: the
    /// dump then lists no fiber. The default is an empty dump.
    fn fiber_dump(&self) -> crate::FiberDump {
        crate::FiberDump::default()
    }

    /// The live fibers of the [`fiber_dump`](Executor::fiber_dump): number,
    /// status, state and trace of each (empty while the executor does not
    /// list its fibers). Any thread.
    fn live_fibers(&self) -> Vec<crate::FiberInfo> {
        self.fiber_dump().fibers
    }

    /// Whether this executor has been shut down (or dropped, for a handle
    /// that outlived it): it runs nothing any more, and a fiber scheduled
    /// now is dropped. [`spawn`](Executor::spawn) then answers
    /// [`RunError::ShutDown`](support::RunError::ShutDown), and a parked
    /// `block_on` stops waiting. Any thread. An executor sets it before it
    /// drops the fibers it holds, so that whoever finds a fiber freed by
    /// the shutdown also finds the flag. The default: never, for an
    /// executor that cannot be shut down.
    #[inline]
    fn is_shut_down(&self) -> bool {
        false
    }

    /// Whether a thread that waited here for a fiber of this executor
    /// could stall the executor: the calling thread is one of its own (its
    /// loop thread, a worker), or runs one of its fibers now. `Dispatcher`'s
    /// `run_blocking` refuses to wait there (as `block_on` returns
    /// [`RunError::Nested`](support::RunError::Nested)). Any thread. The
    /// default, `false`, suits an executor whose fibers never run on a
    /// thread that could call it.
    #[inline]
    fn refuses_blocking_here(&self) -> bool {
        false
    }

    /// Starts `io` as a new fiber on this executor, from any thread; join
    /// or cancel it through the returned handle.
    /// `Err(RunError::ShutDown)` once the executor is
    /// [shut down](Executor::is_shut_down). On a loop that runs on the
    /// thread calling `block_on` (exec-single, exec-batching), a fiber
    /// spawned from elsewhere waits in the loop's remote queue until the
    /// loop runs. (`FiberHandle::spawn(io, &handle)` starts one without
    /// the check.)
    fn spawn<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Result<FiberHandle<A, E>, support::RunError> {
        if self.is_shut_down() {
            return Err(support::RunError::ShutDown);
        }
        Ok(FiberHandle::spawn(io, self))
    }
}
