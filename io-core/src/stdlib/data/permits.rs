//! The permits and the waiters of a [`Semaphore`](super::semaphore::Semaphore).
//!
//! One word holds the free permits and a `WAITING` flag, set while the
//! list of waiters is not empty. The free permits are nobody's: any fiber
//! that runs while enough are free takes them (one compare-and-swap,
//! without the lock, whether or not fibers wait: barging, Cats Effect
//! 3.6's rule for its queues). A release adds its permits to the count
//! (one compare-and-swap while nobody waits) and, while waiters are
//! listed, *wakes* them in arrival order under the list's lock: a woken
//! waiter is taken off the list and resumed to take its permits again,
//! when it runs ([`Permits::retry`]); a fiber that ran first may have
//! taken them, and it then lists itself again, at the back.
//!
//! # Why no permit is reserved
//!
//! A permit handed to a waiter (the design up to this version) is out of
//! reach until that waiter's fiber runs, or, canceled, runs its cleanup:
//! an executor turn later. With many waiters whose waits end by short
//! timeouts, the first waiter is the one closest to its deadline; under
//! load it was canceled before it ran, the permit went to the next one,
//! canceled too, and the permits cycled through waiters that never used
//! them while every fiber that did run found none: a semaphore of 4
//! permits completed 4 acquisitions in 4 s under 3,000 fibers acquiring
//! with 0-2 ms timeouts. Now a permit in the count is taken by the first
//! fiber that runs.
//!
//! # Invariants
//!
//! A waiter *woken* has been taken off the list and resumed with a
//! wake-up, which its fiber uses up by retrying or gives back by dropping
//! it (canceled first); `pending` (under the lock) is the sum of the
//! permits the woken waiters want.
//!
//! * `WAITING` is set and cleared only under the lock: set (by
//!   [`Queue::register`]) just before a waiter is pushed, cleared when a
//!   [`Queue`] guard is dropped on an empty list. So once the lock is
//!   released, `WAITING` is set exactly when waiters are listed; a release
//!   that sees it clear adds to the count without the lock (its
//!   compare-and-swap fails if a waiter lists itself meanwhile).
//! * **No lost wake-up.** Whenever the lock is free, if waiters are
//!   listed, `count < pending + first.wants()`: the free permits are not
//!   enough for the first waiter beyond what the woken ones will look
//!   for. A release (count up) and every end of a wake-up (`pending`
//!   down: [`Permits::retry`], [`Permits::pass_on`]) and every departure
//!   of a listed waiter ([`Permits::leave`]: the first may change) wake
//!   the first waiters while this does not hold; a registration lists its
//!   waiter only while it holds (otherwise it resumes at once, counted in
//!   `pending`); a take only lowers the count. A wake-up that does not
//!   reach its waiter (its fiber was canceled first) gives its permits
//!   back to `pending` at once, and the next one is woken. So a waiter
//!   never waits while its permits are free and nobody is on the way to
//!   them.
//! * **Progress.** Free permits are never set aside for a fiber that has
//!   not run: an acquire that runs while they are free takes them. A wait
//!   ends when its waiter is woken and finds its permits, when a fiber
//!   that ran before it took them (that acquire completed), or when it is
//!   canceled (which passes its wake-up on). Nothing depends on a woken
//!   fiber running before its deadline.
//! * **Arrival order among waiters.** Waiters are woken first come first
//!   served, and the first waiter is woken only once the count covers
//!   what it wants: a waiter for many permits is not overtaken by a later
//!   *waiter* for fewer. A fiber that arrives while permits are free
//!   takes them (so a waiter for many can be overtaken by fibers that do
//!   not wait), and a woken waiter that found its permits gone waits
//!   again, at the back.
//! * **No overflow.** The count never exceeds [`MAX_PERMITS`]: a release
//!   that would take it past that changes nothing and reports
//!   [`Overflow`]; nothing wraps and nothing saturates silently. The
//!   largest count is the word without its flag bit: 2^63 - 1 on 64-bit
//!   targets, 2^31 - 1 on 32-bit ones. `pending + wants` is compared with
//!   `checked_add` (a waiter for more than any count never wakes), and
//!   `pending` only grows by what the count covers, so it never exceeds
//!   [`MAX_PERMITS`] either.
//!
//! Loom checks the protocol with plain waiters (`tests/loom.rs`).

use crate::sync::{AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::wait::list::{WaiterId, WaiterList};

/// The flag of the permit word: waiters are listed.
const WAITING: usize = 1 << (usize::BITS - 1);

/// The most permits counted: the other bits of the word (2^63 - 1 on
/// 64-bit targets).
pub(crate) const MAX_PERMITS: usize = WAITING - 1;

/// A release would have taken the count past [`MAX_PERMITS`]; nothing
/// changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

/// A waiter: what it wants.
pub(crate) trait Waiting {
    /// The permits it wants (at least 1).
    fn wants(&self) -> usize;
}

/// The waiters, behind the lock.
struct Waiters<W> {
    /// Listed waiters, in arrival order; a canceled one is removed in
    /// O(log n).
    list: WaiterList<W>,
    /// The permits the woken waiters want (module doc).
    pending: usize,
}

/// The free permits and the waiters `W` of a semaphore.
pub(crate) struct Permits<W> {
    /// The free permits, and `WAITING` (module doc).
    word: AtomicUsize,
    waiters: Mutex<Waiters<W>>,
}

impl<W: Waiting> Permits<W> {
    /// `count` free permits (the caller checks `count <= MAX_PERMITS`; a
    /// larger one counts as `MAX_PERMITS`) and no waiter.
    pub(crate) fn new(count: usize) -> Self {
        Permits {
            word: AtomicUsize::new(count.min(MAX_PERMITS)),
            waiters: Mutex::new(Waiters {
                list: WaiterList::new(),
                pending: 0,
            }),
        }
    }

    /// The free permits now.
    pub(crate) fn available(&self) -> usize {
        self.word.load(Ordering::Acquire) & MAX_PERMITS
    }

    /// Takes a free permit, if there is one: one compare-and-swap, without
    /// the lock, whether or not fibers wait.
    #[inline]
    pub(crate) fn try_take(&self) -> bool {
        self.try_take_n(1)
    }

    /// Takes `n` free permits at once, if there are that many (whether or
    /// not fibers wait); all or nothing. Taking 0 always succeeds.
    #[inline]
    pub(crate) fn try_take_n(&self, n: usize) -> bool {
        let mut current = self.word.load(Ordering::Relaxed);
        while current & MAX_PERMITS >= n {
            // The flag is kept: the count is below it.
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

    /// Gives `n` permits back (at least 1): to the count, and, while
    /// waiters are listed, wakes the first ones it covers (`wake`, called
    /// without the lock, says whether the wake-up reached its waiter; one
    /// that did not, whose fiber was canceled first, hands its permits on
    /// to the next). `Err(Overflow)`, with nothing changed, if the count
    /// would pass [`MAX_PERMITS`].
    #[inline]
    pub(crate) fn release(&self, n: usize, wake: impl FnMut(W) -> bool) -> Result<(), Overflow> {
        if n > MAX_PERMITS {
            return Err(Overflow);
        }
        match self.release_to_count(n) {
            Ok(true) => Ok(()),
            Ok(false) => self.release_to_waiters(n, wake),
            Err(overflow) => Err(overflow),
        }
    }

    /// Adds `n` permits to the count if nobody is listed (`Ok(true)`);
    /// `Ok(false)` if waiters are listed; `Err(Overflow)` (nothing changed)
    /// if the count would pass [`MAX_PERMITS`].
    #[inline]
    fn release_to_count(&self, n: usize) -> Result<bool, Overflow> {
        let mut current = self.word.load(Ordering::Relaxed);
        while current & WAITING == 0 {
            // The word is the count alone here.
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

    /// The word `current` with `n` more permits, its flag kept.
    #[inline]
    fn added(current: usize, n: usize) -> Result<usize, Overflow> {
        match (current & MAX_PERMITS).checked_add(n) {
            Some(count) if count <= MAX_PERMITS => Ok(count | (current & WAITING)),
            _ => Err(Overflow),
        }
    }

    /// [`Permits::release`] while waiters are listed: under the lock, so
    /// that the wake-ups it owes are decided with the count it made.
    #[cold]
    #[inline(never)]
    fn release_to_waiters(&self, n: usize, wake: impl FnMut(W) -> bool) -> Result<(), Overflow> {
        let queue = self.queue();
        let mut current = self.word.load(Ordering::Relaxed);
        loop {
            let next = Self::added(current, n)?;
            match self.word.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        self.wake_from(queue, wake);
        Ok(())
    }

    /// A woken waiter's retry (it uses its wake-up up): takes the `n`
    /// permits it wants if they are free, `true`; `false` if a fiber that
    /// ran first took them (the waiter then registers again). Either way
    /// the waiters the freed `pending` now owes a wake-up are woken.
    pub(crate) fn retry(&self, n: usize, wake: impl FnMut(W) -> bool) -> bool {
        let mut queue = self.queue();
        queue.waiters.pending -= n;
        let took = self.try_take_n(n);
        self.wake_from(queue, wake);
        took
    }

    /// A wake-up for `n` permits given back unused (its fiber was canceled
    /// before it retried): wakes the next waiters it now owes a wake-up.
    pub(crate) fn pass_on(&self, n: usize, wake: impl FnMut(W) -> bool) {
        let mut queue = self.queue();
        queue.waiters.pending -= n;
        self.wake_from(queue, wake);
    }

    /// A canceled waiter's cleanup: takes the waiter `id` off the list if
    /// it is still there (returned, for the caller to drop without the
    /// lock), and wakes the waiters that its departure lets through (it
    /// may have been the first). Not listed, it was woken: its wake-up is
    /// passed on where it ends ([`Permits::pass_on`]).
    pub(crate) fn leave(&self, id: WaiterId, wake: impl FnMut(W) -> bool) -> Option<W> {
        let mut queue = self.queue();
        let removed = queue.waiters.list.remove(id);
        if removed.is_some() {
            self.wake_from(queue, wake);
        }
        removed
    }

    /// Wakes, in arrival order, the waiters that the count covers beyond
    /// `pending` (module doc, "No lost wake-up"), one at a time: each is
    /// taken off the list and counted in `pending` under the lock, and
    /// woken without it; a wake-up that did not reach its waiter is taken
    /// out of `pending` again. Releases the lock.
    fn wake_from<'a>(&'a self, mut queue: Queue<'a, W>, mut wake: impl FnMut(W) -> bool) {
        loop {
            let Some(waiter) = queue.next_to_wake() else {
                return;
            };
            let wants = waiter.wants();
            // Whether the next one may be owed a wake-up too (several
            // permits released, or this wake-up comes back): only then is
            // the lock taken again.
            let more = queue.owes_wake_up();
            drop(queue);
            let reached = wake(waiter);
            if reached && !more {
                return;
            }
            queue = self.queue();
            if !reached {
                queue.waiters.pending -= wants;
            }
        }
    }

    /// The list of waiters, locked.
    pub(crate) fn queue(&self) -> Queue<'_, W> {
        Queue {
            permits: self,
            waiters: self.waiters.lock(),
        }
    }

    /// The permits the woken waiters want (for tests).
    #[cfg(all(test, loom))]
    pub(crate) fn pending(&self) -> usize {
        self.queue().waiters.pending
    }
}

/// The list of waiters of [`Permits`], locked. Dropping it unlocks it,
/// after clearing `WAITING` if the list is empty (module doc).
pub(crate) struct Queue<'a, W> {
    permits: &'a Permits<W>,
    waiters: MutexGuard<'a, Waiters<W>>,
}

/// What [`Queue::register`] did with a waiter.
pub(crate) enum Registered<W> {
    /// Listed under this id, to be woken.
    Listed(WaiterId),
    /// Not listed: its permits are free now and it is counted as woken
    /// (in `pending`); the caller resumes it at once, to retry.
    Now(W),
}

impl<W: Waiting> Queue<'_, W> {
    /// Lists `waiter`, unless the free permits cover what it wants beyond
    /// what the woken waiters want: then it is counted as woken and given
    /// back, to retry at once (module doc, "No lost wake-up").
    pub(crate) fn register(&mut self, waiter: W) -> Registered<W> {
        let word = &self.permits.word;
        let wants = waiter.wants();
        let mut current = word.load(Ordering::Relaxed);
        loop {
            if covers(current & MAX_PERMITS, self.waiters.pending, wants) {
                self.waiters.pending += wants;
                return Registered::Now(waiter);
            }
            match word.compare_exchange_weak(
                current,
                current | WAITING,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Registered::Listed(self.waiters.list.push(waiter)),
                Err(now) => current = now,
            }
        }
    }

    /// How many waiters are listed.
    pub(crate) fn len(&self) -> usize {
        self.waiters.list.len()
    }

    /// The first waiter, taken off the list and counted in `pending`, if
    /// the count covers it beyond `pending`.
    fn next_to_wake(&mut self) -> Option<W> {
        if !self.owes_wake_up() {
            return None;
        }
        let waiter = self.waiters.list.pop()?;
        self.waiters.pending += waiter.wants();
        Some(waiter)
    }

    /// Whether the first listed waiter is owed a wake-up.
    fn owes_wake_up(&mut self) -> bool {
        let count = self.permits.available();
        let pending = self.waiters.pending;
        self.waiters
            .list
            .first_mut()
            .is_some_and(|first| covers(count, pending, first.wants()))
    }
}

/// Whether `count` free permits cover `wants` beyond `pending`.
#[inline]
fn covers(count: usize, pending: usize, wants: usize) -> bool {
    pending
        .checked_add(wants)
        .is_some_and(|needed| count >= needed)
}

impl<W> Drop for Queue<'_, W> {
    fn drop(&mut self) {
        // Still under the lock (the guard is dropped after this).
        let word = &self.permits.word;
        if self.waiters.list.is_empty() && word.load(Ordering::Relaxed) & WAITING != 0 {
            word.fetch_and(!WAITING, Ordering::AcqRel);
        }
    }
}
