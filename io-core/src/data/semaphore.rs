//! `Semaphore`: permits handed out in FIFO order.
//!
//! # Protocol
//!
//! The state is the number of available permits and a FIFO queue of
//! waiters (`permits.rs`: the count is one atomic word, with a flag for
//! "waiters queued"; the queue is behind a short lock). `acquire` takes a
//! permit at once if one is available and nobody waits (a compare-and-swap,
//! no lock); otherwise it queues a waiter and suspends.
//! `release` hands its permit to the first waiter (if its fiber was
//! canceled meanwhile, its cleanup gives the permit back) or, with nobody
//! waiting, makes it available (a compare-and-swap, no lock).
//!
//! Cancellation gives no permit away: the wait runs under `poll` inside an
//! uncancelable region with an `on_cancel` cleanup. The cleanup finds the
//! waiter still queued (it removes it), or finds that the permit was already
//! handed over (the fiber was resumed, and canceled right after): it then
//! releases that permit again; a fiber canceled before its registration ran
//! holds nothing and gives nothing back.
//!
//! `with_permit` (and so `Mutex::with_lock` and `Mutex::lock().use_with`)
//! takes a free permit in a `defer` that returns the program guarded by its
//! release (`use.guarantee(release)`); the run-loop installs a guarantee
//! that a `defer` returns in the same step, before it can observe
//! cancellation again: no masked region, no waiter, and the use runs with
//! its caller's cancelability. The release is done while the finalizer is
//! built, so it has no step of its own either.

use core::fmt;

use super::permits::{MAX_PERMITS, Permits};
use crate::erased::Value;
use crate::fiber::{Callback, RawCallback};
use crate::io::IO;
use crate::sync::{Arc, Mutex};
use crate::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};

// The operations as traces name them.
super::trace_ops! {
    Acquire = "Semaphore::acquire",
    Release = "Semaphore::release",
    WithPermit = "Semaphore::with_permit",
}

struct Waiter {
    /// Resumes the waiting fiber (with `()`).
    callback: RawCallback,
    /// Set to `Granted` under the queue's lock when a release hands this
    /// waiter its permit.
    ticket: Arc<Mutex<Ticket>>,
}

/// The permits and the waiters (`permits.rs`: a free permit is taken, and
/// a permit given back with nobody waiting, without a lock).
type Shared = Permits<Waiter>;

impl Shared {
    /// Gives one permit back: to the first waiter, or to the count.
    #[inline]
    fn release_one(&self) {
        // From the grant on, the permit is the waiter's: if its fiber was
        // canceled meanwhile, its cleanup gives it back.
        if let Some(waiter) = self.release(|waiter| *waiter.ticket.lock() = Ticket::Granted) {
            // Outside the lock: completing schedules the fiber.
            let _ = waiter.callback.complete(Ok(Value::unit()));
        }
    }
}

/// How an `acquire` ended, for its cancellation cleanup.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ticket {
    /// Has not asked yet (canceled before its registration ran): holds
    /// nothing.
    Unasked,
    /// Queued with this id.
    Waiting(u64),
    /// Took a permit.
    Granted,
}

/// A counting semaphore for fibers (Cats Effect's `Semaphore`).
///
/// ```
/// use spindle_core::{IO, Semaphore};
/// use spindle_exec_single::SingleThreaded;
///
/// let sem = Semaphore::new(1)?;
/// let guarded: IO<u32, ()> = sem.with_permit(IO::pure(5));
/// assert_eq!(SingleThreaded::new()?.block_on(guarded)?.succeeded(), Some(5));
/// assert!(Semaphore::new(0).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Semaphore {
    shared: Arc<Shared>,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available", &self.available())
            .field("waiting", &self.waiting())
            .finish()
    }
}

/// A semaphore was asked for 0 permits: nobody could ever acquire one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidPermits;

impl fmt::Display for InvalidPermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a semaphore needs at least 1 permit (0 would block every acquire forever)")
    }
}

impl core::error::Error for InvalidPermits {}

impl Semaphore {
    /// A semaphore with `permits` permits (at least 1; more than
    /// `usize::MAX / 2`, 2^63 - 1 on 64-bit targets, count as that many).
    pub fn new(permits: u64) -> Result<Semaphore, InvalidPermits> {
        match core::num::NonZeroU64::new(permits) {
            Some(permits) => Ok(Semaphore::with_permits(permits)),
            None => Err(InvalidPermits),
        }
    }

    /// A semaphore with `permits` permits (which cannot be 0).
    pub(crate) fn with_permits(permits: core::num::NonZeroU64) -> Semaphore {
        let permits = usize::try_from(permits.get()).unwrap_or(MAX_PERMITS);
        Semaphore {
            shared: Arc::new(Permits::new(permits)),
        }
    }

    /// Permits available now.
    pub fn available(&self) -> u64 {
        // A `usize` always fits in a `u64` on supported targets.
        self.shared.available() as u64
    }

    /// Fibers waiting for a permit now.
    pub fn waiting(&self) -> usize {
        self.shared.queue().len()
    }

    /// Waits for a permit and takes it. Canceling the wait gives no permit
    /// away (see the module doc).
    #[track_caller]
    pub fn acquire<E: Send + 'static>(&self) -> IO<(), E> {
        self.acquire_at::<Named<Acquire>, E>(here())
    }

    /// [`Semaphore::acquire`] for io-core's own nodes (no trace event).
    pub(crate) fn acquire_untraced<E: Send + 'static>(&self) -> IO<(), E> {
        self.acquire_at::<Internal, E>(NO_SITE)
    }

    fn acquire_at<M: OpMeta, E: Send + 'static>(&self, site: Option<Site>) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::defer_at::<M, _>(site, move || {
            // A free permit and nobody waiting: take it in one step, without
            // a waiter or a masked region.
            if shared.try_take() {
                return IO::unit();
            }
            Semaphore::acquire_slow(shared)
        })
    }

    /// `acquire` when it may have to wait.
    fn acquire_slow<E: Send + 'static>(shared: Arc<Shared>) -> IO<(), E> {
        IO::uncancelable_untraced(move |poll| {
            let ticket = Arc::new(Mutex::new(Ticket::Unasked));
            let (t1, t2) = (ticket.clone(), ticket);
            // The cleanup holds the semaphore weakly (`fiber/join.rs`, "Waits
            // nobody can end"): one gone meanwhile took the waiter with it.
            let (s1, s2) = (shared.clone(), crate::sync::downgrade(&shared));
            drop(shared);
            let wait: IO<(), E> = IO::from_callback_untraced(move |cb: Callback<(), E>| {
                let mut queue = s1.queue();
                if queue.take_or_wait() {
                    *t1.lock() = Ticket::Granted;
                    drop(queue);
                    cb.succeed(());
                } else {
                    let ticket = t1.clone();
                    let id = queue.push(Waiter {
                        callback: cb.into_raw(),
                        ticket: t1,
                    });
                    *ticket.lock() = Ticket::Waiting(id);
                }
                None
            });
            let cleanup = IO::delay_untraced(move || {
                let Some(s2) = s2.upgrade() else { return };
                let granted = {
                    // Under the queue's lock, so that no release pops this
                    // waiter between the two reads.
                    let mut queue = s2.queue();
                    match *t2.lock() {
                        Ticket::Unasked => false,
                        Ticket::Waiting(id) => {
                            drop(queue.remove(id));
                            false
                        }
                        Ticket::Granted => true,
                    }
                };
                if granted {
                    // The permit was ours already: give it back.
                    s2.release_one();
                }
            });
            poll.apply_untraced(wait).on_cancel_untraced(cleanup)
        })
    }

    /// Returns a permit (to the first waiter, or to the pool).
    #[track_caller]
    pub fn release<E: Send + 'static>(&self) -> IO<(), E> {
        self.release_at::<Named<Release>, E>(here())
    }

    /// [`Semaphore::release`] for io-core's own nodes (no trace event).
    pub(crate) fn release_untraced<E: Send + 'static>(&self) -> IO<(), E> {
        self.release_at::<Internal, E>(NO_SITE)
    }

    fn release_at<M: OpMeta, E: Send + 'static>(&self, site: Option<Site>) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::delay_at::<M, _>(site, move || shared.release_one())
    }

    /// Runs `io` holding a permit, released whatever the outcome.
    #[track_caller]
    pub fn with_permit<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E> {
        self.with_permit_at::<Named<WithPermit>, A, E>(here(), io)
    }

    /// [`Semaphore::with_permit`] for io-core's own nodes (no trace event).
    pub(crate) fn with_permit_untraced<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> IO<A, E> {
        self.with_permit_at::<Internal, A, E>(NO_SITE, io)
    }

    /// [`Semaphore::with_permit`] recorded as the operation `M` at `site`.
    ///
    /// A free permit (nobody waiting) is taken in a `defer`, which returns
    /// `io` guarded by its release: the run-loop installs that guarantee in
    /// the same step (see `fiber/run_loop.rs`), so no cancellation comes
    /// between the permit and its release, and `io` runs with the caller's
    /// cancelability, unmasked or masked. Otherwise the wait is a masked
    /// region whose `poll` lets cancellation end the wait.
    pub(crate) fn with_permit_at<M: OpMeta, A: Send + 'static, E: Send + 'static>(
        &self,
        site: Option<Site>,
        io: IO<A, E>,
    ) -> IO<A, E> {
        self.use_permit_at::<M, Internal, (), A, E, _>(site, NO_SITE, (), move |()| io)
    }

    /// The program `f` builds from `value`, run holding a permit, as
    /// [`Semaphore::with_permit_at`] runs `io`: `Resource::use_with` of
    /// `Mutex::lock` (`f` is the user's, called once the permit is held).
    /// Recorded as the operation `M` at `site` (`Resource::use_with`), then
    /// `L` at `lock_site` (`Mutex::lock`, by the guarantee around `f`'s
    /// program: no node of its own).
    pub(crate) fn use_permit_at<M, L, A, B, E, F>(
        &self,
        site: Option<Site>,
        lock_site: Option<Site>,
        value: A,
        f: F,
    ) -> IO<B, E>
    where
        M: OpMeta,
        L: OpMeta,
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&A) -> IO<B, E> + Send + 'static,
    {
        let shared = self.shared.clone();
        // The `defer` records `M`, the guarantee `L`, when it is installed.
        IO::defer_at::<M, _>(site, move || {
            if shared.try_take() {
                let used = Semaphore::build_holding(&shared, &value, f);
                return Semaphore::holding_at::<L, _, _>(lock_site, shared, used);
            }
            IO::uncancelable_untraced(move |poll| {
                // Strongly: once granted, this fiber is the one that gives
                // the permit back to the fibers queued behind it (a weak
                // reference here lost them when the last handle went while
                // the permit was on its way: `par_traverse_n`'s hang).
                let held = shared.clone();
                poll.apply_untraced(Semaphore::acquire_slow(shared))
                    .flat_map_untraced(move |()| {
                        let used = Semaphore::build_holding(&held, &value, f);
                        Semaphore::holding_at::<L, _, _>(lock_site, held, poll.apply_untraced(used))
                    })
            })
        })
    }

    /// Calls `f` (the user's) while a permit taken for its program is not
    /// yet guarded by its release: if `f` panics, the permit goes back at
    /// once, and the panic goes on (the fiber ends `Panicked`).
    fn build_holding<A, B, E, F>(shared: &Arc<Shared>, value: &A, f: F) -> IO<B, E>
    where
        F: FnOnce(&A) -> IO<B, E>,
    {
        /// Gives the permit back when dropped (by unwinding only: it is
        /// forgotten once `f` has returned).
        struct GiveBack<'a>(&'a Shared);
        impl Drop for GiveBack<'_> {
            fn drop(&mut self) {
                self.0.release_one();
            }
        }
        let give_back = GiveBack(shared);
        let used = f(value);
        core::mem::forget(give_back);
        used
    }

    /// `io` holding the permit just taken, its guarantee recorded as the
    /// operation `M` at `site` when it is installed: the permit is released
    /// when `io` ends, whatever the outcome. The release is done as the
    /// finalizer is built, so that it has no program of its own to run (the
    /// run-loop then goes on at once).
    ///
    /// The release holds the semaphore strongly, as a fiber holds what it
    /// has captured: a holder gives the permit on to the fibers queued
    /// behind it (`fiber/join.rs`, "Waits nobody can end", lists the cycles
    /// this leaves). A weak one also cost about 100 instructions per
    /// uncontended `with_permit` (`mutex_lock`: +9%).
    fn holding_at<M: OpMeta, A: Send + 'static, E: Send + 'static>(
        site: Option<Site>,
        shared: Arc<Shared>,
        io: IO<A, E>,
    ) -> IO<A, E> {
        io.guarantee_with_at::<M, _>(site, move || {
            shared.release_one();
            IO::unit()
        })
    }
}
