//! A FIFO list of waiters, each with an id for removal when its wait is
//! canceled.
//!
//! Ids are handed out in increasing order, so the list (a `VecDeque` of
//! entries, each an id and a waiter) is always sorted by id: removal finds
//! its entry by binary search and leaves a tombstone, without moving the
//! other entries, so a cancel storm of `n` waiters costs `O(n log n)`, not
//! the `O(n²)` of removing from the middle. Tombstones at the front are
//! popped as the list is consumed; the others are swept out when the buffer
//! is full and would grow (each sweep is paid for by the removals that made
//! the tombstones, or by the growth it replaces).
//!
//! # Entries
//!
//! Ids are 32 bits ([`WaiterId`]) and even: an entry's tag is its id, with
//! the low bit set once its waiter was taken (a tombstone). The waiter
//! itself is a `MaybeUninit`, initialized exactly while that bit is clear
//! (`Entry`, whose `Drop` drops a waiter still there). So an entry is the
//! id and the waiter, with no tag of an `Option` beside them: 20 bytes
//! for a `Deferred`'s or a join's waiter on 32-bit targets instead of 24
//! (a waiter is a callback and a reading function, and a task's `Waker`
//! already takes the only niche these have), and a wait's cleanup, which
//! keeps its id, 8 bytes instead of 16 with 64-bit ids.
//!
//! Ids wrap after 2^31 waits on one structure, so "sorted" means sorted by
//! distance from the front entry's id (`id - front`, wrapping): entries are
//! pushed in id order, so that distance grows from 0 at the front to the
//! back, across a wrap as anywhere else, as long as the list spans fewer
//! than 2^31 ids (it holds fewer than 2^31 entries). An id older than the
//! front entry's is at a distance larger than the back's, and is not
//! found. The one id that could be taken for another is a removal that
//! comes 2^31 waits late: a canceled wait's cleanup that runs after 2
//! billion other waits on the same structure since its own.
//!
//! The first waiter of an empty list gets a buffer of exactly one entry: a
//! semaphore or queue waited on by one fiber costs one small allocation
//! (kept for the next waiters), not a node of a tree or a four-entry
//! buffer.
//!
//! # The first waiter inline
//!
//! A join cell's list (`wait/cell.rs`) lives only while the cell waits, and
//! nearly always holds one waiter (a `Deferred` or a fiber awaited by one
//! fiber): a buffer made for it would be made and freed for every wait. A
//! [`SmallWaiterList`] keeps that waiter inline, with the id counter and a
//! pointer to a [`WaiterList`] that the second waiter makes, so the one
//! waiter allocates nothing beyond the cell's list box: 7 words, a large
//! block of the pool on 64-bit hosts, 28 bytes on 32-bit targets, where a
//! plain list's box and its one-entry buffer would be two allocations of
//! 16 and 20 bytes. Its invariant: the inline entry, while it holds
//! a waiter, is older than every waiter of the list behind it, because a
//! waiter goes inline only when both are empty; so the order is the inline
//! waiter, then the list's. Ids come from the one counter for both, in
//! increasing order, so the list behind stays sorted and the inline
//! waiter's id is never one of the list's: the list's search does not find
//! it (it is older than the list's front, or the list is empty), and the
//! inline entry is checked first.
//!
//! # Holding what one waits on: weakly while waiting, strongly once woken
//!
//! A waiter in a structure's list holds its fiber (through its callback),
//! and the fiber holds its wait's cancellation cleanup. If that cleanup
//! held the structure strongly, a fiber waiting on a structure nobody else
//! can reach would keep itself alive through the structure forever (a cycle
//! of reference counts; `wait/cell.rs`, "Waits nobody can end"). So:
//!
//! * [`cleanup_weakly`] makes a wait's cleanup that holds the structure
//!   *weakly*, and lets go of the strong reference it is given: a
//!   structure gone by the time the wait is canceled took the waiter with
//!   it, and there is nothing to clean up (`Queue`'s and `Semaphore`'s
//!   waits; `Deferred` and `join` do the same through `fiber/join.rs`'s
//!   `CellOwner`).
//! * A wait that is *woken* to act on the structure again (retry a take,
//!   an offer, an acquire) is handed a strong reference in the value it
//!   resumes with (`Queue`'s and `Semaphore`'s wake-ups), by a waker that
//!   holds the structure strongly (the offer, take or release that woke
//!   it). From then on the woken fiber owns that reference: it retries
//!   with it, holds the structure while it holds what it took (a permit,
//!   which it releases to the fibers listed behind it), and, canceled
//!   before it retries, passes the wake-up on through it.
//!
//! This never makes a cycle: the list holds a waiter only while it waits
//! (and then the fiber holds nothing strongly); the waker takes it off the
//! list before it hands over the reference. A fiber that its executor drops
//! (at shutdown) between its wake-up and its retry drops the wake-up with
//! it, which passes it on.

use alloc::collections::VecDeque;

use crate::engine::blocks::PoolBox;
use crate::io::IO;
use crate::sync::{Arc, Weak};

/// A wait's cancellation cleanup that holds `owner` weakly (module doc):
/// `cleanup` runs with the owner if it is still alive when the wait is
/// canceled; a gone owner took the waiter with it. The strong `owner` is
/// dropped here.
#[inline]
pub(crate) fn cleanup_weakly<T, E, F>(owner: Arc<T>, cleanup: F) -> IO<(), E>
where
    T: Send + Sync + 'static,
    E: Send + 'static,
    F: FnOnce(&Arc<T>) + Send + 'static,
{
    let weak = crate::sync::downgrade(&owner);
    drop(owner);
    cleanup_through(weak, cleanup)
}

/// [`cleanup_weakly`] given the weak reference (for a wait that gives its
/// strong one to its registration).
#[inline]
pub(crate) fn cleanup_through<T, E, F>(owner: Weak<T>, cleanup: F) -> IO<(), E>
where
    T: Send + Sync + 'static,
    E: Send + 'static,
    F: FnOnce(&Arc<T>) + Send + 'static,
{
    IO::delay_untraced(move || {
        if let Some(owner) = owner.upgrade() {
            cleanup(&owner);
        }
    })
}

/// The id of a listed waiter: 32 bits, wrapping, always even (module doc,
/// "Entries").
pub(crate) type WaiterId = u32;

/// The bit of an entry's tag that marks it a tombstone: ids are even, so an
/// id's own low bit is free to say that its waiter was taken.
const TAKEN: WaiterId = 1;

/// How far apart consecutive ids are (the low bit belongs to [`TAKEN`]).
/// (Visible to the folder for its tests, `tests/list.rs`.)
pub(super) const ID_STEP: WaiterId = 2;

/// One entry of a [`WaiterList`]: a waiter and its id, or, once the waiter
/// was taken, a tombstone that keeps the id (module doc, "Entries").
/// (Visible to the folder for its tests of the layout, `tests/list.rs`.)
pub(super) struct Entry<T> {
    /// The id, with [`TAKEN`] set once the waiter is taken.
    tag: WaiterId,
    /// Initialized while [`TAKEN`] is clear; moved out (never to be read
    /// or dropped again) when it is set.
    waiter: core::mem::MaybeUninit<T>,
}

impl<T> Entry<T> {
    #[inline]
    fn new(id: WaiterId, waiter: T) -> Self {
        Entry {
            tag: id,
            waiter: core::mem::MaybeUninit::new(waiter),
        }
    }

    /// An entry without a waiter (a tombstone of id 0).
    #[inline]
    const fn vacant() -> Self {
        Entry {
            tag: TAKEN,
            waiter: core::mem::MaybeUninit::uninit(),
        }
    }

    /// The entry's id (a tombstone keeps it).
    #[inline]
    fn id(&self) -> WaiterId {
        self.tag & !TAKEN
    }

    /// Whether the entry still holds its waiter.
    #[inline]
    fn is_listed(&self) -> bool {
        self.tag & TAKEN == 0
    }

    #[inline]
    fn get(&self) -> Option<&T> {
        if self.is_listed() {
            // SAFETY: `TAKEN` is clear, so the waiter is initialized (it is
            // set only when the waiter is moved out, by `take`).
            Some(unsafe { self.waiter.assume_init_ref() })
        } else {
            None
        }
    }

    #[inline]
    fn get_mut(&mut self) -> Option<&mut T> {
        if self.is_listed() {
            // SAFETY: as in `get`.
            Some(unsafe { self.waiter.assume_init_mut() })
        } else {
            None
        }
    }

    /// Moves the waiter out, leaving a tombstone; `None` for a tombstone.
    #[inline]
    fn take(&mut self) -> Option<T> {
        if !self.is_listed() {
            return None;
        }
        self.tag |= TAKEN;
        // SAFETY: `TAKEN` was clear, so the waiter is initialized; it is set
        // now, so this entry never reads or drops the moved-out value again.
        Some(unsafe { self.waiter.assume_init_read() })
    }
}

impl<T> Drop for Entry<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// Waiters in arrival order, removable by id.
///
/// The fields are visible to the folder for its white-box tests
/// (`tests/list.rs`); nothing else in it touches them.
pub(crate) struct WaiterList<T> {
    pub(super) entries: VecDeque<Entry<T>>,
    pub(super) next_id: WaiterId,
}

impl<T> WaiterList<T> {
    /// An empty list (no allocation).
    pub(crate) const fn new() -> Self {
        WaiterList {
            entries: VecDeque::new(),
            next_id: 0,
        }
    }

    /// Adds a waiter at the back; returns its id.
    pub(crate) fn push(&mut self, waiter: T) -> WaiterId {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(ID_STEP);
        self.push_as(id, waiter);
        id
    }

    /// Adds a waiter at the back under `id`, an id that a
    /// [`SmallWaiterList`] took from its own counter, later than every id
    /// in the list (so the list stays sorted; this list's `next_id` is not
    /// used).
    fn push_as(&mut self, id: WaiterId, waiter: T) {
        if self.entries.len() == self.entries.capacity() {
            if self.entries.capacity() == 0 {
                self.entries.reserve_exact(1);
            } else {
                self.sweep();
            }
        }
        self.entries.push_back(Entry::new(id, waiter));
    }

    /// Moves the listed waiters to the front, in order, and drops the
    /// tombstones behind them (a full buffer's sweep, instead of growing).
    /// One turn of the ring: each entry is popped from the front and, if
    /// listed, pushed back (never beyond the capacity: one out, at most one
    /// in). The same result as `VecDeque::retain` in a fraction of its
    /// code, of which every waiter type has a copy.
    #[cold]
    #[inline(never)]
    fn sweep(&mut self) {
        for _ in 0..self.entries.len() {
            if let Some(entry) = self.entries.pop_front()
                && entry.is_listed()
            {
                self.entries.push_back(entry);
            }
        }
    }

    /// Takes the oldest waiter.
    pub(crate) fn pop(&mut self) -> Option<T> {
        while let Some(mut entry) = self.entries.pop_front() {
            if let Some(waiter) = entry.take() {
                return Some(waiter);
            }
        }
        None
    }

    /// The oldest waiter, left in the list.
    pub(crate) fn first_mut(&mut self) -> Option<&mut T> {
        // A pop may have left a tombstone at the front.
        self.trim_front();
        self.entries.front_mut().and_then(Entry::get_mut)
    }

    /// Removes the waiter `id` if it is still listed, and returns it (for the
    /// caller to drop once its lock is released).
    pub(crate) fn remove(&mut self, id: WaiterId) -> Option<T> {
        let index = self.find(id)?;
        let waiter = self.entries[index].take();
        // Keep the ends free of tombstones, so that `is_empty` and `pop` stay
        // cheap for the usual one-waiter list.
        self.trim_ends();
        waiter
    }

    /// The waiter `id`, if it is still listed.
    pub(crate) fn get_mut(&mut self, id: WaiterId) -> Option<&mut T> {
        let index = self.find(id)?;
        self.entries[index].get_mut()
    }

    /// The index of the entry `id`: a binary search by distance from the
    /// front entry's id, which grows along the list across a wrap of the
    /// ids (module doc).
    fn find(&self, id: WaiterId) -> Option<usize> {
        let front = self.entries.front()?.id();
        let distance = id.wrapping_sub(front);
        self.entries
            .binary_search_by_key(&distance, |entry| entry.id().wrapping_sub(front))
            .ok()
    }

    /// Pops the tombstones at the front.
    fn trim_front(&mut self) {
        while self.entries.front().is_some_and(|entry| !entry.is_listed()) {
            self.entries.pop_front();
        }
    }

    /// Pops the tombstones at both ends.
    fn trim_ends(&mut self) {
        while self.entries.back().is_some_and(|entry| !entry.is_listed()) {
            self.entries.pop_back();
        }
        self.trim_front();
    }

    /// The listed waiters, oldest first, in place (no allocation, no
    /// change to the list).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.iter_mut().filter_map(Entry::get_mut)
    }

    /// The listed waiters, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().filter_map(Entry::get)
    }

    /// Takes every waiter, oldest first, leaving the list empty.
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = T> + use<T> {
        core::mem::take(&mut self.entries)
            .into_iter()
            .filter_map(|mut entry| entry.take())
    }

    /// Takes the waiters that `select` picks, oldest first, leaving the
    /// others listed under their ids.
    pub(crate) fn take_where(&mut self, mut select: impl FnMut(&T) -> bool) -> alloc::vec::Vec<T> {
        let mut taken = alloc::vec::Vec::new();
        for entry in self.entries.iter_mut() {
            if entry.get().is_some_and(&mut select) {
                taken.extend(entry.take());
            }
        }
        // Keep the ends free of tombstones (see `remove`).
        self.trim_ends();
        taken
    }

    /// How many waiters are listed.
    pub(crate) fn len(&self) -> usize {
        self.entries
            .iter()
            .filter(|entry| entry.is_listed())
            .count()
    }

    /// Whether no waiter is listed.
    pub(crate) fn is_empty(&self) -> bool {
        // The ends are never tombstones, so a non-empty deque has a waiter.
        self.entries.is_empty()
    }
}

/// A [`WaiterList`] with its first waiter inline: a join cell's waiters
/// (module doc, "The first waiter inline"). The waiter that comes to an
/// empty list goes in `first`; the others, in the list behind it, made by
/// the second waiter.
///
/// The fields are visible to the folder for its white-box tests
/// (`tests/list.rs`); nothing else in it touches them.
pub(crate) struct SmallWaiterList<T> {
    /// The oldest waiter, if it came to an empty list and is still there;
    /// a tombstone otherwise.
    pub(super) first: Entry<T>,
    /// The next id, for `first` and for `rest` alike.
    pub(super) next_id: WaiterId,
    /// The waiters after `first` (every one of them younger); made by the
    /// first waiter that finds `first` taken or the list not empty.
    pub(super) rest: Option<PoolBox<WaiterList<T>>>,
}

impl<T> SmallWaiterList<T> {
    /// An empty list (no allocation).
    pub(crate) const fn new() -> Self {
        SmallWaiterList {
            first: Entry::vacant(),
            next_id: 0,
            rest: None,
        }
    }

    /// Adds a waiter at the back; returns its id.
    #[inline]
    pub(crate) fn push(&mut self, waiter: T) -> WaiterId {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(ID_STEP);
        if !self.first.is_listed() && self.rest_is_empty() {
            // Both empty: the new waiter is older than any to come.
            self.first = Entry::new(id, waiter);
        } else {
            self.rest
                .get_or_insert_with(|| PoolBox::new(WaiterList::new()))
                .push_as(id, waiter);
        }
        id
    }

    /// Removes the waiter `id` if it is still listed, and returns it (for the
    /// caller to drop once its lock is released).
    pub(crate) fn remove(&mut self, id: WaiterId) -> Option<T> {
        if self.first.tag == id {
            // Listed (the tag of a taken entry is odd, `id` even).
            self.first.take()
        } else {
            self.rest.as_mut()?.remove(id)
        }
    }

    /// The waiter `id`, if it is still listed.
    pub(crate) fn get_mut(&mut self, id: WaiterId) -> Option<&mut T> {
        if self.first.tag == id {
            self.first.get_mut()
        } else {
            self.rest.as_mut()?.get_mut(id)
        }
    }

    /// Takes the inline waiter, the oldest, if it is there (a
    /// completion's common case: the only one).
    #[inline]
    pub(crate) fn take_first(&mut self) -> Option<T> {
        self.first.take()
    }

    /// Whether no waiter is listed behind the inline one.
    #[inline]
    pub(crate) fn rest_is_empty(&self) -> bool {
        self.rest.as_ref().is_none_or(|rest| rest.is_empty())
    }

    /// The list of the waiters behind the inline one, if it has any (its
    /// `take_all`, after [`take_first`](Self::take_first), takes every
    /// waiter in order).
    #[inline]
    pub(crate) fn rest(&mut self) -> Option<&mut WaiterList<T>> {
        self.rest.as_deref_mut().filter(|rest| !rest.is_empty())
    }

    /// How many waiters are listed.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_listed()) + self.rest.as_ref().map_or(0, |rest| rest.len())
    }

    /// Whether no waiter is listed (for tests).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        !self.first.is_listed() && self.rest_is_empty()
    }
}
