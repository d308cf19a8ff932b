//! `Queue`: FIFO queues for fibers, in Cats Effect's five kinds: bounded,
//! unbounded, dropping, circular buffer and synchronous.
//!
//! # Protocol
//!
//! The state (behind a short lock, never held across a suspension) is the
//! buffer, a FIFO of waiting takers and a FIFO of waiting offerers (for a
//! full bounded queue, or any synchronous offer). Elements never travel
//! through a callback: a taker has a *slot*, and an offerer that finds a
//! waiting taker puts the element in its slot under the lock, then wakes it;
//! the taker empties its slot when it resumes. A waiting offerer's element
//! sits in the offerer's slot until a taker moves it out, under the lock.
//!
//! Cancellation loses no element and duplicates none: each wait runs under
//! `poll` inside an uncancelable region, with an `on_cancel` cleanup that
//! runs under the lock. A canceled taker that is still queued leaves the
//! queue; one whose slot was already filled gives the element to the next
//! waiting taker, or back to the *front* of the buffer. A canceled offerer
//! that is still queued leaves with its element (it was never offered); one
//! whose element was already taken has offered it, once.
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

enum TakerSlot<A> {
    Waiting,
    Filled(A),
}

struct Taker<A> {
    slot: Arc<Mutex<TakerSlot<A>>>,
    callback: RawCallback,
}

struct Offerer<A> {
    /// The element; `None` once a taker moved it out.
    slot: Arc<Mutex<Option<A>>>,
    callback: RawCallback,
}

struct State<A> {
    buffer: VecDeque<A>,
    /// Waiting takers and offerers in arrival order; a canceled one is
    /// removed in O(log n).
    takers: WaiterList<Taker<A>>,
    offerers: WaiterList<Offerer<A>>,
}

struct Shared<A> {
    kind: Kind,
    capacity: usize,
    state: Mutex<State<A>>,
}

/// Work to do after releasing the lock: wake a fiber.
type Wake = Option<RawCallback>;

fn wake(callback: Wake) {
    if let Some(callback) = callback {
        let _ = callback.complete(Ok(Value::unit()));
    }
}

impl<A: Send + 'static> Shared<A> {
    /// Gives `element` to the first waiting taker, or returns it.
    fn hand_to_taker(state: &mut State<A>, element: A) -> Result<RawCallback, A> {
        match state.takers.pop() {
            Some(taker) => {
                *taker.slot.lock() = TakerSlot::Filled(element);
                Ok(taker.callback)
            }
            None => Err(element),
        }
    }

    /// Moves the first waiting offerer's element out (waking it), if any.
    fn take_from_offerer(state: &mut State<A>) -> Option<(A, RawCallback)> {
        let offerer = state.offerers.pop()?;
        let element = offerer.slot.lock().take()?;
        Some((element, offerer.callback))
    }

    /// Tries to offer without waiting. `Err(element)` when the offer would
    /// have to wait (full bounded queue, synchronous queue without taker).
    fn offer_now(&self, element: A) -> (Result<bool, A>, Wake) {
        let mut state = self.state.lock();
        let element = match Self::hand_to_taker(&mut state, element) {
            Ok(callback) => return (Ok(true), Some(callback)),
            Err(element) => element,
        };
        match self.kind {
            Kind::Unbounded => {
                state.buffer.push_back(element);
                (Ok(true), None)
            }
            Kind::Bounded if state.buffer.len() < self.capacity => {
                state.buffer.push_back(element);
                (Ok(true), None)
            }
            Kind::Dropping if state.buffer.len() >= self.capacity => (Ok(false), None),
            Kind::Dropping => {
                state.buffer.push_back(element);
                (Ok(true), None)
            }
            Kind::Circular => {
                if state.buffer.len() >= self.capacity {
                    state.buffer.pop_front();
                }
                state.buffer.push_back(element);
                (Ok(true), None)
            }
            Kind::Bounded | Kind::Synchronous => (Err(element), None),
        }
    }

    /// Tries to take without waiting.
    fn take_now(&self) -> (Option<A>, Wake) {
        let mut state = self.state.lock();
        if let Some(element) = state.buffer.pop_front() {
            // A waiting offerer's element moves into the freed place.
            let wake = match Self::take_from_offerer(&mut state) {
                Some((next, callback)) => {
                    state.buffer.push_back(next);
                    Some(callback)
                }
                None => None,
            };
            return (Some(element), wake);
        }
        match Self::take_from_offerer(&mut state) {
            Some((element, callback)) => (Some(element), Some(callback)),
            None => (None, None),
        }
    }

    /// A canceled taker's cleanup: leave the queue if still queued (`id` is
    /// `None` if it never queued), or give back an element already handed
    /// over: to the next waiting taker, or to the front of the buffer.
    fn cancel_taker(&self, id: Option<u64>, slot: &Mutex<TakerSlot<A>>) -> Wake {
        let mut state = self.state.lock();
        if let Some(removed) = id.and_then(|id| state.takers.remove(id)) {
            drop(state);
            drop(removed);
            return None;
        }
        let handed = core::mem::replace(&mut *slot.lock(), TakerSlot::Waiting);
        match handed {
            TakerSlot::Filled(element) => match Self::hand_to_taker(&mut state, element) {
                Ok(callback) => Some(callback),
                Err(element) => {
                    state.buffer.push_front(element);
                    None
                }
            },
            TakerSlot::Waiting => None,
        }
    }

    /// A canceled offerer's cleanup: leave the queue (the element was never
    /// offered) unless a taker already took it.
    fn cancel_offerer(&self, id: u64) {
        let removed = {
            let mut state = self.state.lock();
            state.offerers.remove(id)
        };
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
/// full bounded queue, or any synchronous offer). Elements never travel
/// through a callback: a taker has a *slot*, and an offerer that finds a
/// waiting taker puts the element in its slot under the lock, then wakes it;
/// the taker empties its slot when it resumes. A waiting offerer's element
/// sits in the offerer's slot until a taker moves it out, under the lock.
///
/// Cancellation loses no element and duplicates none: each wait runs under
/// `poll` inside an uncancelable region, with an `on_cancel` cleanup that
/// runs under the lock. A canceled taker that is still queued leaves the
/// queue; one whose slot was already filled gives the element to the next
/// waiting taker, or back to the *front* of the buffer. A canceled offerer
/// that is still queued leaves with its element (it was never offered); one
/// whose element was already taken has offered it, once.
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
            let (result, woken) = shared.offer_now(element);
            wake(woken);
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
            let (result, woken) = shared.offer_now(element);
            wake(woken);
            match result {
                Ok(_) => IO::unit(),
                Err(element) => Queue::offer_waiting(shared, element),
            }
        })
    }

    /// An offer that has to wait: masked, with the wait itself unmasked and
    /// a cleanup if it is canceled.
    fn offer_waiting<E: Send + 'static>(shared: Arc<Shared<A>>, element: A) -> IO<(), E> {
        IO::uncancelable_untraced(move |poll| {
            let slot = Arc::new(Mutex::new(Some(element)));
            let id_cell = Arc::new(Mutex::new(None::<u64>));
            let (s1, s2) = (shared.clone(), shared);
            let (slot1, id1, id2) = (slot, id_cell.clone(), id_cell);
            let wait = IO::from_callback_untraced(move |cb: Callback<(), E>| {
                let mut state = s1.state.lock();
                // The queue may have changed since `offer_now`: try again
                // under this lock before waiting.
                let element = slot1.lock().take();
                if let Some(element) = element {
                    match Shared::hand_to_taker(&mut state, element) {
                        Ok(taker) => {
                            drop(state);
                            let _ = taker.complete(Ok(Value::unit()));
                            cb.succeed(());
                            return None;
                        }
                        Err(element) => {
                            if s1.kind == Kind::Bounded && state.buffer.len() < s1.capacity {
                                state.buffer.push_back(element);
                                drop(state);
                                cb.succeed(());
                                return None;
                            }
                            *slot1.lock() = Some(element);
                        }
                    }
                }
                let id = state.offerers.push(Offerer {
                    slot: slot1,
                    callback: cb.into_raw(),
                });
                *id1.lock() = Some(id);
                None
            });
            let cleanup = IO::delay_untraced(move || {
                if let Some(id) = *id2.lock() {
                    s2.cancel_offerer(id);
                }
            });
            poll.apply_untraced(wait).on_cancel_untraced(cleanup)
        })
    }

    /// Takes without waiting: `None` if the queue is empty.
    #[track_caller]
    pub fn try_take<E: Send + 'static>(&self) -> IO<Option<A>, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryTake>, _>(here(), move || {
            let (element, woken) = shared.take_now();
            wake(woken);
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
            let (element, woken) = shared.take_now();
            wake(woken);
            match element {
                Some(element) => IO::pure(element),
                None => Queue::take_waiting(shared),
            }
        })
    }

    /// A take that has to wait: masked, with the wait itself unmasked and a
    /// cleanup if it is canceled.
    fn take_waiting<E: Send + 'static>(shared: Arc<Shared<A>>) -> IO<A, E> {
        IO::uncancelable_untraced(move |poll| {
            let slot = Arc::new(Mutex::new(TakerSlot::Waiting));
            let id_cell = Arc::new(Mutex::new(None::<u64>));
            let (s1, s2) = (shared.clone(), shared);
            let (slot1, slot2, slot3) = (slot.clone(), slot.clone(), slot);
            let (id1, id2) = (id_cell.clone(), id_cell);
            let wait = IO::from_callback_untraced(move |cb: Callback<(), E>| {
                // Check again under the lock before waiting.
                let mut state = s1.state.lock();
                let ready =
                    state.buffer.pop_front().map(|e| (e, None)).or_else(|| {
                        Shared::take_from_offerer(&mut state).map(|(e, w)| (e, Some(w)))
                    });
                if let Some((element, offerer)) = ready {
                    let refill = if offerer.is_none() {
                        Shared::take_from_offerer(&mut state).map(|(next, w)| {
                            state.buffer.push_back(next);
                            w
                        })
                    } else {
                        offerer
                    };
                    drop(state);
                    *slot1.lock() = TakerSlot::Filled(element);
                    wake(refill);
                    cb.succeed(());
                    return None;
                }
                let id = state.takers.push(Taker {
                    slot: slot1,
                    callback: cb.into_raw(),
                });
                *id1.lock() = Some(id);
                None
            });
            let cleanup = IO::delay_untraced(move || {
                let id = *id2.lock();
                wake(s2.cancel_taker(id, &slot2));
            });
            poll.apply_untraced(wait)
                .on_cancel_untraced(cleanup)
                .flat_map_untraced(move |()| {
                    IO::delay_untraced(move || {
                        match core::mem::replace(&mut *slot3.lock(), TakerSlot::Waiting) {
                            TakerSlot::Filled(element) => element,
                            TakerSlot::Waiting => {
                                unreachable!("io-core: a woken taker finds its element")
                            }
                        }
                    })
                })
        })
    }
}
