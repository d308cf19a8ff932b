//! The permits and the waiters of a [`Semaphore`](super::semaphore::Semaphore).
//!
//! One word holds the free permits and a `WAITING` flag, set while the
//! queue of waiters is not empty (then no permit is free: a release hands
//! its permits to the waiters, first come first served). So the
//! uncontended cases are one compare-and-swap each, without the queue's
//! lock: taking free permits (`try_take_n`), and giving permits back while
//! nobody waits (`release_n`).
//!
//! A waiter may want several permits (`acquire_n`): it is granted them one
//! release at a time, in its entry ([`Waiting::give`]), and woken once it
//! has them all. The first waiter is served before any later one, however
//! few permits those want (Cats Effect's `acquireN` is as fair): a release
//! gives the first waiter what it still misses, then the next, and only
//! what nobody waits for goes to the count.
//!
//! # Invariants
//!
//! * `WAITING` is set and cleared only under the queue's lock: set (by
//!   [`Queue::take_or_wait_n`]) just before a waiter is pushed, cleared when
//!   a [`Queue`] guard is dropped on an empty queue (or by a release that
//!   empties the queue and puts what is left in the count). So once the
//!   lock is released, `WAITING` is set exactly when waiters are queued.
//! * While `WAITING` is set the count is 0: it is set only on a count of
//!   0 (a waiter that finds fewer permits than it wants takes them into
//!   its entry first), a release does not add to the count while it is set
//!   (it takes the lock and gives its permits to the waiters), and a take
//!   needs a count of at least what it takes.
//! * Hence FIFO fairness: permits are taken without queueing only when
//!   nobody waits.
//! * **No overflow.** The count never exceeds [`MAX_PERMITS`]: a release
//!   that would take it past that changes nothing and reports
//!   [`Overflow`]; nothing wraps and nothing saturates silently. The
//!   largest count is the word without its flag bit: 2^63 - 1 on 64-bit
//!   targets, 2^31 - 1 on 32-bit ones.
//!
//! Loom checks the protocol with plain waiters (`tests/loom.rs`).

use crate::sync::{AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::wait::list::{WaiterId, WaiterList};

/// The flag of the permit word: waiters are queued.
const WAITING: usize = 1 << (usize::BITS - 1);

/// The most permits counted: the other bits of the word (2^63 - 1 on
/// 64-bit targets).
pub(crate) const MAX_PERMITS: usize = WAITING - 1;

/// A release would have taken the count past [`MAX_PERMITS`]; nothing
/// changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

/// A waiter that wants a number of permits and is given them, under the
/// queue's lock, possibly over several releases.
pub(crate) trait Waiting {
    /// Permits it still misses (at least 1 while it is queued).
    fn missing(&self) -> usize;
    /// Gives it `n` permits (`n <= missing()`), under the lock; once it
    /// misses none, it is taken out of the queue and handed to the
    /// release's `woken`, still under the lock.
    fn give(&mut self, n: usize);
}

/// The free permits and the queue of waiters `W` of a semaphore.
pub(crate) struct Permits<W> {
    /// The free permits, and `WAITING` (module doc).
    word: AtomicUsize,
    /// The waiters, in arrival order; a canceled one is removed in
    /// O(log n).
    waiters: Mutex<WaiterList<W>>,
}

impl<W: Waiting> Permits<W> {
    /// `count` free permits (the caller checks `count <= MAX_PERMITS`; a
    /// larger one counts as `MAX_PERMITS`) and no waiter.
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

    /// Takes `n` free permits at once, if there are that many (then nobody
    /// waits); all or nothing. Taking 0 always succeeds.
    pub(crate) fn try_take_n(&self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let mut current = self.word.load(Ordering::Relaxed);
        // `WAITING` set means a count of 0, hence too few.
        while current & WAITING == 0 && current >= n {
            match self.word.compare_exchange_weak(
                current,
                current - n,
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
    /// compare-and-swap); otherwise to the first waiter, which is taken
    /// out of the queue and handed to `woken` once it has all it wants
    /// (under the queue's lock, right after the release that completed it:
    /// a cleanup that takes the lock sees it either queued or granted). `Err(Overflow)`, with nothing changed, if the count is at
    /// [`MAX_PERMITS`] already.
    #[inline]
    pub(crate) fn release(&self, woken: impl FnMut(W)) -> Result<(), Overflow> {
        match self.release_to_count(1) {
            Ok(true) => Ok(()),
            Ok(false) => self.release_to_waiters(1, woken),
            Err(overflow) => Err(overflow),
        }
    }

    /// Gives `n` permits back: to the waiters in arrival order, each handed
    /// to `woken` (under the lock, as by [`Permits::release`]) once it has
    /// all it wants, and what nobody waits for to the count. `Err(Overflow)`,
    /// with nothing changed, if the count would pass [`MAX_PERMITS`].
    pub(crate) fn release_n(&self, n: usize, woken: impl FnMut(W)) -> Result<(), Overflow> {
        if n == 0 {
            return Ok(());
        }
        if n > MAX_PERMITS {
            return Err(Overflow);
        }
        match self.release_to_count(n) {
            Ok(true) => Ok(()),
            Ok(false) => self.release_to_waiters(n, woken),
            Err(overflow) => Err(overflow),
        }
    }

    /// Adds `n` permits to the count if nobody waits (`Ok(true)`);
    /// `Ok(false)` if waiters are queued; `Err(Overflow)` (nothing changed)
    /// if the count would pass [`MAX_PERMITS`].
    #[inline]
    fn release_to_count(&self, n: usize) -> Result<bool, Overflow> {
        let mut current = self.word.load(Ordering::Relaxed);
        while current & WAITING == 0 {
            let next = match current.checked_add(n) {
                Some(next) if next <= MAX_PERMITS => next,
                _ => return Err(Overflow),
            };
            match self.word.compare_exchange_weak(
                current,
                next,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(true),
                Err(now) => current = now,
            }
        }
        Ok(false)
    }

    /// [`Permits::release_n`] while waiters are queued: they get the
    /// permits first, under the lock.
    #[cold]
    #[inline(never)]
    fn release_to_waiters(&self, n: usize, mut woken: impl FnMut(W)) -> Result<(), Overflow> {
        loop {
            let mut queue = self.queue();
            if queue.waiters.is_empty() {
                // The last waiter left meanwhile (and cleared the flag): the
                // permits go to the count, unless waiters came back since.
                drop(queue);
                match self.release_to_count(n)? {
                    true => return Ok(()),
                    false => continue,
                }
            }
            let mut left = n;
            while left > 0 {
                let Some(first) = queue.waiters.first_mut() else {
                    break;
                };
                let given = left.min(first.missing());
                first.give(given);
                left -= given;
                if first.missing() == 0
                    && let Some(waiter) = queue.waiters.pop()
                {
                    woken(waiter);
                }
            }
            if left > 0 {
                // Nobody waits any more: `WAITING` is set and the count is
                // 0 (invariants), and no lock-free path changes such a
                // word. What is left (at most `MAX_PERMITS`, checked by the
                // caller) becomes the count, and the flag is cleared.
                self.word.store(left, Ordering::Release);
            }
            return Ok(());
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
    /// Takes `n` free permits (returns `n`), or, with fewer free (or
    /// waiters queued), takes the free ones (returns how many, fewer than
    /// `n`) and sets `WAITING` for a waiter to be pushed now, with what was
    /// taken already in its entry, before the queue is unlocked. `n >= 1`.
    pub(crate) fn take_or_wait_n(&mut self, n: usize) -> usize {
        let word = &self.permits.word;
        let mut current = word.load(Ordering::Relaxed);
        loop {
            let count = current & MAX_PERMITS;
            let (next, took) = if count >= n && current & WAITING == 0 {
                (current - n, n)
            } else {
                // Fewer than `n`: they go into the new waiter's entry, so
                // that the count is 0 while `WAITING` is set.
                (WAITING, count)
            };
            match word.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return took,
                Err(now) => current = now,
            }
        }
    }

    /// Queues `waiter` last (after [`Queue::take_or_wait_n`] said not
    /// enough); returns its id, for [`Queue::remove`].
    pub(crate) fn push(&mut self, waiter: W) -> WaiterId {
        self.waiters.push(waiter)
    }

    /// Takes the waiter `id` out of the queue, if it is still there (a
    /// canceled waiter leaving).
    pub(crate) fn remove(&mut self, id: WaiterId) -> Option<W> {
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
