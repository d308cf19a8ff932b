//! A fiber's ring buffer of trace events, written by the fiber and read by
//! fiber dumps on any thread.
//!
//! # Protocol (a sequence lock with one writer)
//!
//! `seq` is twice the number of events written, plus one while a write is
//! in progress. Each slot is a pair of atomic pointers to static data (the
//! operation and the location), so a reader that races a write reads two
//! valid pointers, never freed memory; the sequence tells it whether the
//! pair belongs together.
//!
//! * Writer (only the fiber, on the thread running it): `seq = s + 1`
//!   (relaxed), release fence, store the slot's two pointers (relaxed),
//!   `seq = s + 2` (release). On x86 and Arm the stores are plain stores.
//! * Reader: `s1 = seq` (acquire); odd means a write is in progress, so try
//!   again; copy the slots (relaxed); acquire fence; `s2 = seq`. If
//!   `s1 == s2` no write overlapped the copy and the copy is the ring as of
//!   `s1`. A reader gives up after a bounded number of tries, so a dump of a
//!   busy fiber never waits for it: it reports no trace instead.
//!
//! The writer's release fence orders `seq = s + 1` before the slot stores,
//! so a reader whose copy saw a new slot value also sees (after its acquire
//! fence) a sequence that moved on. Loom checks this (`loom` tests below).
//!
//! Full mode's backtraces are not in the ring: they are owned data, which a
//! racing reader could see freed. The fiber keeps them next to it (one
//! [`Site`] per slot) and joins them in [`Ring::snapshot_with_sites`].

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::panic::Location;

use crate::sync::{AtomicPtr, AtomicUsize, Ordering, fence};
use crate::{Event, Op, Site, Trace};

/// How often a reader tries to copy a ring that its writer keeps changing.
const READ_TRIES: usize = 64;

struct Slot {
    op: AtomicPtr<Op>,
    location: AtomicPtr<Location<'static>>,
}

/// A fiber's last events: a fixed-capacity ring buffer with one writer.
///
/// Made once, with all its slots, when the fiber records its first event;
/// [`push`](Ring::push) then overwrites the oldest slot and never
/// allocates.
pub struct Ring {
    seq: AtomicUsize,
    /// `slots.len() - 1` (the length is a power of two).
    mask: usize,
    slots: Box<[Slot]>,
}

impl Ring {
    /// A ring of `capacity` slots.
    ///
    /// `capacity` should come from [`ring_capacity`](crate::ring_capacity)
    /// (a power of two); any other value is rounded up to one, and 0
    /// becomes 1.
    pub fn new(capacity: usize) -> Ring {
        let capacity = capacity.max(1).next_power_of_two();
        let slots: Vec<Slot> = (0..capacity)
            .map(|_| Slot {
                op: AtomicPtr::new(core::ptr::null_mut()),
                location: AtomicPtr::new(core::ptr::null_mut()),
            })
            .collect();
        Ring {
            seq: AtomicUsize::new(0),
            mask: capacity - 1,
            slots: slots.into_boxed_slice(),
        }
    }

    /// Records an event, replacing the oldest once the ring is full, and
    /// returns the slot it used.
    ///
    /// Only one thread may push at a time (the fiber that owns the ring);
    /// concurrent pushes are memory-safe but garble the ring.
    #[inline]
    pub fn push(&self, op: &'static Op, location: &'static Location<'static>) -> usize {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let index = (s >> 1) & self.mask;
        debug_assert!(index < self.slots.len());
        // SAFETY: `mask` is `slots.len() - 1`, so `index` is in bounds.
        let slot = unsafe { self.slots.get_unchecked(index) };
        slot.op
            .store((op as *const Op).cast_mut(), Ordering::Relaxed);
        slot.location.store(
            (location as *const Location<'static>).cast_mut(),
            Ordering::Relaxed,
        );
        self.seq.store(s.wrapping_add(2), Ordering::Release);
        index
    }

    /// Forgets every event, for reuse by another fiber (the caller owns
    /// the ring: nobody else reads it).
    pub fn reset(&mut self) {
        self.seq.store(0, Ordering::Relaxed);
    }

    /// How many events the ring keeps at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many events were recorded in all (including overwritten ones).
    pub fn recorded(&self) -> usize {
        self.seq.load(Ordering::Acquire) / 2
    }

    /// How many events it holds now.
    pub fn len(&self) -> usize {
        self.recorded().min(self.slots.len())
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.recorded() == 0
    }

    /// The events, oldest first, copied consistently from any thread; `None`
    /// if the writer kept changing the ring while this tried to copy it.
    pub fn snapshot(&self) -> Option<Trace> {
        for _ in 0..READ_TRIES {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 % 2 == 1 {
                core::hint::spin_loop();
                continue;
            }
            let copy: Vec<(*mut Op, *mut Location<'static>)> = self
                .slots
                .iter()
                .map(|s| {
                    (
                        s.op.load(Ordering::Relaxed),
                        s.location.load(Ordering::Relaxed),
                    )
                })
                .collect();
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(self.assemble(s1 / 2, |i| {
                    let (op, location) = copy[i];
                    // SAFETY: both pointers were stored by `push` from
                    // `&'static` references (the sequence check shows the
                    // slot was written before `s1` and not since).
                    unsafe {
                        Some(Event::new(
                            op.as_ref()?,
                            Site::from_location(location.as_ref()?),
                        ))
                    }
                }));
            }
        }
        None
    }

    /// The owner's snapshot: its own ring (no race: it is the writer), with
    /// the site kept for each slot (full mode's backtraces) where one is.
    pub fn snapshot_with_sites(&self, sites: &[Option<Site>]) -> Trace {
        let written = self.seq.load(Ordering::Relaxed) / 2;
        self.assemble(written, |i| {
            let op = self.slots[i].op.load(Ordering::Relaxed);
            let location = self.slots[i].location.load(Ordering::Relaxed);
            // SAFETY: as in `snapshot`; the owner is the only writer.
            let (op, location) = unsafe { (op.as_ref()?, location.as_ref()?) };
            #[allow(clippy::clone_on_copy)] // `Site` is `Copy` only without `full`.
            let site = match sites.get(i) {
                Some(Some(site)) if core::ptr::eq(site.location(), location) => site.clone(),
                _ => Site::from_location(location),
            };
            Some(Event::new(op, site))
        })
    }

    fn assemble(&self, written: usize, event_at: impl Fn(usize) -> Option<Event>) -> Trace {
        let cap = self.slots.len();
        let len = written.min(cap);
        let start = written.wrapping_sub(len);
        let events = (0..len)
            .filter_map(|i| event_at(start.wrapping_add(i) & (cap - 1)))
            .collect();
        Trace {
            events,
            omitted: written - len,
        }
    }
}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    static A: Op = Op::new("a");
    static B: Op = Op::new("b");

    #[test]
    fn a_reader_racing_the_writer_sees_whole_events_or_gives_up() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(1));
            let la: &'static Location<'static> = Location::caller();
            ring.push(&A, la);
            let writer = {
                let ring = ring.clone();
                loom::thread::spawn(move || {
                    ring.push(&B, la);
                })
            };
            if let Some(trace) = ring.snapshot() {
                // One slot: the event is `a` (before the write) or `b`
                // (after), and the count matches it.
                let names = trace.op_names();
                assert_eq!(names.len(), 1);
                assert_eq!(names[0] == "b", trace.omitted() == 1);
            }
            writer.join().unwrap();
            assert_eq!(ring.snapshot().unwrap().op_names(), ["b"]);
        });
    }
}
