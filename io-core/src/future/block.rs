//! IO blocks: `.await` on an [`IO`] inside a future that a fiber drives
//! ([`IO::block`], and the futures of [`IO::from_future`] and its kin) runs
//! that `IO` on the same fiber, as steps of its run-loop.
//!
//! # The protocol
//!
//! A fiber polls a block's future with a context whose waker is a *block
//! waker* ([`with_block_context`]): a waker with a vtable of its own,
//! [`BLOCK_VTABLE`], over a [`BlockWake`] on the fiber's native stack that
//! holds the fiber's real waker (the driver's: `cell.rs`) and a [`Slot`].
//! Waking or cloning it wakes or clones the real waker, so a future that
//! keeps the waker (a channel, a timer of another runtime) resumes the
//! fiber as under [`IO::from_future`].
//!
//! 1. `.await` on an `IO<A, E>` makes an [`Await<A, E>`]
//!    (`IntoFuture`, `#[track_caller]`: the `.await`'s line is its site).
//! 2. Its first poll finds the block waker (`Waker::vtable`), and leaves
//!    the `IO`'s node in the slot as the block's *request*, under a token
//!    the slot issues, and returns `Pending`. Only one request is made per
//!    poll of the block: an `Await` that finds the request taken stays
//!    unsent and asks at the next poll.
//! 3. The block's future returns `Pending`. The driver finds the request
//!    and hands the run-loop a `fold` node over it, whose continuation
//!    holds the driver: the requested program runs on the fiber like any
//!    other, with the fiber's cancellation, masks and finalizers.
//! 4. Its result (a value or an error) reaches the continuation, which
//!    leaves it in the slot under the request's token and polls the block
//!    again; the `Await` whose token it is takes it and returns it,
//!    `Ok(a)` or `Err(e)`. A result nobody takes in that poll (its `Await`
//!    was dropped meanwhile) is dropped.
//!
//! The block is never polled from inside another poll, and every await
//! returns to the run-loop: a loop of a million awaits runs in constant
//! native stack. When the fiber is canceled while the requested program
//! runs, unwinding drops the continuation and with it the block's future
//! (its state, on the fiber), after the finalizers of the requested
//! program and before those around the block.
//!
//! # Soundness of the slot
//!
//! The slot lives on the native stack of the poll and is reached through
//! the borrowed block waker, which exists only during the poll (safe code
//! can clone a waker, which gives the real waker, not this one). A future
//! may still hand the borrowed waker to a scoped thread during its poll,
//! so the slot is behind a try-lock (one atomic flag): an `Await` that
//! cannot take it at once acts as outside a block. A token ties a result
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

use core::future::{Future, IntoFuture};
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use crate::engine::node::{Node, Res};
use crate::engine::tracing::Site;
use crate::io::IO;
use crate::sync::{AtomicUsize, Ordering};

/// A result handed back to the block, under the token of its request.
pub(crate) type Delivery = (u32, Res);

/// A program an `.await` asked the fiber to run: its token, the program,
/// and the `.await`'s site (recorded as the `await` operation).
pub(crate) type Request = (u32, Node, Option<Site>);

/// Where an [`Await`] leaves its request and finds its result.
pub(crate) struct Slot {
    /// The program an `Await` asked to run, the `.await`'s site, and the
    /// request's token.
    request: Option<Request>,
    /// The result of the last request, until its `Await` takes it.
    result: Option<Delivery>,
    /// The next token.
    next: u32,
}

impl Slot {
    /// An empty slot, with the result of the last request (if any) for its
    /// `Await`, and tokens from `next` on.
    pub(crate) fn new(result: Option<Delivery>, next: u32) -> Self {
        Slot {
            request: None,
            result,
            next,
        }
    }

    /// After the poll: the request, if an `Await` made one, and the next
    /// token to issue. A result nobody took is dropped here.
    pub(crate) fn finish(self) -> (Option<Request>, u32) {
        (self.request, self.next)
    }
}

/// What the block waker points at: the real waker and the slot.
struct BlockWake<'a> {
    waker: &'a Waker,
    slot: *mut Slot,
    /// 1 while an `Await` uses the slot (the try-lock of the module doc).
    busy: AtomicUsize,
}

/// The block waker's vtable: every call goes to the real waker (a clone is
/// a real waker, not a block waker), so only the borrowed waker of a poll
/// is ever a block waker; it is never dropped or consumed (`wake` and
/// `drop` are only reachable through it, and it lives in a `ManuallyDrop`).
static BLOCK_VTABLE: RawWakerVTable = RawWakerVTable::new(
    block_clone,
    block_wake_by_ref,
    block_wake_by_ref,
    block_drop,
);

/// # Safety
/// `data` points at a live `BlockWake` (the borrowed block waker lives
/// only during [`with_block_context`], which owns it).
unsafe fn block_clone(data: *const ()) -> RawWaker {
    // SAFETY: function contract.
    let wake = unsafe { &*data.cast::<BlockWake<'_>>() };
    let real = ManuallyDrop::new(wake.waker.clone());
    // The clone's count moves into the returned raw waker (the
    // `ManuallyDrop` keeps it from being released here).
    RawWaker::new(real.data(), real.vtable())
}

/// # Safety
/// As for [`block_clone`].
unsafe fn block_wake_by_ref(data: *const ()) {
    // SAFETY: function contract.
    let wake = unsafe { &*data.cast::<BlockWake<'_>>() };
    wake.waker.wake_by_ref();
}

/// Never called with a count to release (see [`BLOCK_VTABLE`]).
unsafe fn block_drop(_: *const ()) {}

/// Runs `f` with a context whose waker is a block waker over `waker` (the
/// driver's real waker) and `slot`.
pub(crate) fn with_block_context<R>(
    waker: &Waker,
    slot: &mut Slot,
    f: impl FnOnce(&mut Context<'_>) -> R,
) -> R {
    let wake = BlockWake {
        waker,
        slot,
        busy: AtomicUsize::new(0),
    };
    let data = core::ptr::from_ref(&wake).cast::<()>();
    // SAFETY: `wake` outlives this call and the waker lives only during it
    // (in a `ManuallyDrop`, never dropped or consumed); every function of
    // `BLOCK_VTABLE` reads `data` as the `BlockWake` it is.
    let block = ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(data, &BLOCK_VTABLE)) });
    f(&mut Context::from_waker(&block))
}

/// Runs `f` with the slot of the block that polls with `cx`, if `cx`'s
/// waker is a block waker and its slot is free; `None` otherwise.
fn with_slot<R>(cx: &Context<'_>, f: impl FnOnce(&mut Slot) -> R) -> Option<R> {
    let waker = cx.waker();
    if !core::ptr::eq(waker.vtable(), &BLOCK_VTABLE) {
        return None;
    }
    // SAFETY: a waker with `BLOCK_VTABLE` is only made by
    // `with_block_context`, over a live `BlockWake` (it exists only during
    // that call, and this borrow of it ends before `with_slot` returns).
    let wake = unsafe { &*waker.data().cast::<BlockWake<'_>>() };
    if wake
        .busy
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return None;
    }
    // SAFETY: the slot outlives the poll that `wake` belongs to, and the
    // flag just taken makes this the only access to it (the driver reads it
    // only after the poll has returned).
    let out = f(unsafe { &mut *wake.slot });
    wake.busy.store(0, Ordering::Release);
    Some(out)
}

/// The future of an `.await` on an [`IO<A, E>`]: run on the fiber that
/// drives the block, it resolves to the program's result, `Ok(a)` or
/// `Err(e)` (so `?` propagates its typed error).
///
/// Made by `IntoFuture` (`io.await`); see the [module documentation]
/// (crate::future) of `future` for IO blocks.
#[must_use = "an IO block's await does nothing unless it is awaited"]
pub struct Await<A, E> {
    state: State,
    /// The `.await`'s site.
    site: Option<Site>,
    _types: PhantomData<fn() -> (A, E)>,
}

enum State {
    /// Not yet handed to the block: the program.
    Unsent(Node),
    /// Handed to the block under this token.
    Sent(u32),
    /// Its result was taken.
    Done,
}

impl<A: Send + 'static, E: Send + 'static> IntoFuture for IO<A, E> {
    type Output = Result<A, E>;
    type IntoFuture = Await<A, E>;

    /// The `IO` as the future an IO block awaits; the `.await`'s line is
    /// recorded as the site of an `await` trace event.
    #[track_caller]
    fn into_future(self) -> Await<A, E> {
        Await {
            state: State::Unsent(self.into_node()),
            site: crate::engine::tracing::here(),
            _types: PhantomData,
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> Future for Await<A, E> {
    type Output = Result<A, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<A, E>> {
        // `Await` is `Unpin` (a node is two words, never self-referential).
        let this = self.get_mut();
        let polled = with_slot(cx, |slot| {
            match core::mem::replace(&mut this.state, State::Done) {
                State::Unsent(node) => {
                    if slot.request.is_none() {
                        let token = slot.next;
                        slot.next = slot.next.wrapping_add(1);
                        slot.request = Some((token, node, this.site.take()));
                        this.state = State::Sent(token);
                    } else {
                        // One request per poll of the block: ask at the next.
                        this.state = State::Unsent(node);
                    }
                    Poll::Pending
                }
                State::Sent(token) => match slot.result.take() {
                    Some((delivered, res)) if delivered == token => Poll::Ready(typed::<A, E>(res)),
                    other => {
                        slot.result = other;
                        this.state = State::Sent(token);
                        Poll::Pending
                    }
                },
                State::Done => panic!("an IO's await was polled after it completed"),
            }
        });
        match polled {
            Some(poll) => poll,
            None => panic!(
                "an IO was awaited outside an IO block: `.await` on an `IO` runs it on the \
                 fiber that drives the future (inside `IO::block` or `IO::from_future`); \
                 elsewhere, run it with an executor (`block_on`, `into_future_on`)"
            ),
        }
    }
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
