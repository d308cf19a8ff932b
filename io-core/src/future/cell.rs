//! The wake cell: what a [`Waker`](core::task::Waker) handed to a future shares with the fiber
//! that polls it, and the two hand-written waker vtables over it.
//!
//! # The state word
//!
//! A cell is one state word and one slot for the fiber's callback:
//!
//! * `NOTIFIED`: a wake happened since the fiber last began a poll.
//! * `LOCKED`: someone (the fiber, one waker, or the last waker's release:
//!   see "Wakers that are gone") owns the slot for a few instructions. Nobody ever *waits* for this bit: a waker that finds it
//!   set leaves `NOTIFIED` behind and returns; the fiber that finds it set
//!   (or finds it was set while it held the slot) resumes itself. So a wake
//!   from an interrupt handler that interrupted the fiber in the middle of a
//!   registration never spins.
//! * `CLOSED`: the future is gone (completed, canceled, panicked); wakes do
//!   nothing and the slot is empty for good.
//!
//! # The protocol
//!
//! The fiber, per poll:
//!
//! 1. `begin_poll`: clears `NOTIFIED` (`Acquire`: what a waker did before its
//!    wake is visible to the poll that follows).
//! 2. Polls. If the future is `Pending` and `NOTIFIED` is already set, it
//!    polls again after a cede, without registering.
//! 3. `register(callback)`: `fetch_or(LOCKED)`. If `NOTIFIED` was set, a
//!    wake came since step 1: it resumes itself through the callback (so
//!    the suspension ends at once). If only `LOCKED` was, someone holds
//!    the slot with no wake to answer: see "A waker that holds the slot".
//!    Otherwise it stores the callback, and unlocks with `fetch_and`; if
//!    that shows `NOTIFIED`, a waker came while the slot was held and gave
//!    up, so the fiber runs the waker's part itself (`wake`).
//!
//! A waker (any thread, any number of times, also during the poll):
//! `fetch_or(NOTIFIED | LOCKED)`. If neither `LOCKED` nor `CLOSED` was set,
//! it owns the slot: it takes the callback, unlocks, and resumes the fiber
//! with it (`Executor::schedule_fiber`, through the callback).
//!
//! # Why no wake is lost
//!
//! Every operation is a read-modify-write of the one word, so they are
//! totally ordered. Take a wake `W` whose `fetch_or` comes after the
//! fiber's `begin_poll` (one that comes before is answered by that poll).
//! Then the fiber's register `fetch_or(LOCKED)` either comes after `W`
//! (sees `NOTIFIED`: resumes itself) or before it. If before, `W` either
//! finds the slot unlocked and takes the stored callback (resumes the
//! fiber), or finds it locked: by the fiber (whose unlock then sees
//! `NOTIFIED` and wakes in `W`'s place), or by another waker `W'`, which
//! locked after the fiber's unlock and therefore takes the stored callback
//! itself. In each case the fiber is resumed, and polls again after `W`.
//!
//! The last waker's release (below) holds the slot like a waker; it passes
//! a pending `NOTIFIED` on to the callback it takes, so the argument holds
//! for it too.
//!
//! A callback of an earlier suspension left in the slot (the fiber resumed
//! itself) is harmless: completing it finds a past generation and does
//! nothing (fiber protocol, `fiber/mod.rs`). Spurious and repeated wakes only
//! cost a poll; a wake after `CLOSED` touches nothing but the word.
//!
//! # A waker that holds the slot
//!
//! A waker holds `LOCKED` for a few instructions, but its thread can be
//! descheduled in the middle of them, for milliseconds. A registration
//! that finds `LOCKED` without `NOTIFIED` (the holder's wake, if it is a
//! waker, came before the poll began and was answered by it) cannot store
//! its callback, and there is no wake to answer either: the fiber ends the
//! wait at once, marks the cell `BUSY`, and its driver, seeing `BUSY`
//! instead of polling, cedes and registers again. So the future is polled
//! once per wake, however long a waker holds the slot (earlier, the fiber
//! polled the future again at each failed registration: tens of thousands
//! of polls of a future woken 800 times, when a waker thread was
//! descheduled while it held the slot); the fiber still spins, through
//! cedes, until the holder lets go, as a task over `futures`'
//! `AtomicWaker` is polled again while a wake holds its waker. A wake that
//! comes meanwhile sets `NOTIFIED`, which the next registration sees.
//!
//! With `std` only: without it (a microcontroller, where a waker is an
//! interrupt handler that never yields to the fiber mid-wake) the fiber
//! resumes itself and polls again, the old rule, and the flash stays as
//! it was.
//!
//! # Wakers that are gone
//!
//! The fiber's program owns the cell (through the future's driver) and the
//! cell's slot owns a callback, which owns the fiber: a cycle, which the
//! wakers must not make permanent. A suspended fiber whose callbacks are
//! all dropped is garbage (fiber protocol), and a fiber whose future
//! dropped every waker must be too (so `try_block_on` can say `Deadlock`,
//! and nothing leaks). So the cell counts its owned wakers (clones; the
//! fiber's borrowed wakers do not count), and the last one dropped takes
//! the callback out of the slot and drops it. If the fiber holds the slot
//! at that moment (registering), the last waker leaves it, and the fiber,
//! after it unlocks, sees the count at zero and does the same. A waker
//! made during a poll (the only other way the count can rise from zero)
//! can only find a callback of a suspension that has ended already.
//!
//! That release holds the slot too, so it must not swallow a wake: if
//! `NOTIFIED` is set when it unlocks, the callback it took is resumed
//! instead of dropped (a waker that woke and was then dropped may have
//! found the slot held by the fiber, and the fiber's own attempt to act
//! for it may have found the slot held by this release). The loom models
//! (`tests/loom.rs`) found exactly that interleaving in a first version.
//!
//! # Lazy allocation
//!
//! The first poll of a future does not allocate a cell: it polls with a
//! waker over a [`LazyWake`] on the fiber's native stack. A wake by
//! reference during that poll sets a flag; cloning that waker (which any
//! future that will be woken later must do, as the borrowed waker dies with
//! the poll) allocates the shared cell then, once, and hands out wakers over
//! it. A future that is ready at once, or woken only during its poll, never
//! allocates a cell.

use core::ptr;
use core::task::{RawWaker, RawWakerVTable};

use crate::engine::erased::Value;
use crate::fiber::RawCallback;
use crate::sync::{Arc, AtomicPtr, AtomicUsize, Ordering, UnsafeCell};

/// A waker owns the slot, or the fiber does.
const LOCKED: usize = 1;
/// A wake since the fiber last began a poll.
const NOTIFIED: usize = 2;
/// The future is gone: wakes do nothing.
const CLOSED: usize = 4;
/// The fiber's last registration found the slot held with no wake to
/// answer (see "A waker that holds the slot"). Set and cleared by the
/// fiber alone.
#[cfg(feature = "std")]
const BUSY: usize = 8;

/// What the cell's slot holds: something that resumes the fiber once.
pub(crate) trait Resume: Send + 'static {
    /// Resumes the fiber (does nothing if that suspension already ended).
    fn resume(self);
}

impl Resume for RawCallback {
    fn resume(self) {
        // A lost claim means the suspension already ended (the fiber resumed
        // itself, or was canceled): nothing to do.
        let _ = self.complete(Ok(Value::unit()));
    }
}

/// The cell shared by a future's wakers and its fiber (module doc).
pub(crate) struct WakeCell<C> {
    state: AtomicUsize,
    /// How many owned wakers exist (the fiber's borrowed ones do not
    /// count): when the last goes, nothing can wake the fiber any more.
    wakers: AtomicUsize,
    /// Read and written only by whoever set `LOCKED` (and saw it clear).
    slot: UnsafeCell<Option<C>>,
}

// SAFETY: the slot is reached only by the one thread that owns `LOCKED`
// (acquired with `Acquire`, released with `Release`), so the cell moves `C`
// between threads but never shares it: `C: Send` suffices.
unsafe impl<C: Send> Send for WakeCell<C> {}
// SAFETY: as above.
unsafe impl<C: Send> Sync for WakeCell<C> {}

impl<C: Resume> WakeCell<C> {
    /// An empty cell: not notified, nothing registered.
    pub(crate) fn new() -> Self {
        WakeCell {
            state: AtomicUsize::new(0),
            wakers: AtomicUsize::new(0),
            slot: UnsafeCell::new(None),
        }
    }

    /// The fiber, before each poll: forgets the wakes this poll answers.
    #[inline]
    pub(crate) fn begin_poll(&self) {
        self.state.fetch_and(!NOTIFIED, Ordering::Acquire);
    }

    /// The fiber, before it polls: whether its last registration found
    /// the slot held with no wake to answer (and forgets it). It then
    /// registers again instead of polling.
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn take_busy(&self) -> bool {
        if self.state.load(Ordering::Relaxed) & BUSY == 0 {
            return false;
        }
        self.state.fetch_and(!BUSY, Ordering::Relaxed);
        true
    }

    /// The fiber, after a `Pending` poll: whether a wake came since
    /// [`begin_poll`](WakeCell::begin_poll).
    #[inline]
    pub(crate) fn notified(&self) -> bool {
        self.state.load(Ordering::Acquire) & NOTIFIED != 0
    }

    /// The fiber, after a `Pending` poll: leaves `callback` for the next
    /// wake, or resumes through it at once if a wake came since
    /// [`begin_poll`](WakeCell::begin_poll) (module doc, step 3).
    pub(crate) fn register(&self, callback: C) {
        let prev = self.state.fetch_or(LOCKED, Ordering::Acquire);
        // Without `std` a held slot resumes too (module doc, "A waker that
        // holds the slot").
        let resume_now = if cfg!(feature = "std") {
            prev & NOTIFIED != 0
        } else {
            prev & (LOCKED | NOTIFIED) != 0
        };
        if resume_now {
            if prev & LOCKED == 0 {
                self.state.fetch_and(!LOCKED, Ordering::Release);
            }
            callback.resume();
            return;
        }
        #[cfg(feature = "std")]
        if prev & LOCKED != 0 {
            // Held, and no wake since the poll began: the holder's wake (if
            // it is a waker) was answered by that poll. Register again
            // later, without a poll (module doc, "A waker that holds the
            // slot").
            self.state.fetch_or(BUSY, Ordering::Relaxed);
            callback.resume();
            return;
        }
        // SAFETY: we set `LOCKED` and it was clear: we own the slot until
        // the `fetch_and` below.
        let stale = self
            .slot
            .with_mut(|slot| unsafe { (*slot).replace(callback) });
        let prev = self.state.fetch_and(!LOCKED, Ordering::AcqRel);
        drop(stale);
        if prev & NOTIFIED != 0 {
            // A waker found the slot locked and gave up: do its part.
            self.wake();
        } else if self.wakers.load(Ordering::Acquire) == 0 {
            // No waker is left (or the last one went while we held the
            // slot and left the callback to us): nothing can wake the
            // fiber, so let go of it (module doc, "Wakers that are gone").
            self.release();
        }
    }

    /// An owned waker was made (a clone).
    pub(crate) fn waker_made(&self) {
        // `Relaxed`, as `Arc`'s increment: a waker is made from a live one
        // (so the count is not zero, and the decrement that will undo this
        // one is ordered after it on this counter), or by the poll, before
        // the fiber's own later check of the count in program order.
        self.wakers.fetch_add(1, Ordering::Relaxed);
    }

    /// An owned waker was dropped (or consumed by `wake`): the last one
    /// lets go of the fiber's callback.
    pub(crate) fn waker_dropped(&self) {
        if self.wakers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.release();
        }
    }

    /// Drops the stored callback if no owned waker exists, unless someone
    /// holds the slot (only the fiber can then: it checks the count after
    /// it unlocks) or the cell is closed.
    fn release(&self) {
        // `AcqRel`: if the fiber holds the slot, its unlock reads this write
        // and so sees the count this waker left (it then releases).
        let prev = self.state.fetch_or(LOCKED, Ordering::AcqRel);
        if prev & LOCKED != 0 {
            return;
        }
        let callback = if self.wakers.load(Ordering::Acquire) == 0 {
            // SAFETY: we set `LOCKED` and it was clear: we own the slot
            // until the `fetch_and` below.
            self.slot.with_mut(|slot| unsafe { (*slot).take() })
        } else {
            None
        };
        let prev = self.state.fetch_and(!LOCKED, Ordering::AcqRel);
        if let Some(callback) = callback {
            if prev & NOTIFIED != 0 {
                // A wake came since the poll began, and its waker (or the
                // fiber acting for it) may have found the slot held by us:
                // the callback is still owed that wake. (A callback of an
                // ended suspension ignores it.)
                callback.resume();
            }
        }
    }

    /// A waker: resumes the fiber if it waits, else leaves `NOTIFIED` for it.
    pub(crate) fn wake(&self) {
        let prev = self.state.fetch_or(NOTIFIED | LOCKED, Ordering::AcqRel);
        if prev & (LOCKED | CLOSED) != 0 {
            return;
        }
        // SAFETY: we set `LOCKED` and it was clear: we own the slot until
        // the `fetch_and` below.
        let callback = self.slot.with_mut(|slot| unsafe { (*slot).take() });
        self.state.fetch_and(!LOCKED, Ordering::Release);
        if let Some(callback) = callback {
            callback.resume();
        }
    }

    /// The fiber, when the future is gone: later wakes do nothing, and the
    /// callback (a reference to the fiber) is dropped now, unless a waker
    /// holds the slot (it then takes the callback and drops it).
    pub(crate) fn close(&self) {
        let prev = self.state.fetch_or(CLOSED | LOCKED, Ordering::AcqRel);
        if prev & LOCKED == 0 {
            // SAFETY: we set `LOCKED` and it was clear; `CLOSED` keeps every
            // later waker out of the slot for good.
            let callback = self.slot.with_mut(|slot| unsafe { (*slot).take() });
            drop(callback);
        }
    }
}

// ----- wakers ----------------------------------------------------------------

/// The cell of a fiber's future.
pub(crate) type FiberCell = WakeCell<RawCallback>;

/// Wakers over an `Arc<FiberCell>`: the data pointer is `Arc::into_raw`'s
/// (or `Arc::as_ptr`'s, for the fiber's borrowed waker) and each owned waker
/// owns one strong count.
static CELL_VTABLE: RawWakerVTable =
    RawWakerVTable::new(cell_clone, cell_wake, cell_wake_by_ref, cell_drop);

/// # Safety
/// `data` is a pointer to the `FiberCell` of a live `Arc` (the waker being
/// cloned holds, or borrows, a strong count).
unsafe fn cell_clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` came from an `Arc<FiberCell>` that is alive while the
    // waker being cloned exists (function contract); the new waker owns the
    // count added here.
    unsafe { Arc::increment_strong_count(data.cast::<FiberCell>()) };
    // SAFETY: as above, the cell is alive.
    unsafe { &*data.cast::<FiberCell>() }.waker_made();
    RawWaker::new(data, &CELL_VTABLE)
}

/// # Safety
/// `data` is an owned waker's pointer: it owns one strong count.
unsafe fn cell_wake(data: *const ()) {
    // SAFETY: the waker being consumed owns this strong count (function
    // contract); it is released when `cell` drops.
    let cell = unsafe { Arc::from_raw(data.cast::<FiberCell>()) };
    cell.wake();
    cell.waker_dropped();
}

/// # Safety
/// As for [`cell_clone`].
unsafe fn cell_wake_by_ref(data: *const ()) {
    // SAFETY: the cell is alive while the waker exists (function contract).
    let cell = unsafe { &*data.cast::<FiberCell>() };
    cell.wake();
}

/// # Safety
/// As for [`cell_wake`].
unsafe fn cell_drop(data: *const ()) {
    // SAFETY: the waker being dropped owns this strong count.
    let cell = unsafe { Arc::from_raw(data.cast::<FiberCell>()) };
    cell.waker_dropped();
}

/// An owned waker over `cell` (one more strong count and waker count).
pub(crate) fn clone_cell_waker(cell: &Arc<FiberCell>) -> RawWaker {
    // SAFETY: `cell` is a live `Arc`, so its pointer satisfies
    // `cell_clone`'s contract.
    unsafe { cell_clone(Arc::as_ptr(cell).cast::<()>()) }
}

/// The first poll's waker target, on the fiber's native stack: no cell yet
/// (module doc, "Lazy allocation"). One word: [`LAZY_NONE`], [`LAZY_WOKEN`]
/// (woken by reference while there was no cell), or the `Arc::into_raw`
/// pointer of the cell a clone installed (whose count this owns; a cell is
/// aligned, so a pointer is never 0 or 1).
pub(crate) struct LazyWake {
    state: AtomicPtr<FiberCell>,
}

/// No cell, not woken (the address of the state's null pointer).
const LAZY_NONE: usize = 0;
/// Woken by reference while there was no cell (the address of the state's
/// sentinel pointer, [`woken`]).
const LAZY_WOKEN: usize = 1;

/// The sentinel pointer of [`LAZY_WOKEN`] (no provenance: never read).
fn woken() -> *mut FiberCell {
    ptr::without_provenance_mut(LAZY_WOKEN)
}

impl LazyWake {
    /// No cell, not woken.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        LazyWake {
            state: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The installed cell, installing a new one if there is none (wakers may
    /// be cloned on several threads at once during the poll: one install
    /// wins, the others free theirs). A wake by reference that came before
    /// the install is handed to the new cell.
    fn cell_or_install(&self) -> *const FiberCell {
        let mut current = self.state.load(Ordering::Acquire);
        if current.addr() > LAZY_WOKEN {
            return current;
        }
        let fresh = Arc::into_raw(Arc::new(FiberCell::new())).cast_mut();
        loop {
            match self
                .state
                .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(before) => {
                    if before.addr() == LAZY_WOKEN {
                        // SAFETY: `fresh` is alive: this `LazyWake` owns its
                        // count now.
                        unsafe { &*fresh }.wake();
                    }
                    return fresh;
                }
                Err(now) if now.addr() > LAZY_WOKEN => {
                    // SAFETY: `fresh` came from `into_raw` above and was
                    // never shared: we own its only count.
                    drop(unsafe { Arc::from_raw(fresh) });
                    return now;
                }
                // Woken meanwhile: try again over the new state.
                Err(now) => current = now,
            }
        }
    }

    /// An owned waker over the cell, installing it first if there is none
    /// (the poll waker's clone, `block.rs`).
    pub(crate) fn clone_waker(&self) -> RawWaker {
        let cell = self.cell_or_install();
        // SAFETY: `cell` is the `into_raw` pointer of an `Arc` whose count
        // the `LazyWake` owns (alive as long as it is); `cell_clone` adds the
        // count the new waker owns.
        unsafe { cell_clone(cell.cast::<()>()) }
    }

    /// A wake by reference during the poll: to the cell if a clone
    /// installed one, else a flag for [`finish`](LazyWake::finish).
    pub(crate) fn wake_by_ref(&self) {
        match self.state.compare_exchange(
            ptr::null_mut(),
            woken(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {}
            Err(now) if now.addr() == LAZY_WOKEN => {}
            // SAFETY: a state above `LAZY_WOKEN` is an installed cell whose
            // count the `LazyWake` owns: alive while the `LazyWake` is.
            Err(cell) => unsafe { &*cell }.wake(),
        }
    }

    /// Whether nothing happened to it: no clone and no wake (the common
    /// case of a block that only awaits programs).
    #[inline(always)]
    pub(crate) fn untouched(&self) -> bool {
        // `Relaxed`: called after the poll, when no waker over this
        // `LazyWake` exists any more (see `finish`).
        self.state.load(Ordering::Acquire).is_null()
    }

    /// After the poll: the cell, if a clone installed one, and whether the
    /// future was woken by reference before there was a cell.
    #[inline]
    pub(crate) fn finish(&mut self) -> (Option<Arc<FiberCell>>, bool) {
        // A load and a store, not a swap: `&mut self` says no waker over
        // this `LazyWake` exists any more (they lived only during the poll,
        // which happened before), so nothing races this.
        let state = self.state.load(Ordering::Acquire);
        match state.addr() {
            LAZY_NONE => (None, false),
            LAZY_WOKEN => {
                self.state.store(ptr::null_mut(), Ordering::Relaxed);
                (None, true)
            }
            _ => {
                self.state.store(ptr::null_mut(), Ordering::Relaxed);
                // SAFETY: an installed pointer came from `into_raw`; the
                // `LazyWake` owned its count, which moves to the returned
                // `Arc` (the store above leaves nothing behind to release
                // it twice).
                (Some(unsafe { Arc::from_raw(state) }), false)
            }
        }
    }
}

impl Drop for LazyWake {
    /// A poll that panicked leaves an installed cell here: close it (its
    /// wakers then do nothing) and release the count.
    #[inline]
    fn drop(&mut self) {
        if self.state.load(Ordering::Acquire).addr() > LAZY_WOKEN {
            if let (Some(cell), _) = self.finish() {
                cell.close();
            }
        }
    }
}
