//! `Queue`: FIFO queues for fibers, in Cats Effect's five kinds: bounded,
//! unbounded, dropping, circular buffer and synchronous.
//!
//! # Protocol
//!
//! The state (behind a short lock, never held across a suspension) is the
//! buffer, a FIFO of waiting takers, a FIFO of offerers waiting for room (a
//! full bounded queue) or for a taker (a synchronous queue), and two
//! counts: `handed`, the elements on their way to a taker (popped from the
//! takers' list by an offer, not yet received by the taker's program), and
//! `promised`, the places promised to offerers that a take woke and that
//! have not put their element in yet. An operation that need not wait is
//! one step (a step is never interrupted, so it needs no mask). One that
//! must wait is one `from_callback` suspension: its registration (which
//! runs to its end before any cancellation is seen) checks the state again
//! under the lock and queues the waiter's callback, and returns the cleanup
//! that runs if the wait is canceled.
//!
//! # Invariants
//!
//! * **Capacity.** For a bounded or dropping queue,
//!   `buffer + handed + promised <= capacity` whenever the lock is free: a
//!   handed element and a promised place take up room until the taker has
//!   its element, or the offerer has put its own in. So an element that
//!   comes back from a canceled taker always finds its place again (at the
//!   *front* of the buffer, or with the next waiting taker), and no offer
//!   gets a place that an element on its way could need. [`Queue::len`]
//!   counts `buffer + handed`.
//! * **A canceled offer never enqueued.** A bounded offer that waits for
//!   room leaves its element in its own program, never in the queue: a
//!   take that frees a place *promises* it to the first waiting offerer
//!   and wakes it (as in Cats Effect 3.5, where the taker only signals the
//!   offerer); the offerer, running again, puts its element in. If it is
//!   canceled first, the promise (the value its suspension resumes with)
//!   is dropped, and dropping it passes the place on to the next waiting
//!   offerer, or frees it. So an offer whose program did not go on after
//!   the offer has enqueued nothing.
//! * **No element lost, none duplicated.** A waiting taker is its callback
//!   only: an offer that finds one pops it under the lock and, once the
//!   lock is released, resumes it with the element wrapped in `Handed`
//!   ([`RawCallback::complete_or_give_back`]). A suspension ends once, by
//!   its callback or by the cancellation, whichever claims it first: a
//!   taker canceled before the claim gives the element straight back; one
//!   canceled after it (the fiber resumes, then observes the cancellation
//!   and drops its value) gives it back as `Handed` is dropped. Given back,
//!   the element goes to the next waiting taker, or to the front of the
//!   buffer (a loop, not a recursion, through any number of canceled
//!   takers). Nothing is waited for in a drop: the lock is short.
//! * **FIFO.** Elements leave in the order they entered (the order in
//!   which their offers completed); waiting takers get elements, and
//!   waiting offerers places, in arrival order (a taker or offerer that
//!   was woken keeps what it was given: nobody barges in). An offerer puts
//!   its element in when it runs again, so two offerers woken at once
//!   (two takes in a row) may complete, and enter, in either order on a
//!   multi-threaded executor; that is the price of never enqueuing for a
//!   canceled offer.
//!
//! A synchronous queue has no buffer: an offer hands its element to a
//! waiting taker, or waits with its element in its entry until a take
//! moves it out. Two cases there are weaker than for the other kinds, and
//! documented on [`Queue::synchronous`]: an element handed to a taker that
//! is canceled before it runs again goes to the next waiting taker, or is
//! kept (at most one such element per canceled taker) for the next take;
//! and a waiting offerer canceled after a take moved its element out has
//! offered it, although its fiber ends `Canceled`.
//!
//! # Closing
//!
//! `close` (not in Cats Effect's `Queue`; chosen over a channel with
//! sender-drop detection because a `Queue` is a cloned handle with no
//! sender/receiver roles, so dropping handles says nothing) sets a flag
//! under the lock: offers are refused from then on (`send` gives the
//! element back in `QueueClosed`), waiting bounded offerers are woken with
//! an empty promise (their elements never left them), and waiting
//! `receive`s, which only wait on an empty buffer, are woken with no
//! element. What is left is still taken in order, then `receive` gives
//! `None`. Plain `take` and `offer` keep their signatures: `take` waits on
//! a closed, drained queue, `offer` drops its element (documented on each).
//!
//! As in Cats Effect, a `take` that has completed is not canceled: if the
//! fiber is canceled right after, before its program uses the element,
//! the element is gone with the fiber. (Wrap the take and its use in one
//! masked region, `uncancelable(|poll| poll.apply(q.take()).map(use))`, to
//! use every element taken: a completed `poll` hands its value on.)

use alloc::collections::VecDeque;
use core::fmt;

use crate::engine::erased::Value;
use crate::engine::tracing::{Named, here};
use crate::fiber::{Callback, RawCallback};
use crate::io::IO;
use crate::sync::{Arc, Mutex};
use crate::wait::list::{WaiterId, WaiterList, cleanup_weakly};

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Offer = "Queue::offer",
    TryOffer = "Queue::try_offer",
    Take = "Queue::take",
    TryTake = "Queue::try_take",
    SendElement = "Queue::send",
    Receive = "Queue::receive",
    Close = "Queue::close",
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Offers wait while `capacity` elements are held.
    Bounded,
    /// Never full.
    Unbounded,
    /// Offers to a full queue drop the new element.
    Dropping,
    /// Offers to a full queue drop the oldest element.
    Circular,
    /// No buffer: an offer waits for a taker.
    Synchronous,
}

impl Kind {
    /// Whether elements on their way to a taker, and promised places,
    /// count against the capacity (module doc, "Capacity").
    fn counts_in_flight(self) -> bool {
        matches!(self, Kind::Bounded | Kind::Dropping)
    }
}

/// A waiting taker: its callback, and whether it ends when the queue is
/// closed (`receive`, resumed with no element) or waits on (`take`).
struct Taker {
    callback: RawCallback,
    closable: bool,
}

/// What an offer that does not wait did.
enum OfferNow<A> {
    /// The element is in (or on its way to a taker).
    Done,
    /// A full dropping queue dropped it.
    Dropped,
    /// It has to wait (full bounded queue, synchronous queue without taker).
    Wait(A),
    /// The queue is closed: the element is given back.
    Closed(A),
}

/// A synchronous offerer waiting for a taker, with its element.
struct Offerer<A> {
    element: A,
    callback: RawCallback,
}

struct State<A> {
    buffer: VecDeque<A>,
    /// Elements handed to takers that have not received them yet (bounded
    /// and dropping queues only; module doc).
    handed: usize,
    /// Places promised to woken offerers of a bounded queue, not filled yet.
    promised: usize,
    /// Waiting takers (their callbacks) and offerers in arrival order; a
    /// canceled one is removed in O(log n).
    takers: WaiterList<Taker>,
    /// Offerers of a full bounded queue, waiting for room (their callbacks:
    /// their elements stay in their own programs).
    offerers: WaiterList<RawCallback>,
    /// Offerers of a synchronous queue, waiting for a taker.
    rendezvous: WaiterList<Offerer<A>>,
    /// Closed: offers are refused; takes drain what is left.
    closed: bool,
}

struct Shared<A> {
    kind: Kind,
    capacity: usize,
    state: Mutex<State<A>>,
}

/// Work to do after releasing the lock: resume a fiber.
enum Wake<A> {
    Nobody,
    /// A synchronous offerer whose element was taken.
    Offerer(RawCallback),
    /// An offerer of a bounded queue promised a place.
    Promised(RawCallback),
    /// A taker, with the element it gets.
    Taker(RawCallback, A),
}

/// An element on its way to a taker: the value its suspension resumes
/// with. If the taker's cancellation is seen before its program takes the
/// element out (the fiber resumes with the value, then observes the cancel
/// and drops it), dropping it gives the element back to the queue.
struct Handed<A: Send + 'static> {
    element: Option<A>,
    /// Whether the element is counted in `handed` (module doc).
    counted: bool,
    shared: Arc<Shared<A>>,
}

impl<A: Send + 'static> Handed<A> {
    /// The taker's program has the element: it no longer takes up room, and
    /// the place it leaves goes to the first waiting offerer.
    fn receive(mut self) -> Option<A> {
        let element = self.element.take();
        if self.counted {
            let wake = {
                let mut state = self.shared.state.lock();
                state.handed -= 1;
                self.shared.promise_room(&mut state)
            };
            Shared::finish(&self.shared, wake);
        }
        element
    }
}

impl<A: Send + 'static> Drop for Handed<A> {
    fn drop(&mut self) {
        if let Some(element) = self.element.take()
            && let Some((next, element)) = self.shared.pass_on(element, self.counted)
        {
            Shared::deliver(&self.shared, next, element);
        }
    }
}

/// A place promised to a waiting offerer of a bounded queue: the value its
/// suspension resumes with. Filled by the offerer's program; dropped
/// unfilled (the offerer was canceled), it goes to the next waiting
/// offerer, or is freed.
struct Promise<A: Send + 'static> {
    shared: Option<Arc<Shared<A>>>,
}

impl<A: Send + 'static> Promise<A> {
    /// Puts `element` in the promised place (or hands it to a waiting
    /// taker); gives it back if the queue was closed meanwhile (a promise
    /// without a queue is the answer `close` gives waiting offerers).
    fn fill(mut self, element: A) -> Result<(), A> {
        let Some(shared) = self.shared.take() else {
            return Err(element);
        };
        let wake = {
            let mut state = shared.state.lock();
            state.promised -= 1;
            if state.closed {
                return Err(element);
            }
            shared.place(&mut state, element)
        };
        Shared::finish(&shared, wake);
        Ok(())
    }
}

impl<A: Send + 'static> Drop for Promise<A> {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            Shared::withdraw_promise(&shared);
        }
    }
}

impl<A: Send + 'static> Shared<A> {
    /// Whether an offer may put an element in now (or hand it to a waiting
    /// taker) without exceeding the capacity. Not for synchronous queues.
    fn has_room(&self, state: &State<A>) -> bool {
        match self.kind {
            Kind::Unbounded | Kind::Circular => true,
            Kind::Synchronous => false,
            Kind::Bounded | Kind::Dropping => {
                state.buffer.len() + state.handed + state.promised < self.capacity
            }
        }
    }

    /// Puts `element` in (for a queue with room): to the first waiting
    /// taker, to be resumed once the lock is released, or at the back of
    /// the buffer (a full circular buffer drops its oldest element first).
    fn place(&self, state: &mut State<A>, element: A) -> Wake<A> {
        if let Some(taker) = state.takers.pop() {
            if self.kind.counts_in_flight() {
                state.handed += 1;
            }
            return Wake::Taker(taker.callback, element);
        }
        if self.kind == Kind::Circular && state.buffer.len() >= self.capacity {
            state.buffer.pop_front();
        }
        state.buffer.push_back(element);
        Wake::Nobody
    }

    /// A place was freed in a bounded queue: promise it to the first waiting
    /// offerer, to be woken once the lock is released.
    fn promise_room(&self, state: &mut State<A>) -> Wake<A> {
        if self.kind == Kind::Bounded
            && !state.offerers.is_empty()
            && self.has_room(state)
            && let Some(offerer) = state.offerers.pop()
        {
            state.promised += 1;
            return Wake::Promised(offerer);
        }
        Wake::Nobody
    }

    /// Resumes the fiber `wake` names; call it with the lock released.
    fn finish(shared: &Arc<Self>, wake: Wake<A>) {
        match wake {
            Wake::Nobody => {}
            Wake::Offerer(callback) => {
                // A synchronous offerer canceled meanwhile has offered its
                // element all the same (it was taken): nothing to undo.
                let _ = callback.complete(Ok(Value::unit()));
            }
            Wake::Promised(callback) => Self::keep_promise(shared, callback),
            Wake::Taker(callback, element) => Self::deliver(shared, callback, element),
        }
    }

    /// Wakes the offerer `callback` with its promised place. If it was
    /// canceled first, the place goes to the next waiting offerer, or is
    /// freed (a loop, not a recursion, through any number of canceled
    /// offerers).
    fn keep_promise(shared: &Arc<Self>, callback: RawCallback) {
        let mut next = Some(callback);
        while let Some(callback) = next {
            let promise = Promise {
                shared: Some(shared.clone()),
            };
            let Err(given_back) = callback.complete_or_give_back(Ok(Value::new(promise))) else {
                return;
            };
            let (Ok(value) | Err(value)) = given_back;
            // SAFETY: the value was made just above from a `Promise<A>`.
            let mut promise = unsafe { value.take::<Promise<A>>() };
            // Defused: the place is passed on here, without recursion.
            promise.shared = None;
            next = shared.pass_promise_on();
        }
    }

    /// A promised place that its offerer will not fill: the next waiting
    /// offerer's, to wake once the lock is released, or free again.
    fn pass_promise_on(&self) -> Option<RawCallback> {
        let mut state = self.state.lock();
        state.promised -= 1;
        match self.promise_room(&mut state) {
            Wake::Promised(next) => Some(next),
            _ => None,
        }
    }

    /// [`Shared::pass_promise_on`], then wakes the offerer it names.
    fn withdraw_promise(shared: &Arc<Self>) {
        if let Some(next) = shared.pass_promise_on() {
            Self::keep_promise(shared, next);
        }
    }

    /// Resumes the taker `callback` with `element`. If it was canceled
    /// first, the element goes to the next waiting taker, or back to the
    /// front of the buffer (a loop, not a recursion, through any number of
    /// canceled takers).
    fn deliver(shared: &Arc<Self>, callback: RawCallback, element: A) {
        let counted = shared.kind.counts_in_flight();
        let mut next = Some((callback, element));
        while let Some((callback, element)) = next {
            let handed = Handed {
                element: Some(element),
                counted,
                shared: shared.clone(),
            };
            let Err(given_back) = callback.complete_or_give_back(Ok(Value::new(handed))) else {
                return;
            };
            let (Ok(value) | Err(value)) = given_back;
            // SAFETY: the value was made just above from a `Handed<A>`.
            let mut handed = unsafe { value.take::<Handed<A>>() };
            next = handed
                .element
                .take()
                .and_then(|element| shared.pass_on(element, counted));
        }
    }

    /// An element whose taker was canceled before it reached it: the next
    /// waiting taker, to deliver it to once the lock is released, or, with
    /// none, the front of the buffer. A counted element's room was kept for
    /// it, so it always fits (module doc); an uncounted one that finds a
    /// full circular buffer is its oldest element, and is dropped as the
    /// circular buffer drops its oldest.
    fn pass_on(&self, element: A, counted: bool) -> Option<(RawCallback, A)> {
        let mut state = self.state.lock();
        if let Some(next) = state.takers.pop() {
            // Still handed (and counted, if it was).
            return Some((next.callback, element));
        }
        if counted {
            state.handed -= 1;
        }
        if self.kind == Kind::Circular && state.buffer.len() >= self.capacity {
            drop(state);
            drop(element);
            return None;
        }
        state.buffer.push_front(element);
        None
    }

    /// Tries to offer without waiting.
    fn offer_now(&self, element: A) -> (OfferNow<A>, Wake<A>) {
        let mut state = self.state.lock();
        if state.closed {
            return (OfferNow::Closed(element), Wake::Nobody);
        }
        match self.kind {
            Kind::Synchronous => match state.takers.pop() {
                Some(taker) => (OfferNow::Done, Wake::Taker(taker.callback, element)),
                None => (OfferNow::Wait(element), Wake::Nobody),
            },
            _ if self.has_room(&state) => {
                let wake = self.place(&mut state, element);
                (OfferNow::Done, wake)
            }
            Kind::Dropping => (OfferNow::Dropped, Wake::Nobody),
            _ => (OfferNow::Wait(element), Wake::Nobody),
        }
    }

    /// Closes the queue (`false` if it was closed already): waiting
    /// `receive`s (the buffer is empty if they wait) end with no element,
    /// and waiting bounded offerers are refused (their elements never
    /// left them). Waiting synchronous offerers stay: their elements are
    /// what is left, for takes to drain.
    fn close(shared: &Arc<Self>) -> bool {
        let (receivers, offerers) = {
            let mut state = shared.state.lock();
            if state.closed {
                return false;
            }
            state.closed = true;
            let receivers = state.takers.take_where(|taker| taker.closable);
            let offerers: alloc::vec::Vec<RawCallback> = state.offerers.take_all().collect();
            (receivers, offerers)
        };
        for receiver in receivers {
            // Canceled meanwhile: nothing was on its way to it.
            let _ = receiver.callback.complete(Ok(Value::new(Handed::<A> {
                element: None,
                counted: false,
                shared: shared.clone(),
            })));
        }
        for offerer in offerers {
            let _ = offerer.complete(Ok(Value::new(Promise::<A> { shared: None })));
        }
        true
    }

    /// Tries to take without waiting, under the lock `state`.
    fn take_locked(&self, state: &mut State<A>) -> (Option<A>, Wake<A>) {
        if let Some(element) = state.buffer.pop_front() {
            // The freed place goes to the first waiting offerer.
            return (Some(element), self.promise_room(state));
        }
        match state.rendezvous.pop() {
            Some(offerer) => (Some(offerer.element), Wake::Offerer(offerer.callback)),
            None => (None, Wake::Nobody),
        }
    }

    /// A canceled taker's cleanup: leave the queue if still queued (if not,
    /// an offerer popped it and gives its element to another taker).
    fn cancel_taker(&self, id: WaiterId) {
        let removed = self
            .state
            .lock()
            .takers
            .remove(id)
            .map(|taker| taker.callback);
        drop(removed);
    }

    /// A canceled bounded offerer's cleanup: leave the queue if still
    /// queued (if not, a take promised it a place, and the promise, given
    /// back or dropped, goes to the next offerer).
    fn cancel_offerer(&self, id: WaiterId) {
        let removed = self.state.lock().offerers.remove(id);
        drop(removed);
    }

    /// A canceled synchronous offerer's cleanup: leave the queue (the
    /// element was never offered) unless a taker already took it.
    fn cancel_rendezvous(&self, id: WaiterId) {
        let removed = self.state.lock().rendezvous.remove(id);
        drop(removed);
    }
}

/// A queue was asked for a capacity of 0 (use [`Queue::synchronous`] for a
/// queue without buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidCapacity;

impl fmt::Display for InvalidCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a bounded, dropping or circular queue needs a capacity of at least 1 \
             (use Queue::synchronous for a queue without buffer)",
        )
    }
}

impl core::error::Error for InvalidCapacity {}

/// A FIFO queue for fibers, in Cats Effect's five kinds: bounded,
/// unbounded, dropping, circular buffer and synchronous.
///
/// # Guarantees
///
/// * A bounded or dropping queue never holds more than its capacity:
///   [`Queue::len`] counts the buffered elements and those on their way to
///   a taker that has not received them yet, and it never exceeds the
///   capacity, also while takers are canceled.
/// * A bounded `offer` canceled while it waits has enqueued nothing: a take
///   that frees a place only wakes the first waiting offerer, which puts
///   its element in itself (as in Cats Effect 3.5).
/// * Cancellation loses no element and duplicates none: an element on its
///   way to a taker that is canceled goes to the next waiting taker, or
///   back to the *front* of the buffer (its place was kept for it).
/// * As in Cats Effect, a `take` that has completed is not canceled: if
///   the fiber is canceled right after, before its program uses the
///   element, the element is gone with the fiber.
///
/// The protocol and its invariants are written down in the module
/// `io-core/src/data/queue.rs`.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Queue, wstp::Runtime};
///
/// let q = Queue::<u32>::bounded(2)?;
/// let (producer, consumer) = (q.clone(), q);
/// let io: IO<Vec<u32>, ()> = IO::traverse(vec![1, 2, 3, 4], move |i| producer.offer::<()>(i))
///     .start()
///     .product_r(IO::replicate(4, move || consumer.take()));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(vec![1, 2, 3, 4]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Queue<A> {
    shared: Arc<Shared<A>>,
}

impl<A> Clone for Queue<A> {
    fn clone(&self) -> Self {
        Queue {
            shared: self.shared.clone(),
        }
    }
}

impl<A> fmt::Debug for Queue<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("Queue")
            .field("kind", &self.shared.kind)
            .field("capacity", &self.shared.capacity)
            .field("len", &(state.buffer.len() + state.handed))
            .field("takers", &state.takers.len())
            .field("offerers", &(state.offerers.len() + state.rendezvous.len()))
            .finish()
    }
}

impl<A: Send + 'static> Queue<A> {
    fn with(kind: Kind, capacity: usize) -> Self {
        Queue {
            shared: Arc::new(Shared {
                kind,
                capacity,
                state: Mutex::new(State {
                    buffer: VecDeque::new(),
                    handed: 0,
                    promised: 0,
                    takers: WaiterList::new(),
                    offerers: WaiterList::new(),
                    rendezvous: WaiterList::new(),
                    closed: false,
                }),
            }),
        }
    }

    fn checked(kind: Kind, capacity: usize) -> Result<Self, InvalidCapacity> {
        if capacity == 0 {
            Err(InvalidCapacity)
        } else {
            Ok(Queue::with(kind, capacity))
        }
    }

    /// A queue of at most `capacity` elements; `offer` waits while it is
    /// full. Any capacity from 1 up to `usize::MAX` is valid (no memory is
    /// reserved for it: the buffer grows with its elements).
    pub fn bounded(capacity: usize) -> Result<Self, InvalidCapacity> {
        Queue::checked(Kind::Bounded, capacity)
    }

    /// A queue without bound; `offer` never waits.
    pub fn unbounded() -> Self {
        Queue::with(Kind::Unbounded, usize::MAX)
    }

    /// A queue of at most `capacity` elements; an offer to a full queue
    /// drops the new element (`try_offer` then gives `false`).
    pub fn dropping(capacity: usize) -> Result<Self, InvalidCapacity> {
        Queue::checked(Kind::Dropping, capacity)
    }

    /// A queue of at most `capacity` elements; an offer to a full queue
    /// drops the oldest element.
    ///
    /// An element handed to a taker is no longer in the buffer; if that
    /// taker is canceled before it runs again and the buffer has filled up
    /// meanwhile, the element (then the oldest) is the one dropped.
    pub fn circular_buffer(capacity: usize) -> Result<Self, InvalidCapacity> {
        Queue::checked(Kind::Circular, capacity)
    }

    /// A queue without buffer: each `offer` waits for a `take` (rendezvous).
    ///
    /// Weaker than the other kinds under cancellation (module doc): an
    /// element handed to a waiting taker that is canceled before it runs
    /// again goes to the next waiting taker, or is kept for the next take
    /// (so [`Queue::len`] can read 1 until then); and an offerer canceled
    /// after a take moved its element out has offered it, although its
    /// fiber ends `Canceled`. No element is lost or duplicated.
    pub fn synchronous() -> Self {
        Queue::with(Kind::Synchronous, 0)
    }

    /// Elements held now: the buffered ones, and (bounded and dropping
    /// queues) those on their way to a taker that has not received them
    /// yet. Never more than the capacity of a bounded or dropping queue.
    pub fn len(&self) -> usize {
        let state = self.shared.state.lock();
        state.buffer.len() + state.handed
    }

    /// How many fibers wait in `take` (for diagnostics and tests).
    pub fn waiting_takers(&self) -> usize {
        self.shared.state.lock().takers.len()
    }

    /// How many fibers wait in `offer` (for diagnostics and tests).
    pub fn waiting_offerers(&self) -> usize {
        let state = self.shared.state.lock();
        state.offerers.len() + state.rendezvous.len()
    }

    /// Whether no element is held now (see [`Queue::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offers without waiting: `false` if the element was not taken in (a
    /// full bounded or dropping queue, a synchronous queue without taker,
    /// a closed queue).
    #[track_caller]
    pub fn try_offer<E: Send + 'static>(&self, element: A) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryOffer>, _>(here(), move || {
            let (result, wake) = shared.offer_now(element);
            Shared::finish(&shared, wake);
            matches!(result, OfferNow::Done)
        })
    }

    /// Offers, waiting while a bounded queue is full (or, for a synchronous
    /// queue, until a taker takes the element). An offer canceled while it
    /// waits has not enqueued its element (a synchronous one: see
    /// [`Queue::synchronous`]).
    ///
    /// On a closed queue the element is dropped (so is that of an offer
    /// waiting when the queue is closed); use [`Queue::send`] to get it
    /// back with the news.
    #[track_caller]
    pub fn offer<E: Send + 'static>(&self, element: A) -> IO<(), E> {
        let shared = self.shared.clone();
        // The usual case, in one step: room in the buffer, or a waiting
        // taker. A step is never interrupted, so it needs no mask; only a
        // wait does.
        IO::defer_at::<Named<Offer>, _>(here(), move || {
            let (result, wake) = shared.offer_now(element);
            Shared::finish(&shared, wake);
            match result {
                OfferNow::Done | OfferNow::Dropped | OfferNow::Closed(_) => IO::unit(),
                OfferNow::Wait(element) if shared.kind == Kind::Synchronous => {
                    Queue::offer_rendezvous(shared, element)
                }
                // Refused by a close while it waited: the element is dropped.
                OfferNow::Wait(element) => Queue::offer_waiting(shared, element, |_refused| ()),
            }
        })
    }

    /// [`Queue::offer`] that tells a closed queue: `Err(QueueClosed(element))`
    /// if the queue was closed before the element got in (also while the
    /// offer waited for room), with the element given back. Like `offer`, it
    /// waits while a bounded queue is full.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Queue, error::QueueClosed, wstp::Runtime};
    ///
    /// let q = Queue::<u32>::bounded(4)?;
    /// let (q1, q2, q3) = (q.clone(), q.clone(), q.clone());
    /// let io: IO<(Result<(), QueueClosed<u32>>, Option<u32>, Option<u32>), ()> =
    ///     q.send(1).product_r(q1.close()).product_r(q1.send(2)).flat_map(move |refused| {
    ///         q2.receive().flat_map(move |first| q3.receive().map(move |end| (refused, first, end)))
    ///     });
    /// let rt = Runtime::new()?;
    /// assert_eq!(rt.block_on(io)?.succeeded(), Some((Err(QueueClosed(2)), Some(1), None)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn send<E: Send + 'static>(&self, element: A) -> IO<Result<(), QueueClosed<A>>, E> {
        let shared = self.shared.clone();
        IO::defer_at::<Named<SendElement>, _>(here(), move || {
            let (result, wake) = shared.offer_now(element);
            Shared::finish(&shared, wake);
            match result {
                OfferNow::Done | OfferNow::Dropped => IO::pure(Ok(())),
                OfferNow::Closed(element) => IO::pure(Err(QueueClosed(element))),
                OfferNow::Wait(element) if shared.kind == Kind::Synchronous => {
                    Queue::offer_rendezvous(shared, element).map_untraced(Ok)
                }
                OfferNow::Wait(element) => {
                    Queue::offer_waiting(shared, element, |r| r.map_err(QueueClosed))
                }
            }
        })
    }

    /// A bounded offer that has to wait for room: one suspension, whose
    /// registration checks the queue again under the lock and whose cleanup
    /// leaves the list. It resumes with a promised place, which its program
    /// fills with the element (which never left it); `out` makes the result
    /// of that (`Err(element)` if the queue was closed first).
    fn offer_waiting<B: Send + 'static, E: Send + 'static>(
        shared: Arc<Shared<A>>,
        element: A,
        out: fn(Result<(), A>) -> B,
    ) -> IO<B, E> {
        IO::from_callback_untraced(move |cb: Callback<Promise<A>, E>| {
            let mut state = shared.state.lock();
            // The queue may have changed since `offer_now`.
            if state.closed {
                drop(state);
                cb.succeed(Promise { shared: None });
                return None;
            }
            if shared.has_room(&state) {
                state.promised += 1;
                drop(state);
                cb.succeed(Promise {
                    shared: Some(shared),
                });
                return None;
            }
            let id = state.offerers.push(cb.into_raw());
            drop(state);
            Some(IO::delay_untraced(move || shared.cancel_offerer(id)))
        })
        .map_untraced(move |promise| out(promise.fill(element)))
    }

    /// A synchronous offer that has to wait for a taker: one suspension,
    /// its element in its entry until a take moves it out (also after the
    /// queue is closed: it is then part of what takes drain).
    fn offer_rendezvous<E: Send + 'static>(shared: Arc<Shared<A>>, element: A) -> IO<(), E> {
        IO::from_callback_untraced(move |cb: Callback<(), E>| {
            let mut state = shared.state.lock();
            // A taker may have come since `offer_now`.
            if let Some(taker) = state.takers.pop() {
                drop(state);
                Shared::deliver(&shared, taker.callback, element);
                cb.succeed(());
                return None;
            }
            let id = state.rendezvous.push(Offerer {
                element,
                callback: cb.into_raw(),
            });
            drop(state);
            // The cleanup holds the queue weakly (`wait/list.rs`): a queue
            // gone meanwhile took the waiter with it.
            Some(cleanup_weakly(shared, move |shared| {
                shared.cancel_rendezvous(id)
            }))
        })
    }

    /// Takes without waiting: `None` if the queue is empty.
    #[track_caller]
    pub fn try_take<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryTake>, _>(here(), move || {
            let (element, wake) = shared.take_locked(&mut shared.state.lock());
            Shared::finish(&shared, wake);
            element
        })
    }

    /// Takes the first element, waiting while the queue is empty. A take
    /// canceled while waiting takes nothing.
    ///
    /// On a closed queue, a `take` still gets what is left; once nothing is
    /// left it waits (cancelably) for ever. Use [`Queue::receive`] to learn
    /// that the queue is closed and drained.
    #[track_caller]
    pub fn take<E: Send + 'static>(&self) -> IO<A, E> {
        let shared = self.shared.clone();
        // The usual case, in one step: an element buffered, or a waiting
        // offerer's. A step is never interrupted, so it needs no mask; only
        // a wait does.
        IO::defer_at::<Named<Take>, _>(here(), move || {
            let (element, wake) = shared.take_locked(&mut shared.state.lock());
            Shared::finish(&shared, wake);
            match element {
                Some(element) => IO::pure(element),
                None => Queue::take_waiting(shared, false, |element| match element {
                    Some(element) => element,
                    None => unreachable!("io-core: only a receive is woken by close"),
                }),
            }
        })
    }

    /// [`Queue::take`] that tells a closed queue: the first element, waiting
    /// while the queue is empty and open; `None` once the queue is closed
    /// and nothing is left (buffered elements, waiting synchronous offers).
    /// A `receive` waiting when the queue is closed ends with `None`.
    #[track_caller]
    pub fn receive<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let shared = self.shared.clone();
        IO::defer_at::<Named<Receive>, _>(here(), move || {
            let (element, closed, wake) = {
                let mut state = shared.state.lock();
                let (element, wake) = shared.take_locked(&mut state);
                (element, state.closed, wake)
            };
            Shared::finish(&shared, wake);
            match element {
                Some(element) => IO::pure(Some(element)),
                None if closed => IO::pure(None),
                None => Queue::take_waiting(shared, true, core::convert::identity),
            }
        })
    }

    /// Closes the queue; `true` if this call closed it, `false` if it was
    /// closed already.
    ///
    /// From then on offers are refused ([`Queue::send`] gives the element
    /// back in `Err(QueueClosed)`, [`Queue::try_offer`] is `false`,
    /// [`Queue::offer`] drops it), also those waiting for room in a full
    /// bounded queue, which are woken. What is left (buffered elements,
    /// elements of synchronous offers already waiting) is still taken, in
    /// order; then [`Queue::receive`] gives `None`, and waiting `receive`s
    /// are woken with `None`.
    ///
    /// One race is not closed: an element on its way to a taker that is
    /// canceled at the moment the queue is closed comes back to the queue,
    /// possibly after a waiting `receive` was told `None`; a later
    /// `receive` or `try_take` still gets it.
    #[track_caller]
    pub fn close<E: Send + 'static>(&self) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<Close>, _>(here(), move || Shared::close(&shared))
    }

    /// Whether the queue was closed ([`Queue::close`]).
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// A take that has to wait: one suspension, resumed with the element
    /// by the offerer that pops it (or, for a `receive`, with none when the
    /// queue is closed); its registration checks the queue again under the
    /// lock, and its cleanup leaves the list. `out` makes the result of
    /// what it received (in the same step: no extra node).
    fn take_waiting<B: Send + 'static, E: Send + 'static>(
        shared: Arc<Shared<A>>,
        closable: bool,
        out: fn(Option<A>) -> B,
    ) -> IO<B, E> {
        IO::from_callback_untraced(move |cb: Callback<Handed<A>, E>| {
            let mut state = shared.state.lock();
            let (element, wake) = shared.take_locked(&mut state);
            if element.is_some() || (closable && state.closed) {
                drop(state);
                Shared::finish(&shared, wake);
                cb.succeed(Handed {
                    element,
                    counted: false,
                    shared,
                });
                return None;
            }
            let id = state.takers.push(Taker {
                callback: cb.into_raw(),
                closable,
            });
            drop(state);
            // The cleanup holds the queue weakly (`wait/list.rs`): a queue
            // gone meanwhile took the waiter with it.
            Some(cleanup_weakly(shared, move |shared| {
                shared.cancel_taker(id)
            }))
        })
        .map_untraced(move |handed| out(handed.receive()))
    }
}

/// [`Queue::send`] to a closed queue: the element is given back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueClosed<A>(pub A);

impl<A> fmt::Display for QueueClosed<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the queue is closed; the element was not offered")
    }
}

impl<A: fmt::Debug> core::error::Error for QueueClosed<A> {}
