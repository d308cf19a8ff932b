//! The run-loop: interprets a fiber's nodes with an explicit continuation
//! stack, never by recursion.
//!
//! Each iteration evaluates one node (a *step*). A `Bind` node pushes its
//! continuation as a [`Frame`] and goes on with its source; a result pops one
//! frame per step. Fast path, as in Cats Effect's `IOFiber`: a `flat_map`,
//! `map` or error handler whose source is already a value applies (or, for a
//! handler, skips) its continuation without touching the stack.
//!
//! After `auto_yield_after` steps the fiber saves the node it was about to
//! evaluate and hands itself to [`Executor::reschedule_fiber`].
//!
//! With `std`, the loop runs under `catch_unwind`. A panic in user code
//! loses only the closure that panicked: the stack is intact in `core`, so
//! the loop goes on with a `Panicked` node, which drops the remaining frames
//! and ends the fiber with [`Outcome::Panicked`].

use super::{Core, Fiber, FiberInner};
use crate::erased::Value;
use crate::executor::{Executor, TimerCallback};
use crate::node::{Frame, FrameKind, Kind, Node, Tag};
use crate::outcome::Outcome;
use crate::sync::Arc;

/// Why the run-loop stopped.
enum Exit {
    /// The fiber finished; its outcome was delivered.
    Completed,
    /// The fiber gave up its thread (cede or auto-yield); `core.current` holds
    /// where to go on.
    Yield,
    /// The fiber waits for a callback; `core.current` is `None`.
    Suspend,
}

impl<X: Executor> Fiber<X> {
    /// Runs the fiber until it completes, suspends or yields.
    ///
    /// On a yield the fiber hands itself to [`Executor::reschedule_fiber`];
    /// on a suspension it is held by whatever will resume it.
    pub fn run(self) {
        loop {
            let exit = self
                .inner
                .core
                // SAFETY: holding the unique `Fiber` handle gives exclusive
                // access to `core` (module doc of `fiber`); the `&mut` ends
                // before the state word publishes a suspension below.
                .with_mut(|core| run_guarded(&self.inner, unsafe { &mut *core }));
            match exit {
                Exit::Completed => return,
                Exit::Yield => {
                    let executor = self.inner.executor.clone();
                    executor.reschedule_fiber(self);
                    return;
                }
                Exit::Suspend => {
                    if self.inner.header.suspend() {
                        // The result arrived while we were saving our state:
                        // continue here rather than through the queue.
                        continue;
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(feature = "std")]
fn run_guarded<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    loop {
        // The closure only borrows `core`, which stays consistent across a
        // panic: frames are popped before they are called.
        match catch_unwind(AssertUnwindSafe(|| run_loop(inner, core))) {
            Ok(exit) => return exit,
            Err(payload) => {
                let message = crate::outcome::PanicMessage::from_payload(&*payload);
                drop(payload);
                core.current = Some(Node::panicked(message));
            }
        }
    }
}

#[cfg(not(feature = "std"))]
fn run_guarded<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    run_loop(inner, core)
}

fn run_loop<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    let executor = &inner.executor;
    let mut budget = executor.config().auto_yield_after();
    let mut node = match core.current.take() {
        Some(node) => node,
        None => {
            // Resumed after a suspension: the result is in the slot.
            core.suspended_finalizer = None;
            core.timer_key = None;
            Node::from_res(inner.header.take_result())
        }
    };
    // SAFETY (for every `call` below): each frame and node was built by the
    // typed API, whose adapters expect exactly the erased input they get:
    // the value or error of the source program they were attached to.
    loop {
        if budget == 0 {
            core.current = Some(node);
            return Exit::Yield;
        }
        budget -= 1;
        node = match node.into_kind() {
            Kind::Pure(value) => {
                // Error handlers are popped without a call on success.
                let frame = loop {
                    match core.stack.pop() {
                        Some(frame) if frame.is_error_handler_only() => continue,
                        other => break other,
                    }
                };
                match frame.map(Frame::into_kind) {
                    None => {
                        complete(core, Outcome::Succeeded(value));
                        return Exit::Completed;
                    }
                    Some(FrameKind::FlatMap(f)) => unsafe { f.call(value) },
                    Some(FrameKind::Map(f)) => Node::pure(unsafe { f.call(value) }),
                    Some(FrameKind::Fold(f)) => Node::from_res(unsafe { f.call(Ok(value)) }),
                    Some(FrameKind::FoldWith(f)) => unsafe { f.call(Ok(value)) },
                    Some(FrameKind::HandleErrorWith(_)) | Some(FrameKind::MapError(_)) => {
                        unreachable!("io-core: error handlers are skipped on success")
                    }
                }
            }
            Kind::Error(error) => match unwind_error(core) {
                None => {
                    complete(core, Outcome::Errored(error));
                    return Exit::Completed;
                }
                Some(FrameKind::HandleErrorWith(f)) => unsafe { f.call(error) },
                Some(FrameKind::MapError(f)) => Node::error(unsafe { f.call(error) }),
                Some(FrameKind::Fold(f)) => Node::from_res(unsafe { f.call(Err(error)) }),
                Some(FrameKind::FoldWith(f)) => unsafe { f.call(Err(error)) },
                Some(FrameKind::Map(_)) | Some(FrameKind::FlatMap(_)) => {
                    unreachable!("io-core: unwind_error returns only handler frames")
                }
            },
            Kind::Delay(thunk) => Node::pure(unsafe { thunk.call(()) }),
            Kind::Defer(thunk) => unsafe { thunk.call(()) },
            // Fast paths: a source that is already a value or an error is
            // applied (or skipped) at once, without a frame.
            Kind::FlatMap(bind) => {
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => unsafe { k.call(value) },
                    Ok(Err(error)) => Node::error(error),
                    Err(source) => {
                        core.stack.push(Frame::flat_map(k));
                        source
                    }
                }
            }
            Kind::Map(bind) => {
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => Node::pure(unsafe { k.call(value) }),
                    Ok(Err(error)) => Node::error(error),
                    Err(source) => {
                        core.stack.push(Frame::map(k));
                        source
                    }
                }
            }
            Kind::HandleErrorWith(bind) => {
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => Node::pure(value),
                    Ok(Err(error)) => unsafe { k.call(error) },
                    Err(source) => {
                        core.stack.push(Frame::handle_error_with(k));
                        source
                    }
                }
            }
            Kind::MapError(bind) => {
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(Ok(value)) => Node::pure(value),
                    Ok(Err(error)) => Node::error(unsafe { k.call(error) }),
                    Err(source) => {
                        core.stack.push(Frame::map_error(k));
                        source
                    }
                }
            }
            Kind::Fold(bind) => {
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(res) => Node::from_res(unsafe { k.call(res) }),
                    Err(source) => {
                        core.stack.push(Frame::fold(k));
                        source
                    }
                }
            }
            Kind::FoldWith(bind) => {
                let (source, k) = bind.into_parts();
                match source.into_settled() {
                    Ok(res) => unsafe { k.call(res) },
                    Err(source) => {
                        core.stack.push(Frame::fold_with(k));
                        source
                    }
                }
            }
            Kind::Async(register) => {
                let generation = inner.header.begin_suspension();
                let callback = FiberInner::callback(inner, generation);
                let finalizer = unsafe { register.call(callback) };
                match inner.header.take_if_done() {
                    // Completed during registration: go on synchronously.
                    Some(res) => {
                        drop(finalizer);
                        Node::from_res(res)
                    }
                    None => {
                        core.suspended_finalizer = finalizer;
                        core.current = None;
                        return Exit::Suspend;
                    }
                }
            }
            Kind::Sleep(duration) => {
                let generation = inner.header.begin_suspension();
                let callback = TimerCallback {
                    raw: FiberInner::callback(inner, generation),
                };
                let deadline = executor.monotonic().saturating_add(duration);
                let key = executor.set_timer(deadline, callback);
                match inner.header.take_if_done() {
                    Some(res) => Node::from_res(res),
                    None => {
                        core.timer_key = Some(Value::new(key));
                        core.current = None;
                        return Exit::Suspend;
                    }
                }
            }
            Kind::Cede => {
                core.current = Some(Node::pure(Value::unit()));
                return Exit::Yield;
            }
            Kind::Never => {
                inner.header.begin_suspension();
                core.current = None;
                return Exit::Suspend;
            }
            Kind::Monotonic => Node::pure(Value::new(executor.monotonic())),
            Kind::RealTime => Node::pure(Value::new(executor.real_time())),
            Kind::Panicked(message) => {
                // Drop the frames one by one (a drop may panic in turn; the
                // guard then comes back here with the rest of the stack).
                while let Some(frame) = core.stack.pop() {
                    drop(frame);
                }
                complete(core, Outcome::Panicked(message));
                return Exit::Completed;
            }
        };
    }
}

/// Pops frames until an error handler; `None` if the stack ran out.
#[inline]
fn unwind_error(core: &mut Core) -> Option<FrameKind> {
    while let Some(frame) = core.stack.pop() {
        match frame.tag() {
            Tag::Map | Tag::FlatMap => continue,
            _ => return Some(frame.into_kind()),
        }
    }
    None
}

fn complete(core: &mut Core, outcome: Outcome<Value, Value>) {
    crate::pool::stacks::give(core::mem::take(&mut core.stack));
    if let Some(on_complete) = core.on_complete.take() {
        // SAFETY: the adapter expects the erased outcome of this fiber's program.
        unsafe { on_complete.call(outcome) }
    }
}
