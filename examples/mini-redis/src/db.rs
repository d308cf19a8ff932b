//! The server's shared state: the key space with its expirations, and the
//! publish/subscribe registry.
//!
//! # The key space
//!
//! Keys and values are byte strings ([`Bytes`]: a `GET` answers with the
//! stored value without copying it out of the map). The map sits behind
//! one short `std::sync::Mutex`, held only for a lookup or an insertion
//! and never across a suspension, as tokio's mini-redis does: a request is
//! a few hundred instructions, and a fiber-aware lock (Spindle's `Mutex`,
//! which suspends the fiber that waits) would cost more than the work it
//! guards.
//!
//! A key set with an expiry has a deadline on the executor's monotonic
//! clock (`IO::monotonic`: virtual time under `TestControl`). The
//! deadlines are kept in order beside the map; one background fiber,
//! [`Db::purge_expired`], sleeps until the earliest deadline, removes every
//! key whose deadline has passed and sleeps again. A `SET` whose deadline
//! is earlier than every other wakes it (a one-place [`Queue`]); a `SET`
//! that replaces a key drops the key's old deadline. Between a deadline
//! and the purge that follows, a `GET` still sees the key (the purge runs
//! within the executor's timer resolution).
//!
//! # Publish and subscribe
//!
//! A subscribed connection owns a bounded [`Queue`] of messages (each a
//! channel and a payload), registered under every channel it subscribes
//! to. `PUBLISH` offers the message to each subscriber's queue without
//! waiting ([`Queue::try_offer`]) and answers how many took it.
//!
//! **A slow subscriber is dropped.** A subscriber whose queue is full
//! (it has not read [`Config::subscriber_queue`](crate::server::Config)
//! messages) does not make the publisher wait and does not make the
//! server buffer more: its queue is closed, it is removed from every
//! channel, and its connection ends once it has written what the queue
//! held. This is Redis's own rule for pub/sub clients over their output
//! buffer limit (it disconnects them), and it bounds the server's memory
//! per subscriber. (A `Topic` is not used here: its `publish` waits for
//! room in every subscriber, fs2's semantics, which would let one client
//! that never reads stall every publisher.)
//!
//! Design credit: tokio's mini-redis (its `Db`, the purge task woken
//! through a `Notify`), Redis (the slow-subscriber policy); no code is
//! copied.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use spindle_effect::{IO, Queue};

/// A message on its way to a subscriber: the channel and the payload.
pub type Message = (Bytes, Bytes);

/// The shared state; clones share it.
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("keys", &self.len())
            .field("channels", &lock(&self.shared.channels).len())
            .finish()
    }
}

struct Shared {
    keys: Mutex<Keys>,
    channels: Mutex<HashMap<Bytes, Vec<Subscriber>>>,
    /// Wakes the purge fiber: a `SET` with the earliest deadline, or the
    /// shutdown.
    wake: Queue<()>,
    shut_down: AtomicBool,
    next_subscriber: AtomicU64,
    dropped_subscribers: AtomicU64,
}

#[derive(Default)]
struct Keys {
    entries: HashMap<Bytes, Entry>,
    /// Deadline and entry id to key, earliest first.
    deadlines: BTreeMap<(Duration, u64), Bytes>,
    next_id: u64,
}

struct Entry {
    id: u64,
    data: Bytes,
    deadline: Option<Duration>,
}

#[derive(Clone)]
struct Subscriber {
    id: u64,
    queue: Queue<Message>,
}

/// A mutex's guard; a poisoned lock (a panic while it was held, which the
/// code under these locks cannot do) is still usable: every section leaves
/// the maps consistent before anything that could panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for Db {
    fn default() -> Db {
        Db::new()
    }
}

impl Db {
    /// An empty key space with no channels.
    pub fn new() -> Db {
        Db {
            shared: Arc::new(Shared {
                keys: Mutex::new(Keys::default()),
                channels: Mutex::new(HashMap::new()),
                wake: Queue::bounded(1).expect("a capacity of 1"),
                shut_down: AtomicBool::new(false),
                next_subscriber: AtomicU64::new(0),
                dropped_subscribers: AtomicU64::new(0),
            }),
        }
    }

    /// The value of `key`, if it is set.
    pub fn get(&self, key: &[u8]) -> Option<Bytes> {
        lock(&self.shared.keys)
            .entries
            .get(key)
            .map(|entry| entry.data.clone())
    }

    /// How many keys are set.
    pub fn len(&self) -> usize {
        lock(&self.shared.keys).entries.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets `key` to `value`, until `deadline` (on the executor's
    /// monotonic clock) if there is one; any earlier deadline of the key
    /// is dropped. `true` if the purge fiber must be woken (this deadline
    /// is now the earliest): [`Db::set`] does that.
    fn insert(&self, key: Bytes, value: Bytes, deadline: Option<Duration>) -> bool {
        let mut keys = lock(&self.shared.keys);
        let id = keys.next_id;
        keys.next_id += 1;
        let earliest = match deadline {
            Some(when) => {
                let earlier = keys
                    .deadlines
                    .keys()
                    .next()
                    .is_none_or(|&(first, _)| when < first);
                keys.deadlines.insert((when, id), key.clone());
                earlier
            }
            None => false,
        };
        let old = keys.entries.insert(
            key,
            Entry {
                id,
                data: value,
                deadline,
            },
        );
        if let Some(Entry {
            id: old_id,
            deadline: Some(old_deadline),
            ..
        }) = old
        {
            keys.deadlines.remove(&(old_deadline, old_id));
        }
        earliest
    }

    /// Sets `key` to `value`, without an expiry or expiring `expire` from
    /// now on the executor's clock.
    pub fn set<E: Send + 'static>(
        &self,
        key: Bytes,
        value: Bytes,
        expire: Option<Duration>,
    ) -> IO<(), E> {
        match expire {
            None => {
                self.insert(key, value, None);
                IO::unit()
            }
            Some(expire) => {
                let db = self.clone();
                IO::monotonic().flat_map(move |now: Duration| {
                    let deadline = now.saturating_add(expire);
                    if db.insert(key, value, Some(deadline)) {
                        db.shared.wake.try_offer(()).void()
                    } else {
                        IO::unit()
                    }
                })
            }
        }
    }

    /// Sets `key` to `value` without an expiry (no `IO`: a `SET` on the
    /// request path runs inline).
    pub fn set_now(&self, key: Bytes, value: Bytes) {
        self.insert(key, value, None);
    }

    /// Removes every key whose deadline is at or before `now`; the next
    /// deadline, if any is left.
    fn purge(&self, now: Duration) -> Option<Duration> {
        let mut keys = lock(&self.shared.keys);
        let keys = &mut *keys;
        while let Some((&(when, id), _)) = keys.deadlines.iter().next() {
            if when > now {
                return Some(when);
            }
            if let Some(key) = keys.deadlines.remove(&(when, id)) {
                // The key may have been set again since, with another id.
                if keys.entries.get(&key).is_some_and(|entry| entry.id == id) {
                    keys.entries.remove(&key);
                }
            }
        }
        None
    }

    /// The background fiber's program: until [`Db::shut_down`], removes
    /// the keys whose deadline has passed, then sleeps until the next
    /// deadline or until a `SET` brings an earlier one.
    pub fn purge_expired(&self) -> IO<(), Infallible> {
        let db = self.clone();
        IO::block(async move {
            while !db.shared.shut_down.load(Ordering::Acquire) {
                let now = IO::<Duration, Infallible>::monotonic().value().await;
                let wake = db.shared.wake.take::<Infallible>();
                match db.purge(now) {
                    Some(when) => {
                        wake.timeout_option(when.saturating_sub(now)).value().await;
                    }
                    None => wake.value().await,
                }
            }
            Ok(())
        })
    }

    /// Stops [`Db::purge_expired`] (it ends at its next wake-up, which
    /// this brings).
    pub fn shut_down<E: Send + 'static>(&self) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::defer(move || {
            shared.shut_down.store(true, Ordering::Release);
            shared.wake.try_offer(()).void()
        })
    }

    /// A new subscriber id (one per subscribed connection).
    pub fn new_subscriber_id(&self) -> u64 {
        self.shared.next_subscriber.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers `queue` (subscriber `id`'s) under `channel`; `false` if it
    /// was there already.
    pub fn subscribe(&self, id: u64, queue: &Queue<Message>, channel: Bytes) -> bool {
        let mut channels = lock(&self.shared.channels);
        let subscribers = channels.entry(channel).or_default();
        if subscribers.iter().any(|s| s.id == id) {
            return false;
        }
        subscribers.push(Subscriber {
            id,
            queue: queue.clone(),
        });
        true
    }

    /// Removes subscriber `id` from `channel`; `false` if it was not there.
    pub fn unsubscribe(&self, id: u64, channel: &[u8]) -> bool {
        let mut channels = lock(&self.shared.channels);
        let Some(subscribers) = channels.get_mut(channel) else {
            return false;
        };
        let before = subscribers.len();
        subscribers.retain(|s| s.id != id);
        let removed = subscribers.len() < before;
        if subscribers.is_empty() {
            channels.remove(channel);
        }
        removed
    }

    /// How many subscribers `channel` has.
    pub fn subscribers(&self, channel: &[u8]) -> usize {
        lock(&self.shared.channels).get(channel).map_or(0, Vec::len)
    }

    /// How many subscribers were dropped for not reading (module doc).
    pub fn dropped_subscribers(&self) -> u64 {
        self.shared.dropped_subscribers.load(Ordering::Relaxed)
    }

    /// Offers `message` to every subscriber of `channel` without waiting;
    /// how many took it. A subscriber whose queue is full is dropped
    /// (module doc).
    pub fn publish<E: Send + 'static>(&self, channel: Bytes, message: Bytes) -> IO<u64, E> {
        let subscribers: Vec<Subscriber> = lock(&self.shared.channels)
            .get(&channel)
            .cloned()
            .unwrap_or_default();
        if subscribers.is_empty() {
            return IO::pure(0);
        }
        let db = self.clone();
        IO::traverse(subscribers, move |subscriber| {
            let db = db.clone();
            let queue = subscriber.queue.clone();
            subscriber
                .queue
                .try_offer((channel.clone(), message.clone()))
                .flat_map(move |taken| {
                    if taken {
                        IO::pure(1u64)
                    } else {
                        // Counted once: by the publisher whose close closed it.
                        queue.close().map(move |closed| {
                            if closed {
                                db.drop_subscriber(subscriber.id);
                            }
                            0u64
                        })
                    }
                })
        })
        .map(|taken| taken.into_iter().sum())
    }

    /// Removes subscriber `id` from every channel (its connection ended,
    /// or it was dropped).
    pub fn remove_subscriber(&self, id: u64) {
        lock(&self.shared.channels).retain(|_, subscribers| {
            subscribers.retain(|s| s.id != id);
            !subscribers.is_empty()
        });
    }

    fn drop_subscriber(&self, id: u64) {
        self.shared
            .dropped_subscribers
            .fetch_add(1, Ordering::Relaxed);
        self.remove_subscriber(id);
    }
}
