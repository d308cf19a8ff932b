//! Fibers: the run-loop's state, the suspension protocol and the handles
//! executors and callbacks hold.
//!
//! This file is the protocol; the code is split by concept, in the shape of
//! tokio's `runtime/task/` (`mod.rs` as the design document, `state.rs`,
//! `raw.rs`, `core.rs`, `join.rs`, ...; the design is credited, no code is
//! copied):
//!
//! | file          | what it holds                                              |
//! |---------------|------------------------------------------------------------|
//! | `state.rs`    | the state word and its transitions, each returning a `#[must_use]` enum that says what happened |
//! | `header.rs`   | [`Header`]: the state word, the result slot, the join state, the fiber's number, the tracing ring |
//! | `id.rs`       | [`FiberId`], the fiber's number on its executor, and [`FiberIds`], the counter executors number with |
//! | `run_state.rs`| `Core`, `Next`, `Ending`, `Cold`: what only the running thread touches; the completion callback's type |
//! | `vtable.rs`   | `FiberInner<X>` (the one allocation), its vtable, `RawFiberRef`, [`Fiber`], the `Spawner` |
//! | `callback.rs` | `RawCallback`, [`Callback`], [`TimerCallback`], [`BlockingTask`] |
//! | `join.rs`     | the join state: `FiberJoin`, the join cell (`wait/cell.rs`) or the completion callback in its place; `JoinRef`, `complete_join` |
//! | `handle.rs`   | [`FiberHandle`](handle::FiberHandle): join and cancel a started fiber |
//! | `dump.rs`     | [`FiberDump`], [`FiberInfo`], [`FiberStatus`], [`FiberState`], [`WeakFiber`], [`WeakFibers`] |
//! | `run_loop.rs` | `Fiber::run`: the interpreter                              |
//! | `locals.rs`   | a fiber's local values (`IOLocal`): an immutable map shared with the children it starts |
//! | `region.rs`   | deadline regions (`IO::timeout` on the fiber's own stack): entering, observing, unwinding to one |
//!
//! # Layout
//!
//! A fiber is one allocation, `FiberInner<X>`, shared through an `Arc`:
//!
//! * `header` (first field, `repr(C)`): the suspension state word, the
//!   slot where a callback leaves its result, and the join state (the
//!   outcome and the joiners of a fiber started with `IO::start`, or, in
//!   the same bytes, the completion callback of a fiber whose outcome goes
//!   to one; see `join.rs`, `FiberJoin`), and the fiber's number (`id.rs`). It is the only part
//!   touched by other threads, and it does
//!   not depend on the executor type, so a [`Callback`] or a fiber handle
//!   can reach it through a type-erased pointer.
//! * `core`: the run-loop state (where the next run starts, the explicit
//!   continuation stack, the mask depth, whether the outcome goes to a
//!   completion callback, the number its polls carry). Only the thread that runs the fiber touches
//!   it.
//! * `executor`: the fiber's executor `X`, for scheduling and timers.
//! * `slot`: the executor's own data in the fiber (`X::FiberSlot`, made
//!   with `Default`; `()`, no byte, for every executor but exec-tokio,
//!   which keeps there the link to the fiber's one tokio task), reachable
//!   by whoever holds the fiber ([`Fiber::slot`]).
//!
//! Starting a fiber is this one allocation. A suspended fiber holds it, its
//! continuation stack's buffer only if frames are pending (an empty stack's
//! buffer goes back to the thread when the fiber waits), and what its
//! pending frames and its suspension (a waiter entry, a timer) hold: with a
//! one-word executor, 224 bytes for the fiber (a unit test keeps it so).
//!
//! # Who may touch which field, and when
//!
//! | field                 | who                                   | when |
//! |-----------------------|---------------------------------------|------|
//! | `core`                | the holder of the unique [`Fiber`]     | while it runs the fiber: from `Fiber::run` until the state word says `SUSPENDED` (step 3) or the fiber completed or yielded |
//! | `header.state`        | anyone holding a reference             | always (atomic); the transitions below say who may do what |
//! | `header.slot`         | the completer whose claim won          | between its won claim (step 2) and its `DONE` |
//! | `header.slot`         | the fiber                              | after it observed `DONE` (`Acquire`), before its next suspension |
//! | `header.join` (cell)  | anyone holding a `JoinRef` (a short lock) | the run-loop completes it once; joiners read it or wait |
//! | `header.join` (callback) | the holder of the unique [`Fiber`]  | the run-loop takes it once, when the fiber completes; the fiber's drop drops what is left |
//! | `header.id`           | anyone holding a reference             | always (written once, before the fiber is shared) |
//! | `header.ring` (the ring and its activity byte) | the running fiber writes; dumps read | always (a seqlock-style ring and a relaxed byte, `engine/tracing/fiber_on.rs`) |
//! | `executor`            | anyone holding a reference             | always (`Executor: Send + Sync`) |
//! | `slot`                | anyone holding a reference (the executor's own protocol) | always (`FiberSlot: Send + Sync`); dropped with the fiber |
//!
//! # Who owns the fiber
//!
//! Exactly one of the following holds a fiber that is not finished: an
//! executor queue (as a [`Fiber`] handle), the thread running it, or, while
//! it is suspended, the callbacks that can resume it (each [`Callback`] holds
//! a strong reference). A suspended fiber whose callbacks have all been
//! dropped can never resume; it is freed like any other garbage: its
//! continuations are dropped, its finalizers are not run, and its executor
//! counts it as ended (`Executor::fiber_ended`; a main fiber freed so is a
//! `RunError::Deadlock`). A wait on a data type or a join holds what it
//! waits on *weakly* (its cancellation cleanup), so that the waiter lists
//! of a structure nothing else references do not keep their fibers, and
//! the fibers do not keep the structure (`wait/cell.rs`, "Waits nobody can
//! end").
//!
//! # The suspension protocol
//!
//! The state word is `generation << 5 | CANCEL | INTERRUPTIBLE | DONE |
//! CLAIMED | SUSPENDED`. Each suspension (async, sleep, never) starts a new
//! *generation*; callbacks carry the generation they were made for, so a
//! callback of an earlier suspension, or a second call of the same callback,
//! finds either another generation or `CLAIMED` and is ignored.
//!
//! 1. The fiber starts generation `g` (`State::begin_suspension`): the word
//!    becomes `g << 5`, keeping only `CANCEL` (a CAS, since a canceler may
//!    set that bit at any time), then runs the registration, which receives
//!    callbacks for `g`.
//! 2. A completer claims (`State::claim`, which returns `Claim::Won` or
//!    `Claim::Lost`): CAS `g<<5 | f` to `g<<5 | f | CLAIMED`, only if the
//!    generation is `g` and `CLAIMED` is not set. The winner alone writes
//!    the result into the slot, then sets `DONE` (`AcqRel`,
//!    `State::transition_to_delivered`).
//! 3. The fiber, once registration has returned and its state is saved in
//!    `core`, sets `SUSPENDED` (and `INTERRUPTIBLE` if it is not masked)
//!    with one `fetch_or` (`AcqRel`, `State::transition_to_suspended`). If
//!    `DONE` was already set, the result is there (`ResultArrived`): it
//!    continues at once, on the same thread (the callback ran during
//!    registration or raced it). If `CANCEL` was already set and the
//!    suspension is interruptible, the fiber claims its own suspension and
//!    continues, to finalize (`CanceledBeforeSuspending`). Otherwise
//!    (`Suspended`) it returns from `run` and no longer touches `core`.
//! 4. A completer whose `fetch_or(DONE)` sees `SUSPENDED`
//!    (`TransitionToDelivered::Schedule`) is the one that resumes the
//!    fiber: it hands it to [`Executor::schedule_fiber`].
//!
//! [`Executor::schedule_fiber`]: crate::Executor::schedule_fiber
//!
//! Cancellation (`FiberHandle::cancel`, `State::transition_to_cancel_requested`)
//! sets `CANCEL` with a `fetch_or`; if the previous word shows an
//! interruptible suspension, the canceler claims it (`CLAIMED | DONE`
//! without a result) and schedules the fiber
//! (`TransitionToCancelRequested::Schedule`), which finds the slot empty
//! and finalizes. The fiber's `fetch_or` of step 3 and the canceler's are
//! read-modify-writes of the same word, so one of the two sees the other:
//! no cancellation is lost. The fiber also reads `CANCEL` at its
//! cancellation checks (a relaxed load).
//!
//! Exactly one side sees the other's flag, so the fiber is resumed exactly
//! once and never runs on two threads. The `Release` of `SUSPENDED` after the
//! writes to `core`, and the completer's `Acquire` of it, order the fiber's
//! saved state before the next `run`.
//!
//! A completed fiber's word is `CLAIMED | DONE` with generation 0 (never a
//! suspension's generation), so no late callback or canceler can claim it.
//!
//! On 32-bit targets the generation has 27 bits: a callback kept for 2^27
//! suspensions and then called at exactly the wrong moment could be mistaken
//! for a current one. On 64-bit targets that takes 2^59 suspensions.
//!
//! # Type-erased boundaries
//!
//! The run-loop dispatches statically on `X`. Two things cross a
//! type-erased boundary, each through one small vtable: what resumes a
//! fiber from outside (`RawCallback`, `RawFiberRef`: `RawFiberVTable` in
//! `vtable.rs`) and what starts children (`Spawner`, a `dyn Spawn`). Weak
//! references for dumps have a third (`WeakVTable`, `dump.rs`), used only
//! when a dump is taken.

pub(crate) mod callback;
mod dump;
pub(crate) mod handle;
mod header;
mod id;
pub(crate) mod join;
pub(crate) mod locals;
mod region;
mod run_loop;
pub(crate) mod run_state;
mod state;
#[cfg(test)]
pub(crate) mod tests;
mod vtable;

// The names other modules of io-core and the crate root use, at the paths
// they used before the split.
pub(crate) use callback::RawCallback;
pub use callback::{BlockingTask, Callback, TimerCallback};
pub use dump::{FiberDump, FiberInfo, FiberState, FiberStatus, WeakFiber, WeakFibers};
pub(crate) use header::Header;
pub use id::{FiberId, FiberIds};
pub(crate) use locals::FiberLocals;
pub use run_loop::Ran;
pub(crate) use run_state::{CompleteK, typed_outcome};
#[cfg(feature = "std")]
pub(crate) use vtable::ExecutorProbe;
pub use vtable::Fiber;
pub(crate) use vtable::{RawFiberRef, Spawner};
