//! Deadline regions: a body under a deadline run on the fiber's own stack
//! (`IO::timeout`, `combinators/timeout.rs`), with no child fiber.
//!
//! # Protocol
//!
//! A `Region` node reads the clock once, pushes a `RegionEnd` frame (the
//! region's deadline, the mask depth at entry, the fallback, and the
//! fiber's innermost region before it) and runs the body above it. The
//! body's outcome, whatever it is (a value, an error), pops the frame and
//! goes on: the region is over, and nothing else was made. A body that
//! ends without waiting pays one clock read and the frame, no timer.
//!
//! The deadline acts like a cancellation of the region alone, observed
//! where the run-loop observes cancellation, and only at the mask depth at
//! which the region was entered (a masked part of the body finishes
//! first, as a masked part of a child fiber does):
//!
//! * **While the body waits.** When the fiber suspends interruptibly at
//!   the region's depth, the earliest deadline of the regions of that
//!   depth is armed as a second completer of the same suspension (as
//!   `from_callback_until`'s timer is): a timer whose callback ends the
//!   wait *without a result* ([`TimerCallback`]'s `empty`). The timer is
//!   removed when the fiber resumes, however the wait ended; so the timer
//!   exists only while the body waits, and a body that never waits never
//!   makes one. A fiber resumed without a result was canceled if its own
//!   cancellation is observable (it wins), and otherwise woken by the
//!   region timer.
//! * **Where the fiber yields** (auto-yield, `cede`): the next run reads
//!   the clock before going on.
//! * **Where a mask ends** at the region's depth (the end of an
//!   `uncancelable`, a `poll`, a finalizer): the clock is read, and an
//!   expired region is observed where the next program would start, as a
//!   cancellation is (`run_loop.rs`, `unmasked`): a result that reaches the
//!   region's own frame without a new program ends the region normally
//!   (Cats Effect 3.6: the outcome of a body that did not honour the
//!   cancellation wins).
//!
//! Observing it sets [`Ending::Region`] with the region's stack index as
//! the target and unwinds as a cancellation does: continuations are
//! dropped, `on_cancel` and guarantee finalizers run masked with
//! `Outcome::Canceled` (each exactly once), inner regions' frames are
//! passed. At the target's frame the ending is cleared and the fiber goes
//! on with the fallback, at the region's mask depth.
//!
//! Nested regions: each region's frame keeps the fiber's innermost *run*
//! of regions of one mask depth before it (`RegionTop`: that depth, the
//! earliest deadline of the run, the index of its innermost frame), so
//! entering, leaving and arming are O(1); finding which region ends walks
//! the run's frames (only when one does). Of the regions of the run whose
//! deadline has passed, the outermost ends: it would cancel the inner ones
//! anyway (in Cats Effect, the outer race cancels the fiber running the
//! inner one). An inner region that ends runs its fallback and leaves the
//! outer region running.
//!
//! The fiber's own cancellation is not a region's: it is observed as
//! before (at depth 0) and unwinds every frame, regions included; while
//! the fiber unwinds to a region's frame, it is observed once the
//! fallback starts.
//!
//! `IO::canceled` inside a region cancels the innermost region, not the
//! fiber, as it cancels the child fiber of Cats Effect's `timeout` (a race):
//! observed at the region's depth, at once or when the mask ends; the
//! fallback then first waits until the deadline (the race is then the
//! timer's; Cats Effect issue 3396).
//!
//! The timer callbacks are the suspension protocol's own completers (a
//! claim of the suspension's generation), so no state is shared with
//! other threads beyond what a wait shares; everything else here is the
//! running fiber's (`Core`, its frames).
//!
//! The design follows tokio's `timeout` in spirit (poll the body first,
//! pay for a timer only when it waits), with Cats Effect's cancellation
//! semantics; no code is copied from either.
//!
//! [`TimerCallback`]: crate::TimerCallback

use core::time::Duration;

use super::run_state::{Core, Ending};
use super::vtable::FiberInner;
use crate::engine::erased::Value;
use crate::engine::node::{
    EndedRegion, Expired, Fallback, Frame, FrameKind, Node, PendingRegion, RegionData, RegionSpec,
    RegionTop, Tag,
};
use crate::executor::Executor;
#[cfg(target_pointer_width = "64")]
use crate::executor::TimerCallback;
use crate::sync::Arc;

/// The step of a `Region` node: a body that is already a value or an
/// error needs no region (nor the clock); any other is entered, and
/// returned to run.
#[inline(never)]
pub(super) fn start<X: Executor>(core: &mut Core, executor: &X, region: PendingRegion) -> Node {
    let RegionSpec {
        body,
        duration,
        fallback,
    } = region.into_spec();
    match body.into_settled() {
        Ok(res) => {
            drop(fallback);
            Node::from_res(res)
        }
        Err(body) => {
            let deadline = executor.monotonic().saturating_add(duration);
            enter(core, deadline, fallback);
            body
        }
    }
}

/// Enters a region whose deadline is `deadline`: pushes its frame.
#[inline(never)]
pub(super) fn enter(core: &mut Core, deadline: Duration, fallback: Fallback) {
    let masks = core.mask_depth();
    let index = core.stack.len();
    let regions = core.regions();
    let outer = regions.top;
    let earliest = match outer {
        Some(top) if top.masks == masks => top.deadline.min(deadline),
        _ => deadline,
    };
    regions.top = Some(RegionTop {
        masks,
        deadline: earliest,
        index,
    });
    core.flags.set_in_region(true);
    core.stack.push(Frame::region_end(RegionData {
        deadline,
        outer,
        fallback,
    }));
}

/// A region's frame was popped (the body's outcome reached it, or an
/// unwinding passed it): the run of regions around it is the fiber's
/// again.
#[inline(never)]
pub(super) fn exit(core: &mut Core, data: EndedRegion) {
    leave(core, &data.into_data());
}

/// [`exit`] with the frame's payload.
fn leave(core: &mut Core, data: &RegionData) {
    let index = core.stack.len();
    let regions = core.regions();
    regions.top = data.outer;
    // A pending self-cancel of this region is over with it.
    if regions.canceled.is_some_and(|at| at >= index) {
        regions.canceled = None;
    }
    core.flags.set_in_region(data.outer.is_some());
}

/// The region to end now, if any, at the fiber's mask depth: the
/// outermost region of the innermost run (entered at this depth) whose
/// deadline is at or before `now`, or whose body canceled itself; with
/// whether it canceled itself.
fn target(core: &Core, now: Duration) -> Option<(usize, bool)> {
    let depth = core.mask_depth();
    let regions = core.regions_ref()?;
    let canceled = regions.canceled;
    let mut at = regions.top;
    let mut found = None;
    while let Some(top) = at {
        if top.masks != depth {
            break;
        }
        let data = core.stack.get(top.index).and_then(Frame::region)?;
        if data.deadline <= now {
            found = Some((top.index, false));
        } else if canceled == Some(top.index) {
            found = Some((top.index, true));
        }
        at = data.outer;
    }
    found
}

/// Whether a region may end at this depth (before reading the clock):
/// the fiber is not unwinding, and its innermost run of regions was
/// entered at its mask depth.
fn may_end(core: &Core) -> bool {
    core.ending.is_none()
        && core
            .regions_ref()
            .and_then(|regions| regions.top)
            .is_some_and(|top| top.masks == core.mask_depth())
}

/// Starts ending the region at stack index `index`; `node` (what the fiber
/// was about to evaluate) is dropped.
fn begin(core: &mut Core, node: Node, index: usize, canceled: bool) -> Node {
    drop(node);
    // An error in flight, if any, is dropped: so is its cause.
    core.error_dropped();
    core.ending = Some(Ending::Region);
    let regions = core.regions();
    regions.target = index;
    regions.target_canceled = canceled;
    if canceled {
        regions.canceled = None;
    }
    Node::unwind()
}

/// Where a new program `node` starts (after a yield, at the end of a
/// `poll`'s unmask): ends a region that is due, or goes on with `node`.
#[cold]
#[inline(never)]
pub(super) fn observe<X: Executor>(core: &mut Core, executor: &X, node: Node) -> Node {
    if !may_end(core) {
        return node;
    }
    let now = executor.monotonic();
    match target(core, now) {
        Some((index, canceled)) => begin(core, node, index, canceled),
        None => node,
    }
}

/// A mask ended at a region's depth with a result (`ok`: a value) on its
/// way to `next`: ends a region that is due where the next program would
/// start, or goes on (see `run_loop.rs`, `unmasked`, for a cancellation).
#[cold]
#[inline(never)]
pub(super) fn unmasked<X: Executor>(core: &mut Core, executor: &X, next: Node, ok: bool) -> Node {
    if !may_end(core) {
        return next;
    }
    let Some((index, canceled)) = target(core, executor.monotonic()) else {
        return next;
    };
    // Where the result goes: through frames that start no program.
    let mut ok = ok;
    let mut passed = 0;
    for (at, frame) in core.stack.iter().enumerate().rev() {
        if at == index {
            // It reaches the region's own end: the body's outcome wins.
            return next;
        }
        if frame.is_passed_through(ok) {
            ok |= frame.is_fold();
            passed += 1;
            continue;
        }
        if frame.masks_again() || frame.is(Tag::ResumeBlock) {
            // Masked again (observed when that mask ends), or an IO
            // block's frame (observed where the block waits or yields).
            return next;
        }
        break;
    }
    pop_passed(core, passed);
    begin(core, next, index, canceled)
}

/// Pops `passed` frames that a result passed without a new program, as it
/// would have popped them (a region's frame among them ends its region).
#[inline(never)]
pub(super) fn pop_passed(core: &mut Core, passed: usize) {
    for _ in 0..passed {
        let Some(frame) = core.stack.pop() else {
            return;
        };
        if let FrameKind::RegionEnd(data) = frame.into_kind() {
            exit(core, data);
        }
    }
}

/// `IO::canceled` in a region: cancels the innermost region (at once if
/// the fiber is at its depth, otherwise when the mask ends there).
#[cold]
#[inline(never)]
pub(super) fn self_cancel(core: &mut Core) -> Node {
    let depth = core.mask_depth();
    let unwinding = core.ending.is_some();
    let regions = core.regions();
    let Some(top) = regions.top else {
        return Node::pure(Value::unit());
    };
    if top.masks == depth && !unwinding {
        return begin(core, Node::pure(Value::unit()), top.index, true);
    }
    // Kept for when the mask ends (an outer pending one stays: it ends
    // this region too).
    if regions.canceled.is_none_or(|at| at > top.index) {
        regions.canceled = Some(top.index);
    }
    Node::pure(Value::unit())
}

/// The fiber is about to suspend interruptibly in suspension `generation`:
/// if it is at the depth of its innermost run of regions, arms that run's
/// earliest deadline as a completer of the suspension (a timer that ends
/// it without a result).
#[cfg(target_pointer_width = "64")]
#[cold]
#[inline(never)]
pub(super) fn arm<X: Executor>(core: &mut Core, inner: &Arc<FiberInner<X>>, generation: usize) {
    let depth = core.mask_depth();
    let regions = core.regions();
    let Some(top) = regions.top else {
        return;
    };
    if top.masks != depth {
        return;
    }
    let timer = TimerCallback::ending_empty(FiberInner::callback(inner, generation));
    let key = inner.executor.set_timer(top.deadline, timer);
    regions.timer = Some(Value::new(key));
}

/// [`arm`] on targets narrower than 64 bits, where no deadline region is
/// ever entered (`timeout` starts a child fiber there): nothing to arm.
#[cfg(not(target_pointer_width = "64"))]
#[inline(always)]
pub(super) fn arm<X: Executor>(_core: &mut Core, _inner: &Arc<FiberInner<X>>, _generation: usize) {}

/// The fiber resumed: removes the region timer of the suspension, if one
/// was armed.
#[cold]
#[inline(never)]
pub(super) fn disarm<X: Executor>(core: &mut Core, executor: &X) {
    if let Some(key) = core.regions().timer.take() {
        // SAFETY: stored by `arm` as an `X::TimerKey` of this very
        // executor type.
        executor.cancel_timer(unsafe { key.take::<X::TimerKey>() });
    }
}

/// The fiber resumed without a result, and its own cancellation is not
/// observable: the region timer ended the wait. Starts ending the region
/// (`true`), or says that none is due (`false`: then it was a
/// cancellation after all).
#[cold]
#[inline(never)]
pub(super) fn woken<X: Executor>(core: &mut Core, executor: &X) -> bool {
    let Some(top) = core.regions().top else {
        return false;
    };
    // The timer fired at the run's earliest deadline, whatever the clock
    // reads now.
    let now = executor.monotonic().max(top.deadline);
    match target(core, now) {
        Some((index, canceled)) => {
            drop(begin(core, Node::unwind(), index, canceled));
            true
        }
        None => false,
    }
}

/// The unwinding reached the frame of the region it ends: the ending is
/// over, and the fiber goes on with the region's fallback.
#[inline(never)]
pub(super) fn reached(core: &mut Core, data: EndedRegion) -> Node {
    let data = data.into_data();
    leave(core, &data);
    core.ending = None;
    let canceled = core.regions().target_canceled;
    let expired = Expired {
        canceled_until: canceled.then_some(data.deadline),
    };
    data.fallback.invoke(expired)
}

/// Whether an unwinding ending a region has reached its frame (the frame
/// just popped was at the target's index).
#[inline(never)]
pub(super) fn is_target(core: &Core) -> bool {
    matches!(core.ending, Some(Ending::Region))
        && core
            .regions_ref()
            .is_some_and(|regions| regions.target == core.stack.len())
}
