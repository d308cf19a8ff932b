//! Fibers scheduled from outside a single-threaded loop, and the queue
//! lengths such a loop publishes for dumps taken off its thread.

use alloc::collections::VecDeque;

use crate::sync::{AtomicUsize, Ordering};

use crate::sync::Lock;

struct State<T> {
    queue: VecDeque<T>,
    /// The executor is gone: pushes are refused.
    closed: bool,
    /// The loop thread, while it may park waiting for a push.
    #[cfg(feature = "std")]
    waiter: Option<std::thread::Thread>,
}

/// A locked queue of items (fibers) pushed from any thread (or interrupt
/// handler) to one loop thread.
///
/// # Why no wake-up is lost (hosted loops that park)
///
/// Every [`push`](RemoteQueue::push) and [`notify`](RemoteQueue::notify)
/// sets `pending` (SeqCst) *before* it reads the registered waiter (under
/// the lock); a loop about to sleep registers itself as the waiter (under
/// the lock) *before* it reads `pending` (SeqCst) in
/// [`park`](RemoteQueue::park). Either the loop sees the flag and does not
/// sleep, or the pusher sees the loop registered and unparks it; `park`
/// returns at once after an unpark that came first. A loop that waits
/// elsewhere (a poller, `wfi`) does not register and is woken by its own
/// means after a push.
///
/// The loop's fast path takes no lock: [`drain_into`](RemoteQueue::drain_into)
/// swaps `pending` and locks only if something came.
///
/// # When a push allocates (interrupt handlers)
///
/// A push appends to a `VecDeque`, which allocates only when it is full.
/// Its buffer never shrinks while the queue is open: [`drain_into`](RemoteQueue::drain_into)
/// empties it with `VecDeque::drain`, which keeps the buffer. So the
/// invariant is: *a push allocates only if more items are queued at once
/// (between two drains) than ever before, and more than
/// [`reserve`](RemoteQueue::reserve) asked for.* A firmware that wakes
/// fibers from interrupt handlers reserves, when it builds its executor,
/// room for as many fibers as its handlers may wake between two turns of
/// the loop (at most one entry per suspended fiber: a suspension is
/// resumed once), and its handlers never allocate here.
pub struct RemoteQueue<T> {
    state: Lock<State<T>>,
    /// 1 while something was pushed or notified since the last drain.
    pending: AtomicUsize,
}

impl<T> core::fmt::Debug for RemoteQueue<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RemoteQueue")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl<T> Default for RemoteQueue<T> {
    fn default() -> Self {
        RemoteQueue::new()
    }
}

impl<T> RemoteQueue<T> {
    /// An empty, open queue.
    pub fn new() -> Self {
        RemoteQueue {
            state: Lock::new(State {
                queue: VecDeque::new(),
                closed: false,
                #[cfg(feature = "std")]
                waiter: None,
            }),
            pending: AtomicUsize::new(0),
        }
    }

    /// Makes room for `additional` more items than are queued now, so that
    /// that many pushes do not allocate (the buffer is kept from then on:
    /// see the type doc). Allocates here, in the caller, if it must.
    pub fn reserve(&self, additional: usize) {
        self.state.with(|state| state.queue.reserve(additional));
    }

    /// How many items the queue holds without allocating (for tests).
    pub fn capacity(&self) -> usize {
        self.state.with(|state| state.queue.capacity())
    }

    /// Queues `item` and unparks the registered waiter, if any; once the
    /// queue is [closed](RemoteQueue::close), hands `item` back (the caller
    /// drops it, outside any lock of its own).
    pub fn push(&self, item: T) -> Result<(), T> {
        // Without std there is no waiter to unpark: `woken` is `()`.
        #[cfg_attr(not(feature = "std"), allow(clippy::let_unit_value))]
        let woken = self.state.with(|state| {
            if state.closed {
                return Err(item);
            }
            state.queue.push_back(item);
            self.pending.store(1, Ordering::SeqCst);
            #[cfg(feature = "std")]
            return Ok(state.waiter.clone());
            #[cfg(not(feature = "std"))]
            Ok(())
        })?;
        #[cfg(feature = "std")]
        if let Some(waiter) = woken {
            waiter.unpark();
        }
        #[cfg(not(feature = "std"))]
        let () = woken;
        Ok(())
    }

    /// Makes the loop look again without pushing anything (something it
    /// waits for changed, for instance its main fiber was abandoned):
    /// sets `pending` and unparks the registered waiter.
    pub fn notify(&self) {
        self.pending.store(1, Ordering::SeqCst);
        #[cfg(feature = "std")]
        if let Some(waiter) = self.state.with(|state| state.waiter.clone()) {
            waiter.unpark();
        }
    }

    /// Moves everything queued to the end of `out`. Takes no lock unless
    /// something was pushed or notified since the last call.
    #[inline]
    pub fn drain_into(&self, out: &mut VecDeque<T>) {
        if self.pending.swap(0, Ordering::SeqCst) == 0 {
            return;
        }
        // One by one rather than `extend(drain(..))`, whose wrap-around
        // copies are 0.7 KB of code on a microcontroller; a drain moves the
        // few items pushed since the last turn.
        self.state.with(|state| {
            // Room for all at once, as `extend` reserves it (the queue's
            // growth, and so the heap it holds, stay what they were).
            out.reserve(state.queue.len());
            while let Some(item) = state.queue.pop_front() {
                out.push_back(item);
            }
        });
    }

    /// Whether something was pushed or notified since the last drain.
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) != 0
    }

    /// How many items wait (for fiber dumps).
    pub fn len(&self) -> usize {
        self.state.with(|state| state.queue.len())
    }

    /// Whether no item waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the queue was closed (the executor is gone).
    pub fn is_closed(&self) -> bool {
        self.state.with(|state| state.closed)
    }

    /// Refuses every later push and hands back what is queued, for the
    /// caller to drop outside its locks (breaking the executor/fiber
    /// cycle; see the [support module](super#breaking-the-executorfiber-cycle)).
    pub fn close(&self) -> VecDeque<T> {
        self.state.with(|state| {
            state.closed = true;
            #[cfg(feature = "std")]
            {
                state.waiter = None;
            }
            core::mem::take(&mut state.queue)
        })
    }

    /// Registers the calling thread as the loop thread that pushes unpark.
    #[cfg(feature = "std")]
    pub fn register_waiter(&self) {
        let me = std::thread::current();
        self.state.with(|state| state.waiter = Some(me));
    }

    /// Parks the registered loop thread (the caller) for at most `timeout`
    /// (`None`: until a push or notification), unless something is already
    /// pending. See [`RemoteQueue`] for why no wake-up is lost.
    #[cfg(feature = "std")]
    pub fn park(&self, timeout: Option<core::time::Duration>) {
        self.register_waiter();
        if self.has_pending() {
            return;
        }
        match timeout {
            None => std::thread::park(),
            Some(timeout) if !timeout.is_zero() => std::thread::park_timeout(timeout),
            Some(_) => {}
        }
    }
}

/// Numbers a loop publishes at the end of each turn (queue lengths, timer
/// counts) for fiber dumps taken off its thread: `N` relaxed stores per
/// turn, read with relaxed loads (a picture of a moving system).
pub struct Published<const N: usize> {
    values: [AtomicUsize; N],
}

impl<const N: usize> core::fmt::Debug for Published<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Published").field(&self.load()).finish()
    }
}

impl<const N: usize> Default for Published<N> {
    fn default() -> Self {
        Published::new()
    }
}

impl<const N: usize> Published<N> {
    /// All zero.
    pub fn new() -> Self {
        Published {
            values: core::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    /// Publishes `values` (the loop thread, at the end of a turn).
    #[inline]
    pub fn store(&self, values: [usize; N]) {
        for (slot, value) in self.values.iter().zip(values) {
            slot.store(value, Ordering::Relaxed);
        }
    }

    /// The values last published.
    pub fn load(&self) -> [usize; N] {
        core::array::from_fn(|i| self.values[i].load(Ordering::Relaxed))
    }
}
