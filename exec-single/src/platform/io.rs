//! The I/O capability, with `std` on Unix: an executor on the system clock
//! ([`StdClock`]) owns a spindle-net [`Reactor`] and its poller, so that
//! the sockets of spindle-net run on it.
//!
//! # Which executors
//!
//! Only an executor whose clock *is* [`StdClock`] gets a reactor (decided
//! once, in [`io_for`], by the clock's type). A virtual clock (testkit's
//! `TestControl`, [`VirtualClock`](crate::testkit::VirtualClock)) must
//! never wait for real time, and a clock of the user's has its own idea of
//! time that a poller's timeout would not follow: those executors keep the
//! hosted platform's behaviour (parking in the remote queue) and run
//! without a driver, so a socket made there fails with spindle-net's
//! `Unsupported` error. The halves are `Option`s: `None` is exactly that
//! fallback.
//!
//! # The two halves
//!
//! * [`Io`] lives in the shared state: any thread uses it. It wakes the
//!   loop after a push or notification from elsewhere
//!   ([`Reactor::notify`]: a system call only when the loop sleeps in its
//!   poller), counts the fibers waiting for readiness (deadlock detection
//!   and dumps), makes the reactor this thread's driver for the duration of
//!   a `block_on` ([`Io::drive`]), and closes the reactor when the executor
//!   is dropped ([`Io::close`]).
//! * [`IoPoller`] lives in the executor (not `Sync`): only the thread that
//!   runs the loop uses it. When no fiber is ready the loop waits in it
//!   until the next timer, a readiness event or a wake-up
//!   ([`IoPoller::idle`]); when fibers are ready and some fiber waits for
//!   I/O it looks without blocking, once per turn ([`IoPoller::look`]), so
//!   a busy loop does not starve sockets. A turn runs the fibers that were
//!   ready when it began running them (those resumed meanwhile wait for
//!   the next turn), so between two looks run at most that many fibers:
//!   the bound the loop keeps for timers and the remote queue too. A look
//!   costs one non-blocking `epoll_wait`, and none while no fiber waits
//!   for I/O.
//!
//! A loop that waits in its poller never calls `RemoteQueue::park`, so no
//! thread is registered there to unpark: every wake-up goes through the
//! reactor. The reactor's parking protocol (spindle-net's `reactor.rs`)
//! loses none: pushers publish to the remote queue before they notify, and
//! the loop reads the queue after each wait.
//!
//! # Blocking work
//!
//! The same executors (the system clock, `std`, Unix) also own a
//! [`BlockingPool`] (io-core's, exec-wstp's and exec-batching's: threads
//! on demand up to 512, kept 10 seconds when idle): `IO::blocking` work
//! (a file system call, a name lookup) runs there while its fiber waits,
//! and the fiber comes back through the remote queue, so the loop keeps
//! serving timers, sockets and the other fibers. A fiber waiting for
//! blocking work is held by the work, so the deadlock check (an abandoned
//! main fiber) never mistakes it for a program that cannot finish. The
//! pool is shut down with the executor: idle threads exit, queued calls
//! are dropped with their fibers, a call in progress finishes on its
//! thread (not waited for). Executors on another clock run blocking work
//! on the loop's thread (the executor contract's default): a virtual
//! clock must not wait for real time.
//!
//! # Miri
//!
//! The reactor is made under Miri too: Miri models the epoll and eventfd
//! calls mio makes, so the lib unit tests (which CI runs under Miri, with
//! strict provenance) run the loop as it runs natively, waiting in the
//! poller and woken through it from another thread. They make no socket.

use core::any::TypeId;
use core::time::Duration;

use std::num::NonZeroUsize;
use std::string::String;
use std::sync::Arc;

use spindle_core::BlockingTask;
use spindle_core::executor::support::{
    BlockingPool, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS, RemoteQueue,
};
use spindle_net::driver::{self, Reactor};

use super::imp;
use crate::clock::{Clock, StdClock};
use crate::error::BuildError;

/// The shared half of the I/O capability: the reactor, if the executor
/// has one. Any thread.
pub(crate) struct Io {
    reactor: Option<Reactor>,
    /// The threads of `IO::blocking` (module doc).
    blocking: Option<Arc<BlockingPool>>,
}

/// The name of the blocking pool's threads.
const BLOCKING_THREAD_NAME: &str = "exec-single-blocking";

/// The loop's half: the poller (and its reactor, for the waiter count), if
/// the executor has one. Only the thread that runs the loop.
pub(crate) struct IoPoller {
    polled: Option<(driver::Poller, Reactor)>,
}

/// The I/O capability of an executor on `clock`: a reactor and its poller
/// on the system clock (see the module doc), none on any other. Fails when
/// the system refuses a poller (out of descriptors).
pub(crate) fn io_for<C: Clock>(_clock: &C) -> Result<(Io, IoPoller), BuildError> {
    if TypeId::of::<C>() != TypeId::of::<StdClock>() {
        return Ok(no_io());
    }
    let (reactor, poller) = Reactor::new().map_err(BuildError::Poller)?;
    let max_threads = NonZeroUsize::new(DEFAULT_MAX_BLOCKING_THREADS).unwrap_or(NonZeroUsize::MIN);
    let io = Io {
        reactor: Some(reactor.clone()),
        blocking: Some(Arc::new(BlockingPool::new(
            max_threads,
            DEFAULT_BLOCKING_KEEP_ALIVE,
            String::from(BLOCKING_THREAD_NAME),
        ))),
    };
    let polled = IoPoller {
        polled: Some((poller, reactor)),
    };
    Ok((io, polled))
}

/// No I/O capability: the loop parks, sockets are `Unsupported`.
pub(crate) fn no_io() -> (Io, IoPoller) {
    (
        Io {
            reactor: None,
            blocking: None,
        },
        IoPoller { polled: None },
    )
}

impl Io {
    /// After a push or notification from elsewhere (the caller published
    /// it first): wakes the loop sleeping in its poller, or makes its next
    /// wait only look. Without a reactor the remote queue has unparked the
    /// loop already.
    #[inline]
    pub(crate) fn wake<C: Clock>(&self, clock: &C) {
        match &self.reactor {
            Some(reactor) => reactor.notify(),
            None => imp::after_push(clock),
        }
    }

    /// Hands `task` to the blocking pool, or back if there is none (it
    /// then runs on the calling thread).
    pub(crate) fn spawn_blocking(&self, task: BlockingTask) -> Result<(), BlockingTask> {
        match &self.blocking {
            Some(pool) => {
                BlockingPool::spawn(pool, task);
                Ok(())
            }
            None => Err(task),
        }
    }

    /// The blocking pool's threads (all, idle) and queued calls, if the
    /// executor has the pool.
    pub(crate) fn blocking_counts(&self) -> Option<[usize; 3]> {
        let counts = self.blocking.as_ref()?.counts();
        Some([counts.threads, counts.idle, counts.queued])
    }

    /// Sockets registered with the reactor.
    pub(crate) fn sources(&self) -> usize {
        self.reactor.as_ref().map_or(0, Reactor::sources)
    }

    /// Fibers waiting for socket readiness.
    pub(crate) fn waiters(&self) -> usize {
        self.reactor.as_ref().map_or(0, Reactor::waiters)
    }

    /// Runs `run` (a `block_on`'s loop) with the reactor as this thread's
    /// driver (sockets made by the fibers it runs register with it) and
    /// marked as polled (waits on its sockets are allowed; between runs
    /// they fail instead of hanging). Both are undone when `run` returns
    /// or unwinds.
    pub(crate) fn drive<R>(&self, run: impl FnOnce() -> R) -> R {
        let Some(reactor) = &self.reactor else {
            return run();
        };
        let _driven = Driven::new(reactor);
        driver::with_driver(reactor, run)
    }

    /// Closes the reactor (every later wait fails) and frees the fibers
    /// waiting for readiness now: their callbacks hold the fibers, which
    /// hold handles to the executor (the cycle the executor's `Drop`
    /// breaks). They are dropped here, after the reactor released its lock
    /// (a freed fiber may own a socket whose drop takes that lock); the
    /// caller holds no lock either.
    pub(crate) fn close(&self) {
        if let Some(reactor) = &self.reactor {
            let waiters = reactor.close();
            drop(waiters);
        }
        if let Some(pool) = &self.blocking {
            // Not joined: a call in progress may block for as long as it
            // likes (module doc).
            drop(pool.shutdown());
        }
    }
}

impl IoPoller {
    /// No fiber is ready: waits until `deadline` (by `clock`; `None`: no
    /// timer), a readiness event, or a wake-up from elsewhere, then resumes
    /// the fibers whose sockets are ready (they are queued): how many.
    /// Without a poller, the hosted platform's parking.
    pub(crate) fn idle<T, C: Clock>(
        &mut self,
        remote: &RemoteQueue<T>,
        clock: &C,
        deadline: Option<Duration>,
    ) -> usize {
        let Some((poller, _)) = &mut self.polled else {
            imp::idle(remote, clock, deadline);
            return 0;
        };
        if remote.has_pending() {
            // Taken in at the next turn; the poller would only look.
            return 0;
        }
        let timeout = deadline.map(|deadline| deadline.saturating_sub(clock.now()));
        match poller.poll(timeout) {
            Ok(resumed) => resumed,
            Err(_) => {
                // `poll` retries interrupted waits itself; any other error
                // is a broken poller. Sleep instead of spinning, so that
                // timers and wake-ups (seen at the next turn) still make
                // progress.
                let nap = Duration::from_millis(1);
                std::thread::sleep(timeout.map_or(nap, |t| t.min(nap)));
                0
            }
        }
    }

    /// Fibers are ready: if some fiber waits for readiness, looks at the
    /// poller without blocking and resumes those whose sockets are ready
    /// (how many). The loop calls it once per turn (module doc).
    #[inline]
    pub(crate) fn look(&mut self) -> usize {
        match &mut self.polled {
            Some((poller, reactor)) if reactor.waiters() > 0 => look_now(poller),
            // The common case, inlined: nothing to look at, nothing resumed.
            _ => 0,
        }
    }
}

/// A look at the poller without waiting: the fibers it resumed.
#[inline(never)]
fn look_now(poller: &mut driver::Poller) -> usize {
    // An error is a broken poller: the next look or wait sees it.
    poller.poll(Some(Duration::ZERO)).unwrap_or(0)
}

/// Marks the reactor as polled for the duration of a run (also when
/// unwinding): a wait on one of its sockets between runs fails instead of
/// hanging.
struct Driven<'a>(&'a Reactor);

impl<'a> Driven<'a> {
    fn new(reactor: &'a Reactor) -> Driven<'a> {
        reactor.set_driven(true);
        Driven(reactor)
    }
}

impl Drop for Driven<'_> {
    fn drop(&mut self) {
        self.0.set_driven(false);
    }
}
