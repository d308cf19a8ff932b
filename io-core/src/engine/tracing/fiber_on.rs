//! Fiber tracing compiled in (the `tracing` feature): the fiber's tracing
//! state, its ring slot (read by dumps), and its activity byte. The other
//! variant, `fiber_off.rs`, has the same API with nothing inside; `mod.rs`
//! picks one by `cfg`.

use crate::config::FiberConfig;
use crate::fiber::FiberState;
use spindle_trace::Trace;

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

/// What a fiber does now, for fiber dumps: [`FiberState`] as a byte,
/// kept in the ring's owner byte ([`spindle_trace::Ring::mark`]: state + 1,
/// 0 for nothing recorded), so that it costs the fiber no byte of its own.
/// Written by the tracing run-loop into the ring of its run (the scratch
/// ring's byte travels with it when the fiber adopts it).
pub(crate) struct Activity;

impl Activity {
    /// Records what the fiber does now (the fiber itself, relaxed).
    #[inline(always)]
    pub(crate) fn set(ring: &OwnedRing, state: FiberState) {
        ring.set_mark(state as u8 + 1);
    }

    /// What the fiber last recorded (a dump, on any thread): `None` if it
    /// has no ring of its own.
    pub(crate) fn get(slot: &RingSlot) -> Option<FiberState> {
        FiberState::from_byte(slot.get()?.mark().checked_sub(1)?)
    }
}

/// The fiber's trace now, as the fiber itself sees it (with full mode's
/// backtraces): `run`'s ring while a run records (it may be the thread's
/// scratch ring, not yet the fiber's), its own ring otherwise
/// ([`FiberFlags::snapshot`](super::FiberFlags::snapshot)).
pub(crate) fn snapshot(run: Option<&OwnedRing>, slot: &RingSlot) -> Trace {
    // SAFETY: called by the fiber (on the thread running it), the only
    // one that touches the sites.
    run.or_else(|| slot.get())
        .map_or_else(Trace::empty, |ring| unsafe { ring.owner_snapshot() })
}

/// A fiber's ring: header and slots in one allocation
/// ([`spindle_trace::Ring`]), which also keeps full mode's sites (with
/// backtraces), touched only by the fiber.
pub(crate) type OwnedRing = spindle_trace::Ring;

/// The one owner of a ring not published in a fiber's header (a scratch
/// or spare ring).
type RingBox = spindle_trace::RingBox;

/// The fiber header's pointer to its ring: null until the fiber records
/// its first event; read by fiber dumps on any thread.
/// (A [`RingBox::into_raw`] pointer: one word.)
pub(crate) struct RingSlot {
    ring: crate::sync::AtomicPtr<()>,
}

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
            None => (scratch::take(capacity()).into_raw(), true),
        };
        // SAFETY: the fiber's own ring lives as long as its header; a
        // scratch ring is owned by the `Run` until it is dropped.
        let token = unsafe { OwnedRing::from_raw(ring) }.begin_run();
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
    fn publish(&self, ring: core::ptr::NonNull<()>) {
        self.ring
            .store(ring.as_ptr(), crate::sync::Ordering::Release);
    }

    /// The ring, if made (the caller keeps the fiber alive; a dump on
    /// another thread reads it through its sequence lock).
    pub(crate) fn get(&self) -> Option<&OwnedRing> {
        let ring = core::ptr::NonNull::new(self.ring.load(crate::sync::Ordering::Acquire))?;
        // SAFETY: a non-null pointer is a published, live ring, freed only
        // when the header is dropped (not while `&self` lives).
        Some(unsafe { OwnedRing::from_raw(ring) })
    }
}

impl Drop for RingSlot {
    fn drop(&mut self) {
        let ring = self.ring.load(crate::sync::Ordering::Acquire);
        if let Some(ring) = core::ptr::NonNull::new(ring) {
            // SAFETY: made by `RingBox::into_raw` (`begin_run`) and
            // published once, taken once here; the fiber is being freed, so
            // no dump can read it any more.
            spare_rings::give(unsafe { RingBox::from_raw(ring) });
        }
    }
}

/// One run of a fiber that records (from [`RingSlot::begin_run`]): the
/// ring it records into, and what becomes of it when the run ends (also by
/// a panic): the ring's run is closed for dumps, and a scratch ring is
/// adopted by the fiber (it recorded and lives on) or given back to the
/// thread.
pub(crate) struct Run<'a> {
    /// A `RingBox::into_raw` pointer: the fiber's own ring, or a scratch
    /// ring this run owns.
    ring: core::ptr::NonNull<()>,
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
        unsafe { OwnedRing::from_raw(self.ring) }
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
        self.ring().end_run(token);
        if self.scratch {
            if !self.completed.get() && !self.ring().is_empty() {
                // The fiber lives on with events: the ring becomes its own.
                self.slot.publish(self.ring);
            } else {
                // SAFETY: a scratch ring comes from `RingBox::into_raw`
                // (`begin_run`) and is owned by this run alone: it was
                // never published.
                scratch::give(unsafe { RingBox::from_raw(self.ring) });
            }
        }
    }
}

/// The scratch ring of a thread: a fiber without a ring of its own records
/// its run into it (see [`RingSlot::begin_run`]). Without `std` there are
/// no thread-locals: a fiber gets a ring of its own on its first run.
mod scratch {
    use super::{OwnedRing, RingBox, spare_rings};

    #[cfg(all(feature = "std", not(loom)))]
    std::thread_local! {
        static SCRATCH: core::cell::Cell<Option<RingBox>> =
            const { core::cell::Cell::new(None) };
    }

    /// A scratch ring of `capacity` for a run: the thread's, a spare one,
    /// or a new one.
    #[inline]
    pub(super) fn take(capacity: usize) -> RingBox {
        // `None` inside a nested run on the same thread (a fiber that
        // blocks on another executor): that run gets a ring of its own.
        #[cfg(all(feature = "std", not(loom)))]
        let kept = SCRATCH
            .try_with(core::cell::Cell::take)
            .ok()
            .flatten()
            .filter(|ring| ring.capacity() == capacity);
        #[cfg(not(all(feature = "std", not(loom))))]
        let kept: Option<RingBox> = None;
        kept.or_else(|| spare_rings::take(capacity))
            .unwrap_or_else(|| OwnedRing::new(capacity))
    }

    /// A scratch ring whose run ended with nothing to keep: emptied and
    /// kept for the thread's next run.
    pub(super) fn give(mut ring: RingBox) {
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
    use super::RingBox;

    #[cfg(all(feature = "std", not(loom)))]
    const MAX_KEPT: usize = 64;

    // A ring is handed out as a fiber's published ring pointer, so it
    // keeps its allocation from fiber to fiber.
    #[cfg(all(feature = "std", not(loom)))]
    std::thread_local! {
        static SPARE: core::cell::RefCell<alloc::vec::Vec<RingBox>> =
            const { core::cell::RefCell::new(alloc::vec::Vec::new()) };
    }

    /// A spare ring of `capacity` events, emptied.
    #[cfg_attr(not(all(feature = "std", not(loom))), allow(unused_variables))]
    pub(super) fn take(capacity: usize) -> Option<RingBox> {
        #[cfg(all(feature = "std", not(loom)))]
        {
            let mut owned = SPARE
                .try_with(|spare| spare.try_borrow_mut().ok()?.pop())
                .ok()
                .flatten()?;
            if owned.capacity() != capacity {
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
    pub(super) fn give(owned: RingBox) {
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
