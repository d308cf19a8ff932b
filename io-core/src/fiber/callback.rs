//! Callbacks: what resumes a suspended fiber from outside.
//!
//! [`RawCallback`] is the erased completion handle: a strong reference to
//! the fiber (through its vtable, `vtable.rs`) and the generation of the
//! suspension it may end. The typed faces over it are [`Callback`]
//! (`IO::from_callback`), [`TimerCallback`] (`IO::sleep`, handed to the
//! executor's timers) and [`BlockingTask`] (`IO::blocking`, handed to
//! `Executor::spawn_blocking`). This is one of the two places where a fiber
//! crosses a type-erased boundary (the other is the spawner): the caller
//! does not know the executor's type, as a `Waker` does not know tokio's
//! scheduler.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::header::Header;
use super::state::{Claim, TransitionToDelivered};
use super::vtable::RawFiberVTable;
use crate::engine::erased::{ErasedFn, Value};
use crate::engine::node::Res;

/// The erased completion handle behind [`Callback`] and [`TimerCallback`]:
/// a strong reference to the fiber and the generation it may complete.
pub(crate) struct RawCallback {
    pub(super) fiber: NonNull<()>,
    pub(super) vtable: &'static RawFiberVTable,
    pub(super) generation: usize,
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
    /// suspension (`Claim::Won`); otherwise changes nothing and drops it.
    #[inline]
    pub(crate) fn complete(&self, res: Res) -> Claim {
        match self.complete_or_give_back(res) {
            Ok(()) => Claim::Won,
            Err(_res) => Claim::Lost,
        }
    }

    /// Delivers `res` if this is the first completion of the current
    /// suspension; otherwise gives it back unchanged (for data types that
    /// hand a waiter an element that must not be lost when the waiter was
    /// canceled first).
    #[inline]
    pub(crate) fn complete_or_give_back(&self, res: Res) -> Result<(), Res> {
        let header = self.header();
        if header.claim(self.generation) == Claim::Lost {
            return Err(res);
        }
        match header.deliver(res) {
            TransitionToDelivered::FiberNotSuspended => {}
            // SAFETY: the fiber is alive (we hold a reference) and suspended,
            // and we won the claim: we alone resume it.
            TransitionToDelivered::Schedule => unsafe {
                (self.vtable.schedule)(self.fiber.as_ptr())
            },
        }
        Ok(())
    }
}

impl RawCallback {
    /// Ends the suspension without a result, if this callback's claim
    /// wins: the fiber resumes as after a cancellation's claim, and tells
    /// why itself (a deadline region's timer, `region.rs`; 64-bit targets).
    #[cfg(target_pointer_width = "64")]
    pub(crate) fn complete_empty(&self) {
        let header = self.header();
        if header.claim(self.generation) == Claim::Lost {
            return;
        }
        match header.deliver_empty() {
            TransitionToDelivered::FiberNotSuspended => {}
            // SAFETY: as in `complete_or_give_back`: the vtable is the
            // fiber's, and the claim was won.
            TransitionToDelivered::Schedule => unsafe {
                (self.vtable.schedule)(self.fiber.as_ptr())
            },
        }
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
///
/// [`IO::from_callback`]: crate::IO::from_callback
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
        }) == Claim::Won
    }

    /// Resumes the fiber with a value; `false` if it was already resumed.
    pub fn succeed(&self, value: A) -> bool {
        self.raw.complete(Ok(Value::new(value))) == Claim::Won
    }

    /// Resumes the fiber with an error; `false` if it was already resumed.
    pub fn fail(&self, error: E) -> bool {
        self.raw.complete(Err(Value::new(error))) == Claim::Won
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
///
/// [`Executor::set_timer`]: crate::Executor::set_timer
pub struct TimerCallback {
    /// The suspension's callback. On 64-bit targets the top bit of its
    /// generation marks a timer that ends the suspension without a result
    /// (a deadline region's timer, `region.rs`) rather than with `()`: a
    /// flag of its own would take the callback from three words to four
    /// (and exec-tokio's timer task past its cell size). No generation
    /// reaches that bit (2^63 suspensions of one fiber).
    raw: RawCallback,
}

/// The generation bit of an empty timer (see [`TimerCallback`]).
#[cfg(target_pointer_width = "64")]
const EMPTY_TIMER: usize = 1 << (usize::BITS - 1);

impl TimerCallback {
    /// A timer that resumes the suspension with `()`.
    pub(super) fn resuming(raw: RawCallback) -> Self {
        TimerCallback { raw }
    }

    /// A timer that ends the suspension without a result (a deadline
    /// region's; regions exist on 64-bit targets only).
    #[cfg(target_pointer_width = "64")]
    pub(super) fn ending_empty(mut raw: RawCallback) -> Self {
        raw.generation |= EMPTY_TIMER;
        TimerCallback { raw }
    }

    /// Resumes the sleeping fiber; does nothing if it was already resumed or
    /// canceled.
    pub fn fire(self) {
        #[cfg(target_pointer_width = "64")]
        if self.raw.generation & EMPTY_TIMER != 0 {
            let mut raw = self.raw;
            raw.generation &= !EMPTY_TIMER;
            raw.complete_empty();
            return;
        }
        let _ = self.raw.complete(Ok(Value::unit()));
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
///
/// [`Executor::spawn_blocking`]: crate::Executor::spawn_blocking
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
        // A blocking suspension is never interruptible, so this claim wins;
        // nothing to do either way.
        let _ = self.callback.complete(Ok(value));
    }
}

/// What decides whether to fail blocking work (`run_with_fault`).
#[cfg(feature = "std")]
type FaultHook = alloc::boxed::Box<dyn FnMut() -> Option<std::io::Error>>;

#[cfg(feature = "std")]
std::thread_local! {
    /// The fault hook of the blocking task this thread runs now
    /// ([`BlockingTask::run_with_fault`]).
    static FAULT_HOOK: core::cell::RefCell<Option<FaultHook>> = const { core::cell::RefCell::new(None) };
}

#[cfg(feature = "std")]
impl BlockingTask {
    /// [`run`](BlockingTask::run), for an executor that injects faults (a
    /// simulation): when the work's error type is `std::io::Error` (an
    /// `IO<A, io::Error>` made with `IO::blocking` or `IO::try_blocking`,
    /// as every file, process and resolver operation of Spindle's I/O
    /// crates is), `hook` is asked once, before the work runs, whether to
    /// fail it; an error it returns becomes the program's error and the
    /// work is dropped without running. For any other error type the hook
    /// is not asked and the work runs. Returns whether the hook was asked.
    pub fn run_with_fault(self, hook: impl FnMut() -> Option<std::io::Error> + 'static) -> bool {
        let previous =
            FAULT_HOOK.with(|slot| slot.borrow_mut().replace(alloc::boxed::Box::new(hook)));
        self.run();
        // Still there: the work's type did not take it.
        let unasked = FAULT_HOOK.with(|slot| core::mem::replace(&mut *slot.borrow_mut(), previous));
        unasked.is_none()
    }
}

/// The error to fail blocking work with instead of running it, if the
/// task this thread runs was given a fault hook (`run_with_fault`); the
/// hook is taken, so it is asked once.
#[cfg(feature = "std")]
pub(crate) fn injected_blocking_error() -> Option<std::io::Error> {
    let hook = FAULT_HOOK
        .try_with(|slot| slot.borrow_mut().take())
        .ok()
        .flatten();
    hook.and_then(|mut hook| hook())
}

impl core::fmt::Debug for BlockingTask {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockingTask")
            .field("generation", &self.callback.generation)
            .finish()
    }
}
