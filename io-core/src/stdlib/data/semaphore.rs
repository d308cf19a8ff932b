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
//! `acquire_n(n)` is all or nothing towards the program (Cats Effect's
//! `acquireN`), but a waiter gathers its permits in its queue entry as
//! releases come, first come first served (`permits.rs`): a waiter for
//! many permits is not overtaken by later waiters for fewer. Its
//! cancellation cleanup gives back exactly what it had gathered (all `n`
//! once granted). `release_n(n)` fills the waiters' entries in arrival
//! order and puts the rest in the count.
//!
//! No count overflows: `new` refuses more than `MAX_PERMITS` with
//! `InvalidPermits::TooMany`, and a release that would take the free
//! permits past `MAX_PERMITS` releases nothing and returns
//! `PermitOverflow` as its value (the program's error type is the user's:
//! the refusal is a value the program can match on, never a panic, a wrap
//! or a silent clamp).
//!
//! `with_permit` (and so `Mutex::with_lock` and `Mutex::lock().use_with`)
//! takes a free permit in a `defer` that returns the program guarded by its
//! release (`use.guarantee(release)`); the run-loop installs a guarantee
//! that a `defer` returns in the same step, before it can observe
//! cancellation again: no masked region, no waiter, and the use runs with
//! its caller's cancelability. The release is done while the finalizer is
//! built, so it has no step of its own either.
//!
//! # Waiters nobody can wake
//!
//! A waiting fiber holds the semaphore only weakly (its cleanup's
//! reference): the queue holds the waiter's callback, and so the fiber,
//! and a strong reference back would be a cycle that nothing frees. The
//! release that completes a waiter grants it under the queue's lock, and
//! the grant hands it a strong reference together with its permits (its
//! ticket, `wait/list.rs`, "Holding what one waits on"): resumed, the fiber
//! holds the semaphore while it holds the permit (`with_permit`,
//! `with_lock`, `lock()`) and releases it to the fibers queued behind it,
//! even if every other handle is gone by then; canceled before it resumes,
//! its cleanup gives the permits back through that reference. So when the
//! last handle of a semaphore (and every program built from one, and every
//! holder of a permit) is gone, the semaphore is dropped with its queue,
//! and the fibers waiting in it are freed without running their finalizers
//! (`wait/cell.rs`, "Waits nobody can end", which also lists the cycles
//! that reference counting cannot see).

use core::fmt;

use super::permits::{MAX_PERMITS, Overflow, Permits, Waiting};
use crate::combinators::monad_cancel::Poll;
use crate::engine::erased::Value;
use crate::engine::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};
use crate::fiber::{Callback, RawCallback};
use crate::io::IO;
use crate::stdlib::resource::Resource;
use crate::sync::Arc;
use crate::wait::list::{Claim, Ticket, cleanup_through};

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Acquire = "Semaphore::acquire",
    AcquireN = "Semaphore::acquire_n",
    TryAcquire = "Semaphore::try_acquire",
    TryAcquireN = "Semaphore::try_acquire_n",
    Release = "Semaphore::release",
    ReleaseN = "Semaphore::release_n",
    WithPermit = "Semaphore::with_permit",
}

struct Waiter {
    /// Resumes the waiting fiber (with `()`).
    callback: RawCallback,
    /// Granted (with a strong reference to the semaphore) under the
    /// queue's lock when a release gives this waiter its last missing
    /// permit (`wake`).
    ticket: Arc<Ticket<Shared>>,
    /// The permits it asked for.
    wanted: usize,
    /// The permits given to it so far (by `take_or_wait_n` and releases).
    got: usize,
}

impl Waiting for Waiter {
    fn missing(&self) -> usize {
        self.wanted - self.got
    }

    fn give(&mut self, n: usize) {
        self.got += n;
    }
}

/// Grants a waiter that has all its permits, and wakes it: called under
/// the queue's lock by the release that gave it its last permit
/// (`permits.rs`), which holds `shared`. From the grant on, the permits
/// and a strong reference to the semaphore are the waiter's
/// (`wait/list.rs`, "Holding what one waits on"): resumed, its fiber holds
/// the semaphore while it holds the permits; canceled meanwhile, its
/// cleanup gives them back through that reference.
fn wake(shared: &Arc<Shared>, waiter: Waiter) {
    waiter.ticket.grant(shared);
    // The fiber, suspended until the callback completes, holds its own
    // references to the ticket: this one is never the last.
    drop(waiter.ticket);
    let _ = waiter.callback.complete(Ok(Value::unit()));
}

/// The permits and the waiters (`permits.rs`: a free permit is taken, and
/// a permit given back with nobody waiting, without a lock).
type Shared = Permits<Waiter>;

/// The releases, on the semaphore's `Arc`: a release that grants a waiter
/// hands it a strong reference (`wake`).
trait Releases {
    fn release_one(&self) -> Result<(), Overflow>;
    fn release_many(&self, n: usize) -> Result<(), Overflow>;
    fn give_back(&self, n: usize);
}

impl Releases for Arc<Shared> {
    /// Gives one permit back: to the first waiter, or to the count.
    #[inline]
    fn release_one(&self) -> Result<(), Overflow> {
        self.release(|waiter| wake(self, waiter))
    }

    /// Gives `n` permits back: to the waiters in arrival order, then to
    /// the count.
    fn release_many(&self, n: usize) -> Result<(), Overflow> {
        self.release_n(n, |waiter| wake(self, waiter))
    }

    /// Gives back permits that a fiber of this semaphore took (a `with_permit`
    /// ending, a canceled `acquire_n`). They can only overflow the count if
    /// releases without an acquire filled it meanwhile; they are then not
    /// added (the count stays at its largest value), which is documented on
    /// [`Semaphore::release_n`].
    fn give_back(&self, n: usize) {
        let _ = self.release_many(n);
    }
}

/// A counting semaphore for fibers (Cats Effect's `Semaphore`).
///
/// A fiber waiting for a permit does not keep the semaphore alive: once
/// nothing else can release one (no handle, no holder), the semaphore is
/// dropped and its waiting fibers are freed, their finalizers not run (a
/// main fiber so blocked makes `block_on` return a deadlock error). See
/// the module doc, "Waiters nobody can wake".
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Semaphore, wstp::Runtime};
///
/// let sem = Semaphore::new(1)?;
/// let guarded: IO<u32, ()> = sem.with_permit(IO::pure(5));
/// assert_eq!(Runtime::new()?.block_on(guarded)?.succeeded(), Some(5));
/// assert!(Semaphore::new(0).is_err());
/// assert!(Semaphore::new(u64::MAX).is_err());
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

/// A semaphore was asked for a number of permits it cannot have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidPermits {
    /// 0 permits: nobody could ever acquire one.
    Zero,
    /// More permits than a semaphore can count ([`Semaphore::MAX_PERMITS`]).
    TooMany {
        /// The number asked for.
        requested: u64,
        /// The largest valid number on this target.
        max: u64,
    },
}

impl fmt::Display for InvalidPermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidPermits::Zero => f.write_str(
                "a semaphore needs at least 1 permit (0 would block every acquire forever)",
            ),
            InvalidPermits::TooMany { requested, max } => write!(
                f,
                "a semaphore can count at most {max} permits; {requested} were asked for"
            ),
        }
    }
}

impl core::error::Error for InvalidPermits {}

/// A release would have taken a semaphore's count of free permits past
/// [`Semaphore::MAX_PERMITS`]: nothing was released (the count is
/// unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermitOverflow {
    /// The permits the release gave back.
    pub released: u64,
    /// The free permits when it was refused.
    pub available: u64,
    /// The largest count on this target.
    pub max: u64,
}

impl fmt::Display for PermitOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "releasing {} permits would take the semaphore's free permits ({}) past \
             their maximum ({}); nothing was released",
            self.released, self.available, self.max
        )
    }
}

impl core::error::Error for PermitOverflow {}

/// A `usize` always fits in a `u64` on supported targets (16- to 64-bit).
fn to_u64(n: usize) -> u64 {
    n as u64
}

impl Semaphore {
    /// The most permits a semaphore can count: 2^63 - 1 on 64-bit
    /// targets, 2^31 - 1 on 32-bit ones (one bit of the permit word is a
    /// flag, `permits.rs`).
    pub const MAX_PERMITS: u64 = MAX_PERMITS as u64;

    /// A semaphore with `permits` permits: at least 1, at most
    /// [`Semaphore::MAX_PERMITS`] (`Err(InvalidPermits::TooMany)` beyond:
    /// nothing is clamped).
    ///
    /// ```
    /// use spindle_effect::{Semaphore, error::InvalidPermits};
    ///
    /// assert_eq!(Semaphore::new(0).err(), Some(InvalidPermits::Zero));
    /// assert!(matches!(Semaphore::new(u64::MAX), Err(InvalidPermits::TooMany { .. })));
    /// assert_eq!(Semaphore::new(Semaphore::MAX_PERMITS)?.available(), Semaphore::MAX_PERMITS);
    /// # Ok::<(), InvalidPermits>(())
    /// ```
    pub fn new(permits: u64) -> Result<Semaphore, InvalidPermits> {
        if permits == 0 {
            return Err(InvalidPermits::Zero);
        }
        match usize::try_from(permits) {
            Ok(count) if count <= MAX_PERMITS => Ok(Semaphore {
                shared: Arc::new(Permits::new(count)),
            }),
            _ => Err(InvalidPermits::TooMany {
                requested: permits,
                max: Semaphore::MAX_PERMITS,
            }),
        }
    }

    /// A semaphore with `permits` permits (which cannot be 0), for io-core's
    /// own bounds of parallelism: more than [`Semaphore::MAX_PERMITS`] are
    /// as good as unbounded there, and count as that many.
    pub(crate) fn with_permits(permits: core::num::NonZeroU64) -> Semaphore {
        let permits = usize::try_from(permits.get()).unwrap_or(MAX_PERMITS);
        Semaphore {
            shared: Arc::new(Permits::new(permits)),
        }
    }

    /// Permits available now.
    pub fn available(&self) -> u64 {
        to_u64(self.shared.available())
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

    /// A permit, waited for (cancelably where `poll`, of the caller's masked
    /// region, unmasks) and taken, with a handle to the semaphore to release
    /// it: what a lock's composed allocation holds (`Resource`'s
    /// `into_allocate`), instead of a handle captured while it waits
    /// (`wait/list.rs`, "Holding what one waits on").
    pub(crate) fn acquire_held_untraced<E: Send + 'static>(&self, poll: Poll) -> IO<Semaphore, E> {
        let shared = self.shared.clone();
        IO::defer_untraced(move || {
            if shared.try_take() {
                return IO::pure(Semaphore { shared });
            }
            Semaphore::acquire_slow_held(shared, poll).map_untraced(|shared| Semaphore { shared })
        })
    }

    fn acquire_at<M: OpMeta, E: Send + 'static>(&self, site: Option<Site>) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::defer_at::<M, _>(site, move || {
            // A free permit and nobody waiting: take it in one step, without
            // a waiter or a masked region.
            if shared.try_take() {
                return IO::unit();
            }
            Semaphore::acquire_slow(shared, 1)
        })
    }

    /// Waits until `n` permits can be taken, and takes them all at once
    /// (all or nothing, Cats Effect's `acquireN`). Waiters are served in
    /// arrival order: a waiter for many permits is not overtaken by later
    /// waiters for fewer. Canceling the wait gives back the permits it had
    /// gathered so far, and no more. `acquire_n(0)` takes nothing and never
    /// waits; more than [`Semaphore::MAX_PERMITS`] can never be had, and
    /// such a wait only ends by cancellation.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Semaphore, wstp::Runtime};
    ///
    /// let sem = Semaphore::new(5)?;
    /// let (s1, s2) = (sem.clone(), sem.clone());
    /// let io: IO<u64, ()> = sem.acquire_n(3).map(move |()| s1.available())
    ///     .flat_map(move |left| s2.release_n(3).map(move |_| left));
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(2));
    /// assert_eq!(sem.available(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn acquire_n<E: Send + 'static>(&self, n: u64) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::defer_at::<Named<AcquireN>, _>(here(), move || {
            // More than any count can hold: wait, cancelably, forever.
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if shared.try_take_n(n) {
                return IO::unit();
            }
            Semaphore::acquire_slow(shared, n)
        })
    }

    /// Takes a permit if one is free and nobody waits (`true`), without
    /// waiting.
    #[track_caller]
    pub fn try_acquire<E: Send + 'static>(&self) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryAcquire>, _>(here(), move || shared.try_take())
    }

    /// Takes `n` permits if that many are free and nobody waits (`true`),
    /// without waiting; all or nothing. `try_acquire_n(0)` is `true`.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Semaphore, wstp::Runtime};
    ///
    /// let sem = Semaphore::new(2)?;
    /// let (s1, s2) = (sem.clone(), sem.clone());
    /// let io: IO<(bool, bool), ()> = s1.try_acquire_n(3).flat_map(move |three| {
    ///     s2.try_acquire_n(2).map(move |two| (three, two))
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some((false, true)));
    /// assert_eq!(sem.available(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn try_acquire_n<E: Send + 'static>(&self, n: u64) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryAcquireN>, _>(here(), move || match usize::try_from(n) {
            Ok(n) => shared.try_take_n(n),
            Err(_) => false,
        })
    }

    /// `acquire` (of `n` permits, at least 1) when it may have to wait.
    fn acquire_slow<E: Send + 'static>(shared: Arc<Shared>, n: usize) -> IO<(), E> {
        IO::uncancelable_untraced(move |poll| {
            Semaphore::wait_for(shared, n, Arc::new(Ticket::new()), poll)
        })
    }

    /// `acquire` of one permit when it may have to wait, producing the
    /// strong reference to the semaphore that its grant handed over
    /// (`wait/list.rs`, "Holding what one waits on"), for the release.
    /// Returned masked: the caller installs the release before it unmasks.
    fn acquire_slow_held<E: Send + 'static>(shared: Arc<Shared>, poll: Poll) -> IO<Arc<Shared>, E> {
        let ticket = Arc::new(Ticket::new());
        let granted = ticket.clone();
        Semaphore::wait_for(shared, 1, ticket, poll).flat_map_untraced(move |()| {
            match granted.take() {
                Claim::Granted(held) => IO::pure(held),
                // The wait ends only once granted, and only the cleanup of a
                // canceled wait (which then does not come here) takes the
                // ticket too: never reached.
                Claim::Unasked | Claim::Waiting(_) | Claim::Ended => IO::never_untraced(),
            }
        })
    }

    /// The wait for `n` permits (at least 1), cancelable by `poll` (that of
    /// the caller's masked region), its cleanup run masked: takes them at once or queues
    /// a waiter with `ticket`, which the grant fills. While it waits, only
    /// its cleanup refers to the semaphore, and weakly (`wait/cell.rs`,
    /// "Waits nobody can end"): a semaphore nobody else can reach is freed
    /// with its waiters.
    fn wait_for<E: Send + 'static>(
        shared: Arc<Shared>,
        n: usize,
        ticket: Arc<Ticket<Shared>>,
        poll: Poll,
    ) -> IO<(), E> {
        let t1 = ticket.clone();
        let weak = crate::sync::downgrade(&shared);
        let wait: IO<(), E> = IO::from_callback_untraced(move |cb: Callback<(), E>| {
            let mut queue = shared.queue();
            let took = queue.take_or_wait_n(n);
            if took == n {
                t1.grant(&shared);
                drop(queue);
                cb.succeed(());
            } else {
                let ticket = t1.clone();
                let id = queue.push(Waiter {
                    callback: cb.into_raw(),
                    ticket: t1,
                    wanted: n,
                    got: took,
                });
                ticket.waiting(id);
            }
            // `shared` is dropped here: the waiter is held by the queue,
            // the queue only by the semaphore's other holders.
            None
        });
        // A semaphore gone meanwhile took the waiter with it (a granted
        // waiter's ticket holds it: then it is not gone).
        let cleanup = cleanup_through(weak, move |shared: &Arc<Shared>| {
            let held = {
                // Under the queue's lock, so that no release grants this
                // waiter between the read and the removal.
                let mut queue = shared.queue();
                match ticket.take() {
                    Claim::Unasked | Claim::Ended => 0,
                    // Still queued: what it gathered so far.
                    Claim::Waiting(id) => queue.remove(id).map_or(0, |waiter| waiter.got),
                    Claim::Granted(_) => n,
                }
            };
            if held > 0 {
                // The permits were ours already: give them back.
                shared.give_back(held);
            }
        });
        poll.apply_untraced(wait).on_cancel_untraced(cleanup)
    }

    /// Returns a permit (to the first waiter, or to the pool).
    ///
    /// `Err(PermitOverflow)`, with nothing released, if the free permits
    /// are at [`Semaphore::MAX_PERMITS`] already (a release without an
    /// acquire can get them there): the count never wraps and never
    /// saturates silently.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Semaphore, wstp::Runtime};
    ///
    /// let sem = Semaphore::new(Semaphore::MAX_PERMITS)?;
    /// let overflow = Runtime::new()?.block_on(sem.release::<()>())?.succeeded();
    /// assert!(matches!(overflow, Some(Err(_))));
    /// assert_eq!(sem.available(), Semaphore::MAX_PERMITS);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn release<E: Send + 'static>(&self) -> IO<Result<(), PermitOverflow>, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<Release>, _>(here(), move || {
            shared.release_one().map_err(|Overflow| PermitOverflow {
                released: 1,
                available: to_u64(shared.available()),
                max: Semaphore::MAX_PERMITS,
            })
        })
    }

    /// [`Semaphore::release`] for io-core's own nodes (no trace event), of
    /// a permit that was acquired (see `Shared::give_back`).
    pub(crate) fn release_untraced<E: Send + 'static>(&self) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::delay_at::<Internal, _>(NO_SITE, move || shared.give_back(1))
    }

    /// Returns `n` permits at once: to the waiters in arrival order (each
    /// woken once it has all it asked for), then to the pool.
    ///
    /// `Err(PermitOverflow)`, with nothing released, if the free permits
    /// would pass [`Semaphore::MAX_PERMITS`]. Permits that a `with_permit`,
    /// a [`Semaphore::permit`] or a canceled [`Semaphore::acquire_n`] give
    /// back can only overflow if such releases filled the count meanwhile;
    /// they are then not added (the count stays at its largest value).
    #[track_caller]
    pub fn release_n<E: Send + 'static>(&self, n: u64) -> IO<Result<(), PermitOverflow>, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<ReleaseN>, _>(here(), move || {
            let refused = |shared: &Shared| PermitOverflow {
                released: n,
                available: to_u64(shared.available()),
                max: Semaphore::MAX_PERMITS,
            };
            match usize::try_from(n) {
                Ok(count) => shared
                    .release_many(count)
                    .map_err(|Overflow| refused(&shared)),
                Err(_) => Err(refused(&shared)),
            }
        })
    }

    /// One permit as a [`Resource`]: acquired (waiting, cancelably, as
    /// [`Semaphore::acquire`]) when the resource is used, released when
    /// its scope ends, whatever the outcome.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Semaphore, wstp::Runtime};
    ///
    /// let sem = Semaphore::new(2)?;
    /// let inside = sem.clone();
    /// let io: IO<u64, ()> = sem.permit().use_with(move |()| IO::pure(inside.available()));
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(1));
    /// assert_eq!(sem.available(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn permit<E: Send + 'static>(&self) -> Resource<(), E> {
        Resource::lock_at(here(), self.clone())
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
                // Weakly while it waits, strongly once granted: the grant
                // hands this fiber the semaphore with the permit, so that it
                // gives the permit on to the fibers queued behind it even if
                // every other handle is gone by then (`wait/list.rs`).
                Semaphore::acquire_slow_held(shared, poll).flat_map_untraced(move |held| {
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
        struct GiveBack<'a>(&'a Arc<Shared>);
        impl Drop for GiveBack<'_> {
            fn drop(&mut self) {
                self.0.give_back(1);
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
    /// behind it (`wait/cell.rs`, "Waits nobody can end", lists the cycles
    /// this leaves). A weak one also cost about 100 instructions per
    /// uncontended `with_permit` (`mutex_lock`: +9%).
    fn holding_at<M: OpMeta, A: Send + 'static, E: Send + 'static>(
        site: Option<Site>,
        shared: Arc<Shared>,
        io: IO<A, E>,
    ) -> IO<A, E> {
        io.guarantee_with_at::<M, _>(site, move || {
            shared.give_back(1);
            IO::unit()
        })
    }
}
