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
use crate::node::{Frame, Node, Res};
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
                core.current = Some(Node::Panicked(message));
            }
        }
    }
}

#[cfg(not(feature = "std"))]
fn run_guarded<X: Executor>(inner: &Arc<FiberInner<X>>, core: &mut Core) -> Exit {
    run_loop(inner, core)
}

#[inline(always)]
fn from_res(res: Res) -> Node {
    match res {
        Ok(v) => Node::Pure(v),
        Err(e) => Node::Error(e),
    }
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
            from_res(inner.header.take_result())
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
        node = match node {
            Node::Pure(value) => match core.stack.pop() {
                None => {
                    complete(core, Outcome::Succeeded(value));
                    return Exit::Completed;
                }
                Some(Frame::Map(f)) => Node::Pure(unsafe { f.call(value) }),
                Some(Frame::FlatMap(f)) => unsafe { f.call(value) },
                Some(Frame::HandleErrorWith(_)) | Some(Frame::MapError(_)) => Node::Pure(value),
                Some(Frame::Fold(f)) => from_res(unsafe { f.call(Ok(value)) }),
                Some(Frame::FoldWith(f)) => unsafe { f.call(Ok(value)) },
            },
            Node::Error(error) => match unwind_error(core) {
                None => {
                    complete(core, Outcome::Errored(error));
                    return Exit::Completed;
                }
                Some(Frame::HandleErrorWith(f)) => unsafe { f.call(error) },
                Some(Frame::MapError(f)) => Node::Error(unsafe { f.call(error) }),
                Some(Frame::Fold(f)) => from_res(unsafe { f.call(Err(error)) }),
                Some(Frame::FoldWith(f)) => unsafe { f.call(Err(error)) },
                Some(Frame::Map(_)) | Some(Frame::FlatMap(_)) => {
                    unreachable!("io-core: unwind_error returns only handler frames")
                }
            },
            Node::Delay(thunk) => Node::Pure(unsafe { thunk.call(()) }),
            Node::Defer(thunk) => unsafe { thunk.call(()) },
            Node::FlatMap(bind) => {
                if bind.source_is_pure() {
                    let (source, k) = bind.into_parts();
                    let Node::Pure(value) = source else {
                        unreachable!()
                    };
                    unsafe { k.call(value) }
                } else {
                    let (source, k) = bind.into_parts();
                    core.stack.push(Frame::FlatMap(k));
                    source
                }
            }
            Node::Map(bind) => {
                if bind.source_is_pure() {
                    let (source, k) = bind.into_parts();
                    let Node::Pure(value) = source else {
                        unreachable!()
                    };
                    Node::Pure(unsafe { k.call(value) })
                } else {
                    let (source, k) = bind.into_parts();
                    core.stack.push(Frame::Map(k));
                    source
                }
            }
            Node::HandleErrorWith(bind) => {
                let (source, k) = bind.into_parts();
                if let Node::Pure(_) = source {
                    source
                } else {
                    core.stack.push(Frame::HandleErrorWith(k));
                    source
                }
            }
            Node::MapError(bind) => {
                let (source, k) = bind.into_parts();
                if let Node::Pure(_) = source {
                    source
                } else {
                    core.stack.push(Frame::MapError(k));
                    source
                }
            }
            Node::Fold(bind) => {
                let (source, k) = bind.into_parts();
                core.stack.push(Frame::Fold(k));
                source
            }
            Node::FoldWith(bind) => {
                let (source, k) = bind.into_parts();
                core.stack.push(Frame::FoldWith(k));
                source
            }
            Node::Async(register) => {
                let generation = inner.header.begin_suspension();
                let callback = FiberInner::callback(inner, generation);
                let finalizer = unsafe { register.call(callback) };
                match inner.header.take_if_done() {
                    // Completed during registration: go on synchronously.
                    Some(res) => {
                        drop(finalizer);
                        from_res(res)
                    }
                    None => {
                        core.suspended_finalizer = finalizer;
                        core.current = None;
                        return Exit::Suspend;
                    }
                }
            }
            Node::Sleep(duration) => {
                let generation = inner.header.begin_suspension();
                let callback = TimerCallback {
                    raw: FiberInner::callback(inner, generation),
                };
                let deadline = executor.monotonic().saturating_add(duration);
                let key = executor.set_timer(deadline, callback);
                match inner.header.take_if_done() {
                    Some(res) => from_res(res),
                    None => {
                        core.timer_key = Some(Value::new(key));
                        core.current = None;
                        return Exit::Suspend;
                    }
                }
            }
            Node::Cede => {
                core.current = Some(Node::Pure(Value::unit()));
                return Exit::Yield;
            }
            Node::Never => {
                inner.header.begin_suspension();
                core.current = None;
                return Exit::Suspend;
            }
            Node::Monotonic => Node::Pure(Value::new(executor.monotonic())),
            Node::RealTime => Node::Pure(Value::new(executor.real_time())),
            Node::Panicked(message) => {
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
fn unwind_error(core: &mut Core) -> Option<Frame> {
    while let Some(frame) = core.stack.pop() {
        match frame {
            Frame::Map(_) | Frame::FlatMap(_) => continue,
            handler => return Some(handler),
        }
    }
    None
}

fn complete(core: &mut Core, outcome: Outcome<Value, Value>) {
    if let Some(on_complete) = core.on_complete.take() {
        // SAFETY: the adapter expects the erased outcome of this fiber's program.
        unsafe { on_complete.call(outcome) }
    }
}
