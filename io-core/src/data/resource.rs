//! `Resource`: acquisition and release composed as a value (Cats Effect's
//! `Resource`).
//!
//! A `Resource<A, E>` is a program that *allocates*: it produces the value
//! and the function that releases it. [`Resource::use_`] allocates masked,
//! runs the user's program (cancelable) with a reference to the value, and
//! releases whatever the outcome. Composition (`flat_map`) releases in
//! reverse order of acquisition; a release that fails does not stop the
//! releases after it (each is chained with `guarantee`), and its error is
//! the result (or suppressed, if the program was already failing).
//!
//! Where Spindle differs from Cats Effect, and why:
//! * A resource is used once, like an `IO` (programs are single-use values
//!   in Spindle); the user's program borrows the value (`&A`) to build its
//!   program, while the release takes it by value.
//! * `both` acquires left then right (not concurrently): acquisition runs
//!   masked, so concurrency would only help acquisitions that wait, and it
//!   keeps the release order obvious (right, then left).

use alloc::boxed::Box;

use crate::cancel::Poll;
use crate::fiber::handle::FiberHandle;
use crate::io::IO;
use crate::outcome::Outcome;

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
    pub fn release(self) -> IO<(), E> {
        (self.release)(self.value, ExitCase::Succeeded)
    }

    /// The program that releases the value, telling it how the use ended.
    pub fn release_case(self, exit: ExitCase) -> IO<(), E> {
        (self.release)(self.value, exit)
    }
}

/// A resource: acquisition and release as one value.
///
/// ```
/// use io_core::{IO, data::resource::Resource};
/// use exec_single::SingleThreaded;
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
///     open("a", l1).flat_map(move |a| { let a = *a; open("b", l2).map(move |b| (a, *b)) });
/// let io = both.use_(|(a, b)| IO::pure(format!("{a}{b}")));
/// assert_eq!(SingleThreaded::new().block_on(io).succeeded(), Some("ab".to_string()));
/// assert_eq!(*log.lock().unwrap(), ["open a", "open b", "close b", "close a"]);
/// ```
pub struct Resource<A, E> {
    allocate: IO<Allocated<A, E>, E>,
}

impl<A: Send + 'static, E: Send + 'static> Resource<A, E> {
    /// A resource acquired by `acquire` and released by `release`.
    pub fn make<R>(acquire: IO<A, E>, release: R) -> Self
    where
        R: FnOnce(A) -> IO<(), E> + Send + 'static,
    {
        Resource::make_case(acquire, move |a, _| release(a))
    }

    /// A resource whose release also sees how the use ended.
    pub fn make_case<R>(acquire: IO<A, E>, release: R) -> Self
    where
        R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
    {
        Resource {
            allocate: acquire.map(move |value| Allocated {
                value,
                release: Box::new(release),
            }),
        }
    }

    /// A resource whose acquisition may be canceled where it polls (for
    /// instance while it waits for a permit).
    pub fn make_full<Acq, R>(acquire: Acq, release: R) -> Self
    where
        Acq: FnOnce(Poll) -> IO<A, E> + Send + 'static,
        R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
    {
        // `use_` runs the allocation masked; this inner region gives the
        // acquisition a poll of its own.
        Resource::make_case(IO::uncancelable(acquire), release)
    }

    /// A value without release.
    pub fn pure(value: A) -> Self {
        Resource::eval(IO::pure(value))
    }

    /// The value of a program, without release.
    pub fn eval(io: IO<A, E>) -> Self {
        Resource::make_case(io, |_, _| IO::unit())
    }

    /// Allocates, runs the program `f` builds from the value, and releases
    /// whatever the outcome. Allocation and release are masked; the program
    /// is cancelable.
    pub fn use_<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> IO<B, E> + Send + 'static,
    {
        IO::uncancelable(move |poll| {
            self.allocate.flat_map(move |allocated| {
                let used = f(&allocated.value);
                poll.apply(used)
                    .guarantee_case(move |outcome| allocated.release_case(ExitCase::of(outcome)))
            })
        })
    }

    /// Allocates without a scope: the caller releases (Cats Effect's
    /// `allocated`). Runs masked.
    pub fn allocated(self) -> IO<Allocated<A, E>, E> {
        IO::uncancelable(move |_| self.allocate)
    }

    /// Transforms the value; the release still gets the original.
    pub fn map<B, F>(self, f: F) -> Resource<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> B + Send + 'static,
    {
        Resource {
            allocate: self.allocate.map(move |allocated| {
                let mapped = f(&allocated.value);
                let Allocated { value, release } = allocated;
                Allocated {
                    value: mapped,
                    release: Box::new(move |_, exit| release(value, exit)),
                }
            }),
        }
    }

    /// Acquires the resource `f` builds from the value after this one;
    /// releases it before this one. If its acquisition fails, this one is
    /// released.
    pub fn flat_map<B, F>(self, f: F) -> Resource<B, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> Resource<B, E> + Send + 'static,
    {
        Resource {
            allocate: self.allocate.flat_map(move |outer| {
                let inner = f(&outer.value);
                inner
                    .allocate
                    .attempt()
                    .flat_map(move |result| match result {
                        Ok(inner) => {
                            let Allocated { value, release } = inner;
                            IO::pure(Allocated {
                                value,
                                release: Box::new(move |b, exit| {
                                    release(b, exit).guarantee(outer.release_case(exit))
                                }),
                            })
                        }
                        Err(e) => outer
                            .release_case(ExitCase::Errored)
                            .product_r(IO::raise_error(e)),
                    })
            }),
        }
    }

    /// Both resources: `self` acquired first, released last.
    pub fn both<B: Send + 'static>(self, other: Resource<B, E>) -> Resource<(A, B), E> {
        Resource {
            allocate: self.allocate.flat_map(move |outer| {
                other
                    .allocate
                    .attempt()
                    .flat_map(move |result| match result {
                        Ok(inner) => IO::pure(Allocated {
                            value: (outer.value, inner.value),
                            release: Box::new(move |(a, b), exit| {
                                (inner.release)(b, exit).guarantee((outer.release)(a, exit))
                            }),
                        }),
                        Err(e) => outer
                            .release_case(ExitCase::Errored)
                            .product_r(IO::raise_error(e)),
                    })
            }),
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Starts `self` on a fiber for the scope of a resource: the fiber is
    /// canceled (and finalized) when the resource is released.
    pub fn background(self) -> Resource<FiberHandle<A, E>, E> {
        Resource::make(self.start(), |fiber| fiber.cancel())
    }
}
