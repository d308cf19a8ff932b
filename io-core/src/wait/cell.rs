//! The join cell: a value set once and awaited by any number of fibers
//! (a fiber's outcome, a `Deferred`), and the waiters on it.
//!
//! # The cell
//!
//! A [`JoinCell<T>`] is a value set once and awaited by any number of
//! fibers. Every fiber has one in its header, for its outcome (a fiber
//! started with `IO::start`; `fiber/join.rs`); `Deferred`
//! (`stdlib/data/deferred.rs`) is the same cell in an `Arc`, with a typed
//! API. It lives in `wait/`, below both, so that the fiber core depends on
//! no data type and the data types on no fiber internals.
//!
//! The state (behind a short lock of the sync shim, never held across a
//! suspension) is either *empty* with a list of waiters, or *complete* with
//! the value. `complete` moves it from empty to complete and takes the
//! waiter list under the lock; in the same critical section each waiter
//! reads the value and hands back the fiber to resume with what it read,
//! and the fibers are resumed after the lock is released (a resumed fiber may run at once on
//! another thread and read this cell: it must not find the lock held while
//! its waker schedules it). A reader either reads the value under the lock
//! or registers a waiter; a reader canceled while waiting removes its own
//! waiter (the async finalizer of [`wait_for`]), so nothing is left behind.
//! A second `complete` finds the state complete and gives its value back;
//! the first value stays.
//!
//! # Waits nobody can end
//!
//! A waiting reader is referenced by the cell's waiter list (its callback
//! holds the fiber), and the wait's cleanup (which removes the waiter if
//! the reader is canceled) is part of the fiber. If that cleanup held the
//! cell strongly, a fiber waiting on a `Deferred` that nobody else can
//! reach, or joining a fiber that nothing else references, would keep
//! itself alive through the cell forever: a cycle of reference counts,
//! which Cats Effect's garbage collector frees and a reference count
//! never does. So the cleanup holds the cell's owner *weakly*
//! ([`CellOwner::Weak`]: a `Weak` of the deferred's `Arc`, a
//! [`WeakFiberRef`] of the joined fiber), and [`wait_for`] lets go of its
//! strong reference once the waiter is registered. When the last strong
//! reference goes (the last `Deferred` handle and every program built
//! from one; the joined fiber's last handle, callback or queue entry),
//! the cell is dropped with its waiter list, which drops the callbacks,
//! which frees the waiting fibers that nothing else holds: their
//! continuations are dropped and their finalizers are **not** run (as a
//! garbage-collected fiber's are not), and their executor counts them as
//! ended (`FiberInner`'s `Drop`), so that a `block_on` whose main fiber is
//! freed this way returns `RunError::Deadlock`.
//!
//! Where it cannot be known: reference counting sees only references.
//! Anything else that holds the cell strongly keeps the waiters, and so
//! keeps a cycle if it is reachable from them: a continuation of the
//! waiting fiber that captures a clone of the `Deferred` (or a handle of
//! the fiber it joins) keeps it, and so itself, alive, as does a waiting
//! fiber's `FiberHandle` kept by a fiber that waits for it. Every wait for
//! a permit (`Semaphore::acquire`, `acquire_n`, `with_permit`, `permit()`,
//! `Mutex::with_lock`, `lock()`, used or composed) holds its semaphore
//! weakly while it waits, and the release that wakes it hands the fiber a
//! strong reference (`wait/list.rs`, "Holding what one waits on"): a
//! fiber waiting for a semaphore or a mutex that nobody else can reach is
//! freed with it. A fiber that *holds* a permit (inside `with_permit`,
//! `with_lock`, `lock()`) keeps the semaphore until it releases it: a
//! fiber waiting for a mutex whose holder never ends, one that waits for a
//! mutex it holds itself, and two that wait for each other's are such
//! cycles (a holder that is itself freed, because it waits on what nobody
//! can reach, lets go of it, and the fibers waiting for it are freed
//! next). The
//! combinators that keep their children to cancel them (`race`, `both`,
//! `par_sequence` and their variants) hold them strongly while they wait
//! for them, and the children hold the parent's callback: a parent racing
//! two waits that nobody can end is such a cycle too. Such fibers
//! are never freed, not even by dropping their executor (each holds the
//! executor's shared state, which then outlives it too): drop the handle,
//! or write the continuation so that it does not capture what it waits on
//! (take what it needs through the value it waits for, or a `Weak`).
//!
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::task::{Poll, Waker};

use super::list::{SmallWaiterList, WaiterId};
use crate::engine::blocks::PoolBox;
use crate::engine::erased::Value;
use crate::engine::tracing::{OpMeta, Site};
use crate::fiber::RawCallback;
use crate::io::IO;
use crate::sync::Mutex;

/// One waiting reader of a cell whose value is an `A`: what the cell's
/// users make. The cell lists it as a [`Listed`], the same type for every
/// `A`, so that the waiter list's code (`wait/list.rs`) exists once,
/// not once per type of value a program waits for (on a microcontroller,
/// that code is most of what a cell costs in flash).
pub(crate) struct Waiter<A> {
    listed: Listed,
    /// What `listed`'s reading function reads.
    _reads: PhantomData<fn(&mut A)>,
}

impl<A> Waiter<A> {
    /// A fiber (a `get`, a join) to resume with what `R` reads of the
    /// value (never resumed if `R` finds nothing: see [`Read::read`]).
    /// Stored inline in the waiter list: waiting is no allocation beyond
    /// the list's entry.
    pub(crate) fn resume<R: Read<A>>(callback: RawCallback) -> Self {
        Waiter {
            listed: Listed::Resume {
                callback,
                read: read_erased::<A, R>,
            },
            _reads: PhantomData,
        }
    }

    /// Any reader (the loom models' probes): reads the value, and returns
    /// the fiber to resume, if any.
    #[cfg(all(loom, test))]
    pub(crate) fn call(f: alloc::boxed::Box<dyn FnOnce(&A) -> Option<Wake> + Send>) -> Self
    where
        A: 'static,
    {
        Waiter {
            listed: Listed::Call(alloc::boxed::Box::new(move |value: *mut ()| {
                // SAFETY: `Listed::read`'s caller passes the `A` this
                // waiter was made for.
                f(unsafe { &*value.cast::<A>() })
            })),
            _reads: PhantomData,
        }
    }
}

/// A [`Waiter`] as its cell lists it: the type of the value is erased from
/// the reading function, which is only ever called with the value of the
/// cell it was made for (`JoinCell<A>` takes only `Waiter<A>`s).
pub(crate) enum Listed {
    /// See [`Waiter::resume`]; `read` is `read_erased::<A, R>`.
    Resume {
        callback: RawCallback,
        read: unsafe fn(*mut ()) -> Option<Value>,
    },
    /// A task awaiting the value as a future (`future/join.rs`): woken once
    /// the value is there, to poll again and read it itself (it reads
    /// nothing here, so `poll_value` lists it directly).
    Task(Waker),
    /// See `Waiter::call`.
    #[cfg(all(loom, test))]
    Call(alloc::boxed::Box<dyn FnOnce(*mut ()) -> Option<Wake> + Send>),
}

impl Listed {
    /// Reads the value; returns the fiber to resume (once the cell's lock is
    /// released) with what it read.
    ///
    /// # Safety
    /// * `value` points to the value of the cell the waiter was made for
    ///   (an `A` of its `Waiter<A>`), valid and not otherwise borrowed for
    ///   the call.
    // Not inlined: `read_all` calls it in two places (the inline waiter,
    // the others), and one copy keeps the firmware's flash within budget.
    #[inline(never)]
    unsafe fn read(self, value: *mut ()) -> Option<Wake> {
        match self {
            Listed::Resume { callback, read } => Some(Wake::Fiber {
                callback,
                // SAFETY: forwarded precondition: `read` reads the `A`
                // that `value` points to.
                value: unsafe { read(value) },
            }),
            Listed::Task(waker) => Some(Wake::Task(waker)),
            #[cfg(all(loom, test))]
            Listed::Call(f) => f(value),
        }
    }
}

/// How a waiter reads a cell's value: a type, so that the reading function
/// is a plain `fn` pointer (no closure to box per waiter).
///
/// A reader gets the value mutably, under the cell's lock, so that the one
/// owner of a fiber's outcome (a `FiberHandle`'s join) can move it out
/// instead of cloning it; every other reader only reads.
pub(crate) trait Read<A>: 'static {
    /// What the waiting fiber receives.
    type Out: Send + 'static;
    /// Reads the value (or moves it out, for the value's one owner).
    /// `None`: there is nothing this reader can ever read (a `Deferred`'s
    /// value a `take` moved out): the waiting fiber is never resumed, as
    /// if it had gone on with `IO::never` (its callback is dropped, after
    /// the cell's lock). Deciding that here, in the read, rather than in a
    /// step after the wake-up, spares the waiting fiber a frame, and so
    /// the continuation buffer a suspended fiber with no other frame would
    /// keep.
    fn read(value: &mut A) -> Option<Self::Out>;
}

/// Reads nothing: the waiter only waits for the value to be there.
pub(crate) struct Presence;

impl<A> Read<A> for Presence {
    type Out = ();
    fn read(_: &mut A) -> Option<()> {
        Some(())
    }
}

/// The erased reading function of a `Waiter::resume` for `R`.
///
/// # Safety
/// * `value` points to a valid `A`, not otherwise borrowed for the call.
unsafe fn read_erased<A, R: Read<A>>(value: *mut ()) -> Option<Value> {
    // SAFETY: the caller's precondition.
    R::read(unsafe { &mut *value.cast::<A>() }).map(Value::new)
}

/// A fiber to resume with a value, or a task to wake, once no lock is held.
pub(crate) enum Wake {
    /// A waiting fiber and what it read; `None`: nothing to read, the
    /// fiber is never resumed ([`Read::read`]).
    Fiber {
        callback: RawCallback,
        value: Option<Value>,
    },
    /// A waiting future's task.
    Task(Waker),
}

impl Wake {
    /// Resumes the fiber (if it was not resumed already, by cancellation),
    /// or wakes the task.
    pub(crate) fn run(self) {
        match self {
            // A lost claim means cancellation ended the wait first: the
            // value is dropped, as the canceled reader no longer wants it.
            Wake::Fiber {
                callback,
                value: Some(value),
            } => {
                let _ = callback.complete(Ok(value));
            }
            // Dropped here, outside the cell's lock: it may hold the last
            // reference to the fiber, whose drop runs user code.
            Wake::Fiber { value: None, .. } => {}
            Wake::Task(waker) => waker.wake(),
        }
    }
}

/// A cell's state: waiting for its value (with the waiters, once there are
/// any), or holding it. One or the other, never both (`complete` takes the
/// list as it sets the value), so the two share their bytes: in a fiber's
/// join state the list's pointer lies beside the outcome's tag, which
/// tells the two apart (4 bytes fewer per fiber on 32-bit targets than a
/// value slot and a list pointer side by side).
enum CellState<A> {
    /// In registration order: woken in that order, removed in O(log n)
    /// when a reader is canceled (see `wait/list.rs`). Out of line, and
    /// made by the first waiter: every fiber has a cell (its join state)
    /// and most are never joined, so the list costs a fiber one word
    /// instead of the list's three (and its 8-byte alignment on 32-bit
    /// targets); the list goes when the cell completes. Its box is a block
    /// of io-core's pool ([`PoolBox`]): with `std`, the first joiner of a
    /// fiber pays a thread-local pointer swap, not a `malloc` (and the
    /// completion not a `free`). The first waiter is inline in the box
    /// ([`SmallWaiterList`]): one waiter, the common case, allocates
    /// nothing else.
    Waiting(Option<ListBox>),
    /// The value, set once.
    Done(A),
}

impl<A> CellState<A> {
    fn value(&self) -> Option<&A> {
        match self {
            CellState::Done(value) => Some(value),
            CellState::Waiting(_) => None,
        }
    }

    fn value_mut(&mut self) -> Option<&mut A> {
        match self {
            CellState::Done(value) => Some(value),
            CellState::Waiting(_) => None,
        }
    }

    /// The waiter list, if the cell waits and has one.
    fn waiters(&mut self) -> Option<&mut SmallWaiterList<Listed>> {
        match self {
            CellState::Waiting(Some(list)) => Some(list),
            _ => None,
        }
    }
}

/// A cell's waiter list in its block of the pool ([`PoolBox`]), dropped
/// out of line: the drop of every fiber (whose join state is a cell) then
/// calls it only if the fiber still has a list, instead of carrying the
/// list's whole drop inline.
struct ListBox(ManuallyDrop<PoolBox<SmallWaiterList<Listed>>>);

impl ListBox {
    fn new() -> Self {
        ListBox(ManuallyDrop::new(PoolBox::new(SmallWaiterList::new())))
    }
}

impl core::ops::Deref for ListBox {
    type Target = SmallWaiterList<Listed>;

    fn deref(&self) -> &SmallWaiterList<Listed> {
        &self.0
    }
}

impl core::ops::DerefMut for ListBox {
    fn deref_mut(&mut self) -> &mut SmallWaiterList<Listed> {
        &mut self.0
    }
}

impl Drop for ListBox {
    #[inline(never)]
    fn drop(&mut self) {
        // SAFETY: the box is dropped once, here, and never used again.
        unsafe { ManuallyDrop::drop(&mut self.0) }
    }
}

/// The fibers and tasks a completion wakes, in the order they waited.
struct Wakes {
    /// The first (most completions wake one waiter: no allocation).
    first: Option<Wake>,
    rest: Vec<Wake>,
}

impl Wakes {
    /// Resumes or wakes them, in order (once no lock is held).
    #[inline(never)]
    fn run(self) {
        // Not a chain of the two: for the usual single wake-up, no
        // iterator over the empty `rest`.
        if let Some(first) = self.first {
            first.run();
        }
        if !self.rest.is_empty() {
            self.rest.into_iter().for_each(Wake::run);
        }
    }
}

/// Has every waiter read the value, and takes them out of `waiters`. Not
/// generic over the cell's value: one copy for every `JoinCell<A>`.
///
/// # Safety
/// * Every waiter was made for the value `value` points to (an `A` of its
///   `Waiter<A>`), which is valid and not otherwise borrowed for the call.
#[inline(never)]
unsafe fn read_all(waiters: &mut SmallWaiterList<Listed>, value: *mut ()) -> Wakes {
    let first = waiters.take_first();
    let mut wakes = Wakes {
        // SAFETY: forwarded precondition.
        first: first.and_then(|first| unsafe { first.read(value) }),
        rest: Vec::new(),
    };
    // The common case, one waiter (inline in the list), ends here.
    if let Some(rest) = waiters.rest() {
        for waiter in rest.take_all() {
            // SAFETY: forwarded precondition.
            if let Some(wake) = unsafe { waiter.read(value) } {
                if wakes.first.is_none() {
                    wakes.first = Some(wake);
                } else {
                    wakes.rest.push(wake);
                }
            }
        }
    }
    wakes
}

/// A value set once, awaited by fibers: a fiber's join state, and the cell
/// behind a `Deferred` (module doc).
pub(crate) struct JoinCell<A> {
    state: Mutex<CellState<A>>,
}

impl<A> JoinCell<A> {
    pub(crate) fn new() -> Self {
        JoinCell {
            state: Mutex::new(CellState::Waiting(None)),
        }
    }

    /// Sets the value and wakes the waiters; gives the value back if the
    /// cell was already complete.
    pub(crate) fn complete(&self, value: A) -> Result<(), A> {
        let (list, wakes) = {
            let mut state = self.state.lock();
            let list = match &mut *state {
                CellState::Done(_) => return Err(value),
                CellState::Waiting(list) => list.take(),
            };
            *state = CellState::Done(value);
            let Some(mut list) = list else {
                return Ok(());
            };
            // The waiters read the value under the lock, in the same
            // critical section that set it (it may be moved out by a
            // handle's owner later, so it is not read without the lock);
            // the fibers are resumed once the lock is released.
            let value = state.value_mut().expect("io-core: set just above");
            // SAFETY: the list of a `JoinCell<A>` holds only the waiters of
            // `Waiter<A>`s (`on_value`, `poll_value`), and `value` is its
            // `A`, borrowed only for the call.
            let wakes = unsafe { read_all(&mut list, core::ptr::from_mut(value).cast()) };
            (list, wakes)
        };
        // Emptied by `read_all`: its box goes after the lock.
        drop(list);
        wakes.run();
        Ok(())
    }

    /// Calls `f` with the value now if there is one (returns `None`), or
    /// registers it as a waiter (returns its id).
    pub(crate) fn on_value(&self, f: Waiter<A>) -> Option<WaiterId> {
        let mut state = self.state.lock();
        match &mut *state {
            CellState::Done(value) => {
                // SAFETY: `f` is a `Waiter<A>` and `value` this cell's `A`,
                // borrowed only here.
                let wake = unsafe { f.listed.read(core::ptr::from_mut(value).cast()) };
                drop(state);
                if let Some(wake) = wake {
                    wake.run();
                }
                None
            }
            CellState::Waiting(list) => Some(list.get_or_insert_with(ListBox::new).push(f.listed)),
        }
    }

    /// For a future awaiting the value: reads it with `read` if it is set;
    /// otherwise registers `waker` as the waiter `*waiter` (or replaces that
    /// waiter's waker, unless it would wake the same task) and returns
    /// `Pending`. The waker is cloned, and a replaced one dropped, outside
    /// the lock (they are user code).
    pub(crate) fn poll_value<R>(
        &self,
        waiter: &mut Option<WaiterId>,
        waker: &Waker,
        read: impl FnOnce(&mut A) -> R,
    ) -> Poll<R> {
        {
            let mut state = self.state.lock();
            if let Some(value) = state.value_mut() {
                // `complete` took the waiter, if there was one.
                *waiter = None;
                return Poll::Ready(read(value));
            }
            if let Some(Listed::Task(stored)) = waiter.and_then(|id| state.waiters()?.get_mut(id)) {
                if stored.will_wake(waker) {
                    return Poll::Pending;
                }
            }
        }
        let fresh = waker.clone();
        let mut state = self.state.lock();
        if let Some(value) = state.value_mut() {
            *waiter = None;
            let out = read(value);
            drop(state);
            drop(fresh);
            return Poll::Ready(out);
        }
        let replaced = match waiter.and_then(|id| state.waiters()?.get_mut(id)) {
            Some(stored) => Some(core::mem::replace(stored, Listed::Task(fresh))),
            None => match &mut *state {
                CellState::Waiting(list) => {
                    let list = list.get_or_insert_with(ListBox::new);
                    *waiter = Some(list.push(Listed::Task(fresh)));
                    None
                }
                CellState::Done(_) => unreachable!("io-core: checked just above"),
            },
        };
        drop(state);
        drop(replaced);
        Poll::Pending
    }

    /// Removes a waiter that has not been woken (its reader was canceled).
    pub(crate) fn remove_waiter(&self, id: WaiterId) {
        let removed = {
            let mut state = self.state.lock();
            state.waiters().and_then(|list| list.remove(id))
        };
        drop(removed);
    }

    /// Reads the value, if set.
    pub(crate) fn with_value<R>(&self, f: impl FnOnce(Option<&A>) -> R) -> R {
        f(self.state.lock().value())
    }

    /// Changes the value in place, if set (for fiber handles' owners).
    pub(crate) fn with_value_mut<R>(&self, f: impl FnOnce(Option<&mut A>) -> R) -> R {
        f(self.state.lock().value_mut())
    }

    /// How many waiters are registered (for tests of cancellation).
    pub(crate) fn waiter_count(&self) -> usize {
        self.state.lock().waiters().map_or(0, |list| list.len())
    }
}

/// Something that owns a cell (a deferred's `Arc`, or a reference to a
/// fiber, whose join state is a cell inside the fiber).
pub(crate) trait CellOwner<A>: Send + Sized + 'static {
    /// A reference that does not keep the cell alive: what a waiting
    /// reader's cleanup holds (module doc, "Waits nobody can end").
    type Weak: Send + 'static;
    /// The cell.
    fn cell(&self) -> &JoinCell<A>;
    /// A weak reference to the cell's owner.
    fn downgrade(&self) -> Self::Weak;
    /// The owner again, if it is still alive.
    fn upgrade(weak: &Self::Weak) -> Option<Self>;
}

/// An IO that waits for the cell's value and produces what `R` reads of it,
/// recorded as the operation `M` at `site` (a join, a `Deferred::get`).
pub(crate) fn wait_for<A, R, E, C, M>(site: Option<Site>, owner: C) -> IO<R::Out, E>
where
    A: 'static,
    R: Read<A>,
    E: Send + 'static,
    C: CellOwner<A>,
    M: OpMeta,
{
    IO::from_callback_at::<M, _>(site, move |cb| {
        let id = owner.cell().on_value(Waiter::resume::<R>(cb.into_raw()))?;
        // The cleanup holds the cell weakly, and `owner` is dropped here:
        // the wait keeps nothing alive that only its own waiter would keep
        // (module doc, "Waits nobody can end"). A cell gone by the time
        // the wait is canceled took the waiter with it.
        let weak = owner.downgrade();
        Some(IO::delay_untraced(move || {
            if let Some(owner) = C::upgrade(&weak) {
                owner.cell().remove_waiter(id);
            }
        }))
    })
}
