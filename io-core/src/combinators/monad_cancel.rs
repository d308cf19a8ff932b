//! Cancellation, masking and resource safety: `uncancelable` and `Poll`,
//! `canceled`, `on_cancel`, `guarantee`, `guarantee_case`, the `bracket`
//! family, and `start`.
//!
//! The semantics are Cats Effect 3's `MonadCancel` and `GenSpawn`:
//!
//! * Inside `uncancelable(|poll| body)` cancellation is not observed, except
//!   within `poll.apply(io)`. A poll unmasks only where it belongs (see
//!   below); anywhere else `poll.apply(io)` is `io`, unchanged.
//! * Finalizers (`on_cancel`, `guarantee_case`, a bracket's release) run
//!   masked, exactly once, in reverse order of installation.
//! * Where Spindle differs: a Rust panic is not an error value. It runs the
//!   `guarantee_case` finalizers (and so bracket releases) with
//!   `Outcome::Panicked`, but not `on_cancel` finalizers, and ends the fiber
//!   with `Outcome::Panicked`.
//! * Ownership: the closures that build programs get owned values, so the
//!   programs they build (which are `'static`) may keep them. The
//!   bracket's `use` step gets a clone of the resource (`R: Clone`; the
//!   release takes the resource itself), and `guarantee_case` and
//!   `bracket_case`'s release a clone of the outcome (`A: Clone`,
//!   `E: Clone`; the outcome itself goes on). For values that are not
//!   `Clone` (`std::io::Error`, a file), or costly to clone, the `_ref`
//!   forms lend them instead (`guarantee_case_ref`, `bracket_full_ref`):
//!   read what the program needs before building it.
//! * And a wait that *resumes* inside `poll.apply(..)` while a cancellation
//!   is pending does not hand its value on: the fiber is canceled right
//!   there, at the resumption. In Cats Effect the value may pass the end of
//!   the poll and of the region first. Spindle's data types rely on it to
//!   lose nothing: a `Queue` taker or offerer and a `Semaphore`/`Mutex`
//!   waiter canceled between being woken and running again drop the
//!   wake-up they resumed with, which wakes the next waiter (the element,
//!   place or permit stayed in the data type), and a `Deferred` reader
//!   takes nothing; where Cats Effect's `Queue.take` can drop the element
//!   in that window (tests-integration's `data_queue`,
//!   `an_element_offered_to_a_waiting_taker_that_is_then_canceled_is_not_lost`).
//! * A finalizer's own error replaces a success (as in Cats Effect); when
//!   the program was already failing, canceled or panicking it cannot, so it
//!   is *suppressed*: kept with the fiber's outcome
//!   ([`FiberHandle::suppressed_errors`](crate::FiberHandle::suppressed_errors),
//!   [`Fiber::with_suppressed`](crate::Fiber::with_suppressed)), never lost,
//!   and the remaining finalizers still run.
//!
//! # Where a poll belongs
//!
//! A [`Poll`] belongs to the fiber that made it and to the mask depth its
//! region was entered at (the design of Cats Effect's `IOFiber`, whose
//! polls carry the region's mask count and the fiber itself). It is a
//! `Copy` value that user code may keep, hand to a child, send to another
//! fiber through a `Deferred`, or apply after its region has ended; so the
//! run-loop checks, when a `poll.apply(io)` node runs, that both hold:
//!
//! 1. *The fiber is the poll's.* Each fiber takes a number when it first
//!    enters a region (`Core::poll_owner`: a process-wide counter, so no
//!    two fibers, living or finished, share one until it wraps, which
//!    takes 2^32 fibers with regions on a 32-bit target and never happens
//!    on a 64-bit one), and its polls carry it.
//!    A poll of the parent applied inside a child's region, or of any other
//!    fiber, leaves the region masked: a region is masked for its own
//!    fiber, and no other fiber can lift that.
//! 2. *The depth is the current one.* The poll carries the depth of its
//!    region; inside a nested region the depth is greater, so an outer
//!    region's poll does nothing there, and the inner region stays masked.
//!    Once the inner region has ended (or inside the inner region's own
//!    poll, which brings the depth back), the outer poll unmasks again.
//!
//! A matching poll unmasks one level (`masks - 1`, a `Remask` frame to
//! restore it); a poll that does not match adds nothing, not even a frame.
//! Neither check can be done when the poll is made or applied as a value
//! (`Poll::apply` only builds a node): only the run-loop knows which fiber
//! runs the node, and at which depth.

use core::marker::PhantomData;

use crate::engine::erased::{Adapter, ErasedFn, Value};
use crate::engine::node::{AcquireK, GuaranteeK, Node};
use crate::engine::tracing::{
    Internal, NO_SITE, Named, Op, OpMeta, Site, WithClosure, here, names,
};
use crate::fiber::handle::FiberHandle;
use crate::fiber::{Spawner, typed_outcome};
use crate::io::IO;
use crate::outcome::Outcome;

// The borrowing forms as traces name them.
crate::engine::tracing::trace_ops! {
    GuaranteeCaseRef = "guarantee_case_ref",
}

/// Unmasks a program inside the `uncancelable` region that made it.
///
/// A poll belongs to the fiber that made it and to its region's mask depth
/// (see [`IO::uncancelable`]): applied on another fiber, or inside a
/// region nested in its own, it runs its program as it is, still masked.
///
/// See [`IO::uncancelable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// The number of the fiber that made the poll (`Core::poll_owner`;
    /// never 0).
    owner: usize,
    /// The mask depth of its region (1 for the outermost).
    depth: u32,
}

impl Poll {
    /// The poll of a region entered at mask depth `depth` by the fiber
    /// numbered `owner` (the run-loop's `Uncancelable` step).
    #[inline(always)]
    pub(crate) fn new(owner: usize, depth: u32) -> Poll {
        Poll { owner, depth }
    }

    /// Whether this poll unmasks on the fiber numbered `owner`, now at mask
    /// depth `masks`: the fiber is the poll's, and its innermost region is
    /// the poll's region (see the module doc).
    #[inline(always)]
    pub(crate) fn unmasks(&self, owner: usize, masks: u32) -> bool {
        self.depth == masks && self.owner == owner
    }

    /// Makes `io` cancelable again, if this poll belongs to the fiber that
    /// runs it and to the innermost uncancelable region around it;
    /// otherwise runs `io` as it is.
    #[track_caller]
    pub fn apply<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E> {
        self.apply_untraced(io).traced_as(&POLL_APPLY)
    }

    /// [`Poll::apply`] for io-core's own nodes (no trace event).
    pub(crate) fn apply_untraced<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> IO<A, E> {
        IO::from_node(Node::poll(io.into_node(), *self))
    }
}

mod k {
    use super::*;

    pub(super) struct Uncancelable<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F: FnOnce(Poll) -> IO<A, E>> Adapter<Poll, Node, F> for Uncancelable<A, E> {
        unsafe fn call(f: F, poll: Poll) -> Node {
            f(poll).into_node()
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

    /// A finalizer that does not look at the outcome (`guarantee`): the
    /// outcome goes back untouched, without being typed and erased again.
    pub(super) struct Finally<E>(PhantomData<fn() -> E>);
    impl<E, F> Adapter<Outcome<Value, Value>, (Node, Outcome<Value, Value>), F> for Finally<E>
    where
        E: Send + 'static,
        F: FnOnce() -> IO<(), E>,
    {
        unsafe fn call(f: F, outcome: Outcome<Value, Value>) -> (Node, Outcome<Value, Value>) {
            (f().into_node(), outcome)
        }
    }

    /// An `Acquire` node's closure: its source typed as the body, and what
    /// the closure decides erased again (`IO::acquire_at`).
    pub(super) struct Acquire<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F> Adapter<Node, (Node, Option<ErasedFn<(), ()>>), F> for Acquire<A, E>
    where
        F: FnOnce(IO<A, E>) -> Result<(IO<A, E>, Release), IO<A, E>>,
    {
        unsafe fn call(f: F, body: Node) -> (Node, Option<ErasedFn<(), ()>>) {
            match f(IO::from_node(body)) {
                Ok((body, release)) => (body.into_node(), Some(release.0)),
                Err(wait) => (wait.into_node(), None),
            }
        }
    }

    /// A release closure (`Release::new`).
    pub(super) struct ReleaseFn;
    impl<F: FnOnce()> Adapter<(), (), F> for ReleaseFn {
        unsafe fn call(f: F, _: ()) {
            f()
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

/// What an [`IO::acquire_at`] closure took, given back by this closure when
/// the body ends, whatever the outcome (success, error, cancellation,
/// panic), exactly once. It runs inside the run-loop, as a frame is
/// popped: it must not panic, and it runs no program (a semaphore's
/// `give_back`: an atomic, and a wake-up when fibers wait).
pub(crate) struct Release(ErasedFn<(), ()>);

impl Release {
    /// Erases `release` (no allocation for a closure of one word: an `Arc`).
    #[inline(always)]
    pub(crate) fn new<F: FnOnce() + Send + 'static>(release: F) -> Release {
        Release(ErasedFn::new::<k::ReleaseFn, F>(release))
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// `self` run holding what `acquire` takes when the program runs,
    /// recorded as the operation `M` at `site`: `acquire`, given `self`,
    /// either takes it at once and returns `Ok((self, release))` (the
    /// run-loop installs `release` in the same step, before cancellation
    /// can be observed, and calls it once when `self` ends, however it
    /// ends: `fiber/run_loop.rs`), or returns `Err(program)`, a program
    /// that waits for it and guards `self` itself. `self` runs with the
    /// caller's cancelability. One pooled block (`self` and a one-word
    /// `acquire`), one step, no `Outcome` and no masked step for the
    /// release: the uncontended path of `Semaphore::with_permit`.
    #[inline(always)]
    pub(crate) fn acquire_at<M: OpMeta, F>(self, site: Option<Site>, acquire: F) -> IO<A, E>
    where
        F: FnOnce(IO<A, E>) -> Result<(IO<A, E>, Release), IO<A, E>> + Send + 'static,
    {
        let k: AcquireK = ErasedFn::new_op::<k::Acquire<A, E>, F, M>(acquire);
        IO::from_node(Node::acquire(self.into_node(), k, site))
    }

    /// Runs the program `body` builds with cancellation masked, except
    /// inside `poll.apply(..)`.
    ///
    /// The poll unmasks only on this fiber, and only where this region is
    /// the innermost one: applied on another fiber (a child it starts, a
    /// fiber it is sent to), inside a region nested in this one, or by a
    /// fiber after this one has ended, it runs its program as it is
    /// (see [`Poll`]).
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// // A self-cancel inside an uncancelable region is observed when the
    /// // region ends: the rest of the region runs, what follows does not.
    /// let io: IO<u32, ()> = IO::uncancelable(|_poll| IO::canceled().map_to(1))
    ///     .flat_map(|x| IO::pure(x + 1));
    /// assert!(Runtime::new()?.block_on(io)?.is_canceled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn uncancelable<F>(body: F) -> IO<A, E>
    where
        F: FnOnce(Poll) -> IO<A, E> + Send + 'static,
    {
        IO::uncancelable_at::<WithClosure<names::Uncancelable, F>, F>(here(), body)
    }

    /// [`IO::uncancelable`] recorded as the operation `M` at `site`.
    pub(crate) fn uncancelable_at<M: OpMeta, F>(site: Option<Site>, body: F) -> IO<A, E>
    where
        F: FnOnce(Poll) -> IO<A, E> + Send + 'static,
    {
        IO::from_node(Node::uncancelable(ErasedFn::new_sited::<
            k::Uncancelable<A, E>,
            F,
            M,
        >(body, site)))
    }

    /// [`IO::uncancelable`] for io-core's own nodes (no trace event).
    pub(crate) fn uncancelable_untraced<F>(body: F) -> IO<A, E>
    where
        F: FnOnce(Poll) -> IO<A, E> + Send + 'static,
    {
        IO::from_node(Node::uncancelable(
            ErasedFn::new::<k::Uncancelable<A, E>, F>(body),
        ))
    }

    /// Runs `finalizer` (masked) if the fiber is canceled while `self` runs.
    #[track_caller]
    pub fn on_cancel(self, finalizer: IO<(), E>) -> IO<A, E> {
        self.on_cancel_at::<Named<names::OnCancel>>(here(), finalizer)
    }

    /// [`IO::on_cancel`] recorded as the operation `M` at `site`.
    pub(crate) fn on_cancel_at<M: OpMeta>(
        self,
        site: Option<Site>,
        finalizer: IO<(), E>,
    ) -> IO<A, E> {
        IO::from_node(Node::on_cancel(
            self.into_node(),
            ErasedFn::new_op::<k::Thunk<(), E>, _, M>(move || finalizer),
            site,
        ))
    }

    /// [`IO::on_cancel`] for io-core's own nodes (no trace event).
    pub(crate) fn on_cancel_untraced(self, finalizer: IO<(), E>) -> IO<A, E> {
        self.on_cancel_at::<Internal>(NO_SITE, finalizer)
    }

    /// Runs the program `finalizer` builds from the outcome of `self`
    /// (masked, exactly once), whatever the outcome: success, error,
    /// cancellation or panic (Cats Effect's `guaranteeCase`).
    ///
    /// The finalizer gets the outcome by value, a clone (the outcome itself
    /// goes on as the program's), so the program it builds may keep it.
    /// For a value or an error that is not `Clone` (`std::io::Error`), or
    /// costly to clone, [`guarantee_case_ref`](IO::guarantee_case_ref)
    /// lends the outcome instead.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Ref, wstp::Runtime};
    ///
    /// let log = Ref::new(Vec::<String>::new());
    /// let l = log.clone();
    /// let io: IO<u32, String> = IO::raise_error("boom".to_string())
    ///     .guarantee_case(move |outcome| l.update(move |log| log.push(outcome.to_string())));
    /// let rt = Runtime::new()?;
    /// assert!(rt.block_on(io)?.is_errored());
    /// assert_eq!(rt.block_on(log.get::<()>())?.ok(), Some(vec![r#"errored with "boom""#.to_string()]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn guarantee_case<F>(self, finalizer: F) -> IO<A, E>
    where
        A: Clone,
        E: Clone,
        F: FnOnce(Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        self.guarantee_case_at::<WithClosure<names::GuaranteeCase, F>, _>(
            here(),
            move |outcome: &Outcome<A, E>| finalizer(outcome.clone()),
        )
    }

    /// [`guarantee_case`](IO::guarantee_case) that lends the outcome to
    /// `finalizer`, for values and errors that are not `Clone` (or costly
    /// to clone): the borrow ends when the finalizer's program is built, so
    /// read what it needs first (`outcome.is_canceled()`, an error's
    /// message) and move that into the program.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Ref, wstp::Runtime};
    ///
    /// let failures = Ref::new(Vec::<String>::new());
    /// let f = failures.clone();
    /// let read: IO<Vec<u8>, std::io::Error> = IO::raise_error(std::io::Error::other("disk"))
    ///     .guarantee_case_ref(move |outcome| {
    ///         let failure = outcome.as_ref().error().map(|e| e.to_string());
    ///         f.update(move |log| log.extend(failure))
    ///     });
    /// let rt = Runtime::new()?;
    /// assert!(rt.block_on(read)?.is_errored());
    /// assert_eq!(rt.block_on(failures.get::<()>())?.ok(), Some(vec!["disk".to_string()]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn guarantee_case_ref<F>(self, finalizer: F) -> IO<A, E>
    where
        F: FnOnce(&Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        self.guarantee_case_at::<WithClosure<GuaranteeCaseRef, F>, F>(here(), finalizer)
    }

    /// [`IO::guarantee_case`] recorded as the operation `M` at `site`.
    pub(crate) fn guarantee_case_at<M: OpMeta, F>(
        self,
        site: Option<Site>,
        finalizer: F,
    ) -> IO<A, E>
    where
        F: FnOnce(&Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        let finalizer: GuaranteeK = ErasedFn::new_op::<k::Guarantee<A, E>, F, M>(finalizer);
        IO::from_node(Node::guarantee_case(self.into_node(), finalizer, site))
    }

    /// [`IO::guarantee_case`] for io-core's own nodes (no trace event).
    pub(crate) fn guarantee_case_untraced<F>(self, finalizer: F) -> IO<A, E>
    where
        F: FnOnce(&Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        self.guarantee_case_at::<Internal, F>(NO_SITE, finalizer)
    }

    /// Runs `finalizer` (masked, exactly once) after `self`, whatever its
    /// outcome.
    #[track_caller]
    pub fn guarantee(self, finalizer: IO<(), E>) -> IO<A, E> {
        self.guarantee_with_at::<Named<names::Guarantee>, _>(here(), move || finalizer)
    }

    /// [`IO::guarantee`] for io-core's own nodes (no trace event).
    pub(crate) fn guarantee_untraced(self, finalizer: IO<(), E>) -> IO<A, E> {
        self.guarantee_with_untraced(move || finalizer)
    }

    /// [`IO::guarantee`] whose finalizer is built when `self` ends (by
    /// `finalizer`, called exactly once, masked, whatever the outcome), for
    /// io-core's own nodes (no trace event).
    ///
    /// A finalizer that does its work while it is built and returns a value
    /// (`IO::unit()`) has no program left to run: the run-loop then goes on
    /// at once, without a masked step of its own (a semaphore's release).
    pub(crate) fn guarantee_with_untraced<F>(self, finalizer: F) -> IO<A, E>
    where
        F: FnOnce() -> IO<(), E> + Send + 'static,
    {
        self.guarantee_with_at::<Internal, F>(NO_SITE, finalizer)
    }

    /// [`IO::guarantee_with_untraced`] recorded as the operation `M` at
    /// `site`.
    pub(crate) fn guarantee_with_at<M: OpMeta, F>(
        self,
        site: Option<Site>,
        finalizer: F,
    ) -> IO<A, E>
    where
        F: FnOnce() -> IO<(), E> + Send + 'static,
    {
        let finalizer: GuaranteeK = ErasedFn::new_op::<k::Finally<E>, F, M>(finalizer);
        IO::from_node(Node::guarantee_case(self.into_node(), finalizer, site))
    }

    /// Acquires a resource, uses it, and releases it whatever the outcome of
    /// the use (success, error, cancellation, panic). Acquisition and
    /// release are masked; the use is cancelable.
    ///
    /// The use gets a clone of the resource, so the program it builds may
    /// keep it; the release gets the resource itself. For a resource that
    /// is not `Clone`, see [`bracket_full_ref`](IO::bracket_full_ref), or
    /// make it a [`Resource`](crate::Resource) and
    /// [`use_ref`](crate::Resource::use_ref) it.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let (l1, l2) = (log.clone(), log.clone());
    /// let io: IO<usize, String> = IO::bracket(
    ///     IO::delay(move || { l1.lock().unwrap().push("open"); 42usize }),
    ///     // The use owns its copy of the resource: the program keeps it.
    ///     |fd| IO::defer(move || IO::raise_error(format!("read {fd} failed"))),
    ///     move |_fd| IO::delay(move || l2.lock().unwrap().push("close")),
    /// );
    /// assert!(Runtime::new()?.block_on(io)?.is_errored());
    /// assert_eq!(*log.lock().unwrap(), ["open", "close"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn bracket<R, U, Rel>(acquire: IO<R, E>, use_: U, release: Rel) -> IO<A, E>
    where
        R: Clone + Send + 'static,
        U: FnOnce(R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R) -> IO<(), E> + Send + 'static,
    {
        IO::bracket_untraced(
            move |_| acquire,
            move |r: &R| use_(r.clone()),
            move |r, _| release(r),
        )
        .traced_as(&BRACKET)
    }

    /// [`bracket`](IO::bracket) whose release also sees the use's outcome
    /// (a clone of it, as [`guarantee_case`](IO::guarantee_case) gives).
    #[track_caller]
    pub fn bracket_case<R, U, Rel>(acquire: IO<R, E>, use_: U, release: Rel) -> IO<A, E>
    where
        A: Clone,
        E: Clone,
        R: Clone + Send + 'static,
        U: FnOnce(R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R, Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        IO::bracket_untraced(
            move |_| acquire,
            move |r: &R| use_(r.clone()),
            move |r, outcome: &Outcome<A, E>| release(r, outcome.clone()),
        )
        .traced_as(&BRACKET_CASE)
    }

    /// The general bracket: `acquire` gets a [`Poll`], so that a blocking
    /// acquisition (waiting for a lock, say) can be canceled; the use gets
    /// a clone of the resource and the release a clone of the outcome (see
    /// [`bracket_case`](IO::bracket_case)).
    #[track_caller]
    pub fn bracket_full<R, Acq, U, Rel>(acquire: Acq, use_: U, release: Rel) -> IO<A, E>
    where
        A: Clone,
        E: Clone,
        R: Clone + Send + 'static,
        Acq: FnOnce(Poll) -> IO<R, E> + Send + 'static,
        U: FnOnce(R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R, Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        IO::bracket_untraced(
            acquire,
            move |r: &R| use_(r.clone()),
            move |r, outcome: &Outcome<A, E>| release(r, outcome.clone()),
        )
        .traced_as(&BRACKET_FULL)
    }

    /// [`bracket_full`](IO::bracket_full) that lends instead of cloning,
    /// for resources, values and errors that are not `Clone`: the use
    /// borrows the resource (`&R`) while it builds its program, and the
    /// release borrows the outcome while it builds its own. A borrow ends
    /// when the program is built: read what it needs first and move that
    /// in.
    #[track_caller]
    pub fn bracket_full_ref<R, Acq, U, Rel>(acquire: Acq, use_: U, release: Rel) -> IO<A, E>
    where
        R: Send + 'static,
        Acq: FnOnce(Poll) -> IO<R, E> + Send + 'static,
        U: FnOnce(&R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R, &Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        IO::bracket_untraced(acquire, use_, release).traced_as(&BRACKET_FULL_REF)
    }

    /// [`IO::bracket_full`] for io-core's own nodes (no trace event).
    pub(crate) fn bracket_untraced<R, Acq, U, Rel>(acquire: Acq, use_: U, release: Rel) -> IO<A, E>
    where
        R: Send + 'static,
        Acq: FnOnce(Poll) -> IO<R, E> + Send + 'static,
        U: FnOnce(&R) -> IO<A, E> + Send + 'static,
        Rel: FnOnce(R, &Outcome<A, E>) -> IO<(), E> + Send + 'static,
    {
        IO::uncancelable_untraced(move |poll| {
            acquire(poll).flat_map_untraced(move |resource| {
                let used = use_(&resource);
                poll.apply_untraced(used)
                    .guarantee_case_untraced(move |outcome| release(resource, outcome))
            })
        })
    }

    /// Starts `self` on a new fiber of the same executor; returns its handle
    /// at once.
    #[track_caller]
    pub fn start<E2: Send + 'static>(self) -> IO<FiberHandle<A, E>, E2> {
        self.start_at::<Named<names::Start>, E2>(here())
    }

    /// [`IO::start`] for io-core's own fibers (no trace event).
    pub(crate) fn start_untraced<E2: Send + 'static>(self) -> IO<FiberHandle<A, E>, E2> {
        self.start_at::<Internal, E2>(NO_SITE)
    }

    fn start_at<M: OpMeta, E2: Send + 'static>(
        self,
        site: Option<Site>,
    ) -> IO<FiberHandle<A, E>, E2> {
        IO::with_spawner_at::<M, _>(site, move |spawner| {
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
        IO::with_spawner_at::<Internal, F>(NO_SITE, f)
    }

    /// [`IO::with_spawner`] recorded as the operation `M` at `site`.
    pub(crate) fn with_spawner_at<M: OpMeta, F>(site: Option<Site>, f: F) -> IO<A, E>
    where
        F: FnOnce(Spawner) -> A + Send + 'static,
    {
        IO::from_node(Node::start(ErasedFn::new_sited::<k::WithSpawner<A>, _, M>(
            f, site,
        )))
    }
}

impl<E: Send + 'static> IO<(), E> {
    /// Requests the cancellation of the current fiber. Observed at once
    /// outside uncancelable regions, at the end of the region inside one.
    #[track_caller]
    pub fn canceled() -> IO<(), E> {
        IO::from_node(Node::canceled(here()))
    }

    /// [`IO::canceled`] for io-core's own nodes (no trace event).
    pub(crate) fn canceled_untraced() -> IO<(), E> {
        IO::from_node(Node::canceled(NO_SITE))
    }
}

static POLL_APPLY: Op = Op::new("Poll::apply");
static BRACKET: Op = Op::new("bracket");
static BRACKET_CASE: Op = Op::new("bracket_case");
static BRACKET_FULL: Op = Op::new("bracket_full");
static BRACKET_FULL_REF: Op = Op::new("bracket_full_ref");
