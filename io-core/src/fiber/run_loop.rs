//! The run-loop: interprets a fiber's nodes with an explicit continuation
//! stack, never by recursion.
//!
//! Each iteration evaluates one node (a *step*). A `Bind` node pushes its
//! continuation as a [`Frame`] and goes on with its source; a result pops one
//! frame per step. Fast path, as in Cats Effect's `IOFiber`: a `flat_map`,
//! `map` or error handler whose source is already a value applies (or, for a
//! handler, skips) its continuation without touching the stack; and a
//! `flat_map` or `map` whose source is a `delay`, or a `Start` node (a
//! closure given the fiber's spawner: `start`, `IOLocal::get`), runs it and
//! applies its continuation in the same step (on 64-bit hosts), so a
//! single-step operation followed by a bind (`Ref::modify(..).flat_map(..)`,
//! `io.start().flat_map(..)`) never pushes a frame. Likewise an error raised at a site (`raise_error` with
//! tracing) right under a fold (`attempt`, `redeem`) or
//! `handle_error_with` is recorded and handled in one step. Both charge
//! the auto-yield budget the step they save. (The raise is not checked
//! under `flat_map` and `map`: the check cost every bind about 5
//! instructions, measured on `steps_pure` and `deep_pure`.)
//!
//! After `auto_yield_after` steps the fiber saves the node it was about to
//! evaluate and hands itself to [`Executor::reschedule_fiber`].
//!
//! # Cancellation and finalization
//!
//! `core.masks` counts the uncancelable regions around the current node.
//! Cancellation (requested by another fiber through the header, or by the
//! fiber itself with `IO::canceled`) is *observed* only at depth 0, at these
//! points: when the run-loop starts or resumes, before a suspension, at
//! auto-yield and cede, when a region ends or a `poll` unmasks. (A `poll`
//! unmasks only if it is this fiber's and of the current depth: `Core`
//! keeps the number the fiber's polls carry; see `combinators/monad_cancel.rs`.) Observing it
//! sets `core.ending` and evaluates the internal `Unwind` node: frames are
//! popped without running continuations, and each finalizer frame
//! (`on_cancel`, `guarantee_case`) runs its finalizer masked, after which a
//! `ResumeUnwind` frame goes on unwinding. An empty stack completes the
//! fiber with `Canceled`.
//!
//! A suspended fiber that is unmasked suspends *interruptibly*: a canceler
//! may claim the suspension (protocol in the `fiber` module doc); the fiber
//! then resumes without a result, runs the async registration's finalizer
//! (or cancels its timer) and unwinds.
//!
//! A `guarantee_case` node that a `defer` thunk returns is installed (its
//! frame pushed) in the same step as the thunk runs, with no chance to
//! observe cancellation in between: `IO::defer(|| { take(); use_.guarantee(
//! release) })` never loses what it took, unmasked and without a region
//! (`Mutex::lock().use_with` takes a free permit that way).
//!
//! An `Acquire` node (`Node::acquire`: `Semaphore::with_permit`,
//! `Mutex::with_lock`) is the same in one step and lighter: its closure
//! takes what it guards and returns the source with a release closure,
//! pushed as a `Release` frame in the same step. That frame runs no program
//! and masks nothing: a value or an error that reaches it calls the
//! release and goes on, and an unwinding (cancellation, panic) calls it as
//! it passes. A result that ends a mask below it observes a requested
//! cancellation before it (`unmasked`: the frame is not passed through),
//! and the unwinding then releases. So the release runs exactly once,
//! without a block of its own or an `Outcome`. When the closure has to
//! wait, it returns the waiting program, which guards the source itself.
//!
//! Finalizers that run on success or error (`guarantee_case`) run masked; a
//! `RestoreOk`/`RestoreErr` frame then restores the original result (at
//! once, without a step of the finalizer's own, when the finalizer did its
//! work as it was built and is a plain value). A finalizer's own error
//! replaces a success, and is *suppressed* (kept in `core.suppressed` and
//! handed to the completion callback, never lost) when the fiber was
//! already failing, canceled or panicking.
//!
//! # Panics
//!
//! With `std`, the loop runs under `catch_unwind`. A panic in user code
//! loses only the closure that panicked: the stack is intact in `core`, so
//! the loop goes on finalizing like a cancellation, running `guarantee_case`
//! finalizers (not `on_cancel` ones) with `Outcome::Panicked`, and ends the
//! fiber with [`Outcome::Panicked`].

use super::region;
use super::run_state::{Core, Ending, Next};
use super::state::TransitionToSuspended;
use super::vtable::{Fiber, FiberInner};
use crate::combinators::monad_cancel::Poll;
use crate::engine::erased::Value;
use crate::engine::node::{
    Frame, FrameKind, Immediate, Kind, Node, OnOutcome, Res, Resume, Stepped, Tag,
};
use crate::engine::tracing::OwnedRing;
use crate::executor::{Executor, TimerCallback};
use crate::outcome::Outcome;
use crate::sync::Arc;

/// Why the run-loop stopped.
enum Exit {
    /// The fiber finished; its outcome was delivered.
    Completed,
    /// The fiber gave up its thread (cede or auto-yield); `core.next` holds
    /// where to go on.
    Yield,
    /// The fiber waits for a callback; `core.next` says what to do when it
    /// resumes.
    /// `interruptible`: cancellation may end the wait (the fiber is unmasked).
    Suspend { interruptible: bool },
    /// The fiber started or stopped tracing (a traced scope began or
    /// ended): go on in the other instantiation of the loop, at the node in
    /// `core.next`, with these steps left before the next auto-yield (a
    /// switch is not a turn: the budget carries over). The budget travels
    /// here rather than in `Next`, so that every fiber's `Next` is a word
    /// smaller.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    Switch(u32),
}

/// What became of a fiber at the end of one [`Fiber::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// The fiber completed: its outcome was delivered, and it is never
    /// scheduled again.
    Completed,
    /// The fiber waits: whatever ends the wait holds it now and will hand
    /// it to [`Executor::schedule_fiber`] (it may already have, on another
    /// thread, by the time `run` returns).
    Suspended,
    /// The fiber gave up its thread (a cede, an auto-yield): it has
    /// already handed itself to [`Executor::reschedule_fiber`] (or to the
    /// `requeue` of [`Fiber::run_with`]).
    Yielded,
}

impl<X: Executor> Fiber<X> {
    /// Runs the fiber until it completes, suspends or yields, and says
    /// which ([`Ran`]).
    ///
    /// On a yield the fiber hands itself to [`Executor::reschedule_fiber`];
    /// on a suspension it is held by whatever will resume it.
    #[inline]
    pub fn run(self) -> Ran {
        self.run_with(|fiber| {
            // The fiber is moved into the call: the executor is cloned out
            // of it first.
            let executor = fiber.inner.executor.clone();
            executor.reschedule_fiber(fiber);
        })
    }

    /// Runs the fiber as [`run`](Fiber::run) does, but on a yield hands it
    /// to `requeue` rather than to [`Executor::reschedule_fiber`].
    ///
    /// For an executor's own loop, which can put a fiber that yielded back
    /// in line without going through the executor handle the fiber holds:
    /// [`run`](Fiber::run) must clone that handle (the call consumes the
    /// fiber it lives in), which for a handle behind an `Arc` is two
    /// atomic read-modify-writes per yield. `requeue` must do what
    /// `reschedule_fiber` does on this thread; [`Ran::Yielded`] is
    /// returned after it.
    #[inline]
    pub fn run_with(self, requeue: impl FnOnce(Fiber<X>)) -> Ran {
        loop {
            let exit = self
                .inner
                .core
                // SAFETY: holding the unique `Fiber` handle gives exclusive
                // access to `core` (module doc of `fiber`); the `&mut` ends
                // before the state word publishes a suspension below.
                .with_mut(|core| run_guarded(&self.inner, unsafe { &mut *core }));
            match exit {
                Exit::Completed => return Ran::Completed,
                Exit::Yield => {
                    self.list_once();
                    requeue(self);
                    return Ran::Yielded;
                }
                Exit::Suspend { interruptible } => {
                    self.list_once();
                    match self.inner.header.suspend(interruptible) {
                        // The result arrived while we were saving our state, or
                        // a cancel we must finalize for: continue here rather
                        // than through the queue.
                        TransitionToSuspended::ResultArrived
                        | TransitionToSuspended::CanceledBeforeSuspending => continue,
                        TransitionToSuspended::Suspended => return Ran::Suspended,
                    }
                }
                // `run_either` switches loops itself.
                Exit::Switch(_) => unreachable!("io-core: a loop switch left run_either"),
            }
        }
    }
}

impl<X: Executor> Fiber<X> {
    /// After the first run the fiber outlives (it yields or waits), tells
    /// the executor, which may list it for dumps; fibers that end within
    /// their first run, most short ones, are never listed.
    #[inline(always)]
    fn list_once(&self) {
        // SAFETY: as in `run`: the unique `Fiber` handle, before the
        // fiber is rescheduled or its suspension published.
        let flags = self
            .inner
            .core
            .with_mut(|core| unsafe { &mut (*core).flags });
        if !flags.is_listed() {
            flags.set_listed();
            self.list();
        }
    }

    /// Lists the fiber (once per fiber: kept out of the run's path).
    #[cold]
    #[inline(never)]
    fn list(&self) {
        self.inner.executor.fiber_listed(self);
    }
}

#[cfg(feature = "std")]
fn run_guarded<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    loop {
        // The closure only borrows `core`, which stays consistent across a
        // panic: frames are popped before they are called.
        match catch_unwind(AssertUnwindSafe(|| run_either(inner, core))) {
            Ok(exit) => return exit,
            Err(payload) => {
                let message = crate::outcome::PanicMessage::from_payload(&*payload);
                drop(payload);
                core.next = Next::Node(Node::panicked(message));
            }
        }
    }
}

#[cfg(not(feature = "std"))]
fn run_guarded<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    run_either(inner, core)
}

/// Runs the loop's tracing instantiation while the fiber traces, the plain
/// one otherwise, switching when a traced scope begins or ends: the plain
/// loop, which runs fibers that do not trace (mode `none`), has no tracing
/// code at all on its path.
#[inline(always)]
fn run_either<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    // A run starts with a full auto-yield budget; a switch carries its
    // budget over.
    let mut budget = None;
    // The observer is told that the run begins (`observe.rs`); a run that
    // `observe_current` makes observed is reported from that step.
    #[cfg(feature = "observe")]
    if core.flags.is_observed() {
        // Resumed: the run does not start at a node (a new fiber, or one
        // that yielded).
        let resumed = !matches!(core.next, Next::Node(_));
        crate::observe::run_begins(core, inner.header.id, resumed);
    }
    loop {
        // A `cfg`, not `core.flags.is_on()` (always false without the
        // feature): then the tracing instantiation is never even built.
        #[cfg(feature = "tracing")]
        let exit = if core.flags.is_on() {
            run_loop::<X, true>(inner, core, budget)
        } else {
            run_loop::<X, false>(inner, core, budget)
        };
        #[cfg(not(feature = "tracing"))]
        let exit = run_loop::<X, false>(inner, core, budget);
        match exit {
            Exit::Switch(left) => budget = Some(left),
            exit => {
                // A completed fiber was told `ended` in `complete`.
                #[cfg(feature = "observe")]
                if core.flags.is_observed() {
                    match exit {
                        Exit::Yield => crate::observe::run_ends(
                            core,
                            inner.header.id,
                            crate::observe::RunEnd::Yielded,
                        ),
                        Exit::Suspend { .. } => crate::observe::run_ends(
                            core,
                            inner.header.id,
                            crate::observe::RunEnd::Suspended,
                        ),
                        _ => {}
                    }
                }
                return exit;
            }
        }
    }
}

/// The fiber completed in this run of the tracing loop: its scratch ring,
/// if it used one, goes back to the thread (nothing without the `tracing`
/// feature).
macro_rules! completed {
    ($run:expr) => {
        #[cfg(feature = "tracing")]
        if let Some(run) = &$run {
            run.completed();
        }
    };
}

/// Records what the fiber does now, for fiber dumps, in the tracing loop.
macro_rules! activity {
    ($ring:expr, $state:ident) => {
        // Without the `tracing` feature, `TRACING` is always false and
        // `Activity::set` empty (`engine/tracing/fiber_off.rs`).
        if TRACING {
            // SAFETY: the tracing instantiation is always given the
            // fiber's ring (`run_either`).
            crate::engine::tracing::Activity::set(
                unsafe { $ring.unwrap_unchecked() },
                super::FiberState::$state,
            );
        }
    };
}

/// Records a traced operation in the tracing loop (`engine/tracing/fiber_on.rs`);
/// nothing in the plain loop, nothing at all without the `tracing` feature.
macro_rules! record {
    ($ring:expr, $op:expr, $site:expr) => {
        #[cfg(feature = "tracing")]
        if TRACING {
            if let Some(site) = $site {
                // SAFETY: the tracing instantiation is always given the
                // fiber's ring (`run_either`), and the fiber, running on
                // this thread, is its only writer.
                unsafe { $ring.unwrap_unchecked().record($op, site) };
            }
        }
    };
}

/// The `delay` or `Start` node a `flat_map` or `map` is about to
/// evaluate, run in the same step (module doc, fast paths): `Ok` with its
/// closure when `$source` is one (on 64-bit hosts, as the IO blocks'
/// inline awaits), `Err` with the node otherwise. The pair costs one push
/// and pop of a frame and a step less (`Ref::modify(..).flat_map(..)`,
/// `delay(..).flat_map(..)`, `start().flat_map(..)`); the closure's step
/// is still charged to the auto-yield budget. A panic in the closure
/// drops the continuation with the native stack, as a panic in any
/// continuation does.
macro_rules! immediate_source {
    ($source:expr) => {{
        #[cfg(target_pointer_width = "64")]
        let r = $source.into_immediate();
        #[cfg(not(target_pointer_width = "64"))]
        let r = Err::<crate::engine::node::Immediate, Node>($source);
        r
    }};
}

/// The error a step's source raises at a site (`raise_error` with
/// tracing), recorded and taken in the same step (as a settled error is,
/// without a frame for the step's continuation): `Ok` with the error, `Err`
/// with the node otherwise (always, without the `tracing` feature, where a
/// raised error is a plain one). The raise's step is still charged to the
/// auto-yield budget by the caller.
macro_rules! raised_source {
    ($ring:expr, $source:expr) => {{
        #[cfg(feature = "tracing")]
        let r = match $source.into_raised() {
            Ok(raised) => {
                let (error, _site) = raised.split();
                record!($ring, &crate::engine::tracing::RAISE_ERROR, Some(&_site));
                Ok(error)
            }
            Err(node) => Err(node),
        };
        #[cfg(not(feature = "tracing"))]
        let r = Err::<Value, Node>($source);
        r
    }};
}

/// The shape every step that waits shares (`from_callback`, its form with
/// a deadline, `sleep`, `blocking`, `never`), run in the loop's own body:
///
/// 1. a cancellation the fiber can observe now ends the step before it
///    starts anything (it unwinds instead);
/// 2. a new suspension generation begins, and `$start` sets up what will
///    end the wait (a callback registration, a timer, a blocking task) with
///    callbacks of that generation, giving what the fiber keeps while it
///    waits;
/// 3. if a completer delivered the result during the setup, `$undo`
///    releases what was kept (a finalizer, a timer; without `undo` it is
///    dropped) and the fiber goes on
///    with the result at once, on this thread; otherwise `$keep` turns it
///    into where the fiber resumes (`core.next`), the fiber's `$state` is
///    recorded for dumps, and it leaves the loop to suspend,
///    `$interruptible` by cancellation.
///
/// A macro rather than a function: the run-loop's hottest steps (binds)
/// share its body, and a function here, even inlined, changed how the
/// compiler laid out the whole loop (2 to 3% more instructions per bind,
/// callgrind); out of line it cost a suspension 12%.
macro_rules! wait {
    ($core:ident, $header:ident, $ring:ident, $inner:ident, $state:ident, $interruptible:expr,
     region: $region:expr,
     start: |$generation:ident| $start:expr,
     $(undo: |$undo_kept:pat_param| $undo:expr,)?
     keep: |$keep_kept:pat_param| $keep:expr $(,)?) => {
        if should_cancel($core, $header) {
            begin_cancel($core, Node::unwind())
        } else {
            let generation = $header.begin_suspension();
            let $generation = generation;
            let kept = $start;
            match $header.take_if_done() {
                Some(Some(res)) => {
                    $(
                        let $undo_kept = kept;
                        $undo;
                    )?
                    Node::from_res(res)
                }
                _ => {
                    let $keep_kept = kept;
                    $core.next = $keep;
                    // In a deadline region, its timer is a second completer
                    // of an interruptible wait (`region.rs`).
                    if $region && $core.flags.in_region() {
                        region::arm($core, $inner, generation);
                    }
                    activity!($ring, $state);
                    let interruptible = $interruptible;
                    return suspend($core, interruptible);
                }
            }
        }
    };
}

/// Polls an IO block (`engine/node/block.rs`) and goes on with what the
/// step came to: the block's result (the block is dropped); or the program
/// one of its `.await`s asked for, recorded as an `await` at the
/// `.await`'s site, with the block's frame below it (its result pops the
/// frame, which polls the block again); or a wait of the block's driver.
///
/// An awaited program that is already a value is handed back to the block
/// at once, without a frame (as `flat_map` applies a settled source at
/// once), one step of the budget each. An awaited program is where a new
/// program starts: with the budget spent, the fiber yields there (and
/// observes cancellation) as at the top of the loop, so that a block that
/// awaits only values still yields and can be canceled; and a cancellation
/// that became observable at the end of a mask while the result went to
/// the block (`FiberFlags::cancel_at_block`) is observed there, or, if the
/// block ends instead, where its result goes next.
macro_rules! block_step {
    ($core:ident, $header:ident, $inner:ident, $ring:expr, $budget:ident, $resume:expr) => {{
        let mut resume = $resume;
        loop {
            // On 64-bit hosts the poll may run awaits that finish at once
            // inline, with the budget (`future/block.rs`, `inline`), and
            // leaves what is left; it runs none when the next program must
            // observe cancellation first (the budget stays as it is: the
            // flag is the fiber's, and a poll does not change it).
            #[cfg(target_pointer_width = "64")]
            let stepped = {
                let ring = if TRACING {
                    $ring.map(|ring: &OwnedRing| core::ptr::NonNull::from(ring).cast::<()>())
                } else {
                    None
                };
                let lent = if $core.flags.cancel_at_block() {
                    0
                } else {
                    $budget
                };
                resume.slot().lend(lent, ring);
                let stepped = resume.step();
                if !$core.flags.cancel_at_block() {
                    $budget = resume.slot().credit_left();
                }
                stepped
            };
            #[cfg(not(target_pointer_width = "64"))]
            let stepped = resume.step();
            if stepped == Stepped::Done {
                break block_done($core, $header, &$inner.executor, resume);
            }
            let wait = resume.slot().is_wait();
            let (node, _site) = resume.slot().take_next_unchecked();
            if wait {
                break block_wait($core, resume, node);
            }
            record!($ring, &crate::engine::tracing::AWAIT, _site.as_ref());
            if $budget == 0 || $core.flags.cancel_at_block() {
                match block_observe($core, $header, $budget, resume, node) {
                    Some(node) => break node,
                    None => {
                        activity!($ring, Queued);
                        return Exit::Yield;
                    }
                }
            }
            // On 64-bit hosts a program that is already a value goes back
            // to the block at once (speed); elsewhere through the frame,
            // as any program (flash).
            #[cfg(target_pointer_width = "64")]
            match node.into_value() {
                Ok(value) => {
                    $budget -= 1;
                    resume.slot().deliver(Ok(value));
                }
                Err(node) => {
                    $core.stack.push(Frame::resume_block(resume));
                    break node;
                }
            }
            #[cfg(not(target_pointer_width = "64"))]
            {
                $core.stack.push(Frame::resume_block(resume));
                break node;
            }
        }
    }};
}

/// A block's frame popped with the result of the program it awaited: the
/// result goes into its slot, and the block's node again, whose step
/// (`Kind::Block`, `block_step!`, the one place the loop polls blocks)
/// polls it. Out of line: the loop's other steps keep their code.
#[inline(never)]
fn block_resumed(mut resume: Resume, res: Res) -> Node {
    resume.slot().deliver(res);
    Node::block(resume)
}

/// `block_step!`: the block ended with its result (in the slot).
#[inline(never)]
fn block_done<X: Executor>(
    core: &mut Core,
    header: &super::Header,
    executor: &X,
    mut resume: Resume,
) -> Node {
    let Some(res) = resume.slot().take_done() else {
        unreachable!("io-core: a block's step said done without a result")
    };
    drop(resume);
    let ok = res.is_ok();
    let node = Node::from_res(res);
    if core.flags.cancel_at_block() {
        core.flags.set_cancel_at_block(false);
        return unmasked(core, header, executor, node, ok);
    }
    node
}

/// `block_step!`: a wait of the block's driver; it observes cancellation
/// itself, as any wait.
#[inline(never)]
fn block_wait(core: &mut Core, resume: Resume, node: Node) -> Node {
    core.flags.set_cancel_at_block(false);
    core.stack.push(Frame::resume_block(resume));
    node
}

/// `block_step!`: an `.await`'s program starts with the budget spent, or
/// after a mask ended while its result went to the block: observes
/// cancellation, and yields if the budget is spent (`None`: `core.next` is
/// set). Otherwise the program as it is (the block's frame is pushed when
/// it runs).
#[cold]
#[inline(never)]
fn block_observe(
    core: &mut Core,
    header: &super::Header,
    budget: u32,
    resume: Resume,
    node: Node,
) -> Option<Node> {
    let cancel = core.flags.cancel_at_block() && should_cancel(core, header);
    core.flags.set_cancel_at_block(false);
    if cancel {
        core.stack.push(Frame::resume_block(resume));
        return Some(begin_cancel(core, node));
    }
    if budget > 0 {
        core.stack.push(Frame::resume_block(resume));
        return Some(node);
    }
    core.stack.push(Frame::resume_block(resume));
    let mut node = node;
    if should_cancel(core, header) {
        node = begin_cancel(core, node);
    }
    core.next = Next::Node(node);
    None
}

/// The run-loop; `TRACING`: the fiber traces (`core.flags.is_on()`), for as
/// long as this call runs (it returns [`Exit::Switch`] when that changes).
/// `budget`: the steps left before the next auto-yield, when a switch
/// carries them over (`None`: the configured number).
fn run_loop<X: Executor, const TRACING: bool>(
    inner: &Arc<FiberInner<X>>,
    core: &mut Core,
    budget: Option<u32>,
) -> Exit {
    let executor = &inner.executor;
    let header = &inner.header;
    // The tracing loop's run: the ring is found once per run, not per
    // event (the fiber's own, or the thread's scratch ring until the fiber
    // outlives a run with events), and the run brackets its events for
    // fiber dumps (`ring.rs`), also when a panic ends it (`Run`'s `Drop`).
    // The plain loop has none.
    #[cfg(feature = "tracing")]
    let run = if TRACING {
        Some(header.ring.begin_run(|| executor.config().trace_capacity()))
    } else {
        None
    };
    #[cfg(feature = "tracing")]
    let ring: Option<&OwnedRing> = run.as_ref().map(crate::engine::tracing::Run::ring);
    #[cfg(not(feature = "tracing"))]
    let ring: Option<&OwnedRing> = None;
    let mut budget = match budget {
        Some(left) => left,
        None => executor.config().auto_yield_after(),
    };
    if core.stack.capacity() == 0 {
        core.stack = crate::engine::blocks::stacks::take();
    }
    let mut node = match core::mem::replace(&mut core.next, Next::Resume) {
        // After a yield: a region whose deadline passed meanwhile ends
        // here (`region.rs`).
        Next::Node(node) => node,
        next => {
            if core.flags.in_region() {
                // The region timer of the suspension, if one was armed, is
                // not needed any more, however it ended.
                region::disarm(core, executor);
            }
            // Resumed after a suspension: the result is in the slot, or there
            // is none because cancellation ended the suspension.
            let (finalizer, timer) = match next {
                Next::ResumeWithFinalizer(finalizer) => (Some(finalizer), None),
                Next::Wake(key) => (None, Some(key)),
                Next::ResumeUntil(until) => {
                    // SAFETY: stored by the `AsyncUntil` arm as this very
                    // type, for this very executor type.
                    let (key, finalizer) = unsafe { until.take::<(X::TimerKey, Option<Node>)>() };
                    // The timer is not needed any more, however the
                    // suspension ended (canceling one that fired does
                    // nothing).
                    executor.cancel_timer(key);
                    (finalizer, None)
                }
                _ => (None, None),
            };
            match header.take_result() {
                Some(res) => {
                    drop(finalizer);
                    Node::from_res(res)
                }
                None => {
                    if let Some(key) = timer {
                        // SAFETY: the key was stored by the `Sleep` arm as an
                        // `X::TimerKey` of this very executor type.
                        executor.cancel_timer(unsafe { key.take::<X::TimerKey>() });
                    }
                    // Without a result: canceled, or, in a deadline region
                    // and not observably canceled, woken by its timer
                    // (`region.rs`), which ends the region instead.
                    let region_ends = core.flags.in_region()
                        && !should_cancel(core, header)
                        && region::woken(core, executor);
                    if !region_ends {
                        core.ending = Some(Ending::Canceled);
                    }
                    match finalizer {
                        Some(finalizer) => run_finalizer(core, finalizer),
                        None => Node::unwind(),
                    }
                }
            }
        }
    };
    activity!(ring, Running);
    if should_cancel(core, header) {
        node = begin_cancel(core, node);
    } else if core.flags.in_region() {
        // A region whose deadline passed while the fiber was queued (after
        // a yield) ends here (`region.rs`).
        node = region::observe(core, executor, node);
    }
    // Every continuation is called through a safe method of its role
    // (`engine/node/cont.rs` says why each is given what it expects).
    loop {
        if budget == 0 {
            // Yield (and observe cancellation) where a new program starts,
            // as Cats Effect does: a result on its way through continuations
            // first reaches the next program (or the end of the fiber).
            if !node.is_settled() {
                if should_cancel(core, header) {
                    node = begin_cancel(core, node);
                }
                core.next = Next::Node(node);
                activity!(ring, Queued);
                return Exit::Yield;
            }
        } else {
            budget -= 1;
        }
        node = match node.into_kind() {
            Kind::Pure(value) => {
                // Error handlers are popped without a call on success.
                let frame = loop {
                    match core.stack.pop() {
                        Some(frame) if frame.is_passed_by_value() => {
                            // A release is called as the value passes
                            // (module doc); an error handler is dropped.
                            if let Some(release) = frame.into_release() {
                                release.invoke(());
                            }
                            continue;
                        }
                        other => break other,
                    }
                };
                match frame.map(Frame::into_kind) {
                    None => {
                        complete(inner, core, Outcome::Succeeded(value), ring);
                        completed!(run);
                        return Exit::Completed;
                    }
                    Some(FrameKind::FlatMap(f)) => f.apply(value),
                    Some(FrameKind::Map(f)) => Node::pure(f.apply(value)),
                    Some(FrameKind::Fold(f)) => Node::from_res(f.apply(Ok(value))),
                    Some(FrameKind::FoldWith(f)) => f.apply(Ok(value)),
                    Some(FrameKind::ResumeBlock(resume)) => block_resumed(resume, Ok(value)),
                    Some(FrameKind::RegionEnd(data)) => {
                        // The body's value: the region is over.
                        region::exit(core, data);
                        Node::pure(value)
                    }
                    Some(FrameKind::Unmask) => {
                        core.unmask();
                        unmasked(core, header, executor, Node::pure(value), true)
                    }
                    Some(FrameKind::Remask) => {
                        core.mask();
                        Node::pure(value)
                    }
                    Some(FrameKind::GuaranteeCase(f)) => {
                        finalize_value(core, header, executor, f, value)
                    }
                    Some(FrameKind::RestoreOk(original)) => {
                        // The finalizer succeeded: the original value again
                        // (and the end of its masked region, where a
                        // cancellation requested meanwhile is observed).
                        drop(value);
                        core.unmask();
                        unmasked(core, header, executor, Node::pure(original), true)
                    }
                    Some(FrameKind::RestoreErr(original)) => {
                        drop(value);
                        core.unmask();
                        core.unpark_cause(true);
                        unmasked(core, header, executor, Node::error(original), false)
                    }
                    Some(FrameKind::ResumeUnwind) => {
                        drop(value);
                        core.unmask();
                        Node::unwind()
                    }
                    Some(FrameKind::TraceScope(was_on)) => {
                        core.flags.set_on(was_on);
                        if was_on != TRACING {
                            core.next = Next::Node(Node::pure(value));
                            return Exit::Switch(budget);
                        }
                        Node::pure(value)
                    }
                    Some(
                        FrameKind::HandleErrorWith(_)
                        | FrameKind::MapError(_)
                        | FrameKind::OnCancel(_)
                        | FrameKind::Release(_),
                    ) => {
                        unreachable!("io-core: error handlers and releases are passed on success")
                    }
                }
            }
            Kind::Error(error) => match unwind_error_with_cause(core) {
                None => {
                    complete(inner, core, Outcome::Errored(error), ring);
                    completed!(run);
                    return Exit::Completed;
                }
                Some(FrameKind::HandleErrorWith(f)) => f.apply(error),
                Some(FrameKind::MapError(f)) => Node::error(f.apply(error)),
                Some(FrameKind::Fold(f)) => Node::from_res(f.apply(Err(error))),
                Some(FrameKind::FoldWith(f)) => f.apply(Err(error)),
                Some(FrameKind::ResumeBlock(resume)) => block_resumed(resume, Err(error)),
                Some(FrameKind::RegionEnd(data)) => {
                    // The body's error: the region is over.
                    region::exit(core, data);
                    Node::error(error)
                }
                Some(FrameKind::Unmask) => {
                    core.unmask();
                    unmasked(core, header, executor, Node::error(error), false)
                }
                Some(FrameKind::Remask) => {
                    core.mask();
                    Node::error(error)
                }
                Some(FrameKind::GuaranteeCase(f)) => {
                    let (finalizer, outcome) = f.apply(Outcome::Errored(error));
                    let Outcome::Errored(error) = outcome else {
                        unreachable!("io-core: a guarantee gives its outcome back")
                    };
                    // The error's cause waits with it for the finalizer.
                    core.park_cause();
                    core.stack.push(Frame::restore_err(error));
                    core.mask();
                    finalizer
                }
                Some(FrameKind::Release(release)) => {
                    release.invoke(());
                    Node::error(error)
                }
                Some(FrameKind::RestoreOk(original)) => {
                    // The finalizer failed after a success: its error wins.
                    drop(original);
                    core.unmask();
                    unmasked(core, header, executor, Node::error(error), false)
                }
                Some(FrameKind::RestoreErr(original)) => {
                    // The finalizer failed after an error: keep the first,
                    // suppress the finalizer's.
                    core.suppress(error);
                    core.unmask();
                    core.unpark_cause(true);
                    unmasked(core, header, executor, Node::error(original), false)
                }
                Some(FrameKind::ResumeUnwind) => {
                    core.suppress(error);
                    core.error_dropped();
                    core.unmask();
                    Node::unwind()
                }
                Some(FrameKind::TraceScope(was_on)) => {
                    core.flags.set_on(was_on);
                    if was_on != TRACING {
                        core.next = Next::Node(Node::error(error));
                        return Exit::Switch(budget);
                    }
                    Node::error(error)
                }
                Some(FrameKind::Map(_) | FrameKind::FlatMap(_) | FrameKind::OnCancel(_)) => {
                    unreachable!("io-core: unwind_error returns only handler frames")
                }
            },
            Kind::Delay(thunk) => {
                record!(ring, thunk.op(), thunk.site());
                Node::pure(thunk.invoke(()))
            }
            Kind::Defer(thunk) => {
                record!(ring, thunk.op(), thunk.site());
                // A `guarantee_case` it returns is installed in this same
                // step (see the module doc).
                match thunk.invoke(()).into_guarantee_case() {
                    Ok(bind) => {
                        record!(ring, bind.k().op(), bind.site());
                        let (source, finalizer) = bind.into_parts();
                        core.stack.push(Frame::guarantee_case(finalizer));
                        source
                    }
                    Err(node) => node,
                }
            }
            // Fast paths: a source that is already a value or an error is
            // applied (or skipped) at once, without a frame.
            Kind::FlatMap(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => k.apply(value),
                    Ok(Err(error)) => Node::error(error),
                    Err(source) => match immediate_source!(source) {
                        Ok(Immediate::Delay(thunk)) => {
                            record!(ring, thunk.op(), thunk.site());
                            budget = budget.saturating_sub(1);
                            k.apply(thunk.invoke(()))
                        }
                        Ok(Immediate::Start(start)) => {
                            record!(ring, start.op(), start.site());
                            budget = budget.saturating_sub(1);
                            k.apply(run_start(executor, core, header, start))
                        }
                        Ok(Immediate::Local(local)) => {
                            record!(ring, local.op(), local.site());
                            budget = budget.saturating_sub(1);
                            k.apply(local.invoke(super::FiberLocals::new(core)))
                        }
                        Err(source) => {
                            core.stack.push(Frame::flat_map(k));
                            source
                        }
                    },
                }
            }
            Kind::Map(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => Node::pure(k.apply(value)),
                    Ok(Err(error)) => Node::error(error),
                    Err(source) => match immediate_source!(source) {
                        Ok(Immediate::Delay(thunk)) => {
                            record!(ring, thunk.op(), thunk.site());
                            budget = budget.saturating_sub(1);
                            Node::pure(k.apply(thunk.invoke(())))
                        }
                        Ok(Immediate::Start(start)) => {
                            record!(ring, start.op(), start.site());
                            budget = budget.saturating_sub(1);
                            Node::pure(k.apply(run_start(executor, core, header, start)))
                        }
                        Ok(Immediate::Local(local)) => {
                            record!(ring, local.op(), local.site());
                            budget = budget.saturating_sub(1);
                            Node::pure(k.apply(local.invoke(super::FiberLocals::new(core))))
                        }
                        Err(source) => {
                            core.stack.push(Frame::map(k));
                            source
                        }
                    },
                }
            }
            Kind::HandleErrorWith(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => Node::pure(value),
                    Ok(Err(error)) => k.apply(error),
                    Err(source) => match raised_source!(ring, source) {
                        Ok(error) => {
                            budget = budget.saturating_sub(1);
                            k.apply(error)
                        }
                        Err(source) => {
                            core.stack.push(Frame::handle_error_with(k));
                            source
                        }
                    },
                }
            }
            Kind::MapError(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => Node::pure(value),
                    Ok(Err(error)) => Node::error(k.apply(error)),
                    Err(source) => {
                        core.stack.push(Frame::map_err(k));
                        source
                    }
                }
            }
            Kind::Fold(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(res) => Node::from_res(k.apply(res)),
                    Err(source) => match raised_source!(ring, source) {
                        Ok(error) => {
                            budget = budget.saturating_sub(1);
                            Node::from_res(k.apply(Err(error)))
                        }
                        Err(source) => {
                            core.stack.push(Frame::fold(k));
                            source
                        }
                    },
                }
            }
            Kind::FoldWith(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(res) => k.apply(res),
                    Err(source) => {
                        core.stack.push(Frame::fold_with(k));
                        source
                    }
                }
            }
            Kind::Async(register) => {
                record!(ring, register.op(), register.site());
                wait!(core, header, ring, inner, Waiting, core.masks == 0,
                    region: true,
                    start: |generation| register.invoke(FiberInner::callback(inner, generation)),
                    undo: |finalizer| drop(finalizer),
                    keep: |finalizer| match finalizer {
                        Some(finalizer) => Next::ResumeWithFinalizer(finalizer),
                        None => Next::Resume,
                    },
                )
            }
            Kind::AsyncUntil(deadline, register) => {
                record!(ring, register.op(), register.site());
                wait!(core, header, ring, inner, Waiting, core.masks == 0,
                    region: true,
                    start: |generation| {
                        // Two completers of the one suspension: the timer
                        // and the registration's callback; the first one
                        // wins.
                        let timer =
                            TimerCallback::resuming(FiberInner::callback(inner, generation));
                        let key = executor.set_timer(deadline, timer);
                        let callback = FiberInner::callback(inner, generation);
                        (key, register.invoke(callback))
                    },
                    // Completed during registration (or the deadline had
                    // passed already).
                    undo: |(key, finalizer)| {
                        drop(finalizer);
                        executor.cancel_timer(key);
                    },
                    keep: |kept| Next::ResumeUntil(Value::new(kept)),
                )
            }
            Kind::Sleep(duration, _site) => {
                record!(ring, &crate::engine::tracing::SLEEP, _site.as_ref());
                wait!(core, header, ring, inner, Sleeping, core.masks == 0,
                    region: true,
                    start: |generation| {
                        let callback =
                            TimerCallback::resuming(FiberInner::callback(inner, generation));
                        let deadline = executor.monotonic().saturating_add(duration);
                        executor.set_timer(deadline, callback)
                    },
                    // (A deadline already past fires the timer at once: the
                    // fiber goes on without suspending.)
                    keep: |key| Next::Wake(Value::new(key)),
                )
            }
            Kind::Blocking(thunk) => {
                record!(ring, thunk.op(), thunk.site());
                // Blocking work cannot be interrupted: the fiber waits for
                // it even when canceled (then finalizes).
                wait!(core, header, ring, inner, Blocked, false,
                    region: false,
                    start: |generation| {
                        let callback = FiberInner::callback(inner, generation);
                        executor.spawn_blocking(super::BlockingTask { thunk, callback });
                    },
                    // (Run inline, by the default `spawn_blocking`, or done
                    // already on another thread: the fiber goes on.)
                    keep: |()| Next::Resume,
                )
            }
            Kind::Cede(_site) => {
                record!(ring, &crate::engine::tracing::CEDE, _site.as_ref());
                let next = Node::pure(Value::unit());
                core.next = Next::Node(if should_cancel(core, header) {
                    begin_cancel(core, next)
                } else {
                    next
                });
                activity!(ring, Queued);
                return Exit::Yield;
            }
            Kind::Never(_site) => {
                record!(ring, &crate::engine::tracing::NEVER, _site.as_ref());
                // Nothing but a cancellation can end this wait.
                wait!(core, header, ring, inner, Waiting, core.masks == 0,
                    region: true,
                    start: |_generation| (),
                    keep: |()| Next::Resume,
                )
            }
            Kind::Block(mut resume) => {
                if resume.slot().first_step() {
                    record!(ring, resume.op(), resume.site());
                }
                block_step!(core, header, inner, ring, budget, resume)
            }
            #[cfg(feature = "tracing")]
            Kind::RaiseError(raised) => {
                let (error, site) = raised.split();
                record!(ring, &crate::engine::tracing::RAISE_ERROR, Some(&site));
                Node::error(error)
            }
            Kind::Monotonic => Node::pure(Value::new(executor.monotonic())),
            Kind::RealTime => Node::pure(Value::new(executor.real_time())),
            Kind::Uncancelable(body) => {
                record!(ring, body.op(), body.site());
                core.mask();
                core.stack.push(Frame::unmask());
                let poll = Poll::new(core.poll_owner(), core.mask_depth());
                body.invoke(poll)
            }
            Kind::Poll(bind) => {
                let (source, k) = bind.into_parts();
                if k.poll.unmasks(core.current_poll_owner(), core.mask_depth())
                    && core.ending.is_none()
                {
                    // The poll of this fiber's innermost region: unmask its
                    // source. Any other poll runs its source as it is.
                    core.unmask();
                    core.stack.push(Frame::remask());
                    if should_cancel(core, header) {
                        begin_cancel(core, source)
                    } else if core.flags.in_region() {
                        region::observe(core, executor, source)
                    } else {
                        source
                    }
                } else {
                    source
                }
            }
            Kind::Canceled(_site) => {
                record!(ring, &crate::engine::tracing::CANCELED, _site.as_ref());
                if core.flags.in_region() {
                    // It cancels the innermost region, not the fiber.
                    region::self_cancel(core)
                } else {
                    header.request_self_cancel();
                    if should_cancel(core, header) {
                        begin_cancel(core, Node::unwind())
                    } else {
                        Node::pure(Value::unit())
                    }
                }
            }
            Kind::Region(spec) => region::start(core, executor, spec),
            Kind::OnCancel(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, finalizer) = bind.into_parts();
                core.stack.push(Frame::on_cancel(finalizer));
                source
            }
            Kind::GuaranteeCase(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, finalizer) = bind.into_parts();
                core.stack.push(Frame::guarantee_case(finalizer));
                source
            }
            Kind::Acquire(bind) => {
                record!(ring, bind.k().op(), bind.site());
                let (source, k) = bind.into_parts();
                // Taken at once: its release is pushed in this same step,
                // before cancellation can be observed again (module doc).
                let (next, release) = k.apply(source);
                if let Some(release) = release {
                    core.stack.push(Frame::release(release));
                }
                next
            }
            Kind::Start(start) => {
                record!(ring, start.op(), start.site());
                Node::pure(run_start(executor, core, header, start))
            }
            #[cfg(target_pointer_width = "64")]
            Kind::Local(local) => {
                record!(ring, local.op(), local.site());
                Node::pure(local.invoke(super::FiberLocals::new(core)))
            }
            #[cfg(feature = "tracing")]
            Kind::Mark(bind) => {
                use crate::engine::tracing::MarkKind;
                let kind = bind.k().kind;
                record!(ring, bind.k().op, bind.site());
                let (source, _) = bind.into_parts();
                match kind {
                    MarkKind::Record => source,
                    MarkKind::Snapshot => {
                        drop(source);
                        Node::pure(Value::new(core.flags.snapshot(ring, &header.ring)))
                    }
                    MarkKind::FailureSnapshot => {
                        drop(source);
                        let children = core.take_handled_cause().into_vec();
                        let trace = core.flags.snapshot(ring, &header.ring);
                        Node::pure(Value::new((trace, children)))
                    }
                    MarkKind::Cause => match source.into_value() {
                        Ok(pair) => {
                            // SAFETY: a cause mark's source is the pair of
                            // an error and its traces (`ChildTraces::raise`).
                            let (error, traces) = unsafe {
                                pair.take::<(Value, crate::engine::tracing::ChildTraces)>()
                            };
                            core.set_cause(traces);
                            Node::error(error)
                        }
                        Err(source) => source,
                    },
                    MarkKind::Scope => {
                        core.stack.push(Frame::trace_scope(core.flags.is_on()));
                        core.flags.set_on(true);
                        if TRACING {
                            source
                        } else {
                            core.next = Next::Node(source);
                            return Exit::Switch(budget);
                        }
                    }
                }
            }
            Kind::Panicked(message) => {
                core.set_panicked(message);
                Node::unwind()
            }
            Kind::Unwind => match unwind_step(core) {
                // A finalizer (masked), or a region's fallback, where the
                // fiber's own cancellation is observable again.
                Some(next) if should_cancel(core, header) => begin_cancel(core, next),
                Some(next) => next,
                None => {
                    let outcome = core.ending_outcome();
                    core.ending = None;
                    // Only here can the outcome be `Canceled`: the path of
                    // a fiber that succeeds pays nothing for the count.
                    if matches!(outcome, Outcome::Canceled) {
                        inner.executor.fiber_canceled();
                    }
                    complete(inner, core, outcome, ring);
                    completed!(run);
                    return Exit::Completed;
                }
            },
        };
    }
}

/// Leaves the run-loop to suspend. A fiber waiting with an empty stack
/// gives its buffer back to the thread (see `Core::stack`).
#[inline(always)]
fn suspend(core: &mut Core, interruptible: bool) -> Exit {
    if core.stack.is_empty() {
        crate::engine::blocks::stacks::give(core::mem::take(&mut core.stack));
    }
    Exit::Suspend { interruptible }
}

/// Whether the fiber must start finalizing because it was canceled.
#[inline(always)]
fn should_cancel(core: &Core, header: &super::Header) -> bool {
    core.masks == 0 && core.ending.is_none() && header.is_cancel_requested()
}

/// After a mask level ends with a result (`ok`: a value), goes on with
/// `next`, or starts finalizing if a cancellation requested meanwhile is now
/// observable.
///
/// As in Cats Effect, cancellation is observed where a new program is about
/// to run, not while a result travels through pure continuations: if the
/// result reaches, through frames it passes without evaluating anything
/// (`map`, `attempt`, skipped handlers), a frame that masks again (the end
/// of an enclosing `poll`, a `guarantee_case` finalizer) or the end of the
/// fiber, it gets there. So `poll(race_pair(..))` hands its pair (with the
/// loser's handle) to the masked code that cancels the loser, and a fiber
/// whose last step was an uncancelable acquisition completes with what it
/// acquired instead of dropping it.
// Inlined into each of its calls on 64-bit hosts (speed); one copy on
// narrower targets (flash: the run-loop calls it from several steps).
#[cfg_attr(target_pointer_width = "64", inline(always))]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
fn unmasked<X: Executor>(
    core: &mut Core,
    header: &super::Header,
    executor: &X,
    next: Node,
    ok: bool,
) -> Node {
    if !should_cancel(core, header) {
        if core.flags.in_region() {
            // A region entered at this depth may end here (`region.rs`).
            return region::unmasked(core, executor, next, ok);
        }
        return next;
    }
    match passed_before_next_program(&core.stack, ok) {
        Passed::Nothing => next,
        Passed::ToBlock => {
            // The result goes to an IO block, which decides whether a new
            // program starts (its next `.await`) or not (it ends):
            // `block_step!` observes the request there.
            core.flags.set_cancel_at_block(true);
            next
        }
        Passed::Frames(passed) => {
            // The request is observed where the next program would start,
            // below the frames the result would have passed: those are
            // popped as it would have popped them (an `on_cancel` it passes
            // is over, as in Cats Effect, so its finalizer does not run).
            // (A region's frame among them ends its region.)
            #[cfg(target_pointer_width = "64")]
            region::pop_passed(core, passed);
            #[cfg(not(target_pointer_width = "64"))]
            core.stack.truncate(core.stack.len() - passed);
            begin_cancel(core, next)
        }
    }
}

/// Where a result that ends a mask goes ([`unmasked`]).
enum Passed {
    /// To a frame that masks again, or to the end of the fiber.
    Nothing,
    /// Through this many frames (from the top) to the frame that would
    /// start the next program.
    Frames(usize),
    /// Through pure frames to an IO block's frame (which decides).
    ToBlock,
}

/// See [`unmasked`] and [`Passed`].
#[cold]
fn passed_before_next_program(stack: &[Frame], mut ok: bool) -> Passed {
    for (passed, frame) in stack.iter().rev().enumerate() {
        if frame.is_passed_through(ok) {
            // A fold (`attempt`, `redeem`) hands on a value whatever reaches
            // it: past it, handlers are skipped and binds called.
            ok |= frame.is_fold();
            continue;
        }
        return if frame.masks_again() {
            Passed::Nothing
        } else if frame.is(Tag::ResumeBlock) {
            Passed::ToBlock
        } else {
            Passed::Frames(passed)
        };
    }
    Passed::Nothing
}

/// Starts finalizing a canceled fiber; `node` (what it was about to
/// evaluate) is dropped.
#[cold]
fn begin_cancel(core: &mut Core, node: Node) -> Node {
    drop(node);
    // An error in flight, if any, is dropped: so is its cause.
    core.error_dropped();
    core.ending = Some(Ending::Canceled);
    Node::unwind()
}

/// A value reached a `guarantee_case` frame: runs its finalizer masked,
/// then restores the value (a `RestoreOk` frame). A finalizer with nothing
/// left to run (it did its work when it was built, and is a value) ends its
/// masked region at once, as that frame would. Out of line, so that the
/// loop's code for other steps stays as it is.
#[inline(never)]
fn finalize_value<X: Executor>(
    core: &mut Core,
    header: &super::Header,
    executor: &X,
    f: OnOutcome,
    value: Value,
) -> Node {
    let (finalizer, outcome) = f.apply(Outcome::Succeeded(value));
    let Outcome::Succeeded(value) = outcome else {
        unreachable!("io-core: a guarantee gives its outcome back")
    };
    match finalizer.into_value() {
        Ok(done) => {
            drop(done);
            unmasked(core, header, executor, Node::pure(value), true)
        }
        Err(finalizer) => {
            core.stack.push(Frame::restore_ok(value));
            core.mask();
            finalizer
        }
    }
}

/// Runs `finalizer` masked, then goes on unwinding.
fn run_finalizer(core: &mut Core, finalizer: Node) -> Node {
    core.mask();
    core.stack.push(Frame::resume_unwind());
    finalizer
}

/// Pops frames while finalizing, until a finalizer to run (returned as the
/// next node) or the bottom of the stack (`None`).
fn unwind_step(core: &mut Core) -> Option<Node> {
    while let Some(frame) = core.stack.pop() {
        match frame.into_kind() {
            FrameKind::OnCancel(finalizer) => {
                if matches!(core.ending, Some(Ending::Canceled | Ending::Region)) {
                    let node = finalizer.invoke(());
                    return Some(run_finalizer(core, node));
                }
            }
            FrameKind::GuaranteeCase(f) => {
                let outcome = core.ending_outcome();
                let (node, outcome) = f.apply(outcome);
                drop(outcome);
                return Some(run_finalizer(core, node));
            }
            // A light release has no program: done here.
            FrameKind::Release(release) => release.invoke(()),
            // An error a finalizer was about to restore when the fiber began
            // to finalize (a panic in that finalizer): kept, never lost.
            FrameKind::RestoreErr(original) => {
                core.unpark_cause(false);
                core.suppress(original);
            }
            // A region's frame: the end of the unwinding if it is the region
            // being ended (`region.rs`), passed otherwise.
            FrameKind::RegionEnd(data) => {
                if region::is_target(core) {
                    return Some(region::reached(core, data));
                }
                region::exit(core, data);
            }
            // Everything else is dropped: continuations do not run.
            _ => {}
        }
    }
    None
}

/// [`unwind_error`], where a handler that takes the error takes its cause
/// too: the traces of the child fibers it came from, if any (see
/// `Core::before_unwind_error`, and why the check is not in
/// `unwind_error`'s loop).
#[inline(always)]
fn unwind_error_with_cause(core: &mut Core) -> Option<FrameKind> {
    core.before_unwind_error();
    unwind_error(core)
}

/// Pops frames until one that acts on an error; `None` if the stack ran out.
#[inline]
fn unwind_error(core: &mut Core) -> Option<FrameKind> {
    while let Some(frame) = core.stack.pop() {
        match frame.tag() {
            Tag::Map | Tag::FlatMap | Tag::OnCancel => continue,
            _ => return Some(frame.into_kind()),
        }
    }
    None
}

/// Runs a `Start` node's closure with this fiber's spawner (a node of its
/// own, or the source of a `flat_map` or `map` run in the same step).
#[inline(never)]
fn run_start<X: Executor>(
    executor: &X,
    core: &mut Core,
    header: &super::Header,
    start: crate::engine::erased::ErasedFn<super::Spawner, Value>,
) -> Value {
    #[cfg(feature = "observe")]
    if crate::observe::active() {
        return start_observed(executor, core, header, start);
    }
    start.invoke(super::Spawner::new(executor, core, header.id))
}

/// A `Start` node evaluated while a fiber observer is installed: the
/// fibers it makes are offered to the observer with where they were
/// started and whether this fiber is observed.
#[cfg(feature = "observe")]
#[cold]
#[inline(never)]
fn start_observed<X: Executor>(
    executor: &X,
    core: &mut Core,
    header: &super::Header,
    start: crate::engine::erased::ErasedFn<super::Spawner, Value>,
) -> Value {
    #[cfg(feature = "tracing")]
    let location = start.site().map(|site| site.location());
    #[cfg(not(feature = "tracing"))]
    let location = None;
    let _spawning = crate::observe::Spawning::set(location, core.flags.is_observed());
    start.invoke(super::Spawner::new(executor, core, header.id))
}

fn complete<X: Executor>(
    inner: &FiberInner<X>,
    core: &mut Core,
    outcome: Outcome<Value, Value>,
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))] ring: Option<&OwnedRing>,
) {
    crate::engine::blocks::stacks::give(core::mem::take(&mut core.stack));
    #[cfg(feature = "observe")]
    if core.flags.is_observed() {
        let ending = match &outcome {
            Outcome::Succeeded(_) => crate::observe::Ending::Succeeded,
            Outcome::Errored(_) => crate::observe::Ending::Errored,
            Outcome::Canceled => crate::observe::Ending::Canceled,
            Outcome::Panicked(_) => crate::observe::Ending::Panicked,
        };
        crate::observe::ended(core, inner.header.id, ending);
    }
    inner.header.mark_completed();
    inner.executor.fiber_ended();
    let suppressed = core.take_suppressed();
    // The cause of the error the fiber ends with (empty otherwise).
    let children = core.take_cause();
    #[cfg(feature = "tracing")]
    let (outcome, trace) = match outcome {
        Outcome::Errored(_) => (outcome, core.flags.snapshot(ring, &inner.header.ring)),
        Outcome::Panicked(message) => {
            let trace = core.flags.snapshot(ring, &inner.header.ring);
            (Outcome::Panicked(message.with_trace(trace.clone())), trace)
        }
        other => (other, crate::engine::tracing::Trace::empty()),
    };
    #[cfg(not(feature = "tracing"))]
    let trace = crate::engine::tracing::Trace::empty();
    if core.has_callback() {
        // SAFETY: the fiber was made with a completion callback (its run
        // state says so), and this thread runs it.
        if let Some(on_complete) = unsafe { inner.header.join.take_callback() } {
            // SAFETY: the adapter expects the erased outcome of this
            // fiber's program, its suppressed errors (values of its error
            // type), its trace and the traces its error came from.
            unsafe { on_complete.call((outcome, suppressed, trace, children)) }
        }
    } else {
        let traces = crate::engine::tracing::ChildTraces::of_failure(&outcome, trace, children);
        // SAFETY: the fiber was made without a completion callback (its
        // run state says so).
        let join = unsafe { inner.header.join.cell() };
        super::join::complete_join(join, outcome, suppressed, traces)
    }
}
