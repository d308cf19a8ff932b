//! Cancellation, masking and resource safety: `uncancelable` and `Poll`,
//! `canceled`, `on_cancel`, `guarantee`, `guarantee_case`, the `bracket`
//! family, and `start`.
//!
//! The semantics are Cats Effect 3's `MonadCancel` and `GenSpawn`:
//!
//! * Inside `uncancelable(|poll| body)` cancellation is not observed, except
//!   within `poll.apply(io)`. A poll unmasks only if it belongs to the
//!   innermost region: polls carry the depth of the region that made them,
//!   so an outer region's poll used inside an inner region does nothing.
//! * Finalizers (`on_cancel`, `guarantee_case`, a bracket's release) run
//!   masked, exactly once, in reverse order of installation.
//! * Where Spindle differs: a Rust panic is not an error value. It runs the
//!   `guarantee_case` finalizers (and so bracket releases) with
//!   `Outcome::Panicked`, but not `on_cancel` finalizers, and ends the fiber
//!   with `Outcome::Panicked`. And an `IO` is single-use, so the bracket's
//!   `use` step borrows the resource (`&R`) to build its program while the
//!   release takes it by value.
//! * A finalizer's own error replaces a success (as in Cats Effect); when
//!   the program was already failing, canceled or panicking it cannot, so it
//!   is *suppressed*: kept with the fiber's outcome
//!   ([`FiberHandle::suppressed_errors`](crate::FiberHandle::suppressed_errors),
//!   [`Fiber::with_suppressed`](crate::Fiber::with_suppressed)), never lost,
//!   and the remaining finalizers still run.

use core::marker::PhantomData;

use crate::erased::{Adapter, ErasedFn, Value};
use crate::fiber::handle::FiberHandle;
use crate::fiber::{Spawner, typed_outcome};
use crate::io::IO;
use crate::node::{GuaranteeK, Node};
use crate::outcome::Outcome;

/// Unmasks a program inside the `uncancelable` region that made it.
///
/// See [`IO::uncancelable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    depth: u32,
}

impl Poll {
    /// Makes `io` cancelable again, if this poll belongs to the innermost
    /// uncancelable region around it; otherwise runs `io` as it is.
    pub fn apply<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E> {
        IO::from_node(Node::poll(io.into_node(), self.depth))
    }
}

mod k {
    use super::*;

    pub(super) struct Uncancelable<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F: FnOnce(Poll) -> IO<A, E>> Adapter<u32, Node, F> for Uncancelable<A, E> {
        unsafe fn call(f: F, depth: u32) -> Node {
            f(Poll { depth }).into_node()
        }
    }

    pub(super) struct Thunk<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F: FnOnce() -> IO<A, E>> Adapter<(), Node, F> for Thunk<A, E> {
        unsafe fn call(f: F, _: ()) -> Node {
            f().into_node()
        }
    }

    pub(super) struct Guarantee<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F> Adapter<Outcome<Value, Value>, (Node, Outcome<Value, Value>), F> for Guarantee<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&Outcome<A, E>) -> IO<(), E>,
    {
        unsafe fn call(f: F, outcome: Outcome<Value, Value>) -> (Node, Outcome<Value, Value>) {
            // SAFETY: the finalizer's source is an `IO<A, E>`.
            let outcome = unsafe { typed_outcome::<A, E>(outcome) };
            let finalizer = f(&outcome).into_node();
            let outcome = match outcome {
                Outcome::Succeeded(a) => Outcome::Succeeded(Value::new(a)),
                Outcome::Errored(e) => Outcome::Errored(Value::new(e)),
                Outcome::Canceled => Outcome::Canceled,
                Outcome::Panicked(p) => Outcome::Panicked(p),
            };
            (finalizer, outcome)
        }
    }

    /// A `Start` node's closure that starts any number of children with the
    /// spawner and produces a `T` (handles to them).
    pub(crate) struct WithSpawner<T>(PhantomData<fn() -> T>);
    impl<T, F> Adapter<Spawner, Value, F> for WithSpawner<T>
    where
        T: Send + 'static,
        F: FnOnce(Spawner) -> T,
    {
        unsafe fn call(f: F, spawner: Spawner) -> Value {
            Value::new(f(spawner))
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Runs the program `body` builds with cancellation masked, except
    /// inside `poll.apply(..)`.
    ///
    /// ```
    /// use io_core::IO;
    /// use exec_single::SingleThreaded;
    ///
    /// // A self-cancel inside an uncancelable region is observed when the
    /// // region ends: the rest of the region runs, what follows does not.
    /// let io: IO<u32, ()> = IO::uncancelable(|_poll| IO::canceled().as_(1))
    ///     .flat_map(|x| IO::pure(x + 1));
    /// assert!(SingleThreaded::new().block_on(io).is_canceled());
    /// ```
    pub fn uncancelable<F>(body: F) -> IO<A, E>
    where
        F: FnOnce(Poll) -> IO<A, E> + Send + 'static,
    {
        IO::from_node(Node::uncancelable(
            ErasedFn::new::<k::Uncancelable<A, E>, F>(body),
        ))
    }

    /// Runs `finalizer` (masked) if the fiber is canceled while `self` runs.
    pub fn on_cancel(self, finalizer: IO<(), E>) -> IO<A, E> {
        IO::from_node(Node::on_cancel(
            self.into_node(),
            ErasedFn::new::<k::Thunk<(), E>, _>(move || finalizer),
        ))
    }

    /// Runs the program `finalizer` builds from the outcome of `self`
    /// (masked, exactly once), whatever the outcome: success, error,
    /// cancellation or panic.
    pub fn guarantee_case<F>(self, finalizer: F) -> IO<A, E>
    where
        F: FnOnce(&Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        let finalizer: GuaranteeK = ErasedFn::new::<k::Guarantee<A, E>, F>(finalizer);
        IO::from_node(Node::guarantee_case(self.into_node(), finalizer))
    }

    /// Runs `finalizer` (masked, exactly once) after `self`, whatever its
    /// outcome.
    pub fn guarantee(self, finalizer: IO<(), E>) -> IO<A, E> {
        self.guarantee_case(move |_| finalizer)
    }

    /// Acquires a resource, uses it, and releases it whatever the outcome of
    /// the use (success, error, cancellation, panic). Acquisition and
    /// release are masked; the use is cancelable.
    ///
    /// ```
    /// use io_core::IO;
    /// use exec_single::SingleThreaded;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let (l1, l2) = (log.clone(), log.clone());
    /// let io: IO<usize, String> = IO::bracket(
    ///     IO::delay(move || { l1.lock().unwrap().push("open"); 42usize }),
    ///     |fd: &usize| IO::raise_error(format!("read {fd} failed")),
    ///     move |_fd| IO::delay(move || l2.lock().unwrap().push("close")),
    /// );
    /// assert!(SingleThreaded::new().block_on(io).is_errored());
    /// assert_eq!(*log.lock().unwrap(), ["open", "close"]);
    /// ```
    pub fn bracket<R, U, Rel>(acquire: IO<R, E>, use_: U, release: Rel) -> IO<A, E>
    where
        R: Send + 'static,
        U: FnOnce(&R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R) -> IO<(), E> + Send + 'static,
    {
        IO::bracket_case(acquire, use_, move |r, _| release(r))
    }

    /// [`bracket`](IO::bracket) whose release also sees the use's outcome.
    pub fn bracket_case<R, U, Rel>(acquire: IO<R, E>, use_: U, release: Rel) -> IO<A, E>
    where
        R: Send + 'static,
        U: FnOnce(&R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R, &Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        IO::bracket_full(move |_| acquire, use_, release)
    }

    /// The general bracket: `acquire` gets a [`Poll`], so that a blocking
    /// acquisition (waiting for a lock, say) can be canceled.
    pub fn bracket_full<R, Acq, U, Rel>(acquire: Acq, use_: U, release: Rel) -> IO<A, E>
    where
        R: Send + 'static,
        Acq: FnOnce(Poll) -> IO<R, E> + Send + 'static,
        U: FnOnce(&R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R, &Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        IO::uncancelable(move |poll| {
            acquire(poll).flat_map(move |resource| {
                let used = use_(&resource);
                poll.apply(used)
                    .guarantee_case(move |outcome| release(resource, outcome))
            })
        })
    }

    /// Starts `self` on a new fiber of the same executor; returns its handle
    /// at once.
    pub fn start<E2: Send + 'static>(self) -> IO<FiberHandle<A, E>, E2> {
        IO::with_spawner(move |spawner| {
            let child = spawner.spawn(self.into_node(), None);
            // SAFETY: the child runs `self`, an `IO<A, E>`, without a
            // completion callback (its outcome goes to its join state).
            unsafe { FiberHandle::from_fiber(child) }
        })
    }

    /// Starts children on the current fiber's executor in one step: `f`
    /// receives the spawner and returns what the program produces (for
    /// combinators that start many fibers, such as `par_sequence`).
    pub(crate) fn with_spawner<F>(f: F) -> IO<A, E>
    where
        F: FnOnce(Spawner) -> A + Send + 'static,
    {
        IO::from_node(Node::start(ErasedFn::new::<k::WithSpawner<A>, _>(f)))
    }
}

impl<E: Send + 'static> IO<(), E> {
    /// Requests the cancellation of the current fiber. Observed at once
    /// outside uncancelable regions, at the end of the region inside one.
    pub fn canceled() -> IO<(), E> {
        IO::from_node(Node::canceled())
    }
}
