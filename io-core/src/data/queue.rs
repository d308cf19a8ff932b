//! `Queue`: FIFO queues for fibers, in Cats Effect's five kinds: bounded,
//! unbounded, dropping, circular buffer and synchronous.
//!
//! # Protocol
//!
//! The state (behind a short lock, never held across a suspension) is the
//! buffer, a FIFO of waiting takers and a FIFO of waiting offerers (for a
//! full bounded queue, or any synchronous offer). An operation that need
//! not wait is one step (a step is never interrupted, so it needs no mask).
//! One that must wait is one `from_callback` suspension: its registration
//! (which runs to its end before any cancellation is seen) checks the state
//! again under the lock and queues the waiter's callback, and returns the
//! cleanup that runs if the wait is canceled.
//!
//! A waiting taker is its callback only: an offerer that finds one pops it
//! under the lock and, once the lock is released, resumes it *with the
//! element* ([`RawCallback::complete_or_give_back`]). A waiting offerer's
//! element sits in its entry until a taker moves it out, under the lock.
//!
//! Cancellation loses no element and duplicates none, because a suspension
//! ends once, by whichever claims it first, its callback or the
//! cancellation. A canceled taker that is still queued leaves the queue; one
//! already popped by an offerer makes that offerer's delivery fail, and the
//! offerer gives the element to the next waiting taker, or back to the
//! *front* of the buffer. A canceled offerer that is still queued leaves
//! with its element (it was never offered); one whose element was already
//! taken has offered it, once.
//!
//! As in Cats Effect, a `take` that has completed is not canceled: if the
//! fiber is canceled right after, before its program uses the element,
//! the element is gone with the fiber.

use alloc::collections::VecDeque;
use core::fmt;

use super::waiters::WaiterList;
use crate::erased::Value;
use crate::fiber::{Callback, RawCallback};
use crate::io::IO;
use crate::sync::{Arc, Mutex};
use crate::tracing::{Named, here};

// The operations as traces name them.
super::trace_ops! {
    Offer = "Queue::offer",
    TryOffer = "Queue::try_offer",
    Take = "Queue::take",
    TryTake = "Queue::try_take",
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Offers wait while `capacity` elements are buffered.
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

struct Offerer<A> {
    element: A,
    callback: RawCallback,
}

struct State<A> {
    buffer: VecDeque<A>,
    /// Waiting takers (their callbacks) and offerers in arrival order; a
    /// canceled one is removed in O(log n).
    takers: WaiterList<RawCallback>,
    offerers: WaiterList<Offerer<A>>,
}

struct Shared<A> {
    kind: Kind,
    capacity: usize,
    state: Mutex<State<A>>,
}

/// Work to do after releasing the lock: resume a fiber.
enum Wake<A> {
    Nobody,
    /// An offerer whose element was taken.
    Offerer(RawCallback),
    /// A taker, with the element it gets.
    Taker(RawCallback, A),
}

/// An element on its way to a taker: the value its suspension resumes
/// with. If the taker's cancellation is seen before its program takes the
/// element out (the fiber resumes with the value, then observes the cancel
/// and drops it), dropping it gives the element back to the queue.
struct Handed<A: Send + 'static> {
    element: Option<A>,
    shared: Arc<Shared<A>>,
}

impl<A: Send + 'static> Drop for Handed<A> {
    fn drop(&mut self) {
        if let Some(element) = self.element.take()
            && let Some((next, element)) = self.shared.pass_on(element)
        {
            Shared::deliver(&self.shared, next, element);
        }
    }
}

impl<A: Send + 'static> Shared<A> {
    /// Pops the first waiting taker, to resume it with `element` once the
    /// lock is released; gives the element back if no taker waits.
    fn hand_to_taker(state: &mut State<A>, element: A) -> Result<Wake<A>, A> {
        match state.takers.pop() {
            Some(taker) => Ok(Wake::Taker(taker, element)),
            None => Err(element),
        }
    }

    /// Moves the first waiting offerer's element out (its callback is to
    /// be resumed once the lock is released), if any.
    fn take_from_offerer(state: &mut State<A>) -> Option<(A, RawCallback)> {
        let offerer = state.offerers.pop()?;
        Some((offerer.element, offerer.callback))
    }

    /// Resumes the fiber `wake` names; call it with the lock released.
    fn finish(shared: &Arc<Self>, wake: Wake<A>) {
        match wake {
            Wake::Nobody => {}
            Wake::Offerer(callback) => {
                // An offerer canceled meanwhile has offered its element all
                // the same (it was taken): nothing to undo.
                let _ = callback.complete(Ok(Value::unit()));
            }
            Wake::Taker(callback, element) => Self::deliver(shared, callback, element),
        }
    }

    /// Resumes the taker `callback` with `element`. If it was canceled
    /// first, the element goes to the next waiting taker, or back to the
    /// front of the buffer (a loop, not a recursion, through any number of
    /// canceled takers).
    fn deliver(shared: &Arc<Self>, callback: RawCallback, element: A) {
        let mut next = Some((callback, element));
        while let Some((callback, element)) = next {
            let handed = Handed {
                element: Some(element),
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
                .and_then(|element| shared.pass_on(element));
        }
    }

    /// An element whose taker was canceled before it reached it: the next
    /// waiting taker, to deliver it to once the lock is released, or, with
    /// none, the front of the buffer.
    fn pass_on(&self, element: A) -> Option<(RawCallback, A)> {
        let mut state = self.state.lock();
        match state.takers.pop() {
            Some(next) => Some((next, element)),
            None => {
                state.buffer.push_front(element);
                None
            }
        }
    }

    /// Tries to offer without waiting. `Err(element)` when the offer would
    /// have to wait (full bounded queue, synchronous queue without taker).
    fn offer_now(&self, element: A) -> (Result<bool, A>, Wake<A>) {
        let mut state = self.state.lock();
        let element = match Self::hand_to_taker(&mut state, element) {
            Ok(wake) => return (Ok(true), wake),
            Err(element) => element,
        };
        match self.kind {
            Kind::Unbounded => {
                state.buffer.push_back(element);
                (Ok(true), Wake::Nobody)
            }
            Kind::Bounded if state.buffer.len() < self.capacity => {
                state.buffer.push_back(element);
                (Ok(true), Wake::Nobody)
            }
            Kind::Dropping if state.buffer.len() >= self.capacity => (Ok(false), Wake::Nobody),
            Kind::Dropping => {
                state.buffer.push_back(element);
                (Ok(true), Wake::Nobody)
            }
            Kind::Circular => {
                if state.buffer.len() >= self.capacity {
                    state.buffer.pop_front();
                }
                state.buffer.push_back(element);
                (Ok(true), Wake::Nobody)
            }
            Kind::Bounded | Kind::Synchronous => (Err(element), Wake::Nobody),
        }
    }

    /// Tries to take without waiting, under the lock `state`.
    fn take_locked(state: &mut State<A>) -> (Option<A>, Wake<A>) {
        if let Some(element) = state.buffer.pop_front() {
            // A waiting offerer's element moves into the freed place.
            let wake = match Self::take_from_offerer(state) {
                Some((next, callback)) => {
                    state.buffer.push_back(next);
                    Wake::Offerer(callback)
                }
                None => Wake::Nobody,
            };
            return (Some(element), wake);
        }
        match Self::take_from_offerer(state) {
            Some((element, callback)) => (Some(element), Wake::Offerer(callback)),
            None => (None, Wake::Nobody),
        }
    }

    /// A canceled taker's cleanup: leave the queue if still queued (if not,
    /// an offerer popped it and gives its element to another taker).
    fn cancel_taker(&self, id: u64) {
        let removed = self.state.lock().takers.remove(id);
        drop(removed);
    }

    /// A canceled offerer's cleanup: leave the queue (the element was never
    /// offered) unless a taker already took it.
    fn cancel_offerer(&self, id: u64) {
        let removed = self.state.lock().offerers.remove(id);
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
///
/// # Protocol
///
/// The state (behind a short lock, never held across a suspension) is the
/// buffer, a FIFO of waiting takers and a FIFO of waiting offerers (for a
/// full bounded queue, or any synchronous offer). An offer that finds a
/// waiting taker hands the element straight to it; a waiting offerer's
/// element waits in the queue's list until a taker moves it out.
///
/// Cancellation loses no element and duplicates none. A canceled taker that
/// is still queued leaves the queue; an element already on its way to it
/// goes to the next waiting taker, or back to the *front* of the buffer. A
/// canceled offerer that is still queued leaves with its element (it was
/// never offered); one whose element was already taken has offered it,
/// once.
///
/// As in Cats Effect, a `take` that has completed is not canceled: if the
/// fiber is canceled right after, before its program uses the element,
/// the element is gone with the fiber.
///
///
/// ```
/// use spindle_core::{IO, Queue};
/// use spindle_exec_single::SingleThreaded;
///
/// let q = Queue::<u32>::bounded(2)?;
/// let (producer, consumer) = (q.clone(), q);
/// let io: IO<Vec<u32>, ()> = IO::traverse(vec![1, 2, 3, 4], move |i| producer.offer::<()>(i))
///     .start()
///     .product_r(IO::replicate(4, move || consumer.take()));
/// assert_eq!(SingleThreaded::new()?.block_on(io)?.succeeded(), Some(vec![1, 2, 3, 4]));
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
            .field("offerers", &state.offerers.len())
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

    /// A queue of at most `capacity` elements; `offer` waits while it is full.
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

    /// A queue without buffer: each `offer` waits for a `take` (rendezvous).
    pub fn synchronous() -> Self {
        Queue::with(Kind::Synchronous, 0)
    }

    /// Elements buffered now.
    pub fn len(&self) -> usize {
        self.shared.state.lock().buffer.len()
    }

    /// How many fibers wait in `take` (for diagnostics and tests).
    pub fn waiting_takers(&self) -> usize {
        self.shared.state.lock().takers.len()
    }

    /// How many fibers wait in `offer` (for diagnostics and tests).
    pub fn waiting_offerers(&self) -> usize {
        self.shared.state.lock().offerers.len()
    }

    /// Whether no element is buffered now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offers without waiting: `false` if the element was not taken in (a
    /// full bounded or dropping queue, a synchronous queue without taker).
    #[track_caller]
    pub fn try_offer<E: Send + 'static>(&self, element: A) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryOffer>, _>(here(), move || {
            let (result, wake) = shared.offer_now(element);
            Shared::finish(&shared, wake);
            result.unwrap_or(false)
        })
    }

    /// Offers, waiting while a bounded queue is full (or, for a synchronous
    /// queue, until a taker takes the element).
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
                Ok(_) => IO::unit(),
                Err(element) => Queue::offer_waiting(shared, element),
            }
        })
    }

    /// An offer that has to wait: one suspension, whose registration checks
    /// the queue again under the lock and whose cleanup leaves the list.
    fn offer_waiting<E: Send + 'static>(shared: Arc<Shared<A>>, element: A) -> IO<(), E> {
        IO::from_callback_untraced(move |cb: Callback<(), E>| {
            let mut state = shared.state.lock();
            // The queue may have changed since `offer_now`.
            let element = match Shared::hand_to_taker(&mut state, element) {
                Ok(wake) => {
                    drop(state);
                    Shared::finish(&shared, wake);
                    cb.succeed(());
                    return None;
                }
                Err(element) => element,
            };
            if shared.kind == Kind::Bounded && state.buffer.len() < shared.capacity {
                state.buffer.push_back(element);
                drop(state);
                cb.succeed(());
                return None;
            }
            let id = state.offerers.push(Offerer {
                element,
                callback: cb.into_raw(),
            });
            drop(state);
            // The cleanup holds the queue weakly (`fiber/join.rs`, "Waits
            // nobody can end"): a queue gone meanwhile took the waiter with it.
            let queue = crate::sync::downgrade(&shared);
            drop(shared);
            Some(IO::delay_untraced(move || {
                if let Some(shared) = queue.upgrade() {
                    shared.cancel_offerer(id);
                }
            }))
        })
    }

    /// Takes without waiting: `None` if the queue is empty.
    #[track_caller]
    pub fn try_take<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryTake>, _>(here(), move || {
            let (element, wake) = Shared::take_locked(&mut shared.state.lock());
            Shared::finish(&shared, wake);
            element
        })
    }

    /// Takes the first element, waiting while the queue is empty. A take
    /// canceled while waiting takes nothing.
    #[track_caller]
    pub fn take<E: Send + 'static>(&self) -> IO<A, E> {
        let shared = self.shared.clone();
        // The usual case, in one step: an element buffered, or a waiting
        // offerer's. A step is never interrupted, so it needs no mask; only
        // a wait does.
        IO::defer_at::<Named<Take>, _>(here(), move || {
            let (element, wake) = Shared::take_locked(&mut shared.state.lock());
            Shared::finish(&shared, wake);
            match element {
                Some(element) => IO::pure(element),
                None => Queue::take_waiting(shared),
            }
        })
    }

    /// A take that has to wait: one suspension, resumed with the element
    /// by the offerer that pops it; its registration checks the queue again
    /// under the lock, and its cleanup leaves the list.
    fn take_waiting<E: Send + 'static>(shared: Arc<Shared<A>>) -> IO<A, E> {
        IO::from_callback_untraced(move |cb: Callback<Handed<A>, E>| {
            let mut state = shared.state.lock();
            if let (Some(element), wake) = Shared::take_locked(&mut state) {
                drop(state);
                Shared::finish(&shared, wake);
                cb.succeed(Handed {
                    element: Some(element),
                    shared,
                });
                return None;
            }
            let id = state.takers.push(cb.into_raw());
            drop(state);
            // The cleanup holds the queue weakly (`fiber/join.rs`, "Waits
            // nobody can end"): a queue gone meanwhile took the waiter with it.
            let queue = crate::sync::downgrade(&shared);
            drop(shared);
            Some(IO::delay_untraced(move || {
                if let Some(shared) = queue.upgrade() {
                    shared.cancel_taker(id);
                }
            }))
        })
        .map_untraced(|mut handed| match handed.element.take() {
            Some(element) => element,
            None => unreachable!("io-core: a handed element is taken once"),
        })
    }
}
