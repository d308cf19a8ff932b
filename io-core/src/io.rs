//! The `IO` data type: a description of a computation with typed errors.

use core::convert::Infallible;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::ControlFlow;
use core::time::Duration;

use alloc::vec::Vec;

use crate::engine::erased::{Adapter, ErasedFn, Value};
use crate::engine::node::{Node, Res};
use crate::engine::tracing::{
    Internal, NO_SITE, Named, Op, OpMeta, Site, WithClosure, here, names,
};
use crate::fiber::{Callback, RawCallback};

/// A description of a computation that produces an `A` or fails with an `E`.
///
/// Building an `IO` runs nothing: a fiber runs it when an executor is given
/// it (for instance `rt.block_on(io)`, with `rt` the default executor,
/// `spindle_effect::wstp::Runtime`). Like a Rust `Future`, an `IO` value
/// is used once: running it consumes it. Where Cats Effect re-evaluates a
/// by-name program (`replicateA`, `foreverM`, `iterateWhile`), Spindle
/// takes a function that builds the program ([`IO::replicate`],
/// [`IO::forever`], [`IO::iterate_while`]).
///
/// Values, errors and closures must be `Send + 'static`, so that one program
/// type runs on every executor, the multi-threaded ones included. Small
/// values and closures (up to three machine words) are stored without a
/// heap allocation.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let program: IO<i32, String> = IO::pure(20)
///     .flat_map(|x| IO::delay(move || x + 1))
///     .map(|x| x * 2);
/// let outcome = Runtime::new()?.block_on(program)?;
/// assert_eq!(outcome.succeeded(), Some(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "an IO describes a computation and does nothing until it is run"]
pub struct IO<A, E> {
    node: ManuallyDrop<Node>,
    _marker: PhantomData<fn() -> (A, E)>,
}

/// Whether a `#[track_caller]` function was called through the `Fn`
/// traits, as a function value (`io.flat_map(IO::raise_error)`): its
/// caller's location is then the standard library's `call_once`, not a
/// line of the user's.
#[cfg(feature = "tracing")]
#[inline]
fn called_as_a_function(caller: &core::panic::Location<'_>) -> bool {
    let file = caller.file();
    file.ends_with("core/src/ops/function.rs") || file.ends_with("core\\src\\ops\\function.rs")
}

/// An [`IO`] that cannot fail: `IO<A, Infallible>`.
///
/// Operations that cannot fail (`sleep`, `cede`, `unit`, `never`, `start`,
/// `join`, `Deferred::get`, `Queue::take`, ...) are generic in their error
/// type, so inside a program the surrounding chain picks it and nothing is
/// named. Where nothing does — a program run only for its effects, a test
/// that never fails — say so with `UIO`, as a type (`let p: UIO<bool> = ..`)
/// or as the path of the first operation (`UIO::sleep(d)`), instead of
/// naming an error type (`IO::<(), E>::sleep(d)`, `.join::<E>()`). It is a
/// type alias, so it costs nothing: the generic operations build the same
/// nodes for any error type, and an `Outcome<A, Infallible>` cannot hold an
/// error.
///
/// ```
/// use core::time::Duration;
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let program: UIO<bool> = UIO::sleep(Duration::from_millis(1))
///     .start()
///     .flat_map(|sleeper| sleeper.join())
///     .map(|outcome| outcome.is_succeeded());
/// let outcome = Runtime::new()?.block_on(program)?;
/// assert_eq!(outcome.succeeded(), Some(true));
///
/// // Run for its effect alone: the first operation names the error type.
/// assert!(Runtime::new()?.block_on(UIO::cede())?.is_succeeded());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type UIO<A = ()> = IO<A, Infallible>;

impl<A, E> Drop for IO<A, E> {
    fn drop(&mut self) {
        // SAFETY: the node is taken exactly once, here; `into_node` forgets
        // `self` instead of dropping it.
        let node = unsafe { ManuallyDrop::take(&mut self.node) };
        // Through the trampoline: a program nested in a closure nested in a
        // program... drops in constant native stack.
        crate::engine::node::drop_node(node);
    }
}

impl<A, E> core::fmt::Debug for IO<A, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IO<")?;
        f.write_str(core::any::type_name::<A>())?;
        f.write_str(", ")?;
        f.write_str(core::any::type_name::<E>())?;
        f.write_str(">")
    }
}

/// Adapters between the typed closures of the API and the erased frames.
mod k {
    use super::*;

    /// What blocking work hands back: its result, or the message of its
    /// panic.
    pub(super) type BlockingResult<A, E> = Result<Result<A, E>, crate::outcome::PanicMessage>;

    pub(super) struct Blocking<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A: Send + 'static, E: Send + 'static, F: FnOnce() -> Result<A, E>> Adapter<(), Value, F>
        for Blocking<A, E>
    {
        unsafe fn call(f: F, _: ()) -> Value {
            // A simulation may fail I/O work instead of running it
            // (`BlockingTask::run_with_fault`): only work whose error type
            // is `io::Error` can be given one.
            #[cfg(feature = "std")]
            if core::any::TypeId::of::<E>() == core::any::TypeId::of::<std::io::Error>() {
                if let Some(error) = crate::fiber::callback::injected_blocking_error() {
                    let mut error = Some(error);
                    let any: &mut dyn core::any::Any = &mut error;
                    if let Some(error) = any.downcast_mut::<Option<E>>().and_then(Option::take) {
                        drop(f);
                        let result: BlockingResult<A, E> = Ok(Err(error));
                        return Value::new(result);
                    }
                }
            }
            #[cfg(feature = "std")]
            let result: BlockingResult<A, E> =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                    .map_err(|payload| crate::outcome::PanicMessage::from_payload(&*payload));
            #[cfg(not(feature = "std"))]
            let result: BlockingResult<A, E> = Ok(f());
            Value::new(result)
        }
    }

    pub(super) struct Delay<A>(PhantomData<fn() -> A>);
    impl<A: Send + 'static, F: FnOnce() -> A> Adapter<(), Value, F> for Delay<A> {
        #[inline(always)]
        unsafe fn call(f: F, _: ()) -> Value {
            Value::new(f())
        }
    }

    pub(super) struct Defer<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F: FnOnce() -> IO<A, E>> Adapter<(), Node, F> for Defer<A, E> {
        #[inline(always)]
        unsafe fn call(f: F, _: ()) -> Node {
            f().into_node()
        }
    }

    pub(super) struct Map<A, B>(PhantomData<fn(A) -> B>);
    impl<A: 'static, B: Send + 'static, F: FnOnce(A) -> B> Adapter<Value, Value, F> for Map<A, B> {
        #[inline(always)]
        unsafe fn call(f: F, v: Value) -> Value {
            // SAFETY: the source of this frame produces `A`.
            Value::new(f(unsafe { v.take::<A>() }))
        }
    }

    pub(super) struct FlatMap<A, B, E>(PhantomData<fn(A) -> (B, E)>);
    impl<A: 'static, B, E, F: FnOnce(A) -> IO<B, E>> Adapter<Value, Node, F> for FlatMap<A, B, E> {
        #[inline(always)]
        unsafe fn call(f: F, v: Value) -> Node {
            // SAFETY: the source of this frame produces `A`.
            f(unsafe { v.take::<A>() }).into_node()
        }
    }

    pub(super) struct MapError<E, E2>(PhantomData<fn(E) -> E2>);
    impl<E: 'static, E2: Send + 'static, F: FnOnce(E) -> E2> Adapter<Value, Value, F>
        for MapError<E, E2>
    {
        #[inline(always)]
        unsafe fn call(f: F, e: Value) -> Value {
            // SAFETY: the source of this frame fails with `E`.
            Value::new(f(unsafe { e.take::<E>() }))
        }
    }

    pub(super) struct Fold<A, E, B, E2>(PhantomData<fn(A, E, B, E2)>);
    impl<A, E, B, E2, F> Adapter<Res, Res, F> for Fold<A, E, B, E2>
    where
        A: 'static,
        E: 'static,
        B: Send + 'static,
        E2: Send + 'static,
        F: FnOnce(Result<A, E>) -> Result<B, E2>,
    {
        #[inline(always)]
        unsafe fn call(f: F, r: Res) -> Res {
            // SAFETY: the source of this frame produces `A` or fails with `E`.
            let typed = match r {
                Ok(v) => Ok(unsafe { v.take::<A>() }),
                Err(e) => Err(unsafe { e.take::<E>() }),
            };
            match f(typed) {
                Ok(b) => Ok(Value::new(b)),
                Err(e) => Err(Value::new(e)),
            }
        }
    }

    pub(super) struct FoldWith<A, E, B, E2>(PhantomData<fn(A, E, B, E2)>);
    impl<A, E, B, E2, F> Adapter<Res, Node, F> for FoldWith<A, E, B, E2>
    where
        A: 'static,
        E: 'static,
        F: FnOnce(Result<A, E>) -> IO<B, E2>,
    {
        #[inline(always)]
        unsafe fn call(f: F, r: Res) -> Node {
            // SAFETY: the source of this frame produces `A` or fails with `E`.
            let typed = match r {
                Ok(v) => Ok(unsafe { v.take::<A>() }),
                Err(e) => Err(unsafe { e.take::<E>() }),
            };
            f(typed).into_node()
        }
    }

    pub(super) struct Async<A, E>(PhantomData<fn() -> (A, E)>);
    impl<A, E, F> Adapter<RawCallback, Option<Node>, F> for Async<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Callback<A, E>) -> Option<IO<(), E>>,
    {
        #[inline(always)]
        unsafe fn call(f: F, raw: RawCallback) -> Option<Node> {
            f(Callback::from_raw(raw)).map(IO::into_node)
        }
    }
}

impl<A, E> IO<A, E> {
    #[inline(always)]
    pub(crate) fn from_node(node: Node) -> Self {
        IO {
            node: ManuallyDrop::new(node),
            _marker: PhantomData,
        }
    }

    /// The untyped node (for the fiber).
    #[inline(always)]
    pub(crate) fn into_node(self) -> Node {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the node moves out exactly once.
        unsafe { ManuallyDrop::take(&mut this.node) }
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    // ----- constructors --------------------------------------------------

    /// A program that produces `value`.
    #[inline]
    pub fn pure(value: A) -> Self {
        IO::from_node(Node::pure(Value::new(value)))
    }

    /// A program that fails with `error`.
    ///
    /// Recorded in the fiber's trace as `raise_error` at the caller's line,
    /// so that the trace of a failure (`trace_errors`, the entry point's
    /// report of a failed main fiber) names the line that raised it.
    /// Passed as a function (`io.flat_map(IO::raise_error)`), it has no
    /// line of the caller's to name (the call is the standard library's),
    /// and records nothing: the `flat_map` names the line.
    #[inline]
    #[track_caller]
    pub fn raise_error(error: E) -> Self {
        // Where no call site is kept (a process that traces nothing:
        // `spindle_trace::call_sites_for`), the error alone, as without
        // tracing.
        #[cfg(feature = "tracing")]
        if crate::engine::tracing::Site::call_sites_kept()
            && !called_as_a_function(core::panic::Location::caller())
        {
            let site = crate::engine::tracing::Site::caller();
            return IO::from_node(Node::raise_error_at(error, site));
        }
        IO::raise_error_untraced(error)
    }

    /// [`IO::raise_error`] for io-core's own nodes (no trace event).
    #[inline(always)]
    pub(crate) fn raise_error_untraced(error: E) -> Self {
        IO::from_node(Node::error(Value::new(error)))
    }

    /// A program that produces `Ok`'s value or fails with `Err`'s error.
    #[inline]
    pub fn from_result(result: Result<A, E>) -> Self {
        match result {
            Ok(a) => IO::pure(a),
            Err(e) => IO::raise_error_untraced(e),
        }
    }

    /// A program that runs `thunk` when it runs (a suspended side effect).
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let calls = Arc::new(AtomicUsize::new(0));
    /// let c = calls.clone();
    /// let io: IO<usize, ()> = IO::delay(move || c.fetch_add(1, Ordering::SeqCst) + 1);
    /// assert_eq!(calls.load(Ordering::SeqCst), 0, "building runs nothing");
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[track_caller]
    pub fn delay<F>(thunk: F) -> Self
    where
        F: FnOnce() -> A + Send + 'static,
    {
        IO::delay_at::<WithClosure<names::Delay, F>, F>(here(), thunk)
    }

    /// [`IO::delay`] recorded as the operation `M` at `site` (single-step
    /// operations of the data types: `Ref::update`, `Queue::try_take`, ...).
    #[inline]
    pub(crate) fn delay_at<M: OpMeta, F>(site: Option<Site>, thunk: F) -> Self
    where
        F: FnOnce() -> A + Send + 'static,
    {
        IO::from_node(Node::delay(ErasedFn::new_sited::<k::Delay<A>, F, M>(
            thunk, site,
        )))
    }

    /// [`IO::delay`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn delay_untraced<F>(thunk: F) -> Self
    where
        F: FnOnce() -> A + Send + 'static,
    {
        IO::from_node(Node::delay(ErasedFn::new::<k::Delay<A>, F>(thunk)))
    }

    /// A program that runs `thunk` and then the program it returns.
    #[inline]
    #[track_caller]
    pub fn defer<F>(thunk: F) -> Self
    where
        F: FnOnce() -> IO<A, E> + Send + 'static,
    {
        IO::defer_at::<WithClosure<names::Defer, F>, F>(here(), thunk)
    }

    /// [`IO::defer`] recorded as the operation `M` at `site`.
    #[inline]
    pub(crate) fn defer_at<M: OpMeta, F>(site: Option<Site>, thunk: F) -> Self
    where
        F: FnOnce() -> IO<A, E> + Send + 'static,
    {
        IO::from_node(Node::defer(ErasedFn::new_sited::<k::Defer<A, E>, F, M>(
            thunk, site,
        )))
    }

    /// [`IO::defer`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn defer_untraced<F>(thunk: F) -> Self
    where
        F: FnOnce() -> IO<A, E> + Send + 'static,
    {
        IO::from_node(Node::defer(ErasedFn::new::<k::Defer<A, E>, F>(thunk)))
    }

    /// A program that suspends its fiber until the callback given to
    /// `register` is called.
    ///
    /// `register` runs when the program runs. The [`Callback`] is `Send`, may
    /// be called from any thread, also before `register` returns; only its
    /// first call counts. `register` may return a finalizer, to be run if the
    /// fiber is canceled while it waits.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let io: IO<u32, String> = IO::from_callback(|cb| {
    ///     std::thread::spawn(move || cb.succeed(7));
    ///     None
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[track_caller]
    pub fn from_callback<F>(register: F) -> Self
    where
        F: FnOnce(Callback<A, E>) -> Option<IO<(), E>> + Send + 'static,
    {
        IO::from_callback_at::<WithClosure<names::Async, F>, F>(here(), register)
    }

    /// [`IO::from_callback`] recorded as the operation `M` at `site` (data types
    /// record their waits under their own names).
    #[inline]
    pub(crate) fn from_callback_at<M: OpMeta, F>(site: Option<Site>, register: F) -> Self
    where
        F: FnOnce(Callback<A, E>) -> Option<IO<(), E>> + Send + 'static,
    {
        IO::from_node(Node::from_callback(ErasedFn::new_sited::<
            k::Async<A, E>,
            F,
            M,
        >(register, site)))
    }

    /// [`IO::from_callback`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn from_callback_untraced<F>(register: F) -> Self
    where
        F: FnOnce(Callback<A, E>) -> Option<IO<(), E>> + Send + 'static,
    {
        IO::from_node(Node::from_callback(ErasedFn::new::<k::Async<A, E>, F>(
            register,
        )))
    }
}

impl<E: Send + 'static> IO<(), E> {
    /// [`IO::from_callback`] with a deadline on the executor's monotonic
    /// clock (io-core's own node, no trace event): the fiber resumes when
    /// the callback is called or when the clock reaches `deadline`,
    /// whichever comes first, with `()` either way (the caller tells the two
    /// apart from its own state). The timer is one of the executor's, armed
    /// on the same suspension and removed when it ends; no fiber is started
    /// for it. On cancellation the finalizer `register` returned runs.
    pub(crate) fn from_callback_until_untraced<F>(deadline: Duration, register: F) -> Self
    where
        F: FnOnce(Callback<(), E>) -> Option<IO<(), E>> + Send + 'static,
    {
        IO::from_node(Node::async_until(
            deadline,
            ErasedFn::new::<k::Async<(), E>, F>(register),
        ))
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// A program that runs `thunk`, which may block its thread (file I/O, a
    /// blocking client, a lock held by foreign code), without stalling the
    /// fibers of its executor: the executor runs it where blocking is
    /// acceptable ([`Executor::spawn_blocking`](crate::Executor::spawn_blocking):
    /// exec-wstp's pool of blocking threads; on a single-threaded executor,
    /// inline), and the fiber resumes with its value.
    ///
    /// Like Cats Effect's `IO.blocking`, the work is not interruptible: a
    /// fiber canceled meanwhile waits for the thunk to return, then
    /// finalizes. A panic in the thunk (with `std`) ends the fiber with
    /// `Outcome::Panicked`, as a panic in `delay` does.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let io: IO<u64, ()> = IO::blocking(|| std::fs::metadata(".").is_ok() as u64);
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[track_caller]
    pub fn blocking<F>(thunk: F) -> Self
    where
        F: FnOnce() -> A + Send + 'static,
    {
        IO::try_blocking_at::<WithClosure<names::Blocking, F>, _>(here(), move || Ok(thunk()))
    }

    /// Like [`blocking`](IO::blocking), for a thunk that may fail: an `Err`
    /// is raised as this program's error.
    #[track_caller]
    pub fn try_blocking<F>(thunk: F) -> Self
    where
        F: FnOnce() -> Result<A, E> + Send + 'static,
    {
        IO::try_blocking_at::<WithClosure<names::Blocking, F>, F>(here(), thunk)
    }

    /// [`IO::try_blocking`] for io-core's own nodes and the untraced
    /// twins (no trace event).
    #[inline]
    pub(crate) fn try_blocking_untraced<F>(thunk: F) -> Self
    where
        F: FnOnce() -> Result<A, E> + Send + 'static,
    {
        IO::try_blocking_at::<Internal, F>(NO_SITE, thunk)
    }

    fn try_blocking_at<M: OpMeta, F>(site: Option<Site>, thunk: F) -> Self
    where
        F: FnOnce() -> Result<A, E> + Send + 'static,
    {
        let node = Node::blocking(ErasedFn::new_sited::<k::Blocking<A, E>, F, M>(thunk, site));
        IO::<k::BlockingResult<A, E>, E>::from_node(node).flat_map_untraced(|result| match result {
            Ok(Ok(a)) => IO::pure(a),
            Ok(Err(e)) => IO::raise_error_untraced(e),
            Err(message) => IO::from_node(Node::panicked(message)),
        })
    }

    /// A program that never completes (its fiber waits until canceled).
    #[inline]
    #[track_caller]
    pub fn never() -> Self {
        IO::from_node(Node::never(here()))
    }

    /// [`IO::never`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn never_untraced() -> Self {
        IO::from_node(Node::never(NO_SITE))
    }

    // ----- sequencing ----------------------------------------------------

    /// Runs `self`, then the program `f` builds from its value.
    #[inline]
    #[track_caller]
    pub fn flat_map<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> IO<B, E> + Send + 'static,
    {
        self.flat_map_at::<WithClosure<names::FlatMap, F>, B, F>(here(), f)
    }

    /// [`IO::flat_map`] recorded as the operation `M` at `site`.
    #[inline(always)]
    pub(crate) fn flat_map_at<M: OpMeta, B, F>(self, site: Option<Site>, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> IO<B, E> + Send + 'static,
    {
        IO::from_node(Node::flat_map(
            self.into_node(),
            ErasedFn::new_op::<k::FlatMap<A, B, E>, F, M>(f),
            site,
        ))
    }

    /// [`IO::flat_map`] for io-core's own nodes (no trace event).
    #[inline(always)]
    pub(crate) fn flat_map_untraced<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> IO<B, E> + Send + 'static,
    {
        self.flat_map_at::<Internal, B, F>(NO_SITE, f)
    }

    /// Transforms the value.
    #[inline]
    #[track_caller]
    pub fn map<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> B + Send + 'static,
    {
        self.map_at::<WithClosure<names::Map, F>, B, F>(here(), f)
    }

    /// [`IO::map`] recorded as the operation `M` at `site`.
    #[inline(always)]
    pub(crate) fn map_at<M: OpMeta, B, F>(self, site: Option<Site>, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> B + Send + 'static,
    {
        IO::from_node(Node::map(
            self.into_node(),
            ErasedFn::new_op::<k::Map<A, B>, F, M>(f),
            site,
        ))
    }

    /// [`IO::map`] for io-core's own nodes (no trace event).
    #[inline(always)]
    pub(crate) fn map_untraced<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> B + Send + 'static,
    {
        self.map_at::<Internal, B, F>(NO_SITE, f)
    }

    /// Records this program in traces as the operation `op`, at the call
    /// site of the `#[track_caller]` public function that calls this (for
    /// operations made of several nodes, which build them untraced).
    #[inline]
    #[track_caller]
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn traced_as(self, op: &'static Op) -> IO<A, E> {
        IO::from_node(Node::mark(
            self.into_node(),
            #[cfg(feature = "tracing")]
            crate::engine::tracing::MarkK::record(op),
            here(),
        ))
    }

    /// Runs `self` with tracing switched on for its fiber, also when the
    /// executor's mode is `none` (scoped tracing): operations evaluated
    /// inside record trace events, including after async boundaries and
    /// cedes, and fibers started inside trace too. When `self` ends (value,
    /// error), tracing goes back to what it was.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{FiberConfig, TracingMode, wstp::Runtime};
    ///
    /// let config = FiberConfig::builder().tracing(TracingMode::None).build()?;
    /// let program: IO<Vec<&'static str>, ()> = IO::unit()
    ///     .map(|_| 1)                                   // not traced
    ///     .flat_map(|_| IO::delay(|| 2).map(|x| x + 1).traced())
    ///     .flat_map(|_| IO::trace())
    ///     .map(|trace| trace.op_names());
    /// let names = Runtime::builder().fiber_config(config).build()?.block_on(program)?.succeeded().unwrap();
    /// // Inside the scope only; a bind is recorded before its source.
    /// if cfg!(feature = "tracing") {
    ///     assert_eq!(names, ["map", "delay"]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn traced(self) -> IO<A, E> {
        // Programs built from now on keep every call site (see
        // `spindle_trace::call_sites_for`).
        #[cfg(feature = "tracing")]
        spindle_trace::keep_call_sites();
        IO::from_node(Node::mark(
            self.into_node(),
            #[cfg(feature = "tracing")]
            crate::engine::tracing::MarkK::scope(),
            NO_SITE,
        ))
    }

    /// Runs `self`, then `next`, keeping `next`'s value (Cats Effect's `*>`).
    #[doc(alias = "*>")]
    #[inline]
    #[track_caller]
    pub fn product_r<B: Send + 'static>(self, next: IO<B, E>) -> IO<B, E> {
        self.flat_map_at::<Named<names::ProductR>, _, _>(here(), move |_| next)
    }

    /// [`IO::product_r`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn product_r_untraced<B: Send + 'static>(self, next: IO<B, E>) -> IO<B, E> {
        self.flat_map_untraced(move |_| next)
    }

    /// Runs `self`, then `next`, keeping `self`'s value (Cats Effect's `<*`).
    #[doc(alias = "<*")]
    #[inline]
    #[track_caller]
    pub fn product_l<B: Send + 'static>(self, next: IO<B, E>) -> IO<A, E> {
        self.flat_map_at::<Named<names::ProductL>, _, _>(here(), move |a| {
            next.map_untraced(move |_| a)
        })
    }

    /// Runs `self`, then the program `f` builds from a reference to its value,
    /// keeping `self`'s value.
    #[inline]
    #[track_caller]
    pub fn flat_tap<B, F>(self, f: F) -> IO<A, E>
    where
        B: Send + 'static,
        F: FnOnce(&A) -> IO<B, E> + Send + 'static,
    {
        self.flat_map_at::<WithClosure<names::FlatTap, F>, _, _>(here(), move |a| {
            f(&a).map_untraced(move |_| a)
        })
    }

    /// Replaces the value with `value`.
    #[inline]
    #[track_caller]
    pub fn map_to<B: Send + 'static>(self, value: B) -> IO<B, E> {
        self.map_at::<Named<names::MapTo>, _, _>(here(), move |_| value)
    }

    /// Discards the value.
    #[inline]
    #[track_caller]
    pub fn void(self) -> IO<(), E> {
        self.map_at::<Named<names::Void>, _, _>(here(), |_| ())
    }

    /// [`IO::void`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn void_untraced(self) -> IO<(), E> {
        self.map_untraced(|_| ())
    }

    // ----- errors --------------------------------------------------------

    /// Exposes the error as a value: the result never fails.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let io: IO<i32, String> = IO::raise_error("boom".to_string());
    /// let outcome = Runtime::new()?.block_on(io.attempt())?;
    /// assert_eq!(outcome.succeeded(), Some(Err("boom".to_string())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[track_caller]
    pub fn attempt(self) -> IO<Result<A, E>, E> {
        self.attempt_at::<Named<names::Attempt>>(here())
    }

    /// [`IO::attempt`] recorded as the operation `M` at `site`.
    #[inline]
    pub(crate) fn attempt_at<M: OpMeta>(self, site: Option<Site>) -> IO<Result<A, E>, E> {
        IO::from_node(Node::fold(
            self.into_node(),
            ErasedFn::new_op::<k::Fold<A, E, Result<A, E>, E>, _, M>(Ok::<Result<A, E>, E>),
            site,
        ))
    }

    /// [`IO::attempt`] for io-core's own nodes (no trace event).
    #[inline]
    pub(crate) fn attempt_untraced(self) -> IO<Result<A, E>, E> {
        self.attempt_at::<Internal>(NO_SITE)
    }

    /// Recovers from an error with a value.
    #[inline]
    #[track_caller]
    pub fn handle_error<F>(self, f: F) -> IO<A, E>
    where
        F: FnOnce(E) -> A + Send + 'static,
    {
        self.handle_error_with_at::<WithClosure<names::HandleError, F>, _>(here(), move |e| {
            IO::pure(f(e))
        })
    }

    /// Recovers from an error with a program. On success the handler costs
    /// nothing: its frame is popped without a call.
    #[inline]
    #[track_caller]
    pub fn handle_error_with<F>(self, f: F) -> IO<A, E>
    where
        F: FnOnce(E) -> IO<A, E> + Send + 'static,
    {
        self.handle_error_with_at::<WithClosure<names::HandleErrorWith, F>, F>(here(), f)
    }

    /// [`IO::handle_error_with`] recorded as the operation `M` at `site`.
    #[inline]
    pub(crate) fn handle_error_with_at<M: OpMeta, F>(self, site: Option<Site>, f: F) -> IO<A, E>
    where
        F: FnOnce(E) -> IO<A, E> + Send + 'static,
    {
        IO::from_node(Node::handle_error_with(
            self.into_node(),
            ErasedFn::new_op::<k::FlatMap<E, A, E>, F, M>(f),
            site,
        ))
    }

    /// Folds success and error into a value.
    #[inline]
    #[track_caller]
    pub fn redeem<B, R, S>(self, recover: R, map: S) -> IO<B, E>
    where
        B: Send + 'static,
        R: FnOnce(E) -> B + Send + 'static,
        S: FnOnce(A) -> B + Send + 'static,
    {
        let f = move |r: Result<A, E>| -> Result<B, E> {
            Ok(match r {
                Ok(a) => map(a),
                Err(e) => recover(e),
            })
        };
        IO::from_node(Node::fold(
            self.into_node(),
            ErasedFn::new_op::<k::Fold<A, E, B, E>, _, WithClosure<names::Redeem, S>>(f),
            here(),
        ))
    }

    /// Folds success and error into a program.
    #[inline]
    #[track_caller]
    pub fn redeem_with<B, R, S>(self, recover: R, bind: S) -> IO<B, E>
    where
        B: Send + 'static,
        R: FnOnce(E) -> IO<B, E> + Send + 'static,
        S: FnOnce(A) -> IO<B, E> + Send + 'static,
    {
        let f = move |r: Result<A, E>| -> IO<B, E> {
            match r {
                Ok(a) => bind(a),
                Err(e) => recover(e),
            }
        };
        IO::from_node(Node::fold_with(
            self.into_node(),
            ErasedFn::new_op::<k::FoldWith<A, E, B, E>, _, WithClosure<names::RedeemWith, S>>(f),
            here(),
        ))
    }

    /// Runs `f` on an error, then fails with the same error.
    ///
    /// As in Cats Effect, the original error is kept: an error of the
    /// program `f` returns is discarded.
    #[inline]
    #[track_caller]
    pub fn on_error<F>(self, f: F) -> IO<A, E>
    where
        F: FnOnce(&E) -> IO<(), E> + Send + 'static,
    {
        self.handle_error_with_at::<WithClosure<names::OnError, F>, _>(here(), move |e| {
            f(&e)
                .attempt_untraced()
                .flat_map_untraced(move |_| IO::raise_error_untraced(e))
        })
    }

    /// Transforms the error (and its type).
    #[inline]
    #[track_caller]
    pub fn map_err<E2, F>(self, f: F) -> IO<A, E2>
    where
        E2: Send + 'static,
        F: FnOnce(E) -> E2 + Send + 'static,
    {
        self.map_err_at::<WithClosure<names::MapError, F>, E2, F>(here(), f)
    }

    /// [`IO::map_err`] recorded as the operation `M` at `site`.
    #[inline]
    pub(crate) fn map_err_at<M: OpMeta, E2, F>(self, site: Option<Site>, f: F) -> IO<A, E2>
    where
        E2: Send + 'static,
        F: FnOnce(E) -> E2 + Send + 'static,
    {
        IO::from_node(Node::map_err(
            self.into_node(),
            ErasedFn::new_op::<k::MapError<E, E2>, F, M>(f),
            site,
        ))
    }

    // ----- repetition and collections ------------------------------------

    /// A loop: runs `step` on the state until it returns
    /// `ControlFlow::Break` (Cats Effect's `tailRecM`). Stack-safe and
    /// allocation-free per iteration beyond what `step` builds.
    ///
    /// ```
    /// use core::ops::ControlFlow;
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let sum: IO<u64, ()> = IO::tail_rec((0u64, 1u64), |(acc, i)| {
    ///     IO::pure(if i > 100 { ControlFlow::Break(acc) } else { ControlFlow::Continue((acc + i, i + 1)) })
    /// });
    /// assert_eq!(Runtime::new()?.block_on(sum)?.succeeded(), Some(5050));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn tail_rec<S, F>(initial: S, step: F) -> IO<A, E>
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<ControlFlow<A, S>, E> + Send + 'static,
    {
        IO::defer_at::<WithClosure<names::TailRec, F>, _>(here(), move || {
            Self::tail_rec_steps(initial, step)
        })
    }

    /// [`IO::tail_rec`] for io-core's own loops (no trace event).
    pub(crate) fn tail_rec_untraced<S, F>(initial: S, step: F) -> IO<A, E>
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<ControlFlow<A, S>, E> + Send + 'static,
    {
        IO::defer_untraced(move || Self::tail_rec_steps(initial, step))
    }

    /// The loop of [`IO::tail_rec`]: runs `step` now, and binds the next
    /// step to its result (constant stack: the run-loop runs the binds).
    fn tail_rec_steps<S, F>(state: S, mut step: F) -> IO<A, E>
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<ControlFlow<A, S>, E> + Send + 'static,
    {
        step(state).flat_map_untraced(move |flow| match flow {
            ControlFlow::Continue(next) => Self::tail_rec_steps(next, step),
            ControlFlow::Break(a) => IO::pure(a),
        })
    }

    /// Runs the program `make` builds, again and again, while `p` holds for
    /// its value; produces the first value for which `p` fails.
    #[track_caller]
    pub fn iterate_while<M, P>(mut make: M, p: P) -> IO<A, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
        P: FnMut(&A) -> bool + Send + 'static,
    {
        // The predicate travels through the loop state, so that the
        // continuation owning it is `'static` and built once per iteration.
        IO::tail_rec(p, move |mut p: P| {
            make().map_untraced(move |a| {
                if p(&a) {
                    ControlFlow::Continue(p)
                } else {
                    ControlFlow::Break(a)
                }
            })
        })
    }

    /// Runs the program `make` builds, again and again, until `p` holds for
    /// its value; produces that value.
    #[track_caller]
    pub fn iterate_until<M, P>(make: M, mut p: P) -> IO<A, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
        P: FnMut(&A) -> bool + Send + 'static,
    {
        IO::iterate_while(make, move |a| !p(a))
    }

    /// Runs the program `make` builds `n` times, collecting the values.
    #[track_caller]
    pub fn replicate<M>(n: usize, mut make: M) -> IO<Vec<A>, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
    {
        IO::<Vec<A>, E>::tail_rec(Vec::with_capacity(n), move |mut acc: Vec<A>| {
            if acc.len() >= n {
                IO::pure(ControlFlow::Break(acc))
            } else {
                make().map_untraced(move |a| {
                    acc.push(a);
                    ControlFlow::Continue(acc)
                })
            }
        })
    }

    /// Runs the program `make` builds forever (until it fails or the fiber
    /// is canceled).
    #[track_caller]
    pub fn forever<M>(mut make: M) -> IO<Infallible, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
    {
        IO::<Infallible, E>::tail_rec((), move |()| {
            make().map_untraced(|_| ControlFlow::Continue(()))
        })
    }

    /// Runs `f` on each item in order, collecting the values; stops at the
    /// first error.
    #[track_caller]
    pub fn traverse<T, F>(items: Vec<T>, mut f: F) -> IO<Vec<A>, E>
    where
        T: Send + 'static,
        F: FnMut(T) -> IO<A, E> + Send + 'static,
    {
        let n = items.len();
        IO::<Vec<A>, E>::tail_rec(
            (items.into_iter(), Vec::with_capacity(n)),
            move |(mut rest, mut acc)| match rest.next() {
                None => IO::pure(ControlFlow::Break(acc)),
                Some(item) => f(item).map_untraced(move |a| {
                    acc.push(a);
                    ControlFlow::Continue((rest, acc))
                }),
            },
        )
    }

    /// Runs the programs in order, collecting the values; stops at the first
    /// error.
    #[track_caller]
    pub fn sequence(ios: Vec<IO<A, E>>) -> IO<Vec<A>, E> {
        IO::traverse(ios, |io| io)
    }

    // ----- time and scheduling -------------------------------------------

    /// Runs `self` after `duration`.
    #[track_caller]
    pub fn delay_by(self, duration: Duration) -> IO<A, E> {
        IO::<(), E>::from_node(Node::sleep(duration, here())).product_r_untraced(self)
    }
}

impl<E: Send + 'static> IO<(), E> {
    /// The program that produces `()`.
    #[inline]
    pub fn unit() -> Self {
        IO::pure(())
    }

    /// Gives the executor the chance to run other fibers (and, on an event
    /// loop, timers and I/O) before this fiber goes on.
    ///
    /// An `IO<(), E>`: in a chain of another value type, or in an IO block,
    /// the free function [`cede()`](crate::cede) reads better
    /// (`spindle_effect::cede()`, generic in its error type alone).
    #[inline]
    #[track_caller]
    pub fn cede() -> Self {
        cede()
    }

    /// Suspends the fiber for `duration`, through its executor's timers.
    ///
    /// An `IO<(), E>`, so `IO::<u64, E>::sleep(d)` does not exist (error
    /// E0599): write the free function [`sleep(d)`](crate::sleep)
    /// (`spindle_effect::sleep`, generic in its error type alone), or
    /// `io.delay_by(d)` to run a program after a pause.
    #[inline]
    #[track_caller]
    pub fn sleep(duration: Duration) -> Self {
        sleep(duration)
    }
}

/// Suspends the fiber for `duration`, through its executor's timers
/// ([`IO::sleep`] as a free function).
///
/// It cannot fail, so it is generic in its error type alone and fits any
/// program: the chain around it picks the type, and in an IO block
/// [`.value()`](IO::value) does. Nothing is named, whatever the program's
/// value and error types:
///
/// ```
/// use std::time::Duration;
/// use spindle_effect::prelude::*;
/// use spindle_effect::single::SingleThreaded;
///
/// let answer: IO<u64, std::io::Error> =
///     sleep(Duration::from_millis(1)).product_r(IO::delay(|| 42));
/// let in_a_block: IO<u64, std::io::Error> = IO::block(async {
///     sleep(Duration::from_millis(1)).value().await;
///     cede().value().await;
///     Ok(42)
/// });
/// let rt = SingleThreaded::new()?;
/// assert_eq!(rt.block_on(answer)?.ok(), Some(42));
/// assert_eq!(rt.block_on(in_a_block)?.ok(), Some(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "IO::sleep")]
#[inline]
#[track_caller]
pub fn sleep<E: Send + 'static>(duration: Duration) -> IO<(), E> {
    IO::from_node(Node::sleep(duration, here()))
}

/// Gives the executor the chance to run other fibers (and, on an event
/// loop, timers and I/O) before this fiber goes on ([`IO::cede`] as a free
/// function, generic in its error type alone: see [`sleep()`]).
#[doc(alias = "yield_now")]
#[inline]
#[track_caller]
pub fn cede<E: Send + 'static>() -> IO<(), E> {
    IO::from_node(Node::cede(here()))
}

/// A program that never completes: its fiber waits until canceled
/// ([`IO::never`] as a free function, generic in its value and error
/// types, which the program around it picks: see [`sleep()`]).
///
/// ```
/// use std::time::Duration;
/// use spindle_effect::prelude::*;
/// use spindle_effect::single::SingleThreaded;
///
/// // A program that waits for ever, under a deadline.
/// let waited: IO<Option<String>, std::io::Error> = never().timeout_option(Duration::from_millis(1));
/// assert_eq!(SingleThreaded::new()?.block_on(waited)?.ok(), Some(None));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[inline]
#[track_caller]
pub fn never<A: Send + 'static, E: Send + 'static>() -> IO<A, E> {
    IO::from_node(Node::never(here()))
}

impl<E: Send + 'static> IO<Duration, E> {
    /// Reads the executor's monotonic clock (time since a fixed origin).
    #[inline]
    pub fn monotonic() -> Self {
        IO::from_node(Node::monotonic())
    }

    /// Reads the executor's wall clock (time since the Unix epoch).
    #[inline]
    pub fn real_time() -> Self {
        IO::from_node(Node::real_time())
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<IO<A, E>, E> {
    /// Runs the program this program produces.
    #[inline]
    #[track_caller]
    pub fn flatten(self) -> IO<A, E> {
        self.flat_map_at::<Named<names::Flatten>, _, _>(here(), |io| io)
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<Result<A, E>, E> {
    /// Turns an `Err` value into a failure (the inverse of
    /// [`attempt`](IO::attempt)).
    #[inline]
    #[track_caller]
    pub fn rethrow(self) -> IO<A, E> {
        self.flat_map_at::<Named<names::Rethrow>, _, _>(here(), IO::from_result)
    }
}

impl<E: Send + 'static> IO<crate::engine::tracing::Trace, E> {
    /// Reads the running fiber's trace: its last events (up to the
    /// configured capacity), in the order they happened
    /// ([`Trace::events`](crate::Trace::events); its renderings show them
    /// most recent first). Empty when the fiber has not traced (mode `none`
    /// outside `traced()`, or io-core's `tracing` feature off). Reading the
    /// trace is not itself an event.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Trace, wstp::Runtime};
    ///
    /// let program: IO<Trace, ()> = IO::delay(|| 1).flat_map(|_| IO::trace());
    /// let trace = Runtime::new()?.block_on(program)?.succeeded().unwrap();
    /// // A bind is recorded when it is evaluated, before its source.
    /// if cfg!(feature = "tracing") {
    ///     assert_eq!(trace.op_names(), ["flat_map", "delay"]);
    ///     // Rendered most recent first.
    ///     let line = trace.compact().to_string();
    ///     assert!(line.starts_with("delay@"), "{line}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn trace() -> Self {
        #[cfg(feature = "tracing")]
        {
            IO::from_node(Node::mark(
                Node::pure(crate::engine::erased::Value::unit()),
                crate::engine::tracing::MarkK::snapshot(),
                NO_SITE,
            ))
        }
        #[cfg(not(feature = "tracing"))]
        {
            IO::pure(crate::engine::tracing::Trace::empty())
        }
    }
}
