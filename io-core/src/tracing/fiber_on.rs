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

    /// The fiber's trace now, as the fiber itself sees it (with full mode's
    /// backtraces): `run`'s ring while a run records (it may be the
    /// thread's scratch ring, not yet the fiber's), its own ring otherwise.
    pub(crate) fn snapshot(&self, run: Option<&OwnedRing>, slot: &RingSlot) -> Trace {
        // SAFETY: called by the fiber (on the thread running it), the only
        // one that touches the sites.
        run.or_else(|| slot.get_owned())
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
    /// Records `op` at `site`: two relaxed stores into the ring and its
    /// count (`ring.rs`), and in full mode the site with its backtrace.
    #[inline(always)]
    pub(crate) fn record(&self, op: &'static Op, site: &Site) {
        let _index = self.ring.push(op, site.location());
        #[cfg(feature = "tracing-full")]
        if site.has_backtrace() {
            self.keep_site(_index, site);
        }
    }

    fn new_boxed(capacity: usize) -> alloc::boxed::Box<OwnedRing> {
        alloc::boxed::Box::new(OwnedRing {
            ring: spindle_trace::Ring::new(capacity),
            #[cfg(feature = "tracing-full")]
            sites: crate::sync::UnsafeCell::new(alloc::vec::Vec::new()),
        })
    }

    /// Empties the ring for another fiber (the caller owns it).
    fn reset(&mut self) {
        self.ring.reset();
        #[cfg(feature = "tracing-full")]
        // SAFETY: the ring is owned here (`&mut`), by no fiber.
        self.sites.with_mut(|sites| unsafe { (*sites).clear() });
    }

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

    /// Starts a run of the fiber that records (`ring.rs`'s protocol): into
    /// the fiber's own ring if it has one, otherwise into the thread's
    /// scratch ring, which the fiber adopts only if it recorded and is
    /// still alive when the run ends ([`Run`]'s `Drop`). A fiber that ends
    /// within its first run (most short fibers) never gets a ring of its
    /// own, and is traced all the same.
    #[inline]
    pub(crate) fn begin_run(&self, capacity: impl FnOnce() -> usize) -> Run<'_> {
        let own = self.ring.load(crate::sync::Ordering::Relaxed);
        let (ring, scratch) = match core::ptr::NonNull::new(own) {
            Some(own) => (own, false),
            None => (scratch::take(capacity()), true),
        };
        // SAFETY: the fiber's own ring lives as long as its header; a
        // scratch ring is owned by the `Run` until it is dropped.
        let token = unsafe { ring.as_ref() }.ring.begin_run();
        Run {
            ring,
            token: core::mem::ManuallyDrop::new(token),
            scratch,
            slot: self,
            completed: core::cell::Cell::new(false),
        }
    }

    /// Publishes `ring` as the fiber's own (Release: a dump that sees the
    /// pointer sees an initialised ring).
    fn publish(&self, ring: core::ptr::NonNull<OwnedRing>) {
        self.ring
            .store(ring.as_ptr(), crate::sync::Ordering::Release);
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

/// One run of a fiber that records (from [`RingSlot::begin_run`]): the
/// ring it records into, and what becomes of it when the run ends (also by
/// a panic): the ring's run is closed for dumps, and a scratch ring is
/// adopted by the fiber (it recorded and lives on) or given back to the
/// thread.
pub(crate) struct Run<'a> {
    ring: core::ptr::NonNull<OwnedRing>,
    token: core::mem::ManuallyDrop<spindle_trace::RunToken>,
    scratch: bool,
    slot: &'a RingSlot,
    completed: core::cell::Cell<bool>,
}

impl Run<'_> {
    /// The ring this run records into.
    #[inline(always)]
    pub(crate) fn ring(&self) -> &OwnedRing {
        // SAFETY: see `begin_run`: alive as long as `self`.
        unsafe { self.ring.as_ref() }
    }

    /// The fiber completed in this run: it will never record again.
    #[inline(always)]
    pub(crate) fn completed(&self) {
        self.completed.set(true);
    }
}

impl Drop for Run<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: taken once, here.
        let token = unsafe { core::mem::ManuallyDrop::take(&mut self.token) };
        self.ring().ring.end_run(token);
        if self.scratch {
            if !self.completed.get() && !self.ring().ring.is_empty() {
                // The fiber lives on with events: the ring becomes its own.
                self.slot.publish(self.ring);
            } else {
                // SAFETY: a scratch ring comes from `Box::into_raw`
                // (`scratch::take`) and is owned by this run alone: it was
                // never published.
                scratch::give(unsafe { alloc::boxed::Box::from_raw(self.ring.as_ptr()) });
            }
        }
    }
}

/// The scratch ring of a thread: a fiber without a ring of its own records
/// its run into it (see [`RingSlot::begin_run`]). Without `std` there are
/// no thread-locals: a fiber gets a ring of its own on its first run.
mod scratch {
    use super::{OwnedRing, spare_rings};
    use alloc::boxed::Box;
    use core::ptr::NonNull;

    #[cfg(all(feature = "std", not(loom)))]
    std::thread_local! {
        static SCRATCH: core::cell::Cell<Option<Box<OwnedRing>>> =
            const { core::cell::Cell::new(None) };
    }

    /// A scratch ring of `capacity` for a run: the thread's, a spare one,
    /// or a new one.
    #[inline]
    pub(super) fn take(capacity: usize) -> NonNull<OwnedRing> {
        // `None` inside a nested run on the same thread (a fiber that
        // blocks on another executor): that run gets a ring of its own.
        #[cfg(all(feature = "std", not(loom)))]
        let kept = SCRATCH
            .try_with(core::cell::Cell::take)
            .ok()
            .flatten()
            .filter(|ring| ring.ring.capacity() == capacity);
        #[cfg(not(all(feature = "std", not(loom))))]
        let kept: Option<Box<OwnedRing>> = None;
        let ring = kept
            .or_else(|| spare_rings::take(capacity))
            .unwrap_or_else(|| OwnedRing::new_boxed(capacity));
        NonNull::from(Box::leak(ring))
    }

    /// A scratch ring whose run ended with nothing to keep: emptied and
    /// kept for the thread's next run.
    pub(super) fn give(mut ring: Box<OwnedRing>) {
        ring.reset();
        #[cfg(all(feature = "std", not(loom)))]
        {
            let mut ring = Some(ring);
            let _ = SCRATCH.try_with(|slot| {
                if let Some(old) = slot.replace(ring.take()) {
                    spare_rings::give(old);
                }
            });
            if let Some(ring) = ring {
                spare_rings::give(ring);
            }
        }
        #[cfg(not(all(feature = "std", not(loom))))]
        spare_rings::give(ring);
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
            owned.reset();
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
