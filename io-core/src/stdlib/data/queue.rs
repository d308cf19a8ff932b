//! `Queue`: FIFO queues for fibers, in Cats Effect's five kinds: bounded,
//! unbounded, dropping, circular buffer and synchronous.
//!
//! # Protocol
//!
//! The state (behind a short lock, never held across a suspension) is the
//! buffer, a FIFO of waiting takers, a FIFO of offerers waiting for room (a
//! full bounded queue), and a FIFO of synchronous offerers waiting, each
//! with its element, for a take. Nothing is reserved for anyone: an
//! element is in the buffer (or with its synchronous offerer) until a take
//! that *runs* moves it out, and a free place is free until an offer that
//! runs fills it. This is Cats Effect 3.6's rule for its queues:
//!
//! * an offer puts its element in the buffer and wakes one waiting taker;
//!   a take that frees a place wakes one waiting offerer; a synchronous
//!   offer lists itself with its element and wakes one waiting taker;
//! * a woken fiber only *retries* (its suspension resumes with a wake-up,
//!   [`Woken`], not with an element or a place), and whoever runs first
//!   wins: a take or offer that starts while an element or a place is
//!   there takes it at once, even if an older waiter was woken for it
//!   (barging). A woken waiter that finds nothing waits again, at the back.
//!
//! An operation that need not wait is one step (a step is never
//! interrupted, so it needs no mask). One that must wait is one
//! `from_callback` suspension: its registration (which runs to its end
//! before any cancellation is seen) checks the state again under the lock
//! and either lists the waiter's callback or resumes it at once with a
//! wake-up, and returns the cleanup that runs if the wait is canceled
//! while listed. The retry runs in the continuation of the wait, in the
//! same step that receives the wake-up.
//!
//! # Why the old design froze
//!
//! Up to this version an offer handed its element to the first waiting
//! taker (counted as `handed`) and a take promised the freed place to the
//! first waiting offerer (`promised`); nobody could barge in, and an
//! element or place came back only when the woken fiber ran or, canceled,
//! ran its cleanup, one executor turn later. With many waiters whose waits
//! end by short timeouts, the first waiter is the oldest, the one closest
//! to its deadline: under load (a turn longer than the timeouts) it was
//! canceled before it ran, the element went to the next oldest, canceled
//! too, and so on. The buffer's elements and the free places were out of
//! reach of every fiber that did run (`try_take` saw `None` with `len()`
//! at 1), new operations found nothing and queued behind, and the queue
//! stopped: 56 elements and 255 takers waiting at once, nothing completing
//! (a 90 s soak through a bounded(64) queue on exec-batching completed 349
//! offers). Progress needed a woken fiber to run before its deadline; now
//! any fiber that runs makes it.
//!
//! # Invariants
//!
//! Let a wake-up be *outstanding* from the moment a waiter is taken off
//! its list to be woken until its fiber has retried or dropped it.
//!
//! * **No lost wake-up (takers).** Whenever the lock is free and takers
//!   wait, the outstanding taker wake-ups are at least as many as the
//!   elements waiting for a take (buffered, or with synchronous offerers).
//!   Each operation keeps it: an offer that adds an element (or a
//!   synchronous offer that lists itself) wakes a taker; a taker lists
//!   itself only when no element waits; a take removes an element, and a
//!   retry uses up its own wake-up with or without one. A wake-up is used
//!   up exactly once: by its fiber's retry, or by being dropped, which
//!   wakes the next waiting taker if an element still waits. Dropped means
//!   given back to the waker (the fiber's cancellation claimed its
//!   suspension first: the waker tries the next taker, in a loop, not a
//!   recursion) or dropped by the fiber (resumed, then canceled before its
//!   retry ran). So an element never waits while takers wait and nobody is
//!   on the way to it.
//! * **No lost wake-up (offerers).** Likewise, whenever offerers of a
//!   bounded queue wait, the outstanding offerer wake-ups are at least the
//!   free places: a take that frees a place wakes an offerer; an offerer
//!   lists itself only when the queue is full; a dropped wake-up wakes the
//!   next offerer if a place is still free. `close` wakes them all.
//! * **Progress.** An element or place is never held for a fiber that has
//!   not run: a take that runs while the buffer holds an element gets it
//!   in that step, an offer that runs while a place is free puts its
//!   element in. So while operations run, they complete; a wait ends when
//!   its fiber is woken and finds something, when a fiber that ran before
//!   it took what it was woken for (that operation completed), or when it
//!   is canceled (which passes its wake-up on). Nothing depends on a woken
//!   fiber running before its deadline.
//! * **Capacity.** A bounded or dropping queue never holds more than its
//!   capacity: the buffer is everything it holds, and an element goes in
//!   only while there is room. [`Queue::len`] is the buffer's length, and
//!   [`Queue::try_take`] gets an element exactly when one is counted
//!   (there is no element on its way to anyone).
//! * **A canceled offer never enqueued.** A bounded offer that waits keeps
//!   its element in its own program: woken, it puts it in when it retries,
//!   in a step; canceled, it never does. A synchronous offerer's element
//!   is moved out only by a take that claims the offerer's suspension
//!   (completes its callback) first; if the offerer's cancellation claimed
//!   it first, the take drops the element (never offered) and tries the
//!   next offerer.
//! * **No element lost, none duplicated.** An element leaves the buffer
//!   only into the program of the take that runs (a step's value), and
//!   never travels in a wake-up.
//! * **FIFO.** Elements leave in the order they entered (the order in
//!   which their offers completed; for a synchronous queue, the order in
//!   which the offers handed them over or started waiting: an offer hands
//!   its element over only when no offer waits before it). Waiting takers and offerers are
//!   *woken* in arrival order, but a woken waiter can be overtaken by a
//!   fiber that runs first, and then waits again at the back: waiters no
//!   longer get elements or places in strict arrival order.
//!
//! Cats Effect's `BoundedAsyncQueue` passes the wake-up of a canceled
//! taker on unconditionally (`notifyOne` on cancel); here the waker learns
//! whether its wake-up reached the fiber (`complete_or_give_back`), and a
//! fiber canceled after it was reached drops a wake-up value whose `Drop`
//! passes it on, so no wake-up is spent on nobody. The ideas are Cats
//! Effect's (its `Queue` and `Semaphore`); no code is copied.
//!
//! A synchronous queue buffers only what it hands over: an offer that
//! finds a taker waiting (and no offer waiting before it) puts its element
//! in the buffer and wakes that taker, and completes (its rendezvous); one
//! that finds none lists itself with its element, wakes a taker if one
//! came meanwhile, and waits until a take moves the element out. Two
//! cases are weaker than for the other kinds (documented on
//! [`Queue::synchronous`]): if every taker woken for a handed-over element
//! is canceled before it runs, the element stays in the buffer for the
//! next take (`len()` reads 1 until then, and `try_take` gets it); and a
//! waiting offerer canceled after a take claimed it (its suspension
//! resumes, then the cancellation is observed) has offered its element,
//! although its fiber ends `Canceled`, as in Cats Effect.
//!
//! # Closing
//!
//! `close` (not in Cats Effect's `Queue`; chosen over a channel with
//! sender-drop detection because a `Queue` is a cloned handle with no
//! sender/receiver roles, so dropping handles says nothing) sets a flag
//! under the lock: offers are refused from then on (`send` gives the
//! element back in `QueueClosed`), waiting bounded offerers are woken
//! (their retries see the flag; their elements never left them), and
//! waiting `receive`s are woken (they wait only while nothing is left, so
//! their retries see the end). What is left is still taken in order, then
//! `receive` gives `None`. Plain `take` and `offer` keep their signatures:
//! `take` waits on a closed, drained queue, `offer` drops its element
//! (documented on each).
//!
//! As in Cats Effect, a `take` that has completed is not canceled: if the
//! fiber is canceled right after, before its program uses the element,
//! the element is gone with the fiber. (Wrap the take and its use in one
//! masked region, `uncancelable(|poll| poll.apply(q.take()).map(use))`, to
//! use every element taken: a completed `poll` hands its value on.)

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::mem::ManuallyDrop;

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

/// A waiting taker: its callback, and whether it ends when the queue is
/// closed (`receive`) or waits on (`take`).
struct Taker {
    callback: RawCallback,
    closable: bool,
}

/// What an offer that does not wait did.
enum OfferNow<A> {
    /// The element is in.
    Done,
    /// A full dropping queue dropped it.
    Dropped,
    /// It has to wait (a full bounded queue).
    Wait(A),
    /// The queue is closed: the element is given back.
    Closed(A),
}

/// A synchronous offerer waiting for a take, with its element.
struct Offerer<A> {
    element: A,
    /// Resumed with `Ok(())` by the take that moves the element out.
    callback: RawCallback,
}

/// What a synchronous offer's suspension resumes with: `Ok(())` once a
/// take has its element, `Err(element)` if the queue was closed first.
type Rendezvous<A> = Result<(), A>;

struct State<A> {
    buffer: VecDeque<A>,
    /// Waiting takers (their callbacks), in arrival order; a canceled one
    /// is removed in O(log n).
    takers: WaiterList<Taker>,
    /// Offerers of a full bounded queue, waiting for room (their callbacks:
    /// their elements stay in their own programs).
    offerers: WaiterList<RawCallback>,
    /// Offerers of a synchronous queue, waiting with their elements.
    rendezvous: WaiterList<Offerer<A>>,
    /// Closed: offers are refused; takes drain what is left.
    closed: bool,
}

impl<A> State<A> {
    /// Whether an element waits for a take (module doc, "No lost wake-up").
    fn has_element(&self) -> bool {
        !self.buffer.is_empty() || !self.rendezvous.is_empty()
    }
}

struct Shared<A> {
    kind: Kind,
    capacity: usize,
    state: Mutex<State<A>>,
}

/// A wake-up: the value a waiting taker's (`TAKER`) or bounded offerer's
/// suspension resumes with, and what its program retries with (a strong
/// reference to the queue: a waiting fiber holds the queue only weakly,
/// `wait/list.rs`). Used up by [`Woken::into_shared`] in the retry's step;
/// dropped unused (its fiber was canceled first), it wakes the next waiter
/// of its kind if one is owed a wake-up (module doc, "No lost wake-up").
struct Woken<A: Send + 'static, const TAKER: bool> {
    shared: ManuallyDrop<Arc<Shared<A>>>,
}

impl<A: Send + 'static, const TAKER: bool> Woken<A, TAKER> {
    fn new(shared: Arc<Shared<A>>) -> Self {
        Woken {
            shared: ManuallyDrop::new(shared),
        }
    }

    /// Uses the wake-up up: the woken fiber retries (or the waker passes
    /// it on itself), holding the queue.
    fn into_shared(self) -> Arc<Shared<A>> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (it is a `ManuallyDrop`) nor used
        // again, so its `Drop` does not take the `Arc` too: it is moved out
        // exactly once.
        unsafe { ManuallyDrop::take(&mut this.shared) }
    }
}

impl<A: Send + 'static, const TAKER: bool> Drop for Woken<A, TAKER> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs at most once, and never for a wake-up that
        // `into_shared` used up (it forgets it): the `Arc` is taken once.
        let shared = unsafe { ManuallyDrop::take(&mut self.shared) };
        if TAKER {
            let next = shared.state.lock().next_taker();
            Shared::wake_taker(&shared, next);
        } else {
            let next = shared.state.lock().next_offerer(&shared);
            Shared::wake_offerer(&shared, next);
        }
    }
}

/// A waiting taker's wake-up.
type TakerWoken<A> = Woken<A, true>;
/// A waiting bounded offerer's wake-up.
type OffererWoken<A> = Woken<A, false>;

impl<A: Send + 'static> State<A> {
    /// Under the lock: the next waiting taker, taken off its list to be
    /// woken, if an element waits for one.
    fn next_taker(&mut self) -> Option<RawCallback> {
        if !self.has_element() {
            return None;
        }
        self.takers.pop().map(|taker| taker.callback)
    }

    /// Under the lock: the next waiting bounded offerer, taken off its list
    /// to be woken, if a place is free for it (or the queue is closed).
    fn next_offerer(&mut self, shared: &Shared<A>) -> Option<RawCallback> {
        if self.offerers.is_empty() || !(self.closed || shared.has_room(self)) {
            return None;
        }
        self.offerers.pop()
    }
}

impl<A: Send + 'static> Shared<A> {
    /// Whether an offer may put an element in the buffer now (a
    /// synchronous queue: while a taker waits, for it to take, and no
    /// offer waits before it, whose element must leave first).
    fn has_room(&self, state: &State<A>) -> bool {
        match self.kind {
            Kind::Unbounded | Kind::Circular => true,
            Kind::Synchronous => !state.takers.is_empty() && state.rendezvous.is_empty(),
            Kind::Bounded | Kind::Dropping => state.buffer.len() < self.capacity,
        }
    }

    /// Wakes the taker `next` (taken off its list) to take again, if there
    /// is one. If it was canceled first (the wake-up comes back), wakes the
    /// next one owed a wake-up instead: a loop, not a recursion, through
    /// any number of canceled takers.
    #[inline]
    fn wake_taker(shared: &Arc<Self>, next: Option<RawCallback>) {
        if let Some(callback) = next {
            Self::wake_takers_from(shared, callback);
        }
    }

    /// [`Shared::wake_taker`] of a taker.
    fn wake_takers_from(shared: &Arc<Self>, first: RawCallback) {
        let mut next = Some(first);
        while let Some(callback) = next {
            let woken = Value::new(TakerWoken::new(shared.clone()));
            let Err(given_back) = callback.complete_or_give_back(Ok(woken)) else {
                return;
            };
            let (Ok(value) | Err(value)) = given_back;
            // SAFETY: the value was made just above from a `TakerWoken<A>`.
            let woken = unsafe { value.take::<TakerWoken<A>>() };
            // Used up here: passed on below, without a recursion.
            drop(woken.into_shared());
            drop(callback);
            next = shared.state.lock().next_taker();
        }
    }

    /// [`Shared::wake_taker`] for a waiting bounded offerer.
    #[inline]
    fn wake_offerer(shared: &Arc<Self>, next: Option<RawCallback>) {
        if let Some(callback) = next {
            Self::wake_offerers_from(shared, callback);
        }
    }

    /// [`Shared::wake_offerer`] of an offerer.
    fn wake_offerers_from(shared: &Arc<Self>, first: RawCallback) {
        let mut next = Some(first);
        while let Some(callback) = next {
            let woken = Value::new(OffererWoken::new(shared.clone()));
            let Err(given_back) = callback.complete_or_give_back(Ok(woken)) else {
                return;
            };
            let (Ok(value) | Err(value)) = given_back;
            // SAFETY: the value was made just above from an `OffererWoken<A>`.
            let woken = unsafe { value.take::<OffererWoken<A>>() };
            drop(woken.into_shared());
            drop(callback);
            next = shared.state.lock().next_offerer(shared);
        }
    }

    /// Offers without waiting: puts the element in the buffer if there is
    /// room (a synchronous queue: if a taker waits) and wakes a waiting
    /// taker.
    fn offer_now(shared: &Arc<Self>, element: A) -> OfferNow<A> {
        let (next, oldest) = {
            let mut state = shared.state.lock();
            if state.closed {
                return OfferNow::Closed(element);
            }
            let mut oldest = None;
            if shared.kind == Kind::Circular && state.buffer.len() >= shared.capacity {
                oldest = state.buffer.pop_front();
            } else if !shared.has_room(&state) {
                if shared.kind == Kind::Dropping {
                    drop(state);
                    drop(element);
                    return OfferNow::Dropped;
                }
                return OfferNow::Wait(element);
            }
            state.buffer.push_back(element);
            (state.takers.pop().map(|taker| taker.callback), oldest)
        };
        // A full circular buffer's oldest element, dropped outside the lock.
        drop(oldest);
        Shared::wake_taker(shared, next);
        OfferNow::Done
    }

    /// Takes the first element if there is one (the buffer's, waking a
    /// waiting bounded offerer for the place it frees; or a waiting
    /// synchronous offerer's), and says whether the queue is closed.
    fn take_now(shared: &Arc<Self>) -> (Option<A>, bool) {
        loop {
            let (offerer, closed) = {
                let mut state = shared.state.lock();
                let closed = state.closed;
                if let Some(element) = state.buffer.pop_front() {
                    let next = match shared.kind {
                        Kind::Bounded => state.offerers.pop(),
                        _ => None,
                    };
                    drop(state);
                    Shared::wake_offerer(shared, next);
                    return (Some(element), closed);
                }
                let Some(offerer) = state.rendezvous.pop() else {
                    return (None, closed);
                };
                (offerer, closed)
            };
            // The offer completes exactly when its element is taken: claim
            // its suspension first. An offerer whose cancellation claimed
            // it first has offered nothing (its cleanup finds nothing to
            // remove): its element is dropped, and the next one is tried.
            let done = Value::new::<Rendezvous<A>>(Ok(()));
            if offerer.callback.complete_or_give_back(Ok(done)).is_ok() {
                return (Some(offerer.element), closed);
            }
        }
    }

    /// Closes the queue (`false` if it was closed already): waiting
    /// `receive`s and waiting bounded offerers are woken, to see the flag
    /// when they retry. Waiting synchronous offerers stay: their elements
    /// are what is left, for takes to drain.
    fn close(shared: &Arc<Self>) -> bool {
        let (receivers, offerers) = {
            let mut state = shared.state.lock();
            if state.closed {
                return false;
            }
            state.closed = true;
            let receivers = state.takers.take_where(|taker| taker.closable);
            let offerers: Vec<RawCallback> = state.offerers.take_all().collect();
            (receivers, offerers)
        };
        // One canceled meanwhile drops its wake-up, which wakes nobody
        // (nothing is left for a take, no offer is accepted).
        for receiver in receivers {
            let _ = receiver
                .callback
                .complete(Ok(Value::new(TakerWoken::new(shared.clone()))));
        }
        for offerer in offerers {
            let _ = offerer.complete(Ok(Value::new(OffererWoken::new(shared.clone()))));
        }
        true
    }

    /// A canceled taker's cleanup: leave the list if still listed (if not,
    /// it was woken, and its wake-up is passed on where it is used up).
    fn cancel_taker(&self, id: WaiterId) {
        let removed = self.state.lock().takers.remove(id);
        drop(removed);
    }

    /// A canceled bounded offerer's cleanup, as [`Shared::cancel_taker`].
    fn cancel_offerer(&self, id: WaiterId) {
        let removed = self.state.lock().offerers.remove(id);
        drop(removed);
    }

    /// A canceled synchronous offerer's cleanup: leave the list (the
    /// element was never offered) unless a take already claimed it.
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
/// * A bounded or dropping queue never holds more than its capacity.
///   [`Queue::len`] counts the buffered elements, which are all it holds:
///   [`Queue::try_take`] gets one exactly when `len()` is not 0, and
///   [`Queue::try_offer`] puts one in exactly when `len()` is below the
///   capacity (nothing is set aside for a fiber that has not run yet).
/// * Progress under cancellation: an offer puts its element in the buffer
///   and wakes one waiting taker; a take that frees a place wakes one
///   waiting offerer; the woken fiber takes (or offers) again when it
///   runs, and whoever runs first wins. A woken fiber that is canceled
///   before it runs passes its wake-up on. So a queue whose waiters are
///   canceled (timeouts) faster than they run still serves the fibers
///   that do run (Cats Effect 3.6's rule).
/// * Elements leave in FIFO order. Waiting fibers are woken in arrival
///   order, but one that is overtaken by a fiber that ran first waits
///   again, at the back: waiters are not served in strict arrival order.
/// * A bounded `offer` canceled while it waits has enqueued nothing: its
///   element stays in its program until it runs and finds a place.
/// * Cancellation loses no element and duplicates none.
/// * As in Cats Effect, a `take` that has completed is not canceled: if
///   the fiber is canceled right after, before its program uses the
///   element, the element is gone with the fiber.
///
/// The protocol and its invariants are written down in the module
/// `io-core/src/stdlib/data/queue.rs`.
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
            .field("len", &state.buffer.len())
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
    pub fn circular_buffer(capacity: usize) -> Result<Self, InvalidCapacity> {
        Queue::checked(Kind::Circular, capacity)
    }

    /// A queue without buffer: each `offer` waits for a `take`
    /// (rendezvous).
    ///
    /// An offer that finds a take waiting (and no offer waiting before it)
    /// hands its element over and completes at once: the element is buffered for the taker it wakes
    /// (so [`Queue::len`] counts it and [`Queue::try_take`] gets it), and
    /// the first take that runs gets it. One that finds none waits, its
    /// element in its own entry, until a take claims it. Weaker than the
    /// other kinds under cancellation (module doc): an element handed over
    /// to takers that are all canceled before they run is kept for the next
    /// take; and a waiting offerer canceled after a take claimed it has
    /// offered its element, although its fiber ends `Canceled` (as in Cats
    /// Effect). An offerer canceled before a take claimed it has offered
    /// nothing. No element is lost or duplicated.
    pub fn synchronous() -> Self {
        Queue::with(Kind::Synchronous, 0)
    }

    /// Elements held now: the buffered ones, every element the queue holds
    /// (a synchronous queue's waiting offerers keep theirs: it holds only
    /// what was handed over to a woken taker that has not taken it yet).
    /// Never more than the capacity of a bounded or dropping queue.
    pub fn len(&self) -> usize {
        self.shared.state.lock().buffer.len()
    }

    /// How many fibers wait in `take` (for diagnostics and tests): woken
    /// ones that have not run yet are not counted.
    pub fn waiting_takers(&self) -> usize {
        self.shared.state.lock().takers.len()
    }

    /// How many fibers wait in `offer` (for diagnostics and tests): woken
    /// bounded offerers that have not run yet are not counted.
    pub fn waiting_offerers(&self) -> usize {
        let state = self.shared.state.lock();
        state.offerers.len() + state.rendezvous.len()
    }

    /// Whether no element is held now (see [`Queue::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offers without waiting: `false` if the element was not taken in (a
    /// full bounded or dropping queue, a synchronous queue without a
    /// waiting take, a closed queue); the element is then dropped.
    #[track_caller]
    pub fn try_offer<E: Send + 'static>(&self, element: A) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryOffer>, _>(here(), move || {
            matches!(Shared::offer_now(&shared, element), OfferNow::Done)
        })
    }

    /// Offers, waiting while a bounded queue is full (or, for a synchronous
    /// queue, until a take has the element). An offer canceled while it
    /// waits has not enqueued its element (a synchronous one: see
    /// [`Queue::synchronous`]).
    ///
    /// On a closed queue the element is dropped (so is that of an offer
    /// waiting when the queue is closed); use [`Queue::send`] to get it
    /// back with the news.
    #[track_caller]
    pub fn offer<E: Send + 'static>(&self, element: A) -> IO<(), E> {
        let shared = self.shared.clone();
        // The usual case, in one step: room in the buffer (a waiting take).
        // A step is never interrupted, so it needs no mask; only a wait does.
        IO::defer_at::<Named<Offer>, _>(here(), move || {
            match Shared::offer_now(&shared, element) {
                OfferNow::Done | OfferNow::Dropped | OfferNow::Closed(_) => IO::unit(),
                OfferNow::Wait(element) if shared.kind == Kind::Synchronous => {
                    Queue::offer_rendezvous(shared, element, |_refused| ())
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
            match Shared::offer_now(&shared, element) {
                OfferNow::Done | OfferNow::Dropped => IO::pure(Ok(())),
                OfferNow::Closed(element) => IO::pure(Err(QueueClosed(element))),
                OfferNow::Wait(element) if shared.kind == Kind::Synchronous => {
                    Queue::offer_rendezvous(shared, element, |r| r.map_err(QueueClosed))
                }
                OfferNow::Wait(element) => {
                    Queue::offer_waiting(shared, element, |r| r.map_err(QueueClosed))
                }
            }
        })
    }

    /// A bounded offer that has to wait for room: one suspension, whose
    /// registration checks the queue again under the lock and whose cleanup
    /// leaves the list. It resumes with a wake-up and offers again, in the
    /// same step, with its element (which never left it); `out` makes the
    /// result (`Err(element)` if the queue was closed first).
    fn offer_waiting<B: Send + 'static, E: Send + 'static>(
        shared: Arc<Shared<A>>,
        element: A,
        out: fn(Result<(), A>) -> B,
    ) -> IO<B, E> {
        IO::from_callback_untraced(move |cb: Callback<OffererWoken<A>, E>| {
            let mut state = shared.state.lock();
            // The queue may have changed since the offer found it full:
            // then retry at once (the wake-up is this offer's own).
            if state.closed || shared.has_room(&state) {
                drop(state);
                cb.succeed(Woken::new(shared));
                return None;
            }
            let id = state.offerers.push(cb.into_raw());
            drop(state);
            // The cleanup holds the queue weakly (`wait/list.rs`): a queue
            // gone meanwhile took the waiter with it.
            Some(cleanup_weakly(shared, move |shared| {
                shared.cancel_offerer(id)
            }))
        })
        .flat_map_untraced(move |woken| {
            let shared = woken.into_shared();
            match Shared::offer_now(&shared, element) {
                OfferNow::Done | OfferNow::Dropped => IO::pure(out(Ok(()))),
                OfferNow::Closed(element) => IO::pure(out(Err(element))),
                // Overtaken by an offer that ran first: wait again.
                OfferNow::Wait(element) => Queue::offer_waiting(shared, element, out),
            }
        })
    }

    /// A synchronous offer that has to wait for a take: one suspension,
    /// its element in its entry until a take moves it out (also after the
    /// queue is closed: it is then part of what takes drain). Its
    /// registration wakes a taker that came meanwhile (it lists itself all
    /// the same: a step that could be canceled before it ran must not be
    /// where its element goes in).
    fn offer_rendezvous<B: Send + 'static, E: Send + 'static>(
        shared: Arc<Shared<A>>,
        element: A,
        out: fn(Rendezvous<A>) -> B,
    ) -> IO<B, E> {
        IO::from_callback_untraced(move |cb: Callback<Rendezvous<A>, E>| {
            let mut state = shared.state.lock();
            if state.closed {
                drop(state);
                cb.succeed(Err(element));
                return None;
            }
            let id = state.rendezvous.push(Offerer {
                element,
                callback: cb.into_raw(),
            });
            let next = state.takers.pop().map(|taker| taker.callback);
            drop(state);
            Shared::wake_taker(&shared, next);
            // The cleanup holds the queue weakly (`wait/list.rs`): a queue
            // gone meanwhile took the waiter with it.
            Some(cleanup_weakly(shared, move |shared| {
                shared.cancel_rendezvous(id)
            }))
        })
        .map_untraced(out)
    }

    /// Takes without waiting: `None` if the queue is empty (for a
    /// synchronous queue: if no offer waits).
    #[track_caller]
    pub fn try_take<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryTake>, _>(here(), move || Shared::take_now(&shared).0)
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
        IO::defer_at::<Named<Take>, _>(here(), move || match Shared::take_now(&shared).0 {
            Some(element) => IO::pure(element),
            None => Queue::take_waiting(shared, None, core::convert::identity),
        })
    }

    /// [`Queue::take`] that tells a closed queue: the first element, waiting
    /// while the queue is empty and open; `None` once the queue is closed
    /// and nothing is left (buffered elements, waiting synchronous offers).
    /// A `receive` waiting when the queue is closed ends with `None`.
    #[track_caller]
    pub fn receive<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let shared = self.shared.clone();
        IO::defer_at::<Named<Receive>, _>(here(), move || match Shared::take_now(&shared) {
            (Some(element), _) => IO::pure(Some(element)),
            (None, true) => IO::pure(None),
            (None, false) => Queue::take_waiting(shared, Some(|| None), Some),
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
    /// are woken and end with `None`.
    #[track_caller]
    pub fn close<E: Send + 'static>(&self) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<Close>, _>(here(), move || Shared::close(&shared))
    }

    /// Whether the queue was closed ([`Queue::close`]).
    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// A take that has to wait: one suspension, resumed with a wake-up by
    /// an offer (or, for a `receive`, by `close`), after which it takes
    /// again, in the same step; its registration checks the queue again
    /// under the lock, and its cleanup leaves the list. `on_closed` (a
    /// `receive`'s) is its result once the queue is closed and drained;
    /// `out` makes the result of an element (in the same step: no extra
    /// node).
    fn take_waiting<B: Send + 'static, E: Send + 'static>(
        shared: Arc<Shared<A>>,
        on_closed: Option<fn() -> B>,
        out: fn(A) -> B,
    ) -> IO<B, E> {
        IO::from_callback_untraced(move |cb: Callback<TakerWoken<A>, E>| {
            let mut state = shared.state.lock();
            // Something may have come since the take found nothing: then
            // take again at once (the wake-up is this take's own).
            if state.has_element() || (on_closed.is_some() && state.closed) {
                drop(state);
                cb.succeed(Woken::new(shared));
                return None;
            }
            let id = state.takers.push(Taker {
                callback: cb.into_raw(),
                closable: on_closed.is_some(),
            });
            drop(state);
            // The cleanup holds the queue weakly (`wait/list.rs`): a queue
            // gone meanwhile took the waiter with it.
            Some(cleanup_weakly(shared, move |shared| {
                shared.cancel_taker(id)
            }))
        })
        .flat_map_untraced(move |woken| {
            let shared = woken.into_shared();
            match (Shared::take_now(&shared), on_closed) {
                ((Some(element), _), _) => IO::pure(out(element)),
                ((None, true), Some(end)) => IO::pure(end()),
                // Overtaken by a take that ran first: wait again.
                ((None, _), _) => Queue::take_waiting(shared, on_closed, out),
            }
        })
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
