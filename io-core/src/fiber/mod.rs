//! Fibers: the run-loop's state, the suspension protocol and the handles
//! executors and callbacks hold.
//!
//! # Layout
//!
//! A fiber is one allocation, `FiberInner<X>`, shared through an `Arc`:
//!
//! * `header` (first field, `repr(C)`): the suspension state word, the
//!   slot where a callback leaves its result, and the join state (the
//!   outcome and the joiners of a fiber started with `IO::start`; see
//!   `handle`). It is the only part touched by other threads, and it does
//!   not depend on the executor type, so a [`Callback`] or a fiber handle
//!   can reach it through a type-erased pointer.
//! * `core`: the run-loop state (where the next run starts, the explicit
//!   continuation stack, the completion callback, the mask depth). Only the
//!   thread that runs the fiber touches it.
//! * `executor`: the fiber's executor `X`, for scheduling and timers.
//!
//! Starting a fiber is this one allocation. A suspended fiber holds it, its
//! continuation stack's buffer only if frames are pending (an empty stack's
//! buffer goes back to the thread when the fiber waits), and what its
//! pending frames and its suspension (a waiter entry, a timer) hold: with a
//! one-word executor, 216 bytes for the fiber (a unit test keeps it so).
//!
//! # Who owns the fiber
//!
//! Exactly one of the following holds a fiber that is not finished: an
//! executor queue (as a [`Fiber`] handle), the thread running it, or, while
//! it is suspended, the callbacks that can resume it (each [`Callback`] holds
//! a strong reference). A suspended fiber whose callbacks have all been
//! dropped can never resume; it is freed like any other garbage.
//!
//! # The suspension protocol
//!
//! The state word is `generation << 5 | CANCEL | INTERRUPTIBLE | DONE |
//! CLAIMED | SUSPENDED`. Each suspension (async, sleep, never) starts a new
//! *generation*; callbacks carry the generation they were made for, so a
//! callback of an earlier suspension, or a second call of the same callback,
//! finds either another generation or `CLAIMED` and is ignored.
//!
//! 1. The fiber starts generation `g`: the word becomes `g << 5`, keeping only
//!    `CANCEL` (a CAS, since a canceler may set that bit at any time), then
//!    runs the registration, which receives callbacks for `g`.
//! 2. A completer claims: CAS `g<<5 | f` to `g<<5 | f | CLAIMED`, only if the
//!    generation is `g` and `CLAIMED` is not set. The winner alone writes the
//!    result into the slot, then sets `DONE` (`AcqRel`).
//! 3. The fiber, once registration has returned and its state is saved in
//!    `core`, sets `SUSPENDED` (and `INTERRUPTIBLE` if it is not masked)
//!    with one `fetch_or` (`AcqRel`). If `DONE` was already set, the result
//!    is there: it continues at once, on the same thread (the callback ran
//!    during registration or raced it). If `CANCEL` was already set and the
//!    suspension is interruptible, the fiber claims its own suspension and
//!    continues, to finalize. Otherwise it returns from `run` and no longer
//!    touches `core`.
//! 4. A completer whose `fetch_or(DONE)` sees `SUSPENDED` is the one that
//!    resumes the fiber: it hands it to [`Executor::schedule_fiber`].
//!
//! Cancellation (`FiberHandle::cancel`) sets `CANCEL` with a `fetch_or`; if
//! the previous word shows an interruptible suspension, the canceler claims it
//! (`CLAIMED | DONE` without a result) and schedules the fiber, which finds
//! the slot empty and finalizes. The fiber's `fetch_or` of step 3 and the
//! canceler's are read-modify-writes of the same word, so one of the two
//! sees the other: no cancellation is lost. The fiber also reads `CANCEL` at
//! its cancellation checks (a relaxed load).
//!
//! Exactly one side sees the other's flag, so the fiber is resumed exactly
//! once and never runs on two threads. The `Release` of `SUSPENDED` after the
//! writes to `core`, and the completer's `Acquire` of it, order the fiber's
//! saved state before the next `run`.
//!
//! On 32-bit targets the generation has 27 bits: a callback kept for 2^27
//! suspensions and then called at exactly the wrong moment could be mistaken
//! for a current one. On 64-bit targets that takes 2^59 suspensions.

pub(crate) mod handle;
mod run_loop;
#[cfg(test)]
mod tests;

use core::marker::PhantomData;
use core::ptr::NonNull;

use alloc::vec::Vec;

use crate::erased::{Adapter, ErasedFn, Value};
use crate::executor::Executor;
use crate::io::IO;
use crate::node::{Frame, Node, Res};
use crate::outcome::Outcome;
use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};
use crate::tracing::Trace;

const SUSPENDED: usize = 0b0001;
const CLAIMED: usize = 0b0010;
const DONE: usize = 0b0100;
/// The suspension may be ended by cancellation (the fiber was not masked).
const INTERRUPTIBLE: usize = 0b1000;
/// Cancellation was requested (set once, kept across suspensions).
const CANCEL: usize = 0b1_0000;
const FLAG_BITS: u32 = 5;
/// The word of a completed fiber: generation 0 (never the generation of a
/// suspension: those start at 1), claimed and done, not suspended.
const COMPLETED: usize = CLAIMED | DONE;
const GEN_MASK: usize = usize::MAX >> FLAG_BITS;

/// The part of a fiber shared with callbacks and handles on other threads.
pub(crate) struct Header {
    state: AtomicUsize,
    /// Written by the completer that won the claim, read by the fiber after
    /// it saw `DONE`.
    slot: UnsafeCell<Option<Res>>,
    /// The join state: the outcome once the fiber has completed (for a
    /// fiber started with `IO::start` or [`FiberHandle::spawn`]), and the
    /// joiners waiting for it. Inside the fiber, so that starting a fiber is
    /// one allocation (see `handle`).
    ///
    /// [`FiberHandle::spawn`]: handle::FiberHandle::spawn
    pub(crate) join: handle::JoinCell,
    /// The fiber's trace ring, once it records (`tracing.rs`): here, in
    /// the part other threads may read, for fiber dumps.
    #[cfg(feature = "tracing")]
    pub(crate) ring: crate::tracing::RingSlot,
    /// What the fiber does now, for fiber dumps ([`FiberState`] as a
    /// byte); kept only while the fiber traces.
    #[cfg(feature = "tracing")]
    pub(crate) activity: crate::sync::AtomicU8,
}

// SAFETY: `slot` is written only by the single completer that won the CAS to
// `CLAIMED` and read only by the fiber after observing `DONE` with `Acquire`
// (which the completer set with `Release` after writing); see the module doc.
unsafe impl Sync for Header {}
// SAFETY: everything in the slot is `Send` (erased values are made only from
// `Send` types).
unsafe impl Send for Header {}

impl Header {
    fn new() -> Self {
        Header {
            state: AtomicUsize::new(0),
            slot: UnsafeCell::new(None),
            join: handle::JoinCell::new(),
            #[cfg(feature = "tracing")]
            ring: crate::tracing::RingSlot::new(),
            #[cfg(feature = "tracing")]
            activity: crate::sync::AtomicU8::new(FiberState::Queued as u8),
        }
    }

    /// Starts a new suspension; returns its generation.
    fn begin_suspension(&self) -> usize {
        // Stale callbacks compare against the whole word, so they fail from
        // here on; no completer of this generation exists yet. A CAS, not a
        // store: a canceler may set `CANCEL` at any moment, and it must stay.
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            // 1..=GEN_MASK: generation 0 is never used, so `COMPLETED` is
            // never the word of a suspension.
            let generation = (state >> FLAG_BITS) % GEN_MASK + 1;
            let next = (generation << FLAG_BITS) | (state & CANCEL);
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return generation,
                Err(actual) => state = actual,
            }
        }
    }

    /// Takes the result if a completer has already delivered it
    /// (`Some(None)`: the suspension was ended by cancellation).
    fn take_if_done(&self) -> Option<Option<Res>> {
        if self.state.load(Ordering::Acquire) & DONE != 0 {
            Some(self.take_result())
        } else {
            None
        }
    }

    /// Marks the fiber suspended (step 3 of the protocol); true if the fiber
    /// must continue itself: the result is already there, or (for an
    /// interruptible suspension) cancellation was requested and the fiber
    /// claimed its own suspension.
    fn suspend(&self, interruptible: bool) -> bool {
        let flags = if interruptible {
            SUSPENDED | INTERRUPTIBLE
        } else {
            SUSPENDED
        };
        let previous = self.state.fetch_or(flags, Ordering::AcqRel);
        if previous & DONE != 0 {
            return true;
        }
        // A canceler whose `fetch_or(CANCEL)` came before ours saw no
        // suspension to claim: we see its bit, and claim it ourselves. One
        // that comes after sees `SUSPENDED | INTERRUPTIBLE` and claims. Both
        // are read-modify-writes of the same word, so exactly one case holds.
        interruptible && previous & CANCEL != 0 && self.claim_for_cancel(previous >> FLAG_BITS)
    }

    /// Takes the delivered result (`None`: resumed by cancellation). Only
    /// after `DONE` was observed.
    fn take_result(&self) -> Option<Res> {
        // SAFETY: the caller observed `DONE` with `Acquire`, so the completer's
        // write happened before, and no completer writes again this generation.
        self.slot.with_mut(|slot| unsafe { (*slot).take() })
    }

    /// Whether cancellation was requested.
    #[inline(always)]
    fn is_cancel_requested(&self) -> bool {
        self.state.load(Ordering::Relaxed) & CANCEL != 0
    }

    /// Requests cancellation (idempotent). Returns true if the caller ended
    /// an interruptible suspension and must schedule the fiber, which then
    /// finds no result and finalizes.
    fn request_cancel(&self) -> bool {
        let state = self.state.fetch_or(CANCEL, Ordering::AcqRel);
        state & (SUSPENDED | INTERRUPTIBLE) == SUSPENDED | INTERRUPTIBLE
            && self.claim_for_cancel(state >> FLAG_BITS)
    }

    /// Records the fiber's own cancellation request (`IO::canceled`).
    fn request_self_cancel(&self) {
        self.state.fetch_or(CANCEL, Ordering::AcqRel);
    }

    /// Claims the suspension `generation` without a result (for
    /// cancellation): `CLAIMED | DONE` in one step, the slot left empty.
    fn claim_for_cancel(&self, generation: usize) -> bool {
        self.claim_setting(generation, CLAIMED | DONE, Ordering::AcqRel)
    }

    /// The claim of step 2 of the protocol: true if this caller won.
    fn claim(&self, generation: usize) -> bool {
        self.claim_setting(generation, CLAIMED, Ordering::Acquire)
    }

    /// Sets `bits` (which include `CLAIMED`) if the word still belongs to
    /// `generation` and nobody has claimed it; true if this caller did.
    fn claim_setting(&self, generation: usize, bits: usize, success: Ordering) -> bool {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state >> FLAG_BITS != generation || state & CLAIMED != 0 {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(state, state | bits, success, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    /// Whether the fiber has completed (`mark_completed`).
    fn is_completed(&self) -> bool {
        self.state.load(Ordering::Acquire) & !CANCEL == COMPLETED
    }

    /// Records that the fiber has completed (for fiber listings): the word
    /// becomes `COMPLETED`, which no callback or canceler can claim (it has
    /// `CLAIMED` set, and a completed fiber is never suspended again).
    fn mark_completed(&self) {
        self.state.store(COMPLETED, Ordering::Release);
    }

    /// What a fiber listing shows of this fiber.
    #[cfg(not(loom))]
    fn status(&self) -> Option<FiberStatus> {
        let state = self.state.load(Ordering::Acquire) & !CANCEL;
        if state == COMPLETED {
            None
        } else if state & (SUSPENDED | DONE) == SUSPENDED {
            Some(if state & INTERRUPTIBLE != 0 {
                FiberStatus::Suspended
            } else {
                FiberStatus::SuspendedMasked
            })
        } else {
            Some(FiberStatus::Active)
        }
    }

    /// Records what the fiber does now (for dumps).
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn set_activity(&self, state: FiberState) {
        self.activity.store(state as u8, Ordering::Relaxed);
    }

    /// What a fiber dump shows of this fiber: its state (`None` once it has
    /// completed), whether a wait is cancelable, and its trace.
    #[cfg(not(loom))]
    fn info(&self, id: usize) -> Option<FiberInfo> {
        let status = self.status()?;
        let state = match status {
            FiberStatus::Active => match self.recorded_state() {
                // Set when it runs, and when it yields.
                Some(state @ (FiberState::Running | FiberState::Queued)) => state,
                // Still marked as waiting, but its wait has ended: resumed,
                // not run yet. (The state word keeps `SUSPENDED | DONE`
                // until the next suspension, so only the recorded state
                // tells a running fiber from a queued one.)
                _ if self.state.load(Ordering::Acquire) & (SUSPENDED | DONE)
                    == SUSPENDED | DONE =>
                {
                    FiberState::Queued
                }
                _ => FiberState::Running,
            },
            FiberStatus::Suspended | FiberStatus::SuspendedMasked => match self.recorded_state() {
                Some(s @ (FiberState::Sleeping | FiberState::Blocked | FiberState::Waiting)) => s,
                _ => FiberState::Waiting,
            },
        };
        #[cfg(feature = "tracing")]
        let trace = self.ring.get().and_then(spindle_trace::Ring::snapshot);
        #[cfg(not(feature = "tracing"))]
        let trace = None;
        Some(FiberInfo {
            id,
            status,
            state,
            trace,
        })
    }

    #[cfg(not(loom))]
    fn recorded_state(&self) -> Option<FiberState> {
        #[cfg(feature = "tracing")]
        {
            FiberState::from_byte(self.activity.load(Ordering::Relaxed))
        }
        #[cfg(not(feature = "tracing"))]
        {
            None
        }
    }

    /// Delivers the result after a won claim; true if the fiber was already
    /// suspended and the caller must schedule it.
    fn deliver(&self, res: Res) -> bool {
        // SAFETY: the caller won the claim for the current generation, so it
        // is the only writer, and the fiber reads only after `DONE`.
        self.slot.with_mut(|slot| unsafe { *slot = Some(res) });
        self.state.fetch_or(DONE, Ordering::AcqRel) & SUSPENDED != 0
    }
}

/// Type-erased operations on an `Arc<FiberInner<X>>`.
struct RawFiberVTable {
    /// Adds a strong reference.
    clone: unsafe fn(*const ()),
    /// Drops a strong reference.
    drop: unsafe fn(*const ()),
    /// Schedules the fiber (taking a new strong reference for the handle).
    schedule: unsafe fn(*const ()),
}

/// The erased completion handle behind [`Callback`] and [`TimerCallback`]:
/// a strong reference to the fiber and the generation it may complete.
pub(crate) struct RawCallback {
    fiber: NonNull<()>,
    vtable: &'static RawFiberVTable,
    generation: usize,
}

// SAFETY: the fiber is `Send + Sync` (its executor is; its header is shared by
// protocol; its core is touched only by the thread that runs it), and the
// callback only touches the header and the reference count.
unsafe impl Send for RawCallback {}
// SAFETY: as above; every method takes `&self` and is atomic.
unsafe impl Sync for RawCallback {}

impl RawCallback {
    fn header(&self) -> &Header {
        // SAFETY: `fiber` points at a live `FiberInner<X>` (we hold a strong
        // reference) whose first field is the header (`repr(C)`).
        unsafe { &*self.fiber.as_ptr().cast::<Header>() }
    }

    /// Delivers `res` if this is the first completion of the current
    /// suspension; returns whether it was accepted.
    pub(crate) fn complete(&self, res: Res) -> bool {
        let header = self.header();
        if !header.claim(self.generation) {
            return false;
        }
        if header.deliver(res) {
            // SAFETY: the fiber is alive (we hold a reference) and suspended,
            // and we won the claim: we alone resume it.
            unsafe { (self.vtable.schedule)(self.fiber.as_ptr()) }
        }
        true
    }
}

impl Clone for RawCallback {
    fn clone(&self) -> Self {
        // SAFETY: we hold a strong reference, so the count is at least one.
        unsafe { (self.vtable.clone)(self.fiber.as_ptr()) };
        RawCallback {
            fiber: self.fiber,
            vtable: self.vtable,
            generation: self.generation,
        }
    }
}

impl Drop for RawCallback {
    fn drop(&mut self) {
        // SAFETY: releases the strong reference this callback owns.
        unsafe { (self.vtable.drop)(self.fiber.as_ptr()) }
    }
}

/// Resumes a fiber suspended in [`IO::from_callback`] with a result.
///
/// `Send + Sync`, callable from any thread, also before the registration
/// function returns. Only the first call (of this callback and all its
/// clones) is delivered; later calls return `false` and change nothing.
/// Holding a callback keeps its fiber alive; dropping every callback of a
/// suspended fiber without calling one means the fiber can never resume.
pub struct Callback<A, E> {
    raw: RawCallback,
    _marker: PhantomData<fn(Result<A, E>)>,
}

impl<A: Send + 'static, E: Send + 'static> Callback<A, E> {
    pub(crate) fn from_raw(raw: RawCallback) -> Self {
        Callback {
            raw,
            _marker: PhantomData,
        }
    }

    /// The untyped callback (for data types that queue waiters of several
    /// error types together).
    pub(crate) fn into_raw(self) -> RawCallback {
        self.raw
    }

    /// Resumes the fiber with `result`; `false` if it was already resumed.
    pub fn complete(&self, result: Result<A, E>) -> bool {
        self.raw.complete(match result {
            Ok(a) => Ok(Value::new(a)),
            Err(e) => Err(Value::new(e)),
        })
    }

    /// Resumes the fiber with a value; `false` if it was already resumed.
    pub fn succeed(&self, value: A) -> bool {
        self.raw.complete(Ok(Value::new(value)))
    }

    /// Resumes the fiber with an error; `false` if it was already resumed.
    pub fn fail(&self, error: E) -> bool {
        self.raw.complete(Err(Value::new(error)))
    }
}

impl<A, E> Clone for Callback<A, E> {
    fn clone(&self) -> Self {
        Callback {
            raw: self.raw.clone(),
            _marker: PhantomData,
        }
    }
}

impl<A, E> core::fmt::Debug for Callback<A, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Callback")
            .field("generation", &self.raw.generation)
            .finish()
    }
}

/// Resumes a fiber sleeping in `IO::sleep` once its deadline has passed.
///
/// Executors receive one with [`Executor::set_timer`] and call
/// [`fire`](TimerCallback::fire) on or after the deadline, from any thread.
/// Dropping it without firing (a cancelled timer) resumes nothing.
pub struct TimerCallback {
    raw: RawCallback,
}

impl TimerCallback {
    /// Resumes the sleeping fiber; does nothing if it was already resumed or
    /// canceled.
    pub fn fire(self) {
        self.raw.complete(Ok(Value::unit()));
    }
}

impl core::fmt::Debug for TimerCallback {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TimerCallback")
            .field("generation", &self.raw.generation)
            .finish()
    }
}

/// Work handed to [`Executor::spawn_blocking`] by `IO::blocking`: a thunk
/// that may block its thread, and the fiber to resume with its result.
///
/// Call [`run`](BlockingTask::run) exactly once, on a thread where blocking
/// is acceptable; it runs the thunk (panics are caught there, with `std`, and
/// end the fiber with `Outcome::Panicked`) and resumes the fiber. Dropping a
/// task without running it (an executor shutting down) means its fiber can
/// never resume; the fiber is then freed like any other garbage.
pub struct BlockingTask {
    pub(crate) thunk: ErasedFn<(), Value>,
    pub(crate) callback: RawCallback,
}

impl BlockingTask {
    /// Runs the blocking work and resumes the fiber that waits for it.
    pub fn run(self) {
        // SAFETY: the thunk was made by `IO::blocking` for this fiber's
        // suspension; its adapter produces the value the fiber expects.
        let value = unsafe { self.thunk.call(()) };
        self.callback.complete(Ok(value));
    }
}

impl core::fmt::Debug for BlockingTask {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockingTask")
            .field("generation", &self.callback.generation)
            .finish()
    }
}

/// What a fiber listing shows of a live fiber's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg(not(loom))]
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
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn from_byte(b: u8) -> Option<FiberState> {
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
#[cfg(not(loom))]
pub struct FiberInfo {
    /// The fiber's identifier ([`Fiber::id`]).
    pub id: usize,
    /// Whether it is active or waiting, and whether a wait is cancelable.
    pub status: FiberStatus,
    /// What it is doing.
    pub state: FiberState,
    /// Its last trace events, oldest first: `None` if it never traced (mode
    /// `none`, or tracing compiled out), or if it was recording so busily
    /// that no consistent copy could be read.
    pub trace: Option<Trace>,
}

/// A snapshot of an executor's live fibers and its state, printed like Cats
/// Effect's fiber dump (one block per fiber: identifier, state, trace; then
/// the executor's counters).
#[derive(Debug, Clone, Default)]
#[cfg(not(loom))]
pub struct FiberDump {
    /// The live fibers.
    pub fibers: Vec<FiberInfo>,
    /// Executor state as name and value (queue lengths, workers, ...).
    pub executor: Vec<(&'static str, u64)>,
}

#[cfg(not(loom))]
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

#[cfg(not(loom))]
impl core::fmt::Display for FiberDump {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for fiber in &self.fibers {
            write!(f, "fiber #{:x} {}", fiber.id, fiber.state.name())?;
            if fiber.status == FiberStatus::SuspendedMasked {
                f.write_str(" (uncancelable)")?;
            }
            match &fiber.trace {
                Some(trace) if !trace.is_empty() => {
                    let n = trace.events().len();
                    for (i, event) in trace.events().iter().enumerate() {
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
/// been freed.
#[cfg(not(loom))]
pub struct WeakFiber {
    /// From `Weak::into_raw` of a `Weak<FiberInner<X>>`.
    fiber: NonNull<()>,
    vtable: &'static WeakVTable,
}

/// Type-erased operations on a `Weak<FiberInner<X>>`.
#[cfg(not(loom))]
struct WeakVTable {
    status: unsafe fn(*const ()) -> Option<FiberStatus>,
    info: unsafe fn(*const ()) -> Option<FiberInfo>,
    drop: unsafe fn(*const ()),
}

// SAFETY: a weak reference only touches the reference counts (atomic) and,
// after a successful upgrade, the header (shared by protocol).
#[cfg(not(loom))]
unsafe impl Send for WeakFiber {}
// SAFETY: as above; every method takes `&self`.
#[cfg(not(loom))]
unsafe impl Sync for WeakFiber {}

#[cfg(not(loom))]
impl<X: Executor> FiberInner<X> {
    const WEAK_VTABLE: &'static WeakVTable = &WeakVTable {
        status: Self::weak_status,
        info: Self::weak_info,
        drop: Self::weak_drop,
    };

    /// # Safety
    /// * As for `weak_status`.
    unsafe fn weak_info(ptr: *const ()) -> Option<FiberInfo> {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // weak reference as it was.
        let weak = core::mem::ManuallyDrop::new(unsafe {
            portable_atomic_util::Weak::from_raw(ptr.cast::<FiberInner<X>>())
        });
        let fiber = weak.upgrade()?;
        let id = portable_atomic_util::Arc::as_ptr(&fiber) as *const () as usize;
        fiber.header.info(id)
    }

    /// # Safety
    /// * `ptr` comes from `Weak::into_raw` of a `Weak<FiberInner<X>>` that
    ///   the caller still owns.
    unsafe fn weak_status(ptr: *const ()) -> Option<FiberStatus> {
        // SAFETY: forwarded precondition; `ManuallyDrop` leaves the caller's
        // weak reference as it was.
        let weak = core::mem::ManuallyDrop::new(unsafe {
            portable_atomic_util::Weak::from_raw(ptr.cast::<FiberInner<X>>())
        });
        weak.upgrade()?.header.status()
    }

    /// # Safety
    /// * As for `weak_status`; the caller gives up its weak reference.
    unsafe fn weak_drop(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        drop(unsafe { portable_atomic_util::Weak::from_raw(ptr.cast::<FiberInner<X>>()) })
    }
}

#[cfg(not(loom))]
impl WeakFiber {
    /// The fiber's identifier (the same as [`Fiber::id`]) and status, or
    /// `None` once it has completed or been freed.
    pub fn snapshot(&self) -> Option<(usize, FiberStatus)> {
        // SAFETY: we own the weak reference behind `fiber`.
        let status = unsafe { (self.vtable.status)(self.fiber.as_ptr()) }?;
        Some((self.id(), status))
    }

    /// What a fiber dump shows of the fiber (state and trace), or `None`
    /// once it has completed or been freed.
    pub fn info(&self) -> Option<FiberInfo> {
        // SAFETY: we own the weak reference behind `fiber`.
        unsafe { (self.vtable.info)(self.fiber.as_ptr()) }
    }

    /// Whether the fiber is gone (completed or freed): a listing may drop
    /// this reference.
    pub fn is_gone(&self) -> bool {
        self.snapshot().is_none()
    }

    /// The fiber's identifier, also after it is gone.
    pub fn id(&self) -> usize {
        self.fiber.as_ptr() as usize
    }
}

/// Weak references to many fibers, for an executor's fiber listing
/// (executors push one from [`Executor::fiber_created`]).
///
/// Pushing sweeps out the references of fibers that are gone whenever the
/// list has doubled since the last sweep (amortized O(1) per push), so it
/// holds at most about twice the live fibers. It never keeps a fiber alive.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub struct WeakFibers {
    fibers: Vec<WeakFiber>,
    sweep_at: usize,
}

#[cfg(not(loom))]
impl WeakFibers {
    /// An empty list (no allocation).
    pub const fn new() -> Self {
        WeakFibers {
            fibers: Vec::new(),
            sweep_at: 0,
        }
    }

    /// Adds a fiber.
    pub fn push(&mut self, fiber: WeakFiber) {
        if self.fibers.len() >= self.sweep_at {
            self.fibers.retain(|fiber| !fiber.is_gone());
            self.sweep_at = (self.fibers.len() * 2).max(64);
        }
        self.fibers.push(fiber);
    }

    /// Identifier and status of every fiber of the list still alive.
    pub fn live(&self) -> impl Iterator<Item = (usize, FiberStatus)> + '_ {
        self.fibers.iter().filter_map(WeakFiber::snapshot)
    }

    /// State and trace of every fiber of the list still alive (for fiber
    /// dumps).
    pub fn infos(&self) -> impl Iterator<Item = FiberInfo> + '_ {
        self.fibers.iter().filter_map(WeakFiber::info)
    }
}

#[cfg(not(loom))]
impl Drop for WeakFiber {
    fn drop(&mut self) {
        // SAFETY: releases the weak reference this handle owns.
        unsafe { (self.vtable.drop)(self.fiber.as_ptr()) }
    }
}

#[cfg(not(loom))]
impl core::fmt::Debug for WeakFiber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WeakFiber").field("id", &self.id()).finish()
    }
}

/// The run-loop state of a fiber, touched only by the thread running it.
///
/// Kept small, since every suspended fiber holds one: what is needed only
/// while a fiber finalizes after a panic, or when a finalizer's error is
/// suppressed, lives in a separate allocation made then ([`Cold`]).
pub(crate) struct Core {
    /// Where the next run starts.
    pub(super) next: Next,
    /// The explicit continuation stack. A fiber that is not running and
    /// whose stack is empty holds no buffer: it takes its thread's spare
    /// one when it runs, and leaves it when it suspends or completes with
    /// an empty stack (`pool::stacks`), so that a million fibers suspended
    /// between two programs hold no stacks.
    pub(super) stack: Vec<Frame>,
    /// Receives the outcome; taken when the fiber completes. `None` for a
    /// fiber whose outcome goes to its join state (`Header::join`).
    pub(super) on_complete: Option<Completion>,
    /// Depth of nested uncancelable regions around the current node
    /// (cancellation is observed only at depth 0).
    pub(super) masks: u32,
    /// Set once the fiber finalizes (canceled or panicked): the remaining
    /// frames are popped, running only finalizers.
    pub(super) ending: Option<Ending>,
    /// The panic message and suppressed errors, once there are any.
    pub(super) cold: Option<alloc::boxed::Box<Cold>>,
    /// Whether the fiber traces now, and its trace (`tracing.rs`).
    #[cfg(feature = "tracing")]
    pub(super) tracing: crate::tracing::FiberTracing,
}

/// Where a fiber's next run starts.
pub(crate) enum Next {
    /// Evaluate this node (a new fiber, or one that yielded).
    Node(Node),
    /// Suspended (async without finalizer, never, blocking work): the
    /// result is in the header's slot, or there is none because
    /// cancellation ended the suspension.
    Resume,
    /// Suspended in an async registration that returned this finalizer (run
    /// if cancellation ends the suspension).
    ResumeWithFinalizer(Node),
    /// Sleeping: the key of the timer (an erased `X::TimerKey`), canceled if
    /// cancellation ends the sleep.
    Wake(Value),
    /// The fiber started or stopped tracing in the middle of a turn: evaluate
    /// this node in the other instantiation of the run-loop, with the steps
    /// left of the turn's auto-yield budget (a switch is not a turn).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    Switch(Node, u32),
}

/// Why a fiber finalizes instead of completing normally (the panic message
/// itself is in [`Cold`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Canceled,
    Panicked,
}

/// The rarely used part of a fiber's state.
#[derive(Default)]
pub(crate) struct Cold {
    /// The message of the panic the fiber finalizes after.
    panic: Option<crate::outcome::PanicMessage>,
    /// Errors of finalizers that could not be propagated (the fiber was
    /// already failing, canceled or panicking): handed over with the outcome.
    suppressed: Vec<Value>,
}

impl Core {
    fn cold(&mut self) -> &mut Cold {
        self.cold.get_or_insert_with(Default::default)
    }

    /// Starts finalizing after a panic (unless already finalizing).
    pub(super) fn set_panicked(&mut self, message: crate::outcome::PanicMessage) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Panicked);
            self.cold().panic = Some(message);
        }
    }

    /// Keeps a finalizer error that could not be propagated.
    pub(super) fn suppress(&mut self, error: Value) {
        self.cold().suppressed.push(error);
    }

    /// Takes the suppressed errors (when the fiber completes).
    pub(super) fn take_suppressed(&mut self) -> Vec<Value> {
        self.cold
            .as_mut()
            .map(|cold| core::mem::take(&mut cold.suppressed))
            .unwrap_or_default()
    }

    /// The outcome a finalizing fiber ends with.
    pub(super) fn ending_outcome(&self) -> Outcome<Value, Value> {
        match self.ending {
            Some(Ending::Canceled) => Outcome::Canceled,
            Some(Ending::Panicked) => Outcome::Panicked(
                self.cold
                    .as_ref()
                    .and_then(|cold| cold.panic.clone())
                    .unwrap_or_else(|| crate::outcome::PanicMessage::new("")),
            ),
            None => unreachable!("io-core: unwinding without an ending"),
        }
    }
}

/// The erased completion callback of a fiber: its outcome, the errors of
/// finalizers that were suppressed on the way, and its trace at the point
/// of failure (empty on success, cancellation, or without tracing).
pub(crate) type Completion = ErasedFn<(Outcome<Value, Value>, Vec<Value>, Trace), ()>;

/// One fiber, shared by its handle, the thread running it and its callbacks.
#[repr(C)]
pub(crate) struct FiberInner<X: Executor> {
    /// Must stay the first field: callbacks reach it through an erased pointer.
    header: Header,
    core: UnsafeCell<Core>,
    executor: X,
}

// SAFETY: `core` is accessed only by the thread that holds the unique
// `Fiber` handle (see the module doc: the protocol hands the fiber from
// thread to thread with Release/Acquire); `header` is Sync by its protocol;
// the executor is `Send + Sync`; everything inside `core` is `Send`.
unsafe impl<X: Executor> Sync for FiberInner<X> {}
// SAFETY: as above.
unsafe impl<X: Executor> Send for FiberInner<X> {}

impl<X: Executor> Drop for FiberInner<X> {
    fn drop(&mut self) {
        // A fiber freed before it completed (dropped by a shut-down executor,
        // or suspended with every callback gone) ends here.
        if !self.header.is_completed() {
            self.executor.fiber_ended();
        }
    }
}

impl<X: Executor> FiberInner<X> {
    const VTABLE: &'static RawFiberVTable = &RawFiberVTable {
        clone: Self::raw_clone,
        drop: Self::raw_drop,
        schedule: Self::raw_schedule,
    };

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw` of a live `Arc<FiberInner<X>>`.
    unsafe fn raw_clone(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        unsafe { Arc::increment_strong_count(ptr.cast::<FiberInner<X>>()) }
    }

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw`, and the caller gives up its reference.
    unsafe fn raw_drop(ptr: *const ()) {
        // SAFETY: forwarded precondition.
        drop(unsafe { Arc::from_raw(ptr.cast::<FiberInner<X>>()) })
    }

    /// # Safety
    /// * `ptr` comes from `Arc::into_raw` of a live fiber, and the caller has
    ///   the right to resume it (it won the claim of a suspended fiber).
    unsafe fn raw_schedule(ptr: *const ()) {
        // SAFETY: the caller's reference keeps the fiber alive; we take a new
        // one for the handle.
        let inner = unsafe {
            Arc::increment_strong_count(ptr.cast::<FiberInner<X>>());
            Arc::from_raw(ptr.cast::<FiberInner<X>>())
        };
        // The caller's own reference keeps `inner.executor` alive during the
        // call, even if the fiber runs and finishes on another thread.
        let executor: *const X = &inner.executor;
        // SAFETY: see the line above.
        unsafe { (*executor).schedule_fiber(Fiber { inner }) }
    }

    /// A callback handle for the given suspension generation.
    fn callback(this: &Arc<Self>, generation: usize) -> RawCallback {
        let ptr = Arc::into_raw(this.clone()) as *mut ();
        RawCallback {
            // SAFETY: `Arc::into_raw` never returns null.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: Self::VTABLE,
            generation,
        }
    }
}

/// Starts child fibers on the running fiber's executor, for `Start` nodes,
/// which do not know the executor's type.
trait Spawn {
    /// Makes a fiber of `node` on this executor, schedules it, and returns
    /// a reference to it (for handles and cancellation). Its outcome goes
    /// to `on_complete`, or without one to its join state. `traced`: the
    /// parent traces now (a child started in `traced()` traces too).
    fn spawn_child(&self, node: Node, on_complete: Option<Completion>, traced: bool)
    -> RawFiberRef;
}

impl<X: Executor> Spawn for X {
    fn spawn_child(
        &self,
        node: Node,
        on_complete: Option<Completion>,
        traced: bool,
    ) -> RawFiberRef {
        let child = Fiber::from_parts_traced(node, on_complete, self.clone(), traced);
        let child_ref = child.raw_ref();
        self.schedule_fiber(child);
        child_ref
    }
}

/// What a `Start` node's closure receives: the executor of the fiber that
/// evaluates the node, to start children on.
///
/// Made by the run-loop for the duration of one call, and never kept: the
/// pointer is valid while the closure runs (the running fiber, which owns
/// the executor, is alive), so [`spawn`](Spawner::spawn) is safe to call
/// from inside the closure.
#[derive(Clone, Copy)]
pub(crate) struct Spawner {
    executor: *const dyn Spawn,
    /// The parent traces now.
    traced: bool,
}

impl Spawner {
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    fn new<X: Executor>(executor: &X, core: &Core) -> Self {
        Spawner {
            executor: executor as &dyn Spawn,
            #[cfg(feature = "tracing")]
            traced: core.tracing.on,
            #[cfg(not(feature = "tracing"))]
            traced: false,
        }
    }

    /// Starts a child fiber of `node` (see [`Spawn::spawn_child`]).
    pub(crate) fn spawn(&self, node: Node, on_complete: Option<Completion>) -> RawFiberRef {
        // SAFETY: the spawner lives only during the `Start` node's call, in
        // which the running fiber keeps its executor alive (type doc).
        unsafe { (*self.executor).spawn_child(node, on_complete, self.traced) }
    }
}

/// A fiber ready to run: the handle executors queue and run.
///
/// A `Fiber` is unique (not `Clone`): whoever holds it is the only one that
/// may run the fiber, by calling [`run`](Fiber::run) once. Dropping it
/// without running drops the fiber's program and pending continuations
/// (an executor that shuts down does that).
pub struct Fiber<X: Executor> {
    inner: Arc<FiberInner<X>>,
}

impl<X: Executor> Fiber<X> {
    /// Makes a fiber that will run `io` on `executor` and hand its outcome to
    /// `on_complete`. The fiber does not run until it is scheduled and run;
    /// usually the caller passes it to [`Executor::schedule_fiber`].
    pub fn new<A, E, F>(io: IO<A, E>, executor: X, on_complete: F) -> Fiber<X>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Outcome<A, E>) + Send + 'static,
    {
        let on_complete =
            move |outcome: Outcome<A, E>, _suppressed: Vec<E>, _trace: Trace| on_complete(outcome);
        Fiber::from_parts(
            io.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
            executor,
        )
    }

    /// Like [`Fiber::new`], and `on_complete` also receives the errors of
    /// finalizers that could not be propagated (they ran while the program
    /// was already failing, canceled or panicking), so that none is lost.
    pub fn with_suppressed<A, E, F>(io: IO<A, E>, executor: X, on_complete: F) -> Fiber<X>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Outcome<A, E>, Vec<E>) + Send + 'static,
    {
        let on_complete = move |outcome: Outcome<A, E>, suppressed: Vec<E>, _trace: Trace| {
            on_complete(outcome, suppressed)
        };
        Fiber::with_report(io, executor, on_complete)
    }

    /// Like [`Fiber::with_suppressed`], and `on_complete` also receives the
    /// fiber's trace at the point of failure, when it ended with an error
    /// or a panic and recorded events (tracing on); an empty trace
    /// otherwise. Entry points print it under the error, like Cats Effect's
    /// enhanced exceptions.
    pub fn with_report<A, E, F>(io: IO<A, E>, executor: X, on_complete: F) -> Fiber<X>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Outcome<A, E>, Vec<E>, Trace) + Send + 'static,
    {
        Fiber::from_parts(
            io.into_node(),
            Some(ErasedFn::new::<CompleteK<A, E>, F>(on_complete)),
            executor,
        )
    }

    /// A fiber of `node`; its outcome goes to `on_complete`, or, without
    /// one, to its join state (for fibers that `FiberHandle`s join).
    pub(crate) fn from_parts(node: Node, on_complete: Option<Completion>, executor: X) -> Fiber<X> {
        Fiber::from_parts_traced(node, on_complete, executor, false)
    }

    /// [`Fiber::from_parts`], tracing from the start if `traced` (a child
    /// of a traced scope) or if the executor's mode records.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn from_parts_traced(
        node: Node,
        on_complete: Option<Completion>,
        executor: X,
        traced: bool,
    ) -> Fiber<X> {
        #[cfg(feature = "tracing")]
        let traces = traced || executor.config().tracing().records();
        #[cfg(feature = "tracing")]
        if traces {
            // Programs built from now on keep every site (see
            // `spindle_trace::call_sites_for`); a later configuration that records
            // nothing no longer turns them off.
            spindle_trace::keep_call_sites();
        }
        let core = Core {
            next: Next::Node(node),
            stack: Vec::new(),
            on_complete,
            masks: 0,
            ending: None,
            cold: None,
            #[cfg(feature = "tracing")]
            tracing: crate::tracing::FiberTracing::new(traces),
        };
        let fiber = Fiber {
            inner: Arc::new(FiberInner {
                header: Header::new(),
                core: UnsafeCell::new(core),
                executor,
            }),
        };
        fiber.inner.executor.fiber_created(&fiber);
        fiber
    }

    /// A weak reference for fiber listings (see [`WeakFiber`]).
    #[cfg(not(loom))]
    pub fn downgrade(&self) -> WeakFiber {
        let weak = Arc::downgrade(&self.inner);
        let ptr = portable_atomic_util::Weak::into_raw(weak) as *mut ();
        WeakFiber {
            // SAFETY: the weak reference points at a live allocation.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: FiberInner::<X>::WEAK_VTABLE,
        }
    }

    /// A reference to this fiber that can request its cancellation.
    pub(crate) fn raw_ref(&self) -> RawFiberRef {
        let ptr = Arc::into_raw(self.inner.clone()) as *mut ();
        RawFiberRef {
            // SAFETY: `Arc::into_raw` never returns null.
            fiber: unsafe { NonNull::new_unchecked(ptr) },
            vtable: FiberInner::<X>::VTABLE,
        }
    }

    /// The executor this fiber runs on.
    pub fn executor(&self) -> &X {
        &self.inner.executor
    }

    /// An identifier of this fiber, stable while it lives (its address).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }
}

impl<X: Executor> core::fmt::Debug for Fiber<X> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fiber").field("id", &self.id()).finish()
    }
}

/// Adapter of the completion callback: erased outcome to typed outcome.
pub(crate) struct CompleteK<A, E>(PhantomData<fn(A, E)>);

impl<A: 'static, E: 'static, F: FnOnce(Outcome<A, E>, Vec<E>, Trace)>
    Adapter<(Outcome<Value, Value>, Vec<Value>, Trace), (), F> for CompleteK<A, E>
{
    unsafe fn call(f: F, (outcome, suppressed, trace): (Outcome<Value, Value>, Vec<Value>, Trace)) {
        // SAFETY: the fiber's program is an `IO<A, E>`, so its final value is
        // an `A`, and its final error and every suppressed finalizer error an
        // `E` (the typed API guarantees it).
        let outcome = unsafe { typed_outcome::<A, E>(outcome) };
        let suppressed = if suppressed.is_empty() {
            Vec::new()
        } else {
            suppressed
                .into_iter()
                .map(|e| unsafe { e.take::<E>() })
                .collect()
        };
        f(outcome, suppressed, trace)
    }
}

/// Takes the values of an erased outcome back as their types.
///
/// # Safety
/// * The outcome is that of an `IO<A, E>`.
pub(crate) unsafe fn typed_outcome<A: 'static, E: 'static>(
    outcome: Outcome<Value, Value>,
) -> Outcome<A, E> {
    // SAFETY: forwarded precondition.
    match outcome {
        Outcome::Succeeded(v) => Outcome::Succeeded(unsafe { v.take::<A>() }),
        Outcome::Errored(e) => Outcome::Errored(unsafe { e.take::<E>() }),
        Outcome::Canceled => Outcome::Canceled,
        Outcome::Panicked(p) => Outcome::Panicked(p),
    }
}

/// A strong reference to a fiber, erased of its executor type, that can
/// request the fiber's cancellation (held by fiber handles).
pub(crate) struct RawFiberRef {
    fiber: NonNull<()>,
    vtable: &'static RawFiberVTable,
}

// SAFETY: as for `RawCallback`: only the header and the count are touched.
unsafe impl Send for RawFiberRef {}
// SAFETY: as above.
unsafe impl Sync for RawFiberRef {}

impl RawFiberRef {
    fn header(&self) -> &Header {
        // SAFETY: we hold a strong reference; the header is the first field.
        unsafe { &*self.fiber.as_ptr().cast::<Header>() }
    }

    /// Requests cancellation; if the fiber was suspended interruptibly, ends
    /// the suspension and schedules the fiber so that it finalizes.
    pub(crate) fn request_cancel(&self) {
        if self.header().request_cancel() {
            // SAFETY: the fiber is alive (we hold a reference), suspended, and
            // we won the claim of its suspension: we alone resume it.
            unsafe { (self.vtable.schedule)(self.fiber.as_ptr()) }
        }
    }

    /// An identifier of the fiber (its address).
    pub(crate) fn id(&self) -> usize {
        self.fiber.as_ptr() as usize
    }
}

impl Clone for RawFiberRef {
    fn clone(&self) -> Self {
        // SAFETY: we hold a strong reference, so the count is at least one.
        unsafe { (self.vtable.clone)(self.fiber.as_ptr()) };
        RawFiberRef {
            fiber: self.fiber,
            vtable: self.vtable,
        }
    }
}

impl Drop for RawFiberRef {
    fn drop(&mut self) {
        // SAFETY: releases the strong reference this handle owns.
        unsafe { (self.vtable.drop)(self.fiber.as_ptr()) }
    }
}
