//! A fiber's ring buffer of trace events, written by the fiber and read by
//! fiber dumps on any thread.
//!
//! # Protocol (one writer; one word that counts events and marks runs)
//!
//! Each slot is a pair of atomic pointers to static data (the operation and
//! the location), so a reader that races a write reads two valid pointers,
//! never freed memory: at worst an operation paired with a neighbouring
//! event's location. Recording an event is therefore two relaxed stores
//! into the slot and one into the ring's `state` word (plain stores on
//! every target): no fence, no sequence lock per event.
//!
//! `state` is the number of events recorded, with its top bit
//! (`RUNNING`) set while the fiber runs (records). Whether a copy is
//! *consistent* is decided per run of the fiber, not per event:
//!
//! * Writer (only the fiber, on the thread running it):
//!   [`begin_run`](Ring::begin_run) when a run-loop call that records
//!   starts (`RUNNING` set, relaxed, then a release fence); each event
//!   ([`push`](Ring::push)) stores its slot, then `state + 1` (relaxed; the
//!   slot is `state & mask`, the mask below the top bit); [`end_run`](Ring::end_run)
//!   before the fiber leaves its thread (`RUNNING` cleared, release).
//! * Reader: `r1 = state` (acquire; the event count is `r1` without
//!   `RUNNING`); copy the slots (relaxed); acquire fence; `r2 = state`. If
//!   `r1` has no `RUNNING` and `r2 == r1`, no event was recorded while it
//!   copied, and the copy is the ring as the last run left it. Otherwise
//!   the trace is marked *in motion*
//!   ([`Trace::in_motion`](crate::Trace::in_motion)): the fiber was
//!   running, and its events may be paired with a neighbour's location. A
//!   reader never waits for the writer.
//!
//! The release fence of `begin_run` orders the set `RUNNING` before the
//! run's slot stores, so a reader whose copy saw one of them also sees
//! (after its acquire fence) a `state` at or after that store: running, or
//! not running with a larger count (the run recorded the event the reader
//! saw), never `r1` again. A run that records nothing takes `state` from
//! `r1` to `r1 | RUNNING` and back: a reader may then take its copy for
//! consistent, and it is, since no slot changed. The release store of
//! `end_run` makes a run's events visible to a reader that reads its
//! `state`. Loom checks both (`loom` tests below). Fibers synchronize with
//! their executor whenever they start or stop running, so a fiber dump,
//! which reads suspended fibers, nearly always gets consistent traces.
//!
//! After `usize::MAX / 2` events (2^31 on 32-bit targets) the count wraps:
//! its carry clears `RUNNING` (or, between runs, sets it until the next
//! `end_run`), and a reader sees fewer events until the ring has been
//! filled again. Copies stay memory-safe, and a copy that overlapped an
//! event is still marked in motion (the event changed `state`).
//!
//! Full mode's backtraces are not in the slots: they are owned data, which
//! a racing reader could see freed. The writer keeps them beside the slots
//! (one [`Site`] per slot, `full` feature, touched by the writer alone:
//! [`Ring::record`]) and joins them in [`Ring::owner_snapshot`].
//!
//! # Layout: one allocation behind one word
//!
//! A ring is a header (the state word, the mask, the owner's byte and, with
//! `full`, the sites) followed by its slots, in one allocation:
//! [`Ring`] is that unsized struct (its slots a trailing slice), and its
//! owner, [`RingBox`], is one thin pointer to it, since the header knows
//! the slots' number (a fiber keeps one word, not a `Box`'s two, and no
//! separate header allocation: 8 bytes of header on 32-bit targets
//! instead of a 20-byte box beside the slots).

use alloc::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use alloc::vec::Vec;
use core::fmt;
use core::panic::Location;
use core::ptr::NonNull;

use crate::sync::{AtomicPtr, AtomicU8, AtomicUsize, Ordering, fence};
use crate::{Event, MAX_CAPACITY, Op, Site, Trace};

struct Slot {
    op: AtomicPtr<Op>,
    location: AtomicPtr<Location<'static>>,
}

/// What [`Ring::begin_run`] hands to [`Ring::end_run`]: a run is open.
#[derive(Debug)]
#[must_use = "a run must be ended with `Ring::end_run`"]
pub struct RunToken(());

/// A fiber's last events: a fixed-capacity ring buffer with one writer.
///
/// Made once, with all its slots, when the fiber first records
/// ([`Ring::new`], owned by a [`RingBox`]); [`push`](Ring::push) then
/// overwrites the oldest slot and never allocates. Unsized: its slots are
/// in the same allocation as its header (module doc).
#[repr(C)]
pub struct Ring {
    header: Header,
    slots: [Slot],
}

/// The fixed-size part of a [`Ring`], before its slots.
#[repr(C)]
struct Header {
    /// The events recorded in all, with [`RUNNING`] during a run (module
    /// doc).
    state: AtomicUsize,
    /// `slots.len() - 1` (the length is a power of two, at most
    /// [`MAX_CAPACITY`]): what a thin pointer needs to find the slots.
    mask: u16,
    /// The owner's byte ([`Ring::mark`]): 0 until the owner sets it.
    mark: AtomicU8,
    /// Full mode's sites, one per slot once one is kept: only the writer
    /// touches them ([`Ring::record`], [`Ring::owner_snapshot`]).
    #[cfg(feature = "full")]
    sites: core::cell::UnsafeCell<Vec<Option<Site>>>,
}

const _: () = assert!(MAX_CAPACITY - 1 <= u16::MAX as usize);

/// The bit of [`Header::state`] set while the fiber runs (module doc):
/// the top one, above any slot index, so that an event's slot is
/// `state & mask`.
const RUNNING: usize = 1 << (usize::BITS - 1);

/// The owner of a [`Ring`]: one pointer to its one allocation (header and
/// slots), dereferencing to the ring.
///
/// [`into_raw`](RingBox::into_raw) and [`from_raw`](RingBox::from_raw)
/// hand the pointer through an atomic (a fiber's header publishes its ring
/// so); [`Ring::from_raw`] borrows the ring behind it.
pub struct RingBox {
    ptr: NonNull<Header>,
}

// SAFETY: a ring is atomics only, except full mode's sites, which only the
// writer touches (`Ring::record`'s contract); `Site`s are `Send + Sync`.
unsafe impl Send for RingBox {}
// SAFETY: as above; every `&Ring` method other than the writer's `unsafe`
// ones only reads atomics.
unsafe impl Sync for RingBox {}
// SAFETY: as for `RingBox`.
unsafe impl Sync for Ring {}
// SAFETY: as for `RingBox`.
unsafe impl Send for Ring {}

impl RingBox {
    /// Gives up ownership: the pointer [`from_raw`](RingBox::from_raw)
    /// and [`Ring::from_raw`] take.
    pub fn into_raw(self) -> NonNull<()> {
        let this = core::mem::ManuallyDrop::new(self);
        this.ptr.cast()
    }

    /// Takes back the ring of [`into_raw`](RingBox::into_raw).
    ///
    /// # Safety
    /// * `ptr` comes from `into_raw`, and is taken back once.
    pub unsafe fn from_raw(ptr: NonNull<()>) -> RingBox {
        RingBox { ptr: ptr.cast() }
    }
}

impl core::ops::Deref for RingBox {
    type Target = Ring;

    #[inline(always)]
    fn deref(&self) -> &Ring {
        // SAFETY: the box owns a live ring.
        unsafe { Ring::from_raw(self.ptr.cast()) }
    }
}

impl core::ops::DerefMut for RingBox {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Ring {
        // SAFETY: the box owns the live ring, and `&mut self` is unique.
        unsafe { &mut *Ring::fat(self.ptr.cast()) }
    }
}

impl Drop for RingBox {
    fn drop(&mut self) {
        // SAFETY: the box owns a live ring.
        let ring = unsafe { Ring::fat(self.ptr.cast()) };
        let layout = Ring::layout(self.capacity());
        // SAFETY: the box owns the ring, made by `Ring::new` with this
        // layout; its fields are dropped (loom's atomics, full mode's
        // sites), then its memory is freed, once.
        unsafe {
            core::ptr::drop_in_place(ring);
            dealloc(self.ptr.as_ptr().cast(), layout);
        }
    }
}

impl fmt::Debug for RingBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Ring {
    /// A ring of `capacity` slots, header and slots in one allocation.
    ///
    /// `capacity` should come from [`ring_capacity`](crate::ring_capacity)
    /// (a power of two); any other value is rounded up to one, 0 becomes 1
    /// and more than [`MAX_CAPACITY`] becomes `MAX_CAPACITY`.
    // An unsized `Ring` cannot be returned by value: it is made behind its
    // owner.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(capacity: usize) -> RingBox {
        let capacity = capacity.clamp(1, MAX_CAPACITY).next_power_of_two();
        let layout = Ring::layout(capacity);
        // SAFETY: the layout has a non-zero size (the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `ptr` is a fresh allocation of `layout`: the header at
        // its start and `capacity` slots at `slots_offset` (`layout`), each
        // written once before anything reads it.
        unsafe {
            ptr.as_ptr().write(Header {
                state: AtomicUsize::new(0),
                mask: (capacity - 1) as u16,
                mark: AtomicU8::new(0),
                #[cfg(feature = "full")]
                sites: core::cell::UnsafeCell::new(Vec::new()),
            });
            let slots = raw.add(Ring::slots_offset()).cast::<Slot>();
            for i in 0..capacity {
                slots.add(i).write(Slot {
                    op: AtomicPtr::new(core::ptr::null_mut()),
                    location: AtomicPtr::new(core::ptr::null_mut()),
                });
            }
        }
        let ring = RingBox { ptr };
        debug_assert_eq!(core::mem::size_of_val::<Ring>(&ring), layout.size());
        ring
    }

    /// The ring behind a pointer of [`RingBox::into_raw`].
    ///
    /// # Safety
    /// * `ptr` comes from [`RingBox::into_raw`] (or a live [`RingBox`]),
    ///   and the ring is not freed while the reference lives.
    #[inline(always)]
    pub unsafe fn from_raw<'a>(ptr: NonNull<()>) -> &'a Ring {
        // SAFETY: the caller's contract: a live ring, alive as long as `'a`.
        unsafe { &*Ring::fat(ptr) }
    }

    /// The whole ring (header and slots) behind a thin pointer.
    ///
    /// # Safety
    /// * `ptr` points at a live ring made by `Ring::new`.
    #[inline(always)]
    unsafe fn fat(ptr: NonNull<()>) -> *mut Ring {
        // SAFETY: the caller's contract: a live ring's header, whose mask
        // is written once, before the pointer was handed out.
        let mask = unsafe { (*ptr.cast::<Header>().as_ptr()).mask };
        // A `Ring` of `mask + 1` slots is at `ptr` (`Ring::new`); the
        // pointer keeps the allocation's provenance.
        core::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), usize::from(mask) + 1) as *mut Ring
    }

    /// Where the slots start: after the header, at the slots' alignment.
    const fn slots_offset() -> usize {
        let header = core::mem::size_of::<Header>();
        let align = core::mem::align_of::<Slot>();
        header.div_ceil(align) * align
    }

    /// The allocation of a ring of `capacity` slots: as the compiler lays
    /// out the unsized struct (checked in `new`).
    fn layout(capacity: usize) -> Layout {
        let align = core::mem::align_of::<Header>().max(core::mem::align_of::<Slot>());
        let size = Ring::slots_offset() + capacity * core::mem::size_of::<Slot>();
        match Layout::from_size_align(size, align) {
            Ok(layout) => layout.pad_to_align(),
            // At most `MAX_CAPACITY` slots of two words: far below
            // `isize::MAX`.
            Err(_) => unreachable!("spindle-trace: a ring's layout is small"),
        }
    }

    /// Sets the owner's byte: a value the ring's owner keeps with it
    /// (io-core keeps what the fiber does now, for fiber dumps), stored
    /// relaxed; 0 until set, and again after [`reset`](Ring::reset).
    #[inline(always)]
    pub fn set_mark(&self, mark: u8) {
        self.header.mark.store(mark, Ordering::Relaxed);
    }

    /// The owner's byte ([`set_mark`](Ring::set_mark)), read relaxed from
    /// any thread.
    #[inline]
    pub fn mark(&self) -> u8 {
        self.header.mark.load(Ordering::Relaxed)
    }

    /// The fiber starts a run that records (see the module doc); returns
    /// the token to hand to [`end_run`](Ring::end_run) when the run ends.
    /// Runs do not nest: every `begin_run` is followed by its `end_run`
    /// before the next `begin_run` (also when a panic ends the run).
    #[inline(always)]
    pub fn begin_run(&self) -> RunToken {
        let state = self.header.state.load(Ordering::Relaxed) | RUNNING;
        self.header.state.store(state, Ordering::Relaxed);
        fence(Ordering::Release);
        RunToken(())
    }

    /// The run ends: readers may now copy the ring consistently.
    #[inline(always)]
    pub fn end_run(&self, token: RunToken) {
        let RunToken(()) = token;
        // Only the writer stores `state`: its own last value.
        let state = self.header.state.load(Ordering::Relaxed);
        self.header.state.store(state & !RUNNING, Ordering::Release);
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
        let state = self.header.state.load(Ordering::Relaxed);
        let index = state & usize::from(self.header.mask);
        debug_assert!(index < self.slots.len());
        // SAFETY: `mask` is `slots.len() - 1`, so `index` is in bounds.
        let slot = unsafe { self.slots.get_unchecked(index) };
        slot.op
            .store((op as *const Op).cast_mut(), Ordering::Relaxed);
        slot.location.store(
            (location as *const Location<'static>).cast_mut(),
            Ordering::Relaxed,
        );
        self.header
            .state
            .store(state.wrapping_add(1), Ordering::Relaxed);
        index
    }

    /// Forgets every event, for reuse by another fiber (the caller owns
    /// the ring: nobody else reads it).
    pub fn reset(&mut self) {
        self.header.state.store(0, Ordering::Relaxed);
        self.header.mark.store(0, Ordering::Relaxed);
        #[cfg(feature = "full")]
        self.header.sites.get_mut().clear();
    }

    /// Records an event at `site` ([`push`](Ring::push)), and in full mode
    /// keeps the site (with its backtrace) beside the slot, for
    /// [`owner_snapshot`](Ring::owner_snapshot).
    ///
    /// # Safety
    /// * Only the ring's writer calls this and `owner_snapshot` (one thread
    ///   at a time, as for `push`): full mode's sites are not synchronized.
    #[inline(always)]
    pub unsafe fn record(&self, op: &'static Op, site: &Site) {
        let _index = self.push(op, site.location());
        #[cfg(feature = "full")]
        if site.has_backtrace() {
            // SAFETY: forwarded precondition.
            unsafe { self.keep_site(_index, site) };
        }
    }

    /// # Safety
    /// * As for `record`.
    #[cfg(feature = "full")]
    #[cold]
    unsafe fn keep_site(&self, index: usize, site: &Site) {
        // SAFETY: the caller is the only writer, the only one that touches
        // the sites, and no reference to them outlives this call.
        let sites = unsafe { &mut *self.header.sites.get() };
        if sites.is_empty() {
            sites.resize_with(self.capacity(), || None);
        }
        sites[index] = Some(site.clone());
    }

    /// The writer's snapshot of its own ring (no race: it is the writer),
    /// with full mode's backtraces where [`record`](Ring::record) kept them.
    ///
    /// # Safety
    /// * As for `record`.
    pub unsafe fn owner_snapshot(&self) -> Trace {
        #[cfg(feature = "full")]
        {
            // SAFETY: forwarded precondition: no one else touches the sites
            // now, and the reference ends with the call.
            self.snapshot_with_sites(unsafe { &*self.header.sites.get() })
        }
        #[cfg(not(feature = "full"))]
        {
            self.snapshot_with_sites(&[])
        }
    }

    /// How many events the ring keeps at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many events were recorded in all (including overwritten ones),
    /// as of the last run that ended (or now, on the fiber's own thread).
    pub fn recorded(&self) -> usize {
        self.header.state.load(Ordering::Relaxed) & !RUNNING
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
        let r1 = self.header.state.load(Ordering::Acquire);
        let written = r1 & !RUNNING;
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
        let r2 = self.header.state.load(Ordering::Relaxed);
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
        trace.in_motion = r1 & RUNNING != 0 || r1 != r2;
        trace
    }

    /// The owner's snapshot: its own ring (no race: it is the writer), with
    /// the site kept for each slot (full mode's backtraces) where one is.
    pub fn snapshot_with_sites(&self, sites: &[Option<Site>]) -> Trace {
        let written = self.recorded();
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
