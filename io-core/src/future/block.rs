//! IO blocks: `.await` on an [`IO`] inside a future that a fiber drives
//! ([`IO::block`], and the futures of [`IO::from_future`] and its kin) runs
//! that `IO` on the same fiber, as steps of its run-loop.
//!
//! # The protocol
//!
//! A fiber polls a driven future with a context whose waker is a *poll
//! waker*: a waker with a vtable of its own, [`POLL_VTABLE`], over the
//! [`BlockHead`] that sits beside the future in the driver's allocation and
//! holds the future's wake cell (`cell.rs`; made lazily, when a waker is
//! first cloned) and the block's [`Slot`]. Cloning the poll waker gives an
//! owned waker over the wake cell, and a wake goes to the cell, so a future
//! that keeps its waker (a channel, a timer of another runtime) resumes the
//! fiber as under [`IO::from_future`].
//!
//! 1. `.await` on an `IO<A, E>` makes an [`Await<A, E>`]
//!    (`IntoFuture`, `#[track_caller]`: the `.await`'s line is its site).
//! 2. Its first poll finds the poll waker (`Waker::vtable`), and leaves
//!    the `IO`'s node in the slot as the block's *request*, under a token
//!    the slot issues, and returns `Pending`. Only one request is made per
//!    poll of the block: an `Await` that finds the request taken stays
//!    unsent and asks at the next poll.
//! 3. The block's future returns `Pending`. The driver finds the request
//!    and hands it to the run-loop (`BlockStep::Await`), which pushes the
//!    block's frame and runs the program on the fiber like any other, with
//!    the fiber's cancellation, masks and finalizers (a program that is
//!    already a value is handed back at once, without a frame).
//! 4. Its result (a value or an error) pops the frame, whose continuation
//!    leaves it in the slot under the request's token and polls the block
//!    again; the `Await` whose token it is takes it and returns it,
//!    `Ok(a)` or `Err(e)`. A result nobody takes in that poll (its `Await`
//!    was dropped meanwhile) is dropped.
//!
//! The block is never polled from inside another poll, and every await
//! either finishes inside the poll (below) or returns to the run-loop: a
//! loop of a million awaits runs in constant native stack.
//!
//! # Awaits that finish at once
//!
//! On 64-bit hosts, before each poll the run-loop lends the block's slot
//! its auto-yield budget (and its trace ring). An `.await` whose program
//! finishes at once, a value (`pure`, an `Ok` of `from_result`) or a
//! `delay`, takes one step of that credit and runs the program inside the
//! poll, recording the same trace events the run-loop records for it (the
//! `await` with its line, then the `delay`'s), and is ready in the same
//! poll: no trip out of the poll and back. What the run-loop would observe
//! between two such steps it observes where the credit runs out, as it
//! does for `flat_map`s: the next await asks the run-loop as in step 2,
//! which yields (and observes cancellation) there. After a masked region
//! ended with a cancellation pending, the run-loop lends nothing, so the
//! next await reaches the run-loop and observes it. Other programs (a
//! `map`, a `flat_map`, a wait) always go through the run-loop. On other
//! targets every program does (flash), as for the run-loop's own fast
//! path for values. When the fiber is canceled while the requested program
//! runs, unwinding drops the continuation and with it the block's future
//! (its state, on the fiber), after the finalizers of the requested
//! program and before those around the block.
//!
//! # Soundness of the slot
//!
//! The slot lives beside the future, in the driver's allocation, and is
//! reached during a poll through the borrowed poll waker, which exists only
//! during the poll (safe code can clone a waker, which gives an owned waker
//! over the wake cell, not this one). A future may hand the borrowed waker
//! to a scoped thread during its poll, and build a new `Context` from it
//! there; so an `Await` uses the slot only when it is polled with the very
//! `Context` the fiber made for the poll (its address is in the head).
//! `Context` is neither `Send` nor `Sync`: no other thread can hold that
//! one, and on the polling thread an `Await` holds it through `&mut` while
//! it uses the slot, so no two uses overlap, without a lock. An `Await`
//! polled with another `Context` (another thread's, or a combinator's that
//! wraps the waker in a new one) acts as outside a block. Combinators that
//! poll their parts with the context they are given (`join!`, `select!`,
//! `poll_fn`, timeouts) work inside blocks. A token ties a result
//! to the `Await` that asked for it, which is the one that knows its type.
//!
//! # Outside a block
//!
//! An `IO` awaited where no fiber drives the future (a tokio task, an
//! executor of another library) has nobody to run it: its poll panics
//! with a message that says so (a bug in the program, as tokio's "no
//! reactor running"). Run the `IO` with an executor's `block_on`, or
//! `into_future_on` it, instead.
//!
//! Design credits: Effect-TS's `Effect.gen` (a generator whose yields are
//! run by the runtime) and Cats Effect's for-comprehension, which IO
//! blocks stand in for; no code is copied.

use core::convert::Infallible;
use core::future::{Future, IntoFuture};
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use core::cell::UnsafeCell;

use super::cell::{self, FiberCell, LazyWake};
use crate::engine::node::{Node, Res, Slot};
use crate::engine::tracing::Site;
use crate::io::IO;
use crate::sync::Arc;

/// What a driven future's waker points at, beside the future in the
/// driver's pinned allocation (`mod.rs`): the future's wake cell once a
/// waker was cloned (else a [`LazyWake`] that makes one when the waker is
/// cloned), and the block's [`Slot`] behind a try-lock.
///
/// Between polls the driver owns it (`&mut`); during a poll the poll's
/// waker (and every `Await` polled with it) reaches it through a shared
/// borrow only: `cell` is not written then, the lazy part is atomic, and
/// the slot is reached only by the holder of `busy`.
#[repr(C)]
pub(crate) struct BlockHead {
    /// The block's slot: first, so that the head's address (and the
    /// driver's allocation's) is the slot's (`engine/node/block.rs`).
    slot: UnsafeCell<Slot>,
    /// The future's wake cell, if a waker was cloned at an earlier poll.
    pub(crate) cell: Option<Arc<FiberCell>>,
    /// Used while there is no cell.
    pub(crate) lazy: LazyWake,
    /// The address of the current poll's `Context` (module doc, "Soundness
    /// of the slot"). Written only at the start of a poll, before any
    /// waker over this head exists; read by `Await`s during the poll.
    context: UnsafeCell<*const ()>,
}

// SAFETY: the slot is only reached on the thread that polls, through the
// poll's own `Context` (which cannot leave that thread: module doc), or by
// the driver through `&mut` between polls; `Slot` is `Send` (a `Node` and a
// `Res` are), so the head moves it between threads but never shares it.
// `context` is written only before a poll hands out its waker and read
// during it (reads may come from other threads holding the borrowed waker:
// they only compare it). The other fields are `Sync` themselves.
unsafe impl Sync for BlockHead {}
// SAFETY: as above: everything the head owns is `Send` (the context
// address is only compared, never dereferenced).
unsafe impl Send for BlockHead {}

impl BlockHead {
    /// No cell, an empty slot, for a block made at `site`.
    pub(crate) fn new(site: Option<Site>) -> Self {
        BlockHead {
            slot: UnsafeCell::new(Slot::new(site)),
            cell: None,
            lazy: LazyWake::new(),
            context: UnsafeCell::new(core::ptr::null()),
        }
    }

    /// The slot, between polls.
    #[inline(always)]
    pub(crate) fn slot(&mut self) -> &mut Slot {
        self.slot.get_mut()
    }

    /// Runs `f` with a context whose waker points at this head (the poll of
    /// a driven future).
    #[inline(always)]
    pub(crate) fn poll<R>(&self, f: impl FnOnce(&mut Context<'_>) -> R) -> R {
        let data = core::ptr::from_ref(self).cast::<()>();
        // SAFETY: `self` outlives this call and the waker lives only during
        // it (in a `ManuallyDrop`, never dropped or consumed); every function
        // of `POLL_VTABLE` reads `data` as the `BlockHead` it is, through a
        // shared borrow.
        let waker =
            ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(data, &POLL_VTABLE)) });
        let mut cx = Context::from_waker(&waker);
        // SAFETY: no waker over this head exists outside this call yet (the
        // one just made is handed out only through `cx`, below; those of
        // earlier polls ended with them), so nothing reads `context` now.
        unsafe { *self.context.get() = core::ptr::from_ref(&cx).cast::<()>() };
        f(&mut cx)
    }
}

/// The poll waker's vtable: a clone is an owned waker over the wake cell
/// (made then if there is none), a wake goes to the cell (or, without one,
/// leaves a flag the driver reads after the poll). Only the borrowed waker
/// of a poll is ever made over a `BlockHead`; it is never dropped or
/// consumed (`wake` and `drop` are only reachable through it, and it lives
/// in a `ManuallyDrop`).
static POLL_VTABLE: RawWakerVTable =
    RawWakerVTable::new(poll_clone, poll_wake_by_ref, poll_wake_by_ref, poll_drop);

/// # Safety
/// `data` points at a live `BlockHead` (the borrowed waker lives only during
/// [`BlockHead::poll`], which borrows it).
unsafe fn poll_clone(data: *const ()) -> RawWaker {
    // SAFETY: function contract.
    let head = unsafe { &*data.cast::<BlockHead>() };
    match &head.cell {
        Some(cell) => cell::clone_cell_waker(cell),
        None => head.lazy.clone_waker(),
    }
}

/// # Safety
/// As for [`poll_clone`].
unsafe fn poll_wake_by_ref(data: *const ()) {
    // SAFETY: function contract.
    let head = unsafe { &*data.cast::<BlockHead>() };
    match &head.cell {
        Some(cell) => cell.wake(),
        None => head.lazy.wake_by_ref(),
    }
}

/// Never called with a count to release (see [`POLL_VTABLE`]).
unsafe fn poll_drop(_: *const ()) {}

/// Runs `f` with the slot of the block that polls with `cx`, if `cx` is
/// the very `Context` a fiber polls a block with; `None` otherwise.
#[inline(always)]
fn with_slot<R>(cx: &mut Context<'_>, f: impl FnOnce(&mut Slot) -> R) -> Option<R> {
    let waker = cx.waker();
    if !core::ptr::eq(waker.vtable(), &POLL_VTABLE) {
        return None;
    }
    // SAFETY: a waker with `POLL_VTABLE` is only made by `BlockHead::poll`,
    // over a live `BlockHead` (it exists only during that call, and this
    // borrow of it ends before `with_slot` returns).
    let head = unsafe { &*waker.data().cast::<BlockHead>() };
    // SAFETY: `context` is only written before the poll hands out its
    // waker (`BlockHead::poll`); this is a read during the poll.
    let polling = unsafe { *head.context.get() };
    if !core::ptr::eq(polling, core::ptr::from_mut(cx).cast_const().cast::<()>()) {
        return None;
    }
    // SAFETY: `cx` is the `Context` of the poll running now (the same live
    // object: two live objects never share an address), held here through
    // `&mut`. A `Context` is neither `Send` nor `Sync`, so no other thread
    // can hold it, and on this thread the `&mut` borrow excludes any other
    // use of it until `with_slot` returns: this is the only access to the
    // slot (the driver reaches it only between polls, through `&mut`).
    Some(f(unsafe { &mut *head.slot.get() }))
}

/// The future of an `.await` on an [`IO<A, E>`]: run on the fiber that
/// drives the block, it resolves to the program's result, `Ok(a)` or
/// `Err(e)` (so `?` propagates its typed error).
///
/// Made by `IntoFuture` (`io.await`); see the [module documentation]
/// (crate::future) of `future` for IO blocks.
#[must_use = "an IO block's await does nothing unless it is awaited"]
pub struct Await<A, E> {
    /// The program, until it is handed to the block (`sent`).
    node: ManuallyDrop<Node>,
    /// Whether `node` was handed to the block (it is gone from here).
    sent: bool,
    /// The token it was handed over under (once `sent`).
    token: u32,
    /// The `.await`'s site.
    site: Option<Site>,
    _types: PhantomData<fn() -> (A, E)>,
}

impl<A: Send + 'static, E: Send + 'static> IntoFuture for IO<A, E> {
    type Output = Result<A, E>;
    type IntoFuture = Await<A, E>;

    /// The `IO` as the future an IO block awaits; the `.await`'s line is
    /// recorded as the site of an `await` trace event.
    #[track_caller]
    #[inline]
    fn into_future(self) -> Await<A, E> {
        Await {
            node: ManuallyDrop::new(self.into_node()),
            sent: false,
            token: 0,
            site: crate::engine::tracing::here(),
            _types: PhantomData,
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> Future for Await<A, E> {
    type Output = Result<A, E>;

    /// # Panics
    ///
    /// When polled outside an IO block (by a task of another runtime, or
    /// any poll whose waker is not a fiber's poll waker): nobody could run
    /// the program there. This is a bug in the program, reported as tokio
    /// reports a timer used outside its runtime. Polling again after the
    /// result was returned gives `Pending`.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<A, E>> {
        // `Await` is `Unpin` (a node is two words, never self-referential).
        let this = self.get_mut();
        let polled = with_slot(cx, |slot| {
            if !this.sent {
                // SAFETY: not sent: `node` holds the program. If it is run
                // inline or the slot takes it, `sent` says it is gone from
                // here; if not, the copy handed back is forgotten and `node`
                // keeps it.
                #[cfg_attr(not(target_pointer_width = "64"), allow(unused_mut))]
                let mut node = unsafe { Node::read_by_words(&*this.node) };
                // On 64-bit hosts (speed); elsewhere every program goes
                // through the run-loop (flash), as the run-loop's own fast
                // path for values.
                #[cfg(target_pointer_width = "64")]
                if slot.take_credit() {
                    // `inline` owns the program from here: if a `delay` it
                    // runs panics, the unwinding must not drop it again.
                    this.sent = true;
                    match inline(slot, node, &mut this.site) {
                        Ok(res) => {
                            // No token: nothing is delivered for it.
                            this.token = u32::MAX;
                            return Poll::Ready(typed::<A, E>(res));
                        }
                        Err(back) => {
                            // Handed back whole: `node` still holds it.
                            this.sent = false;
                            node = back;
                        }
                    }
                }
                match slot.ask(node, this.site.take()) {
                    Ok(token) => {
                        this.sent = true;
                        this.token = token;
                    }
                    // One request per poll of the block: ask at the next.
                    Err((node, site)) => {
                        core::mem::forget(node);
                        this.site = site;
                    }
                }
                Poll::Pending
            } else {
                match slot.answer(this.token) {
                    Some(res) => Poll::Ready(typed::<A, E>(res)),
                    None => Poll::Pending,
                }
            }
        });
        match polled {
            Some(poll) => poll,
            None => outside_a_block(),
        }
    }
}

impl<A, E> Drop for Await<A, E> {
    fn drop(&mut self) {
        if !self.sent {
            // SAFETY: not sent: `node` holds the program, dropped once here.
            unsafe { ManuallyDrop::drop(&mut self.node) };
        }
    }
}

/// Runs an awaited program that finishes at once (a value, or a `delay`)
/// inline, during the poll, with one step of the credit the run-loop lent
/// it (taken by the caller); any other program is handed back.
///
/// It is what the run-loop does with the same program, without the trip
/// out of the poll and back: the `await` (and the `delay`'s own) trace
/// event, then the value. Cancellation and auto-yields are observed by the
/// run-loop where its budget runs out, and the credit is that budget: a
/// loop of awaits that finish at once returns to the run-loop as often as
/// the same loop of `flat_map`s.
#[cfg(target_pointer_width = "64")]
#[inline(always)]
fn inline(slot: &mut Slot, node: Node, site: &mut Option<Site>) -> Result<Res, Node> {
    let node = match node.into_value() {
        Ok(value) => {
            slot.record(&crate::engine::tracing::AWAIT, site.as_ref());
            return Ok(Ok(value));
        }
        Err(node) => node,
    };
    match node.into_delay() {
        Ok(thunk) => {
            slot.record(&crate::engine::tracing::AWAIT, site.as_ref());
            #[cfg(feature = "tracing")]
            slot.record(thunk.op(), thunk.site());
            Ok(Ok(thunk.invoke(())))
        }
        Err(node) => Err(node),
    }
}

/// The panic of an `Await` polled outside an IO block.
#[cold]
#[inline(never)]
fn outside_a_block() -> ! {
    panic!(
        "an IO was awaited outside an IO block: `.await` on an `IO` runs it on the \
         fiber that drives the future (inside `IO::block` or `IO::from_future`); \
         elsewhere, run it with an executor (`block_on`, `into_future_on`)"
    )
}

/// Reads a result back as the awaited program's types.
fn typed<A: 'static, E: 'static>(res: Res) -> Result<A, E> {
    match res {
        // SAFETY: the result was delivered under the token of this
        // `Await`'s request: it is the result of the `IO<A, E>` it handed
        // to the block (a value an `A`, an error an `E`).
        Ok(value) => Ok(unsafe { value.take::<A>() }),
        // SAFETY: as above.
        Err(error) => Err(unsafe { error.take::<E>() }),
    }
}

/// The future of an `.await` on an [`IO<A, Infallible>`](IO) made with
/// [`IO::value`]: it resolves to the value itself.
#[must_use = "an IO block's await does nothing unless it is awaited"]
pub struct AwaitValue<A> {
    inner: Await<A, Infallible>,
}

impl<A: Send + 'static> IO<A, Infallible> {
    /// This program, to be awaited in an IO block for its value alone: it
    /// cannot fail, so its await gives an `A`, not a `Result`.
    ///
    /// The operations that cannot fail (`Ref::get`, `Deferred::get`,
    /// `Queue::take`, [`IO::sleep`], `start`, …) are generic in
    /// their error type so that they fit any program's chain; in a block,
    /// where nothing fixes that type, `.value()` fixes it to
    /// [`Infallible`]:
    ///
    /// ```
    /// use std::time::Duration;
    /// use spindle_effect::{IO, IORuntime, Outcome, Ref};
    /// use spindle_effect::single::SingleThreaded;
    ///
    /// let hits = Ref::new(0u32);
    /// let program: IO<u32, String> = IO::block(async move {
    ///     for _ in 0..3 {
    ///         hits.update(|n| *n += 1).value().await;
    ///     }
    ///     IO::sleep(Duration::from_millis(1)).value().await;
    ///     Ok(hits.get().value().await)
    /// });
    /// assert_eq!(SingleThreaded::new()?.block_on(program)?, Outcome::Succeeded(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn value(self) -> AwaitValue<A> {
        AwaitValue {
            inner: self.into_future(),
        }
    }
}

impl<A: Send + 'static> Future for AwaitValue<A> {
    type Output = A;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<A> {
        match Pin::new(&mut self.get_mut().inner).poll(cx) {
            Poll::Ready(Ok(value)) => Poll::Ready(value),
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => Poll::Pending,
        }
    }
}
