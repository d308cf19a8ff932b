//! `Signal`: a value an interrupt handler hands to a waiting fiber.
//!
//! # What it is for
//!
//! Firmware: a fiber waits for a peripheral (a timer, a DMA transfer, a
//! software-pended interrupt); the interrupt handler calls
//! [`Signal::signal`], which stores the value and makes the waiting fiber
//! runnable; the fiber resumes at the executor's next turn. The handler
//! allocates nothing and takes no lock the interrupted code may hold: its
//! only lock is a short critical section (`sync::IrqLock`). The idea of a
//! static, latest-value-wins signal completed from interrupt handlers is
//! embassy's `Signal` (embassy-sync); the code here is written for
//! Spindle's fibers, none of it is copied.
//!
//! # Contract
//!
//! * **Fired before any wait.** The value is kept; the next
//!   [`wait`](Signal::wait) takes it at once, without suspending.
//! * **Fired twice (or more) before a wait takes the value.** The latest
//!   value wins; each value replaced before a wait took it is dropped (in
//!   the caller of `signal`, so its `Drop` runs in the interrupt handler:
//!   prefer `Copy` values, or values whose drop frees nothing) and counted:
//!   [`overwritten`](Signal::overwritten) says how many. Nothing is lost
//!   without being counted.
//! * **Fired after the waiting fiber was canceled.** The canceled wait
//!   removed its waiter (a removal from a list, no allocation); the value
//!   stays for the next wait. A wait canceled *after* it was woken but
//!   before it took the value takes nothing: the value stays, and the
//!   wake-up is passed on to the next waiter, if any.
//! * **Several fibers waiting at once.** Allowed: they are woken one per
//!   value, oldest waiter first (FIFO). The value goes to the first wait
//!   that *runs* after the signal: a wait that starts while the value is
//!   there takes it at once, even if an older waiter was woken for it; a
//!   woken waiter that finds the value gone waits again, at the back. No
//!   panic, no hang: every value is taken by some wait, stays for the next
//!   one, or is counted as overwritten.
//! * **A value is taken once.** A value a wait returned is that fiber's;
//!   if the fiber is canceled after its wait returned, the value goes with
//!   it, as any value a canceled fiber holds.
//!
//! # Protocol
//!
//! State under the lock: the value slot (`Option<T>`), the counters, and
//! the waiters (a [`WaiterList`] of fiber callbacks, each with a `spent`
//! flag). Two rules make "no lost wake-up" hold:
//!
//! 1. `signal` stores the value, then (in a second section) while the
//!    value is there, marks the oldest unspent waiter spent and wakes it,
//!    until one wake-up wins (a waiter whose fiber was canceled meanwhile
//!    loses the claim; the next one is tried).
//! 2. A wait registers only under the lock and only if the slot is empty;
//!    if the value is there it resumes at once instead.
//!
//! So either the registration sees the value, or the signal's second
//! section sees the waiter. A woken fiber takes the value in its next step
//! (under the lock): the value never travels inside the wake-up, so a
//! fiber canceled between its wake-up and that step leaves the value in
//! the slot (and its cancel finalizer wakes the next waiter).
//!
//! Spent entries stay listed (a prefix of the list: a signal always
//! spends the oldest unspent one) until fiber-side code drops them: the
//! woken wait's next step, any registration, a canceled wait's removal
//! (`sweep`). So the interrupt handler never drops a callback: dropping one
//! can free its fiber (the last reference, when the fiber finished
//! meanwhile on another core or thread), and freeing is the fiber side's
//! job.
//!
//! # The interrupt handler's side: no allocation
//!
//! `signal` stores the value (replacing, never growing anything), walks
//! the list to the oldest unspent waiter (no change to its buffer), and
//! completes the fiber's callback under the lock: a claim on the fiber's
//! state word, the unit result written in the fiber's own slot, and the
//! executor's `schedule_fiber`. It drops no callback and frees nothing but
//! the replaced value. Registering a waiter (the fiber's side) is where
//! the list may grow. What `schedule_fiber` does from an interrupt is the
//! executor's: exec-single pushes to its remote queue, which does not
//! allocate as long as its reserved capacity is not exceeded (exec-single's
//! `Builder::remote_capacity`). The callback is completed under the
//! signal's lock, so the executor's queue lock nests inside it (never the
//! other way round); the executor holds its own reference to the fiber it
//! queues, and the list still holds the callback's, so nothing is freed
//! there either.
//!
//! The `Drop` of a replaced value runs in `signal`'s caller, outside the
//! lock.

use core::fmt;

use crate::engine::erased::Value;
use crate::engine::tracing::{Named, here};
use crate::fiber::{Callback, RawCallback};
use crate::io::IO;
use crate::sync::IrqLock;
use crate::wait::list::{WaiterId, WaiterList};

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Wait = "Signal::wait",
}

/// What a waiter is to the protocol: something to wake once. `true` if this
/// wake-up won (the waiter had not been canceled): then its fiber will run
/// its next step and look at the slot.
pub(crate) trait Wake {
    fn wake(&self) -> bool;
}

impl Wake for RawCallback {
    #[inline]
    fn wake(&self) -> bool {
        self.complete_or_give_back(Ok(Value::unit())).is_ok()
    }
}

/// A listed waiter, and whether a `signal` has woken it already (or tried
/// to: a waiter whose fiber was canceled first loses the wake-up but is
/// spent all the same).
struct Entry<W> {
    waker: W,
    spent: bool,
}

/// The state behind the lock.
struct State<T, W> {
    value: Option<T>,
    /// Values replaced before a wait took them.
    overwritten: u64,
    /// Calls of `signal`.
    signaled: u64,
    /// Spent entries first (a signal spends the oldest unspent one), then
    /// the waiting ones.
    waiters: WaiterList<Entry<W>>,
}

/// The protocol, generic over the waiter (fiber callbacks in the crate,
/// probes in the loom models).
pub(crate) struct Core<T, W> {
    state: IrqLock<State<T, W>>,
}

impl<T, W: Wake> Core<T, W> {
    /// An empty signal, no waiter, no allocation.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Core {
            state: IrqLock::new(State {
                value: None,
                overwritten: 0,
                signaled: 0,
                waiters: WaiterList::new(),
            }),
        }
    }

    /// An empty signal (loom's lock is not `const`).
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Core {
            state: IrqLock::new(State {
                value: None,
                overwritten: 0,
                signaled: 0,
                waiters: WaiterList::new(),
            }),
        }
    }

    /// Stores `value` (counting the one it replaces, dropped after the
    /// lock is released) and wakes one waiter (module doc, rule 1). Drops
    /// no waiter and allocates nothing: safe in an interrupt handler.
    pub(crate) fn signal(&self, value: T) {
        let replaced = self.state.with(|state| {
            state.signaled = state.signaled.saturating_add(1);
            let replaced = state.value.replace(value);
            if replaced.is_some() {
                state.overwritten = state.overwritten.saturating_add(1);
            }
            replaced
        });
        drop(replaced);
        self.wake_one();
    }

    /// While a value is there, spends the oldest unspent waiters, waking
    /// each (under the lock), until one wake-up wins. The entries stay
    /// listed: only fiber-side code ([`sweep`](Core::sweep),
    /// [`deregister`](Core::deregister)) drops them. Allocates nothing,
    /// drops nothing.
    pub(crate) fn wake_one(&self) {
        self.state.with(|state| {
            if state.value.is_none() {
                return;
            }
            for entry in state.waiters.iter_mut().filter(|entry| !entry.spent) {
                entry.spent = true;
                if entry.waker.wake() {
                    return;
                }
            }
        });
    }

    /// Lists `waiter` if the slot is empty (its id, for the removal), or
    /// gives it back if the value is there (module doc, rule 2). The fiber
    /// side: sweeps spent entries first.
    pub(crate) fn register(&self, waiter: W) -> Result<WaiterId, W> {
        self.sweep();
        self.state.with(|state| {
            if state.value.is_some() {
                Err(waiter)
            } else {
                Ok(state.waiters.push(Entry {
                    waker: waiter,
                    spent: false,
                }))
            }
        })
    }

    /// Removes the waiter `id` if it is still listed (a canceled wait),
    /// and sweeps spent entries; `true` if it was listed. What is removed
    /// is dropped outside the lock (the fiber side).
    pub(crate) fn deregister(&self, id: WaiterId) -> bool {
        let removed = self.state.with(|state| state.waiters.remove(id));
        let listed = removed.is_some();
        drop(removed);
        self.sweep();
        listed
    }

    /// Drops the spent entries at the front, one by one, each outside the
    /// lock (the fiber side: dropping a callback may free a fiber).
    pub(crate) fn sweep(&self) {
        loop {
            let spent = self.state.with(|state| {
                let front_spent = state.waiters.first_mut().is_some_and(|entry| entry.spent);
                if front_spent {
                    state.waiters.pop()
                } else {
                    None
                }
            });
            match spent {
                Some(entry) => drop(entry),
                None => return,
            }
        }
    }

    /// Moves the value out, if it is there. Drops nothing else: callable
    /// from an interrupt handler.
    pub(crate) fn take(&self) -> Option<T> {
        self.state.with(|state| state.value.take())
    }

    /// [`take`](Core::take), then [`sweep`](Core::sweep): a woken wait's
    /// step (the fiber side).
    pub(crate) fn take_and_sweep(&self) -> Option<T> {
        let value = self.take();
        self.sweep();
        value
    }

    /// Whether a value is there.
    pub(crate) fn is_signaled(&self) -> bool {
        self.state.with(|state| state.value.is_some())
    }

    /// Values replaced before a wait took them.
    pub(crate) fn overwritten(&self) -> u64 {
        self.state.with(|state| state.overwritten)
    }

    /// Calls of `signal`.
    pub(crate) fn signaled(&self) -> u64 {
        self.state.with(|state| state.signaled)
    }

    /// Waiters listed and not woken yet.
    pub(crate) fn waiters(&self) -> usize {
        self.state
            .with(|state| state.waiters.iter().filter(|entry| !entry.spent).count())
    }

    /// Entries listed, spent ones included (for tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.state.with(|state| state.waiters.len())
    }
}

/// A value that an interrupt handler (or any thread) hands to a waiting
/// fiber: the latest value wins, replaced values are counted.
///
/// Made with a `const fn`, so that it can live in a `static` shared by a
/// fiber and an interrupt handler. [`signal`](Signal::signal) never
/// allocates, blocks, panics or frees a fiber, and takes only a short
/// critical section (with `std`, a mutex); [`wait`](Signal::wait) is a
/// program that takes the value, suspending until there is one. The idea
/// (a static, latest-value-wins signal completed from interrupt handlers)
/// is embassy's `Signal`; none of its code is used.
///
/// # Contract
///
/// * **Fired before any wait**: the value is kept; the next `wait` takes
///   it at once, without suspending.
/// * **Fired twice before a wait took the value**: the latest value wins;
///   each replaced value is dropped inside `signal` (so in the interrupt
///   handler: prefer `Copy` values) and counted by
///   [`overwritten`](Signal::overwritten). Nothing is lost uncounted.
/// * **Fired after the waiting fiber was canceled**: the canceled wait
///   removed its waiter (no allocation); the value stays for the next
///   wait. A wait canceled after its wake-up but before it took the value
///   takes nothing and passes the wake-up on to the next waiter.
/// * **Several fibers waiting at once**: allowed; one is woken per value,
///   oldest first. The value goes to the first wait that *runs*: a wait
///   that starts while the value is there takes it at once; a woken
///   waiter that finds it gone waits again, at the back. No panic, no
///   hang.
/// * **Waking from an interrupt handler**: the woken fiber runs at its
///   executor's next turn. On exec-single without `std`, the wake-up is a
///   push to the remote queue, which does not allocate within the room
///   reserved with its builder's `remote_capacity`, and the loop's idle
///   check and `Clock::wait` (`wfi`) run in one critical section, so the
///   wake-up is never lost.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Signal, wstp::Runtime};
///
/// static DONE: Signal<u32> = Signal::new();
///
/// // Plays the interrupt handler: fires twice before anyone waits.
/// DONE.signal(1);
/// DONE.signal(2);
/// let io: IO<u32, ()> = DONE.wait();
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(2));
/// assert_eq!(DONE.overwritten(), 1);
///
/// // Now a wait that suspends until a thread signals.
/// let io: IO<u32, ()> = DONE.wait();
/// std::thread::spawn(|| DONE.signal(7));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(7));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Signal<T> {
    core: Core<T, RawCallback>,
}

impl<T> fmt::Debug for Signal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("signaled", &self.core.is_signaled())
            .field("overwritten", &self.core.overwritten())
            .field("waiters", &self.core.waiters())
            .finish()
    }
}

impl<T> Default for Signal<T> {
    fn default() -> Self {
        Signal::new()
    }
}

impl<T> Signal<T> {
    /// An empty signal: no value, no waiter. `const`, for `static`s; it
    /// allocates nothing.
    #[cfg(not(loom))]
    pub const fn new() -> Signal<T> {
        Signal { core: Core::new() }
    }

    /// An empty signal (loom's lock is not `const`).
    #[cfg(loom)]
    pub fn new() -> Signal<T> {
        Signal { core: Core::new() }
    }

    /// Stores `value` and makes the oldest waiting fiber runnable (it
    /// takes the value at its next step). If a value was there still, it is
    /// replaced: dropped here, and counted by
    /// [`overwritten`](Signal::overwritten).
    ///
    /// Safe to call from an interrupt handler, any number of times: no
    /// allocation, no blocking, no panic; the only lock is a short
    /// critical section. Waking the fiber is the executor's
    /// `schedule_fiber` (on exec-single without `std`: a push to its remote
    /// queue within its reserved capacity, then the clock's `notify`).
    pub fn signal(&self, value: T) {
        self.core.signal(value)
    }

    /// Moves the value out if it is there, without waiting (`None` if not):
    /// for polling code, or to clear a stale value before waiting.
    pub fn try_take(&self) -> Option<T> {
        self.core.take()
    }

    /// Whether a value is there (not yet taken by a wait).
    pub fn is_signaled(&self) -> bool {
        self.core.is_signaled()
    }

    /// How many values were replaced by a later [`signal`](Signal::signal)
    /// before a wait took them (saturating).
    pub fn overwritten(&self) -> u64 {
        self.core.overwritten()
    }

    /// How many times [`signal`](Signal::signal) was called (saturating).
    pub fn signaled(&self) -> u64 {
        self.core.signaled()
    }

    /// How many fibers are waiting in [`wait`](Signal::wait) (for
    /// diagnostics and tests).
    pub fn waiters(&self) -> usize {
        self.core.waiters()
    }
}

impl<T: Send + 'static> Signal<T> {
    /// Waits for a value and takes it: at once if one is there, otherwise
    /// when a [`signal`](Signal::signal) comes (at the executor's next turn
    /// after it). Waiters are woken one per value, oldest first.
    ///
    /// Canceling the wait removes its waiter (no allocation); a value that
    /// comes after is kept for the next wait. A wait canceled between its
    /// wake-up and its next step takes nothing, and passes the wake-up on
    /// to the next waiter.
    #[track_caller]
    pub fn wait<E: Send + 'static>(&'static self) -> IO<T, E> {
        IO::defer_at::<Named<Wait>, _>(here(), move || wait_untraced(self))
            // A wait woken but canceled before it took the value: the
            // value is still there, wake the next waiter for it (a no-op
            // if the slot is empty or nobody waits).
            .on_cancel_untraced(IO::delay_untraced(move || {
                self.core.wake_one();
                self.core.sweep();
            }))
    }
}

/// The wait's loop: take the value, or register and take it after the
/// wake-up; a woken wait that finds the slot empty again waits again.
fn wait_untraced<T: Send + 'static, E: Send + 'static>(signal: &'static Signal<T>) -> IO<T, E> {
    IO::defer_untraced(move || {
        if let Some(value) = signal.core.take_and_sweep() {
            return IO::pure(value);
        }
        let suspend: IO<(), E> = IO::from_callback_untraced(move |callback: Callback<(), E>| {
            match signal.core.register(callback.into_raw()) {
                // Signaled meanwhile: resume now, take it in the next step.
                Err(raw) => {
                    let _ = raw.wake();
                    None
                }
                // The finalizer of a wait canceled while listed.
                Ok(id) => Some(IO::delay_untraced(move || {
                    let _ = signal.core.deregister(id);
                })),
            }
        });
        suspend.flat_map_untraced(move |()| match signal.core.take_and_sweep() {
            Some(value) => IO::pure(value),
            None => wait_untraced(signal),
        })
    })
}
