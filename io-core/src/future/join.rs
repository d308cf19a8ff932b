//! A fiber awaited as a future: [`JoinFuture`].
//!
//! The future waits on the fiber's join cell (`fiber/join.rs`) as a joining
//! fiber does, with a [`Waker`] in the waiter list instead of a fiber's
//! callback. Its waiter is registered on the first `Pending` poll, replaced
//! when a later poll brings a waker that would not wake the same task
//! (`Waker::will_wake`, as tokio's `JoinHandle` does), and removed when the
//! future is dropped, so a dropped future leaves nothing behind. The cell's
//! `complete` wakes the waker after releasing the cell's lock.

use core::future::{Future, IntoFuture};
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::fiber::handle::FiberHandle;
use crate::fiber::join::JoinRef;
use crate::fiber::typed_outcome;
use crate::outcome::Outcome;
use crate::wait::CellOwner;

/// A future of a started fiber's [`Outcome`]: what `.await` on a
/// [`FiberHandle`] gives (`FiberHandle: IntoFuture`), and what
/// [`IO::into_future_on`](crate::IO::into_future_on) returns.
///
/// Dropping the future **detaches** the fiber by default: it keeps running
/// on its executor, as a dropped tokio `JoinHandle` detaches its task and a
/// dropped [`FiberHandle`] its fiber. Awaiting is then only observing, and
/// a `select!` that drops the losing branch does not silently cancel work.
/// [`cancel_on_drop`](JoinFuture::cancel_on_drop) asks for the other
/// behaviour: dropping the future before it is ready requests the fiber's
/// cancellation (it does not wait for it; the fiber's finalizers then run on
/// its executor, once).
///
/// The future is `Send`, `Unpin`, and may be polled from any thread with
/// any waker; only the latest waker is kept. Polling it again after it was
/// ready gives `Outcome::Canceled` (the outcome was moved out; no panic).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{FiberHandle, wstp::Runtime};
///
/// let rt = Runtime::new()?;
/// let handle = rt.handle().clone();
/// let io: IO<Outcome<u32, ()>, ()> = IO::defer(move || {
///     let child: FiberHandle<u32, ()> = FiberHandle::spawn(IO::pure(7), &handle);
///     IO::from_future(async move { child.await })
/// });
/// assert_eq!(rt.block_on(io)?, Outcome::Succeeded(Outcome::Succeeded(7)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a JoinFuture does nothing unless polled; dropping it detaches the fiber"]
pub struct JoinFuture<A, E> {
    /// A fiber whose program is an `IO<A, E>`.
    pub(super) fiber: JoinRef,
    /// The id of this future's waiter in the fiber's join cell, if any.
    waiter: Option<crate::wait::list::WaiterId>,
    cancel_on_drop: bool,
    /// The outcome was moved out.
    done: bool,
    _types: PhantomData<fn() -> (A, E)>,
}

impl<A: Send + 'static, E: Send + 'static> JoinFuture<A, E> {
    /// Dropping this future before it is ready requests the fiber's
    /// cancellation (the default is to detach: see the type's doc).
    pub fn cancel_on_drop(mut self) -> Self {
        self.cancel_on_drop = true;
        self
    }
}

impl<A, E> core::fmt::Debug for JoinFuture<A, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinFuture")
            .field("fiber", &self.fiber.id())
            .field("cancel_on_drop", &self.cancel_on_drop)
            .field("done", &self.done)
            .finish()
    }
}

impl<A: Send + 'static, E: Send + 'static> Future for JoinFuture<A, E> {
    type Output = Outcome<A, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<A, E>> {
        let this = self.get_mut();
        let polled = this
            .fiber
            .cell()
            .poll_value(&mut this.waiter, cx.waker(), |(outcome, _)| {
                core::mem::replace(outcome, Outcome::Canceled)
            });
        match polled {
            Poll::Ready(outcome) => {
                this.done = true;
                // SAFETY: the fiber's program is an `IO<A, E>` (the handle
                // this future was made from says so: `FiberHandle::from_fiber`).
                Poll::Ready(unsafe { typed_outcome::<A, E>(outcome) })
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<A, E> Drop for JoinFuture<A, E> {
    fn drop(&mut self) {
        if let Some(id) = self.waiter.take() {
            self.fiber.cell().remove_waiter(id);
        }
        if self.cancel_on_drop && !self.done {
            // Does nothing to a fiber that has completed.
            self.fiber.request_cancel();
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> IntoFuture for FiberHandle<A, E> {
    type Output = Outcome<A, E>;
    type IntoFuture = JoinFuture<A, E>;

    /// A future of the fiber's outcome; dropping it detaches the fiber
    /// ([`JoinFuture`]).
    fn into_future(self) -> JoinFuture<A, E> {
        JoinFuture {
            fiber: self.into_raw(),
            waiter: None,
            cancel_on_drop: false,
            done: false,
            _types: PhantomData,
        }
    }
}
