//! Fiber dumps: what a listing of live fibers shows, and the weak
//! references executors keep to make one.
//!
//! A dump never keeps a fiber alive and costs nothing while no one asks:
//! executors keep a [`WeakFiber`] per fiber in a [`WeakFibers`] list (one
//! word per fiber), and a dump upgrades each for a moment to read its
//! header (the state word, and with tracing the trace ring, which also
//! keeps the activity byte). The state word
//! tells active from suspended and a cancelable wait from a masked one
//! ([`FiberStatus`]); the activity byte, written by the tracing run-loop,
//! tells running, queued, sleeping, blocked and waiting apart
//! ([`FiberState`]).
//!
//! # Under loom
//!
//! The same code, in every build: it takes its weak references from the
//! sync shim, whose loom variant (loom's `Arc` has no weak references) is
//! a strong reference with the same API, raw pointers included
//! (`sync::Weak`). So under `--cfg loom` a listing *does* keep its fibers
//! alive: an entry holds its fiber until it is swept (the fiber has
//! completed: its state word says so, as a failed upgrade would), the
//! list is dropped, or the executor's registry is cleared
//! (`FiberRegistry::clear`, which every executor calls when it is dropped;
//! a loom model whose executor holds the registry must clear it before it
//! ends, or loom reports the fibers' `Arc`s as leaked). The protocol a
//! model checks, a fiber listed, run and completed while a dump reads it,
//! is the same either way (`executor/support/tests/loom.rs`).

use core::ptr::NonNull;

use alloc::vec::Vec;

use super::header::Header;
use super::id::FiberId;
use super::vtable::{Fiber, FiberInner};
use crate::engine::tracing::Trace;
use crate::executor::Executor;
use crate::sync::Weak;

/// What a fiber listing shows of a live fiber's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FiberStatus {
    /// Running on a thread, or queued to run.
    Active,
    /// Waiting for a callback, a timer or a data type, and cancelable while
    /// it waits.
    Suspended,
    /// Waiting in an uncancelable region, or for blocking work.
    SuspendedMasked,
}

/// What a fiber is doing, as a fiber dump shows it (Cats Effect's fiber
/// dump states, with the kind of wait spelled out).
///
/// Running, queued, sleeping and blocked are told apart only while the
/// fiber traces (io-core's `tracing` feature on and the mode `cached` or
/// `full`, or inside `traced()`); otherwise a dump shows `Running` for
/// an active fiber and `Waiting` for a suspended one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FiberState {
    /// Running on a thread now.
    Running = 0,
    /// Ready to run: started, resumed or yielding (`cede`, auto-yield), in
    /// its executor's queue.
    Queued = 1,
    /// Suspended in an async operation: a callback, a data type
    /// (`Deferred`, `Semaphore`, `Queue`, ...), a join, I/O, or `never`.
    Waiting = 2,
    /// Suspended in `sleep` until its timer fires.
    Sleeping = 3,
    /// Waiting for blocking work (`IO::blocking`) to return.
    Blocked = 4,
}

impl FiberState {
    /// The state of its byte (`as u8`), if it is one (read by
    /// `engine/tracing/fiber_on.rs`, which alone keeps the byte).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn from_byte(b: u8) -> Option<FiberState> {
        Some(match b {
            0 => FiberState::Running,
            1 => FiberState::Queued,
            2 => FiberState::Waiting,
            3 => FiberState::Sleeping,
            4 => FiberState::Blocked,
            _ => return None,
        })
    }

    /// The state's name in a dump (`RUNNING`, `QUEUED`, `WAITING`,
    /// `SLEEPING`, `BLOCKED`).
    pub fn name(self) -> &'static str {
        match self {
            FiberState::Running => "RUNNING",
            FiberState::Queued => "QUEUED",
            FiberState::Waiting => "WAITING",
            FiberState::Sleeping => "SLEEPING",
            FiberState::Blocked => "BLOCKED",
        }
    }
}

/// One live fiber in a fiber dump.
#[derive(Debug, Clone)]
pub struct FiberInfo {
    /// The fiber's number on its executor ([`Fiber::id`]): `#1` for the
    /// first fiber the executor made.
    pub id: FiberId,
    /// Whether it is active or waiting, and whether a wait is cancelable.
    pub status: FiberStatus,
    /// What it is doing.
    pub state: FiberState,
    /// Its last trace events (in the order they happened; the dump's
    /// `Display` prints them most recent first): `None` if it has no ring
    /// (mode `none`, tracing compiled out, or a fiber still in its first
    /// run, whose events are in its thread's scratch ring until it first
    /// suspends or yields). [In motion](Trace::in_motion) if the fiber ran
    /// while the dump read it.
    pub trace: Option<Trace>,
}

/// A snapshot of an executor's live fibers and its state, printed like Cats
/// Effect's fiber dump (one block per fiber: number, state, trace; then
/// the executor's counters).
///
/// ```text
/// fiber #2 WAITING
///  ├ flat_map @ src/main.rs:89:28 (app::deadlock)
///  ╰ Deferred::get @ src/main.rs:89:48
///
/// live fibers: 1, ...
/// ```
#[derive(Debug, Clone, Default)]
pub struct FiberDump {
    /// The live fibers (Spindle's executors list them in the order they
    /// were made: by number).
    pub fibers: Vec<FiberInfo>,
    /// Executor state as name and value (queue lengths, workers, ...).
    pub executor: Vec<(&'static str, u64)>,
}

impl FiberDump {
    /// The fibers in a given state.
    pub fn in_state(&self, state: FiberState) -> impl Iterator<Item = &FiberInfo> {
        self.fibers.iter().filter(move |f| f.state == state)
    }

    /// The value of the executor counter `name` (`"timers"`, a queue's
    /// length, ...), if the executor reports one by that name.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.executor
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, value)| *value)
    }
}

impl core::fmt::Display for FiberDump {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for fiber in &self.fibers {
            write!(f, "fiber {} {}", fiber.id, fiber.state.name())?;
            if fiber.status == FiberStatus::SuspendedMasked {
                f.write_str(" (uncancelable)")?;
            }
            if fiber.trace.as_ref().is_some_and(Trace::in_motion) {
                f.write_str(" (trace in motion: read while it ran)")?;
            }
            match &fiber.trace {
                Some(trace) if !trace.is_empty() => {
                    // Most recent first: what the fiber does now on top.
                    let n = trace.events().len();
                    for (i, event) in trace.events().iter().rev().enumerate() {
                        let branch = if i + 1 == n { '╰' } else { '├' };
                        write!(f, "\n {branch} {event}")?;
                    }
                }
                Some(_) => f.write_str("\n ╰ (no trace events yet)")?,
                None => f.write_str("\n ╰ (not traced)")?,
            }
            f.write_str("\n\n")?;
        }
        write!(f, "live fibers: {}", self.fibers.len())?;
        for (name, value) in &self.executor {
            write!(f, ", {name}: {value}")?;
        }
        Ok(())
    }
}

/// A weak reference to a fiber, for fiber listings: it never keeps the
/// fiber's program alive, and sees nothing once the fiber has completed or
/// been freed. (Under loom it is a strong reference: see the module doc.)
pub struct WeakFiber {
    /// From `Weak::into_raw` of a `Weak<FiberInner<X>>`.
    fiber: NonNull<()>,
    vtable: &'static WeakVTable,
    /// The fiber's number, copied when the reference was made: known
    /// also once the fiber is gone.
    id: FiberId,
}

/// Type-erased operations on a `Weak<FiberInner<X>>`.
struct WeakVTable {
    /// Number and status (the number from the header).
    status: unsafe fn(*const ()) -> Option<(FiberId, FiberStatus)>,
    info: unsafe fn(*const ()) -> Option<FiberInfo>,
    /// Requests cancellation, if the fiber is alive.
    cancel: unsafe fn(*const ()) -> bool,
    drop: unsafe fn(*const ()),
}

// SAFETY: a weak reference only touches the reference counts (atomic) and,
// after a successful upgrade, the header (shared by protocol).
unsafe impl Send for WeakFiber {}
// SAFETY: as above; every method takes `&self`.
unsafe impl Sync for WeakFiber {}

impl<X: Executor> FiberInner<X> {
    const WEAK_VTABLE: &'static WeakVTable = &WeakVTable {
        status: Self::weak_status,
        info: Self::weak_info,
        cancel: Self::weak_cancel,
        drop: Self::weak_drop,
    };

    /// # Safety
    /// * As for `weak_status`.
    unsafe fn weak_cancel(ptr: *const ()) -> bool {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // weak reference as it was.
        let weak =
            core::mem::ManuallyDrop::new(unsafe { Weak::from_raw(ptr.cast::<FiberInner<X>>()) });
        match weak.upgrade() {
            // Not completed (a completed fiber has no status).
            Some(strong) if strong.header.status().is_some() => {
                FiberInner::into_raw_ref(strong).request_cancel();
                true
            }
            _ => false,
        }
    }

    /// # Safety
    /// * As for `weak_status`.
    unsafe fn weak_info(ptr: *const ()) -> Option<FiberInfo> {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // weak reference as it was.
        let weak =
            core::mem::ManuallyDrop::new(unsafe { Weak::from_raw(ptr.cast::<FiberInner<X>>()) });
        weak.upgrade()?.header.info()
    }

    /// # Safety
    /// * `ptr` comes from `Weak::into_raw` of a `Weak<FiberInner<X>>` that
    ///   the caller still owns.
    unsafe fn weak_status(ptr: *const ()) -> Option<(FiberId, FiberStatus)> {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // weak reference as it was.
        let weak =
            core::mem::ManuallyDrop::new(unsafe { Weak::from_raw(ptr.cast::<FiberInner<X>>()) });
        let fiber = weak.upgrade()?;
        Some((fiber.header.id, fiber.header.status()?))
    }

    /// # Safety
    /// * As for `weak_status`; the caller gives up its weak reference.
    unsafe fn weak_drop(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        drop(unsafe { Weak::from_raw(ptr.cast::<FiberInner<X>>()) })
    }
}

impl WeakFiber {
    /// The fiber's number (the same as [`Fiber::id`]) and status, or
    /// `None` once it has completed or been freed.
    pub fn snapshot(&self) -> Option<(FiberId, FiberStatus)> {
        // SAFETY: we own the weak reference behind `fiber`.
        unsafe { (self.vtable.status)(self.fiber.as_ptr()) }
    }

    /// What a fiber dump shows of the fiber (state and trace), or `None`
    /// once it has completed or been freed.
    pub fn info(&self) -> Option<FiberInfo> {
        // SAFETY: we own the weak reference behind `fiber`.
        unsafe { (self.vtable.info)(self.fiber.as_ptr()) }
    }

    /// Requests the fiber's cancellation, as `FiberHandle::cancel` does
    /// without waiting for it to end: if the fiber waits interruptibly it
    /// is resumed (scheduled on its executor) to run its finalizers;
    /// otherwise it sees the request at its next cancellation check.
    /// `false`, doing nothing, for a fiber that is gone (completed or
    /// freed: [`is_gone`](WeakFiber::is_gone)). For tools that inject
    /// faults (spindle-sim cancels fibers at their suspension points with
    /// it); not on any hot path: nothing calls it unless such a tool does.
    pub fn request_cancel(&self) -> bool {
        // SAFETY: we own the weak reference behind `fiber`.
        unsafe { (self.vtable.cancel)(self.fiber.as_ptr()) }
    }

    /// Whether the fiber is gone (completed or freed): a listing may drop
    /// this reference.
    pub fn is_gone(&self) -> bool {
        self.snapshot().is_none()
    }

    /// The fiber's number on its executor (the same as [`Fiber::id`]),
    /// also after it is gone.
    pub fn id(&self) -> FiberId {
        self.id
    }
}

/// Weak references to many fibers, for an executor's fiber listing
/// (executors push one from [`Executor::fiber_listed`]).
///
/// Pushing sweeps out the references of fibers that are gone whenever the
/// list has doubled since the last sweep (amortized O(1) per push), so it
/// holds at most about twice the live fibers. It never keeps a fiber alive
/// (except under loom: see the module doc).
///
/// # Layout: one word per fiber
///
/// An executor's fibers all have one type, `FiberInner<X>`, so they share
/// one [`WeakFiber`] vtable: the list keeps that vtable once and, per
/// fiber, only the weak pointer (4 bytes on 32-bit targets, not a
/// [`WeakFiber`]'s 12). A fiber's number is read from its header when it
/// is listed (a fiber that is gone is not listed). A fiber pushed with
/// another vtable (a list shared by two executor types, or the same type's
/// vtable constant instantiated twice by the compiler) goes to a second
/// list of whole [`WeakFiber`]s: correct, only larger.
pub struct WeakFibers {
    /// The vtable of every entry of `thin` (the first pushed fiber's).
    vtable: Option<&'static WeakVTable>,
    /// Weak references (`Weak::into_raw`) whose vtable is `vtable`; each
    /// owns its weak count.
    thin: Vec<NonNull<()>>,
    /// Fibers with another vtable (rare; see the type's doc).
    others: Vec<WeakFiber>,
    sweep_at: usize,
}

// SAFETY: as for `WeakFiber`: a thin entry is a weak reference, which only
// touches the reference counts (atomic) and, after an upgrade, the header
// (shared by protocol); the list is mutated only through `&mut self`.
unsafe impl Send for WeakFibers {}
// SAFETY: as above; `&self` methods only read.
unsafe impl Sync for WeakFibers {}

impl Default for WeakFibers {
    fn default() -> Self {
        WeakFibers::new()
    }
}

impl core::fmt::Debug for WeakFibers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WeakFibers")
            .field("len", &(self.thin.len() + self.others.len()))
            .finish_non_exhaustive()
    }
}

impl WeakFibers {
    /// An empty list (no allocation).
    pub const fn new() -> Self {
        WeakFibers {
            vtable: None,
            thin: Vec::new(),
            others: Vec::new(),
            sweep_at: 0,
        }
    }

    /// Adds a fiber.
    pub fn push(&mut self, fiber: WeakFiber) {
        if self.thin.len() + self.others.len() >= self.sweep_at {
            self.sweep();
            self.sweep_at = ((self.thin.len() + self.others.len()) * 2).max(64);
        }
        let vtable = *self.vtable.get_or_insert(fiber.vtable);
        if core::ptr::eq(vtable, fiber.vtable) {
            // The list takes over the weak reference (not dropped here).
            let fiber = core::mem::ManuallyDrop::new(fiber);
            self.thin.push(fiber.fiber);
        } else {
            self.others.push(fiber);
        }
    }

    /// Drops the references of fibers that are gone.
    fn sweep(&mut self) {
        if let Some(vtable) = self.vtable {
            self.thin.retain(|&fiber| {
                // SAFETY: the list owns the weak reference behind `fiber`,
                // and `vtable` is its vtable (`push`).
                let live = unsafe { (vtable.status)(fiber.as_ptr()) }.is_some();
                if !live {
                    // SAFETY: as above; the entry leaves the list, and with
                    // it its weak reference, released once here.
                    unsafe { (vtable.drop)(fiber.as_ptr()) }
                }
                live
            });
        }
        self.others.retain(|fiber| !fiber.is_gone());
    }

    /// Number and status of every fiber of the list still alive.
    pub fn live(&self) -> impl Iterator<Item = (FiberId, FiberStatus)> + '_ {
        self.thin
            .iter()
            .filter_map(|fiber| {
                let vtable = self.vtable?;
                // SAFETY: the list owns the weak reference behind `fiber`,
                // and `vtable` is its vtable (`push`).
                unsafe { (vtable.status)(fiber.as_ptr()) }
            })
            .chain(self.others.iter().filter_map(WeakFiber::snapshot))
    }

    /// State and trace of every fiber of the list still alive (for fiber
    /// dumps).
    pub fn infos(&self) -> impl Iterator<Item = FiberInfo> + '_ {
        self.thin_infos()
            .chain(self.others.iter().filter_map(WeakFiber::info))
    }

    /// How many fibers are kept as one word and how many as a whole
    /// [`WeakFiber`] (for tests, which are not loom models).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn entries(&self) -> (usize, usize) {
        (self.thin.len(), self.others.len())
    }

    fn thin_infos(&self) -> impl Iterator<Item = FiberInfo> + '_ {
        self.thin.iter().filter_map(|fiber| {
            let vtable = self.vtable?;
            // SAFETY: the list owns the weak reference behind `fiber`, and
            // `vtable` is its vtable (`push`).
            unsafe { (vtable.info)(fiber.as_ptr()) }
        })
    }
}

impl Drop for WeakFibers {
    fn drop(&mut self) {
        if let Some(vtable) = self.vtable {
            for fiber in self.thin.drain(..) {
                // SAFETY: releases the weak reference this entry owns (its
                // vtable is `vtable`: `push`).
                unsafe { (vtable.drop)(fiber.as_ptr()) }
            }
        }
    }
}

impl Drop for WeakFiber {
    fn drop(&mut self) {
        // SAFETY: releases the weak reference this handle owns.
        unsafe { (self.vtable.drop)(self.fiber.as_ptr()) }
    }
}

impl core::fmt::Debug for WeakFiber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WeakFiber").field("id", &self.id()).finish()
    }
}

impl Header {
    /// What a fiber listing shows of this fiber.
    fn status(&self) -> Option<FiberStatus> {
        let state = self.state.snapshot();
        if state.is_completed() {
            None
        } else if state.is_waiting() {
            Some(if state.is_interruptible() {
                FiberStatus::Suspended
            } else {
                FiberStatus::SuspendedMasked
            })
        } else {
            Some(FiberStatus::Active)
        }
    }

    /// What a fiber dump shows of this fiber: its number, its state (`None`
    /// once it has completed), whether a wait is cancelable, and its trace.
    fn info(&self) -> Option<FiberInfo> {
        let status = self.status()?;
        let state = match status {
            FiberStatus::Active => match self.recorded_state() {
                // Set when it runs, and when it yields.
                Some(state @ (FiberState::Running | FiberState::Queued)) => state,
                // Still marked as waiting, but its wait has ended: resumed,
                // not run yet. (The state word keeps `SUSPENDED | DONE`
                // until the next suspension, so only the recorded state
                // tells a running fiber from a queued one.)
                _ if self.state.snapshot().is_resumed() => FiberState::Queued,
                _ => FiberState::Running,
            },
            FiberStatus::Suspended | FiberStatus::SuspendedMasked => match self.recorded_state() {
                Some(s @ (FiberState::Sleeping | FiberState::Blocked | FiberState::Waiting)) => s,
                _ => FiberState::Waiting,
            },
        };
        let trace = self.ring.get().map(spindle_trace::Ring::snapshot);
        Some(FiberInfo {
            id: self.id,
            status,
            state,
            trace,
        })
    }

    fn recorded_state(&self) -> Option<FiberState> {
        crate::engine::tracing::Activity::get(&self.ring)
    }
}

impl<X: Executor> Fiber<X> {
    /// A weak reference for fiber listings (see [`WeakFiber`]).
    pub fn downgrade(&self) -> WeakFiber {
        let weak = crate::sync::downgrade(&self.inner);
        let ptr = Weak::into_raw(weak) as *mut ();
        WeakFiber {
            // SAFETY: the weak reference points at a live allocation.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: FiberInner::<X>::WEAK_VTABLE,
            id: self.id(),
        }
    }
}

/// `serde::Serialize` for fiber dumps (feature `serde`): what a dump
/// served as JSON shows.
///
/// ```text
/// { "fibers": [ { "id": 2, "status": "suspended", "state": "WAITING",
///                 "trace": { "events": [ { "op": "Deferred::get",
///                   "file": "src/main.rs", "line": 89, "column": 48,
///                   "function": "app::deadlock" } ],
///                   "omitted": 0, "in_motion": false } } ],
///   "executor": { "timers": 0, "ready queue": 1 } }
/// ```
///
/// * `id`: the fiber's number ([`FiberId::get`]; 0 on an executor that
///   numbers none).
/// * `status`: `"active"`, `"suspended"` or `"suspended_masked"`
///   ([`FiberStatus`]); `state`: [`FiberState::name`].
/// * `trace`: `null` when the fiber has no ring; otherwise spindle-trace's
///   `Trace` (events oldest first, each with its operation, source
///   location and the function its closure was written in).
/// * `executor`: the executor's counters by name, in the executor's order.
#[cfg(feature = "serde")]
mod serialize {
    use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};

    use super::{FiberDump, FiberInfo, FiberState, FiberStatus};
    use crate::fiber::id::FiberId;

    impl Serialize for FiberId {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_u32(self.get())
        }
    }

    impl Serialize for FiberStatus {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let (index, name) = match self {
                FiberStatus::Active => (0, "active"),
                FiberStatus::Suspended => (1, "suspended"),
                FiberStatus::SuspendedMasked => (2, "suspended_masked"),
            };
            serializer.serialize_unit_variant("FiberStatus", index, name)
        }
    }

    impl Serialize for FiberState {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_unit_variant("FiberState", *self as u32, self.name())
        }
    }

    impl Serialize for FiberInfo {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut info = serializer.serialize_struct("FiberInfo", 4)?;
            info.serialize_field("id", &self.id)?;
            info.serialize_field("status", &self.status)?;
            info.serialize_field("state", &self.state)?;
            info.serialize_field("trace", &self.trace)?;
            info.end()
        }
    }

    /// The executor's counters as a map, in its order.
    struct Counters<'a>(&'a [(&'static str, u64)]);

    impl Serialize for Counters<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut map = serializer.serialize_map(Some(self.0.len()))?;
            for (name, value) in self.0 {
                map.serialize_entry(name, value)?;
            }
            map.end()
        }
    }

    impl Serialize for FiberDump {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut dump = serializer.serialize_struct("FiberDump", 2)?;
            dump.serialize_field("fibers", self.fibers.as_slice())?;
            dump.serialize_field("executor", &Counters(&self.executor))?;
            dump.end()
        }
    }
}
