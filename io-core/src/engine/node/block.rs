//! The payload of an IO block's node and frame: the block's [`Slot`], where
//! its `.await`s, its driver and the run-loop exchange programs and
//! results, and [`Resume`], the handle the node and the frame hold.
//!
//! # The exchange
//!
//! A block (`future/`: an `async` block or any future a fiber drives) lives
//! in one pinned allocation that starts with its [`Slot`] (`repr(C)`, first
//! field). The node and the frame hold that allocation's address and a
//! [`BlockVTable`] for its future's type, so the run-loop reaches the slot
//! without knowing the type:
//!
//! 1. The run-loop calls [`Resume::step`]: the driver polls the future once.
//!    An `.await` on an `IO` leaves its program in the slot (a *request*),
//!    and the step says [`Stepped::Run`]; a wait of the driver's own (for a
//!    waker, a yield) is left there the same way, marked so that its unit
//!    result is not given to any `.await`; an output is left as the
//!    block's result, and the step says [`Stepped::Done`].
//! 2. For `Run` the run-loop takes the program
//!    ([`Slot::take_next_unchecked`]), pushes the block's frame and runs it
//!    (a program that is already a value goes back at once, without a
//!    frame); its result pops the frame and goes into the slot
//!    ([`Slot::deliver`]), and the block's node comes back, whose step polls
//!    the block again: there the `.await` that asked takes the result. The
//!    run-loop polls blocks in that one step (`Kind::Block`). For `Done` it
//!    takes the result ([`Slot::take_done`]) and drops the block.
//!
//! On 64-bit hosts the run-loop also lends each poll its auto-yield
//! budget and trace ring through the slot ([`Slot::lend`]): an `.await`
//! whose program finishes at once runs it inside the poll with that credit
//! (`future/block.rs`, "Awaits that finish at once"), and the run-loop
//! takes back what is left.
//!
//! Passing everything through the slot (a word-sized handle and a
//! one-byte answer, not a result of several words returned through memory)
//! keeps every value on its way in registers or in one place in memory:
//! the step is called and answers without copies of multi-word results,
//! which cost more time than their instructions on this path.
//!
//! The slot is touched by the run-loop only between polls (a step returns
//! after its poll), and during a poll only by the `.await`s of that poll
//! (`future/block.rs` says how they exclude each other).

use core::ptr::NonNull;

use super::{Node, Res};
use crate::engine::erased::{ResSlot, Word};
use crate::engine::tracing::Site;

/// A program the run-loop is asked to run above the block's frame, with
/// the site of the `.await` that asked (none for a wait of the driver).
pub(crate) type Request = (Node, Option<Site>);

/// What a block's step came to (module doc).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Stepped {
    /// A program is waiting in the slot ([`Slot::take_next_unchecked`]).
    Run,
    /// The block's result is in the slot ([`Slot::take_done`]).
    Done,
}

/// The exchange of one block (module doc).
pub(crate) struct Slot {
    /// The program to run next, if a step left one.
    next: Option<Request>,
    /// The result of a request (for its `.await`), or the block's own
    /// result after [`Stepped::Done`].
    result: ResSlot,
    /// The token of the request `result` answers.
    answers: u32,
    /// The token of the last request.
    last: u32,
    /// The next token (on 64-bit hosts it is `last + 1`, and this word
    /// holds `credit` instead; elsewhere a field of its own makes the
    /// smaller code).
    #[cfg(not(target_pointer_width = "64"))]
    issue: u32,
    /// Whether the block has not been polled yet.
    fresh: bool,
    /// The program in `next` is a wait of the driver's: its (unit) result
    /// goes to no `.await`.
    wait: bool,
    /// Where the block was made (recorded when it starts).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    site: Option<Site>,
    /// The run-loop steps the current poll's `.await`s may still take
    /// inline (module doc, "Awaits that finish at once"): lent by the
    /// run-loop before each poll from its auto-yield budget, 0 where the
    /// next program must start in the run-loop (to observe cancellation).
    #[cfg(target_pointer_width = "64")]
    credit: u32,
    /// During a poll of a fiber that traces, the fiber's trace ring as its
    /// thin pointer (`Ring::from_raw`'s); none otherwise. Stale between
    /// polls.
    #[cfg(all(feature = "tracing", target_pointer_width = "64"))]
    ring: Option<NonNull<()>>,
}

impl Slot {
    /// An empty slot for a block made at `site`.
    pub(crate) const fn new(site: Option<Site>) -> Self {
        Slot {
            next: None,
            result: ResSlot::empty(),
            answers: 0,
            last: 0,
            #[cfg(not(target_pointer_width = "64"))]
            issue: 0,
            fresh: true,
            wait: false,
            site,
            #[cfg(target_pointer_width = "64")]
            credit: 0,
            #[cfg(all(feature = "tracing", target_pointer_width = "64"))]
            ring: None,
        }
    }

    /// Takes one step of the credit the run-loop lent this poll, if any is
    /// left: an `.await` that can finish at once (its program a value or a
    /// `delay`) may then run it inline, recorded as the run-loop records it.
    /// (On 64-bit hosts, for speed; elsewhere every program goes through
    /// the run-loop, for flash.)
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn take_credit(&mut self) -> bool {
        if self.credit == 0 {
            return false;
        }
        self.credit -= 1;
        true
    }

    /// Records `op` at `site` in the fiber's trace, as the run-loop would
    /// have (during a poll: the ring is the polling fiber's).
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn record(&self, _op: &'static crate::engine::tracing::Op, _site: Option<&Site>) {
        #[cfg(feature = "tracing")]
        if let Some(site) = _site {
            if let Some(ring) = self.ring {
                // SAFETY: during a poll (the only time an `.await` reaches
                // the slot) `ring` is the fiber's live ring, lent for this
                // poll (`lend`); the poll runs on the fiber's thread, the
                // ring's only writer, and the slot is reached during a poll
                // only through the poll's own `Context`, on that thread.
                unsafe { crate::engine::tracing::OwnedRing::from_raw(ring).record(_op, site) };
            }
        }
    }

    // ----- the `.await`s' side (during a poll) -------------------------------

    /// Leaves `node` as the block's request, unless one was made already in
    /// this poll; the request's token, which its result will carry.
    #[inline(always)]
    pub(crate) fn ask(&mut self, node: Node, site: Option<Site>) -> Result<u32, Request> {
        if self.next.is_some() {
            return Err((node, site));
        }
        #[cfg(target_pointer_width = "64")]
        let token = self.last.wrapping_add(1);
        #[cfg(not(target_pointer_width = "64"))]
        let token = {
            let token = self.issue;
            self.issue = token.wrapping_add(1);
            token
        };
        self.last = token;
        self.next = Some((node, site));
        Ok(token)
    }

    /// The result of the request made under `token`, if it is here.
    #[inline(always)]
    pub(crate) fn answer(&mut self, token: u32) -> Option<Res> {
        if token == self.answers {
            self.result.take()
        } else {
            None
        }
    }

    // ----- the driver's side (after a poll) ----------------------------------

    /// Whether an `.await` made a request in this poll.
    #[inline(always)]
    pub(crate) fn has_request(&self) -> bool {
        self.next.is_some()
    }

    /// After a poll: a result nobody took (its `.await` was dropped) is
    /// dropped.
    #[inline(always)]
    pub(crate) fn end_poll(&mut self) {
        if !self.result.is_empty() {
            drop(self.result.take());
        }
    }

    /// Leaves `node`, a wait of the driver's, to run next.
    pub(crate) fn wait(&mut self, node: Node) {
        self.next = Some((node, None));
        self.wait = true;
    }

    /// Leaves the block's result.
    #[inline(always)]
    pub(crate) fn done(&mut self, res: Res) {
        self.result.put(res);
    }

    // ----- the run-loop's side (between polls) -------------------------------

    /// Before a poll: lends it `credit` steps of the run-loop's budget and
    /// the fiber's trace ring, if it traces (its thin pointer, alive for
    /// the whole poll); what is left of the credit afterwards is
    /// [`Slot::credit_left`].
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn lend(&mut self, credit: u32, _ring: Option<NonNull<()>>) {
        self.credit = credit;
        #[cfg(feature = "tracing")]
        {
            self.ring = _ring;
        }
    }

    /// After a poll: the credit it did not use.
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn credit_left(&self) -> u32 {
        self.credit
    }

    /// Whether this is the block's first step (its node is recorded as it
    /// starts; later steps come back through the same node).
    #[inline(always)]
    pub(crate) fn first_step(&mut self) -> bool {
        core::mem::replace(&mut self.fresh, false)
    }

    /// Whether the program a step left is a wait of the driver's (not an
    /// `.await`'s).
    #[inline(always)]
    pub(crate) fn is_wait(&self) -> bool {
        self.wait
    }

    /// The program a step that said [`Stepped::Run`] left.
    #[inline(always)]
    pub(crate) fn take_next_unchecked(&mut self) -> Request {
        match self.next.take() {
            Some(request) => request,
            None => no_program(),
        }
    }

    /// The result of the program taken last: for the `.await` that asked for
    /// it, or dropped if it was a wait of the driver's.
    #[inline(always)]
    pub(crate) fn deliver(&mut self, res: Res) {
        if self.wait {
            self.wait = false;
            drop(res);
        } else {
            self.answers = self.last;
            self.result.put(res);
        }
    }

    /// The block's result, after [`Stepped::Done`].
    #[inline(always)]
    pub(crate) fn take_done(&mut self) -> Option<Res> {
        self.result.take()
    }
}

/// A step said [`Stepped::Run`] without leaving a program: a bug in
/// io-core.
#[cold]
#[inline(never)]
fn no_program() -> ! {
    unreachable!("io-core: a block's step said run without a program")
}

/// The vtable of a block's allocation, for its future's type.
#[cfg_attr(target_pointer_width = "64", repr(C, align(64)))]
#[cfg_attr(not(target_pointer_width = "64"), repr(C, align(16)))]
pub(crate) struct BlockVTable {
    /// Frees the allocation (drops the future). First, as in every frame
    /// vtable: a frame is dropped through its vtable's first entry.
    pub(crate) drop: Option<unsafe fn(Word)>,
    /// Polls the future once (module doc, step 1).
    pub(crate) step: unsafe fn(Word) -> Stepped,
    /// The traced operation of the block's node.
    #[cfg(feature = "tracing")]
    pub(crate) op: &'static crate::engine::tracing::Op,
}

/// An IO block's allocation, owned by its node, then by its frame: its
/// address (which is its [`Slot`]'s) and its vtable.
pub(crate) struct Resume {
    word: Word,
    vtable: &'static BlockVTable,
}

// SAFETY: a `Resume` owns its block, whose future is `Send` (the typed
// constructors in `future/` require it); it is never shared.
unsafe impl Send for Resume {}

impl Resume {
    /// The handle of a block allocated at `slot`.
    ///
    /// # Safety
    /// * `slot` is the first field of a live allocation that `vtable`'s
    ///   functions were made for, owned by nobody else from now on.
    #[inline(always)]
    pub(crate) unsafe fn new(slot: NonNull<Slot>, vtable: &'static BlockVTable) -> Self {
        Resume {
            word: Word::new(slot.as_ptr().cast()),
            vtable,
        }
    }

    /// Polls the block once (module doc).
    #[inline(always)]
    pub(crate) fn step(&mut self) -> Stepped {
        // SAFETY: `word` and `vtable` were made together (`new`), and the
        // block is alive while `self` is; `&mut self`: no other step runs.
        unsafe { (self.vtable.step)(self.word) }
    }

    /// The block's slot, between polls.
    #[inline(always)]
    pub(crate) fn slot(&mut self) -> &mut Slot {
        // SAFETY: the word is the address of the live block's slot (`new`);
        // `&mut self` says no step, and so no poll, runs now: nothing else
        // reaches the slot while this borrow lives.
        unsafe { &mut *self.word.assume_init().cast::<Slot>() }
    }

    /// The block's traced operation.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn op(&self) -> &'static crate::engine::tracing::Op {
        self.vtable.op
    }

    /// Where the block was made (its `IO::block` call), recorded when it
    /// starts.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn site(&self) -> Option<&Site> {
        // SAFETY: the word is the address of the live block's slot (`new`);
        // a shared borrow of `self` says no step runs, so nothing writes the
        // slot, and its `site` is never written after `Slot::new`.
        unsafe {
            (*self.word.assume_init().cast::<Slot>().cast_const())
                .site
                .as_ref()
        }
    }

    /// The raw parts, for the node and frame encodings.
    #[inline(always)]
    pub(crate) fn into_raw(self) -> (Word, &'static BlockVTable) {
        let this = core::mem::ManuallyDrop::new(self);
        (this.word, this.vtable)
    }

    /// Rebuilds a handle from [`into_raw`](Resume::into_raw)'s parts.
    ///
    /// # Safety
    /// * The parts come from `into_raw` and are used once.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(word: Word, vtable: &'static BlockVTable) -> Self {
        Resume { word, vtable }
    }
}

impl Drop for Resume {
    fn drop(&mut self) {
        if let Some(drop) = self.vtable.drop {
            // SAFETY: the block is alive and owned by `self`, dropped once.
            unsafe { drop(self.word) }
        }
    }
}
