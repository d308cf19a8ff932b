//! Where an idle worker sleeps: in the pool's one I/O poller (the
//! *driver*), or, while another worker holds it, on a condition variable
//! of its own.
//!
//! The pool has one mio poller (spindle-net's reactor) for every socket
//! its fibers make, whichever worker made them. It sits behind a lock
//! that is only ever *tried*, never waited for: a worker that runs out of
//! work and parks takes it if it is free and sleeps in it, so that
//! readiness, its earliest timer and a wake-up all end one sleep; the
//! other idle workers, finding it taken, sleep on their condition
//! variables. A busy worker looks at the poller without blocking (every
//! `global_queue_interval` ticks while a fiber waits for I/O, and when it
//! runs out of work) if it is free, and skips the look if it is not:
//! whoever holds it sees the events. This is tokio's design (its driver
//! is taken by whichever worker parks first, the others park on a
//! condition variable); the hand-off below is ours.
//!
//! # The goal: no idle worker sleeps while events wait in the poller
//!
//! With a poller per worker, a socket's events were seen only by the
//! worker that made it: a busy worker (a long fiber, or just a stream of
//! fibers between two looks) delayed them while the other workers slept.
//! Here, a worker that sleeps either sleeps *in* the poller, or on its
//! condition variable while another worker holds the poller. The hand-off
//! keeps that true when the holder lets go of the poller and does not go
//! back to sleep in it (it woke up to work, or it only looked):
//!
//! * a worker about to sleep on its condition variable first marks itself
//!   `waiting` (a per-worker flag, `SeqCst`), then (after a `SeqCst`
//!   fence) tries the poller's lock once more, and sleeps in the poller
//!   if it got it;
//! * a worker that let go of the poller and runs a fiber next (`worker.rs`:
//!   `WorkerContext::run_fiber`) first (after a `SeqCst` fence) reads the
//!   `waiting` flags, and wakes the first waiting worker it finds, which
//!   then tries the poller again. A worker that goes to park itself
//!   instead owes nothing: it tries the poller itself.
//!
//! The hand-off is owed only while a fiber waits for I/O (the reactor's
//! count of waiters): without one, no readiness can wait in the poller,
//! and a wake-up per fiber run after a park would slow down every
//! ping-pong between fibers on two workers (measured: up to 50% on the
//! suite's ping-pong and spawn rows). The debt is kept until a fiber this
//! worker runs finds a waiter: a fiber that starts waiting on another
//! worker meanwhile leaves that worker running (it parks, and so tries
//! the poller, when it runs out of work, and looks at the poller every
//! `global_queue_interval` ticks while busy, which makes it owe the
//! hand-off in turn). The one case left open: a fiber that starts waiting
//! on a thread outside the pool (the part of a `block_on`'s main fiber
//! that runs on the calling thread) while every awake worker is in a long
//! fiber with its debt kept.
//!
//! Of the two Dekker-style sequences (a flag then the lock; an unlock
//! then the flags) at least one sees the other: either the sleeper finds
//! the lock free, or the releaser finds the sleeper waiting and wakes it.
//! The lock is taken only by `try_lock`s (a compare-and-swap, which never
//! fails spuriously; `sync::TryLock`), and released with a `SeqCst` store.
//!
//! # Waking a worker
//!
//! Each worker has a [`Parker`] whose state word says where it sleeps:
//! `EMPTY` (awake), `NOTIFIED` (a wake-up it has not seen yet), `CONDVAR`
//! or `DRIVER`. [`Driver::unpark`] swaps in `NOTIFIED` and then wakes the
//! sleeper where the old state says it sleeps: through its condition
//! variable (taking its lock first, so that a sleeper between its check
//! and its wait cannot miss it), or through the poller's waker
//! (`Reactor::notify`, which keeps a notification that comes before the
//! sleep as well). A worker going to sleep moves its state from `EMPTY`
//! to where it sleeps with a compare-and-swap, and does not sleep if it
//! finds `NOTIFIED`; after the sleep it puts `EMPTY` back. A wake-up may
//! therefore be seen by another sleeper of the poller (the holder changed
//! meanwhile), or end a sleep that was about to end anyway: every sleep
//! may end spuriously, and the worker loop (`worker.rs`) checks again
//! what it sleeps for (idle.rs's sleepers list, timers, shutdown) after
//! each one. No wake-up is lost: `NOTIFIED` stays until the worker's next
//! sleep has seen it.
//!
//! The code is generic over what the poller and its waker are
//! ([`Poll`], [`Notify`]), so that the loom models of `idle.rs` run this
//! very code with a stand-in for `epoll_wait`.

use std::time::Duration;

use crate::sync::{
    AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, TryLock, TryLockGuard, fence, wait,
    wait_timeout,
};

/// `timeout` rounded up to the next millisecond, as mio rounds the
/// poller's: a worker sleeps as long on its condition variable as it would
/// in the poller, and timers due within the same millisecond fire in one
/// wake-up.
fn round_up_to_ms(timeout: Duration) -> Duration {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// A poller a worker may sleep in.
pub(crate) trait Poll {
    /// Waits for readiness at most `timeout` (`None`: until an event or a
    /// notification; zero: only looks) and resumes the fibers of the
    /// sockets reported; how many.
    fn poll(&mut self, timeout: Option<Duration>) -> usize;
}

/// How to wake whoever sleeps in the poller (a notification that comes
/// before the sleep is kept).
pub(crate) trait Notify {
    /// Wakes the poller's sleeper, or makes its next sleep a look.
    fn notify(&self);
}

const EMPTY: usize = 0;
const NOTIFIED: usize = 1;
const CONDVAR: usize = 2;
const DRIVER: usize = 3;

/// One worker's parking state (see the module doc).
pub(crate) struct Parker {
    state: AtomicUsize,
    /// Marked before a sleep on the condition variable: whoever lets go of
    /// the poller wakes it.
    waiting: AtomicBool,
    lock: Mutex<()>,
    condvar: Condvar,
}

impl Parker {
    fn new() -> Parker {
        Parker {
            state: AtomicUsize::new(EMPTY),
            waiting: AtomicBool::new(false),
            lock: Mutex::new(()),
            condvar: Condvar::new(),
        }
    }
}

/// The pool's poller, its waker, and the workers' parkers.
pub(crate) struct Driver<P, N> {
    poller: TryLock<P>,
    notifier: N,
    parkers: Box<[Parker]>,
}

impl<P: Poll, N: Notify> Driver<P, N> {
    /// A driver for `workers` workers over `poller`, woken by `notifier`.
    pub(crate) fn new(poller: P, notifier: N, workers: usize) -> Self {
        Driver {
            poller: TryLock::new(poller),
            notifier,
            parkers: (0..workers).map(|_| Parker::new()).collect(),
        }
    }

    /// How many workers it parks.
    #[cfg(all(test, loom))]
    pub(crate) fn workers(&self) -> usize {
        self.parkers.len()
    }

    /// Wakes `worker` wherever it sleeps, or makes its next sleep end at
    /// once.
    pub(crate) fn unpark(&self, worker: usize) {
        let parker = &self.parkers[worker];
        match parker.state.swap(NOTIFIED, Ordering::SeqCst) {
            CONDVAR => {
                // The sleeper holds the lock from its check to its wait.
                drop(parker.lock.lock());
                parker.condvar.notify_one();
            }
            DRIVER => self.notifier.notify(),
            _ => {}
        }
    }

    /// Looks at the poller without blocking, if no other worker holds it;
    /// how many fibers it resumed (onto the calling worker). The caller
    /// then owes a [`hand_off`](Driver::hand_off) before it runs a fiber.
    pub(crate) fn poll_now(&self) -> Option<usize> {
        let mut poller = self.poller.try_lock()?;
        Some(poller.poll(Some(Duration::ZERO)))
    }

    /// After letting go of the poller, before running a fiber: wakes a
    /// worker that sleeps on its condition variable, so that it takes the
    /// poller (see the module doc).
    pub(crate) fn hand_off(&self) {
        fence(Ordering::SeqCst);
        if let Some(index) = self
            .parkers
            .iter()
            .position(|parker| parker.waiting.load(Ordering::SeqCst))
        {
            self.unpark(index);
        }
    }

    /// Sleeps `worker` for at most `timeout`: in the poller if it is free
    /// (returning how many fibers readiness resumed onto this worker), on
    /// the worker's condition variable if not (returning 0). May end
    /// spuriously. The caller owes a [`hand_off`](Driver::hand_off) before
    /// it runs a fiber.
    pub(crate) fn park(&self, worker: usize, timeout: Option<Duration>) -> usize {
        let parker = &self.parkers[worker];
        if let Some(poller) = self.poller.try_lock() {
            return Self::sleep_in_poller(parker, poller, timeout);
        }
        parker.waiting.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if let Some(poller) = self.poller.try_lock() {
            parker.waiting.store(false, Ordering::SeqCst);
            return Self::sleep_in_poller(parker, poller, timeout);
        }
        let guard = parker.lock.lock();
        if parker
            .state
            .compare_exchange(EMPTY, CONDVAR, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let guard = match timeout {
                Some(timeout) => wait_timeout(&parker.condvar, guard, round_up_to_ms(timeout)),
                None => wait(&parker.condvar, guard),
            };
            drop(guard);
        } else {
            drop(guard);
        }
        // A swap, not a store: it reads (and synchronizes with) the
        // notifier's swap, if that came first.
        parker.state.swap(EMPTY, Ordering::SeqCst);
        parker.waiting.store(false, Ordering::SeqCst);
        0
    }

    fn sleep_in_poller(
        parker: &Parker,
        mut poller: TryLockGuard<'_, P>,
        timeout: Option<Duration>,
    ) -> usize {
        let timeout =
            match parker
                .state
                .compare_exchange(EMPTY, DRIVER, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => timeout,
                // Notified already: only a look.
                Err(_) => Some(Duration::ZERO),
            };
        let resumed = poller.poll(timeout);
        parker.state.swap(EMPTY, Ordering::SeqCst);
        resumed
    }
}
