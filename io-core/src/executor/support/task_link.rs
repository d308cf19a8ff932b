//! [`TaskLink`]: the hand-off between whoever resumes a fiber and the one
//! task (a future, polled by an async runtime) that owns the fiber for its
//! whole life. The protocol is in the type's documentation (this module
//! is private; the type is public as `executor::support::TaskLink`).
//!
//! Design credits: tokio's task state word and its waker protocol
//! (`runtime/task/state.rs`, `sync/task/atomic_waker.rs`: a state that
//! says who owns the waker cell, wake by value after the state is
//! released) and futures' `AtomicWaker`; no code is copied.

use core::task::Waker;

use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

const IDLE: usize = 0;
const PARKED: usize = 1;
const WAKING: usize = 2;
const NOTIFIED: usize = 3;
const CLOSED: usize = 4;

/// The hand-off between the completers that resume a fiber and the one
/// task that owns it. Shared by the task and the fiber's slot, typically
/// in an `Arc`.
///
/// An executor on an async runtime (exec-tokio) runs each fiber inside one
/// task: the task runs the fiber, and when the fiber waits, the task parks
/// (returns `Pending`) instead of ending. The completer that ends the wait
/// holds the fiber ([`Fiber`](crate::Fiber) handles are unique) and must
/// give it back to that task and wake it, from any thread. The link is
/// where the fiber is handed over and where the task leaves its `Waker`.
/// Neither side keeps the other alive through it: the task holds the link,
/// the fiber holds it in its slot ([`Executor::FiberSlot`](crate::Executor::FiberSlot)),
/// and the link holds the fiber only between a delivery and the task's
/// next poll, so a fiber whose wakers are all gone is still freed; its
/// slot then [closes](TaskLink::close) the link, which wakes the task so
/// that it ends.
///
/// # Protocol
///
/// One state word and two cells, the item (the fiber) and the waker. The
/// states, and who owns which cell in each:
///
/// | state      | meaning | item cell | waker cell |
/// |------------|---------|-----------|------------|
/// | `IDLE`     | the task has the fiber (runs it) or waits for its first delivery without a waker yet | empty, the deliverer's to fill | the task's (empty) |
/// | `PARKED`   | the task returned `Pending` and waits to be woken | empty, the deliverer's to fill | holds the waker; owned by whoever moves the state out of `PARKED` |
/// | `WAKING`   | a deliverer left the item and is taking the waker | the deliverer's | the deliverer's |
/// | `NOTIFIED` | an item waits for the task | the task's to take | the task's (empty) |
/// | `CLOSED`   | the task is gone, or the fiber was freed: nothing more is handed over | empty (a late deliverer takes its item back) | empty |
///
/// * [`deliver`](TaskLink::deliver) (a completer, any thread): writes the
///   item, then `IDLE -> NOTIFIED` (the task is running and looks before it
///   parks: no wake needed) or `PARKED -> WAKING`, takes the waker,
///   `WAKING -> NOTIFIED` and wakes it (by value: the clone the task left
///   is the one consumed). `CLOSED`: the item comes back to the caller,
///   who drops it. A compare-and-swap, never a blind store, ends `WAKING`,
///   so a close in between is never overwritten.
/// * [`park`](TaskLink::park) (the task, in its poll, after the fiber
///   waits): if an item is already there, takes it (the fiber was resumed
///   while the task was still running it: run it again at once).
///   Otherwise leaves a clone of its waker, then `IDLE -> PARKED`; if that
///   fails, the waker is its own again and it looks at what came
///   instead.
/// * [`take`](TaskLink::take) (the task, at the start of a poll):
///   `NOTIFIED -> IDLE` and the item. A poll while `PARKED` (spurious: no
///   delivery yet) takes its waker back (`PARKED -> IDLE`) and parks
///   anew; one while `WAKING` returns `Pending` and leaves both cells
///   alone: the deliverer's wake is on its way.
/// * [`close`](TaskLink::close) (the task when it ends or is dropped, the
///   fiber's slot when the fiber is freed): swaps in `CLOSED`, wakes a
///   parked task (so that it sees the close and ends) and returns an item
///   that was waiting, for the caller to drop.
///
/// `Release` on every transition that publishes a cell (`-> NOTIFIED`,
/// `-> PARKED`), `Acquire` on every one that takes a cell over (`NOTIFIED
/// ->`, `PARKED ->`, the close). The item cell has one writer at a time by
/// the caller's promise (`deliver` is `unsafe`: a fiber handle is unique,
/// so it is not delivered again before the task has taken and run it).
/// The model is checked with loom (`tests/task_link_loom.rs` of
/// `executor/support`).
pub struct TaskLink<T> {
    state: AtomicUsize,
    item: UnsafeCell<Option<T>>,
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: the cells are reached only by the owner the state word names
// (module doc), with `Release`/`Acquire` on every hand-over; the item and
// the waker move between threads, so `T: Send` (a `Waker` is `Send` and
// `Sync`).
unsafe impl<T: Send> Send for TaskLink<T> {}
// SAFETY: as above: every `&self` method takes a cell only in the states
// that make it the owner.
unsafe impl<T: Send> Sync for TaskLink<T> {}

impl<T> core::fmt::Debug for TaskLink<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let state = match self.state.load(Ordering::Relaxed) {
            IDLE => "idle",
            PARKED => "parked",
            WAKING => "waking",
            NOTIFIED => "notified",
            _ => "closed",
        };
        f.debug_struct("TaskLink").field("state", &state).finish()
    }
}

/// What the task finds in the link at the start of a poll
/// ([`TaskLink::take`]).
#[derive(Debug)]
pub enum Taken<T> {
    /// The item delivered: run it.
    Item(T),
    /// Nothing yet: park ([`TaskLink::park`]).
    Empty,
    /// A delivery is waking the task right now: return `Pending`, without
    /// parking again (the wake is on its way).
    Waking,
    /// The link is closed: the task has nothing more to run and ends.
    Closed,
}

/// What became of a [`TaskLink::park`].
#[derive(Debug)]
pub enum Parked<T> {
    /// The waker is left in the link: return `Pending`.
    Parked,
    /// An item came first (it was delivered while the task still ran):
    /// run it.
    Item(T),
    /// The link is closed: the task ends.
    Closed,
}

impl<T> Default for TaskLink<T> {
    fn default() -> Self {
        TaskLink::new()
    }
}

impl<T> TaskLink<T> {
    /// An open link, `IDLE`: no item, no waker.
    pub fn new() -> Self {
        TaskLink {
            state: AtomicUsize::new(IDLE),
            item: UnsafeCell::new(None),
            waker: UnsafeCell::new(None),
        }
    }

    /// Hands `item` to the task and wakes it if it is parked; any thread.
    /// `Err(item)` if the link is closed (the task is gone): the caller
    /// drops it.
    ///
    /// # Safety
    ///
    /// At most one `deliver` at a time, and none while an item delivered
    /// before is still in the link (not yet taken by the task): the item
    /// cell has one writer. For a fiber this is the executor contract's
    /// uniqueness of [`Fiber`](crate::Fiber) handles: a fiber delivered to
    /// its task is not resumed again before that task has taken and run
    /// it.
    pub unsafe fn deliver(&self, item: T) -> Result<(), T> {
        // SAFETY: the caller's promise: no other writer, and the task reads
        // the cell only after it sees `NOTIFIED`, which this call has not
        // published yet (a closed link's cell is read by nobody).
        self.item.with_mut(|cell| unsafe { *cell = Some(item) });
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            match state {
                IDLE => match self.state.compare_exchange_weak(
                    IDLE,
                    NOTIFIED,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    // The task is running (or about to poll for the first
                    // time): it looks before it parks.
                    Ok(_) => return Ok(()),
                    Err(actual) => state = actual,
                },
                PARKED => match self.state.compare_exchange_weak(
                    PARKED,
                    WAKING,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return self.wake_parked(),
                    Err(actual) => state = actual,
                },
                // `WAKING` and `NOTIFIED` would mean a second delivery,
                // which the caller promised away; only `CLOSED` is left.
                _ => return Err(self.take_back()),
            }
        }
    }

    /// The rest of a delivery to a parked task: the state is `WAKING`,
    /// owned by this deliverer.
    fn wake_parked(&self) -> Result<(), T> {
        // SAFETY: `WAKING` makes the waker cell this deliverer's (module
        // doc); the task's write of it happened before its `PARKED`
        // (`Release`), which the `Acquire` above read.
        let waker = self.waker.with_mut(|cell| unsafe { (*cell).take() });
        let result = match self.state.compare_exchange(
            WAKING,
            NOTIFIED,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => Ok(()),
            // Closed meanwhile (only `close` leaves `WAKING`): the item
            // goes back to the caller; the task is woken anyway, so that
            // it sees the close.
            Err(_) => Err(self.take_back()),
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        result
    }

    /// Takes back the item of a delivery that found the link closed.
    fn take_back(&self) -> T {
        // SAFETY: the link is closed, so nobody else reads the item cell;
        // this deliverer wrote it and is its only writer.
        let item = self.item.with_mut(|cell| unsafe { (*cell).take() });
        match item {
            Some(item) => item,
            // Written by this very call just before.
            None => unreachable!("io-core: a delivered item left its link"),
        }
    }

    /// At the start of the task's poll: the item, if one was delivered
    /// (see [`Taken`]). Only the task calls it.
    pub fn take(&self) -> Taken<T> {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            match state {
                NOTIFIED => match self.state.compare_exchange_weak(
                    NOTIFIED,
                    IDLE,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Taken::Item(self.take_item()),
                    Err(actual) => state = actual,
                },
                // A poll nobody asked for: take the waker back, to park
                // anew with the one this poll has.
                PARKED => match self.state.compare_exchange_weak(
                    PARKED,
                    IDLE,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // SAFETY: out of `PARKED` by this task's own
                        // transition: the waker cell is the task's again.
                        let old = self.waker.with_mut(|cell| unsafe { (*cell).take() });
                        drop(old);
                        return Taken::Empty;
                    }
                    Err(actual) => state = actual,
                },
                IDLE => return Taken::Empty,
                WAKING => return Taken::Waking,
                _ => return Taken::Closed,
            }
        }
    }

    /// The item, after this task moved the state from `NOTIFIED` to
    /// `IDLE`.
    fn take_item(&self) -> T {
        // SAFETY: the task's own `NOTIFIED -> IDLE` (`Acquire`, after the
        // deliverer's `Release`) makes the item cell the task's, and the
        // next delivery comes only after the item has run (caller's
        // promise of `deliver`).
        let item = self.item.with_mut(|cell| unsafe { (*cell).take() });
        match item {
            Some(item) => item,
            // `NOTIFIED` is published only after the item is written.
            None => unreachable!("io-core: a notified link without its item"),
        }
    }

    /// Parks the task: leaves a clone of `waker` for the next delivery, or
    /// takes an item that came meanwhile (see [`Parked`]). Only the task
    /// calls it, when it is not already parked (after it ran the item, or
    /// after [`take`](TaskLink::take) found nothing).
    pub fn park(&self, waker: &Waker) -> Parked<T> {
        // An item delivered while the task ran: no waker needed.
        match self.take() {
            Taken::Item(item) => return Parked::Item(item),
            Taken::Closed => return Parked::Closed,
            Taken::Waking => return Parked::Parked,
            Taken::Empty => {}
        }
        // SAFETY: `IDLE` (or a state reached from it that does not touch
        // the waker: `NOTIFIED`, `CLOSED`): the waker cell is the task's.
        self.waker
            .with_mut(|cell| unsafe { *cell = Some(waker.clone()) });
        match self
            .state
            .compare_exchange(IDLE, PARKED, Ordering::Release, Ordering::Acquire)
        {
            Ok(_) => Parked::Parked,
            Err(_) => {
                // Not parked: the waker cell is still the task's.
                // SAFETY: as above.
                let mine = self.waker.with_mut(|cell| unsafe { (*cell).take() });
                drop(mine);
                match self.take() {
                    Taken::Item(item) => Parked::Item(item),
                    // From `IDLE` only a delivery (`NOTIFIED`) or a close
                    // can move the state while the task is here.
                    _ => Parked::Closed,
                }
            }
        }
    }

    /// Closes the link (the task ends, or the fiber it links to is freed):
    /// later deliveries give their item back. Wakes a parked task, so
    /// that it sees the close, and returns an item that was waiting for
    /// the task, for the caller to drop (outside any lock of its own).
    /// Any thread; closing twice does nothing more.
    pub fn close(&self) -> Option<T> {
        match self.state.swap(CLOSED, Ordering::AcqRel) {
            PARKED => {
                // SAFETY: out of `PARKED` by this swap: the waker cell is
                // ours, and nobody touches it once closed.
                let waker = self.waker.with_mut(|cell| unsafe { (*cell).take() });
                if let Some(waker) = waker {
                    waker.wake();
                }
                None
            }
            // SAFETY: out of `NOTIFIED` by this swap: the item cell is ours.
            NOTIFIED => self.item.with_mut(|cell| unsafe { (*cell).take() }),
            // `IDLE`: nothing in either cell. `WAKING`: the deliverer sees
            // the close at its compare-and-swap, takes its item back and
            // wakes the task. `CLOSED`: closed before.
            _ => None,
        }
    }

    /// Whether the link is closed (a picture: it may close right after).
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) == CLOSED
    }
}
