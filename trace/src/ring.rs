//! A fiber's ring buffer of trace events, written by the fiber and read by
//! fiber dumps on any thread.
//!
//! # Protocol (one writer; a sequence count per run, not per event)
//!
//! Each slot is a pair of atomic pointers to static data (the operation and
//! the location), so a reader that races a write reads two valid pointers,
//! never freed memory: at worst an operation paired with a neighbouring
//! event's location. Recording an event is therefore two relaxed stores
//! into the slot and one into `written` (plain stores on every target): no
//! fence, no sequence lock per event.
//!
//! Whether a copy is *consistent* is decided per run of the fiber, not per
//! event. `runs` is twice the number of runs that ended, plus one while the
//! fiber runs (records):
//!
//! * Writer (only the fiber, on the thread running it):
//!   [`begin_run`](Ring::begin_run) when a run-loop call that records
//!   starts (`runs` made odd, relaxed, then a release fence), events, then
//!   [`end_run`](Ring::end_run) before the fiber leaves its thread (`runs`
//!   made even, release).
//! * Reader: `r1 = runs` (acquire); copy `written` and the slots (relaxed);
//!   acquire fence; `r2 = runs`. If `r1` is even and `r2 == r1`, no run
//!   overlapped the copy, and the copy is the ring as the last run left
//!   it. Otherwise the trace is marked *in motion*
//!   ([`Trace::in_motion`](crate::Trace::in_motion)): the fiber was running,
//!   and its events may be paired with a neighbour's location. A reader
//!   never waits for the writer.
//!
//! The release fence of `begin_run` orders the odd `runs` before the run's
//! slot stores, so a reader whose copy saw one of them also sees (after its
//! acquire fence) a `runs` that moved on. The release store of `end_run`
//! makes a run's events visible to a reader that reads its even `runs`.
//! Loom checks both (`loom` tests below). Fibers synchronize with their
//! executor whenever they start or stop running, so a fiber dump, which
//! reads suspended fibers, nearly always gets consistent traces.
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

struct Slot {
    op: AtomicPtr<Op>,
    location: AtomicPtr<Location<'static>>,
}

/// What [`Ring::begin_run`] hands to [`Ring::end_run`]: the run's count.
#[derive(Debug)]
#[must_use = "a run must be ended with `Ring::end_run`"]
pub struct RunToken(usize);

/// A fiber's last events: a fixed-capacity ring buffer with one writer.
///
/// Made once, with all its slots, when the fiber first records;
/// [`push`](Ring::push) then overwrites the oldest slot and never
/// allocates.
pub struct Ring {
    /// How many events were recorded in all.
    written: AtomicUsize,
    /// Twice the runs that ended, plus one during a run (module doc).
    runs: AtomicUsize,
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
            written: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
            mask: capacity - 1,
            slots: slots.into_boxed_slice(),
        }
    }

    /// The fiber starts a run that records (see the module doc); returns
    /// the token to hand to [`end_run`](Ring::end_run) when the run ends.
    /// Runs do not nest: every `begin_run` is followed by its `end_run`
    /// before the next `begin_run` (also when a panic ends the run).
    #[inline(always)]
    pub fn begin_run(&self) -> RunToken {
        let runs = self.runs.load(Ordering::Relaxed) | 1;
        self.runs.store(runs, Ordering::Relaxed);
        fence(Ordering::Release);
        RunToken(runs)
    }

    /// The run ends: readers may now copy the ring consistently.
    #[inline(always)]
    pub fn end_run(&self, token: RunToken) {
        self.runs.store(token.0.wrapping_add(1), Ordering::Release);
    }

    /// Records an event, replacing the oldest once the ring is full, and
    /// returns the slot it used.
    ///
    /// Only one thread may push at a time (the fiber that owns the ring),
    /// between [`begin_run`](Ring::begin_run) and
    /// [`end_run`](Ring::end_run) for readers to see consistent copies;
    /// concurrent pushes are memory-safe but garble the ring.
    #[inline(always)]
    pub fn push(&self, op: &'static Op, location: &'static Location<'static>) -> usize {
        let n = self.written.load(Ordering::Relaxed);
        let index = n & self.mask;
        debug_assert!(index < self.slots.len());
        // SAFETY: `mask` is `slots.len() - 1`, so `index` is in bounds.
        let slot = unsafe { self.slots.get_unchecked(index) };
        slot.op
            .store((op as *const Op).cast_mut(), Ordering::Relaxed);
        slot.location.store(
            (location as *const Location<'static>).cast_mut(),
            Ordering::Relaxed,
        );
        self.written.store(n.wrapping_add(1), Ordering::Relaxed);
        index
    }

    /// Forgets every event, for reuse by another fiber (the caller owns
    /// the ring: nobody else reads it).
    pub fn reset(&mut self) {
        self.written.store(0, Ordering::Relaxed);
        self.runs.store(0, Ordering::Relaxed);
    }

    /// How many events the ring keeps at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many events were recorded in all (including overwritten ones),
    /// as of the last run that ended (or now, on the fiber's own thread).
    pub fn recorded(&self) -> usize {
        self.written.load(Ordering::Relaxed)
    }

    /// How many events it holds now.
    pub fn len(&self) -> usize {
        self.recorded().min(self.slots.len())
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.recorded() == 0
    }

    /// The events, oldest first, copied from any thread without waiting
    /// for the writer; the trace is [in motion](Trace::in_motion) if the
    /// fiber ran while this copied it (module doc).
    pub fn snapshot(&self) -> Trace {
        let r1 = self.runs.load(Ordering::Acquire);
        let written = self.written.load(Ordering::Relaxed);
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
        let r2 = self.runs.load(Ordering::Relaxed);
        let mut trace = self.assemble(written, |i| {
            let (op, location) = copy[i];
            // SAFETY: both pointers were stored by `push` from `&'static`
            // references (or are null: a slot never written), whatever the
            // writer did meanwhile: each word is stored whole.
            unsafe {
                Some(Event::new(
                    op.as_ref()?,
                    Site::from_location(location.as_ref()?),
                ))
            }
        });
        trace.in_motion = r1 % 2 == 1 || r1 != r2;
        trace
    }

    /// The owner's snapshot: its own ring (no race: it is the writer), with
    /// the site kept for each slot (full mode's backtraces) where one is.
    pub fn snapshot_with_sites(&self, sites: &[Option<Site>]) -> Trace {
        let written = self.written.load(Ordering::Relaxed);
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
            in_motion: false,
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
    fn a_copy_not_marked_in_motion_is_the_ring_as_a_finished_run_left_it() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(1));
            let la: &'static Location<'static> = Location::caller();
            let run = ring.begin_run();
            ring.push(&A, la);
            ring.end_run(run);
            let writer = {
                let ring = ring.clone();
                loom::thread::spawn(move || {
                    let run = ring.begin_run();
                    ring.push(&B, la);
                    ring.end_run(run);
                })
            };
            let trace = ring.snapshot();
            if !trace.in_motion() {
                // One slot: the event is `a` (before the second run) or
                // `b` (after it), and the count matches it.
                let names = trace.op_names();
                assert_eq!(names.len(), 1);
                assert_eq!(names[0] == "b", trace.omitted() == 1);
            }
            writer.join().unwrap();
            let trace = ring.snapshot();
            assert!(!trace.in_motion());
            assert_eq!(trace.op_names(), ["b"]);
        });
    }

    #[test]
    fn a_reader_during_a_run_marks_the_trace_in_motion_and_reads_valid_events() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            let la: &'static Location<'static> = Location::caller();
            let run = ring.begin_run();
            let reader = {
                let ring = ring.clone();
                loom::thread::spawn(move || ring.snapshot())
            };
            ring.push(&A, la);
            ring.push(&B, la);
            let trace = reader.join().unwrap();
            assert!(trace.in_motion());
            for name in trace.op_names() {
                assert!(name == "a" || name == "b");
            }
            ring.end_run(run);
        });
    }
}
