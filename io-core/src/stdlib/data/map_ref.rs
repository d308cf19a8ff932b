//! `MapRef`: a map whose entries are shared cells, one [`KeyRef`] per key
//! (Cats Effect std's `MapRef`, `apply(k): Ref[F, Option[V]]`).
//!
//! # Layout
//!
//! The entries live in ordered maps (`BTreeMap`, so the type is `no_std`
//! and needs no hasher), split into *shards*, each behind its own short
//! lock of the sync shim (held for a few instructions, never across a
//! suspension). [`MapRef::new`] has one shard; with `std`,
//! [`MapRef::sharded`] spreads keys over several by a hash of the key, so
//! fibers on different keys rarely contend for the same lock (Cats
//! Effect's `ofShardedImmutableMap`). Every operation on a key locks only
//! that key's shard, and is atomic for that key.
//!
//! An entry is `Option<V>`: `None` is "absent". Setting a key to `None`
//! removes it, so the map never holds empty entries. Operations across
//! keys ([`MapRef::keys`], [`MapRef::len`]) visit the shards one after the
//! other and are not a snapshot of the whole map when other fibers write
//! meanwhile.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use crate::engine::tracing::{Named, WithClosure, here};
use crate::io::IO;
use crate::sync::{Arc, Mutex};

crate::engine::tracing::trace_ops! {
    Get = "KeyRef::get",
    Set = "KeyRef::set",
    GetAndSet = "KeyRef::get_and_set",
    Update = "KeyRef::update",
    Modify = "KeyRef::modify",
    Keys = "MapRef::keys",
}

type Shard<K, V> = Mutex<BTreeMap<K, V>>;

struct Shared<K, V> {
    shards: Box<[Shard<K, V>]>,
    /// Picks a key's shard, given the number of shards.
    shard_of: fn(&K, usize) -> usize,
}

/// A map of shared cells, one per key: [`at`](MapRef::at) gives a key's
/// [`KeyRef`], whose operations are atomic for that key. Entries are
/// `Option<V>` (`None`: absent; setting `None` removes the key). The
/// entries live in `BTreeMap` shards, each behind a short lock; with `std`,
/// [`MapRef::sharded`] spreads the keys over several shards by hash, so
/// fibers on different keys rarely contend. Operations across keys
/// ([`keys`](MapRef::keys), [`len`](MapRef::len)) visit the shards one
/// after another: not a snapshot while other fibers write.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{MapRef, wstp::Runtime};
///
/// let hits: MapRef<&'static str, u64> = MapRef::new();
/// let (a, b) = (hits.at("/a"), hits.at("/b"));
/// let io: IO<(Option<u64>, Option<u64>), ()> = a
///     .update(|n| *n = Some(n.unwrap_or(0) + 1))
///     .product_r(a.update(|n| *n = Some(n.unwrap_or(0) + 1)))
///     .product_r(a.get())
///     .flat_map(move |x| b.get().map(move |y| (x, y)));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some((Some(2), None)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MapRef<K, V> {
    shared: Arc<Shared<K, V>>,
}

impl<K, V> Clone for MapRef<K, V> {
    fn clone(&self) -> Self {
        MapRef {
            shared: self.shared.clone(),
        }
    }
}

impl<K, V> fmt::Debug for MapRef<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapRef")
            .field("shards", &self.shared.shards.len())
            .field("len", &self.len())
            .finish()
    }
}

impl<K: Ord + Clone + Send + 'static, V: Send + 'static> Default for MapRef<K, V> {
    fn default() -> Self {
        MapRef::new()
    }
}

impl<K, V> MapRef<K, V> {
    /// The number of entries now (for diagnostics and tests; not a
    /// snapshot while other fibers write).
    pub fn len(&self) -> usize {
        self.shared.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Whether the map has no entry now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.shared.shards.len()
    }
}

impl<K: Ord + Clone + Send + 'static, V: Send + 'static> MapRef<K, V> {
    /// An empty map with one shard.
    pub fn new() -> Self {
        MapRef::with_shards(1, |_, _| 0)
    }

    fn with_shards(count: usize, shard_of: fn(&K, usize) -> usize) -> Self {
        let shards = (0..count.max(1))
            .map(|_| Mutex::new(BTreeMap::new()))
            .collect();
        MapRef {
            shared: Arc::new(Shared { shards, shard_of }),
        }
    }

    /// The cell of `key` (absent or not).
    pub fn at(&self, key: K) -> KeyRef<K, V> {
        KeyRef {
            map: self.clone(),
            key,
        }
    }

    /// The keys present now, in order within each shard (all in order
    /// with one shard).
    #[track_caller]
    pub fn keys<E: Send + 'static>(&self) -> IO<Vec<K>, E> {
        let map = self.clone();
        IO::delay_at::<Named<Keys>, _>(here(), move || {
            let mut keys = Vec::new();
            for shard in map.shared.shards.iter() {
                keys.extend(shard.lock().keys().cloned());
            }
            keys
        })
    }

    /// A clone of `key`'s entry, under its shard's lock.
    fn read_entry(&self, key: &K) -> Option<V>
    where
        V: Clone,
    {
        self.shard(key)
            .and_then(|shard| shard.lock().get(key).cloned())
    }

    /// `key`'s shard. `shard_of` is ours and reduces modulo the count,
    /// but a stray index must not panic: it falls back to the first shard
    /// (`with_shards` makes at least one, so `None` does not happen).
    fn shard(&self, key: &K) -> Option<&Shard<K, V>> {
        let shards = &self.shared.shards;
        let index = (self.shared.shard_of)(key, shards.len());
        shards.get(index).or_else(|| shards.first())
    }

    /// Runs `f` on `key`'s entry under its shard's lock: a present value
    /// as `Some`, an absent one as `None`; `None` afterwards removes it.
    fn with_entry<B>(&self, key: &K, f: impl FnOnce(&mut Option<V>) -> B) -> B {
        let Some(shard) = self.shard(key) else {
            let mut none = None;
            return f(&mut none);
        };
        let mut map = shard.lock();
        let mut entry = map.remove(key);
        let b = f(&mut entry);
        if let Some(value) = entry {
            map.insert(key.clone(), value);
        }
        b
    }
}

#[cfg(feature = "std")]
impl<K: Ord + Clone + core::hash::Hash + Send + 'static, V: Send + 'static> MapRef<K, V> {
    /// An empty map with `shards` shards (at least 1), keys spread by a
    /// hash of the key (std's `DefaultHasher` with fixed keys: the same
    /// key goes to the same shard in every run).
    pub fn sharded(shards: core::num::NonZeroUsize) -> Self {
        fn by_hash<K: core::hash::Hash>(key: &K, count: usize) -> usize {
            use core::hash::Hasher;
            let mut hasher = std::hash::DefaultHasher::new();
            key.hash(&mut hasher);
            // Truncation on 32-bit targets is harmless: any bits will do.
            (hasher.finish() as usize) % count.max(1)
        }
        MapRef::with_shards(shards.get(), by_hash::<K>)
    }
}

/// One key's cell of a [`MapRef`]: a `Ref<Option<V>>` in all but name.
pub struct KeyRef<K, V> {
    map: MapRef<K, V>,
    key: K,
}

impl<K: Clone, V> Clone for KeyRef<K, V> {
    fn clone(&self) -> Self {
        KeyRef {
            map: self.map.clone(),
            key: self.key.clone(),
        }
    }
}

impl<K: fmt::Debug, V> fmt::Debug for KeyRef<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRef").field("key", &self.key).finish()
    }
}

impl<K: Ord + Clone + Send + 'static, V: Send + 'static> KeyRef<K, V> {
    /// The key.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// Sets the entry: `Some(v)` inserts or replaces, `None` removes.
    #[track_caller]
    pub fn set<E: Send + 'static>(&self, value: Option<V>) -> IO<(), E> {
        let this = self.clone();
        IO::delay_at::<Named<Set>, _>(here(), move || {
            this.map.with_entry(&this.key, move |entry| *entry = value)
        })
    }

    /// Sets the entry and produces the one from before.
    #[track_caller]
    pub fn get_and_set<E: Send + 'static>(&self, value: Option<V>) -> IO<Option<V>, E> {
        let this = self.clone();
        IO::delay_at::<Named<GetAndSet>, _>(here(), move || {
            this.map
                .with_entry(&this.key, move |entry| core::mem::replace(entry, value))
        })
    }

    /// Changes the entry with `f`, atomically for this key (`None` in:
    /// absent; `None` out: removed).
    #[track_caller]
    pub fn update<E, F>(&self, f: F) -> IO<(), E>
    where
        E: Send + 'static,
        F: FnOnce(&mut Option<V>) + Send + 'static,
    {
        let this = self.clone();
        IO::delay_at::<WithClosure<Update, F>, _>(here(), move || this.map.with_entry(&this.key, f))
    }

    /// Changes the entry with `f` and produces what `f` returns,
    /// atomically for this key. `f` runs under the shard's lock: quick,
    /// no blocking.
    #[track_caller]
    pub fn modify<B, E, F>(&self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut Option<V>) -> B + Send + 'static,
    {
        let this = self.clone();
        IO::delay_at::<WithClosure<Modify, F>, _>(here(), move || this.map.with_entry(&this.key, f))
    }
}

impl<K: Ord + Clone + Send + 'static, V: Clone + Send + 'static> KeyRef<K, V> {
    /// The entry now (a clone), `None` if absent.
    #[track_caller]
    pub fn get<E: Send + 'static>(&self) -> IO<Option<V>, E> {
        let this = self.clone();
        IO::delay_at::<Named<Get>, _>(here(), move || this.map.read_entry(&this.key))
    }
}
