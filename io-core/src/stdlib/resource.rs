//! `Resource`: acquisition and release composed as a value (Cats Effect's
//! `Resource`).
//!
//! A `Resource<A, E>` is a program that *allocates*: it produces the value
//! and the function that releases it. [`Resource::use_with`] allocates masked,
//! runs the user's program (cancelable) with a clone of the value, and
//! releases whatever the outcome. Composition (`flat_map`) releases in
//! reverse order of acquisition; a release that fails does not stop the
//! releases after it (each is chained with `guarantee`), and its error is
//! the result (or suppressed, if the program was already failing).
//!
//! Where Spindle differs from Cats Effect, and why:
//! * A resource is used once, like an `IO` (programs are single-use values
//!   in Spindle). The release owns the value; the user's program gets a
//!   clone of it (`use_with`, `flat_map`: `A: Clone`, a cheap handle such
//!   as a socket, a supervisor, an `Arc`), which the `'static` program it
//!   builds may keep, where Cats Effect shares one reference. For a value
//!   that is not `Clone`, `use_ref` and `flat_map_ref` lend it (`&A`)
//!   while the program is built. `map` computes a value, so it borrows.
//! * `both` acquires left then right (not concurrently): acquisition runs
//!   masked, so concurrency would only help acquisitions that wait, and it
//!   keeps the release order obvious (right, then left).
//!   [`Resource::par_zip`] acquires concurrently, for acquisitions that
//!   wait (module `par`).

use alloc::boxed::Box;

mod par;

use crate::combinators::monad_cancel::Poll;
use crate::engine::tracing::{Named, Op, OpMeta, Site, WithClosure, here};
use crate::fiber::handle::FiberHandle;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::stdlib::data::mutex::Lock;
use crate::stdlib::data::semaphore::Semaphore;
use crate::sync::{Arc, Mutex};

// The operations as traces name them. A resource's own operations
// (`Resource::make`, `Resource::map`, `Mutex::lock`, ...) are recorded when
// it allocates, at the call that made it.
crate::engine::tracing::trace_ops! {
    Make = "Resource::make",
    MakeCase = "Resource::make_case",
    MakeFull = "Resource::make_full",
    Pure = "Resource::pure",
    Eval = "Resource::eval",
    UseWith = "Resource::use_with",
    UseRef = "Resource::use_ref",
    AllocatedOp = "Resource::allocated",
    Map = "Resource::map",
    FlatMap = "Resource::flat_map",
    FlatMapRef = "Resource::flat_map_ref",
    Both = "Resource::both",
    Background = "background",
}
static RELEASE: Op = Op::new("Allocated::release");
static RELEASE_CASE: Op = Op::new("Allocated::release_case");

/// How the use of a resource ended, as its release sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCase {
    /// The use produced a value.
    Succeeded,
    /// The use failed with an error.
    Errored,
    /// The fiber was canceled.
    Canceled,
    /// The use panicked.
    Panicked,
}

impl ExitCase {
    /// The exit case of an outcome.
    pub fn of<A, E>(outcome: &Outcome<A, E>) -> ExitCase {
        match outcome {
            Outcome::Succeeded(_) => ExitCase::Succeeded,
            Outcome::Errored(_) => ExitCase::Errored,
            Outcome::Canceled => ExitCase::Canceled,
            Outcome::Panicked(_) => ExitCase::Panicked,
        }
    }
}

type Releaser<A, E> = Box<dyn FnOnce(A, ExitCase) -> IO<(), E> + Send>;

/// A value with the program that releases it: what allocation produces.
pub struct Allocated<A, E> {
    value: A,
    release: Releaser<A, E>,
}

impl<A: Send + 'static, E: Send + 'static> Allocated<A, E> {
    /// The allocated value.
    pub fn value(&self) -> &A {
        &self.value
    }

    /// The program that releases the value (as after a successful use).
    #[track_caller]
    pub fn release(self) -> IO<(), E> {
        self.release_case_untraced(ExitCase::Succeeded)
            .traced_as(&RELEASE)
    }

    /// The program that releases the value, telling it how the use ended.
    #[track_caller]
    pub fn release_case(self, exit: ExitCase) -> IO<(), E> {
        self.release_case_untraced(exit).traced_as(&RELEASE_CASE)
    }

    /// [`Allocated::release_case`] for io-core's own nodes (no trace event
    /// of its own).
    fn release_case_untraced(self, exit: ExitCase) -> IO<(), E> {
        (self.release)(self.value, exit)
    }
}

/// A resource: acquisition and release as one value.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Resource, wstp::Runtime};
/// use std::sync::{Arc, Mutex};
///
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let open = |name: &'static str, log: Arc<Mutex<Vec<String>>>| {
///     let l = log.clone();
///     Resource::make(
///         IO::delay(move || { l.lock().unwrap().push(format!("open {name}")); name }),
///         move |name| IO::delay(move || log.lock().unwrap().push(format!("close {name}"))),
///     )
/// };
/// let (l1, l2) = (log.clone(), log.clone());
/// let both: Resource<(&str, &str), ()> =
///     open("a", l1).flat_map(move |a| open("b", l2).map(move |b| (a, *b)));
/// // The program owns its copy of the value.
/// let io = both.use_with(|(a, b)| IO::delay(move || format!("{a}{b}")));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some("ab".to_string()));
/// assert_eq!(*log.lock().unwrap(), ["open a", "open b", "close b", "close a"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
///
/// A `Resource<A, E>` is a program that *allocates*: it produces the value
/// and the function that releases it. [`Resource::use_with`] allocates masked,
/// runs the user's program (cancelable) with a clone of the value, and
/// releases whatever the outcome. Composition (`flat_map`) releases in
/// reverse order of acquisition; a release that fails does not stop the
/// releases after it (each is chained with `guarantee`), and its error is
/// the result (or suppressed, if the program was already failing).
///
/// Where Spindle differs from Cats Effect, and why:
/// * A resource is used once, like an `IO` (programs are single-use values
///   in Spindle). The release owns the value; the user's program gets a
///   clone of it ([`use_with`](Resource::use_with),
///   [`flat_map`](Resource::flat_map): `A: Clone`), which the `'static`
///   program it builds may keep. For a value that is not `Clone`,
///   [`use_ref`](Resource::use_ref) and
///   [`flat_map_ref`](Resource::flat_map_ref) lend it (`&A`) while the
///   program is built. [`map`](Resource::map) computes a value, so it
///   borrows.
/// * `both` acquires left then right (not concurrently): acquisition runs
///   masked, so concurrency would only help acquisitions that wait, and it
///   keeps the release order obvious (right, then left).
///   [`par_zip`](Resource::par_zip) acquires concurrently, for acquisitions
///   that wait.
pub struct Resource<A, E> {
    repr: Repr<A, E>,
}

/// How a resource allocates.
enum Repr<A, E> {
    /// Allocates, inside the masked region of `use_with` (or `allocated`),
    /// given that region's poll: a cancelable acquisition (`make_full`)
    /// polls with it, so that canceling the user of the resource ends the
    /// wait. Every resource but a lock.
    Allocate(Allocate<A, E>),
    /// [`Mutex::lock`](crate::Mutex::lock): the mutex's permit, held for the
    /// scope, with the value the scope sees (`()`), made at `site`.
    /// `use_with` takes a free permit and installs its release in one step
    /// (`Semaphore::use_permit_at`), without an `Allocated`, a boxed
    /// releaser or a masked region; composed (`map`, `flat_map`, `both`,
    /// `allocated`), it allocates as `make_full` would.
    Lock {
        permit: Semaphore,
        value: A,
        site: Option<Site>,
    },
}

/// How a resource allocates, given the poll of the region it runs in.
type Allocate<A, E> = Box<dyn FnOnce(Poll) -> IO<Allocated<A, E>, E> + Send>;

impl<E: Send + 'static> Resource<(), E> {
    /// The lock of `permit`, a one-permit semaphore, as a resource (what
    /// [`Mutex::lock`](crate::Mutex::lock) returns), made at `site`.
    pub(crate) fn lock_at(site: Option<Site>, permit: Semaphore) -> Self {
        Resource {
            repr: Repr::Lock {
                permit,
                value: (),
                site,
            },
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> Resource<A, E> {
    /// A resource that allocates with `allocate`; its allocation is
    /// recorded as the operation `M` at `site` (the call that made the
    /// resource: resources are values, built before they allocate).
    fn from_fn_at<M: OpMeta, F>(site: Option<Site>, allocate: F) -> Self
    where
        F: FnOnce(Poll) -> IO<Allocated<A, E>, E> + Send + 'static,
    {
        Resource {
            repr: Repr::Allocate(allocate_at::<M, _, _, _>(site, allocate)),
        }
    }

    /// How the resource allocates (a lock as `make_full` would: `poll`ed
    /// acquire, release).
    fn into_allocate(self) -> Allocate<A, E> {
        match self.repr {
            Repr::Allocate(allocate) => allocate,
            Repr::Lock {
                permit,
                value,
                site,
            } => {
                // The release holds the semaphore that the acquisition hands
                // over, not a handle captured while it waits: a fiber waiting
                // for a lock nobody else can reach is freed with it
                // (`wait/list.rs`, "Holding what one waits on").
                allocate_at::<Named<Lock>, _, _, _>(site, move |poll| {
                    permit
                        .acquire_held_untraced(poll)
                        .map_untraced(move |held: Semaphore| Allocated {
                            value,
                            release: Box::new(move |_, _| held.release_untraced()),
                        })
                })
            }
        }
    }

    /// A resource acquired by `acquire` and released by `release`.
    #[track_caller]
    pub fn make<R>(acquire: IO<A, E>, release: R) -> Self
    where
        R: FnOnce(A) -> IO<(), E> + Send + 'static,
    {
        Resource::make_full_at::<Named<Make>, _, _>(
            here(),
            move |_| acquire,
            move |a, _| release(a),
        )
    }

    /// A resource whose release also sees how the use ended.
    #[track_caller]
    pub fn make_case<R>(acquire: IO<A, E>, release: R) -> Self
    where
        R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
    {
        Resource::make_full_at::<Named<MakeCase>, _, _>(here(), move |_| acquire, release)
    }

    /// A resource whose acquisition may be canceled where it polls (for
    /// instance while it waits for a permit): the poll is that of the
    /// masked region `use_with` runs the acquisition in.
    #[track_caller]
    pub fn make_full<Acq, R>(acquire: Acq, release: R) -> Self
    where
        Acq: FnOnce(Poll) -> IO<A, E> + Send + 'static,
        R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
    {
        Resource::make_full_at::<Named<MakeFull>, _, _>(here(), acquire, release)
    }

    /// [`Resource::make_full`] recorded as the operation `M` at `site`.
    pub(crate) fn make_full_at<M: OpMeta, Acq, R>(
        site: Option<Site>,
        acquire: Acq,
        release: R,
    ) -> Self
    where
        Acq: FnOnce(Poll) -> IO<A, E> + Send + 'static,
        R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
    {
        Resource {
            repr: Repr::Allocate(make_full_allocate_at::<M, _, _, _, _>(
                site, acquire, release,
            )),
        }
    }

    /// A value without release.
    #[track_caller]
    pub fn pure(value: A) -> Self {
        Resource::make_full_at::<Named<Pure>, _, _>(
            here(),
            move |_| IO::pure(value),
            |_, _| IO::unit(),
        )
    }

    /// The value of a program, without release.
    #[track_caller]
    pub fn eval(io: IO<A, E>) -> Self {
        Resource::make_full_at::<Named<Eval>, _, _>(here(), move |_| io, |_, _| IO::unit())
    }

    /// Allocates, runs the program `f` builds from the value, and releases
    /// whatever the outcome (Cats Effect's `use`). Allocation and release
    /// are masked (except where a `make_full` acquisition polls); the
    /// program is cancelable.
    ///
    /// `f` gets a clone of the value (the release keeps the value itself),
    /// so the program it builds may keep it, in closures and in the fibers
    /// it starts; for a value that is not `Clone`, see
    /// [`use_ref`](Resource::use_ref).
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Resource, Supervisor, wstp::Runtime};
    ///
    /// let io: IO<u32, ()> = Supervisor::scoped().use_with(|supervisor| {
    ///     // The supervisor is owned here: the closures below keep it.
    ///     supervisor
    ///         .supervise(IO::delay(|| 20))
    ///         .flat_map(move |first| supervisor.supervise(IO::pure(22)).map(move |second| (first, second)))
    ///         .flat_map(|(first, second)| first.join_with_never().both(second.join_with_never()))
    ///         .map(|(a, b)| a + b)
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.ok(), Some(42));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn use_with<B, F>(self, f: F) -> IO<B, E>
    where
        A: Clone,
        B: Send + 'static,
        F: FnOnce(A) -> IO<B, E> + Send + 'static,
    {
        self.use_at::<WithClosure<UseWith, F>, _, _>(here(), move |a: &A| f(a.clone()))
    }

    /// [`use_with`](Resource::use_with) that lends the value to `f`
    /// (`&A`) instead of cloning it, for values that are not `Clone`: the
    /// borrow ends when the program is built, so read what the program
    /// needs first and move that into it.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Resource, wstp::Runtime};
    ///
    /// // A buffer that is not `Clone`.
    /// struct Buffer(Vec<u8>);
    /// let buffer: Resource<Buffer, ()> =
    ///     Resource::make(IO::delay(|| Buffer(vec![1, 2, 3])), |_| IO::unit());
    /// let io = buffer.use_ref(|b| {
    ///     let len = b.0.len();
    ///     IO::delay(move || len * 2)
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.ok(), Some(6));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn use_ref<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> IO<B, E> + Send + 'static,
    {
        self.use_at::<WithClosure<UseRef, F>, _, _>(here(), f)
    }

    /// `use_ref` recorded as the operation `M` at `site`.
    fn use_at<M: OpMeta, B, F>(self, site: Option<Site>, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> IO<B, E> + Send + 'static,
    {
        let allocate = match self.repr {
            Repr::Allocate(allocate) => allocate,
            Repr::Lock {
                permit,
                value,
                site: lock_site,
            } => {
                return permit
                    .use_permit_at::<M, Named<Lock>, _, _, _, _>(site, lock_site, value, f);
            }
        };
        IO::uncancelable_at::<M, _>(site, move |poll| {
            allocate(poll).flat_map_untraced(move |allocated| {
                let used = f(&allocated.value);
                poll.apply_untraced(used)
                    .guarantee_case_untraced(move |outcome| {
                        allocated.release_case_untraced(ExitCase::of(outcome))
                    })
            })
        })
    }

    /// Allocates without a scope: the caller releases (Cats Effect's
    /// `allocated`). Runs masked, except where a `make_full` acquisition
    /// polls.
    #[track_caller]
    pub fn allocated(self) -> IO<Allocated<A, E>, E> {
        let allocate = self.into_allocate();
        IO::uncancelable_at::<Named<AllocatedOp>, _>(here(), allocate)
    }

    /// Transforms the value; the release still gets the original. `f`
    /// borrows the value to compute the new one (which is `'static`, so
    /// it cannot keep the borrow: clone what it keeps).
    #[track_caller]
    pub fn map<B, F>(self, f: F) -> Resource<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> B + Send + 'static,
    {
        Resource::from_fn_at::<WithClosure<Map, F>, _>(here(), move |poll| {
            (self.into_allocate())(poll).map_untraced(move |allocated| {
                let mapped = f(&allocated.value);
                let Allocated { value, release } = allocated;
                Allocated {
                    value: mapped,
                    release: Box::new(move |_, exit| release(value, exit)),
                }
            })
        })
    }

    /// Acquires the resource `f` builds from the value after this one;
    /// releases it before this one. If its acquisition fails, is canceled or
    /// panics, this one is released.
    ///
    /// `f` gets a clone of the value (this resource's release keeps the
    /// value itself), so the resource it builds may keep it; for a value
    /// that is not `Clone`, see [`flat_map_ref`](Resource::flat_map_ref).
    #[track_caller]
    pub fn flat_map<B, F>(self, f: F) -> Resource<B, E>
    where
        A: Clone,
        B: Send + 'static,
        F: FnOnce(A) -> Resource<B, E> + Send + 'static,
    {
        self.flat_map_at::<WithClosure<FlatMap, F>, _, _>(here(), move |a: &A| f(a.clone()))
    }

    /// [`flat_map`](Resource::flat_map) that lends the value to `f` (`&A`)
    /// instead of cloning it, for values that are not `Clone`: the borrow
    /// ends when the resource is built.
    #[track_caller]
    pub fn flat_map_ref<B, F>(self, f: F) -> Resource<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> Resource<B, E> + Send + 'static,
    {
        self.flat_map_at::<WithClosure<FlatMapRef, F>, _, _>(here(), f)
    }

    /// `flat_map_ref` recorded as the operation `M` at `site`.
    fn flat_map_at<M: OpMeta, B, F>(self, site: Option<Site>, f: F) -> Resource<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> Resource<B, E> + Send + 'static,
    {
        Resource::from_fn_at::<M, _>(site, move |poll| {
            (self.into_allocate())(poll).flat_map_untraced(move |outer| {
                let inner = f(&outer.value);
                nest(poll, outer, inner, |outer, inner| Allocated {
                    value: inner.value,
                    release: Box::new(move |b, exit| {
                        (inner.release)(b, exit)
                            .guarantee_untraced(outer.release_case_untraced(exit))
                    }),
                })
            })
        })
    }

    /// Both resources: `self` acquired first, released last.
    #[track_caller]
    pub fn both<B: Send + 'static>(self, other: Resource<B, E>) -> Resource<(A, B), E> {
        Resource::from_fn_at::<Named<Both>, _>(here(), move |poll| {
            (self.into_allocate())(poll).flat_map_untraced(move |outer| {
                nest(poll, outer, other, |outer, inner| Allocated {
                    value: (outer.value, inner.value),
                    release: Box::new(move |(a, b), exit| {
                        (inner.release)(b, exit).guarantee_untraced((outer.release)(a, exit))
                    }),
                })
            })
        })
    }
}

/// `allocate` as a resource's allocation, recorded as the operation `M` at
/// `site` (the call that made the resource: resources are values, built
/// before they allocate).
fn allocate_at<M, A, E, F>(site: Option<Site>, allocate: F) -> Allocate<A, E>
where
    M: OpMeta,
    A: Send + 'static,
    E: Send + 'static,
    F: FnOnce(Poll) -> IO<Allocated<A, E>, E> + Send + 'static,
{
    // Without the `tracing` feature there is no site to record, and no
    // node is added for it.
    #[cfg(feature = "tracing")]
    let allocate = move |poll| IO::defer_at::<M, _>(site, move || allocate(poll));
    #[cfg(not(feature = "tracing"))]
    let _ = site;
    Box::new(allocate)
}

/// The allocation of [`Resource::make_full`], recorded as the operation `M`
/// at `site`.
fn make_full_allocate_at<M, A, E, Acq, R>(
    site: Option<Site>,
    acquire: Acq,
    release: R,
) -> Allocate<A, E>
where
    M: OpMeta,
    A: Send + 'static,
    E: Send + 'static,
    Acq: FnOnce(Poll) -> IO<A, E> + Send + 'static,
    R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
{
    allocate_at::<M, _, _, _>(site, move |poll| {
        acquire(poll).map_untraced(move |value| Allocated {
            value,
            release: Box::new(release),
        })
    })
}

/// Allocates `inner` after `outer`, combining the two on success; if the
/// inner allocation fails, is canceled or panics, releases `outer` (with the
/// matching exit case) and ends the same way.
fn nest<A, B, C, E, F>(
    poll: Poll,
    outer: Allocated<A, E>,
    inner: Resource<B, E>,
    combine: F,
) -> IO<Allocated<C, E>, E>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
    E: Send + 'static,
    F: FnOnce(Allocated<A, E>, Allocated<B, E>) -> Allocated<C, E> + Send + 'static,
{
    // The outer allocation is needed by whichever of the two paths runs:
    // a slot hands it to the first (and only) taker.
    let slot = Arc::new(Mutex::new(Some(outer)));
    let on_failure = slot.clone();
    (inner.into_allocate())(poll)
        .guarantee_case_untraced(move |outcome| {
            if outcome.is_succeeded() {
                return IO::unit();
            }
            match on_failure.lock().take() {
                Some(outer) => outer.release_case_untraced(ExitCase::of(outcome)),
                None => IO::unit(),
            }
        })
        .map_untraced(move |inner| {
            let outer = slot
                .lock()
                .take()
                .unwrap_or_else(|| unreachable!("io-core: the outer allocation is taken once"));
            combine(outer, inner)
        })
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Starts `self` on a fiber for the scope of a resource: the fiber is
    /// canceled (and finalized) when the resource is released.
    #[track_caller]
    pub fn background(self) -> Resource<FiberHandle<A, E>, E> {
        Resource::make_full_at::<Named<Background>, _, _>(
            here(),
            move |_| self.start_untraced(),
            |fiber, _| fiber.cancel_untraced(),
        )
    }
}
