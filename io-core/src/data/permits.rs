//! The permits and the waiters of a [`Semaphore`](super::semaphore::Semaphore).
//!
//! One word holds the free permits and a `WAITING` flag, set while the
//! queue of waiters is not empty (then no permit is free: a release hands
//! its permit to the first waiter). So the uncontended cases are one
//! compare-and-swap each, without the queue's lock: taking a free permit
//! (`try_take`), and giving one back while nobody waits (`release`).
//!
//! # Invariants
//!
//! * `WAITING` is set and cleared only under the queue's lock: set (by
//!   [`Queue::take_or_wait`]) just before a waiter is pushed, cleared when
//!   a [`Queue`] guard is dropped on an empty queue. So once the lock is
//!   released, `WAITING` is set exactly when waiters are queued.
//! * While `WAITING` is set the count is 0: it is set only on a count of
//!   0, a release does not add to the count while it is set (it takes the
//!   lock and hands the permit to a waiter), and a take needs a count
//!   above 0.
//! * Hence FIFO fairness: a permit is taken without queueing only when
//!   nobody waits.
//!
//! Loom checks the protocol with plain waiters (`tests_loom.rs`).

use super::waiters::WaiterList;
use crate::sync::{AtomicUsize, Mutex, MutexGuard, Ordering};

/// The flag of the permit word: waiters are queued.
const WAITING: usize = 1 << (usize::BITS - 1);

/// The most permits counted: the other bits of the word (2^63 - 1 on
/// 64-bit targets). A count that would grow past it stays there.
pub(crate) const MAX_PERMITS: usize = WAITING - 1;

/// The free permits and the queue of waiters `W` of a semaphore.
pub(crate) struct Permits<W> {
    /// The free permits, and `WAITING` (module doc).
    word: AtomicUsize,
    /// The waiters, in arrival order; a canceled one is removed in
    /// O(log n).
    waiters: Mutex<WaiterList<W>>,
}

impl<W> Permits<W> {
    /// `count` free permits (at most [`MAX_PERMITS`]) and no waiter.
    pub(crate) fn new(count: usize) -> Self {
        Permits {
            word: AtomicUsize::new(count.min(MAX_PERMITS)),
            waiters: Mutex::new(WaiterList::new()),
        }
    }

    /// The free permits now.
    pub(crate) fn available(&self) -> usize {
        self.word.load(Ordering::Acquire) & MAX_PERMITS
    }

    /// Takes a free permit, if there is one (then nobody waits): one
    /// compare-and-swap, without the lock.
    #[inline]
    pub(crate) fn try_take(&self) -> bool {
        let mut current = self.word.load(Ordering::Relaxed);
        // No free permit (also whenever `WAITING` is set).
        while current & MAX_PERMITS != 0 {
            match self.word.compare_exchange_weak(
                current,
                current - 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
        false
    }

    /// Gives a permit back: to the count if nobody waits (one
    /// compare-and-swap); otherwise to the first waiter, which `grant`
    /// marks under the lock and which is returned, to be woken outside it.
    #[inline]
    pub(crate) fn release(&self, grant: impl FnOnce(&W)) -> Option<W> {
        if self.release_to_count() {
            None
        } else {
            self.release_to_waiter(grant)
        }
    }

    /// Adds a permit to the count if nobody waits (`true`); a count that
    /// would pass [`MAX_PERMITS`] stays there.
    #[inline]
    fn release_to_count(&self) -> bool {
        let mut current = self.word.load(Ordering::Relaxed);
        while current & WAITING == 0 {
            let next = if current == MAX_PERMITS {
                current
            } else {
                current + 1
            };
            match self.word.compare_exchange_weak(
                current,
                next,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
        false
    }

    /// [`Permits::release`] while waiters are queued: the first one gets
    /// the permit, under the lock.
    #[cold]
    #[inline(never)]
    fn release_to_waiter(&self, grant: impl FnOnce(&W)) -> Option<W> {
        loop {
            let mut queue = self.queue();
            if let Some(waiter) = queue.waiters.pop() {
                // Under the lock, before the guard clears the flag.
                grant(&waiter);
                return Some(waiter);
            }
            drop(queue);
            // The last waiter left meanwhile (and cleared the flag): the
            // permit goes to the count, unless waiters came back since.
            if self.release_to_count() {
                return None;
            }
        }
    }

    /// The queue of waiters, locked.
    pub(crate) fn queue(&self) -> Queue<'_, W> {
        Queue {
            permits: self,
            waiters: self.waiters.lock(),
        }
    }
}

/// The queue of waiters of [`Permits`], locked. Dropping it unlocks it,
/// after clearing `WAITING` if the queue is empty (module doc).
pub(crate) struct Queue<'a, W> {
    permits: &'a Permits<W>,
    waiters: MutexGuard<'a, WaiterList<W>>,
}

impl<W> Queue<'_, W> {
    /// Takes a free permit (`true`), or, with none free, sets `WAITING`
    /// (`false`) for a waiter to be pushed now, before the queue is
    /// unlocked.
    pub(crate) fn take_or_wait(&mut self) -> bool {
        let word = &self.permits.word;
        let mut current = word.load(Ordering::Relaxed);
        loop {
            let (next, took) = if current & MAX_PERMITS == 0 {
                (current | WAITING, false)
            } else {
                (current - 1, true)
            };
            match word.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return took,
                Err(now) => current = now,
            }
        }
    }

    /// Queues `waiter` last (after [`Queue::take_or_wait`] said no); returns
    /// its id, for [`Queue::remove`].
    pub(crate) fn push(&mut self, waiter: W) -> u64 {
        self.waiters.push(waiter)
    }

    /// Takes the waiter `id` out of the queue, if it is still there (a
    /// canceled waiter leaving).
    pub(crate) fn remove(&mut self, id: u64) -> Option<W> {
        self.waiters.remove(id)
    }

    /// How many waiters are queued.
    pub(crate) fn len(&self) -> usize {
        self.waiters.len()
    }
}

impl<W> Drop for Queue<'_, W> {
    fn drop(&mut self) {
        // Still under the lock (the guard is dropped after this).
        let word = &self.permits.word;
        if self.waiters.is_empty() && word.load(Ordering::Relaxed) & WAITING != 0 {
            word.fetch_and(!WAITING, Ordering::AcqRel);
        }
    }
}
