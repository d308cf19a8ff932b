//! A timer heap for executors: a min-heap of deadlines over a slab of
//! [`TimerCallback`]s, with O(1) cancellation (O(log n) amortized with the
//! cleanup of the heap).
//!
//! Executors implement [`Executor::set_timer`](crate::Executor::set_timer)
//! and [`cancel_timer`](crate::Executor::cancel_timer) with one of these
//! (exec-wstp keeps one per worker, exec-batching one per loop), behind
//! their own lock.
//!
//! # Layout
//!
//! * The slab: each slot holds the callback of at most one live timer and
//!   a *generation* that moves on every time the slot is freed.
//! * The heap: `(deadline, sequence, slot, generation)` entries, earliest
//!   first; the sequence number makes timers with equal deadlines fire in
//!   the order they were set.
//!
//! A [`TimerId`] names a slot and the generation it had when the timer was
//! set, so the id of a timer that fired or was cancelled never matches the
//! slot's next occupant.
//!
//! # Costs
//!
//! * [`insert`](TimerHeap::insert): O(log n), no allocation once the slab
//!   and the heap have grown to the peak number of timers.
//! * [`cancel`](TimerHeap::cancel): O(1): the slot is freed and the
//!   callback handed back; the heap entry stays behind as *stale* and is
//!   skipped when it reaches the top. When stale entries are more than half
//!   the heap (and more than a few), the heap is rebuilt without them: O(n
//!   log n) once per n/2 cancellations, O(log n) amortized (as an insert;
//!   the rebuild is written to be small, and allocates a buffer for the
//!   live entries while it runs), and the heap never holds
//!   more than about twice the live timers. (`timeout` cancels its timer
//!   whenever the guarded program wins, which is most of the time.)
//! * [`take_due`](TimerHeap::take_due): O(log n) per timer fired or stale
//!   entry dropped.
//!
//! Callbacks are never dropped or fired here: `cancel`, `take_due` and
//! `drain` hand them to the caller, who drops or fires them after releasing
//! its lock (a callback may hold the last reference to a fiber, whose
//! program may own resources whose drop takes other locks).

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use crate::executor::TimerCallback;

/// Identifies a timer of a [`TimerHeap`], to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    slot: u32,
    generation: u32,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    callback: Option<TimerCallback>,
}

/// Heap entry: `(deadline in ns, sequence, slot, generation)`.
type Entry = Reverse<(u64, u64, u32, u32)>;

/// Stale entries tolerated before a rebuild is considered.
const MIN_STALE_FOR_REBUILD: usize = 64;

/// Timers by deadline (in nanoseconds of the executor's monotonic clock).
/// See the module documentation.
#[derive(Debug, Default)]
pub struct TimerHeap {
    heap: BinaryHeap<Entry>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Heap entries whose timer was cancelled.
    stale: usize,
    next_sequence: u64,
}

impl TimerHeap {
    /// An empty heap (no allocation).
    pub const fn new() -> Self {
        TimerHeap {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            stale: 0,
            next_sequence: 0,
        }
    }

    /// Adds a timer firing `callback` once the clock reaches `deadline_ns`.
    pub fn insert(&mut self, deadline_ns: u64, callback: TimerCallback) -> TimerId {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    callback: None,
                });
                // More than 2^32 simultaneous timers would exhaust memory
                // long before this truncates.
                (self.slots.len() - 1) as u32
            }
        };
        let entry = &mut self.slots[slot as usize];
        entry.callback = Some(callback);
        let generation = entry.generation;
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.heap
            .push(Reverse((deadline_ns, sequence, slot, generation)));
        TimerId { slot, generation }
    }

    /// Removes a timer that has not fired and returns its callback, for the
    /// caller to drop outside its lock. `None` if it fired or was cancelled
    /// already.
    pub fn cancel(&mut self, id: TimerId) -> Option<TimerCallback> {
        let slot = self.slots.get_mut(id.slot as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        let callback = slot.callback.take()?;
        self.free_slot(id.slot);
        self.stale += 1;
        if self.stale > MIN_STALE_FOR_REBUILD && self.stale * 2 > self.heap.len() {
            self.drop_stale();
        }
        Some(callback)
    }

    /// Rebuilds the heap without its stale entries: pops every entry and
    /// pushes the live ones back. Popped in heap order, each pushed entry
    /// is at its place at once (no sift), so the rebuild is the pops' O(n
    /// log n), once per n/2 cancellations: O(log n) amortized per
    /// cancellation, as an `insert`. Written with the heap's `pop` and
    /// `push`, which every executor has anyway, rather than
    /// `BinaryHeap::retain` (several hundred bytes of code more on a
    /// microcontroller).
    #[cold]
    #[inline(never)]
    fn drop_stale(&mut self) {
        let mut live = Vec::with_capacity(self.heap.len() - self.stale);
        while let Some(entry) = self.heap.pop() {
            let Reverse((_, _, slot, generation)) = entry;
            if self.slots[slot as usize].generation == generation {
                live.push(entry);
            }
        }
        for entry in live {
            self.heap.push(entry);
        }
        self.stale = 0;
    }

    fn free_slot(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(slot);
    }

    /// The earliest live entry, `(deadline, slot)`, after dropping the
    /// stale entries above it.
    fn peek_live(&mut self) -> Option<(u64, u32)> {
        loop {
            let &Reverse((deadline, _, slot, generation)) = self.heap.peek()?;
            if self.slots[slot as usize].generation == generation {
                return Some((deadline, slot));
            }
            self.heap.pop();
            self.stale -= 1;
        }
    }

    /// Moves the callbacks of every timer due at `now_ns` into `due`, in
    /// deadline order (ties in the order they were set).
    pub fn take_due(&mut self, now_ns: u64, due: &mut Vec<TimerCallback>) {
        while let Some(callback) = self.pop_due(now_ns) {
            due.push(callback);
        }
    }

    /// Takes the callback of the earliest timer if it is due at `now_ns`
    /// (the next one in deadline order, ties in the order they were set),
    /// without allocating: call it in a loop until `None`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<TimerCallback> {
        let (deadline, slot) = self.peek_live()?;
        if deadline > now_ns {
            return None;
        }
        self.heap.pop();
        let callback = self.slots[slot as usize].callback.take();
        self.free_slot(slot);
        callback
    }

    /// The earliest live deadline.
    pub fn next_deadline(&mut self) -> Option<u64> {
        self.peek_live().map(|(deadline, _)| deadline)
    }

    /// Live timers.
    pub fn len(&self) -> usize {
        self.heap.len() - self.stale
    }

    /// Heap entries, stale ones among them (for tests of the rebuild, which
    /// are not loom models).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn entries(&self) -> usize {
        self.heap.len()
    }

    /// Whether no timer is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes every callback (an executor shutting down drops them unfired,
    /// outside its lock).
    pub fn drain(&mut self) -> Vec<TimerCallback> {
        self.heap.clear();
        self.stale = 0;
        self.free.clear();
        let mut callbacks = Vec::new();
        for slot in core::mem::take(&mut self.slots) {
            callbacks.extend(slot.callback);
        }
        callbacks
    }
}
