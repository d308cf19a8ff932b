//! Data types for streams with several ends: [`Channel`] (many writers,
//! readers that share its elements), [`Topic`] (every subscriber gets
//! every element) and [`SignallingRef`] (a value whose changes are a
//! stream, tokio's `watch`).
//!
//! # Protocols
//!
//! * A `Channel` is a closable io-core `Queue`: sending waits while a
//!   bounded channel is full, a closed channel refuses sends (giving the
//!   element back), and readers drain what is left after a close before
//!   their streams end.
//! * A `Topic` keeps its subscribers' queues under a short lock. A
//!   subscription is a resource of the subscriber's stream: its queue is
//!   added when the stream is first pulled and removed when the stream
//!   ends (however it ends), so a subscriber that stops never holds the
//!   publishers back. `publish` offers a clone of the element to every
//!   subscriber present when it starts, one after the other: a full
//!   subscriber queue makes the publisher wait (back-pressure from the
//!   slowest subscriber, as in fs2; nothing is dropped). `close` closes
//!   every queue: subscribers end after what they hold.
//! * A `SignallingRef` keeps its value, a version and a *signal* (a
//!   `Deferred`) under a short lock. A change bumps the version, swaps in a
//!   fresh signal and completes the old one outside the lock; a reader of
//!   `discrete` that has seen the current version waits on the signal it
//!   read under the same lock, so no change is missed; a reader that is
//!   slow sees the latest value only (intermediate ones are skipped, as
//!   fs2's `discrete` and tokio's `watch` do).
//!
//! The semantics are fs2's `Channel`, `Topic` and `SignallingRef`; the
//! code is Spindle's own.

use alloc::vec::Vec;

use spindle_core::error::{InvalidCapacity, QueueClosed};
use spindle_core::{Deferred, IO, Queue};

use crate::chunk::Chunk;
use crate::stream::{DEFAULT_CHUNK_SIZE, Step, Stream};
use crate::sync::{Arc, Mutex};

/// The stream of what `queue` receives until it is closed and empty: one
/// element waited for, then what is there already (up to a chunk).
fn receiving<A: Send + 'static, E: Send + 'static>(queue: Queue<A>) -> Stream<A, E> {
    Stream::from_pull(move |_| {
        queue.receive().flat_map(move |first| match first {
            None => IO::pure(Step::Done),
            Some(first) => {
                let mut chunk = Chunk::with_capacity(1);
                chunk.push(first);
                more(queue, chunk)
            }
        })
    })
}

/// Adds what `queue` holds now to `chunk` (up to a chunk), then emits it.
fn more<A: Send + 'static, E: Send + 'static>(
    queue: Queue<A>,
    mut chunk: Chunk<A>,
) -> IO<Step<A, E>, E> {
    if chunk.len() >= DEFAULT_CHUNK_SIZE || queue.is_empty() {
        return IO::pure(Step::Emit(chunk, receiving(queue)));
    }
    queue.try_take().flat_map(move |next| match next {
        Some(item) => {
            chunk.push(item);
            more(queue, chunk)
        }
        None => IO::pure(Step::Emit(chunk, receiving(queue))),
    })
}

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    /// The elements `queue` receives, until it is closed (`Queue::close`)
    /// and empty; forever if it never is. Several streams of one queue
    /// share its elements.
    pub fn from_queue(queue: Queue<A>) -> Self {
        receiving(queue)
    }
}

/// A channel: many writers, and readers whose streams share its elements
/// (each element goes to one reader); closable.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::single::SingleThreaded;
/// use spindle_effect::stream::{Channel, Stream};
///
/// let channel = Channel::<u32>::bounded(2)?;
/// let writer = channel.clone();
/// let program: IO<Vec<u32>, ()> = Stream::range(0..5)
///     .through(move |s| writer.sends(s))
///     .compile()
///     .drain()
///     .both(channel.stream().compile().to_vec())
///     .map(|((), got)| got);
/// assert_eq!(SingleThreaded::new()?.block_on(program)?.succeeded(), Some(vec![0, 1, 2, 3, 4]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Channel<A> {
    queue: Queue<A>,
}

impl<A> Clone for Channel<A> {
    fn clone(&self) -> Self {
        Channel {
            queue: self.queue.clone(),
        }
    }
}

impl<A: Send + 'static> Channel<A> {
    /// A channel of at most `capacity` waiting elements (above 0).
    pub fn bounded(capacity: usize) -> Result<Self, InvalidCapacity> {
        Ok(Channel {
            queue: Queue::bounded(capacity)?,
        })
    }

    /// A channel without bound.
    pub fn unbounded() -> Self {
        Channel {
            queue: Queue::unbounded(),
        }
    }

    /// A channel without buffer: each send waits for a reader.
    pub fn synchronous() -> Self {
        Channel {
            queue: Queue::synchronous(),
        }
    }

    /// Sends `item`, waiting for room; a closed channel gives it back.
    pub fn send<E: Send + 'static>(&self, item: A) -> IO<Result<(), QueueClosed<A>>, E> {
        self.queue.send(item)
    }

    /// Closes the channel: sends are refused from now on, readers end
    /// after what is left. `true` if this call closed it.
    pub fn close<E: Send + 'static>(&self) -> IO<bool, E> {
        self.queue.close()
    }

    /// Whether the channel was closed.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// The elements, until the channel is closed and empty.
    pub fn stream<E: Send + 'static>(&self) -> Stream<A, E> {
        receiving(self.queue.clone())
    }

    /// A pipe: sends every element of `input`, then closes the channel
    /// (also if `input` fails or is stopped); stops early if the channel
    /// is closed by someone else.
    pub fn sends<E: Send + 'static>(&self, input: Stream<A, E>) -> Stream<(), E> {
        let (queue, closing) = (self.queue.clone(), self.queue.clone());
        input
            .eval_map(move |item| queue.send(item).map(|sent| sent.is_ok()))
            .take_while(|sent| *sent)
            .map(|_| ())
            .on_finalize(closing.close().map(|_| ()))
    }
}

struct TopicState<A> {
    subscribers: Vec<(u64, Queue<A>)>,
    next_id: u64,
    closed: bool,
}

/// Publish to many subscribers: each subscriber's stream gets every
/// element published while it is subscribed, in order. A publisher waits
/// while the slowest subscriber's buffer is full (nothing is dropped).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::single::SingleThreaded;
/// use spindle_effect::stream::Topic;
///
/// let topic = Topic::<u32>::new();
/// let (a, b, publisher) = (topic.clone(), topic.clone(), topic.clone());
/// // Two subscribers, then (once both listen) three messages and the end.
/// let program: IO<(Vec<u32>, Vec<u32>), ()> = a
///     .subscribe(4)?
///     .compile()
///     .to_vec()
///     .both(b.subscribe(4)?.compile().to_vec())
///     .both(
///         IO::sleep(std::time::Duration::from_millis(5))
///             .product_r(IO::traverse(vec![1, 2, 3], move |n| publisher.publish(n)))
///             .product_r(topic.close()),
///     )
///     .map(|(got, _)| got);
/// assert_eq!(
///     SingleThreaded::new()?.block_on(program)?.succeeded(),
///     Some((vec![1, 2, 3], vec![1, 2, 3]))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Topic<A> {
    state: Arc<Mutex<TopicState<A>>>,
}

impl<A> Clone for Topic<A> {
    fn clone(&self) -> Self {
        Topic {
            state: self.state.clone(),
        }
    }
}

impl<A: Clone + Send + 'static> Default for Topic<A> {
    fn default() -> Self {
        Topic::new()
    }
}

impl<A: Clone + Send + 'static> Topic<A> {
    /// A topic without subscribers.
    pub fn new() -> Self {
        Topic {
            state: Arc::new(Mutex::new(TopicState {
                subscribers: Vec::new(),
                next_id: 0,
                closed: false,
            })),
        }
    }

    /// Offers `item` to every current subscriber, waiting for room in each;
    /// `false` if the topic is closed.
    pub fn publish<E: Send + 'static>(&self, item: A) -> IO<bool, E> {
        let state = self.state.clone();
        IO::defer(move || {
            let queues: Vec<Queue<A>> = {
                let state = state.lock();
                if state.closed {
                    return IO::pure(false);
                }
                state.subscribers.iter().map(|(_, q)| q.clone()).collect()
            };
            IO::traverse(queues, move |queue| queue.send(item.clone()).map(|_| ())).map(|_| true)
        })
    }

    /// A pipe: publishes every element of `input`.
    pub fn publishes<E: Send + 'static>(&self, input: Stream<A, E>) -> Stream<(), E> {
        let topic = self.clone();
        input.eval_map(move |item| topic.publish(item).map(|_| ()))
    }

    /// The stream of what is published from the moment this stream is
    /// first pulled until it ends or the topic closes; at most
    /// `max_queued` elements wait for it (above 0).
    pub fn subscribe<E: Send + 'static>(
        &self,
        max_queued: usize,
    ) -> Result<Stream<A, E>, InvalidCapacity> {
        // Checked now: the capacity is the caller's configuration.
        Queue::<A>::bounded(max_queued)?;
        let (joining, leaving) = (self.state.clone(), self.state.clone());
        let join = IO::delay(move || {
            let queue = Queue::bounded(max_queued).expect("checked above");
            let mut state = joining.lock();
            let id = state.next_id;
            state.next_id += 1;
            if state.closed {
                (id, None)
            } else {
                state.subscribers.push((id, queue.clone()));
                (id, Some(queue))
            }
        });
        Ok(Stream::bracket(
            join.map(|(id, q)| (id, q.map(Shared))),
            move |(id, queue)| {
                IO::delay(move || leaving.lock().subscribers.retain(|(s, _)| *s != id)).product_r(
                    // A publisher waiting for room in this queue stops waiting.
                    match queue {
                        Some(Shared(queue)) => queue.close().map(|_| ()),
                        None => IO::unit(),
                    },
                )
            },
        )
        .flat_map(|(_, queue)| match queue {
            Some(Shared(queue)) => receiving(queue),
            None => Stream::empty(),
        }))
    }

    /// How many subscribers there are now.
    pub fn subscribers(&self) -> usize {
        self.state.lock().subscribers.len()
    }

    /// Closes the topic: publishing is refused, subscribers end after what
    /// they hold; `true` if this call closed it.
    pub fn close<E: Send + 'static>(&self) -> IO<bool, E> {
        let state = self.state.clone();
        IO::defer(move || {
            let queues: Vec<Queue<A>> = {
                let mut state = state.lock();
                if state.closed {
                    return IO::pure(false);
                }
                state.closed = true;
                state.subscribers.iter().map(|(_, q)| q.clone()).collect()
            };
            IO::traverse(queues, |queue| queue.close()).map(|_| true)
        })
    }
}

/// A queue handle that `bracket` can clone (the subscriber's own queue).
struct Shared<A>(Queue<A>);

impl<A> Clone for Shared<A> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

struct SignalState<A> {
    value: A,
    version: u64,
    signal: Deferred<()>,
}

/// A value whose changes are a stream (fs2's `SignallingRef`, tokio's
/// `watch`): [`discrete`](SignallingRef::discrete) emits the current
/// value, then the latest value after each change (a slow reader skips
/// intermediate values).
pub struct SignallingRef<A> {
    state: Arc<Mutex<SignalState<A>>>,
}

impl<A> Clone for SignallingRef<A> {
    fn clone(&self) -> Self {
        SignallingRef {
            state: self.state.clone(),
        }
    }
}

impl<A: Clone + Send + 'static> SignallingRef<A> {
    /// A reference holding `value`.
    pub fn new(value: A) -> Self {
        SignallingRef {
            state: Arc::new(Mutex::new(SignalState {
                value,
                version: 0,
                signal: Deferred::new(),
            })),
        }
    }

    /// The current value.
    pub fn get<E: Send + 'static>(&self) -> IO<A, E> {
        let state = self.state.clone();
        IO::delay(move || state.lock().value.clone())
    }

    /// Replaces the value and wakes the readers.
    pub fn set<E: Send + 'static>(&self, value: A) -> IO<(), E> {
        self.update(move |v| *v = value)
    }

    /// Changes the value with `f` and wakes the readers.
    pub fn update<E: Send + 'static, F>(&self, f: F) -> IO<(), E>
    where
        F: FnOnce(&mut A) + Send + 'static,
    {
        let state = self.state.clone();
        IO::defer(move || {
            let fired = {
                let mut state = state.lock();
                f(&mut state.value);
                state.version += 1;
                core::mem::replace(&mut state.signal, Deferred::new())
            };
            fired.complete(()).map(|_| ())
        })
    }

    /// The current value, then the latest value after each change.
    pub fn discrete<E: Send + 'static>(&self) -> Stream<A, E> {
        discrete_from(self.state.clone(), None)
    }
}

fn discrete_from<A: Clone + Send + 'static, E: Send + 'static>(
    state: Arc<Mutex<SignalState<A>>>,
    seen: Option<u64>,
) -> Stream<A, E> {
    Stream::from_pull(move |scope| {
        let (current, signal) = {
            let s = state.lock();
            if seen == Some(s.version) {
                (None, Some(s.signal.clone()))
            } else {
                (Some((s.value.clone(), s.version)), None)
            }
        };
        match (current, signal) {
            (Some((value, version)), _) => IO::pure(Step::Emit(
                Chunk::singleton(value),
                discrete_from(state, Some(version)),
            )),
            (None, Some(signal)) => {
                // Only a wait needs the scope after this pull.
                let scope = scope.clone();
                signal
                    .get()
                    .flat_map(move |()| discrete_from(state, seen).step(&scope))
            }
            (None, None) => IO::pure(Step::Done),
        }
    })
}
