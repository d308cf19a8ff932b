//! Fiber tracing compiled in (the `tracing` feature): the fiber's tracing
//! state, its ring slot (read by dumps), and its activity byte. The other
//! variant, `fiber_off.rs`, has the same API with nothing inside; `mod.rs`
//! picks one by `cfg`.

use crate::config::FiberConfig;
use crate::fiber::FiberState;
use crate::sync::{AtomicU8, Ordering};
use spindle_trace::{Op, Site, Trace};

/// Whether a new fiber traces from its start: a child of a traced scope
/// (`traced`), or the executor's mode records. If it does, programs built
/// from now on keep every site (see `spindle_trace::call_sites_for`); a
/// later configuration that records nothing no longer turns them off.
#[inline]
pub(crate) fn fiber_traces(traced: bool, config: &FiberConfig) -> bool {
    let traces = traced || config.tracing().records();
    if traces {
        spindle_trace::keep_call_sites();
    }
    traces
}

/// What a fiber does now, for fiber dumps ([`FiberState`] as a byte, in
/// the fiber's header); kept only while the fiber traces.
pub(crate) struct Activity(AtomicU8);

impl Activity {
    pub(crate) fn new(state: FiberState) -> Self {
        Activity(AtomicU8::new(state as u8))
    }

    /// Records what the fiber does now (the fiber itself, relaxed).
    #[inline(always)]
    pub(crate) fn set(&self, state: FiberState) {
        self.0.store(state as u8, Ordering::Relaxed);
    }

    /// What the fiber last recorded (a dump, on any thread).
    #[cfg_attr(loom, allow(dead_code))] // fiber dumps are left out of loom builds
    pub(crate) fn get(&self) -> Option<FiberState> {
        FiberState::from_byte(self.0.load(Ordering::Relaxed))
    }
}

/// A fiber's tracing state (in `Core`): whether it records now. The ring
/// itself is in the fiber's header ([`RingSlot`]), so that fiber dumps can
/// read it.
pub(crate) struct FiberTracing {
    /// Records events now (mode, or inside `traced()`).
    pub(crate) on: bool,
}

impl FiberTracing {
    pub(crate) fn new(on: bool) -> Self {
        FiberTracing { on }
    }

    /// Whether the fiber records now.
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// Switches recording (a traced scope begins or ends).
    #[inline(always)]
    pub(crate) fn set_on(&mut self, on: bool) {
        self.on = on;
    }

    /// Records `op` at `site` (the caller checked `on`); the first event
    /// makes the ring and publishes it in `slot` (the fiber's header).
    #[inline]
    pub(crate) fn record(
        &mut self,
        op: &'static Op,
        site: &Site,
        capacity: impl FnOnce() -> usize,
        slot: &RingSlot,
    ) {
        let owned = slot.own(capacity);
        let _index = owned.ring.push(op, site.location());
        #[cfg(feature = "tracing-full")]
        if site.has_backtrace() {
            owned.keep_site(_index, site);
        }
    }

    /// The fiber's trace now, as the fiber itself sees it (with full mode's
    /// backtraces).
    pub(crate) fn snapshot(&self, slot: &RingSlot) -> Trace {
        // SAFETY: called by the fiber (on the thread running it), the only
        // one that touches the sites.
        slot.get_owned()
            .map_or_else(Trace::empty, |owned| unsafe { owned.snapshot() })
    }
}

/// A fiber's ring and, in full mode, the sites (with backtraces) of the
/// events in it, which only the fiber touches: a dump on another thread
/// reads only the ring.
pub(crate) struct OwnedRing {
    pub(crate) ring: spindle_trace::Ring,
    #[cfg(feature = "tracing-full")]
    sites: crate::sync::UnsafeCell<alloc::vec::Vec<Option<Site>>>,
}

impl OwnedRing {
    #[cfg(feature = "tracing-full")]
    #[cold]
    fn keep_site(&self, index: usize, site: &Site) {
        self.sites.with_mut(|sites| {
            // SAFETY: only the fiber records (the thread running it), and
            // no reference to the sites outlives this call.
            let sites = unsafe { &mut *sites };
            if sites.is_empty() {
                sites.resize_with(self.ring.capacity(), || None);
            }
            sites[index] = Some(site.clone());
        })
    }

    /// # Safety
    /// * Called by the fiber itself (the thread running it).
    unsafe fn snapshot(&self) -> Trace {
        #[cfg(feature = "tracing-full")]
        {
            self.sites.with(|sites| {
                // SAFETY: forwarded precondition: the fiber is the only one
                // that touches the sites, and the reference ends with the call.
                self.ring.snapshot_with_sites(unsafe { &*sites })
            })
        }
        #[cfg(not(feature = "tracing-full"))]
        {
            self.ring.snapshot_with_sites(&[])
        }
    }
}

/// The fiber header's pointer to its ring: null until the fiber records
/// its first event; read by fiber dumps on any thread.
pub(crate) struct RingSlot {
    ring: crate::sync::AtomicPtr<OwnedRing>,
}

// SAFETY: the ring is atomics only; the sites (`UnsafeCell`) are touched
// only by the thread running the fiber (see `OwnedRing`), and `Site`s are
// `Send + Sync`.
unsafe impl Sync for OwnedRing {}

impl RingSlot {
    pub(crate) fn new() -> Self {
        RingSlot {
            ring: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Makes the ring (or takes a spare one of this thread) and publishes
    /// it (Release: a dump that sees the pointer sees an initialised ring).
    #[cold]
    fn install(&self, capacity: usize) -> core::ptr::NonNull<OwnedRing> {
        let owned = spare_rings::take(capacity).unwrap_or_else(|| {
            alloc::boxed::Box::new(OwnedRing {
                ring: spindle_trace::Ring::new(capacity),
                #[cfg(feature = "tracing-full")]
                sites: crate::sync::UnsafeCell::new(alloc::vec::Vec::new()),
            })
        });
        let ptr = alloc::boxed::Box::into_raw(owned);
        self.ring.store(ptr, crate::sync::Ordering::Release);
        // SAFETY: `Box::into_raw` never returns null.
        unsafe { core::ptr::NonNull::new_unchecked(ptr) }
    }

    /// The ring, made on first use: for the fiber itself (the only
    /// writer).
    #[inline(always)]
    fn own(&self, capacity: impl FnOnce() -> usize) -> &OwnedRing {
        let ring = self.ring.load(crate::sync::Ordering::Relaxed);
        if ring.is_null() {
            // SAFETY: `install` returns a live ring owned by `self`.
            unsafe { self.install(capacity()).as_ref() }
        } else {
            // SAFETY: only the fiber installs the ring (this thread); it
            // lives until `self` is dropped.
            unsafe { &*ring }
        }
    }

    fn get_owned(&self) -> Option<&OwnedRing> {
        let ring = self.ring.load(crate::sync::Ordering::Acquire);
        // SAFETY: a non-null pointer is a published, live ring, freed only
        // when the header is dropped (not while `&self` lives).
        unsafe { ring.as_ref() }
    }

    /// The ring, if made (the caller keeps the fiber alive; a dump on
    /// another thread reads it through its sequence lock).
    #[cfg_attr(loom, allow(dead_code))] // fiber dumps are left out of loom builds
    pub(crate) fn get(&self) -> Option<&spindle_trace::Ring> {
        self.get_owned().map(|owned| &owned.ring)
    }
}

impl Drop for RingSlot {
    fn drop(&mut self) {
        let ring = self.ring.load(crate::sync::Ordering::Acquire);
        if !ring.is_null() {
            // SAFETY: made by `Box::into_raw` in `install`, taken once here;
            // the fiber is being freed, so no dump can read it any more.
            spare_rings::give(unsafe { alloc::boxed::Box::from_raw(ring) });
        }
    }
}

/// Rings of freed fibers, kept per thread for the next fibers (a program
/// that starts fibers by the thousand reuses a few rings instead of
/// allocating one per fiber), as `pool::stacks` keeps stack buffers.
mod spare_rings {
    use super::OwnedRing;
    use alloc::boxed::Box;

    #[cfg(all(feature = "std", not(loom)))]
    const MAX_KEPT: usize = 64;

    // Boxes, not values: a ring is handed out as a fiber's published ring
    // pointer, so it keeps its allocation from fiber to fiber.
    #[cfg(all(feature = "std", not(loom)))]
    std::thread_local! {
        #[allow(clippy::vec_box)]
        static SPARE: core::cell::RefCell<alloc::vec::Vec<Box<OwnedRing>>> =
            const { core::cell::RefCell::new(alloc::vec::Vec::new()) };
    }

    /// A spare ring of `capacity` events, emptied.
    #[cfg_attr(not(all(feature = "std", not(loom))), allow(unused_variables))]
    pub(super) fn take(capacity: usize) -> Option<Box<OwnedRing>> {
        #[cfg(all(feature = "std", not(loom)))]
        {
            let mut owned = SPARE
                .try_with(|spare| spare.try_borrow_mut().ok()?.pop())
                .ok()
                .flatten()?;
            if owned.ring.capacity() != capacity {
                return None;
            }
            owned.ring.reset();
            #[cfg(feature = "tracing-full")]
            // SAFETY: the spare ring is owned here (`Box`), by no fiber.
            owned.sites.with_mut(|sites| unsafe { (*sites).clear() });
            Some(owned)
        }
        #[cfg(not(all(feature = "std", not(loom))))]
        None
    }

    /// Keeps a freed fiber's ring for the next fiber of this thread (or
    /// frees it).
    pub(super) fn give(owned: Box<OwnedRing>) {
        #[cfg(all(feature = "std", not(loom)))]
        {
            let mut slot = Some(owned);
            let _ = SPARE.try_with(|spare| {
                if let Ok(mut spare) = spare.try_borrow_mut()
                    && spare.len() < MAX_KEPT
                {
                    spare.extend(slot.take());
                }
            });
            drop(slot);
        }
        #[cfg(not(all(feature = "std", not(loom))))]
        drop(owned);
    }
}
