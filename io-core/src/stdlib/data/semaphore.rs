//! `Semaphore`: permits for fibers (Cats Effect's `Semaphore`).
//!
//! # Protocol
//!
//! The state is the number of free permits and a FIFO list of waiters
//! (`permits.rs`: the count is one atomic word, with a flag for "waiters
//! listed"; the list is behind a short lock). `acquire` takes a permit at
//! once if one is free (a compare-and-swap, no lock), whether or not
//! fibers wait; otherwise it lists a waiter and suspends. `release` puts
//! its permit in the count (a compare-and-swap while nobody waits) and
//! wakes the first waiter; the woken fiber takes the permit when it runs,
//! unless a fiber that ran first took it, and then waits again, at the
//! back (barging, as in Cats Effect 3.6's queues; `permits.rs` says why a
//! permit handed to a waiter, the design up to this version, froze under
//! short timeouts, and why no wake-up is lost and every fiber that runs
//! while permits are free gets them).
//!
//! A waiter is resumed with a wake-up ([`Woken`]): the number of permits
//! it wants and a strong reference to the semaphore. Its program uses it
//! up in the step that retries. If the fiber is canceled before that step
//! (the wake-up comes back to the waker, or is dropped with the canceled
//! program), the wake-up goes to the next waiter. A waiter canceled while
//! listed leaves the list (its cleanup). So cancellation gives no permit
//! away, and takes none: permits are only ever in the count or held by a
//! program that took them.
//!
//! `acquire_n(n)` is all or nothing (Cats Effect's `acquireN`): a waiter
//! is woken only once the free permits cover all it wants beyond what the
//! waiters woken before it want, and it then takes them all at once. The
//! first waiter is woken before any later one, however few permits those
//! want: a waiter for many permits is not overtaken by later waiters for
//! fewer (fibers that arrive while permits are free take them, though,
//! and can overtake it). `release_n(n)` adds its permits to the count and
//! wakes as many waiters, in arrival order, as they cover.
//!
//! No count overflows: `new` refuses more than `MAX_PERMITS` with
//! `InvalidPermits::TooMany`, and a release that would take the free
//! permits past `MAX_PERMITS` releases nothing and returns
//! `PermitOverflow` as its value (the program's error type is the user's:
//! the refusal is a value the program can match on, never a panic, a wrap
//! or a silent clamp).
//!
//! `with_permit` (and so `Mutex::with_lock`) is one `Acquire` node
//! (`IO::acquire_at`): when it runs, its closure takes a free permit (one
//! compare-and-swap) and hands the run-loop the release, which it pushes
//! as a light `Release` frame in the same step, before it can observe
//! cancellation again: no masked region, no waiter, no `Outcome`, and the
//! use runs with its caller's cancelability. The frame calls the release
//! (one compare-and-swap while nobody waits) as the use's value or error
//! passes it, or as a cancellation or panic unwinds through it: once,
//! whatever the outcome (`fiber/run_loop.rs`). `Mutex::lock().use_with`
//! takes a free permit in a `defer` that returns the use guarded by its
//! release (`use.guarantee(release)`), which the run-loop installs in the
//! same step as well; that release is done while the finalizer is built,
//! so it has no step of its own either. When either has to wait, the wait
//! runs under the `poll` of a masked region, and the retry that takes the
//! permit installs the release (a guarantee) before the region unmasks.
//!
//! # Waiters nobody can wake
//!
//! A waiting fiber holds the semaphore only weakly (its cleanup's
//! reference): the list holds the waiter's callback, and so the fiber,
//! and a strong reference back would be a cycle that nothing frees. The
//! release that wakes a waiter holds the semaphore, and hands the woken
//! fiber a strong reference in its wake-up (`wait/list.rs`, "Holding what
//! one waits on"): the fiber retries with
//! it, and keeps it while it holds the permit it took (`with_permit`,
//! `with_lock`, `lock()`), so that it releases the permit to the fibers
//! listed behind it even if every other handle is gone by then; canceled
//! before it retries, it passes the wake-up on through that reference. So
//! when the last handle of a semaphore (and every program built from one,
//! and every holder of a permit) is gone, the semaphore is dropped with
//! its list, and the fibers waiting in it are freed without running their
//! finalizers (`wait/cell.rs`, "Waits nobody can end", which also lists
//! the cycles that reference counting cannot see).

use core::fmt;
use core::mem::ManuallyDrop;

use super::permits::{MAX_PERMITS, Overflow, Permits, Registered, Waiting};
use crate::combinators::monad_cancel::{Poll, Release as Releaser};
use crate::engine::erased::Value;
use crate::engine::tracing::{Internal, NO_SITE, Named, OpMeta, Site, here};
use crate::fiber::{Callback, RawCallback};
use crate::io::IO;
use crate::stdlib::resource::Resource;
use crate::sync::Arc;
use crate::wait::list::cleanup_weakly;

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
    /// Resumes the waiting fiber (with a [`Woken`]).
    callback: RawCallback,
    /// The permits it wants.
    wants: usize,
}

impl Waiting for Waiter {
    fn wants(&self) -> usize {
        self.wants
    }
}

/// A wake-up: what a woken waiter's suspension resumes with (module doc).
/// Used up by [`Woken::into_shared`] in the step that retries; dropped
/// unused (its fiber was canceled first), it passes the wake-up on.
struct Woken {
    /// The semaphore, held strongly (module doc, "Waiters nobody can wake").
    shared: ManuallyDrop<Arc<Shared>>,
    wants: usize,
}

impl Woken {
    /// The woken fiber retries with the semaphore.
    fn into_shared(self) -> Arc<Shared> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (it is a `ManuallyDrop`) nor used
        // again, so its `Drop` does not take the `Arc` too: it is moved out
        // exactly once.
        unsafe { ManuallyDrop::take(&mut this.shared) }
    }
}

impl Drop for Woken {
    fn drop(&mut self) {
        // SAFETY: `drop` runs at most once, and never for a wake-up that
        // `into_shared` used up (it forgets it): the `Arc` is taken once.
        let shared = unsafe { ManuallyDrop::take(&mut self.shared) };
        shared.pass_on(self.wants, |waiter| wake(&shared, waiter));
    }
}

/// Resumes a waiter taken off the list, with a wake-up that holds
/// `shared` (whose holder, a releaser or a fiber passing a wake-up on,
/// holds it strongly): `true` if it reached the fiber, `false` if the
/// fiber's cancellation claimed its suspension first (the wake-up is then
/// used up here, and the caller passes it on: `permits.rs`). Called without
/// the list's lock.
fn wake(shared: &Arc<Shared>, waiter: Waiter) -> bool {
    let woken = Woken {
        shared: ManuallyDrop::new(shared.clone()),
        wants: waiter.wants,
    };
    let Err(given_back) = waiter.callback.complete_or_give_back(Ok(Value::new(woken))) else {
        return true;
    };
    let (Ok(value) | Err(value)) = given_back;
    // SAFETY: the value was made just above from a `Woken`.
    let woken = unsafe { value.take::<Woken>() };
    drop(woken.into_shared());
    false
}

/// The permits and the waiters (`permits.rs`: a free permit is taken, and
/// a permit given back with nobody waiting, without a lock).
type Shared = Permits<Waiter>;

/// The releases, on the semaphore's `Arc`: a release that wakes a waiter
/// hands it a strong reference (`wake`).
trait Releases {
    fn release_one(&self) -> Result<(), Overflow>;
    fn release_many(&self, n: usize) -> Result<(), Overflow>;
    fn give_back(&self, n: usize);
}

impl Releases for Arc<Shared> {
    /// Gives one permit back, waking the first waiter.
    #[inline]
    fn release_one(&self) -> Result<(), Overflow> {
        self.release(1, |waiter| wake(self, waiter))
    }

    /// Gives `n` permits back, waking the waiters they cover, in arrival
    /// order.
    #[inline]
    fn release_many(&self, n: usize) -> Result<(), Overflow> {
        if n == 0 {
            return Ok(());
        }
        self.release(n, |waiter| wake(self, waiter))
    }

    /// Gives back permits that a fiber of this semaphore took (a `with_permit`
    /// ending). They can only overflow the count if releases without an
    /// acquire filled it meanwhile; they are then not added (the count
    /// stays at its largest value), which is documented on
    /// [`Semaphore::release_n`].
    #[inline]
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
    /// (all or nothing, Cats Effect's `acquireN`). Waiters are woken in
    /// arrival order, each once the free permits cover it: a waiter for
    /// many permits is not overtaken by later waiters for fewer (but fibers
    /// that arrive while permits are free take them, module doc). Canceling
    /// the wait takes no permit. `acquire_n(0)` takes nothing and never
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

    /// Takes a permit if one is free (`true`), without waiting, whether or
    /// not fibers wait: it agrees with [`Semaphore::available`].
    #[track_caller]
    pub fn try_acquire<E: Send + 'static>(&self) -> IO<bool, E> {
        let shared = self.shared.clone();
        IO::delay_at::<Named<TryAcquire>, _>(here(), move || shared.try_take())
    }

    /// Takes `n` permits if that many are free (`true`), without waiting,
    /// whether or not fibers wait; all or nothing. `try_acquire_n(0)` is
    /// `true`.
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
        Semaphore::wait_for(shared, n, None).map_untraced(drop)
    }

    /// `acquire` of one permit when it may have to wait, producing the
    /// strong reference to the semaphore that its wake-up handed over
    /// (module doc, "Waiters nobody can wake"), for the release. The wait
    /// is cancelable where `poll` (of the caller's masked region) unmasks;
    /// the result is returned masked: the caller installs the release
    /// before it unmasks.
    fn acquire_slow_held<E: Send + 'static>(shared: Arc<Shared>, poll: Poll) -> IO<Arc<Shared>, E> {
        Semaphore::wait_for(shared, 1, Some(poll))
    }

    /// Waits until `n` permits (at least 1) can be taken, and takes them:
    /// one suspension (under `poll`, if given), whose registration lists a
    /// waiter (or resumes it at once, if the permits are free for it) and
    /// whose cleanup leaves the list; resumed with a wake-up, it takes the
    /// permits in the step that receives it (`Permits::retry`), or waits
    /// again if a fiber that ran first took them. While it waits, only its
    /// cleanup refers to the semaphore, and weakly (`wait/cell.rs`, "Waits
    /// nobody can end"): a semaphore nobody else can reach is freed with
    /// its waiters. Produces the semaphore, held strongly.
    fn wait_for<E: Send + 'static>(
        shared: Arc<Shared>,
        n: usize,
        poll: Option<Poll>,
    ) -> IO<Arc<Shared>, E> {
        let wait: IO<Woken, E> = IO::from_callback_untraced(move |cb: Callback<Woken, E>| {
            let waiter = Waiter {
                callback: cb.into_raw(),
                wants: n,
            };
            let registered = shared.queue().register(waiter);
            match registered {
                Registered::Listed(id) => {
                    // `shared` is let go here: the waiter is held by the
                    // list, the list only by the semaphore's other holders.
                    Some(cleanup_weakly(shared, move |shared| {
                        let left = shared.leave(id, |waiter| wake(shared, waiter));
                        drop(left);
                    }))
                }
                // Free for it now: retry at once (counted as woken).
                Registered::Now(waiter) => {
                    if !wake(&shared, waiter) {
                        shared.pass_on(n, |waiter| wake(&shared, waiter));
                    }
                    None
                }
            }
        });
        let wait = match poll {
            Some(poll) => poll.apply_untraced(wait),
            None => wait,
        };
        wait.flat_map_untraced(move |woken| {
            let shared = woken.into_shared();
            if shared.retry(n, |waiter| wake(&shared, waiter)) {
                IO::pure(shared)
            } else {
                // Overtaken by a fiber that ran first: wait again.
                Semaphore::wait_for(shared, n, poll)
            }
        })
    }

    /// Returns a permit (to the count), waking the first waiter.
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

    /// Returns `n` permits at once (to the count), waking the waiters they
    /// cover, in arrival order.
    ///
    /// `Err(PermitOverflow)`, with nothing released, if the free permits
    /// would pass [`Semaphore::MAX_PERMITS`]. Permits that a `with_permit`
    /// or a [`Semaphore::permit`] give back can only overflow if such releases filled the count meanwhile;
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
    /// One `Acquire` node (`IO::acquire_at`): when it runs, a free permit
    /// is taken (one compare-and-swap) and its release installed as a
    /// `Release` frame in the same step (`fiber/run_loop.rs`), so no
    /// cancellation comes between the permit and its release, `io` runs
    /// with the caller's cancelability, unmasked or masked, and the
    /// release (one compare-and-swap while nobody waits) runs once when
    /// `io` ends, whatever the outcome, without a program of its own.
    /// Otherwise the node runs the general path: the wait is a masked
    /// region whose `poll` lets cancellation end it, and the retry that
    /// takes the permit guards `io` with its release
    /// ([`Semaphore::wait_holding`]).
    pub(crate) fn with_permit_at<M: OpMeta, A: Send + 'static, E: Send + 'static>(
        &self,
        site: Option<Site>,
        io: IO<A, E>,
    ) -> IO<A, E> {
        let shared = self.shared.clone();
        io.acquire_at::<M, _>(site, move |io| {
            if shared.try_take() {
                return Ok((io, Releaser::new(move || shared.give_back(1))));
            }
            Err(Semaphore::wait_holding::<Internal, _, _, _, _>(
                shared,
                NO_SITE,
                (),
                move |()| io,
            ))
        })
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
            Semaphore::wait_holding::<L, _, _, _, _>(shared, lock_site, value, f)
        })
    }

    /// The program `f` builds from `value`, run holding a permit that is
    /// waited for first: the wait is a masked region whose `poll` lets
    /// cancellation end it, and the retry that takes the permit guards
    /// `f`'s program with its release (recorded as `L` at `lock_site`)
    /// before the region unmasks.
    fn wait_holding<L, A, B, E, F>(
        shared: Arc<Shared>,
        lock_site: Option<Site>,
        value: A,
        f: F,
    ) -> IO<B, E>
    where
        L: OpMeta,
        A: Send + 'static,
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&A) -> IO<B, E> + Send + 'static,
    {
        IO::uncancelable_untraced(move |poll| {
            // Weakly while it waits, strongly once woken: the wake-up
            // hands this fiber the semaphore, so that it gives the
            // permit on to the fibers listed behind it even if every
            // other handle is gone by then (module doc).
            Semaphore::acquire_slow_held(shared, poll).flat_map_untraced(move |held| {
                let used = Semaphore::build_holding(&held, &value, f);
                Semaphore::holding_at::<L, _, _>(lock_site, held, poll.apply_untraced(used))
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
    /// has captured: a holder gives the permit on to the fibers listed
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
