//! Per-worker timers for `sleep` and `timeout`.
//!
//! Each worker owns a shard: a binary min-heap of `(deadline, slot,
//! generation)` entries and a slab of the callbacks they fire. A running
//! fiber sets its timer in the shard of the worker it runs on (no
//! contention: the owner is the only usual user of its shard's lock), and
//! the owner fires due timers between fibers and before it parks, sleeping
//! no longer than its earliest deadline. An idle pool with only sleepers
//! therefore uses no CPU: every worker is parked with a timeout.
//!
//! # Cancellation: O(1), heap cleanup amortized
//!
//! A fiber may be resumed (and cancel its timer) on another worker than the
//! one that set it; the key names the shard, the slot and the slot's
//! generation. Cancelling frees the slot at once (its callback is dropped
//! and the slot's generation moves on) and leaves the heap entry behind;
//! a stale entry is skipped when it reaches the top. When stale entries
//! outnumber live ones, the heap is rebuilt without them, which costs O(n)
//! once per n/2 cancellations: O(1) amortized, and memory stays within
//! twice the live timers. Cats Effect keeps per-worker timer structures for
//! the same reason (the owner sets them without synchronization).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use io_core::TimerCallback;

/// Identifies a timer: its shard, slot, and the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerKey {
    pub(crate) shard: u32,
    slot: u32,
    generation: u32,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    callback: Option<TimerCallback>,
}

/// One worker's timers. Kept behind a mutex by its owner.
#[derive(Debug, Default)]
pub(crate) struct TimerShard {
    /// `(deadline in ns, slot, generation)`, earliest first.
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Heap entries whose timer was cancelled.
    stale: usize,
}

impl TimerShard {
    /// Adds a timer firing `callback` at `deadline_ns`.
    pub(crate) fn insert(
        &mut self,
        shard: u32,
        deadline_ns: u64,
        callback: TimerCallback,
    ) -> TimerKey {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].callback = Some(callback);
                slot
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    callback: Some(callback),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let generation = self.slots[slot as usize].generation;
        self.heap.push(Reverse((deadline_ns, slot, generation)));
        TimerKey {
            shard,
            slot,
            generation,
        }
    }

    /// Removes a timer that has not fired; returns its callback (to drop
    /// outside the lock). `None` if it fired or was cancelled already.
    pub(crate) fn cancel(&mut self, key: TimerKey) -> Option<TimerCallback> {
        let slot = self.slots.get_mut(key.slot as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        let callback = slot.callback.take()?;
        self.free_slot(key.slot);
        self.stale += 1;
        if self.stale > 1024 && self.stale * 2 > self.heap.len() {
            let slots = &self.slots;
            self.heap.retain(|Reverse((_, slot, generation))| {
                slots[*slot as usize].generation == *generation
            });
            self.stale = 0;
        }
        Some(callback)
    }

    fn free_slot(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(slot);
    }

    /// Moves the callbacks of every timer due at `now_ns` into `due`.
    pub(crate) fn take_due(&mut self, now_ns: u64, due: &mut Vec<TimerCallback>) {
        while let Some(&Reverse((deadline, slot, generation))) = self.heap.peek() {
            if deadline > now_ns {
                break;
            }
            self.heap.pop();
            let entry = &mut self.slots[slot as usize];
            if entry.generation != generation {
                self.stale -= 1;
                continue;
            }
            if let Some(callback) = entry.callback.take() {
                due.push(callback);
            }
            self.free_slot(slot);
        }
    }

    /// The earliest live deadline, dropping stale entries on top.
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((deadline, slot, generation))) = self.heap.peek() {
            if self.slots[slot as usize].generation == generation {
                return Some(deadline);
            }
            self.heap.pop();
            self.stale -= 1;
        }
        None
    }

    /// Live timers.
    pub(crate) fn len(&self) -> usize {
        self.heap.len() - self.stale
    }

    /// Takes every callback (shutdown: they are dropped unfired).
    pub(crate) fn drain(&mut self) -> Vec<TimerCallback> {
        self.heap.clear();
        self.stale = 0;
        self.free.clear();
        self.slots
            .drain(..)
            .filter_map(|slot| slot.callback)
            .collect()
    }
}
